/*
 * executor/graph.h — the executor's full graph: the forward graph of a symbol plus, when
 * gradients are wanted, the backward nodes the gradient pass appends. Every array the
 * graph reads or writes is an entry with a shape; nodes list the entries they read and
 * write in the order their kernels expect. Internal to the executor.
 *
 * The input is the symbol layer's indexed graph (struct mxc__graph, symbol/symbol_impl.h):
 * nodes in topological order, variables included, inputs as (node, output) pairs.
 */
#ifndef MXC_EXECUTOR_GRAPH_H
#define MXC_EXECUTOR_GRAPH_H

#include "operator/op.h"
#include "symbol/symbol_impl.h"

#include <stdbool.h>

/* ---- The full graph ------------------------------------------------------------------ */

enum mxc__xkind {
    MXC__X_VAR,      /* an argument, auxiliary state or head gradient given by the caller */
    MXC__X_FORWARD,  /* an operator's forward */
    MXC__X_BACKWARD, /* an operator's backward */
    MXC__X_SUM,      /* gradients that meet, summed (ElementWiseSum) */
    MXC__X_ZEROS,    /* a zero gradient for an output nothing differentiates */
};

struct mxc__xentry {
    mxc_shape shape;
    int dtype;
    int node; /* the node that writes it */
};

/* A node's kernel arguments, as entry ids (-1: not passed, the kernel sees no data).
 * FORWARD:  in = in_data (num_in), out = out_data (all outputs, hidden included).
 * BACKWARD: in = out_grad (visible outputs) | in_data | out_data, as counted by
 *           num_out_grad / num_in_data / num_out_data, -1 where the operator did not
 *           declare it needs them; out = in_grad (one per forward input, -1: not needed).
 * SUM:      in = the gradients, out = their sum. ZEROS: out = the zeros.
 * Both operator kinds also get the forward node's auxiliary states (mutable). */
struct mxc__xnode {
    int kind;
    const struct mxc__op_def *op; /* FORWARD, BACKWARD, SUM */
    const void *params;
    const char *name; /* the forward node's name (backward nodes too) */
    int fwd;          /* BACKWARD: index of its forward node */
    int *in, num_in;
    int *out, num_out;
    int *req; /* per out: an mxc__req */
    int *aux, num_aux;
    int num_out_grad, num_in_data, num_out_data; /* BACKWARD: the parts of `in` */
    int inplace_in, inplace_out;                 /* indices into in / out; -1: none */
};

struct mxc__xgraph {
    struct mxc__xnode *nodes;   /* forward order, then backward order */
    int num_nodes, num_forward; /* nodes [0, num_forward) run in forward() */
    struct mxc__xentry *entries;
    int num_entries;
    int *arg_entry, *aux_entry; /* per argument / aux state */
    int *grad_entry;            /* per argument: its gradient's entry, or -1 */
    int *head_entry;            /* per head */
    int *head_grad_entry;       /* per head: the caller's head gradient, or -1 (a loss) */
    int num_args, num_aux, num_heads;
};

/* Builds the full graph of `fg` with the argument shapes and dtypes `arg_shapes` /
 * `arg_types` and aux shapes (all known, as inferred by the symbol layer), and, if any
 * `grad_req[i]` (an mxc__req per argument: NULL, WRITE or ADD) is not NULL, runs the
 * gradient pass. Returns MXC_OK, MXC_ESHAPE (a shape left unknown or inconsistent, naming
 * the node), MXC_EINVAL (a gradient through an operator without a backward, naming it),
 * MXC_ENOMEM. */
int mxc__xgraph_build(const struct mxc__graph *fg, const mxc_shape *arg_shapes,
                      const int *arg_types, const mxc_shape *aux_shapes, const int *grad_req,
                      struct mxc__xgraph *out);

void mxc__xgraph_free(struct mxc__xgraph *g);

/* ---- Running a node ------------------------------------------------------------------ */

/* Runs node `n`'s kernel on the device of `rctx`, inside the engine operation that
 * declared its arrays: ZEROS fills out[0] (unless it adds), FORWARD and SUM run the
 * operator's forward, BACKWARD its backward, with the tensors of n->in, n->out and n->aux
 * (`in` for BACKWARD: out_grad | in_data | out_data as n->num_* count them; a tensor
 * without data where the node passes none) and n->req. Shared by the executor and the
 * imperative autograd (ndarray/autograd.c), so both run a gradient the same way. Returns
 * the kernel's status, wrapped with the node's name. */
int mxc__xnode_run(const struct mxc__xnode *n, const mxc_run_ctx *rctx, bool is_train,
                   const struct mxc__tensor *in, const struct mxc__tensor *out,
                   const struct mxc__tensor *aux, struct mxc__resource *const *res, int num_res);

#endif /* MXC_EXECUTOR_GRAPH_H */

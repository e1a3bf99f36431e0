/*
 * symbol/symbol_impl.h — the symbol layer's internals: the reference-counted node graph
 * behind an mxc_symbol handle, and the indexed graph (struct mxc__graph) that shape/type
 * inference, JSON saving, DOT export and the executor work on.
 *
 * Two views of one graph:
 *
 *  1. The node graph (struct mxc__sym_node). Nodes are immutable after creation except
 *     for their attribute dictionary; they are reference counted and shared between
 *     symbols (a symbol holds references to the nodes of its outputs, a node to the nodes
 *     of its inputs). A variable has op == NULL; an operator node has its op definition,
 *     its parsed params and its inputs: the operator's arguments first, then its
 *     auxiliary states (BatchNorm: data, gamma, beta, moving_mean, moving_var), as NNVM
 *     stores them. Every entry is (node, output index).
 *
 *  2. The indexed graph (struct mxc__graph), built from a symbol by mxc__graph_build: the
 *     nodes reachable from the symbol's outputs, in MXNet's depth-first post-order (the
 *     order of list_arguments and of the JSON "nodes" array), numbered 0..num_nodes-1, every
 *     input before its consumers. Each node output is an "entry" with id
 *     entry_ptr[node] + index (JSON's node_row_ptr). The executor binds on this:
 *       - nodes[i].op / params: what to run (params points into the node, aligned, valid
 *         as long as the graph lives);
 *       - nodes[i].inputs: num_args argument entries then num_inputs - num_args aux
 *         entries (aux entries are always outputs of variable nodes);
 *       - arg_nodes / aux_nodes: the variable node ids in list_arguments /
 *         list_auxiliary_states order;
 *       - heads: the symbol's outputs, in list_outputs order.
 *     The graph holds a reference on every node, so it stays valid after the symbol it
 *     came from is freed. It is read-only and may be shared between threads.
 */
#ifndef MXC_SYMBOL_SYMBOL_IMPL_H
#define MXC_SYMBOL_SYMBOL_IMPL_H

#include "mxc/symbol.h"

#include "common/common.h"
#include "common/json.h"
#include "operator/op.h"

#include <stdatomic.h>
#include <stdbool.h>

#define MXC__SYMBOL_MAGIC 0x53594d42u /* "SYMB" */
#define MXC__SYMBOL_DEAD  0x53594d46u /* "SYMF": freed (common/handle.h) */

struct mxc__sym_node;

/* One output of one node. `version` is NNVM's variable version, kept only to write it
 * back to JSON (1 for auxiliary-state inputs, else 0). */
struct mxc__sym_entry {
    struct mxc__sym_node *node;
    int index;
    int version;
};

/* A string dictionary in insertion order. For an operator node it holds the parameters
 * exactly as the user (or the JSON file) gave them plus any "__x__" attributes; for a
 * variable its hints (__shape__, __dtype__, __init__, __lr_mult__, __wd_mult__) and any
 * other attribute. */
struct mxc__attrs {
    int num, cap;
    char **keys;
    char **vals;
};

struct mxc__sym_node {
    atomic_int refs;
    char *name;
    const struct mxc__op_def *op; /* NULL: a variable */
    void *params;                 /* op->param_size bytes, 16-aligned, or NULL */
    struct mxc__attrs attrs;
    int num_inputs; /* arguments then auxiliary states */
    int num_args;
    struct mxc__sym_entry *inputs;
    int num_outputs; /* all outputs (1 for a variable) */
    int num_visible; /* the outputs users see */
};

/* Caches of strings handed out by the listing functions (valid until the next call of
 * the same kind on the symbol, or its free). */
struct mxc__str_list {
    int num;
    char **items; /* owned strings (or NULL entries for borrowed ones) */
    const char **view;
};

struct mxc_symbol {
    _Atomic uint32_t magic;
    int num_outputs;
    struct mxc__sym_entry *outputs;
    struct mxc__str_list args, outs, aux, attrs, unknown;
    char *text; /* the last JSON or DOT text */
};

/* ---- Nodes ------------------------------------------------------------------------- */

/* A new node with one reference; name copied. op NULL makes a variable. The node takes
 * `params` (allocated with mxc__aligned_alloc) and `inputs` (mxc__malloc'ed, whose node
 * references it also takes); on failure frees neither (the caller does). */
int mxc__sym_node_new(const char *name, const struct mxc__op_def *op, struct mxc__sym_node **out);
void mxc__sym_node_retain(struct mxc__sym_node *n);
void mxc__sym_node_release(struct mxc__sym_node *n);

/* Sets (adds or replaces) attribute `key` of `a`. MXC_ENOMEM on failure. */
int mxc__attrs_set(struct mxc__attrs *a, const char *key, const char *val);
/* The value of `key`, or NULL. */
const char *mxc__attrs_get(const struct mxc__attrs *a, const char *key);
void mxc__attrs_clear(struct mxc__attrs *a);

/* A new symbol handle over `n` entries (each node retained). */
int mxc__symbol_new(int n, const struct mxc__sym_entry *entries, mxc_symbol **out);

/* Checks a symbol handle (NULL, stale, not a symbol); records MXC_EMISUSE naming public
 * function `fn` and argument `what`. */
int mxc__symbol_check(const mxc_symbol *sym, const char *fn, const char *what);

/* Parses the node's string attributes into freshly allocated params, fills num_args,
 * num_outputs, num_visible. Errors name the node. */
int mxc__sym_node_parse(struct mxc__sym_node *n);

/* Output name as MXNet's list_outputs spells it: the variable's name, or
 * "<node>_<outname>". Returns a new string (mxc__free) or NULL. */
char *mxc__sym_entry_name(const struct mxc__sym_entry *e);

/* ---- Indexed graph ----------------------------------------------------------------- */

struct mxc__graph_entry {
    int node;  /* node id */
    int index; /* output index */
};

struct mxc__graph_node {
    const struct mxc__op_def *op; /* NULL: variable */
    const char *name;
    const void *params; /* parsed params (op->param_size bytes) or NULL */
    int num_inputs;     /* arguments then auxiliary states */
    int num_args;
    struct mxc__graph_entry *inputs;
    int num_outputs, num_visible;
    bool is_aux;               /* variables: used as an auxiliary state */
    struct mxc__sym_node *src; /* the node (attributes, JSON versions) */
};

struct mxc__graph {
    int num_nodes;
    struct mxc__graph_node *nodes; /* topological (depth-first post-) order */
    int *entry_ptr;                /* num_nodes + 1: entry id of node i output k */
    int num_entries;               /* entry_ptr[num_nodes] */
    int num_args, num_aux, num_heads;
    int *arg_nodes; /* list_arguments order */
    int *aux_nodes; /* list_auxiliary_states order */
    struct mxc__graph_entry *heads;
};

/* Builds the indexed graph of `sym` (iterative, no recursion). MXC_ENOMEM, MXC_EINVAL
 * (a variable used both as an argument and an auxiliary state). Free with
 * mxc__graph_free (accepts NULL). */
int mxc__graph_build(const mxc_symbol *sym, struct mxc__graph **out);
void mxc__graph_free(struct mxc__graph *g);

/* Entry id of (node, index). */
static inline int mxc__graph_eid(const struct mxc__graph *g, struct mxc__graph_entry e) {
    return g->entry_ptr[e.node] + e.index;
}

/* Shape inference over the whole graph. `shapes` has num_entries items: known shapes
 * in (ndim 0 = unknown), every deducible shape out. Variables' __shape__ hints are used
 * where the entry is unknown. Runs every operator's infer_shape in topological order until
 * nothing changes. On a conflict: MXC_ESHAPE (or the operator's code) with
 * "node '<name>' (<Op>): <operator's message>". `*num_unknown` (may be NULL) receives how
 * many entries stay unknown. */
int mxc__graph_infer_shape(const struct mxc__graph *g, mxc_shape *shapes, int *num_unknown);

/* Same for dtypes (-1 = unknown); __dtype__ hints are used. MXC_ETYPE on conflict. */
int mxc__graph_infer_type(const struct mxc__graph *g, int *dtypes, int *num_unknown);

/* ---- Helpers shared by the symbol sources ----------------------------------------- */

/* Replaces the symbol's cached text with the buffer's contents (taking them). */
int mxc__symbol_take_text(mxc_symbol *sym, struct mxc__buf *b, const char **out);

/* mxc_symbol_save for a caller whose messages name public function `fn` (a checkpoint's
 * symbol file): the JSON written to a temporary file, synced and renamed into place, and
 * the folder synced (mxc__file_replace). */
int mxc__symbol_save_file(mxc_symbol *sym, const char *path, const char *fn);

#endif /* MXC_SYMBOL_SYMBOL_IMPL_H */

/*
 * executor/graph.c — builds the executor's full graph (graph.h): one entry per output of
 * every forward node with its inferred shape, then the gradient pass. The pass walks the
 * forward nodes backwards; each node on a path from an argument that wants a gradient to
 * a head gets a backward node whose inputs are exactly what its operator declared
 * (out_grad / in_data / out_data); gradients that meet are summed by ElementWiseSum;
 * loss operators (no out_grad dependency) start the chain, other heads take the caller's
 * head gradients.
 */
#include "executor/graph.h"

#include "common/common.h"
#include "operator/gpu.h"

#include <stdio.h>
#include <string.h>

/* Growable arrays of the graph under construction, and per forward entry the gradient
 * contributions met so far. */
struct builder {
    const struct mxc__graph *fg;
    struct mxc__xgraph *g;
    int cap_nodes, cap_entries;
    int *first_entry; /* per forward node: entry id of its output 0 */
    int *num_outputs; /* per forward node */
    bool *needs;      /* per entry: depends on an argument that wants a gradient */
    int **contrib;    /* per entry: gradient entries to sum */
    int *num_contrib;
    mxc_shape *seen; /* per fg entry: its shape by whole-graph inference, or NULL */
};

/* `shape` is taken by value: callers often pass an entry's shape, and the entry array
 * may move here. */
static int add_entry(struct builder *b, mxc_shape shape, int dtype, int node) {
    struct mxc__xgraph *g = b->g;
    if (g->num_entries == b->cap_entries) {
        int cap = b->cap_entries ? 2 * b->cap_entries : 64;
        struct mxc__xentry *e = mxc__realloc(g->entries, sizeof *e * (size_t)cap);
        if (e == NULL)
            return -1;
        g->entries = e;
        bool *nd = mxc__realloc(b->needs, sizeof(bool) * (size_t)cap);
        if (nd == NULL)
            return -1;
        b->needs = nd;
        int **c = mxc__realloc(b->contrib, sizeof(int *) * (size_t)cap);
        if (c == NULL)
            return -1;
        b->contrib = c;
        int *nc = mxc__realloc(b->num_contrib, sizeof(int) * (size_t)cap);
        if (nc == NULL)
            return -1;
        b->num_contrib = nc;
        b->cap_entries = cap;
    }
    int id = g->num_entries++;
    g->entries[id] = (struct mxc__xentry){shape, dtype, node};
    b->needs[id] = false;
    b->contrib[id] = NULL;
    b->num_contrib[id] = 0;
    return id;
}

/* A new node with room for its argument lists; NULL when out of memory. */
static struct mxc__xnode *add_node(struct builder *b, int kind, int num_in, int num_out,
                                   int num_aux) {
    struct mxc__xgraph *g = b->g;
    if (g->num_nodes == b->cap_nodes) {
        int cap = b->cap_nodes ? 2 * b->cap_nodes : 32;
        struct mxc__xnode *n = mxc__realloc(g->nodes, sizeof *n * (size_t)cap);
        if (n == NULL)
            return NULL;
        g->nodes = n;
        b->cap_nodes = cap;
    }
    struct mxc__xnode *n = &g->nodes[g->num_nodes];
    *n = (struct mxc__xnode){.kind = kind, .fwd = -1, .inplace_in = -1, .inplace_out = -1};
    /* one allocation for in, out, req and aux */
    int *ints = mxc__malloc(sizeof(int) * (size_t)(num_in + 2 * num_out + num_aux + 1));
    if (ints == NULL)
        return NULL;
    n->in = ints;
    n->num_in = num_in;
    n->out = ints + num_in;
    n->num_out = num_out;
    n->req = n->out + num_out;
    n->aux = n->req + num_out;
    n->num_aux = num_aux;
    for (int i = 0; i < num_in; i++)
        n->in[i] = -1;
    for (int i = 0; i < num_out; i++) {
        n->out[i] = -1;
        n->req[i] = MXC__REQ_NULL;
    }
    g->num_nodes++;
    return n;
}

static int add_contrib(struct builder *b, int entry, int grad) {
    int *c = mxc__realloc(b->contrib[entry], sizeof(int) * (size_t)(b->num_contrib[entry] + 1));
    if (c == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory");
    c[b->num_contrib[entry]++] = grad;
    b->contrib[entry] = c;
    return MXC_OK;
}

static int fentry_id(const struct builder *b, struct mxc__graph_entry fe) {
    return b->first_entry[fe.node] + fe.index;
}

/* ---- Forward ------------------------------------------------------------------------ */

/* Shapes and dtypes of node k's outputs from its (known) inputs. */
static int infer_node(struct builder *b, int k, mxc_shape *out_s, int *out_t, int n_out) {
    const struct mxc__graph_node *fn = &b->fg->nodes[k];
    const struct mxc__op_def *op = fn->op;
    int n_in = mxc__op_num_inputs(op, fn->params, NULL), n_aux = mxc__op_num_aux(op);
    if (fn->num_inputs != n_in + n_aux)
        return mxc__error(MXC_EINVAL, "node %s (%s): %d inputs given, the operator takes %d",
                          fn->name, op->name, fn->num_inputs, n_in + n_aux);
    mxc_shape in_s[MXC__MAX_OP_ARGS], aux_s[MXC__MAX_OP_ARGS];
    int in_t[MXC__MAX_OP_ARGS], aux_t[MXC__MAX_OP_ARGS];
    for (int i = 0; i < fn->num_inputs; i++) {
        const struct mxc__xentry *e = &b->g->entries[fentry_id(b, fn->inputs[i])];
        if (i < n_in) {
            in_s[i] = e->shape;
            in_t[i] = e->dtype;
        } else {
            aux_s[i - n_in] = e->shape;
            aux_t[i - n_in] = e->dtype;
        }
    }
    for (int o = 0; o < n_out; o++) {
        out_s[o] = b->seen ? b->seen[b->fg->entry_ptr[k] + o] : (mxc_shape){0};
        out_t[o] = -1;
    }
    int rc = op->infer_shape(fn->params, in_s, n_in, out_s, n_out, aux_s, n_aux);
    if (rc != MXC_OK)
        return mxc__error_wrap(rc, "node %s", fn->name);
    if (op->infer_type) {
        rc = op->infer_type(fn->params, in_t, n_in, out_t, n_out, aux_t, n_aux);
        if (rc != MXC_OK)
            return mxc__error_wrap(rc, "node %s", fn->name);
    } else {
        for (int o = 0; o < n_out; o++)
            out_t[o] = in_t[0];
    }
    for (int o = 0; o < n_out; o++)
        if (out_s[o].ndim == 0)
            return mxc__error(MXC_ESHAPE, "node %s (%s): the shape of output %d is unknown",
                              fn->name, op->name, o);
    return MXC_OK;
}

/* Every entry's shape by whole-graph inference from the bound shapes, for a graph with an
 * operator without inputs: such an output may be determined only by its consumers (a
 * `_zeros` of shape (2, 0) feeding an RNN's state), which the node-by-node pass of
 * build_forward cannot see; that pass starts each node's outputs from these. NULL for
 * other graphs (autograd's tape has no entry table: every shape there was recorded) and
 * when inference fails (or memory runs out): the pass then reports any error itself. */
static mxc_shape *whole_graph_shapes(const struct mxc__graph *fg, const mxc_shape *arg_shapes,
                                     const mxc_shape *aux_shapes) {
    bool needed = false;
    for (int k = 0; k < fg->num_nodes && !needed; k++)
        needed = fg->nodes[k].op != NULL && fg->nodes[k].num_inputs == 0;
    if (!needed || fg->entry_ptr == NULL)
        return NULL;
    mxc_shape *s = mxc__calloc((size_t)fg->num_entries + 1, sizeof *s);
    if (s == NULL)
        return NULL;
    for (int i = 0; i < fg->num_args; i++)
        s[fg->entry_ptr[fg->arg_nodes[i]]] = arg_shapes[i];
    for (int i = 0; i < fg->num_aux; i++)
        s[fg->entry_ptr[fg->aux_nodes[i]]] = aux_shapes[i];
    if (mxc__graph_infer_shape(fg, s, NULL) == MXC_OK)
        return s;
    mxc__free(s);
    return NULL;
}

static int build_forward(struct builder *b, const mxc_shape *arg_shapes, const int *arg_types,
                         const mxc_shape *aux_shapes, const int *grad_req) {
    const struct mxc__graph *fg = b->fg;
    struct mxc__xgraph *g = b->g;
    int *var_index = mxc__malloc(sizeof(int) * (size_t)(fg->num_nodes + 1));
    if (var_index == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory");
    for (int k = 0; k < fg->num_nodes; k++)
        var_index[k] = -1;
    for (int i = 0; i < fg->num_args; i++)
        var_index[fg->arg_nodes[i]] = i;
    for (int i = 0; i < fg->num_aux; i++)
        var_index[fg->aux_nodes[i]] = fg->num_args + i;
    int rc = MXC_OK;
    for (int k = 0; k < fg->num_nodes; k++) {
        const struct mxc__graph_node *fn = &fg->nodes[k];
        b->first_entry[k] = g->num_entries;
        if (fn->op == NULL) {
            int v = var_index[k];
            MXC_CHECK(v >= 0, MXC_EINVAL,
                      "variable %s is neither an argument nor an "
                      "auxiliary state",
                      fn->name);
            bool is_arg = v < fg->num_args;
            const mxc_shape *s = is_arg ? &arg_shapes[v] : &aux_shapes[v - fg->num_args];
            int id = add_entry(b, *s, is_arg ? arg_types[v] : arg_types[0], -1);
            MXC_CHECK(id >= 0, MXC_ENOMEM, "out of memory");
            b->num_outputs[k] = 1;
            if (is_arg) {
                g->arg_entry[v] = id;
                b->needs[id] = grad_req && grad_req[v] != MXC__REQ_NULL;
            } else {
                g->aux_entry[v - fg->num_args] = id;
            }
            continue;
        }
        for (int i = 0; i < fn->num_inputs; i++)
            MXC_CHECK(fn->inputs[i].node >= 0 && fn->inputs[i].node < k &&
                          fn->inputs[i].index < b->num_outputs[fn->inputs[i].node],
                      MXC_EINVAL, "node %s: input %d is not an earlier node's output", fn->name, i);
        int n_out = mxc__op_num_outputs(fn->op, fn->params, NULL);
        int n_in = mxc__op_num_inputs(fn->op, fn->params, NULL);
        int n_aux = mxc__op_num_aux(fn->op);
        mxc_shape out_s[MXC__MAX_OP_ARGS];
        int out_t[MXC__MAX_OP_ARGS];
        MXC_TRY(infer_node(b, k, out_s, out_t, n_out));
        struct mxc__xnode *xn = add_node(b, MXC__X_FORWARD, n_in, n_out, n_aux);
        MXC_CHECK(xn != NULL, MXC_ENOMEM, "out of memory");
        xn->op = fn->op;
        xn->params = fn->params;
        xn->name = fn->name;
        mxc__inplace_get(fn->op->inplace, &xn->inplace_in, &xn->inplace_out);
        bool needs = false;
        for (int i = 0; i < n_in; i++) {
            xn->in[i] = fentry_id(b, fn->inputs[i]);
            needs |= b->needs[xn->in[i]];
        }
        for (int i = 0; i < n_aux; i++)
            xn->aux[i] = fentry_id(b, fn->inputs[n_in + i]);
        for (int o = 0; o < n_out; o++) {
            int id = add_entry(b, out_s[o], out_t[o], g->num_nodes - 1);
            MXC_CHECK(id >= 0, MXC_ENOMEM, "out of memory");
            g->nodes[g->num_nodes - 1].out[o] = id;
            g->nodes[g->num_nodes - 1].req[o] = MXC__REQ_WRITE;
            b->needs[id] = needs;
        }
        b->num_outputs[k] = n_out;
    }
    g->num_forward = g->num_nodes;
fail:
    mxc__free(var_index);
    return rc;
}

/* ---- Backward ----------------------------------------------------------------------- */

/* Gives the node just added its one output: `into` (written as `req`) when >= 0, else a
 * new entry shaped like `like` (written). Its id through `out`. */
static int set_single_output(struct builder *b, int like, int into, int req, int *out) {
    int node = b->g->num_nodes - 1;
    const struct mxc__xentry *e = &b->g->entries[like];
    int id = into >= 0 ? into : add_entry(b, e->shape, e->dtype, node);
    if (id < 0)
        return mxc__error(MXC_ENOMEM, "out of memory");
    b->g->entries[id].node = node;
    b->g->nodes[node].out[0] = id;
    b->g->nodes[node].req[0] = into >= 0 ? req : MXC__REQ_WRITE;
    *out = id;
    return MXC_OK;
}

/* A SUM node of the n (<= MXC__MAX_OP_ARGS) entries `ins` writing `into` (or a new entry
 * shaped like `like`), its id through `out`. */
static int sum_node(struct builder *b, const int *ins, int n, int like, int into, int req,
                    int *out) {
    const struct mxc__op_def *sum = mxc__op_find("ElementWiseSum");
    if (sum == NULL)
        return mxc__error(MXC_ENOTSUP, "summing gradients needs ElementWiseSum");
    void *params = mxc__malloc(sum->param_size ? sum->param_size : 1);
    if (params == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory");
    char num[16];
    snprintf(num, sizeof num, "%d", n);
    const char *keys[] = {"num_args"}, *vals[] = {num};
    int rc = mxc__op_parse_params(sum, 1, keys, vals, params);
    struct mxc__xnode *xn = rc == MXC_OK ? add_node(b, MXC__X_SUM, n, 1, 0) : NULL;
    if (xn == NULL) {
        mxc__free(params);
        return rc != MXC_OK ? rc : mxc__error(MXC_ENOMEM, "out of memory");
    }
    xn->op = sum;
    xn->params = params;
    xn->name = "_grad_sum";
    memcpy(xn->in, ins, sizeof(int) * (size_t)n);
    mxc__inplace_get(sum->inplace, &xn->inplace_in, &xn->inplace_out);
    return set_single_output(b, like, into, req, out);
}

/* Sums the contributions of `entry` into a new entry (or `into` if >= 0, with `req`);
 * one contribution is returned as is. -1 if there are none. More contributions than one
 * ElementWiseSum takes (an entry read by many nodes) are summed in parts first. */
static int gradient_of(struct builder *b, int entry, int into, int req, int *out) {
    int *c = b->contrib[entry], n = b->num_contrib[entry];
    *out = -1;
    if (n == 0)
        return MXC_OK;
    if (n == 1 && into < 0) {
        *out = c[0];
        return MXC_OK;
    }
    while (n > MXC__MAX_OP_ARGS) {
        int part = -1,
            rc = sum_node(b, c + n - MXC__MAX_OP_ARGS, MXC__MAX_OP_ARGS, entry, -1, 0, &part);
        if (rc != MXC_OK)
            return rc;
        n -= MXC__MAX_OP_ARGS - 1;
        c[n - 1] = part;
        b->num_contrib[entry] = n;
    }
    return sum_node(b, c, n, entry, into, req, out);
}

/* A ZEROS node writing `into` (or a new entry shaped like `like`). */
static int zeros_like(struct builder *b, int like, int into, int req, int *out) {
    struct mxc__xnode *xn = add_node(b, MXC__X_ZEROS, 0, 1, 0);
    if (xn == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory");
    xn->name = "zeros";
    return set_single_output(b, like, into, req, out);
}

/* The backward node of forward node k (an index into g->nodes), if gradients flow. */
static int backward_of(struct builder *b, int k) {
    struct mxc__xgraph *g = b->g;
    const struct mxc__xnode fwd = g->nodes[k]; /* a copy: the node array may move */
    const struct mxc__op_def *op = fwd.op;
    bool wanted = false;
    for (int i = 0; i < fwd.num_in; i++)
        wanted |= b->needs[fwd.in[i]];
    if (!wanted)
        return MXC_OK;
    if (op->backward_deps == 0 || op->backward_cpu == NULL)
        return mxc__error(MXC_EINVAL,
                          "node %s: a gradient is needed through operator %s, "
                          "which has no backward",
                          fwd.name, op->name);
    bool use_og = op->backward_deps & MXC__DEP_OUT_GRAD;
    int n_vis = mxc__op_num_visible_outputs(op, fwd.params);
    int og[MXC__MAX_OP_ARGS];
    bool any = false;
    for (int j = 0; j < n_vis; j++) {
        int rc = gradient_of(b, fwd.out[j], -1, 0, &og[j]);
        if (rc != MXC_OK)
            return rc;
        any |= og[j] >= 0;
    }
    if (use_og && !any)
        return MXC_OK; /* nothing downstream is differentiated */
    for (int j = 0; use_og && j < n_vis; j++)
        if (og[j] < 0) {
            int rc = zeros_like(b, fwd.out[j], -1, 0, &og[j]);
            if (rc != MXC_OK)
                return rc;
        }
    bool use_in = op->backward_deps & MXC__DEP_IN_DATA;
    bool use_out = op->backward_deps & MXC__DEP_OUT_DATA;
    struct mxc__xnode *xn =
        add_node(b, MXC__X_BACKWARD, n_vis + fwd.num_in + fwd.num_out, fwd.num_in, fwd.num_aux);
    if (xn == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory");
    int id = g->num_nodes - 1;
    xn->op = op;
    xn->params = fwd.params;
    xn->name = fwd.name;
    xn->fwd = k;
    xn->num_out_grad = n_vis;
    xn->num_in_data = fwd.num_in;
    xn->num_out_data = fwd.num_out;
    for (int j = 0; j < n_vis; j++)
        xn->in[j] = use_og ? og[j] : -1;
    for (int i = 0; i < fwd.num_in; i++)
        xn->in[n_vis + i] = use_in ? fwd.in[i] : -1;
    for (int o = 0; o < fwd.num_out; o++)
        xn->in[n_vis + fwd.num_in + o] = use_out ? fwd.out[o] : -1;
    memcpy(xn->aux, fwd.aux, sizeof(int) * (size_t)fwd.num_aux);
    int bi, bo; /* in_grad[bi] may share out_grad[bo] */
    if (use_og && mxc__inplace_get(op->backward_inplace, &bi, &bo) && bo < n_vis &&
        bi < fwd.num_in) {
        xn->inplace_in = bo;
        xn->inplace_out = bi;
    }
    for (int i = 0; i < fwd.num_in; i++) {
        if (!b->needs[fwd.in[i]])
            continue;
        const struct mxc__xentry *e = &g->entries[fwd.in[i]];
        int gid = add_entry(b, e->shape, e->dtype, id);
        if (gid < 0)
            return mxc__error(MXC_ENOMEM, "out of memory");
        g->nodes[id].out[i] = gid;
        g->nodes[id].req[i] = MXC__REQ_WRITE;
        int rc = add_contrib(b, fwd.in[i], gid);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

static int build_backward(struct builder *b, const int *grad_req) {
    struct mxc__xgraph *g = b->g;
    const struct mxc__graph *fg = b->fg;
    for (int h = 0; h < fg->num_heads; h++) {
        int e = g->head_entry[h];
        int node = g->entries[e].node;
        g->head_grad_entry[h] = -1;
        if (node < 0 || !(g->nodes[node].op->backward_deps & MXC__DEP_OUT_GRAD))
            continue; /* a loss starts its own chain; a variable head needs nothing */
        int id = add_entry(b, g->entries[e].shape, g->entries[e].dtype, -1);
        if (id < 0)
            return mxc__error(MXC_ENOMEM, "out of memory");
        g->head_grad_entry[h] = id;
        int rc = add_contrib(b, e, id);
        if (rc != MXC_OK)
            return rc;
    }
    for (int k = g->num_forward - 1; k >= 0; k--) {
        int rc = backward_of(b, k);
        if (rc != MXC_OK)
            return rc;
    }
    for (int i = 0; i < fg->num_args; i++) {
        g->grad_entry[i] = -1;
        if (grad_req[i] == MXC__REQ_NULL)
            continue;
        int e = g->arg_entry[i], n = b->num_contrib[e], rc;
        if (n == 1 && g->entries[b->contrib[e][0]].node >= 0) {
            /* the backward node writes the caller's gradient directly */
            int gid = b->contrib[e][0];
            struct mxc__xnode *w = &g->nodes[g->entries[gid].node];
            for (int o = 0; o < w->num_out; o++)
                if (w->out[o] == gid)
                    w->req[o] = grad_req[i];
            g->grad_entry[i] = gid;
            continue;
        }
        int id = add_entry(b, g->entries[e].shape, g->entries[e].dtype, -1);
        if (id < 0)
            return mxc__error(MXC_ENOMEM, "out of memory");
        rc = n == 0 ? zeros_like(b, e, id, grad_req[i], &g->grad_entry[i])
                    : gradient_of(b, e, id, grad_req[i], &g->grad_entry[i]);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

int mxc__xgraph_build(const struct mxc__graph *fg, const mxc_shape *arg_shapes,
                      const int *arg_types, const mxc_shape *aux_shapes, const int *grad_req,
                      struct mxc__xgraph *out) {
    int rc = MXC_OK;
    struct builder b = {.fg = fg, .g = out};
    memset(out, 0, sizeof *out);
    out->num_args = fg->num_args;
    out->num_aux = fg->num_aux;
    out->num_heads = fg->num_heads;
    size_t nn = (size_t)fg->num_nodes + 1;
    b.first_entry = mxc__malloc(sizeof(int) * nn);
    b.num_outputs = mxc__malloc(sizeof(int) * nn);
    out->arg_entry = mxc__malloc(sizeof(int) * ((size_t)fg->num_args + 1));
    out->grad_entry = mxc__malloc(sizeof(int) * ((size_t)fg->num_args + 1));
    out->aux_entry = mxc__malloc(sizeof(int) * ((size_t)fg->num_aux + 1));
    out->head_entry = mxc__malloc(sizeof(int) * ((size_t)fg->num_heads + 1));
    out->head_grad_entry = mxc__malloc(sizeof(int) * ((size_t)fg->num_heads + 1));
    MXC_CHECK(b.first_entry && b.num_outputs && out->arg_entry && out->grad_entry &&
                  out->aux_entry && out->head_entry && out->head_grad_entry,
              MXC_ENOMEM, "out of memory");
    b.seen = whole_graph_shapes(fg, arg_shapes, aux_shapes);
    MXC_TRY(build_forward(&b, arg_shapes, arg_types, aux_shapes, grad_req));
    for (int h = 0; h < fg->num_heads; h++) {
        struct mxc__graph_entry fe = fg->heads[h];
        MXC_CHECK(fe.node >= 0 && fe.node < fg->num_nodes && fe.index >= 0 &&
                      fe.index < b.num_outputs[fe.node],
                  MXC_EINVAL, "head %d is not a node's output", h);
        out->head_entry[h] = fentry_id(&b, fe);
    }
    for (int i = 0; i < fg->num_args; i++)
        out->grad_entry[i] = -1;
    for (int h = 0; h < fg->num_heads; h++)
        out->head_grad_entry[h] = -1;
    bool any = false;
    for (int i = 0; grad_req && i < fg->num_args; i++)
        any |= grad_req[i] != MXC__REQ_NULL;
    if (any)
        MXC_TRY(build_backward(&b, grad_req));
fail:
    mxc__free(b.seen);
    for (int e = 0; b.contrib && e < out->num_entries; e++)
        mxc__free(b.contrib[e]);
    mxc__free(b.contrib);
    mxc__free(b.num_contrib);
    mxc__free(b.needs);
    mxc__free(b.first_entry);
    mxc__free(b.num_outputs);
    if (rc != MXC_OK)
        mxc__xgraph_free(out);
    return rc;
}

void mxc__xgraph_free(struct mxc__xgraph *g) {
    for (int k = 0; g->nodes && k < g->num_nodes; k++) {
        mxc__free(g->nodes[k].in);
        if (g->nodes[k].kind == MXC__X_SUM)
            mxc__free((void *)g->nodes[k].params);
    }
    mxc__free(g->nodes);
    mxc__free(g->entries);
    mxc__free(g->arg_entry);
    mxc__free(g->aux_entry);
    mxc__free(g->grad_entry);
    mxc__free(g->head_entry);
    mxc__free(g->head_grad_entry);
    memset(g, 0, sizeof *g);
}

/* ---- Running a node ----------------------------------------------------------------- */

int mxc__xnode_run(const struct mxc__xnode *n, const mxc_run_ctx *rctx, bool is_train,
                   const struct mxc__tensor *in, const struct mxc__tensor *out,
                   const struct mxc__tensor *aux, struct mxc__resource *const *res, int num_res) {
    const bool gpu = rctx->ctx.dev_type == MXC_GPU;
    if (n->kind == MXC__X_ZEROS) {
        if (n->req[0] == MXC__REQ_ADD || out[0].data == NULL)
            return MXC_OK;
        size_t bytes = (size_t)out[0].size * mxc_dtype_size(out[0].dtype);
        if (gpu)
            return mxc__gpu_memset0(out[0].data, bytes, rctx->stream);
        memset(out[0].data, 0, bytes);
        return MXC_OK;
    }
    struct mxc__op_call call = {.rctx = rctx,
                                .is_train = is_train,
                                .params = n->op->param_size ? n->params : NULL,
                                .aux = aux,
                                .num_aux = n->num_aux,
                                .req = n->req,
                                .resources = res,
                                .num_resources = num_res};
    int rc;
    if (n->kind != MXC__X_BACKWARD) {
        call.in_data = in;
        call.num_in = n->num_in;
        call.out_data = out;
        call.num_out = n->num_out;
        rc = mxc__op_run(gpu ? n->op->forward_gpu : n->op->forward_cpu, &call);
    } else {
        unsigned deps = n->op->backward_deps;
        call.out_grad = deps & MXC__DEP_OUT_GRAD ? in : NULL;
        call.in_data = deps & MXC__DEP_IN_DATA ? in + n->num_out_grad : NULL;
        call.num_in = n->num_in_data;
        call.out_data = deps & MXC__DEP_OUT_DATA ? in + n->num_out_grad + n->num_in_data : NULL;
        call.num_out = n->num_out_data;
        call.in_grad = out;
        rc = mxc__op_run(gpu ? n->op->backward_gpu : n->op->backward_cpu, &call);
    }
    if (rc != MXC_OK) /* the engine's message names the operator already */
        return mxc__error_wrap(rc, "node %s%s", n->name,
                               n->kind == MXC__X_BACKWARD ? " (backward)" : "");
    return MXC_OK;
}

/*
 * ndarray/autograd.c — imperative autograd (mxc/autograd.h): the tape and backward.
 *
 * The tape is a graph of reference-counted nodes. An operator recorded by the invoke path
 * becomes a node holding its definition, a copy of its parameters, its producers (the
 * nodes of its inputs, each referenced) and its own handles on exactly the inputs and
 * outputs its backward declares it needs (op->backward_deps); each output array
 * references the node. A marked variable is a node without an operator holding its
 * gradient array. The saved handles are not the user's, carry no tape entry and count
 * on their chunk (ag_saved), which mxc__nd_push checks so that nothing overwrites them.
 *
 * Backward does not have its own gradient rule: it turns the nodes reachable from the
 * heads into the symbol layer's indexed graph (struct mxc__graph, in MXNet's depth-first
 * order, as a symbol of the same forward would be), runs the executor's gradient pass on
 * it (mxc__xgraph_build: backward nodes reading their declared dependencies, sums where
 * gradients meet, write / add requests) and pushes each backward node's kernel through
 * mxc__xnode_run, the executor's own runner, with the saved handles as the forward
 * arrays. So autograd depends on executor/graph.h, above this layer: it is the imperative
 * face of the executor's gradient pass.
 */
#include "mxc/autograd.h"

#include "executor/graph.h"
#include "ndarray/autograd_impl.h"
#include "symbol/symbol_impl.h"

#include <stdio.h>
#include <string.h>

static _Thread_local bool recording, training;

struct mxc__ag_node {
    atomic_int refs;
    const struct mxc__op_def *op; /* NULL: a marked variable */
    void *params;                 /* op->param_size bytes, 16-aligned, or NULL */
    int num_in, num_aux, num_out; /* arguments, auxiliary states, all outputs */
    struct mxc__ag_node **src;    /* per input (arguments then aux): its node, or NULL */
    int *src_index;               /* ... and which of its outputs */
    mxc_shape *in_shape;          /* per input */
    int *in_dtype;
    mxc_ndarray **saved; /* in_data (num_in) | out_data (num_out) | aux (num_aux): NULL
                            where backward does not need it */
    bool released;       /* an earlier backward without retain_graph dropped `saved` */
    mxc_ndarray *grad;   /* variables: where the gradient goes (the library's handle) */
    int req;             /* variables: an mxc_grad_req */
    /* scratch of one backward */
    unsigned stamp;
    int fg_node;
    struct mxc__ag_node *next; /* the release worklist */
};

bool mxc__ag_is_recording(void) { return recording; }
bool mxc__ag_is_training(void) { return training; }

int mxc_autograd_set_recording(int on, int *prev) {
    if (prev)
        *prev = recording;
    recording = on != 0;
    return MXC_OK;
}

int mxc_autograd_set_training(int on, int *prev) {
    if (prev)
        *prev = training;
    training = on != 0;
    return MXC_OK;
}

int mxc_autograd_is_recording(void) { return recording; }
int mxc_autograd_is_training(void) { return training; }

/* ---- Nodes -------------------------------------------------------------------------- */

/* Another handle on `a`'s memory that the tape keeps; it blocks writes to the chunk. */
static int save(const mxc_ndarray *a, mxc_ndarray **out) {
    int rc = mxc__nd_view(a, 0, &a->shape, a->dtype, out);
    if (rc == MXC_OK)
        atomic_fetch_add_explicit(&a->chunk->ag_saved, 1, memory_order_relaxed);
    return rc;
}

static void unsave(mxc_ndarray **a) {
    if (*a == NULL)
        return;
    atomic_fetch_sub_explicit(&(*a)->chunk->ag_saved, 1, memory_order_relaxed);
    mxc_nd_free(*a);
    *a = NULL;
}

/* Lets go of what backward would have read (auxiliary states are not counted as saved:
 * they are state that every forward updates). */
static void drop_saved(struct mxc__ag_node *n) {
    int forward = n->num_in + n->num_out;
    for (int i = 0; i < forward; i++)
        unsave(&n->saved[i]);
    for (int i = forward; i < forward + n->num_aux; i++) {
        mxc_nd_free(n->saved[i]);
        n->saved[i] = NULL;
    }
    n->released = true;
}

static void node_destroy(struct mxc__ag_node *n) {
    drop_saved(n);
    mxc_nd_free(n->grad);
    mxc__aligned_free(n->params);
    mxc__free(n->src);
    mxc__free(n);
}

/* Drops a reference; a node whose last one goes drops its producers' in turn (a worklist,
 * not recursion: a tape may be a long chain). */
static void node_unref(struct mxc__ag_node *n) {
    if (n == NULL || atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1)
        return;
    n->next = NULL;
    while (n) {
        struct mxc__ag_node *x = n;
        n = x->next;
        for (int i = 0; i < x->num_in + x->num_aux; i++) {
            struct mxc__ag_node *s = x->src[i];
            if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
                s->next = n;
                n = s;
            }
        }
        node_destroy(x);
    }
}

/* A node with room for `n_in` inputs and `n_out` outputs (one allocation for the lists). */
static struct mxc__ag_node *node_new(const struct mxc__op_def *op, int n_in, int n_aux, int n_out) {
    struct mxc__ag_node *n = mxc__calloc(1, sizeof *n);
    int ni = n_in + n_aux, ns = n_in + n_out + n_aux;
    size_t bytes = sizeof(mxc_shape) * (size_t)ni + sizeof(void *) * (size_t)(ni + ns) +
                   sizeof(int) * (size_t)(2 * ni) + 1;
    char *mem = n ? mxc__calloc(1, bytes) : NULL;
    if (mem == NULL) {
        mxc__free(n);
        return NULL;
    }
    atomic_init(&n->refs, 1);
    n->op = op;
    n->num_in = n_in;
    n->num_aux = n_aux;
    n->num_out = n_out;
    n->src = (struct mxc__ag_node **)mem;
    n->in_shape = (mxc_shape *)(n->src + ni);
    n->saved = (mxc_ndarray **)(n->in_shape + ni);
    n->src_index = (int *)(n->saved + ns);
    n->in_dtype = n->src_index + ni;
    return n;
}

/* Points `a` at output `index` of `n` (taking a reference), dropping what it had. */
static void attach(mxc_ndarray *a, struct mxc__ag_node *n, int index) {
    if (n)
        atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
    node_unref(a->ag);
    a->ag = n;
    a->ag_index = index;
}

void mxc__ag_forget(mxc_ndarray *a) { attach(a, NULL, 0); }

/* ---- Recording ---------------------------------------------------------------------- */

static bool shares_chunk(const mxc_ndarray *a, const mxc_ndarray *b) {
    return a->chunk == b->chunk;
}

int mxc__ag_check_write(const struct mxc__op_def *def, mxc_ndarray *const *inputs, int n_in,
                        mxc_ndarray *const *outputs, int n_out) {
    if (!recording)
        return MXC_OK;
    bool on_tape = false; /* else the operation is not recorded (mxc__ag_record) */
    for (int i = 0; i < n_in; i++)
        on_tape |= inputs[i]->ag != NULL;
    for (int o = 0; o < n_out; o++) {
        const mxc_ndarray *out = outputs[o];
        if (out == NULL)
            continue;
        if (out->ag && out->ag->op == NULL)
            return mxc__error(MXC_EINVAL,
                              "%s: output %d is a variable marked for autograd, which may not "
                              "be written while recording",
                              def->name, o);
        for (int i = 0; on_tape && (def->backward_deps & MXC__DEP_IN_DATA) && i < n_in; i++)
            if (shares_chunk(inputs[i], out))
                return mxc__error(MXC_EINVAL,
                                  "%s: cannot record writing output %d over input %d in place: "
                                  "the backward of %s needs that input; pass another array",
                                  def->name, o, i, def->name);
        /* (handles the tape keeps count too: mxc__nd_push refuses those writes itself) */
        if (atomic_load_explicit(&out->chunk->ag_saved, memory_order_relaxed) == 0 &&
            atomic_load_explicit(&out->chunk->refs, memory_order_relaxed) > 1)
            return mxc__error(MXC_EINVAL,
                              "%s: cannot record writing output %d in place while another "
                              "array (a view from mxc_nd_reshape or mxc_nd_slice) shares its "
                              "memory; free the view or pass another array",
                              def->name, o);
    }
    return MXC_OK;
}

int mxc__ag_record(const struct mxc__op_def *def, const void *params, mxc_ndarray *const *inputs,
                   int n_in, int n_aux, mxc_ndarray *const *outputs, int n_out) {
    if (!recording) /* an update of a marked variable keeps its mark */
        return MXC_OK;
    bool on_tape = false;
    for (int i = 0; i < n_in; i++)
        on_tape |= inputs[i]->ag != NULL;
    if (!on_tape) { /* what the outputs held before is gone */
        for (int o = 0; o < n_out; o++)
            attach(outputs[o], NULL, 0);
        return MXC_OK;
    }
    int rc = MXC_OK;
    struct mxc__ag_node *n = node_new(def, n_in, n_aux, n_out);
    MXC_CHECK(n != NULL, MXC_ENOMEM, "%s: out of memory recording for autograd", def->name);
    if (def->param_size) {
        n->params = mxc__aligned_alloc(16, def->param_size);
        MXC_CHECK(n->params != NULL, MXC_ENOMEM, "%s: out of memory recording for autograd",
                  def->name);
        memcpy(n->params, params, def->param_size);
    }
    bool keep_in = def->backward_deps & MXC__DEP_IN_DATA;
    bool keep_out = def->backward_deps & MXC__DEP_OUT_DATA;
    for (int i = 0; i < n_in + n_aux; i++) {
        const mxc_ndarray *a = inputs[i];
        n->in_shape[i] = a->shape;
        n->in_dtype[i] = a->dtype;
        if (i < n_in && a->ag) {
            n->src[i] = a->ag;
            n->src_index[i] = a->ag_index;
            atomic_fetch_add_explicit(&a->ag->refs, 1, memory_order_relaxed);
        }
        if (i >= n_in) /* auxiliary states are state, updated by every forward */
            MXC_TRY(mxc__nd_view(a, 0, &a->shape, a->dtype, &n->saved[n_out + i]));
        else if (keep_in)
            MXC_TRY(save(a, &n->saved[i]));
    }
    for (int o = 0; keep_out && o < n_out; o++)
        MXC_TRY(save(outputs[o], &n->saved[n_in + o]));
    for (int o = 0; o < n_out; o++)
        attach(outputs[o], n, o);
    node_unref(n); /* the outputs hold it now */
    return MXC_OK;
fail:
    node_unref(n);
    return rc;
}

int mxc__ag_record_view(const mxc_ndarray *a, mxc_ndarray *view, const char *fn) {
    if (!recording || a->ag == NULL)
        return MXC_OK;
    if (view == NULL)
        return mxc__error(MXC_EINVAL,
                          "%s: cannot record a slice of an array on the autograd tape; take "
                          "the slice outside recording",
                          fn);
    const struct mxc__op_def *def = mxc__op_find("Reshape");
    char shape[32 * MXC_MAX_NDIM + 4];
    size_t len = 0;
    shape[len++] = '(';
    for (int d = 0; d < view->shape.ndim; d++)
        len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%lld", d ? ", " : "",
                                (long long)view->shape.dims[d]);
    snprintf(shape + len, sizeof shape - len, ")");
    _Alignas(16) unsigned char params[MXC__ND_MAX_PARAM_BYTES];
    const char *keys[] = {"shape"}, *vals[] = {shape};
    MXC_ASSERT(def != NULL && def->param_size <= sizeof params);
    int rc = mxc__op_parse_params(def, 1, keys, vals, params);
    if (rc == MXC_OK)
        rc = mxc__ag_record(def, params, (mxc_ndarray *const *)&a, 1, 0, &view, 1);
    return rc == MXC_OK ? rc : mxc__error_wrap(rc, "%s", fn);
}

/* ---- Marking variables -------------------------------------------------------------- */

int mxc_autograd_mark_variables(int n, mxc_ndarray *const *arrays, mxc_ndarray *const *grad_arrays,
                                const int *reqs) {
    int rc = MXC_OK, made = 0;
    struct mxc__ag_node **nodes = NULL;
    MXC_CHECK(n >= 0 && (n == 0 || (arrays && grad_arrays)), MXC_EINVAL,
              "%d variables, arrays %s, grad_arrays %s", n, arrays ? "given" : "NULL",
              grad_arrays ? "given" : "NULL");
    for (int i = 0; i < n; i++) {
        MXC_TRY(mxc__nd_check(arrays[i], __func__, "arrays[i]"));
        MXC_TRY(mxc__nd_check(grad_arrays[i], __func__, "grad_arrays[i]"));
        const mxc_ndarray *a = arrays[i], *g = grad_arrays[i];
        int req = reqs ? reqs[i] : MXC_GRAD_WRITE;
        MXC_CHECK(req == MXC_GRAD_NULL || req == MXC_GRAD_WRITE || req == MXC_GRAD_ADD, MXC_EINVAL,
                  "reqs[%d] is %d, not null (0), write (1) or add (3)", i, req);
        char b1[128], b2[128];
        MXC_CHECK(
            a->shape.ndim == g->shape.ndim &&
                !memcmp(a->shape.dims, g->shape.dims, sizeof(int64_t) * (size_t)a->shape.ndim),
            MXC_ESHAPE, "variable %d has shape %s but its gradient array %s", i,
            mxc__shape_str(&a->shape, b1, sizeof b1), mxc__shape_str(&g->shape, b2, sizeof b2));
        MXC_CHECK(a->dtype == g->dtype, MXC_ETYPE, "variable %d is %s but its gradient array %s", i,
                  mxc_dtype_name(a->dtype), mxc_dtype_name(g->dtype));
        MXC_CHECK(mxc__ctx_same_device(a->chunk->ctx, g->chunk->ctx), MXC_EINVAL,
                  "variable %d and its gradient array are on different devices", i);
    }
    nodes = mxc__calloc((size_t)n + 1, sizeof *nodes);
    MXC_CHECK(nodes != NULL, MXC_ENOMEM, "out of memory");
    for (made = 0; made < n; made++) {
        struct mxc__ag_node *v = node_new(NULL, 0, 0, 1);
        MXC_CHECK(v != NULL, MXC_ENOMEM, "out of memory");
        nodes[made] = v;
        v->req = reqs ? reqs[made] : MXC_GRAD_WRITE;
        const mxc_ndarray *g = grad_arrays[made];
        MXC_TRY(mxc__nd_view(g, 0, &g->shape, g->dtype, &v->grad));
    }
    for (int i = 0; i < n; i++) {
        attach(arrays[i], nodes[i], 0);
        node_unref(nodes[i]);
    }
    mxc__free(nodes);
    return MXC_OK;
fail:
    for (int i = 0; nodes && i <= made && i < n; i++)
        node_unref(nodes[i]);
    mxc__free(nodes);
    return mxc__in_call(__func__, rc);
}

/* ---- Backward ----------------------------------------------------------------------- */

/* A variable of the indexed graph: a marked variable (`var`), or a constant input (an
 * array not on the tape; an auxiliary state when `aux`), met during the walk. */
struct leaf {
    struct mxc__ag_node *var; /* NULL: a constant */
    mxc_shape shape;
    int dtype;
    int node; /* its fg node */
    bool aux;
};

/* The indexed graph of the nodes reachable from the heads, and what backward needs to
 * run the full graph's backward nodes on arrays. */
struct tape_graph {
    struct mxc__graph fg;
    int cap_nodes;
    struct mxc__ag_node **op_of; /* per forward xnode (fg's operator nodes in order) */
    int num_ops, cap_ops;
    struct leaf *leaves;
    int num_leaves, cap_leaves;
    /* the leaves split as the gradient pass takes them (split_leaves) */
    struct mxc__ag_node **var_of; /* per fg argument: its variable node, NULL: a constant */
    mxc_shape *arg_shape, *aux_shape;
    int *arg_type;
};

static void *grow(void *p, int *cap, int need, size_t size) {
    if (need <= *cap)
        return p;
    int cap2 = *cap ? 2 * *cap : 16;
    while (cap2 < need)
        cap2 *= 2;
    void *q = mxc__realloc(p, size * (size_t)cap2);
    if (q)
        *cap = cap2;
    return q;
}

/* Appends a fg node (op NULL: a variable). Its id, or -1 when out of memory. */
static int emit(struct tape_graph *t, const struct mxc__op_def *op, const void *params,
                struct mxc__graph_entry *inputs, int num_inputs, int num_args, int num_out) {
    struct mxc__graph *fg = &t->fg;
    struct mxc__graph_node *nodes =
        grow(fg->nodes, &t->cap_nodes, fg->num_nodes + 1, sizeof(struct mxc__graph_node));
    if (nodes == NULL)
        return -1;
    fg->nodes = nodes;
    fg->nodes[fg->num_nodes] = (struct mxc__graph_node){.op = op,
                                                        .name = op ? op->name : "variable",
                                                        .params = params,
                                                        .num_inputs = num_inputs,
                                                        .num_args = num_args,
                                                        .inputs = inputs,
                                                        .num_outputs = num_out,
                                                        .num_visible = num_out};
    return fg->num_nodes++;
}

/* A variable fg node (a leaf). Its id, or -1 when out of memory. */
static int emit_var(struct tape_graph *t, struct mxc__ag_node *var, const mxc_shape *shape,
                    int dtype, bool aux) {
    int id = emit(t, NULL, NULL, NULL, 0, 0, 1);
    struct leaf *l = id < 0 ? NULL : grow(t->leaves, &t->cap_leaves, t->num_leaves + 1, sizeof *l);
    if (l == NULL)
        return -1;
    t->leaves = l;
    l[t->num_leaves++] = (struct leaf){var, *shape, dtype, id, aux};
    t->fg.nodes[id].is_aux = aux;
    return id;
}

/* The leaves as arguments and auxiliary states, in the order met. */
static int split_leaves(struct tape_graph *t) {
    struct mxc__graph *fg = &t->fg;
    size_t n = (size_t)t->num_leaves + 1;
    fg->arg_nodes = mxc__malloc(sizeof(int) * n);
    fg->aux_nodes = mxc__malloc(sizeof(int) * n);
    t->var_of = mxc__malloc(sizeof *t->var_of * n);
    t->arg_shape = mxc__malloc(sizeof(mxc_shape) * n);
    t->aux_shape = mxc__malloc(sizeof(mxc_shape) * n);
    t->arg_type = mxc__malloc(sizeof(int) * n);
    if (!fg->arg_nodes || !fg->aux_nodes || !t->var_of || !t->arg_shape || !t->aux_shape ||
        !t->arg_type)
        return mxc__error(MXC_ENOMEM, "out of memory");
    for (int i = 0; i < t->num_leaves; i++) {
        const struct leaf *l = &t->leaves[i];
        if (l->aux) {
            fg->aux_nodes[fg->num_aux] = l->node;
            t->aux_shape[fg->num_aux++] = l->shape;
        } else {
            fg->arg_nodes[fg->num_args] = l->node;
            t->var_of[fg->num_args] = l->var;
            t->arg_shape[fg->num_args] = l->shape;
            t->arg_type[fg->num_args++] = l->dtype;
        }
    }
    return MXC_OK;
}

static void tape_graph_free(struct tape_graph *t) {
    for (int k = 0; k < t->fg.num_nodes; k++)
        mxc__free(t->fg.nodes[k].inputs);
    mxc__free(t->fg.nodes);
    mxc__free(t->fg.arg_nodes);
    mxc__free(t->fg.aux_nodes);
    mxc__free(t->fg.heads);
    mxc__free(t->op_of);
    mxc__free(t->leaves);
    mxc__free(t->var_of);
    mxc__free(t->arg_shape);
    mxc__free(t->aux_shape);
    mxc__free(t->arg_type);
}

/* Emits `n` (a variable, or an operator whose inputs are all emitted) into the graph. */
static int emit_node(struct tape_graph *t, struct mxc__ag_node *n, struct mxc__graph_entry *ins) {
    if (n->op == NULL) {
        n->fg_node = emit_var(t, n, &n->grad->shape, n->grad->dtype, false);
    } else {
        struct mxc__ag_node **ops = grow(t->op_of, &t->cap_ops, t->num_ops + 1, sizeof *ops);
        if (ops == NULL)
            return mxc__error(MXC_ENOMEM, "out of memory");
        t->op_of = ops;
        ops[t->num_ops++] = n;
        n->fg_node = emit(t, n->op, n->params, ins, n->num_in + n->num_aux, n->num_in, n->num_out);
    }
    return n->fg_node >= 0 ? MXC_OK : mxc__error(MXC_ENOMEM, "out of memory");
}

/* One step of the depth-first walk: a node and the next input to visit. */
struct frame {
    struct mxc__ag_node *node;
    int next;
    struct mxc__graph_entry *ins;
};

/* Emits every node `head` depends on, then `head`, in MXNet's depth-first post-order (a
 * symbol's list order): inputs in order, a constant input (an array not on the tape) as
 * a variable of its own where it is met. */
static int walk(struct tape_graph *t, struct mxc__ag_node *head, unsigned stamp) {
    int rc = MXC_OK, sp = 0, cap = 0;
    struct frame *st = NULL;
    head->stamp = stamp;
    if (head->op == NULL)
        return emit_node(t, head, NULL);
    struct frame *st2 = grow(st, &cap, 1, sizeof *st);
    MXC_CHECK(st2 != NULL, MXC_ENOMEM, "out of memory");
    st = st2;
    st[sp++] = (struct frame){head, 0, NULL};
    while (sp > 0) {
        struct frame *f = &st[sp - 1];
        struct mxc__ag_node *n = f->node;
        int ni = n->num_in + n->num_aux;
        MXC_CHECK(!n->released, MXC_EINVAL,
                  "operator %s on the tape was released by an earlier backward; record the "
                  "forward again, or pass retain_graph to the first backward",
                  n->op->name);
        if (f->ins == NULL) {
            f->ins = mxc__calloc((size_t)ni + 1, sizeof *f->ins);
            MXC_CHECK(f->ins != NULL, MXC_ENOMEM, "out of memory");
        }
        if (f->next == ni) {
            struct mxc__graph_entry *ins = f->ins;
            f->ins = NULL;
            sp--;
            rc = emit_node(t, n, ins);
            if (rc != MXC_OK) {
                mxc__free(ins);
                goto fail;
            }
            continue;
        }
        int i = f->next;
        struct mxc__ag_node *s = n->src[i];
        if (s == NULL) {
            int id = emit_var(t, NULL, &n->in_shape[i], n->in_dtype[i], i >= n->num_in);
            MXC_CHECK(id >= 0, MXC_ENOMEM, "out of memory");
            f->ins[f->next++] = (struct mxc__graph_entry){id, 0};
        } else if (s->stamp == stamp) {
            f->ins[f->next++] = (struct mxc__graph_entry){s->fg_node, n->src_index[i]};
        } else if (s->op == NULL) {
            s->stamp = stamp;
            MXC_TRY(emit_node(t, s, NULL));
        } else {
            s->stamp = stamp;
            st2 = grow(st, &cap, sp + 1, sizeof *st);
            MXC_CHECK(st2 != NULL, MXC_ENOMEM, "out of memory");
            st = st2;
            st[sp++] = (struct frame){s, 0, NULL};
        }
    }
fail:
    for (int k = 0; k < sp; k++)
        mxc__free(st[k].ins);
    mxc__free(st);
    return rc;
}

/* What one backward node's push carries: the node (its lists are rebuilt in the kernel),
 * where each tensor is among the pushed arrays (-1: none), and the shapes of the gradients
 * it does not write (the kernel sees them without data). */
struct ag_push {
    struct mxc__xnode node;
    int req[MXC__MAX_OP_ARGS];
    signed char in_at[3 * MXC__MAX_OP_ARGS], out_at[MXC__MAX_OP_ARGS], aux_at[MXC__MAX_OP_ARGS];
    mxc_shape like[MXC__MAX_OP_ARGS];
    int like_dtype[MXC__MAX_OP_ARGS];
    _Alignas(16) unsigned char params[];
};

static int ag_kernel(const struct mxc__nd_call *nd) {
    const struct ag_push *p = nd->params;
    struct mxc__xnode n = p->node;
    struct mxc__tensor in[3 * MXC__MAX_OP_ARGS], out[MXC__MAX_OP_ARGS], aux[MXC__MAX_OP_ARGS];
    for (int i = 0; i < n.num_in; i++)
        in[i] = p->in_at[i] >= 0 ? nd->inputs[p->in_at[i]] : (struct mxc__tensor){0};
    for (int i = 0; i < n.num_aux; i++)
        aux[i] = nd->inputs[p->aux_at[i]];
    for (int o = 0; o < n.num_out; o++)
        out[o] = p->out_at[o] >= 0
                     ? nd->outputs[p->out_at[o]]
                     : (struct mxc__tensor){NULL, p->like[o], p->like_dtype[o], nd->rctx->ctx,
                                            mxc_shape_size(&p->like[o])};
    n.req = (int *)p->req;
    n.params = p->params;
    return mxc__xnode_run(&n, nd->rctx, true, in, out, aux, nd->resources, nd->num_resources);
}

/* The array of entry `e` for reading by backward node `n` at input slot `i`: a gradient
 * from `ent`, or the forward array its tape node saved. */
static mxc_ndarray *input_array(const struct tape_graph *t, mxc_ndarray **ent,
                                const struct mxc__xnode *n, int i) {
    if (n->kind != MXC__X_BACKWARD || i < n->num_out_grad)
        return ent[n->in[i]];
    return t->op_of[n->fwd]->saved[i - n->num_out_grad];
}

/* Pushes backward node k of `g`. */
static int push_node(const struct mxc__xgraph *g, const struct tape_graph *t, mxc_ndarray **ent,
                     int k, mxc_context ctx) {
    const struct mxc__xnode *n = &g->nodes[k];
    size_t psize = n->op ? n->op->param_size : 0;
    _Alignas(16) unsigned char buf[sizeof(struct ag_push) + MXC__ND_MAX_PARAM_BYTES];
    struct ag_push *p = (struct ag_push *)buf;
    const mxc_ndarray *ins[MXC__ND_MAX_OPERANDS];
    mxc_ndarray *outs[MXC__ND_MAX_OPERANDS];
    int ni = 0, no = 0;
    const char *name = n->op ? n->op->name : "zeros";
    MXC_ASSERT(psize <= MXC__ND_MAX_PARAM_BYTES);
    p->node = *n;
    memcpy(p->req, n->req, sizeof(int) * (size_t)n->num_out);
    if (psize)
        memcpy(p->params, n->params, psize);
    const struct mxc__ag_node *fwd = n->kind == MXC__X_BACKWARD ? t->op_of[n->fwd] : NULL;
    for (int i = 0; i < n->num_in + n->num_aux; i++) {
        bool aux = i >= n->num_in; /* only backward nodes have them */
        mxc_ndarray *a = aux             ? fwd->saved[fwd->num_in + fwd->num_out + i - n->num_in]
                         : n->in[i] >= 0 ? input_array(t, ent, n, i)
                                         : NULL;
        if (!aux && n->in[i] < 0) {
            p->in_at[i] = -1;
            continue;
        }
        if (a == NULL || ni == MXC__ND_MAX_OPERANDS)
            return mxc__error(MXC_EINTERNAL, "autograd: %s (backward) lacks input %d", name, i);
        if (aux)
            p->aux_at[i - n->num_in] = (signed char)ni;
        else
            p->in_at[i] = (signed char)ni;
        ins[ni++] = a;
    }
    for (int o = 0; o < n->num_out; o++) {
        p->out_at[o] = -1;
        if (n->out[o] < 0) { /* only backward nodes pass none */
            const struct mxc__xentry *like = &g->entries[g->nodes[n->fwd].in[o]];
            p->like[o] = like->shape;
            p->like_dtype[o] = like->dtype;
            continue;
        }
        p->out_at[o] = (signed char)no;
        outs[no++] = ent[n->out[o]];
    }
    int kinds[2], n_res = 0;
    const unsigned char *res = n->op == NULL                ? NULL
                               : n->kind == MXC__X_BACKWARD ? n->op->backward_resources
                                                            : n->op->forward_resources;
    for (int r = 0; res && r < 2 && res[r]; r++)
        kinds[n_res++] = res[r] - 1;
    struct mxc__nd_op op = {.name = name,
                            .kernel = ag_kernel,
                            .params = p,
                            .params_size = sizeof *p + psize,
                            .run_ctx = ctx,
                            .resources = kinds,
                            .num_resources = n_res};
    return mxc__nd_push(&op, ins, ni, outs, no);
}

/* Backward of `heads` into the marked variables' gradient arrays (vars NULL) or into new
 * arrays `grads` for the `num_vars` variables `vars` only. */
static int run_backward(int n, mxc_ndarray *const *heads, mxc_ndarray *const *head_grads,
                        int num_vars, mxc_ndarray *const *vars, bool retain, mxc_ndarray **grads,
                        const char *fn) {
    static atomic_uint stamps;
    int rc = MXC_OK;
    struct tape_graph t = {0};
    struct mxc__xgraph g = {0};
    bool built = false;
    mxc_ndarray **ent = NULL;
    bool *own = NULL;
    int *req = NULL, *last = NULL;
    MXC_CHECK(!recording, MXC_EMISUSE, "%s: called while recording; stop recording first", fn);
    MXC_CHECK(n >= 1 && heads != NULL, MXC_EINVAL, "%s: %d heads, heads %s", fn, n,
              heads ? "given" : "NULL");
    for (int h = 0; h < n; h++) {
        MXC_TRY(mxc__nd_check(heads[h], fn, "heads[i]"));
        MXC_CHECK(heads[h]->ag != NULL, MXC_EINVAL,
                  "%s: head %d was not recorded (compute it from marked variables while "
                  "recording)",
                  fn, h);
        if (head_grads && head_grads[h]) {
            MXC_TRY(mxc__nd_check(head_grads[h], fn, "head_grads[i]"));
            char b1[128], b2[128];
            const mxc_shape *hs = &heads[h]->shape, *gs = &head_grads[h]->shape;
            MXC_CHECK(hs->ndim == gs->ndim &&
                          !memcmp(hs->dims, gs->dims, sizeof(int64_t) * (size_t)hs->ndim) &&
                          heads[h]->dtype == head_grads[h]->dtype,
                      MXC_EINVAL, "%s: head %d is %s but its head gradient %s", fn, h,
                      mxc__shape_str(hs, b1, sizeof b1), mxc__shape_str(gs, b2, sizeof b2));
        }
    }
    for (int v = 0; v < num_vars; v++) {
        MXC_TRY(mxc__nd_check(vars[v], fn, "vars[i]"));
        MXC_CHECK(vars[v]->ag && vars[v]->ag->op == NULL, MXC_EINVAL,
                  "%s: vars[%d] is not a marked variable", fn, v);
    }

    /* the forward as an indexed graph, then the executor's gradient pass on it */
    unsigned stamp = atomic_fetch_add(&stamps, 1) + 1;
    t.fg.heads = mxc__calloc((size_t)n, sizeof *t.fg.heads);
    MXC_CHECK(t.fg.heads != NULL, MXC_ENOMEM, "out of memory");
    for (int h = 0; h < n; h++) {
        struct mxc__ag_node *hn = heads[h]->ag;
        if (hn->stamp != stamp)
            MXC_TRY(walk(&t, hn, stamp));
        t.fg.heads[h] = (struct mxc__graph_entry){hn->fg_node, heads[h]->ag_index};
    }
    t.fg.num_heads = n;
    MXC_TRY(split_leaves(&t));
    req = mxc__calloc((size_t)t.fg.num_args + 1, sizeof *req);
    MXC_CHECK(req != NULL, MXC_ENOMEM, "out of memory");
    bool any = false;
    for (int a = 0; a < t.fg.num_args; a++) {
        struct mxc__ag_node *v = t.var_of[a];
        if (v == NULL)
            continue;
        if (vars == NULL) {
            req[a] = v->req;
        } else {
            for (int i = 0; i < num_vars; i++)
                if (vars[i]->ag == v)
                    req[a] = MXC__REQ_WRITE;
        }
        any |= req[a] != MXC__REQ_NULL;
    }
    for (int v = 0; v < num_vars; v++)
        MXC_CHECK(vars[v]->ag->stamp == stamp, MXC_EINVAL,
                  "%s: the heads do not depend on vars[%d]", fn, v);
    MXC_CHECK(any, MXC_EINVAL, "%s: the heads depend on no marked variable that wants a gradient",
              fn);
    MXC_TRY(mxc__xgraph_build(&t.fg, t.arg_shape, t.arg_type, t.aux_shape, req, &g));
    built = true;

    /* arrays: the gradients asked for, head gradients, then one per gradient entry */
    mxc_context ctx = heads[0]->chunk->ctx;
    ent = mxc__calloc((size_t)g.num_entries + 1, sizeof *ent);
    own = mxc__calloc((size_t)g.num_entries + 1, sizeof *own);
    MXC_CHECK(ent && own, MXC_ENOMEM, "out of memory");
    for (int a = 0; a < t.fg.num_args; a++) {
        int e = g.grad_entry[a];
        if (e < 0)
            continue;
        if (vars == NULL) {
            ent[e] = t.var_of[a]->grad;
            continue;
        }
        for (int i = 0; i < num_vars; i++)
            if (vars[i]->ag == t.var_of[a] && grads[i] == NULL)
                MXC_TRY(mxc_nd_create(&g.entries[e].shape, g.entries[e].dtype, ctx, 1, &grads[i]));
        for (int i = 0; i < num_vars; i++)
            if (vars[i]->ag == t.var_of[a])
                ent[e] = grads[i];
    }
    for (int h = 0; h < n; h++) {
        int e = g.head_grad_entry[h];
        if (e < 0)
            continue;
        if (head_grads && head_grads[h]) {
            ent[e] = head_grads[h];
        } else {
            MXC_TRY(mxc_nd_ones(&heads[h]->shape, heads[h]->dtype, ctx, &ent[e]));
            own[e] = true;
        }
    }
    /* each gradient the pass makes lives from its writer to its last reader, as in the
     * executor's plan: freed once that node is pushed (the engine orders the free after) */
    last = mxc__malloc(sizeof(int) * ((size_t)g.num_entries + 1));
    MXC_CHECK(last != NULL, MXC_ENOMEM, "out of memory");
    for (int k = g.num_forward; k < g.num_nodes; k++) {
        const struct mxc__xnode *xn = &g.nodes[k];
        for (int i = 0; i < xn->num_in + xn->num_out; i++) {
            int e = i < xn->num_in ? xn->in[i] : xn->out[i - xn->num_in];
            if (e >= 0)
                last[e] = k;
        }
    }
    for (int k = g.num_forward; k < g.num_nodes; k++) {
        const struct mxc__xnode *xn = &g.nodes[k];
        for (int o = 0; o < xn->num_out; o++) {
            int e = xn->out[o];
            if (e < 0 || ent[e])
                continue;
            MXC_TRY(mxc_nd_create(&g.entries[e].shape, g.entries[e].dtype, ctx, 1, &ent[e]));
            own[e] = true;
        }
        MXC_TRY(push_node(&g, &t, ent, k, ctx));
        for (int i = 0; i < xn->num_in + xn->num_out; i++) {
            int e = i < xn->num_in ? xn->in[i] : xn->out[i - xn->num_in];
            if (e >= 0 && own[e] && last[e] == k) {
                mxc_nd_free(ent[e]);
                ent[e] = NULL;
                own[e] = false;
            }
        }
        if (!retain && xn->kind == MXC__X_BACKWARD) /* its own backward was the last reader */
            drop_saved(t.op_of[xn->fwd]);
    }
    if (!retain)
        for (int k = 0; k < t.num_ops; k++)
            drop_saved(t.op_of[k]);
fail:
    for (int e = 0; ent && own && e < g.num_entries; e++)
        if (own[e])
            mxc_nd_free(ent[e]);
    mxc__free(ent);
    mxc__free(own);
    mxc__free(last);
    mxc__free(req);
    if (built)
        mxc__xgraph_free(&g);
    tape_graph_free(&t);
    return rc;
}

int mxc_autograd_backward(int n, mxc_ndarray *const *heads, mxc_ndarray *const *head_grads,
                          int retain_graph) {
    return mxc__in_call(
        __func__, run_backward(n, heads, head_grads, 0, NULL, retain_graph != 0, NULL, __func__));
}

int mxc_autograd_grad(int n, mxc_ndarray *const *heads, mxc_ndarray *const *head_grads,
                      int num_vars, mxc_ndarray *const *vars, int retain_graph,
                      mxc_ndarray **grads) {
    int rc = MXC_OK;
    MXC_CHECK(grads != NULL && vars != NULL && num_vars >= 1, MXC_EINVAL,
              "%d variables, vars %s, grads %s", num_vars, vars ? "given" : "NULL",
              grads ? "given" : "NULL");
    for (int i = 0; i < num_vars; i++)
        grads[i] = NULL;
    rc = run_backward(n, heads, head_grads, num_vars, vars, retain_graph != 0, grads, __func__);
    if (rc != MXC_OK)
        for (int i = 0; i < num_vars; i++) {
            mxc_nd_free(grads[i]);
            grads[i] = NULL;
        }
fail:
    return mxc__in_call(__func__, rc);
}

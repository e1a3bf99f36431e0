/*
 * executor/executor.c — binding a symbol to arrays and running it (mxc/executor.h).
 *
 * Bind: the symbol's indexed graph -> the full graph with the gradient pass (graph.c) ->
 * the memory plan (plan.c) -> one array per entry (a view on its planned block, or the
 * caller's array) -> one cached engine operation per node, whose variables are fixed:
 * it reads its inputs' blocks and writes its outputs' blocks, its auxiliary states and
 * its resources. Reusing a block is ordered by the engine like any other write. Each
 * block also gets a cached release operation, pushed right after the block's last user
 * in a pass: it hands the memory back to the storage pool, and the block's next writer
 * takes it again (delay-alloc), so memory in use follows the plan over the pass.
 */
#include "mxc/executor.h"

#include "common/handle.h"
#include "common/json.h"
#include "executor/graph.h"
#include "executor/plan.h"
#include "ndarray/ndarray_impl.h"
#include "symbol/symbol_impl.h"

#include "common/thread.h"

#include <stdio.h>
#include <string.h>
#ifdef __linux__
#include <sys/sysinfo.h>
#endif

#define EXEC_MAGIC    0x45584543u /* "EXEC" */
#define EXEC_DEAD     0x45584546u /* "EXEF": freed (common/handle.h) */
#define MAX_CALL_ARGS (3 * MXC__MAX_OP_ARGS)

/* One cached operation: a node run in one mode, or the release of a block (`node` is
 * then the block's index). */
struct node_op {
    struct mxc_executor *exec;
    int node;
    bool is_train;
    struct mxc__resource *res[2];
    int num_res;
    mxc_engine_opr *opr;
};

struct mxc_executor {
    _Atomic uint32_t magic;
    mxc_engine *engine;
    mxc_context ctx;
    mxc_symbol *sym;
    struct mxc__graph *fg;
    struct mxc__xgraph g;
    struct mxc__plan plan;
    mxc_ndarray **entry;                   /* per entry */
    mxc_ndarray **blocks;                  /* per block: its memory and engine variable */
    struct node_op *train_ops, *infer_ops; /* per node (forward nodes differ by mode) */
    struct node_op *release;               /* per block */
    mxc__mutex ops_lock;                   /* live_ops: cached operations not yet freed */
    mxc__cond ops_cond;
    int live_ops;
    int *release_start, *release_list; /* blocks released after node k */
    mxc_ndarray **args, **grads, **aux, **outputs;
    int num_args, num_aux, num_outputs;
    int grad_req; /* what simple_bind asked for, for reshape */
    bool has_backward;
    bool can_backward; /* a forward(is_train = 1) was pushed since the last backward */
    mxc_executor_monitor monitor;
    void *monitor_user;
    char *text;
};

static mxc__handle_kind exec_kind =
    MXC__HANDLE_KIND(struct mxc_executor, "an executor", EXEC_MAGIC, EXEC_DEAD);

static int check_exec(const mxc_executor *e, const char *fn) {
    return mxc__handle_check(&exec_kind, e, fn, "executor");
}

/* A new handle on `a`'s memory (the executor's own reference). */
static int retain(const mxc_ndarray *a, mxc_ndarray **out) {
    return mxc__nd_view(a, 0, &a->shape, a->dtype, out);
}

/* ---- Running a node ----------------------------------------------------------------- */

static void tensor_of(const mxc_executor *x, int entry, struct mxc__tensor *t) {
    const struct mxc__xentry *e = &x->g.entries[entry];
    *t = (struct mxc__tensor){NULL, e->shape, e->dtype, x->ctx, mxc_shape_size(&e->shape)};
}

/* The tensors of `entries` (n of them): -1 gives a tensor without data shaped like
 * `like[i]` (if given). Memory is taken now for written ones. */
static int tensors(const mxc_executor *x, const int *entries, int n, bool written, const int *like,
                   struct mxc__tensor *out) {
    for (int i = 0; i < n; i++) {
        if (entries[i] < 0) {
            if (like && like[i] >= 0)
                tensor_of(x, like[i], &out[i]);
            else
                out[i] = (struct mxc__tensor){0};
            continue;
        }
        int rc = mxc__nd_tensor(x->entry[entries[i]], written, &out[i]);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

static int run_node(const mxc_run_ctx *rctx, void *arg) {
    const struct node_op *op = arg;
    const mxc_executor *x = op->exec;
    const struct mxc__xnode *n = &x->g.nodes[op->node];
    struct mxc__tensor in[MAX_CALL_ARGS], out[MXC__MAX_OP_ARGS], aux[MXC__MAX_OP_ARGS];
    const int *like = n->kind == MXC__X_BACKWARD ? x->g.nodes[n->fwd].in : NULL;
    int rc = tensors(x, n->in, n->num_in, false, NULL, in);
    if (rc == MXC_OK)
        rc = tensors(x, n->out, n->num_out, true, like, out);
    if (rc == MXC_OK)
        rc = tensors(x, n->aux, n->num_aux, false, NULL, aux);
    if (rc != MXC_OK)
        return mxc__error_wrap(rc, "node %s", n->name);
    return mxc__xnode_run(n, rctx, op->is_train, in, out, aux, op->res, op->num_res);
}

static int release_block(const mxc_run_ctx *rctx, void *arg) {
    (void)rctx;
    const struct node_op *op = arg;
    mxc__nd_release_memory(op->exec->blocks[op->node]);
    return MXC_OK;
}

/* The arg_free of every cached operation: the engine calls it once the operation is
 * deleted and its last run has retired, after which nothing it runs reads the executor. */
static void op_retired(void *arg) {
    mxc_executor *x = ((struct node_op *)arg)->exec;
    mxc__mutex_lock(&x->ops_lock);
    if (--x->live_ops == 0)
        mxc__cond_signal(&x->ops_cond);
    mxc__mutex_unlock(&x->ops_lock);
}

/* Makes the cached operation of `op` from `d`, counted in live_ops until it is freed. */
static int new_cached_op(mxc_executor *x, mxc_engine_op_desc *d, struct node_op *op) {
    d->arg = op;
    d->arg_free = op_retired;
    int rc = mxc_engine_new_operator(x->engine, d, &op->opr);
    if (rc == MXC_OK)
        x->live_ops++; /* no operation is deleted before bind has returned */
    return rc;
}

/* ---- Building ----------------------------------------------------------------------- */

/* Bytes of memory this machine could ever give: RAM plus swap (what Linux's overcommit
 * heuristic also refuses single allocations beyond). */
static size_t system_memory(void) {
#ifdef __linux__
    struct sysinfo si;
    if (sysinfo(&si) != 0 || si.mem_unit == 0)
        return SIZE_MAX;
    uint64_t units = (uint64_t)si.totalram + (uint64_t)si.totalswap;
    return units > SIZE_MAX / si.mem_unit ? SIZE_MAX : (size_t)(units * si.mem_unit);
#else
    return SIZE_MAX; /* unknown: only sizes that overflow are refused */
#endif
}

/* Fails with MXC_ENOMEM when the executor's memory (its arrays, `bytes[e]` for the
 * external entries, plus the plan's blocks) cannot exist on this machine. Why bind
 * compares with the system's total instead of reserving the plan once through the
 * storage pool: with Linux's overcommit a reservation of untouched pages succeeds far
 * beyond RAM, and the process is killed at the first pass that touches them; memory that
 * exists but is taken by others still fails cleanly (MXC_ENOMEM) at the first wait. */
static int check_memory(const mxc_executor *x, const size_t *bytes, const bool *ext) {
    size_t need = x->plan.planned_bytes;
    for (int e = 0; e < x->g.num_entries; e++)
        if (ext[e])
            need = bytes[e] > SIZE_MAX - need ? SIZE_MAX : need + bytes[e];
    size_t have = system_memory();
    if (need > have)
        return mxc__error(MXC_ENOMEM,
                          "the executor needs %zu bytes (arrays and a memory plan of %zu), "
                          "more than this machine's %zu bytes of memory and swap",
                          need, x->plan.planned_bytes, have);
    return MXC_OK;
}

/* Marks the entries with their own memory and plans the rest. */
static int make_plan(mxc_executor *x) {
    int rc = MXC_OK;
    struct mxc__xgraph *g = &x->g;
    int ne = g->num_entries;
    bool *ext = mxc__calloc((size_t)ne + 1, sizeof(bool));
    size_t *bytes = mxc__malloc(sizeof(size_t) * ((size_t)ne + 1));
    struct mxc__plan_node *pn = mxc__calloc((size_t)g->num_nodes + 1, sizeof *pn);
    int *lists =
        mxc__malloc(sizeof(int) * (size_t)(2 * MAX_CALL_ARGS) * ((size_t)g->num_nodes + 1));
    MXC_CHECK(ext && bytes && pn && lists, MXC_ENOMEM, "out of memory");
    for (int i = 0; i < g->num_args; i++) {
        ext[g->arg_entry[i]] = true;
        if (g->grad_entry[i] >= 0)
            ext[g->grad_entry[i]] = true;
    }
    for (int i = 0; i < g->num_aux; i++)
        ext[g->aux_entry[i]] = true;
    for (int h = 0; h < g->num_heads; h++) {
        ext[g->head_entry[h]] = true;
        if (g->head_grad_entry[h] >= 0)
            ext[g->head_grad_entry[h]] = true;
    }
    for (int e = 0; e < ne; e++) {
        const struct mxc__xentry *xe = &g->entries[e];
        int64_t n = mxc_shape_size(&xe->shape);
        size_t size = mxc_dtype_size(xe->dtype);
        char b[128];
        MXC_CHECK(n >= 0 && (size == 0 || (uint64_t)n <= SIZE_MAX / size), MXC_ENOMEM,
                  "an array of shape %s (%s) needs more bytes than a size_t holds",
                  mxc__shape_str(&xe->shape, b, sizeof b), mxc_dtype_name(xe->dtype));
        bytes[e] = (size_t)n * size;
    }
    /* the planner sees only the entries a node really passes, in place indices remapped */
    for (int k = 0; k < g->num_nodes; k++) {
        const struct mxc__xnode *n = &g->nodes[k];
        int *ins = lists + (size_t)k * 2 * MAX_CALL_ARGS, *outs = ins + MAX_CALL_ARGS;
        pn[k].inplace_in = pn[k].inplace_out = -1;
        for (int i = 0; i < n->num_in; i++)
            if (n->in[i] >= 0) {
                if (i == n->inplace_in)
                    pn[k].inplace_in = pn[k].num_inputs;
                ins[pn[k].num_inputs++] = n->in[i];
            }
        for (int o = 0; o < n->num_out; o++)
            if (n->out[o] >= 0) {
                if (o == n->inplace_out)
                    pn[k].inplace_out = pn[k].num_outputs;
                outs[pn[k].num_outputs++] = n->out[o];
            }
        if (pn[k].inplace_in < 0 || pn[k].inplace_out < 0)
            pn[k].inplace_in = pn[k].inplace_out = -1;
        pn[k].inputs = ins;
        pn[k].outputs = outs;
    }
    struct mxc__plan_graph pg = {ne, bytes, ext, pn, g->num_nodes};
    MXC_TRY(mxc__plan_make(&pg, &x->plan));
    MXC_TRY(check_memory(x, bytes, ext));
fail:
    mxc__free(ext);
    mxc__free(bytes);
    mxc__free(pn);
    mxc__free(lists);
    return rc;
}

/* One array per entry: the caller's, an output of its own, or a view on its block. */
static int make_arrays(mxc_executor *x, mxc_ndarray *const *args, mxc_ndarray *const *grads,
                       mxc_ndarray *const *aux) {
    struct mxc__xgraph *g = &x->g;
    int rc = MXC_OK;
    x->entry = mxc__calloc((size_t)g->num_entries + 1, sizeof *x->entry);
    x->blocks = mxc__calloc((size_t)x->plan.num_blocks + 1, sizeof *x->blocks);
    x->args = mxc__calloc((size_t)g->num_args + 1, sizeof *x->args);
    x->grads = mxc__calloc((size_t)g->num_args + 1, sizeof *x->grads);
    x->aux = mxc__calloc((size_t)g->num_aux + 1, sizeof *x->aux);
    x->outputs = mxc__calloc((size_t)g->num_heads + 1, sizeof *x->outputs);
    MXC_CHECK(x->entry && x->blocks && x->args && x->grads && x->aux && x->outputs, MXC_ENOMEM,
              "out of memory");
    x->num_args = g->num_args;
    x->num_aux = g->num_aux;
    x->num_outputs = g->num_heads;
    for (int i = 0; i < g->num_args; i++) {
        MXC_TRY(retain(args[i], &x->args[i]));
        MXC_TRY(retain(args[i], &x->entry[g->arg_entry[i]]));
        if (g->grad_entry[i] >= 0) {
            MXC_TRY(retain(grads[i], &x->grads[i]));
            MXC_TRY(retain(grads[i], &x->entry[g->grad_entry[i]]));
        }
    }
    for (int i = 0; i < g->num_aux; i++) {
        MXC_TRY(retain(aux[i], &x->aux[i]));
        MXC_TRY(retain(aux[i], &x->entry[g->aux_entry[i]]));
    }
    for (int b = 0; b < x->plan.num_blocks; b++) {
        mxc_shape s = {1, {(int64_t)((x->plan.block_bytes[b] + 3) / 4)}};
        MXC_TRY(mxc_nd_create(&s, MXC_FLOAT32, x->ctx, 1, &x->blocks[b]));
    }
    for (int e = 0; e < g->num_entries; e++) {
        if (x->entry[e] != NULL)
            continue;
        const struct mxc__xentry *xe = &g->entries[e];
        int b = x->plan.block_of[e];
        if (b >= 0)
            MXC_TRY(mxc__nd_view(x->blocks[b], 0, &xe->shape, xe->dtype, &x->entry[e]));
        else /* outputs and head gradients: their own memory */
            MXC_TRY(mxc_nd_create(&xe->shape, xe->dtype, x->ctx, 1, &x->entry[e]));
    }
    for (int h = 0; h < g->num_heads; h++)
        MXC_TRY(retain(x->entry[g->head_entry[h]], &x->outputs[h]));
fail:
    return rc;
}

/* Adds the variable of entry `e` to `vars` unless it is there. */
static void add_var(const mxc_executor *x, int e, mxc_var **vars, int *n) {
    if (e < 0)
        return;
    mxc_var *v = mxc__nd_var(x->entry[e]);
    for (int i = 0; i < *n; i++)
        if (vars[i] == v)
            return;
    vars[(*n)++] = v;
}

/* Whether node `n` writes its output `o` whole, whatever it held: written (not added to),
 * and all of its array's memory or an entry of a planned block, which holds nothing else
 * while the entry lives. */
static bool writes_whole(const mxc_executor *x, const struct mxc__xnode *n, int o) {
    int e = n->out[o];
    if (n->req[o] != MXC__REQ_WRITE && n->req[o] != MXC__REQ_INPLACE)
        return false;
    const mxc_ndarray *a = x->entry[e];
    return x->plan.block_of[e] >= 0 || (a->offset == 0 && mxc__nd_nbytes(a) == a->chunk->nbytes);
}

/* A node's operation overwrites (desc.overwrite) the outputs it writes whole, so a pass
 * after a failed one runs again and clears the failure; what it adds to or updates
 * (gradients added to, moving statistics) it reads as well, and keeps a failure. */
static int make_node_op(mxc_executor *x, int k, bool is_train, struct node_op *op) {
    const struct mxc__xnode *n = &x->g.nodes[k];
    *op = (struct node_op){.exec = x, .node = k, .is_train = is_train};
    mxc_var *reads[MAX_CALL_ARGS + 2 * MXC__MAX_OP_ARGS], *writes[3 * MXC__MAX_OP_ARGS + 2];
    int nr = 0, nw = 0;
    for (int o = 0; o < n->num_out; o++) {
        add_var(x, n->out[o], writes, &nw);
        if (n->out[o] >= 0 && !writes_whole(x, n, o))
            add_var(x, n->out[o], reads, &nr);
    }
    for (int i = 0; i < n->num_aux; i++) { /* forward updates moving statistics */
        add_var(x, n->aux[i], reads, &nr);
        if (n->kind == MXC__X_FORWARD)
            add_var(x, n->aux[i], writes, &nw);
    }
    for (int i = 0; i < n->num_in; i++)
        add_var(x, n->in[i], reads, &nr);
    if (n->op) {
        const unsigned char *kinds =
            n->kind == MXC__X_BACKWARD ? n->op->backward_resources : n->op->forward_resources;
        for (int r = 0; r < 2 && kinds[r]; r++) {
            int rc = mxc__resource_get(x->ctx, kinds[r] - 1, &op->res[op->num_res]);
            if (rc != MXC_OK)
                return rc;
            writes[nw++] = op->res[op->num_res++]->var;
        }
    }
    mxc_engine_op_desc d = {.fn = run_node,
                            .ctx = x->ctx,
                            .const_vars = reads,
                            .num_const_vars = nr,
                            .mutable_vars = writes,
                            .num_mutable_vars = nw,
                            .name = n->op ? n->op->name : "zeros",
                            .overwrite = 1};
    return new_cached_op(x, &d, op);
}

/* Cached operations: forward nodes in both modes, backward nodes, block releases. */
static int make_ops(mxc_executor *x) {
    int rc = MXC_OK;
    struct mxc__xgraph *g = &x->g;
    int nb = x->plan.num_blocks;
    x->train_ops = mxc__calloc((size_t)g->num_nodes + 1, sizeof *x->train_ops);
    x->infer_ops = mxc__calloc((size_t)g->num_forward + 1, sizeof *x->infer_ops);
    x->release = mxc__calloc((size_t)nb + 1, sizeof *x->release);
    x->release_start = mxc__calloc((size_t)g->num_nodes + 2, sizeof(int));
    x->release_list = mxc__malloc(sizeof(int) * ((size_t)nb + 1));
    MXC_CHECK(x->train_ops && x->infer_ops && x->release && x->release_start && x->release_list,
              MXC_ENOMEM, "out of memory");
    for (int k = 0; k < g->num_nodes; k++) {
        MXC_TRY(make_node_op(x, k, true, &x->train_ops[k]));
        if (k < g->num_forward)
            MXC_TRY(make_node_op(x, k, false, &x->infer_ops[k]));
    }
    for (int b = 0; b < nb; b++) {
        mxc_var *v = mxc__nd_var(x->blocks[b]);
        mxc_engine_op_desc d = {.fn = release_block,
                                .ctx = x->ctx,
                                .mutable_vars = &v,
                                .num_mutable_vars = 1,
                                .name = "release"};
        x->release[b] = (struct node_op){.exec = x, .node = b};
        MXC_TRY(new_cached_op(x, &d, &x->release[b]));
        x->release_start[x->plan.last_use[b] + 1]++;
    }
    /* counting sort of the blocks by their last user */
    for (int k = 0; k < g->num_nodes; k++)
        x->release_start[k + 1] += x->release_start[k];
    {
        int *fill = mxc__malloc(sizeof(int) * ((size_t)g->num_nodes + 1));
        MXC_CHECK(fill != NULL, MXC_ENOMEM, "out of memory");
        memcpy(fill, x->release_start, sizeof(int) * (size_t)g->num_nodes);
        for (int b = 0; b < nb; b++)
            x->release_list[fill[x->plan.last_use[b]]++] = b;
        mxc__free(fill);
    }
fail:
    return rc;
}

/* The dtype the symbol declares for each argument and auxiliary state: its __dtype__
 * hint or what type inference deduces from the hints, else float32 (MXNet's default, and
 * the type every operator computes in). */
static int declared_types(const struct mxc__graph *fg, int *arg_t, int *aux_t) {
    int *t = mxc__malloc(sizeof(int) * ((size_t)fg->num_entries + 1));
    if (t == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory");
    for (int e = 0; e < fg->num_entries; e++)
        t[e] = -1;
    int rc = mxc__graph_infer_type(fg, t, NULL);
    for (int i = 0; rc == MXC_OK && i < fg->num_args + fg->num_aux; i++) {
        bool is_arg = i < fg->num_args;
        int v = t[fg->entry_ptr[is_arg ? fg->arg_nodes[i] : fg->aux_nodes[i - fg->num_args]]];
        *(is_arg ? &arg_t[i] : &aux_t[i - fg->num_args]) = v < 0 ? MXC_FLOAT32 : v;
    }
    mxc__free(t);
    return rc;
}

/* Array `a`, bound as `what` `name`, has the dtype `want`: else MXC_ETYPE naming both. */
static int check_dtype(const mxc_ndarray *a, const char *what, const char *name, int want,
                       const char *whose) {
    if (a->dtype == want)
        return MXC_OK;
    return mxc__error(MXC_ETYPE, "%s %s is %s but %s %s", what, name, mxc_dtype_name(a->dtype),
                      whose, mxc_dtype_name(want));
}

/* Every operator node computes in its inputs' dtype on ctx, and a backward node has a
 * backward kernel there: otherwise MXC_ENOTSUP at bind, never a fallback at run time. */
static int check_kernels(const mxc_executor *x) {
    const bool gpu = x->ctx.dev_type == MXC_GPU;
    for (int k = 0; k < x->g.num_nodes; k++) {
        const struct mxc__xnode *n = &x->g.nodes[k];
        if (n->op == NULL)
            continue;
        /* the dtype of the forward node's input 0 decides for both passes (a backward
         * node's input 0 is an output gradient: Cast's has the output's dtype) */
        const struct mxc__xnode *f = n->kind == MXC__X_BACKWARD ? &x->g.nodes[n->fwd] : n;
        int t = f->num_in > 0 && f->in[0] >= 0 ? x->g.entries[f->in[0]].dtype : MXC_FLOAT32;
        /* backward kernels exist on some device where a gradient is needed
         * (mxc__xgraph_build checks); here: on this one */
        bool has = mxc_op_supports(n->op->name, x->ctx, t) &&
                   (n->kind != MXC__X_BACKWARD ||
                    (gpu ? n->op->backward_gpu : n->op->backward_cpu) != NULL);
        if (!has) {
            char dev[32];
            return mxc__error(MXC_ENOTSUP, "node %s: %s has no %s%s kernel for %s on %s", n->name,
                              n->op->name, n->kind == MXC__X_BACKWARD ? "backward " : "",
                              gpu ? "GPU" : "CPU", mxc_dtype_name(t),
                              mxc__ctx_name(x->ctx, dev, sizeof dev));
        }
    }
    return MXC_OK;
}

/* Binds arrays already checked against the symbol's lists (counts, handles, shapes of
 * gradients); checks their dtypes against the declared ones. */
static int bind_arrays(mxc_symbol *sym, mxc_context ctx, mxc_ndarray *const *args,
                       mxc_ndarray *const *grads, const int *reqs, mxc_ndarray *const *aux,
                       mxc_executor **out) {
    int rc = MXC_OK;
    mxc_shape *arg_s = NULL, *aux_s = NULL;
    int *arg_t = NULL, *aux_t = NULL;
    mxc_executor *x = mxc__handle_alloc(&exec_kind);
    MXC_CHECK(x != NULL, MXC_ENOMEM, "out of memory");
    mxc__mutex_init(&x->ops_lock);
    mxc__cond_init(&x->ops_cond);
    mxc__handle_publish(&exec_kind, x); /* mxc_executor_free cleans up a partial one */
    x->ctx = ctx;
    MXC_TRY(mxc_engine_get_default(&x->engine));
    MXC_TRY(mxc_symbol_copy(sym, &x->sym));
    MXC_TRY(mxc__graph_build(sym, &x->fg));
    const struct mxc__graph *fg = x->fg;
    int na = fg->num_args, nx = fg->num_aux;
    arg_s = mxc__malloc(sizeof *arg_s * ((size_t)na + 1));
    arg_t = mxc__malloc(sizeof *arg_t * ((size_t)na + 1));
    aux_s = mxc__malloc(sizeof *aux_s * ((size_t)nx + 1));
    aux_t = mxc__malloc(sizeof *aux_t * ((size_t)nx + 1));
    MXC_CHECK(arg_s && arg_t && aux_s && aux_t, MXC_ENOMEM, "out of memory");
    MXC_TRY(declared_types(fg, arg_t, aux_t));
    bool any_grad = false;
    for (int i = 0; i < na; i++) {
        const char *name = fg->nodes[fg->arg_nodes[i]].name;
        MXC_TRY(check_dtype(args[i], "argument", name, arg_t[i], "the symbol declares"));
        if (reqs[i] != MXC_GRAD_NULL)
            MXC_TRY(check_dtype(grads[i], "the gradient of", name, arg_t[i], "the argument is"));
        arg_s[i] = args[i]->shape;
        any_grad |= reqs[i] != MXC_GRAD_NULL;
    }
    for (int i = 0; i < nx; i++) {
        MXC_TRY(check_dtype(aux[i], "auxiliary state", fg->nodes[fg->aux_nodes[i]].name, aux_t[i],
                            "the symbol declares"));
        aux_s[i] = aux[i]->shape;
    }
    MXC_TRY(mxc__xgraph_build(fg, arg_s, arg_t, aux_s, any_grad ? reqs : NULL, &x->g));
    x->has_backward = x->g.num_nodes > x->g.num_forward;
    MXC_TRY(check_kernels(x));
    MXC_TRY(make_plan(x));
    MXC_TRY(make_arrays(x, args, grads, aux));
    MXC_TRY(make_ops(x));
    *out = x;
fail:
    mxc__free(arg_s);
    mxc__free(arg_t);
    mxc__free(aux_s);
    mxc__free(aux_t);
    if (rc != MXC_OK)
        mxc_executor_free(x);
    return rc;
}

static bool same_shape(const mxc_shape *a, const mxc_shape *b) {
    return a->ndim == b->ndim &&
           memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)(a->ndim > 0 ? a->ndim : 0)) == 0;
}

/* An executor computes on the CPU or on a GPU this process can use. */
static int check_exec_ctx(mxc_context ctx) {
    char name[32];
    if (ctx.dev_type == MXC_CPU || ctx.dev_type == 0) /* 0: the CPU, as everywhere */
        return MXC_OK;
    if (ctx.dev_type != MXC_GPU)
        return mxc__error(MXC_ENOTSUP, "an executor computes on cpu or gpu contexts, not on %s",
                          mxc__ctx_name(ctx, name, sizeof name));
    int n = mxc_gpu_count();
    if (ctx.dev_id < 0 || ctx.dev_id >= n)
        return mxc__error(MXC_ENODEV, "no device %s: %d GPU%s usable%s",
                          mxc__ctx_name(ctx, name, sizeof name), n, n == 1 ? " is" : "s are",
#ifdef MXC_USE_CUDA
                          ""
#else
                          " (mxc was built without CUDA: USE_CUDA=1)"
#endif
        );
    return MXC_OK;
}

/* A checked array `a` (named `what` `name`) must live where the executor computes. */
static int check_array_ctx(const mxc_ndarray *a, mxc_context ctx, const char *what,
                           const char *name) {
    if (mxc__ctx_same_device(a->chunk->ctx, ctx))
        return MXC_OK;
    char b1[32], b2[32];
    return mxc__error(MXC_EINVAL, "%s %s is on %s but the executor computes on %s", what, name,
                      mxc__ctx_name(a->chunk->ctx, b1, sizeof b1),
                      mxc__ctx_name(ctx, b2, sizeof b2));
}

/* Checks the caller's arrays against the symbol's lists and the context. */
static int check_bind_args(mxc_symbol *sym, mxc_context ctx, int num_args, mxc_ndarray *const *args,
                           mxc_ndarray *const *grads, const int *reqs, int num_aux,
                           mxc_ndarray *const *aux) {
    int n_args, n_aux;
    const char *const *arg_names, *const *aux_names;
    int rc = mxc_symbol_list_arguments(sym, &n_args, &arg_names);
    if (rc == MXC_OK)
        rc = mxc_symbol_list_auxiliary_states(sym, &n_aux, &aux_names);
    if (rc != MXC_OK)
        return rc;
    if (num_args != n_args || num_aux != n_aux)
        return mxc__error(MXC_EINVAL,
                          "the symbol has %d arguments and %d auxiliary states, %d and %d given",
                          n_args, n_aux, num_args, num_aux);
    if ((num_args > 0 && args == NULL) || (num_aux > 0 && aux == NULL))
        return mxc__error(MXC_EINVAL, "NULL array list");
    const char *fn = "mxc_executor_bind";
    for (int i = 0; i < num_args; i++) {
        rc = mxc__nd_check(args[i], fn, arg_names[i]);
        if (rc == MXC_OK)
            rc = check_array_ctx(args[i], ctx, "argument", arg_names[i]);
        if (rc != MXC_OK)
            return rc;
        int req = reqs ? reqs[i] : grads ? MXC_GRAD_WRITE : MXC_GRAD_NULL;
        if (req != MXC_GRAD_NULL && req != MXC_GRAD_WRITE && req != MXC_GRAD_ADD)
            return mxc__error(MXC_EINVAL, "grad_req %d of %s is not null (0), write (1) or add (3)",
                              req, arg_names[i]);
        if (req == MXC_GRAD_NULL)
            continue;
        if (grads == NULL)
            return mxc__error(MXC_EINVAL, "%s wants a gradient but no gradient arrays are given",
                              arg_names[i]);
        rc = mxc__nd_check(grads[i], fn, "gradient");
        if (rc == MXC_OK)
            rc = check_array_ctx(grads[i], ctx, "the gradient of", arg_names[i]);
        if (rc != MXC_OK)
            return rc;
        char b1[128], b2[128];
        if (!same_shape(&grads[i]->shape, &args[i]->shape))
            return mxc__error(MXC_ESHAPE, "the gradient of %s is %s, the argument %s", arg_names[i],
                              mxc__shape_str(&grads[i]->shape, b1, sizeof b1),
                              mxc__shape_str(&args[i]->shape, b2, sizeof b2));
    }
    for (int i = 0; i < num_aux && rc == MXC_OK; i++) {
        rc = mxc__nd_check(aux[i], fn, aux_names[i]);
        if (rc == MXC_OK)
            rc = check_array_ctx(aux[i], ctx, "auxiliary state", aux_names[i]);
    }
    return rc;
}

static int bind(mxc_symbol *sym, mxc_context ctx, int num_args, mxc_ndarray *const *args,
                mxc_ndarray *const *arg_grads, const int *grad_reqs, int num_aux,
                mxc_ndarray *const *aux, mxc_executor **out) {
    int rc = check_exec_ctx(ctx);
    if (rc == MXC_OK)
        rc = mxc__symbol_check(sym, "mxc_executor_bind", "symbol");
    if (rc == MXC_OK)
        rc = check_bind_args(sym, ctx, num_args, args, arg_grads, grad_reqs, num_aux, aux);
    if (rc != MXC_OK)
        return rc;
    int *reqs = mxc__malloc(sizeof(int) * ((size_t)num_args + 1));
    if (reqs == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory");
    for (int i = 0; i < num_args; i++)
        reqs[i] = grad_reqs ? grad_reqs[i] : arg_grads ? MXC_GRAD_WRITE : MXC_GRAD_NULL;
    rc = bind_arrays(sym, ctx, args, arg_grads, reqs, aux, out);
    mxc__free(reqs);
    return rc;
}

int mxc_executor_bind(mxc_symbol *sym, mxc_context ctx, int num_args, mxc_ndarray *const *args,
                      mxc_ndarray *const *arg_grads, const int *grad_reqs, int num_aux,
                      mxc_ndarray *const *aux, mxc_executor **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_executor_bind: out is NULL");
    *out = NULL;
    int rc = bind(sym, ctx, num_args, args, arg_grads, grad_reqs, num_aux, aux, out);
    return mxc__in_call(__func__, rc);
}

/* ---- simple_bind and reshape -------------------------------------------------------- */

/* Creates every argument (taking `keep[i]` when its shape matches), gradient and aux
 * state from the shapes inferred from the named inputs, in the declared dtypes, then
 * binds. Created arrays are zeroed only once bound, so memory that cannot exist is
 * refused by bind before anything touches it. */
static int bind_shapes(mxc_symbol *sym, mxc_context ctx, int num, const char *const *names,
                       const mxc_shape *shapes, int grad_req, const mxc_executor *keep,
                       mxc_executor **out) {
    int rc = MXC_OK;
    struct mxc__graph *fg = NULL;
    mxc_shape *es = NULL;
    mxc_ndarray **arrays = NULL;
    int *reqs = NULL, *types = NULL;
    bool *created = NULL;
    MXC_TRY(mxc__graph_build(sym, &fg));
    int na = fg->num_args, nx = fg->num_aux;
    es = mxc__calloc((size_t)fg->num_entries + 1, sizeof *es);
    arrays = mxc__calloc((size_t)(2 * na + nx) + 1, sizeof *arrays);
    created = mxc__calloc((size_t)(2 * na + nx) + 1, sizeof *created);
    reqs = mxc__calloc((size_t)na + 1, sizeof *reqs);
    types = mxc__calloc((size_t)(na + nx) + 1, sizeof *types);
    MXC_CHECK(es && arrays && created && reqs && types, MXC_ENOMEM, "out of memory");
    MXC_TRY(declared_types(fg, types, types + na));
    for (int i = 0; i < na; i++)
        reqs[i] = grad_req;
    for (int j = 0; j < num; j++) {
        MXC_CHECK(names[j] != NULL, MXC_EINVAL, "names[%d] is NULL", j);
        int found = -1;
        for (int i = 0; i < na && found < 0; i++)
            if (strcmp(fg->nodes[fg->arg_nodes[i]].name, names[j]) == 0)
                found = i;
        MXC_CHECK(found >= 0, MXC_EINVAL, "%s is not an argument of the symbol", names[j]);
        es[fg->entry_ptr[fg->arg_nodes[found]]] = shapes[j];
        reqs[found] = MXC_GRAD_NULL;
    }
    MXC_TRY(mxc__graph_infer_shape(fg, es, NULL));
    for (int i = 0; i < na + nx; i++) {
        int node = i < na ? fg->arg_nodes[i] : fg->aux_nodes[i - na];
        const mxc_shape *s = &es[fg->entry_ptr[node]];
        MXC_CHECK(s->ndim > 0, MXC_ESHAPE,
                  "the shape of %s cannot be inferred from the given input shapes",
                  fg->nodes[node].name);
        mxc_ndarray *old = NULL;
        if (keep)
            old = i < na ? keep->args[i] : keep->aux[i - na];
        int slot = i < na ? i : 2 * na + (i - na);
        if (old && old->dtype == types[i] && same_shape(&old->shape, s)) {
            MXC_TRY(retain(old, &arrays[slot]));
        } else {
            MXC_TRY(mxc_nd_create(s, types[i], ctx, 1, &arrays[slot]));
            created[slot] = true;
        }
        if (i < na && reqs[i] != MXC_GRAD_NULL) {
            MXC_TRY(mxc_nd_create(s, types[i], ctx, 1, &arrays[na + i]));
            created[na + i] = true;
        }
    }
    MXC_TRY(bind_arrays(sym, ctx, arrays, arrays + na, reqs, arrays + 2 * na, out));
    (*out)->grad_req = grad_req;
    for (int i = 0; i < 2 * na + nx; i++)
        if (created[i])
            MXC_TRY(mxc_nd_fill(arrays[i], 0));
fail:
    if (rc != MXC_OK && out && *out) {
        mxc_executor_free(*out);
        *out = NULL;
    }
    for (int i = 0; arrays && i < 2 * na + nx; i++)
        mxc_nd_free(arrays[i]);
    mxc__free(arrays);
    mxc__free(created);
    mxc__free(reqs);
    mxc__free(types);
    mxc__free(es);
    mxc__graph_free(fg);
    return rc;
}

int mxc_executor_simple_bind(mxc_symbol *sym, mxc_context ctx, int num, const char *const *names,
                             const mxc_shape *shapes, int grad_req, mxc_executor **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_executor_simple_bind: out is NULL");
    *out = NULL;
    int rc = MXC_OK;
    if (num < 0 || (num > 0 && (names == NULL || shapes == NULL)))
        rc = mxc__error(MXC_EINVAL, "bad input shape lists (num %d, names %s, shapes %s)", num,
                        names ? "given" : "NULL", shapes ? "given" : "NULL");
    else if (grad_req != MXC_GRAD_NULL && grad_req != MXC_GRAD_WRITE && grad_req != MXC_GRAD_ADD)
        rc = mxc__error(MXC_EINVAL, "grad_req %d is not null (0), write (1) or add (3)", grad_req);
    else if ((rc = check_exec_ctx(ctx)) == MXC_OK &&
             (rc = mxc__symbol_check(sym, __func__, "symbol")) == MXC_OK)
        rc = bind_shapes(sym, ctx, num, names, shapes, grad_req, NULL, out);
    return mxc__in_call(__func__, rc);
}

int mxc_executor_reshape(mxc_executor *x, int num, const char *const *names,
                         const mxc_shape *shapes, mxc_executor **out) {
    int rc = check_exec(x, __func__);
    if (rc != MXC_OK)
        return rc;
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_executor_reshape: out is NULL");
    *out = NULL;
    if (num < 0 || (num > 0 && (names == NULL || shapes == NULL)))
        rc = mxc__error(MXC_EINVAL, "bad input shape lists (num %d, names %s, shapes %s)", num,
                        names ? "given" : "NULL", shapes ? "given" : "NULL");
    else
        rc = bind_shapes(x->sym, x->ctx, num, names, shapes, x->grad_req, x, out);
    return mxc__in_call(__func__, rc);
}

/* ---- Running ------------------------------------------------------------------------ */

static int monitor_node(mxc_executor *x, int k) {
    const struct mxc__xnode *n = &x->g.nodes[k];
    for (int o = 0; o < n->num_out; o++) {
        if (n->out[o] < 0)
            continue;
        mxc_ndarray *a = x->entry[n->out[o]];
        int rc = mxc_nd_wait_to_read(a);
        if (rc != MXC_OK)
            return rc;
        char name[256];
        if (n->kind == MXC__X_BACKWARD)
            snprintf(name, sizeof name, "%s_backward_%d", n->name, o);
        else
            snprintf(name, sizeof name, "%s_output%d", n->name, o);
        x->monitor(name, a, x->monitor_user);
    }
    return MXC_OK;
}

/* Pushes nodes [begin, end), each followed by the releases of the blocks it used last. */
static int push_range(mxc_executor *x, int begin, int end, bool is_train) {
    for (int k = begin; k < end; k++) {
        struct node_op *op = is_train ? &x->train_ops[k] : &x->infer_ops[k];
        int rc = mxc_engine_push_operator(x->engine, op->opr, 0);
        if (rc == MXC_OK && x->monitor)
            rc = monitor_node(x, k);
        for (int r = x->release_start[k]; rc == MXC_OK && r < x->release_start[k + 1]; r++)
            rc = mxc_engine_push_operator(x->engine, x->release[x->release_list[r]].opr, 0);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

int mxc_executor_forward(mxc_executor *x, int is_train) {
    int rc = check_exec(x, __func__);
    if (rc != MXC_OK)
        return rc;
    /* an inference pass overwrites what the backward pass would read */
    x->can_backward = false;
    rc = push_range(x, 0, x->g.num_forward, is_train != 0);
    if (rc != MXC_OK)
        return mxc__error_wrap(rc, "%s", __func__);
    x->can_backward = is_train != 0;
    return MXC_OK;
}

int mxc_executor_backward(mxc_executor *x, int num, mxc_ndarray *const *head_grads) {
    int rc = check_exec(x, __func__);
    if (rc != MXC_OK)
        return rc;
    struct mxc__xgraph *g = &x->g;
    if (!x->has_backward)
        return mxc__error(MXC_EINVAL, "mxc_executor_backward: no gradients were bound");
    /* The backward nodes read what the last training forward wrote, and their pass
     * releases it: without a new forward(is_train = 1) they would read released or
     * never-written memory and fail at a later, unrelated wait. */
    if (!x->can_backward)
        return mxc__error(MXC_EMISUSE,
                          "mxc_executor_backward: no forward(is_train = 1) since the executor "
                          "was bound or since the last backward or inference forward");
    for (int h = 0; h < g->num_heads; h++) {
        int e = g->head_grad_entry[h];
        if (e < 0)
            continue;
        mxc_ndarray *src = h < num && head_grads ? head_grads[h] : NULL;
        if (src == NULL)
            return mxc__error(MXC_EINVAL,
                              "mxc_executor_backward: output %d needs a head "
                              "gradient",
                              h);
        rc = mxc_nd_copy_to(src, x->entry[e]);
        if (rc != MXC_OK)
            return mxc__error_wrap(rc, "mxc_executor_backward: head gradient %d", h);
    }
    x->can_backward = false;
    rc = push_range(x, g->num_forward, g->num_nodes, true);
    return mxc__in_call(__func__, rc);
}

/* ---- Inspection --------------------------------------------------------------------- */

int mxc_executor_outputs(mxc_executor *x, int *num, mxc_ndarray *const **outputs) {
    int rc = check_exec(x, __func__);
    if (rc != MXC_OK)
        return rc;
    if (num == NULL || outputs == NULL)
        return mxc__error(MXC_EINVAL, "mxc_executor_outputs: NULL argument");
    *num = x->num_outputs;
    *outputs = x->outputs;
    return MXC_OK;
}

int mxc_executor_arrays(mxc_executor *x, int *num_args, mxc_ndarray *const **args,
                        mxc_ndarray *const **grads, int *num_aux, mxc_ndarray *const **aux) {
    int rc = check_exec(x, __func__);
    if (rc != MXC_OK)
        return rc;
    if (num_args)
        *num_args = x->num_args;
    if (args)
        *args = x->args;
    if (grads)
        *grads = x->grads;
    if (num_aux)
        *num_aux = x->num_aux;
    if (aux)
        *aux = x->aux;
    return MXC_OK;
}

int mxc_executor_plan_info(const mxc_executor *x, mxc_exec_plan_info *out) {
    int rc = check_exec(x, __func__);
    if (rc != MXC_OK)
        return rc;
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_executor_plan_info: out is NULL");
    *out = (mxc_exec_plan_info){x->plan.planned_bytes, x->plan.naive_bytes, x->plan.num_blocks,
                                x->g.num_entries,      x->g.num_nodes,      x->g.num_forward};
    return MXC_OK;
}

int mxc_executor_entry_block(const mxc_executor *x, int entry) {
    if (check_exec(x, __func__) != MXC_OK || entry < 0 || entry >= x->g.num_entries)
        return -1;
    return x->plan.block_of[entry];
}

int mxc_executor_set_monitor(mxc_executor *x, mxc_executor_monitor fn, void *user) {
    int rc = check_exec(x, __func__);
    if (rc != MXC_OK)
        return rc;
    x->monitor = fn;
    x->monitor_user = user;
    return MXC_OK;
}

static const char *kind_name(int kind) {
    static const char *const names[] = {"var", "forward", "backward", "sum", "zeros"};
    return names[kind];
}

int mxc_executor_print(mxc_executor *x, const char **text) {
    int rc = check_exec(x, __func__);
    if (rc != MXC_OK)
        return rc;
    if (text == NULL)
        return mxc__error(MXC_EINVAL, "mxc_executor_print: text is NULL");
    struct mxc__buf b = {0};
    const struct mxc__xgraph *g = &x->g;
    mxc__buf_printf(&b, "executor: %d nodes (%d forward), %d entries, %d blocks\n", g->num_nodes,
                    g->num_forward, g->num_entries, x->plan.num_blocks);
    for (int k = 0; k < g->num_nodes; k++) {
        const struct mxc__xnode *n = &g->nodes[k];
        mxc__buf_printf(&b, "%4d %-8s %-16s %s:", k, kind_name(n->kind), n->op ? n->op->name : "-",
                        n->name);
        for (int pass = 0; pass < 2; pass++) {
            const int *ids = pass ? n->out : n->in;
            int cnt = pass ? n->num_out : n->num_in;
            mxc__buf_puts(&b, pass ? " ->" : "");
            for (int i = 0; i < cnt; i++) {
                if (ids[i] < 0)
                    continue;
                char s[128];
                mxc__shape_str(&g->entries[ids[i]].shape, s, sizeof s);
                int blk = x->plan.block_of[ids[i]];
                if (blk >= 0)
                    mxc__buf_printf(&b, " e%d%s[b%d]", ids[i], s, blk);
                else
                    mxc__buf_printf(&b, " e%d%s", ids[i], s);
            }
        }
        for (int r = x->release_start[k]; r < x->release_start[k + 1]; r++)
            mxc__buf_printf(&b, " ; release b%d", x->release_list[r]);
        mxc__buf_puts(&b, "\n");
    }
    for (int blk = 0; blk < x->plan.num_blocks; blk++)
        mxc__buf_printf(&b, "block %d: %zu bytes, last used by node %d\n", blk,
                        x->plan.block_bytes[blk], x->plan.last_use[blk]);
    mxc__buf_printf(&b, "planned %zu bytes, naive %zu bytes\n", x->plan.planned_bytes,
                    x->plan.naive_bytes);
    if (b.failed) {
        mxc__free(b.data);
        return mxc__error(MXC_ENOMEM, "mxc_executor_print: out of memory");
    }
    mxc__free(x->text);
    x->text = b.data;
    *text = x->text;
    return MXC_OK;
}

static void free_arrays(mxc_ndarray **a, int n) {
    for (int i = 0; a && i < n; i++)
        mxc_nd_free(a[i]);
    mxc__free(a);
}

void mxc_executor_free(mxc_executor *x) {
    if (!mxc__handle_check_free(&exec_kind, x, __func__, "executor"))
        return;
    for (int k = 0; x->train_ops && k < x->g.num_nodes; k++)
        mxc_engine_delete_operator(x->engine, x->train_ops[k].opr);
    for (int k = 0; x->infer_ops && k < x->g.num_forward; k++)
        mxc_engine_delete_operator(x->engine, x->infer_ops[k].opr);
    for (int b = 0; x->release && b < x->plan.num_blocks; b++)
        mxc_engine_delete_operator(x->engine, x->release[b].opr);
    /* Wait for this executor's own operations only, not for the engine to go idle: each
     * is freed once its last run has retired (op_retired). Takes no memory. */
    mxc__mutex_lock(&x->ops_lock);
    while (x->live_ops > 0)
        mxc__cond_wait(&x->ops_cond, &x->ops_lock);
    mxc__mutex_unlock(&x->ops_lock);
    mxc__cond_destroy(&x->ops_cond);
    mxc__mutex_destroy(&x->ops_lock);
    free_arrays(x->entry, x->g.num_entries);
    free_arrays(x->blocks, x->plan.num_blocks);
    free_arrays(x->args, x->num_args);
    free_arrays(x->grads, x->num_args);
    free_arrays(x->aux, x->num_aux);
    free_arrays(x->outputs, x->num_outputs);
    mxc__free(x->train_ops);
    mxc__free(x->infer_ops);
    mxc__free(x->release);
    mxc__free(x->release_start);
    mxc__free(x->release_list);
    mxc__free(x->text);
    mxc__plan_free(&x->plan);
    mxc__xgraph_free(&x->g);
    mxc__graph_free(x->fg);
    mxc_symbol_free(x->sym);
    mxc__handle_free(&exec_kind, x);
}

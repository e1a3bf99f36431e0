/*
 * ndarray/ndarray.c — arrays as views on reference-counted chunks, and mxc__nd_push,
 * which turns a kernel call on arrays into one engine operation: inputs' variables read,
 * outputs' (and requested resources') variables written, delayed memory taken when it
 * runs. A chunk is freed by a delete operation on its variable, so it outlives every
 * operation pushed on it before its last view went away.
 */
#include "ndarray/ndarray_impl.h"

#include "ndarray/autograd_impl.h"

#include "common/handle.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* ---- Chunks ------------------------------------------------------------------------ */

static int chunk_delete_fn(const mxc_run_ctx *rctx, void *arg) {
    struct nd_chunk *c = arg;
    mxc_storage_free(&c->block);
    mxc__free(c);
    return MXC_OK;
}

static void chunk_unref(struct nd_chunk *c) {
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    /* The memory goes back after every operation already pushed on the chunk. */
    if (mxc_engine_delete_var(c->engine, c->var, chunk_delete_fn, c) != MXC_OK)
        mxc__log(MXC_LOG_ERROR, "ndarray: cannot schedule a free (%s); %zu bytes leaked",
                 mxc_last_error(), c->nbytes);
}

static int chunk_alloc_memory(struct nd_chunk *c) {
    if (c->block.ptr != NULL || c->nbytes == 0)
        return MXC_OK;
    return mxc_storage_alloc(c->ctx, c->nbytes, &c->block);
}

static int chunk_create(size_t nbytes, mxc_context ctx, bool delay_alloc, struct nd_chunk **out) {
    int rc = MXC_OK;
    *out = NULL;
    struct nd_chunk *c = mxc__calloc(1, sizeof *c);
    MXC_CHECK(c != NULL, MXC_ENOMEM, "ndarray: out of memory");
    atomic_init(&c->refs, 1);
    atomic_init(&c->ag_saved, 0);
    c->nbytes = nbytes;
    c->ctx = ctx;
    MXC_TRY(mxc_engine_get_default(&c->engine));
    if (!delay_alloc)
        MXC_TRY(chunk_alloc_memory(c));
    MXC_TRY(mxc_engine_new_var(c->engine, &c->var));
    *out = c;
    return MXC_OK;
fail:
    if (c)
        mxc_storage_free(&c->block);
    mxc__free(c);
    return rc;
}

/* ---- Arrays ------------------------------------------------------------------------ */

static mxc__handle_kind nd_kind =
    MXC__HANDLE_KIND(struct mxc_ndarray, "an array", ND_MAGIC, ND_DEAD);

int mxc__nd_check(const mxc_ndarray *a, const char *fn, const char *what) {
    return mxc__handle_check(&nd_kind, a, fn, what);
}

size_t mxc__nd_nbytes(const mxc_ndarray *a) {
    return (size_t)mxc_shape_size(&a->shape) * mxc_dtype_size(a->dtype);
}

static int view_create(struct nd_chunk *chunk, const mxc_shape *shape, int dtype, size_t offset,
                       mxc_ndarray **out) {
    mxc_ndarray *a = mxc__handle_alloc(&nd_kind);
    if (a == NULL)
        return mxc__error(MXC_ENOMEM, "ndarray: out of memory");
    atomic_fetch_add_explicit(&chunk->refs, 1, memory_order_relaxed);
    a->chunk = chunk;
    a->shape = *shape;
    a->dtype = dtype;
    a->offset = offset;
    mxc__handle_publish(&nd_kind, a);
    *out = a;
    return MXC_OK;
}

int mxc__nd_view(const mxc_ndarray *base, size_t offset, const mxc_shape *shape, int dtype,
                 mxc_ndarray **out) {
    size_t bytes = (size_t)mxc_shape_size(shape) * mxc_dtype_size(dtype);
    if (base->offset + offset + bytes > base->chunk->nbytes)
        return mxc__error(MXC_EINTERNAL,
                          "ndarray: a view of %zu bytes at %zu does not fit "
                          "in a chunk of %zu",
                          bytes, base->offset + offset, base->chunk->nbytes);
    return view_create(base->chunk, shape, dtype, base->offset + offset, out);
}

mxc_var *mxc__nd_var(const mxc_ndarray *a) { return a->chunk->var; }

void mxc__nd_release_memory(const mxc_ndarray *a) { mxc_storage_free(&a->chunk->block); }

/* Where the data of an array without elements points: a valid address that nothing
 * reads or writes. So every kernel may compute `data + 0` and pass it to memcpy / memset
 * with 0 bytes, which on NULL would be undefined behaviour (clang's UBSan stops there);
 * one place instead of an n == 0 test in every kernel. Read-only, so a kernel that wrote
 * to an empty output would fault at once instead of corrupting it quietly; 64-byte
 * aligned like the pool's blocks, for kernels that assume it. */
static const _Alignas(64) char no_elements[64];

int mxc__nd_tensor(const mxc_ndarray *a, bool written, struct mxc__tensor *out) {
    struct nd_chunk *c = a->chunk;
    if (!written && c->block.ptr == NULL && c->nbytes > 0)
        return mxc__error(MXC_EINVAL, "an array is read before anything wrote it");
    int rc = chunk_alloc_memory(c); /* delayed memory is taken now */
    if (rc != MXC_OK)
        return rc;
    int64_t n = mxc_shape_size(&a->shape);
    void *data = n == 0 ? (void *)no_elements : (char *)c->block.ptr + a->offset;
    *out = (struct mxc__tensor){data, a->shape, a->dtype, c->ctx, n};
    return MXC_OK;
}

static int check_shape(const mxc_shape *shape, const char *fn) {
    if (shape == NULL)
        return mxc__error(MXC_EINVAL, "%s: shape is NULL", fn);
    if (shape->ndim < 0 || shape->ndim > MXC_MAX_NDIM)
        return mxc__error(MXC_EINVAL, "%s: ndim %d outside [0, %d]", fn, shape->ndim, MXC_MAX_NDIM);
    char buf[128];
    if (mxc_shape_size(shape) < 0)
        return mxc__error(MXC_EINVAL,
                          "%s: shape %s has a negative dimension or too many "
                          "elements",
                          fn, mxc__shape_str(shape, buf, sizeof buf));
    return MXC_OK;
}

int mxc__nd_create(const char *fn, const mxc_shape *shape, int dtype, mxc_context ctx,
                   bool delay_alloc, mxc_ndarray **out) {
    int rc = MXC_OK;
    struct nd_chunk *chunk = NULL;
    char buf[128];
    MXC_CHECK(out != NULL, MXC_EINVAL, "out is NULL");
    *out = NULL;
    MXC_TRY(check_shape(shape, fn));
    MXC_CHECK(mxc_dtype_size(dtype) != 0, MXC_EINVAL, "unknown dtype %d", dtype);
    if (ctx.dev_type == 0)
        ctx = mxc_cpu();
    MXC_CHECK(ctx.dev_type == MXC_CPU || ctx.dev_type == MXC_GPU || ctx.dev_type == MXC_CPU_PINNED,
              MXC_EINVAL, "unknown device type %d", ctx.dev_type);
    MXC_CHECK(ctx.dev_type != MXC_GPU || (ctx.dev_id >= 0 && ctx.dev_id < mxc_gpu_count()),
              MXC_ENODEV, "gpu(%d) does not exist (%d usable)", ctx.dev_id, mxc_gpu_count());
    int64_t n = mxc_shape_size(shape);
    MXC_CHECK((uint64_t)n <= SIZE_MAX / mxc_dtype_size(dtype), MXC_ENOMEM,
              "a %s %s array needs more bytes than a size_t holds",
              mxc__shape_str(shape, buf, sizeof buf), mxc_dtype_name(dtype));
    MXC_TRY(chunk_create((size_t)n * mxc_dtype_size(dtype), ctx, delay_alloc, &chunk));
    rc = view_create(chunk, shape, dtype, 0, out);
    chunk_unref(chunk); /* the view holds it now, or nobody does */
fail:
    return mxc__in_call(fn, rc);
}

int mxc_nd_create(const mxc_shape *shape, int dtype, mxc_context ctx, int delay_alloc,
                  mxc_ndarray **out) {
    return mxc__nd_create(__func__, shape, dtype, ctx, delay_alloc != 0, out);
}

void mxc_nd_free(mxc_ndarray *a) {
    if (!mxc__handle_check_free(&nd_kind, a, __func__, "array"))
        return;
    struct nd_chunk *chunk = a->chunk;
    mxc__ag_forget(a);
    mxc__handle_free(&nd_kind, a);
    chunk_unref(chunk);
}

int mxc_nd_reshape(const mxc_ndarray *a, const mxc_shape *shape, mxc_ndarray **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_nd_reshape: out is NULL");
    *out = NULL;
    int rc = mxc__nd_check(a, __func__, "array");
    if (rc == MXC_OK)
        rc = check_shape(shape, __func__);
    if (rc != MXC_OK)
        return rc;
    if (mxc_shape_size(shape) != mxc_shape_size(&a->shape)) {
        char b1[128], b2[128];
        return mxc__error(MXC_ESHAPE,
                          "mxc_nd_reshape: cannot view %s as %s (%lld vs %lld "
                          "elements)",
                          mxc__shape_str(&a->shape, b1, sizeof b1),
                          mxc__shape_str(shape, b2, sizeof b2),
                          (long long)mxc_shape_size(&a->shape), (long long)mxc_shape_size(shape));
    }
    rc = view_create(a->chunk, shape, a->dtype, a->offset, out);
    if (rc == MXC_OK)
        rc = mxc__ag_record_view(a, *out, __func__);
    if (rc != MXC_OK) {
        mxc_nd_free(*out);
        *out = NULL;
    }
    return rc;
}

/* Rows [begin, end) of the first axis; `drop_axis` removes it (for at). */
static int first_axis_view(const mxc_ndarray *a, int64_t begin, int64_t end, bool drop_axis,
                           const char *fn, mxc_ndarray **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "%s: out is NULL", fn);
    *out = NULL;
    int rc = mxc__nd_check(a, fn, "array");
    if (rc != MXC_OK)
        return rc;
    if (a->shape.ndim == 0)
        return mxc__error(MXC_EINVAL, "%s: the array has no axis to index", fn);
    rc = mxc__ag_record_view(a, NULL, fn);
    if (rc != MXC_OK)
        return rc;
    int64_t rows = a->shape.dims[0];
    if (begin < 0 || end > rows || begin > end || (drop_axis && begin >= rows))
        return mxc__error(MXC_EINVAL,
                          "%s: range [%lld, %lld) outside the first axis of "
                          "length %lld",
                          fn, (long long)begin, (long long)end, (long long)rows);
    mxc_shape s = a->shape;
    int64_t row_elems = rows ? mxc_shape_size(&s) / rows : 0;
    if (drop_axis && s.ndim == 1) {
        s.dims[0] = 1; /* as MXNet: one element of a vector is a (1) array, not empty */
    } else if (drop_axis) {
        for (int i = 1; i < s.ndim; i++)
            s.dims[i - 1] = s.dims[i];
        s.ndim--;
    } else {
        s.dims[0] = end - begin;
    }
    size_t offset = a->offset + (size_t)(begin * row_elems) * mxc_dtype_size(a->dtype);
    return view_create(a->chunk, &s, a->dtype, offset, out);
}

int mxc_nd_slice(const mxc_ndarray *a, int64_t begin, int64_t end, mxc_ndarray **out) {
    return first_axis_view(a, begin, end, false, __func__, out);
}

int mxc_nd_at(const mxc_ndarray *a, int64_t index, mxc_ndarray **out) {
    /* index + 1 would overflow for INT64_MAX, which is out of range anyway. */
    return first_axis_view(a, index, index < INT64_MAX ? index + 1 : index, true, __func__, out);
}

int mxc_nd_get_shape(const mxc_ndarray *a, mxc_shape *out) {
    int rc = mxc__nd_check(a, __func__, "array");
    if (rc != MXC_OK)
        return rc;
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_nd_get_shape: out is NULL");
    *out = a->shape;
    return MXC_OK;
}

int mxc_nd_dtype(const mxc_ndarray *a) {
    return mxc__nd_check(a, __func__, "array") == MXC_OK ? a->dtype : -1;
}

int mxc_nd_get_context(const mxc_ndarray *a, mxc_context *out) {
    int rc = mxc__nd_check(a, __func__, "array");
    if (rc != MXC_OK)
        return rc;
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_nd_get_context: out is NULL");
    *out = a->chunk->ctx;
    return MXC_OK;
}

int64_t mxc_nd_size(const mxc_ndarray *a) {
    return mxc__nd_check(a, __func__, "array") == MXC_OK ? mxc_shape_size(&a->shape) : -1;
}

/* ---- Pushing kernels --------------------------------------------------------------- */

struct nd_view {
    struct nd_chunk *chunk;
    mxc_shape shape;
    int dtype;
    size_t offset;
};

/* The closure of one pushed operation: views, resources and params in one allocation. */
struct nd_closure {
    mxc__nd_kernel kernel;
    int num_inputs, num_outputs, num_resources;
    struct nd_view *views; /* inputs then outputs */
    struct mxc__resource **resources;
    void *params;
    struct mxc__nd_status *status;
};

static void closure_free(void *arg) { mxc__free(arg); }

static int closure_call(struct nd_closure *c, const mxc_run_ctx *rctx) {
    struct mxc__tensor tensors[2 * MXC__ND_MAX_OPERANDS];
    int n = c->num_inputs + c->num_outputs;
    for (int i = 0; i < n; i++) {
        struct nd_view *v = &c->views[i];
        mxc_ndarray a = {ND_MAGIC, v->chunk, v->shape, v->dtype, v->offset, NULL, 0};
        int rc = mxc__nd_tensor(&a, i >= c->num_inputs, &tensors[i]);
        if (rc != MXC_OK)
            return rc;
    }
    struct mxc__nd_call call = {
        rctx,           c->params,    tensors,         c->num_inputs, tensors + c->num_inputs,
        c->num_outputs, c->resources, c->num_resources};
    return c->kernel(&call);
}

static int closure_run(const mxc_run_ctx *rctx, void *arg) {
    struct nd_closure *c = arg;
    int rc = closure_call(c, rctx);
    if (c->status) {
        c->status->code = rc;
        if (rc != MXC_OK)
            snprintf(c->status->message, sizeof c->status->message, "%s", mxc_last_error());
    }
    return rc;
}

/* Closure parts start at malloc's alignment, which operator parameter structs may need. */
static size_t align_part(size_t n) {
    size_t a = _Alignof(max_align_t);
    return (n + a - 1) & ~(a - 1);
}

int mxc__nd_push(const struct mxc__nd_op *op, const mxc_ndarray *const *inputs, int num_inputs,
                 mxc_ndarray *const *outputs, int num_outputs) {
    int rc = MXC_OK;
    int n = num_inputs + num_outputs;
    const int max = MXC__ND_MAX_OPERANDS;
    MXC_CHECK(n > 0 && num_inputs >= 0 && num_inputs <= max && num_outputs >= 0 &&
                  num_outputs <= max && op->num_resources >= 0 && op->num_resources <= max,
              MXC_EINTERNAL,
              "%s: %d inputs, %d outputs and %d resources (at most %d of each, one array at least)",
              op->name, num_inputs, num_outputs, op->num_resources, max);
    /* what the autograd tape keeps for a backward must stay as it was recorded */
    for (int i = 0; i < num_outputs; i++)
        MXC_CHECK(atomic_load_explicit(&outputs[i]->chunk->ag_saved, memory_order_relaxed) == 0,
                  MXC_EINVAL,
                  "%s: output %d is an array a recorded operation keeps for its backward; run "
                  "backward (or free the recorded results) before writing it",
                  op->name, i);
    mxc_var *reads[2 * MXC__ND_MAX_OPERANDS], *writes[2 * MXC__ND_MAX_OPERANDS];
    int num_reads = num_inputs;
    struct mxc__resource *res[MXC__ND_MAX_OPERANDS];
    for (int i = 0; i < op->num_resources; i++)
        MXC_TRY(mxc__resource_get(op->run_ctx, op->resources[i], &res[i]));

    size_t views_at = align_part(sizeof(struct nd_closure));
    size_t res_at = views_at + align_part((size_t)n * sizeof(struct nd_view));
    size_t params_at = res_at + align_part((size_t)op->num_resources * sizeof(void *));
    char *mem = mxc__malloc(params_at + op->params_size);
    MXC_CHECK(mem != NULL, MXC_ENOMEM, "%s: out of memory", op->name);
    struct nd_closure *c = (struct nd_closure *)mem;
    c->kernel = op->kernel;
    c->num_inputs = num_inputs;
    c->num_outputs = num_outputs;
    c->num_resources = op->num_resources;
    c->views = (struct nd_view *)(mem + views_at);
    c->resources = (struct mxc__resource **)(mem + res_at);
    c->params = mem + params_at;
    c->status = op->status;
    if (op->params_size)
        memcpy(c->params, op->params, op->params_size);
    for (int i = 0; i < n; i++) {
        const mxc_ndarray *a = i < num_inputs ? inputs[i] : outputs[i - num_inputs];
        /* No reference is taken: the chunk's delete is pushed on its variable, so it runs
         * after this operation whatever happens to the views meanwhile. */
        c->views[i] = (struct nd_view){a->chunk, a->shape, a->dtype, a->offset};
        if (i < num_inputs) {
            reads[i] = a->chunk->var;
        } else {
            writes[i - num_inputs] = a->chunk->var;
            /* An output not overwritten whole counts as read too: the engine then keeps
             * a failure its chunk carries, and skips the operation on it. */
            bool whole = a->offset == 0 && mxc__nd_nbytes(a) == a->chunk->nbytes;
            if (i - num_inputs >= op->num_overwritten || !whole)
                reads[num_reads++] = a->chunk->var;
        }
    }
    for (int i = 0; i < op->num_resources; i++) {
        c->resources[i] = res[i];
        writes[num_outputs + i] = res[i]->var;
    }
    mxc_engine *eng = c->views[0].chunk->engine;
    mxc_engine_op_desc d = {.fn = closure_run,
                            .arg = c,
                            .arg_free = closure_free,
                            .ctx = op->run_ctx,
                            .const_vars = reads,
                            .num_const_vars = num_reads,
                            .mutable_vars = writes,
                            .num_mutable_vars = num_outputs + op->num_resources,
                            .prop = op->prop,
                            .name = op->name,
                            .overwrite = op->num_overwritten > 0};
    rc = mxc_engine_push(eng, &d);
    if (rc != MXC_OK)
        closure_free(c);
    return rc;
fail:
    return rc;
}

/* ---- Waiting and copies ------------------------------------------------------------ */

static int wait_chunk(const mxc_ndarray *a, const char *fn) {
    int rc = mxc__nd_check(a, fn, "array");
    if (rc != MXC_OK)
        return rc;
    return mxc_engine_wait_for_var(a->chunk->engine, a->chunk->var);
}

int mxc_nd_wait_to_read(const mxc_ndarray *a) { return wait_chunk(a, __func__); }

int mxc_nd_wait_to_write(const mxc_ndarray *a) { return wait_chunk(a, __func__); }

int mxc_nd_wait_all(void) {
    mxc_engine *eng;
    int rc = mxc_engine_get_default(&eng);
    return rc == MXC_OK ? mxc_engine_wait_all(eng) : rc;
}

struct host_copy {
    void *host;
    bool to_host;
};

static int host_copy_kernel(const struct mxc__nd_call *call) {
    const struct host_copy *p = call->params;
    const struct mxc__tensor *t = p->to_host ? &call->inputs[0] : &call->outputs[0];
    size_t nbytes = (size_t)t->size * mxc_dtype_size(t->dtype);
    if (p->to_host)
        return mxc__copy_bytes(p->host, mxc_cpu(), t->data, t->ctx, nbytes, call->rctx->stream);
    return mxc__copy_bytes(t->data, t->ctx, p->host, mxc_cpu(), nbytes, call->rctx->stream);
}

static int sync_copy(mxc_ndarray *a, void *host, size_t nbytes, bool to_host, const char *fn) {
    int rc = mxc__nd_check(a, fn, "array");
    if (rc != MXC_OK)
        return rc;
    if (host == NULL && nbytes > 0)
        return mxc__error(MXC_EINVAL, "%s: data is NULL", fn);
    if (nbytes != mxc__nd_nbytes(a)) {
        char buf[128];
        return mxc__error(MXC_ESHAPE, "%s: %zu bytes given, the %s %s array holds %zu", fn, nbytes,
                          mxc__shape_str(&a->shape, buf, sizeof buf), mxc_dtype_name(a->dtype),
                          mxc__nd_nbytes(a));
    }
    struct host_copy p = {host, to_host};
    bool gpu = a->chunk->ctx.dev_type == MXC_GPU;
    struct mxc__nd_op op = {
        .name = to_host ? "copy_to_cpu" : "copy_from_cpu",
        .kernel = host_copy_kernel,
        .params = &p,
        .params_size = sizeof p,
        .prop = !gpu      ? MXC_PROP_NORMAL
                : to_host ? MXC_PROP_COPY_FROM_DEVICE
                          : MXC_PROP_COPY_TO_DEVICE,
        .run_ctx = a->chunk->ctx,
        .num_overwritten = to_host ? 0 : 1,
    };
    struct mxc__nd_status status = {MXC_OK, ""}; /* a read-only copy marks no variable
                                                   failed: take its outcome here */
    op.status = &status;
    const mxc_ndarray *in = a;
    rc = to_host ? mxc__nd_push(&op, &in, 1, NULL, 0) : mxc__nd_push(&op, NULL, 0, &a, 1);
    if (rc != MXC_OK)
        return rc;
    rc = mxc_engine_wait_for_var(a->chunk->engine, a->chunk->var);
    if (rc == MXC_OK && status.code != MXC_OK)
        rc = mxc__error(status.code, "%s: %s", fn, status.message);
    return rc;
}

int mxc_nd_sync_copy_from_cpu(mxc_ndarray *a, const void *data, size_t nbytes) {
    return sync_copy(a, (void *)data, nbytes, false, __func__);
}

int mxc_nd_sync_copy_to_cpu(const mxc_ndarray *a, void *data, size_t nbytes) {
    /* Pushed as a read of the array: `a` is not modified. */
    return sync_copy((mxc_ndarray *)a, data, nbytes, true, __func__);
}

static int array_copy_kernel(const struct mxc__nd_call *call) {
    const struct mxc__tensor *src = &call->inputs[0], *dst = &call->outputs[0];
    return mxc__copy_bytes(dst->data, dst->ctx, src->data, src->ctx,
                           (size_t)src->size * mxc_dtype_size(src->dtype), call->rctx->stream);
}

int mxc_nd_copy_to(const mxc_ndarray *src, mxc_ndarray *dst) {
    int rc = mxc__nd_check(src, __func__, "src");
    if (rc == MXC_OK)
        rc = mxc__nd_check(dst, __func__, "dst");
    if (rc != MXC_OK)
        return rc;
    char b1[128], b2[128];
    if (mxc_shape_size(&src->shape) != mxc_shape_size(&dst->shape) ||
        src->shape.ndim != dst->shape.ndim ||
        memcmp(src->shape.dims, dst->shape.dims, sizeof(int64_t) * (size_t)src->shape.ndim))
        return mxc__error(MXC_ESHAPE, "mxc_nd_copy_to: src %s and dst %s differ",
                          mxc__shape_str(&src->shape, b1, sizeof b1),
                          mxc__shape_str(&dst->shape, b2, sizeof b2));
    if (src->dtype != dst->dtype)
        return mxc__error(MXC_ETYPE, "mxc_nd_copy_to: src is %s, dst is %s",
                          mxc_dtype_name(src->dtype), mxc_dtype_name(dst->dtype));
    mxc_context s = src->chunk->ctx, d = dst->chunk->ctx;
    bool s_gpu = s.dev_type == MXC_GPU, d_gpu = d.dev_type == MXC_GPU;
    struct mxc__nd_op op = {
        .name = "copy",
        .kernel = array_copy_kernel,
        .prop = d_gpu && !s_gpu   ? MXC_PROP_COPY_TO_DEVICE
                : s_gpu && !d_gpu ? MXC_PROP_COPY_FROM_DEVICE
                : s_gpu           ? MXC_PROP_COPY_TO_DEVICE
                                  : MXC_PROP_NORMAL,
        .run_ctx = d_gpu ? d : s,
        .num_overwritten = 1,
    };
    return mxc__nd_push(&op, &src, 1, &dst, 1);
}

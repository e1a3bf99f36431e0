/*
 * operator/tensor.c — MXNet's tensor-manipulation operators that move elements by index,
 * each a walk of operator/walk.h (float32, row-major):
 *   windows: slice, slice_axis, slice_like and flip take a strided block of data (a begin,
 *     a step and a count per axis; flip's is the whole axis backwards); the forward
 *     gathers it, the backward scatters the head gradient back and zeroes the rest;
 *   copies: broadcast_to, broadcast_like, tile and repeat read each data element several
 *     times; seen in split axes (tile: (reps, d) per axis; repeat: (d, repeats)) each is a
 *     broadcast of size-1 axes, the forward a gather with stride 0 along them and the
 *     backward the sum of every copy;
 *   stack: num_args same-shaped arrays placed side by side along a new axis.
 * Second inputs that give only a shape (slice_like's shape_like, broadcast_like's rhs) get
 * a zero gradient, as in MXNet. None works in place.
 */
#include "operator/cast.h"
#include "operator/gpu.h"
#include "operator/op.h"
#include "operator/walk.h"

#include <stdio.h>
#include <string.h>

static const char *const in_data[] = {"data", NULL};
static const char *const out_output[] = {"output", NULL};

/* `axis` of an `ndim`-D array, negative counting from the end, or -1 when outside. */
static int norm_axis(int axis, int ndim) {
    int a = axis < 0 ? axis + ndim : axis;
    return a >= 0 && a < ndim ? a : -1;
}

/* Row-major strides of `nd` dims. */
static void row_strides(int nd, const int64_t *dims, int64_t *st) {
    int64_t acc = 1;
    for (int i = nd - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= dims[i];
    }
}

/* ---- The three moves, on the CPU or on the GPU of the call -------------------------- */

static int64_t walk_size(const struct mxc__walk *w) {
    int64_t n = 1;
    for (int i = 0; i < w->nd; i++)
        n *= w->dims[i];
    return n;
}

/* The same mapping with fewer axes: size-1 axes dropped, neighbours that step as one
 * merged (the CPU loops run along the last axis). */
static void walk_simplify(struct mxc__walk *w) {
    int n = 0;
    for (int i = 0; i < w->nd; i++) {
        if (w->dims[i] == 1)
            continue;
        if (n > 0 && w->strides[n - 1] == w->strides[i] * w->dims[i]) {
            w->dims[n - 1] *= w->dims[i];
            w->strides[n - 1] = w->strides[i];
            continue;
        }
        w->dims[n] = w->dims[i];
        w->strides[n++] = w->strides[i];
    }
    if (n == 0) {
        w->dims[0] = 1;
        w->strides[0] = 0;
        n = 1;
    }
    w->nd = n;
}

/* Gather: dst[j] (req) = src[walk(j)] for every index j of the walk; scatter (`to_walk`):
 * dst[walk(j)] (req) = src[j], the walk one to one, the other elements of dst untouched.
 * Both arrays of `dtype`: float32 by rows, the others (gathers only on a GPU) an element at
 * a time, loaded and stored exactly (operator/cast.h). */
static int move(const mxc_run_ctx *gpu_rctx, void *dst, const void *src, struct mxc__walk w,
                int req, bool to_walk, int dtype) {
    int64_t n = walk_size(&w);
    if (req == MXC__REQ_NULL || n == 0)
        return MXC_OK;
    walk_simplify(&w);
#ifdef MXC_USE_CUDA
    if (gpu_rctx && dtype != MXC_FLOAT32 && !to_walk)
        return mxc__walk_gather_typed_gpu(dst, src, w, n, req, dtype, gpu_rctx->stream);
    if (gpu_rctx && dtype != MXC_FLOAT32)
        return mxc__error(MXC_EINTERNAL, "scatter of %s on a GPU", mxc_dtype_name(dtype));
    if (gpu_rctx)
        return to_walk ? mxc__walk_scatter_gpu(dst, src, w, n, req, gpu_rctx->stream)
                       : mxc__walk_gather_gpu(dst, src, w, n, req, gpu_rctx->stream);
#else
    (void)gpu_rctx;
#endif
    if (dtype != MXC_FLOAT32) {
        for (int64_t j = 0; j < n; j++) {
            int64_t at = mxc__walk_at(&w, j);
            mxc__elem_store(dst, dtype, to_walk ? at : j,
                            mxc__elem_load(src, dtype, to_walk ? j : at), req == MXC__REQ_ADD);
        }
        return MXC_OK;
    }
    /* a row of the walk's last axis at a time: contiguous on one side, strided on the other */
    int64_t inner = w.dims[w.nd - 1], is = w.strides[w.nd - 1];
    int64_t ds = to_walk ? is : 1, ss = to_walk ? 1 : is;
    for (int64_t r = 0; r < n; r += inner) {
        int64_t at = mxc__walk_at(&w, r);
        float *d = (float *)dst + (to_walk ? at : r);
        const float *s = (const float *)src + (to_walk ? r : at);
        if (req == MXC__REQ_ADD)
            for (int64_t k = 0; k < inner; k++)
                d[k * ds] += s[k * ss];
        else
            for (int64_t k = 0; k < inner; k++)
                d[k * ds] = s[k * ss];
    }
    return MXC_OK;
}

int mxc__walk_gather(const mxc_run_ctx *gpu_rctx, void *dst, const void *src, struct mxc__walk w,
                     int req, int dtype) {
    return move(gpu_rctx, dst, src, w, req, false, dtype);
}

static int gather(const struct mxc__op_call *c, bool gpu, float *dst, const float *src,
                  struct mxc__walk w, int req) {
    return move(gpu ? c->rctx : NULL, dst, src, w, req, false, MXC_FLOAT32);
}

static int scatter(const struct mxc__op_call *c, bool gpu, float *dst, const float *src,
                   struct mxc__walk w, int req) {
    return move(gpu ? c->rctx : NULL, dst, src, w, req, true, MXC_FLOAT32);
}

/* dst[k] (req) = sum over the copies t of src[walk(k) + copies(t)], k < n. */
static int sum_copies(const struct mxc__op_call *c, bool gpu, float *dst, int64_t n,
                      const float *src, struct mxc__walk w, struct mxc__walk t, int req) {
    int64_t count = walk_size(&t);
    if (req == MXC__REQ_NULL || n == 0)
        return MXC_OK;
    walk_simplify(&w);
    walk_simplify(&t);
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__walk_sum_gpu(dst, src, w, t, count, n, req, c->rctx->stream);
#else
    (void)c, (void)gpu;
#endif
    for (int64_t k = 0; k < n; k++) {
        float v = mxc__walk_sum_at(&w, &t, count, src, k);
        dst[k] = req == MXC__REQ_ADD ? dst[k] + v : v;
    }
    return MXC_OK;
}

/* dst (n floats) = 0 for a write request: the part of a gradient no output element reached. */
static int zero_rest(const struct mxc__op_call *c, bool gpu, float *dst, int64_t n, int req) {
    if (req == MXC__REQ_NULL || req == MXC__REQ_ADD)
        return MXC_OK;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__gpu_memset0(dst, (size_t)n * sizeof(float), c->rctx->stream);
#else
    (void)c, (void)gpu;
#endif
    memset(dst, 0, (size_t)n * sizeof(float));
    return MXC_OK;
}

/* CPU and GPU entry points of an operator whose kernels are ident##_fwd / _bwd (c, gpu). */
#ifdef MXC_USE_CUDA
#define GPU_KERNELS(ident)                                                                     \
    static int ident##_forward_gpu(const struct mxc__op_call *c) { return ident##_fwd(c, 1); } \
    static int ident##_backward_gpu(const struct mxc__op_call *c) { return ident##_bwd(c, 1); }
#else
#define GPU_KERNELS(ident)
#endif
#define KERNELS(ident)                                                                      \
    static int ident##_forward(const struct mxc__op_call *c) { return ident##_fwd(c, 0); }  \
    static int ident##_backward(const struct mxc__op_call *c) { return ident##_bwd(c, 0); } \
    GPU_KERNELS(ident)
/* The definition of operator `ident` (MXNet name `name`): its ident##_param struct and
 * table, ident##_shape and the kernels above. */
#define TENSOR_OP(ident, name_, inputs_, description_)     \
    const struct mxc__op_def mxc__op_##ident = {           \
        .name = name_,                                     \
        .description = description_,                       \
        .param_size = sizeof(struct ident##_param),        \
        .params = ident##_params,                          \
        .num_params = (int)MXC_ARRAY_SIZE(ident##_params), \
        .inputs = inputs_,                                 \
        .outputs = out_output,                             \
        .infer_shape = ident##_shape,                      \
        .backward_deps = MXC__DEP_OUT_GRAD,                \
        .forward_cpu = ident##_forward,                    \
        .backward_cpu = ident##_backward,                  \
        .forward_gpu = MXC__GPU(ident##_forward_gpu),      \
        .backward_gpu = MXC__GPU(ident##_backward_gpu),    \
    }

/* ---- Windows: slice, slice_axis, slice_like, flip ----------------------------------- */

/* The block of data an operator takes: per axis the first element, the step between
 * elements and their count (output dims). */
struct window {
    int64_t begin[MXC_MAX_NDIM], step[MXC_MAX_NDIM], count[MXC_MAX_NDIM];
};

/* The window of `data` for the operator's parameters; `like` is the second input's shape
 * (slice_like) or, in the backward, the output's, whose sliced axes are the same. */
typedef int (*window_fn)(const void *params, const mxc_shape *data, const mxc_shape *like,
                         struct window *win);

/* Every axis whole, forwards. */
static void window_all(const mxc_shape *data, struct window *win) {
    for (int i = 0; i < data->ndim; i++) {
        win->begin[i] = 0;
        win->step[i] = 1;
        win->count[i] = data->dims[i];
    }
}

/* Python's slice(b, e, s) of an axis of `len` (b, e NULL for None): clamped to the axis,
 * negative values counting from its end, as MXNet 1.9.1 takes them. */
static void python_range(int64_t len, const int64_t *b, const int64_t *e, int64_t s, int64_t *begin,
                         int64_t *count) {
    int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? len : len - 1;
    int64_t first = b ? *b : (s > 0 ? 0 : len - 1), last = e ? *e : (s > 0 ? len : -1);
    if (b && first < 0)
        first += len;
    if (e && last < 0)
        last += len;
    first = first < lo ? lo : first > hi ? hi : first;
    last = last < lo ? lo : last > hi ? hi : last;
    int64_t span = s > 0 ? last - first : first - last, st = s > 0 ? s : -s;
    *begin = first;
    *count = span > 0 ? (span + st - 1) / st : 0;
}

struct slice_param {
    struct mxc__opt_tuple begin, end, step;
};

static const struct mxc__param slice_params[] = {
    MXC__P_OPT_TUPLE(struct slice_param, begin, NULL,
                     "first index per axis (None: the start; negative counts from the end)"),
    MXC__P_OPT_TUPLE(struct slice_param, end, NULL,
                     "end index per axis, excluded (None: the end; negative counts from the end)"),
    MXC__P_OPT_TUPLE(struct slice_param, step, "()",
                     "step per axis (None or missing: 1; negative walks backwards)"),
};

static int slice_window(const void *params, const mxc_shape *data, const mxc_shape *like,
                        struct window *win) {
    const struct slice_param *p = params;
    (void)like;
    char b[128];
    int n = p->begin.has_value ? p->begin.tuple.ndim : 0;
    int ne = p->end.has_value ? p->end.tuple.ndim : 0;
    int ns = p->step.has_value ? p->step.tuple.ndim : 0;
    if (n != ne || n > data->ndim || (ns != 0 && ns != n))
        return mxc__error(MXC_EINVAL,
                          "slice: begin has %d entries, end %d and step %d for data %s: begin "
                          "and end need as many, at most one per axis, and step none or as many",
                          n, ne, ns, mxc__shape_str(data, b, sizeof b));
    window_all(data, win);
    for (int i = 0; i < n; i++) {
        bool has_s = ns && !(p->step.none & (1u << i));
        int64_t s = has_s ? p->step.tuple.dims[i] : 1;
        if (s == 0)
            return mxc__error(MXC_EINVAL, "slice: step[%d] is 0", i);
        bool has_b = !(p->begin.none & (1u << i)), has_e = !(p->end.none & (1u << i));
        python_range(data->dims[i], has_b ? &p->begin.tuple.dims[i] : NULL,
                     has_e ? &p->end.tuple.dims[i] : NULL, s, &win->begin[i], &win->count[i]);
        win->step[i] = s;
    }
    return MXC_OK;
}

struct slice_axis_param {
    int axis;
    int begin;
    struct mxc__opt_int end;
};

static const struct mxc__param slice_axis_params[] = {
    MXC__P_INT(struct slice_axis_param, axis, NULL, -MXC_MAX_NDIM, MXC_MAX_NDIM - 1,
               "the axis to slice (negative counts from the end)"),
    MXC__P_INT(struct slice_axis_param, begin, NULL, INT32_MIN, INT32_MAX,
               "first index (negative counts from the end)"),
    MXC__P_OPT_INT(struct slice_axis_param, end, NULL, INT32_MIN, INT32_MAX,
                   "end index, excluded (None: the end of the axis; negative counts from it)"),
};

/* Unlike slice, slice_axis does not clamp: the range must lie inside the axis and hold
 * at least one element (MXNet 1.9.1). */
static int slice_axis_window(const void *params, const mxc_shape *data, const mxc_shape *like,
                             struct window *win) {
    const struct slice_axis_param *p = params;
    (void)like;
    char b[128];
    int a = norm_axis(p->axis, data->ndim);
    if (a < 0)
        return mxc__error(MXC_EINVAL, "slice_axis: axis=%d is outside [%d, %d] for data %s",
                          p->axis, -data->ndim, data->ndim - 1, mxc__shape_str(data, b, sizeof b));
    int64_t len = data->dims[a], first = p->begin, last = p->end.has_value ? p->end.value : len;
    if (first < 0)
        first += len;
    if (p->end.has_value && last < 0)
        last += len;
    if (first < 0 || first >= last || last > len)
        return mxc__error(MXC_EINVAL,
                          "slice_axis: begin=%d, end=%s%lld do not give a range of at least one "
                          "element inside axis %d of data %s",
                          p->begin, p->end.has_value ? "" : "None = ",
                          (long long)(p->end.has_value ? p->end.value : len), a,
                          mxc__shape_str(data, b, sizeof b));
    window_all(data, win);
    win->begin[a] = first;
    win->count[a] = last - first;
    return MXC_OK;
}

struct slice_like_param {
    mxc_shape axes;
};

static const struct mxc__param slice_like_params[] = {
    MXC__P_TUPLE(struct slice_like_param, axes, "()",
                 "the axes to slice to shape_like's size (negative count from the end); () "
                 "slices every axis, and then both inputs have the same number of axes"),
};

static int slice_like_window(const void *params, const mxc_shape *data, const mxc_shape *like,
                             struct window *win) {
    const struct slice_like_param *p = params;
    char b1[128], b2[128];
    bool all = p->axes.ndim == 0;
    if (all && like->ndim != data->ndim)
        return mxc__error(MXC_ESHAPE,
                          "slice_like: data %s and shape_like %s need the same number of axes "
                          "when axes=()",
                          mxc__shape_str(data, b1, sizeof b1), mxc__shape_str(like, b2, sizeof b2));
    window_all(data, win);
    for (int k = 0; k < (all ? data->ndim : p->axes.ndim); k++) {
        int a = all ? k : norm_axis((int)p->axes.dims[k], data->ndim);
        if (a < 0 || a >= like->ndim)
            return mxc__error(MXC_EINVAL,
                              "slice_like: axis %lld is not an axis of both data %s "
                              "and shape_like %s",
                              (long long)p->axes.dims[k], mxc__shape_str(data, b1, sizeof b1),
                              mxc__shape_str(like, b2, sizeof b2));
        if (like->dims[a] > data->dims[a])
            return mxc__error(
                MXC_ESHAPE, "slice_like: shape_like %s is larger than data %s on axis %d",
                mxc__shape_str(like, b2, sizeof b2), mxc__shape_str(data, b1, sizeof b1), a);
        win->count[a] = like->dims[a];
    }
    return MXC_OK;
}

struct flip_param {
    mxc_shape axis;
};

static const struct mxc__param flip_params[] = {
    MXC__P_TUPLE(struct flip_param, axis, NULL,
                 "the axes to reverse, each in [0, ndim) (an axis given twice is reversed "
                 "twice)"),
};

static int flip_window(const void *params, const mxc_shape *data, const mxc_shape *like,
                       struct window *win) {
    const struct flip_param *p = params;
    (void)like;
    char b1[128], b2[128];
    window_all(data, win);
    for (int k = 0; k < p->axis.ndim; k++) {
        int64_t a = p->axis.dims[k];
        if (a < 0 || a >= data->ndim)
            return mxc__error(MXC_EINVAL, "flip: axis=%s holds %lld, outside [0, %d) for data %s",
                              mxc__shape_str(&p->axis, b1, sizeof b1), (long long)a, data->ndim,
                              mxc__shape_str(data, b2, sizeof b2));
        win->step[a] = -win->step[a];
        win->begin[a] = win->step[a] < 0 ? data->dims[a] - 1 : 0;
    }
    return MXC_OK;
}

/* The walk of data's elements in the window, in output order. */
static struct mxc__walk window_walk(const mxc_shape *data, const struct window *win) {
    struct mxc__walk w = {.nd = data->ndim};
    int64_t st[MXC_MAX_NDIM];
    row_strides(data->ndim, data->dims, st);
    for (int i = 0; i < data->ndim; i++) {
        w.dims[i] = win->count[i];
        w.strides[i] = st[i] * win->step[i];
        w.base += win->count[i] ? win->begin[i] * st[i] : 0;
    }
    return w;
}

/* data (and shape_like) known -> output: the window's counts. */
static int window_shape(window_fn fn, const void *params, mxc_shape *in, int num_in, mxc_shape *out,
                        const char *op) {
    for (int i = 0; i < num_in; i++)
        if (in[i].ndim == 0)
            return MXC_OK;
    struct window win;
    int rc = fn(params, &in[0], num_in > 1 ? &in[1] : NULL, &win);
    if (rc != MXC_OK)
        return rc;
    mxc_shape o = mxc_shape_make(in[0].ndim, win.count);
    return mxc__shape_assign(&out[0], &o, op, "output");
}

/* output (req) = the window of data. */
static int window_fwd(window_fn fn, const struct mxc__op_call *c, bool gpu) {
    struct window win;
    const mxc_shape *data = &c->in_data[0].shape;
    int rc = fn(c->params, data, c->num_in > 1 ? &c->in_data[1].shape : NULL, &win);
    if (rc != MXC_OK)
        return rc;
    return gather(c, gpu, c->out_data[0].data, c->in_data[0].data, window_walk(data, &win),
                  c->req[0]);
}

/* d_data = d_out in the window, 0 elsewhere; d_shape_like (if any) = 0. */
static int window_bwd(window_fn fn, const struct mxc__op_call *c, bool gpu) {
    struct window win;
    const struct mxc__tensor *gi = &c->in_grad[0];
    int rc = fn(c->params, &gi->shape, &c->out_grad[0].shape, &win);
    if (rc != MXC_OK)
        return rc;
    for (int i = 1; i < c->num_in && rc == MXC_OK; i++)
        rc = zero_rest(c, gpu, c->in_grad[i].data, c->in_grad[i].size, c->req[i]);
    if (rc == MXC_OK && c->out_grad[0].size < gi->size)
        rc = zero_rest(c, gpu, gi->data, gi->size, c->req[0]);
    if (rc != MXC_OK)
        return rc;
    return scatter(c, gpu, gi->data, c->out_grad[0].data, window_walk(&gi->shape, &win), c->req[0]);
}

#define WINDOW_OP(ident)                                                                    \
    static int ident##_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, \
                             int num_out, mxc_shape *aux, int num_aux) {                    \
        (void)num_out, (void)aux, (void)num_aux;                                            \
        return window_shape(ident##_window, params, in, num_in, out, #ident);               \
    }                                                                                       \
    static int ident##_fwd(const struct mxc__op_call *c, bool gpu) {                        \
        return window_fwd(ident##_window, c, gpu);                                          \
    }                                                                                       \
    static int ident##_bwd(const struct mxc__op_call *c, bool gpu) {                        \
        return window_bwd(ident##_window, c, gpu);                                          \
    }                                                                                       \
    KERNELS(ident)

WINDOW_OP(slice)
WINDOW_OP(slice_axis)
WINDOW_OP(slice_like)
WINDOW_OP(flip)

TENSOR_OP(slice, "slice", in_data,
          "Takes data[begin:end:step] per axis (Python's slicing; alias crop)");

TENSOR_OP(slice_axis, "slice_axis", in_data,
          "Takes elements begin to end (excluded) of data along one axis");

static const char *const slice_like_inputs[] = {"data", "shape_like", NULL};

TENSOR_OP(slice_like, "slice_like", slice_like_inputs,
          "Takes the first elements of data along axes, as many as shape_like has");

TENSOR_OP(flip, "flip", in_data,
          "Reverses the order of elements along the given axes (alias reverse)");

/* ---- Copies: broadcast_to, broadcast_like, tile, repeat ----------------------------- */

/* data and output seen with the same number of axes, each data axis either the output's
 * or 1 (read again along it). */
struct copies {
    int nd;
    int64_t in[MXC__WALK_MAX], out[MXC__WALK_MAX];
};

/* The split view of data `in` and output `out` for the operator's parameters. */
typedef void (*copies_fn)(const void *params, const mxc_shape *in, const mxc_shape *out,
                          struct copies *v);

/* output (req) = data read again along its size-1 axes. */
static int copies_fwd(copies_fn fn, const struct mxc__op_call *c, bool gpu) {
    struct copies v;
    fn(c->params, &c->in_data[0].shape, &c->out_data[0].shape, &v);
    int64_t st[MXC__WALK_MAX];
    row_strides(v.nd, v.in, st);
    struct mxc__walk w = {.nd = v.nd};
    for (int i = 0; i < v.nd; i++) {
        w.dims[i] = v.out[i];
        w.strides[i] = v.in[i] == v.out[i] ? st[i] : 0;
    }
    return gather(c, gpu, c->out_data[0].data, c->in_data[0].data, w, c->req[0]);
}

/* d_data (req) = the sum of d_out over the copies of each element; a shape-only second
 * input gets 0. */
static int copies_bwd(copies_fn fn, const struct mxc__op_call *c, bool gpu) {
    struct copies v;
    const struct mxc__tensor *gi = &c->in_grad[0];
    fn(c->params, &gi->shape, &c->out_grad[0].shape, &v);
    int64_t st[MXC__WALK_MAX];
    row_strides(v.nd, v.out, st);
    struct mxc__walk w = {.nd = v.nd}, t = {.nd = v.nd};
    for (int i = 0; i < v.nd; i++) {
        bool copied = v.in[i] != v.out[i];
        w.dims[i] = v.in[i];
        w.strides[i] = copied ? 0 : st[i];
        t.dims[i] = copied ? v.out[i] : 1;
        t.strides[i] = st[i];
    }
    int rc = MXC_OK;
    for (int i = 1; i < c->num_in && rc == MXC_OK; i++)
        rc = zero_rest(c, gpu, c->in_grad[i].data, c->in_grad[i].size, c->req[i]);
    if (rc != MXC_OK)
        return rc;
    return sum_copies(c, gpu, gi->data, gi->size, c->out_grad[0].data, w, t, c->req[0]);
}

/* broadcast_to and broadcast_like: the same axes, data's of size 1 where they differ. */
static void broadcast_copies(const void *params, const mxc_shape *in, const mxc_shape *out,
                             struct copies *v) {
    (void)params;
    v->nd = in->ndim;
    for (int i = 0; i < in->ndim; i++) {
        v->in[i] = in->dims[i];
        v->out[i] = out->dims[i];
    }
}

/* Data may grow along its size-1 axes only. */
static int check_broadcast(const char *op, const mxc_shape *in, const mxc_shape *o,
                           const char *what) {
    char b1[128], b2[128];
    for (int i = 0; i < in->ndim; i++)
        if (in->dims[i] != o->dims[i] && in->dims[i] != 1)
            return mxc__error(MXC_ESHAPE,
                              "%s: data %s cannot be broadcast to %s %s (axis %d is %lld, not 1)",
                              op, mxc__shape_str(in, b1, sizeof b1), what,
                              mxc__shape_str(o, b2, sizeof b2), i, (long long)in->dims[i]);
    return MXC_OK;
}

struct broadcast_to_param {
    mxc_shape shape;
};

static const struct mxc__param broadcast_to_params[] = {
    MXC__P_TUPLE(struct broadcast_to_param, shape, "()",
                 "the output shape, as many axes as data; 0 keeps data's size on that axis"),
};

static int broadcast_to_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out,
                              int num_out, mxc_shape *aux, int num_aux) {
    const struct broadcast_to_param *p = params;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    char b1[128], b2[128];
    if (in[0].ndim == 0)
        return MXC_OK;
    if (p->shape.ndim != in[0].ndim)
        return mxc__error(MXC_EINVAL, "broadcast_to: shape=%s needs one entry per axis of data %s",
                          mxc__shape_str(&p->shape, b1, sizeof b1),
                          mxc__shape_str(&in[0], b2, sizeof b2));
    mxc_shape o = p->shape;
    for (int i = 0; i < o.ndim; i++) {
        if (o.dims[i] < 0)
            return mxc__error(MXC_EINVAL, "broadcast_to: shape=%s has a negative size",
                              mxc__shape_str(&p->shape, b1, sizeof b1));
        if (o.dims[i] == 0)
            o.dims[i] = in[0].dims[i];
    }
    if (mxc_shape_size(&o) < 0)
        return mxc__error(MXC_ESHAPE, "broadcast_to: shape=%s holds more elements than int64",
                          mxc__shape_str(&p->shape, b1, sizeof b1));
    int rc = check_broadcast("broadcast_to", &in[0], &o, "shape");
    return rc != MXC_OK ? rc : mxc__shape_assign(&out[0], &o, "broadcast_to", "output");
}

struct broadcast_like_param {
    struct mxc__opt_tuple lhs_axes, rhs_axes;
};

static const struct mxc__param broadcast_like_params[] = {
    MXC__P_OPT_TUPLE(struct broadcast_like_param, lhs_axes, "None",
                     "axes of lhs to broadcast (None: all, then lhs and rhs have as many axes)"),
    MXC__P_OPT_TUPLE(struct broadcast_like_param, rhs_axes, "None",
                     "the axes of rhs whose sizes they take, one per lhs axis"),
};

static int broadcast_like_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out,
                                int num_out, mxc_shape *aux, int num_aux) {
    const struct broadcast_like_param *p = params;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    char b1[128], b2[128];
    if (in[0].ndim == 0 || in[1].ndim == 0)
        return MXC_OK;
    const mxc_shape *l = &in[0], *r = &in[1];
    mxc_shape o = *l;
    if (!p->lhs_axes.has_value && !p->rhs_axes.has_value) {
        if (r->ndim != l->ndim)
            return mxc__error(MXC_ESHAPE,
                              "broadcast_like: lhs %s and rhs %s need the same number of axes",
                              mxc__shape_str(l, b1, sizeof b1), mxc__shape_str(r, b2, sizeof b2));
        o = *r;
    } else {
        const mxc_shape *la = &p->lhs_axes.tuple, *ra = &p->rhs_axes.tuple;
        if (!p->lhs_axes.has_value || !p->rhs_axes.has_value || la->ndim != ra->ndim ||
            la->ndim == 0 || p->lhs_axes.none || p->rhs_axes.none)
            return mxc__error(MXC_EINVAL,
                              "broadcast_like: lhs_axes and rhs_axes are both None or both "
                              "tuples of the same non-zero length");
        for (int k = 0; k < la->ndim; k++) {
            int a = norm_axis((int)la->dims[k], l->ndim), b = norm_axis((int)ra->dims[k], r->ndim);
            if (a < 0 || b < 0)
                return mxc__error(MXC_EINVAL,
                                  "broadcast_like: lhs_axes[%d]=%lld or rhs_axes[%d]=%lld is "
                                  "not an axis of lhs %s or rhs %s",
                                  k, (long long)la->dims[k], k, (long long)ra->dims[k],
                                  mxc__shape_str(l, b1, sizeof b1),
                                  mxc__shape_str(r, b2, sizeof b2));
            o.dims[a] = r->dims[b];
        }
    }
    int rc = check_broadcast("broadcast_like", l, &o, "rhs's");
    return rc != MXC_OK ? rc : mxc__shape_assign(&out[0], &o, "broadcast_like", "output");
}

struct tile_param {
    mxc_shape reps;
};

static const struct mxc__param tile_params[] = {
    MXC__P_TUPLE(struct tile_param, reps, NULL,
                 "copies along each axis, each >= 1, aligned to data's last axes (the shorter "
                 "of reps and data's shape is padded with 1s in front)"),
};

/* reps and data's dims, right-aligned and padded with 1s to `nd` axes. */
static int tile_align(const struct tile_param *p, const mxc_shape *in, int64_t *reps,
                      int64_t *dims) {
    int nd = p->reps.ndim > in->ndim ? p->reps.ndim : in->ndim;
    for (int i = 0; i < nd; i++) {
        int ri = i - (nd - p->reps.ndim), di = i - (nd - in->ndim);
        reps[i] = ri >= 0 ? p->reps.dims[ri] : 1;
        dims[i] = di >= 0 ? in->dims[di] : 1;
    }
    return nd;
}

/* Output axis i seen as (reps[i], dims[i]): data is read again along the first. */
static void tile_copies(const void *params, const mxc_shape *in, const mxc_shape *out,
                        struct copies *v) {
    int64_t reps[MXC_MAX_NDIM], dims[MXC_MAX_NDIM];
    int nd = tile_align(params, in, reps, dims);
    (void)out;
    v->nd = 2 * nd;
    for (int i = 0; i < nd; i++) {
        v->in[2 * i] = 1;
        v->out[2 * i] = reps[i];
        v->in[2 * i + 1] = v->out[2 * i + 1] = dims[i];
    }
}

static int tile_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                      mxc_shape *aux, int num_aux) {
    const struct tile_param *p = params;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    char b1[128], b2[128];
    if (in[0].ndim == 0)
        return MXC_OK;
    int64_t reps[MXC_MAX_NDIM], dims[MXC_MAX_NDIM];
    int nd = tile_align(p, &in[0], reps, dims);
    mxc_shape o = {.ndim = nd};
    for (int i = 0; i < nd; i++) {
        if (reps[i] < 1)
            return mxc__error(MXC_EINVAL, "tile: reps=%s must hold sizes >= 1",
                              mxc__shape_str(&p->reps, b1, sizeof b1));
        if (!mxc__mul_add(0, reps[i], dims[i], &o.dims[i]))
            o.dims[i] = -1;
    }
    if (mxc_shape_size(&o) < 0)
        return mxc__error(MXC_ESHAPE, "tile: data %s with reps=%s holds more elements than int64",
                          mxc__shape_str(&in[0], b1, sizeof b1),
                          mxc__shape_str(&p->reps, b2, sizeof b2));
    return mxc__shape_assign(&out[0], &o, "tile", "output");
}

struct repeat_param {
    int repeats;
    struct mxc__opt_int axis;
};

static const struct mxc__param repeat_params[] = {
    MXC__P_INT(struct repeat_param, repeats, NULL, 0, INT32_MAX,
               "copies of each element, next to each other"),
    MXC__P_OPT_INT(struct repeat_param, axis, "None", -MXC_MAX_NDIM, MXC_MAX_NDIM - 1,
                   "the axis to repeat along (negative counts from the end); None: repeat the "
                   "flattened data, giving a 1-D output"),
};

/* data (outer, d, 1, inner) -> output (outer, d, repeats, inner); the whole data as d
 * with axis None. */
static void repeat_copies(const void *params, const mxc_shape *in, const mxc_shape *out,
                          struct copies *v) {
    const struct repeat_param *p = params;
    (void)out;
    int a = p->axis.has_value ? norm_axis(p->axis.value, in->ndim) : -1;
    int64_t outer = 1, d = mxc_shape_size(in), inner = 1;
    if (a >= 0) {
        d = in->dims[a];
        for (int i = 0; i < in->ndim; i++) {
            outer *= i < a ? in->dims[i] : 1;
            inner *= i > a ? in->dims[i] : 1;
        }
    }
    *v = (struct copies){4, {outer, d, 1, inner}, {outer, d, p->repeats, inner}};
}

static int repeat_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                        mxc_shape *aux, int num_aux) {
    const struct repeat_param *p = params;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    char b[128];
    if (in[0].ndim == 0)
        return MXC_OK;
    mxc_shape o = {.ndim = 1, .dims = {mxc_shape_size(&in[0])}};
    int a = 0;
    if (p->axis.has_value) {
        a = norm_axis(p->axis.value, in[0].ndim);
        if (a < 0)
            return mxc__error(MXC_EINVAL, "repeat: axis=%d is outside [%d, %d] for data %s",
                              p->axis.value, -in[0].ndim, in[0].ndim - 1,
                              mxc__shape_str(&in[0], b, sizeof b));
        o = in[0];
    }
    if (!mxc__mul_add(0, o.dims[a], p->repeats, &o.dims[a]) || mxc_shape_size(&o) < 0)
        return mxc__error(MXC_ESHAPE,
                          "repeat: data %s repeated %d times holds more elements than int64",
                          mxc__shape_str(&in[0], b, sizeof b), p->repeats);
    return mxc__shape_assign(&out[0], &o, "repeat", "output");
}

#define COPIES_OP(ident, view)                                       \
    static int ident##_fwd(const struct mxc__op_call *c, bool gpu) { \
        return copies_fwd(view, c, gpu);                             \
    }                                                                \
    static int ident##_bwd(const struct mxc__op_call *c, bool gpu) { \
        return copies_bwd(view, c, gpu);                             \
    }                                                                \
    KERNELS(ident)

COPIES_OP(broadcast_to, broadcast_copies)
COPIES_OP(broadcast_like, broadcast_copies)
COPIES_OP(tile, tile_copies)
COPIES_OP(repeat, repeat_copies)

TENSOR_OP(broadcast_to, "broadcast_to", in_data,
          "Repeats data along its size-1 axes to the given shape");

static const char *const lhs_rhs[] = {"lhs", "rhs", NULL};

TENSOR_OP(broadcast_like, "broadcast_like", lhs_rhs,
          "Repeats lhs along its size-1 axes to rhs's sizes (all axes, or the given)");

TENSOR_OP(tile, "tile", in_data, "Repeats the whole of data reps[i] times along each axis i");

TENSOR_OP(repeat, "repeat", in_data, "Repeats each element of data `repeats` times along an axis");

/* ---- stack -------------------------------------------------------------------------- */

struct stack_param {
    int axis;
    int num_args;
};

static const struct mxc__param stack_params[] = {
    MXC__P_INT(struct stack_param, axis, "0", -MXC_MAX_NDIM - 1, MXC_MAX_NDIM,
               "position of the new axis in the output (negative counts from the end)"),
    MXC__P_INT(struct stack_param, num_args, NULL, 1, MXC__MAX_OP_ARGS,
               "number of inputs to stack"),
};

static const char *const arg_names[MXC__MAX_OP_ARGS] = {
    "arg0", "arg1", "arg2",  "arg3",  "arg4",  "arg5",  "arg6",  "arg7",
    "arg8", "arg9", "arg10", "arg11", "arg12", "arg13", "arg14", "arg15"};

static int stack_list_inputs(const void *params, const char **names, int max) {
    int n = ((const struct stack_param *)params)->num_args;
    for (int i = 0; i < n && i < max; i++)
        names[i] = arg_names[i];
    return n;
}

/* The new axis's position for `nd`-D inputs, or -1. */
static int stack_axis(const struct stack_param *p, int nd) {
    int a = p->axis < 0 ? p->axis + nd + 1 : p->axis;
    return a >= 0 && a <= nd ? a : -1;
}

/* Every input one shape (deduced from any known one); output: that shape with num_args
 * inserted at axis. */
static int stack_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                       mxc_shape *aux, int num_aux) {
    const struct stack_param *p = params;
    (void)num_out, (void)aux, (void)num_aux;
    char b[128];
    int rc = MXC_OK;
    mxc_shape s = {0};
    for (int i = 0; i < num_in; i++)
        MXC_TRY(mxc__shape_assign(&s, &in[i], "stack", arg_names[i]));
    if (s.ndim == 0)
        return MXC_OK;
    for (int i = 0; i < num_in; i++)
        in[i] = s;
    int a = stack_axis(p, s.ndim);
    MXC_CHECK(a >= 0, MXC_EINVAL, "stack: axis=%d is outside [%d, %d] for inputs %s", p->axis,
              -s.ndim - 1, s.ndim, mxc__shape_str(&s, b, sizeof b));
    MXC_CHECK(s.ndim < MXC_MAX_NDIM, MXC_ENOTSUP,
              "stack: inputs %s already have the most dimensions supported (%d)",
              mxc__shape_str(&s, b, sizeof b), MXC_MAX_NDIM);
    mxc_shape o = {.ndim = s.ndim + 1};
    for (int i = 0, j = 0; i < o.ndim; i++)
        o.dims[i] = i == a ? num_in : s.dims[j++];
    MXC_TRY(mxc__shape_assign(&out[0], &o, "stack", "output"));
fail:
    return rc;
}

/* Input k's place in the output (outer, num_args, inner): (outer, inner) at k * inner. */
static struct mxc__walk stack_part(const struct mxc__op_call *c, const mxc_shape *part, int k) {
    int a = stack_axis(c->params, part->ndim);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < part->ndim; i++)
        *(i < a ? &outer : &inner) *= part->dims[i];
    return (struct mxc__walk){2, k * inner, {outer, inner}, {c->num_in * inner, 1}};
}

/* output (req) = the inputs side by side: each placed by its walk, together all of it. */
static int stack_fwd(const struct mxc__op_call *c, bool gpu) {
    int rc = MXC_OK;
    for (int k = 0; k < c->num_in && rc == MXC_OK; k++)
        rc = scatter(c, gpu, c->out_data[0].data, c->in_data[k].data,
                     stack_part(c, &c->in_data[k].shape, k), c->req[0]);
    return rc;
}

/* d_arg_k (req) = d_out's part k. */
static int stack_bwd(const struct mxc__op_call *c, bool gpu) {
    int rc = MXC_OK;
    for (int k = 0; k < c->num_in && rc == MXC_OK; k++)
        rc = gather(c, gpu, c->in_grad[k].data, c->out_grad[0].data,
                    stack_part(c, &c->in_grad[k].shape, k), c->req[k]);
    return rc;
}

KERNELS(stack)

const struct mxc__op_def mxc__op_stack = {
    .name = "stack",
    .description = "Joins num_args same-shaped arrays along a new axis",
    .param_size = sizeof(struct stack_param),
    .params = stack_params,
    .num_params = (int)MXC_ARRAY_SIZE(stack_params),
    .list_inputs = stack_list_inputs,
    .outputs = out_output,
    .infer_shape = stack_shape,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .forward_cpu = stack_forward,
    .backward_cpu = stack_backward,
    .forward_gpu = MXC__GPU(stack_forward_gpu),
    .backward_gpu = MXC__GPU(stack_backward_gpu),
};

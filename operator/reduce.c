/*
 * operator/reduce.c — sum, mean, max, min, prod, nansum, nanprod and norm over a tuple of
 * axes (MXNet's ReduceAxes: axis () reduces everything, exclude reduces the axes not
 * listed, keepdims keeps reduced axes as size 1; norm has ord and no exclude). All run on
 * one reduction view (operator/reduce.h): the input as runs of reduced and kept axes,
 * walked one contiguous row at a time. Backward broadcasts the head gradient back (mean
 * divides by the count); the others take MXNet's gradient of operator/reduce.h
 * (mxc__red_grad: max and min give it to every input equal to the result, ties included,
 * as MXNet does). float32, row-major. The GPU kernels share everything here but the loops,
 * which operator/reduce_gpu.cu runs on the device.
 */
#include "operator/reduce.h"
#include "operator/gpu.h"

#include <math.h>
#include <string.h>

/* ---- The view ---------------------------------------------------------------------- */

void mxc__reduce_view_make(const mxc_shape *in, const bool *reduced, struct mxc__reduce_view *v) {
    bool red[MXC_MAX_NDIM];
    memset(v, 0, sizeof *v);
    v->in_size = mxc_shape_size(in);
    v->count = 1;
    for (int a = 0; a < in->ndim; a++) {
        if (reduced[a])
            v->count *= in->dims[a];
        if (in->dims[a] == 1)
            continue;
        if (v->ndim > 0 && red[v->ndim - 1] == reduced[a]) {
            v->dims[v->ndim - 1] *= in->dims[a];
        } else {
            red[v->ndim] = reduced[a];
            v->dims[v->ndim++] = in->dims[a];
        }
    }
    int64_t stride = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        v->out_stride[d] = red[d] ? 0 : stride;
        if (!red[d])
            stride *= v->dims[d];
    }
    v->out_size = stride;
    v->last_reduced = v->ndim > 0 && red[v->ndim - 1];
}

/* The rows of a view: row r is in[r * len, (r + 1) * len) and meets the output at `off`
 * (one element if the row is reduced, else `len` contiguous ones). */
struct row_walk {
    int64_t len, rows, off;
    int64_t idx[MXC_MAX_NDIM];
};

static void walk_init(const struct mxc__reduce_view *v, struct row_walk *w) {
    memset(w, 0, sizeof *w);
    w->len = v->ndim ? v->dims[v->ndim - 1] : 1;
    w->rows = w->len ? v->in_size / w->len : 0;
}

static void walk_next(const struct mxc__reduce_view *v, struct row_walk *w) {
    for (int d = v->ndim - 2; d >= 0; d--) {
        w->off += v->out_stride[d];
        if (++w->idx[d] < v->dims[d])
            return;
        w->off -= v->out_stride[d] * v->dims[d];
        w->idx[d] = 0;
    }
}

void mxc__reduce_sum(const struct mxc__reduce_view *v, const float *in, float *out, float scale,
                     int req) {
    if (req == MXC__REQ_NULL)
        return;
    if (req != MXC__REQ_ADD)
        memset(out, 0, (size_t)v->out_size * sizeof(float));
    struct row_walk w;
    walk_init(v, &w);
    for (int64_t r = 0; r < w.rows; r++, walk_next(v, &w)) {
        const float *p = in + r * w.len;
        if (v->last_reduced) {
            /* a row is summed in double: long rows (a whole array) keep float accuracy */
            double s = 0.0;
            for (int64_t i = 0; i < w.len; i++)
                s += p[i];
            out[w.off] += (float)(scale * s);
        } else {
            float *o = out + w.off;
            for (int64_t i = 0; i < w.len; i++)
                o[i] += scale * p[i];
        }
    }
}

int mxc__reduce_sum_on(const struct mxc__op_call *call, bool gpu, const struct mxc__reduce_view *v,
                       const float *in, float *out, float scale, int req) {
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__reduce_sum_gpu(v, in, out, scale, req, call->rctx->stream);
#endif
    (void)call, (void)gpu;
    mxc__reduce_sum(v, in, out, scale, req);
    return MXC_OK;
}

/* dst (out_size) = the reduction `kind` of in over the reduced axes. Always inlined into
 * one function per kind, so that the fold's switch goes away in the loops. */
static inline __attribute__((always_inline)) void
fold_into(int kind, const struct mxc__reduce_view *v, const float *in, float *dst) {
    const float start = (float)mxc__red_start(kind);
    for (int64_t o = 0; o < v->out_size; o++)
        dst[o] = start;
    struct row_walk w;
    walk_init(v, &w);
    for (int64_t r = 0; r < w.rows; r++, walk_next(v, &w)) {
        const float *p = in + r * w.len;
        if (v->last_reduced) {
            double m = dst[w.off];
            for (int64_t i = 0; i < w.len; i++)
                m = mxc__red_fold(kind, m, p[i]);
            dst[w.off] = (float)m;
        } else {
            float *q = dst + w.off;
            for (int64_t i = 0; i < w.len; i++)
                q[i] = (float)mxc__red_fold(kind, q[i], p[i]);
        }
    }
    if (kind == MXC__R_NORM2)
        for (int64_t o = 0; o < v->out_size; o++)
            dst[o] = (float)mxc__red_finish(kind, dst[o]);
}

/* gi (in_size, req) = mxc__red_grad(kind, g, x, y) at each input element's output (y may be
 * NULL for the kinds that do not read it); inlined per kind likewise. */
static inline __attribute__((always_inline)) void grad_into(int kind,
                                                            const struct mxc__reduce_view *v,
                                                            const float *x, const float *y,
                                                            const float *g, float *gi, int req) {
    struct row_walk w;
    walk_init(v, &w);
    for (int64_t r = 0; r < w.rows; r++, walk_next(v, &w)) {
        const float *p = x + r * w.len;
        float *q = gi + r * w.len;
        if (v->last_reduced) {
            const float yv = y ? y[w.off] : 0.0f, gv = g[w.off];
            MXC__ROW_STORE(req, q, w.len, mxc__red_grad(kind, gv, p[i], yv));
        } else {
            const float *yo = y ? y + w.off : NULL, *go = g + w.off;
            MXC__ROW_STORE(req, q, w.len, mxc__red_grad(kind, go[i], p[i], yo ? yo[i] : 0.0f));
        }
    }
}

/* The loops of each kind but sum (mxc__reduce_sum, scaled and added in place). */
#define FOLD_KINDS(X) X(MAX) X(MIN) X(PROD) X(NANSUM) X(NANPROD) X(NORM1) X(NORM2)
#define FOLD_FNS(k)                                                                        \
    static void fold_##k(const struct mxc__reduce_view *v, const float *in, float *dst) {  \
        fold_into(MXC__R_##k, v, in, dst);                                                 \
    }                                                                                      \
    static void grad_##k(const struct mxc__reduce_view *v, const float *x, const float *y, \
                         const float *g, float *gi, int req) {                             \
        grad_into(MXC__R_##k, v, x, y, g, gi, req);                                        \
    }
FOLD_KINDS(FOLD_FNS)

static const struct {
    void (*fold)(const struct mxc__reduce_view *v, const float *in, float *dst);
    void (*grad)(const struct mxc__reduce_view *v, const float *x, const float *y, const float *g,
                 float *gi, int req);
} fold_kinds[] = {
#define FOLD_ROW(k) [MXC__R_##k] = {fold_##k, grad_##k},
    FOLD_KINDS(FOLD_ROW)
#undef FOLD_ROW
};

/* gi (in_size, req) = scale * g broadcast back over the reduced axes. */
static void broadcast_back(const struct mxc__reduce_view *v, const float *g, float *gi, float scale,
                           int req) {
    struct row_walk w;
    walk_init(v, &w);
    for (int64_t r = 0; r < w.rows; r++, walk_next(v, &w)) {
        float *q = gi + r * w.len;
        if (v->last_reduced) {
            const float gv = scale * g[w.off];
            MXC__ROW_STORE(req, q, w.len, gv);
        } else {
            const float *go = g + w.off;
            MXC__ROW_STORE(req, q, w.len, scale * go[i]);
        }
    }
}

/* ---- Parameters and shapes ----------------------------------------------------------- */

struct reduce_param {
    mxc_shape axis;
    bool keepdims;
    bool exclude;
};

static const struct mxc__param reduce_params[] = {
    MXC__P_TUPLE(struct reduce_param, axis, "()",
                 "axes to reduce (negative count from the end); () reduces all"),
    MXC__P_BOOL(struct reduce_param, keepdims, "False", "keep reduced axes with size 1"),
    MXC__P_BOOL(struct reduce_param, exclude, "False", "reduce the axes not in axis"),
};

static const char *const reduce_inputs[] = {"data", NULL};
static const char *const reduce_outputs[] = {"output", NULL};

/* Which axes of `in` the parameters reduce; MXC_EINVAL for bad or repeated axes. */
static int reduce_mask(const char *op, const struct reduce_param *p, const mxc_shape *in,
                       bool *mask) {
    char buf[128];
    bool listed[MXC_MAX_NDIM] = {false};
    for (int i = 0; i < p->axis.ndim; i++) {
        int64_t a = p->axis.dims[i];
        if (a < -in->ndim || a >= in->ndim)
            return mxc__error(MXC_EINVAL, "%s: axis %lld is out of range for data of shape %s", op,
                              (long long)a, mxc__shape_str(in, buf, sizeof buf));
        a = a < 0 ? a + in->ndim : a;
        if (listed[a])
            return mxc__error(MXC_EINVAL, "%s: axis lists axis %lld more than once", op,
                              (long long)a);
        listed[a] = true;
    }
    for (int a = 0; a < in->ndim; a++)
        mask[a] = p->axis.ndim == 0 || (listed[a] != p->exclude);
    return MXC_OK;
}

static int reduce_shape(const char *op, const void *params, mxc_shape *in, mxc_shape *out) {
    const struct reduce_param *p = params;
    bool mask[MXC_MAX_NDIM];
    if (in[0].ndim == 0)
        return MXC_OK; /* the output's rank depends on data's */
    int rc = reduce_mask(op, p, &in[0], mask);
    if (rc != MXC_OK)
        return rc;
    mxc_shape o = {0};
    for (int a = 0; a < in[0].ndim; a++) {
        if (!mask[a])
            o.dims[o.ndim++] = in[0].dims[a];
        else if (p->keepdims)
            o.dims[o.ndim++] = 1;
    }
    if (o.ndim == 0)
        o = mxc_shape_make(1, (const int64_t[]){1}); /* MXNet's legacy scalar: (1,) */
    return mxc__shape_assign(&out[0], &o, op, "output");
}

/* norm's parameters: ord picks the reduction, axis and keepdims are the others'. */
struct norm_param {
    int ord;
    mxc_shape axis;
    int out_dtype;
    bool keepdims;
};

static const char *const norm_dtypes[] = {"float32", NULL};

static const struct mxc__param norm_params[] = {
    MXC__P_INT(struct norm_param, ord, "2", 1, 2, "the norm: 1 (sum of |x|) or 2 (Euclidean)"),
    MXC__P_TUPLE(struct norm_param, axis, "()",
                 "axes to reduce (negative count from the end); () reduces all"),
    MXC__P_OPT_ENUM(struct norm_param, out_dtype, norm_dtypes,
                    "the output's type: None (data's) or float32"),
    MXC__P_BOOL(struct norm_param, keepdims, "False", "keep reduced axes with size 1"),
};

/* The axes a norm reduces, as the other reductions' parameters. */
static struct reduce_param norm_axes(const void *params) {
    const struct norm_param *p = params;
    return (struct reduce_param){p->axis, p->keepdims, false};
}

static int norm_kind(const void *params) {
    return ((const struct norm_param *)params)->ord == 1 ? MXC__R_NORM1 : MXC__R_NORM2;
}

/* The view of `data` (forward: in_data's shape, backward: in_grad's) reduced as p says. */
static int call_view(const char *op, const struct reduce_param *p, const mxc_shape *data,
                     struct mxc__reduce_view *v) {
    bool mask[MXC_MAX_NDIM];
    int rc = reduce_mask(op, p, data, mask);
    if (rc == MXC_OK)
        mxc__reduce_view_make(data, mask, v);
    return rc;
}

/* ---- Kernels ------------------------------------------------------------------------- */

/* Each kernel below runs on the CPU, or on the GPU when `gpu` (a CUDA build's GPU entry
 * points): the view is made here either way, only the loops differ. */

/* sum, mean: out = scale * sum over the axes, scale 1 or 1 / count */
static int sum_forward(const char *op, const struct mxc__op_call *c, bool mean, bool gpu) {
    struct mxc__reduce_view v;
    int rc = call_view(op, c->params, &c->in_data[0].shape, &v);
    if (rc != MXC_OK)
        return rc;
    float scale = mean ? 1.0f / (float)v.count : 1.0f;
    return mxc__reduce_sum_on(c, gpu, &v, c->in_data[0].data, c->out_data[0].data, scale,
                              c->req[0]);
}

/* d_data (data's shape) = scale * out_grad broadcast back */
static int sum_backward(const char *op, const struct mxc__op_call *c, bool mean, bool gpu) {
    struct mxc__reduce_view v;
    if (c->req[0] == MXC__REQ_NULL)
        return MXC_OK;
    int rc = call_view(op, c->params, &c->in_grad[0].shape, &v);
    if (rc != MXC_OK)
        return rc;
    float scale = mean ? 1.0f / (float)v.count : 1.0f;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__reduce_back_gpu(&v, c->out_grad[0].data, c->in_grad[0].data, scale, c->req[0],
                                    c->rctx->stream);
#endif
    broadcast_back(&v, c->out_grad[0].data, c->in_grad[0].data, scale, c->req[0]);
    return MXC_OK;
}

/* out = the reduction `kind` over the axes p gives; add-to goes through temp space on the
 * CPU */
static int fold_forward(const char *op, const struct mxc__op_call *c, const struct reduce_param *p,
                        int kind, bool gpu) {
    struct mxc__reduce_view v;
    int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    int rc = call_view(op, p, &c->in_data[0].shape, &v);
    if (rc != MXC_OK)
        return rc;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__reduce_fold_gpu(kind, &v, c->in_data[0].data, c->out_data[0].data, req,
                                    c->rctx->stream);
#endif
    float *out = c->out_data[0].data, *dst = out;
    if (req == MXC__REQ_ADD) {
        void *tmp;
        rc = mxc__resource_temp(c->resources[0], (size_t)v.out_size * sizeof(float), &tmp);
        if (rc != MXC_OK)
            return rc;
        dst = tmp;
    }
    fold_kinds[kind].fold(&v, c->in_data[0].data, dst);
    if (req == MXC__REQ_ADD)
        for (int64_t o = 0; o < v.out_size; o++)
            out[o] += dst[o];
    return MXC_OK;
}

/* d_data = mxc__red_grad of data, the output (when declared) and out_grad */
static int fold_backward(const char *op, const struct mxc__op_call *c, const struct reduce_param *p,
                         int kind, bool gpu) {
    struct mxc__reduce_view v;
    if (c->req[0] == MXC__REQ_NULL)
        return MXC_OK;
    int rc = call_view(op, p, &c->in_grad[0].shape, &v);
    if (rc != MXC_OK)
        return rc;
    const float *y = c->out_data ? c->out_data[0].data : NULL;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__reduce_grad_gpu(kind, &v, c->in_data[0].data, y, c->out_grad[0].data,
                                    c->in_grad[0].data, c->req[0], c->rctx->stream);
#endif
    fold_kinds[kind].grad(&v, c->in_data[0].data, y, c->out_grad[0].data, c->in_grad[0].data,
                          c->req[0]);
    return MXC_OK;
}

static int norm_forward(const struct mxc__op_call *c, bool gpu) {
    const struct reduce_param p = norm_axes(c->params);
    return fold_forward("norm", c, &p, norm_kind(c->params), gpu);
}

static int norm_backward(const struct mxc__op_call *c, bool gpu) {
    const struct reduce_param p = norm_axes(c->params);
    return fold_backward("norm", c, &p, norm_kind(c->params), gpu);
}

/* ---- Definitions --------------------------------------------------------------------- */

/* The entry points of one operator on one device: ident##_fwd, ident##_bwd (CPU) or
 * ident##_fwd_gpu, ident##_bwd_gpu (GPU). */
#define REDUCE_KERNELS(ident, suffix, fwd, bwd)                                  \
    static int ident##_fwd##suffix(const struct mxc__op_call *c) { return fwd; } \
    static int ident##_bwd##suffix(const struct mxc__op_call *c) { return bwd; }
/* ... of a reduction by fold and gradient (operator/reduce.h) */
#define FOLD_KERNELS(ident, suffix, kind, gpu)                                   \
    REDUCE_KERNELS(ident, suffix, fold_forward(#ident, c, c->params, kind, gpu), \
                   fold_backward(#ident, c, c->params, kind, gpu))
#define REDUCE_ALL_KERNELS(suffix, gpu)                             \
    REDUCE_KERNELS(sum, suffix, sum_forward("sum", c, false, gpu),  \
                   sum_backward("sum", c, false, gpu))              \
    REDUCE_KERNELS(mean, suffix, sum_forward("mean", c, true, gpu), \
                   sum_backward("mean", c, true, gpu))              \
    FOLD_KERNELS(max, suffix, MXC__R_MAX, gpu)                      \
    FOLD_KERNELS(min, suffix, MXC__R_MIN, gpu)                      \
    FOLD_KERNELS(prod, suffix, MXC__R_PROD, gpu)                    \
    FOLD_KERNELS(nansum, suffix, MXC__R_NANSUM, gpu)                \
    FOLD_KERNELS(nanprod, suffix, MXC__R_NANPROD, gpu)              \
    REDUCE_KERNELS(norm, suffix, norm_forward(c, gpu), norm_backward(c, gpu))
REDUCE_ALL_KERNELS(, false)
#ifdef MXC_USE_CUDA
REDUCE_ALL_KERNELS(_gpu, true)
#endif

#define REDUCE_SHAPE_FN(ident)                                                             \
    static int ident##_shape(const void *p, mxc_shape *in, int ni, mxc_shape *out, int no, \
                             mxc_shape *aux, int na) {                                     \
        return reduce_shape(#ident, p, in, out);                                           \
    }
REDUCE_SHAPE_FN(sum)
REDUCE_SHAPE_FN(mean)
REDUCE_SHAPE_FN(max)
REDUCE_SHAPE_FN(min)
REDUCE_SHAPE_FN(prod)
REDUCE_SHAPE_FN(nansum)
REDUCE_SHAPE_FN(nanprod)

static int norm_shape(const void *params, mxc_shape *in, int ni, mxc_shape *out, int no,
                      mxc_shape *aux, int na) {
    const struct reduce_param p = norm_axes(params);
    return reduce_shape("norm", &p, in, out);
}

#define REDUCE_COMMON                                                          \
    .param_size = sizeof(struct reduce_param), .params = reduce_params,        \
    .num_params = (int)MXC_ARRAY_SIZE(reduce_params), .inputs = reduce_inputs, \
    .outputs = reduce_outputs

const struct mxc__op_def mxc__op_sum = {
    .name = "sum",
    .description = "sum over axes",
    REDUCE_COMMON,
    .infer_shape = sum_shape,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .forward_cpu = sum_fwd,
    .backward_cpu = sum_bwd,
    .forward_gpu = MXC__GPU(sum_fwd_gpu),
    .backward_gpu = MXC__GPU(sum_bwd_gpu),
};

const struct mxc__op_def mxc__op_mean = {
    .name = "mean",
    .description = "mean over axes",
    REDUCE_COMMON,
    .infer_shape = mean_shape,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .forward_cpu = mean_fwd,
    .backward_cpu = mean_bwd,
    .forward_gpu = MXC__GPU(mean_fwd_gpu),
    .backward_gpu = MXC__GPU(mean_bwd_gpu),
};

/* A reduction by fold: its forward takes temp space for add-to requests. */
#define FOLD_DEF(ident, desc, deps, ...)                                \
    const struct mxc__op_def mxc__op_##ident = {                        \
        .name = #ident,                                                 \
        .description = desc,                                            \
        __VA_ARGS__,                                                    \
        .infer_shape = ident##_shape,                                   \
        .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA | (deps), \
        .forward_resources = {MXC__RES_TEMP + 1},                       \
        .forward_cpu = ident##_fwd,                                     \
        .backward_cpu = ident##_bwd,                                    \
        .forward_gpu = MXC__GPU(ident##_fwd_gpu),                       \
        .backward_gpu = MXC__GPU(ident##_bwd_gpu),                      \
    };

FOLD_DEF(max, "maximum over axes; the gradient goes to every maximal element", MXC__DEP_OUT_DATA,
         REDUCE_COMMON)
FOLD_DEF(min, "minimum over axes; the gradient goes to every minimal element", MXC__DEP_OUT_DATA,
         REDUCE_COMMON)
FOLD_DEF(prod, "product over axes; gradient out_grad * output / data (MXNet's)", MXC__DEP_OUT_DATA,
         REDUCE_COMMON)
FOLD_DEF(nansum, "sum over axes, NaN counted as 0; gradient 0 at NaN", 0, REDUCE_COMMON)
FOLD_DEF(nanprod, "product over axes, NaN counted as 1; gradient 0 at NaN", MXC__DEP_OUT_DATA,
         REDUCE_COMMON)
FOLD_DEF(norm, "the 1-norm (ord 1) or 2-norm (ord 2) over axes", MXC__DEP_OUT_DATA,
         .param_size = sizeof(struct norm_param), .params = norm_params,
         .num_params = (int)MXC_ARRAY_SIZE(norm_params), .inputs = reduce_inputs,
         .outputs = reduce_outputs)

/*
 * operator/broadcast.c — the broadcast_* operators of operator/broadcast.h's table
 * (broadcast_add ... broadcast_logical_xor): numpy broadcasting of two inputs, the shorter
 * shape padded with 1s on the left (as MXNet does); an axis of size 1 in one operand
 * repeats against the other. One strided walk over the output, generated per operator from
 * its element-wise row, serves them all. Backward forms each input's share of the head
 * gradient over the output's shape and sums it back to the input's shape with the
 * reduction of operator/reduce.h. float32, row-major. The GPU kernels run the same steps,
 * the walks and the reduction on the device (operator/broadcast_gpu.cu,
 * operator/reduce_gpu.cu).
 */
#include "operator/broadcast.h"
#include "operator/gpu.h"
#include "operator/reduce.h"

#include <string.h>

static const char *const bcast_inputs[] = {"lhs", "rhs", NULL};
static const char *const bcast_outputs[] = {"output", NULL};

/* Axis `ax` of `s` with s left-padded by 1s to `n` axes. */
static int64_t padded_dim(const mxc_shape *s, int ax, int n) {
    int k = ax - (n - s->ndim);
    return k < 0 ? 1 : s->dims[k];
}

/* The view (operator/broadcast.h) of output shape `out` with operands of shapes a, b. */
static void bview_make(const mxc_shape *out, const mxc_shape *a, const mxc_shape *b,
                       struct mxc__bview *v) {
    bool ha[MXC_MAX_NDIM], hb[MXC_MAX_NDIM];
    int n = out->ndim;
    memset(v, 0, sizeof *v);
    v->size = mxc_shape_size(out);
    for (int ax = 0; ax < n; ax++) {
        int64_t d = out->dims[ax];
        if (d == 1)
            continue;
        bool has_a = padded_dim(a, ax, n) != 1, has_b = padded_dim(b, ax, n) != 1;
        int last = v->ndim - 1;
        if (last >= 0 && ha[last] == has_a && hb[last] == has_b) {
            v->dims[last] *= d;
        } else {
            ha[v->ndim] = has_a;
            hb[v->ndim] = has_b;
            v->dims[v->ndim++] = d;
        }
    }
    int64_t acc_a = 1, acc_b = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        v->sa[d] = ha[d] ? acc_a : 0;
        v->sb[d] = hb[d] ? acc_b : 0;
        acc_a *= ha[d] ? v->dims[d] : 1;
        acc_b *= hb[d] ? v->dims[d] : 1;
    }
}

/* The rows of a view: row r is out[r * len, (r + 1) * len), reading a from offa and b from
 * offb, each moving along the row (stride la, lb = 1) or fixed (0). */
struct brow {
    int64_t len, rows, la, lb, offa, offb;
    int64_t idx[MXC_MAX_NDIM];
};

static void brow_init(const struct mxc__bview *v, struct brow *w) {
    int n = v->ndim;
    memset(w, 0, sizeof *w);
    w->len = n ? v->dims[n - 1] : 1;
    w->rows = v->size / w->len;
    w->la = n ? v->sa[n - 1] : 0;
    w->lb = n ? v->sb[n - 1] : 0;
}

static void brow_next(const struct mxc__bview *v, struct brow *w) {
    for (int d = v->ndim - 2; d >= 0; d--) { /* the odometer over the outer runs */
        w->offa += v->sa[d];
        w->offb += v->sb[d];
        if (++w->idx[d] < v->dims[d])
            return;
        w->offa -= v->sa[d] * v->dims[d];
        w->offb -= v->sb[d] * v->dims[d];
        w->idx[d] = 0;
    }
}

/* One row o[0, len) = f(pa, pb), each operand moving (stride 1) or fixed (stride 0), as
 * four loops the compiler can vectorise. */
#define ROW_CASES(f)                                        \
    do {                                                    \
        if (w.la && w.lb) {                                 \
            MXC__ROW_STORE(req, o, w.len, f(pa[i], pb[i])); \
        } else if (w.la) {                                  \
            const float bv = pb[0];                         \
            MXC__ROW_STORE(req, o, w.len, f(pa[i], bv));    \
        } else if (w.lb) {                                  \
            const float av = pa[0];                         \
            MXC__ROW_STORE(req, o, w.len, f(av, pb[i]));    \
        } else {                                            \
            const float av = pa[0], bv = pb[0];             \
            MXC__ROW_STORE(req, o, w.len, f(av, bv));       \
        }                                                   \
    } while (0)

/* Per operator of the table, walking the output one row (the innermost run) at a time:
 *   <ident>_walk: out (v->size, req) = forward of a, b; out may be a when a is not
 *                 broadcast (element i reads only a[i]);
 *   <ident>_grad: out (v->size, req) = gradient for operand j at head gradient g;
 *   <ident>_unit: the gradient for operand j at head gradient 1 — the whole gradient,
 *                 times g, of the operators whose gradient reads no operand. */
#define BCAST_LOOPS(ident, ew, desc)                                                            \
    static void ident##_walk(const struct mxc__bview *v, const float *a, const float *b,        \
                             float *out, int req) {                                             \
        struct brow w;                                                                          \
        brow_init(v, &w);                                                                       \
        for (int64_t r = 0; r < w.rows; r++, brow_next(v, &w)) {                                \
            const float *pa = a + w.offa, *pb = b + w.offb;                                     \
            float *o = out + r * w.len;                                                         \
            ROW_CASES(mxc__ew_##ew##_fwd);                                                      \
        }                                                                                       \
    }                                                                                           \
    static void ident##_grad(int j, const struct mxc__bview *v, const float *g, const float *a, \
                             const float *b, float *out, int req) {                             \
        struct brow w;                                                                          \
        brow_init(v, &w);                                                                       \
        for (int64_t r = 0; r < w.rows; r++, brow_next(v, &w)) {                                \
            const float *pa = a + w.offa, *pb = b + w.offb, *pg = g + r * w.len;                \
            float *o = out + r * w.len;                                                         \
            if (j == 0)                                                                         \
                MXC__ROW_STORE(req, o, w.len,                                                   \
                               mxc__ew_##ew##_grad_a(pg[i], pa[i * w.la], pb[i * w.lb]));       \
            else                                                                                \
                MXC__ROW_STORE(req, o, w.len,                                                   \
                               mxc__ew_##ew##_grad_b(pg[i], pa[i * w.la], pb[i * w.lb]));       \
        }                                                                                       \
    }                                                                                           \
    static float ident##_unit(int j) {                                                          \
        return j ? mxc__ew_##ew##_grad_b(1.0f, 0.0f, 0.0f)                                      \
                 : mxc__ew_##ew##_grad_a(1.0f, 0.0f, 0.0f);                                     \
    }
MXC__BCAST_OPS(BCAST_LOOPS)

/* The loops of each kind, and what its gradient reads (mxc__backward_dep flags). */
static const struct {
    void (*walk)(const struct mxc__bview *v, const float *a, const float *b, float *out, int req);
    void (*grad)(int j, const struct mxc__bview *v, const float *g, const float *a, const float *b,
                 float *out, int req);
    float (*unit)(int j);
    unsigned deps;
} kinds[] = {
#define BCAST_KIND_ROW(ident, ew, desc) \
    [MXC__B_##ident] = {ident##_walk, ident##_grad, ident##_unit, mxc__ew_##ew##_deps},
    MXC__BCAST_OPS(BCAST_KIND_ROW)
#undef BCAST_KIND_ROW
};

/* The forward walk of `kind` on the device the call runs on (the GPU when `gpu`). */
static int walk_on(const struct mxc__op_call *c, bool gpu, int kind, const struct mxc__bview *v,
                   const float *a, const float *b, float *out, int req) {
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__bcast_walk_gpu(kind, v, a, b, out, req, c->rctx->stream);
#endif
    (void)c, (void)gpu;
    if (req != MXC__REQ_NULL && v->size > 0)
        kinds[kind].walk(v, a, b, out, req);
    return MXC_OK;
}

/* The gradient walk of `kind` for operand j, likewise. */
static int grad_on(const struct mxc__op_call *c, bool gpu, int kind, int j,
                   const struct mxc__bview *v, const float *g, const float *a, const float *b,
                   float *out, int req) {
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__bcast_grad_gpu(kind, j, v, g, a, b, out, req, c->rctx->stream);
#endif
    (void)c, (void)gpu;
    if (req != MXC__REQ_NULL && v->size > 0)
        kinds[kind].grad(j, v, g, a, b, out, req);
    return MXC_OK;
}

/* out (n, req) = 0: nothing to add for add-to requests. */
static int zero_on(const struct mxc__op_call *c, bool gpu, float *out, int64_t n, int req) {
    if (req == MXC__REQ_ADD)
        return MXC_OK;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__gpu_memset0(out, (size_t)n * sizeof(float), c->rctx->stream);
#endif
    (void)c, (void)gpu;
    memset(out, 0, (size_t)n * sizeof(float));
    return MXC_OK;
}

/* ---- Shapes ------------------------------------------------------------------------ */

static int bcast_shape(const char *op, mxc_shape *in, mxc_shape *out) {
    char a[128], b[128];
    if (in[0].ndim == 0 || in[1].ndim == 0)
        return MXC_OK; /* MXNet deduces nothing from one side */
    int n = in[0].ndim > in[1].ndim ? in[0].ndim : in[1].ndim;
    mxc_shape o = {.ndim = n};
    for (int ax = 0; ax < n; ax++) {
        int64_t l = padded_dim(&in[0], ax, n), r = padded_dim(&in[1], ax, n);
        if (l != r && l != 1 && r != 1)
            return mxc__error(MXC_ESHAPE,
                              "%s: lhs %s and rhs %s cannot be broadcast together "
                              "(axis %d: %lld vs %lld)",
                              op, mxc__shape_str(&in[0], a, sizeof a),
                              mxc__shape_str(&in[1], b, sizeof b), ax, (long long)l, (long long)r);
        o.dims[ax] = l == 1 ? r : l;
    }
    return mxc__shape_assign(&out[0], &o, op, "output");
}

/* ---- Kernels ----------------------------------------------------------------------- */

/* Both kernels run on the CPU, or on the GPU when `gpu` (a CUDA build's GPU entry points). */

/* out = lhs op rhs: lhs, rhs broadcast to out's shape */
static int bcast_forward(int kind, const struct mxc__op_call *c, bool gpu) {
    struct mxc__bview v;
    bview_make(&c->out_data[0].shape, &c->in_data[0].shape, &c->in_data[1].shape, &v);
    return walk_on(c, gpu, kind, &v, c->in_data[0].data, c->in_data[1].data, c->out_data[0].data,
                   c->req[0]);
}

/* d_lhs, d_rhs: each operand's gradient over out's shape, summed over the axes that operand
 * was broadcast along. A gradient that reads no operand is the head gradient times a
 * constant (1, -1 or 0), summed directly (exact zeros for 0, as MXNet's comparisons give);
 * the others are walked into temp space first where they need summing. */
static int bcast_backward(int kind, const struct mxc__op_call *c, bool gpu) {
    const mxc_shape *os = &c->out_grad[0].shape;
    const float *g = c->out_grad[0].data;
    for (int j = 0; j < 2; j++) {
        int req = c->req[j], rc;
        if (req == MXC__REQ_NULL)
            continue;
        const mxc_shape *is = &c->in_grad[j].shape;
        float *gi = c->in_grad[j].data;
        bool mask[MXC_MAX_NDIM], any = false;
        for (int ax = 0; ax < os->ndim; ax++) {
            mask[ax] = padded_dim(is, ax, os->ndim) == 1 && os->dims[ax] != 1;
            any = any || mask[ax];
        }
        struct mxc__reduce_view rv;
        mxc__reduce_view_make(os, mask, &rv);
        if (!(kinds[kind].deps & MXC__DEP_IN_DATA)) {
            float scale = kinds[kind].unit(j);
            rc = scale == 0.0f ? zero_on(c, gpu, gi, rv.out_size, req)
                               : mxc__reduce_sum_on(c, gpu, &rv, g, gi, scale, req);
            if (rc != MXC_OK)
                return rc;
            continue;
        }
        const struct mxc__tensor *a = &c->in_data[0], *b = &c->in_data[1];
        struct mxc__bview bv;
        bview_make(os, &a->shape, &b->shape, &bv);
        if (!any) {
            rc = grad_on(c, gpu, kind, j, &bv, g, a->data, b->data, gi, req);
            if (rc != MXC_OK)
                return rc;
            continue;
        }
        void *tmp;
        rc = mxc__resource_temp(c->resources[0], (size_t)bv.size * sizeof(float), &tmp);
        if (rc == MXC_OK)
            rc = grad_on(c, gpu, kind, j, &bv, g, a->data, b->data, tmp, MXC__REQ_WRITE);
        if (rc == MXC_OK)
            rc = mxc__reduce_sum_on(c, gpu, &rv, tmp, gi, 1.0f, req);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

/* ---- Definitions ------------------------------------------------------------------- */

/* The GPU entry points exist in CUDA builds only (MXC__GPU leaves NULL otherwise). */
#ifdef MXC_USE_CUDA
#define BCAST_GPU_KERNELS(ident)                               \
    static int ident##_fwd_gpu(const struct mxc__op_call *c) { \
        return bcast_forward(MXC__B_##ident, c, 1);            \
    }                                                          \
    static int ident##_bwd_gpu(const struct mxc__op_call *c) { \
        return bcast_backward(MXC__B_##ident, c, 1);           \
    }
#else
#define BCAST_GPU_KERNELS(ident)
#endif

/* A gradient that reads the operands sums through temp space. */
#define BCAST_DEF(ident, ew, desc)                                                                \
    static int ident##_fwd(const struct mxc__op_call *c) {                                        \
        return bcast_forward(MXC__B_##ident, c, 0);                                               \
    }                                                                                             \
    static int ident##_bwd(const struct mxc__op_call *c) {                                        \
        return bcast_backward(MXC__B_##ident, c, 0);                                              \
    }                                                                                             \
    BCAST_GPU_KERNELS(ident)                                                                      \
    static int ident##_shape(const void *p, mxc_shape *in, int ni, mxc_shape *out, int no,        \
                             mxc_shape *aux, int na) {                                            \
        return bcast_shape(#ident, in, out);                                                      \
    }                                                                                             \
    const struct mxc__op_def mxc__op_##ident = {                                                  \
        .name = #ident,                                                                           \
        .description = desc,                                                                      \
        .inputs = bcast_inputs,                                                                   \
        .outputs = bcast_outputs,                                                                 \
        .infer_shape = ident##_shape,                                                             \
        .backward_deps = MXC__DEP_OUT_GRAD | mxc__ew_##ew##_deps,                                 \
        .backward_resources = {(mxc__ew_##ew##_deps & MXC__DEP_IN_DATA) ? MXC__RES_TEMP + 1 : 0}, \
        .forward_cpu = ident##_fwd,                                                               \
        .backward_cpu = ident##_bwd,                                                              \
        .forward_gpu = MXC__GPU(ident##_fwd_gpu),                                                 \
        .backward_gpu = MXC__GPU(ident##_bwd_gpu),                                                \
    };
MXC__BCAST_OPS(BCAST_DEF)

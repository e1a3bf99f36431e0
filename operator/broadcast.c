/*
 * operator/broadcast.c — broadcast_add, broadcast_sub, broadcast_mul, broadcast_div: numpy
 * broadcasting of two inputs, the shorter shape padded with 1s on the left (as MXNet does);
 * an axis of size 1 in one operand repeats against the other. One strided walk over the
 * output serves all four. Backward forms each input's share of the head gradient over the
 * output's shape and sums it back to the input's shape with the reduction of
 * operator/reduce.h. float32, row-major. The GPU kernels run the same steps, the walk and
 * the reduction on the device (operator/broadcast_gpu.cu, operator/reduce_gpu.cu), with the
 * view and arithmetic of operator/broadcast.h.
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

/* One row o[0, len) = f(pa, pb), each operand moving (stride 1) or fixed (stride 0). */
#define ROW_CASES(f)                                      \
    do {                                                  \
        if (la && lb) {                                   \
            MXC__ROW_STORE(req, o, len, f(pa[i], pb[i])); \
        } else if (la) {                                  \
            const float bv = pb[0];                       \
            MXC__ROW_STORE(req, o, len, f(pa[i], bv));    \
        } else if (lb) {                                  \
            const float av = pa[0];                       \
            MXC__ROW_STORE(req, o, len, f(av, pb[i]));    \
        } else {                                          \
            const float av = pa[0], bv = pb[0];           \
            MXC__ROW_STORE(req, o, len, f(av, bv));       \
        }                                                 \
    } while (0)

/* out (v->size, req) = a op b, walking the output one row (the innermost run) at a time.
 * out may be a when a is not broadcast (element i reads only a[i]). */
static void bcast_walk(int op, const struct mxc__bview *v, const float *a, const float *b,
                       float *out, int req) {
    if (req == MXC__REQ_NULL || v->size == 0)
        return;
    int n = v->ndim;
    int64_t len = n ? v->dims[n - 1] : 1, rows = v->size / len;
    int64_t la = n ? v->sa[n - 1] : 0, lb = n ? v->sb[n - 1] : 0;
    int64_t idx[MXC_MAX_NDIM] = {0}, offa = 0, offb = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *pa = a + offa, *pb = b + offb;
        float *o = out + r * len;
        switch (op) {
        case MXC__B_ADD: ROW_CASES(mxc__b_add); break;
        case MXC__B_SUB: ROW_CASES(mxc__b_sub); break;
        case MXC__B_MUL: ROW_CASES(mxc__b_mul); break;
        default: ROW_CASES(mxc__b_div); break;
        }
        for (int d = n - 2; d >= 0; d--) { /* the odometer over the outer runs */
            offa += v->sa[d];
            offb += v->sb[d];
            if (++idx[d] < v->dims[d])
                break;
            offa -= v->sa[d] * v->dims[d];
            offb -= v->sb[d] * v->dims[d];
            idx[d] = 0;
        }
    }
}

/* bcast_walk on the device the call runs on (the GPU when `gpu`). */
static int walk_on(const struct mxc__op_call *c, bool gpu, int op, const struct mxc__bview *v,
                   const float *a, const float *b, float *out, int req) {
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__bcast_walk_gpu(op, v, a, b, out, req, c->rctx->stream);
#endif
    (void)c, (void)gpu;
    bcast_walk(op, v, a, b, out, req);
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
static int bcast_forward(int op, const struct mxc__op_call *c, bool gpu) {
    struct mxc__bview v;
    bview_make(&c->out_data[0].shape, &c->in_data[0].shape, &c->in_data[1].shape, &v);
    return walk_on(c, gpu, op, &v, c->in_data[0].data, c->in_data[1].data, c->out_data[0].data,
                   c->req[0]);
}

/* d_lhs, d_rhs from dy (out's shape):
 *   add: dy, dy;  sub: dy, -dy;  mul: dy * rhs, dy * lhs;  div: dy / rhs, -dy * lhs / rhs²
 * each summed over the axes its input was broadcast along. */
static int bcast_backward(int op, const struct mxc__op_call *c, bool gpu) {
    const mxc_shape *os = &c->out_grad[0].shape;
    const float *g = c->out_grad[0].data;
    for (int j = 0; j < 2; j++) {
        int req = c->req[j];
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
        float sign = (op == MXC__B_SUB || op == MXC__B_DIV) && j == 1 ? -1.0f : 1.0f;
        int rc;
        if (op == MXC__B_ADD || op == MXC__B_SUB) {
            rc = mxc__reduce_sum_on(c, gpu, &rv, g, gi, sign, req);
            if (rc != MXC_OK)
                return rc;
            continue;
        }
        /* dy times (or over) the other operand, over out's shape */
        const struct mxc__tensor *other = &c->in_data[1 - j];
        struct mxc__bview bv;
        bview_make(os, os, &other->shape, &bv);
        int kind = op == MXC__B_MUL || j == 1 ? MXC__B_MUL : MXC__B_DIV;
        if (!any && !(op == MXC__B_DIV && j == 1)) {
            rc = walk_on(c, gpu, kind, &bv, g, other->data, gi, req);
            if (rc != MXC_OK)
                return rc;
            continue;
        }
        void *tmp;
        rc = mxc__resource_temp(c->resources[0], (size_t)bv.size * sizeof(float), &tmp);
        if (rc != MXC_OK)
            return rc;
        float *t = tmp;
        rc = walk_on(c, gpu, kind, &bv, g, other->data, t, MXC__REQ_WRITE);
        if (rc == MXC_OK && op == MXC__B_DIV && j == 1) { /* dy * lhs, then twice over rhs */
            const struct mxc__tensor *rhs = &c->in_data[1];
            bview_make(os, os, &rhs->shape, &bv);
            rc = walk_on(c, gpu, MXC__B_DIV, &bv, t, rhs->data, t, MXC__REQ_WRITE);
            if (rc == MXC_OK)
                rc = walk_on(c, gpu, MXC__B_DIV, &bv, t, rhs->data, t, MXC__REQ_WRITE);
        }
        if (rc == MXC_OK)
            rc = mxc__reduce_sum_on(c, gpu, &rv, t, gi, sign, req);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

/* ---- Definitions ------------------------------------------------------------------- */

/* The GPU entry points exist in CUDA builds only (MXC__GPU leaves NULL otherwise). */
#ifdef MXC_USE_CUDA
#define BCAST_GPU_KERNELS(ident, kind)                                                             \
    static int ident##_fwd_gpu(const struct mxc__op_call *c) { return bcast_forward(kind, c, 1); } \
    static int ident##_bwd_gpu(const struct mxc__op_call *c) { return bcast_backward(kind, c, 1); }
#else
#define BCAST_GPU_KERNELS(ident, kind)
#endif

#define BCAST_DEF(ident, kind, desc, deps, bres)                                                \
    static int ident##_fwd(const struct mxc__op_call *c) { return bcast_forward(kind, c, 0); }  \
    static int ident##_bwd(const struct mxc__op_call *c) { return bcast_backward(kind, c, 0); } \
    BCAST_GPU_KERNELS(ident, kind)                                                              \
    static int ident##_shape(const void *p, mxc_shape *in, int ni, mxc_shape *out, int no,      \
                             mxc_shape *aux, int na) {                                          \
        return bcast_shape(#ident, in, out);                                                    \
    }                                                                                           \
    const struct mxc__op_def mxc__op_##ident = {                                                \
        .name = #ident,                                                                         \
        .description = desc,                                                                    \
        .inputs = bcast_inputs,                                                                 \
        .outputs = bcast_outputs,                                                               \
        .infer_shape = ident##_shape,                                                           \
        .backward_deps = MXC__DEP_OUT_GRAD | (deps),                                            \
        .backward_resources = {bres},                                                           \
        .forward_cpu = ident##_fwd,                                                             \
        .backward_cpu = ident##_bwd,                                                            \
        .forward_gpu = MXC__GPU(ident##_fwd_gpu),                                               \
        .backward_gpu = MXC__GPU(ident##_bwd_gpu),                                              \
    };

BCAST_DEF(broadcast_add, MXC__B_ADD, "lhs + rhs, broadcast", 0, 0)
BCAST_DEF(broadcast_sub, MXC__B_SUB, "lhs - rhs, broadcast", 0, 0)
BCAST_DEF(broadcast_mul, MXC__B_MUL, "lhs * rhs, broadcast", MXC__DEP_IN_DATA, MXC__RES_TEMP + 1)
BCAST_DEF(broadcast_div, MXC__B_DIV, "lhs / rhs, broadcast", MXC__DEP_IN_DATA, MXC__RES_TEMP + 1)

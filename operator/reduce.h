/*
 * operator/reduce.h — the reduction view shared inside the reduce family: operator/reduce.c
 * (sum, mean, max, min, prod, nansum, nanprod, norm and their gradients) and
 * operator/broadcast.c (whose backward sums each head gradient back to its input's shape),
 * and the per-element arithmetic of the reductions (MXC__HD: the CPU loops and the GPU
 * kernels share it). Internal. The GPU launchers below are defined in
 * operator/reduce_gpu.cu, in CUDA builds only; the view is made on the host and passed to
 * the kernels by value.
 */
#ifndef MXC_OPERATOR_REDUCE_H
#define MXC_OPERATOR_REDUCE_H

#include "common/hd.h"
#include "operator/op.h"

#include <math.h>

/* A row-major input seen as runs of axes that are all reduced or all kept: size-1 axes are
 * dropped and neighbours of one kind merged, so reducing one axis (or one contiguous block)
 * is the view (outer, reduce, inner), and any axis set is an alternation of such runs.
 * The output holds the kept runs in order (the layout of the input with reduced axes set to
 * 1 or removed). Kernels walk the input one row (the last run) at a time. */
struct mxc__reduce_view {
    int ndim;                         /* runs; 0 when every axis has size 1 */
    int64_t dims[MXC_MAX_NDIM];       /* run lengths */
    int64_t out_stride[MXC_MAX_NDIM]; /* output stride of each run, 0 on reduced runs */
    bool last_reduced;                /* whether the innermost run is reduced */
    int64_t in_size, out_size;        /* elements */
    int64_t count;                    /* input elements folded into each output */
};

/* The view of input `in` reduced over the axes `reduced[a]` is true for. */
void mxc__reduce_view_make(const mxc_shape *in, const bool *reduced, struct mxc__reduce_view *v);

/* out (out_size, written as `req` says) = scale * sum of in (in_size) over the reduced
 * axes. With no reduced axis it is a scaled copy. */
void mxc__reduce_sum(const struct mxc__reduce_view *v, const float *in, float *out, float scale,
                     int req);

/* mxc__reduce_sum on the device a kernel runs on: the GPU (on call->rctx->stream) when
 * `gpu`, which only a CUDA build may ask for. MXC_OK, or MXC_EDEVICE from the launch. */
int mxc__reduce_sum_on(const struct mxc__op_call *call, bool gpu, const struct mxc__reduce_view *v,
                       const float *in, float *out, float scale, int req);

/* ---- The reductions ---------------------------------------------------------------------
 * Each folds the reduced elements, in double, from a start value, then finishes. Maxima and
 * minima skip NaN (a comparison with NaN is false); the nan- forms skip NaN (x != x). */
enum {
    MXC__R_SUM,
    MXC__R_MAX,
    MXC__R_MIN,
    MXC__R_PROD,
    MXC__R_NANSUM,
    MXC__R_NANPROD,
    MXC__R_NORM1, /* sum of |x| */
    MXC__R_NORM2, /* sqrt of the sum of x^2 */
};

static inline MXC__HD double mxc__red_start(int kind) {
    return kind == MXC__R_MAX                              ? -INFINITY
           : kind == MXC__R_MIN                            ? INFINITY
           : kind == MXC__R_PROD || kind == MXC__R_NANPROD ? 1.0
                                                           : 0.0;
}

static inline MXC__HD double mxc__red_fold(int kind, double m, double x) {
    switch (kind) {
    case MXC__R_MAX: return x > m ? x : m;
    case MXC__R_MIN: return x < m ? x : m;
    case MXC__R_PROD: return m * x;
    case MXC__R_NANSUM: return x != x ? m : m + x;
    case MXC__R_NANPROD: return x != x ? m : m * x;
    case MXC__R_NORM1: return m + fabs(x);
    case MXC__R_NORM2: return m + x * x;
    default: return m + x;
    }
}

static inline MXC__HD double mxc__red_finish(int kind, double m) {
    return kind == MXC__R_NORM2 ? sqrt(m) : m;
}

/* The gradient at input element x of the output y it was folded into, for head gradient g:
 * MXNet 1.9.1's. Maxima and minima give g to every element equal to the result (ties
 * included); products give g y / x (NaN at a zero whose product is 0, as MXNet's); norms
 * g sign(x) and g x / y (NaN where y is 0). The nan- forms give 0 at NaN. y is not read by
 * nansum and the 1-norm. */
static inline MXC__HD float mxc__red_grad(int kind, float g, float x, float y) {
    switch (kind) {
    case MXC__R_MAX:
    case MXC__R_MIN: return x == y ? g : 0.0f;
    case MXC__R_PROD: return g * y / x;
    case MXC__R_NANSUM: return x != x ? 0.0f : g;
    case MXC__R_NANPROD: return x != x ? 0.0f : g * y / x;
    case MXC__R_NORM1: return x > 0.0f ? g : x < 0.0f ? -g : 0.0f;
    case MXC__R_NORM2: return g * x / y;
    default: return g;
    }
}

/* ---- GPU launchers (operator/reduce_gpu.cu; device pointers, work enqueued on `stream`):
 * MXC_OK or MXC_EDEVICE. Each does nothing for a null request. */

/* mxc__reduce_sum on a GPU. */
int mxc__reduce_sum_gpu(const struct mxc__reduce_view *v, const float *in, float *out, float scale,
                        int req, void *stream);

/* out (out_size, req) = the reduction `kind` (an MXC__R_ value) of in over the reduced axes
 * (its start value, finished, where nothing is reduced in). */
int mxc__reduce_fold_gpu(int kind, const struct mxc__reduce_view *v, const float *in, float *out,
                         int req, void *stream);

/* gi (in_size, req) = scale * g (out_size) broadcast back over the reduced axes. */
int mxc__reduce_back_gpu(const struct mxc__reduce_view *v, const float *g, float *gi, float scale,
                         int req, void *stream);

/* gi (in_size, req) = mxc__red_grad(kind, g, x, y) with g and y (out_size; y may be NULL
 * where the gradient does not read it) at each input element's output. */
int mxc__reduce_grad_gpu(int kind, const struct mxc__reduce_view *v, const float *x, const float *y,
                         const float *g, float *gi, int req, void *stream);

/* q[i] for i < n (a loop variable `i` the expression may use) is set to expr, or increased
 * by it for add-to requests. */
#define MXC__ROW_STORE(req, q, n, expr)       \
    do {                                      \
        if ((req) == MXC__REQ_ADD) {          \
            for (int64_t i = 0; i < (n); i++) \
                (q)[i] += (expr);             \
        } else {                              \
            for (int64_t i = 0; i < (n); i++) \
                (q)[i] = (expr);              \
        }                                     \
    } while (0)

#endif /* MXC_OPERATOR_REDUCE_H */

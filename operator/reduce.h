/*
 * operator/reduce.h — the reduction view shared inside the reduce family: operator/reduce.c
 * (sum, mean, max and their gradients) and operator/broadcast.c (whose backward sums each
 * head gradient back to its input's shape). Internal. The GPU launchers below are defined
 * in operator/reduce_gpu.cu, in CUDA builds only; the view is made on the host and passed
 * to the kernels by value.
 */
#ifndef MXC_OPERATOR_REDUCE_H
#define MXC_OPERATOR_REDUCE_H

#include "operator/op.h"

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

/* ---- GPU launchers (operator/reduce_gpu.cu; device pointers, work enqueued on `stream`):
 * MXC_OK or MXC_EDEVICE. Each does nothing for a null request. */

/* mxc__reduce_sum on a GPU. */
int mxc__reduce_sum_gpu(const struct mxc__reduce_view *v, const float *in, float *out, float scale,
                        int req, void *stream);

/* out (out_size, req) = max of in over the reduced axes (-inf where nothing is reduced in). */
int mxc__reduce_max_gpu(const struct mxc__reduce_view *v, const float *in, float *out, int req,
                        void *stream);

/* gi (in_size, req) = scale * g (out_size) broadcast back over the reduced axes. */
int mxc__reduce_back_gpu(const struct mxc__reduce_view *v, const float *g, float *gi, float scale,
                         int req, void *stream);

/* gi (in_size, req) = g where x (in_size) equals the maximum y (out_size), else 0. */
int mxc__reduce_max_back_gpu(const struct mxc__reduce_view *v, const float *x, const float *y,
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

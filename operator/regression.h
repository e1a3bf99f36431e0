/*
 * operator/regression.h — the per-element arithmetic of the regression losses (MXC__HD:
 * operator/regression.c's CPU loops and operator/regression_gpu.cu's kernels call the same
 * functions) and their GPU launchers (device pointers, work queued on `stream`, a
 * cudaStream_t; MXC_OK or MXC_EDEVICE; declared in every build, defined in a CUDA build).
 */
#ifndef MXC_OPERATOR_REGRESSION_H
#define MXC_OPERATOR_REGRESSION_H

#include "common/hd.h"

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum mxc__reg_kind { MXC__REG_LINEAR, MXC__REG_LOGISTIC, MXC__REG_MAE };

/* The forward transform: sigmoid(x) for the logistic loss, x otherwise. */
static inline MXC__HD float mxc__reg_out(int kind, float x) {
    return kind == MXC__REG_LOGISTIC ? 1.0f / (1.0f + expf(-x)) : x;
}

/* The gradient at one element: g(y - label) * scale, g the sign for MAE, else identity. */
static inline MXC__HD float mxc__reg_grad(int kind, float y, float label, float scale) {
    float d = y - label;
    return kind == MXC__REG_MAE ? (float)((d > 0) - (d < 0)) * scale : d * scale;
}

/* y (n) (=, +=) mxc__reg_out(kind, x); y may be x (not adding). */
int mxc__reg_forward_gpu(int kind, const float *x, float *y, int64_t n, int req, void *stream);

/* dx (n) (=, +=) mxc__reg_grad(kind, y, label, scale). */
int mxc__reg_backward_gpu(int kind, const float *y, const float *label, float *dx, int64_t n,
                          float scale, int req, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* MXC_OPERATOR_REGRESSION_H */

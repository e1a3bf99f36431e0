/*
 * operator/dropout.h — what Dropout's CPU kernels (operator/dropout.c) and GPU kernels
 * (operator/dropout_gpu.cu) share: the mask value of one uniform draw (MXC__HD) and the GPU
 * launchers (device pointers, work queued on `stream`, a cudaStream_t; MXC_OK or
 * MXC_EDEVICE; declared in every build, defined in a CUDA build).
 */
#ifndef MXC_OPERATOR_DROPOUT_H
#define MXC_OPERATOR_DROPOUT_H

#include "common/hd.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The scale of a kept element, 1 / keep (0 when nothing is kept: p = 1). */
static inline MXC__HD float mxc__dropout_scale(float keep) {
    return keep > 0.0f ? 1.0f / keep : 0.0f;
}

/* The mask value of uniform draw u in [0, 1): kept (u < keep = 1 - p) scales by `scale`
 * (1 / keep), dropped gives 0. */
static inline MXC__HD float mxc__dropout_mask(float u, float keep, float scale) {
    return u < keep ? scale : 0.0f;
}

/* mask (n): active, each uniform draw in it turned into mxc__dropout_mask; else all 1. */
int mxc__dropout_mask_gpu(float *mask, int64_t n, bool active, float keep, float scale,
                          void *stream);

/* o (dims, nd axes, row-major) (=, +=) a (dims) * mask (mdims: dims, or 1 along an axis
 * where one value is shared); o may be a (not adding). */
int mxc__dropout_mul_gpu(float *o, const float *a, const float *mask, int nd, const int64_t *dims,
                         const int64_t *mdims, int req, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* MXC_OPERATOR_DROPOUT_H */

/*
 * operator/embedding.h — what Embedding's CPU kernels (operator/embedding.c) and GPU
 * kernels (operator/embedding_gpu.cu) share: the row an index selects (MXC__HD) and the GPU
 * launchers (device pointers, work queued on `stream`, a cudaStream_t; MXC_OK or
 * MXC_EDEVICE; declared in every build, defined in a CUDA build).
 */
#ifndef MXC_OPERATOR_EMBEDDING_H
#define MXC_OPERATOR_EMBEDDING_H

#include "common/hd.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The row an index value selects: truncated toward zero, clipped to [0, rows), as MXNet's
 * CPU and GPU kernels clip (so no index is ever an error, on either device). */
static inline MXC__HD int64_t mxc__embedding_row(float v, int64_t rows) {
    if (!(v >= 1.0f)) /* also NaN */
        return 0;
    if (v >= (float)rows)
        return rows - 1;
    return (int64_t)v;
}

/* out (n, dim) (=, +=) weight (rows, dim) at the rows of idx (n). */
int mxc__embedding_gpu(const float *idx, const float *weight, float *out, int64_t n, int64_t rows,
                       int64_t dim, int req, void *stream);

/* dweight (rows, dim) += dout (n, dim) scattered to the rows of idx (n), with atomics. */
int mxc__embedding_grad_gpu(const float *idx, const float *dout, float *dweight, int64_t n,
                            int64_t rows, int64_t dim, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* MXC_OPERATOR_EMBEDDING_H */

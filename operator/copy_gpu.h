/*
 * operator/copy_gpu.h — the GPU launchers of the data-moving operators (operator/copy_gpu.cu):
 * copies honouring a write request (Flatten, Reshape, expand_dims, Concat, SliceChannel,
 * Dropout at inference, _sleep) and the sum of ElementWiseSum. Pointers are device pointers; work
 * is queued on `stream` (a cudaStream_t) and each returns MXC_OK or MXC_EDEVICE (message recorded).
 * Requests are enum mxc__req values, honoured as mxc__copy_req (operator/op.h) does. Declared in
 * every build, defined only in a CUDA build: C files call them under #ifdef MXC_USE_CUDA.
 */
#ifndef MXC_OPERATOR_COPY_GPU_H
#define MXC_OPERATOR_COPY_GPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst (n) = or += src (n) as `req` says; dst == src without adding does nothing. */
int mxc__copy_req_gpu(float *dst, const float *src, int64_t n, int req, void *stream);

/* dst row r (width floats at dst + r * dpitch) = or += src row r (at src + r * spitch), for
 * rows r in [0, rows): a block of rows out of, or into, a wider array (Concat's parts). */
int mxc__copy_rows_gpu(float *dst, int64_t dpitch, const float *src, int64_t spitch, int64_t rows,
                       int64_t width, int req, void *stream);

/* out (n) = or += in[0] + ... + in[num - 1], num <= MXC__MAX_OP_ARGS; out may be any of
 * the inputs (every input is read at an element before out is written there). */
int mxc__sum_gpu(float *out, const float *const *in, int num, int64_t n, int req, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* MXC_OPERATOR_COPY_GPU_H */

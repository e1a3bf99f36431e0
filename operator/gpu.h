/*
 * operator/gpu.h — what GPU kernels share, from C and from CUDA: the status of the last
 * launch, the worker's cuBLAS and cuDNN handles, and the MXC__GPU marker that puts a GPU
 * kernel into an operator definition only in a CUDA build.
 *
 * A GPU kernel (an mxc__op_kernel like the CPU ones) runs on a GPU worker of the engine:
 * call->rctx->stream is that worker's stream, on which it enqueues its work and returns;
 * the engine synchronises the stream before the operation counts as done. Tensors' data
 * are device pointers. Handles are per worker thread, made on its first use and bound to
 * the stream on every call, never created per call.
 */
#ifndef MXC_OPERATOR_GPU_H
#define MXC_OPERATOR_GPU_H

#include "mxc/engine.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* In an operator definition: `.forward_gpu = MXC__GPU(relu_forward_gpu)` names the
 * kernel in a CUDA build and leaves NULL (no GPU kernel) otherwise, so the .cu file that
 * defines it is needed only there. */
#ifdef MXC_USE_CUDA
#define MXC__GPU(fn) fn
#else
#define MXC__GPU(fn) NULL
#endif

/* MXC_OK, or MXC_EDEVICE naming `what` and CUDA's message when the last launch (or any
 * earlier asynchronous work) failed; clears the error. */
int mxc__gpu_status(const char *what);

/* Zeroes `bytes` at device pointer `p` on `stream`: MXC_OK or MXC_EDEVICE. */
int mxc__gpu_memset0(void *p, size_t bytes, void *stream);

/* This worker's cuBLAS handle (a cublasHandle_t), bound to rctx->stream, with pointer
 * mode host: MXC_OK, or MXC_EDEVICE when it cannot be made (message recorded). */
int mxc__cublas(const mxc_run_ctx *rctx, void **handle);

/* This worker's cuDNN handle (a cudnnHandle_t), bound to rctx->stream: MXC_OK,
 * MXC_EDEVICE, or MXC_ENOTSUP in a build without USE_CUDNN. */
int mxc__cudnn(const mxc_run_ctx *rctx, void **handle);

#ifdef __cplusplus
}
#endif

#endif /* MXC_OPERATOR_GPU_H */

/*
 * operator/blas_gpu.h — the matrix products of FullyConnected, dot and batch_dot on a GPU
 * (operator/blas_gpu.cu), callable from C: row-major products mapped onto cuBLAS's
 * column-major sgemm in one place, and the bias broadcast and column sums FullyConnected
 * adds around them. Every function enqueues on the calling worker's stream (rctx->stream)
 * and returns MXC_OK, or MXC_EDEVICE with the library's message. Matrices are packed
 * (row stride = columns); `req` is a write request (operator/op.h): null writes nothing and
 * computes no address into c, write and inplace overwrite, add accumulates.
 */
#ifndef MXC_OPERATOR_BLAS_GPU_H
#define MXC_OPERATOR_BLAS_GPU_H

#include "mxc/engine.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* c (batch, m, n) = or += op(a) · op(b), for each of `batch` products, where a is
 * (batch, m, k), or (batch, k, m) with ta, and b is (batch, k, n), or (batch, n, k) with tb.
 * k == 0 makes c zeros (or leaves it, for add). `what` names the operator in errors. */
int mxc__gemm_gpu(const mxc_run_ctx *rctx, const char *what, int req, bool ta, bool tb,
                  int64_t batch, int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                  float *c);

/* y (m, n) = or += every row the vector b (n). */
int mxc__bias_rows_gpu(const mxc_run_ctx *rctx, int req, int64_t m, int64_t n, const float *b,
                       float *y);

/* g (n) = or += the sum of the rows of x (m, n); zeros when m == 0. */
int mxc__col_sums_gpu(const mxc_run_ctx *rctx, int req, int64_t m, int64_t n, const float *x,
                      float *g);

#ifdef __cplusplus
}
#endif

#endif /* MXC_OPERATOR_BLAS_GPU_H */

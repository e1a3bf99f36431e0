/*
 * operator/blas_gpu.cu — operator/blas_gpu.h on cuBLAS: row-major products as
 * column-major ones, plus FullyConnected's bias broadcast and column sums.
 *
 * A row-major matrix is its transpose read column-major, so row-major C = op(A) op(B) is
 * column-major Cᵀ = op(B)ᵀ op(A)ᵀ: cuBLAS gets B first, then A, with m and n swapped and
 * each transpose flag as given. The 64-bit cuBLAS entry points take the sizes as they are.
 */
#include "operator/channel_sum.cuh"
#include "operator/op_gpu.cuh"

#include <cublas_v2.h>

extern "C" {
#include "operator/blas_gpu.h"
}

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

extern "C" int mxc__gemm_gpu(const mxc_run_ctx *rctx, const char *what, int req, bool ta, bool tb,
                             int64_t batch, int64_t m, int64_t n, int64_t k, const float *a,
                             const float *b, float *c) {
    if (req == MXC__REQ_NULL || batch == 0 || m == 0 || n == 0)
        return MXC_OK;
    if (k == 0) /* an empty sum: cuBLAS's leading dimensions would be invalid */
        return req == MXC__REQ_ADD
                   ? MXC_OK
                   : mxc__gpu_memset0(c, (size_t)(batch * m * n) * sizeof(float), rctx->stream);
    void *h;
    int rc = mxc__cublas(rctx, &h);
    if (rc != MXC_OK)
        return rc;
    const float alpha = 1.0f, beta = req == MXC__REQ_ADD ? 1.0f : 0.0f;
    cublasStatus_t s = cublasSgemmStridedBatched_64(
        (cublasHandle_t)h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
        &alpha, b, max1(tb ? k : n), k * n, a, max1(ta ? m : k), m * k, &beta, c, max1(n), m * n,
        batch);
    if (s != CUBLAS_STATUS_SUCCESS)
        return mxc__error(MXC_EDEVICE, "%s: cublasSgemmStridedBatched_64: %s", what,
                          cublasGetStatusString(s));
    return MXC_OK;
}

extern "C" int mxc__bias_rows_gpu(const mxc_run_ctx *rctx, int req, int64_t m, int64_t n,
                                  const float *b, float *y) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(m * n, rctx->stream, "bias rows",
                       [=] __device__(int64_t i) { mxc__put(req, y, i, b[i % n]); });
}

extern "C" int mxc__col_sums_gpu(const mxc_run_ctx *rctx, int req, int64_t m, int64_t n,
                                 const float *x, float *g) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    /* the columns are the channels of x seen as (m, n, 1) */
    return mxc__per_channel(n, rctx->stream, "column sums", [=] __device__(int64_t k) {
        double s = 0;
        for (int64_t j = threadIdx.x; j < m; j += blockDim.x)
            s += x[j * n + k];
        s = mxc__block_sum(s);
        if (threadIdx.x == 0)
            mxc__put(req, g, k, (float)s);
    });
}

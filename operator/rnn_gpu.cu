/*
 * operator/rnn_gpu.cu — the primitives of the fused RNN operator on a GPU
 * (struct mxc__rnn_ops, operator/rnn_math.h): operator/rnn.c's one driver of layers,
 * directions and steps runs on them. Products on cuBLAS (row-major as column-major, as in
 * operator/blas_gpu.cu, but with the row strides the recurrent products need: h_{t-1} is a
 * direction's columns inside a layer's output); the step is one thread per (row, unit)
 * calling the gate arithmetic the CPU loop calls; dropout draws with Dropout's kernels.
 */
#include "operator/op_gpu.cuh"

#include <cublas_v2.h>

extern "C" {
#include "operator/blas_gpu.h"
#include "operator/copy_gpu.h"
#include "operator/dropout.h"
#include "operator/rnn_math.h"
#include "resource/resource.h"
}

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

static int gemm_gpu(const mxc_run_ctx *rctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                    int64_t ldc) {
    if (m == 0 || n == 0)
        return MXC_OK;
    if (k == 0) { /* an empty sum: beta c, and beta is 0 or 1 here */
        if (beta != 0.0f)
            return MXC_OK;
        return mxc__launch(m * n, rctx->stream, "RNN zero",
                           [=] __device__(int64_t i) { c[(i / n) * ldc + i % n] = 0.0f; });
    }
    void *h;
    int rc = mxc__cublas(rctx, &h);
    if (rc != MXC_OK)
        return rc;
    const float alpha = 1.0f;
    cublasStatus_t s = cublasSgemm_64((cublasHandle_t)h, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, max1(ldb),
                                      a, max1(lda), &beta, c, max1(ldc));
    if (s != CUBLAS_STATUS_SUCCESS)
        return mxc__error(MXC_EDEVICE, "RNN: cublasSgemm_64: %s", cublasGetStatusString(s));
    return MXC_OK;
}

static int copy2d_gpu(const mxc_run_ctx *rctx, int req, int64_t rows, int64_t cols,
                      const float *src, int64_t lds, float *dst, int64_t ldd) {
    if (req == MXC__REQ_NULL || cols == 0)
        return MXC_OK;
    return mxc__launch(rows * cols, rctx->stream, "RNN copy", [=] __device__(int64_t i) {
        int64_t r = i / cols, j = i % cols;
        mxc__put(req, dst, r * ldd + j, src[r * lds + j]);
    });
}

static int zero_gpu(const mxc_run_ctx *rctx, float *p, int64_t n) {
    return mxc__gpu_memset0(p, (size_t)n * sizeof(float), rctx->stream);
}

static int col_sums_gpu(const mxc_run_ctx *rctx, int64_t m, int64_t n, const float *x, float *g) {
    return mxc__col_sums_gpu(rctx, MXC__REQ_ADD, m, n, x, g);
}

static int step_gpu(const mxc_run_ctx *rctx, const struct mxc__rnn_step *s, int64_t rows,
                    bool backward) {
    const struct mxc__rnn_step st = *s;
    const int64_t h = st.h;
    if (backward)
        return mxc__launch(rows * h, rctx->stream, "RNN step backward", [=] __device__(int64_t i) {
            mxc__rnn_step_backward(&st, i / h, i % h);
        });
    return mxc__launch(rows * h, rctx->stream, "RNN step",
                       [=] __device__(int64_t i) { mxc__rnn_step_forward(&st, i / h, i % h); });
}

static int dropout_mask_gpu(const mxc_run_ctx *rctx, struct mxc__resource *rng, float *mask,
                            int64_t n, float keep) {
    int rc = mxc__philox_fill_gpu(&rng->rng, mask, n, false, 0.0f, 1.0f, rctx->stream);
    if (rc != MXC_OK)
        return rc;
    return mxc__dropout_mask_gpu(mask, n, true, keep, mxc__dropout_scale(keep), rctx->stream);
}

static int mul_gpu(const mxc_run_ctx *rctx, float *o, const float *a, const float *mask,
                   int64_t n) {
    return mxc__dropout_mul_gpu(o, a, mask, 1, &n, &n, MXC__REQ_WRITE, rctx->stream);
}

extern "C" const struct mxc__rnn_ops mxc__rnn_ops_gpu = {
    gemm_gpu, copy2d_gpu, zero_gpu, col_sums_gpu, step_gpu, dropout_mask_gpu, mul_gpu,
};

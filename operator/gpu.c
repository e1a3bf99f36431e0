/*
 * operator/gpu.c — the GPU kernels' shared services (operator/gpu.h): launch status,
 * device memset, and one cuBLAS and one cuDNN handle per engine worker thread, made on
 * the thread's first GPU operation that needs it and destroyed when the thread ends.
 * Without USE_CUDA nothing calls these; they report that CUDA is missing.
 */
#include "operator/gpu.h"

#include "common/common.h"

#ifdef MXC_USE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#ifdef MXC_USE_CUDNN
#include <cudnn.h>
#endif

#include <pthread.h>

int mxc__gpu_status(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return MXC_OK;
    return mxc__error(MXC_EDEVICE, "%s: %s", what, cudaGetErrorString(e));
}

int mxc__gpu_memset0(void *p, size_t bytes, void *stream) {
    if (bytes == 0)
        return MXC_OK;
    cudaError_t e = cudaMemsetAsync(p, 0, bytes, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "cudaMemsetAsync of %zu bytes: %s", bytes,
                          cudaGetErrorString(e));
    return MXC_OK;
}

/* Per-thread handles: a key per library, whose destructor frees the thread's handle. A
 * worker serves one device, so one handle per thread is one per (worker, device). */
struct handle_kind {
    pthread_key_t key;
    pthread_once_t once;
    int (*make)(void **h, int dev_id);  /* MXC_OK or a recorded error */
    int (*bind)(void *h, void *stream); /* likewise */
    void (*destroy)(void *h);
};

static int worker_handle(struct handle_kind *k, void (*key_init)(void), const mxc_run_ctx *rctx,
                         void **handle) {
    pthread_once(&k->once, key_init);
    void *h = pthread_getspecific(k->key);
    if (h == NULL) {
        int rc = k->make(&h, rctx->ctx.dev_id);
        if (rc != MXC_OK)
            return rc;
        if (pthread_setspecific(k->key, h) != 0) {
            k->destroy(h);
            return mxc__error(MXC_ENOMEM, "GPU library handle: out of memory");
        }
    }
    int rc = k->bind(h, rctx->stream);
    if (rc == MXC_OK)
        *handle = h;
    return rc;
}

static int blas_make(void **h, int dev_id) {
    cublasStatus_t s = cublasCreate((cublasHandle_t *)h);
    if (s != CUBLAS_STATUS_SUCCESS)
        return mxc__error(MXC_EDEVICE, "cublasCreate on gpu(%d): %s", dev_id,
                          cublasGetStatusString(s));
    return MXC_OK;
}

static int blas_bind(void *h, void *stream) {
    cublasStatus_t s = cublasSetStream((cublasHandle_t)h, (cudaStream_t)stream);
    if (s != CUBLAS_STATUS_SUCCESS)
        return mxc__error(MXC_EDEVICE, "cublasSetStream: %s", cublasGetStatusString(s));
    return MXC_OK;
}

static void blas_destroy(void *h) { cublasDestroy((cublasHandle_t)h); }

static struct handle_kind blas = {
    .once = PTHREAD_ONCE_INIT, .make = blas_make, .bind = blas_bind, .destroy = blas_destroy};
static void blas_key_init(void) { pthread_key_create(&blas.key, blas_destroy); }

int mxc__cublas(const mxc_run_ctx *rctx, void **handle) {
    return worker_handle(&blas, blas_key_init, rctx, handle);
}

#ifdef MXC_USE_CUDNN
static int dnn_make(void **h, int dev_id) {
    cudnnStatus_t s = cudnnCreate((cudnnHandle_t *)h);
    if (s != CUDNN_STATUS_SUCCESS)
        return mxc__error(MXC_EDEVICE, "cudnnCreate on gpu(%d): %s", dev_id,
                          cudnnGetErrorString(s));
    return MXC_OK;
}

static int dnn_bind(void *h, void *stream) {
    cudnnStatus_t s = cudnnSetStream((cudnnHandle_t)h, (cudaStream_t)stream);
    if (s != CUDNN_STATUS_SUCCESS)
        return mxc__error(MXC_EDEVICE, "cudnnSetStream: %s", cudnnGetErrorString(s));
    return MXC_OK;
}

static void dnn_destroy(void *h) { cudnnDestroy((cudnnHandle_t)h); }

static struct handle_kind dnn = {
    .once = PTHREAD_ONCE_INIT, .make = dnn_make, .bind = dnn_bind, .destroy = dnn_destroy};
static void dnn_key_init(void) { pthread_key_create(&dnn.key, dnn_destroy); }

int mxc__cudnn(const mxc_run_ctx *rctx, void **handle) {
    return worker_handle(&dnn, dnn_key_init, rctx, handle);
}
#else
int mxc__cudnn(const mxc_run_ctx *rctx, void **handle) {
    *handle = NULL;
    return mxc__error(MXC_ENOTSUP, "gpu(%d): mxc was built without cuDNN (USE_CUDNN=1)",
                      rctx->ctx.dev_id);
}
#endif

#else /* no CUDA */

static int no_cuda(void) {
    return mxc__error(MXC_ENODEV, "mxc was built without CUDA (USE_CUDA=1)");
}

int mxc__gpu_status(const char *what) { return no_cuda(); }
int mxc__gpu_memset0(void *p, size_t bytes, void *stream) { return no_cuda(); }

int mxc__cublas(const mxc_run_ctx *rctx, void **handle) {
    *handle = NULL;
    return no_cuda();
}

int mxc__cudnn(const mxc_run_ctx *rctx, void **handle) {
    *handle = NULL;
    return no_cuda();
}

#endif

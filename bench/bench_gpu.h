/*
 * bench/bench_gpu.h — the benchmarks' checks of CUDA, cuBLAS and cuDNN calls: a call that
 * fails ends the benchmark with what failed and the library's message (benchmark code,
 * not library code: there is nothing to recover). Empty in a build without CUDA; the
 * cuDNN check only with cuDNN.
 */
#ifndef MXC_BENCH_GPU_H
#define MXC_BENCH_GPU_H

#ifdef MXC_USE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static inline void cuda_ok(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "benchmark: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static inline void cublas_ok(cublasStatus_t s, const char *what) {
    if (s != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "benchmark: %s: %s\n", what, cublasGetStatusString(s));
        exit(1);
    }
}

#ifdef MXC_USE_CUDNN
#include <cudnn.h>

static inline void cudnn_ok(cudnnStatus_t s, const char *what) {
    if (s != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "benchmark: %s: %s\n", what, cudnnGetErrorString(s));
        exit(1);
    }
}
#endif /* MXC_USE_CUDNN */
#endif /* MXC_USE_CUDA */

#endif /* MXC_BENCH_GPU_H */

/*
 * common/gemm.h — the one way mxc multiplies float32 matrices on the CPU. Every product
 * in the operators and NDArray functions goes through mxc__sgemm so that the thread
 * budget of common/parallel.h holds: OpenBLAS runs single-threaded inside mxc and
 * mxc__sgemm splits a product over the operator's T threads itself. Internal.
 */
#ifndef MXC_GEMM_H
#define MXC_GEMM_H

#include <stdbool.h>
#include <stdint.h>

/* Sets OpenBLAS to one thread, once per process (later calls cost a load). Called when an
 * engine is created, before any operator can run, and by mxc__sgemm for kernels called
 * without an engine (tests, benchmarks). Thread-safe. */
void mxc__blas_init(void);

/* C (m, n) = alpha · op(A) · op(B) + beta · C, row-major, where op(A) (m, k) is A or,
 * with ta, the transpose of A stored (k, m); likewise op(B) (k, n) and tb. lda, ldb, ldc
 * are the row strides of the matrices as stored. beta 0 ignores what C holds (NaN
 * included). Splits C by rows (or by columns when it has few rows) over up to
 * mxc__op_threads() threads, each running a single-threaded cblas_sgemm; runs on the
 * calling thread when the product is small or when called from a parallel region. */
void mxc__sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

#endif /* MXC_GEMM_H */

/*
 * common/gemm.c — mxc__sgemm: a row-major float32 product split over the operator's
 * thread budget, each part a single-threaded OpenBLAS cblas_sgemm (see gemm.h for why).
 */
#include "common/gemm.h"

#include "common/parallel.h"

#include <cblas.h>
#include <pthread.h>

/* OpenBLAS's own threads would come on top of the engine's workers and of ours. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_single_thread(void) { openblas_set_num_threads(1); }

void mxc__blas_init(void) { pthread_once(&blas_once, blas_single_thread); }

/* Products below this many multiply-adds run on one thread: waking a second thread costs
 * a few microseconds, about what 2 * 10^5 flops take on one core. */
#define SPLIT_MIN_MACS ((int64_t)1 << 17)
/* Part boundaries fall on multiples of this many rows or columns, so parts keep the
 * micro kernel's full tiles (OpenBLAS's sgemm tiles are 4 to 16 wide on x86-64). */
#define SPLIT_ALIGN 8

struct gemm_job {
    bool ta, tb, by_rows;
    int parts;
    int64_t m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const float *a, *b;
    float *c;
};

static void gemm_part(const struct gemm_job *j, int64_t i0, int64_t m, int64_t j0, int64_t n) {
    const float *a = j->a + (j->ta ? i0 : i0 * j->lda);
    const float *b = j->b + (j->tb ? j0 * j->ldb : j0);
    cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)j->k, j->alpha, a, (int)j->lda, b, (int)j->ldb, j->beta,
                j->c + i0 * j->ldc + j0, (int)j->ldc);
}

/* Where part `i` of `parts` starts along `len` rows or columns: near-equal parts, the
 * boundaries rounded to SPLIT_ALIGN. */
static int64_t part_start(int64_t len, int parts, int64_t i) {
    if (i >= parts)
        return len;
    int64_t s = (len * i / parts + SPLIT_ALIGN / 2) / SPLIT_ALIGN * SPLIT_ALIGN;
    return s < len ? s : len;
}

/* Parts [begin, end) of C's rows (or columns). */
static void gemm_parts(void *arg, int64_t begin, int64_t end) {
    const struct gemm_job *j = arg;
    int64_t len = j->by_rows ? j->m : j->n;
    int64_t lo = part_start(len, j->parts, begin), hi = part_start(len, j->parts, end);
    if (hi <= lo)
        return;
    if (j->by_rows)
        gemm_part(j, lo, hi - lo, 0, j->n);
    else
        gemm_part(j, 0, j->m, lo, hi - lo);
}

void mxc__sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (m <= 0 || n <= 0)
        return;
    mxc__blas_init();
    struct gemm_job j = {ta, tb, false, 1, m, n, k, lda, ldb, ldc, alpha, beta, a, b, c};
    int t = mxc__op_threads();
    if (t < 2 || m * n * k < SPLIT_MIN_MACS || mxc__in_parallel()) {
        gemm_part(&j, 0, m, 0, n);
        return;
    }
    /* Rows keep each part's C rows and op(A) panel private and share B; columns when C
     * has too few rows to give every thread a block. */
    j.by_rows = m >= (int64_t)t * SPLIT_ALIGN * 4 || m >= n;
    j.parts = t;
    mxc__parallel_for(t, 1, gemm_parts, &j);
}

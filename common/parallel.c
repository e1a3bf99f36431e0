/*
 * common/parallel.c — the intra-operator thread budget T (see parallel.h for the policy)
 * and mxc__parallel_for, an OpenMP parallel region over contiguous ranges when the
 * library is built with MXC_USE_OPENMP, a plain call otherwise.
 */
#include "common/parallel.h"

#include "common/common.h"

#include <stdatomic.h>

#ifdef MXC_USE_OPENMP
#include <omp.h>
#endif

/* 0: not computed yet. Computing twice in a race gives the same value, so a relaxed
 * atomic is enough. */
static atomic_int op_threads;

int mxc__default_cpu_workers(void) {
    long v = mxc__env_long("MXC_CPU_WORKER_NTHREADS", 0);
    return v > 0 && v < 4096 ? (int)v : 1;
}

static int compute_op_threads(void) {
    long forced = mxc__env_long("MXC_OP_NTHREADS", 0);
    if (forced > 0)
        return forced < MXC__MAX_OP_THREADS ? (int)forced : MXC__MAX_OP_THREADS;
    int cores = mxc__cpu_count();
    int t = cores / mxc__default_cpu_workers();
    if (t < 1)
        t = 1;
    return t < MXC__MAX_OP_THREADS ? t : MXC__MAX_OP_THREADS;
}

int mxc__op_threads(void) {
    int t = atomic_load_explicit(&op_threads, memory_order_relaxed);
    if (t == 0) {
        t = compute_op_threads();
        atomic_store_explicit(&op_threads, t, memory_order_relaxed);
    }
    return t;
}

void mxc__op_threads_reset(void) { atomic_store(&op_threads, 0); }

int mxc__in_parallel(void) {
#ifdef MXC_USE_OPENMP
    return omp_in_parallel() || omp_get_level() > 0;
#else
    return 0;
#endif
}

#ifdef MXC_USE_OPENMP
/* Range `i` of `parts` near-equal contiguous ranges of [0, n). */
static void split(int64_t n, int parts, int i, int64_t *begin, int64_t *end) {
    int64_t q = n / parts, r = n % parts;
    *begin = i * q + (i < r ? i : r);
    *end = *begin + q + (i < r);
}
#endif

void mxc__parallel_for(int64_t n, int64_t grain, mxc__range_fn body, void *arg) {
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    int64_t parts = n / grain;
    int t = mxc__op_threads();
    if (parts > t)
        parts = t;
    if (parts < 2 || mxc__in_parallel()) {
        body(arg, 0, n);
        return;
    }
#ifdef MXC_USE_OPENMP
    /* The runtime may give fewer threads than asked: split by what it gave. */
#pragma omp parallel num_threads((int)parts)
    {
        int64_t b, e;
        split(n, omp_get_num_threads(), omp_get_thread_num(), &b, &e);
        if (e > b)
            body(arg, b, e);
    }
#else
    body(arg, 0, n);
#endif
}

/*
 * tests/check_parallel.c — the intra-operator thread budget and the code that spends it
 * (common/parallel.h, common/gemm.h): T from the environment and its bounds, that
 * mxc__parallel_for covers every index exactly once in at most 4 T contiguous ranges for
 * many sizes, grains and budgets (and stays serial when nested or when T is 1), and
 * mxc__sgemm against a naive product for odd shapes, transposes, strides, beta 0 / 1 and
 * T = 1 .. 4.
 */
#include "common/common.h"
#include "common/gemm.h"
#include "common/parallel.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets (or, with NULL, unsets) an environment variable and forgets the cached T. */
static void env(const char *name, const char *value) {
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    mxc__op_threads_reset();
}

static void budget(int t) {
    char buf[16];
    snprintf(buf, sizeof buf, "%d", t);
    env("MXC_OP_NTHREADS", buf);
    ck_assert_int_eq(mxc__op_threads(), t);
}

/* ---- mxc__op_threads --------------------------------------------------------------- */

START_TEST(test_threads_from_workers) {
    int cores = mxc__cpu_count();
    char buf[16];
    env("MXC_OP_NTHREADS", NULL);
    int all = cores < MXC__MAX_OP_THREADS ? cores : MXC__MAX_OP_THREADS;
    env("MXC_CPU_WORKER_NTHREADS", NULL); /* default: one worker, given every core */
    ck_assert_int_eq(mxc__default_cpu_workers(), 1);
    ck_assert_int_eq(mxc__op_threads(), all);
    env("MXC_CPU_WORKER_NTHREADS", "1");
    ck_assert_int_eq(mxc__op_threads(), all);
    snprintf(buf, sizeof buf, "%d", 4 * cores); /* more workers than cores: still 1 */
    env("MXC_CPU_WORKER_NTHREADS", buf);
    ck_assert_int_eq(mxc__op_threads(), 1);
    if (cores >= 4) {
        snprintf(buf, sizeof buf, "%d", cores / 2);
        env("MXC_CPU_WORKER_NTHREADS", buf);
        ck_assert_int_eq(mxc__op_threads(), cores / (cores / 2));
    }
    env("MXC_CPU_WORKER_NTHREADS", "0"); /* the engine reads 0 as "default" too */
    ck_assert_int_eq(mxc__default_cpu_workers(), 1);
    ck_assert_int_eq(mxc__op_threads(), all);
}
END_TEST

START_TEST(test_threads_override) {
    env("MXC_CPU_WORKER_NTHREADS", NULL);
    env("MXC_OP_NTHREADS", "3");
    ck_assert_int_eq(mxc__op_threads(), 3);
    env("MXC_CPU_WORKER_NTHREADS", "1"); /* the override wins over the division */
    ck_assert_int_eq(mxc__op_threads(), 3);
    env("MXC_OP_NTHREADS", "100000");
    ck_assert_int_eq(mxc__op_threads(), MXC__MAX_OP_THREADS);
    /* not a positive number: ignored, back to cores / workers */
    char cores[16];
    snprintf(cores, sizeof cores, "%d", mxc__cpu_count());
    env("MXC_CPU_WORKER_NTHREADS", cores);
    const char *bad[] = {"0", "-2", "two", "", "3x"};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(bad); i++) {
        env("MXC_OP_NTHREADS", bad[i]);
        ck_assert_msg(mxc__op_threads() == 1, "MXC_OP_NTHREADS=\"%s\" gave %d", bad[i],
                      mxc__op_threads());
    }
}
END_TEST

START_TEST(test_threads_cached) {
    budget(2);
    setenv("MXC_OP_NTHREADS", "5", 1); /* not seen until reset: read once */
    ck_assert_int_eq(mxc__op_threads(), 2);
    mxc__op_threads_reset();
    ck_assert_int_eq(mxc__op_threads(), 5);
}
END_TEST

/* ---- mxc__parallel_for ------------------------------------------------------------- */

#define MAX_N 5000

struct cover {
    _Atomic int count[MAX_N];
    _Atomic int calls;
    _Atomic int short_ranges; /* ranges shorter than the grain */
    _Atomic int in_parallel;  /* calls that saw mxc__in_parallel() */
    int64_t grain;
};

static void mark(void *arg, int64_t b, int64_t e) {
    struct cover *c = arg;
    ck_assert(b < e);
    atomic_fetch_add(&c->calls, 1);
    if (e - b < c->grain)
        atomic_fetch_add(&c->short_ranges, 1);
    if (mxc__in_parallel())
        atomic_fetch_add(&c->in_parallel, 1);
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&c->count[i], 1);
}

START_TEST(test_parallel_for_covers_once) {
    static const int64_t ns[] = {0, 1, 2, 3, 7, 8, 63, 64, 65, 1000, 4097, MAX_N};
    static const int64_t grains[] = {0, 1, 2, 5, 64, 1000, 100000};
    struct cover *c = malloc(sizeof *c);
    ck_assert_ptr_nonnull(c);
    for (int t = 1; t <= 4; t++) {
        budget(t);
        for (size_t i = 0; i < MXC_ARRAY_SIZE(ns); i++) {
            for (size_t j = 0; j < MXC_ARRAY_SIZE(grains); j++) {
                memset(c, 0, sizeof *c);
                c->grain = grains[j];
                mxc__parallel_for(ns[i], grains[j], mark, c);
                for (int64_t k = 0; k < ns[i]; k++)
                    ck_assert_msg(c->count[k] == 1,
                                  "T=%d n=%lld grain=%lld: index %lld "
                                  "covered %d times",
                                  t, (long long)ns[i], (long long)grains[j], (long long)k,
                                  c->count[k]);
                int calls = c->calls;
                ck_assert_msg(calls <= t * MXC__CHUNKS_PER_THREAD &&
                                  (ns[i] == 0 ? calls == 0 : calls >= 1),
                              "T=%d n=%lld: %d ranges", t, (long long)ns[i], calls);
                if (calls > 1)
                    ck_assert_int_eq(c->short_ranges, 0);
                ck_assert_int_eq(c->in_parallel, calls > 1 ? calls : 0);
            }
        }
    }
    free(c);
}
END_TEST

START_TEST(test_parallel_for_serial_at_one) {
    budget(1);
    struct cover *c = calloc(1, sizeof *c);
    ck_assert_ptr_nonnull(c);
    mxc__parallel_for(MAX_N, 1, mark, c);
    ck_assert_int_eq(c->calls, 1);
    ck_assert_int_eq(c->in_parallel, 0);
    free(c);
}
END_TEST

/* A body that runs another parallel loop: the inner one must stay on its thread. */
static void nested(void *arg, int64_t b, int64_t e) {
    struct cover *inner = arg;
    for (int64_t i = b; i < e; i++) {
        struct cover *c = &inner[i];
        mxc__parallel_for(1000, 1, mark, c);
        ck_assert_int_eq(c->calls, 1);
    }
}

START_TEST(test_parallel_for_nested_is_serial) {
    budget(4);
    struct cover *inner = calloc(4, sizeof *inner);
    ck_assert_ptr_nonnull(inner);
    mxc__parallel_for(4, 1, nested, inner);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 1000; k++)
            ck_assert_int_eq(inner[i].count[k], 1);
    free(inner);
}
END_TEST

/* While one range sleeps, the threads that finished theirs must sleep too, not spin: a
 * waiting thread burns at most MXC__SPIN_NS of CPU (libgomp's barrier spun for
 * milliseconds, which on a loaded machine took the CPU from the thread it waited for). */
static void one_range_sleeps(void *arg, int64_t b, int64_t e) {
    atomic_int *first = arg;
    if (atomic_fetch_add(first, 1) == 0)
        mxct_sleep_us(60000);
}

static void nothing(void *arg, int64_t b, int64_t e) {
    (void)arg;
    (void)b;
    (void)e;
}

START_TEST(test_parallel_for_waits_sleep) {
    budget(2);
    mxc__parallel_for_reset_to_helpers();
    /* the helper is started by the first loop: not part of what is measured (starting a
     * thread cost a round 4.04 ms of CPU under ThreadSanitizer) */
    mxc__parallel_for(2, 1, nothing, NULL);
    for (int round = 0; round < 3; round++) {
        atomic_int first = 0;
        uint64_t cpu0 = mxct_process_cpu_ns(), t0 = mxc__now_ns();
        mxc__parallel_for(2, 1, one_range_sleeps, &first);
        uint64_t cpu = mxct_process_cpu_ns() - cpu0, wall = mxc__now_ns() - t0;
        ck_assert_int_eq(first, 2);
        ck_assert_msg(wall >= 60000000u, "the loop returned before its sleeping range ended");
        /* the other thread's spin (<= 50 us) plus wake-ups and bookkeeping */
        ck_assert_msg(cpu < 4000000u, "round %d: %.2f ms of CPU while one range slept 60 ms", round,
                      (double)cpu / 1e6);
    }
    /* Idle helpers sleep: no CPU between loops. */
    mxct_sleep_us(5000);
    uint64_t cpu0 = mxct_process_cpu_ns();
    mxct_sleep_us(50000);
    uint64_t idle = mxct_process_cpu_ns() - cpu0;
    ck_assert_msg(idle < 2000000u, "%.2f ms of CPU while idle for 50 ms", (double)idle / 1e6);
}
END_TEST

/* Helpers that only slow a loop down (as on a loaded machine, where one preempted in its
 * chunk holds the loop for milliseconds) are measured against the caller alone, a window
 * of loops each way (the one with helpers cut short once they clearly lose), and left
 * out for a stretch; then measured again. Bodies burn CPU
 * rather than sleep: the measure counts work as the caller's CPU time. */
struct slow_helpers {
    pthread_t caller;
    atomic_int helper_ranges;
};

static void burn_cpu_us(long us) {
    uint64_t end = mxc__thread_cpu_ns() + (uint64_t)us * 1000u;
    while (mxc__thread_cpu_ns() < end) {
    }
}

static void helpers_slow(void *arg, int64_t b, int64_t e) {
    struct slow_helpers *h = arg;
    (void)b;
    (void)e;
    if (pthread_equal(pthread_self(), h->caller)) {
        burn_cpu_us(100);
    } else {
        atomic_fetch_add(&h->helper_ranges, 1);
        burn_cpu_us(2000);
    }
}

/* Runs one loop of 64 items (8 chunks at T = 2, one range alone); whether a helper ran a range of it. */
static bool loop_used_helpers(struct slow_helpers *h) {
    int before = atomic_load(&h->helper_ranges);
    mxc__parallel_for(64, 1, helpers_slow, h);
    return atomic_load(&h->helper_ranges) != before;
}

START_TEST(test_parallel_for_drops_useless_helpers) {
    budget(2);
    struct slow_helpers h = {.caller = pthread_self()};
    /* a window of 32 loops alone at the start, then one with helpers that ends after 4
     * loops as they lose (a loaded machine pays for few loops with helpers, even at the
     * start); then stretches alone of 256, 512, ... loops, each followed by the same two
     * windows: measured again and again, in few loops */
    int run = 0, longest = 0, with_helpers = 0, episodes = 0;
    for (int loops = 0; loops < 1200; loops++) {
        bool used = loop_used_helpers(&h);
        with_helpers += used;
        episodes += used && run > 0;
        run = used ? 0 : run + 1;
        longest = run > longest ? run : longest;
    }
    ck_assert_msg(longest >= 512 + 32, "the longest run of loops without helpers: %d", longest);
    ck_assert_msg(episodes >= 2, "helpers measured again %d times", episodes);
    ck_assert_msg(with_helpers <= 3 * 4 + 8, "%d loops with helpers", with_helpers);
}
END_TEST

/* Loops from several threads at once: one holds the pool, the others run serially; every
 * index is still covered once. */
static void *loop_thread(void *arg) {
    struct cover *c = arg;
    for (int r = 0; r < 200; r++)
        mxc__parallel_for(MAX_N, 16, mark, &c[r % 2]);
    return NULL;
}

START_TEST(test_parallel_for_concurrent_callers) {
    budget(3);
    enum { CALLERS = 3 };
    struct cover *c = calloc(2 * CALLERS, sizeof *c);
    ck_assert_ptr_nonnull(c);
    pthread_t th[CALLERS];
    for (int i = 0; i < CALLERS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, loop_thread, &c[2 * i]), 0);
    for (int i = 0; i < CALLERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2 * CALLERS; i++)
        for (int k = 0; k < MAX_N; k++)
            ck_assert_int_eq(c[i].count[k], 100);
    free(c);
}
END_TEST

/* ---- mxc__sgemm -------------------------------------------------------------------- */

static float *randoms(int64_t n, uint32_t seed) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return v;
}

/* One product checked against a double-precision loop. A (m, k) or, with ta, (k, m),
 * B (k, n) or (n, k), every matrix stored with 3 spare columns so strides are tested. */
static void check_product(int t, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float beta) {
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    int64_t lda = ac + 3, ldb = bc + 3, ldc = n + 3;
    float *a = randoms(ar * lda, 1), *b = randoms(br * ldb, 2), *c = randoms(m * ldc, 3);
    float *c0 = malloc((size_t)(m * ldc > 0 ? m * ldc : 1) * sizeof(float));
    ck_assert_ptr_nonnull(c0);
    if (beta == 0.0f) /* beta 0 must ignore C, NaN included */
        for (int64_t i = 0; i < m * ldc; i++)
            c[i] = NAN;
    memcpy(c0, c, (size_t)(m * ldc) * sizeof(float));
    mxc__sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c, ldc);
    double worst = 0;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < ldc; j++) {
            if (j >= n) { /* the spare columns are not touched */
                ck_assert(isnan(c0[i * ldc + j]) ? isnan(c[i * ldc + j])
                                                 : c[i * ldc + j] == c0[i * ldc + j]);
                continue;
            }
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                     (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
            double want = 0.5 * s + (beta != 0.0f ? (double)beta * c0[i * ldc + j] : 0.0);
            double err = fabs(c[i * ldc + j] - want);
            worst = err > worst || isnan(err) ? err : worst;
        }
    }
    ck_assert_msg(worst <= 1e-5 * (double)(k + 1),
                  "T=%d ta=%d tb=%d (%lld, %lld, %lld) "
                  "beta %g: worst error %g",
                  t, ta, tb, (long long)m, (long long)n, (long long)k, beta, worst);
    free(a);
    free(b);
    free(c);
    free(c0);
}

START_TEST(test_sgemm_against_naive) {
    static const int64_t shapes[][3] = {
        {1, 1, 1},
        {3, 5, 7},
        {17, 33, 9},
        {64, 64, 64},
        {100, 128, 97},
        /* products big enough to split (2^17 multiply-adds, common/gemm.c): */
        {1029, 3, 65}, /* many rows, few columns: split by rows */
        {5, 1301, 41}, /* few rows: split by columns */
        {300, 7, 100},
        {9, 1000, 20},
        {200, 200, 1},
        {37, 41, 0},
    };
    for (int t = 1; t <= 4; t++) {
        budget(t);
        for (size_t s = 0; s < MXC_ARRAY_SIZE(shapes); s++)
            for (int tr = 0; tr < 4; tr++)
                for (int bz = 0; bz < 2; bz++)
                    check_product(t, tr & 1, tr & 2, shapes[s][0], shapes[s][1], shapes[s][2],
                                  bz ? 1.0f : 0.0f);
    }
}
END_TEST

START_TEST(test_sgemm_empty) {
    budget(2);
    float c = 42.0f;
    mxc__sgemm(false, false, 0, 5, 5, 1.0f, NULL, 5, NULL, 5, 0.0f, &c, 5);
    mxc__sgemm(false, false, 5, 0, 5, 1.0f, NULL, 5, NULL, 1, 0.0f, &c, 1);
    ck_assert(c == 42.0f);
}
END_TEST

/* ---- Suite ------------------------------------------------------------------------- */

static Suite *parallel_suite(void) {
    Suite *s = suite_create("parallel");

    TCase *tc = tcase_create("budget");
    tcase_add_test(tc, test_threads_from_workers);
    tcase_add_test(tc, test_threads_override);
    tcase_add_test(tc, test_threads_cached);
    suite_add_tcase(s, tc);

    tc = tcase_create("parallel_for");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_test(tc, test_parallel_for_covers_once);
    tcase_add_test(tc, test_parallel_for_serial_at_one);
    tcase_add_test(tc, test_parallel_for_nested_is_serial);
    tcase_add_test(tc, test_parallel_for_waits_sleep);
    tcase_add_test(tc, test_parallel_for_concurrent_callers);
    tcase_add_test(tc, test_parallel_for_drops_useless_helpers);
    suite_add_tcase(s, tc);

    tc = tcase_create("sgemm");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_test(tc, test_sgemm_against_naive);
    tcase_add_test(tc, test_sgemm_empty);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(parallel_suite()); }

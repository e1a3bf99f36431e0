/*
 * bench/bench_ndarray.c — the imperative NDArray layer: what one small operation costs
 * end to end, and whether big element-wise and matrix operations run as fast through the
 * engine as the same work called directly.
 *
 *   small_op         N times `a += 1` (mxc_nd_add_scalar(a, 1, &a)) on a 1-element
 *                    array, then one wait: ns per op = push + run + completion. Baseline:
 *                    the same loop in a child process whose default engine is the naive
 *                    one (MXC_ENGINE_TYPE=naive: each op runs inside its push, no thread
 *                    hand-off), so the ratio is what the threaded engine costs over inline
 *                    execution of the same NDArray code.
 *   elemwise_add_1M  K times `c = a + b` on 1M-element float32 arrays into a preallocated
 *                    c, then one wait; GB/s counting 12 bytes per element. Baseline: a
 *                    plain C loop c[i] = a[i] + b[i] compiled with the library's flags.
 *   dot_512          K times c = a x b on 512 x 512 float32 arrays, then one wait;
 *                    GFLOP/s = 2 * 512^3 / time. Baseline: cblas_sgemm called directly.
 *
 * Each case is measured `--runs` times (default 5) after one untimed warm-up; mxc and the
 * baseline alternate within a run and each reports its median. Ratios are the baseline's
 * time over mxc's (above 1: mxc is faster). Results are checked (exact for small_op and
 * the element-wise sum, against the sgemm result for dot); a wrong result exits with 1.
 *
 *   build/bin/bench_ndarray [--quick] [--runs K] [--ops N] [--json]
 *
 * --quick: 3 runs and smaller N and K. With --json, stdout carries only JSON lines
 * (DESIGN.md section 10) and the table goes to stderr. The engine is the default one
 * (MXC_ENGINE_TYPE, default perdevice); its name is the "system".
 */
#include "bench_util.h"

#include <mxc/engine.h>
#include <mxc/ndarray.h>

#include "common/parallel.h"

#include <cblas.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ELEMWISE_N (1 << 20)
#define DOT_N      512
#define MAX_RUNS   101

struct options {
    bool quick, json;
    int runs;
    long ops;     /* small_op operations per run */
    int ew_reps;  /* element-wise operations per run */
    int dot_reps; /* dot operations per run */
    bool child;   /* --child-small-op: print small_op's ns per op and exit */
};

static void die(const char *what, int rc) {
    fprintf(stderr, "bench_ndarray: %s: %s (%s)\n", what, mxc_err_name(rc), mxc_last_error());
    exit(1);
}

#define TRY(call)            \
    do {                     \
        int rc_ = (call);    \
        if (rc_ != MXC_OK)   \
            die(#call, rc_); \
    } while (0)

static mxc_ndarray *new_array(int ndim, const int64_t *dims, const float *data) {
    mxc_shape s = mxc_shape_make(ndim, dims);
    mxc_ndarray *a = NULL;
    TRY(mxc_nd_create(&s, MXC_FLOAT32, mxc_cpu(), 0, &a));
    if (data)
        TRY(mxc_nd_sync_copy_from_cpu(a, data, (size_t)mxc_nd_size(a) * sizeof(float)));
    return a;
}

static float *host_array(size_t n, unsigned seed) {
    float *v = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (v == NULL) {
        fprintf(stderr, "bench_ndarray: out of memory\n");
        exit(1);
    }
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (float)(x >> 8) * 0x1p-24f * 2 - 1;
    }
    return v;
}

static const char *engine_name(void) {
    mxc_engine *eng;
    TRY(mxc_engine_get_default(&eng));
    return mxc_engine_type_name(mxc_engine_type_of(eng));
}

/* ---- small_op ---------------------------------------------------------------------- */

struct small_result {
    double ns_per_op, push_ns_per_op;
};

/* `ops` in-place increments of a 1-element array, then one wait; checked exactly. */
static struct small_result small_op_run(long ops) {
    int64_t one = 1;
    mxc_shape s = mxc_shape_make(1, &one);
    mxc_ndarray *a = NULL;
    TRY(mxc_nd_zeros(&s, MXC_FLOAT32, mxc_cpu(), &a));
    TRY(mxc_nd_wait_to_read(a));
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < ops; i++)
        TRY(mxc_nd_add_scalar(a, 1, &a));
    uint64_t t1 = bench_now_ns();
    TRY(mxc_nd_wait_to_read(a));
    uint64_t t2 = bench_now_ns();
    float v = 0;
    TRY(mxc_nd_sync_copy_to_cpu(a, &v, sizeof v));
    if (v != (float)ops) {
        fprintf(stderr, "bench_ndarray: small_op: %ld increments gave %g\n", ops, (double)v);
        exit(1);
    }
    mxc_nd_free(a);
    TRY(mxc_nd_wait_all());
    return (struct small_result){(double)(t2 - t0) / (double)ops, (double)(t1 - t0) / (double)ops};
}

static struct small_result small_op_median(const struct options *opt) {
    double total[MAX_RUNS], push[MAX_RUNS];
    small_op_run(opt->ops / 10 + 1); /* warm-up: pools, workers */
    for (int r = 0; r < opt->runs; r++) {
        struct small_result res = small_op_run(opt->ops);
        total[r] = res.ns_per_op;
        push[r] = res.push_ns_per_op;
    }
    return (struct small_result){bench_median(total, opt->runs), bench_median(push, opt->runs)};
}

/* The baseline: this program again with MXC_ENGINE_TYPE=naive (the engine is chosen
 * once per process), printing its median. NAN if that fails. */
static double small_op_naive(const struct options *opt) {
    char exe[1024], cmd[1200];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return NAN;
    exe[len] = '\0';
    snprintf(cmd, sizeof cmd, "MXC_ENGINE_TYPE=naive '%s' --child-small-op --runs %d --ops %ld",
             exe, opt->runs, opt->ops);
    FILE *p = strchr(exe, '\'') ? NULL : popen(cmd, "r");
    if (p == NULL)
        return NAN;
    double ns = NAN;
    if (fscanf(p, "%lf", &ns) != 1)
        ns = NAN;
    return pclose(p) == 0 ? ns : NAN;
}

/* ---- elemwise_add_1M --------------------------------------------------------------- */

/* The baseline loop, compiled with the same flags as the library's kernel and, like it,
 * knowing nothing about aliasing. */
__attribute__((noinline)) static void c_add(const float *a, const float *b, float *c, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
}

struct pair_result {
    double mxc_s, base_s; /* seconds per operation, medians */
};

static struct pair_result elemwise_bench(const struct options *opt) {
    const int64_t n = ELEMWISE_N;
    float *ha = host_array((size_t)n, 1), *hb = host_array((size_t)n, 2);
    float *hc = host_array((size_t)n, 3), *got = host_array((size_t)n, 4);
    mxc_ndarray *a = new_array(1, &n, ha), *b = new_array(1, &n, hb), *c = new_array(1, &n, NULL);
    double mxc_t[MAX_RUNS], base_t[MAX_RUNS];
    for (int r = -1; r < opt->runs; r++) { /* run -1 warms up */
        uint64_t t0 = bench_now_ns();
        for (int k = 0; k < opt->ew_reps; k++)
            TRY(mxc_nd_add(a, b, &c));
        TRY(mxc_nd_wait_to_read(c));
        uint64_t t1 = bench_now_ns();
        for (int k = 0; k < opt->ew_reps; k++)
            c_add(ha, hb, hc, n);
        uint64_t t2 = bench_now_ns();
        if (r >= 0) {
            mxc_t[r] = (double)(t1 - t0) / 1e9 / opt->ew_reps;
            base_t[r] = (double)(t2 - t1) / 1e9 / opt->ew_reps;
        }
    }
    TRY(mxc_nd_sync_copy_to_cpu(c, got, (size_t)n * sizeof(float)));
    if (memcmp(got, hc, (size_t)n * sizeof(float)) != 0) {
        fprintf(stderr, "bench_ndarray: elemwise: mxc's a + b differs from the C loop's\n");
        exit(1);
    }
    mxc_nd_free(a);
    mxc_nd_free(b);
    mxc_nd_free(c);
    free(ha);
    free(hb);
    free(hc);
    free(got);
    TRY(mxc_nd_wait_all());
    return (struct pair_result){bench_median(mxc_t, opt->runs), bench_median(base_t, opt->runs)};
}

/* ---- dot_512 ----------------------------------------------------------------------- */

static struct pair_result dot_bench(const struct options *opt) {
    const int64_t dims[2] = {DOT_N, DOT_N};
    const size_t nn = (size_t)DOT_N * DOT_N;
    float *ha = host_array(nn, 5), *hb = host_array(nn, 6), *hc = host_array(nn, 7);
    float *got = host_array(nn, 8);
    mxc_ndarray *a = new_array(2, dims, ha), *b = new_array(2, dims, hb),
                *c = new_array(2, dims, NULL);
    double mxc_t[MAX_RUNS], base_t[MAX_RUNS];
    for (int r = -1; r < opt->runs; r++) {
        uint64_t t0 = bench_now_ns();
        for (int k = 0; k < opt->dot_reps; k++)
            TRY(mxc_nd_dot(a, b, &c));
        TRY(mxc_nd_wait_to_read(c));
        /* the same thread count on both sides: mxc_nd_dot splits its product over the
         * operator budget T (common/parallel.h) and keeps OpenBLAS at one thread */
        openblas_set_num_threads(mxc__op_threads());
        uint64_t t1 = bench_now_ns();
        for (int k = 0; k < opt->dot_reps; k++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, DOT_N, DOT_N, DOT_N, 1.0f, ha,
                        DOT_N, hb, DOT_N, 0.0f, hc, DOT_N);
        uint64_t t2 = bench_now_ns();
        openblas_set_num_threads(1);
        if (r >= 0) {
            mxc_t[r] = (double)(t1 - t0) / 1e9 / opt->dot_reps;
            base_t[r] = (double)(t2 - t1) / 1e9 / opt->dot_reps;
        }
    }
    TRY(mxc_nd_sync_copy_to_cpu(c, got, nn * sizeof(float)));
    double worst = 0;
    for (size_t i = 0; i < nn; i++)
        worst = fmax(worst, fabs((double)got[i] - hc[i]));
    if (worst > 1e-3) {
        fprintf(stderr, "bench_ndarray: dot differs from sgemm by %g\n", worst);
        exit(1);
    }
    mxc_nd_free(a);
    mxc_nd_free(b);
    mxc_nd_free(c);
    free(ha);
    free(hb);
    free(hc);
    free(got);
    TRY(mxc_nd_wait_all());
    return (struct pair_result){bench_median(mxc_t, opt->runs), bench_median(base_t, opt->runs)};
}

/* ---- Output ------------------------------------------------------------------------ */

/* One JSON line: the case, the system, one metric for mxc (and the baseline's as
 * "baseline_<metric>"), the baseline's name and the ratio of times. */
static void json_line(const char *kase, const char *system, const char *metric, double value,
                      double base_value, const char *baseline, double ratio, const char *extra_key,
                      double extra) {
    bench_json j;
    char base_key[64];
    bench_json_begin(&j, "ndarray", kase);
    bench_json_str(&j, "system", system);
    bench_json_num(&j, metric, value);
    if (extra_key)
        bench_json_num(&j, extra_key, extra);
    snprintf(base_key, sizeof base_key, "baseline_%s", metric);
    bench_json_num(&j, base_key, base_value);
    bench_json_str(&j, "baseline", baseline);
    bench_json_num(&j, "ratio_vs_baseline", ratio);
    bench_json_print(&j, stdout);
}

static void usage(void) {
    fprintf(stderr,
            "usage: bench_ndarray [--quick] [--runs K] [--ops N] [--json]\n"
            "  --quick    3 runs, N = 20000, fewer element-wise and dot repetitions\n"
            "  --runs K   runs per measurement (median; default 5, at most %d)\n"
            "  --ops N    small_op operations per run (default 100000)\n"
            "  --json     JSON lines on stdout, the table on stderr\n",
            MAX_RUNS);
}

static bool parse_args(int argc, char **argv, struct options *opt) {
    *opt = (struct options){.runs = 5, .ops = 100000, .ew_reps = 100, .dot_reps = 50};
    int runs = 0;
    long ops = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            opt->quick = true;
        } else if (strcmp(a, "--json") == 0) {
            opt->json = true;
        } else if (strcmp(a, "--child-small-op") == 0) {
            opt->child = true;
        } else if (strcmp(a, "--runs") == 0 && v) {
            runs = atoi(v);
            i++;
        } else if (strcmp(a, "--ops") == 0 && v) {
            ops = atol(v);
            i++;
        } else {
            return false;
        }
    }
    if (opt->quick)
        *opt = (struct options){.quick = true,
                                .json = opt->json,
                                .child = opt->child,
                                .runs = 3,
                                .ops = 20000,
                                .ew_reps = 20,
                                .dot_reps = 10};
    if (runs)
        opt->runs = runs;
    if (ops)
        opt->ops = ops;
    return opt->runs >= 1 && opt->runs <= MAX_RUNS && opt->ops >= 1;
}

int main(int argc, char **argv) {
    struct options opt;
    if (!parse_args(argc, argv, &opt)) {
        usage();
        return 2;
    }
    if (opt.child) {
        printf("%.6f\n", small_op_median(&opt).ns_per_op);
        return 0;
    }
    /* The child runs first, while this process has no engine threads competing. */
    double naive_ns =
        strcmp(getenv("MXC_ENGINE_TYPE") ? getenv("MXC_ENGINE_TYPE") : "", "naive") == 0
            ? NAN
            : small_op_naive(&opt);
    char system[64];
    snprintf(system, sizeof system, "mxc-%s", engine_name());
    FILE *tbl = opt.json ? stderr : stdout;

    struct small_result small = small_op_median(&opt);
    if (!isfinite(naive_ns))
        naive_ns = small.ns_per_op; /* this is the naive engine, or the child failed */
    struct pair_result ew = elemwise_bench(&opt);
    struct pair_result dot = dot_bench(&opt);

    double ew_bytes = 12.0 * ELEMWISE_N, dot_flop = 2.0 * DOT_N * DOT_N * DOT_N;
    fprintf(tbl, "ndarray benchmark, %s, median of %d runs%s\n", system, opt.runs,
            opt.quick ? " (quick)" : "");
    fprintf(tbl, "%-16s %14s %14s %-12s %8s\n", "case", "mxc", "baseline", "(baseline)", "ratio");
    fprintf(tbl, "%-16s %11.1f ns %11.1f ns %-12s %8.2f   (push alone %.1f ns/op)\n", "small_op",
            small.ns_per_op, naive_ns, "naive-engine", naive_ns / small.ns_per_op,
            small.push_ns_per_op);
    fprintf(tbl, "%-16s %9.2f GB/s %9.2f GB/s %-12s %8.2f\n", "elemwise_add_1M",
            ew_bytes / ew.mxc_s / 1e9, ew_bytes / ew.base_s / 1e9, "c-loop", ew.base_s / ew.mxc_s);
    fprintf(tbl, "%-16s %6.2f GFLOP/s %6.2f GFLOP/s %-12s %8.2f\n", "dot_512",
            dot_flop / dot.mxc_s / 1e9, dot_flop / dot.base_s / 1e9, "sgemm",
            dot.base_s / dot.mxc_s);
    if (opt.json) {
        json_line("small_op", system, "ns_per_op", small.ns_per_op, naive_ns, "naive-engine",
                  naive_ns / small.ns_per_op, "push_ns_per_op", small.push_ns_per_op);
        json_line("elemwise_add_1M", system, "gb_per_s", ew_bytes / ew.mxc_s / 1e9,
                  ew_bytes / ew.base_s / 1e9, "c-loop", ew.base_s / ew.mxc_s, NULL, 0);
        json_line("dot_512", system, "gflops", dot_flop / dot.mxc_s / 1e9,
                  dot_flop / dot.base_s / 1e9, "sgemm", dot.base_s / dot.mxc_s, NULL, 0);
    }
    return 0;
}

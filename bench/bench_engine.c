/*
 * bench/bench_engine.c — the engine benchmark: scheduling overhead of every mxc engine
 * kind on four fixed dependency patterns, against OpenMP tasks with `depend` clauses
 * (GCC libgomp, 2 threads) as the baseline and a serial loop of plain calls as the floor.
 *
 *   W1b  N ops without variables
 *   W2   N ops all mutating one variable (a chain)
 *   W3   rounds of {write A; 8 readers of A, reader i writing B_i; read all B_i, write A}
 *   W4   256 variables; each op reads 2 and writes 1, drawn with a fixed seed. Checked:
 *        per-variable mutation counts and final values equal a serial replay, and no
 *        writer of a variable overlaps another writer or a reader of it.
 *
 * Each workload runs with empty bodies and with 1 us busy bodies. A run is timed from
 * the first push to the end of wait_all (OpenMP: first task creation to the end of
 * taskwait); the median of the runs is reported with the process's peak RSS.
 *
 * libgomp's cost per task grows with the number of unfinished tasks on an address, so
 * OpenMP runs W3 and W4 with at most 100,000 ops (--omp-cap) and its cost per op at that
 * N is the baseline (this favours OpenMP). Any run stops pushing after --time-limit
 * seconds and reports the cost per op of what it pushed; the table notes both.
 *
 *   build/bin/bench_engine [--quick] [--n N] [--runs K] [--json] [--workload W]
 *                          [--system S] [--workers K] [--omp-cap N] [--time-limit S]
 *
 * With --json, stdout carries only JSON lines (DESIGN.md section 10); the table goes to
 * stderr. A failed correctness check exits with status 1.
 */
#include "bench_util.h"

#include <mxc/engine.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef _OPENMP
#error "bench_engine needs OpenMP (-fopenmp) for its baseline"
#endif

#define BODY_NS       1000u /* the busy body's length */
#define W3_READERS    8     /* readers of A per W3 round */
#define W4_VARS       256
#define MAX_VARS      W4_VARS
#define MAX_READS     W3_READERS
#define W4_SEED       0x9E3779B97F4A7C15ull
#define NUM_VARS_TEST 1000000L /* variables created for the vars/1M case */

/* ---- Workloads ---------------------------------------------------------------------- */

enum workload { W1B, W2, W3, W4, NUM_WORKLOADS };
static const char *const workload_names[NUM_WORKLOADS] = {"W1b", "W2", "W3", "W4"};
static const int workload_num_vars[NUM_WORKLOADS] = {0, 1, 1 + W3_READERS, W4_VARS};

enum body { BODY_EMPTY, BODY_SPIN, NUM_BODIES };
static const char *const body_names[NUM_BODIES] = {"empty", "1us"};

/* One operation as the workloads describe it: variable indices, and the argument its
 * function receives. */
struct op {
    int num_reads, num_writes;
    int reads[MAX_READS];
    int write;
    void *arg;
};

/* Produces a workload's operations one at a time, in push order. */
struct op_gen {
    int workload;
    long i;
    uint64_t rng;
};

static void gen_init(struct op_gen *g, int workload) {
    g->workload = workload;
    g->i = 0;
    g->rng = W4_SEED;
}

/* W4 packs an op's three variable indices into its argument (no per-op allocation). */
static void *w4_pack(int r0, int r1, int w) {
    return (void *)(uintptr_t)((unsigned)r0 | (unsigned)r1 << 8 | (unsigned)w << 16);
}

static void w4_unpack(const void *arg, int *r0, int *r1, int *w) {
    uintptr_t v = (uintptr_t)arg;
    *r0 = (int)(v & 0xff);
    *r1 = (int)(v >> 8 & 0xff);
    *w = (int)(v >> 16 & 0xff);
}

static void gen_next(struct op_gen *g, struct op *op) {
    long i = g->i++;
    op->num_reads = 0;
    op->num_writes = 0;
    op->arg = NULL;
    switch (g->workload) {
    case W1B: break;
    case W2:
        op->num_writes = 1;
        op->write = 0;
        break;
    case W3: {
        int step = (int)(i % (W3_READERS + 2)); /* variable 0 is A, 1..8 are B_i */
        op->num_writes = 1;
        if (step == 0) {
            op->write = 0;
        } else if (step <= W3_READERS) {
            op->num_reads = 1;
            op->reads[0] = 0;
            op->write = step;
        } else {
            op->num_reads = W3_READERS;
            for (int k = 0; k < W3_READERS; k++)
                op->reads[k] = 1 + k;
            op->write = 0;
        }
        break;
    }
    default: { /* W4: xorshift64* with a fixed seed */
        g->rng ^= g->rng >> 12;
        g->rng ^= g->rng << 25;
        g->rng ^= g->rng >> 27;
        uint64_t x = g->rng * 0x2545F4914F6CDD1Dull;
        op->num_reads = 2;
        op->reads[0] = (int)(x >> 40 & 0xff);
        op->reads[1] = (int)(x >> 48 & 0xff);
        op->num_writes = 1;
        op->write = (int)(x >> 56);
        op->arg = w4_pack(op->reads[0], op->reads[1], op->write);
        break;
    }
    }
}

/* ---- Bodies ------------------------------------------------------------------------- */

/* W4's checked state: one cache line per variable. */
struct check_var {
    _Alignas(64) atomic_int writing; /* 1 while a writer runs */
    atomic_int reading;              /* readers running */
    _Atomic uint64_t value;          /* mixed by each write from the values read */
    _Atomic uint64_t count;          /* writes so far */
};

static struct check_var check_vars[W4_VARS];
static atomic_int check_violation; /* 0, or 1 + var (writers) / -1 - var (reader) */
static uint64_t check_body_ns;     /* 0 or BODY_NS, set before a run */

static uint64_t check_initial(int v) { return 0x1000u + (uint64_t)v; }

/* The value a write leaves: not commutative, so a reordering shows in the result. */
static uint64_t check_mix(uint64_t old, uint64_t a, uint64_t b) {
    uint64_t x = old * 0x100000001B3ull ^ (a << 17 | a >> 47) ^ (b + 0x9E3779B97F4A7C15ull);
    x ^= x >> 31;
    return x * 0xBF58476D1CE4E5B9ull;
}

static void check_reset(void) {
    for (int v = 0; v < W4_VARS; v++) {
        atomic_store(&check_vars[v].writing, 0);
        atomic_store(&check_vars[v].reading, 0);
        atomic_store(&check_vars[v].value, check_initial(v));
        atomic_store(&check_vars[v].count, 0);
    }
    atomic_store(&check_violation, 0);
}

static void check_flag(int code) {
    int none = 0;
    atomic_compare_exchange_strong(&check_violation, &none, code);
}

static int op_empty(const mxc_run_ctx *rctx, void *arg) {
    (void)rctx;
    (void)arg;
    return MXC_OK;
}

static int op_spin(const mxc_run_ctx *rctx, void *arg) {
    (void)rctx;
    (void)arg;
    bench_spin_ns(BODY_NS);
    return MXC_OK;
}

/* W4's body: registers its reads and its write, flags any overlap with another access
 * that should have been ordered against it, mixes the value it writes and counts it. */
static int op_checked(const mxc_run_ctx *rctx, void *arg) {
    (void)rctx;
    int r[2], w;
    w4_unpack(arg, &r[0], &r[1], &w);
    struct check_var *cw = &check_vars[w];
    for (int k = 0; k < 2; k++) {
        if (r[k] == w)
            continue; /* read and written: counts as written */
        atomic_fetch_add(&check_vars[r[k]].reading, 1);
        if (atomic_load(&check_vars[r[k]].writing))
            check_flag(-1 - r[k]);
    }
    if (atomic_exchange(&cw->writing, 1))
        check_flag(1 + w);
    if (atomic_load(&cw->reading))
        check_flag(-1 - w);
    uint64_t a = atomic_load_explicit(&check_vars[r[0]].value, memory_order_relaxed);
    uint64_t b = atomic_load_explicit(&check_vars[r[1]].value, memory_order_relaxed);
    uint64_t old = atomic_load_explicit(&cw->value, memory_order_relaxed);
    atomic_store_explicit(&cw->value, check_mix(old, a, b), memory_order_relaxed);
    uint64_t n = atomic_load_explicit(&cw->count, memory_order_relaxed);
    atomic_store_explicit(&cw->count, n + 1, memory_order_relaxed);
    if (check_body_ns)
        bench_spin_ns(check_body_ns);
    atomic_store(&cw->writing, 0);
    for (int k = 0; k < 2; k++)
        if (r[k] != w)
            atomic_fetch_sub(&check_vars[r[k]].reading, 1);
    return MXC_OK;
}

/* Compares W4's state after `num_ops` ops with a serial replay; on a mismatch prints
 * why and returns false. */
static bool check_w4(const char *system, long num_ops) {
    int bad = atomic_load(&check_violation);
    if (bad > 0) {
        fprintf(stderr,
                "bench_engine: W4 check failed on %s: two writers of variable %d "
                "overlapped\n",
                system, bad - 1);
        return false;
    }
    if (bad < 0) {
        fprintf(stderr,
                "bench_engine: W4 check failed on %s: a read of variable %d "
                "overlapped a write of it\n",
                system, -bad - 1);
        return false;
    }
    static uint64_t value[W4_VARS], count[W4_VARS];
    for (int v = 0; v < W4_VARS; v++) {
        value[v] = check_initial(v);
        count[v] = 0;
    }
    struct op_gen g;
    gen_init(&g, W4);
    for (long i = 0; i < num_ops; i++) {
        struct op op;
        gen_next(&g, &op);
        value[op.write] = check_mix(value[op.write], value[op.reads[0]], value[op.reads[1]]);
        count[op.write]++;
    }
    for (int v = 0; v < W4_VARS; v++) {
        uint64_t got = atomic_load(&check_vars[v].count);
        if (got != count[v]) {
            fprintf(stderr,
                    "bench_engine: W4 check failed on %s: variable %d mutated %llu "
                    "times, serial %llu\n",
                    system, v, (unsigned long long)got, (unsigned long long)count[v]);
            return false;
        }
        if (atomic_load(&check_vars[v].value) != value[v]) {
            fprintf(stderr,
                    "bench_engine: W4 check failed on %s: variable %d ends with a "
                    "value the serial order does not give (writes reordered)\n",
                    system, v);
            return false;
        }
    }
    return true;
}

/* ---- Systems ------------------------------------------------------------------------ */

enum system_kind { SYS_MXC, SYS_OPENMP, SYS_SERIAL };

struct system {
    const char *name;
    enum system_kind kind;
    int engine_type;
};

static const struct system systems[] = {
    {"mxc-naive", SYS_MXC, MXC_ENGINE_NAIVE},
    {"mxc-pooled", SYS_MXC, MXC_ENGINE_POOLED},
    {"mxc-perdevice", SYS_MXC, MXC_ENGINE_PERDEVICE},
    {"openmp", SYS_OPENMP, -1},
    {"serial", SYS_SERIAL, -1},
};
#define NUM_SYSTEMS ((int)(sizeof systems / sizeof systems[0]))

/* One system set up for one workload and body. */
struct runner {
    const struct system *sys;
    int workload;
    mxc_engine_fn fn;
    mxc_engine *engine;
    mxc_var *vars[MAX_VARS];
};

static _Noreturn void die_mxc(const char *what, int rc) {
    fprintf(stderr, "bench_engine: %s failed: %s (%s)\n", what, mxc_err_name(rc), mxc_last_error());
    exit(1);
}

static mxc_engine *engine_create(int type, int workers) {
    mxc_engine_config config = {.cpu_workers = workers};
    mxc_engine *engine;
    int rc = mxc_engine_create(type, &config, &engine);
    if (rc != MXC_OK)
        die_mxc("mxc_engine_create", rc);
    return engine;
}

static void runner_init(struct runner *r, const struct system *sys, int workload, int body,
                        int workers) {
    memset(r, 0, sizeof *r);
    r->sys = sys;
    r->workload = workload;
    r->fn = workload == W4 ? op_checked : body == BODY_SPIN ? op_spin : op_empty;
    check_body_ns = body == BODY_SPIN ? BODY_NS : 0;
    if (sys->kind != SYS_MXC)
        return;
    r->engine = engine_create(sys->engine_type, workers);
    for (int v = 0; v < workload_num_vars[workload]; v++) {
        int rc = mxc_engine_new_var(r->engine, &r->vars[v]);
        if (rc != MXC_OK)
            die_mxc("mxc_engine_new_var", rc);
    }
}

static void runner_fini(struct runner *r) {
    if (!r->engine)
        return;
    for (int v = 0; v < workload_num_vars[r->workload]; v++) {
        int rc = mxc_engine_delete_var(r->engine, r->vars[v], NULL, NULL);
        if (rc != MXC_OK)
            die_mxc("mxc_engine_delete_var", rc);
    }
    mxc_engine_destroy(r->engine);
    r->engine = NULL;
}

/* OpenMP's dependence tokens: one address per variable. */
static char omp_tokens[MAX_VARS];

/* Creates one OpenMP task for `op`, its reads as `in` and its write as `inout`
 * dependences. Repeated variables are listed once (the write wins), as mxc does. */
static void omp_submit(mxc_engine_fn fn, const struct op *op) {
    void *arg = op->arg;
    if (op->num_writes == 0) {
#pragma omp task firstprivate(fn, arg)
        fn(NULL, arg);
        return;
    }
    char *w = &omp_tokens[op->write];
    char *rd[MAX_READS];
    int nr = 0;
    for (int k = 0; k < op->num_reads; k++) {
        char *t = &omp_tokens[op->reads[k]];
        bool dup = t == w;
        for (int j = 0; j < nr && !dup; j++)
            dup = rd[j] == t;
        if (!dup)
            rd[nr++] = t;
    }
    switch (nr) {
    case 0:
#pragma omp task firstprivate(fn, arg) depend(inout : w[0])
        fn(NULL, arg);
        break;
    case 1:
#pragma omp task firstprivate(fn, arg) depend(in : rd[0][0]) depend(inout : w[0])
        fn(NULL, arg);
        break;
    case 2:
#pragma omp task firstprivate(fn, arg) depend(in : rd[0][0], rd[1][0]) depend(inout : w[0])
        fn(NULL, arg);
        break;
    case 8:
#pragma omp task firstprivate(fn, arg) depend(inout   \
                                              : w[0]) \
    depend(in                                         \
           : rd[0][0], rd[1][0], rd[2][0], rd[3][0], rd[4][0], rd[5][0], rd[6][0], rd[7][0])
        fn(NULL, arg);
        break;
    default: fprintf(stderr, "bench_engine: no OpenMP task form for %d reads\n", nr); exit(1);
    }
}

/* Pushes `op` to the engine through a static desc pattern; the variable arrays live on
 * the stack (the engine copies them). */
static void mxc_submit(struct runner *r, const struct op *op) {
    static const mxc_engine_op_desc pattern = {
        .ctx = {MXC_CPU, 0},
        .prop = MXC_PROP_NORMAL,
        .name = "bench_engine",
    };
    mxc_var *reads[MAX_READS], *writes[1];
    for (int k = 0; k < op->num_reads; k++)
        reads[k] = r->vars[op->reads[k]];
    if (op->num_writes)
        writes[0] = r->vars[op->write];
    mxc_engine_op_desc d = pattern;
    d.fn = r->fn;
    d.arg = op->arg;
    d.const_vars = reads;
    d.num_const_vars = op->num_reads;
    d.mutable_vars = writes;
    d.num_mutable_vars = op->num_writes;
    int rc = mxc_engine_push(r->engine, &d);
    if (rc != MXC_OK)
        die_mxc("mxc_engine_push", rc);
}

static const mxc_run_ctx serial_rctx = {{MXC_CPU, 0}, NULL, -1};

/* Submits up to `n` ops of the runner's workload and waits for them all. Stops pushing
 * (at a multiple of 1000 ops) once `limit_ns` has passed. Returns the ops submitted and
 * the time taken in *ns. */
static long timed_loop(struct runner *r, long n, uint64_t limit_ns, uint64_t *ns) {
    struct op_gen g;
    gen_init(&g, r->workload);
    uint64_t start = bench_now_ns();
    long i;
    for (i = 0; i < n; i++) {
        if (i % 1000 == 0 && i > 0 && bench_now_ns() - start > limit_ns)
            break;
        struct op op;
        gen_next(&g, &op);
        switch (r->sys->kind) {
        case SYS_MXC: mxc_submit(r, &op); break;
        case SYS_OPENMP: omp_submit(r->fn, &op); break;
        case SYS_SERIAL: r->fn(&serial_rctx, op.arg); break;
        }
    }
    if (r->sys->kind == SYS_MXC) {
        int rc = mxc_engine_wait_all(r->engine);
        if (rc != MXC_OK)
            die_mxc("mxc_engine_wait_all", rc);
    } else if (r->sys->kind == SYS_OPENMP) {
#pragma omp taskwait
    }
    *ns = bench_now_ns() - start;
    return i;
}

/* One timed run; OpenMP's runs inside a 2-thread team, one thread creating the tasks. */
static long run_once(struct runner *r, long n, uint64_t limit_ns, uint64_t *ns) {
    if (r->sys->kind != SYS_OPENMP)
        return timed_loop(r, n, limit_ns, ns);
    long done = 0;
#pragma omp parallel num_threads(2)
#pragma omp single
    done = timed_loop(r, n, limit_ns, ns);
    return done;
}

/* ---- Measurement -------------------------------------------------------------------- */

struct options {
    long n;
    int runs;
    bool json;
    int workers;          /* mxc cpu_workers; 0: the engine's default */
    long omp_cap;         /* OpenMP runs W3 and W4 with at most this many ops */
    double time_limit_s;  /* a run stops pushing after this long */
    double cell_budget_s; /* no further runs of a cell once its runs took this long */
    const char *only_workload, *only_system;
};

struct result {
    double ns_per_op;
    double peak_rss_mib;  /* < 0: unknown */
    double start_rss_mib; /* RSS when the peak was reset, before the first run */
    long target;          /* ops asked of each run (N, or OpenMP's cap) */
    long ops;             /* ops the last run pushed (fewer than target: time limit) */
    int runs;
    bool capped, timed_out;
};

/* Runs one (system, workload, body) cell `opt->runs` times and checks each run. */
static struct result measure(const struct system *sys, int workload, int body,
                             const struct options *opt) {
    struct runner r;
    runner_init(&r, sys, workload, body, opt->workers);
    long n = opt->n;
    struct result res = {0};
    if (sys->kind == SYS_OPENMP && (workload == W3 || workload == W4) && opt->omp_cap > 0 &&
        n > opt->omp_cap) {
        n = opt->omp_cap;
        res.capped = true;
    }
    uint64_t limit_ns = (uint64_t)(opt->time_limit_s * 1e9);
    res.target = n;
    double per_op[64]; /* opt->runs <= 64 */
    double total_s = 0;
    long peak_kib = -1;
    bench_reset_peak_rss();
    long start_kib = bench_rss_kib();
    for (int k = 0; k < opt->runs; k++) {
        if (workload == W4)
            check_reset();
        uint64_t ns;
        long done = run_once(&r, n, limit_ns, &ns);
        long kib = bench_peak_rss_kib();
        if (kib > peak_kib)
            peak_kib = kib;
        if (workload == W4 && !check_w4(sys->name, done))
            exit(1);
        if (r.engine) {
            mxc_engine_stats st;
            int rc = mxc_engine_get_stats(r.engine, &st);
            if (rc != MXC_OK)
                die_mxc("mxc_engine_get_stats", rc);
            if (st.pending != 0 || st.failed != 0) {
                fprintf(stderr,
                        "bench_engine: %s/%s on %s: after wait_all, %lld ops "
                        "pending and %llu failed\n",
                        workload_names[workload], body_names[body], sys->name,
                        (long long)st.pending, (unsigned long long)st.failed);
                exit(1);
            }
        }
        per_op[res.runs++] = (double)ns / (double)done;
        res.ops = done;
        total_s += (double)ns / 1e9;
        if (done < n) {
            res.timed_out = true;
            break;
        }
        if (total_s > opt->cell_budget_s)
            break;
    }
    runner_fini(&r);
    res.ns_per_op = bench_median(per_op, res.runs);
    res.peak_rss_mib = peak_kib < 0 ? -1 : (double)peak_kib / 1024;
    res.start_rss_mib = start_kib < 0 ? -1 : (double)start_kib / 1024;
    return res;
}

static void print_row(FILE *tbl, const struct options *opt, int workload, int body,
                      const struct system *sys, const struct result *res, double omp_ns) {
    double ratio = sys->kind == SYS_OPENMP ? 1.0 : omp_ns / res->ns_per_op;
    char ratio_s[32], note[96] = "";
    if (isfinite(ratio))
        snprintf(ratio_s, sizeof ratio_s, "%.2f", ratio);
    else
        snprintf(ratio_s, sizeof ratio_s, "-");
    size_t len = 0;
    if (res->capped)
        len += (size_t)snprintf(note, sizeof note, "N capped at %ld; ", res->target);
    if (res->timed_out && len < sizeof note)
        len += (size_t)snprintf(note + len, sizeof note - len, "time limit: %ld of %ld ops; ",
                                res->ops, res->target);
    if (res->runs < opt->runs && len < sizeof note)
        len += (size_t)snprintf(note + len, sizeof note - len, "%d of %d runs; ", res->runs,
                                opt->runs);
    if (len >= 2 && len < sizeof note)
        note[len - 2] = '\0'; /* the last "; " */
    fprintf(tbl, "%-4s %-6s %-14s %10.1f %10.3fM %9.1f %9.1f %10s  %s\n", workload_names[workload],
            body_names[body], sys->name, res->ns_per_op, 1e3 / res->ns_per_op, res->peak_rss_mib,
            res->start_rss_mib, ratio_s, note);
    if (!opt->json)
        return;
    char kase[32];
    snprintf(kase, sizeof kase, "%s/%s", workload_names[workload], body_names[body]);
    bench_json j;
    bench_json_begin(&j, "engine", kase);
    bench_json_str(&j, "workload", workload_names[workload]);
    bench_json_str(&j, "body", body_names[body]);
    bench_json_str(&j, "system", sys->name);
    bench_json_num(&j, "ns_per_op", res->ns_per_op);
    bench_json_num(&j, "ops_per_s", 1e9 / res->ns_per_op);
    bench_json_num(&j, "peak_rss_mib", res->peak_rss_mib < 0 ? NAN : res->peak_rss_mib);
    bench_json_str(&j, "baseline", "openmp");
    bench_json_num(&j, "ratio_vs_baseline", ratio);
    bench_json_print(&j, stdout);
}

/* Memory and time per live variable: creates NUM_VARS_TEST variables, then deletes them. */
static void measure_vars(FILE *tbl, const struct options *opt) {
    mxc_var **vars = malloc(NUM_VARS_TEST * sizeof *vars);
    if (!vars) {
        fprintf(stderr, "bench_engine: out of memory\n");
        exit(1);
    }
    memset(vars, 0, NUM_VARS_TEST * sizeof *vars); /* resident before the baseline */
    fprintf(tbl, "\nvars/1M: %ld variables created with mxc_engine_new_var, then deleted\n",
            NUM_VARS_TEST);
    fprintf(tbl, "%-14s %12s %12s %10s %10s\n", "system", "RSS B/var", "pool B/var", "ns/new",
            "ns/delete");
    for (int s = 0; s < NUM_SYSTEMS; s++) {
        const struct system *sys = &systems[s];
        if (sys->kind != SYS_MXC || (opt->only_system && strcmp(opt->only_system, sys->name) != 0))
            continue;
        mxc_engine *engine = engine_create(sys->engine_type, opt->workers);
        mxc_engine_stats st0, st1;
        bench_reset_peak_rss();
        long rss0 = bench_rss_kib();
        int rc = mxc_engine_get_stats(engine, &st0);
        uint64_t t0 = bench_now_ns();
        for (long i = 0; i < NUM_VARS_TEST && rc == MXC_OK; i++)
            rc = mxc_engine_new_var(engine, &vars[i]);
        if (rc != MXC_OK)
            die_mxc("mxc_engine_new_var", rc);
        uint64_t t1 = bench_now_ns();
        long rss1 = bench_rss_kib();
        rc = mxc_engine_get_stats(engine, &st1);
        if (rc != MXC_OK)
            die_mxc("mxc_engine_get_stats", rc);
        uint64_t t2 = bench_now_ns();
        for (long i = 0; i < NUM_VARS_TEST && rc == MXC_OK; i++)
            rc = mxc_engine_delete_var(engine, vars[i], NULL, NULL);
        if (rc == MXC_OK)
            rc = mxc_engine_wait_all(engine);
        if (rc != MXC_OK)
            die_mxc("mxc_engine_delete_var", rc);
        uint64_t t3 = bench_now_ns();
        mxc_engine_destroy(engine);
        double rss_b = rss0 < 0 || rss1 < 0 ? NAN : (double)(rss1 - rss0) * 1024 / 1e6;
        double pool_b = ((double)st1.pool_bytes - (double)st0.pool_bytes) / 1e6;
        double ns_new = (double)(t1 - t0) / 1e6, ns_del = (double)(t3 - t2) / 1e6;
        fprintf(tbl, "%-14s %12.1f %12.1f %10.1f %10.1f\n", sys->name, rss_b, pool_b, ns_new,
                ns_del);
        if (!opt->json)
            continue;
        bench_json j;
        bench_json_begin(&j, "engine", "vars/1M");
        bench_json_str(&j, "system", sys->name);
        bench_json_num(&j, "bytes_per_var", rss_b);
        bench_json_num(&j, "pool_bytes_per_var", pool_b);
        bench_json_num(&j, "ns_per_new_var", ns_new);
        bench_json_num(&j, "ns_per_delete_var", ns_del);
        bench_json_print(&j, stdout);
    }
    free(vars);
}

/* The CPU two spinning threads get, in cores (2.0 on an idle 2-core machine): other load
 * on the machine makes the parallel timings noisy, and this shows how much. */
static double measure_cores(void) {
    enum { SPINS = 50000 };
    uint64_t start = bench_now_ns();
#pragma omp parallel num_threads(2)
    for (int i = 0; i < SPINS; i++)
        bench_spin_ns(BODY_NS);
    double wall_ns = (double)(bench_now_ns() - start);
    return 2.0 * SPINS * BODY_NS / wall_ns;
}

static void usage(FILE *f) {
    fprintf(f, "usage: bench_engine [options]\n"
               "  --quick           N = 100000 and 3 runs\n"
               "  --n N             operations per run (default 1000000)\n"
               "  --runs K          runs per case, median reported (default 5, at most 64)\n"
               "  --json            JSON lines on stdout, the table on stderr\n"
               "  --workload W      only W1b, W2, W3 or W4 (the vars/1M case is skipped)\n"
               "  --system S        only mxc-naive, mxc-pooled, mxc-perdevice, openmp, serial\n"
               "  --workers K       mxc CPU workers (default: MXC_CPU_WORKER_NTHREADS or CPUs)\n"
               "  --omp-cap N       OpenMP runs W3 and W4 with at most N ops (default 100000;\n"
               "                    0: no cap); its cost per op grows with N, so capping favours\n"
               "                    OpenMP\n"
               "  --time-limit S    a run stops pushing after S seconds (default 15)\n"
               "  --cell-budget S   no more runs of a case after S seconds (default 20)\n");
}

static bool parse_args(int argc, char **argv, struct options *opt) {
    *opt = (struct options){
        .n = 1000000, .runs = 5, .omp_cap = 100000, .time_limit_s = 15, .cell_budget_s = 20};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes_value = true;
        if (strcmp(a, "--quick") == 0) {
            opt->n = 100000;
            opt->runs = 3;
            takes_value = false;
        } else if (strcmp(a, "--json") == 0) {
            opt->json = true;
            takes_value = false;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (!v) {
            fprintf(stderr, "bench_engine: %s: unknown option or missing value\n", a);
            return false;
        } else if (strcmp(a, "--n") == 0) {
            opt->n = strtol(v, NULL, 10);
        } else if (strcmp(a, "--runs") == 0) {
            opt->runs = atoi(v);
        } else if (strcmp(a, "--workload") == 0) {
            opt->only_workload = v;
        } else if (strcmp(a, "--system") == 0) {
            opt->only_system = v;
        } else if (strcmp(a, "--workers") == 0) {
            opt->workers = atoi(v);
        } else if (strcmp(a, "--omp-cap") == 0) {
            opt->omp_cap = strtol(v, NULL, 10);
        } else if (strcmp(a, "--time-limit") == 0) {
            opt->time_limit_s = atof(v);
        } else if (strcmp(a, "--cell-budget") == 0) {
            opt->cell_budget_s = atof(v);
        } else {
            fprintf(stderr, "bench_engine: unknown option %s\n", a);
            return false;
        }
        i += takes_value;
    }
    if (opt->n < 1 || opt->runs < 1 || opt->runs > 64 || opt->workers < 0 || opt->omp_cap < 0 ||
        !(opt->time_limit_s > 0) || !(opt->cell_budget_s > 0)) {
        fprintf(stderr, "bench_engine: --n, --runs (1..64), --time-limit and --cell-budget "
                        "must be positive; --workers and --omp-cap not negative\n");
        return false;
    }
    return true;
}

int main(int argc, char **argv) {
    struct options opt;
    if (!parse_args(argc, argv, &opt)) {
        usage(stderr);
        return 2;
    }
    FILE *tbl = opt.json ? stderr : stdout;
    const char *env_workers = getenv("MXC_CPU_WORKER_NTHREADS");
    char workers[64];
    if (opt.workers)
        snprintf(workers, sizeof workers, "%d (--workers)", opt.workers);
    else if (env_workers)
        snprintf(workers, sizeof workers, "%s (MXC_CPU_WORKER_NTHREADS)", env_workers);
    else
        snprintf(workers, sizeof workers, "default (number of CPUs)");
    fprintf(tbl,
            "bench_engine: N = %ld ops per run, median of %d runs; bodies: empty and "
            "%u ns busy-wait\n",
            opt.n, opt.runs, BODY_NS);
    fprintf(tbl,
            "mxc: cpu_workers = %s, plus the pushing thread; OpenMP: libgomp tasks "
            "with depend, 2 threads (one creating)\n",
            workers);
    fprintf(tbl, "time per op = (push of all ops + wait_all) / ops; ratio = OpenMP ns / system "
                 "ns (> 1: faster than OpenMP)\n");
    if (opt.omp_cap > 0 && opt.n > opt.omp_cap)
        fprintf(tbl,
                "OpenMP runs W3 and W4 with N = %ld (its cost per op grows with N: the "
                "cap favours OpenMP)\n",
                opt.omp_cap);
    fprintf(tbl,
            "CPU two spinning threads get before the run: %.2f cores (2.00 when nothing "
            "else runs)\n",
            measure_cores());
    bool peak_reset_works = bench_reset_peak_rss() == 0;
    fprintf(tbl,
            "peak MiB: process VmHWM over the runs of each case, %s; start MiB: RSS "
            "when the case began\n(memory an earlier case left in the heap counts in "
            "both)\n\n",
            peak_reset_works ? "reset before the case (clear_refs)"
                             : "NOT reset (clear_refs not writable): peak since process start");
    fprintf(tbl, "%-4s %-6s %-14s %10s %11s %9s %9s %10s  %s\n", "wl", "body", "system", "ns/op",
            "ops/s", "peak MiB", "start MiB", "vs OpenMP", "note");
    for (int w = 0; w < NUM_WORKLOADS; w++) {
        if (opt.only_workload && strcmp(opt.only_workload, workload_names[w]) != 0)
            continue;
        for (int b = 0; b < NUM_BODIES; b++) {
            struct result res[NUM_SYSTEMS];
            double omp_ns = NAN;
            for (int s = 0; s < NUM_SYSTEMS; s++) {
                res[s].runs = 0;
                if (opt.only_system && strcmp(opt.only_system, systems[s].name) != 0)
                    continue;
                res[s] = measure(&systems[s], w, b, &opt);
                if (systems[s].kind == SYS_OPENMP)
                    omp_ns = res[s].ns_per_op;
            }
            for (int s = 0; s < NUM_SYSTEMS; s++)
                if (res[s].runs > 0)
                    print_row(tbl, &opt, w, b, &systems[s], &res[s], omp_ns);
            fflush(tbl);
        }
    }
    if (!opt.only_workload)
        measure_vars(tbl, &opt);
    fprintf(tbl, "\nCPU two spinning threads get after the run: %.2f cores\n", measure_cores());
    return 0;
}

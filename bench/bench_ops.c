/*
 * bench/bench_ops.c — the layer operators' CPU kernels against what bounds them: the
 * matrix product they amount to for FullyConnected (MLP shapes) and Convolution (LeNet
 * and ResNet shapes), a plain copy loop's memory bandwidth for Pooling and, when they are
 * registered, Activation, BatchNorm and SoftmaxOutput; forward and backward.
 *
 *   FullyConnected  batch 100: 784 -> 128 (mlp1), 128 -> 64 (mlp2), 64 -> 10 (mlp3)
 *   Convolution     lenet_conv1: batch 100, 1 -> 20 channels, 5x5 on 28x28
 *                   lenet_conv2: batch 100, 20 -> 50 channels, 5x5 on 12x12
 *                   resnet_3x3:  batch 8, 64 -> 64 channels, 3x3 pad 1 on 56x56
 *   Pooling         max 2x2 stride 2 on the LeNet maps: (100, 20, 24, 24) lenet_pool1,
 *                   (100, 50, 8, 8) lenet_pool2
 *   Activation      relu and tanh (LeNet's) on (100, 20, 24, 24); BatchNorm on (100, 20, 24, 24);
 *   SoftmaxOutput   (100, 10) — each only if registered (listed as missing otherwise)
 *
 * The kernels are called directly through their operator definitions (operator/op.h,
 * as the test harness does: parsed params, inferred shapes, a temp-space resource, req
 * write), not through the engine, so the numbers are the kernels' own. GFLOP/s counts
 * 2 * M * N * K per product: forward is one product (FC: (N, K) x (K, H); conv:
 * (F, C*KH*KW) x (C*KH*KW, N*OH*OW)), backward two (the data and weight gradients; the
 * bias sums are not counted). The baseline "sgemm" is cblas_sgemm on exactly those
 * products, from and into preallocated buffers, measured in the same run; the ratio is
 * mxc's GFLOP/s over sgemm's (1: the kernel costs nothing beyond its products).
 * The bandwidth cases count the bytes of every array the kernel reads or writes (forward:
 * inputs and outputs; backward: output and input gradients plus the data it declared it
 * needs) over the time, against a loop copying as many bytes (half read, half written);
 * the ratio is mxc's GB/s over the copy's.
 *
 * Threads: the kernels run with the operator budget T (common/parallel.h: MXC_OP_NTHREADS,
 * else cores / MXC_CPU_WORKER_NTHREADS) and OpenBLAS at one thread, as in the library;
 * the sgemm baseline runs with OpenBLAS set to T threads for its calls, then back to 1,
 * so both sides use the same cores. Every line reports T ("threads").
 *
 *   build/bin/bench_ops [--quick] [--runs K] [--case SUBSTRING] [--json]
 *
 * Each measurement is the median of --runs (default 15; --quick 5) timed calls after one
 * warm-up; the operator and its baseline alternate within each run. With --json, stdout
 * carries only JSON lines and the table goes to stderr.
 *
 *   build/bin/bench_ops --json                               T = 2 on 2 cores (1 worker)
 *   MXC_CPU_WORKER_NTHREADS=2 build/bin/bench_ops --json     T = 1
 */
#include "bench_util.h"

#include "common/gemm.h"
#include "common/parallel.h"
#include "operator/op.h"

#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_RUNS 101

struct options {
    bool quick, json;
    int runs;
    int threads;        /* T, the operators' thread budget */
    const char *filter; /* --case: only cases whose name contains this */
};

static void die(const char *what) {
    fprintf(stderr, "bench_ops: %s: %s\n", what, mxc_last_error());
    exit(1);
}

static float *buffer(int64_t n, unsigned seed) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (v == NULL)
        die("out of memory");
    uint32_t x = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (float)(x >> 8) / 16777216.0f - 0.5f;
    }
    return v;
}

/* ---- One operator, ready to call ---------------------------------------------------- */

#define MAX_IN  4
#define MAX_OUT 3
#define MAX_AUX 2

struct op_run {
    const struct mxc__op_def *def;
    _Alignas(16) unsigned char params[1024];
    int num_in, num_out, num_aux;
    struct mxc__tensor in[MAX_IN], out[MAX_OUT], aux[MAX_AUX];
    struct mxc__tensor in_grad[MAX_IN], out_grad[MAX_OUT];
    struct mxc__resource *fwd_res[2], *bwd_res[2];
    int num_fwd_res, num_bwd_res;
};

static struct mxc__tensor tensor(mxc_shape s, unsigned seed) {
    int64_t n = mxc_shape_size(&s);
    return (struct mxc__tensor){buffer(n, seed), s, MXC_FLOAT32, mxc_cpu(), n};
}

static void op_setup(struct op_run *r, const char *name, const char *const *kv, mxc_shape data) {
    const char *keys[16], *vals[16];
    int n = 0;
    for (; kv[2 * n]; n++) {
        keys[n] = kv[2 * n];
        vals[n] = kv[2 * n + 1];
    }
    r->def = mxc__op_find(name);
    if (r->def == NULL || mxc__op_parse_params(r->def, n, keys, vals, r->params) != MXC_OK)
        die(name);
    r->num_in = mxc__op_num_inputs(r->def, r->params, NULL);
    r->num_out = mxc__op_num_outputs(r->def, r->params, NULL);
    r->num_aux = mxc__op_num_aux(r->def);
    if (r->num_in > MAX_IN || r->num_out > MAX_OUT || r->num_aux > MAX_AUX)
        die("too many arguments for this benchmark");
    mxc_shape in_s[MAX_IN] = {data}, out_s[MAX_OUT] = {{0}}, aux_s[MAX_AUX] = {{0}};
    if (r->def->infer_shape(r->params, in_s, r->num_in, out_s, r->num_out, aux_s, r->num_aux) !=
        MXC_OK)
        die(name);
    for (int i = 0; i < r->num_in; i++) {
        r->in[i] = tensor(in_s[i], 1u + (unsigned)i);
        r->in_grad[i] = tensor(in_s[i], 0);
    }
    for (int i = 0; i < r->num_out; i++) {
        r->out[i] = tensor(out_s[i], 7u + (unsigned)i);
        r->out_grad[i] = tensor(out_s[i], 17u + (unsigned)i);
    }
    for (int i = 0; i < r->num_aux; i++)
        r->aux[i] = tensor(aux_s[i], 27u + (unsigned)i);
    r->num_fwd_res = r->num_bwd_res = 0;
    for (int i = 0; i < 2 && r->def->forward_resources[i]; i++)
        if (mxc__resource_get(mxc_cpu(), r->def->forward_resources[i] - 1,
                              &r->fwd_res[r->num_fwd_res++]) != MXC_OK)
            die("resource");
    for (int i = 0; i < 2 && r->def->backward_resources[i]; i++)
        if (mxc__resource_get(mxc_cpu(), r->def->backward_resources[i] - 1,
                              &r->bwd_res[r->num_bwd_res++]) != MXC_OK)
            die("resource");
}

static void op_free(struct op_run *r) {
    for (int i = 0; i < r->num_in; i++) {
        free(r->in[i].data);
        free(r->in_grad[i].data);
    }
    for (int i = 0; i < r->num_out; i++) {
        free(r->out[i].data);
        free(r->out_grad[i].data);
    }
    for (int i = 0; i < r->num_aux; i++)
        free(r->aux[i].data);
}

/* Bytes of arrays a call reads and writes (the bandwidth cases' traffic). */
static double op_bytes(const struct op_run *r, bool backward) {
    int64_t in = 0, out = 0;
    for (int i = 0; i < r->num_in; i++)
        in += r->in[i].size;
    for (int i = 0; i < r->num_out; i++)
        out += r->out[i].size;
    if (!backward)
        return 4.0 * (double)(in + out);
    unsigned deps = r->def->backward_deps;
    int64_t n = in + out; /* in_grad and out_grad */
    n += deps & MXC__DEP_IN_DATA ? in : 0;
    n += deps & MXC__DEP_OUT_DATA ? out : 0;
    return 4.0 * (double)n;
}

static void op_call(struct op_run *r, bool backward) {
    static const int req[MAX_IN] = {MXC__REQ_WRITE, MXC__REQ_WRITE, MXC__REQ_WRITE, MXC__REQ_WRITE};
    mxc_run_ctx rctx = {mxc_cpu(), NULL, -1};
    struct mxc__op_call c = {
        .rctx = &rctx,
        .is_train = true,
        .params = r->params,
        .in_data = r->in,
        .num_in = r->num_in,
        .out_data = r->out,
        .num_out = r->num_out,
        .aux = r->aux,
        .num_aux = r->num_aux,
        .out_grad = backward ? r->out_grad : NULL,
        .in_grad = backward ? r->in_grad : NULL,
        .req = req,
        .resources = backward ? r->bwd_res : r->fwd_res,
        .num_resources = backward ? r->num_bwd_res : r->num_fwd_res,
    };
    int rc = backward ? r->def->backward_cpu(&c) : r->def->forward_cpu(&c);
    if (rc != MXC_OK)
        die(r->def->name);
}

/* ---- The baseline: the same products through cblas_sgemm ---------------------------- */

/* C (m, n) = op(A) · op(B) with op(A) (m, k), op(B) (k, n). */
struct gemm {
    bool ta, tb;
    int m, n, k;
    float *a, *b, *c;
};

static struct gemm gemm_make(bool ta, bool tb, int m, int n, int k) {
    return (struct gemm){ta,
                         tb,
                         m,
                         n,
                         k,
                         buffer((int64_t)m * k, 11),
                         buffer((int64_t)k * n, 12),
                         buffer((int64_t)m * n, 0)};
}

static void gemm_run(const struct gemm *g) {
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans,
                g->m, g->n, g->k, 1.0f, g->a, g->ta ? g->m : g->k, g->b, g->tb ? g->k : g->n, 0.0f,
                g->c, g->n);
}

static void gemm_free(struct gemm *g) {
    free(g->a);
    free(g->b);
    free(g->c);
}

/* ---- The bandwidth baseline: a plain copy loop --------------------------------------- */

struct copy {
    int64_t n; /* floats read and as many written */
    float *src, *dst;
};

static struct copy copy_make(double bytes) {
    int64_t n = (int64_t)(bytes / 8);
    return (struct copy){n, buffer(n, 13), buffer(n, 0)};
}

static void copy_free(struct copy *c) {
    free(c->src);
    free(c->dst);
}

/* ---- Measuring ------------------------------------------------------------------------ */

/* What the operator is compared with: `ng` products or one copy. */
struct baseline {
    struct gemm *g;
    int ng;
    struct copy *copy;
};

/* The copy over T threads, like the operators' own loops. */
static void copy_range(void *arg, int64_t i0, int64_t i1) {
    const struct copy *c = arg;
    for (int64_t i = i0; i < i1; i++)
        c->dst[i] = c->src[i];
}

static void baseline_run(const struct options *o, const struct baseline *b) {
    if (b->copy) {
        mxc__parallel_for(b->copy->n, 1 << 14, copy_range, b->copy);
        return;
    }
    for (int i = 0; i < b->ng; i++)
        gemm_run(&b->g[i]);
}

/* Median times of the operator call and of the baseline, alternating within each run so
 * that whatever else the machine does weighs on both alike. OpenBLAS gets the operator's
 * T threads for the baseline products only (the library keeps it at one). */
static void median_ms(const struct options *o, struct op_run *r, bool backward,
                      const struct baseline *b, double *op_ms, double *base_ms) {
    double t[MAX_RUNS], u[MAX_RUNS];
    for (int k = -1; k < o->runs; k++) { /* k = -1: the warm-up */
        uint64_t t0 = bench_now_ns();
        op_call(r, backward);
        uint64_t t1 = bench_now_ns();
        openblas_set_num_threads(o->threads);
        uint64_t t2 = bench_now_ns();
        baseline_run(o, b);
        uint64_t t3 = bench_now_ns();
        openblas_set_num_threads(1);
        if (k >= 0) {
            t[k] = (double)(t1 - t0) / 1e6;
            u[k] = (double)(t3 - t2) / 1e6;
        }
    }
    *op_ms = bench_median(t, o->runs);
    *base_ms = bench_median(u, o->runs);
}

/* One line: `work` is flops (sgemm baseline) or bytes (copy baseline). */
static void report(const struct options *o, const char *op, const char *dir, const char *name,
                   bool bandwidth, double work, double ms, double base_ms) {
    char kase[128];
    snprintf(kase, sizeof kase, "%s_%s_%s", op, dir, name);
    double rate = work / (ms * 1e6), base = work / (base_ms * 1e6); /* G per second */
    const char *unit = bandwidth ? "GB/s" : "GFLOP/s";
    if (o->json) {
        bench_json j;
        bench_json_begin(&j, "ops", kase);
        bench_json_str(&j, "system", "mxc");
        bench_json_num(&j, "time_ms", ms);
        bench_json_num(&j, bandwidth ? "gb_per_s" : "gflops", rate);
        bench_json_str(&j, "baseline", bandwidth ? "copy" : "sgemm");
        bench_json_num(&j, bandwidth ? "baseline_gb_per_s" : "baseline_gflops", base);
        bench_json_num(&j, "ratio_vs_baseline", rate / base);
        bench_json_num(&j, "threads", o->threads);
        bench_json_print(&j, stdout);
    }
    fprintf(o->json ? stderr : stdout,
            "%-36s %9.3f ms %8.2f %-7s  %-5s %8.2f %-7s  ratio %.2f"
            "  T=%d\n",
            kase, ms, rate, unit, bandwidth ? "copy" : "sgemm", base, unit, rate / base,
            o->threads);
}

struct bcase {
    const char *op, *name;
    const char *kv[16];
    int64_t data[4];
    int ndim;
    bool bandwidth; /* against the copy loop; else against the products below */
    /* the products: forward (m, n, k) and, for backward, two more */
    int fm, fn, fk;
    bool fta, ftb;
    int b1m, b1n, b1k, b2m, b2n, b2k;
    bool b1ta, b1tb, b2ta, b2tb;
};

static void run_dir(const struct options *o, const struct bcase *c, struct op_run *r,
                    bool backward) {
    const char *dir = backward ? "backward" : "forward";
    double ms, base;
    if (c->bandwidth) {
        double bytes = op_bytes(r, backward);
        struct copy cp = copy_make(bytes);
        struct baseline b = {NULL, 0, &cp};
        median_ms(o, r, backward, &b, &ms, &base);
        report(o, c->op, dir, c->name, true, bytes, ms, base);
        copy_free(&cp);
        return;
    }
    struct gemm g[2];
    int ng = backward ? 2 : 1;
    if (backward) {
        g[0] = gemm_make(c->b1ta, c->b1tb, c->b1m, c->b1n, c->b1k);
        g[1] = gemm_make(c->b2ta, c->b2tb, c->b2m, c->b2n, c->b2k);
    } else {
        g[0] = gemm_make(c->fta, c->ftb, c->fm, c->fn, c->fk);
    }
    double flops = 0;
    for (int i = 0; i < ng; i++)
        flops += 2.0 * g[i].m * g[i].n * g[i].k;
    struct baseline b = {g, ng, NULL};
    median_ms(o, r, backward, &b, &ms, &base);
    report(o, c->op, dir, c->name, false, flops, ms, base);
    for (int i = 0; i < ng; i++)
        gemm_free(&g[i]);
}

static void run_case(const struct options *o, const struct bcase *c) {
    char full[128];
    snprintf(full, sizeof full, "%s_%s", c->op, c->name);
    if (o->filter && strstr(full, o->filter) == NULL)
        return;
    if (mxc__op_find(c->op) == NULL) {
        fprintf(stderr, "bench_ops: %s is not registered; skipping %s\n", c->op, c->name);
        return;
    }
    struct op_run r;
    op_setup(&r, c->op, c->kv, mxc_shape_make(c->ndim, c->data));
    run_dir(o, c, &r, false);
    if (r.def->backward_cpu)
        run_dir(o, c, &r, true);
    op_free(&r);
}

/* FC (M, K) -> (M, H): forward X·Wᵀ; backward dY·W (M, K, H) and dYᵀ·X (H, K, M). */
#define FC(name, m, k, h)                                                                         \
    {                                                                                             \
        "FullyConnected", name, {"num_hidden", #h, NULL}, {m, k}, 2, false, m, h, k, false, true, \
            m, k, h, h, k, m, false, false, true, false                                           \
    }

/* Conv N x C x H x W, F filters, KxK, pad P -> OH x OW; with R = C*K*K and Q = N*OH*OW:
 * forward W (F, R) · cols (R, Q); backward Wᵀ · dY (R, Q, F) and dY · colsᵀ (F, R, Q). */
#define CONV(name, n, c, h, f, k, pad, oh)                                                         \
    {                                                                                              \
        "Convolution", name,                                                                       \
            {"kernel", "(" #k ", " #k ")", "pad", "(" #pad ", " #pad ")", "num_filter", #f, NULL}, \
            {n, c, h, h}, 4, false, f, (n) * (oh) * (oh), (c) * (k) * (k), false, false,           \
            (c) * (k) * (k), (n) * (oh) * (oh), f, f, (c) * (k) * (k), (n) * (oh) * (oh), true,    \
            false, false, true                                                                     \
    }

/* A memory-bound operator on data (N, C, H, W), against the copy loop. */
#define BANDWIDTH(op, name, n, c, h, w, ...)                                                     \
    {                                                                                            \
        op, name, {__VA_ARGS__, NULL}, {n, c, h, w}, 4, true, 0, 0, 0, false, false, 0, 0, 0, 0, \
            0, 0, false, false, false, false                                                     \
    }

static const struct bcase cases[] = {
    FC("mlp1", 100, 784, 128),
    FC("mlp2", 100, 128, 64),
    FC("mlp3", 100, 64, 10),
    CONV("lenet_conv1", 100, 1, 28, 20, 5, 0, 24),
    CONV("lenet_conv2", 100, 20, 12, 50, 5, 0, 8),
    CONV("resnet_3x3", 8, 64, 56, 64, 3, 1, 56),
    BANDWIDTH("Pooling", "lenet_pool1", 100, 20, 24, 24, "kernel", "(2, 2)", "stride", "(2, 2)",
              "pool_type", "max"),
    BANDWIDTH("Pooling", "lenet_pool2", 100, 50, 8, 8, "kernel", "(2, 2)", "stride", "(2, 2)",
              "pool_type", "max"),
    /* being written alongside; measured when registered */
    BANDWIDTH("Activation", "lenet_relu1", 100, 20, 24, 24, "act_type", "relu"),
    BANDWIDTH("Activation", "lenet_tanh1", 100, 20, 24, 24, "act_type", "tanh"),
    BANDWIDTH("BatchNorm", "lenet_bn1", 100, 20, 24, 24, "fix_gamma", "False"),
    {"SoftmaxOutput", "mlp_out", {NULL}, {100, 10}, 2, true, 0, 0, 0,
     false,           false,     0,      0,         0, 0,    0, 0, false,
     false,           false,     false},
};

/* With T > 1 the operator's OpenMP threads and the baseline's OpenBLAS threads take turns
 * on the same cores. Both runtimes keep an idle thread spinning after its work (OpenBLAS
 * for 2^28 cycles, a tenth of a second; libgomp for 300000 spins), long enough to steal
 * the other side's core for the whole next measurement (we saw 50x slowdowns on 2 cores).
 * Both read their setting once when loaded, so the benchmark sets it and runs itself
 * again: idle threads spin about 25 µs (OpenBLAS 2^16 cycles, libgomp 10000 spins), which
 * keeps them warm within one call's products and out of the way of the next call. */
static void short_spins(char **argv) {
    if (getenv("OPENBLAS_THREAD_TIMEOUT") || getenv("GOMP_SPINCOUNT"))
        return;
    setenv("OPENBLAS_THREAD_TIMEOUT", "16", 1);
    setenv("GOMP_SPINCOUNT", "10000", 1);
    execv("/proc/self/exe", argv);
    perror("bench_ops: execv /proc/self/exe"); /* not fatal: measure as we are */
}

int main(int argc, char **argv) {
    struct options o = {.runs = 15};
    if (mxc__op_threads() > 1)
        short_spins(argv);
    bool runs_given = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            o.quick = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            o.json = true;
        } else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
            o.filter = argv[++i];
        } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            o.runs = atoi(argv[++i]);
            runs_given = true;
        } else {
            fprintf(stderr, "usage: %s [--quick] [--runs K] [--case SUBSTRING] [--json]\n",
                    argv[0]);
            return 2;
        }
    }
    if (o.quick && !runs_given)
        o.runs = 5;
    if (o.runs < 1 || o.runs > MAX_RUNS) {
        fprintf(stderr, "bench_ops: --runs must be in [1, %d]\n", MAX_RUNS);
        return 2;
    }
    mxc__blas_init(); /* OpenBLAS at one thread, as under an engine */
    o.threads = mxc__op_threads();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&o, &cases[i]);
    return 0;
}

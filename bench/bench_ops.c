/*
 * bench/bench_ops.c — the layer operators' CPU kernels against the matrix product they
 * amount to: FullyConnected at MLP shapes and Convolution at LeNet and ResNet shapes,
 * forward and backward.
 *
 *   FullyConnected  batch 100: 784 -> 128 (mlp1), 128 -> 64 (mlp2), 64 -> 10 (mlp3)
 *   Convolution     lenet_conv1: batch 100, 1 -> 20 channels, 5x5 on 28x28
 *                   lenet_conv2: batch 100, 20 -> 50 channels, 5x5 on 12x12
 *                   resnet_3x3:  batch 8, 64 -> 64 channels, 3x3 pad 1 on 56x56
 *
 * The kernels are called directly through their operator definitions (operator/op.h,
 * as the test harness does: parsed params, inferred shapes, a temp-space resource, req
 * write), not through the engine, so the numbers are the kernels' own. GFLOP/s counts
 * 2 * M * N * K per product: forward is one product (FC: (N, K) x (K, H); conv:
 * (F, C*KH*KW) x (C*KH*KW, N*OH*OW)), backward two (the data and weight gradients; the
 * bias sums are not counted). The baseline "sgemm" is cblas_sgemm on exactly those
 * products, from and into preallocated buffers, measured in the same run; the ratio is
 * mxc's GFLOP/s over sgemm's (1: the kernel costs nothing beyond its products).
 *
 *   build/bin/bench_ops [--quick] [--runs K] [--json]
 *
 * Each measurement is the median of --runs (default 15; --quick 5) timed calls after one
 * warm-up; the operator and its baseline alternate within each run. With --json, stdout
 * carries only JSON lines and the table goes to stderr.
 *
 * Note: the sgemm products use every OpenBLAS thread, while im2col / col2im and the
 * gathers run on the calling thread (the library starts no threads of its own), so on a
 * machine with few cores the convolution ratio measures that serial part too;
 * OPENBLAS_NUM_THREADS=1 compares the two single-threaded.
 */
#include "bench_util.h"

#include "operator/op.h"

#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS 101

struct options {
    bool quick, json;
    int runs;
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

struct op_run {
    const struct mxc__op_def *def;
    _Alignas(16) unsigned char params[1024];
    int num_in;
    struct mxc__tensor in[3], out[1], in_grad[3], out_grad[1];
    struct mxc__resource *fwd_res[2], *bwd_res[2];
    int num_fwd_res, num_bwd_res;
};

static struct mxc__tensor tensor(mxc_shape s, unsigned seed) {
    int64_t n = mxc_shape_size(&s);
    return (struct mxc__tensor){buffer(n, seed), s, MXC_FLOAT32, mxc_cpu(), n};
}

static void op_setup(struct op_run *r, const char *name, const char *const *kv,
                     mxc_shape data) {
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
    mxc_shape in_s[3] = {data}, out_s[1] = {{0}};
    if (r->def->infer_shape(r->params, in_s, r->num_in, out_s, 1, NULL, 0) != MXC_OK)
        die(name);
    for (int i = 0; i < r->num_in; i++) {
        r->in[i] = tensor(in_s[i], 1u + (unsigned)i);
        r->in_grad[i] = tensor(in_s[i], 0);
    }
    r->out[0] = tensor(out_s[0], 7);
    r->out_grad[0] = tensor(out_s[0], 8);
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
    free(r->out[0].data);
    free(r->out_grad[0].data);
}

static void op_call(struct op_run *r, bool backward) {
    static const int req[3] = {MXC__REQ_WRITE, MXC__REQ_WRITE, MXC__REQ_WRITE};
    mxc_run_ctx rctx = {mxc_cpu(), NULL, -1};
    struct mxc__op_call c = {
        .rctx = &rctx,
        .is_train = true,
        .params = r->params,
        .in_data = r->in,
        .num_in = r->num_in,
        .out_data = r->out,
        .num_out = 1,
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
    return (struct gemm){ta, tb, m, n, k, buffer((int64_t)m * k, 11), buffer((int64_t)k * n, 12),
                         buffer((int64_t)m * n, 0)};
}

static void gemm_run(const struct gemm *g) {
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, 1.0f, g->a,
                g->ta ? g->m : g->k, g->b, g->tb ? g->k : g->n, 0.0f, g->c, g->n);
}

static void gemm_free(struct gemm *g) {
    free(g->a);
    free(g->b);
    free(g->c);
}

/* ---- Measuring ------------------------------------------------------------------------ */

struct bcase {
    const char *op, *name;
    const char *kv[16];
    int64_t data[4];
    int ndim;
    /* the products: forward (m, n, k) and, for backward, two more */
    int fm, fn, fk;
    bool fta, ftb;
    int b1m, b1n, b1k, b2m, b2n, b2k;
    bool b1ta, b1tb, b2ta, b2tb;
};

/* Median times of the operator call and of the baseline products, alternating within
 * each run so that whatever else the machine does weighs on both alike. */
static void median_ms(int runs, struct op_run *r, bool backward, struct gemm *g, int ng,
                      double *op_ms, double *base_ms) {
    double t[MAX_RUNS], u[MAX_RUNS];
    op_call(r, backward);
    for (int i = 0; i < ng; i++)
        gemm_run(&g[i]);
    for (int k = 0; k < runs; k++) {
        uint64_t t0 = bench_now_ns();
        op_call(r, backward);
        uint64_t t1 = bench_now_ns();
        for (int i = 0; i < ng; i++)
            gemm_run(&g[i]);
        uint64_t t2 = bench_now_ns();
        t[k] = (double)(t1 - t0) / 1e6;
        u[k] = (double)(t2 - t1) / 1e6;
    }
    *op_ms = bench_median(t, runs);
    *base_ms = bench_median(u, runs);
}

static void report(const struct options *o, const char *op, const char *dir, const char *name,
                   double flops, double ms, double base_ms) {
    char kase[128];
    snprintf(kase, sizeof kase, "%s_%s_%s", op, dir, name);
    double gf = flops / (ms * 1e6), bgf = flops / (base_ms * 1e6);
    if (o->json) {
        bench_json j;
        bench_json_begin(&j, "ops", kase);
        bench_json_str(&j, "system", "mxc");
        bench_json_num(&j, "gflops", gf);
        bench_json_num(&j, "ms", ms);
        bench_json_str(&j, "baseline", "sgemm");
        bench_json_num(&j, "baseline_gflops", bgf);
        bench_json_num(&j, "ratio_vs_baseline", gf / bgf);
        bench_json_print(&j, stdout);
    }
    fprintf(o->json ? stderr : stdout, "%-40s %9.3f ms %8.2f GFLOP/s   sgemm %8.2f GFLOP/s  "
            "ratio %.2f\n", kase, ms, gf, bgf, gf / bgf);
}

static void run_case(const struct options *o, const struct bcase *c) {
    struct op_run r;
    mxc_shape data = mxc_shape_make(c->ndim, c->data);
    op_setup(&r, c->op, c->kv, data);

    struct gemm f = gemm_make(c->fta, c->ftb, c->fm, c->fn, c->fk);
    double flops = 2.0 * c->fm * c->fn * c->fk;
    double ms, base;
    median_ms(o->runs, &r, false, &f, 1, &ms, &base);
    report(o, c->op, "forward", c->name, flops, ms, base);
    gemm_free(&f);

    struct gemm b[2] = {gemm_make(c->b1ta, c->b1tb, c->b1m, c->b1n, c->b1k),
                        gemm_make(c->b2ta, c->b2tb, c->b2m, c->b2n, c->b2k)};
    flops = 2.0 * c->b1m * c->b1n * c->b1k + 2.0 * c->b2m * c->b2n * c->b2k;
    median_ms(o->runs, &r, true, b, 2, &ms, &base);
    report(o, c->op, "backward", c->name, flops, ms, base);
    gemm_free(&b[0]);
    gemm_free(&b[1]);
    op_free(&r);
}

/* FC (M, K) -> (M, H): forward X·Wᵀ; backward dY·W (M, K, H) and dYᵀ·X (H, K, M). */
#define FC(name, m, k, h)                                                                 \
    {"FullyConnected", name, {"num_hidden", #h, NULL}, {m, k}, 2, m, h, k, false, true,   \
     m, k, h, h, k, m, false, false, true, false}

/* Conv N x C x H x W, F filters, KxK, pad P -> OH x OW; with R = C*K*K and Q = N*OH*OW:
 * forward W (F, R) · cols (R, Q); backward Wᵀ · dY (R, Q, F) and dY · colsᵀ (F, R, Q). */
#define CONV(name, n, c, h, f, k, pad, oh)                                                 \
    {"Convolution", name, {"kernel", "(" #k ", " #k ")", "pad", "(" #pad ", " #pad ")",    \
     "num_filter", #f, NULL}, {n, c, h, h}, 4,                                             \
     f, (n) * (oh) * (oh), (c) * (k) * (k), false, false,                                  \
     (c) * (k) * (k), (n) * (oh) * (oh), f, f, (c) * (k) * (k), (n) * (oh) * (oh),         \
     true, false, false, true}

static const struct bcase cases[] = {
    FC("mlp1", 100, 784, 128),
    FC("mlp2", 100, 128, 64),
    FC("mlp3", 100, 64, 10),
    CONV("lenet_conv1", 100, 1, 28, 20, 5, 0, 24),
    CONV("lenet_conv2", 100, 20, 12, 50, 5, 0, 8),
    CONV("resnet_3x3", 8, 64, 56, 64, 3, 1, 56),
};

int main(int argc, char **argv) {
    struct options o = {.runs = 15};
    bool runs_given = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            o.quick = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            o.json = true;
        } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            o.runs = atoi(argv[++i]);
            runs_given = true;
        } else {
            fprintf(stderr, "usage: %s [--quick] [--runs K] [--json]\n", argv[0]);
            return 2;
        }
    }
    if (o.quick && !runs_given)
        o.runs = 5;
    if (o.runs < 1 || o.runs > MAX_RUNS) {
        fprintf(stderr, "bench_ops: --runs must be in [1, %d]\n", MAX_RUNS);
        return 2;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&o, &cases[i]);
    return 0;
}

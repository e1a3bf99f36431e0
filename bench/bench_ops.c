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
 *                   resnet_3x3_512: batch 100, 512 -> 512 channels, 3x3 pad 1 on 4x4
 *                   (ResNet-18's last stage on 32x32 images)
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
 * mxc's GFLOP/s over sgemm's (1: the kernel costs nothing beyond its products; above 1
 * where the kernel needs fewer multiply-adds than those products, as the Winograd path of
 * 3x3 convolutions at stride 1 does, operator/conv_winograd.c).
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
 *   build/bin/bench_ops [--quick] [--runs K] [--case SUBSTRING] [--json] [--ctx cpu|gpu]
 *
 * Each measurement is the median of --runs (default 15; --quick 5) timed calls after one
 * warm-up; the operator and its baseline alternate within each run. With --json, stdout
 * carries only JSON lines and the table goes to stderr.
 *
 *   build/bin/bench_ops --json                               T = 2 on 2 cores (1 worker)
 *   MXC_CPU_WORKER_NTHREADS=2 build/bin/bench_ops --json     T = 1
 *
 * --ctx gpu (a CUDA build; gpu(0)): the GPU kernels (forward_gpu, backward_gpu), called
 * the same way on device tensors with a stream of the benchmark's own, against the direct
 * library calls of the same work on the same stream, alternating as on the CPU:
 *   cuBLAS    the same products: cublasSgemm for FullyConnected (MLP shapes and large ones)
 *             and dot (a large square product), cublasSgemmStridedBatched for batch_dot (a
 *             Transformer attention shape, 64 x (128x64 . 64x128));
 *   cuDNN     Convolution: cudnnConvolutionForward / BackwardData / BackwardFilter with the
 *             algorithm cuDNN's heuristics rank first for the shape (without cuDNN in the
 *             build: the products through cuBLAS). The memory-bound layers, on the
 *             operator's own device arrays, with the modes its parameters (the case's
 *             key-values) select: Pooling (cudnnPoolingForward / Backward, max 2x2 stride 2
 *             at LeNet's and ResNet's shapes, global average over ResNet's last stage),
 *             Activation (cudnnActivationForward / Backward: relu, sigmoid, tanh),
 *             BatchNorm in training (cudnnBatchNormalizationForwardTraining / Backward,
 *             CUDNN_BATCHNORM_SPATIAL, the case's eps, factor 1 - momentum), softmax over
 *             the last axis of (N, C) (cudnnSoftmaxForward / Backward, ACCURATE, CHANNEL
 *             mode on (N, C, 1, 1)) and LRN (cudnnLRNCrossChannelForward / Backward with
 *             nsize, alpha, beta, knorm). These report GB/s, the operator's bytes over each
 *             side's time (a build without cuDNN skips them; the copy loop is CPU-only).
 * Each time is wall time from the call to the end of cudaStreamSynchronize, so launches
 * and any host work the kernel does count, as they do in training. TF32 is off on both
 * sides (cuBLAS's default math mode; cuDNN's convolution math type CUDNN_DEFAULT_MATH). A
 * last line measures the engine on a GPU: empty operations pushed on gpu(0) per second,
 * each launching an empty kernel on its worker's stream (and synchronising it, as every
 * GPU operation does), against a bare loop of cudaLaunchKernel of the same kernel and
 * cudaStreamSynchronize on one stream. The kernel is PTX loaded at run time
 * (cudaLibraryLoadData), the benchmarks being C compiled without nvcc.
 */
#include "bench_gpu.h"
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
    bool quick, json, gpu;
    int runs;
    int threads;        /* T, the operators' thread budget */
    const char *filter; /* --case: only cases whose name contains this */
};

static void die(const char *what) {
    fprintf(stderr, "bench_ops: %s: %s\n", what, mxc_last_error());
    exit(1);
}

#ifdef MXC_USE_CUDA
static cudaStream_t gpu_stream; /* the benchmark's stream, made in main */
#endif
#ifdef MXC_USE_CUDNN
static const bool have_cudnn = true;
#else
static const bool have_cudnn = false;
#endif

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

/* ---- The cases ------------------------------------------------------------------------ */

/* One case: an operator with its parameters (key-values) and input shapes, and what it is
 * compared with. */
struct bcase {
    const char *op, *name;
    const char *kv[16];
    int64_t data[4];
    int ndim;
    int64_t rhs[4]; /* dot, batch_dot: the second input's shape */
    int rhs_ndim;
    /* memory-bound: against the copy loop, or on a GPU the cuDNN call of the same layer
     * (`dnn`, its modes read from kv); else against the products below */
    bool bandwidth;
    /* the products: forward (m, n, k) and, for backward, two more; each `batch` (0: 1)
     * times */
    int fm, fn, fk;
    bool fta, ftb;
    int b1m, b1n, b1k, b2m, b2n, b2k;
    bool b1ta, b1tb, b2ta, b2tb;
    int batch;
    bool dnn;                 /* a direct cuDNN call of the same work exists */
    int filters, kernel, pad; /* Convolution: the geometry of the direct cuDNN call */
};

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
    bool gpu; /* tensors on gpu(0), GPU kernels */
};

/* `n` floats of buffer(n, seed), on the host or on gpu(0). */
static float *data_on(bool gpu, int64_t n, unsigned seed) {
    float *h = buffer(n, seed);
    if (!gpu)
        return h;
#ifdef MXC_USE_CUDA
    void *d = NULL;
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    cuda_ok(cudaMalloc(&d, bytes), "cudaMalloc");
    cuda_ok(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    free(h);
    return d;
#else
    die("a GPU buffer in a build without CUDA");
    return NULL;
#endif
}

static void data_free(bool gpu, void *p) {
#ifdef MXC_USE_CUDA
    if (gpu) {
        cuda_ok(cudaFree(p), "cudaFree");
        return;
    }
#endif
    (void)gpu;
    free(p);
}

static mxc_context bench_ctx(bool gpu) { return gpu ? mxc_gpu(0) : mxc_cpu(); }

static struct mxc__tensor tensor(bool gpu, mxc_shape s, unsigned seed) {
    int64_t n = mxc_shape_size(&s);
    return (struct mxc__tensor){data_on(gpu, n, seed), s, MXC_FLOAT32, bench_ctx(gpu), n};
}

/* `data` is the first input's shape; `rhs` the second's where shape inference needs it
 * (dot, batch_dot), else empty. */
static void op_setup(struct op_run *r, bool gpu, const char *name, const char *const *kv,
                     mxc_shape data, mxc_shape rhs) {
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
    mxc_shape in_s[MAX_IN] = {data, rhs}, out_s[MAX_OUT] = {{0}}, aux_s[MAX_AUX] = {{0}};
    if (r->def->infer_shape(r->params, in_s, r->num_in, out_s, r->num_out, aux_s, r->num_aux) !=
        MXC_OK)
        die(name);
    for (int i = 0; i < r->num_in; i++) {
        r->in[i] = tensor(gpu, in_s[i], 1u + (unsigned)i);
        r->in_grad[i] = tensor(gpu, in_s[i], 0);
    }
    for (int i = 0; i < r->num_out; i++) {
        r->out[i] = tensor(gpu, out_s[i], 7u + (unsigned)i);
        r->out_grad[i] = tensor(gpu, out_s[i], 17u + (unsigned)i);
    }
    for (int i = 0; i < r->num_aux; i++)
        r->aux[i] = tensor(gpu, aux_s[i], 27u + (unsigned)i);
    r->gpu = gpu;
    r->num_fwd_res = r->num_bwd_res = 0;
    for (int i = 0; i < 2 && r->def->forward_resources[i]; i++)
        if (mxc__resource_get(bench_ctx(gpu), r->def->forward_resources[i] - 1,
                              &r->fwd_res[r->num_fwd_res++]) != MXC_OK)
            die("resource");
    for (int i = 0; i < 2 && r->def->backward_resources[i]; i++)
        if (mxc__resource_get(bench_ctx(gpu), r->def->backward_resources[i] - 1,
                              &r->bwd_res[r->num_bwd_res++]) != MXC_OK)
            die("resource");
}

static void op_free(struct op_run *r) {
    for (int i = 0; i < r->num_in; i++) {
        data_free(r->gpu, r->in[i].data);
        data_free(r->gpu, r->in_grad[i].data);
    }
    for (int i = 0; i < r->num_out; i++) {
        data_free(r->gpu, r->out[i].data);
        data_free(r->gpu, r->out_grad[i].data);
    }
    for (int i = 0; i < r->num_aux; i++)
        data_free(r->gpu, r->aux[i].data);
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
    mxc_run_ctx rctx = {bench_ctx(r->gpu), NULL, -1};
#ifdef MXC_USE_CUDA
    rctx.stream = r->gpu ? gpu_stream : NULL;
#endif
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
    mxc__op_kernel k = r->gpu ? (backward ? r->def->backward_gpu : r->def->forward_gpu)
                              : (backward ? r->def->backward_cpu : r->def->forward_cpu);
    int rc = k(&c);
#ifdef MXC_USE_CUDA
    if (rc == MXC_OK && r->gpu)
        cuda_ok(cudaStreamSynchronize(gpu_stream), r->def->name); /* as the engine does */
#endif
    if (rc != MXC_OK)
        die(r->def->name);
}

/* ---- The baseline: the same products through cblas_sgemm ---------------------------- */

/* C (m, n) = op(A) · op(B) with op(A) (m, k), op(B) (k, n), for each of `batch` packed
 * triples. */
struct gemm {
    bool ta, tb;
    int m, n, k, batch;
    float *a, *b, *c;
};

static struct gemm gemm_make(bool ta, bool tb, int m, int n, int k, int batch) {
    return (struct gemm){ta,
                         tb,
                         m,
                         n,
                         k,
                         batch,
                         buffer((int64_t)batch * m * k, 11),
                         buffer((int64_t)batch * k * n, 12),
                         buffer((int64_t)batch * m * n, 0)};
}

static void gemm_run(const struct gemm *g) {
    int64_t sa = (int64_t)g->m * g->k, sb = (int64_t)g->k * g->n, sc = (int64_t)g->m * g->n;
    for (int i = 0; i < g->batch; i++)
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                    g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, 1.0f, g->a + i * sa,
                    g->ta ? g->m : g->k, g->b + i * sb, g->tb ? g->k : g->n, 0.0f, g->c + i * sc,
                    g->n);
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

/* ---- The GPU baselines: the same work through cuBLAS and cuDNN directly ------------ */

#ifdef MXC_USE_CUDA
static cublasHandle_t gpu_blas;

/* The products of `g` (device buffers) on the benchmark's stream: row-major C = op(A)·op(B)
 * is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so B comes first. One product is cublasSgemm, a
 * batch one cublasSgemmStridedBatched. */
static void gemm_run_gpu(const struct gemm *g) {
    const float one = 1, zero = 0;
    cublasOperation_t opa = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                      opb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int lda = g->ta ? g->m : g->k, ldb = g->tb ? g->k : g->n;
    if (g->batch == 1) {
        cublas_ok(cublasSgemm(gpu_blas, opb, opa, g->n, g->m, g->k, &one, g->b, ldb, g->a, lda,
                              &zero, g->c, g->n),
                  "cublasSgemm");
        return;
    }
    cublas_ok(cublasSgemmStridedBatched(gpu_blas, opb, opa, g->n, g->m, g->k, &one, g->b, ldb,
                                        (long long)g->k * g->n, g->a, lda, (long long)g->m * g->k,
                                        &zero, g->c, g->n, (long long)g->m * g->n, g->batch),
              "cublasSgemmStridedBatched");
}

static struct gemm gemm_make_gpu(bool ta, bool tb, int m, int n, int k, int batch) {
    return (struct gemm){ta,
                         tb,
                         m,
                         n,
                         k,
                         batch,
                         data_on(true, (int64_t)batch * m * k, 11),
                         data_on(true, (int64_t)batch * k * n, 12),
                         data_on(true, (int64_t)batch * m * n, 0)};
}

static void gemm_free_gpu(struct gemm *g) {
    cuda_ok(cudaFree(g->a), "cudaFree");
    cuda_ok(cudaFree(g->b), "cudaFree");
    cuda_ok(cudaFree(g->c), "cudaFree");
}
#endif

#ifdef MXC_USE_CUDNN
static cudnnHandle_t gpu_dnn;

/* A convolution of one case through cuDNN: descriptors, the algorithms cuDNN's heuristics
 * rank first for the shape, one workspace for all three, and device buffers. */
struct dnn_conv {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    void *ws;
    size_t ws_size;
    float *xd, *wd, *yd, *dx, *dw, *dy;
};

/* Data (n, ch, h, wdt), f filters of k x k, padding `pad`, stride 1. */
static void dnn_conv_make(struct dnn_conv *d, int n, int ch, int h, int wdt, int f, int k,
                          int pad) {
    int yn, yc, yh, yw;
    cudnn_ok(cudnnCreateTensorDescriptor(&d->x), "cudnnCreateTensorDescriptor");
    cudnn_ok(cudnnCreateTensorDescriptor(&d->y), "cudnnCreateTensorDescriptor");
    cudnn_ok(cudnnCreateFilterDescriptor(&d->w), "cudnnCreateFilterDescriptor");
    cudnn_ok(cudnnCreateConvolutionDescriptor(&d->conv), "cudnnCreateConvolutionDescriptor");
    cudnn_ok(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, ch, h, wdt),
             "cudnnSetTensor4dDescriptor");
    cudnn_ok(cudnnSetFilter4dDescriptor(d->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, f, ch, k, k),
             "cudnnSetFilter4dDescriptor");
    cudnn_ok(cudnnSetConvolution2dDescriptor(d->conv, pad, pad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                             CUDNN_DATA_FLOAT),
             "cudnnSetConvolution2dDescriptor");
    cudnn_ok(cudnnSetConvolutionMathType(d->conv, CUDNN_DEFAULT_MATH),
             "cudnnSetConvolutionMathType");
    cudnn_ok(cudnnGetConvolution2dForwardOutputDim(d->conv, d->x, d->w, &yn, &yc, &yh, &yw),
             "cudnnGetConvolution2dForwardOutputDim");
    cudnn_ok(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, yn, yc, yh, yw),
             "cudnnSetTensor4dDescriptor");
    int got;
    cudnnConvolutionFwdAlgoPerf_t fp;
    cudnnConvolutionBwdDataAlgoPerf_t dp;
    cudnnConvolutionBwdFilterAlgoPerf_t wp;
    cudnn_ok(
        cudnnGetConvolutionForwardAlgorithm_v7(gpu_dnn, d->x, d->w, d->conv, d->y, 1, &got, &fp),
        "cudnnGetConvolutionForwardAlgorithm_v7");
    cudnn_ok(cudnnGetConvolutionBackwardDataAlgorithm_v7(gpu_dnn, d->w, d->y, d->conv, d->x, 1,
                                                         &got, &dp),
             "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    cudnn_ok(cudnnGetConvolutionBackwardFilterAlgorithm_v7(gpu_dnn, d->x, d->y, d->conv, d->w, 1,
                                                           &got, &wp),
             "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    d->fwd = fp.algo;
    d->bwd_data = dp.algo;
    d->bwd_filter = wp.algo;
    size_t a = 0, b = 0, e = 0;
    cudnn_ok(
        cudnnGetConvolutionForwardWorkspaceSize(gpu_dnn, d->x, d->w, d->conv, d->y, d->fwd, &a),
        "cudnnGetConvolutionForwardWorkspaceSize");
    cudnn_ok(cudnnGetConvolutionBackwardDataWorkspaceSize(gpu_dnn, d->w, d->y, d->conv, d->x,
                                                          d->bwd_data, &b),
             "cudnnGetConvolutionBackwardDataWorkspaceSize");
    cudnn_ok(cudnnGetConvolutionBackwardFilterWorkspaceSize(gpu_dnn, d->x, d->y, d->conv, d->w,
                                                            d->bwd_filter, &e),
             "cudnnGetConvolutionBackwardFilterWorkspaceSize");
    d->ws_size = a > b ? (a > e ? a : e) : (b > e ? b : e);
    d->ws = NULL;
    if (d->ws_size > 0)
        cuda_ok(cudaMalloc(&d->ws, d->ws_size), "cudaMalloc (cuDNN workspace)");
    int64_t nx = (int64_t)n * ch * h * wdt, nw = (int64_t)f * ch * k * k,
            ny = (int64_t)yn * yc * yh * yw;
    d->xd = data_on(true, nx, 1);
    d->wd = data_on(true, nw, 2);
    d->yd = data_on(true, ny, 0);
    d->dx = data_on(true, nx, 0);
    d->dw = data_on(true, nw, 0);
    d->dy = data_on(true, ny, 17);
}

static void dnn_conv_run(const struct dnn_conv *d, bool backward) {
    const float one = 1, zero = 0;
    if (!backward) {
        cudnn_ok(cudnnConvolutionForward(gpu_dnn, &one, d->x, d->xd, d->w, d->wd, d->conv, d->fwd,
                                         d->ws, d->ws_size, &zero, d->y, d->yd),
                 "cudnnConvolutionForward");
        return;
    }
    cudnn_ok(cudnnConvolutionBackwardData(gpu_dnn, &one, d->w, d->wd, d->y, d->dy, d->conv,
                                          d->bwd_data, d->ws, d->ws_size, &zero, d->x, d->dx),
             "cudnnConvolutionBackwardData");
    cudnn_ok(cudnnConvolutionBackwardFilter(gpu_dnn, &one, d->x, d->xd, d->y, d->dy, d->conv,
                                            d->bwd_filter, d->ws, d->ws_size, &zero, d->w, d->dw),
             "cudnnConvolutionBackwardFilter");
}

static void dnn_conv_free(struct dnn_conv *d) {
    cudnn_ok(cudnnDestroyTensorDescriptor(d->x), "cudnnDestroyTensorDescriptor");
    cudnn_ok(cudnnDestroyTensorDescriptor(d->y), "cudnnDestroyTensorDescriptor");
    cudnn_ok(cudnnDestroyFilterDescriptor(d->w), "cudnnDestroyFilterDescriptor");
    cudnn_ok(cudnnDestroyConvolutionDescriptor(d->conv), "cudnnDestroyConvolutionDescriptor");
    cuda_ok(cudaFree(d->ws), "cudaFree");
    float *bufs[] = {d->xd, d->wd, d->yd, d->dx, d->dw, d->dy};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cuda_ok(cudaFree(bufs[i]), "cudaFree");
}

/* ---- A memory-bound layer through cuDNN, on the operator's own arrays ----------------- */

/* Exits naming the case when its parameters ask for what its cuDNN call cannot match. */
_Noreturn static void dnn_refuse(const struct bcase *c, const char *why) {
    fprintf(stderr, "bench_ops: %s_%s: no cuDNN call matches: %s\n", c->op, c->name, why);
    exit(1);
}

/* The value the case's key-values give `key`, or NULL (the operator's default). */
static const char *case_param(const struct bcase *c, const char *key) {
    for (int i = 0; c->kv[2 * i]; i++)
        if (strcmp(c->kv[2 * i], key) == 0)
            return c->kv[2 * i + 1];
    return NULL;
}

/* A number the case must give (so that both sides read it from one place). */
static double case_num(const struct bcase *c, const char *key) {
    const char *v = case_param(c, key);
    if (v == NULL)
        dnn_refuse(c, key);
    return strtod(v, NULL);
}

/* A 2-D tuple "(a, b)", or (dflt, dflt) when not given; dflt < 0: it must be given. */
static void case_pair(const struct bcase *c, const char *key, int dflt, int v[2]) {
    const char *s = case_param(c, key);
    v[0] = v[1] = dflt;
    if (s == NULL ? dflt < 0 : sscanf(s, " (%d ,%d )", &v[0], &v[1]) != 2)
        dnn_refuse(c, key);
}

enum layer_kind { LAYER_POOL, LAYER_ACT, LAYER_BN, LAYER_SOFTMAX, LAYER_LRN };

struct dnn_layer {
    enum layer_kind kind;
    const struct op_run *r; /* the operator's arrays, read and written by the cuDNN call too */
    double eps, factor;     /* BatchNorm: epsilon, and 1 - momentum for the moving averages */
    cudnnTensorDescriptor_t x, y, bn; /* data, output, BatchNorm's per-channel (1, C, 1, 1) */
    cudnnPoolingDescriptor_t pool;
    cudnnActivationDescriptor_t act;
    cudnnLRNDescriptor_t lrn;
};

/* A float NCHW descriptor of `s`; fewer axes are padded with 1 at the end, so (N, C) is
 * (N, C, 1, 1). */
static cudnnTensorDescriptor_t dnn_tensor(const struct bcase *c, const mxc_shape *s) {
    int d[4] = {1, 1, 1, 1};
    if (s->ndim > 4)
        dnn_refuse(c, "more than 4 axes");
    for (int i = 0; i < s->ndim; i++)
        d[i] = (int)s->dims[i];
    cudnnTensorDescriptor_t t;
    cudnn_ok(cudnnCreateTensorDescriptor(&t), "cudnnCreateTensorDescriptor");
    cudnn_ok(
        cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d[0], d[1], d[2], d[3]),
        "cudnnSetTensor4dDescriptor");
    return t;
}

/* Pooling: max, or avg counting the padding (mxc's default, count_include_pad None), over
 * the kernel or (global_pool) the whole map; cuDNN's output must be the operator's. Max
 * pooling's gradient goes to one maximum of each window in both; with distinct inputs
 * they agree. */
static void dnn_pool_make(struct dnn_layer *l, const struct bcase *c) {
    const char *type = case_param(c, "pool_type"), *global = case_param(c, "global_pool");
    const mxc_shape *in = &l->r->in[0].shape, *out = &l->r->out[0].shape;
    bool max = type == NULL || strcmp(type, "max") == 0;
    if (!max && strcmp(type, "avg") != 0)
        dnn_refuse(c, "pool_type other than max or avg");
    if (in->ndim != 4 || case_param(c, "pooling_convention") || case_param(c, "count_include_pad"))
        dnn_refuse(c, "Pooling other than 2-D, valid convention, padding counted");
    int win[2], pad[2], stride[2];
    if (global && strcmp(global, "True") == 0) {
        win[0] = (int)in->dims[2], win[1] = (int)in->dims[3];
        pad[0] = pad[1] = 0, stride[0] = stride[1] = 1;
    } else {
        case_pair(c, "kernel", -1, win);
        case_pair(c, "pad", 0, pad);
        case_pair(c, "stride", 1, stride);
    }
    cudnn_ok(cudnnCreatePoolingDescriptor(&l->pool), "cudnnCreatePoolingDescriptor");
    cudnn_ok(cudnnSetPooling2dDescriptor(
                 l->pool, max ? CUDNN_POOLING_MAX : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                 CUDNN_NOT_PROPAGATE_NAN, win[0], win[1], pad[0], pad[1], stride[0], stride[1]),
             "cudnnSetPooling2dDescriptor");
    int d[4];
    cudnn_ok(cudnnGetPooling2dForwardOutputDim(l->pool, l->x, &d[0], &d[1], &d[2], &d[3]),
             "cudnnGetPooling2dForwardOutputDim");
    for (int i = 0; i < 4; i++)
        if (d[i] != out->dims[i])
            dnn_refuse(c, "cuDNN's pooled shape differs from the operator's");
}

/* The descriptors of case `c`'s layer over the arrays of `r` (set up, forward not yet
 * run). */
static void dnn_layer_make(struct dnn_layer *l, const struct bcase *c, const struct op_run *r) {
    *l = (struct dnn_layer){.r = r};
    l->x = dnn_tensor(c, &r->in[0].shape);
    l->y = dnn_tensor(c, &r->out[0].shape);
    if (strcmp(c->op, "Pooling") == 0) {
        l->kind = LAYER_POOL;
        dnn_pool_make(l, c);
    } else if (strcmp(c->op, "Activation") == 0) {
        static const char *const names[] = {"relu", "sigmoid", "tanh"};
        static const cudnnActivationMode_t modes[] = {
            CUDNN_ACTIVATION_RELU, CUDNN_ACTIVATION_SIGMOID, CUDNN_ACTIVATION_TANH};
        const char *type = case_param(c, "act_type");
        int m = 0;
        while (m < 3 && (type == NULL || strcmp(type, names[m]) != 0))
            m++;
        if (m == 3)
            dnn_refuse(c, "act_type other than relu, sigmoid, tanh");
        l->kind = LAYER_ACT;
        cudnn_ok(cudnnCreateActivationDescriptor(&l->act), "cudnnCreateActivationDescriptor");
        cudnn_ok(cudnnSetActivationDescriptor(l->act, modes[m], CUDNN_NOT_PROPAGATE_NAN, 0.0),
                 "cudnnSetActivationDescriptor");
    } else if (strcmp(c->op, "BatchNorm") == 0) {
        /* mxc's hidden outputs mean and var are the batch mean and inverse standard
         * deviation, what cuDNN saves for its backward: the two share them. (cuDNN moves
         * the running variance by the unbiased batch variance, MXNet by the biased one;
         * the work is the same.) */
        const char *fix = case_param(c, "fix_gamma");
        if (fix == NULL || strcmp(fix, "False") != 0 || case_param(c, "axis") ||
            case_param(c, "use_global_stats") || r->in[0].shape.ndim != 4)
            dnn_refuse(c, "BatchNorm other than 4-D, axis 1, fix_gamma False, batch statistics");
        l->kind = LAYER_BN;
        l->eps = case_num(c, "eps");
        l->factor = 1.0 - case_num(c, "momentum");
        cudnn_ok(cudnnCreateTensorDescriptor(&l->bn), "cudnnCreateTensorDescriptor");
        cudnn_ok(cudnnDeriveBNTensorDescriptor(l->bn, l->x, CUDNN_BATCHNORM_SPATIAL),
                 "cudnnDeriveBNTensorDescriptor");
    } else if (strcmp(c->op, "softmax") == 0) {
        /* the last axis of (N, C) is the channel axis of (N, C, 1, 1) */
        if (r->in[0].shape.ndim != 2 || case_param(c, "axis") || case_param(c, "temperature"))
            dnn_refuse(c, "softmax other than over the last axis of 2-D data, temperature 1");
        l->kind = LAYER_SOFTMAX;
    } else if (strcmp(c->op, "LRN") == 0) {
        /* both compute x * (knorm + alpha / nsize * sum of x² over nsize channels)^-beta */
        l->kind = LAYER_LRN;
        cudnn_ok(cudnnCreateLRNDescriptor(&l->lrn), "cudnnCreateLRNDescriptor");
        cudnn_ok(cudnnSetLRNDescriptor(l->lrn, (unsigned)case_num(c, "nsize"), case_num(c, "alpha"),
                                       case_num(c, "beta"), case_num(c, "knorm")),
                 "cudnnSetLRNDescriptor");
    } else {
        dnn_refuse(c, "no cuDNN call written for this operator");
    }
}

/* The layer's forward, or its backward (data gradient; BatchNorm's gamma and beta
 * gradients too) from the output gradient, written over the operator's arrays. */
static void dnn_layer_run(const struct dnn_layer *l, bool backward) {
    const float one = 1, zero = 0;
    const struct op_run *r = l->r;
    const void *x = r->in[0].data, *dy = r->out_grad[0].data;
    void *y = r->out[0].data, *dx = r->in_grad[0].data;
    switch (l->kind) {
    case LAYER_POOL:
        if (!backward)
            cudnn_ok(cudnnPoolingForward(gpu_dnn, l->pool, &one, l->x, x, &zero, l->y, y),
                     "cudnnPoolingForward");
        else
            cudnn_ok(cudnnPoolingBackward(gpu_dnn, l->pool, &one, l->y, y, l->y, dy, l->x, x, &zero,
                                          l->x, dx),
                     "cudnnPoolingBackward");
        break;
    case LAYER_ACT:
        if (!backward)
            cudnn_ok(cudnnActivationForward(gpu_dnn, l->act, &one, l->x, x, &zero, l->y, y),
                     "cudnnActivationForward");
        else
            cudnn_ok(cudnnActivationBackward(gpu_dnn, l->act, &one, l->y, y, l->y, dy, l->x, x,
                                             &zero, l->x, dx),
                     "cudnnActivationBackward");
        break;
    case LAYER_BN:
        /* inputs data, gamma, beta; outputs output, mean, inverse std; aux moving mean, var */
        if (!backward)
            cudnn_ok(cudnnBatchNormalizationForwardTraining(
                         gpu_dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, l->x, x, l->y, y, l->bn,
                         r->in[1].data, r->in[2].data, l->factor, r->aux[0].data, r->aux[1].data,
                         l->eps, r->out[1].data, r->out[2].data),
                     "cudnnBatchNormalizationForwardTraining");
        else
            cudnn_ok(cudnnBatchNormalizationBackward(
                         gpu_dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, l->x, x, l->y,
                         dy, l->x, dx, l->bn, r->in[1].data, r->in_grad[1].data, r->in_grad[2].data,
                         l->eps, r->out[1].data, r->out[2].data),
                     "cudnnBatchNormalizationBackward");
        break;
    case LAYER_SOFTMAX:
        if (!backward)
            cudnn_ok(cudnnSoftmaxForward(gpu_dnn, CUDNN_SOFTMAX_ACCURATE,
                                         CUDNN_SOFTMAX_MODE_CHANNEL, &one, l->x, x, &zero, l->y, y),
                     "cudnnSoftmaxForward");
        else
            cudnn_ok(cudnnSoftmaxBackward(gpu_dnn, CUDNN_SOFTMAX_ACCURATE,
                                          CUDNN_SOFTMAX_MODE_CHANNEL, &one, l->y, y, l->y, dy,
                                          &zero, l->x, dx),
                     "cudnnSoftmaxBackward");
        break;
    case LAYER_LRN:
        if (!backward)
            cudnn_ok(cudnnLRNCrossChannelForward(gpu_dnn, l->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1,
                                                 &one, l->x, x, &zero, l->y, y),
                     "cudnnLRNCrossChannelForward");
        else
            cudnn_ok(cudnnLRNCrossChannelBackward(gpu_dnn, l->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1,
                                                  &one, l->y, y, l->y, dy, l->x, x, &zero, l->x,
                                                  dx),
                     "cudnnLRNCrossChannelBackward");
        break;
    }
}

static void dnn_layer_free(struct dnn_layer *l) {
    cudnn_ok(cudnnDestroyTensorDescriptor(l->x), "cudnnDestroyTensorDescriptor");
    cudnn_ok(cudnnDestroyTensorDescriptor(l->y), "cudnnDestroyTensorDescriptor");
    if (l->bn)
        cudnn_ok(cudnnDestroyTensorDescriptor(l->bn), "cudnnDestroyTensorDescriptor");
    if (l->pool)
        cudnn_ok(cudnnDestroyPoolingDescriptor(l->pool), "cudnnDestroyPoolingDescriptor");
    if (l->act)
        cudnn_ok(cudnnDestroyActivationDescriptor(l->act), "cudnnDestroyActivationDescriptor");
    if (l->lrn)
        cudnn_ok(cudnnDestroyLRNDescriptor(l->lrn), "cudnnDestroyLRNDescriptor");
}
#endif

/* ---- Measuring ------------------------------------------------------------------------ */

/* What the operator is compared with: `ng` products (on the GPU when `gpu`), one copy, or
 * (cuDNN) a direct convolution or layer. */
struct baseline {
    struct gemm *g;
    int ng;
    struct copy *copy;
    bool gpu;
#ifdef MXC_USE_CUDNN
    struct dnn_conv *conv;
    struct dnn_layer *layer;
    bool backward;
#endif
};

/* The copy over T threads, like the operators' own loops. */
static void copy_range(void *arg, int64_t i0, int64_t i1) {
    const struct copy *c = arg;
    for (int64_t i = i0; i < i1; i++)
        c->dst[i] = c->src[i];
}

static void baseline_run(const struct options *o, const struct baseline *b) {
#ifdef MXC_USE_CUDA
    if (b->gpu) {
#ifdef MXC_USE_CUDNN
        if (b->conv)
            dnn_conv_run(b->conv, b->backward);
        if (b->layer)
            dnn_layer_run(b->layer, b->backward);
#endif
        for (int i = 0; i < b->ng; i++)
            gemm_run_gpu(&b->g[i]);
        cuda_ok(cudaStreamSynchronize(gpu_stream), "cudaStreamSynchronize");
        return;
    }
#endif
    (void)o;
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
        if (!b->gpu)
            openblas_set_num_threads(o->threads);
        uint64_t t2 = bench_now_ns();
        baseline_run(o, b);
        uint64_t t3 = bench_now_ns();
        if (!b->gpu)
            openblas_set_num_threads(1);
        if (k >= 0) {
            t[k] = (double)(t1 - t0) / 1e6;
            u[k] = (double)(t3 - t2) / 1e6;
        }
    }
    *op_ms = bench_median(t, o->runs);
    *base_ms = bench_median(u, o->runs);
}

/* One line: `work` is bytes when `bandwidth`, else flops. */
static void report(const struct options *o, const char *op, const char *dir, const char *name,
                   const char *base_name, bool bandwidth, double work, double ms, double base_ms) {
    char where[32];
    if (o->gpu)
        snprintf(where, sizeof where, "gpu(0)");
    else
        snprintf(where, sizeof where, "T=%d", o->threads);
    char kase[128];
    snprintf(kase, sizeof kase, "%s_%s_%s%s", op, dir, name, o->gpu ? "_gpu" : "");
    double rate = work / (ms * 1e6), base = work / (base_ms * 1e6); /* G per second */
    const char *unit = bandwidth ? "GB/s" : "GFLOP/s";
    if (o->json) {
        bench_json j;
        bench_json_begin(&j, "ops", kase);
        bench_json_str(&j, "system", "mxc");
        if (o->gpu)
            bench_json_str(&j, "device", "gpu(0)");
        bench_json_num(&j, "time_ms", ms);
        bench_json_num(&j, bandwidth ? "gb_per_s" : "gflops", rate);
        bench_json_str(&j, "baseline", base_name);
        bench_json_num(&j, bandwidth ? "baseline_gb_per_s" : "baseline_gflops", base);
        bench_json_num(&j, "ratio_vs_baseline", rate / base);
        bench_json_num(&j, "threads", o->threads);
        bench_json_print(&j, stdout);
    }
    fprintf(o->json ? stderr : stdout,
            "%-36s %9.3f ms %8.2f %-7s  %-5s %8.2f %-7s  ratio %.2f"
            "  %s\n",
            kase, ms, rate, unit, base_name, base, unit, rate / base, where);
}

static void run_dir(const struct options *o, const struct bcase *c, struct op_run *r,
                    bool backward) {
    const char *dir = backward ? "backward" : "forward";
    double ms, base;
    if (c->bandwidth) {
        double bytes = op_bytes(r, backward);
#ifdef MXC_USE_CUDNN
        if (o->gpu) { /* run_case lets through only the cases with a cuDNN call */
            struct dnn_layer layer;
            dnn_layer_make(&layer, c, r);
            struct baseline b = {.gpu = true, .layer = &layer, .backward = backward};
            median_ms(o, r, backward, &b, &ms, &base);
            report(o, c->op, dir, c->name, "cudnn", true, bytes, ms, base);
            dnn_layer_free(&layer);
            return;
        }
#endif
        struct copy cp = copy_make(bytes);
        struct baseline b = {.copy = &cp};
        median_ms(o, r, backward, &b, &ms, &base);
        report(o, c->op, dir, c->name, "copy", true, bytes, ms, base);
        copy_free(&cp);
        return;
    }
    /* the products: counted in every case, run as the baseline unless cuDNN's convolution is */
    struct gemm g[2];
    int ng = backward ? 2 : 1, batch = c->batch > 0 ? c->batch : 1;
    struct gemm (*make)(bool, bool, int, int, int, int) = gemm_make;
#ifdef MXC_USE_CUDA
    if (o->gpu)
        make = gemm_make_gpu;
#endif
    if (backward) {
        g[0] = make(c->b1ta, c->b1tb, c->b1m, c->b1n, c->b1k, batch);
        g[1] = make(c->b2ta, c->b2tb, c->b2m, c->b2n, c->b2k, batch);
    } else {
        g[0] = make(c->fta, c->ftb, c->fm, c->fn, c->fk, batch);
    }
    double flops = 0;
    for (int i = 0; i < ng; i++)
        flops += 2.0 * g[i].batch * g[i].m * g[i].n * g[i].k;
    struct baseline b = {.g = g, .ng = ng, .gpu = o->gpu};
    const char *base_name = o->gpu ? "cublas" : "sgemm";
#ifdef MXC_USE_CUDNN
    struct dnn_conv conv;
    if (o->gpu && c->dnn) {
        dnn_conv_make(&conv, (int)c->data[0], (int)c->data[1], (int)c->data[2], (int)c->data[3],
                      c->filters, c->kernel, c->pad);
        b = (struct baseline){.gpu = true, .conv = &conv, .backward = backward};
        base_name = "cudnn";
    }
#endif
    median_ms(o, r, backward, &b, &ms, &base);
    report(o, c->op, dir, c->name, base_name, false, flops, ms, base);
#ifdef MXC_USE_CUDNN
    if (b.conv)
        dnn_conv_free(&conv);
#endif
    for (int i = 0; i < ng; i++) {
#ifdef MXC_USE_CUDA
        if (o->gpu) {
            gemm_free_gpu(&g[i]);
            continue;
        }
#endif
        gemm_free(&g[i]);
    }
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
    const struct mxc__op_def *def = mxc__op_find(c->op);
    if (o->gpu && c->bandwidth && !(c->dnn && have_cudnn)) { /* the copy loop is CPU-only */
        if (c->dnn)
            fprintf(stderr, "bench_ops: %s is compared with cuDNN, not in this build; skipping\n",
                    full);
        return;
    }
    if (o->gpu && def->forward_gpu == NULL) {
        fprintf(stderr, "bench_ops: %s has no GPU kernel; skipping %s\n", c->op, c->name);
        return;
    }
    struct op_run r;
    op_setup(&r, o->gpu, c->op, c->kv, mxc_shape_make(c->ndim, c->data),
             mxc_shape_make(c->rhs_ndim, c->rhs));
    run_dir(o, c, &r, false);
    if (o->gpu ? r.def->backward_gpu != NULL : r.def->backward_cpu != NULL)
        run_dir(o, c, &r, true);
    op_free(&r);
}

/* FC (M, K) -> (M, H): forward X·Wᵀ; backward dY·W (M, K, H) and dYᵀ·X (H, K, M). */
#define FC(nm, m, k, h)                                                                            \
    {                                                                                              \
        .op = "FullyConnected", .name = nm, .kv = {"num_hidden", #h, NULL}, .data = {m, k},        \
        .ndim = 2, .fm = m, .fn = h, .fk = k, .ftb = true, .b1m = m, .b1n = k, .b1k = h, .b2m = h, \
        .b2n = k, .b2k = m, .b2ta = true                                                           \
    }

/* Conv N x C x H x W, F filters, KxK, pad P -> OH x OW; with R = C*K*K and Q = N*OH*OW:
 * forward W (F, R) · cols (R, Q); backward Wᵀ · dY (R, Q, F) and dY · colsᵀ (F, R, Q). */
#define CONV(nm, n, c, h, f, k, p, oh)                                                             \
    {                                                                                              \
        .op = "Convolution", .name = nm,                                                           \
        .kv = {"kernel", "(" #k ", " #k ")", "pad", "(" #p ", " #p ")", "num_filter", #f, NULL},   \
        .data = {n, c, h, h}, .ndim = 4, .fm = f, .fn = (n) * (oh) * (oh), .fk = (c) * (k) * (k),  \
        .b1m = (c) * (k) * (k), .b1n = (n) * (oh) * (oh), .b1k = f, .b1ta = true, .b2m = f,        \
        .b2n = (c) * (k) * (k), .b2k = (n) * (oh) * (oh), .b2tb = true, .dnn = true, .filters = f, \
        .kernel = k, .pad = p                                                                      \
    }

/* dot (M, K) · (K, N), batch_dot B x the same: forward A · B; backward dC · Bᵀ (M, K, N)
 * and Aᵀ · dC (K, N, M). */
#define MATMUL_PRODUCTS(bt, m, k, n)                                                           \
    .fm = m, .fn = n, .fk = k, .b1m = m, .b1n = k, .b1k = n, .b1tb = true, .b2m = k, .b2n = n, \
    .b2k = m, .b2ta = true, .batch = bt
#define DOT(nm, m, k, n)                                                                 \
    {                                                                                    \
        .op = "dot", .name = nm, .kv = {NULL}, .data = {m, k}, .ndim = 2, .rhs = {k, n}, \
        .rhs_ndim = 2, MATMUL_PRODUCTS(1, m, k, n)                                       \
    }
#define BATCH_DOT(nm, bt, m, k, n)                                                  \
    {                                                                               \
        .op = "batch_dot", .name = nm, .kv = {NULL}, .data = {bt, m, k}, .ndim = 3, \
        .rhs = {bt, k, n}, .rhs_ndim = 3, MATMUL_PRODUCTS(bt, m, k, n)              \
    }

/* A memory-bound layer on data (N, C, H, W): against the copy loop on a CPU, on a GPU
 * against its cuDNN call. */
#define LAYER(o, nm, n, c, h, w, ...)                                                    \
    {                                                                                    \
        .op = o, .name = nm, .kv = {__VA_ARGS__, NULL}, .data = {n, c, h, w}, .ndim = 4, \
        .bandwidth = true, .dnn = true                                                   \
    }
#define MAXPOOL2(nm, n, c, h) \
    LAYER("Pooling", nm, n, c, h, h, "kernel", "(2, 2)", "stride", "(2, 2)", "pool_type", "max")
/* BatchNorm in training with MXNet's eps and momentum, given so cuDNN reads the same */
#define BN(nm, n, c, h) \
    LAYER("BatchNorm", nm, n, c, h, h, "fix_gamma", "False", "eps", "0.001", "momentum", "0.9")

#ifdef MXC_USE_CUDA
/* --ctx gpu: after the cases below (those only against the copy loop skipped), larger
 * batches, large products and the layers of ResNet, AlexNet and a classifier. */
static const struct bcase gpu_cases[] = {
    FC("mlp1_b1024", 1024, 784, 128),
    FC("fc_1024", 1024, 1024, 1024),
    FC("fc_4096", 4096, 4096, 4096),
    FC("fc_b256_4096_1000", 256, 4096, 1000),
    CONV("lenet_conv1_b1024", 1024, 1, 28, 20, 5, 0, 24),
    CONV("lenet_conv2_b1024", 1024, 20, 12, 50, 5, 0, 8),
    CONV("resnet_3x3_b64", 64, 64, 56, 64, 3, 1, 56),
    CONV("resnet_3x3_256", 32, 256, 14, 256, 3, 1, 14),
    DOT("square_4096", 4096, 4096, 4096),
    BATCH_DOT("attention_64x128x64", 64, 128, 64, 128),
    MAXPOOL2("lenet_pool1_b1024", 1024, 20, 24),
    MAXPOOL2("resnet_pool_b32", 32, 64, 112),
    LAYER("Pooling", "resnet_global_avg_b256", 256, 512, 7, 7, "global_pool", "True", "pool_type",
          "avg"),
    LAYER("Activation", "resnet_relu_b64", 64, 64, 56, 56, "act_type", "relu"),
    BN("resnet_bn_b64", 64, 64, 56),
    BN("resnet_bn_256", 32, 256, 14),
    {.op = "softmax",
     .name = "b256_1000",
     .kv = {NULL},
     .data = {256, 1000},
     .ndim = 2,
     .bandwidth = true,
     .dnn = true},
    LAYER("LRN", "alexnet_lrn1_b128", 128, 96, 55, 55, "nsize", "5", "alpha", "0.0001", "beta",
          "0.75", "knorm", "2"),
};
#endif

static const struct bcase cases[] = {
    FC("mlp1", 100, 784, 128),
    FC("mlp2", 100, 128, 64),
    FC("mlp3", 100, 64, 10),
    CONV("lenet_conv1", 100, 1, 28, 20, 5, 0, 24),
    CONV("lenet_conv2", 100, 20, 12, 50, 5, 0, 8),
    CONV("resnet_3x3", 8, 64, 56, 64, 3, 1, 56),
    CONV("resnet_3x3_512", 100, 512, 4, 512, 3, 1, 4),
    MAXPOOL2("lenet_pool1", 100, 20, 24),
    MAXPOOL2("lenet_pool2", 100, 50, 8),
    LAYER("Activation", "lenet_relu1", 100, 20, 24, 24, "act_type", "relu"),
    LAYER("Activation", "lenet_tanh1", 100, 20, 24, 24, "act_type", "tanh"),
    BN("lenet_bn1", 100, 20, 24),
    {.op = "SoftmaxOutput",
     .name = "mlp_out",
     .kv = {NULL},
     .data = {100, 10},
     .ndim = 2,
     .bandwidth = true},
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

#ifdef MXC_USE_CUDA
/* An empty kernel, as PTX loaded at run time (the benchmarks are C, built without nvcc);
 * sm_80 PTX is compiled by the driver for the GPU at hand. */
static const char empty_ptx[] = ".version 7.0\n"
                                ".target sm_80\n"
                                ".address_size 64\n"
                                ".visible .entry mxc_bench_empty()\n"
                                "{\n"
                                "\tret;\n"
                                "}\n";
static const void *empty_kernel; /* a cudaKernel_t: cudaLaunchKernel takes one as its func */

static cudaLibrary_t empty_kernel_load(void) {
    cudaLibrary_t lib;
    cudaKernel_t k;
    cuda_ok(cudaLibraryLoadData(&lib, empty_ptx, NULL, NULL, 0, NULL, NULL, 0),
            "cudaLibraryLoadData (the empty kernel's PTX)");
    cuda_ok(cudaLibraryGetKernel(&k, lib, "mxc_bench_empty"), "cudaLibraryGetKernel");
    empty_kernel = (const void *)k;
    return lib;
}

/* One block of one thread of the empty kernel on `stream`. */
static void empty_launch(cudaStream_t stream) {
    dim3 one = {1, 1, 1};
    void *no_args[1] = {NULL}; /* the kernel takes no parameters */
    cuda_ok(cudaLaunchKernel(empty_kernel, one, one, no_args, 0, stream), "cudaLaunchKernel");
}

static int empty_op(const mxc_run_ctx *rctx, void *arg) {
    (void)arg;
    empty_launch((cudaStream_t)rctx->stream);
    return MXC_OK;
}

/* Engine operations on gpu(0) that each launch the empty kernel, one after the other (each
 * writes the same variable; the worker synchronises its stream after each, as after every
 * GPU operation), per second, against a bare loop of the same launch and
 * cudaStreamSynchronize on one stream. */
static void engine_overhead(const struct options *o) {
    const int n = o->quick ? 2000 : 20000;
    mxc_engine *eng = NULL;
    mxc_var *v = NULL;
    cudaLibrary_t lib = empty_kernel_load();
    if (mxc_engine_get_default(&eng) != MXC_OK || mxc_engine_new_var(eng, &v) != MXC_OK)
        die("engine");
    mxc_engine_op_desc d = {.fn = empty_op,
                            .ctx = mxc_gpu(0),
                            .mutable_vars = &v,
                            .num_mutable_vars = 1,
                            .name = "empty_gpu_op"};
    for (int i = 0; i < 100; i++) /* warm-up: the GPU workers and their streams start */
        if (mxc_engine_push(eng, &d) != MXC_OK)
            die("mxc_engine_push");
    if (mxc_engine_wait_all(eng) != MXC_OK)
        die("mxc_engine_wait_all");
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < n; i++)
        if (mxc_engine_push(eng, &d) != MXC_OK)
            die("mxc_engine_push");
    if (mxc_engine_wait_all(eng) != MXC_OK)
        die("mxc_engine_wait_all");
    uint64_t t1 = bench_now_ns();
    for (int i = 0; i < 100; i++) /* warm-up, as the engine had */
        empty_launch(gpu_stream);
    cuda_ok(cudaStreamSynchronize(gpu_stream), "cudaStreamSynchronize");
    uint64_t t2 = bench_now_ns();
    for (int i = 0; i < n; i++) {
        empty_launch(gpu_stream);
        cuda_ok(cudaStreamSynchronize(gpu_stream), "cudaStreamSynchronize");
    }
    uint64_t t3 = bench_now_ns();
    if (mxc_engine_delete_var(eng, v, NULL, NULL) != MXC_OK)
        die("mxc_engine_delete_var");
    cuda_ok(cudaLibraryUnload(lib), "cudaLibraryUnload");
    double ops = n / ((double)(t1 - t0) / 1e9), bare = n / ((double)(t3 - t2) / 1e9);
    if (o->json) {
        bench_json j;
        bench_json_begin(&j, "ops", "engine_empty_op_gpu");
        bench_json_str(&j, "system", "mxc");
        bench_json_str(&j, "device", "gpu(0)");
        bench_json_num(&j, "ops_per_s", ops);
        bench_json_str(&j, "baseline", "launch_sync");
        bench_json_num(&j, "baseline_ops_per_s", bare);
        bench_json_num(&j, "ratio_vs_baseline", ops / bare);
        bench_json_print(&j, stdout);
    }
    fprintf(o->json ? stderr : stdout,
            "%-36s %9.0f op/s (%.2f us)  launch+sync %9.0f op/s (%.2f us)  ratio %.2f\n",
            "engine_empty_op_gpu", ops, 1e6 / ops, bare, 1e6 / bare, ops / bare);
}

/* gpu(0), the benchmark's stream and library handles bound to it. */
static void gpu_init(void) {
    int n = mxc_gpu_count();
    if (n < 1) {
        fprintf(stderr, "bench_ops: --ctx gpu: no GPU found\n");
        exit(1);
    }
    cuda_ok(cudaSetDevice(0), "cudaSetDevice");
    cuda_ok(cudaStreamCreateWithFlags(&gpu_stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cublas_ok(cublasCreate(&gpu_blas), "cublasCreate");
    cublas_ok(cublasSetStream(gpu_blas, gpu_stream), "cublasSetStream");
#ifdef MXC_USE_CUDNN
    cudnn_ok(cudnnCreate(&gpu_dnn), "cudnnCreate");
    cudnn_ok(cudnnSetStream(gpu_dnn, gpu_stream), "cudnnSetStream");
#endif
    mxc_gpu_info_t info;
    if (mxc_gpu_info(0, &info) == MXC_OK)
        fprintf(stderr, "bench_ops: gpu(0) is %s (compute capability %d.%d)\n", info.name,
                info.major, info.minor);
}
#endif

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
        } else if (strcmp(argv[i], "--ctx") == 0 && i + 1 < argc &&
                   (strcmp(argv[i + 1], "cpu") == 0 || strcmp(argv[i + 1], "gpu") == 0)) {
            o.gpu = strcmp(argv[++i], "gpu") == 0;
        } else {
            fprintf(stderr,
                    "usage: %s [--quick] [--runs K] [--case SUBSTRING] [--json] "
                    "[--ctx cpu|gpu]\n",
                    argv[0]);
            return 2;
        }
    }
#ifndef MXC_USE_CUDA
    if (o.gpu) {
        fprintf(stderr,
                "bench_ops: --ctx gpu needs a CUDA build (make USE_CUDA=1 [USE_CUDNN=1])\n");
        return 1;
    }
#endif
    if (o.quick && !runs_given)
        o.runs = 5;
    if (o.runs < 1 || o.runs > MAX_RUNS) {
        fprintf(stderr, "bench_ops: --runs must be in [1, %d]\n", MAX_RUNS);
        return 2;
    }
    mxc__blas_init(); /* OpenBLAS at one thread, as under an engine */
    o.threads = mxc__op_threads();
#ifdef MXC_USE_CUDA
    if (o.gpu) {
        gpu_init();
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(&o, &cases[i]);
        for (size_t i = 0; i < sizeof gpu_cases / sizeof gpu_cases[0]; i++)
            run_case(&o, &gpu_cases[i]);
        if (o.filter == NULL || strstr("engine_empty_op_gpu", o.filter))
            engine_overhead(&o);
        return 0;
    }
#endif
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&o, &cases[i]);
    return 0;
}

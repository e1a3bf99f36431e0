/*
 * bench/gpu_baseline.c — the hand-written cuBLAS / cuDNN training step bench_train --ctx
 * gpu compares mxc's GPU training with (bench/gpu_baseline.h).
 *
 * A network is one list of layers (struct spec): the MLP and LeNet as tables, ResNet-18
 * appended by a loop over its stages; one generic forward and backward walk the list.
 * Every layer writes a tensor of its own (tensor 0 is the data, tensor i + 1 the output
 * of layer i), NCHW float32, with a gradient buffer beside it; the parameters, their
 * gradients and the momenta are each one flat buffer, so the SGD update is a handful of
 * cuBLAS vector calls over all of them. Everything runs on one stream:
 *
 *   FullyConnected  y = x Wᵀ (+ b): cublasSgemm, the bias with cublasSger (b 1ᵀ);
 *                   dW = dyᵀ x, dx = dy W: cublasSgemm; db = dyᵀ 1: cublasSgemv
 *   Convolution     cudnnConvolutionForward / BackwardData / BackwardFilter with the
 *                   first algorithm of cuDNN's heuristic (cudnnGet*_v7) that uses float32
 *                   FMA math and fits mxc's default 1024 MB workspace, as mxc picks with
 *                   cudnn_tune off; bias: cudnnAddTensor / cudnnConvolutionBackwardBias
 *   BatchNorm       cudnnBatchNormalizationForwardTraining / Backward (spatial), eps and
 *                   momentum mxc's defaults (0.001, 0.9)
 *   Activation      cudnnActivationForward / Backward (relu, tanh)
 *   Pooling         cudnnPoolingForward / Backward (max 2x2 stride 2; global average)
 *   residual add    cublasSgeam (y = a + b); its gradient a copy or cublasSaxpy per input
 *   softmax + loss  cudnnSoftmaxForward; dx = (p - onehot) / N: cublasSgeam
 *   SGD             mom = momentum mom - lr (g + wd w); w += mom: cublasSscal, cublasSaxpy
 *
 * Backward visits the layers in reverse; a layer writes an input's gradient when it is
 * the first to reach that tensor and adds to it (beta 1) otherwise, so nothing is zeroed.
 * The data has no gradient (the first layer skips it). Flatten is no layer: FC reads any
 * (N, C, H, W) as (N, C*H*W).
 */
#include "gpu_baseline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(MXC_USE_CUDA) && defined(MXC_USE_CUDNN)

#include "bench_gpu.h"

#define MAX_LAYERS 96 /* ResNet-18 has 68 */
#define NAME_SIZE  64

/* mxc's defaults for the layers as its networks build them: BatchNorm's eps and
 * momentum (operator/batch_norm.c) and Convolution's workspace in MB (convolution.c). */
#define BN_EPS            1e-3
#define BN_MOMENTUM       0.9
#define CONV_WORKSPACE_MB 1024

#define CUDA(call)  cuda_ok((call), #call)
#define BLAS(call)  cublas_ok((call), #call)
#define CUDNN(call) cudnn_ok((call), #call)

static void fail(const char *what) {
    fprintf(stderr, "gpu_baseline: %s\n", what);
    exit(1);
}

/* ---- The networks as data ------------------------------------------------------------ */

enum kind { FC, CONV, BN, RELU, TANH, MAX_POOL, GLOBAL_AVG_POOL, ADD, SOFTMAX };

struct spec {
    enum kind kind;
    const char *name;        /* mxc's layer name: parameters NAME_weight, NAME_bias, ... */
    int size;                /* FC: units; CONV: filters */
    int kernel, stride, pad; /* CONV, MAX_POOL: square */
    bool bias;               /* FC, CONV */
    int back, back2;         /* inputs: the output this many layers before the previous
                              * layer's (0: the previous layer's, the data for layer 0);
                              * back2 is ADD's second input */
};

static const struct spec mlp[] = {
    {.kind = FC, .name = "fc1", .size = 128, .bias = true}, {.kind = RELU},
    {.kind = FC, .name = "fc2", .size = 64, .bias = true},  {.kind = RELU},
    {.kind = FC, .name = "fc3", .size = 10, .bias = true},  {.kind = SOFTMAX},
};

static const struct spec lenet[] = {
    {.kind = CONV, .name = "conv1", .size = 20, .kernel = 5, .stride = 1, .bias = true},
    {.kind = TANH},
    {.kind = MAX_POOL, .kernel = 2, .stride = 2},
    {.kind = CONV, .name = "conv2", .size = 50, .kernel = 5, .stride = 1, .bias = true},
    {.kind = TANH},
    {.kind = MAX_POOL, .kernel = 2, .stride = 2},
    {.kind = FC, .name = "fc1", .size = 500, .bias = true},
    {.kind = TANH},
    {.kind = FC, .name = "fc2", .size = 10, .bias = true},
    {.kind = SOFTMAX},
};

/* A layer list and the names it owns. */
struct list {
    struct spec s[MAX_LAYERS];
    char names[MAX_LAYERS][NAME_SIZE];
    int n;
};

/* Appends `s` reading tensors `in` (and `in2` for ADD), named `name` (copied, NULL for
 * none); returns the number of its output tensor. */
static int append(struct list *l, struct spec s, const char *name, int in, int in2) {
    if (l->n == MAX_LAYERS)
        fail("too many layers (MAX_LAYERS)");
    snprintf(l->names[l->n], NAME_SIZE, "%s", name ? name : "");
    s.name = name ? l->names[l->n] : NULL;
    s.back = l->n - in;
    s.back2 = s.kind == ADD ? l->n - in2 : 0;
    l->s[l->n] = s;
    return ++l->n;
}

/* mxc's conv_bn (model/networks.c): NAME_conv (no bias, padding kernel / 2), NAME_bn. */
static int conv_bn(struct list *l, const char *name, int in, int filters, int kernel, int stride) {
    char part[NAME_SIZE];
    snprintf(part, sizeof part, "%s_conv", name);
    const struct spec conv = {
        .kind = CONV, .size = filters, .kernel = kernel, .stride = stride, .pad = kernel / 2};
    int t = append(l, conv, part, in, 0);
    snprintf(part, sizeof part, "%s_bn", name);
    return append(l, (struct spec){.kind = BN}, part, t, 0);
}

/* mxc_net_resnet(2, 10): stem conv-bn-relu, four stages of two basic blocks
 * (relu(bn(conv(relu(bn(conv(x))))) + shortcut(x)), a 1x1 conv-bn projection where a
 * stage starts with stride 2), global average pooling, fc, softmax. */
static void resnet18(struct list *l) {
    static const int channels[4] = {64, 128, 256, 512};
    const struct spec relu = {.kind = RELU};
    int x = append(l, relu, NULL, conv_bn(l, "stem", 0, 64, 3, 1), 0);
    for (int s = 0; s < 4; s++)
        for (int u = 0; u < 2; u++) {
            char name[40], part[48]; /* "stage4_unit2_sc", with room for any int */
            snprintf(name, sizeof name, "stage%d_unit%d", s + 1, u + 1);
            int stride = s > 0 && u == 0 ? 2 : 1, shortcut = x;
            if (stride == 2) {
                snprintf(part, sizeof part, "%s_sc", name);
                shortcut = conv_bn(l, part, x, channels[s], 1, stride);
            }
            snprintf(part, sizeof part, "%s_1", name);
            int y = append(l, relu, NULL, conv_bn(l, part, x, channels[s], 3, stride), 0);
            snprintf(part, sizeof part, "%s_2", name);
            y = conv_bn(l, part, y, channels[s], 3, 1);
            y = append(l, (struct spec){.kind = ADD}, NULL, y, shortcut);
            x = append(l, relu, NULL, y, 0);
        }
    x = append(l, (struct spec){.kind = GLOBAL_AVG_POOL}, NULL, x, 0);
    x = append(l, (struct spec){.kind = FC, .size = 10, .bias = true}, "fc", x, 0);
    append(l, (struct spec){.kind = SOFTMAX}, NULL, x, 0);
}

/* ---- The network on the GPU ---------------------------------------------------------- */

struct tensor {
    int n, c, h, w;
    int64_t count;
    float *x, *dx; /* dx NULL: no gradient (the data, the softmax output) */
    cudnnTensorDescriptor_t desc;
};

struct layer {
    struct spec s;
    int in, in2, out; /* tensor numbers */
    bool acc, acc2;   /* backward adds to the input's gradient (another layer wrote it) */
    float *w, *b;     /* in the flat parameters (BatchNorm: gamma, beta) */
    float *dw, *db;   /* in the flat gradients */
    int64_t nw, nb;   /* their sizes */
    cudnnTensorDescriptor_t pdesc; /* CONV's bias, BN's per-channel tensors: (1, C, 1, 1) */
    cudnnFilterDescriptor_t filter;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnPoolingDescriptor_t pool;
    cudnnActivationDescriptor_t act;
    float *stats; /* BN: moving mean, moving var, saved mean, saved inverse std (4 x C) */
};

struct gpu_baseline {
    cudaStream_t stream;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    int batch, classes;
    float lr, momentum, wd;
    struct list list;
    int num_layers;
    struct layer layers[MAX_LAYERS];
    struct tensor tensors[MAX_LAYERS + 1];
    int64_t num_params;
    float *params, *grads, *mom; /* num_params each */
    float *ones;                 /* batch ones: FC's bias and its gradient */
    float *onehot;               /* (batch, classes) */
    void *ws;                    /* the convolutions' workspace, ws_size bytes */
    size_t ws_size;
};

static float *device_floats(int64_t n) {
    void *p = NULL;
    CUDA(cudaMalloc(&p, (size_t)n * sizeof(float)));
    return p;
}

static void upload(float *dst, const float *src, int64_t n) {
    CUDA(cudaMemcpy(dst, src, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
}

static void describe(struct tensor *t, int n, int c, int h, int w) {
    *t = (struct tensor){.n = n, .c = c, .h = h, .w = w, .count = (int64_t)n * c * h * w};
    CUDNN(cudnnCreateTensorDescriptor(&t->desc));
    CUDNN(cudnnSetTensor4dDescriptor(t->desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
}

/* The first of cuDNN's ranked results `perf` (`got` of them) that succeeded, uses no
 * tensor-core math (mxc sets CUDNN_FMA_MATH and skips those too) and fits the workspace
 * limit; its algorithm goes to `out`. */
#define FIRST_ALGO(perf, got, out, what)                                                      \
    do {                                                                                      \
        int i_ = 0;                                                                           \
        while (i_ < (got) && ((perf)[i_].status != CUDNN_STATUS_SUCCESS ||                    \
                              (perf)[i_].mathType == CUDNN_TENSOR_OP_MATH ||                  \
                              (perf)[i_].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || \
                              (perf)[i_].memory > ((size_t)CONV_WORKSPACE_MB << 20)))         \
            i_++;                                                                             \
        if (i_ == (got))                                                                      \
            fail("cuDNN's heuristic offers no usable algorithm for " what);                   \
        (out) = (perf)[i_].algo;                                                              \
    } while (0)

/* A convolution's descriptors, output shape and algorithms; grows the workspace. */
static void plan_conv(gpu_baseline *b, struct layer *L, const struct tensor *x) {
    const struct spec *s = &L->s;
    CUDNN(cudnnCreateFilterDescriptor(&L->filter));
    CUDNN(cudnnSetFilter4dDescriptor(L->filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->size, x->c,
                                     s->kernel, s->kernel));
    CUDNN(cudnnCreateConvolutionDescriptor(&L->conv));
    CUDNN(cudnnSetConvolution2dDescriptor(L->conv, s->pad, s->pad, s->stride, s->stride, 1, 1,
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN(cudnnSetConvolutionMathType(L->conv, CUDNN_FMA_MATH));
    int n, c, h, w;
    CUDNN(cudnnGetConvolution2dForwardOutputDim(L->conv, x->desc, L->filter, &n, &c, &h, &w));
    struct tensor *y = &b->tensors[L->out];
    describe(y, n, c, h, w);
    L->nw = (int64_t)s->size * x->c * s->kernel * s->kernel;
    L->nb = s->bias ? s->size : 0;
    if (s->bias) {
        CUDNN(cudnnCreateTensorDescriptor(&L->pdesc));
        CUDNN(cudnnSetTensor4dDescriptor(L->pdesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s->size,
                                         1, 1));
    }
    int got = 0;
    size_t need = 0;
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(b->dnn, x->desc, L->filter, L->conv, y->desc,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fp));
    FIRST_ALGO(fp, got, L->fwd, "the convolution forward");
    CUDNN(cudnnGetConvolutionForwardWorkspaceSize(b->dnn, x->desc, L->filter, L->conv, y->desc,
                                                  L->fwd, &need));
    b->ws_size = need > b->ws_size ? need : b->ws_size;
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        b->dnn, x->desc, y->desc, L->conv, L->filter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
        wp));
    FIRST_ALGO(wp, got, L->bwd_filter, "the convolution backward filter");
    CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(b->dnn, x->desc, y->desc, L->conv,
                                                         L->filter, L->bwd_filter, &need));
    b->ws_size = need > b->ws_size ? need : b->ws_size;
    if (L->in == 0)
        return; /* the data: no backward data */
    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(b->dnn, L->filter, y->desc, L->conv, x->desc,
                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
                                                      dp));
    FIRST_ALGO(dp, got, L->bwd_data, "the convolution backward data");
    CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(b->dnn, L->filter, y->desc, L->conv, x->desc,
                                                       L->bwd_data, &need));
    b->ws_size = need > b->ws_size ? need : b->ws_size;
}

/* BatchNorm's moving mean 0 and variance 1 (of `c` channels), as mxc initialises them. */
static void init_stats(float *stats, int c) {
    float *host = malloc(2 * (size_t)c * sizeof(float));
    if (host == NULL)
        fail("out of host memory");
    for (int k = 0; k < 2 * c; k++)
        host[k] = k < c ? 0.0f : 1.0f;
    upload(stats, host, 2 * (int64_t)c);
    free(host);
}

/* Layer L's descriptors and output shape, from its input `x`. */
static void plan_layer(gpu_baseline *b, struct layer *L) {
    const struct tensor *x = &b->tensors[L->in];
    struct tensor *y = &b->tensors[L->out];
    const struct spec *s = &L->s;
    int n, c, h, w;
    switch (s->kind) {
    case FC:
        describe(y, x->n, s->size, 1, 1);
        L->nw = (int64_t)s->size * (x->count / x->n);
        L->nb = s->bias ? s->size : 0;
        break;
    case CONV: plan_conv(b, L, x); break;
    case BN:
        describe(y, x->n, x->c, x->h, x->w);
        L->nw = L->nb = x->c;
        CUDNN(cudnnCreateTensorDescriptor(&L->pdesc));
        CUDNN(cudnnDeriveBNTensorDescriptor(L->pdesc, x->desc, CUDNN_BATCHNORM_SPATIAL));
        L->stats = device_floats(4 * (int64_t)x->c);
        init_stats(L->stats, x->c);
        break;
    case RELU:
    case TANH:
        describe(y, x->n, x->c, x->h, x->w);
        CUDNN(cudnnCreateActivationDescriptor(&L->act));
        CUDNN(cudnnSetActivationDescriptor(
            L->act, s->kind == RELU ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_TANH,
            CUDNN_NOT_PROPAGATE_NAN, 0.0));
        break;
    case MAX_POOL:
    case GLOBAL_AVG_POOL:
        CUDNN(cudnnCreatePoolingDescriptor(&L->pool));
        if (s->kind == MAX_POOL)
            CUDNN(cudnnSetPooling2dDescriptor(L->pool, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN,
                                              s->kernel, s->kernel, 0, 0, s->stride, s->stride));
        else /* one window over the whole map */
            CUDNN(cudnnSetPooling2dDescriptor(L->pool, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                              CUDNN_NOT_PROPAGATE_NAN, x->h, x->w, 0, 0, x->h,
                                              x->w));
        CUDNN(cudnnGetPooling2dForwardOutputDim(L->pool, x->desc, &n, &c, &h, &w));
        describe(y, n, c, h, w);
        break;
    case ADD: {
        const struct tensor *x2 = &b->tensors[L->in2];
        if (x2->n != x->n || x2->c != x->c || x2->h != x->h || x2->w != x->w)
            fail("a residual add of tensors of different shapes");
        describe(y, x->n, x->c, x->h, x->w);
        break;
    }
    case SOFTMAX:
        if (x->h != 1 || x->w != 1)
            fail("softmax over a map (it takes (N, classes))");
        describe(y, x->n, x->c, 1, 1);
        b->classes = x->c;
        break;
    }
}

/* Which layer writes and which adds to each input's gradient (the first one backward
 * reaches writes), and which tensors need one at all; fails on a list the generic walk
 * cannot run. */
static void plan_gradients(gpu_baseline *b) {
    bool written[MAX_LAYERS + 1] = {false};
    const int nl = b->num_layers;
    if (b->layers[nl - 1].s.kind != SOFTMAX)
        fail("the last layer must be the softmax");
    for (int i = nl - 1; i >= 0; i--) {
        struct layer *L = &b->layers[i];
        if (L->s.kind == SOFTMAX && i != nl - 1)
            fail("a softmax before the last layer");
        if (L->in == 0 && L->s.kind != FC && L->s.kind != CONV)
            fail("only FullyConnected and Convolution may read the data (it has no gradient)");
        if (L->in > 0) {
            L->acc = written[L->in];
            written[L->in] = true;
        }
        if (L->s.kind == ADD) {
            L->acc2 = written[L->in2];
            written[L->in2] = true;
        }
        if (L->s.kind == SOFTMAX && L->acc)
            fail("the softmax's input is read by another layer too");
    }
    for (int t = 1; t < nl; t++) {
        if (!written[t])
            fail("a layer's output is read by no layer");
        b->tensors[t].dx = device_floats(b->tensors[t].count);
    }
}

/* Lays the parameters out in the flat buffers and sets them through cfg->init; false
 * (with `why`) when cfg->init refuses one. */
static bool plan_params(gpu_baseline *b, const gpu_baseline_config *cfg, int *num_params, char *why,
                        size_t why_size) {
    b->num_params = 0;
    for (int i = 0; i < b->num_layers; i++)
        b->num_params += b->layers[i].nw + b->layers[i].nb;
    b->params = device_floats(b->num_params);
    b->grads = device_floats(b->num_params);
    b->mom = device_floats(b->num_params);
    CUDA(cudaMemset(b->mom, 0, (size_t)b->num_params * sizeof(float)));
    float *host = malloc((size_t)b->num_params * sizeof(float));
    if (host == NULL)
        fail("out of host memory for the parameters");
    int64_t at = 0;
    bool ok = true;
    for (int i = 0; i < b->num_layers && ok; i++) {
        struct layer *L = &b->layers[i];
        const bool bn = L->s.kind == BN;
        const char *suffix[2] = {bn ? "gamma" : "weight", bn ? "beta" : "bias"};
        const int64_t size[2] = {L->nw, L->nb};
        for (int k = 0; k < 2 && ok; k++) {
            if (size[k] == 0)
                continue;
            char name[NAME_SIZE + 8];
            snprintf(name, sizeof name, "%s_%s", L->s.name, suffix[k]);
            ok = cfg->init(cfg->user, name, size[k], host + at);
            if (!ok)
                snprintf(why, why_size, "mxc's network has no parameter %s of %lld values", name,
                         (long long)size[k]);
            *(k ? &L->b : &L->w) = b->params + at;
            *(k ? &L->db : &L->dw) = b->grads + at;
            at += size[k];
            ++*num_params;
        }
    }
    if (ok)
        upload(b->params, host, b->num_params);
    free(host);
    return ok;
}

/* ---- One step ------------------------------------------------------------------------ */

static const float one = 1.0f, zero = 0.0f;

static void forward(gpu_baseline *b) {
    for (int i = 0; i < b->num_layers; i++) {
        struct layer *L = &b->layers[i];
        const struct tensor *x = &b->tensors[L->in];
        struct tensor *y = &b->tensors[L->out];
        switch (L->s.kind) {
        case FC: { /* column-major: yᵀ (units, N) = W (units, in) · xᵀ (in, N) */
            const int units = L->s.size, in = (int)(x->count / x->n);
            BLAS(cublasSgemm(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, units, x->n, in, &one, L->w, in,
                             x->x, in, &zero, y->x, units));
            if (L->s.bias) /* yᵀ += b 1ᵀ */
                BLAS(cublasSger(b->blas, units, x->n, &one, L->b, 1, b->ones, 1, y->x, units));
            break;
        }
        case CONV:
            CUDNN(cudnnConvolutionForward(b->dnn, &one, x->desc, x->x, L->filter, L->w, L->conv,
                                          L->fwd, b->ws, b->ws_size, &zero, y->desc, y->x));
            if (L->s.bias)
                CUDNN(cudnnAddTensor(b->dnn, &one, L->pdesc, L->b, &one, y->desc, y->x));
            break;
        case BN: { /* moving = moving * momentum + batch * (1 - momentum) */
            const int64_t c = x->c;
            CUDNN(cudnnBatchNormalizationForwardTraining(
                b->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x->desc, x->x, y->desc, y->x,
                L->pdesc, L->w, L->b, 1.0 - BN_MOMENTUM, L->stats, L->stats + c, BN_EPS,
                L->stats + 2 * c, L->stats + 3 * c));
            break;
        }
        case RELU:
        case TANH:
            CUDNN(
                cudnnActivationForward(b->dnn, L->act, &one, x->desc, x->x, &zero, y->desc, y->x));
            break;
        case MAX_POOL:
        case GLOBAL_AVG_POOL:
            CUDNN(cudnnPoolingForward(b->dnn, L->pool, &one, x->desc, x->x, &zero, y->desc, y->x));
            break;
        case ADD: /* y = a + b, as one (count, 1) matrix sum */
            BLAS(cublasSgeam(b->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)y->count, 1, &one, x->x,
                             (int)y->count, &one, b->tensors[L->in2].x, (int)y->count, y->x,
                             (int)y->count));
            break;
        case SOFTMAX:
            CUDNN(cudnnSoftmaxForward(b->dnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE,
                                      &one, x->desc, x->x, &zero, y->desc, y->x));
            break;
        }
    }
}

/* dx = dy (write) or dx += dy (add), `count` floats. */
static void pass_gradient(gpu_baseline *b, float *dx, const float *dy, int64_t count, bool add) {
    if (add)
        BLAS(cublasSaxpy(b->blas, (int)count, &one, dy, 1, dx, 1));
    else
        CUDA(cudaMemcpyAsync(dx, dy, (size_t)count * sizeof(float), cudaMemcpyDeviceToDevice,
                             b->stream));
}

static void backward(gpu_baseline *b) {
    for (int i = b->num_layers - 1; i >= 0; i--) {
        struct layer *L = &b->layers[i];
        const struct tensor *x = &b->tensors[L->in], *y = &b->tensors[L->out];
        const float *beta = L->acc ? &one : &zero;
        switch (L->s.kind) {
        case FC: { /* dWᵀ (in, units) = xᵀ · dy; dbᵀ = dyᵀ 1; dxᵀ (in, N) = Wᵀ · dyᵀ */
            const int units = L->s.size, in = (int)(x->count / x->n);
            BLAS(cublasSgemm(b->blas, CUBLAS_OP_N, CUBLAS_OP_T, in, units, x->n, &one, x->x, in,
                             y->dx, units, &zero, L->dw, in));
            if (L->s.bias)
                BLAS(cublasSgemv(b->blas, CUBLAS_OP_N, units, x->n, &one, y->dx, units, b->ones, 1,
                                 &zero, L->db, 1));
            if (x->dx)
                BLAS(cublasSgemm(b->blas, CUBLAS_OP_N, CUBLAS_OP_N, in, x->n, units, &one, L->w, in,
                                 y->dx, units, beta, x->dx, in));
            break;
        }
        case CONV:
            if (L->s.bias)
                CUDNN(cudnnConvolutionBackwardBias(b->dnn, &one, y->desc, y->dx, &zero, L->pdesc,
                                                   L->db));
            CUDNN(cudnnConvolutionBackwardFilter(b->dnn, &one, x->desc, x->x, y->desc, y->dx,
                                                 L->conv, L->bwd_filter, b->ws, b->ws_size, &zero,
                                                 L->filter, L->dw));
            if (x->dx)
                CUDNN(cudnnConvolutionBackwardData(b->dnn, &one, L->filter, L->w, y->desc, y->dx,
                                                   L->conv, L->bwd_data, b->ws, b->ws_size, beta,
                                                   x->desc, x->dx));
            break;
        case BN: {
            const int64_t c = x->c;
            CUDNN(cudnnBatchNormalizationBackward(b->dnn, CUDNN_BATCHNORM_SPATIAL, &one, beta, &one,
                                                  &zero, x->desc, x->x, y->desc, y->dx, x->desc,
                                                  x->dx, L->pdesc, L->w, L->dw, L->db, BN_EPS,
                                                  L->stats + 2 * c, L->stats + 3 * c));
            break;
        }
        case RELU:
        case TANH:
            CUDNN(cudnnActivationBackward(b->dnn, L->act, &one, y->desc, y->x, y->desc, y->dx,
                                          x->desc, x->x, beta, x->desc, x->dx));
            break;
        case MAX_POOL:
        case GLOBAL_AVG_POOL:
            CUDNN(cudnnPoolingBackward(b->dnn, L->pool, &one, y->desc, y->x, y->desc, y->dx,
                                       x->desc, x->x, beta, x->desc, x->dx));
            break;
        case ADD:
            pass_gradient(b, x->dx, y->dx, y->count, L->acc);
            pass_gradient(b, b->tensors[L->in2].dx, y->dx, y->count, L->acc2);
            break;
        case SOFTMAX: { /* dx = (p - onehot) / N: the batch mean of the cross-entropy */
            const float scale = 1.0f / (float)x->n, minus = -scale;
            BLAS(cublasSgeam(b->blas, CUBLAS_OP_N, CUBLAS_OP_N, x->c, x->n, &scale, y->x, x->c,
                             &minus, b->onehot, x->c, x->dx, x->c));
            break;
        }
        }
    }
}

/* mxc's sgd_mom_update (sgd_update without momentum) over all parameters at once; the
 * gradient is already the batch mean (mxc's rescale_grad 1 / batch):
 *   mom = momentum mom - lr (g + wd w); w += mom
 *   without momentum: w = w - lr (g + wd w) = (1 - lr wd) w - lr g */
static void sgd(gpu_baseline *b) {
    const int n = (int)b->num_params;
    const float minus_lr = -b->lr, decay = -b->lr * b->wd, keep = 1.0f - b->lr * b->wd;
    if (b->momentum > 0) {
        BLAS(cublasSscal(b->blas, n, &b->momentum, b->mom, 1));
        BLAS(cublasSaxpy(b->blas, n, &minus_lr, b->grads, 1, b->mom, 1));
        if (b->wd > 0)
            BLAS(cublasSaxpy(b->blas, n, &decay, b->params, 1, b->mom, 1));
        BLAS(cublasSaxpy(b->blas, n, &one, b->mom, 1, b->params, 1));
        return;
    }
    if (b->wd > 0)
        BLAS(cublasSscal(b->blas, n, &keep, b->params, 1));
    BLAS(cublasSaxpy(b->blas, n, &minus_lr, b->grads, 1, b->params, 1));
}

/* ---- The interface ------------------------------------------------------------------- */

gpu_baseline *gpu_baseline_create(const gpu_baseline_config *cfg, int *num_params, char *why,
                                  size_t why_size) {
    int counted = 0;
    if (num_params)
        *num_params = 0;
    gpu_baseline *b = calloc(1, sizeof *b);
    if (b == NULL)
        fail("out of host memory");
    b->batch = cfg->batch;
    b->lr = cfg->lr;
    b->momentum = cfg->momentum;
    b->wd = cfg->wd;
    struct list *l = &b->list;
    if (cfg->net == GPU_BASELINE_RESNET18) {
        resnet18(l);
    } else {
        const bool is_mlp = cfg->net == GPU_BASELINE_MLP;
        l->n = is_mlp ? (int)(sizeof mlp / sizeof mlp[0]) : (int)(sizeof lenet / sizeof lenet[0]);
        memcpy(l->s, is_mlp ? mlp : lenet, (size_t)l->n * sizeof l->s[0]);
    }
    CUDA(cudaSetDevice(0));
    CUDA(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    BLAS(cublasCreate(&b->blas));
    BLAS(cublasSetStream(b->blas, b->stream));
    CUDNN(cudnnCreate(&b->dnn));
    CUDNN(cudnnSetStream(b->dnn, b->stream));

    describe(&b->tensors[0], cfg->batch, cfg->channels, cfg->height, cfg->width);
    for (int i = 0; i < l->n; i++) {
        struct layer *L = &b->layers[i];
        L->s = l->s[i];
        L->in = i - L->s.back;
        L->in2 = L->s.kind == ADD ? i - L->s.back2 : 0;
        L->out = i + 1;
        if (L->in < 0 || L->in > i || L->in2 < 0 || L->in2 > i)
            fail("a layer reads a tensor not made before it");
        b->num_layers = i + 1; /* what gpu_baseline_free must undo */
        plan_layer(b, L);
    }
    plan_gradients(b);
    for (int t = 0; t <= b->num_layers; t++)
        b->tensors[t].x = device_floats(b->tensors[t].count);
    if (b->ws_size > 0)
        CUDA(cudaMalloc(&b->ws, b->ws_size));
    b->onehot = device_floats((int64_t)b->batch * b->classes);
    b->ones = device_floats(b->batch);
    float *ones = malloc((size_t)b->batch * sizeof(float));
    if (ones == NULL)
        fail("out of host memory");
    for (int i = 0; i < b->batch; i++)
        ones[i] = 1.0f;
    upload(b->ones, ones, b->batch);
    free(ones);
    bool ok = plan_params(b, cfg, &counted, why, why_size);
    /* the set-up copies and fills ran on the legacy stream, which b->stream does not wait
     * for */
    CUDA(cudaDeviceSynchronize());
    if (num_params)
        *num_params = counted;
    if (!ok) {
        gpu_baseline_free(b);
        return NULL;
    }
    return b;
}

void gpu_baseline_forward(gpu_baseline *b, const float *data, float *probs) {
    const struct tensor *d = &b->tensors[0], *p = &b->tensors[b->num_layers];
    CUDA(cudaMemcpyAsync(d->x, data, (size_t)d->count * sizeof(float), cudaMemcpyHostToDevice,
                         b->stream));
    forward(b);
    CUDA(cudaMemcpyAsync(probs, p->x, (size_t)p->count * sizeof(float), cudaMemcpyDeviceToHost,
                         b->stream));
    CUDA(cudaStreamSynchronize(b->stream));
}

void gpu_baseline_train(gpu_baseline *b, const float *data, const float *onehot, long batches) {
    const struct tensor *d = &b->tensors[0];
    const size_t labels = (size_t)b->batch * (size_t)b->classes;
    for (long i = 0; i < batches; i++) {
        CUDA(cudaMemcpyAsync(d->x, data + (size_t)i * (size_t)d->count,
                             (size_t)d->count * sizeof(float), cudaMemcpyHostToDevice, b->stream));
        CUDA(cudaMemcpyAsync(b->onehot, onehot + (size_t)i * labels, labels * sizeof(float),
                             cudaMemcpyHostToDevice, b->stream));
        forward(b);
        backward(b);
        sgd(b);
    }
    CUDA(cudaStreamSynchronize(b->stream));
}

void gpu_baseline_free(gpu_baseline *b) {
    if (b == NULL)
        return;
    CUDA(cudaStreamSynchronize(b->stream));
    for (int t = 0; t <= b->num_layers; t++) {
        struct tensor *x = &b->tensors[t];
        if (x->desc)
            CUDNN(cudnnDestroyTensorDescriptor(x->desc));
        CUDA(cudaFree(x->x));
        CUDA(cudaFree(x->dx));
    }
    for (int i = 0; i < b->num_layers; i++) {
        struct layer *L = &b->layers[i];
        if (L->pdesc)
            CUDNN(cudnnDestroyTensorDescriptor(L->pdesc));
        if (L->filter)
            CUDNN(cudnnDestroyFilterDescriptor(L->filter));
        if (L->conv)
            CUDNN(cudnnDestroyConvolutionDescriptor(L->conv));
        if (L->pool)
            CUDNN(cudnnDestroyPoolingDescriptor(L->pool));
        if (L->act)
            CUDNN(cudnnDestroyActivationDescriptor(L->act));
        CUDA(cudaFree(L->stats));
    }
    float *bufs[] = {b->params, b->grads, b->mom, b->ones, b->onehot};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        CUDA(cudaFree(bufs[i]));
    CUDA(cudaFree(b->ws));
    CUDNN(cudnnDestroy(b->dnn));
    BLAS(cublasDestroy(b->blas));
    CUDA(cudaStreamDestroy(b->stream));
    free(b);
}

#else /* no cuDNN: no baseline */

gpu_baseline *gpu_baseline_create(const gpu_baseline_config *cfg, int *num_params, char *why,
                                  size_t why_size) {
    if (num_params)
        *num_params = 0;
    snprintf(why, why_size,
             "the cuBLAS/cuDNN baseline needs a build with USE_CUDA=1 USE_CUDNN=1 (cuDNN runs "
             "its activations, pooling, BatchNorm and softmax)");
    return NULL;
}

void gpu_baseline_forward(gpu_baseline *b, const float *data, float *probs) {}

void gpu_baseline_train(gpu_baseline *b, const float *data, const float *onehot, long batches) {}

void gpu_baseline_free(gpu_baseline *b) {}

#endif

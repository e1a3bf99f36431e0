/*
 * operator/convolution_gpu.c — Convolution and Deconvolution on a GPU: the three
 * products of operator/convolution.c,
 *
 *   columns  = W · im2col(image)         cuDNN's convolution forward
 *   image    = col2im(Wᵀ · columns)      cuDNN's backward data
 *   dW       = columns · im2col(image)ᵀ  cuDNN's backward filter
 *
 * each either through cuDNN (a build with USE_CUDNN, cudnn_off False, a problem cuDNN
 * takes) or through the own path: im2col / col2im kernels (operator/convolution_gpu.cu)
 * and cuBLAS products, one image at a time, the groups as one strided batched product.
 * The bias and its gradient are own kernels on both paths. Requests: the products write
 * with beta 0 (write, in place) or 1 (add); a null request skips its product.
 *
 * cuDNN descriptors and algorithms are cached, not rebuilt per call: a fixed table of
 * DNN_CACHE entries keyed by the geometry (which holds every parameter that shapes the
 * problem), cudnn_tune, workspace and the device, guarded by one mutex; a full table
 * evicts its least recently used entry not in use. An entry's algorithm for each of the
 * three products is chosen on the product's first use (under the mutex: a Find runs
 * once per shape and blocks other lookups meanwhile):
 *   cudnn_tune off / None   cuDNN's heuristic (the _v7 queries): the first algorithm whose
 *                           workspace fits `workspace` MB;
 *   limited_workspace       cudnnFind* (timed runs): the fastest that fits `workspace`;
 *   fastest                 cudnnFind*: the fastest.
 * When none fits, the one needing the least workspace. The workspace comes from the
 * operator's temp space. Math type CUDNN_FMA_MATH: float32 FMA kernels only, no TF32
 * tensor cores, so results stay within float32 rounding of the CPU's. A problem cuDNN's
 * descriptors reject (an empty dimension, sizes beyond int, a deconvolution whose
 * target_shape makes the image larger than the convolution of it gives back) is marked
 * in its entry and takes the own path.
 */
#ifdef MXC_USE_CUDA

#include "operator/convolution.h"
#include "operator/gpu.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#ifdef MXC_USE_CUDNN
#include <cudnn.h>
#include <pthread.h>
#endif

#include <limits.h>

/* The products a call needs (a bit each). */
enum { DIR_FWD = 1, DIR_BWD_DATA = 2, DIR_BWD_FILTER = 4 };

#ifdef MXC_USE_CUDNN
/* ---- cuDNN: the descriptor and algorithm cache ------------------------------------- */

#define DNN_CACHE 64

struct dnn_key {
    struct conv_geom g;
    int tune, workspace, device;
};

struct dnn_entry {
    struct dnn_key key;
    bool used, usable;
    int refs; /* calls using it now: never evicted while > 0 */
    unsigned long long last_use;
    cudnnTensorDescriptor_t img, cols;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    bool chosen[3]; /* per product: DIR_FWD, DIR_BWD_DATA, DIR_BWD_FILTER */
    int algo[3];
    size_t ws[3]; /* bytes of workspace */
};

static struct dnn_entry dnn_cache[DNN_CACHE];
static unsigned long long dnn_clock;
static pthread_mutex_t dnn_lock = PTHREAD_MUTEX_INITIALIZER;

static int dnn_error(cudnnStatus_t s, const char *op, const char *call) {
    return mxc__error(MXC_EDEVICE, "%s: %s: %s", op, call, cudnnGetErrorString(s));
}

static bool same_key(const struct dnn_key *a, const struct dnn_key *b) {
    return memcmp(&a->g, &b->g, sizeof a->g) == 0 && a->tune == b->tune &&
           a->workspace == b->workspace && a->device == b->device;
}

static void dnn_destroy(struct dnn_entry *e) {
    if (e->img)
        cudnnDestroyTensorDescriptor(e->img);
    if (e->cols)
        cudnnDestroyTensorDescriptor(e->cols);
    if (e->w)
        cudnnDestroyFilterDescriptor(e->w);
    if (e->conv)
        cudnnDestroyConvolutionDescriptor(e->conv);
    memset(e, 0, sizeof *e);
}

static bool fits_int(int64_t v) { return v > 0 && v <= INT_MAX; }

/* Sets up e's descriptors; false when cuDNN cannot describe the problem (the own path
 * then takes it). */
static bool dnn_describe(struct dnn_entry *e) {
    const struct conv_geom *g = &e->key.g;
    int64_t dims[] = {g->batch,
                      g->ic,
                      g->ih,
                      g->iw,
                      g->oc,
                      g->oh,
                      g->ow,
                      g->kh,
                      g->kw,
                      g->icg,
                      g->ocg,
                      g->sh,
                      g->sw,
                      g->dh,
                      g->dw,
                      g->ph + 1,
                      g->pw + 1,
                      g->batch * g->ic * g->ih * g->iw,
                      g->batch * g->oc * g->pix,
                      g->oc * g->krows};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (!fits_int(dims[i]))
            return false;
    if (cudnnCreateTensorDescriptor(&e->img) != CUDNN_STATUS_SUCCESS ||
        cudnnCreateTensorDescriptor(&e->cols) != CUDNN_STATUS_SUCCESS ||
        cudnnCreateFilterDescriptor(&e->w) != CUDNN_STATUS_SUCCESS ||
        cudnnCreateConvolutionDescriptor(&e->conv) != CUDNN_STATUS_SUCCESS)
        return false;
    int n = (int)g->batch;
    if (cudnnSetTensor4dDescriptor(e->img, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, (int)g->ic,
                                   (int)g->ih, (int)g->iw) != CUDNN_STATUS_SUCCESS ||
        cudnnSetTensor4dDescriptor(e->cols, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, (int)g->oc,
                                   (int)g->oh, (int)g->ow) != CUDNN_STATUS_SUCCESS ||
        cudnnSetFilter4dDescriptor(e->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)g->oc,
                                   (int)g->icg, (int)g->kh, (int)g->kw) != CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolution2dDescriptor(e->conv, (int)g->ph, (int)g->pw, (int)g->sh, (int)g->sw,
                                        (int)g->dh, (int)g->dw, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT) != CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionGroupCount(e->conv, (int)g->groups) != CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionMathType(e->conv, CUDNN_FMA_MATH) != CUDNN_STATUS_SUCCESS)
        return false;
    /* the convolution of the image must give back the column side exactly (a
     * deconvolution's target_shape can make the image one row too large for that) */
    int on, oc, oh, ow;
    if (cudnnGetConvolution2dForwardOutputDim(e->conv, e->img, e->w, &on, &oc, &oh, &ow) !=
        CUDNN_STATUS_SUCCESS)
        return false;
    return on == n && oc == g->oc && oh == g->oh && ow == g->ow;
}

/* The cached entry of `k`, its use counted (release with dnn_release); NULL when cuDNN
 * does not take the problem or every entry is in use (the caller takes the own path). */
static struct dnn_entry *dnn_acquire(const struct dnn_key *k) {
    pthread_mutex_lock(&dnn_lock);
    struct dnn_entry *e = NULL, *victim = NULL;
    for (int i = 0; i < DNN_CACHE && !e; i++)
        if (dnn_cache[i].used && same_key(&dnn_cache[i].key, k))
            e = &dnn_cache[i];
    for (int i = 0; i < DNN_CACHE && !e; i++) {
        struct dnn_entry *x = &dnn_cache[i];
        if (!x->used) {
            victim = x;
            break;
        }
        if (x->refs == 0 && (!victim || x->last_use < victim->last_use))
            victim = x;
    }
    if (!e && victim) {
        dnn_destroy(victim);
        e = victim;
        e->key = *k;
        e->used = true;
        e->usable = dnn_describe(e);
    }
    if (e)
        e->last_use = ++dnn_clock;
    if (e && !e->usable)
        e = NULL; /* a problem for the own path */
    if (e)
        e->refs++;
    pthread_mutex_unlock(&dnn_lock);
    return e;
}

static void dnn_release(struct dnn_entry *e) {
    pthread_mutex_lock(&dnn_lock);
    e->refs--;
    pthread_mutex_unlock(&dnn_lock);
}

/* One candidate algorithm of a product, from cuDNN's performance results. */
struct cand {
    int algo;
    size_t ws;
};

/* The choice among `n` candidates (best first, exact workspace sizes): the first that
 * fits `limit` bytes, the first of all for fastest, else the smallest workspace. */
static int pick(const struct cand *cs, int n, size_t limit, int tune, struct cand *out) {
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (tune == CONV_TUNE_FASTEST || cs[i].ws <= limit) {
            *out = cs[i];
            return MXC_OK;
        }
        if (best < 0 || cs[i].ws < cs[best].ws)
            best = i;
    }
    if (best < 0)
        return MXC_ENOTSUP;
    *out = cs[best];
    return MXC_OK;
}

/* Fills `cs` from cuDNN's perf results `perf` (a Fwd / BwdData / BwdFilter perf array):
 * the successful ones without tensor-core math (TF32) whose workspace size `size_call`
 * (which sets ws_ for perf[i_]) confirms under the descriptor's FMA math. */
#define DNN_CANDS(perf, count, cs, n, size_call)                              \
    do {                                                                      \
        for (int i_ = 0; i_ < (count); i_++) {                                \
            size_t ws_ = 0;                                                   \
            if ((perf)[i_].status != CUDNN_STATUS_SUCCESS ||                  \
                (perf)[i_].mathType == CUDNN_TENSOR_OP_MATH ||                \
                (perf)[i_].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) \
                continue;                                                     \
            if (size_call != CUDNN_STATUS_SUCCESS)                            \
                continue;                                                     \
            (cs)[(n)++] = (struct cand){(int)(perf)[i_].algo, ws_};           \
        }                                                                     \
    } while (0)

/* Chooses e's algorithm for product `dir` (one DIR_ bit), once; called under dnn_lock.
 * MXC_ENOTSUP, with no message, when cuDNN offers none. */
static int dnn_choose(cudnnHandle_t h, struct dnn_entry *e, int dir, const char *op) {
    int d = dir == DIR_FWD ? 0 : dir == DIR_BWD_DATA ? 1 : 2;
    if (e->chosen[d])
        return MXC_OK;
    bool find = e->key.tune == CONV_TUNE_LIMITED || e->key.tune == CONV_TUNE_FASTEST;
    size_t limit = (size_t)e->key.workspace << 20;
    struct cand cs[16];
    int n = 0, count = 0;
    cudnnStatus_t s;
    if (dir == DIR_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        s = find ? cudnnFindConvolutionForwardAlgorithm(h, e->img, e->w, e->conv, e->cols,
                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
                                                        perf)
                 : cudnnGetConvolutionForwardAlgorithm_v7(h, e->img, e->w, e->conv, e->cols,
                                                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
                                                          perf);
        DNN_CANDS(perf, count, cs, n,
                  cudnnGetConvolutionForwardWorkspaceSize(h, e->img, e->w, e->conv, e->cols,
                                                          perf[i_].algo, &ws_));
    } else if (dir == DIR_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        s = find
                ? cudnnFindConvolutionBackwardDataAlgorithm(h, e->w, e->cols, e->conv, e->img,
                                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                            &count, perf)
                : cudnnGetConvolutionBackwardDataAlgorithm_v7(h, e->w, e->cols, e->conv, e->img,
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                              &count, perf);
        DNN_CANDS(perf, count, cs, n,
                  cudnnGetConvolutionBackwardDataWorkspaceSize(h, e->w, e->cols, e->conv, e->img,
                                                               perf[i_].algo, &ws_));
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        s = find ? cudnnFindConvolutionBackwardFilterAlgorithm(
                       h, e->img, e->cols, e->conv, e->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                       &count, perf)
                 : cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                       h, e->img, e->cols, e->conv, e->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                       &count, perf);
        DNN_CANDS(perf, count, cs, n,
                  cudnnGetConvolutionBackwardFilterWorkspaceSize(h, e->img, e->cols, e->conv, e->w,
                                                                 perf[i_].algo, &ws_));
    }
    if (s != CUDNN_STATUS_SUCCESS)
        return dnn_error(
            s, op, find ? "cudnnFindConvolution*Algorithm" : "cudnnGetConvolution*Algorithm_v7");
    struct cand c;
    if (pick(cs, n, limit, e->key.tune, &c) != MXC_OK)
        return MXC_ENOTSUP; /* no algorithm: the own path takes the problem */
    e->algo[d] = c.algo;
    e->ws[d] = c.ws;
    e->chosen[d] = true;
    return MXC_OK;
}
#endif /* MXC_USE_CUDNN */

/* ---- One call ---------------------------------------------------------------------- */

struct conv_run {
    const struct mxc__op_call *c;
    const char *op;
    struct conv_geom g;
    void *stream;
    float *space; /* own path: one image's columns; cuDNN: the workspace */
    size_t space_bytes;
    void *blas; /* own path */
#ifdef MXC_USE_CUDNN
    void *dnn_handle;
    struct dnn_entry *dnn; /* NULL: the own path */
#endif
};

/* Geometry, path, algorithms and temp space for the products in `dirs`. */
static int run_begin(struct conv_run *r, const struct mxc__op_call *c, bool deconv, int dirs) {
    const struct conv_param *p = c->params;
    memset(r, 0, sizeof *r);
    r->c = c;
    r->op = deconv ? "Deconvolution" : "Convolution";
    r->stream = c->rctx->stream;
    int rc = mxc__conv_geom(p, deconv, &c->in_data[0].shape, &r->g);
    if (rc != MXC_OK || dirs == 0)
        return rc;
    if (c->num_resources < 1)
        return mxc__error(MXC_EINTERNAL, "%s: no temp space resource", r->op);
    size_t need = 0;
#ifdef MXC_USE_CUDNN
    if (!p->cudnn_off) {
        struct dnn_key k;
        memset(&k, 0, sizeof k);
        k.g = r->g;
        k.tune = p->cudnn_tune;
        k.workspace = p->workspace;
        k.device = c->rctx->ctx.dev_id;
        struct dnn_entry *e = dnn_acquire(&k);
        if (e) {
            r->dnn = e;
            MXC_TRY(mxc__cudnn(c->rctx, &r->dnn_handle));
            pthread_mutex_lock(&dnn_lock);
            for (int d = 0; d < 3 && rc == MXC_OK; d++) {
                if (!(dirs & (1 << d)))
                    continue;
                rc = dnn_choose(r->dnn_handle, e, 1 << d, r->op);
                if (rc == MXC_OK && e->ws[d] > need)
                    need = e->ws[d];
            }
            bool own = rc == MXC_ENOTSUP;
            if (own) { /* the own path, from now on */
                e->usable = false;
                rc = MXC_OK;
                need = 0;
            }
            pthread_mutex_unlock(&dnn_lock);
            if (rc != MXC_OK)
                goto fail;
            if (own) {
                dnn_release(e);
                r->dnn = NULL;
            }
        }
    }
    if (!r->dnn) {
#endif
        MXC_TRY(mxc__cublas(c->rctx, &r->blas));
        int64_t cols = 0; /* one image's columns: ic * kh * kw * pix floats */
        if (!mxc__mul_add(0, r->g.groups, r->g.krows, &cols) ||
            !mxc__mul_add(0, cols, r->g.pix, &cols) ||
            !mxc__mul_add(0, cols, (int64_t)sizeof(float), &cols))
            return mxc__error(MXC_ENOMEM, "%s: the columns of one image exceed int64 bytes", r->op);
        if (r->g.batch > 0)
            need = (size_t)cols;
#ifdef MXC_USE_CUDNN
    }
#endif
    if (need > 0) {
        void *space = NULL;
        MXC_TRY(mxc__resource_temp(c->resources[0], need, &space));
        r->space = space;
        r->space_bytes = need;
    }
fail:
    return rc;
}

static void run_end(struct conv_run *r) {
#ifdef MXC_USE_CUDNN
    if (r->dnn)
        dnn_release(r->dnn);
    r->dnn = NULL;
#endif
}

/* ---- Own path: cuBLAS products ----------------------------------------------------- */

static bool blas_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* Row-major C (m × n) = op(A) (m × k) · op(B) (k × n) + beta C for each of the
 * geometry's groups, the groups' A, B, C `sa`, `sb`, m * n floats apart (C contiguous). */
static int gemm(const struct conv_run *r, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                const float *a, int64_t sa, const float *b, int64_t sb, float beta, float *cc) {
    int64_t groups = r->g.groups;
    if (m == 0 || n == 0)
        return MXC_OK;
    if (k == 0) /* an empty sum: cuBLAS is not asked to scale by beta */
        return beta == 0.0f
                   ? mxc__gpu_memset0(cc, (size_t)(groups * m * n) * sizeof(float), r->stream)
                   : MXC_OK;
    if (!blas_int(m) || !blas_int(n) || !blas_int(k) || !blas_int(groups))
        return mxc__error(MXC_ENOTSUP, "%s: a product of %lld x %lld x %lld is beyond cuBLAS",
                          r->op, (long long)m, (long long)n, (long long)k);
    /* row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ */
    float alpha = 1.0f;
    cublasStatus_t s = cublasSgemmStridedBatched(
        (cublasHandle_t)r->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
        (int)n, (int)m, (int)k, &alpha, b, tb ? (int)k : (int)n, sb, a, ta ? (int)m : (int)k, sa,
        &beta, cc, (int)n, m * n, (int)groups);
    if (s != CUBLAS_STATUS_SUCCESS)
        return mxc__error(MXC_EDEVICE, "%s: cublasSgemmStridedBatched: %s", r->op,
                          cublasGetStatusString(s));
    return MXC_OK;
}

/* ---- The three products ------------------------------------------------------------ */

static float beta_of(int req) { return req == MXC__REQ_ADD ? 1.0f : 0.0f; }

#ifdef MXC_USE_CUDNN
/* Product `dir` through cuDNN into `out` (cols, img or dw as the product makes), with
 * beta 1 for an add request. */
static int dnn_run(const struct conv_run *r, int dir, const float *img, const float *cols,
                   const float *w, float *out, int req) {
    const struct dnn_entry *e = r->dnn;
    cudnnHandle_t h = (cudnnHandle_t)r->dnn_handle;
    float one = 1.0f, beta = beta_of(req);
    cudnnStatus_t s;
    const char *call;
    if (dir == DIR_FWD) {
        call = "cudnnConvolutionForward";
        s = cudnnConvolutionForward(h, &one, e->img, img, e->w, w, e->conv,
                                    (cudnnConvolutionFwdAlgo_t)e->algo[0], r->space, r->space_bytes,
                                    &beta, e->cols, out);
    } else if (dir == DIR_BWD_DATA) {
        call = "cudnnConvolutionBackwardData";
        s = cudnnConvolutionBackwardData(h, &one, e->w, w, e->cols, cols, e->conv,
                                         (cudnnConvolutionBwdDataAlgo_t)e->algo[1], r->space,
                                         r->space_bytes, &beta, e->img, out);
    } else {
        call = "cudnnConvolutionBackwardFilter";
        s = cudnnConvolutionBackwardFilter(h, &one, e->img, img, e->cols, cols, e->conv,
                                           (cudnnConvolutionBwdFilterAlgo_t)e->algo[2], r->space,
                                           r->space_bytes, &beta, e->w, out);
    }
    return s == CUDNN_STATUS_SUCCESS ? MXC_OK : dnn_error(s, r->op, call);
}
#endif

/* cols (req) = W · im2col(img); cols (N, oc, pix), img (N, ic, ih, iw). */
static int to_columns(const struct conv_run *r, const float *img, const float *w, float *cols,
                      int req) {
    const struct conv_geom *g = &r->g;
    float beta = beta_of(req);
#ifdef MXC_USE_CUDNN
    if (r->dnn)
        return dnn_run(r, DIR_FWD, img, NULL, w, cols, req);
#endif
    int rc = MXC_OK;
    for (int64_t n = 0; n < g->batch && rc == MXC_OK; n++) {
        rc = mxc__conv_im2col_gpu(g, img + n * g->ic * g->ih * g->iw, r->space, r->stream);
        if (rc == MXC_OK)
            rc = gemm(r, false, false, g->ocg, g->pix, g->krows, w, g->ocg * g->krows, r->space,
                      g->krows * g->pix, beta, cols + n * g->oc * g->pix);
    }
    return rc;
}

/* img (req) = col2im(Wᵀ · cols) */
static int to_image(const struct conv_run *r, const float *cols, const float *w, float *img,
                    int req) {
    const struct conv_geom *g = &r->g;
#ifdef MXC_USE_CUDNN
    if (r->dnn)
        return dnn_run(r, DIR_BWD_DATA, NULL, cols, w, img, req);
#endif
    int64_t isize = g->ic * g->ih * g->iw;
    int rc = MXC_OK;
    for (int64_t n = 0; n < g->batch && rc == MXC_OK; n++) {
        rc = gemm(r, true, false, g->krows, g->pix, g->ocg, w, g->ocg * g->krows,
                  cols + n * g->oc * g->pix, g->ocg * g->pix, 0.0f, r->space);
        if (rc == MXC_OK)
            rc = mxc__conv_col2im_gpu(g, r->space, img + n * isize, req, r->stream);
    }
    return rc;
}

/* dw (req) = the sum over images of cols · im2col(img)ᵀ; dw (oc, icg * kh * kw) */
static int weight_grad(const struct conv_run *r, const float *img, const float *cols, float *dw,
                       int req) {
    const struct conv_geom *g = &r->g;
    float beta = beta_of(req);
#ifdef MXC_USE_CUDNN
    if (r->dnn)
        return dnn_run(r, DIR_BWD_FILTER, img, cols, NULL, dw, req);
#endif
    if (g->batch == 0)
        return req == MXC__REQ_ADD
                   ? MXC_OK
                   : mxc__gpu_memset0(dw, (size_t)(g->oc * g->krows) * sizeof(float), r->stream);
    int rc = MXC_OK;
    for (int64_t n = 0; n < g->batch && rc == MXC_OK; n++) {
        rc = mxc__conv_im2col_gpu(g, img + n * g->ic * g->ih * g->iw, r->space, r->stream);
        if (rc == MXC_OK)
            rc = gemm(r, false, true, g->ocg, g->krows, g->pix, cols + n * g->oc * g->pix,
                      g->ocg * g->pix, r->space, g->krows * g->pix, n == 0 ? beta : 1.0f, dw);
    }
    return rc;
}

/* ---- Kernels ----------------------------------------------------------------------- */

/* The image side's (deconv) or the column side's channels and pixels: where the bias
 * goes. */
static void bias_side(const struct conv_geom *g, bool deconv, int64_t *ch, int64_t *pix) {
    *ch = deconv ? g->ic : g->oc;
    *pix = deconv ? g->ih * g->iw : g->pix;
}

/* Convolution: out = columns of data; Deconvolution: out = image of data. */
static int run_forward(const struct mxc__op_call *c, bool deconv) {
    const struct conv_param *p = c->params;
    int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    struct conv_run r;
    int rc = run_begin(&r, c, deconv, deconv ? DIR_BWD_DATA : DIR_FWD);
    const float *x = c->in_data[0].data, *w = c->in_data[1].data;
    float *out = c->out_data[0].data;
    if (rc == MXC_OK)
        rc = deconv ? to_image(&r, x, w, out, req) : to_columns(&r, x, w, out, req);
    int64_t ch, pix;
    bias_side(&r.g, deconv, &ch, &pix);
    if (rc == MXC_OK && !p->no_bias)
        rc = mxc__conv_add_bias_gpu(out, c->in_data[2].data, r.g.batch, ch, pix, r.stream);
    run_end(&r);
    return rc;
}

/* The adjoints: the data gradient is the other side's product of dy; the weight gradient
 * pairs the image side (data or dy) with the column side (dy or data). */
static int run_backward(const struct mxc__op_call *c, bool deconv) {
    const struct conv_param *p = c->params;
    const float *x = c->in_data[0].data, *w = c->in_data[1].data, *dy = c->out_grad[0].data;
    const int *req = c->req;
    int dirs = (req[0] != MXC__REQ_NULL ? deconv ? DIR_FWD : DIR_BWD_DATA : 0) |
               (req[1] != MXC__REQ_NULL ? DIR_BWD_FILTER : 0);
    struct conv_run r;
    int rc = run_begin(&r, c, deconv, dirs);
    float *dx = c->in_grad[0].data;
    if (rc == MXC_OK && req[0] != MXC__REQ_NULL)
        rc = deconv ? to_columns(&r, dy, w, dx, req[0]) : to_image(&r, dy, w, dx, req[0]);
    if (rc == MXC_OK && req[1] != MXC__REQ_NULL)
        rc = weight_grad(&r, deconv ? dy : x, deconv ? x : dy, c->in_grad[1].data, req[1]);
    int64_t ch, pix;
    bias_side(&r.g, deconv, &ch, &pix);
    if (rc == MXC_OK && !p->no_bias)
        rc = mxc__conv_bias_grad_gpu(dy, c->in_grad[2].data, r.g.batch, ch, pix, req[2], r.stream);
    run_end(&r);
    return rc;
}

int mxc__conv_forward_gpu(const struct mxc__op_call *c) { return run_forward(c, false); }
int mxc__conv_backward_gpu(const struct mxc__op_call *c) { return run_backward(c, false); }
int mxc__deconv_forward_gpu(const struct mxc__op_call *c) { return run_forward(c, true); }
int mxc__deconv_backward_gpu(const struct mxc__op_call *c) { return run_backward(c, true); }

#else
/* ISO C wants a declaration in every translation unit. */
typedef int conv_gpu_unused;
#endif /* MXC_USE_CUDA */

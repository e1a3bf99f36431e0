/*
 * operator/dot.c — dot and batch_dot, matrix products through mxc__sgemm (common/gemm.h).
 * dot follows MXNet: lhs (d0, ..., dk) is the matrix (d0*...*d(k-1), dk) — or with
 * transpose_a (d0, d1*...*dk) transposed — and rhs (e0, ..., el) is (e0, e1*...*el), or
 * with transpose_b (e0*...*e(l-1), el) transposed; the output's shape is lhs's free axes
 * followed by rhs's; 1-D · 1-D is the inner product, of shape (1,). batch_dot multiplies
 * (..., M, K) by (..., K, N) (each optionally transposed in its last two axes) for every
 * index of the equal leading batch axes. float32, row-major. One description of the
 * products serves the CPU (mxc__sgemm) and a GPU (cuBLAS, operator/blas_gpu.h).
 */
#include "operator/op.h"

#include "common/gemm.h"
#include "operator/blas_gpu.h"
#include "operator/gpu.h"

#include <string.h>

struct dot_param {
    bool transpose_a;
    bool transpose_b;
    int forward_stype; /* -1 None; only dense ("default") output is supported */
};

static const char *const stype_choices[] = {"csr", "default", "row_sparse", NULL};

static const struct mxc__param dot_params[] = {
    MXC__P_BOOL(struct dot_param, transpose_a, "False", "use lhs transposed"),
    MXC__P_BOOL(struct dot_param, transpose_b, "False", "use rhs transposed"),
    MXC__P_OPT_ENUM(struct dot_param, forward_stype, stype_choices,
                    "output storage type (only default, dense, is supported)"),
};

static const char *const dot_inputs[] = {"lhs", "rhs", NULL};
static const char *const dot_outputs[] = {"output", NULL};

/* One product op(A) (m, k) · op(B) (k, n) = C (m, n), `batch` times. */
struct gemm_dims {
    int64_t batch, m, n, k;
    int64_t ka, kb; /* the inner sizes each side offers (must be equal) */
};

static int64_t prod(const mxc_shape *s, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= s->dims[i];
    return p;
}

/* dot: lhs, rhs as matrices (MXNet's DotShape). */
static void dot_dims(const struct dot_param *p, const mxc_shape *l, const mxc_shape *r,
                     struct gemm_dims *g) {
    int nl = l->ndim, nr = r->ndim;
    g->batch = 1;
    if (p->transpose_a) {
        g->ka = l->dims[0];
        g->m = prod(l, 1, nl);
    } else {
        g->m = prod(l, 0, nl - 1);
        g->ka = l->dims[nl - 1];
    }
    if (p->transpose_b) {
        g->n = prod(r, 0, nr - 1);
        g->kb = r->dims[nr - 1];
    } else {
        g->kb = r->dims[0];
        g->n = prod(r, 1, nr);
    }
    g->k = g->ka;
}

/* batch_dot: leading axes are the batch, the last two the matrices. */
static void batch_dims(const struct dot_param *p, const mxc_shape *l, const mxc_shape *r,
                       struct gemm_dims *g) {
    int nl = l->ndim, nr = r->ndim;
    g->batch = prod(l, 0, nl - 2);
    g->m = l->dims[nl - (p->transpose_a ? 1 : 2)];
    g->ka = l->dims[nl - (p->transpose_a ? 2 : 1)];
    g->kb = r->dims[nr - (p->transpose_b ? 1 : 2)];
    g->n = r->dims[nr - (p->transpose_b ? 2 : 1)];
    g->k = g->ka;
}

/* ---- Shapes ------------------------------------------------------------------------ */

static int check_stype(const char *op, const struct dot_param *p) {
    if (p->forward_stype >= 0 && strcmp(stype_choices[p->forward_stype], "default") != 0)
        return mxc__error(MXC_ENOTSUP, "%s: forward_stype %s is not supported (only default)", op,
                          stype_choices[p->forward_stype]);
    return MXC_OK;
}

static int mismatch(const char *op, const mxc_shape *l, const mxc_shape *r,
                    const struct dot_param *p, const char *what) {
    char a[128], b[128];
    return mxc__error(MXC_ESHAPE, "%s: lhs %s and rhs %s (transpose_a=%s, transpose_b=%s) %s", op,
                      mxc__shape_str(l, a, sizeof a), mxc__shape_str(r, b, sizeof b),
                      p->transpose_a ? "True" : "False", p->transpose_b ? "True" : "False", what);
}

static int dot_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                     mxc_shape *aux, int num_aux) {
    const struct dot_param *p = params;
    const char *op = "dot";
    int rc = check_stype(op, p);
    if (rc != MXC_OK || in[0].ndim == 0 || in[1].ndim == 0)
        return rc;
    const mxc_shape *l = &in[0], *r = &in[1];
    mxc_shape o = {0};
    if (l->ndim == 1 && r->ndim == 1) {
        if (p->transpose_a || p->transpose_b)
            return mxc__error(MXC_EINVAL, "%s: cannot transpose vectors (lhs and rhs are 1-D)", op);
        if (l->dims[0] != r->dims[0])
            return mismatch(op, l, r, p, "differ in length");
        o = mxc_shape_make(1, (const int64_t[]){1});
        return mxc__shape_assign(&out[0], &o, op, "output");
    }
    struct gemm_dims g;
    dot_dims(p, l, r, &g);
    if (g.ka != g.kb)
        return mismatch(op, l, r, p, "do not match on the summed axis");
    int fl = l->ndim > 1 ? l->ndim - 1 : 0, fr = r->ndim > 1 ? r->ndim - 1 : 0;
    if (fl + fr > MXC_MAX_NDIM)
        return mismatch(op, l, r, p, "give an output with too many axes");
    for (int i = 0; i < fl; i++)
        o.dims[o.ndim++] = l->dims[p->transpose_a ? i + 1 : i];
    for (int i = 0; i < fr; i++)
        o.dims[o.ndim++] = r->dims[p->transpose_b ? i : i + 1];
    return mxc__shape_assign(&out[0], &o, op, "output");
}

static int batch_dot_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out,
                           int num_out, mxc_shape *aux, int num_aux) {
    const struct dot_param *p = params;
    const char *op = "batch_dot";
    int rc = check_stype(op, p);
    if (rc != MXC_OK || in[0].ndim == 0 || in[1].ndim == 0)
        return rc;
    const mxc_shape *l = &in[0], *r = &in[1];
    if (l->ndim < 3 || l->ndim != r->ndim)
        return mismatch(op, l, r, p, "must both have the same number (at least 3) of axes");
    for (int i = 0; i < l->ndim - 2; i++)
        if (l->dims[i] != r->dims[i])
            return mismatch(op, l, r, p, "differ in the leading batch axes");
    struct gemm_dims g;
    batch_dims(p, l, r, &g);
    if (g.ka != g.kb)
        return mismatch(op, l, r, p, "do not match on the summed axis");
    mxc_shape o = *l;
    o.dims[o.ndim - 2] = g.m;
    o.dims[o.ndim - 1] = g.n;
    return mxc__shape_assign(&out[0], &o, op, "output");
}

/* ---- Kernels ----------------------------------------------------------------------- */

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

/* c (batch, m, n) (+)= op(a) · op(b), packed, for each of `batch` products: a (m, k), or
 * (k, m) with ta; b (k, n), or (n, k) with tb. The signature of mxc__gemm_gpu
 * (operator/blas_gpu.h), its twin on a GPU, so one description of the products below
 * serves both devices. */
typedef int (*gemm_fn)(const mxc_run_ctx *rctx, const char *what, int req, bool ta, bool tb,
                       int64_t batch, int64_t m, int64_t n, int64_t k, const float *a,
                       const float *b, float *c);

static int gemm_cpu(const mxc_run_ctx *rctx, const char *what, int req, bool ta, bool tb,
                    int64_t batch, int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                    float *c) {
    (void)rctx, (void)what;
    if (req == MXC__REQ_NULL || m == 0 || n == 0)
        return MXC_OK; /* c may then have no memory: no address into it */
    for (int64_t i = 0; i < batch; i++) {
        float *ci = c + i * m * n;
        if (k == 0) {
            if (req != MXC__REQ_ADD)
                memset(ci, 0, (size_t)(m * n) * sizeof(float));
            continue;
        }
        mxc__sgemm(ta, tb, m, n, k, 1.0f, a + i * m * k, max1(ta ? m : k), b + i * k * n,
                   max1(tb ? k : n), req == MXC__REQ_ADD ? 1.0f : 0.0f, ci, max1(n));
    }
    return MXC_OK;
}

/* out (batch, m, n) = op(lhs) · op(rhs), per batch */
static int products_forward(const struct mxc__op_call *c, const struct gemm_dims *g, const char *op,
                            gemm_fn gemm) {
    const struct dot_param *p = c->params;
    return gemm(c->rctx, op, c->req[0], p->transpose_a, p->transpose_b, g->batch, g->m, g->n, g->k,
                c->in_data[0].data, c->in_data[1].data, c->out_data[0].data);
}

/* With C = op(A) op(B) and dC (m, n):
 *   d op(A) = dC · op(B)ᵀ, so dA (m, k) = dC · op(B)ᵀ, or dA (k, m) = op(B) · dCᵀ;
 *   d op(B) = op(A)ᵀ · dC, so dB (k, n) = op(A)ᵀ · dC, or dB (n, k) = dCᵀ · op(A).
 * The two gradients never share memory with anything (no in-place option). */
static int products_backward(const struct mxc__op_call *c, const struct gemm_dims *g,
                             const char *op, gemm_fn gemm) {
    const struct dot_param *p = c->params;
    bool ta = p->transpose_a, tb = p->transpose_b;
    const float *a = c->in_data[0].data, *b = c->in_data[1].data, *dc = c->out_grad[0].data;
    float *da = c->in_grad[0].data, *db = c->in_grad[1].data;
    int64_t bn = g->batch, m = g->m, n = g->n, k = g->k;
    int ra = c->req[0], rb = c->req[1];
    int rc = !ta ? gemm(c->rctx, op, ra, false, !tb, bn, m, k, n, dc, b, da)
                 : gemm(c->rctx, op, ra, tb, true, bn, k, m, n, b, dc, da);
    if (rc != MXC_OK)
        return rc;
    return !tb ? gemm(c->rctx, op, rb, !ta, false, bn, k, n, m, a, dc, db)
               : gemm(c->rctx, op, rb, true, ta, bn, n, k, m, dc, a, db);
}

/* One kernel of dot or batch_dot on either device. */
static int dot_run(const struct mxc__op_call *c, bool batched, bool backward, gemm_fn gemm) {
    struct gemm_dims g;
    const mxc_shape *l = &c->in_data[0].shape, *r = &c->in_data[1].shape;
    if (batched)
        batch_dims(c->params, l, r, &g);
    else
        dot_dims(c->params, l, r, &g);
    const char *op = batched ? "batch_dot" : "dot";
    return backward ? products_backward(c, &g, op, gemm) : products_forward(c, &g, op, gemm);
}

static int dot_forward(const struct mxc__op_call *c) { return dot_run(c, false, false, gemm_cpu); }
static int dot_backward(const struct mxc__op_call *c) { return dot_run(c, false, true, gemm_cpu); }
static int batch_dot_forward(const struct mxc__op_call *c) {
    return dot_run(c, true, false, gemm_cpu);
}
static int batch_dot_backward(const struct mxc__op_call *c) {
    return dot_run(c, true, true, gemm_cpu);
}

#ifdef MXC_USE_CUDA
/* On a GPU: the same products, each batch one strided-batched cuBLAS call. */
static int dot_forward_gpu(const struct mxc__op_call *c) {
    return dot_run(c, false, false, mxc__gemm_gpu);
}
static int dot_backward_gpu(const struct mxc__op_call *c) {
    return dot_run(c, false, true, mxc__gemm_gpu);
}
static int batch_dot_forward_gpu(const struct mxc__op_call *c) {
    return dot_run(c, true, false, mxc__gemm_gpu);
}
static int batch_dot_backward_gpu(const struct mxc__op_call *c) {
    return dot_run(c, true, true, mxc__gemm_gpu);
}
#endif

const struct mxc__op_def mxc__op_dot = {
    .name = "dot",
    .description = "matrix product of lhs and rhs flattened to matrices",
    .param_size = sizeof(struct dot_param),
    .params = dot_params,
    .num_params = (int)MXC_ARRAY_SIZE(dot_params),
    .inputs = dot_inputs,
    .outputs = dot_outputs,
    .infer_shape = dot_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .forward_cpu = dot_forward,
    .backward_cpu = dot_backward,
    .forward_gpu = MXC__GPU(dot_forward_gpu),
    .backward_gpu = MXC__GPU(dot_backward_gpu),
};

const struct mxc__op_def mxc__op_batch_dot = {
    .name = "batch_dot",
    .description = "matrix products over the leading batch axes",
    .param_size = sizeof(struct dot_param),
    .params = dot_params,
    .num_params = (int)MXC_ARRAY_SIZE(dot_params),
    .inputs = dot_inputs,
    .outputs = dot_outputs,
    .infer_shape = batch_dot_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .forward_cpu = batch_dot_forward,
    .backward_cpu = batch_dot_backward,
    .forward_gpu = MXC__GPU(batch_dot_forward_gpu),
    .backward_gpu = MXC__GPU(batch_dot_backward_gpu),
};

/*
 * operator/fully_connected.c — FullyConnected: out = data · weightᵀ + bias, one
 * product forward and two backward (data and weight gradients) plus column sums for the
 * bias; the products go through mxc__sgemm (common/gemm.h), which spends the operator's
 * thread budget. With flatten (the default) data (N, d1, ..., dk) is read as (N, d1*...*dk);
 * without it the last axis is the feature axis and the others are batch axes. With
 * no_bias the inputs are (data, weight) only. float32, row-major. On a GPU the same
 * products go through cuBLAS (operator/blas_gpu.h).
 */
#include "operator/op.h"

#include "common/gemm.h"
#include "operator/blas_gpu.h"
#include "operator/gpu.h"

#include <string.h>

struct fc_param {
    int num_hidden;
    bool no_bias;
    bool flatten;
};

static const struct mxc__param fc_params[] = {
    MXC__P_INT(struct fc_param, num_hidden, NULL, 1, 2147483647, "number of hidden units"),
    MXC__P_BOOL(struct fc_param, no_bias, "False", "disable the bias"),
    MXC__P_BOOL(struct fc_param, flatten, "True",
                "flatten data to (N, features); else the last axis holds the features"),
};

static const char *const fc_outputs[] = {"output", NULL};

static int fc_list_inputs(const void *params, const char **names, int max) {
    const struct fc_param *p = params;
    static const char *const all[] = {"data", "weight", "bias"};
    int n = p->no_bias ? 2 : 3;
    for (int i = 0; i < n && i < max; i++)
        names[i] = all[i];
    return n;
}

/* Rows (batch) and features of data as the products see it: (rows, features). */
static void fc_dims(const struct fc_param *p, const mxc_shape *data, int64_t *rows,
                    int64_t *features) {
    int64_t k = 1;
    int first = p->flatten ? 1 : data->ndim - 1;
    for (int i = first; i < data->ndim; i++)
        k *= data->dims[i];
    *features = k;
    *rows = k ? mxc_shape_size(data) / k : 0;
}

/* data (N, ...) gives weight (num_hidden, K), bias (num_hidden) and the output:
 * (N, num_hidden) with flatten, (d0, ..., d_{k-1}, num_hidden) without. */
static int fc_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                    mxc_shape *aux, int num_aux) {
    const struct fc_param *p = params;
    const char *op = "FullyConnected";
    int rc = MXC_OK;
    int64_t nh = p->num_hidden;
    if (!p->no_bias) {
        mxc_shape b = mxc_shape_make(1, &nh);
        MXC_TRY(mxc__shape_assign(&in[2], &b, op, "bias"));
    }
    if (in[0].ndim == 0)
        return MXC_OK; /* nothing more to deduce without data */
    int64_t rows, k;
    fc_dims(p, &in[0], &rows, &k);
    int64_t wd[2] = {nh, k};
    mxc_shape w = mxc_shape_make(2, wd);
    MXC_TRY(mxc__shape_assign(&in[1], &w, op, "weight"));
    mxc_shape o;
    if (p->flatten) {
        int64_t od[2] = {in[0].dims[0], nh};
        o = mxc_shape_make(2, od);
    } else {
        o = in[0];
        o.dims[o.ndim - 1] = nh;
    }
    MXC_TRY(mxc__shape_assign(&out[0], &o, op, "output"));
fail:
    return rc;
}

/* out (M, H) (+)= data (M, K) · weight (H, K)ᵀ + bias (H) */
static int fc_forward(const struct mxc__op_call *c) {
    const struct fc_param *p = c->params;
    int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    int64_t m, k, h = p->num_hidden;
    fc_dims(p, &c->in_data[0].shape, &m, &k);
    const float *x = c->in_data[0].data, *w = c->in_data[1].data;
    float *y = c->out_data[0].data;
    float beta = req == MXC__REQ_ADD ? 1.0f : 0.0f;
    if (!p->no_bias) {
        /* the bias goes in first, so the product accumulates onto it */
        const float *b = c->in_data[2].data;
        for (int64_t i = 0; i < m; i++) {
            float *row = y + i * h;
            if (req == MXC__REQ_ADD)
                for (int64_t j = 0; j < h; j++)
                    row[j] += b[j];
            else
                memcpy(row, b, (size_t)h * sizeof(float));
        }
        beta = 1.0f;
    }
    if (m > 0 && h > 0)
        mxc__sgemm(false, true, m, h, k, 1.0f, x, k, w, k, beta, y, h);
    return MXC_OK;
}

/* d_data (M, K) = dy (M, H) · weight (H, K); d_weight (H, K) = dyᵀ · data (M, K);
 * d_bias (H) = sum over rows of dy. */
static int fc_backward(const struct mxc__op_call *c) {
    const struct fc_param *p = c->params;
    int64_t m, k, h = p->num_hidden;
    fc_dims(p, &c->in_data[0].shape, &m, &k);
    const float *dy = c->out_grad[0].data;
    const float *x = c->in_data[0].data, *w = c->in_data[1].data;
    for (int i = 0; i < (p->no_bias ? 2 : 3); i++) {
        int req = c->req[i];
        if (req == MXC__REQ_NULL)
            continue;
        float beta = req == MXC__REQ_ADD ? 1.0f : 0.0f;
        float *g = c->in_grad[i].data;
        if (i == 0) {
            if (m == 0 || k == 0)
                continue;
            if (h == 0 && req != MXC__REQ_ADD)
                memset(g, 0, (size_t)(m * k) * sizeof(float));
            else
                mxc__sgemm(false, false, m, k, h, 1.0f, dy, h, w, k, beta, g, k);
        } else if (i == 1) {
            if (m == 0 && req != MXC__REQ_ADD)
                memset(g, 0, (size_t)(h * k) * sizeof(float));
            else if (m > 0 && h > 0 && k > 0)
                mxc__sgemm(true, false, h, k, m, 1.0f, dy, h, x, k, beta, g, k);
        } else {
            if (req != MXC__REQ_ADD)
                memset(g, 0, (size_t)h * sizeof(float));
            for (int64_t r = 0; r < m; r++) {
                const float *row = dy + r * h;
                for (int64_t j = 0; j < h; j++)
                    g[j] += row[j];
            }
        }
    }
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
/* The GPU twins of fc_forward and fc_backward: the same products on cuBLAS, the bias
 * broadcast and column sums as kernels (operator/blas_gpu.cu); device pointers only. */
static int fc_forward_gpu(const struct mxc__op_call *c) {
    const struct fc_param *p = c->params;
    int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    int64_t m, k, h = p->num_hidden;
    fc_dims(p, &c->in_data[0].shape, &m, &k);
    float *y = c->out_data[0].data;
    if (!p->no_bias) {
        int rc = mxc__bias_rows_gpu(c->rctx, req, m, h, c->in_data[2].data, y);
        if (rc != MXC_OK)
            return rc;
        req = MXC__REQ_ADD; /* the product accumulates onto the bias */
    }
    return mxc__gemm_gpu(c->rctx, "FullyConnected", req, false, true, 1, m, h, k,
                         c->in_data[0].data, c->in_data[1].data, y);
}

static int fc_backward_gpu(const struct mxc__op_call *c) {
    const struct fc_param *p = c->params;
    int64_t m, k, h = p->num_hidden;
    fc_dims(p, &c->in_data[0].shape, &m, &k);
    const float *dy = c->out_grad[0].data;
    const float *x = c->in_data[0].data, *w = c->in_data[1].data;
    const char *op = "FullyConnected backward";
    /* d_data (M, K) = dy (M, H) · weight (H, K); d_weight (H, K) = dyᵀ · data (M, K) */
    int rc =
        mxc__gemm_gpu(c->rctx, op, c->req[0], false, false, 1, m, k, h, dy, w, c->in_grad[0].data);
    if (rc == MXC_OK)
        rc = mxc__gemm_gpu(c->rctx, op, c->req[1], true, false, 1, h, k, m, dy, x,
                           c->in_grad[1].data);
    if (rc == MXC_OK && !p->no_bias) /* d_bias (H) = sum over rows of dy */
        rc = mxc__col_sums_gpu(c->rctx, c->req[2], m, h, dy, c->in_grad[2].data);
    return rc;
}
#endif

const struct mxc__op_def mxc__op_FullyConnected = {
    .name = "FullyConnected",
    .description = "out = data · weightᵀ + bias, data flattened to (batch, features)",
    .param_size = sizeof(struct fc_param),
    .params = fc_params,
    .num_params = (int)MXC_ARRAY_SIZE(fc_params),
    .list_inputs = fc_list_inputs,
    .outputs = fc_outputs,
    .infer_shape = fc_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .forward_cpu = fc_forward,
    .backward_cpu = fc_backward,
    .forward_gpu = MXC__GPU(fc_forward_gpu),
    .backward_gpu = MXC__GPU(fc_backward_gpu),
};

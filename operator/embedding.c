/*
 * operator/embedding.c — Embedding: a table lookup. data holds row indices (as floats,
 * truncated toward zero), weight is the table (input_dim, output_dim); the output is
 * data.shape + (output_dim,). Like MXNet's CPU kernels, indices outside [0, input_dim)
 * are clipped to the nearest row, forward and backward. Backward scatter-adds the
 * output gradient into the rows of weight; indices get no gradient (zeros when written;
 * MXNet refuses the request instead). sparse_grad is accepted and gives the same dense
 * gradient. The GPU kernels are in operator/embedding_gpu.cu (the row rule shared through
 * operator/embedding.h). float32, row-major.
 */
#include "operator/embedding.h"

#include "operator/gpu.h"
#include "operator/op.h"

#include <string.h>

struct embedding_param {
    int input_dim;
    int output_dim;
    int dtype;
    bool sparse_grad;
};

static const char *const dtype_choices[] = {"bfloat16", "float16", "float32", "float64", "int32",
                                            "int64",    "int8",    "uint8",   NULL};
enum { DTYPE_FLOAT32 = 2 };

#define EP struct embedding_param
static const struct mxc__param embedding_params[] = {
    MXC__P_INT(EP, input_dim, NULL, 1, 2147483647, "number of rows of weight (vocabulary)"),
    MXC__P_INT(EP, output_dim, NULL, 1, 2147483647, "size of each embedding vector"),
    MXC__P_ENUM(EP, dtype, "float32", dtype_choices, "weight and output type (float32 only)"),
    MXC__P_BOOL(EP, sparse_grad, "False",
                "row-sparse weight gradient in MXNet; here the same values, dense"),
};
#undef EP

static const char *const embedding_inputs[] = {"data", "weight", NULL};
static const char *const embedding_outputs[] = {"output", NULL};

/* weight (input_dim, output_dim) from the params; data (...) <-> output (..., output_dim). */
static int embedding_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out,
                           int num_out, mxc_shape *aux, int num_aux) {
    const struct embedding_param *p = params;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    const char *op = "Embedding";
    char b[128];
    int rc = MXC_OK;
    MXC_CHECK(p->dtype == DTYPE_FLOAT32, MXC_ENOTSUP,
              "Embedding: dtype=%s is not supported "
              "(float32 only)",
              dtype_choices[p->dtype]);
    int64_t wd[2] = {p->input_dim, p->output_dim};
    mxc_shape w = mxc_shape_make(2, wd);
    MXC_TRY(mxc__shape_assign(&in[1], &w, op, "weight"));
    if (in[0].ndim == 0 && out[0].ndim >= 2) {
        int64_t last = out[0].dims[out[0].ndim - 1];
        MXC_CHECK(last == p->output_dim, MXC_ESHAPE,
                  "Embedding: output %s does not end in "
                  "output_dim=%d",
                  mxc__shape_str(&out[0], b, sizeof b), p->output_dim);
        in[0] = out[0];
        in[0].ndim--;
    }
    if (in[0].ndim == 0)
        return MXC_OK;
    MXC_CHECK(in[0].ndim < MXC_MAX_NDIM, MXC_ENOTSUP,
              "Embedding: data %s leaves no room "
              "for the output's extra axis (at most %d)",
              mxc__shape_str(&in[0], b, sizeof b), MXC_MAX_NDIM);
    mxc_shape o = in[0];
    o.dims[o.ndim++] = p->output_dim;
    MXC_TRY(mxc__shape_assign(&out[0], &o, op, "output"));
fail:
    return rc;
}

/* out[i, :] (=, +=) weight[row(data[i]), :]; data (n), weight (K, D), out (n, D). */
static int embedding_forward(const struct mxc__op_call *c) {
    int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const float *idx = c->in_data[0].data, *w = c->in_data[1].data;
    int64_t n = c->in_data[0].size, rows = c->in_data[1].shape.dims[0];
    int64_t dim = c->in_data[1].shape.dims[1];
    float *o = c->out_data[0].data;
    for (int64_t i = 0; i < n; i++) {
        const float *src = w + mxc__embedding_row(idx[i], rows) * dim;
        float *dst = o + i * dim;
        if (req == MXC__REQ_ADD)
            for (int64_t j = 0; j < dim; j++)
                dst[j] += src[j];
        else
            memcpy(dst, src, (size_t)dim * sizeof(float));
    }
    return MXC_OK;
}

/* d_weight[row(data[i]), :] += d_out[i, :] (zeroed first unless add-to); d_data = 0. */
static int embedding_backward(const struct mxc__op_call *c) {
    const float *idx = c->in_data[0].data, *g = c->out_grad[0].data;
    int64_t n = c->in_data[0].size, rows = c->in_grad[1].shape.dims[0];
    int64_t dim = c->in_grad[1].shape.dims[1];
    if (c->req[0] == MXC__REQ_WRITE || c->req[0] == MXC__REQ_INPLACE)
        memset(c->in_grad[0].data, 0, (size_t)c->in_grad[0].size * sizeof(float));
    int req = c->req[1];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    float *dw = c->in_grad[1].data;
    if (req != MXC__REQ_ADD)
        memset(dw, 0, (size_t)(rows * dim) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        float *dst = dw + mxc__embedding_row(idx[i], rows) * dim;
        const float *src = g + i * dim;
        for (int64_t j = 0; j < dim; j++)
            dst[j] += src[j];
    }
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
static int embedding_forward_gpu(const struct mxc__op_call *c) {
    return mxc__embedding_gpu(c->in_data[0].data, c->in_data[1].data, c->out_data[0].data,
                              c->in_data[0].size, c->in_data[1].shape.dims[0],
                              c->in_data[1].shape.dims[1], c->req[0], c->rctx->stream);
}

/* As embedding_backward: d_data zeroed when written, d_weight zeroed unless added to, then
 * the scatter-add. */
static int embedding_backward_gpu(const struct mxc__op_call *c) {
    void *stream = c->rctx->stream;
    int64_t rows = c->in_grad[1].shape.dims[0], dim = c->in_grad[1].shape.dims[1];
    int rc = MXC_OK;
    if (c->req[0] == MXC__REQ_WRITE || c->req[0] == MXC__REQ_INPLACE)
        MXC_TRY(mxc__gpu_memset0(c->in_grad[0].data, (size_t)c->in_grad[0].size * sizeof(float),
                                 stream));
    if (c->req[1] == MXC__REQ_NULL)
        return MXC_OK;
    if (c->req[1] != MXC__REQ_ADD)
        MXC_TRY(mxc__gpu_memset0(c->in_grad[1].data, (size_t)(rows * dim) * sizeof(float), stream));
    rc = mxc__embedding_grad_gpu(c->in_data[0].data, c->out_grad[0].data, c->in_grad[1].data,
                                 c->in_data[0].size, rows, dim, stream);
fail:
    return rc;
}
#endif

const struct mxc__op_def mxc__op_Embedding = {
    .name = "Embedding",
    .description = "Looks up rows of weight (input_dim, output_dim) at the indices in data",
    .param_size = sizeof(struct embedding_param),
    .params = embedding_params,
    .num_params = (int)MXC_ARRAY_SIZE(embedding_params),
    .inputs = embedding_inputs,
    .outputs = embedding_outputs,
    .infer_shape = embedding_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .forward_cpu = embedding_forward,
    .backward_cpu = embedding_backward,
    .forward_gpu = MXC__GPU(embedding_forward_gpu),
    .backward_gpu = MXC__GPU(embedding_backward_gpu),
};

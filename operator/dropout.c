/*
 * operator/dropout.c — Dropout: in training (or always, with mode=always) each element is
 * kept with probability 1 - p and scaled by 1 / (1 - p), else zeroed; at inference with
 * mode=training it is the identity. The draws come from the device's random resource
 * (Philox, so a seed set with mxc_random_seed reproduces them). The hidden output `mask`
 * holds the scale applied to each element (0 or 1 / (1 - p)); with `axes` one draw is
 * shared along those axes, so the mask has size 1 there and is broadcast over data.
 * Backward multiplies out_grad by the mask. The GPU kernels (operator/dropout_gpu.cu) draw
 * the same values from the same resource and share the mask rule (operator/dropout.h).
 * float32, row-major.
 */
#include "operator/dropout.h"

#include "operator/copy_gpu.h"
#include "operator/gpu.h"
#include "operator/op.h"

#include <string.h>

enum { MODE_TRAINING, MODE_ALWAYS };

struct dropout_param {
    float p;
    int mode;
    mxc_shape axes;
    bool cudnn_off;
};

static const char *const mode_choices[] = {"training", "always", NULL};

#define DP struct dropout_param
static const struct mxc__param dropout_params[] = {
    MXC__P_FLOAT(DP, p, "0.5", 0, 1, "fraction of the elements to drop"),
    MXC__P_ENUM(DP, mode, "training", mode_choices,
                "training: drop only when training; always: also at inference"),
    MXC__P_TUPLE(DP, axes, "()", "axes along which one draw is shared"),
    MXC__P_BOOL(DP, cudnn_off, "False", "do not use cuDNN (ignored on CPU)"),
};
#undef DP

static const char *const dropout_inputs[] = {"data", NULL};
static const char *const dropout_outputs[] = {"output", "mask", NULL};

/* data -> output (same shape) and mask (data's shape with size 1 along `axes`). */
static int dropout_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                         mxc_shape *aux, int num_aux) {
    const struct dropout_param *p = params;
    const char *op = "Dropout";
    char buf[128];
    (void)num_in, (void)aux, (void)num_aux;
    int rc = mxc__shape_assign(&in[0], &out[0], op, "data");
    if (rc != MXC_OK)
        return rc;
    if (in[0].ndim == 0)
        return MXC_OK;
    mxc_shape m = in[0];
    for (int i = 0; i < p->axes.ndim; i++) {
        int64_t a = p->axes.dims[i] < 0 ? p->axes.dims[i] + m.ndim : p->axes.dims[i];
        if (a < 0 || a >= m.ndim)
            return mxc__error(MXC_EINVAL,
                              "%s: axes[%d] = %lld is out of range for data of "
                              "shape %s",
                              op, i, (long long)p->axes.dims[i],
                              mxc__shape_str(&in[0], buf, sizeof buf));
        m.dims[a] = 1;
    }
    rc = mxc__shape_assign(&out[0], &in[0], op, "output");
    if (rc == MXC_OK && num_out > 1)
        rc = mxc__shape_assign(&out[1], &m, op, "mask");
    return rc;
}

/* o (shape) (+)= a (shape) * mask (mshape, 1 or the same size per axis), row-major; o may
 * be a (in place). The last axis runs as a plain loop with mask stride 0 or 1. */
static void mul_mask(int req, float *o, const float *a, const float *mask, const mxc_shape *shape,
                     const mxc_shape *mshape) {
    int nd = shape->ndim;
    int64_t inner = nd ? shape->dims[nd - 1] : 1;
    int64_t rows = inner ? mxc_shape_size(shape) / inner : 0;
    bool bcast_inner = nd && mshape->dims[nd - 1] == 1;
    int64_t idx[MXC_MAX_NDIM] = {0};
    for (int64_t r = 0; r < rows; r++) {
        /* the mask row of data row r: idx holds the data coordinates of axes 0..nd-2 */
        int64_t moff = 0;
        for (int d = 0; d < nd - 1; d++)
            moff = moff * mshape->dims[d] + (mshape->dims[d] == 1 ? 0 : idx[d]);
        moff *= mshape->dims[nd - 1];
        const float *mr = mask + moff;
        const float *ar = a + r * inner;
        float *orow = o + r * inner;
        if (bcast_inner) {
            const float s = mr[0];
            if (req == MXC__REQ_ADD)
                for (int64_t i = 0; i < inner; i++)
                    orow[i] += ar[i] * s;
            else
                for (int64_t i = 0; i < inner; i++)
                    orow[i] = ar[i] * s;
        } else if (req == MXC__REQ_ADD) {
            for (int64_t i = 0; i < inner; i++)
                orow[i] += ar[i] * mr[i];
        } else {
            for (int64_t i = 0; i < inner; i++)
                orow[i] = ar[i] * mr[i];
        }
        for (int d = nd - 2; d >= 0; d--) { /* odometer over the outer axes */
            if (++idx[d] < shape->dims[d])
                break;
            idx[d] = 0;
        }
    }
}

static bool dropout_active(const struct mxc__op_call *c) {
    const struct dropout_param *p = c->params;
    return c->is_train || p->mode == MODE_ALWAYS;
}

/* x (shape) -> y = x * mask, mask (mask shape) = 1[u < 1 - p] / (1 - p), u uniform. */
static int dropout_forward(const struct mxc__op_call *c) {
    const struct dropout_param *p = c->params;
    const struct mxc__tensor *x = &c->in_data[0], *y = &c->out_data[0], *mk = &c->out_data[1];
    float *mask = mk->data;
    int64_t nm = mk->size;
    if (!dropout_active(c)) {
        mxc__copy_req(y->data, x->data, x->size, c->req[0]);
        if (c->req[1] != MXC__REQ_NULL)
            for (int64_t i = 0; i < nm; i++)
                mask[i] = 1.0f;
        return MXC_OK;
    }
    if (c->req[1] == MXC__REQ_NULL || c->req[1] == MXC__REQ_ADD) {
        /* the caller keeps no mask: draw into scratch memory */
        int rc =
            mxc__resource_temp(c->resources[1], (size_t)(nm + 1) * sizeof(float), (void **)&mask);
        if (rc != MXC_OK)
            return rc;
    }
    int rc = mxc__philox_uniform(&c->resources[0]->rng, mask, nm, 0.0f, 1.0f);
    if (rc != MXC_OK)
        return rc;
    const float keep = 1.0f - p->p;
    const float scale = mxc__dropout_scale(keep);
    for (int64_t i = 0; i < nm; i++)
        mask[i] = mxc__dropout_mask(mask[i], keep, scale);
    if (c->req[0] != MXC__REQ_NULL)
        mul_mask(c->req[0], y->data, x->data, mask, &x->shape, &mk->shape);
    if (c->req[1] == MXC__REQ_ADD)
        mxc__copy_req(mk->data, mask, nm, MXC__REQ_ADD);
    return MXC_OK;
}

/* dx (shape) = dy * mask when dropout was active, else dy. */
static int dropout_backward(const struct mxc__op_call *c) {
    const struct mxc__tensor *dy = &c->out_grad[0], *dx = &c->in_grad[0];
    const struct mxc__tensor *mk = &c->out_data[1];
    if (c->req[0] == MXC__REQ_NULL)
        return MXC_OK;
    if (!dropout_active(c))
        mxc__copy_req(dx->data, dy->data, dx->size, c->req[0]);
    else
        mul_mask(c->req[0], dx->data, dy->data, mk->data, &dy->shape, &mk->shape);
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
/* dropout_forward on a GPU: the draws by mxc__philox_fill_gpu, from the same generator. */
static int dropout_forward_gpu(const struct mxc__op_call *c) {
    const struct dropout_param *p = c->params;
    const struct mxc__tensor *x = &c->in_data[0], *y = &c->out_data[0], *mk = &c->out_data[1];
    void *stream = c->rctx->stream;
    float *mask = mk->data;
    int64_t nm = mk->size;
    int rc = MXC_OK;
    if (!dropout_active(c)) {
        MXC_TRY(mxc__copy_req_gpu(y->data, x->data, x->size, c->req[0], stream));
        if (c->req[1] != MXC__REQ_NULL)
            MXC_TRY(mxc__dropout_mask_gpu(mask, nm, false, 0.0f, 0.0f, stream));
        return MXC_OK;
    }
    if (c->req[1] == MXC__REQ_NULL || c->req[1] == MXC__REQ_ADD)
        MXC_TRY(
            mxc__resource_temp(c->resources[1], (size_t)(nm + 1) * sizeof(float), (void **)&mask));
    MXC_TRY(mxc__philox_fill_gpu(&c->resources[0]->rng, mask, nm, false, 0.0f, 1.0f, stream));
    const float keep = 1.0f - p->p;
    MXC_TRY(mxc__dropout_mask_gpu(mask, nm, true, keep, mxc__dropout_scale(keep), stream));
    MXC_TRY(mxc__dropout_mul_gpu(y->data, x->data, mask, x->shape.ndim, x->shape.dims,
                                 mk->shape.dims, c->req[0], stream));
    if (c->req[1] == MXC__REQ_ADD)
        MXC_TRY(mxc__copy_req_gpu(mk->data, mask, nm, MXC__REQ_ADD, stream));
fail:
    return rc;
}

/* dropout_backward on a GPU. */
static int dropout_backward_gpu(const struct mxc__op_call *c) {
    const struct mxc__tensor *dy = &c->out_grad[0], *dx = &c->in_grad[0];
    const struct mxc__tensor *mk = &c->out_data[1];
    if (!dropout_active(c))
        return mxc__copy_req_gpu(dx->data, dy->data, dx->size, c->req[0], c->rctx->stream);
    return mxc__dropout_mul_gpu(dx->data, dy->data, mk->data, dy->shape.ndim, dy->shape.dims,
                                mk->shape.dims, c->req[0], c->rctx->stream);
}
#endif

const struct mxc__op_def mxc__op_Dropout = {
    .name = "Dropout",
    .description = "zeroes elements with probability p and scales the rest by 1 / (1 - p)",
    .param_size = sizeof(struct dropout_param),
    .params = dropout_params,
    .num_params = (int)MXC_ARRAY_SIZE(dropout_params),
    .inputs = dropout_inputs,
    .outputs = dropout_outputs,
    .num_visible_outputs = 1,
    .infer_shape = dropout_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_OUT_DATA,
    .inplace = MXC__INPLACE(0, 0),
    .backward_inplace = MXC__INPLACE(0, 0),
    .forward_resources = {MXC__RES_RANDOM + 1, MXC__RES_TEMP + 1},
    .forward_cpu = dropout_forward,
    .backward_cpu = dropout_backward,
    .forward_gpu = MXC__GPU(dropout_forward_gpu),
    .backward_gpu = MXC__GPU(dropout_backward_gpu),
};

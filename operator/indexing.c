/*
 * operator/indexing.c — selection by condition and by index: where, take, pick, one_hot,
 * and the positions of extremes: argmax, argmin, argmax_channel (MXNet 1.9.1's names,
 * parameters and rules). Index inputs and index outputs are float32 arrays holding
 * integers; an index value is truncated toward zero, and out-of-range ones are clipped or
 * wrapped as `mode` says (operator/indexing.h). Gradients flow to the data inputs (take's
 * a scatter-add, as Embedding's); index inputs and the condition get zeros, and so do
 * argmax, argmin and one_hot's inputs, as in MXNet (argmax_channel has no backward, as in
 * MXNet). Each kernel below makes its view of the tensors here and runs its loops on the
 * CPU or, in a CUDA build, through the launchers of operator/indexing_gpu.cu; the
 * per-element rules are the MXC__HD functions of operator/indexing.h. float32, row-major.
 */
#include "operator/indexing.h"

#include "operator/gpu.h"
#include "operator/op.h"

#include <string.h>

/* o[k] = or += v as `req` says (not NULL). */
static inline void store(int req, float *o, int64_t k, float v) {
    if (req == MXC__REQ_ADD)
        o[k] += v;
    else
        o[k] = v;
}

/* ---- What the family shares (declared in operator/indexing.h) ------------------------ */

int mxc__index_axis(const char *op, const struct mxc__opt_float *axis, const mxc_shape *s,
                    int *out) {
    char b[128];
    if (!axis->has_value) {
        *out = MXC__AXIS_NONE;
        return MXC_OK;
    }
    float v = axis->value;
    if (v != (float)(int)v || v < (float)-s->ndim || v >= (float)s->ndim)
        return mxc__error(MXC_EINVAL,
                          "%s: axis=%g is not an axis of data %s (an integer in [%d, %d])", op,
                          (double)v, mxc__shape_str(s, b, sizeof b), -s->ndim, s->ndim - 1);
    *out = (int)v < 0 ? (int)v + s->ndim : (int)v;
    return MXC_OK;
}

void mxc__index_view(const mxc_shape *s, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
    if (axis == MXC__AXIS_NONE) {
        *outer = *inner = 1;
        *n = mxc_shape_size(s);
        return;
    }
    *outer = *inner = 1;
    for (int a = 0; a < axis; a++)
        *outer *= s->dims[a];
    for (int a = axis + 1; a < s->ndim; a++)
        *inner *= s->dims[a];
    *n = s->dims[axis];
}

/* Written gradients (write requests) are zeroed; added-to ones keep their value. */
int mxc__index_zero_grads(const struct mxc__op_call *c, int num_in, bool gpu) {
    for (int i = 0; i < num_in; i++) {
        if (c->req[i] != MXC__REQ_WRITE && c->req[i] != MXC__REQ_INPLACE)
            continue;
        size_t bytes = (size_t)c->in_grad[i].size * sizeof(float);
#ifdef MXC_USE_CUDA
        if (gpu) {
            int rc = mxc__gpu_memset0(c->in_grad[i].data, bytes, c->rctx->stream);
            if (rc != MXC_OK)
                return rc;
            continue;
        }
#endif
        (void)gpu;
        memset(c->in_grad[i].data, 0, bytes);
    }
    return MXC_OK;
}

/* ---- where ----------------------------------------------------------------------------- */

static const char *const where_inputs[] = {"condition", "x", "y", NULL};
static const char *const one_output[] = {"output", NULL};

/* x, y, output: one shape; condition: that shape, or 1-D over its first axis. */
static int where_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                       mxc_shape *aux, int num_aux) {
    (void)params, (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    const char *op = "where";
    char a[128], b[128];
    int rc = MXC_OK;
    MXC_TRY(mxc__shape_assign(&in[1], &in[2], op, "x"));
    MXC_TRY(mxc__shape_assign(&in[1], &out[0], op, "x"));
    MXC_TRY(mxc__shape_assign(&in[2], &in[1], op, "y"));
    MXC_TRY(mxc__shape_assign(&out[0], &in[1], op, "output"));
    if (in[1].ndim == 0)
        return MXC_OK;
    if (in[0].ndim == 0) {
        in[0] = in[1];
        return MXC_OK;
    }
    bool same = in[0].ndim == in[1].ndim;
    for (int d = 0; same && d < in[0].ndim; d++)
        same = in[0].dims[d] == in[1].dims[d];
    MXC_CHECK(same || (in[0].ndim == 1 && in[0].dims[0] == in[1].dims[0]), MXC_ESHAPE,
              "where: condition %s is neither x's shape %s nor 1-D of its first axis (%lld)",
              mxc__shape_str(&in[0], a, sizeof a), mxc__shape_str(&in[1], b, sizeof b),
              (long long)in[1].dims[0]);
fail:
    return rc;
}

/* How many elements of x one condition element covers: 1, or a first-axis slice. */
static int64_t where_cond_inner(const struct mxc__tensor *cond, int64_t size) {
    return cond->size == size || cond->size == 0 ? 1 : size / cond->size;
}

/* out (=, +=) where(cond, x, y); out may be x or y (each element read before it is
 * stored). */
static int where_forward_on(const struct mxc__op_call *c, bool gpu) {
    int req = c->req[0];
    const float *cond = c->in_data[0].data, *x = c->in_data[1].data, *y = c->in_data[2].data;
    float *o = c->out_data[0].data;
    int64_t size = c->out_data[0].size, ci = where_cond_inner(&c->in_data[0], size);
    if (req == MXC__REQ_NULL)
        return MXC_OK;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__where_gpu(cond, x, y, o, size, ci, req, c->rctx->stream);
#endif
    (void)gpu;
    for (int64_t k = 0; k < size; k++)
        store(req, o, k, mxc__where(cond[k / ci], x[k], y[k]));
    return MXC_OK;
}

/* d_x = og where the condition holds, d_y = og where not, d_condition = 0. d_x may be og
 * (both gradients of element k are made from og[k] before either is stored). */
static int where_backward_on(const struct mxc__op_call *c, bool gpu) {
    const float *cond = c->in_data[0].data, *g = c->out_grad[0].data;
    int64_t size = c->out_grad[0].size, ci = where_cond_inner(&c->in_data[0], size);
    int rx = c->req[1], ry = c->req[2];
    float *gx = rx ? c->in_grad[1].data : NULL, *gy = ry ? c->in_grad[2].data : NULL;
    int rc = mxc__index_zero_grads(c, 1, gpu);
    if (rc != MXC_OK)
        return rc;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__where_grad_gpu(cond, g, gx, gy, size, ci, rx, ry, c->rctx->stream);
#endif
    for (int64_t k = 0; k < size; k++) {
        float gk = g[k], ck = cond[k / ci];
        if (gy)
            store(ry, gy, k, mxc__where(ck, 0.0f, gk));
        if (gx)
            store(rx, gx, k, mxc__where(ck, gk, 0.0f));
    }
    return MXC_OK;
}

static int where_forward(const struct mxc__op_call *c) { return where_forward_on(c, false); }
static int where_backward(const struct mxc__op_call *c) { return where_backward_on(c, false); }
#ifdef MXC_USE_CUDA
static int where_forward_gpu(const struct mxc__op_call *c) { return where_forward_on(c, true); }
static int where_backward_gpu(const struct mxc__op_call *c) { return where_backward_on(c, true); }
#endif

const struct mxc__op_def mxc__op_where = {
    .name = "where",
    .description = "x where condition is not zero, else y (condition: x's shape, or 1-D over "
                   "x's first axis)",
    .inputs = where_inputs,
    .outputs = one_output,
    .infer_shape = where_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .inplace = MXC__INPLACE(1, 0),
    .backward_inplace = MXC__INPLACE(1, 0),
    .forward_cpu = where_forward,
    .backward_cpu = where_backward,
    .forward_gpu = MXC__GPU(where_forward_gpu),
    .backward_gpu = MXC__GPU(where_backward_gpu),
};

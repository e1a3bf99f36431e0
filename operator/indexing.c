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

int mxc__index_find_outside_on(const struct mxc__op_call *c, bool gpu, struct mxc__resource *temp,
                               const float *v, int64_t n, struct mxc__index_range r, int64_t *first,
                               float *value) {
#ifdef MXC_USE_CUDA
    if (gpu) {
        void *mark;
        int rc = mxc__resource_temp(temp, sizeof(int64_t), &mark);
        if (rc != MXC_OK)
            return rc;
        return mxc__index_find_outside_gpu(v, n, r, mark, c->rctx->stream, first, value);
    }
#endif
    (void)c, (void)gpu, (void)temp;
    *first = mxc__index_find_outside(v, n, &r);
    *value = *first >= 0 ? v[*first] : 0.0f;
    return MXC_OK;
}

/* A shape as MXNet's legacy arrays have it: a result without axes is (1,). */
static mxc_shape legacy(mxc_shape s) {
    return s.ndim ? s : mxc_shape_make(1, (const int64_t[]){1});
}

/* `s` without axis `axis`, or with it set to 1 when `keep`. */
static mxc_shape drop_axis(const mxc_shape *s, int axis, bool keep) {
    mxc_shape o = {0};
    for (int a = 0; a < s->ndim; a++) {
        if (a != axis)
            o.dims[o.ndim++] = s->dims[a];
        else if (keep)
            o.dims[o.ndim++] = 1;
    }
    return legacy(o);
}

static const char *const mode_choices[] = {"clip", "wrap", "raise", NULL};

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
        mxc__index_store(req, o, k, mxc__where(cond[k / ci], x[k], y[k]));
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
            mxc__index_store(ry, gy, k, mxc__where(ck, 0.0f, gk));
        if (gx)
            mxc__index_store(rx, gx, k, mxc__where(ck, gk, 0.0f));
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

/* ---- take ------------------------------------------------------------------------------ */

struct take_param {
    int axis;
    int mode;
};

static const struct mxc__param take_params[] = {
    MXC__P_INT(struct take_param, axis, "0", -MXC_MAX_NDIM, MXC_MAX_NDIM - 1,
               "the axis of a to take from (negative: from the end)"),
    MXC__P_ENUM(struct take_param, mode, "clip", mode_choices,
                "out-of-range indices: clip to the ends, wrap around, or raise an error"),
};

static const char *const take_inputs[] = {"a", "indices", NULL};

/* a (A0 .. A{axis} .. ), indices (I...) -> output (A0 .. A{axis-1}, I..., A{axis+1} ..). */
static int take_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                      mxc_shape *aux, int num_aux) {
    const struct take_param *p = params;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    char a[128], b[128];
    int rc = MXC_OK;
    if (in[0].ndim == 0 || in[1].ndim == 0)
        return MXC_OK;
    int nd = in[0].ndim, axis = p->axis < 0 ? p->axis + nd : p->axis;
    MXC_CHECK(axis >= 0 && axis < nd, MXC_EINVAL, "take: axis=%d is not an axis of a %s", p->axis,
              mxc__shape_str(&in[0], a, sizeof a));
    MXC_CHECK(nd - 1 + in[1].ndim <= MXC_MAX_NDIM, MXC_ENOTSUP,
              "take: a %s and indices %s make an output of more than %d axes",
              mxc__shape_str(&in[0], a, sizeof a), mxc__shape_str(&in[1], b, sizeof b),
              MXC_MAX_NDIM);
    mxc_shape o = {0};
    for (int d = 0; d < nd; d++) {
        if (d != axis) {
            o.dims[o.ndim++] = in[0].dims[d];
            continue;
        }
        for (int i = 0; i < in[1].ndim; i++)
            o.dims[o.ndim++] = in[1].dims[i];
    }
    MXC_CHECK(in[0].dims[axis] > 0 || mxc_shape_size(&o) == 0, MXC_EINVAL,
              "take: axis %d of a %s is empty: indices %s have nothing to take", axis,
              mxc__shape_str(&in[0], a, sizeof a), mxc__shape_str(&in[1], b, sizeof b));
    MXC_TRY(mxc__shape_assign(&out[0], &o, "take", "output"));
fail:
    return rc;
}

struct take_view {
    int64_t outer, n, inner, m; /* a (outer, n, inner), indices (m), output (outer, m, inner) */
    int mode;
};

static struct take_view take_view_of(const struct take_param *p, const mxc_shape *a, int64_t m) {
    struct take_view v = {.m = m, .mode = p->mode};
    mxc__index_view(a, p->axis < 0 ? p->axis + a->ndim : p->axis, &v.outer, &v.n, &v.inner);
    return v;
}

/* mode=raise: MXC_EINVAL naming the first index outside [0, n - 1], on either device. */
static int check_range(const struct mxc__op_call *c, bool gpu, const float *idx, int64_t m,
                       int64_t n) {
    int64_t bad;
    float x;
    int rc = mxc__index_find_outside_on(c, gpu, c->resources[0], idx, m, mxc__index_raise_range(n),
                                        &bad, &x);
    if (rc != MXC_OK || bad < 0)
        return rc;
    return mxc__error(MXC_EINVAL, "take: index %g (at %lld) is outside [0, %lld] with mode=raise",
                      (double)x, (long long)bad, (long long)(n - 1));
}

/* out[o, i, :] (=, +=) a[o, index(idx[i]), :] */
static int take_forward_on(const struct mxc__op_call *c, bool gpu) {
    int req = c->req[0];
    const float *a = c->in_data[0].data, *idx = c->in_data[1].data;
    float *out = c->out_data[0].data;
    struct take_view v = take_view_of(c->params, &c->in_data[0].shape, c->in_data[1].size);
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    if (v.mode == MXC__INDEX_RAISE) {
        int rc = check_range(c, gpu, idx, v.m, v.n);
        if (rc != MXC_OK)
            return rc;
    }
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__take_gpu(a, idx, out, v.outer, v.n, v.inner, v.m, v.mode, req, c->rctx->stream);
#endif
    (void)gpu;
    for (int64_t o = 0; o < v.outer; o++)
        for (int64_t i = 0; i < v.m; i++) {
            const float *src = a + (o * v.n + mxc__index_resolve(idx[i], v.n, v.mode)) * v.inner;
            float *dst = out + (o * v.m + i) * v.inner;
            for (int64_t r = 0; r < v.inner; r++)
                mxc__index_store(req, dst, r, src[r]);
        }
    return MXC_OK;
}

/* d_a[o, index(idx[i]), :] += d_out[o, i, :] (zeroed first unless add-to); d_indices = 0. */
static int take_backward_on(const struct mxc__op_call *c, bool gpu) {
    const float *idx = c->in_data[1].data, *g = c->out_grad[0].data;
    int rc = mxc__index_zero_grads(c, 2, gpu);
    if (rc != MXC_OK || c->req[0] == MXC__REQ_NULL)
        return rc;
    float *ga = c->in_grad[0].data;
    struct take_view v = take_view_of(c->params, &c->in_grad[0].shape, c->in_data[1].size);
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__take_grad_gpu(g, idx, ga, v.outer, v.n, v.inner, v.m, v.mode, c->rctx->stream);
#endif
    for (int64_t o = 0; o < v.outer; o++)
        for (int64_t i = 0; i < v.m; i++) {
            float *dst = ga + (o * v.n + mxc__index_resolve(idx[i], v.n, v.mode)) * v.inner;
            const float *src = g + (o * v.m + i) * v.inner;
            for (int64_t r = 0; r < v.inner; r++)
                dst[r] += src[r];
        }
    return MXC_OK;
}

static int take_forward(const struct mxc__op_call *c) { return take_forward_on(c, false); }
static int take_backward(const struct mxc__op_call *c) { return take_backward_on(c, false); }
#ifdef MXC_USE_CUDA
static int take_forward_gpu(const struct mxc__op_call *c) { return take_forward_on(c, true); }
static int take_backward_gpu(const struct mxc__op_call *c) { return take_backward_on(c, true); }
#endif

const struct mxc__op_def mxc__op_take = {
    .name = "take",
    .description = "Slices of a along axis at the given indices",
    .param_size = sizeof(struct take_param),
    .params = take_params,
    .num_params = (int)MXC_ARRAY_SIZE(take_params),
    .inputs = take_inputs,
    .outputs = one_output,
    .infer_shape = take_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .forward_resources = {MXC__RES_TEMP + 1}, /* mode=raise's check on a GPU */
    .forward_cpu = take_forward,
    .backward_cpu = take_backward,
    .forward_gpu = MXC__GPU(take_forward_gpu),
    .backward_gpu = MXC__GPU(take_backward_gpu),
};

/* ---- pick ------------------------------------------------------------------------------ */

static const char *const pick_mode_choices[];

struct pick_param {
    struct mxc__opt_float axis;
    bool keepdims;
    int mode;
};

static const struct mxc__param pick_params[] = {
    {"axis", MXC__PARAM_OPT_FLOAT, offsetof(struct pick_param, axis), "-1", 1, 0, NULL,
     "int: the axis to pick along (negative: from the end); None is refused, as by MXNet"},
    MXC__P_BOOL(struct pick_param, keepdims, "False", "keep the axis, with size 1"),
    MXC__P_ENUM(struct pick_param, mode, "clip", pick_mode_choices,
                "out-of-range indices: clip to the ends or wrap around"),
};

static const char *const pick_mode_choices[] = {"clip", "wrap", NULL}; /* MXNet's: no raise */
static const char *const pick_inputs[] = {"data", "index", NULL};

/* pick's axis on `data`: an int, not None. */
static int pick_axis(const struct pick_param *p, const mxc_shape *data, int *axis) {
    int rc = mxc__index_axis("pick", &p->axis, data, axis);
    if (rc == MXC_OK && *axis == MXC__AXIS_NONE)
        return mxc__error(MXC_ENOTSUP, "pick: axis=None is not supported (nor by MXNet): "
                                       "name the axis to pick along");
    return rc;
}

/* data (..., n, ...) -> output: data without axis (keepdims: with it as 1); index: the
 * output's shape, or data's with the axis as 1 (which MXNet takes too). */
static int pick_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                      mxc_shape *aux, int num_aux) {
    const struct pick_param *p = params;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    char a[128], b[128], e[128];
    int rc = MXC_OK, axis = 0;
    if (in[0].ndim == 0)
        return MXC_OK;
    MXC_TRY(pick_axis(p, &in[0], &axis));
    mxc_shape o = drop_axis(&in[0], axis, p->keepdims), kept = drop_axis(&in[0], axis, true);
    MXC_CHECK(in[0].dims[axis] > 0 || mxc_shape_size(&o) == 0, MXC_EINVAL,
              "pick: axis %d of data %s is empty: there is nothing to pick", axis,
              mxc__shape_str(&in[0], a, sizeof a));
    MXC_TRY(mxc__shape_assign(&out[0], &o, "pick", "output"));
    if (in[1].ndim == 0) {
        in[1] = o;
        return MXC_OK;
    }
    mxc_shape dropped = drop_axis(&in[0], axis, false);
    bool ok = false;
    for (int f = 0; f < 2 && !ok; f++) {
        const mxc_shape *w = f ? &kept : &dropped;
        ok = in[1].ndim == w->ndim;
        for (int d = 0; ok && d < w->ndim; d++)
            ok = in[1].dims[d] == w->dims[d];
    }
    MXC_CHECK(ok, MXC_ESHAPE, "pick: index %s does not fit data %s along axis %d (expected %s)",
              mxc__shape_str(&in[1], a, sizeof a), mxc__shape_str(&in[0], b, sizeof b), axis,
              mxc__shape_str(&o, e, sizeof e));
fail:
    return rc;
}

/* The (outer, n, inner) view of pick's data (forward: in_data, backward: in_grad). */
static void pick_view(const struct mxc__op_call *c, const mxc_shape *data, int64_t *outer,
                      int64_t *n, int64_t *inner) {
    int axis = 0;
    pick_axis(c->params, data, &axis); /* checked by the shape inference */
    mxc__index_view(data, axis, outer, n, inner);
}

/* out[o, r] (=, +=) data[o, index(idx[o, r]), r] */
static int pick_forward_on(const struct mxc__op_call *c, bool gpu) {
    const struct pick_param *p = c->params;
    int req = c->req[0];
    const float *x = c->in_data[0].data, *idx = c->in_data[1].data;
    float *out = c->out_data[0].data;
    int64_t outer, n, inner;
    pick_view(c, &c->in_data[0].shape, &outer, &n, &inner);
    if (req == MXC__REQ_NULL)
        return MXC_OK;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__pick_gpu(x, idx, out, outer, n, inner, p->mode, req, c->rctx->stream);
#endif
    (void)gpu;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t r = 0; r < inner; r++) {
            int64_t k = o * inner + r;
            mxc__index_store(req, out, k,
                             x[(o * n + mxc__index_resolve(idx[k], n, p->mode)) * inner + r]);
        }
    return MXC_OK;
}

/* d_data[o, j, r] (=, +=) d_out[o, r] where j is the picked element, else 0; d_index = 0. */
static int pick_backward_on(const struct mxc__op_call *c, bool gpu) {
    const struct pick_param *p = c->params;
    const float *idx = c->in_data[1].data, *g = c->out_grad[0].data;
    int req = c->req[0];
    int rc = mxc__index_zero_grads(c, 2, gpu);
    if (rc != MXC_OK || req == MXC__REQ_NULL)
        return rc;
    float *gd = c->in_grad[0].data;
    int64_t outer, n, inner;
    pick_view(c, &c->in_grad[0].shape, &outer, &n, &inner);
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__pick_grad_gpu(g, idx, gd, outer, n, inner, p->mode, req, c->rctx->stream);
#endif
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t r = 0; r < inner; r++) {
                int64_t k = o * inner + r;
                bool hit = mxc__index_resolve(idx[k], n, p->mode) == j;
                mxc__index_store(req, gd, (o * n + j) * inner + r, hit ? g[k] : 0.0f);
            }
    return MXC_OK;
}

static int pick_forward(const struct mxc__op_call *c) { return pick_forward_on(c, false); }
static int pick_backward(const struct mxc__op_call *c) { return pick_backward_on(c, false); }
#ifdef MXC_USE_CUDA
static int pick_forward_gpu(const struct mxc__op_call *c) { return pick_forward_on(c, true); }
static int pick_backward_gpu(const struct mxc__op_call *c) { return pick_backward_on(c, true); }
#endif

const struct mxc__op_def mxc__op_pick = {
    .name = "pick",
    .description = "One element of data along axis per position of index",
    .param_size = sizeof(struct pick_param),
    .params = pick_params,
    .num_params = (int)MXC_ARRAY_SIZE(pick_params),
    .inputs = pick_inputs,
    .outputs = one_output,
    .infer_shape = pick_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .forward_cpu = pick_forward,
    .backward_cpu = pick_backward,
    .forward_gpu = MXC__GPU(pick_forward_gpu),
    .backward_gpu = MXC__GPU(pick_backward_gpu),
};

/* ---- one_hot --------------------------------------------------------------------------- */

struct one_hot_param {
    int depth;
    float on_value, off_value;
    int dtype;
};

static const char *const dtype_choices[] = {"bfloat16", "float16", "float32", "float64", "int32",
                                            "int64",    "int8",    "uint8",   NULL};
enum { DTYPE_FLOAT32 = 2 };

static const struct mxc__param one_hot_params[] = {
    MXC__P_INT(struct one_hot_param, depth, NULL, 1, 2147483647, "number of classes"),
    MXC__P_FLOAT(struct one_hot_param, on_value, "1", 1, 0, "the value of the class"),
    MXC__P_FLOAT(struct one_hot_param, off_value, "0", 1, 0, "the value of the other classes"),
    MXC__P_ENUM(struct one_hot_param, dtype, "float32", dtype_choices,
                "output type (float32 only)"),
};

static const char *const one_hot_inputs[] = {"indices", NULL};

/* indices (...) <-> output (..., depth) */
static int one_hot_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                         mxc_shape *aux, int num_aux) {
    const struct one_hot_param *p = params;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    char b[128];
    int rc = MXC_OK;
    MXC_CHECK(p->dtype == DTYPE_FLOAT32, MXC_ENOTSUP,
              "one_hot: dtype=%s is not supported (float32 only)", dtype_choices[p->dtype]);
    if (in[0].ndim == 0 && out[0].ndim >= 2) {
        MXC_CHECK(out[0].dims[out[0].ndim - 1] == p->depth, MXC_ESHAPE,
                  "one_hot: output %s does not end in depth=%d",
                  mxc__shape_str(&out[0], b, sizeof b), p->depth);
        in[0] = out[0];
        in[0].ndim--;
    }
    if (in[0].ndim == 0)
        return MXC_OK;
    MXC_CHECK(in[0].ndim < MXC_MAX_NDIM, MXC_ENOTSUP,
              "one_hot: indices %s leave no room for the class axis (at most %d axes)",
              mxc__shape_str(&in[0], b, sizeof b), MXC_MAX_NDIM);
    mxc_shape o = in[0];
    o.dims[o.ndim++] = p->depth;
    MXC_TRY(mxc__shape_assign(&out[0], &o, "one_hot", "output"));
fail:
    return rc;
}

/* out[i, d] (=, +=) idx[i] names class d ? on_value : off_value */
static int one_hot_forward_on(const struct mxc__op_call *c, bool gpu) {
    const struct one_hot_param *p = c->params;
    int req = c->req[0];
    const float *idx = c->in_data[0].data;
    float *out = c->out_data[0].data;
    int64_t m = c->in_data[0].size, depth = p->depth;
    if (req == MXC__REQ_NULL)
        return MXC_OK;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__one_hot_gpu(idx, out, m, depth, p->on_value, p->off_value, req,
                                c->rctx->stream);
#endif
    (void)gpu;
    for (int64_t i = 0; i < m; i++)
        for (int64_t d = 0; d < depth; d++)
            mxc__index_store(req, out, i * depth + d,
                             mxc__one_hot_is(idx[i], d, depth) ? p->on_value : p->off_value);
    return MXC_OK;
}

static int one_hot_forward(const struct mxc__op_call *c) { return one_hot_forward_on(c, false); }
/* The backward of one_hot, argmax and argmin (one input each): a zero gradient. */
static int zero_backward(const struct mxc__op_call *c) {
    return mxc__index_zero_grads(c, 1, false);
}
#ifdef MXC_USE_CUDA
static int one_hot_forward_gpu(const struct mxc__op_call *c) { return one_hot_forward_on(c, true); }
static int zero_backward_gpu(const struct mxc__op_call *c) {
    return mxc__index_zero_grads(c, 1, true);
}
#endif

const struct mxc__op_def mxc__op_one_hot = {
    .name = "one_hot",
    .description = "on_value at each index's class of depth, off_value elsewhere (indices "
                   "outside [0, depth): a row of off_value)",
    .param_size = sizeof(struct one_hot_param),
    .params = one_hot_params,
    .num_params = (int)MXC_ARRAY_SIZE(one_hot_params),
    .inputs = one_hot_inputs,
    .outputs = one_output,
    .infer_shape = one_hot_shape,
    .backward_deps = MXC__DEP_OUT_GRAD, /* a zero gradient, as MXNet's */
    .forward_cpu = one_hot_forward,
    .backward_cpu = zero_backward,
    .forward_gpu = MXC__GPU(one_hot_forward_gpu),
    .backward_gpu = MXC__GPU(zero_backward_gpu),
};

/* ---- argmax, argmin, argmax_channel ------------------------------------------------------ */

struct arg_param {
    struct mxc__opt_float axis;
    bool keepdims;
};

static const struct mxc__param arg_params[] = {
    MXC__P_OPT_FLOAT(struct arg_param, axis,
                     "int or None: the axis to search along (negative: from the end); None "
                     "searches the whole array, flattened"),
    MXC__P_BOOL(struct arg_param, keepdims, "False", "keep the axis (None: all axes), size 1"),
};

static const char *const data_input[] = {"data", NULL};

/* data -> the positions: data without the axis (keepdims: as 1; None: (1,), or data's rank
 * of ones). An empty axis is refused unless there is nothing to search. */
static int arg_shape_of(const char *op, int axis, bool keepdims, mxc_shape *in, mxc_shape *out) {
    char b[128];
    int rc = MXC_OK;
    mxc_shape o = {0};
    if (axis != MXC__AXIS_NONE) {
        o = drop_axis(&in[0], axis, keepdims);
    } else if (keepdims) {
        o.ndim = in[0].ndim;
        for (int a = 0; a < o.ndim; a++)
            o.dims[a] = 1;
    }
    o = legacy(o);
    int64_t outer, n, inner;
    mxc__index_view(&in[0], axis, &outer, &n, &inner);
    if (n == 0 && mxc_shape_size(&o) > 0) {
        mxc__shape_str(&in[0], b, sizeof b);
        if (axis == MXC__AXIS_NONE)
            return mxc__error(MXC_EINVAL, "%s: data %s is empty: it has no extreme", op, b);
        return mxc__error(MXC_EINVAL, "%s: axis %d of data %s is empty: it has no extreme", op,
                          axis, b);
    }
    MXC_TRY(mxc__shape_assign(&out[0], &o, op, "output"));
fail:
    return rc;
}

/* out (outer, inner) (=, +=) the position of the first extreme of each row (outer, n, inner)
 * of data. */
static int arg_run(const struct mxc__op_call *c, int axis, bool is_max, bool gpu) {
    int req = c->req[0];
    const float *x = c->in_data[0].data;
    float *out = c->out_data[0].data;
    int64_t outer, n, inner;
    mxc__index_view(&c->in_data[0].shape, axis, &outer, &n, &inner);
    if (req == MXC__REQ_NULL || n == 0)
        return MXC_OK;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__arg_extreme_gpu(x, out, outer, n, inner, is_max, req, c->rctx->stream);
#endif
    (void)gpu;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t r = 0; r < inner; r++)
            mxc__index_store(req, out, o * inner + r,
                             (float)mxc__arg_extreme(x + o * n * inner + r, n, inner, is_max));
    return MXC_OK;
}

/* argmax's and argmin's GPU entry point, in a CUDA build. */
#ifdef MXC_USE_CUDA
#define ARG_GPU(ident) \
    static int ident##_forward_gpu(const struct mxc__op_call *c) { return ident##_on(c, true); }
#else
#define ARG_GPU(ident)
#endif

#define ARG_OP(ident, is_max, what)                                                            \
    static int ident##_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out,    \
                             int num_out, mxc_shape *aux, int num_aux) {                       \
        const struct arg_param *p = params;                                                    \
        (void)num_in, (void)num_out, (void)aux, (void)num_aux;                                 \
        int axis = MXC__AXIS_NONE, rc;                                                         \
        if (in[0].ndim == 0)                                                                   \
            return MXC_OK;                                                                     \
        rc = mxc__index_axis(#ident, &p->axis, &in[0], &axis);                                 \
        return rc != MXC_OK ? rc : arg_shape_of(#ident, axis, p->keepdims, in, out);           \
    }                                                                                          \
    static int ident##_on(const struct mxc__op_call *c, bool gpu) {                            \
        const struct arg_param *p = c->params;                                                 \
        int axis = MXC__AXIS_NONE;                                                             \
        int rc = mxc__index_axis(#ident, &p->axis, &c->in_data[0].shape, &axis);               \
        return rc != MXC_OK ? rc : arg_run(c, axis, is_max, gpu);                              \
    }                                                                                          \
    static int ident##_forward(const struct mxc__op_call *c) { return ident##_on(c, false); }  \
    ARG_GPU(ident)                                                                             \
    const struct mxc__op_def mxc__op_##ident = {                                               \
        .name = #ident,                                                                        \
        .description = "The position of the first " what " along axis (float32; a NaN counts " \
                       "as the " what ")",                                                     \
        .param_size = sizeof(struct arg_param),                                                \
        .params = arg_params,                                                                  \
        .num_params = (int)MXC_ARRAY_SIZE(arg_params),                                         \
        .inputs = data_input,                                                                  \
        .outputs = one_output,                                                                 \
        .infer_shape = ident##_shape,                                                          \
        .backward_deps = MXC__DEP_OUT_GRAD, /* a zero gradient, as MXNet's */                  \
        .forward_cpu = ident##_forward,                                                        \
        .backward_cpu = zero_backward,                                                         \
        .forward_gpu = MXC__GPU(ident##_forward_gpu),                                          \
        .backward_gpu = MXC__GPU(zero_backward_gpu),                                           \
    };
ARG_OP(argmax, true, "maximum")
ARG_OP(argmin, false, "minimum")

/* argmax_channel: argmax along axis 1 (data of 2 axes or more), not differentiable (as in
 * MXNet). */
static int argmax_channel_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out,
                                int num_out, mxc_shape *aux, int num_aux) {
    (void)params, (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    char b[128];
    if (in[0].ndim == 0)
        return MXC_OK;
    if (in[0].ndim < 2)
        return mxc__error(MXC_ESHAPE, "argmax_channel: data %s has no axis 1 (channels)",
                          mxc__shape_str(&in[0], b, sizeof b));
    return arg_shape_of("argmax_channel", 1, false, in, out);
}

static int argmax_channel_forward(const struct mxc__op_call *c) {
    return arg_run(c, 1, true, false);
}
#ifdef MXC_USE_CUDA
static int argmax_channel_forward_gpu(const struct mxc__op_call *c) {
    return arg_run(c, 1, true, true);
}
#endif

const struct mxc__op_def mxc__op_argmax_channel = {
    .name = "argmax_channel",
    .description = "The position of the first maximum along axis 1 (float32)",
    .inputs = data_input,
    .outputs = one_output,
    .infer_shape = argmax_channel_shape,
    .forward_cpu = argmax_channel_forward,
    .forward_gpu = MXC__GPU(argmax_channel_forward_gpu),
};

/* ---- gather_nd ------------------------------------------------------------------------- */

static const char *const gather_inputs[] = {"data", "indices", NULL};

/* data (n0, ..., n{m-1}, rest...), indices (m, Y...) -> output (Y..., rest...). */
static int gather_nd_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out,
                           int num_out, mxc_shape *aux, int num_aux) {
    (void)params, (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    char a[128], b[128];
    int rc = MXC_OK;
    if (in[0].ndim == 0 || in[1].ndim == 0)
        return MXC_OK;
    int64_t m = in[1].dims[0];
    MXC_CHECK(m >= 1 && m <= in[0].ndim, MXC_ESHAPE,
              "gather_nd: indices %s index %lld axes; data %s has %d",
              mxc__shape_str(&in[1], a, sizeof a), (long long)m,
              mxc__shape_str(&in[0], b, sizeof b), in[0].ndim);
    MXC_CHECK(in[1].ndim - 1 + in[0].ndim - m <= MXC_MAX_NDIM, MXC_ENOTSUP,
              "gather_nd: data %s and indices %s make an output of more than %d axes",
              mxc__shape_str(&in[0], a, sizeof a), mxc__shape_str(&in[1], b, sizeof b),
              MXC_MAX_NDIM);
    mxc_shape o = {0};
    for (int d = 1; d < in[1].ndim; d++)
        o.dims[o.ndim++] = in[1].dims[d];
    for (int d = (int)m; d < in[0].ndim; d++)
        o.dims[o.ndim++] = in[0].dims[d];
    o = legacy(o);
    MXC_TRY(mxc__shape_assign(&out[0], &o, "gather_nd", "output"));
fail:
    return rc;
}

static struct mxc__gather_view gather_view(const mxc_shape *data, const struct mxc__tensor *idx) {
    struct mxc__gather_view v = {.m = (int)idx->shape.dims[0], .inner = 1, .rows = 1};
    for (int d = 0; d < data->ndim; d++) {
        if (d < v.m) {
            v.n[d] = data->dims[d];
            v.rows *= data->dims[d];
        } else {
            v.inner *= data->dims[d];
        }
    }
    v.count = v.m ? idx->size / v.m : 0;
    return v;
}

/* The CPU refuses an index outside its axis (MXNet's CPU raises IndexError). */
static int gather_check(const struct mxc__gather_view *v, const float *idx) {
    for (int d = 0; d < v->m; d++)
        for (int64_t y = 0; y < v->count; y++) {
            float f = idx[d * v->count + y];
            int64_t p = mxc__gather_pos(f, v->n[d]);
            if (p < 0 || p >= v->n[d])
                return mxc__error(MXC_EINVAL,
                                  "gather_nd: index %g (indices[%d, %lld]) is out of bounds "
                                  "for axis %d of size %lld",
                                  (double)f, d, (long long)y, d, (long long)v->n[d]);
        }
    return MXC_OK;
}

/* out[y, :] (=, +=) data[row(indices[:, y]), :] */
static int gather_nd_forward_on(const struct mxc__op_call *c, bool gpu) {
    int req = c->req[0];
    const float *x = c->in_data[0].data, *idx = c->in_data[1].data;
    float *out = c->out_data[0].data;
    struct mxc__gather_view v = gather_view(&c->in_data[0].shape, &c->in_data[1]);
    if (req == MXC__REQ_NULL)
        return MXC_OK;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__gather_nd_gpu(v, x, idx, out, req, c->rctx->stream);
#endif
    (void)gpu;
    int rc = gather_check(&v, idx);
    for (int64_t y = 0; rc == MXC_OK && y < v.count; y++) {
        const float *src = x + mxc__gather_row(&v, idx, y) * v.inner;
        for (int64_t r = 0; r < v.inner; r++)
            mxc__index_store(req, out, y * v.inner + r, src[r]);
    }
    return rc;
}

/* d_data[row(indices[:, y]), :] += d_out[y, :] (zeroed first unless add-to); d_indices = 0. */
static int gather_nd_backward_on(const struct mxc__op_call *c, bool gpu) {
    const float *idx = c->in_data[1].data, *g = c->out_grad[0].data;
    int rc = mxc__index_zero_grads(c, 2, gpu);
    if (rc != MXC_OK || c->req[0] == MXC__REQ_NULL)
        return rc;
    float *gd = c->in_grad[0].data;
    struct mxc__gather_view v = gather_view(&c->in_grad[0].shape, &c->in_data[1]);
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__gather_nd_grad_gpu(v, g, idx, gd, c->rctx->stream);
#endif
    for (int64_t y = 0; y < v.count; y++) {
        float *dst = gd + mxc__gather_row(&v, idx, y) * v.inner;
        for (int64_t r = 0; r < v.inner; r++)
            dst[r] += g[y * v.inner + r];
    }
    return MXC_OK;
}

static int gather_nd_forward(const struct mxc__op_call *c) {
    return gather_nd_forward_on(c, false);
}
static int gather_nd_backward(const struct mxc__op_call *c) {
    return gather_nd_backward_on(c, false);
}
#ifdef MXC_USE_CUDA
static int gather_nd_forward_gpu(const struct mxc__op_call *c) {
    return gather_nd_forward_on(c, true);
}
static int gather_nd_backward_gpu(const struct mxc__op_call *c) {
    return gather_nd_backward_on(c, true);
}
#endif

const struct mxc__op_def mxc__op_gather_nd = {
    .name = "gather_nd",
    .description = "Elements (or slices) of data at the positions in the columns of indices "
                   "(m, ...): one position per first m axes",
    .inputs = gather_inputs,
    .outputs = one_output,
    .infer_shape = gather_nd_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .forward_cpu = gather_nd_forward,
    .backward_cpu = gather_nd_backward,
    .forward_gpu = MXC__GPU(gather_nd_forward_gpu),
    .backward_gpu = MXC__GPU(gather_nd_backward_gpu),
};

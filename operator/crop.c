/*
 * operator/crop.c — MXNet's legacy Crop (capital C; `crop` is an alias of slice, see
 * operator/registry.c): data (N, C, H, W) cropped to (N, C, h, w) at (y, x) = offset, or
 * at ((H - h) / 2, (W - w) / 2) with center_crop. (h, w) is h_w with num_args=1, the last
 * two axes of the second input (crop_like) with num_args=2. The backward puts the head
 * gradient back in the window, zeros around it, and gives crop_like zeros.
 * Both directions are a constant-mode Pad of operator/pad_math.h: the forward pads by minus
 * the offset (every source inside), the backward by the offset with zeros; the GPU kernel
 * (operator/crop_gpu.cu) runs the same gather.
 */
#include "operator/gpu.h"
#include "operator/indexing.h"
#include "operator/op.h"
#include "operator/pad_math.h"

struct crop_param {
    int num_args;
    mxc_shape offset, h_w;
    bool center_crop;
};

#define CP struct crop_param
static const struct mxc__param crop_params[] = {
    MXC__P_INT(CP, num_args, NULL, 1, 2,
               "inputs: 1 (data, cropped to h_w) or 2 (data, crop_like: cropped to its H, W)"),
    MXC__P_TUPLE(CP, offset, "(0, 0)", "the window's top-left corner (y, x)"),
    MXC__P_TUPLE(CP, h_w, "(0, 0)", "the window's size (h, w) with num_args=1"),
    MXC__P_BOOL(CP, center_crop, "False", "center the window instead of using offset"),
};
#undef CP

static const char *const crop_arg_names[] = {"arg0", "arg1"};
static const char *const crop_outputs[] = {"output", NULL};

static int crop_inputs(const void *params, const char **names, int max) {
    const struct crop_param *p = params;
    for (int i = 0; i < p->num_args && i < max; i++)
        names[i] = crop_arg_names[i];
    return p->num_args;
}

/* The window of data (N, C, H, W) for a crop of size (h, w): its corner into y0, x0. */
static int crop_window(const struct crop_param *p, const mxc_shape *data, int64_t h, int64_t w,
                       int64_t *y0, int64_t *x0) {
    char buf[128];
    int rc = MXC_OK;
    const int64_t H = data->dims[2], W = data->dims[3];
    MXC_CHECK(h <= H && w <= W, MXC_EINVAL, "Crop: a crop of %lld x %lld is larger than data %s",
              (long long)h, (long long)w, mxc__shape_str(data, buf, sizeof buf));
    if (p->center_crop) {
        *y0 = (H - h) / 2, *x0 = (W - w) / 2;
        return MXC_OK;
    }
    MXC_CHECK(p->offset.ndim == 2, MXC_EINVAL, "Crop: offset %s needs two values (y, x)",
              mxc__shape_str(&p->offset, buf, sizeof buf));
    *y0 = p->offset.dims[0], *x0 = p->offset.dims[1];
    MXC_CHECK(*y0 >= 0 && *x0 >= 0 && *y0 <= H - h && *x0 <= W - w, MXC_EINVAL,
              "Crop: a crop of %lld x %lld at offset (%lld, %lld) does not fit in data %s",
              (long long)h, (long long)w, (long long)*y0, (long long)*x0,
              mxc__shape_str(data, buf, sizeof buf));
fail:
    return rc;
}

/* data (N, C, H, W) [, crop_like (.., .., h, w)] -> output (N, C, h, w). */
static int crop_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                      mxc_shape *aux, int num_aux) {
    const struct crop_param *p = params;
    char buf[128];
    int rc = MXC_OK;
    (void)num_out, (void)aux, (void)num_aux;
    for (int i = 0; i < num_in; i++) {
        if (in[i].ndim == 0)
            return MXC_OK;
        MXC_CHECK(in[i].ndim == 4, MXC_EINVAL, "Crop: %s must be 4-D (N, C, H, W), got %s",
                  i ? "crop_like" : "data", mxc__shape_str(&in[i], buf, sizeof buf));
    }
    int64_t h, w, y0, x0;
    if (num_in == 2) {
        h = in[1].dims[2], w = in[1].dims[3];
    } else {
        MXC_CHECK(p->h_w.ndim == 2 && p->h_w.dims[0] >= 1 && p->h_w.dims[1] >= 1, MXC_EINVAL,
                  "Crop: h_w %s must be two sizes of at least 1 with num_args=1",
                  mxc__shape_str(&p->h_w, buf, sizeof buf));
        h = p->h_w.dims[0], w = p->h_w.dims[1];
    }
    MXC_TRY(crop_window(p, &in[0], h, w, &y0, &x0));
    mxc_shape o = in[0];
    o.dims[2] = h, o.dims[3] = w;
    MXC_TRY(mxc__shape_assign(&out[0], &o, "Crop", "output"));
fail:
    return rc;
}

/* The gather from data (N, C, H, W) to the crop (N, C, h, w) — or back, with zeros around
 * the window, when `back` — as Pad's constant view. */
static int crop_view(const struct mxc__op_call *c, const mxc_shape *data, const mxc_shape *crop,
                     bool back, struct mxc__pad_view *v) {
    int64_t y0 = 0, x0 = 0;
    int rc = crop_window(c->params, data, crop->dims[2], crop->dims[3], &y0, &x0);
    const mxc_shape *from = back ? crop : data, *to = back ? data : crop;
    const int sign = back ? 1 : -1;
    *v = (struct mxc__pad_view){.planes = data->dims[0] * data->dims[1],
                                .in = {1, from->dims[2], from->dims[3]},
                                .out = {1, to->dims[2], to->dims[3]},
                                .before = {0, sign * y0, sign * x0},
                                .mode = PAD_CONSTANT};
    return rc;
}

#ifdef MXC_USE_CUDA
int mxc__crop_gpu(const float *src, float *dst, int64_t n, const struct mxc__pad_view *v, int req,
                  void *stream);
#endif

/* dst (n elements, req) = the gather of src through v. */
static int crop_gather(const struct mxc__op_call *c, bool gpu, const float *src, float *dst,
                       int64_t n, const struct mxc__pad_view *v, int req) {
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__crop_gpu(src, dst, n, v, req, c->rctx->stream);
#endif
    (void)c, (void)gpu;
    for (int64_t e = 0; e < n && req != MXC__REQ_NULL; e++) {
        const float o = mxc__pad_value(src, e, v);
        dst[e] = req == MXC__REQ_ADD ? dst[e] + o : o;
    }
    return MXC_OK;
}

static int crop_forward_on(const struct mxc__op_call *c, bool gpu) {
    struct mxc__pad_view v;
    int rc = crop_view(c, &c->in_data[0].shape, &c->out_data[0].shape, false, &v);
    if (rc != MXC_OK)
        return rc;
    return crop_gather(c, gpu, c->in_data[0].data, c->out_data[0].data, c->out_data[0].size, &v,
                       c->req[0]);
}

/* d_data = the head gradient in the window, 0 around it; d_crop_like = 0. */
static int crop_backward_on(const struct mxc__op_call *c, bool gpu) {
    struct mxc__pad_view v;
    int rc = crop_view(c, &c->in_grad[0].shape, &c->out_grad[0].shape, true, &v);
    if (rc == MXC_OK && c->num_in > 1) {
        const struct mxc__op_call like = {
            .rctx = c->rctx, .in_grad = c->in_grad + 1, .req = c->req + 1};
        rc = mxc__index_zero_grads(&like, 1, gpu);
    }
    if (rc != MXC_OK)
        return rc;
    return crop_gather(c, gpu, c->out_grad[0].data, c->in_grad[0].data, c->in_grad[0].size, &v,
                       c->req[0]);
}

static int crop_forward(const struct mxc__op_call *c) { return crop_forward_on(c, false); }
static int crop_backward(const struct mxc__op_call *c) { return crop_backward_on(c, false); }
#ifdef MXC_USE_CUDA
static int crop_forward_gpu(const struct mxc__op_call *c) { return crop_forward_on(c, true); }
static int crop_backward_gpu(const struct mxc__op_call *c) { return crop_backward_on(c, true); }
#endif

const struct mxc__op_def mxc__op_Crop = {
    .name = "Crop",
    .description = "crops the last two axes of (N, C, H, W) data to h_w or to a second input's",
    .param_size = sizeof(struct crop_param),
    .params = crop_params,
    .num_params = (int)MXC_ARRAY_SIZE(crop_params),
    .list_inputs = crop_inputs,
    .outputs = crop_outputs,
    .infer_shape = crop_shape,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .forward_cpu = crop_forward,
    .backward_cpu = crop_backward,
    .forward_gpu = MXC__GPU(crop_forward_gpu),
    .backward_gpu = MXC__GPU(crop_backward_gpu),
};

/*
 * operator/cast.c — Cast (alias cast): data converted element by element to the dtype
 * `dtype`, between any two of float32, float64, float16, uint8, int32, int8 and int64,
 * with MXNet 1.9.1's conversion rules (operator/cast.h); the gradient is the output's
 * gradient converted back to data's dtype. Also the dtype-generic copy
 * (mxc__copy_req_typed) of the operators that only move bytes. Any shape, row-major.
 */
#include "operator/cast.h"

#include "operator/gpu.h"
#include "operator/op.h"

#include <string.h>

/* dst (n of dtype dt) = or += src (n of dtype st) converted, as `req` says. Under one
 * dtype a write is a copy of bytes (nothing when in place). */
static void cast_map(void *dst, int dt, const void *src, int st, int64_t n, int req) {
    if (req == MXC__REQ_NULL)
        return;
    if (dt == MXC_FLOAT32 && st == MXC_FLOAT32) {
        mxc__copy_req(dst, src, n, req);
        return;
    }
    const bool add = req == MXC__REQ_ADD;
    if (st == dt && !add) {
        if (dst != src)
            memcpy(dst, src, (size_t)n * mxc_dtype_size(dt));
        return;
    }
    for (int64_t k = 0; k < n; k++)
        mxc__elem_store(dst, dt, k, mxc__elem_load(src, st, k), add);
}

void mxc__copy_req_typed(void *dst, const void *src, int64_t n, int dtype, int req) {
    cast_map(dst, dtype, src, dtype, n, req);
}

/* ---- Cast --------------------------------------------------------------------------- */

/* MXNet's names for `dtype`, in its order, and the dtype each stands for. bfloat16 and
 * bool parse (symbol files may hold them) but have no kernels: MXC_ENOTSUP. */
static const char *const dtype_names[] = {"bfloat16", "bool",  "float16", "float32", "float64",
                                          "int32",    "int64", "int8",    "uint8",   NULL};
static const int dtype_flags[] = {MXC_BFLOAT16, MXC_BOOL,  MXC_FLOAT16, MXC_FLOAT32, MXC_FLOAT64,
                                  MXC_INT32,    MXC_INT64, MXC_INT8,    MXC_UINT8};

struct cast_param {
    int dtype; /* index into dtype_names */
};

static const struct mxc__param cast_params[] = {
    MXC__P_ENUM(struct cast_param, dtype, NULL, dtype_names, "output data type"),
};

static const char *const in_data[] = {"data", NULL};
static const char *const out_output[] = {"output", NULL};

/* output and data have one shape, deduced either way. */
static int cast_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                      mxc_shape *aux, int num_aux) {
    (void)params, (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    int rc = mxc__shape_assign(&out[0], &in[0], "Cast", "output");
    return rc != MXC_OK ? rc : mxc__shape_assign(&in[0], &out[0], "Cast", "data");
}

/* output: the parameter's dtype; data: any of the seven (unknown stays unknown: an output
 * dtype says nothing about the input's, as in MXNet). */
static int cast_type(const void *params, int *in, int num_in, int *out, int num_out, int *aux,
                     int num_aux) {
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    int t = dtype_flags[((const struct cast_param *)params)->dtype];
    if (!(MXC__DTYPES_ALL >> t & 1u))
        return mxc__error(MXC_ENOTSUP, "Cast: dtype %s is not supported (%s)", mxc_dtype_name(t),
                          "float32, float64, float16, uint8, int32, int8, int64 are");
    if (in[0] >= 0 && !(MXC__DTYPES_ALL >> in[0] & 1u))
        return mxc__error(MXC_ENOTSUP, "Cast: data of dtype %s is not supported",
                          mxc_dtype_name(in[0]));
    return mxc__type_assign(&out[0], t, "Cast", "output");
}

/* out = data converted (both (n)). */
static int cast_forward(const struct mxc__op_call *c) {
    const struct mxc__tensor *x = &c->in_data[0], *y = &c->out_data[0];
    cast_map(y->data, y->dtype, x->data, x->dtype, y->size, c->req[0]);
    return MXC_OK;
}

/* d_data = d_out converted back to data's dtype. */
static int cast_backward(const struct mxc__op_call *c) {
    const struct mxc__tensor *dx = &c->in_grad[0], *dy = &c->out_grad[0];
    cast_map(dx->data, dx->dtype, dy->data, dy->dtype, dx->size, c->req[0]);
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
static int cast_forward_gpu(const struct mxc__op_call *c) {
    const struct mxc__tensor *x = &c->in_data[0], *y = &c->out_data[0];
    return mxc__cast_gpu(y->data, y->dtype, x->data, x->dtype, y->size, c->req[0], c->rctx->stream);
}

static int cast_backward_gpu(const struct mxc__op_call *c) {
    const struct mxc__tensor *dx = &c->in_grad[0], *dy = &c->out_grad[0];
    return mxc__cast_gpu(dx->data, dx->dtype, dy->data, dy->dtype, dx->size, c->req[0],
                         c->rctx->stream);
}
#endif

const struct mxc__op_def mxc__op_Cast = {
    .name = "Cast",
    .description = "Casts every element of data to dtype (alias cast); float to integer "
                   "truncates toward zero, integers wrap",
    .param_size = sizeof(struct cast_param),
    .params = cast_params,
    .num_params = (int)MXC_ARRAY_SIZE(cast_params),
    .inputs = in_data,
    .outputs = out_output,
    .infer_shape = cast_shape,
    .infer_type = cast_type,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .dtypes = MXC__DTYPES_ALL,
    .forward_cpu = cast_forward,
    .backward_cpu = cast_backward,
    .forward_gpu = MXC__GPU(cast_forward_gpu),
    .backward_gpu = MXC__GPU(cast_backward_gpu),
};

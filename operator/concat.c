/*
 * operator/concat.c — joining and splitting along an axis, and summing: Concat (inputs
 * arg0..argN-1 joined along `dim`), SliceChannel (data cut into num_outputs equal parts
 * along `axis`, outputs output0..output{N-1}, optionally dropping the axis) and
 * ElementWiseSum (add_n: the sum of num_args same-shaped inputs). Concat's backward is
 * SliceChannel's forward and the other way round, both through copy_parts. float32,
 * row-major.
 */
#include "operator/copy_gpu.h"
#include "operator/gpu.h"
#include "operator/op.h"

#include <string.h>

/* Variadic argument names (MXC__MAX_OP_ARGS of each). */
static const char *const arg_names[MXC__MAX_OP_ARGS] = {
    "arg0", "arg1", "arg2",  "arg3",  "arg4",  "arg5",  "arg6",  "arg7",
    "arg8", "arg9", "arg10", "arg11", "arg12", "arg13", "arg14", "arg15"};
static const char *const output_names[MXC__MAX_OP_ARGS] = {
    "output0", "output1", "output2",  "output3",  "output4",  "output5",  "output6",  "output7",
    "output8", "output9", "output10", "output11", "output12", "output13", "output14", "output15"};
static const char *const in_data[] = {"data", NULL};
static const char *const out_output[] = {"output", NULL};

static int list_first(const char *const *all, int n, const char **names, int max) {
    for (int i = 0; i < n && i < max && i < MXC__MAX_OP_ARGS; i++)
        names[i] = all[i];
    return n;
}

/* `axis` of an `ndim`-D array, negative counting from the end, or -1 when outside. */
static int norm_axis(int axis, int ndim) {
    int a = axis < 0 ? axis + ndim : axis;
    return a >= 0 && a < ndim ? a : -1;
}

/* Elements before `axis` (outer) and after it (inner) in `s`. */
static void outer_inner(const mxc_shape *s, int axis, int64_t *outer, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= s->dims[i];
    for (int i = axis + 1; i < s->ndim; i++)
        *inner *= s->dims[i];
}

/* dst row r (width floats at dst + r * dpitch) (=, +=) src row r (at src + r * spitch),
 * r in [0, rows): on the CPU, or on the GPU of gpu_rctx when it is not NULL. */
static int copy_rows(const mxc_run_ctx *gpu_rctx, float *dst, int64_t dpitch, const float *src,
                     int64_t spitch, int64_t rows, int64_t width, int req) {
#ifdef MXC_USE_CUDA
    if (gpu_rctx != NULL)
        return mxc__copy_rows_gpu(dst, dpitch, src, spitch, rows, width, req, gpu_rctx->stream);
#else
    (void)gpu_rctx;
#endif
    for (int64_t r = 0; r < rows; r++)
        mxc__copy_req(dst + r * dpitch, src + r * spitch, width, req);
    return MXC_OK;
}

/* The joined array big: (outer, total) and its parts part[k]: (outer, width[k]), the
 * widths summing to total, side by side in big's rows. to_big: big (req[0]) from the
 * parts (Concat forward, SliceChannel backward); else each part (req[k]) from big. A part
 * nobody asked for (req null: a gradient bound with MXC_GRAD_NULL) may have no memory, so
 * no pointer into it is computed. On the GPU of gpu_rctx when it is not NULL. */
static int copy_parts(const mxc_run_ctx *gpu_rctx, float *big, const struct mxc__tensor *parts,
                      const int64_t *width, int n, int64_t outer, int64_t total, bool to_big,
                      const int *req) {
    int64_t off = 0;
    for (int k = 0; k < n; off += width[k], k++) {
        int r = req[to_big ? 0 : k];
        if (r == MXC__REQ_NULL || outer == 0)
            continue; /* an unwanted output has no memory */
        float *part = parts[k].data;
        int rc = to_big ? copy_rows(gpu_rctx, big + off, total, part, width[k], outer, width[k], r)
                        : copy_rows(gpu_rctx, part, width[k], big + off, total, outer, width[k], r);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

/* ---- Concat --------------------------------------------------------------------------- */

struct concat_param {
    int num_args;
    int dim;
};

static const struct mxc__param concat_params[] = {
    MXC__P_INT(struct concat_param, num_args, NULL, 1, MXC__MAX_OP_ARGS,
               "number of inputs to join"),
    MXC__P_INT(struct concat_param, dim, "1", -MXC_MAX_NDIM, MXC_MAX_NDIM - 1,
               "the axis to join along (negative counts from the end)"),
};

static int concat_list_inputs(const void *params, const char **names, int max) {
    return list_first(arg_names, ((const struct concat_param *)params)->num_args, names, max);
}

/* Inputs agree on every axis but `dim`; the output's `dim` is the sum of theirs. With
 * the output and all inputs but one known, the missing one is deduced. */
static int concat_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                        mxc_shape *aux, int num_aux) {
    const struct concat_param *p = params;
    (void)num_out, (void)aux, (void)num_aux;
    const char *op = "Concat";
    char b[128];
    int rc = MXC_OK, unknown = -1, num_unknown = 0;
    const mxc_shape *ref = out[0].ndim ? &out[0] : NULL;
    for (int i = 0; i < num_in && ref == NULL; i++)
        if (in[i].ndim)
            ref = &in[i];
    if (ref == NULL)
        return MXC_OK;
    int axis = norm_axis(p->dim, ref->ndim);
    if (axis < 0)
        return mxc__error(MXC_EINVAL, "Concat: dim=%d is outside [%d, %d] for %s", p->dim,
                          -ref->ndim, ref->ndim - 1, mxc__shape_str(ref, b, sizeof b));
    mxc_shape like = *ref; /* every axis but `axis` as the others must have them */
    int64_t sum = 0;
    for (int i = 0; i < num_in; i++) {
        if (in[i].ndim == 0) {
            unknown = i;
            num_unknown++;
            continue;
        }
        like.dims[axis] = in[i].ndim == like.ndim ? in[i].dims[axis] : ref->dims[axis];
        MXC_TRY(mxc__shape_assign(&in[i], &like, op, arg_names[i]));
        MXC_CHECK(in[i].dims[axis] <= INT64_MAX - sum, MXC_ESHAPE,
                  "Concat: the inputs' sizes along dim %d add up to more than int64 holds "
                  "(%s at %s)",
                  axis, arg_names[i], mxc__shape_str(&in[i], b, sizeof b));
        sum += in[i].dims[axis];
    }
    if (num_unknown == 0) {
        like.dims[axis] = sum;
        return mxc__shape_assign(&out[0], &like, op, "output");
    }
    if (num_unknown == 1 && out[0].ndim) {
        like.dims[axis] = out[0].dims[axis];
        MXC_TRY(mxc__shape_assign(&out[0], &like, op, "output"));
        MXC_CHECK(out[0].dims[axis] > sum, MXC_ESHAPE,
                  "Concat: output %s is too small "
                  "along dim %d for the known inputs (%lld together)",
                  mxc__shape_str(&out[0], b, sizeof b), axis, (long long)sum);
        like.dims[axis] = out[0].dims[axis] - sum;
        in[unknown] = like;
    }
fail:
    return rc;
}

/* The parts' widths (dim size * inner) and the joined row length, for `big` (the joined
 * shape) cut along `axis` into parts of the shapes given. */
static int64_t part_widths(const mxc_shape *big, int axis, const struct mxc__tensor *parts, int n,
                           int64_t *width, int64_t *outer) {
    int64_t inner;
    outer_inner(big, axis, outer, &inner);
    for (int k = 0; k < n; k++)
        width[k] = parts[k].size / (*outer ? *outer : 1);
    return big->dims[axis] * inner;
}

/* out (outer, sum d_k, inner) from in_k (outer, d_k, inner). */
static int concat_fwd(const struct mxc__op_call *c, const mxc_run_ctx *gpu_rctx) {
    const struct concat_param *p = c->params;
    const mxc_shape *s = &c->out_data[0].shape;
    int64_t width[MXC__MAX_OP_ARGS], outer;
    int64_t total =
        part_widths(s, norm_axis(p->dim, s->ndim), c->in_data, c->num_in, width, &outer);
    return copy_parts(gpu_rctx, c->out_data[0].data, c->in_data, width, c->num_in, outer, total,
                      true, c->req);
}

/* d_in_k = the k-th slice of d_out along dim. */
static int concat_bwd(const struct mxc__op_call *c, const mxc_run_ctx *gpu_rctx) {
    const struct concat_param *p = c->params;
    const mxc_shape *s = &c->out_grad[0].shape;
    int64_t width[MXC__MAX_OP_ARGS], outer;
    int64_t total =
        part_widths(s, norm_axis(p->dim, s->ndim), c->in_grad, c->num_in, width, &outer);
    return copy_parts(gpu_rctx, c->out_grad[0].data, c->in_grad, width, c->num_in, outer, total,
                      false, c->req);
}

static int concat_forward(const struct mxc__op_call *c) { return concat_fwd(c, NULL); }
static int concat_backward(const struct mxc__op_call *c) { return concat_bwd(c, NULL); }
#ifdef MXC_USE_CUDA
static int concat_forward_gpu(const struct mxc__op_call *c) { return concat_fwd(c, c->rctx); }
static int concat_backward_gpu(const struct mxc__op_call *c) { return concat_bwd(c, c->rctx); }
#endif

const struct mxc__op_def mxc__op_Concat = {
    .name = "Concat",
    .description = "Joins num_args arrays along axis dim",
    .param_size = sizeof(struct concat_param),
    .params = concat_params,
    .num_params = (int)MXC_ARRAY_SIZE(concat_params),
    .list_inputs = concat_list_inputs,
    .outputs = out_output,
    .infer_shape = concat_shape,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .forward_cpu = concat_forward,
    .backward_cpu = concat_backward,
    .forward_gpu = MXC__GPU(concat_forward_gpu),
    .backward_gpu = MXC__GPU(concat_backward_gpu),
};

/* ---- SliceChannel --------------------------------------------------------------------- */

struct slice_param {
    int num_outputs;
    int axis;
    bool squeeze_axis;
};

static const struct mxc__param slice_params[] = {
    MXC__P_INT(struct slice_param, num_outputs, NULL, 1, MXC__MAX_OP_ARGS,
               "number of equal parts (at most 16)"),
    MXC__P_INT(struct slice_param, axis, "1", -MXC_MAX_NDIM, MXC_MAX_NDIM - 1,
               "the axis to cut along (negative counts from the end)"),
    MXC__P_BOOL(struct slice_param, squeeze_axis, "False",
                "drop the axis from the outputs (its size must equal num_outputs)"),
};

static int slice_list_outputs(const void *params, const char **names, int max) {
    return list_first(output_names, ((const struct slice_param *)params)->num_outputs, names, max);
}

/* data (.., d, ..) -> num_outputs x (.., d / num_outputs, ..), or (.., ..) with
 * squeeze_axis; equal known outputs give data back. */
static int slice_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                       mxc_shape *aux, int num_aux) {
    const struct slice_param *p = params;
    (void)num_in, (void)aux, (void)num_aux;
    const char *op = "SliceChannel";
    char b[128];
    int n = p->num_outputs, rc = MXC_OK;
    if (n > MXC__MAX_OP_ARGS || num_out != n)
        return mxc__error(MXC_EINVAL, "SliceChannel: num_outputs=%d, at most %d supported", n,
                          MXC__MAX_OP_ARGS);
    if (in[0].ndim == 0) {
        /* from the outputs: all known and equal */
        for (int k = 0; k < n; k++) {
            if (out[k].ndim == 0)
                return MXC_OK;
            MXC_TRY(mxc__shape_assign(&out[k], &out[0], op, output_names[k]));
        }
        int nd = out[0].ndim + (p->squeeze_axis ? 1 : 0);
        int a = norm_axis(p->axis, nd);
        if (a < 0 || nd > MXC_MAX_NDIM)
            return MXC_OK; /* reported once data is known */
        mxc_shape d = {.ndim = nd};
        for (int i = 0, j = 0; i < nd; i++)
            d.dims[i] = i == a && p->squeeze_axis ? n : out[0].dims[j++] * (i == a ? n : 1);
        in[0] = d;
        return MXC_OK;
    }
    int a = norm_axis(p->axis, in[0].ndim);
    MXC_CHECK(a >= 0, MXC_EINVAL, "SliceChannel: axis=%d is outside [%d, %d] for data %s", p->axis,
              -in[0].ndim, in[0].ndim - 1, mxc__shape_str(&in[0], b, sizeof b));
    int64_t d = in[0].dims[a];
    MXC_CHECK(d % n == 0, MXC_ESHAPE,
              "SliceChannel: data %s cannot be cut into %d equal "
              "parts along axis %d",
              mxc__shape_str(&in[0], b, sizeof b), n, a);
    mxc_shape o = in[0];
    o.dims[a] = d / n;
    if (p->squeeze_axis) {
        MXC_CHECK(d == n, MXC_ESHAPE,
                  "SliceChannel: squeeze_axis needs axis %d of data %s "
                  "to equal num_outputs=%d",
                  a, mxc__shape_str(&in[0], b, sizeof b), n);
        MXC_CHECK(in[0].ndim > 1, MXC_ENOTSUP,
                  "SliceChannel: squeeze_axis on 1-D data %s "
                  "would make scalars",
                  mxc__shape_str(&in[0], b, sizeof b));
        memmove(&o.dims[a], &o.dims[a + 1], sizeof(int64_t) * (size_t)(o.ndim - a - 1));
        o.ndim--;
    }
    for (int k = 0; k < n; k++)
        MXC_TRY(mxc__shape_assign(&out[k], &o, op, output_names[k]));
fail:
    return rc;
}

/* The cut axis, from data's rank. */
static int slice_axis(const struct mxc__op_call *c, const mxc_shape *data) {
    return norm_axis(((const struct slice_param *)c->params)->axis, data->ndim);
}

/* out_k (outer, d / n, inner) = data (outer, d, inner) slice k. */
static int slice_fwd(const struct mxc__op_call *c, const mxc_run_ctx *gpu_rctx) {
    const mxc_shape *s = &c->in_data[0].shape;
    int64_t width[MXC__MAX_OP_ARGS], outer;
    int64_t total = part_widths(s, slice_axis(c, s), c->out_data, c->num_out, width, &outer);
    return copy_parts(gpu_rctx, c->in_data[0].data, c->out_data, width, c->num_out, outer, total,
                      false, c->req);
}

/* d_data = the d_out_k joined along the axis. */
static int slice_bwd(const struct mxc__op_call *c, const mxc_run_ctx *gpu_rctx) {
    const mxc_shape *s = &c->in_grad[0].shape;
    int64_t width[MXC__MAX_OP_ARGS], outer;
    int64_t total = part_widths(s, slice_axis(c, s), c->out_grad, c->num_out, width, &outer);
    return copy_parts(gpu_rctx, c->in_grad[0].data, c->out_grad, width, c->num_out, outer, total,
                      true, c->req);
}

static int slice_forward(const struct mxc__op_call *c) { return slice_fwd(c, NULL); }
static int slice_backward(const struct mxc__op_call *c) { return slice_bwd(c, NULL); }
#ifdef MXC_USE_CUDA
static int slice_forward_gpu(const struct mxc__op_call *c) { return slice_fwd(c, c->rctx); }
static int slice_backward_gpu(const struct mxc__op_call *c) { return slice_bwd(c, c->rctx); }
#endif

const struct mxc__op_def mxc__op_SliceChannel = {
    .name = "SliceChannel",
    .description = "Cuts data into num_outputs equal parts along axis",
    .param_size = sizeof(struct slice_param),
    .params = slice_params,
    .num_params = (int)MXC_ARRAY_SIZE(slice_params),
    .inputs = in_data,
    .list_outputs = slice_list_outputs,
    .infer_shape = slice_shape,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .forward_cpu = slice_forward,
    .backward_cpu = slice_backward,
    .forward_gpu = MXC__GPU(slice_forward_gpu),
    .backward_gpu = MXC__GPU(slice_backward_gpu),
};

/* ---- ElementWiseSum ------------------------------------------------------------------- */

struct sum_param {
    int num_args;
};

static const struct mxc__param sum_params[] = {
    MXC__P_INT(struct sum_param, num_args, NULL, 1, MXC__MAX_OP_ARGS, "number of inputs"),
};

static int sum_list_inputs(const void *params, const char **names, int max) {
    return list_first(arg_names, ((const struct sum_param *)params)->num_args, names, max);
}

/* Every input and the output share one shape, deduced in either direction. */
static int sum_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                     mxc_shape *aux, int num_aux) {
    (void)params, (void)num_out, (void)aux, (void)num_aux;
    int rc = MXC_OK;
    mxc_shape s = out[0];
    for (int i = 0; i < num_in; i++)
        MXC_TRY(mxc__shape_assign(&s, &in[i], "ElementWiseSum", arg_names[i]));
    if (s.ndim == 0)
        return MXC_OK;
    for (int i = 0; i < num_in; i++)
        in[i] = s;
    MXC_TRY(mxc__shape_assign(&out[0], &s, "ElementWiseSum", "output"));
fail:
    return rc;
}

/* Elements summed at a time: a stack buffer that stays in L1. */
#define SUM_BLOCK 512

/* out (n) (=, +=) arg0 + ... + arg(num_args - 1). out may be arg0 (in place), and the same
 * array may be passed more than once (ElementWiseSum(h, g, h)), so out can be any of the
 * inputs: each block of elements is summed from every input before out is written. */
static int sum_forward(const struct mxc__op_call *c) {
    int req = c->req[0];
    int64_t n = c->out_data[0].size;
    float *o = c->out_data[0].data;
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    float acc[SUM_BLOCK];
    for (int64_t b = 0; b < n; b += SUM_BLOCK) {
        int64_t m = n - b < SUM_BLOCK ? n - b : SUM_BLOCK;
        memcpy(acc, (const float *)c->in_data[0].data + b, (size_t)m * sizeof(float));
        for (int k = 1; k < c->num_in; k++) {
            const float *a = (const float *)c->in_data[k].data + b;
            for (int64_t i = 0; i < m; i++)
                acc[i] += a[i];
        }
        mxc__copy_req(o + b, acc, m, req);
    }
    return MXC_OK;
}

/* d_arg_k = d_out for every k; d_arg0 last, since it may share d_out's memory. On the GPU
 * of gpu_rctx when it is not NULL (the stream keeps the order). */
static int sum_bwd(const struct mxc__op_call *c, const mxc_run_ctx *gpu_rctx) {
    const float *g = c->out_grad[0].data;
    for (int k = c->num_in - 1; k >= 0; k--) {
        float *d = c->in_grad[k].data;
        if (c->req[k] == MXC__REQ_NULL || (d == g && c->req[k] != MXC__REQ_ADD))
            continue; /* not wanted (d may be NULL), or in place */
        int rc = copy_rows(gpu_rctx, d, 0, g, 0, 1, c->in_grad[k].size, c->req[k]);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

static int sum_backward(const struct mxc__op_call *c) { return sum_bwd(c, NULL); }

#ifdef MXC_USE_CUDA
/* out (n) (=, +=) the sum of the inputs, one element at a time (operator/copy_gpu.cu), so
 * out may be any of them as on the CPU. */
static int sum_forward_gpu(const struct mxc__op_call *c) {
    const float *in[MXC__MAX_OP_ARGS];
    for (int k = 0; k < c->num_in; k++)
        in[k] = c->in_data[k].data;
    return mxc__sum_gpu(c->out_data[0].data, in, c->num_in, c->out_data[0].size, c->req[0],
                        c->rctx->stream);
}

static int sum_backward_gpu(const struct mxc__op_call *c) { return sum_bwd(c, c->rctx); }
#endif

const struct mxc__op_def mxc__op_ElementWiseSum = {
    .name = "ElementWiseSum",
    .description = "The element-wise sum of num_args same-shaped arrays (add_n)",
    .param_size = sizeof(struct sum_param),
    .params = sum_params,
    .num_params = (int)MXC_ARRAY_SIZE(sum_params),
    .list_inputs = sum_list_inputs,
    .outputs = out_output,
    .infer_shape = sum_shape,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .inplace = MXC__INPLACE(0, 0),
    .backward_inplace = MXC__INPLACE(0, 0),
    .forward_cpu = sum_forward,
    .backward_cpu = sum_backward,
    .forward_gpu = MXC__GPU(sum_forward_gpu),
    .backward_gpu = MXC__GPU(sum_backward_gpu),
};

/*
 * operator/sequence.c — MXNet 1.9.1's SequenceMask, SequenceLast and SequenceReverse: data
 * (T, B, ...) with the sequence axis 0, or (B, T, ...) with axis 1 (Mask and Last), and,
 * with use_sequence_length=True, a second input sequence_length (B) of float lengths,
 * truncated toward zero as MXNet's cast does. Without lengths every sequence is T long.
 *
 * Lengths MXNet handles are handled the same way: SequenceMask keeps everything of a
 * sequence at least T long, SequenceReverse leaves a sequence of length 0 (or 1) as it is.
 * Lengths for which MXNet reads or writes outside its arrays (undefined) are MXC_EINVAL
 * naming the first one, checked when the forward runs, on the GPU too (a device-side
 * check, operator/indexing.h's mxc__index_find_outside_on): SequenceMask and
 * SequenceReverse refuse negative lengths (below -1: a length of -0.5 truncates to 0) and
 * NaN, SequenceReverse lengths beyond T, SequenceLast lengths that do not truncate into
 * [1, T]. The gradient goes to data only (sequence_length gets zeros, as an index input).
 * The indexing is operator/sequence_math.h, shared with operator/sequence_gpu.cu.
 */
#include "operator/gpu.h"
#include "operator/indexing.h"
#include "operator/op.h"
#include "operator/sequence_math.h"

#include <math.h>

static const char *const seq_names[] = {"SequenceMask", "SequenceLast", "SequenceReverse"};

struct seq_param {
    bool use_sequence_length;
    float value;
    int axis;
};

#define SP struct seq_param
#define USE_LENGTH                                \
    MXC__P_BOOL(SP, use_sequence_length, "False", \
                "take a second input, sequence_length (batch): the length of each sequence")
static const struct mxc__param mask_params[] = {
    USE_LENGTH,
    MXC__P_FLOAT(SP, value, "0", -INFINITY, INFINITY, "the value of masked elements"),
    MXC__P_INT(SP, axis, "0", 0, 1, "the sequence axis: 0 (T, B, ...) or 1 (B, T, ...)"),
};
static const struct mxc__param last_params[] = {
    USE_LENGTH,
    MXC__P_INT(SP, axis, "0", 0, 1, "the sequence axis: 0 (T, B, ...) or 1 (B, T, ...)"),
};
static const struct mxc__param reverse_params[] = {
    USE_LENGTH,
    MXC__P_INT(SP, axis, "0", 0, 0, "the sequence axis: only 0 (T, B, ...), as in MXNet"),
};
#undef USE_LENGTH
#undef SP

static const char *const seq_inputs[] = {"data", "sequence_length"};
static const char *const seq_outputs[] = {"output", NULL};

static int seq_list_inputs(const void *params, const char **names, int max) {
    const struct seq_param *p = params;
    int n = p->use_sequence_length ? 2 : 1;
    for (int i = 0; i < n && i < max; i++)
        names[i] = seq_inputs[i];
    return n;
}

/* data (T, B, ...) or (B, T, ...) -> output: data's shape, or (B, ...) for SequenceLast;
 * sequence_length (B). */
static int seq_shape(enum mxc__seq_kind kind, const void *params, mxc_shape *in, int num_in,
                     mxc_shape *out) {
    const struct seq_param *p = params;
    const char *op = seq_names[kind];
    const mxc_shape *s = &in[0];
    char buf[128];
    int rc = MXC_OK;
    if (s->ndim == 0)
        return MXC_OK;
    MXC_CHECK(s->ndim >= 2, MXC_EINVAL, "%s: data must have 2 axes or more, got %s", op,
              mxc__shape_str(s, buf, sizeof buf));
    const int64_t steps = s->dims[p->axis], batch = s->dims[1 - p->axis];
    if (num_in > 1) {
        mxc_shape len = mxc_shape_make(1, &batch);
        MXC_TRY(mxc__shape_assign(&in[1], &len, op, "sequence_length"));
    }
    mxc_shape o = *s;
    if (kind == MXC__SEQ_LAST) {
        o.ndim--;
        for (int d = p->axis; d < o.ndim; d++)
            o.dims[d] = s->dims[d + 1];
        MXC_CHECK(steps > 0 || mxc_shape_size(&o) == 0, MXC_EINVAL,
                  "SequenceLast: data %s has no steps along axis %d to take the last of",
                  mxc__shape_str(s, buf, sizeof buf), p->axis);
    }
    MXC_TRY(mxc__shape_assign(&out[0], &o, op, "output"));
fail:
    return rc;
}

static struct mxc__seq_view seq_view(const struct mxc__op_call *c, const mxc_shape *data) {
    const struct seq_param *p = c->params;
    struct mxc__seq_view v = {.steps = data->dims[p->axis],
                              .batch = data->dims[1 - p->axis],
                              .rest = 1,
                              .axis = p->axis,
                              .length = c->num_in > 1 ? c->in_data[1].data : NULL};
    for (int d = 2; d < data->ndim; d++)
        v.rest *= data->dims[d];
    return v;
}

/* The lengths the operator can use (see the file comment), or MXC_EINVAL naming the first
 * other one. */
static int check_lengths(enum mxc__seq_kind kind, const struct mxc__op_call *c, bool gpu,
                         const struct mxc__seq_view *v) {
    if (!v->length)
        return MXC_OK;
    const double t1 = (double)v->steps + 1;
    const struct mxc__index_range r = kind == MXC__SEQ_LAST ? (struct mxc__index_range){1, t1, 0, 1}
                                      : kind == MXC__SEQ_MASK
                                          ? (struct mxc__index_range){-1, INFINITY, 1, 0}
                                          : (struct mxc__index_range){-1, t1, 1, 1};
    int64_t bad;
    float x;
    int rc = mxc__index_find_outside_on(c, gpu, c->resources[0], v->length, v->batch, r, &bad, &x);
    if (rc != MXC_OK || bad < 0)
        return rc;
    const char *want = kind == MXC__SEQ_LAST   ? "1 to the %lld steps"
                       : kind == MXC__SEQ_MASK ? "0 or more"
                                               : "0 to the %lld steps";
    char what[64];
    snprintf(what, sizeof what, want, (long long)v->steps);
    return mxc__error(MXC_EINVAL,
                      "%s: sequence_length[%lld] = %g; lengths (truncated toward zero) must be "
                      "%s along axis %d",
                      seq_names[kind], (long long)bad, (double)x, what, v->axis);
}

/* out (req) = f(view, x, e) for every element e of out. */
#define SEQ_MAP(n, out, req, f)                                   \
    for (int64_t e = 0; e < (n) && (req) != MXC__REQ_NULL; e++) { \
        const float o_ = (f);                                     \
        (out)[e] = (req) == MXC__REQ_ADD ? (out)[e] + o_ : o_;    \
    }

#ifdef MXC_USE_CUDA
int mxc__seq_gpu(enum mxc__seq_kind kind, bool backward, const struct mxc__seq_view *v,
                 const float *x, float *y, int64_t n, float value, int req, void *stream);
#endif

static int seq_forward_on(enum mxc__seq_kind kind, const struct mxc__op_call *c, bool gpu) {
    const struct mxc__seq_view v = seq_view(c, &c->in_data[0].shape);
    const struct seq_param *p = c->params;
    const float *x = c->in_data[0].data;
    float *y = c->out_data[0].data;
    const int req = c->req[0];
    const int64_t n = c->out_data[0].size;
    int rc = check_lengths(kind, c, gpu, &v);
    if (rc != MXC_OK)
        return rc;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__seq_gpu(kind, false, &v, x, y, n, p->value, req, c->rctx->stream);
#endif
    (void)gpu;
    if (kind == MXC__SEQ_MASK)
        SEQ_MAP(n, y, req, mxc__seq_mask(&v, x, e, p->value))
    else if (kind == MXC__SEQ_LAST)
        SEQ_MAP(n, y, req, mxc__seq_last(&v, x, e))
    else
        SEQ_MAP(n, y, req, mxc__seq_reverse(&v, x, e))
    return MXC_OK;
}

/* d_data from the head gradient (a gather for each kind); d_sequence_length = 0. */
static int seq_backward_on(enum mxc__seq_kind kind, const struct mxc__op_call *c, bool gpu) {
    const struct mxc__seq_view v = seq_view(c, &c->in_grad[0].shape);
    const float *dy = c->out_grad[0].data;
    float *dx = c->in_grad[0].data;
    const int req = c->req[0];
    const int64_t n = c->in_grad[0].size;
    int rc = MXC_OK;
    if (c->num_in > 1) {
        const struct mxc__op_call lengths = {
            .rctx = c->rctx, .in_grad = c->in_grad + 1, .req = c->req + 1};
        rc = mxc__index_zero_grads(&lengths, 1, gpu);
    }
#ifdef MXC_USE_CUDA
    if (gpu)
        return rc != MXC_OK ? rc : mxc__seq_gpu(kind, true, &v, dy, dx, n, 0, req, c->rctx->stream);
#endif
    (void)gpu;
    if (kind == MXC__SEQ_MASK)
        SEQ_MAP(n, dx, req, mxc__seq_mask(&v, dy, e, 0.0f))
    else if (kind == MXC__SEQ_LAST)
        SEQ_MAP(n, dx, req, mxc__seq_last_grad(&v, dy, e))
    else
        SEQ_MAP(n, dx, req, mxc__seq_reverse(&v, dy, e))
    return rc;
}

/* The entry points and definition of one kind: `ident` names the kernels and the
 * definition (mxc__op_<name>), `params` its table. */
#define SEQ_OP(kind, ident, params_, description_, ...)                                \
    static int ident##_shape(const void *p, mxc_shape *in, int num_in, mxc_shape *out, \
                             int num_out, mxc_shape *aux, int num_aux) {               \
        (void)num_out, (void)aux, (void)num_aux;                                       \
        return seq_shape(kind, p, in, num_in, out);                                    \
    }                                                                                  \
    static int ident##_forward(const struct mxc__op_call *c) {                         \
        return seq_forward_on(kind, c, false);                                         \
    }                                                                                  \
    static int ident##_backward(const struct mxc__op_call *c) {                        \
        return seq_backward_on(kind, c, false);                                        \
    }                                                                                  \
    SEQ_GPU(kind, ident)                                                               \
    const struct mxc__op_def mxc__op_##ident = {                                       \
        .name = #ident,                                                                \
        .description = description_,                                                   \
        .param_size = sizeof(struct seq_param),                                        \
        .params = params_,                                                             \
        .num_params = (int)MXC_ARRAY_SIZE(params_),                                    \
        .list_inputs = seq_list_inputs,                                                \
        .outputs = seq_outputs,                                                        \
        .infer_shape = ident##_shape,                                                  \
        .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,                         \
        .forward_resources = {MXC__RES_TEMP + 1}, /* the GPU's check of the lengths */ \
        .forward_cpu = ident##_forward,                                                \
        .backward_cpu = ident##_backward,                                              \
        .forward_gpu = MXC__GPU(ident##_forward_gpu),                                  \
        .backward_gpu = MXC__GPU(ident##_backward_gpu),                                \
        __VA_ARGS__};
#ifdef MXC_USE_CUDA
#define SEQ_GPU(kind, ident)                                        \
    static int ident##_forward_gpu(const struct mxc__op_call *c) {  \
        return seq_forward_on(kind, c, true);                       \
    }                                                               \
    static int ident##_backward_gpu(const struct mxc__op_call *c) { \
        return seq_backward_on(kind, c, true);                      \
    }
#else
#define SEQ_GPU(kind, ident)
#endif

/* Masking reads and writes element e only: the output may be data, the data gradient the
 * head gradient. */
SEQ_OP(MXC__SEQ_MASK, SequenceMask, mask_params,
       "Sets the steps of each sequence past its length to value", .inplace = MXC__INPLACE(0, 0),
       .backward_inplace = MXC__INPLACE(0, 0))
SEQ_OP(MXC__SEQ_LAST, SequenceLast, last_params, "The last step of each sequence")
SEQ_OP(MXC__SEQ_REVERSE, SequenceReverse, reverse_params,
       "Reverses the first length steps of each sequence (sequence axis 0)")

/*
 * operator/sort.c — topk, sort and argsort (MXNet 1.9.1's names and parameters). All three
 * order the rows along one axis (or the flattened array, axis None) by
 * mxc__sort_before (operator/indexing.h): by value, ties by position (the first
 * occurrence first, as MXNet orders them both ways), NaN last. Since that order is total,
 * the CPU's merge sort and the GPU's ranking (operator/sort_gpu.cu) give the same result.
 * One description, a `struct sort_spec`, says what each asks: the axis, how many of the
 * first elements to keep (k), what to return (values, indices as float32, a mask of the
 * kept elements, or values and indices) and the direction. The backward of the values
 * (topk's value and both, sort) gives each kept element its head gradient, the others 0;
 * it sorts the input again rather than keep the indices. Indices and masks get a zero
 * gradient, as in MXNet. float32, row-major.
 */
#include "operator/indexing.h"

#include "operator/gpu.h"
#include "operator/op.h"

#include <string.h>

/* What topk returns (the order of its choices). */
enum { RET_BOTH, RET_INDICES, RET_MASK, RET_VALUE };

/* What one of the three asks. */
struct sort_spec {
    struct mxc__opt_float axis;
    int k; /* < 1: the whole axis */
    int ret;
    bool ascend;
    int dtype; /* an index of dtype_choices */
};

/* A spec's view of data: rows (outer, n, inner) along the axis, k of them kept. */
struct sort_view {
    int64_t outer, n, inner, k;
};

static const char *const ret_choices[] = {"both", "indices", "mask", "value", NULL};
static const char *const dtype_choices[] = {"float16", "float32", "float64", "int32",
                                            "int64",   "uint8",   NULL};
enum { DTYPE_FLOAT32 = 1 };

/* The view of `s` for `spec`, checking the axis and k (op names the operator). */
static int view_of(const char *op, const struct sort_spec *spec, const mxc_shape *s, int *axis,
                   struct sort_view *v) {
    char b[128];
    int rc = mxc__index_axis(op, &spec->axis, s, axis);
    if (rc != MXC_OK)
        return rc;
    mxc__index_view(s, *axis, &v->outer, &v->n, &v->inner);
    v->k = spec->k < 1 ? v->n : spec->k;
    if (v->k > v->n)
        return mxc__error(MXC_EINVAL,
                          "%s: k=%d is more than the %lld elements along the axis of "
                          "data %s",
                          op, spec->k, (long long)v->n, mxc__shape_str(s, b, sizeof b));
    return MXC_OK;
}

/* data -> values and indices: data with the axis cut to k ((k,) for axis None); mask:
 * data's shape. */
static int spec_shape(const char *op, const struct sort_spec *spec, mxc_shape *in, mxc_shape *out,
                      int num_out) {
    int axis, rc = MXC_OK;
    struct sort_view v;
    MXC_CHECK(spec->dtype == DTYPE_FLOAT32, MXC_ENOTSUP,
              "%s: dtype=%s is not supported (float32 only)", op, dtype_choices[spec->dtype]);
    if (in[0].ndim == 0)
        return MXC_OK;
    MXC_TRY(view_of(op, spec, &in[0], &axis, &v));
    mxc_shape cut = axis == MXC__AXIS_NONE ? mxc_shape_make(1, &v.k) : in[0];
    if (axis != MXC__AXIS_NONE)
        cut.dims[axis] = v.k;
    for (int k = 0; k < num_out; k++)
        MXC_TRY(mxc__shape_assign(&out[k], spec->ret == RET_MASK ? &in[0] : &cut, op, "output"));
fail:
    return rc;
}

/* The order of row (o, r) of x into idx (n positions); tmp: room for n more. Returns idx or
 * tmp, whichever holds the result (a bottom-up merge sort, stable, O(n log n)). */
static int64_t *sort_row(const float *x, const struct sort_view *v, int64_t o, int64_t r,
                         bool ascend, int64_t *idx, int64_t *tmp) {
    const float *row = x + o * v->n * v->inner + r;
    const int64_t st = v->inner, n = v->n;
    for (int64_t j = 0; j < n; j++)
        idx[j] = j;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t a = lo, b = mid, t = lo;
            while (a < mid && b < hi) {
                bool take_b =
                    mxc__sort_before(row[idx[b] * st], idx[b], row[idx[a] * st], idx[a], ascend);
                tmp[t++] = take_b ? idx[b++] : idx[a++];
            }
            while (a < mid)
                tmp[t++] = idx[a++];
            while (b < hi)
                tmp[t++] = idx[b++];
        }
        int64_t *swap = idx;
        idx = tmp;
        tmp = swap;
    }
    return idx;
}

/* Temp space for sort_row: 2 n positions. */
static int sort_temp(const struct mxc__op_call *c, const struct sort_view *v, int64_t **idx,
                     int64_t **tmp) {
    void *p;
    int rc = mxc__resource_temp(c->resources[0], (size_t)(2 * v->n) * sizeof(int64_t), &p);
    *idx = p;
    *tmp = *idx + v->n;
    return rc;
}

/* Calls `fn` with the order of every row of x (the CPU's side of both kernels): kb and nb
 * are the row's first element in a (outer, k, inner) and a (outer, n, inner) tensor. */
struct sorted_row {
    const struct sort_view *v;
    const int64_t *order;
    int64_t kb, nb;
};

static int each_sorted_row(const struct mxc__op_call *c, const struct sort_view *v, bool ascend,
                           void (*fn)(const struct sorted_row *row, void *arg), void *arg) {
    int64_t *idx, *tmp;
    int rc = sort_temp(c, v, &idx, &tmp);
    if (rc != MXC_OK)
        return rc;
    for (int64_t o = 0; o < v->outer; o++)
        for (int64_t r = 0; r < v->inner; r++) {
            struct sorted_row row = {v, sort_row(c->in_data[0].data, v, o, r, ascend, idx, tmp),
                                     o * v->k * v->inner + r, o * v->n * v->inner + r};
            fn(&row, arg);
        }
    return MXC_OK;
}

/* The view of a call's data (in_data: both kernels read it). */
static int call_view(const char *op, const struct mxc__op_call *c, const struct sort_spec *spec,
                     struct sort_view *v) {
    int axis;
    return view_of(op, spec, &c->in_data[0].shape, &axis, v);
}

/* The forward's outputs, each with its request (MXC__REQ_NULL: not asked for). */
struct sort_outputs {
    const float *x;
    float *val, *ind, *mask;
    int rv, ri, rm;
};

/* value, index (outer, k, inner) of the first k; mask (outer, n, inner): 1 on them. */
static void write_row(const struct sorted_row *row, void *arg) {
    const struct sort_outputs *a = arg;
    const struct sort_view *v = row->v;
    for (int64_t t = 0; t < v->k; t++) {
        int64_t q = row->kb + t * v->inner, j = row->order[t];
        if (a->rv != MXC__REQ_NULL)
            mxc__index_store(a->rv, a->val, q, a->x[row->nb + j * v->inner]);
        if (a->ri != MXC__REQ_NULL)
            mxc__index_store(a->ri, a->ind, q, (float)j);
    }
    for (int64_t t = 0; a->rm != MXC__REQ_NULL && t < v->n; t++)
        mxc__index_store(a->rm, a->mask, row->nb + row->order[t] * v->inner,
                         t < v->k ? 1.0f : 0.0f);
}

static int spec_forward(const char *op, const struct mxc__op_call *c, const struct sort_spec *spec,
                        bool gpu) {
    const struct mxc__tensor *out = c->out_data;
    struct sort_outputs a = {c->in_data[0].data, NULL,          NULL,         NULL,
                             MXC__REQ_NULL,      MXC__REQ_NULL, MXC__REQ_NULL};
    switch (spec->ret) {
    case RET_VALUE: a.val = out[0].data, a.rv = c->req[0]; break;
    case RET_INDICES: a.ind = out[0].data, a.ri = c->req[0]; break;
    case RET_MASK: a.mask = out[0].data, a.rm = c->req[0]; break;
    default: a.val = out[0].data, a.rv = c->req[0], a.ind = out[1].data, a.ri = c->req[1]; break;
    }
    struct sort_view v;
    int rc = call_view(op, c, spec, &v);
    if (rc != MXC_OK || v.n == 0)
        return rc;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__topk_gpu(a.x, a.val, a.ind, a.mask, v.outer, v.n, v.inner, v.k, spec->ascend,
                             a.rv, a.ri, a.rm, c->rctx->stream);
#endif
    (void)gpu;
    return each_sorted_row(c, &v, spec->ascend, write_row, &a);
}

struct sort_grads {
    const float *g;
    float *gx;
    int req;
};

/* d_data (outer, n, inner) = d_value (outer, k, inner) at the kept elements, else 0. */
static void grad_row(const struct sorted_row *row, void *arg) {
    const struct sort_grads *a = arg;
    const struct sort_view *v = row->v;
    for (int64_t t = 0; t < v->n; t++)
        mxc__index_store(a->req, a->gx, row->nb + row->order[t] * v->inner,
                         t < v->k ? a->g[row->kb + t * v->inner] : 0.0f);
}

/* The backward: d_data from d_value; zero for indices and masks. */
static int spec_backward(const char *op, const struct mxc__op_call *c, const struct sort_spec *spec,
                         bool gpu) {
    struct sort_grads a = {c->out_grad[0].data, c->in_grad[0].data, c->req[0]};
    if (spec->ret == RET_INDICES || spec->ret == RET_MASK || a.req == MXC__REQ_NULL)
        return mxc__index_zero_grads(c, 1, gpu);
    struct sort_view v;
    int rc = call_view(op, c, spec, &v);
    if (rc != MXC_OK || v.n == 0)
        return rc;
#ifdef MXC_USE_CUDA
    if (gpu)
        return mxc__topk_grad_gpu(c->in_data[0].data, a.g, a.gx, v.outer, v.n, v.inner, v.k,
                                  spec->ascend, a.req, c->rctx->stream);
#endif
    return each_sorted_row(c, &v, spec->ascend, grad_row, &a);
}

/* ---- The operators ------------------------------------------------------------------- */

struct topk_param {
    struct mxc__opt_float axis;
    int k;
    int ret_typ;
    bool is_ascend;
    int dtype;
};

static const struct mxc__param topk_params[] = {
    {"axis", MXC__PARAM_OPT_FLOAT, offsetof(struct topk_param, axis), "-1", 1, 0, NULL,
     "int or None: the axis to sort along (negative: from the end); None: the flattened array"},
    MXC__P_INT(struct topk_param, k, "1", 1, 0, "how many to keep; below 1: the whole axis"),
    MXC__P_ENUM(struct topk_param, ret_typ, "indices", ret_choices,
                "return the values, the indices (float32), a mask of the kept elements, or "
                "both values and indices"),
    MXC__P_BOOL(struct topk_param, is_ascend, "False", "keep the smallest instead of the largest"),
    MXC__P_ENUM(struct topk_param, dtype, "float32", dtype_choices,
                "type of the indices (float32 only)"),
};

struct sort_param {
    struct mxc__opt_float axis;
    bool is_ascend;
    int dtype; /* argsort only */
};

#define SORT_PARAMS                                                                              \
    {"axis",                                                                                     \
     MXC__PARAM_OPT_FLOAT,                                                                       \
     offsetof(struct sort_param, axis),                                                          \
     "-1",                                                                                       \
     1,                                                                                          \
     0,                                                                                          \
     NULL,                                                                                       \
     "int or None: the axis to sort along (negative: from the end); None: the flattened array"}, \
        MXC__P_BOOL(struct sort_param, is_ascend, "True", "ascending (else descending)")
static const struct mxc__param sort_params[] = {SORT_PARAMS};
static const struct mxc__param argsort_params[] = {
    SORT_PARAMS,
    MXC__P_ENUM(struct sort_param, dtype, "float32", dtype_choices,
                "type of the indices (float32 only)"),
};

static struct sort_spec spec_topk(const void *params) {
    const struct topk_param *p = params;
    return (struct sort_spec){p->axis, p->k, p->ret_typ, p->is_ascend, p->dtype};
}

static struct sort_spec spec_sort(const void *params) {
    const struct sort_param *p = params;
    return (struct sort_spec){p->axis, 0, RET_VALUE, p->is_ascend, DTYPE_FLOAT32};
}

static struct sort_spec spec_argsort(const void *params) {
    const struct sort_param *p = params;
    return (struct sort_spec){p->axis, 0, RET_INDICES, p->is_ascend, p->dtype};
}

/* topk returns two arrays for ret_typ both. */
static int topk_outputs(const void *params, const char **names, int max) {
    const struct topk_param *p = params;
    int n = p->ret_typ == RET_BOTH ? 2 : 1;
    static const char *const one[] = {"output"}, *const two[] = {"output0", "output1"};
    for (int k = 0; k < n && k < max; k++)
        names[k] = n == 1 ? one[k] : two[k];
    return n;
}

static const char *const data_input[] = {"data", NULL};
static const char *const one_output[] = {"output", NULL};

/* Each operator's kernels (name suffix sfx: empty on the CPU, _gpu) and shape inference:
 * its spec, then the shared code. */
#define SORT_KERNELS(ident, sfx, gpu)                                \
    static int ident##_forward##sfx(const struct mxc__op_call *c) {  \
        struct sort_spec s = spec_##ident(c->params);                \
        return spec_forward(#ident, c, &s, gpu);                     \
    }                                                                \
    static int ident##_backward##sfx(const struct mxc__op_call *c) { \
        struct sort_spec s = spec_##ident(c->params);                \
        return spec_backward(#ident, c, &s, gpu);                    \
    }
#ifdef MXC_USE_CUDA
#define SORT_GPU(ident) SORT_KERNELS(ident, _gpu, true)
#else
#define SORT_GPU(ident)
#endif

#define SORT_OP(ident, param_struct, table, outputs_, list_outputs_, desc)                  \
    static int ident##_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, \
                             int num_out, mxc_shape *aux, int num_aux) {                    \
        (void)num_in, (void)aux, (void)num_aux;                                             \
        struct sort_spec s = spec_##ident(params);                                          \
        return spec_shape(#ident, &s, in, out, num_out);                                    \
    }                                                                                       \
    SORT_KERNELS(ident, , false)                                                            \
    SORT_GPU(ident)                                                                         \
    const struct mxc__op_def mxc__op_##ident = {                                            \
        .name = #ident,                                                                     \
        .description = desc,                                                                \
        .param_size = sizeof(param_struct),                                                 \
        .params = table,                                                                    \
        .num_params = (int)MXC_ARRAY_SIZE(table),                                           \
        .inputs = data_input,                                                               \
        .outputs = outputs_,                                                                \
        .list_outputs = list_outputs_,                                                      \
        .infer_shape = ident##_shape,                                                       \
        .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,                              \
        .forward_resources = {MXC__RES_TEMP + 1},                                           \
        .backward_resources = {MXC__RES_TEMP + 1},                                          \
        .forward_cpu = ident##_forward,                                                     \
        .backward_cpu = ident##_backward,                                                   \
        .forward_gpu = MXC__GPU(ident##_forward_gpu),                                       \
        .backward_gpu = MXC__GPU(ident##_backward_gpu),                                     \
    };

SORT_OP(topk, struct topk_param, topk_params, NULL, topk_outputs,
        "The k largest (or smallest) elements along axis: values, indices, a mask or both")
SORT_OP(sort, struct sort_param, sort_params, one_output, NULL,
        "The elements sorted along axis (ties in order of position, NaN last)")
SORT_OP(argsort, struct sort_param, argsort_params, one_output, NULL,
        "The positions (float32) that sort the elements along axis")

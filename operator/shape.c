/*
 * operator/shape.c — operators that change only how an array's elements are indexed:
 * Flatten, Reshape, expand_dims, squeeze and _copy (the elements stay in order, so forward
 * and backward are copies, allowed in place) and transpose and SwapAxis (a permutation of
 * the axes, forward with it, backward with its inverse). Reshape follows MXNet's target-shape
 * language (0 copy, -1 infer, -2 copy the rest, -3 merge two, -4 split one, read right to left with
 * reverse). Row-major; every one takes any dtype Cast does (elements moved; add-to in the
 * dtype's arithmetic, operator/cast.h).
 */
#include "operator/cast.h"
#include "operator/copy_gpu.h"
#include "operator/gpu.h"
#include "operator/op.h"
#include "operator/walk.h"

#include <stdio.h>
#include <string.h>

static const char *const in_data[] = {"data", NULL};
static const char *const out_output[] = {"output", NULL};

/* ---- Copies (Flatten, Reshape, expand_dims) ---------------------------------------- */

/* out: any shape with data's element count, the same elements in the same order. */
static int copy_forward(const struct mxc__op_call *c) {
    mxc__copy_req_typed(c->out_data[0].data, c->in_data[0].data, c->out_data[0].size,
                        c->in_data[0].dtype, c->req[0]);
    return MXC_OK;
}

/* d_data = d_out, read in data's shape. */
static int copy_backward(const struct mxc__op_call *c) {
    mxc__copy_req_typed(c->in_grad[0].data, c->out_grad[0].data, c->in_grad[0].size,
                        c->in_grad[0].dtype, c->req[0]);
    return MXC_OK;
}

#ifdef MXC_USE_CUDA
/* The same copies on a GPU (operator/copy_gpu.cu). */
static int copy_forward_gpu(const struct mxc__op_call *c) {
    return mxc__copy_req_typed_gpu(c->out_data[0].data, c->in_data[0].data, c->out_data[0].size,
                                   c->in_data[0].dtype, c->req[0], c->rctx->stream);
}

static int copy_backward_gpu(const struct mxc__op_call *c) {
    return mxc__copy_req_typed_gpu(c->in_grad[0].data, c->out_grad[0].data, c->in_grad[0].size,
                                   c->in_grad[0].dtype, c->req[0], c->rctx->stream);
}
#endif

/* The kernels and options of the copies: backward reads only d_out, both ways in place;
 * any dtype (bytes moved; add-to adds in the dtype). */
#define COPY_KERNELS                                                                              \
    .dtypes = MXC__DTYPES_ALL, .backward_deps = MXC__DEP_OUT_GRAD, .inplace = MXC__INPLACE(0, 0), \
    .backward_inplace = MXC__INPLACE(0, 0), .forward_cpu = copy_forward,                          \
    .backward_cpu = copy_backward, .forward_gpu = MXC__GPU(copy_forward_gpu),                     \
    .backward_gpu = MXC__GPU(copy_backward_gpu)

/* The output of a size-preserving operator, or an error naming both shapes. */
static int assign_same_size(mxc_shape *out, const mxc_shape *want, const mxc_shape *data,
                            const char *op) {
    char b1[128], b2[128];
    if (mxc_shape_size(want) != mxc_shape_size(data))
        return mxc__error(MXC_ESHAPE,
                          "%s: cannot turn data %s (%lld elements) into %s "
                          "(%lld elements)",
                          op, mxc__shape_str(data, b1, sizeof b1), (long long)mxc_shape_size(data),
                          mxc__shape_str(want, b2, sizeof b2), (long long)mxc_shape_size(want));
    return mxc__shape_assign(out, want, op, "output");
}

/* ---- Flatten ------------------------------------------------------------------------ */

/* data (d0, d1, ..., dk) -> output (d0, d1*...*dk); a 1-D data (d0) gives (d0, 1). */
static int flatten_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                         mxc_shape *aux, int num_aux) {
    (void)params, (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    if (in[0].ndim == 0)
        return MXC_OK;
    int64_t rest = 1;
    for (int i = 1; i < in[0].ndim; i++)
        rest *= in[0].dims[i];
    int64_t d[2] = {in[0].dims[0], rest};
    mxc_shape o = mxc_shape_make(2, d);
    return mxc__shape_assign(&out[0], &o, "Flatten", "output");
}

const struct mxc__op_def mxc__op_Flatten = {
    .name = "Flatten",
    .description = "Collapses every axis but the first: (d0, d1, ..., dk) -> (d0, d1*...*dk)",
    .inputs = in_data,
    .outputs = out_output,
    .infer_shape = flatten_shape,
    COPY_KERNELS,
};

/* ---- Reshape ------------------------------------------------------------------------ */

struct reshape_param {
    mxc_shape shape;
    bool reverse;
};

static const struct mxc__param reshape_params[] = {
    MXC__P_TUPLE(struct reshape_param, shape, "()",
                 "target shape; 0 copy, -1 infer, -2 copy the rest, -3 merge two, "
                 "-4 a b split one into a * b"),
    MXC__P_BOOL(struct reshape_param, reverse, "False",
                "read the special values from right to left"),
};

static void reverse_dims(int64_t *d, int n) {
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        int64_t t = d[i];
        d[i] = d[j];
        d[j] = t;
    }
}

/* MXNet's InferReshapeShape: the shape `spec` makes of data `src`, into `dst`. One
 * deliberate difference: MXNet fills the -1 at its position in `spec`, which is wrong
 * (and writes out of bounds) when a -2 or -4 comes before it; here it is filled at its
 * position in the result, which is the same wherever MXNet is right. */
static int reshape_infer(const mxc_shape *spec, const mxc_shape *src, bool reverse,
                         mxc_shape *dst) {
    char b1[128], b2[128];
    int64_t s[MXC_MAX_NDIM], p[MXC_MAX_NDIM], t[MXC_MAX_NDIM];
    int ns = src->ndim, np = spec->ndim, nt = 0, si = 0, inf = -1;
    memcpy(s, src->dims, sizeof(int64_t) * (size_t)ns);
    memcpy(p, spec->dims, sizeof(int64_t) * (size_t)np);
    if (reverse) {
        reverse_dims(s, ns);
        reverse_dims(p, np);
    }
#define RESHAPE_FAIL(...)                                                                          \
    do {                                                                                           \
        char why[160];                                                                             \
        snprintf(why, sizeof why, __VA_ARGS__);                                                    \
        return mxc__error(MXC_ESHAPE, "Reshape: cannot reshape data %s with shape=%s%s: %s",       \
                          mxc__shape_str(src, b1, sizeof b1), mxc__shape_str(spec, b2, sizeof b2), \
                          reverse ? " (reverse)" : "", why);                                       \
    } while (0)
#define PUSH(v)                                                    \
    do {                                                           \
        if (nt == MXC_MAX_NDIM)                                    \
            RESHAPE_FAIL("more than %d dimensions", MXC_MAX_NDIM); \
        t[nt++] = (v);                                             \
    } while (0)
    for (int i = 0; i < np; i++) {
        int64_t v = p[i];
        if (v == 0) { /* copy one */
            if (si >= ns)
                RESHAPE_FAIL("0 at position %d has no data axis left to copy", i);
            PUSH(s[si++]);
        } else if (v == -1) { /* infer (below) */
            if (inf >= 0)
                RESHAPE_FAIL("only one dimension can be -1 (inferred)");
            inf = nt;
            PUSH(1);
            si++;
        } else if (v == -2) { /* copy the rest */
            while (si < ns)
                PUSH(s[si++]);
        } else if (v == -3) { /* merge two */
            if (si + 1 >= ns)
                RESHAPE_FAIL("-3 at position %d needs two data axes, %d left", i, ns - si);
            PUSH(s[si] * s[si + 1]);
            si += 2;
        } else if (v == -4) { /* split one into the next two values (one may be -1) */
            if (i + 2 >= np)
                RESHAPE_FAIL("-4 at position %d must be followed by two values", i);
            if (si >= ns)
                RESHAPE_FAIL("-4 at position %d has no data axis left to split", i);
            int64_t d0 = s[si++], d1 = p[i + 1], d2 = p[i + 2];
            i += 2;
            if (d1 == -1 && d2 == -1)
                RESHAPE_FAIL("-4 cannot split into two -1");
            if (d1 < -1 || d2 < -1 || d1 == 0 || d2 == 0)
                RESHAPE_FAIL("-4 splits into positive sizes (one may be -1)");
            if (d1 == -1)
                d1 = d0 / d2;
            if (d2 == -1)
                d2 = d0 / d1;
            int64_t made;
            if (!mxc__mul_add(0, d1, d2, &made) || made != d0)
                RESHAPE_FAIL("split sizes %lld * %lld do not make %lld", (long long)d1,
                             (long long)d2, (long long)d0);
            PUSH(d1);
            PUSH(d2);
        } else if (v > 0) {
            PUSH(v);
            si++;
        } else {
            RESHAPE_FAIL("%lld is not a size or a special value (0, -1, -2, -3, -4)", (long long)v);
        }
    }
    if (inf >= 0) {
        int64_t known = 1; /* sizes from `spec` may be anything up to INT64_MAX */
        for (int i = 0; i < nt; i++)
            if (!mxc__mul_add(0, known, t[i], &known))
                RESHAPE_FAIL("the other dimensions hold more elements than int64 does");
        if (known == 0 || mxc_shape_size(src) % known != 0)
            RESHAPE_FAIL("the -1 cannot be inferred (%lld elements, %lld in the other "
                         "dimensions)",
                         (long long)mxc_shape_size(src), (long long)known);
        t[inf] = mxc_shape_size(src) / known;
    }
#undef PUSH
#undef RESHAPE_FAIL
    if (reverse)
        reverse_dims(t, nt);
    *dst = mxc_shape_make(nt, t);
    return MXC_OK;
}

/* data known: output from `shape` (or, with shape (), the given output of equal size). */
static int reshape_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                         mxc_shape *aux, int num_aux) {
    const struct reshape_param *p = params;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    if (in[0].ndim == 0)
        return MXC_OK; /* MXNet cannot reverse the special values either */
    mxc_shape o;
    if (p->shape.ndim == 0) {
        if (out[0].ndim == 0)
            return MXC_OK; /* no target: the output must come from elsewhere */
        o = out[0];
    } else {
        int rc = reshape_infer(&p->shape, &in[0], p->reverse, &o);
        if (rc != MXC_OK)
            return rc;
    }
    return assign_same_size(&out[0], &o, &in[0], "Reshape");
}

const struct mxc__op_def mxc__op_Reshape = {
    .name = "Reshape",
    .description = "Gives data a new shape with the same number of elements",
    .param_size = sizeof(struct reshape_param),
    .params = reshape_params,
    .num_params = (int)MXC_ARRAY_SIZE(reshape_params),
    .inputs = in_data,
    .outputs = out_output,
    .infer_shape = reshape_shape,
    COPY_KERNELS,
};

/* ---- expand_dims -------------------------------------------------------------------- */

struct expand_dims_param {
    int axis;
};

static const struct mxc__param expand_dims_params[] = {
    MXC__P_INT(struct expand_dims_param, axis, NULL, -MXC_MAX_NDIM, MXC_MAX_NDIM - 1,
               "position of the new axis of size 1 in the output; negative counts from the "
               "end (range [-ndim-1, ndim])"),
};

/* data (d0, ..., dk) -> output with a 1 inserted at `axis`; the output gives data back. */
static int expand_dims_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out,
                             int num_out, mxc_shape *aux, int num_aux) {
    const struct expand_dims_param *p = params;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    char b[128];
    if (in[0].ndim == 0) {
        /* from the output: drop its axis (which must be 1) */
        if (out[0].ndim < 2)
            return MXC_OK;
        int a = p->axis < 0 ? p->axis + out[0].ndim : p->axis;
        if (a < 0 || a >= out[0].ndim || out[0].dims[a] != 1)
            return mxc__error(MXC_ESHAPE, "expand_dims: output %s has no axis %d of size 1",
                              mxc__shape_str(&out[0], b, sizeof b), p->axis);
        mxc_shape d = {.ndim = out[0].ndim - 1};
        for (int i = 0, j = 0; i < out[0].ndim; i++)
            if (i != a)
                d.dims[j++] = out[0].dims[i];
        in[0] = d;
        return MXC_OK;
    }
    int nd = in[0].ndim;
    if (p->axis < -nd - 1 || p->axis > nd)
        return mxc__error(MXC_EINVAL, "expand_dims: axis=%d is outside [%d, %d] for data %s",
                          p->axis, -nd - 1, nd, mxc__shape_str(&in[0], b, sizeof b));
    if (nd == MXC_MAX_NDIM)
        return mxc__error(MXC_ENOTSUP,
                          "expand_dims: data %s already has the most "
                          "dimensions supported (%d)",
                          mxc__shape_str(&in[0], b, sizeof b), MXC_MAX_NDIM);
    int a = p->axis < 0 ? p->axis + nd + 1 : p->axis;
    mxc_shape o = {.ndim = nd + 1};
    for (int i = 0, j = 0; i <= nd; i++)
        o.dims[i] = i == a ? 1 : in[0].dims[j++];
    return mxc__shape_assign(&out[0], &o, "expand_dims", "output");
}

const struct mxc__op_def mxc__op_expand_dims = {
    .name = "expand_dims",
    .description = "Inserts an axis of size 1 at position axis",
    .param_size = sizeof(struct expand_dims_param),
    .params = expand_dims_params,
    .num_params = (int)MXC_ARRAY_SIZE(expand_dims_params),
    .inputs = in_data,
    .outputs = out_output,
    .infer_shape = expand_dims_shape,
    COPY_KERNELS,
};

/* ---- squeeze ------------------------------------------------------------------------ */

struct squeeze_param {
    struct mxc__opt_tuple axis;
};

static const struct mxc__param squeeze_params[] = {
    MXC__P_OPT_TUPLE(struct squeeze_param, axis, "None",
                     "the size-1 axes to remove (negative count from the end); None: every "
                     "size-1 axis"),
};

/* data -> data without the chosen size-1 axes; (1,) when none is left, as in MXNet. */
static int squeeze_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                         mxc_shape *aux, int num_aux) {
    const struct squeeze_param *p = params;
    (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    char b1[128], b2[128];
    if (in[0].ndim == 0)
        return MXC_OK;
    int nd = in[0].ndim;
    bool drop[MXC_MAX_NDIM] = {false};
    if (!p->axis.has_value) {
        for (int i = 0; i < nd; i++)
            drop[i] = in[0].dims[i] == 1;
    }
    for (int k = 0; p->axis.has_value && k < p->axis.tuple.ndim; k++) {
        int64_t v = p->axis.tuple.dims[k], a = v < 0 ? v + nd : v;
        if ((p->axis.none & (1u << k)) || a < 0 || a >= nd || drop[a] || in[0].dims[a] != 1)
            return mxc__error(MXC_EINVAL,
                              "squeeze: axis=%s: entry %d is not a distinct axis of size 1 of "
                              "data %s",
                              mxc__shape_str(&p->axis.tuple, b1, sizeof b1), k,
                              mxc__shape_str(&in[0], b2, sizeof b2));
        drop[a] = true;
    }
    mxc_shape o = {0};
    for (int i = 0; i < nd; i++)
        if (!drop[i])
            o.dims[o.ndim++] = in[0].dims[i];
    if (o.ndim == 0)
        o = (mxc_shape){1, {1}};
    return mxc__shape_assign(&out[0], &o, "squeeze", "output");
}

const struct mxc__op_def mxc__op_squeeze = {
    .name = "squeeze",
    .description = "Removes axes of size 1 (all, or the given ones)",
    .param_size = sizeof(struct squeeze_param),
    .params = squeeze_params,
    .num_params = (int)MXC_ARRAY_SIZE(squeeze_params),
    .inputs = in_data,
    .outputs = out_output,
    .infer_shape = squeeze_shape,
    COPY_KERNELS,
};

/* ---- _copy -------------------------------------------------------------------------- */

/* output and data have one shape, deduced either way. */
static int same_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                      mxc_shape *aux, int num_aux) {
    (void)params, (void)num_in, (void)num_out, (void)aux, (void)num_aux;
    int rc = mxc__shape_assign(&out[0], &in[0], "_copy", "output");
    return rc != MXC_OK ? rc : mxc__shape_assign(&in[0], &out[0], "_copy", "data");
}

const struct mxc__op_def mxc__op__copy = {
    .name = "_copy",
    .description = "Returns a copy of data (alias identity)",
    .inputs = in_data,
    .outputs = out_output,
    .infer_shape = same_shape,
    COPY_KERNELS,
};

/* ---- transpose ---------------------------------------------------------------------- */

struct transpose_param {
    mxc_shape axes;
};

static const struct mxc__param transpose_params[] = {
    MXC__P_TUPLE(struct transpose_param, axes, "()",
                 "output axis i is data axis axes[i]; () reverses the axes"),
};

/* The permutation an operator applies to `ndim`-D data: output axis i is data axis
 * perm[i]. */
typedef int (*perm_fn)(const void *params, int ndim, int *perm);

/* transpose: `axes` checked, or the reversal when it is empty. */
static int transpose_perm(const void *params, int ndim, int *perm) {
    const struct transpose_param *p = params;
    char b[128];
    if (p->axes.ndim == 0) {
        for (int i = 0; i < ndim; i++)
            perm[i] = ndim - 1 - i;
        return MXC_OK;
    }
    if (p->axes.ndim != ndim)
        return mxc__error(MXC_EINVAL, "transpose: axes=%s has %d entries for %d-D data",
                          mxc__shape_str(&p->axes, b, sizeof b), p->axes.ndim, ndim);
    bool seen[MXC_MAX_NDIM] = {false};
    for (int i = 0; i < ndim; i++) {
        int64_t a = p->axes.dims[i];
        if (a < 0 || a >= ndim || seen[a])
            return mxc__error(MXC_EINVAL,
                              "transpose: axes=%s is not a permutation of "
                              "0..%d",
                              mxc__shape_str(&p->axes, b, sizeof b), ndim - 1);
        seen[a] = true;
        perm[i] = (int)a;
    }
    return MXC_OK;
}

/* output dims[i] = data dims[perm[i]]; the output gives data back through the inverse. */
static int permuted_shape(perm_fn fn, const char *op, const void *params, mxc_shape *in,
                          mxc_shape *out) {
    int perm[MXC_MAX_NDIM], rc;
    if (in[0].ndim == 0) {
        if (out[0].ndim == 0)
            return MXC_OK;
        if ((rc = fn(params, out[0].ndim, perm)) != MXC_OK)
            return rc;
        mxc_shape d = {.ndim = out[0].ndim};
        for (int i = 0; i < d.ndim; i++)
            d.dims[perm[i]] = out[0].dims[i];
        in[0] = d;
        return MXC_OK;
    }
    if ((rc = fn(params, in[0].ndim, perm)) != MXC_OK)
        return rc;
    mxc_shape o = {.ndim = in[0].ndim};
    for (int i = 0; i < o.ndim; i++)
        o.dims[i] = in[0].dims[perm[i]];
    return mxc__shape_assign(&out[0], &o, op, "output");
}

/* dst[j0, ..., jn] (=, +=) src[...] with dst axis i = src axis perm[i], src `shape`
 * row-major: a walk of the permuted dims over src's strides (operator/walk.h), on the GPU of
 * gpu_rctx when it is given. */
static int permute(const mxc_run_ctx *gpu_rctx, void *dst, const void *src, int dtype,
                   const mxc_shape *shape, const int *perm, int req) {
    int64_t st[MXC_MAX_NDIM], acc = 1;
    for (int i = shape->ndim - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= shape->dims[i];
    }
    struct mxc__walk w = {.nd = shape->ndim};
    for (int i = 0; i < shape->ndim; i++) {
        w.dims[i] = shape->dims[perm[i]];
        w.strides[i] = st[perm[i]];
    }
    return mxc__walk_gather(gpu_rctx, dst, src, w, req, dtype);
}

/* out = data with axes permuted; on a GPU when gpu_rctx is given. */
static int permuted_fwd(perm_fn fn, const struct mxc__op_call *c, const mxc_run_ctx *gpu_rctx) {
    int perm[MXC_MAX_NDIM];
    int rc = fn(c->params, c->in_data[0].shape.ndim, perm);
    if (rc != MXC_OK)
        return rc;
    return permute(gpu_rctx, c->out_data[0].data, c->in_data[0].data, c->in_data[0].dtype,
                   &c->in_data[0].shape, perm, c->req[0]);
}

/* d_data = d_out permuted back: d_out has the output shape, the inverse permutation. */
static int permuted_bwd(perm_fn fn, const struct mxc__op_call *c, const mxc_run_ctx *gpu_rctx) {
    int perm[MXC_MAX_NDIM], inv[MXC_MAX_NDIM];
    int rc = fn(c->params, c->in_grad[0].shape.ndim, perm);
    if (rc != MXC_OK)
        return rc;
    for (int i = 0; i < c->in_grad[0].shape.ndim; i++)
        inv[perm[i]] = i;
    return permute(gpu_rctx, c->in_grad[0].data, c->out_grad[0].data, c->in_grad[0].dtype,
                   &c->out_grad[0].shape, inv, c->req[0]);
}

/* Shape inference and CPU / GPU kernels of an operator permuting by ident##_perm. */
#ifdef MXC_USE_CUDA
#define PERMUTED_GPU(ident)                                         \
    static int ident##_forward_gpu(const struct mxc__op_call *c) {  \
        return permuted_fwd(ident##_perm, c, c->rctx);              \
    }                                                               \
    static int ident##_backward_gpu(const struct mxc__op_call *c) { \
        return permuted_bwd(ident##_perm, c, c->rctx);              \
    }
#else
#define PERMUTED_GPU(ident)
#endif
#define PERMUTED_OP(ident, op)                                                              \
    static int ident##_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, \
                             int num_out, mxc_shape *aux, int num_aux) {                    \
        (void)num_in, (void)num_out, (void)aux, (void)num_aux;                              \
        return permuted_shape(ident##_perm, op, params, in, out);                           \
    }                                                                                       \
    static int ident##_forward(const struct mxc__op_call *c) {                              \
        return permuted_fwd(ident##_perm, c, NULL);                                         \
    }                                                                                       \
    static int ident##_backward(const struct mxc__op_call *c) {                             \
        return permuted_bwd(ident##_perm, c, NULL);                                         \
    }                                                                                       \
    PERMUTED_GPU(ident)

PERMUTED_OP(transpose, "transpose")

const struct mxc__op_def mxc__op_transpose = {
    .name = "transpose",
    .description = "Permutes the axes: output axis i is data axis axes[i] (default: reversed)",
    .param_size = sizeof(struct transpose_param),
    .params = transpose_params,
    .num_params = (int)MXC_ARRAY_SIZE(transpose_params),
    .inputs = in_data,
    .outputs = out_output,
    .infer_shape = transpose_shape,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .dtypes = MXC__DTYPES_ALL, /* elements moved, loaded and stored exactly */
    .forward_cpu = transpose_forward,
    .backward_cpu = transpose_backward,
    .forward_gpu = MXC__GPU(transpose_forward_gpu),
    .backward_gpu = MXC__GPU(transpose_backward_gpu),
};

/* ---- SwapAxis ----------------------------------------------------------------------- */

struct swapaxis_param {
    int dim1, dim2;
};

static const struct mxc__param swapaxis_params[] = {
    MXC__P_INT(struct swapaxis_param, dim1, "0", INT32_MIN, INT32_MAX,
               "the first axis to swap (negative counts from the end)"),
    MXC__P_INT(struct swapaxis_param, dim2, "0", INT32_MIN, INT32_MAX,
               "the second axis to swap (negative counts from the end)"),
};

/* The identity but for dim1 and dim2 exchanged. */
static int swapaxis_perm(const void *params, int ndim, int *perm) {
    const struct swapaxis_param *p = params;
    int a = p->dim1 < 0 ? p->dim1 + ndim : p->dim1, b = p->dim2 < 0 ? p->dim2 + ndim : p->dim2;
    if (a < 0 || a >= ndim || b < 0 || b >= ndim)
        return mxc__error(MXC_EINVAL,
                          "SwapAxis: dim1=%d or dim2=%d is outside [%d, %d] for %d-D "
                          "data",
                          p->dim1, p->dim2, -ndim, ndim - 1, ndim);
    for (int i = 0; i < ndim; i++)
        perm[i] = i == a ? b : i == b ? a : i;
    return MXC_OK;
}

PERMUTED_OP(swapaxis, "SwapAxis")

const struct mxc__op_def mxc__op_SwapAxis = {
    .name = "SwapAxis",
    .description = "Exchanges axes dim1 and dim2 (alias swapaxes)",
    .param_size = sizeof(struct swapaxis_param),
    .params = swapaxis_params,
    .num_params = (int)MXC_ARRAY_SIZE(swapaxis_params),
    .inputs = in_data,
    .outputs = out_output,
    .infer_shape = swapaxis_shape,
    .backward_deps = MXC__DEP_OUT_GRAD,
    .dtypes = MXC__DTYPES_ALL,
    .forward_cpu = swapaxis_forward,
    .backward_cpu = swapaxis_backward,
    .forward_gpu = MXC__GPU(swapaxis_forward_gpu),
    .backward_gpu = MXC__GPU(swapaxis_backward_gpu),
};

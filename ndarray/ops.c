/*
 * ndarray/ops.c — imperative arithmetic on arrays: element-wise operations with arrays
 * and scalars, dot and sum (all run through the registered operators), fills and
 * random fills. Each function validates its arrays, prepares the output (see the
 * convention in mxc/ndarray.h) and pushes one operation. Kernels work on contiguous
 * float32 data, row-major.
 */
#include "ndarray/ndarray_impl.h"

#include <math.h>
#include <string.h>

static bool same_shape(const mxc_shape *a, const mxc_shape *b) {
    return a->ndim == b->ndim && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

static int require_float32(const mxc_ndarray *a, const char *fn, const char *what) {
    if (a->dtype != MXC_FLOAT32)
        return mxc__error(MXC_ENOTSUP, "%s: %s is %s; arithmetic is defined on float32", fn, what,
                          mxc_dtype_name(a->dtype));
    return MXC_OK;
}

/* Makes `*out` ready to receive a result of `shape`, dtype and context of `like`:
 * creates it if NULL (setting *created), else checks it. */
static int prepare_output(const char *fn, const mxc_ndarray *like, const mxc_shape *shape,
                          mxc_ndarray **out, bool *created) {
    *created = false;
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "%s: out is NULL", fn);
    if (*out == NULL) {
        int rc = mxc_nd_create(shape, like->dtype, like->chunk->ctx, 1, out);
        *created = rc == MXC_OK;
        return rc;
    }
    /* its device is checked with the operands' by the operator's invocation */
    int rc = mxc__nd_check(*out, fn, "*out");
    if (rc != MXC_OK)
        return rc;
    char b1[128], b2[128];
    if (!same_shape(&(*out)->shape, shape))
        return mxc__error(MXC_ESHAPE, "%s: *out is %s, the result is %s", fn,
                          mxc__shape_str(&(*out)->shape, b1, sizeof b1),
                          mxc__shape_str(shape, b2, sizeof b2));
    if ((*out)->dtype != like->dtype)
        return mxc__error(MXC_ETYPE, "%s: *out is %s, the result is %s", fn,
                          mxc_dtype_name((*out)->dtype), mxc_dtype_name(like->dtype));
    return MXC_OK;
}

/* ---- Element-wise: the registered operators ------------------------------------- */

/* out = a (op) b through operator `op_name`, or a (op) scalar when `scalar_rhs`. */
static int elemwise(const char *op_name, const mxc_ndarray *a, const mxc_ndarray *b,
                    bool scalar_rhs, float scalar, mxc_ndarray **out, const char *fn) {
    int rc = mxc__nd_check(a, fn, "a");
    if (rc == MXC_OK && !scalar_rhs)
        rc = mxc__nd_check(b, fn, "b");
    if (rc == MXC_OK && out != NULL && *out != NULL)
        rc = mxc__nd_check(*out, fn, "*out");
    if (rc == MXC_OK)
        rc = require_float32(a, fn, "a");
    if (rc != MXC_OK)
        return rc;
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "%s: out is NULL", fn);
    const struct mxc__op_def *def = mxc__op_find(op_name);
    MXC_ASSERT(def != NULL); /* the names below are registered */
    struct mxc__scalar_param p = {scalar};
    mxc_ndarray *inputs[2] = {(mxc_ndarray *)a, (mxc_ndarray *)b};
    return mxc__in_call(
        fn, mxc__nd_invoke(def, scalar_rhs ? &p : NULL, scalar_rhs ? 1 : 2, inputs, 1, out, false));
}

int mxc_nd_add(const mxc_ndarray *a, const mxc_ndarray *b, mxc_ndarray **out) {
    return elemwise("_plus", a, b, false, 0, out, __func__);
}
int mxc_nd_sub(const mxc_ndarray *a, const mxc_ndarray *b, mxc_ndarray **out) {
    return elemwise("_minus", a, b, false, 0, out, __func__);
}
int mxc_nd_mul(const mxc_ndarray *a, const mxc_ndarray *b, mxc_ndarray **out) {
    return elemwise("_mul", a, b, false, 0, out, __func__);
}
int mxc_nd_div(const mxc_ndarray *a, const mxc_ndarray *b, mxc_ndarray **out) {
    return elemwise("_div", a, b, false, 0, out, __func__);
}
int mxc_nd_add_scalar(const mxc_ndarray *a, float s, mxc_ndarray **out) {
    return elemwise("_plus_scalar", a, NULL, true, s, out, __func__);
}
int mxc_nd_sub_scalar(const mxc_ndarray *a, float s, mxc_ndarray **out) {
    return elemwise("_minus_scalar", a, NULL, true, s, out, __func__);
}
int mxc_nd_mul_scalar(const mxc_ndarray *a, float s, mxc_ndarray **out) {
    return elemwise("_mul_scalar", a, NULL, true, s, out, __func__);
}
int mxc_nd_div_scalar(const mxc_ndarray *a, float s, mxc_ndarray **out) {
    return elemwise("_div_scalar", a, NULL, true, s, out, __func__);
}

/* ---- Fill -------------------------------------------------------------------------- */

/* IEEE half from float, rounding to nearest even. */
static uint16_t float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    if (((x >> 23) & 0xff) == 0xff) /* inf or nan */
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1)))
        half++; /* may carry into the exponent, which is the right rounding */
    return (uint16_t)half;
}

/* bfloat16 from float bits, rounding to nearest even (NaN kept a NaN). */
static uint16_t float_to_bfloat16(uint32_t bits) {
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x40u);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

struct fill_params {
    double value;
};

/* One element of `dtype` holding `v`, as bits in the low bytes (little-endian). */
static uint64_t element_bits(int dtype, double v) {
    float f = (float)v;
    uint32_t fbits;
    memcpy(&fbits, &f, 4);
    uint64_t bits = 0;
#define AS(type, x)                    \
    do {                               \
        type x_ = (type)(x);           \
        memcpy(&bits, &x_, sizeof x_); \
    } while (0)
    switch (dtype) {
    case MXC_FLOAT32: AS(float, v); break;
    case MXC_FLOAT64: AS(double, v); break;
    case MXC_FLOAT16: AS(uint16_t, float_to_half(f)); break;
    case MXC_BFLOAT16: AS(uint16_t, float_to_bfloat16(fbits)); break;
    case MXC_UINT8: AS(uint8_t, v); break;
    case MXC_INT8: AS(int8_t, v); break;
    case MXC_BOOL: AS(uint8_t, v != 0); break;
    case MXC_INT16: AS(int16_t, v); break;
    case MXC_UINT16: AS(uint16_t, v); break;
    case MXC_INT32: AS(int32_t, v); break;
    case MXC_UINT32: AS(uint32_t, v); break;
    case MXC_INT64: AS(int64_t, v); break;
    default: AS(uint64_t, v); break;
    }
#undef AS
    return bits;
}

#define FILL_AS(type)                   \
    do {                                \
        type *o_ = data;                \
        for (int64_t i = 0; i < n; i++) \
            o_[i] = (type)bits;         \
    } while (0)

/* Writes n elements of `size` bytes, each holding the low bytes of `bits`. */
static void fill_bits(void *data, int64_t n, int size, uint64_t bits) {
    switch (size) {
    case 1: memset(data, (int)(bits & 0xff), (size_t)n); break;
    case 2: FILL_AS(uint16_t); break;
    case 4: FILL_AS(uint32_t); break;
    default: FILL_AS(uint64_t); break;
    }
}

static int fill_kernel(const struct mxc__nd_call *call) {
    const struct mxc__tensor *out = &call->outputs[0];
    double v = ((const struct fill_params *)call->params)->value;
    uint64_t bits = element_bits(out->dtype, v);
    int size = (int)mxc_dtype_size(out->dtype);
#ifdef MXC_USE_CUDA
    if (call->rctx->ctx.dev_type == MXC_GPU)
        return mxc__fill_gpu(out->data, out->size, size, bits, call->rctx->stream);
#endif
    fill_bits(out->data, out->size, size, bits);
    return MXC_OK;
}

int mxc_nd_fill(mxc_ndarray *a, double value) {
    int rc = mxc__nd_check(a, __func__, "array");
    if (rc != MXC_OK)
        return rc;
    struct fill_params p = {value};
    struct mxc__nd_op op = {.name = "full",
                            .kernel = fill_kernel,
                            .params = &p,
                            .params_size = sizeof p,
                            .run_ctx = a->chunk->ctx,
                            .num_overwritten = 1};
    return mxc__nd_push(&op, NULL, 0, &a, 1);
}

/* mxc_nd_full for public function `fn`. */
static int full(const char *fn, const mxc_shape *shape, int dtype, mxc_context ctx, double value,
                mxc_ndarray **out) {
    int rc = mxc__nd_create(fn, shape, dtype, ctx, true, out);
    if (rc == MXC_OK)
        rc = mxc_nd_fill(*out, value);
    if (rc != MXC_OK && out && *out) {
        mxc_nd_free(*out);
        *out = NULL;
    }
    return mxc__in_call(fn, rc);
}

int mxc_nd_full(const mxc_shape *shape, int dtype, mxc_context ctx, double value,
                mxc_ndarray **out) {
    return full(__func__, shape, dtype, ctx, value, out);
}

int mxc_nd_zeros(const mxc_shape *shape, int dtype, mxc_context ctx, mxc_ndarray **out) {
    return full(__func__, shape, dtype, ctx, 0.0, out);
}

int mxc_nd_ones(const mxc_shape *shape, int dtype, mxc_context ctx, mxc_ndarray **out) {
    return full(__func__, shape, dtype, ctx, 1.0, out);
}

/* ---- dot and sum ------------------------------------------------------------------- */

/* Runs registered operator `name` with its default parameters on `inputs` into the
 * prepared `*out` (freeing a created one on failure). */
static int invoke_default(const char *name, mxc_ndarray *const *inputs, int num_inputs,
                          mxc_ndarray **out, bool created) {
    const struct mxc__op_def *def = mxc__op_find(name);
    MXC_ASSERT(def != NULL); /* the names used here are registered */
    _Alignas(16) unsigned char params[MXC__ND_MAX_PARAM_BYTES];
    MXC_ASSERT(def->param_size <= sizeof params); /* every table's (see the macro) */
    int rc = mxc__op_parse_params(def, 0, NULL, NULL, params);
    if (rc == MXC_OK)
        rc = mxc__nd_invoke(def, params, num_inputs, inputs, 1, out, false);
    if (rc != MXC_OK && created) {
        mxc_nd_free(*out);
        *out = NULL;
    }
    return rc;
}

int mxc_nd_dot(const mxc_ndarray *a, const mxc_ndarray *b, mxc_ndarray **out) {
    const char *fn = __func__;
    int rc = mxc__nd_check(a, fn, "a");
    if (rc == MXC_OK)
        rc = mxc__nd_check(b, fn, "b");
    if (rc == MXC_OK)
        rc = require_float32(a, fn, "a");
    if (rc == MXC_OK)
        rc = require_float32(b, fn, "b");
    if (rc != MXC_OK)
        return rc;
    char b1[128], b2[128];
    if (a->shape.ndim != 2 || b->shape.ndim != 2 || a->shape.dims[1] != b->shape.dims[0] ||
        a->shape.dims[0] > INT32_MAX || a->shape.dims[1] > INT32_MAX ||
        b->shape.dims[1] > INT32_MAX)
        return mxc__error(MXC_ESHAPE, "%s: needs (m, k) x (k, n), got %s x %s", fn,
                          mxc__shape_str(&a->shape, b1, sizeof b1),
                          mxc__shape_str(&b->shape, b2, sizeof b2));
    int64_t dims[2] = {a->shape.dims[0], b->shape.dims[1]};
    mxc_shape shape = mxc_shape_make(2, dims);
    bool created;
    rc = prepare_output(fn, a, &shape, out, &created);
    if (rc != MXC_OK)
        return rc;
    if (*out == a || *out == b || (*out)->chunk == a->chunk || (*out)->chunk == b->chunk) {
        if (created)
            mxc_nd_free(*out);
        return mxc__error(MXC_EINVAL, "%s: *out shares memory with an input", fn);
    }
    mxc_ndarray *inputs[2] = {(mxc_ndarray *)a, (mxc_ndarray *)b};
    return mxc__in_call(fn, invoke_default("dot", inputs, 2, out, created));
}

int mxc_nd_sum(const mxc_ndarray *a, mxc_ndarray **out) {
    int rc = mxc__nd_check(a, __func__, "a");
    if (rc == MXC_OK)
        rc = require_float32(a, __func__, "a");
    if (rc != MXC_OK)
        return rc;
    int64_t one = 1;
    mxc_shape shape = mxc_shape_make(1, &one);
    bool created;
    rc = prepare_output(__func__, a, &shape, out, &created);
    if (rc != MXC_OK)
        return rc;
    mxc_ndarray *input = (mxc_ndarray *)a;
    return mxc__in_call(__func__, invoke_default("sum", &input, 1, out, created));
}

/* ---- Random ------------------------------------------------------------------------ */

struct random_params {
    bool normal;
    float a, b; /* [low, high) or (mean, std) */
};

static int random_kernel(const struct mxc__nd_call *call) {
    const struct random_params *p = call->params;
    const struct mxc__tensor *out = &call->outputs[0];
    struct mxc__philox *rng = &call->resources[0]->rng;
#ifdef MXC_USE_CUDA
    if (call->rctx->ctx.dev_type == MXC_GPU)
        return mxc__philox_fill_gpu(rng, out->data, out->size, p->normal, p->a, p->b,
                                    call->rctx->stream);
#endif
    return p->normal ? mxc__philox_normal(rng, out->data, out->size, p->a, p->b)
                     : mxc__philox_uniform(rng, out->data, out->size, p->a, p->b);
}

static int random_fill(mxc_ndarray *a, bool normal, float x, float y, const char *fn) {
    int rc = mxc__nd_check(a, fn, "array");
    if (rc == MXC_OK)
        rc = require_float32(a, fn, "array");
    if (rc != MXC_OK)
        return rc;
    if (!normal && !(x <= y))
        return mxc__error(MXC_EINVAL, "%s: low %g is above high %g", fn, x, y);
    if (normal && !(y >= 0))
        return mxc__error(MXC_EINVAL, "%s: std %g is negative", fn, y);
    struct random_params p = {normal, x, y};
    static const int kinds[] = {MXC__RES_RANDOM};
    struct mxc__nd_op op = {.name = normal ? "random_normal" : "random_uniform",
                            .kernel = random_kernel,
                            .params = &p,
                            .params_size = sizeof p,
                            .run_ctx = a->chunk->ctx,
                            .resources = kinds,
                            .num_resources = 1,
                            .num_overwritten = 1};
    return mxc__in_call(fn, mxc__nd_push(&op, NULL, 0, &a, 1));
}

int mxc_nd_random_uniform(mxc_ndarray *a, float low, float high) {
    return random_fill(a, false, low, high, __func__);
}

int mxc_nd_random_normal(mxc_ndarray *a, float mean, float std) {
    return random_fill(a, true, mean, std, __func__);
}

/*
 * tests/check_op_dtype.c — dtypes beyond float32: the float16 conversions of common/half.h
 * (every half value, every rounding boundary, and numpy's table), Cast between every pair
 * of float32, float64, float16, uint8, int32, int8 and int64 forward and backward against
 * MXNet 1.9.1 (tests/data/ops/dtype, made by scripts/gen_op_refs_dtype.py), the copies
 * that only move elements (_copy, Reshape, Flatten, expand_dims, squeeze, transpose,
 * SwapAxis) on float16, int32, uint8 and more, mp_sgd_update and mp_sgd_mom_update against MXNet,
 * the per-operator dtype support (mxc_op_supports, invoke, bind) and an executor graph through
 * float16.
 */
#include "common/half.h"
#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "mxc/symbol.h"
#include "operator/op.h"
#include "tests/util/op_ref.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int all_dtypes[] = {MXC_FLOAT32, MXC_FLOAT64, MXC_FLOAT16, MXC_UINT8,
                                 MXC_INT32,   MXC_INT8,    MXC_INT64};

/* ---- Helpers ------------------------------------------------------------------------- */

/* A reference file of tests/data/ops/dtype by its name ("half"). */
static struct mxct_refs refs_load(const char *file) {
    char path[256];
    snprintf(path, sizeof path, "ops/dtype/%s.params", file);
    return mxct_refs_load(path);
}

static int64_t nd_size(const mxc_ndarray *a) {
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(a, &s));
    return mxc_shape_size(&s);
}

static size_t nd_nbytes(const mxc_ndarray *a) {
    return (size_t)nd_size(a) * mxc_dtype_size(mxc_nd_dtype(a));
}

/* A malloc'ed copy of a's bytes. */
static void *nd_bytes(const mxc_ndarray *a) {
    size_t nb = nd_nbytes(a);
    void *p = malloc(nb ? nb : 1);
    ck_assert_ptr_nonnull(p);
    CK_OK(mxc_nd_sync_copy_to_cpu(a, p, nb));
    return p;
}

/* A new CPU array of `dtype` and `shape` holding `bytes`. */
static mxc_ndarray *nd_of(mxc_shape shape, int dtype, const void *bytes) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_create(&shape, dtype, mxc_cpu(), 0, &a));
    CK_OK(mxc_nd_sync_copy_from_cpu(a, bytes, nd_nbytes(a)));
    return a;
}

/* got and want hold the same dtype, shape and bytes (NaNs included). */
static void expect_same(const mxc_ndarray *got, const mxc_ndarray *want, const char *what) {
    ck_assert_msg(mxc_nd_dtype(got) == mxc_nd_dtype(want), "%s: dtype %s, want %s", what,
                  mxc_dtype_name(mxc_nd_dtype(got)), mxc_dtype_name(mxc_nd_dtype(want)));
    ck_assert_int_eq(nd_size(got), nd_size(want));
    unsigned char *g = nd_bytes(got), *w = nd_bytes(want);
    size_t es = mxc_dtype_size(mxc_nd_dtype(want));
    for (size_t i = 0; i < nd_nbytes(want); i++)
        ck_assert_msg(g[i] == w[i], "%s: element %zu differs (byte %zu: 0x%02x, want 0x%02x)", what,
                      i / es, i % es, g[i], w[i]);
    free(g);
    free(w);
}

/* Runs `op`'s CPU backward kernel directly: in_grad[0] (of in_grad's dtype) = or += as
 * `req` says from out_grad[0] (data-free operators only: Cast and the copies). */
static void run_backward(const char *op, int nkv, const char *const *keys, const char *const *vals,
                         const mxc_ndarray *out_grad, mxc_ndarray *in_grad, int req) {
    const struct mxc__op_def *def = mxc__op_find(op);
    ck_assert_ptr_nonnull(def);
    _Alignas(16) unsigned char params[256];
    CK_OK(mxc__op_parse_params(def, nkv, keys, vals, params));
    mxc_shape sg, sx;
    CK_OK(mxc_nd_get_shape(out_grad, &sg));
    CK_OK(mxc_nd_get_shape(in_grad, &sx));
    void *og = nd_bytes(out_grad), *ig = nd_bytes(in_grad);
    struct mxc__tensor tg = {og, sg, mxc_nd_dtype(out_grad), mxc_cpu(), mxc_shape_size(&sg)};
    struct mxc__tensor tx = {ig, sx, mxc_nd_dtype(in_grad), mxc_cpu(), mxc_shape_size(&sx)};
    struct mxc__op_call call = {.params = params, .out_grad = &tg, .in_grad = &tx, .req = &req};
    CK_OK(def->backward_cpu(&call));
    CK_OK(mxc_nd_sync_copy_from_cpu(in_grad, ig, nd_nbytes(in_grad)));
    free(og);
    free(ig);
}

/* A new CPU array equal to a. */
static mxc_ndarray *nd_clone(const mxc_ndarray *a) {
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(a, &s));
    void *b = nd_bytes(a);
    mxc_ndarray *c = nd_of(s, mxc_nd_dtype(a), b);
    free(b);
    return c;
}

static mxc_ndarray *invoke1(const char *op, int nkv, const char *const *keys,
                            const char *const *vals, mxc_ndarray *in) {
    mxc_ndarray *out = NULL;
    CK_OK(mxc_imperative_invoke(op, nkv, keys, vals, 1, &in, 1, &out, 0));
    return out;
}

/* ---- float16 conversions ----------------------------------------------------------- */

/* Every half value against its definition: sign, exponent and significand read by hand
 * (ldexp), infinities, NaN payloads; and back to the same bits. */
START_TEST(test_half_every_value) {
    for (uint32_t u = 0; u < 65536; u++) {
        uint16_t h = (uint16_t)u;
        float f = mxc__half_to_float(h);
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        double sign = (h & 0x8000) ? -1.0 : 1.0;
        uint32_t fb = mxc__float_bits(f);
        ck_assert_msg((fb >> 31) == (u >> 15), "half 0x%04x: sign", u);
        if (e == 31 && m == 0) {
            ck_assert_msg(isinf(f), "half 0x%04x: not infinite", u);
        } else if (e == 31) {
            ck_assert_msg(isnan(f) && (fb & 0x7fffffu) == (uint32_t)m << 13,
                          "half 0x%04x: NaN payload 0x%x", u, fb);
        } else {
            double want = e ? sign * ldexp(1024 + m, e - 25) : sign * ldexp(m, -24);
            ck_assert_msg((double)f == want, "half 0x%04x: %.9g, want %.9g", u, f, want);
        }
        ck_assert_msg(mxc__float_to_half(f) == h, "half 0x%04x: back to 0x%04x", u,
                      mxc__float_to_half(f));
    }
}
END_TEST

/* Every rounding boundary: between consecutive finite halves a < b (both signs) the
 * midpoint goes to the even one, a float below it to a, above it to b; beyond the largest
 * half (65504) the midpoint to infinity (65520) overflows. Floats below the smallest
 * subnormal's half go to zero. */
START_TEST(test_half_rounding_boundaries) {
    for (uint32_t a = 0; a < 0x7c00; a++) {
        for (uint32_t s = 0; s <= 0x8000; s += 0x8000) {
            float fa = mxc__half_to_float((uint16_t)(a | s));
            double fb = a + 1 < 0x7c00 ? mxc__half_to_float((uint16_t)((a + 1) | s))
                                       : (s ? -65536.0 : 65536.0);
            float mid = (float)(((double)fa + fb) / 2); /* exact: 12 significant bits */
            ck_assert((double)mid == ((double)fa + fb) / 2);
            uint16_t even = (uint16_t)(((a & 1) ? a + 1 : a) | s);
            uint16_t ha = (uint16_t)(a | s), hb = (uint16_t)((a + 1) | s);
            ck_assert_msg(mxc__float_to_half(mid) == even, "midpoint after 0x%04x", ha);
            ck_assert_msg(mxc__float_to_half(nextafterf(mid, 0.0f)) == ha, "below 0x%04x", hb);
            ck_assert_msg(mxc__float_to_half(nextafterf(mid, s ? -INFINITY : INFINITY)) == hb,
                          "above the midpoint after 0x%04x", ha);
        }
    }
    ck_assert_uint_eq(mxc__float_to_half(ldexpf(1.0f, -25)), 0); /* a tie: to even, 0 */
    ck_assert_uint_eq(mxc__float_to_half(nextafterf(ldexpf(1.0f, -25), 1.0f)), 1);
    ck_assert_uint_eq(mxc__float_to_half(-1e-30f), 0x8000);
    ck_assert_uint_eq(mxc__float_to_half(1e30f), 0x7c00);
    ck_assert_uint_eq(mxc__float_to_half(-INFINITY), 0xfc00);
    /* a NaN whose payload lies below the half's 10 bits stays a NaN */
    ck_assert_uint_eq(mxc__float_to_half(mxc__bits_float(0x7f800001u)), 0x7c01);
    ck_assert_uint_eq(mxc__float_to_half(mxc__bits_float(0xffc00000u)), 0xfe00);
}
END_TEST

/* numpy's float16 of 1612 floats (boundaries of a sample of halves, specials, random bit
 * patterns) and its float32 of every 61st half, bit for bit. */
START_TEST(test_half_against_numpy) {
    struct mxct_refs r = refs_load("half");
    mxc_ndarray *f = mxct_refs_get(&r, "f"), *h = mxct_refs_get(&r, "h");
    mxc_ndarray *hb = mxct_refs_get(&r, "hb"), *hf = mxct_refs_get(&r, "hf");
    ck_assert_int_eq(mxc_nd_dtype(h), MXC_FLOAT16);
    ck_assert_int_eq(mxc_nd_dtype(hb), MXC_FLOAT16);
    float *fv = nd_bytes(f), *hfv = nd_bytes(hf);
    uint16_t *hv = nd_bytes(h), *hbv = nd_bytes(hb);
    for (int64_t i = 0; i < nd_size(f); i++)
        ck_assert_msg(mxc__float_to_half(fv[i]) == hv[i], "float 0x%08x: 0x%04x, numpy 0x%04x",
                      mxc__float_bits(fv[i]), mxc__float_to_half(fv[i]), hv[i]);
    ck_assert_int_ge(nd_size(hb), 1000);
    for (int64_t i = 0; i < nd_size(hb); i++)
        ck_assert_msg(mxc__float_bits(mxc__half_to_float(hbv[i])) == mxc__float_bits(hfv[i]),
                      "half 0x%04x", hbv[i]);
    free(fv);
    free(hfv);
    free(hv);
    free(hbv);
    mxct_refs_free(&r);
}
END_TEST

/* ---- Cast ---------------------------------------------------------------------------- */

/* Source dtype _i against MXNet: for every destination dtype the forward (bit for bit),
 * the backward (the head gradient cast back, write and add-to) and the inferred dtype. */
START_TEST(test_cast_against_mxnet) {
    int src = all_dtypes[_i];
    char file[64];
    snprintf(file, sizeof file, "cast_%s", mxc_dtype_name(src));
    struct mxct_refs r = refs_load(file);
    mxc_ndarray *in = mxct_refs_get(&r, "in");
    ck_assert_int_eq(mxc_nd_dtype(in), src);
    for (size_t d = 0; d < MXC_ARRAY_SIZE(all_dtypes); d++) {
        const char *dst = mxc_dtype_name(all_dtypes[d]);
        char name[64], what[96];
        const char *keys[] = {"dtype"}, *vals[] = {dst};
        mxc_ndarray *out = invoke1("Cast", 1, keys, vals, in);
        snprintf(name, sizeof name, "out_%s", dst);
        snprintf(what, sizeof what, "Cast %s -> %s", mxc_dtype_name(src), dst);
        expect_same(out, mxct_refs_get(&r, name), what);

        snprintf(name, sizeof name, "og_%s", dst);
        mxc_ndarray *og = mxct_refs_get(&r, name);
        mxc_shape s;
        CK_OK(mxc_nd_get_shape(in, &s));
        mxc_ndarray *g = NULL;
        CK_OK(mxc_nd_zeros(&s, src, mxc_cpu(), &g));
        run_backward("Cast", 1, keys, vals, og, g, MXC__REQ_WRITE);
        snprintf(name, sizeof name, "grad_%s", dst);
        snprintf(what, sizeof what, "Cast %s -> %s backward", mxc_dtype_name(src), dst);
        expect_same(g, mxct_refs_get(&r, name), what);
        /* add-to: the gradient twice, as adding it in src's dtype gives */
        mxc_ndarray *twice = NULL;
        const char *okeys[] = {"dtype"}, *ovals[] = {mxc_dtype_name(src)};
        mxc_ndarray *once = invoke1("Cast", 1, okeys, ovals, og); /* og in src's dtype */
        run_backward("Cast", 1, keys, vals, og, g, MXC__REQ_ADD);
        /* twice = 0 + once + once in src's arithmetic, through _copy's add-to */
        CK_OK(mxc_nd_zeros(&s, src, mxc_cpu(), &twice));
        run_backward("_copy", 0, NULL, NULL, once, twice, MXC__REQ_ADD);
        run_backward("_copy", 0, NULL, NULL, once, twice, MXC__REQ_ADD);
        snprintf(what, sizeof what, "Cast %s -> %s backward add-to", mxc_dtype_name(src), dst);
        expect_same(g, twice, what);
        mxc_nd_free(twice);
        mxc_nd_free(once);
        mxc_nd_free(g);
        mxc_nd_free(out);
    }
    mxct_refs_free(&r);
}
END_TEST

/* The add-to request adds in the dtype's own arithmetic: integers wrap, float16 rounds
 * once. */
START_TEST(test_copy_add_in_dtype) {
    mxc_shape s = mxc_shape_make(1, (int64_t[]){3});
    uint8_t u[3] = {200, 255, 1}, u2[3] = {100, 1, 2};
    mxc_ndarray *a = nd_of(s, MXC_UINT8, u), *b = nd_of(s, MXC_UINT8, u2);
    run_backward("_copy", 0, NULL, NULL, a, b, MXC__REQ_ADD);
    uint8_t *got = nd_bytes(b);
    ck_assert_uint_eq(got[0], 44); /* 300 mod 256 */
    ck_assert_uint_eq(got[1], 0);
    ck_assert_uint_eq(got[2], 3);
    free(got);
    mxc_nd_free(a);
    mxc_nd_free(b);
    uint16_t h[3] = {mxc__float_to_half(2048.0f), mxc__float_to_half(0.5f), 0x7c00};
    uint16_t h2[3] = {mxc__float_to_half(1.0f), mxc__float_to_half(0.25f), 0xfc00};
    a = nd_of(s, MXC_FLOAT16, h);
    b = nd_of(s, MXC_FLOAT16, h2);
    run_backward("_copy", 0, NULL, NULL, a, b, MXC__REQ_ADD);
    uint16_t *hg = nd_bytes(b);
    ck_assert(mxc__half_to_float(hg[0]) == 2048.0f); /* 2049 ties to even */
    ck_assert(mxc__half_to_float(hg[1]) == 0.75f);
    ck_assert(isnan(mxc__half_to_float(hg[2])));
    free(hg);
    mxc_nd_free(a);
    mxc_nd_free(b);
}
END_TEST

/* Cast's shape and type inference; its parameter; float32 -> float32 finite differences;
 * the dtypes it refuses. */
START_TEST(test_cast_infer_and_errors) {
    mxc_symbol *x = NULL, *y = NULL;
    CK_OK(mxc_symbol_variable("x", &x));
    const char *keys[] = {"dtype"}, *vals[] = {"int8"};
    const char *in_names[] = {"data"};
    CK_OK(mxc_symbol_create("cast", 1, keys, vals, "c", 1, in_names, &x, &y));
    const char *names[] = {"x"};
    int given = MXC_FLOAT16, arg_t[1], out_t[1], unknown;
    CK_OK(mxc_symbol_infer_type(y, 1, names, &given, arg_t, out_t, NULL, &unknown));
    ck_assert_int_eq(arg_t[0], MXC_FLOAT16);
    ck_assert_int_eq(out_t[0], MXC_INT8);
    ck_assert_int_eq(unknown, 0);
    mxc_symbol_free(y);
    /* bool and bfloat16 are MXNet's names, not mxc's kernels */
    const char *bad[] = {"bool"};
    CK_OK(mxc_symbol_create("Cast", 1, keys, bad, "c", 1, in_names, &x, &y));
    given = MXC_FLOAT32;
    ck_assert_int_eq(mxc_symbol_infer_type(y, 1, names, &given, arg_t, out_t, NULL, &unknown),
                     MXC_ENOTSUP);
    ck_assert_msg(strstr(mxc_last_error(), "bool"), "%s", mxc_last_error());
    mxc_symbol_free(y);
    const char *unknown_name[] = {"float8"};
    ck_assert_int_eq(mxc_symbol_create("Cast", 1, keys, unknown_name, "c", 1, in_names, &x, &y),
                     MXC_EINVAL);
    ck_assert_msg(strstr(mxc_last_error(), "float8"), "%s", mxc_last_error());
    ck_assert_int_eq(mxc_symbol_create("Cast", 0, NULL, NULL, "c", 1, in_names, &x, &y),
                     MXC_EINVAL);
    ck_assert_msg(strstr(mxc_last_error(), "dtype"), "%s", mxc_last_error());
    mxc_symbol_free(x);

    const char *f32[] = {"float32"};
    struct mxct_tensor t = mxct_tensor_random(mxc_shape_make(2, (int64_t[]){3, 4}), -2, 2, 7);
    mxct_op_gradcheck("Cast", (struct mxct_params){1, keys, f32}, true, &t, 1, NULL, 0, 1e-3, 1e-2,
                      1e-3);
    mxct_tensors_free(&t, 1);
}
END_TEST

/* Which operators take which dtypes: mxc_op_supports, invoke and bind agree. */
START_TEST(test_dtype_support) {
    for (size_t d = 0; d < MXC_ARRAY_SIZE(all_dtypes); d++) {
        ck_assert(mxc_op_supports("Cast", mxc_cpu(), all_dtypes[d]));
        ck_assert(mxc_op_supports("cast", mxc_cpu(), all_dtypes[d]));
        ck_assert(mxc_op_supports("Reshape", mxc_cpu(), all_dtypes[d]));
        ck_assert(mxc_op_supports("identity", mxc_cpu(), all_dtypes[d]));
        ck_assert(mxc_op_supports("relu", mxc_cpu(), all_dtypes[d]) ==
                  (all_dtypes[d] == MXC_FLOAT32));
    }
    ck_assert(!mxc_op_supports("Cast", mxc_cpu(), MXC_BOOL));
    ck_assert(!mxc_op_supports("Cast", mxc_cpu(), -1));
    ck_assert(!mxc_op_supports("Cast", mxc_cpu(), 99));
    ck_assert(mxc_op_supports("mp_sgd_update", mxc_cpu(), MXC_FLOAT16));
    ck_assert(!mxc_op_supports("mp_sgd_update", mxc_cpu(), MXC_INT32));
    ck_assert(!mxc_op_supports("sgd_update", mxc_cpu(), MXC_FLOAT16));

    /* invoke: relu on float16 has no kernel */
    mxc_shape s = mxc_shape_make(1, (int64_t[]){4});
    mxc_ndarray *h = NULL, *out = NULL;
    CK_OK(mxc_nd_zeros(&s, MXC_FLOAT16, mxc_cpu(), &h));
    ck_assert_int_eq(mxc_imperative_invoke("relu", 0, NULL, NULL, 1, &h, 1, &out, 0), MXC_ENOTSUP);
    ck_assert_msg(strstr(mxc_last_error(), "float16"), "%s", mxc_last_error());
    ck_assert_ptr_null(out);

    /* bind: a float16 argument into FullyConnected is refused at bind, naming the node */
    mxc_symbol *x = NULL, *fc = NULL;
    CK_OK(mxc_symbol_variable("x", &x));
    const char *keys[] = {"num_hidden", "no_bias"}, *vals[] = {"2", "True"};
    const char *in_names[] = {"data"};
    CK_OK(mxc_symbol_create("FullyConnected", 2, keys, vals, "fc", 1, in_names, &x, &fc));
    mxc_shape xs = mxc_shape_make(2, (int64_t[]){1, 4}), ws = mxc_shape_make(2, (int64_t[]){2, 4});
    mxc_ndarray *args[2] = {NULL, NULL};
    CK_OK(mxc_nd_zeros(&xs, MXC_FLOAT16, mxc_cpu(), &args[0]));
    CK_OK(mxc_nd_zeros(&ws, MXC_FLOAT16, mxc_cpu(), &args[1]));
    mxc_executor *ex = NULL;
    int rc = mxc_executor_bind(fc, mxc_cpu(), 2, args, NULL, NULL, 0, NULL, &ex);
    ck_assert_msg(rc == MXC_ENOTSUP || rc == MXC_ETYPE, "%d %s", rc, mxc_last_error());
    ck_assert_ptr_null(ex);
    mxc_nd_free(args[0]);
    mxc_nd_free(args[1]);
    mxc_symbol_free(fc);
    mxc_symbol_free(x);
    mxc_nd_free(h);
}
END_TEST

/* ---- Copies that only move bytes ----------------------------------------------------- */

struct copy_case {
    const char *op;
    const char *kv[4];
    mxc_shape in, out;
};

static const struct copy_case copy_cases[] = {
    {"_copy", {NULL}, {2, {3, 4}}, {2, {3, 4}}},
    {"identity", {NULL}, {2, {3, 4}}, {2, {3, 4}}},
    {"Reshape", {"shape", "(4, -1)"}, {2, {3, 4}}, {2, {4, 3}}},
    {"Flatten", {NULL}, {3, {2, 3, 2}}, {2, {2, 6}}},
    {"expand_dims", {"axis", "1"}, {2, {3, 4}}, {3, {3, 1, 4}}},
    {"squeeze", {NULL}, {3, {3, 1, 4}}, {2, {3, 4}}},
};

/* Case _i on float16, int32 and uint8: the output holds data's bytes in the new shape and
 * dtype; the backward gives out_grad's bytes back (write) and adds them in the dtype
 * (add-to). */
START_TEST(test_copies_any_dtype) {
    const struct copy_case *c = &copy_cases[_i];
    const int dtypes[] = {MXC_FLOAT16, MXC_INT32, MXC_UINT8, MXC_FLOAT64, MXC_INT8, MXC_INT64};
    int nkv = 0;
    while (nkv < 2 && c->kv[2 * nkv])
        nkv++;
    const char *keys[2] = {c->kv[0], c->kv[2]}, *vals[2] = {c->kv[1], c->kv[3]};
    for (size_t d = 0; d < MXC_ARRAY_SIZE(dtypes); d++) {
        int t = dtypes[d];
        size_t es = mxc_dtype_size(t);
        int64_t n = mxc_shape_size(&c->in);
        unsigned char bytes[12 * 8];
        for (size_t i = 0; i < (size_t)n * es; i++)
            bytes[i] = (unsigned char)(37 * i + 11 + d);
        if (t == MXC_FLOAT16) /* finite halves only: NaN bytes would not add as bytes */
            for (int64_t i = 0; i < n; i++) {
                uint16_t v = mxc__float_to_half((float)i - 5.5f);
                memcpy(bytes + 2 * i, &v, 2);
            }
        mxc_ndarray *x = nd_of(c->in, t, bytes);
        mxc_ndarray *y = invoke1(c->op, nkv, keys, vals, x);
        mxc_shape ys;
        CK_OK(mxc_nd_get_shape(y, &ys));
        ck_assert(ys.ndim == c->out.ndim &&
                  memcmp(ys.dims, c->out.dims, sizeof(int64_t) * (size_t)ys.ndim) == 0);
        mxc_ndarray *want_y = nd_of(c->out, t, bytes);
        expect_same(y, want_y, c->op);
        /* backward: write gives the bytes back in data's shape */
        mxc_ndarray *g = NULL;
        CK_OK(mxc_nd_zeros(&c->in, t, mxc_cpu(), &g));
        run_backward(c->op, nkv, keys, vals, y, g, MXC__REQ_WRITE);
        expect_same(g, x, c->op);
        /* add-to: ones (in the dtype) + data */
        const char *ck[] = {"dtype"}, *cv[] = {mxc_dtype_name(t)};
        struct mxct_tensor f1 = mxct_tensor_random(c->in, 1, 1, 1);
        mxc_ndarray *f = mxct_array_of(&f1);
        mxc_ndarray *ones = invoke1("Cast", 1, ck, cv, f); /* ones in the dtype, to add to */
        run_backward(c->op, nkv, keys, vals, y, ones, MXC__REQ_ADD);
        unsigned char *got = nd_bytes(ones);
        for (int64_t i = 0; i < n; i++) {
            double v = 0, w = 0;
            switch (t) {
            case MXC_FLOAT16: {
                uint16_t a, b;
                memcpy(&a, got + 2 * i, 2);
                memcpy(&b, bytes + 2 * i, 2);
                v = mxc__half_to_float(a), w = mxc__half_to_float(b) + 1.0;
                break;
            }
            case MXC_FLOAT64: {
                double a, b;
                memcpy(&a, got + 8 * i, 8);
                memcpy(&b, bytes + 8 * i, 8);
                v = a, w = b + 1.0;
                if (isnan(b))
                    v = w = 0;
                break;
            }
            case MXC_UINT8: v = got[i], w = (uint8_t)(bytes[i] + 1); break;
            case MXC_INT8: v = (int8_t)got[i], w = (int8_t)(uint8_t)(bytes[i] + 1); break;
            case MXC_INT32: {
                int32_t a, b;
                memcpy(&a, got + 4 * i, 4);
                memcpy(&b, bytes + 4 * i, 4);
                v = a, w = (int32_t)((uint32_t)b + 1u);
                break;
            }
            default: {
                int64_t a, b;
                memcpy(&a, got + 8 * i, 8);
                memcpy(&b, bytes + 8 * i, 8);
                v = (double)a, w = (double)(int64_t)((uint64_t)b + 1u);
                break;
            }
            }
            ck_assert_msg(v == w, "%s %s add-to element %lld: %g, want %g", c->op,
                          mxc_dtype_name(t), (long long)i, v, w);
        }
        free(got);
        mxct_tensors_free(&f1, 1);
        mxc_nd_free(f);
        mxc_nd_free(ones);
        mxc_nd_free(g);
        mxc_nd_free(want_y);
        mxc_nd_free(y);
        mxc_nd_free(x);
    }
}
END_TEST

/* transpose and SwapAxis on float16, int32, uint8 and int64 give the float32 result cast
 * to the dtype (values the dtypes hold exactly), forward and backward (write and add-to). */
START_TEST(test_permutations_any_dtype) {
    const int dtypes[] = {MXC_FLOAT16, MXC_INT32, MXC_UINT8, MXC_INT64};
    struct {
        const char *op;
        const char *kv[4];
        int nkv;
    } ops[] = {{"transpose", {"axes", "(1, 2, 0)"}, 1},
               {"transpose", {NULL}, 0},
               {"SwapAxis", {"dim1", "0", "dim2", "2"}, 2},
               {"swapaxes", {"dim1", "1", "dim2", "-1"}, 2}};
    mxc_shape s = mxc_shape_make(3, (int64_t[]){2, 3, 4});
    float v[24];
    for (int i = 0; i < 24; i++)
        v[i] = (float)((i * 5) % 24);
    mxc_ndarray *xf = nd_of(s, MXC_FLOAT32, v);
    for (size_t o = 0; o < MXC_ARRAY_SIZE(ops); o++) {
        const char *keys[2] = {ops[o].kv[0], ops[o].kv[2]}, *vals[2] = {ops[o].kv[1], ops[o].kv[3]};
        mxc_ndarray *yf = invoke1(ops[o].op, ops[o].nkv, keys, vals, xf);
        for (size_t d = 0; d < MXC_ARRAY_SIZE(dtypes); d++) {
            const char *ck[] = {"dtype"}, *cv[] = {mxc_dtype_name(dtypes[d])};
            mxc_ndarray *x = invoke1("Cast", 1, ck, cv, xf);
            mxc_ndarray *y = invoke1(ops[o].op, ops[o].nkv, keys, vals, x);
            mxc_ndarray *want = invoke1("Cast", 1, ck, cv, yf);
            char what[64];
            snprintf(what, sizeof what, "%s %s", ops[o].op, cv[0]);
            expect_same(y, want, what);
            mxc_ndarray *g = NULL;
            CK_OK(mxc_nd_zeros(&s, dtypes[d], mxc_cpu(), &g));
            run_backward(ops[o].op, ops[o].nkv, keys, vals, y, g, MXC__REQ_WRITE);
            expect_same(g, x, what);
            run_backward(ops[o].op, ops[o].nkv, keys, vals, y, g, MXC__REQ_ADD);
            mxc_ndarray *twice = NULL;
            CK_OK(mxc_nd_zeros(&s, dtypes[d], mxc_cpu(), &twice));
            run_backward("_copy", 0, NULL, NULL, x, twice, MXC__REQ_ADD);
            run_backward("_copy", 0, NULL, NULL, x, twice, MXC__REQ_ADD);
            expect_same(g, twice, what);
            mxc_nd_free(twice);
            mxc_nd_free(g);
            mxc_nd_free(want);
            mxc_nd_free(y);
            mxc_nd_free(x);
        }
        mxc_nd_free(yf);
    }
    mxc_nd_free(xf);
}
END_TEST

/* ---- Multi-precision SGD ------------------------------------------------------------- */

struct mp_case {
    const char *file;
    bool mom;
    const char *kv[10];
};

static const struct mp_case mp_cases[] = {
    {"mp_sgd", false, {"lr", "0.1", "wd", "0.01", "rescale_grad", "0.5", NULL}},
    {"mp_sgd_clip",
     false,
     {"lr", "0.05", "wd", "0.0", "rescale_grad", "1.5", "clip_gradient", "1.0", NULL}},
    {"mp_sgd_mom", true, {"lr", "0.1", "momentum", "0.9", "wd", "0.01", "rescale_grad", "0.5"}},
    {"mp_sgd_mom_clip",
     true,
     {"lr", "0.05", "momentum", "0.5", "wd", "0.02", "rescale_grad", "2.0", "clip_gradient",
      "0.8"}},
};

/* float32 arrays a and b within rtol / atol. */
static void expect_close_f32(const mxc_ndarray *a, const mxc_ndarray *b, double rtol, double atol,
                             const char *what) {
    ck_assert_int_eq(mxc_nd_dtype(a), MXC_FLOAT32);
    ck_assert_int_eq(mxc_nd_dtype(b), MXC_FLOAT32);
    float *x = nd_bytes(a), *y = nd_bytes(b);
    for (int64_t i = 0; i < nd_size(b); i++)
        ck_assert_msg(fabs(x[i] - y[i]) <= atol + rtol * fabs(y[i]), "%s[%lld]: %.9g, want %.9g",
                      what, (long long)i, x[i], y[i]);
    free(x);
    free(y);
}

/* Three steps, in place (out = weight) as MXNet's optimizer calls them: weight32 and mom
 * within float32 rounding of MXNet's, the float16 weight equal to MXNet's or one half-ulp
 * step from it (when weight32 lies near a rounding boundary). */
START_TEST(test_mp_sgd_against_mxnet) {
    const struct mp_case *c = &mp_cases[_i];
    struct mxct_refs r = refs_load(c->file);
    const char *keys[5], *vals[5];
    int nkv = 0;
    for (; nkv < 5 && c->kv[2 * nkv]; nkv++) {
        keys[nkv] = c->kv[2 * nkv];
        vals[nkv] = c->kv[2 * nkv + 1];
    }
    mxc_ndarray *w = nd_clone(mxct_refs_get(&r, "weight"));
    mxc_ndarray *w32 = nd_clone(mxct_refs_get(&r, "weight32")),
                *mom = nd_clone(mxct_refs_get(&r, "mom"));
    ck_assert_int_eq(mxc_nd_dtype(w), MXC_FLOAT16);
    const char *op = c->mom ? "mp_sgd_mom_update" : "mp_sgd_update";
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "grad%d", k);
        mxc_ndarray *in[4] = {w, mxct_refs_get(&r, name), c->mom ? mom : w32, w32};
        mxc_ndarray *out[1] = {w};
        CK_OK(mxc_imperative_invoke(op, nkv, keys, vals, c->mom ? 4 : 3, in, 1, out, 0));
        snprintf(name, sizeof name, "weight32_%d", k);
        expect_close_f32(w32, mxct_refs_get(&r, name), 1e-6, 1e-7, name);
        snprintf(name, sizeof name, "mom_%d", k);
        expect_close_f32(mom, mxct_refs_get(&r, name), 1e-6, 1e-7, name);
        snprintf(name, sizeof name, "out%d", k);
        uint16_t *got = nd_bytes(w), *want = nd_bytes(mxct_refs_get(&r, name));
        float *m32 = nd_bytes(w32);
        for (int64_t i = 0; i < nd_size(w); i++) {
            ck_assert_msg(got[i] == mxc__float_to_half(m32[i]), "%s: not weight32 rounded", name);
            ck_assert_msg(abs((int)got[i] - (int)want[i]) <= 1, "%s[%lld]: 0x%04x, want 0x%04x",
                          name, (long long)i, got[i], want[i]);
        }
        free(got);
        free(want);
        free(m32);
    }
    mxc_nd_free(w);
    mxc_nd_free(w32);
    mxc_nd_free(mom);
    mxct_refs_free(&r);
}
END_TEST

/* The types: weight and grad one float dtype, weight32 and mom float32; others refused. */
START_TEST(test_mp_sgd_types) {
    mxc_shape s = mxc_shape_make(1, (int64_t[]){5});
    mxc_ndarray *w = NULL, *g = NULL, *w32 = NULL, *g32 = NULL, *wi = NULL;
    CK_OK(mxc_nd_zeros(&s, MXC_FLOAT16, mxc_cpu(), &w));
    CK_OK(mxc_nd_zeros(&s, MXC_FLOAT16, mxc_cpu(), &g));
    CK_OK(mxc_nd_zeros(&s, MXC_FLOAT32, mxc_cpu(), &w32));
    CK_OK(mxc_nd_zeros(&s, MXC_FLOAT32, mxc_cpu(), &g32));
    CK_OK(mxc_nd_zeros(&s, MXC_INT32, mxc_cpu(), &wi));
    const char *keys[] = {"lr"}, *vals[] = {"0.1"};
    mxc_ndarray *out = NULL;
    /* weight32 float16: refused */
    mxc_ndarray *bad[3] = {w, g, g};
    ck_assert_int_eq(mxc_imperative_invoke("mp_sgd_update", 1, keys, vals, 3, bad, 1, &out, 0),
                     MXC_ETYPE);
    ck_assert_msg(strstr(mxc_last_error(), "weight32"), "%s", mxc_last_error());
    /* grad float32 with a float16 weight: refused */
    mxc_ndarray *bad2[3] = {w, g32, w32};
    ck_assert_int_eq(mxc_imperative_invoke("mp_sgd_update", 1, keys, vals, 3, bad2, 1, &out, 0),
                     MXC_ETYPE);
    ck_assert_msg(strstr(mxc_last_error(), "grad"), "%s", mxc_last_error());
    mxc_ndarray *bad3[3] = {wi, wi, w32};
    ck_assert_int_eq(mxc_imperative_invoke("mp_sgd_update", 1, keys, vals, 3, bad3, 1, &out, 0),
                     MXC_ENOTSUP);
    ck_assert_msg(strstr(mxc_last_error(), "int32"), "%s", mxc_last_error());
    ck_assert_ptr_null(out);
    /* a new output takes the weight's dtype */
    mxc_ndarray *ok[3] = {w, g, w32};
    CK_OK(mxc_imperative_invoke("mp_sgd_update", 1, keys, vals, 3, ok, 1, &out, 0));
    ck_assert_int_eq(mxc_nd_dtype(out), MXC_FLOAT16);
    mxc_nd_free(out);
    mxc_ndarray *all[] = {w, g, w32, g32, wi};
    for (int i = 0; i < 5; i++)
        mxc_nd_free(all[i]);
}
END_TEST

/* ---- Through the executor ------------------------------------------------------------- */

/* data (float32) -> Cast float16 -> Reshape -> Cast float32, bound with a gradient: type
 * inference gives float16 inside, the output equals data rounded to float16 and reshaped,
 * and data's gradient is the head gradient rounded through float16 (Cast's backward
 * casts back at each step). */
START_TEST(test_executor_through_float16) {
    mxc_symbol *x = NULL, *c1 = NULL, *r = NULL, *c2 = NULL;
    const char *in_names[] = {"data"};
    CK_OK(mxc_symbol_variable("data", &x));
    const char *k1[] = {"dtype"}, *v16[] = {"float16"}, *v32[] = {"float32"};
    CK_OK(mxc_symbol_create("Cast", 1, k1, v16, "c1", 1, in_names, &x, &c1));
    const char *kr[] = {"shape"}, *vr[] = {"(4, 3)"};
    CK_OK(mxc_symbol_create("Reshape", 1, kr, vr, "r", 1, in_names, &c1, &r));
    CK_OK(mxc_symbol_create("cast", 1, k1, v32, "c2", 1, in_names, &r, &c2));

    /* type inference through the graph: internals c1 and r are float16 */
    mxc_symbol *internals = NULL;
    CK_OK(mxc_symbol_get_internals(c2, &internals));
    int nout;
    const char *const *onames;
    CK_OK(mxc_symbol_list_outputs(internals, &nout, &onames));
    const char *names[] = {"data"};
    int given = MXC_FLOAT32, arg_t[1], out_t[8], unknown;
    ck_assert_int_le(nout, 8);
    CK_OK(mxc_symbol_infer_type(internals, 1, names, &given, arg_t, out_t, NULL, &unknown));
    ck_assert_int_eq(unknown, 0);
    for (int i = 0; i < nout; i++) {
        int want = strcmp(onames[i], "c1_output") == 0 || strcmp(onames[i], "r_output") == 0
                       ? MXC_FLOAT16
                       : MXC_FLOAT32;
        ck_assert_msg(out_t[i] == want, "%s: %d", onames[i], out_t[i]);
    }
    mxc_symbol_free(internals);
    CK_OK(mxc_symbol_infer_type(c2, 1, names, &given, arg_t, out_t, NULL, &unknown));
    ck_assert_int_eq(out_t[0], MXC_FLOAT32);

    float xv[12], hv[12];
    for (int i = 0; i < 12; i++)
        xv[i] = 1.0f + (float)i / 3.0f + 1e-4f, hv[i] = (float)(i - 6) / 7.0f;
    mxc_shape xs = mxc_shape_make(2, (int64_t[]){3, 4}), ys = mxc_shape_make(2, (int64_t[]){4, 3});
    mxc_ndarray *arg = nd_of(xs, MXC_FLOAT32, xv), *grad = NULL, *head = nd_of(ys, MXC_FLOAT32, hv);
    CK_OK(mxc_nd_zeros(&xs, MXC_FLOAT32, mxc_cpu(), &grad));
    int req = MXC_GRAD_WRITE;
    mxc_executor *ex = NULL;
    CK_OK(mxc_executor_bind(c2, mxc_cpu(), 1, &arg, &grad, &req, 0, NULL, &ex));
    CK_OK(mxc_executor_forward(ex, 1));
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(ex, &nout, &outs));
    ck_assert_int_eq(mxc_nd_dtype(outs[0]), MXC_FLOAT32);
    mxc_shape os;
    CK_OK(mxc_nd_get_shape(outs[0], &os));
    ck_assert(os.ndim == 2 && os.dims[0] == 4 && os.dims[1] == 3);
    CK_OK(mxc_executor_backward(ex, 1, &head));
    float *y = nd_bytes(outs[0]), *g = nd_bytes(grad);
    for (int i = 0; i < 12; i++) {
        ck_assert_msg(y[i] == mxc__half_to_float(mxc__float_to_half(xv[i])), "y[%d] %g", i, y[i]);
        ck_assert(y[i] != xv[i]); /* the rounding really happened */
        ck_assert_msg(g[i] == mxc__half_to_float(mxc__float_to_half(hv[i])), "g[%d] %g", i, g[i]);
    }
    free(y);
    free(g);
    mxc_executor_free(ex);
    mxc_nd_free(arg);
    mxc_nd_free(grad);
    mxc_nd_free(head);
    mxc_symbol_free(c2);
    mxc_symbol_free(r);
    mxc_symbol_free(c1);
    mxc_symbol_free(x);
}
END_TEST

static Suite *dtype_suite(void) {
    Suite *s = suite_create("op_dtype");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, mxct_timeout(60));
    tcase_add_test(tc, test_half_every_value);
    tcase_add_test(tc, test_half_rounding_boundaries);
    tcase_add_test(tc, test_half_against_numpy);
    tcase_add_loop_test(tc, test_cast_against_mxnet, 0, (int)MXC_ARRAY_SIZE(all_dtypes));
    tcase_add_test(tc, test_copy_add_in_dtype);
    tcase_add_test(tc, test_cast_infer_and_errors);
    tcase_add_test(tc, test_dtype_support);
    tcase_add_loop_test(tc, test_copies_any_dtype, 0, (int)MXC_ARRAY_SIZE(copy_cases));
    tcase_add_test(tc, test_permutations_any_dtype);
    tcase_add_loop_test(tc, test_mp_sgd_against_mxnet, 0, (int)MXC_ARRAY_SIZE(mp_cases));
    tcase_add_test(tc, test_mp_sgd_types);
    tcase_add_test(tc, test_executor_through_float16);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(dtype_suite()); }

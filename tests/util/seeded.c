/*
 * tests/util/seeded.c — values from names (seeded.h), the C twin of scripts/zoo_seeded.py.
 * Every step is exact or one correctly rounded float32 operation, so both sides agree bit
 * for bit whatever the compiler contracts.
 */
#include "tests/util/seeded.h"

#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t mxct_seeded_hash(const char *name) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001B3ull;
    }
    return h;
}

/* k_index: the top 24 bits of splitmix64's draw `index` from state `hash`. */
static uint64_t seeded_bits(uint64_t hash, int64_t index) {
    return mxct_mix64(hash + (uint64_t)(index + 1) * 0x9E3779B97F4A7C15ull) >> 40;
}

float mxct_seeded_unit(uint64_t hash, int64_t index) {
    return (float)seeded_bits(hash, index) * 0x1p-24f;
}

void mxct_seeded_tokens(const char *name, int64_t count, int64_t vocab, float *out) {
    uint64_t h = mxct_seeded_hash(name);
    for (int64_t i = 0; i < count; i++)
        out[i] = (float)((seeded_bits(h, i) * (uint64_t)vocab) >> 24);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* (offset, scale) of the value formula for `name`, by its suffix. */
static void seeded_kind(const char *name, const mxc_shape *shape, float *offset, float *scale) {
    *offset = 0.0f;
    *scale = 1.0f;
    if (ends_with(name, "_weight")) {
        int64_t fan_in = shape->ndim > 1 ? 1 : (shape->ndim == 1 ? shape->dims[0] : 1);
        for (int d = 1; d < shape->ndim; d++)
            fan_in *= shape->dims[d];
        *scale = sqrtf(6.0f / (float)fan_in);
    } else if (ends_with(name, "_gamma") || ends_with(name, "_running_var") ||
               ends_with(name, "_moving_var")) {
        *offset = 1.0f;
        *scale = 0.25f;
    } else if (ends_with(name, "_bias") || ends_with(name, "_beta") ||
               ends_with(name, "_running_mean") || ends_with(name, "_moving_mean")) {
        *scale = 0.125f;
    }
}

void mxct_seeded_values(const char *name, const mxc_shape *shape, float *out) {
    int64_t n = 1;
    for (int d = 0; d < shape->ndim; d++)
        n *= shape->dims[d];
    float offset, scale;
    seeded_kind(name, shape, &offset, &scale);
    uint64_t h = mxct_seeded_hash(name);
    for (int64_t i = 0; i < n; i++) {
        float t = mxct_seeded_unit(h, i) * 2.0f - 1.0f;
        out[i] = offset + t * scale;
    }
}

int mxct_seeded_fill(mxc_ndarray *array, const char *name) {
    mxc_shape shape;
    int rc = mxc_nd_get_shape(array, &shape);
    if (rc != MXC_OK)
        return rc;
    int64_t n = mxc_nd_size(array);
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!v)
        return MXC_ENOMEM;
    mxct_seeded_values(name, &shape, v);
    rc = mxc_nd_sync_copy_from_cpu(array, v, (size_t)n * sizeof(float));
    free(v);
    return rc;
}

void mxct_seeded_fill_executor(mxc_executor *exec, mxc_symbol *sym) {
    int na, nx, nan, nxn;
    mxc_ndarray *const *args, *const *aux;
    const char *const *arg_names, *const *aux_names;
    CK_OK(mxc_executor_arrays(exec, &na, &args, NULL, &nx, &aux));
    CK_OK(mxc_symbol_list_arguments(sym, &nan, &arg_names));
    CK_OK(mxc_symbol_list_auxiliary_states(sym, &nxn, &aux_names));
    ck_assert_int_eq(na, nan);
    ck_assert_int_eq(nx, nxn);
    for (int i = 0; i < na; i++)
        CK_OK(mxct_seeded_fill(args[i], arg_names[i]));
    for (int i = 0; i < nx; i++)
        CK_OK(mxct_seeded_fill(aux[i], aux_names[i]));
}

static float *to_host(mxc_ndarray *a) {
    int64_t n = mxc_nd_size(a);
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(v);
    CK_OK(mxc_nd_sync_copy_to_cpu(a, v, (size_t)n * sizeof(float)));
    return v;
}

void mxct_seeded_expect_output(const char *what, mxc_ndarray *got, mxc_ndarray *want) {
    mxc_shape gs, ws;
    CK_OK(mxc_nd_get_shape(got, &gs));
    CK_OK(mxc_nd_get_shape(want, &ws));
    mxct_expect_shape(&gs, &ws, what);
    int64_t n = mxc_nd_size(want), worst = 0;
    float *g = to_host(got), *w = to_host(want);
    double ref = 1.0, err = 0.0;
    for (int64_t i = 0; i < n; i++)
        ref = fmax(ref, fabs((double)w[i]));
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)g[i] - (double)w[i]);
        if (e > err || isnan(e)) {
            err = isnan(e) ? INFINITY : e;
            worst = i;
        }
    }
    ck_assert_msg(err <= 1e-4 * ref, "%s: max |mxc - mxnet| %g > 1e-4 * %g, at %lld: %g vs %g",
                  what, err, ref, (long long)worst, (double)g[worst], (double)w[worst]);
    free(g);
    free(w);
}

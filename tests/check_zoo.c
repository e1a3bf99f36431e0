/*
 * tests/check_zoo.c — MXNet's Gluon model zoo run by mxc. The weights of the models come
 * from their names (tests/util/seeded.c, the twin of scripts/zoo_seeded.py): first, that
 * both give the same values bit for bit.
 */
#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/symbol.h"
#include "tests/util/seeded.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The seeded values ------------------------------------------------------------- */

/* Values numpy computed with scripts/zoo_seeded.py (printed with float.hex()). */
static const struct {
    const char *name;
    mxc_shape shape;
    int64_t index;
    float value;
} numpy_values[] = {
    {"resnetv10_conv0_weight", {4, {64, 3, 7, 7}}, 0, 0x1.8000280000000p-4f},
    {"resnetv10_conv0_weight", {4, {64, 3, 7, 7}}, 1, 0x1.2701bc0000000p-4f},
    {"resnetv10_conv0_weight", {4, {64, 3, 7, 7}}, 9407, -0x1.c32c160000000p-5f},
    {"resnetv10_batchnorm0_running_var", {1, {64}}, 0, 0x1.857bb00000000p-1f},
    {"resnetv10_batchnorm0_running_var", {1, {64}}, 63, 0x1.f522080000000p-1f},
    {"resnetv10_dense0_bias", {1, {1000}}, 0, -0x1.cfcf600000000p-7f},
    {"resnetv10_dense0_bias", {1, {1000}}, 999, 0x1.238ee80000000p-5f},
    {"encoder_layernorm0_gamma", {1, {32}}, 5, 0x1.b7f5300000000p-1f},
    {"data", {4, {1, 3, 32, 32}}, 0, 0x1.3a77700000000p-3f},
    {"data", {4, {1, 3, 32, 32}}, 3071, 0x1.d6dce00000000p-2f},
};

START_TEST(test_seeded_values_equal_numpy) {
    ck_assert_uint_eq(mxct_seeded_hash("resnetv10_conv0_weight"), 0x9967eb126ddbc90bull);
    for (size_t i = 0; i < sizeof numpy_values / sizeof numpy_values[0]; i++) {
        const mxc_shape *s = &numpy_values[i].shape;
        int64_t n = 1;
        for (int d = 0; d < s->ndim; d++)
            n *= s->dims[d];
        float *v = malloc((size_t)n * sizeof(float));
        ck_assert_ptr_nonnull(v);
        mxct_seeded_values(numpy_values[i].name, s, v);
        float got = v[numpy_values[i].index];
        free(v);
        ck_assert_msg(memcmp(&got, &numpy_values[i].value, sizeof got) == 0,
                      "%s[%lld]: C %a, numpy %a", numpy_values[i].name,
                      (long long)numpy_values[i].index, (double)got, (double)numpy_values[i].value);
    }
}
END_TEST

/* The ranges the formula promises: weights within sqrt(6 / fan_in), variances positive. */
START_TEST(test_seeded_value_ranges) {
    float w[4 * 3 * 5 * 5], var[100], u = 1.0f;
    mxct_seeded_values("m_conv0_weight", &SHAPE(4, 3, 5, 5), w);
    mxct_seeded_values("m_batchnorm0_running_var", &SHAPE(100), var);
    float bound = sqrtf(6.0f / 75.0f), wmax = 0.0f;
    for (int i = 0; i < 300; i++)
        wmax = fmaxf(wmax, fabsf(w[i]));
    ck_assert_float_le(wmax, bound);
    ck_assert_float_gt(wmax, 0.9f * bound);
    for (int i = 0; i < 100; i++) {
        ck_assert_float_ge(var[i], 0.75f);
        ck_assert_float_lt(var[i], 1.25f);
    }
    for (int i = 0; i < 1000; i++)
        u = fminf(u, mxct_seeded_unit(7, i));
    ck_assert_float_ge(u, 0.0f);
    ck_assert_float_lt(u, 0.01f);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("zoo");
    TCase *tc = tcase_create("seeded");
    tcase_add_test(tc, test_seeded_values_equal_numpy);
    tcase_add_test(tc, test_seeded_value_ranges);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }

/*
 * tests/check_fastmath.c — the vectorisable exp, tanh and sigmoid of operator/fastmath.h
 * against double-precision libm over a dense sweep of [-100, 100], and at the edges:
 * NaN, infinities, overflow, underflow, zero.
 */
#include "operator/fastmath.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <float.h>
#include <math.h>

START_TEST(test_exp_sweep) {
    double worst = 0, at = 0;
    for (float x = -86.5f; x < 88.7f; x += 1.3e-3f) {
        double want = exp((double)x), got = mxc__expf(x);
        double ulp = want * FLT_EPSILON;
        double err = fabs(got - want) / ulp;
        if (err > worst) {
            worst = err;
            at = x;
        }
    }
    ck_assert_msg(worst <= 4.0, "exp: %.2f ulp at %g", worst, at);
}
END_TEST

START_TEST(test_tanh_sigmoid_sweep) {
    double worst_t = 0, worst_s = 0, worst_rel = 0;
    for (float x = -100.0f; x <= 100.0f; x += 7.7e-4f) {
        worst_t = fmax(worst_t, fabs(mxc__tanhf(x) - tanh((double)x)));
        worst_s = fmax(worst_s, fabs(mxc__sigmoidf(x) - 1.0 / (1.0 + exp(-(double)x))));
    }
    for (float x = 1e-6f; x <= 1.0f; x *= 1.0001f) { /* relative accuracy near 0 */
        double want = tanh((double)x);
        worst_rel = fmax(worst_rel, fabs(mxc__tanhf(x) - want) / want);
        worst_rel = fmax(worst_rel, fabs(mxc__tanhf(-x) + want) / want);
    }
    ck_assert_msg(worst_t <= 4e-7, "tanh: %g absolute", worst_t);
    ck_assert_msg(worst_rel <= 2e-6, "tanh: %g relative", worst_rel);
    ck_assert_msg(worst_s <= 2e-7, "sigmoid: %g absolute", worst_s);
}
END_TEST

START_TEST(test_edges) {
    ck_assert(isnan(mxc__expf(NAN)) && isnan(mxc__tanhf(NAN)) && isnan(mxc__sigmoidf(NAN)));
    ck_assert(isinf(mxc__expf(INFINITY)) && mxc__expf(89.0f) == INFINITY);
    ck_assert_float_eq(mxc__expf(-INFINITY), 0.0f);
    ck_assert_float_eq(mxc__expf(-1000.0f), 0.0f);
    ck_assert_float_eq(mxc__expf(0.0f), 1.0f);
    ck_assert(isfinite(mxc__expf(88.7f)));
    ck_assert_float_eq(mxc__tanhf(INFINITY), 1.0f);
    ck_assert_float_eq(mxc__tanhf(-INFINITY), -1.0f);
    ck_assert_float_eq(mxc__tanhf(0.0f), 0.0f);
    ck_assert_float_eq(mxc__sigmoidf(-INFINITY), 0.0f);
    ck_assert_float_eq(mxc__sigmoidf(INFINITY), 1.0f);
    ck_assert_float_eq(mxc__sigmoidf(0.0f), 0.5f);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("fastmath");
    TCase *tc = tcase_create("fastmath");
    tcase_add_test(tc, test_exp_sweep);
    tcase_add_test(tc, test_tanh_sigmoid_sweep);
    tcase_add_test(tc, test_edges);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }

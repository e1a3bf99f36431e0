/*
 * tests/check_philox.c — the Philox-4x32-10 generator (resource/philox.c): Random123
 * known answers, the documented stream mapping against reference values made by
 * tests/data/gen_philox_ref.py, statistics of uniform and normal fills, reproducibility,
 * continuation across fills, and argument checks.
 */
#include "common/common.h"
#include "resource/philox.h"
#include "tests/data/philox_ref.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BIG_N 1000000

/* ---- Known answers ----------------------------------------------------------------- */

/* Random123's kat_vectors for philox4x32 with 10 rounds: counter, key, expected. */
static const struct {
    uint32_t ctr[4], key[2], want[4];
} kat[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

START_TEST(test_known_answers) {
    for (size_t i = 0; i < MXC_ARRAY_SIZE(kat); i++) {
        uint32_t out[4];
        mxc__philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int k = 0; k < 4; k++)
            ck_assert_msg(out[k] == kat[i].want[k], "vector %zu word %d: got 0x%08x, want 0x%08x",
                          i, k, out[k], kat[i].want[k]);
        /* out may alias the counter */
        uint32_t inout[4];
        memcpy(inout, kat[i].ctr, sizeof inout);
        mxc__philox4x32_10(inout, kat[i].key, inout);
        ck_assert_mem_eq(inout, kat[i].want, sizeof inout);
    }
}
END_TEST

/* ---- The stream mapping ------------------------------------------------------------ */

START_TEST(test_seed_and_counter_mapping) {
    struct mxc__philox g;
    mxc__philox_init(&g, 0x1111111122222222ull, 0x3333333344444444ull);
    ck_assert_uint_eq(g.key[0], 0x22222222u);
    ck_assert_uint_eq(g.key[1], 0x11111111u);
    ck_assert_uint_eq(g.offset, 0);

    /* word i = philox(counter {c lo, c hi, stream lo, stream hi}, key)[i % 4], c = i / 4 */
    const uint64_t starts[] = {0, 5, (1ull << 34) + 2, UINT64_MAX - 8};
    for (size_t s = 0; s < MXC_ARRAY_SIZE(starts); s++) {
        g.offset = starts[s];
        uint32_t words[8];
        ck_assert_int_eq(mxc__philox_u32(&g, words, 8), MXC_OK);
        ck_assert_uint_eq(g.offset, starts[s] + 8);
        for (uint64_t j = 0; j < 8; j++) {
            uint64_t i = starts[s] + j, c = i / 4;
            uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0x44444444u, 0x33333333u};
            uint32_t block[4];
            mxc__philox4x32_10(ctr, g.key, block);
            ck_assert_msg(words[j] == block[i % 4], "position %llu: 0x%08x != 0x%08x",
                          (unsigned long long)i, words[j], block[i % 4]);
        }
    }
}
END_TEST

static float bits_to_float(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

START_TEST(test_reference_streams) {
    for (size_t r = 0; r < MXC_ARRAY_SIZE(philox_refs); r++) {
        const struct philox_ref *ref = &philox_refs[r];
        int n = ref->n;
        struct mxc__philox g;
        uint32_t words[16];
        float vals[16];

        mxc__philox_init(&g, ref->seed, ref->stream);
        mxc__philox_skip(&g, ref->offset);
        ck_assert_int_eq(mxc__philox_u32(&g, words, n), MXC_OK);
        ck_assert_mem_eq(words, ref->words, (size_t)n * sizeof words[0]);

        /* Uniforms are exact float arithmetic: equal to the bit. */
        mxc__philox_init(&g, ref->seed, ref->stream);
        mxc__philox_skip(&g, ref->offset);
        ck_assert_int_eq(mxc__philox_uniform(&g, vals, n, -2.0f, 3.0f), MXC_OK);
        for (int i = 0; i < n; i++)
            ck_assert_msg(vals[i] == bits_to_float(ref->uniform_bits[i]),
                          "ref %zu uniform %d: %.9g != %.9g", r, i, (double)vals[i],
                          (double)bits_to_float(ref->uniform_bits[i]));

        /* Normals go through log/cos/sin: allow a few float ulps for another libm. */
        mxc__philox_init(&g, ref->seed, ref->stream);
        mxc__philox_skip(&g, ref->offset);
        ck_assert_int_eq(mxc__philox_normal(&g, vals, n, 1.0f, 2.0f), MXC_OK);
        double worst = 0.0;
        for (int i = 0; i < n; i++) {
            double want = bits_to_float(ref->normal_bits[i]);
            double err = fabs(vals[i] - want) / fmax(fabs(want), 1e-3);
            worst = fmax(worst, err);
        }
        ck_assert_msg(worst <= 4 * FLT_EPSILON, "ref %zu normals: worst relative error %g", r,
                      worst);
    }
}
END_TEST

/* ---- Statistics -------------------------------------------------------------------- */

START_TEST(test_uniform_statistics) {
    const float lo = -1.0f, hi = 3.0f;
    float *x = malloc(BIG_N * sizeof *x);
    ck_assert_ptr_nonnull(x);
    struct mxc__philox g;
    mxc__philox_init(&g, 20240601, 0);
    ck_assert_int_eq(mxc__philox_uniform(&g, x, BIG_N, lo, hi), MXC_OK);

    enum { BINS = 100 };
    long bins[BINS] = {0};
    double sum = 0, sum2 = 0, mn = hi, mx = lo;
    for (int i = 0; i < BIG_N; i++) {
        ck_assert_msg(x[i] >= lo && x[i] < hi, "x[%d] = %.9g outside [%g, %g)", i, (double)x[i],
                      (double)lo, (double)hi);
        sum += x[i];
        sum2 += (double)x[i] * x[i];
        mn = fmin(mn, x[i]);
        mx = fmax(mx, x[i]);
        bins[(int)((x[i] - lo) / (hi - lo) * BINS)]++;
    }
    double mean = sum / BIG_N, var = sum2 / BIG_N - mean * mean;
    double w = hi - lo;
    /* mean: (lo+hi)/2 with standard error w/sqrt(12 n); variance: w^2/12 with standard
     * error sqrt((w^4/80 - w^4/144) / n). Five standard errors each. */
    double se_mean = w / sqrt(12.0 * BIG_N);
    double se_var = sqrt((pow(w, 4) / 80 - pow(w, 4) / 144) / BIG_N);
    ck_assert_msg(fabs(mean - 1.0) < 5 * se_mean, "mean %.6f", mean);
    ck_assert_msg(fabs(var - w * w / 12) < 5 * se_var, "variance %.6f", var);
    ck_assert_msg(mn < lo + 1e-4 && mx > hi - 1e-4, "extremes %.6f %.6f", mn, mx);
    /* chi-square over 100 bins, 99 degrees of freedom: mean 99, sd 14; allow 5 sd */
    double expected = (double)BIG_N / BINS, chi2 = 0;
    for (int b = 0; b < BINS; b++)
        chi2 += (bins[b] - expected) * (bins[b] - expected) / expected;
    ck_assert_msg(chi2 < 99 + 5 * 14.07, "chi-square %.1f", chi2);

    /* [0, 1): the smallest value is 0 exactly when a word is < 256, never 1 */
    ck_assert_int_eq(mxc__philox_uniform(&g, x, BIG_N, 0.0f, 1.0f), MXC_OK);
    for (int i = 0; i < BIG_N; i++)
        ck_assert(x[i] >= 0.0f && x[i] < 1.0f);
    free(x);
}
END_TEST

START_TEST(test_normal_statistics) {
    const double mu = 0.5, sigma = 2.0;
    float *x = malloc(BIG_N * sizeof *x);
    ck_assert_ptr_nonnull(x);
    struct mxc__philox g;
    mxc__philox_init(&g, 7, 1);
    ck_assert_int_eq(mxc__philox_normal(&g, x, BIG_N, (float)mu, (float)sigma), MXC_OK);

    double sum = 0, sum2 = 0, sum3 = 0, sum4 = 0;
    long within1 = 0;
    for (int i = 0; i < BIG_N; i++) {
        ck_assert(isfinite(x[i]));
        double z = (x[i] - mu) / sigma;
        sum += z;
        sum2 += z * z;
        sum3 += z * z * z;
        sum4 += z * z * z * z;
        within1 += fabs(z) < 1.0;
    }
    double n = BIG_N, mean = sum / n, var = sum2 / n - mean * mean;
    double skew = sum3 / n, kurt = sum4 / n;
    /* standard errors: mean 1/sqrt(n), variance sqrt(2/n), third moment sqrt(15/n), fourth
     * moment sqrt(96/n), P(|z| < 1) = p: sqrt(p(1-p)/n); five of each */
    ck_assert_msg(fabs(mean) < 5 / sqrt(n), "mean of z %.6f", mean);
    ck_assert_msg(fabs(var - 1) < 5 * sqrt(2 / n), "variance of z %.6f", var);
    ck_assert_msg(fabs(skew) < 5 * sqrt(15 / n), "third moment %.6f", skew);
    ck_assert_msg(fabs(kurt - 3) < 5 * sqrt(96 / n), "fourth moment %.6f", kurt);
    double p1 = 0.682689492;
    ck_assert_msg(fabs(within1 / n - p1) < 5 * sqrt(p1 * (1 - p1) / n), "P(|z|<1) = %.6f",
                  within1 / n);

    /* std 0 gives the mean exactly */
    ck_assert_int_eq(mxc__philox_normal(&g, x, 100, 1.5f, 0.0f), MXC_OK);
    for (int i = 0; i < 100; i++)
        ck_assert(x[i] == 1.5f);
    free(x);
}
END_TEST

/* ---- Reproducibility and continuation ---------------------------------------------- */

START_TEST(test_reproducible) {
    float a[1000], b[1000];
    struct mxc__philox g1, g2;
    mxc__philox_init(&g1, 1234, 0);
    mxc__philox_init(&g2, 1234, 0);
    ck_assert_int_eq(mxc__philox_normal(&g1, a, 1000, 0.0f, 1.0f), MXC_OK);
    ck_assert_int_eq(mxc__philox_normal(&g2, b, 1000, 0.0f, 1.0f), MXC_OK);
    ck_assert_mem_eq(a, b, sizeof a);

    /* another seed, or another stream of the same seed, gives other values */
    mxc__philox_init(&g2, 1235, 0);
    ck_assert_int_eq(mxc__philox_normal(&g2, b, 1000, 0.0f, 1.0f), MXC_OK);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    mxc__philox_init(&g2, 1234, 1);
    ck_assert_int_eq(mxc__philox_normal(&g2, b, 1000, 0.0f, 1.0f), MXC_OK);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    /* seeds that differ only in the high 32 bits differ too */
    mxc__philox_init(&g2, 1234 + (1ull << 32), 0);
    ck_assert_int_eq(mxc__philox_normal(&g2, b, 1000, 0.0f, 1.0f), MXC_OK);
    ck_assert(memcmp(a, b, sizeof a) != 0);
}
END_TEST

enum { DIST_U32, DIST_UNIFORM, DIST_NORMAL };

static int fill(int dist, struct mxc__philox *g, void *out, int64_t n) {
    switch (dist) {
    case DIST_U32: return mxc__philox_u32(g, out, n);
    case DIST_UNIFORM: return mxc__philox_uniform(g, out, n, -0.5f, 0.5f);
    default: return mxc__philox_normal(g, out, n, 0.0f, 1.0f);
    }
}

START_TEST(test_continuation) {
    /* two fills of n equal one fill of 2n, for every n alignment, and so does any split */
    const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 1000, 1001};
    /* heap buffers have no declared type, so they may hold words or floats */
    uint32_t *one = malloc(2 * 1001 * 4), *two = malloc(2 * 1001 * 4);
    ck_assert(one != NULL && two != NULL);
    for (int dist = DIST_U32; dist <= DIST_NORMAL; dist++) {
        for (size_t s = 0; s < MXC_ARRAY_SIZE(sizes); s++) {
            int64_t n = sizes[s];
            struct mxc__philox g1, g2;
            mxc__philox_init(&g1, 99, 5);
            mxc__philox_init(&g2, 99, 5);
            ck_assert_int_eq(fill(dist, &g1, one, 2 * n), MXC_OK);
            ck_assert_int_eq(fill(dist, &g2, two, n), MXC_OK);
            ck_assert_int_eq(fill(dist, &g2, two + n, n), MXC_OK);
            ck_assert_msg(memcmp(one, two, (size_t)(2 * n) * 4) == 0, "distribution %d, n = %lld",
                          dist, (long long)n);
            ck_assert_uint_eq(g1.offset, g2.offset);
            ck_assert_uint_eq(g1.offset, (uint64_t)(2 * n));

            /* uneven split: 1, then n, then the rest */
            mxc__philox_init(&g2, 99, 5);
            ck_assert_int_eq(fill(dist, &g2, two, 1), MXC_OK);
            ck_assert_int_eq(fill(dist, &g2, two + 1, n), MXC_OK);
            ck_assert_int_eq(fill(dist, &g2, two + 1 + n, n - 1), MXC_OK);
            ck_assert_msg(memcmp(one, two, (size_t)(2 * n) * 4) == 0,
                          "uneven split: distribution %d, n = %lld", dist, (long long)n);
        }
    }
    free(one);
    free(two);
}
END_TEST

START_TEST(test_skip) {
    float a[64], b[64];
    struct mxc__philox g;
    mxc__philox_init(&g, 3, 0);
    ck_assert_int_eq(mxc__philox_normal(&g, a, 64, 0.0f, 1.0f), MXC_OK);
    for (int k = 0; k < 64; k += 7) {
        mxc__philox_init(&g, 3, 0);
        mxc__philox_skip(&g, (uint64_t)k);
        ck_assert_int_eq(mxc__philox_normal(&g, b, 64 - k, 0.0f, 1.0f), MXC_OK);
        ck_assert_mem_eq(a + k, b, (size_t)(64 - k) * sizeof b[0]);
    }
}
END_TEST

/* ---- Argument checks --------------------------------------------------------------- */

START_TEST(test_misuse) {
    struct mxc__philox g;
    float x[4] = {42, 42, 42, 42};
    uint32_t w[4];
    mxc__philox_init(&g, 1, 0);

    ck_assert_int_eq(mxc__philox_uniform(NULL, x, 4, 0, 1), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "generator is NULL"));
    ck_assert_int_eq(mxc__philox_normal(&g, x, -1, 0, 1), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "-1"));
    ck_assert_int_eq(mxc__philox_u32(&g, NULL, 4), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "out is NULL"));
    ck_assert_int_eq(mxc__philox_u32(NULL, w, 4), MXC_EINVAL);

    const float bad[][2] = {{1, 0},         {NAN, 1},      {0, NAN},
                            {-INFINITY, 0}, {0, INFINITY}, {-FLT_MAX, FLT_MAX}};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(bad); i++) {
        ck_assert_int_eq(mxc__philox_uniform(&g, x, 4, bad[i][0], bad[i][1]), MXC_EINVAL);
        ck_assert_ptr_nonnull(strstr(mxc_last_error(), "bad range"));
    }
    ck_assert_int_eq(mxc__philox_normal(&g, x, 4, 0, -1), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "std = -1"));
    ck_assert_int_eq(mxc__philox_normal(&g, x, 4, NAN, 1), MXC_EINVAL);
    ck_assert_int_eq(mxc__philox_normal(&g, x, 4, 0, INFINITY), MXC_EINVAL);
    /* failures write nothing and keep the position */
    ck_assert_uint_eq(g.offset, 0);
    for (int i = 0; i < 4; i++)
        ck_assert(x[i] == 42);

    /* n = 0 is fine, even with out NULL; lo == hi gives lo */
    ck_assert_int_eq(mxc__philox_uniform(&g, NULL, 0, 0, 1), MXC_OK);
    ck_assert_int_eq(mxc__philox_normal(&g, NULL, 0, 0, 1), MXC_OK);
    ck_assert_uint_eq(g.offset, 0);
    ck_assert_int_eq(mxc__philox_uniform(&g, x, 4, 2.5f, 2.5f), MXC_OK);
    for (int i = 0; i < 4; i++)
        ck_assert(x[i] == 2.5f);
    ck_assert_uint_eq(g.offset, 4);
}
END_TEST

static Suite *philox_suite(void) {
    Suite *s = suite_create("philox");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_known_answers);
    tcase_add_test(tc, test_seed_and_counter_mapping);
    tcase_add_test(tc, test_reference_streams);
    tcase_add_test(tc, test_uniform_statistics);
    tcase_add_test(tc, test_normal_statistics);
    tcase_add_test(tc, test_reproducible);
    tcase_add_test(tc, test_continuation);
    tcase_add_test(tc, test_skip);
    tcase_add_test(tc, test_misuse);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(philox_suite()); }

/*
 * tests/check_ndarray.c — the asynchronous NDArray layer (ndarray/) through its public
 * API: operations return before they run and reads wait for them; views share their
 * chunk's engine variable, so writes through one are seen by the others in push order;
 * freeing arrays while operations on them are pending is safe and the memory returns to
 * the pool; values of the arithmetic, dot, sum, fills of every dtype (checked byte by
 * byte), random fills and copies; shapes and offsets of views; misuse (bad handles, bad
 * shapes and dtypes, bad outputs) returning the documented codes with a message;
 * allocation-failure injection with leak counting; reading memory nothing wrote.
 *
 * Arrays live on the process's default engine. The tests marked "per engine" run once per
 * engine kind by setting MXC_ENGINE_TYPE before their first mxc call, which works because
 * Check's default fork mode gives every test a fresh process (with CK_FORK=no they all
 * share the engine the first test created). Save/load have their own suite.
 */
#include "mxc/engine.h"
#include "mxc/ndarray.h"
#include "mxc/storage.h"
#include "common/handle.h"
#include "ndarray/ndarray_impl.h" /* mxc__nd_var, to hold work on arrays */
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

typedef int (*binary_fn)(const mxc_ndarray *, const mxc_ndarray *, mxc_ndarray **);
typedef int (*scalar_fn)(const mxc_ndarray *, float, mxc_ndarray **);

/* The four element-wise operations, with their array and scalar forms. */
static const struct ew_case {
    const char *name;
    binary_fn binary;
    scalar_fn scalar;
    char op;
} ew_cases[] = {
    {"add", mxc_nd_add, mxc_nd_add_scalar, '+'},
    {"sub", mxc_nd_sub, mxc_nd_sub_scalar, '-'},
    {"mul", mxc_nd_mul, mxc_nd_mul_scalar, '*'},
    {"div", mxc_nd_div, mxc_nd_div_scalar, '/'},
};

/* What the library must compute, one IEEE float operation, as the kernels do. */
static float host_apply(char op, float x, float y) {
    switch (op) {
    case '+': return x + y;
    case '-': return x - y;
    case '*': return x * y;
    default: return x / y;
    }
}

/* ---- Helpers ----------------------------------------------------------------------- */

/* Makes the default engine of kind `type` (see the top comment) and returns it. */
static mxc_engine *use_engine(int type) {
    ck_assert_int_eq(setenv("MXC_ENGINE_TYPE", mxc_engine_type_name(type), 1), 0);
    mxc_engine *eng = NULL;
    CK_OK(mxc_engine_get_default(&eng));
    const char *fork = getenv("CK_FORK");
    if (fork == NULL || strcmp(fork, "no") != 0)
        ck_assert_int_eq(mxc_engine_type_of(eng), type);
    return eng;
}

static mxc_ndarray *nd_new(mxc_shape shape, int dtype, int delay_alloc) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_create(&shape, dtype, mxc_cpu(), delay_alloc, &a));
    ck_assert_ptr_nonnull(a);
    return a;
}

static mxc_ndarray *nd_full(mxc_shape shape, int dtype, double value) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_full(&shape, dtype, mxc_cpu(), value, &a));
    ck_assert_ptr_nonnull(a);
    return a;
}

/* A float32 array holding `data` (its size taken from the shape). */
static mxc_ndarray *nd_from(mxc_shape shape, const float *data) {
    mxc_ndarray *a = nd_new(shape, MXC_FLOAT32, 0);
    CK_OK(mxc_nd_sync_copy_from_cpu(a, data, (size_t)mxc_nd_size(a) * sizeof(float)));
    return a;
}

/* The array's float32 contents in a new buffer the caller frees (waits for writes). */
static float *nd_read(const mxc_ndarray *a) {
    int64_t n = mxc_nd_size(a);
    ck_assert_int_ge(n, 0);
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    CK_OK(mxc_nd_sync_copy_to_cpu(a, v, (size_t)n * sizeof *v));
    return v;
}

/* Asserts that `a` holds exactly `want` (n floats), reporting the first difference. */
static void expect_exact(const mxc_ndarray *a, const float *want, int64_t n, const char *what) {
    ck_assert_int_eq(mxc_nd_size(a), n);
    float *got = nd_read(a);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                      "%s: element %lld is %.9g, expected %.9g", what, (long long)i, (double)got[i],
                      (double)want[i]);
    free(got);
}

/* Asserts that every element of `a` is `value`. */
static void expect_all(const mxc_ndarray *a, float value, const char *what) {
    int64_t n = mxc_nd_size(a);
    float *got = nd_read(a);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == value, "%s: element %lld of %lld is %.9g, expected %.9g", what,
                      (long long)i, (long long)n, (double)got[i], (double)value);
    free(got);
}

/* `n` floats uniform in [lo, hi) from `seed`, in a new buffer the caller frees. */
static float *host_random(int64_t n, uint64_t seed, float lo, float hi) {
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    struct mxct_rng r;
    mxct_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * (float)((mxct_rng_next(&r) >> 40) * 0x1p-24);
    return v;
}

static void expect_shape(const mxc_ndarray *a, mxc_shape want, const char *what) {
    mxc_shape got;
    CK_OK(mxc_nd_get_shape(a, &got));
    ck_assert_msg(got.ndim == want.ndim, "%s: ndim %d, expected %d", what, got.ndim, want.ndim);
    for (int i = 0; i < want.ndim; i++)
        ck_assert_msg(got.dims[i] == want.dims[i], "%s: dims[%d] is %lld, expected %lld", what, i,
                      (long long)got.dims[i], (long long)want.dims[i]);
}

static mxc_storage_stats cpu_stats(void) {
    mxc_storage_stats s;
    CK_OK(mxc_storage_get_stats(mxc_cpu(), &s));
    return s;
}

/* Creates and frees one array and waits, so the default engine, its pools and the CPU
 * storage pool exist before a test counts memory. With `random`, also makes the random
 * generator resource. */
static void warm_up(bool random) {
    mxc_ndarray *a = nd_full(SHAPE(4), MXC_FLOAT32, 1);
    mxc_ndarray *b = NULL;
    CK_OK(mxc_nd_add(a, a, &b));
    if (random)
        CK_OK(mxc_nd_random_uniform(a, 0, 1));
    CK_OK(mxc_nd_wait_all());
    mxc_nd_free(a);
    mxc_nd_free(b);
    CK_OK(mxc_nd_wait_all());
}

/* ---- Asynchronous semantics -------------------------------------------------------- */

/* Pushing returns at once: with 64M floats (256 MB) each operation runs for tens of
 * milliseconds, while pushing it takes microseconds; the engine still has the operations
 * pending when the pushes return, and the read that waits sees their result. */
START_TEST(test_push_returns_before_running) {
    mxc_engine *eng = NULL;
    CK_OK(mxc_engine_get_default(&eng));
    if (mxc_engine_type_of(eng) == MXC_ENGINE_NAIVE)
        return; /* the naive engine runs every operation inside push, by design */
    int64_t n = mxct_quick() || mxct_under_tsan() ? 16L << 20 : 64L << 20;
    mxc_ndarray *x = NULL, *y = NULL, *s = NULL;
    uint64_t t0 = mxct_now_ns();
    CK_OK(mxc_nd_ones(&SHAPE(n), MXC_FLOAT32, mxc_cpu(), &x)); /* takes memory, fills */
    uint64_t t1 = mxct_now_ns();
    CK_OK(mxc_nd_mul_scalar(x, 2, &x)); /* waits for the fill: x = 2 */
    uint64_t t2 = mxct_now_ns();
    CK_OK(mxc_nd_add(x, x, &y)); /* waits for the mul: y = 4 */
    uint64_t t3 = mxct_now_ns();
    mxc_engine_stats st;
    CK_OK(mxc_engine_get_stats(eng, &st));
    CK_OK(mxc_nd_sum(y, &s));
    float total = 0;
    CK_OK(mxc_nd_sync_copy_to_cpu(s, &total, sizeof total));
    uint64_t t4 = mxct_now_ns();

    ck_assert_float_eq(total, 4.0f * (float)n); /* a power of two: exact */
    ck_assert_msg(st.pending >= 2, "only %lld operations pending right after the pushes",
                  (long long)st.pending);
    uint64_t total_ns = t4 - t0, pushes[] = {t1 - t0, t2 - t1, t3 - t2};
    for (size_t i = 0; i < ARRAY_SIZE(pushes); i++)
        ck_assert_msg(pushes[i] * 20 < total_ns,
                      "push %zu took %.3f ms of the %.3f ms until the result was read", i,
                      (double)pushes[i] / 1e6, (double)total_ns / 1e6);
    mxc_nd_free(x);
    mxc_nd_free(y);
    mxc_nd_free(s);
}
END_TEST

/* x = x * 2 + 1, a hundred times in place with no wait in between (the "+ 1" alternates
 * between the scalar form and an array of ones), then one read: exactly what the same
 * float operations give on the host. Per engine. */
START_TEST(test_chain_in_place) {
    use_engine(_i);
    const int64_t n = 4099;
    float *host = host_random(n, 11, -1, 1);
    mxc_ndarray *x = nd_from(SHAPE(n), host);
    mxc_ndarray *one = nd_full(SHAPE(n), MXC_FLOAT32, 1);
    for (int it = 0; it < 100; it++) {
        CK_OK(mxc_nd_mul_scalar(x, 2, &x));
        if (it % 2)
            CK_OK(mxc_nd_add_scalar(x, 1, &x));
        else
            CK_OK(mxc_nd_add(x, one, &x));
        for (int64_t i = 0; i < n; i++)
            host[i] = host[i] * 2.0f + 1.0f;
    }
    expect_exact(x, host, n, "x = x * 2 + 1, 100 times");
    mxc_nd_free(x);
    mxc_nd_free(one);
    free(host);
}
END_TEST

/* Writes through a slice, a reshape, an at-view and the parent, pushed without waiting,
 * are applied in push order on the shared chunk; reads through the parent and through
 * other views see them all. Repeated to give a threaded engine chances to reorder. Per
 * engine. */
/* mxc_nd_fill writes only the view's elements. */
START_TEST(test_fill_a_view) {
    mxc_ndarray *a = NULL, *row = NULL;
    CK_OK(mxc_nd_zeros(&SHAPE(3, 4), MXC_FLOAT32, mxc_cpu(), &a));
    CK_OK(mxc_nd_at(a, 1, &row));
    CK_OK(mxc_nd_fill(row, 2.5));
    float h[12];
    CK_OK(mxc_nd_sync_copy_to_cpu(a, h, sizeof h));
    for (int i = 0; i < 12; i++)
        ck_assert_float_eq(h[i], i / 4 == 1 ? 2.5f : 0.0f);
    CK_ERR(MXC_EMISUSE, mxc_nd_fill(NULL, 1.0));
    mxc_nd_free(row);
    mxc_nd_free(a);
}
END_TEST

START_TEST(test_views_share_variable) {
    use_engine(_i);
    for (int rep = 0; rep < 20; rep++) {
        mxc_ndarray *a = nd_full(SHAPE(4, 3, 2), MXC_FLOAT32, 0);
        mxc_ndarray *rows12 = NULL, *flat = NULL, *row3 = NULL, *row2 = NULL;
        CK_OK(mxc_nd_slice(a, 1, 3, &rows12));
        CK_OK(mxc_nd_reshape(a, &SHAPE(24), &flat));
        CK_OK(mxc_nd_at(a, 3, &row3));
        CK_OK(mxc_nd_add_scalar(rows12, 5, &rows12)); /* rows 1, 2: 5  */
        CK_OK(mxc_nd_mul_scalar(flat, 2, &flat));     /* rows 1, 2: 10 */
        CK_OK(mxc_nd_add_scalar(row3, 7, &row3));     /* row 3: 7      */
        CK_OK(mxc_nd_sub_scalar(a, 1, &a));           /* everything - 1 */
        float host[3] = {100, 200, 300};
        mxc_ndarray *cell = NULL, *tail = NULL;
        CK_OK(mxc_nd_at(row3, 2, &cell)); /* row 3, column 2: shape (2) */
        CK_OK(mxc_nd_sync_copy_from_cpu(cell, host, 2 * sizeof(float)));
        CK_OK(mxc_nd_slice(flat, 21, 24, &tail)); /* the last three elements */
        CK_OK(mxc_nd_add_scalar(tail, 0.5f, &tail));

        float want[24];
        for (int i = 0; i < 24; i++)
            want[i] = i < 6 ? -1 : i < 18 ? 9 : 6;
        want[22] = 100, want[23] = 200, want[21] += 0.5f, want[22] += 0.5f, want[23] += 0.5f;
        expect_exact(a, want, 24, "parent after writes through views");
        CK_OK(mxc_nd_at(a, 2, &row2));
        expect_exact(row2, want + 12, 6, "at(a, 2)");
        expect_exact(flat, want, 24, "reshape view");
        mxc_ndarray *views[] = {a, rows12, flat, row3, row2, cell, tail};
        for (size_t i = 0; i < ARRAY_SIZE(views); i++)
            mxc_nd_free(views[i]);
    }
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* Inputs and outputs freed right after the operations on them are pushed: the results
 * still come out right through a view kept alive, nothing is read after it was released
 * (AddressSanitizer would say so), and after wait_all every block is back in the pool
 * and bytes in use are where they started. Per engine. */
START_TEST(test_free_while_pending) {
    use_engine(_i);
    warm_up(false);
    CK_OK(mxc_storage_trim(mxc_cpu()));
    mxc_storage_stats before = cpu_stats();
    const int64_t n = 1 << 20;

    mxc_ndarray *a = NULL, *b = NULL, *c = NULL, *d = NULL, *keep = NULL, *sum = NULL;
    CK_OK(mxc_nd_ones(&SHAPE(n), MXC_FLOAT32, mxc_cpu(), &a));
    CK_OK(mxc_nd_full(&SHAPE(n), MXC_FLOAT32, mxc_cpu(), 2, &b));
    CK_OK(mxc_nd_add(a, b, &c));        /* 3 */
    CK_OK(mxc_nd_mul_scalar(c, 2, &c)); /* 6 */
    CK_OK(mxc_nd_mul(c, a, &d));        /* 6 */
    CK_OK(mxc_nd_reshape(d, &SHAPE(n / 2, 2), &keep));
    mxc_nd_free(a);
    mxc_nd_free(b);
    mxc_nd_free(c);
    mxc_nd_free(d);
    CK_OK(mxc_nd_sum(keep, &sum));
    float total = 0;
    CK_OK(mxc_nd_sync_copy_to_cpu(sum, &total, sizeof total));
    ck_assert_float_eq(total, 6.0f * (float)n);
    expect_all(keep, 6, "d through a reshape kept alive");
    mxc_nd_free(keep);
    mxc_nd_free(sum);
    CK_OK(mxc_nd_wait_all());

    mxc_storage_stats after = cpu_stats();
    ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
    ck_assert_uint_eq(after.blocks_in_use, before.blocks_in_use);
    ck_assert_uint_ge(after.free_count, before.free_count + 5); /* a, b, c, d, sum */
    /* Four big blocks went back; d, taken when its operation ran, may have reused b's. */
    ck_assert_uint_ge(after.bytes_pooled, before.bytes_pooled + 3 * (size_t)n * sizeof(float));
    /* The next array of that size takes a pooled block. */
    mxc_ndarray *again = nd_new(SHAPE(n), MXC_FLOAT32, 0);
    ck_assert_uint_gt(cpu_stats().pool_hits, after.pool_hits);
    mxc_nd_free(again);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* Threads pushing on the same array: every in-place increment lands once (additions of
 * small integers commute exactly), and each thread's own temporaries come out right. */
#define MT_THREADS 4
#define MT_OPS     300

struct mt_pusher {
    mxc_ndarray *shared;
    int id;
};

static void *mt_pusher_main(void *arg) {
    struct mt_pusher *p = arg;
    for (int i = 0; i < MT_OPS; i++) {
        int rc = mxc_nd_add_scalar(p->shared, 1, &p->shared);
        mxc_ndarray *t = NULL, *u = NULL;
        if (rc == MXC_OK)
            rc = mxc_nd_full(&SHAPE(3), MXC_FLOAT32, mxc_cpu(), p->id, &t);
        if (rc == MXC_OK)
            rc = mxc_nd_add(t, t, &u);
        float v[3] = {0};
        if (rc == MXC_OK)
            rc = mxc_nd_sync_copy_to_cpu(u, v, sizeof v);
        if (rc != MXC_OK)
            mxct_note("thread %d op %d: %s: %s", p->id, i, mxc_err_name(rc), mxc_last_error());
        else if (v[0] != 2.0f * (float)p->id || v[2] != v[0])
            mxct_note("thread %d op %d: read %g, expected %d", p->id, i, (double)v[0], 2 * p->id);
        mxc_nd_free(t);
        mxc_nd_free(u);
    }
    return NULL;
}

START_TEST(test_push_from_threads) {
    use_engine(_i);
    mxct_notes_reset();
    mxc_ndarray *x = nd_full(SHAPE(16), MXC_FLOAT32, 0);
    struct mt_pusher pushers[MT_THREADS];
    for (int t = 0; t < MT_THREADS; t++)
        pushers[t] = (struct mt_pusher){x, t};
    mxct_run_threads(MT_THREADS, mt_pusher_main, pushers, sizeof pushers[0]);
    mxct_assert_no_notes();
    expect_all(x, MT_THREADS * MT_OPS, "shared counter");
    mxc_nd_free(x);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* ---- Values ------------------------------------------------------------------------ */

/* Every element-wise operation in every output form: a new array, a preallocated one,
 * in place on either input, both inputs the same array, inputs that are views with an
 * offset, and the scalar forms. */
START_TEST(test_elemwise_values) {
    const int64_t n = 1000;
    const float scalar = 1.75f;
    float *ha = host_random(n, 1, -4, 4), *hb = host_random(n, 2, 0.5f, 2);
    for (int64_t i = 0; i < n; i += 3)
        hb[i] = -hb[i]; /* divisors of both signs, none near 0 */
    float *want = malloc((size_t)n * sizeof *want);
    ck_assert_ptr_nonnull(want);
    mxc_ndarray *a = nd_from(SHAPE(n), ha), *b = nd_from(SHAPE(n), hb);

    for (size_t c = 0; c < ARRAY_SIZE(ew_cases); c++) {
        const struct ew_case *ew = &ew_cases[c];
        char what[64];
#define EXPECT(arr, x, y, form)                                \
    do {                                                       \
        for (int64_t i_ = 0; i_ < n; i_++)                     \
            want[i_] = host_apply(ew->op, (x), (y));           \
        snprintf(what, sizeof what, "%s, %s", ew->name, form); \
        expect_exact(arr, want, n, what);                      \
    } while (0)
        mxc_ndarray *out = NULL;
        CK_OK(ew->binary(a, b, &out));
        EXPECT(out, ha[i_], hb[i_], "new output");
        CK_OK(ew->binary(b, a, &out)); /* out is preallocated now */
        EXPECT(out, hb[i_], ha[i_], "preallocated output");
        CK_OK(ew->binary(a, a, &out));
        EXPECT(out, ha[i_], ha[i_], "same input twice");

        mxc_ndarray *a2 = nd_from(SHAPE(n), ha), *b2 = nd_from(SHAPE(n), hb);
        CK_OK(ew->binary(a2, b, &a2));
        EXPECT(a2, ha[i_], hb[i_], "in place on a");
        CK_OK(ew->binary(a, b2, &b2));
        EXPECT(b2, ha[i_], hb[i_], "in place on b");
        mxc_nd_free(a2);
        mxc_nd_free(b2);

        mxc_ndarray *s = NULL;
        CK_OK(ew->scalar(a, scalar, &s));
        EXPECT(s, ha[i_], scalar, "scalar, new output");
        CK_OK(ew->scalar(s, scalar, &s));
        EXPECT(s, host_apply(ew->op, ha[i_], scalar), scalar, "scalar, in place");
        mxc_nd_free(s);
#undef EXPECT

        /* Views at an offset: rows 1..3 of a (2-D) with rows 0..2 of b. */
        mxc_ndarray *a2d = NULL, *b2d = NULL, *va = NULL, *vb = NULL, *vo = NULL;
        CK_OK(mxc_nd_reshape(a, &SHAPE(n / 10, 10), &a2d));
        CK_OK(mxc_nd_reshape(b, &SHAPE(n / 10, 10), &b2d));
        CK_OK(mxc_nd_slice(a2d, 1, 4, &va));
        CK_OK(mxc_nd_slice(b2d, 0, 3, &vb));
        CK_OK(ew->binary(va, vb, &vo));
        for (int i = 0; i < 30; i++)
            want[i] = host_apply(ew->op, ha[10 + i], hb[i]);
        snprintf(what, sizeof what, "%s, views at an offset", ew->name);
        expect_exact(vo, want, 30, what);
        mxc_ndarray *views[] = {a2d, b2d, va, vb, vo, out};
        for (size_t i = 0; i < ARRAY_SIZE(views); i++)
            mxc_nd_free(views[i]);
    }
    mxc_nd_free(a);
    mxc_nd_free(b);
    free(ha);
    free(hb);
    free(want);
}
END_TEST

/* dot against a triple loop in double, for square, non-square, row- and column-vector
 * and empty shapes, into new and preallocated outputs, and from a view at an offset. */
START_TEST(test_dot_values) {
    static const struct {
        int64_t m, k, n;
    } shapes[] = {
        {1, 1, 1},      {2, 3, 4},   {4, 3, 2},   {1, 64, 1},   {64, 1, 64},
        {1, 50, 20},    {20, 50, 1}, {17, 31, 9}, {64, 64, 64}, {100, 37, 3},
        {128, 256, 64}, {3, 0, 4},   {0, 5, 3},
    };
    for (size_t c = 0; c < ARRAY_SIZE(shapes); c++) {
        int64_t m = shapes[c].m, k = shapes[c].k, n = shapes[c].n;
        /* a gets an extra first row, so the operand is a view at an offset. */
        float *ha = host_random((m + 1) * k, 100 + c, -1, 1),
              *hb = host_random(k * n, 200 + c, -1, 1);
        mxc_ndarray *a_full = nd_from(SHAPE(m + 1, k), ha), *b = nd_from(SHAPE(k, n), hb);
        mxc_ndarray *a = NULL, *out = NULL, *pre = nd_full(SHAPE(m, n), MXC_FLOAT32, 7);
        CK_OK(mxc_nd_slice(a_full, 1, m + 1, &a));
        CK_OK(mxc_nd_dot(a, b, &out));
        CK_OK(mxc_nd_dot(a, b, &pre));
        expect_shape(out, SHAPE(m, n), "dot output");
        float *got = nd_read(out), *got_pre = nd_read(pre);
        double worst = 0;
        int64_t worst_at = -1;
        for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < n; j++) {
                double ref = 0;
                for (int64_t p = 0; p < k; p++)
                    ref += (double)ha[(i + 1) * k + p] * hb[p * n + j];
                double err = fabs(got[i * n + j] - ref);
                if (err > worst)
                    worst = err, worst_at = i * n + j;
                ck_assert_msg(got_pre[i * n + j] == got[i * n + j],
                              "(%lld,%lld,%lld): preallocated output differs at %lld", (long long)m,
                              (long long)k, (long long)n, (long long)(i * n + j));
            }
        }
        /* Each term is below 1 in magnitude: float error stays under k ulps of 1. */
        double tol = 1e-6 + 2.4e-7 * (double)k;
        ck_assert_msg(worst <= tol, "(%lld,%lld,%lld): worst error %g at %lld (tolerance %g)",
                      (long long)m, (long long)k, (long long)n, worst, (long long)worst_at, tol);
        free(got);
        free(got_pre);
        free(ha);
        free(hb);
        mxc_nd_free(a_full);
        mxc_nd_free(a);
        mxc_nd_free(b);
        mxc_nd_free(out);
        mxc_nd_free(pre);
    }
}
END_TEST

/* A float32 copy of host `data` on gpu(0). */
static mxc_ndarray *gpu_from(mxc_shape shape, const float *data) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_create(&shape, MXC_FLOAT32, mxc_gpu(0), 0, &a));
    CK_OK(mxc_nd_sync_copy_from_cpu(a, data, (size_t)mxc_nd_size(a) * sizeof(float)));
    return a;
}

/* Asserts |got - want| <= tol elementwise for two arrays of n floats, naming the worst. */
static void expect_close(const mxc_ndarray *got_a, const mxc_ndarray *want_a, double tol,
                         const char *what) {
    int64_t n = mxc_nd_size(want_a);
    ck_assert_int_eq(mxc_nd_size(got_a), n);
    float *got = nd_read(got_a), *want = nd_read(want_a);
    double worst = 0;
    int64_t worst_at = -1;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        if (!(err <= worst)) /* NaN counts as worst */
            worst = err, worst_at = i;
    }
    ck_assert_msg(worst <= tol, "%s: worst error %g at %lld (tolerance %g)", what, worst,
                  (long long)worst_at, tol);
    free(got);
    free(want);
}

/* dot and sum of arrays on gpu(0) equal the CPU's (within float rounding: the GPU sums in
 * another order) for the shapes of the CPU tests, views at an offset, preallocated outputs
 * and empty arrays; operands on two devices are an error. Without a GPU, nothing to do. */
START_TEST(test_gpu_dot_sum) {
    if (mxc_gpu_count() == 0)
        return;
    static const struct {
        int64_t m, k, n;
    } shapes[] = {
        {1, 1, 1},      {2, 3, 4}, {17, 31, 9}, {64, 64, 64}, {100, 37, 3},
        {128, 256, 64}, {3, 0, 4}, {0, 5, 3},   {1, 50, 20},  {513, 300, 257},
    };
    for (size_t c = 0; c < ARRAY_SIZE(shapes); c++) {
        int64_t m = shapes[c].m, k = shapes[c].k, n = shapes[c].n;
        float *ha = host_random((m + 1) * k, 300 + c, -1, 1),
              *hb = host_random(k * n, 400 + c, -1, 1);
        mxc_ndarray *ca = nd_from(SHAPE(m + 1, k), ha), *cb = nd_from(SHAPE(k, n), hb);
        mxc_ndarray *ga = gpu_from(SHAPE(m + 1, k), ha), *gb = gpu_from(SHAPE(k, n), hb);
        mxc_ndarray *ca_view = NULL, *ga_view = NULL, *cout = NULL, *gout = NULL, *gpre = NULL;
        CK_OK(mxc_nd_full(&SHAPE(m, n), MXC_FLOAT32, mxc_gpu(0), 7, &gpre));
        CK_OK(mxc_nd_slice(ca, 1, m + 1, &ca_view));
        CK_OK(mxc_nd_slice(ga, 1, m + 1, &ga_view));
        CK_OK(mxc_nd_dot(ca_view, cb, &cout));
        CK_OK(mxc_nd_dot(ga_view, gb, &gout));
        CK_OK(mxc_nd_dot(ga_view, gb, &gpre));
        mxc_context where;
        CK_OK(mxc_nd_get_context(gout, &where));
        ck_assert_int_eq(where.dev_type, MXC_GPU);
        char what[96];
        snprintf(what, sizeof what, "gpu dot (%lld,%lld,%lld)", (long long)m, (long long)k,
                 (long long)n);
        double tol = 1e-5 + 5e-7 * (double)k; /* TF32 must be off: that would be 1e-3 * k */
        expect_close(gout, cout, tol, what);
        expect_close(gpre, cout, tol, what);

        mxc_ndarray *csum = NULL, *gsum = NULL;
        CK_OK(mxc_nd_sum(ca, &csum));
        CK_OK(mxc_nd_sum(ga, &gsum));
        snprintf(what, sizeof what, "gpu sum of %lld", (long long)((m + 1) * k));
        expect_close(gsum, csum, 1e-6 * (double)((m + 1) * k) + 1e-6, what);
        CK_ERR(MXC_EINVAL, mxc_nd_dot(ca_view, gb, &cout)); /* a on the CPU, b on the GPU */
        ck_assert_ptr_nonnull(strstr(mxc_last_error(), "gpu(0)"));
        CK_ERR(MXC_EINVAL, mxc_nd_sum(ga, &csum)); /* *out on the CPU */
        free(ha);
        free(hb);
        mxc_ndarray *all[] = {ca, cb, ga, gb, ca_view, ga_view, cout, gout, gpre, csum, gsum};
        for (size_t i = 0; i < ARRAY_SIZE(all); i++)
            mxc_nd_free(all[i]);
    }
    /* a million ones sum to exactly a million in any order (integers below 2^24) */
    mxc_ndarray *ones = NULL, *s = NULL;
    CK_OK(mxc_nd_ones(&SHAPE(1000000), MXC_FLOAT32, mxc_gpu(0), &ones));
    CK_OK(mxc_nd_sum(ones, &s));
    float one_million = 1e6f;
    expect_exact(s, &one_million, 1, "gpu sum of 1e6 ones");
    mxc_nd_free(ones);
    mxc_nd_free(s);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* sum accumulates in double and rounds once: a million ones are exactly a million; 2^24
 * followed by a thousand ones is 2^24 + 1000 (a float accumulator stays at 2^24, where
 * adding 1 rounds back down); random data equals the host's double sum rounded to float;
 * an empty array sums to 0. */
START_TEST(test_sum_values) {
    mxc_ndarray *ones = NULL, *s = NULL;
    CK_OK(mxc_nd_ones(&SHAPE(1000000), MXC_FLOAT32, mxc_cpu(), &ones));
    CK_OK(mxc_nd_sum(ones, &s));
    expect_shape(s, SHAPE(1), "sum output");
    float one_million = 1e6f;
    expect_exact(s, &one_million, 1, "sum of 1e6 ones");

    float big[1001];
    big[0] = 0x1p24f;
    for (int i = 1; i < 1001; i++)
        big[i] = 1;
    mxc_ndarray *b = nd_from(SHAPE(1001), big);
    CK_OK(mxc_nd_sum(b, &s));
    float big_sum = 0x1p24f + 1000;
    expect_exact(s, &big_sum, 1, "sum of 2^24 and 1000 ones");

    const int64_t n = 100003;
    float *h = host_random(n, 5, -3, 5);
    double acc = 0;
    for (int64_t i = 0; i < n; i++)
        acc += h[i];
    float want = (float)acc;
    mxc_ndarray *r = nd_from(SHAPE(n), h);
    CK_OK(mxc_nd_sum(r, &s)); /* into the preallocated (1) */
    expect_exact(s, &want, 1, "sum of random values");

    mxc_ndarray *empty = nd_new(SHAPE(0), MXC_FLOAT32, 1), *e = NULL;
    CK_OK(mxc_nd_sum(empty, &e));
    float zero = 0;
    expect_exact(e, &zero, 1, "sum of an empty array");
    mxc_nd_free(ones);
    mxc_nd_free(b);
    mxc_nd_free(s);
    mxc_nd_free(r);
    mxc_nd_free(empty);
    mxc_nd_free(e);
    free(h);
}
END_TEST

/* One element's bytes, little-endian: the low mxc_dtype_size(dtype) bytes of `bits`. */
static void expect_bytes(const mxc_ndarray *a, uint64_t bits, const char *what) {
    int dtype = mxc_nd_dtype(a);
    size_t es = mxc_dtype_size(dtype), n = (size_t)mxc_nd_size(a);
    unsigned char want[8], *got = malloc(n * es + 1);
    ck_assert_ptr_nonnull(got);
    for (size_t i = 0; i < es; i++)
        want[i] = (unsigned char)(bits >> (8 * i));
    CK_OK(mxc_nd_sync_copy_to_cpu(a, got, n * es));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(got + i * es, want, es) == 0,
                      "%s (%s): element %zu differs from 0x%llx", what, mxc_dtype_name(dtype), i,
                      (unsigned long long)bits);
    free(got);
}

/* full converts its value to each dtype: checked on the bytes. */
START_TEST(test_full_dtypes) {
    static const struct {
        int dtype;
        double value;
        uint64_t bits;
    } cases[] = {
        {MXC_FLOAT32, 1.0, 0x3F800000},
        {MXC_FLOAT32, -0.5, 0xBF000000},
        {MXC_FLOAT64, 1.0, 0x3FF0000000000000},
        {MXC_FLOAT64, 0.1, 0x3FB999999999999A},
        {MXC_FLOAT16, 1.0, 0x3C00},
        {MXC_FLOAT16, -2.5, 0xC100},
        {MXC_FLOAT16, 65504, 0x7BFF},
        {MXC_FLOAT16, 0.1, 0x2E66},
        {MXC_FLOAT16, 65520, 0x7C00},
        {MXC_FLOAT16, 1e-8, 0x0000},
        {MXC_FLOAT16, 0x1p-24, 0x0001},
        {MXC_BFLOAT16, 1.0, 0x3F80},
        {MXC_BFLOAT16, -2.0, 0xC000},
        {MXC_BFLOAT16, 3.5, 0x4060},
        {MXC_BFLOAT16, 0.1, 0x3DCD}, /* 0x3DCCCCCD rounds up, not truncated to 0x3DCC */
        {MXC_UINT8, 200, 0xC8},
        {MXC_INT8, -3, 0xFD},
        {MXC_BOOL, 1, 1},
        {MXC_BOOL, 0, 0},
        {MXC_BOOL, -2.5, 1},
        {MXC_INT16, -300, 0xFED4},
        {MXC_UINT16, 65535, 0xFFFF},
        {MXC_INT32, -5, 0xFFFFFFFB},
        {MXC_UINT32, 4e9, 0xEE6B2800},
        {MXC_INT64, -2, 0xFFFFFFFFFFFFFFFE},
        {MXC_UINT64, 0x1p40, 0x10000000000},
    };
    for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
        mxc_ndarray *a = nd_full(SHAPE(3, 7), cases[c].dtype, cases[c].value);
        ck_assert_int_eq(mxc_nd_dtype(a), cases[c].dtype);
        char what[64];
        snprintf(what, sizeof what, "full(%g)", cases[c].value);
        expect_bytes(a, cases[c].bits, what);
        mxc_nd_free(a);
    }
}
END_TEST

/* zeros and ones for every dtype. */
START_TEST(test_zeros_ones_dtypes) {
    static const uint64_t one_bits[] = {
        [MXC_FLOAT32] = 0x3F800000,
        [MXC_FLOAT64] = 0x3FF0000000000000,
        [MXC_FLOAT16] = 0x3C00,
        [MXC_UINT8] = 1,
        [MXC_INT32] = 1,
        [MXC_INT8] = 1,
        [MXC_INT64] = 1,
        [MXC_BOOL] = 1,
        [MXC_INT16] = 1,
        [MXC_UINT16] = 1,
        [MXC_UINT32] = 1,
        [MXC_UINT64] = 1,
        [MXC_BFLOAT16] = 0x3F80,
    };
    for (int dtype = 0; dtype < (int)ARRAY_SIZE(one_bits); dtype++) {
        ck_assert_uint_ne(mxc_dtype_size(dtype), 0);
        mxc_ndarray *z = NULL, *o = NULL;
        CK_OK(mxc_nd_zeros(&SHAPE(1001), dtype, mxc_cpu(), &z));
        CK_OK(mxc_nd_ones(&SHAPE(5, 3), dtype, mxc_cpu(), &o));
        ck_assert_int_eq(mxc_nd_size(z), 1001);
        ck_assert_int_eq(mxc_nd_dtype(o), dtype);
        expect_bytes(z, 0, "zeros");
        expect_bytes(o, one_bits[dtype], "ones");
        mxc_nd_free(z);
        mxc_nd_free(o);
    }
}
END_TEST

/* Uniform draws lie in [low, high), a seed gives the same draws again, another seed
 * other draws, and consecutive fills continue the stream. */
START_TEST(test_random_uniform) {
    const int64_t n = 100000;
    const float lo = -2, hi = 3;
    mxc_ndarray *arr[4];
    for (int i = 0; i < 4; i++)
        arr[i] = nd_new(SHAPE(n), MXC_FLOAT32, i % 2);
    CK_OK(mxc_random_seed(7));
    CK_OK(mxc_nd_random_uniform(arr[0], lo, hi));
    CK_OK(mxc_nd_random_uniform(arr[3], lo, hi)); /* the stream goes on */
    CK_OK(mxc_random_seed(7));
    CK_OK(mxc_nd_random_uniform(arr[1], lo, hi));
    CK_OK(mxc_random_seed(8));
    CK_OK(mxc_nd_random_uniform(arr[2], lo, hi));
    float *v[4];
    for (int i = 0; i < 4; i++)
        v[i] = nd_read(arr[i]);

    ck_assert_msg(memcmp(v[0], v[1], (size_t)n * sizeof(float)) == 0,
                  "seed 7 twice gave different draws");
    int64_t same_seed8 = 0, same_next = 0;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(v[0][i] >= lo && v[0][i] < hi, "draw %lld = %.9g outside [%g, %g)",
                      (long long)i, (double)v[0][i], (double)lo, (double)hi);
        same_seed8 += v[0][i] == v[2][i];
        same_next += v[0][i] == v[3][i];
        sum += v[0][i];
    }
    ck_assert_msg(same_seed8 < n / 100, "seeds 7 and 8: %lld equal draws", (long long)same_seed8);
    ck_assert_msg(same_next < n / 100, "two fills in a row: %lld equal draws",
                  (long long)same_next);
    /* mean 0.5, standard deviation 5 / sqrt(12): 6 standard errors. */
    double mean = sum / (double)n, se = 5 / sqrt(12.0) / sqrt((double)n);
    ck_assert_msg(fabs(mean - 0.5) < 6 * se, "mean %g, expected 0.5 +- %g", mean, 6 * se);
    for (int i = 0; i < 4; i++) {
        free(v[i]);
        mxc_nd_free(arr[i]);
    }
}
END_TEST

/* A million normal draws: mean, standard deviation and the one-sigma fraction within six
 * standard errors of their expected values. */
START_TEST(test_random_normal) {
    const int64_t n = 1000000;
    const double mean = 3, std = 2;
    mxc_ndarray *a = nd_new(SHAPE(n), MXC_FLOAT32, 1);
    CK_OK(mxc_random_seed(12345));
    CK_OK(mxc_nd_random_normal(a, (float)mean, (float)std));
    float *v = nd_read(a);
    double s = 0, s2 = 0;
    int64_t within = 0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(isfinite(v[i]), "draw %lld is %g", (long long)i, (double)v[i]);
        s += v[i];
        within += fabs(v[i] - mean) < std;
    }
    double m = s / (double)n;
    for (int64_t i = 0; i < n; i++)
        s2 += (v[i] - m) * (v[i] - m);
    double sd = sqrt(s2 / (double)(n - 1)), frac = (double)within / (double)n;
    const double p1 = 0.682689492137; /* P(|Z| < 1) */
    double se_mean = std / sqrt((double)n), se_sd = std / sqrt(2.0 * (double)n),
           se_frac = sqrt(p1 * (1 - p1) / (double)n);
    ck_assert_msg(fabs(m - mean) < 6 * se_mean, "mean %g, expected %g +- %g", m, mean, 6 * se_mean);
    ck_assert_msg(fabs(sd - std) < 6 * se_sd, "std %g, expected %g +- %g", sd, std, 6 * se_sd);
    ck_assert_msg(fabs(frac - p1) < 6 * se_frac, "%g within one std, expected %g", frac, p1);
    free(v);
    mxc_nd_free(a);
}
END_TEST

/* copy_to on the CPU: into a new array (created now or delay-alloc), into a slice view of
 * a larger array, from an at-view, and for a dtype arithmetic does not support. */
START_TEST(test_copy_to) {
    float *h = host_random(20, 3, -1, 1);
    mxc_ndarray *src = nd_from(SHAPE(5, 4), h);
    for (int delay = 0; delay <= 1; delay++) {
        mxc_ndarray *dst = nd_new(SHAPE(5, 4), MXC_FLOAT32, delay);
        CK_OK(mxc_nd_copy_to(src, dst));
        expect_exact(dst, h, 20, delay ? "copy into a delay-alloc array" : "copy");
        mxc_nd_free(dst);
    }
    /* Into rows 3..7 of a (10, 4) zero array. */
    mxc_ndarray *big = nd_full(SHAPE(10, 4), MXC_FLOAT32, 0), *rows = NULL;
    CK_OK(mxc_nd_slice(big, 3, 8, &rows));
    CK_OK(mxc_nd_copy_to(src, rows));
    float want[40] = {0};
    memcpy(want + 12, h, sizeof(float) * 20);
    expect_exact(big, want, 40, "copy into a slice");
    /* From at(big, 4), which is src's row 1. */
    mxc_ndarray *row = NULL, *dst_row = nd_new(SHAPE(4), MXC_FLOAT32, 1);
    CK_OK(mxc_nd_at(big, 4, &row));
    CK_OK(mxc_nd_copy_to(row, dst_row));
    expect_exact(dst_row, h + 4, 4, "copy from an at-view");
    /* int8, which has no arithmetic. */
    mxc_ndarray *i8 = nd_full(SHAPE(6), MXC_INT8, -3), *i8_dst = nd_new(SHAPE(6), MXC_INT8, 1);
    CK_OK(mxc_nd_copy_to(i8, i8_dst));
    expect_bytes(i8_dst, 0xFD, "copy of int8");
    mxc_ndarray *all[] = {src, big, rows, row, dst_row, i8, i8_dst};
    for (size_t i = 0; i < ARRAY_SIZE(all); i++)
        mxc_nd_free(all[i]);
    free(h);
}
END_TEST

/* Views of a (4, 3, 2) array holding 0..23, built by a path of at / slice / reshape
 * steps: each has the expected shape and reads the expected run of the parent. */
struct view_step {
    char kind; /* 'a': at(x); 's': slice(x, y); 'r': reshape to (x) or (x, y) */
    int64_t x, y;
};

START_TEST(test_view_shapes) {
    static const struct {
        const char *name;
        struct view_step steps[3];
        mxc_shape shape;
        int64_t first; /* element of the parent where the view starts */
    } cases[] = {
        {"at(2)", {{'a', 2, 0}}, {2, {3, 2}}, 12},
        {"at(0)", {{'a', 0, 0}}, {2, {3, 2}}, 0},
        {"slice(1, 3)", {{'s', 1, 3}}, {3, {2, 3, 2}}, 6},
        {"slice(0, 4)", {{'s', 0, 4}}, {3, {4, 3, 2}}, 0},
        {"slice(4, 4)", {{'s', 4, 4}}, {3, {0, 3, 2}}, 24},
        {"slice(1, 3).at(1)", {{'s', 1, 3}, {'a', 1, 0}}, {2, {3, 2}}, 12},
        {"at(3).at(2)", {{'a', 3, 0}, {'a', 2, 0}}, {1, {2}}, 22},
        {"at(3).at(2).at(1)", {{'a', 3, 0}, {'a', 2, 0}, {'a', 1, 0}}, {1, {1}}, 23},
        {"reshape(6, 4).at(5)", {{'r', 6, 4}, {'a', 5, 0}}, {1, {4}}, 20},
        {"reshape(24).slice(5, 9)", {{'r', 24, 0}, {'s', 5, 9}}, {1, {4}}, 5},
        {"at(1).reshape(2, 3).slice(1, 2)",
         {{'a', 1, 0}, {'r', 2, 3}, {'s', 1, 2}},
         {2, {1, 3}},
         9},
    };
    float h[24];
    for (int i = 0; i < 24; i++)
        h[i] = (float)i;
    mxc_ndarray *parent = nd_from(SHAPE(4, 3, 2), h);
    for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
        mxc_ndarray *chain[4] = {parent};
        int len = 0;
        for (; len < 3 && cases[c].steps[len].kind; len++) {
            const struct view_step *st = &cases[c].steps[len];
            mxc_ndarray *from = chain[len], **to = &chain[len + 1];
            if (st->kind == 'a')
                CK_OK(mxc_nd_at(from, st->x, to));
            else if (st->kind == 's')
                CK_OK(mxc_nd_slice(from, st->x, st->y, to));
            else if (st->y)
                CK_OK(mxc_nd_reshape(from, &SHAPE(st->x, st->y), to));
            else
                CK_OK(mxc_nd_reshape(from, &SHAPE(st->x), to));
        }
        mxc_ndarray *v = chain[len];
        expect_shape(v, cases[c].shape, cases[c].name);
        ck_assert_int_eq(mxc_nd_size(v), mxc_shape_size(&cases[c].shape));
        ck_assert_int_eq(mxc_nd_dtype(v), MXC_FLOAT32);
        expect_exact(v, h + cases[c].first, mxc_nd_size(v), cases[c].name);
        for (int i = 1; i <= len; i++)
            mxc_nd_free(chain[i]);
    }
    mxc_nd_free(parent);
}
END_TEST

/* Properties never wait: they answer while a long operation on the array is pending. */
START_TEST(test_properties) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_ones(&SHAPE(2, 1 << 22), MXC_FLOAT64, mxc_cpu(), &a));
    expect_shape(a, SHAPE(2, 1 << 22), "full");
    ck_assert_int_eq(mxc_nd_dtype(a), MXC_FLOAT64);
    ck_assert_int_eq(mxc_nd_size(a), 2 << 22);
    mxc_context ctx = {0, 99};
    CK_OK(mxc_nd_get_context(a, &ctx));
    ck_assert_int_eq(ctx.dev_type, MXC_CPU);
    ck_assert_int_eq(ctx.dev_id, 0);
    /* An all-zero context means the CPU, as in engine descriptions. */
    mxc_context zero = {0, 0};
    mxc_ndarray *z = NULL;
    CK_OK(mxc_nd_create(&SHAPE(3), MXC_UINT8, zero, 1, &z));
    CK_OK(mxc_nd_get_context(z, &ctx));
    ck_assert_int_eq(ctx.dev_type, MXC_CPU);
    CK_OK(mxc_nd_wait_to_read(a));
    CK_OK(mxc_nd_wait_to_write(a));
    mxc_nd_free(a);
    mxc_nd_free(z);
    mxc_nd_free(NULL);
}
END_TEST

/* ---- Misuse ------------------------------------------------------------------------ */

/* Every function taking an array, given `bad`, returns MXC_EMISUSE (or -1 for the
 * getters without a status) and a message, and leaves outputs NULL. */
static void expect_bad_handle(mxc_ndarray *bad, mxc_ndarray *good, const char *kind) {
    mxc_ndarray *out = NULL;
    mxc_shape s;
    mxc_context ctx;
    float buf[4];
    ck_assert_msg(mxc_nd_dtype(bad) == -1, "%s: dtype", kind);
    ck_assert_msg(mxc_nd_size(bad) == -1, "%s: size", kind);
    CK_ERR(MXC_EMISUSE, mxc_nd_get_shape(bad, &s));
    CK_ERR(MXC_EMISUSE, mxc_nd_get_context(bad, &ctx));
    CK_ERR(MXC_EMISUSE, mxc_nd_reshape(bad, &SHAPE(4), &out));
    CK_ERR(MXC_EMISUSE, mxc_nd_slice(bad, 0, 1, &out));
    CK_ERR(MXC_EMISUSE, mxc_nd_at(bad, 0, &out));
    CK_ERR(MXC_EMISUSE, mxc_nd_wait_to_read(bad));
    CK_ERR(MXC_EMISUSE, mxc_nd_wait_to_write(bad));
    CK_ERR(MXC_EMISUSE, mxc_nd_sync_copy_from_cpu(bad, buf, sizeof buf));
    CK_ERR(MXC_EMISUSE, mxc_nd_sync_copy_to_cpu(bad, buf, sizeof buf));
    CK_ERR(MXC_EMISUSE, mxc_nd_copy_to(bad, good));
    CK_ERR(MXC_EMISUSE, mxc_nd_copy_to(good, bad));
    for (size_t c = 0; c < ARRAY_SIZE(ew_cases); c++) {
        CK_ERR(MXC_EMISUSE, ew_cases[c].binary(bad, good, &out));
        CK_ERR(MXC_EMISUSE, ew_cases[c].scalar(bad, 1, &out));
        if (bad == NULL)
            continue; /* NULL b: test_misuse_null_operand; *out NULL asks for a new array */
        CK_ERR(MXC_EMISUSE, ew_cases[c].binary(good, bad, &out));
        mxc_ndarray *bad_out = bad; /* *out that is not a live array */
        CK_ERR(MXC_EMISUSE, ew_cases[c].binary(good, good, &bad_out));
        CK_ERR(MXC_EMISUSE, ew_cases[c].scalar(good, 1, &bad_out));
        ck_assert_ptr_eq(bad_out, bad);
    }
    CK_ERR(MXC_EMISUSE, mxc_nd_dot(bad, good, &out));
    CK_ERR(MXC_EMISUSE, mxc_nd_dot(good, bad, &out));
    CK_ERR(MXC_EMISUSE, mxc_nd_sum(bad, &out));
    CK_ERR(MXC_EMISUSE, mxc_nd_random_uniform(bad, 0, 1));
    CK_ERR(MXC_EMISUSE, mxc_nd_random_normal(bad, 0, 1));
    ck_assert_msg(out == NULL, "%s: an output was made", kind);
    mxc_nd_free(bad); /* ignored */
}

/* NULL, a zeroed buffer of a plausible size (never a handle), and a handle already
 * freed: the library keeps a freed handle's memory (common/handle.h), so passing it back
 * reads nothing freed. check_handles covers the other bad pointers. */
START_TEST(test_misuse_bad_handles) {
    mxc_ndarray *good = nd_full(SHAPE(4), MXC_FLOAT32, 1);
    mxc_ndarray *freed = nd_full(SHAPE(4), MXC_FLOAT32, 2);
    CK_OK(mxc_nd_wait_all());
    static _Alignas(max_align_t) unsigned char zeroed[512];

    expect_bad_handle(NULL, good, "NULL");
    expect_bad_handle((mxc_ndarray *)zeroed, good, "zeroed buffer");
    mxc_nd_free(freed);
    expect_bad_handle(freed, good, "freed handle");
    CK_OK(mxc_nd_wait_all());
    expect_all(good, 1, "the good array after all that");
    mxc_nd_free(good);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* A NULL second operand of add/sub/mul/div is a bad handle too, not "no operand". */
START_TEST(test_misuse_null_operand) {
    mxc_ndarray *a = nd_full(SHAPE(4), MXC_FLOAT32, 1);
    for (size_t c = 0; c < ARRAY_SIZE(ew_cases); c++) {
        mxc_ndarray *out = NULL;
        CK_ERR(MXC_EMISUSE, ew_cases[c].binary(a, NULL, &out));
        ck_assert_ptr_null(out);
    }
    mxc_nd_free(a);
}
END_TEST

/* An empty shape is valid only when its other dims multiply without overflow: kernels
 * multiply some of the dims of empty arrays too (BatchNorm's (outer, C, inner) of a
 * (0, 3, 22, 1, 2^63 - 1) array overflowed int64; found by tests/fuzz/op_params). */
START_TEST(test_empty_shape_sizes) {
    mxc_shape huge = SHAPE(0, 3, 22, 1, INT64_MAX), wide = SHAPE(INT64_C(1) << 62, 4, 0);
    mxc_shape fits = SHAPE(0, INT64_C(1) << 60, 4), zeros = SHAPE(0, 0, 0);
    ck_assert_int_eq(mxc_shape_size(&huge), -1);
    ck_assert_int_eq(mxc_shape_size(&wide), -1);
    ck_assert_int_eq(mxc_shape_size(&fits), 0);
    ck_assert_int_eq(mxc_shape_size(&zeros), 0);
    mxc_ndarray *out = (mxc_ndarray *)&out;
    CK_ERR(MXC_EINVAL, mxc_nd_create(&huge, MXC_FLOAT32, mxc_cpu(), 1, &out));
    ck_assert_ptr_null(out);
    CK_ERR(MXC_EINVAL, mxc_nd_zeros(&wide, MXC_FLOAT32, mxc_cpu(), &out));
    CK_OK(mxc_nd_zeros(&fits, MXC_FLOAT32, mxc_cpu(), &out));
    ck_assert_int_eq(mxc_nd_size(out), 0);
    mxc_nd_free(out);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* Bad arguments to creation, views and copies. */
START_TEST(test_misuse_create_and_views) {
    mxc_ndarray *out = (mxc_ndarray *)&out; /* set to NULL by every failing constructor */
    mxc_shape s = SHAPE(2, 3);
    mxc_shape too_many = {MXC_MAX_NDIM + 1, {1, 1, 1, 1, 1, 1, 1, 1}};
    mxc_shape negative_ndim = {-1, {0}};
    mxc_shape big = SHAPE(INT64_C(1) << 40, INT64_C(1) << 40);
    mxc_context bad_dev = {7, 0};
    int ngpu = mxc_gpu_count();
    CK_ERR(MXC_EINVAL, mxc_nd_create(&s, MXC_FLOAT32, mxc_cpu(), 0, NULL));
    CK_ERR(MXC_EINVAL, mxc_nd_create(NULL, MXC_FLOAT32, mxc_cpu(), 0, &out));
    ck_assert_ptr_null(out);
    static const int bad_dtypes[] = {-1, 13, 99};
    for (size_t i = 0; i < ARRAY_SIZE(bad_dtypes); i++) {
        CK_ERR(MXC_EINVAL, mxc_nd_create(&s, bad_dtypes[i], mxc_cpu(), 0, &out));
        CK_ERR(MXC_EINVAL, mxc_nd_full(&s, bad_dtypes[i], mxc_cpu(), 1, &out));
    }
    CK_ERR(MXC_EINVAL, mxc_nd_create(&SHAPE(2, -1), MXC_FLOAT32, mxc_cpu(), 0, &out));
    CK_ERR(MXC_EINVAL, mxc_nd_zeros(&SHAPE(-3), MXC_FLOAT32, mxc_cpu(), &out));
    CK_ERR(MXC_EINVAL, mxc_nd_create(&too_many, MXC_FLOAT32, mxc_cpu(), 1, &out));
    CK_ERR(MXC_EINVAL, mxc_nd_create(&negative_ndim, MXC_FLOAT32, mxc_cpu(), 1, &out));
    CK_ERR(MXC_EINVAL, mxc_nd_create(&big, MXC_FLOAT32, mxc_cpu(), 1, &out));
    CK_ERR(MXC_EINVAL, mxc_nd_create(&s, MXC_FLOAT32, bad_dev, 0, &out));
    if (ngpu == 0) /* a CPU-only build or a machine without GPU */
        CK_ERR(MXC_ENODEV, mxc_nd_create(&s, MXC_FLOAT32, mxc_gpu(0), 0, &out));
    CK_ERR(MXC_ENODEV, mxc_nd_create(&s, MXC_FLOAT32, mxc_gpu(ngpu), 1, &out));
    CK_ERR(MXC_ENODEV, mxc_nd_ones(&s, MXC_FLOAT32, mxc_gpu(ngpu), &out));
    CK_ERR(MXC_ENODEV, mxc_nd_create(&s, MXC_FLOAT32, mxc_gpu(-1), 0, &out));
    ck_assert_ptr_null(out);

    mxc_ndarray *a = nd_full(SHAPE(4, 3), MXC_FLOAT32, 1);
    mxc_shape got;
    mxc_context ctx;
    CK_ERR(MXC_EINVAL, mxc_nd_get_shape(a, NULL));
    CK_ERR(MXC_EINVAL, mxc_nd_get_context(a, NULL));
    CK_ERR(MXC_ESHAPE, mxc_nd_reshape(a, &SHAPE(5, 2), &out));
    CK_ERR(MXC_ESHAPE, mxc_nd_reshape(a, &SHAPE(13), &out));
    CK_ERR(MXC_EINVAL, mxc_nd_reshape(a, &SHAPE(-4, -3), &out));
    CK_ERR(MXC_EINVAL, mxc_nd_reshape(a, NULL, &out));
    CK_ERR(MXC_EINVAL, mxc_nd_reshape(a, &SHAPE(12), NULL));
    static const struct {
        int64_t begin, end;
    } bad_ranges[] = {
        {-1, 2}, {3, 2}, {0, 5}, {5, 5}, {2, INT64_MAX}, {INT64_MIN, 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad_ranges); i++)
        CK_ERR(MXC_EINVAL, mxc_nd_slice(a, bad_ranges[i].begin, bad_ranges[i].end, &out));
    CK_ERR(MXC_EINVAL, mxc_nd_slice(a, 0, 1, NULL));
    CK_ERR(MXC_EINVAL, mxc_nd_at(a, 4, &out));
    CK_ERR(MXC_EINVAL, mxc_nd_at(a, -1, &out));
    CK_ERR(MXC_EINVAL, mxc_nd_at(a, INT64_MAX, &out));
    ck_assert_ptr_null(out);
    mxc_ndarray *scalar = nd_new(mxc_shape_make(0, NULL), MXC_FLOAT32, 1); /* ndim 0 */
    CK_ERR(MXC_EINVAL, mxc_nd_slice(scalar, 0, 0, &out));
    CK_ERR(MXC_EINVAL, mxc_nd_at(scalar, 0, &out));

    float buf[13] = {0};
    CK_ERR(MXC_ESHAPE, mxc_nd_sync_copy_from_cpu(a, buf, 11 * sizeof(float)));
    CK_ERR(MXC_ESHAPE, mxc_nd_sync_copy_from_cpu(a, buf, 13 * sizeof(float)));
    CK_ERR(MXC_ESHAPE, mxc_nd_sync_copy_to_cpu(a, buf, 11 * sizeof(float)));
    CK_ERR(MXC_ESHAPE, mxc_nd_sync_copy_to_cpu(a, buf, 12 * sizeof(double)));
    CK_ERR(MXC_EINVAL, mxc_nd_sync_copy_from_cpu(a, NULL, 12 * sizeof(float)));
    CK_ERR(MXC_EINVAL, mxc_nd_sync_copy_to_cpu(a, NULL, 12 * sizeof(float)));
    CK_OK(mxc_nd_sync_copy_to_cpu(scalar, NULL, 0)); /* nothing to copy */

    mxc_ndarray *t = nd_new(SHAPE(3, 4), MXC_FLOAT32, 1), *d = nd_new(SHAPE(4, 3), MXC_FLOAT64, 1);
    CK_ERR(MXC_ESHAPE, mxc_nd_copy_to(a, t)); /* same count, other shape */
    CK_ERR(MXC_ETYPE, mxc_nd_copy_to(a, d));
    CK_ERR(MXC_ESHAPE, mxc_nd_copy_to(scalar, a));
    CK_OK(mxc_nd_get_shape(a, &got));
    CK_OK(mxc_nd_get_context(a, &ctx));
    expect_all(a, 1, "a after failed calls");
    mxc_nd_free(a);
    mxc_nd_free(scalar);
    mxc_nd_free(t);
    mxc_nd_free(d);
}
END_TEST

/* Bad operands to the arithmetic, dot, sum and random fills. */
START_TEST(test_misuse_arithmetic) {
    mxc_ndarray *a = nd_full(SHAPE(3, 4), MXC_FLOAT32, 1),
                *b = nd_full(SHAPE(4, 3), MXC_FLOAT32, 1);
    mxc_ndarray *f64 = nd_full(SHAPE(3, 4), MXC_FLOAT64, 1);
    mxc_ndarray *i32 = nd_full(SHAPE(3, 4), MXC_INT32, 1);
    mxc_ndarray *out = NULL;
    for (size_t c = 0; c < ARRAY_SIZE(ew_cases); c++) {
        const struct ew_case *ew = &ew_cases[c];
        CK_ERR(MXC_ESHAPE, ew->binary(a, b, &out));
        CK_ERR(MXC_ETYPE, ew->binary(a, f64, &out));
        CK_ERR(MXC_ENOTSUP, ew->binary(i32, i32, &out));
        CK_ERR(MXC_ENOTSUP, ew->binary(f64, f64, &out));
        CK_ERR(MXC_ENOTSUP, ew->scalar(i32, 2, &out));
        CK_ERR(MXC_EINVAL, ew->binary(a, a, NULL));
        CK_ERR(MXC_EINVAL, ew->scalar(a, 2, NULL));
    }
    CK_ERR(MXC_ESHAPE, mxc_nd_dot(a, a, &out));
    mxc_ndarray *v = nd_full(SHAPE(4), MXC_FLOAT32, 1);
    CK_ERR(MXC_ESHAPE, mxc_nd_dot(a, v, &out)); /* 1-D */
    CK_ERR(MXC_ENOTSUP, mxc_nd_dot(i32, b, &out));
    CK_ERR(MXC_ENOTSUP, mxc_nd_dot(a, i32, &out));
    CK_ERR(MXC_EINVAL, mxc_nd_dot(a, b, NULL));
    mxc_ndarray *sq = nd_full(SHAPE(3, 3), MXC_FLOAT32, 1), *sq_out = sq;
    CK_ERR(MXC_EINVAL, mxc_nd_dot(sq, sq, &sq_out)); /* out aliases an input */
    CK_ERR(MXC_ENOTSUP, mxc_nd_sum(i32, &out));
    CK_ERR(MXC_EINVAL, mxc_nd_sum(a, NULL));
    CK_ERR(MXC_EINVAL, mxc_nd_random_uniform(a, 2, 1));
    CK_ERR(MXC_EINVAL, mxc_nd_random_uniform(a, NAN, 1));
    CK_ERR(MXC_EINVAL, mxc_nd_random_normal(a, 0, -1));
    CK_ERR(MXC_EINVAL, mxc_nd_random_normal(a, 0, NAN));
    CK_ERR(MXC_ENOTSUP, mxc_nd_random_uniform(i32, 0, 1));
    CK_ERR(MXC_ENOTSUP, mxc_nd_random_normal(f64, 0, 1));
    ck_assert_ptr_null(out);
    ck_assert_ptr_eq(sq_out, sq);
    expect_all(a, 1, "a after failed calls");
    expect_all(sq, 1, "sq after failed calls");
    mxc_ndarray *all[] = {a, b, f64, i32, v, sq};
    for (size_t i = 0; i < ARRAY_SIZE(all); i++)
        mxc_nd_free(all[i]);
}
END_TEST

/* A preallocated output of the wrong shape or dtype is refused and left as it was: the
 * same handle, the same contents. */
START_TEST(test_bad_out_unchanged) {
    mxc_ndarray *a = nd_full(SHAPE(3, 3), MXC_FLOAT32, 1);
    mxc_ndarray *wrong_shape = nd_full(SHAPE(2, 2), MXC_FLOAT32, 42);
    mxc_ndarray *wrong_dtype = nd_full(SHAPE(3, 3), MXC_FLOAT64, 42);
    struct {
        mxc_ndarray *arr;
        int code;
    } outs[] = {{wrong_shape, MXC_ESHAPE}, {wrong_dtype, MXC_ETYPE}};
    for (size_t o = 0; o < ARRAY_SIZE(outs); o++) {
        mxc_ndarray *out = outs[o].arr;
        for (size_t c = 0; c < ARRAY_SIZE(ew_cases); c++) {
            CK_ERR(outs[o].code, ew_cases[c].binary(a, a, &out));
            CK_ERR(outs[o].code, ew_cases[c].scalar(a, 5, &out));
        }
        CK_ERR(outs[o].code, mxc_nd_dot(a, a, &out));
        ck_assert_ptr_eq(out, outs[o].arr);
    }
    mxc_ndarray *sum_out = wrong_shape;
    CK_ERR(MXC_ESHAPE, mxc_nd_sum(a, &sum_out));
    ck_assert_ptr_eq(sum_out, wrong_shape);
    expect_all(wrong_shape, 42, "the refused (2, 2) output");
    expect_bytes(wrong_dtype, 0x4045000000000000, "the refused float64 output");
    mxc_nd_free(a);
    mxc_nd_free(wrong_shape);
    mxc_nd_free(wrong_dtype);
}
END_TEST

/* Reading a delay-alloc array nothing has written fails with MXC_EINVAL at the wait
 * instead of returning whatever the pool block held; the failure reaches the outputs of
 * the reading operations and stays there, whatever waits: overwriting an array whole (a
 * fill, a copy, an operator's output) or freeing it is what clears it. */
START_TEST(test_read_unwritten) {
    mxc_ndarray *a = nd_new(SHAPE(8), MXC_FLOAT32, 1);
    float buf[8];
    mxc_ndarray *b = NULL, *s = NULL, *dst = nd_new(SHAPE(8), MXC_FLOAT32, 1), *view = NULL;
    CK_OK(mxc_nd_add_scalar(a, 1, &b)); /* pushes fine; fails when it runs */
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(b));
    CK_OK(mxc_nd_sum(a, &s));
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(s));
    CK_OK(mxc_nd_copy_to(a, dst));
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(dst));
    CK_OK(mxc_nd_slice(a, 2, 4, &view));
    CK_OK(mxc_nd_add_scalar(a, 1, &a)); /* in place: reads a too */
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(a));
    CK_ERR(MXC_EINVAL, mxc_nd_wait_all());
    CK_ERR(MXC_EINVAL, mxc_nd_wait_all()); /* waits report a failure, never clear it */
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(b));
    CK_OK(mxc_nd_fill(view, 1)); /* writes part of a: not an overwrite, skipped */
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(a));

    CK_OK(mxc_nd_random_uniform(a, 5, 6)); /* overwrites a whole; takes the memory */
    CK_OK(mxc_nd_sync_copy_to_cpu(a, buf, sizeof buf));
    for (int i = 0; i < 8; i++)
        ck_assert(buf[i] >= 5 && buf[i] <= 6);
    CK_OK(mxc_nd_add_scalar(a, 1, &b)); /* overwrites b, which failed */
    CK_OK(mxc_nd_wait_to_read(b));
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(dst)); /* nothing overwrote dst */
    CK_OK(mxc_nd_sync_copy_from_cpu(dst, buf, sizeof buf));
    CK_OK(mxc_nd_wait_to_read(dst));
    /* An empty array has nothing to be unwritten. */
    mxc_ndarray *empty = nd_new(SHAPE(0, 4), MXC_FLOAT32, 1), *e2 = NULL;
    CK_OK(mxc_nd_add(empty, empty, &e2));
    CK_OK(mxc_nd_sync_copy_to_cpu(e2, NULL, 0));
    mxc_ndarray *all[] = {a, b, s, dst, view, empty, e2};
    for (size_t i = 0; i < ARRAY_SIZE(all); i++)
        mxc_nd_free(all[i]);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* The same for the read that copies to the host, whose operation writes no array: its
 * failure must still reach the caller, or the buffer keeps whatever it held. */
START_TEST(test_read_unwritten_to_host) {
    mxc_ndarray *a = nd_new(SHAPE(2, 4), MXC_FLOAT32, 1), *row = NULL;
    float buf[8];
    CK_ERR(MXC_EINVAL, mxc_nd_sync_copy_to_cpu(a, buf, sizeof buf));
    CK_OK(mxc_nd_at(a, 1, &row));
    CK_ERR(MXC_EINVAL, mxc_nd_sync_copy_to_cpu(row, buf, 4 * sizeof(float)));
    mxc_nd_free(a);
    mxc_nd_free(row);
    mxc_nd_wait_all();
}
END_TEST

/* ---- Memory ------------------------------------------------------------------------ */

/* Counts log lines at error level (the library logs a leak it cannot avoid there). */
static pthread_mutex_t error_log_lock = PTHREAD_MUTEX_INITIALIZER;
static int error_logs;
static char first_error_log[256];

static void count_error_log(void *user, int level, const char *message) {
    pthread_mutex_lock(&error_log_lock);
    if (error_logs++ == 0)
        snprintf(first_error_log, sizeof first_error_log, "%s", message);
    pthread_mutex_unlock(&error_log_lock);
}

/* The number of error lines so far, and the first in `first`. */
static int error_log_count(char *first, size_t size) {
    pthread_mutex_lock(&error_log_lock);
    int n = error_logs;
    snprintf(first, size, "%s", first_error_log);
    pthread_mutex_unlock(&error_log_lock);
    return n;
}

/* The counting allocator's counters: static, because the default engine, made through
 * the allocator, is destroyed at exit, after the test function has returned. */
static struct mxct_alloc_counts counts;

/* Allocator blocks live once pooled storage is returned and everything has retired. */
static long live_after_settling(void) {
    mxc_nd_wait_all(); /* may report a failure injected earlier: not this caller's concern */
    CK_OK(mxc_storage_trim(mxc_cpu()));
    mxc__handles_trim(); /* freed handles' slabs */
    return atomic_load(&counts.live);
}

/* Inputs the swept operations use, made before any failure is injected, and the arrays
 * an operation made, freed once failures are off again. */
struct sweep_env {
    mxc_ndarray *a, *b, *sq, *made[2];
};

/* One operation under test: returns its status, including that of waiting for what it
 * wrote (a failure inside the operation surfaces there). */
typedef int (*sweep_fn)(struct sweep_env *e);

static int sw_create(struct sweep_env *e) {
    return mxc_nd_create(&SHAPE(64, 16), MXC_FLOAT32, mxc_cpu(), 0, &e->made[0]);
}
static int sw_create_delay(struct sweep_env *e) {
    return mxc_nd_create(&SHAPE(64, 16), MXC_FLOAT32, mxc_cpu(), 1, &e->made[0]);
}
static int sw_full(struct sweep_env *e) {
    int rc = mxc_nd_full(&SHAPE(64, 16), MXC_INT8, mxc_cpu(), 3, &e->made[0]);
    return rc ? rc : mxc_nd_wait_to_read(e->made[0]);
}
static int sw_views(struct sweep_env *e) {
    int rc = mxc_nd_slice(e->a, 1, 3, &e->made[0]);
    return rc ? rc : mxc_nd_reshape(e->made[0], &SHAPE(32), &e->made[1]);
}
static int sw_add(struct sweep_env *e) {
    int rc = mxc_nd_add(e->a, e->b, &e->made[0]);
    return rc ? rc : mxc_nd_wait_to_read(e->made[0]);
}
static int sw_mul_in_place(struct sweep_env *e) {
    int rc = mxc_nd_mul_scalar(e->a, 1, &e->a);
    return rc ? rc : mxc_nd_wait_to_read(e->a);
}
static int sw_dot(struct sweep_env *e) {
    int rc = mxc_nd_dot(e->sq, e->sq, &e->made[0]);
    return rc ? rc : mxc_nd_wait_to_read(e->made[0]);
}
static int sw_sum(struct sweep_env *e) {
    int rc = mxc_nd_sum(e->a, &e->made[0]);
    return rc ? rc : mxc_nd_wait_to_read(e->made[0]);
}
static int sw_copy(struct sweep_env *e) {
    int rc = mxc_nd_create(&SHAPE(4, 16), MXC_FLOAT32, mxc_cpu(), 1, &e->made[0]);
    if (rc == MXC_OK)
        rc = mxc_nd_copy_to(e->a, e->made[0]);
    return rc ? rc : mxc_nd_wait_to_read(e->made[0]);
}
static int sw_sync_copies(struct sweep_env *e) {
    float buf[64] = {0};
    int rc = mxc_nd_sync_copy_to_cpu(e->a, buf, sizeof buf);
    return rc ? rc : mxc_nd_sync_copy_from_cpu(e->b, buf, sizeof buf);
}
static int sw_random(struct sweep_env *e) {
    int rc = mxc_random_seed(3);
    if (rc == MXC_OK)
        rc = mxc_nd_random_normal(e->b, 0, 1);
    return rc ? rc : mxc_nd_wait_to_read(e->b);
}

static int sw_first_random(struct sweep_env *e) {
    int rc = mxc_nd_random_uniform(e->b, 0, 1);
    return rc ? rc : mxc_nd_wait_to_read(e->b);
}

static const struct {
    const char *name;
    sweep_fn run;
    bool random;       /* uses the random generators */
    bool cold;         /* its first use is swept: the warm-up makes no generators */
    bool handles_only; /* allocates only array handles, from a slab with room (the
                          allocator is reached when a slab fills: check_handles) */
} sweep_cases[] = {
    {"create", sw_create, false, false, false},
    {"create delay-alloc", sw_create_delay, false, false, false},
    {"full", sw_full, false, false, false},
    {"slice + reshape", sw_views, false, false, true},
    {"add", sw_add, false, false, false},
    {"mul_scalar in place", sw_mul_in_place, false, false, false},
    {"dot", sw_dot, false, false, false},
    {"sum", sw_sum, false, false, false},
    {"create + copy_to", sw_copy, false, false, false},
    {"sync copies", sw_sync_copies, false, false, false},
    {"seed + random_normal", sw_random, true, false, false},
    {"first random fill (makes the generators)", sw_first_random, true, true, false},
};

/* For n = 1, 2, ... until the operation succeeds with nothing failed, makes the n-th
 * allocation fail: with _i even, every allocation from the n-th on (persistent); with _i
 * odd, only the n-th (transient, so recovery paths that allocate run too). Each failure
 * must be a clean MXC_ENOMEM with a message, leak no allocator block and log no error
 * line (the library logs there when it has to leak). Case sweep_cases[_i / 2]. */
START_TEST(test_alloc_failure_sweep) {
    mxct_alloc_install(&counts); /* first mxc call of this process (fork mode) */
    mxc_set_log(count_error_log, NULL, MXC_LOG_ERROR);
    struct sweep_env env = {0};
    env.a = nd_full(SHAPE(4, 16), MXC_FLOAT32, 1);
    env.b = nd_full(SHAPE(4, 16), MXC_FLOAT32, 2);
    env.sq = nd_full(SHAPE(8, 8), MXC_FLOAT32, 1);
    /* One successful round first: engine pools, resources and storage bookkeeping grow
     * to what the operations need, so what stays allocated later is a leak. Only the cold
     * case's lazily made resources are left for the sweep to make. */
    const bool cold = sweep_cases[_i / 2].cold;
    for (size_t c = 0; c < ARRAY_SIZE(sweep_cases); c++) {
        if (sweep_cases[c].cold || (cold && sweep_cases[c].random))
            continue;
        CK_OK(sweep_cases[c].run(&env));
        for (int i = 0; i < 2; i++) {
            mxc_nd_free(env.made[i]);
            env.made[i] = NULL;
        }
    }
    const sweep_fn fn = sweep_cases[_i / 2].run;
    const bool transient = _i % 2;
    char name[64];
    snprintf(name, sizeof name, "%s (%s)", sweep_cases[_i / 2].name,
             transient ? "transient" : "persistent");
    long before = live_after_settling();
    long n = 1;
    for (; n < 1000; n++) {
        if (transient)
            mxct_alloc_fail_once(&counts, n - 1);
        else
            mxct_alloc_fail_after(&counts, n - 1);
        mxc_clear_error();
        int rc = fn(&env);
        long failures = atomic_load(&counts.failures);
        mxct_alloc_fail_after(&counts, -1);
        char msg[256];
        snprintf(msg, sizeof msg, "%s", mxc_last_error());
        for (int i = 0; i < 2; i++) {
            mxc_nd_free(env.made[i]);
            env.made[i] = NULL;
        }
        long live = live_after_settling();
        ck_assert_msg(rc == MXC_OK || rc == MXC_ENOMEM, "%s, allocation %ld failing: %s (%s)", name,
                      n, mxc_err_name(rc), msg);
        ck_assert_msg(rc == MXC_OK || msg[0] != '\0', "%s, allocation %ld: no message", name, n);
        ck_assert_msg(live == before, "%s, allocation %ld failing: %ld blocks leaked", name, n,
                      live - before);
        char logged[256];
        ck_assert_msg(error_log_count(logged, sizeof logged) == 0,
                      "%s, allocation %ld failing: logged '%s'", name, n, logged);
        if (rc == MXC_OK && failures == 0)
            break;
    }
    ck_assert_msg(n < 1000, "%s: still failing after 1000 allocations", name);
    ck_assert_msg(n > 1 || sweep_cases[_i / 2].handles_only,
                  "%s: allocates nothing, so nothing was tested", name);
    mxc_nd_free(env.a);
    mxc_nd_free(env.b);
    mxc_nd_free(env.sq);
    CK_OK(mxc_nd_wait_all());
    mxc_set_log(NULL, NULL, MXC_LOG_WARN);
}
END_TEST

/* Create, compute, free in a loop: allocator blocks and storage bytes come back to where
 * they started, and the pool serves the repeated sizes. */
START_TEST(test_create_free_no_leak) {
    mxct_alloc_install(&counts);
    warm_up(true);
    long before = live_after_settling();
    mxc_storage_stats s0 = cpu_stats();
    for (int it = 0; it < 200; it++) {
        mxc_ndarray *a = NULL, *b = NULL, *c = NULL, *v = NULL;
        CK_OK(mxc_nd_zeros(&SHAPE(100 + it % 7, 3), MXC_FLOAT32, mxc_cpu(), &a));
        CK_OK(mxc_nd_random_uniform(a, 0, 1));
        CK_OK(mxc_nd_slice(a, 1, 50, &v));
        CK_OK(mxc_nd_add_scalar(v, 1, &b));
        CK_OK(mxc_nd_sum(b, &c));
        mxc_nd_free(a);
        mxc_nd_free(b);
        mxc_nd_free(v);
        if (it % 2)
            CK_OK(mxc_nd_wait_to_read(c));
        mxc_nd_free(c);
    }
    CK_OK(mxc_nd_wait_all());
    mxc_storage_stats s1 = cpu_stats();
    ck_assert_uint_eq(s1.bytes_in_use, s0.bytes_in_use);
    ck_assert_uint_gt(s1.pool_hits, s0.pool_hits);
    ck_assert_int_eq(live_after_settling(), before);
}
END_TEST

/* Freeing needs no memory: with every allocation failing from some point on, freeing
 * arrays still schedules every delete (nothing is leaked, nothing logged), also when the
 * deletes pile up behind pending work. The pending work here is an operation that reads
 * every array and holds a worker until the test lets it go. */
struct hold {
    atomic_int started, release;
};

static int hold_fn(const mxc_run_ctx *rctx, void *arg) {
    struct hold *h = arg;
    atomic_store(&h->started, 1);
    while (!atomic_load(&h->release))
        mxct_sleep_us(500);
    return MXC_OK;
}

/* Makes `n` arrays (with memory, or delay-alloc), pushing nothing, and an operation
 * reading them all that holds a worker until `h->release` is set; returns once it holds. */
static void arrays_on_hold(mxc_ndarray **arrays, mxc_var **vars, int n, struct hold *h) {
    for (int i = 0; i < n; i++) {
        arrays[i] = nd_new(SHAPE(16 + i % 5), MXC_FLOAT32, i % 3 == 2);
        vars[i] = mxc__nd_var(arrays[i]);
    }
    mxc_engine *eng = NULL;
    CK_OK(mxc_engine_get_default(&eng));
    mxc_engine_op_desc d = {
        .fn = hold_fn, .arg = h, .const_vars = vars, .num_const_vars = n, .name = "hold"};
    CK_OK(mxc_engine_push(eng, &d));
    ck_assert(mxct_wait_at_least(&h->started, 1, 10000));
}

START_TEST(test_free_needs_no_memory) {
    enum { N = 300 }; /* more deletes at once than the engine's pools keep spare */
    mxct_alloc_install(&counts);
    mxc_set_log(count_error_log, NULL, MXC_LOG_ERROR);
    mxc_ndarray *arrays[N];
    mxc_var *vars[N];
    /* The same arrays and hold without failures first, freed one at a time once the hold
     * is over: what the engine keeps allocated for them (pooled variables, spare blocks)
     * is then there already, and what stays allocated after the failing round is a leak.
     * Their deletes never wait together, so the engine's pool of operations stays small. */
    struct hold warm = {0};
    arrays_on_hold(arrays, vars, N, &warm);
    atomic_store(&warm.release, 1);
    CK_OK(mxc_nd_wait_all());
    for (int i = 0; i < N; i++) {
        mxc_nd_free(arrays[i]);
        CK_OK(mxc_nd_wait_all());
    }
    long before = live_after_settling();
    mxc_storage_stats s0 = cpu_stats();

    struct hold h = {0};
    arrays_on_hold(arrays, vars, N, &h);
    mxct_alloc_fail_after(&counts, 0); /* every allocation from now on fails */
    mxc_ndarray *refused = NULL;
    CK_ERR(MXC_ENOMEM, mxc_nd_create(&SHAPE(4), MXC_FLOAT32, mxc_cpu(), 0, &refused));
    for (int i = 0; i < N; i++)
        mxc_nd_free(arrays[i]); /* N deletes wait behind the hold */
    atomic_store(&h.release, 1);
    CK_OK(mxc_nd_wait_all()); /* needs no memory either */
    mxct_alloc_fail_after(&counts, -1);

    char logged[256];
    ck_assert_msg(error_log_count(logged, sizeof logged) == 0, "logged '%s'", logged);
    mxc_storage_stats s1 = cpu_stats();
    ck_assert_uint_eq(s1.bytes_in_use, s0.bytes_in_use);
    ck_assert_uint_eq(s1.blocks_in_use, s0.blocks_in_use);
    ck_assert_int_eq(live_after_settling(), before);
    mxc_set_log(NULL, NULL, MXC_LOG_WARN);
}
END_TEST

/* ---- Suite ------------------------------------------------------------------------- */

static TCase *nd_tcase(Suite *s, const char *name, double timeout_s) {
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, mxct_timeout(timeout_s));
    suite_add_tcase(s, tc);
    return tc;
}

static Suite *ndarray_suite(void) {
    Suite *s = suite_create("ndarray");
    TCase *tc = nd_tcase(s, "async", 60);
    tcase_add_test(tc, test_push_returns_before_running);
    MXCT_ADD_ENGINE_TEST(tc, test_chain_in_place);
    MXCT_ADD_ENGINE_TEST(tc, test_views_share_variable);
    MXCT_ADD_ENGINE_TEST(tc, test_free_while_pending);
    MXCT_ADD_ENGINE_TEST(tc, test_push_from_threads);

    tc = nd_tcase(s, "values", 30);
    tcase_add_test(tc, test_elemwise_values);
    tcase_add_test(tc, test_dot_values);
    tcase_add_test(tc, test_sum_values);
    tcase_add_test(tc, test_gpu_dot_sum);
    tcase_add_test(tc, test_full_dtypes);
    tcase_add_test(tc, test_fill_a_view);
    tcase_add_test(tc, test_zeros_ones_dtypes);
    tcase_add_test(tc, test_random_uniform);
    tcase_add_test(tc, test_random_normal);
    tcase_add_test(tc, test_copy_to);
    tcase_add_test(tc, test_view_shapes);
    tcase_add_test(tc, test_properties);

    tc = nd_tcase(s, "misuse", 20);
    tcase_add_test(tc, test_misuse_bad_handles);
    tcase_add_test(tc, test_misuse_create_and_views);
    tcase_add_test(tc, test_empty_shape_sizes);
    tcase_add_test(tc, test_misuse_arithmetic);
    tcase_add_test(tc, test_bad_out_unchanged);
    tcase_add_test(tc, test_misuse_null_operand);
    tcase_add_test(tc, test_read_unwritten);
    tcase_add_test(tc, test_read_unwritten_to_host);

    tc = nd_tcase(s, "memory", 60);
    tcase_add_loop_test(tc, test_alloc_failure_sweep, 0, 2 * (int)ARRAY_SIZE(sweep_cases));
    tcase_add_test(tc, test_create_free_no_leak);
    tcase_add_test(tc, test_free_needs_no_memory);
    return s;
}

int main(void) { return mxct_run_suite(ndarray_suite()); }

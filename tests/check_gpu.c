/*
 * tests/check_gpu.c — the GPU paths of the engine, storage and arrays, run when a GPU is
 * present (a USE_CUDA=1 build on a machine with a device): operations on GPU contexts get
 * their worker's stream and keep the per-variable order with CPU operations; the GPU and
 * pinned pools recycle blocks; copies between host and device keep every byte; fills and
 * random draws on the GPU equal the CPU's for the same seed; arrays load onto a GPU; copies
 * reading an array a busy GPU kernel (_sleep) writes wait for it and see its result.
 * Without a GPU every test returns at once after checking that GPU contexts are refused
 * with MXC_ENODEV, so the suite passes (and says so) on CPU-only machines.
 */
#include "mxc/engine.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "mxc/storage.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* True when a GPU is usable; otherwise checks that GPU work is refused cleanly. */
static bool have_gpu(void) {
    if (mxc_gpu_count() > 0)
        return true;
    mxc_ndarray *a = NULL;
    CK_ERR(MXC_ENODEV, mxc_nd_create(&SHAPE(4), MXC_FLOAT32, mxc_gpu(0), 0, &a));
    ck_assert_ptr_null(a);
    return false;
}

/* ---- Engine ------------------------------------------------------------------------- */

struct stream_probe {
    void *stream;
    mxc_context ctx;
    int order; /* position in the sequence of probes */
    atomic_int *counter;
};

static int probe(const mxc_run_ctx *rctx, void *arg) {
    struct stream_probe *p = arg;
    p->stream = rctx->stream;
    p->ctx = rctx->ctx;
    p->order = atomic_fetch_add(p->counter, 1);
    return MXC_OK;
}

START_TEST(test_engine_gpu_ops_get_a_stream_and_keep_order) {
    if (!have_gpu())
        return;
    mxc_engine *eng;
    CK_OK(mxc_engine_get_default(&eng));
    mxc_var *v;
    CK_OK(mxc_engine_new_var(eng, &v));
    atomic_int counter = 0;
    /* writes alternating between a CPU and a GPU context on one variable */
    struct stream_probe probes[8];
    for (int i = 0; i < 8; i++) {
        probes[i] = (struct stream_probe){.counter = &counter, .order = -1};
        mxc_engine_op_desc d = {.fn = probe,
                                .arg = &probes[i],
                                .ctx = i % 2 ? mxc_gpu(0) : mxc_cpu(),
                                .mutable_vars = &v,
                                .num_mutable_vars = 1,
                                .name = "probe"};
        CK_OK(mxc_engine_push(eng, &d));
    }
    CK_OK(mxc_engine_wait_for_var(eng, v));
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(probes[i].order, i);
        ck_assert_int_eq(probes[i].ctx.dev_type, i % 2 ? MXC_GPU : MXC_CPU);
        if (i % 2)
            ck_assert_ptr_nonnull(probes[i].stream);
        else
            ck_assert_ptr_null(probes[i].stream);
    }
    CK_OK(mxc_engine_delete_var(eng, v, NULL, NULL));
    CK_OK(mxc_engine_wait_all(eng));
}
END_TEST

/* ---- Storage ------------------------------------------------------------------------ */

START_TEST(test_storage_gpu_and_pinned_pools) {
    if (!have_gpu())
        return;
    const mxc_context ctxs[] = {mxc_gpu(0), {MXC_CPU_PINNED, 0}};
    for (int c = 0; c < 2; c++) {
        CK_OK(mxc_storage_trim(ctxs[c]));
        CK_OK(mxc_storage_reset_stats(ctxs[c]));
        mxc_storage_block b1, b2;
        CK_OK(mxc_storage_alloc(ctxs[c], 1 << 20, &b1));
        ck_assert_ptr_nonnull(b1.ptr);
        CK_OK(mxc_storage_free(&b1));
        CK_OK(mxc_storage_alloc(ctxs[c], 1 << 20, &b2));
        mxc_storage_stats s;
        CK_OK(mxc_storage_get_stats(ctxs[c], &s));
        ck_assert_uint_eq(s.pool_hits, 1);
        ck_assert_uint_eq(s.system_allocs, 1);
        ck_assert_uint_ge(s.bytes_in_use, 1 << 20);
        CK_OK(mxc_storage_free(&b2));
        CK_OK(mxc_storage_trim(ctxs[c]));
        CK_OK(mxc_storage_get_stats(ctxs[c], &s));
        ck_assert_uint_eq(s.bytes_pooled, 0);
    }
}
END_TEST

/* ---- Arrays ------------------------------------------------------------------------- */

static float *host_values(int64_t n) {
    float *h = malloc(sizeof(float) * (size_t)n);
    ck_assert_ptr_nonnull(h);
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)i * 0.5f - 7.0f;
    return h;
}

START_TEST(test_copies_between_host_and_device) {
    if (!have_gpu())
        return;
    const int64_t n = 3000;
    float *h = host_values(n), back[3000];
    mxc_ndarray *cpu = NULL, *gpu = NULL, *gpu2 = NULL, *out = NULL, *row = NULL;
    CK_OK(mxc_nd_create(&SHAPE(30, 100), MXC_FLOAT32, mxc_cpu(), 0, &cpu));
    CK_OK(mxc_nd_sync_copy_from_cpu(cpu, h, sizeof(float) * n));
    CK_OK(mxc_nd_create(&SHAPE(30, 100), MXC_FLOAT32, mxc_gpu(0), 1, &gpu));
    CK_OK(mxc_nd_create(&SHAPE(30, 100), MXC_FLOAT32, mxc_gpu(0), 1, &gpu2));
    CK_OK(mxc_nd_create(&SHAPE(30, 100), MXC_FLOAT32, mxc_cpu(), 1, &out));
    CK_OK(mxc_nd_copy_to(cpu, gpu));  /* host to device */
    CK_OK(mxc_nd_copy_to(gpu, gpu2)); /* device to device */
    CK_OK(mxc_nd_copy_to(gpu2, out)); /* device to host */
    CK_OK(mxc_nd_sync_copy_to_cpu(out, back, sizeof back));
    ck_assert_mem_eq(back, h, sizeof back);
    /* a view of a device array (row 7) read back directly */
    CK_OK(mxc_nd_at(gpu2, 7, &row));
    float r[100];
    CK_OK(mxc_nd_sync_copy_to_cpu(row, r, sizeof r));
    ck_assert_mem_eq(r, h + 700, sizeof r);
    /* writing into a device array from the host */
    CK_OK(mxc_nd_sync_copy_from_cpu(row, h, sizeof r));
    CK_OK(mxc_nd_sync_copy_to_cpu(row, r, sizeof r));
    ck_assert_mem_eq(r, h, sizeof r);
    mxc_nd_free(row);
    mxc_nd_free(out);
    mxc_nd_free(gpu2);
    mxc_nd_free(gpu);
    mxc_nd_free(cpu);
    free(h);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

START_TEST(test_fills_on_device_equal_host) {
    if (!have_gpu())
        return;
    const int dtypes[] = {MXC_FLOAT32, MXC_FLOAT64, MXC_FLOAT16, MXC_INT8,
                          MXC_UINT8,   MXC_INT32,   MXC_INT64};
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
        mxc_ndarray *c = NULL, *g = NULL;
        CK_OK(mxc_nd_full(&SHAPE(5, 37), dtypes[k], mxc_cpu(), -3.25, &c));
        CK_OK(mxc_nd_full(&SHAPE(5, 37), dtypes[k], mxc_gpu(0), -3.25, &g));
        size_t bytes = 5 * 37 * mxc_dtype_size(dtypes[k]);
        unsigned char hc[5 * 37 * 8], hg[5 * 37 * 8];
        CK_OK(mxc_nd_sync_copy_to_cpu(c, hc, bytes));
        CK_OK(mxc_nd_sync_copy_to_cpu(g, hg, bytes));
        ck_assert_msg(memcmp(hc, hg, bytes) == 0, "fill of %s differs", mxc_dtype_name(dtypes[k]));
        mxc_nd_free(c);
        mxc_nd_free(g);
    }
}
END_TEST

/* Draws n values on `ctx` right after seeding. */
static void draw(mxc_context ctx, bool normal, int64_t n, float *host) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_random_seed(42));
    CK_OK(mxc_nd_create(&SHAPE(n), MXC_FLOAT32, ctx, 1, &a));
    if (normal)
        CK_OK(mxc_nd_random_normal(a, 1.0f, 2.0f));
    else
        CK_OK(mxc_nd_random_uniform(a, -2.0f, 3.0f));
    CK_OK(mxc_nd_sync_copy_to_cpu(a, host, sizeof(float) * (size_t)n));
    mxc_nd_free(a);
}

START_TEST(test_random_draws_equal_on_both_devices) {
    if (!have_gpu())
        return;
    enum { N = 100003 };
    static float c[N], g[N];
    draw(mxc_cpu(), false, N, c);
    draw(mxc_gpu(0), false, N, g);
    ck_assert_mem_eq(c, g, sizeof c); /* uniform: bit for bit */
    draw(mxc_cpu(), true, N, c);
    draw(mxc_gpu(0), true, N, g);
    /* normal: the device's log/sin/cos may differ in the last double bits, so the floats
     * agree to about one rounding */
    double worst = 0;
    for (int i = 0; i < N; i++)
        worst = fmax(worst, fabs((double)c[i] - g[i]) / (1e-6 + fabs((double)c[i])));
    ck_assert_msg(worst < 1e-6, "normal draws differ by %g (relative)", worst);
}
END_TEST

START_TEST(test_load_onto_device) {
    if (!have_gpu())
        return;
    const char *path = "build/check_gpu_list.params";
    float *h = host_values(24);
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_create(&SHAPE(2, 3, 4), MXC_FLOAT32, mxc_cpu(), 0, &a));
    CK_OK(mxc_nd_sync_copy_from_cpu(a, h, sizeof(float) * 24));
    const char *names[] = {"w"};
    CK_OK(mxc_nd_save(path, 1, &a, names));
    size_t count = 0;
    mxc_ndarray **arrays = NULL;
    char **got_names = NULL;
    CK_OK(mxc_nd_load(path, mxc_gpu(0), &count, &arrays, &got_names));
    ck_assert_uint_eq(count, 1);
    mxc_context ctx;
    CK_OK(mxc_nd_get_context(arrays[0], &ctx));
    ck_assert_int_eq(ctx.dev_type, MXC_GPU);
    float back[24];
    CK_OK(mxc_nd_sync_copy_to_cpu(arrays[0], back, sizeof back));
    ck_assert_mem_eq(back, h, sizeof back);
    mxc_nd_list_free(count, arrays, got_names);
    mxc_nd_free(a);
    free(h);
    remove(path);
}
END_TEST

START_TEST(test_freed_device_array_returns_to_pool) {
    if (!have_gpu())
        return;
    mxc_context gpu = mxc_gpu(0);
    CK_OK(mxc_nd_wait_all());
    CK_OK(mxc_storage_trim(gpu));
    CK_OK(mxc_storage_reset_stats(gpu));
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_full(&SHAPE(1 << 18), MXC_FLOAT32, gpu, 1.0, &a));
    mxc_nd_free(a); /* the delete runs after the fill */
    CK_OK(mxc_nd_wait_all());
    mxc_storage_stats s;
    CK_OK(mxc_storage_get_stats(gpu, &s));
    ck_assert_uint_eq(s.blocks_in_use, 0);
    ck_assert_uint_eq(s.blocks_pooled, 1);
    CK_OK(mxc_nd_full(&SHAPE(1 << 18), MXC_FLOAT32, gpu, 2.0, &a));
    CK_OK(mxc_nd_wait_to_read(a));
    CK_OK(mxc_storage_get_stats(gpu, &s));
    ck_assert_uint_eq(s.pool_hits, 1);
    mxc_nd_free(a);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* ---- Engine ordering on GPU streams ------------------------------------------------ */

/* _sleep on gpu(0) keeps the device busy for `seconds`, then copies its input to its
 * output B. A copy of B to the host right after the (asynchronous) invoke must wait for the
 * kernel and see all of its result, not B's stale contents; so must a GPU -> GPU copy
 * reading B, and a read of that copy. */
START_TEST(test_copies_wait_for_a_busy_gpu_kernel) {
    if (!have_gpu())
        return;
    ck_assert_msg(mxc_op_supports("_sleep", mxc_gpu(0), MXC_FLOAT32),
                  "_sleep has no GPU kernel: the engine's ordering on GPU streams cannot be "
                  "tested (operator/debug.c needs .forward_gpu)");
    enum { N = 1 << 20 };
    float *h = host_values(N), *back = malloc(sizeof(float) * N);
    ck_assert_ptr_nonnull(back);
    mxc_ndarray *a = NULL, *b = NULL, *c = NULL;
    CK_OK(mxc_nd_create(&SHAPE(N), MXC_FLOAT32, mxc_gpu(0), 0, &a));
    CK_OK(mxc_nd_sync_copy_from_cpu(a, h, sizeof(float) * N));
    CK_OK(mxc_nd_full(&SHAPE(N), MXC_FLOAT32, mxc_gpu(0), -1.0, &b)); /* stale: -1 */
    CK_OK(mxc_nd_full(&SHAPE(N), MXC_FLOAT32, mxc_gpu(0), -2.0, &c));
    CK_OK(mxc_nd_wait_all());
    const char *keys[] = {"seconds"}, *vals[] = {"0.2"};
    for (int round = 0; round < 2; round++) {
        uint64_t t0 = mxct_now_ns();
        CK_OK(mxc_imperative_invoke("_sleep", 1, keys, vals, 1, &a, 1, &b, 0));
        if (round == 0) { /* device to host right away */
            CK_OK(mxc_nd_sync_copy_to_cpu(b, back, sizeof(float) * N));
        } else { /* device to device right away, then to the host */
            CK_OK(mxc_nd_copy_to(b, c));
            CK_OK(mxc_nd_sync_copy_to_cpu(c, back, sizeof(float) * N));
        }
        double waited = (double)(mxct_now_ns() - t0) / 1e9;
        const char *how =
            round == 0 ? "B copied to the host" : "B copied on gpu(0), then to the host";
        /* >= 0.2 s, less 5% for a kernel that measures its time with the device's clock */
        ck_assert_msg(waited >= 0.19, "%s after _sleep(0.2) on gpu(0): returned after %.3f s", how,
                      waited);
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < N; i++)
            if (back[i] != h[i] && bad++ == 0)
                first = i;
        ck_assert_msg(bad == 0,
                      "%s after _sleep(0.2) on gpu(0): %lld of %d elements stale, the first "
                      "[%lld] = %g, expected %g",
                      how, (long long)bad, N, (long long)first, first >= 0 ? back[first] : 0.0,
                      first >= 0 ? h[first] : 0.0);
        CK_OK(mxc_nd_fill(b, -1.0));
        CK_OK(mxc_nd_wait_all());
    }
    mxc_nd_free(a);
    mxc_nd_free(b);
    mxc_nd_free(c);
    free(h);
    free(back);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, mxct_timeout(60));
    tcase_add_test(tc, test_engine_gpu_ops_get_a_stream_and_keep_order);
    tcase_add_test(tc, test_storage_gpu_and_pinned_pools);
    tcase_add_test(tc, test_copies_between_host_and_device);
    tcase_add_test(tc, test_fills_on_device_equal_host);
    tcase_add_test(tc, test_random_draws_equal_on_both_devices);
    tcase_add_test(tc, test_load_onto_device);
    tcase_add_test(tc, test_freed_device_array_returns_to_pool);
    tcase_add_test(tc, test_copies_wait_for_a_busy_gpu_kernel);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    /* CUDA does not survive fork(): a child cannot use a device its parent initialised,
     * so these tests run in one process. */
    setenv("CK_FORK", "no", 1);
    if (mxc_gpu_count() == 0)
        printf("check_gpu: GPU tests skipped (no GPU); checking only that GPU contexts are "
               "refused\n");
    return mxct_run_suite(suite());
}

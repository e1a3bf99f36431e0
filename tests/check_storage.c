/*
 * tests/check_storage.c — storage blocks and pools (storage/): alignment, size classes,
 * reuse from the pool, statistics, trim and shutdown (also after operators used the
 * resource layer's temp space and generators), a failure that stays with its operation
 * rather than spreading through the shared temp space, pooling off, concurrent alloc/free
 * from several threads, allocation-failure injection through the allocator hook with leak
 * counting, device contexts without a GPU, and misuse.
 */
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "mxc/storage.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static mxc_storage_stats cpu_stats(void) {
    mxc_storage_stats s;
    ck_assert_int_eq(mxc_storage_get_stats(mxc_cpu(), &s), MXC_OK);
    return s;
}

/* Every test starts and ends with empty pools and fresh counters (in fork mode each test
 * has its own process anyway; CK_FORK=no runs them in one). */
static void setup(void) {
    mxc_set_allocator(NULL);
    mxc_storage_set_pooling(1);
    ck_assert_int_eq(mxc_storage_shutdown(), MXC_OK);
    ck_assert_int_eq(mxc_storage_reset_stats(mxc_cpu()), MXC_OK);
    mxc_clear_error();
}

static void teardown(void) {
    mxc_storage_set_pooling(1);
    mxc_storage_shutdown();
    mxc_set_allocator(NULL);
}

/* ---- A counting allocator that fails on request ------------------------------------ */

static struct {
    atomic_long calls;      /* malloc and realloc calls */
    atomic_long allocs;     /* live-object creations: malloc, realloc(NULL, n) */
    atomic_long frees;      /* free(p) with p != NULL */
    atomic_long fail_at;    /* the call number that fails (1-based); 0: none */
    atomic_bool fail_after; /* fail every call from fail_at on, not only that one */
    atomic_long failures;
} ta;

static bool ta_should_fail(void) {
    long n = atomic_fetch_add(&ta.calls, 1) + 1;
    long at = atomic_load(&ta.fail_at);
    bool fail = at > 0 && (n == at || (atomic_load(&ta.fail_after) && n > at));
    if (fail)
        atomic_fetch_add(&ta.failures, 1);
    return fail;
}

static void *ta_malloc(void *user, size_t size) {
    (void)user;
    if (ta_should_fail())
        return NULL;
    void *p = malloc(size);
    if (p)
        atomic_fetch_add(&ta.allocs, 1);
    return p;
}

static void *ta_realloc(void *user, void *ptr, size_t size) {
    (void)user;
    if (ta_should_fail())
        return NULL;
    void *p = realloc(ptr, size);
    if (p && ptr == NULL)
        atomic_fetch_add(&ta.allocs, 1);
    return p;
}

static void ta_free(void *user, void *ptr) {
    (void)user;
    if (ptr)
        atomic_fetch_add(&ta.frees, 1);
    free(ptr);
}

static const mxc_allocator test_allocator = {ta_malloc, ta_realloc, ta_free, NULL};

/* Installs the test allocator (pools must be empty) failing call `fail_at` (0: none),
 * and every call after it too when `after`. */
static void ta_install(long fail_at, bool after) {
    ck_assert_int_eq(mxc_storage_shutdown(), MXC_OK);
    atomic_store(&ta.calls, 0);
    atomic_store(&ta.allocs, 0);
    atomic_store(&ta.frees, 0);
    atomic_store(&ta.failures, 0);
    atomic_store(&ta.fail_at, fail_at);
    atomic_store(&ta.fail_after, after);
    mxc_set_allocator(&test_allocator);
}

/* Trims everything, restores the C allocator and checks that every allocation made
 * through the test allocator was freed. */
static void ta_uninstall_and_check_leaks(void) {
    atomic_store(&ta.fail_at, 0);
    ck_assert_int_eq(mxc_storage_shutdown(), MXC_OK);
    mxc_set_allocator(NULL);
    long allocs = atomic_load(&ta.allocs), frees = atomic_load(&ta.frees);
    ck_assert_msg(allocs == frees, "leak: %ld allocations, %ld frees", allocs, frees);
}

/* ---- Basics ------------------------------------------------------------------------ */

START_TEST(test_alignment) {
    const size_t sizes[] = {1, 7, 63, 64, 65, 100, 1000, 4096, 65535, 65536, 65537, 1 << 20};
    mxc_storage_block b[ARRAY_SIZE(sizes)];
    for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
        ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), sizes[i], &b[i]), MXC_OK);
        ck_assert_ptr_nonnull(b[i].ptr);
        ck_assert_msg(((uintptr_t)b[i].ptr & 63) == 0, "size %zu: %p not 64-byte aligned", sizes[i],
                      b[i].ptr);
        ck_assert_uint_eq(b[i].size, sizes[i]);
        ck_assert_uint_eq(b[i].capacity, mxc_storage_class_size(sizes[i]));
        ck_assert_int_eq(b[i].ctx.dev_type, MXC_CPU);
        memset(b[i].ptr, 0xab, b[i].capacity); /* the whole capacity is usable */
    }
    for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
        ck_assert_int_eq(mxc_storage_free(&b[i]), MXC_OK);
        ck_assert_ptr_null(b[i].ptr); /* freeing empties the block */
        ck_assert_uint_eq(b[i].size, 0);
        ck_assert_int_eq(b[i].ctx.dev_type, MXC_CPU);
    }
}
END_TEST

START_TEST(test_size_classes) {
    const struct {
        size_t size, cls;
    } table[] = {
        {0, 0},
        {1, 64},
        {64, 64},
        {65, 128},
        {1000, 1024},
        {1024, 1024},
        {1025, 2048},
        {65535, 65536},
        {65536, 65536},
        {65537, 69632},
        {69632, 69632},
        {100000, 102400},
        {1 << 20, 1 << 20},
        {(1 << 20) + 1, (1 << 20) + 4096},
        {SIZE_MAX, 0},
        {SIZE_MAX - 4094, 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(table); i++)
        ck_assert_msg(mxc_storage_class_size(table[i].size) == table[i].cls,
                      "class of %zu: got %zu, want %zu", table[i].size,
                      mxc_storage_class_size(table[i].size), table[i].cls);
    /* the documented waste bound, and a class is its own class */
    for (size_t s = 1; s < 300000; s += (s < 5000 ? 1 : 97)) {
        size_t c = mxc_storage_class_size(s);
        ck_assert(c >= s && c % 64 == 0);
        ck_assert_uint_eq(mxc_storage_class_size(c), c);
        if (s <= 65536)
            ck_assert_msg(c - s < (s > 64 ? s : 64), "size %zu class %zu", s, c);
        else
            ck_assert_msg(c - s < 4096 && c % 4096 == 0, "size %zu class %zu", s, c);
    }
}
END_TEST

START_TEST(test_pool_reuse) {
    mxc_storage_block a, b, c;
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 1000, &a), MXC_OK);
    void *first = a.ptr;
    ck_assert_int_eq(mxc_storage_free(&a), MXC_OK);

    /* 900 bytes share 1000's class (1024): the same block comes back */
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 900, &b), MXC_OK);
    ck_assert_ptr_eq(b.ptr, first);
    ck_assert_uint_eq(b.capacity, 1024);
    mxc_storage_stats s = cpu_stats();
    ck_assert_uint_eq(s.alloc_count, 2);
    ck_assert_uint_eq(s.pool_hits, 1);
    ck_assert_uint_eq(s.system_allocs, 1);

    /* another class misses */
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 1025, &c), MXC_OK);
    ck_assert_ptr_ne(c.ptr, first);
    s = cpu_stats();
    ck_assert_uint_eq(s.pool_hits, 1);
    ck_assert_uint_eq(s.system_allocs, 2);

    /* the most recently freed block of a class comes back first */
    mxc_storage_block d;
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 1024, &d), MXC_OK);
    void *pd = d.ptr, *pb = b.ptr;
    ck_assert_int_eq(mxc_storage_free(&b), MXC_OK);
    ck_assert_int_eq(mxc_storage_free(&d), MXC_OK);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 1000, &a), MXC_OK);
    ck_assert_ptr_eq(a.ptr, pd);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 1000, &b), MXC_OK);
    ck_assert_ptr_eq(b.ptr, pb);
    ck_assert_uint_eq(cpu_stats().pool_hits, 3);

    /* a large class is reused the same way */
    mxc_storage_block big;
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 3000000, &big), MXC_OK);
    void *pbig = big.ptr;
    ck_assert_int_eq(mxc_storage_free(&big), MXC_OK);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 3000000 - 100, &big), MXC_OK);
    ck_assert_ptr_eq(big.ptr, pbig);

    mxc_storage_free(&a);
    mxc_storage_free(&b);
    mxc_storage_free(&c);
    mxc_storage_free(&big);
}
END_TEST

START_TEST(test_stats_and_peak) {
    mxc_storage_block a, b;
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 1000, &a), MXC_OK);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 100000, &b), MXC_OK);
    mxc_storage_stats s = cpu_stats();
    ck_assert_uint_eq(s.bytes_in_use, 1024 + 102400);
    ck_assert_uint_eq(s.bytes_requested, 1000 + 100000);
    ck_assert_uint_eq(s.blocks_in_use, 2);
    ck_assert_uint_eq(s.bytes_pooled, 0);
    ck_assert_uint_eq(s.peak_bytes_in_use, 1024 + 102400);

    ck_assert_int_eq(mxc_storage_free(&b), MXC_OK);
    s = cpu_stats();
    ck_assert_uint_eq(s.bytes_in_use, 1024);
    ck_assert_uint_eq(s.bytes_requested, 1000);
    ck_assert_uint_eq(s.bytes_pooled, 102400);
    ck_assert_uint_eq(s.blocks_pooled, 1);
    ck_assert_uint_eq(s.peak_bytes_in_use, 1024 + 102400); /* the peak stays */
    ck_assert_uint_eq(s.free_count, 1);

    /* a reset starts a new measurement from what is in use now */
    ck_assert_int_eq(mxc_storage_reset_stats(mxc_cpu()), MXC_OK);
    s = cpu_stats();
    ck_assert_uint_eq(s.peak_bytes_in_use, 1024);
    ck_assert_uint_eq(s.alloc_count, 0);
    ck_assert_uint_eq(s.free_count, 0);
    ck_assert_uint_eq(s.pool_hits, 0);
    ck_assert_uint_eq(s.bytes_in_use, 1024);
    ck_assert_uint_eq(s.bytes_pooled, 102400);

    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 64, &b), MXC_OK);
    s = cpu_stats();
    ck_assert_uint_eq(s.peak_bytes_in_use, 1024 + 64);
    ck_assert_uint_eq(s.alloc_count, 1);
    ck_assert_int_eq(mxc_storage_free(&a), MXC_OK);
    ck_assert_int_eq(mxc_storage_free(&b), MXC_OK);
    s = cpu_stats();
    ck_assert_uint_eq(s.bytes_in_use, 0);
    ck_assert_uint_eq(s.bytes_requested, 0);
    ck_assert_uint_eq(s.blocks_in_use, 0);
    ck_assert_uint_eq(s.bytes_pooled, 102400 + 1024 + 64);
    ck_assert_uint_eq(s.blocks_pooled, 3);

    /* a zeroed context is the CPU */
    mxc_storage_stats z;
    ck_assert_int_eq(mxc_storage_get_stats((mxc_context){0, 0}, &z), MXC_OK);
    ck_assert_uint_eq(z.bytes_pooled, s.bytes_pooled);
}
END_TEST

START_TEST(test_trim_and_shutdown) {
    ta_install(0, false);
    mxc_storage_block b[10];
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), (size_t)(i + 1) * 3000, &b[i]), MXC_OK);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(mxc_storage_free(&b[i]), MXC_OK);
    mxc_storage_stats s = cpu_stats();
    ck_assert_uint_eq(s.blocks_pooled, 10);
    ck_assert_uint_gt(s.bytes_pooled, 0);
    long allocs = atomic_load(&ta.allocs), frees = atomic_load(&ta.frees);
    ck_assert_int_gt(allocs, frees); /* memory is held */

    ck_assert_int_eq(mxc_storage_trim(mxc_cpu()), MXC_OK);
    s = cpu_stats();
    ck_assert_uint_eq(s.bytes_pooled, 0);
    ck_assert_uint_eq(s.blocks_pooled, 0);
    ck_assert_uint_eq(s.system_frees, 10);
    /* trim gave back the blocks and the pool's bookkeeping: nothing is held */
    allocs = atomic_load(&ta.allocs);
    frees = atomic_load(&ta.frees);
    ck_assert_int_eq(allocs, frees);

    /* the pool works after a trim */
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 100, &b[0]), MXC_OK);
    ck_assert_int_eq(mxc_storage_free(&b[0]), MXC_OK);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 100, &b[0]), MXC_OK);
    ck_assert_uint_eq(cpu_stats().pool_hits, 1);

    /* shutdown reports blocks still in use, and leaves them valid */
    ck_assert_int_eq(mxc_storage_shutdown(), MXC_EMISUSE);
    ck_assert_str_eq(mxc_last_error(),
                     "mxc_storage_shutdown: 1 block (128 bytes) still in use on cpu(0)");
    memset(b[0].ptr, 1, 100);
    ck_assert_int_eq(mxc_storage_free(&b[0]), MXC_OK);
    ck_assert_int_eq(mxc_storage_shutdown(), MXC_OK);
    ta_uninstall_and_check_leaks();
}
END_TEST

/* A 3x3 convolution of `x` (2, 3, 8, 8) with 4 filters of weights 0.5 and bias 0 through
 * mxc_imperative_invoke: its im2col buffer is the resource layer's temp space. */
static mxc_ndarray *convolve(mxc_ndarray *x) {
    mxc_ndarray *w = NULL, *b = NULL, *y = NULL;
    CK_OK(mxc_nd_full(&SHAPE(4, 3, 3, 3), MXC_FLOAT32, mxc_cpu(), 0.5, &w));
    CK_OK(mxc_nd_zeros(&SHAPE(4), MXC_FLOAT32, mxc_cpu(), &b));
    const char *keys[] = {"kernel", "num_filter"}, *vals[] = {"(3,3)", "4"};
    mxc_ndarray *in[] = {x, w, b};
    CK_OK(mxc_imperative_invoke("Convolution", 2, keys, vals, 3, in, 1, &y, 0));
    mxc_nd_free(w);
    mxc_nd_free(b);
    return y;
}

/* Asserts that `y` is the convolution of ones: every output is 27 * 0.5. */
static void expect_convolved_ones(mxc_ndarray *y) {
    float got[2 * 4 * 6 * 6];
    CK_OK(mxc_nd_sync_copy_to_cpu(y, got, sizeof got));
    for (size_t i = 0; i < ARRAY_SIZE(got); i++)
        ck_assert_float_eq(got[i], 13.5f);
}

static mxc_ndarray *convolve_ones(void) {
    mxc_ndarray *x = NULL;
    CK_OK(mxc_nd_full(&SHAPE(2, 3, 8, 8), MXC_FLOAT32, mxc_cpu(), 1, &x));
    mxc_ndarray *y = convolve(x);
    expect_convolved_ones(y);
    mxc_nd_free(x);
    return y;
}

/* Temp space and random generators belong to the library, not to a user object: once
 * every array is freed (and its delete has run) the shutdown finds nothing in use. */
START_TEST(test_shutdown_after_operators) {
    mxc_ndarray *y = convolve_ones(), *r = NULL;
    CK_OK(mxc_nd_create(&SHAPE(1000), MXC_FLOAT32, mxc_cpu(), 0, &r));
    CK_OK(mxc_nd_random_uniform(r, -1, 1));
    CK_OK(mxc_nd_wait_to_read(r));
    mxc_nd_free(r);
    CK_OK(mxc_nd_wait_all());
    /* a live array is the documented error, and the message counts only its block:
     * (2, 4, 6, 6) float32 is 1152 bytes, class 2048 */
    ck_assert_int_eq(mxc_storage_shutdown(), MXC_EMISUSE);
    ck_assert_str_eq(mxc_last_error(),
                     "mxc_storage_shutdown: 1 block (2048 bytes) still in use on cpu(0)");
    expect_convolved_ones(y); /* the array is still valid */
    mxc_nd_free(y);
    CK_OK(mxc_nd_wait_all());
    CK_OK(mxc_storage_shutdown());
    mxc_storage_stats s = cpu_stats();
    ck_assert_uint_eq(s.blocks_in_use, 0);
    ck_assert_uint_eq(s.bytes_in_use, 0);
    ck_assert_uint_eq(s.bytes_pooled, 0);
    /* the temp space grows again for the next operator */
    y = convolve_ones();
    mxc_nd_free(y);
    CK_OK(mxc_nd_wait_all());
    CK_OK(mxc_storage_shutdown());
}
END_TEST

/* A failed operation that used the temp space does not fail the next, unrelated user of
 * the same temp space: a resource's variable only orders its users. */
START_TEST(test_failure_stays_with_its_operation) {
    mxc_ndarray *unwritten = NULL, *ones = NULL;
    CK_OK(mxc_nd_create(&SHAPE(2, 3, 8, 8), MXC_FLOAT32, mxc_cpu(), 1, &unwritten));
    mxc_ndarray *bad = convolve(unwritten); /* fails when it runs: its input was never written */
    CK_OK(mxc_nd_full(&SHAPE(2, 3, 8, 8), MXC_FLOAT32, mxc_cpu(), 1, &ones));
    mxc_ndarray *good = convolve(ones);
    expect_convolved_ones(good);
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(bad));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "read before anything wrote it"));
    mxc_nd_free(bad);
    mxc_nd_free(good);
    mxc_nd_free(unwritten);
    mxc_nd_free(ones);
    mxc_nd_wait_all(); /* reports the failure once more */
    CK_OK(mxc_storage_shutdown());
}
END_TEST

START_TEST(test_leak_loop) {
    ta_install(0, false);
    for (int round = 0; round < 50; round++) {
        mxc_storage_block b[16];
        for (int i = 0; i < 16; i++)
            ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), (size_t)(37 * i * round + 1), &b[i]),
                             MXC_OK);
        for (int i = 15; i >= 0; i--)
            ck_assert_int_eq(mxc_storage_free(&b[i]), MXC_OK);
        if (round % 10 == 9)
            ck_assert_int_eq(mxc_storage_trim(mxc_cpu()), MXC_OK);
    }
    mxc_storage_stats s = cpu_stats();
    ck_assert_uint_eq(s.alloc_count, 50 * 16);
    ck_assert_uint_eq(s.alloc_count, s.pool_hits + s.system_allocs);
    ck_assert_uint_gt(s.pool_hits, 0);
    ta_uninstall_and_check_leaks();
}
END_TEST

/* ---- Pooling off ------------------------------------------------------------------- */

START_TEST(test_pooling_off) {
    mxc_storage_block a, b;
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 5000, &a), MXC_OK);
    ck_assert_int_eq(mxc_storage_free(&a), MXC_OK);
    ck_assert_uint_eq(cpu_stats().blocks_pooled, 1);

    /* turning pooling off trims, and blocks get their exact size */
    mxc_storage_set_pooling(0);
    ck_assert_int_eq(mxc_storage_pooling(), 0);
    ck_assert_uint_eq(cpu_stats().blocks_pooled, 0);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 5000, &a), MXC_OK);
    ck_assert_uint_eq(a.capacity, 5000);
    ck_assert(((uintptr_t)a.ptr & 63) == 0);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 128, &b), MXC_OK);
    ck_assert_uint_eq(b.capacity, 128);
    ck_assert_int_eq(mxc_storage_free(&a), MXC_OK);
    mxc_storage_stats s = cpu_stats();
    ck_assert_uint_eq(s.bytes_pooled, 0);
    ck_assert_uint_eq(s.pool_hits, 0);

    /* back on: a block of exact size 128 is a class and gets pooled; 5000 is not */
    mxc_storage_set_pooling(1);
    ck_assert_int_eq(mxc_storage_pooling(), 1);
    ck_assert_int_eq(mxc_storage_free(&b), MXC_OK); /* capacity 128: pooled */
    ck_assert_uint_eq(cpu_stats().blocks_pooled, 1);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 5000, &a), MXC_OK);
    ck_assert_uint_eq(a.capacity, 8192);
    mxc_storage_set_pooling(0);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 5000, &b), MXC_OK);
    mxc_storage_set_pooling(1);
    ck_assert_int_eq(mxc_storage_free(&b), MXC_OK); /* capacity 5000: released */
    ck_assert_uint_eq(cpu_stats().blocks_pooled, 0);
    ck_assert_int_eq(mxc_storage_free(&a), MXC_OK); /* capacity 8192: pooled */
    ck_assert_uint_eq(cpu_stats().blocks_pooled, 1);
    ck_assert_uint_eq(cpu_stats().blocks_in_use, 0);
}
END_TEST

START_TEST(test_pooling_env) {
    /* the environment is read at the first storage call of the process: only meaningful
     * when each test has its own process (Check's default fork mode) */
    const char *fork_mode = getenv("CK_FORK");
    if (fork_mode != NULL && strcmp(fork_mode, "no") == 0)
        return;
    setenv("MXC_STORAGE_POOL", "0", 1);
    ck_assert_int_eq(mxc_storage_pooling(), 0);
    mxc_storage_block a;
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 1000, &a), MXC_OK);
    ck_assert_uint_eq(a.capacity, 1000);
    ck_assert_int_eq(mxc_storage_free(&a), MXC_OK);
    ck_assert_uint_eq(cpu_stats().bytes_pooled, 0);
    unsetenv("MXC_STORAGE_POOL");
}
END_TEST

/* ---- Threads ----------------------------------------------------------------------- */

#define THREADS 4
#define ITERS   20000
#define SLOTS   64

/* Shared slots: a thread puts its new block in a random slot and frees whatever block
 * was there, so blocks are often freed by another thread than the one that made them.
 * Each block carries its owner tag at both ends; two live owners of one block would
 * overwrite each other's tags. */
static _Atomic(mxc_storage_block *) slots[SLOTS];

struct tagged {
    mxc_storage_block block;
    uint64_t tag;
};

static void tag_write(struct tagged *t) {
    memcpy(t->block.ptr, &t->tag, 8);
    memcpy((char *)t->block.ptr + t->block.size - 8, &t->tag, 8);
}

static bool tag_ok(const struct tagged *t) {
    uint64_t a, b;
    memcpy(&a, t->block.ptr, 8);
    memcpy(&b, (const char *)t->block.ptr + t->block.size - 8, 8);
    return a == t->tag && b == t->tag;
}

static atomic_int thread_errors;

static void *worker(void *arg) {
    uint64_t id = (uint64_t)(uintptr_t)arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (id + 1);
    for (uint64_t it = 0; it < ITERS; it++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        static const size_t sizes[] = {16, 100, 1000, 4096, 5000, 70000};
        struct tagged *t = malloc(sizeof *t);
        if (t == NULL ||
            mxc_storage_alloc(mxc_cpu(), sizes[rng % ARRAY_SIZE(sizes)], &t->block) != MXC_OK) {
            atomic_fetch_add(&thread_errors, 1);
            free(t);
            continue;
        }
        t->tag = id << 32 | it;
        tag_write(t);
        struct tagged *old =
            (struct tagged *)atomic_exchange(&slots[(rng >> 8) % SLOTS], (mxc_storage_block *)t);
        if (old != NULL) {
            if (!tag_ok(old) || mxc_storage_free(&old->block) != MXC_OK)
                atomic_fetch_add(&thread_errors, 1);
            free(old);
        }
    }
    return NULL;
}

START_TEST(test_threads) {
    pthread_t th[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker, (void *)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(atomic_load(&thread_errors), 0);
    for (int i = 0; i < SLOTS; i++) {
        struct tagged *t = (struct tagged *)atomic_exchange(&slots[i], NULL);
        if (t != NULL) {
            ck_assert(tag_ok(t));
            ck_assert_int_eq(mxc_storage_free(&t->block), MXC_OK);
            free(t);
        }
    }
    mxc_storage_stats s = cpu_stats();
    ck_assert_uint_eq(s.alloc_count, THREADS * ITERS);
    ck_assert_uint_eq(s.free_count, THREADS * ITERS);
    ck_assert_uint_eq(s.alloc_count, s.pool_hits + s.system_allocs);
    ck_assert_uint_eq(s.blocks_in_use, 0);
    ck_assert_uint_eq(s.bytes_in_use, 0);
    ck_assert_uint_eq(s.bytes_requested, 0);
    ck_assert_uint_gt(s.pool_hits, THREADS * ITERS / 2);
    ck_assert_int_eq(mxc_storage_shutdown(), MXC_OK);
    s = cpu_stats();
    ck_assert_uint_eq(s.bytes_pooled, 0);
    ck_assert_uint_eq(s.system_frees, s.system_allocs);
}
END_TEST

/* ---- Allocation failures ----------------------------------------------------------- */

START_TEST(test_enomem_message) {
    ta_install(1, false);
    mxc_storage_block b = {(void *)1, 5, 5, mxc_cpu()};
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 1000, &b), MXC_ENOMEM);
    ck_assert_int_eq(mxc_last_error_code(), MXC_ENOMEM);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "1000 bytes"));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "cpu(0)"));
    ck_assert_ptr_null(b.ptr); /* the out block is emptied on failure */
    ck_assert_uint_eq(b.size, 0);
    mxc_storage_stats s = cpu_stats();
    ck_assert_uint_eq(s.alloc_count, 0);
    ck_assert_uint_eq(s.bytes_in_use, 0);
    /* the next call succeeds */
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 1000, &b), MXC_OK);
    ck_assert_int_eq(mxc_storage_free(&b), MXC_OK);

    /* a size no class can hold fails before asking anyone */
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), SIZE_MAX - 10, &b), MXC_ENOMEM);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "18446744073709551605 bytes"));
    ck_assert_ptr_null(b.ptr);
    ta_uninstall_and_check_leaks();
}
END_TEST

START_TEST(test_enomem_retries_after_trim) {
    ta_install(0, false);
    mxc_storage_block b[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 10000, &b[i]), MXC_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(mxc_storage_free(&b[i]), MXC_OK);
    ck_assert_uint_eq(cpu_stats().blocks_pooled, 4);

    /* the next system allocation fails once: the pool is trimmed and the retry works */
    atomic_store(&ta.fail_at, atomic_load(&ta.calls) + 1);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 20000, &b[0]), MXC_OK);
    long failures = atomic_load(&ta.failures);
    ck_assert_int_eq(failures, 1);
    ck_assert_uint_eq(cpu_stats().blocks_pooled, 0);

    /* with nothing pooled there is no retry: the failure is reported */
    atomic_store(&ta.fail_at, atomic_load(&ta.calls) + 1);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 30000, &b[1]), MXC_ENOMEM);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "30000 bytes"));
    ck_assert_int_eq(mxc_storage_free(&b[0]), MXC_OK);
    ta_uninstall_and_check_leaks();
}
END_TEST

/* A workload touching every allocation site: new blocks, pool hits, new size classes
 * (bucket array growth), deep buckets (pointer stack growth), trims. Returns how many
 * calls failed with MXC_ENOMEM; any other failure fails the test. */
static int failure_workload(void) {
    static const size_t sizes[] = {1000, 5000, 1000, 70000, 64, 1000, 3000000, 100, 5000};
    mxc_storage_block live[ARRAY_SIZE(sizes) * 3];
    int n = 0, enomem = 0;
    memset(live, 0, sizeof live);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
            int rc = mxc_storage_alloc(mxc_cpu(), sizes[i] + (size_t)round * 17, &live[n]);
            if (rc == MXC_ENOMEM) {
                char want[64];
                snprintf(want, sizeof want, "%zu bytes", sizes[i] + (size_t)round * 17);
                ck_assert_msg(strstr(mxc_last_error(), want) != NULL, "message: %s",
                              mxc_last_error());
                ck_assert_ptr_null(live[n].ptr);
                enomem++;
            } else {
                ck_assert_int_eq(rc, MXC_OK);
                memset(live[n].ptr, 0x5a, live[n].size);
            }
            n++;
        }
        /* free every other block (empty ones too: a no-op) */
        for (int i = round % 2; i < n; i += 2)
            ck_assert_int_eq(mxc_storage_free(&live[i]), MXC_OK);
        if (round == 1)
            ck_assert_int_eq(mxc_storage_trim(mxc_cpu()), MXC_OK);
    }
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(mxc_storage_free(&live[i]), MXC_OK);
    mxc_storage_stats s = cpu_stats();
    ck_assert_uint_eq(s.blocks_in_use, 0);
    ck_assert_uint_eq(s.bytes_in_use, 0);
    return enomem;
}

START_TEST(test_failure_injection_sweep) {
    /* count the allocator calls of a clean run */
    ta_install(0, false);
    ck_assert_int_eq(failure_workload(), 0);
    long clean_calls = atomic_load(&ta.calls);
    ta_uninstall_and_check_leaks();
    ck_assert_int_gt(clean_calls, 10);

    /* fail the Nth call only, then every call from the Nth on */
    for (int after = 0; after <= 1; after++) {
        int runs_with_enomem = 0;
        for (long n = 1; n <= clean_calls + 1; n++) {
            ta_install(n, after);
            int enomem = failure_workload();
            runs_with_enomem += enomem > 0;
            /* the library must have survived every failure it was handed */
            long failures = atomic_load(&ta.failures);
            ck_assert_msg(failures >= (n <= clean_calls ? 1 : 0), "call %ld never failed", n);
            ta_uninstall_and_check_leaks();
        }
        ck_assert_int_gt(runs_with_enomem, 0);
    }
}
END_TEST

/* ---- Devices ----------------------------------------------------------------------- */

START_TEST(test_gpu_contexts) {
    mxc_storage_block b;
    const mxc_context pinned = {MXC_CPU_PINNED, 0};
    /* ids no machine has, in any build */
    ck_assert_int_eq(mxc_storage_alloc(mxc_gpu(1000), 64, &b), MXC_ENODEV);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "gpu(1000)"));
    ck_assert_ptr_null(b.ptr);
    ck_assert_int_eq(mxc_storage_alloc(mxc_gpu(-1), 64, &b), MXC_ENODEV);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "gpu(-1)"));
#ifndef MXC_USE_CUDA
    ck_assert_int_eq(mxc_storage_alloc(mxc_gpu(0), 64, &b), MXC_ENODEV);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "gpu(0)"));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "without CUDA"));
    ck_assert_ptr_null(b.ptr);
    ck_assert_int_eq(b.ctx.dev_type, MXC_GPU);
    ck_assert_int_eq(mxc_storage_alloc(pinned, 64, &b), MXC_ENODEV);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "cpu_pinned(0)"));
    /* size 0 checks the context too */
    ck_assert_int_eq(mxc_storage_alloc(mxc_gpu(0), 0, &b), MXC_ENODEV);
    mxc_storage_stats s;
    ck_assert_int_eq(mxc_storage_get_stats(mxc_gpu(0), &s), MXC_ENODEV);
    ck_assert_int_eq(mxc_storage_trim(mxc_gpu(0)), MXC_ENODEV);
    ck_assert_int_eq(mxc_storage_reset_stats(pinned), MXC_ENODEV);
#else
    /* a CUDA build: exercise the GPU and pinned pools when a GPU is there */
    const mxc_context ctxs[] = {mxc_gpu(0), pinned};
    for (size_t c = 0; c < ARRAY_SIZE(ctxs); c++) {
        int rc = mxc_storage_alloc(ctxs[c], 1000, &b);
        if (rc == MXC_ENODEV)
            return; /* no GPU on this machine */
        ck_assert_int_eq(rc, MXC_OK);
        ck_assert(((uintptr_t)b.ptr & 63) == 0);
        ck_assert_uint_eq(b.capacity, 1024);
        void *first = b.ptr;
        ck_assert_int_eq(mxc_storage_free(&b), MXC_OK);
        ck_assert_int_eq(mxc_storage_alloc(ctxs[c], 1024, &b), MXC_OK);
        ck_assert_ptr_eq(b.ptr, first);
        mxc_storage_stats s;
        ck_assert_int_eq(mxc_storage_get_stats(ctxs[c], &s), MXC_OK);
        ck_assert_uint_eq(s.pool_hits, 1);
        ck_assert_uint_eq(s.bytes_in_use, 1024);
        ck_assert_int_eq(mxc_storage_free(&b), MXC_OK);
        ck_assert_int_eq(mxc_storage_trim(ctxs[c]), MXC_OK);
        ck_assert_int_eq(mxc_storage_get_stats(ctxs[c], &s), MXC_OK);
        ck_assert_uint_eq(s.bytes_pooled, 0);
    }
#endif
}
END_TEST

/* ---- Misuse ------------------------------------------------------------------------ */

START_TEST(test_misuse) {
    mxc_storage_block b;
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 64, NULL), MXC_EINVAL);
    ck_assert_str_eq(mxc_last_error(), "mxc_storage_alloc: out is NULL");
    ck_assert_int_eq(mxc_storage_alloc((mxc_context){9, 0}, 64, &b), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "unknown device type 9"));
    ck_assert_ptr_null(b.ptr);
    ck_assert_int_eq(mxc_storage_alloc((mxc_context){MXC_CPU, -2}, 64, &b), MXC_ENODEV);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "cpu(-2)"));
    ck_assert_int_eq(mxc_storage_get_stats(mxc_cpu(), NULL), MXC_EINVAL);
    mxc_storage_stats s;
    ck_assert_int_eq(mxc_storage_get_stats((mxc_context){9, 0}, &s), MXC_EINVAL);
    ck_assert_int_eq(mxc_storage_trim((mxc_context){9, 0}), MXC_EINVAL);
    ck_assert_int_eq(mxc_storage_reset_stats((mxc_context){9, 0}), MXC_EINVAL);

    /* size 0: an empty block, nothing allocated, nothing counted */
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 0, &b), MXC_OK);
    ck_assert_ptr_null(b.ptr);
    ck_assert_uint_eq(b.size, 0);
    ck_assert_uint_eq(b.capacity, 0);
    ck_assert_int_eq(b.ctx.dev_type, MXC_CPU);
    ck_assert_uint_eq(cpu_stats().alloc_count, 0);
    ck_assert_int_eq(mxc_storage_free(&b), MXC_OK);

    /* free of NULL, of an empty block, and twice through the same variable */
    ck_assert_int_eq(mxc_storage_free(NULL), MXC_OK);
    mxc_storage_block empty = {0};
    ck_assert_int_eq(mxc_storage_free(&empty), MXC_OK);
    ck_assert_int_eq(mxc_storage_alloc(mxc_cpu(), 1000, &b), MXC_OK);
    mxc_storage_block copy = b;
    ck_assert_int_eq(mxc_storage_free(&b), MXC_OK);
    ck_assert_int_eq(mxc_storage_free(&b), MXC_OK);

    /* twice through a copy: caught while the context has less in use */
    ck_assert_int_eq(mxc_storage_free(&copy), MXC_EMISUSE);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "freed twice"));
    ck_assert_ptr_nonnull(copy.ptr); /* left alone */
    mxc_storage_stats after = cpu_stats();
    ck_assert_uint_eq(after.blocks_pooled, 1);
    ck_assert_uint_eq(after.free_count, 1);

    /* blocks that cannot have come from mxc_storage_alloc */
    mxc_storage_block bad = {(void *)(uintptr_t)0x1001, 1, 64, mxc_cpu()};
    ck_assert_int_eq(mxc_storage_free(&bad), MXC_EMISUSE);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "aligned"));
    bad = (mxc_storage_block){(void *)(uintptr_t)0x1000, 100, 64, mxc_cpu()};
    ck_assert_int_eq(mxc_storage_free(&bad), MXC_EMISUSE);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "capacity 64"));
    bad = (mxc_storage_block){(void *)(uintptr_t)0x1000, 1, 64, {9, 0}};
    ck_assert_int_eq(mxc_storage_free(&bad), MXC_EMISUSE);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "ctx(9, 0)"));
    ck_assert_uint_eq(cpu_stats().free_count, 1);
}
END_TEST

static Suite *storage_suite(void) {
    Suite *s = suite_create("storage");
    TCase *tc = tcase_create("cpu");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_alignment);
    tcase_add_test(tc, test_size_classes);
    tcase_add_test(tc, test_pool_reuse);
    tcase_add_test(tc, test_stats_and_peak);
    tcase_add_test(tc, test_trim_and_shutdown);
    tcase_add_test(tc, test_shutdown_after_operators);
    tcase_add_test(tc, test_failure_stays_with_its_operation);
    tcase_add_test(tc, test_leak_loop);
    tcase_add_test(tc, test_pooling_off);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_enomem_message);
    tcase_add_test(tc, test_enomem_retries_after_trim);
    tcase_add_test(tc, test_failure_injection_sweep);
    tcase_add_test(tc, test_gpu_contexts);
    tcase_add_test(tc, test_misuse);
    suite_add_tcase(s, tc);

    /* no fixture: the environment must be read by this test's first storage call */
    TCase *env = tcase_create("env");
    tcase_add_test(env, test_pooling_env);
    suite_add_tcase(s, env);
    return s;
}

int main(void) { return mxct_run_suite(storage_suite()); }

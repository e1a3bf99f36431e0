/*
 * tests/check_nd_io.c — mxc_nd_save / mxc_nd_load as a user calls them: files written by
 * MXNet 1.9.1 (tests/data/nd) load and save back byte for byte, bad files and paths fail
 * with the documented codes and the path in the message, and allocation failures at
 * every step of a load or a save return MXC_ENOMEM with nothing leaked.
 *
 * Run from the repository root, or point MXC_TEST_DATA at tests/data.
 */
#include "mxc/ndarray.h"
#include "mxc/storage.h"
#include "common/handle.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *fixture(const char *name) {
    const char *dir = getenv("MXC_TEST_DATA");
    char *path = malloc(4096);
    ck_assert_ptr_nonnull(path);
    snprintf(path, 4096, "%s/nd/%s.params", dir ? dir : "tests/data", name);
    return path;
}

static void expect_code(int rc, int expected, const char *what) {
    ck_assert_msg(rc == expected, "%s = %s, expected %s (%s)", what, mxc_err_name(rc),
                  mxc_err_name(expected), mxc_last_error());
}

static void load_ok(const char *path, size_t *count, mxc_ndarray ***arrays, char ***names) {
    int rc = mxc_nd_load(path, mxc_cpu(), count, arrays, names);
    expect_code(rc, MXC_OK, path);
}

/* Saves what was loaded and compares the new file with `path` byte for byte. */
static void expect_round_trip_identical(const char *name) {
    char *path = fixture(name);
    size_t n;
    mxc_ndarray **arrays;
    char **names;
    load_ok(path, &n, &arrays, &names);
    char *out = mxct_temp_file("mxc-nd-io-");
    expect_code(mxc_nd_save(out, n, arrays, (const char *const *)names), MXC_OK, "save");
    size_t want_len, got_len;
    char *want = mxct_read_file(path, &want_len), *got = mxct_read_file(out, &got_len);
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(want_len == got_len, "%s: MXNet wrote %zu bytes, mxc %zu", name, want_len,
                  got_len);
    for (size_t i = 0; i < want_len; i++)
        ck_assert_msg(want[i] == got[i], "%s: first difference at byte %zu", name, i);
    free(want);
    free(got);
    unlink(out);
    free(out);
    mxc_nd_list_free(n, arrays, names);
    free(path);
}

START_TEST(test_mxnet_files_round_trip) {
    expect_round_trip_identical("worked_example");
    expect_round_trip_identical("unnamed");
    expect_round_trip_identical("zero_size");
}
END_TEST

START_TEST(test_worked_example_values) {
    char *path = fixture("worked_example");
    size_t n;
    mxc_ndarray **arrays;
    char **names;
    load_ok(path, &n, &arrays, &names);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(names[0], "arg:w");
    mxc_shape s;
    ck_assert_int_eq(mxc_nd_get_shape(arrays[0], &s), MXC_OK);
    ck_assert_int_eq(s.ndim, 2);
    ck_assert_int_eq(s.dims[0], 2);
    ck_assert_int_eq(s.dims[1], 3);
    ck_assert_int_eq(mxc_nd_dtype(arrays[0]), MXC_FLOAT32);
    mxc_nd_list_free(n, arrays, names);
    free(path);
}
END_TEST

/* Every dtype MXNet wrote survives load → save → load with the same bytes. */
START_TEST(test_dtypes_survive_a_round_trip) {
    char *path = fixture("named_dtypes");
    size_t n, m;
    mxc_ndarray **a, **b;
    char **an, **bn;
    load_ok(path, &n, &a, &an);
    ck_assert_uint_gt(n, 5);
    char *out = mxct_temp_file("mxc-nd-io-");
    expect_code(mxc_nd_save(out, n, a, (const char *const *)an), MXC_OK, "save");
    load_ok(out, &m, &b, &bn);
    ck_assert_uint_eq(n, m);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(an[i], bn[i]);
        ck_assert_int_eq(mxc_nd_dtype(a[i]), mxc_nd_dtype(b[i]));
        size_t bytes = (size_t)mxc_nd_size(a[i]) * mxc_dtype_size(mxc_nd_dtype(a[i]));
        char *x = malloc(bytes + 1), *y = malloc(bytes + 1);
        expect_code(mxc_nd_sync_copy_to_cpu(a[i], x, bytes), MXC_OK, "copy a");
        expect_code(mxc_nd_sync_copy_to_cpu(b[i], y, bytes), MXC_OK, "copy b");
        ck_assert_msg(memcmp(x, y, bytes) == 0, "array %s changed", an[i]);
        free(x);
        free(y);
    }
    mxc_nd_list_free(n, a, an);
    mxc_nd_list_free(m, b, bn);
    unlink(out);
    free(out);
    free(path);
}
END_TEST

START_TEST(test_bad_files_and_paths) {
    size_t n = 99;
    mxc_ndarray **arrays = (mxc_ndarray **)&n;
    char **names = (char **)&n;
    int rc = mxc_nd_load("/nonexistent/dir/x.params", mxc_cpu(), &n, &arrays, &names);
    expect_code(rc, MXC_EIO, "load of a missing file");
    ck_assert_msg(strstr(mxc_last_error(), "/nonexistent/dir/x.params"), "no path in: %s",
                  mxc_last_error());
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(arrays);
    ck_assert_ptr_null(names);

    /* a truncated MXNet file: the format error names the file */
    size_t len;
    char *path = fixture("worked_example");
    char *bytes = mxct_read_file(path, &len);
    ck_assert_ptr_nonnull(bytes);
    char *cut = mxct_temp_file("mxc-nd-cut-");
    FILE *f = fopen(cut, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, len - 5, f), len - 5);
    fclose(f);
    rc = mxc_nd_load(cut, mxc_cpu(), &n, &arrays, &names);
    expect_code(rc, MXC_EFORMAT, "load of a truncated file");
    ck_assert_msg(strstr(mxc_last_error(), cut), "no path in: %s", mxc_last_error());

    expect_code(mxc_nd_load(NULL, mxc_cpu(), &n, &arrays, &names), MXC_EINVAL, "NULL path");
    expect_code(mxc_nd_load(cut, mxc_cpu(), NULL, &arrays, &names), MXC_EINVAL, "NULL count");

    /* saving into a missing folder fails and leaves nothing behind */
    int64_t d = 3;
    mxc_shape s = mxc_shape_make(1, &d);
    mxc_ndarray *a = NULL;
    expect_code(mxc_nd_zeros(&s, MXC_FLOAT32, mxc_cpu(), &a), MXC_OK, "zeros");
    rc = mxc_nd_save("/nonexistent/dir/y.params", 1, &a, NULL);
    expect_code(rc, MXC_EIO, "save into a missing folder");
    const char *null_name[] = {NULL};
    expect_code(mxc_nd_save(cut, 1, &a, null_name), MXC_EINVAL, "save with a NULL name");
    expect_code(mxc_nd_save(NULL, 1, &a, NULL), MXC_EINVAL, "save to a NULL path");

    /* an interrupted save keeps the old file: a failing save does not touch it */
    size_t before_len;
    char *before = mxct_read_file(cut, &before_len);
    mxc_ndarray *bad[] = {a, NULL};
    expect_code(mxc_nd_save(cut, 2, bad, NULL), MXC_EMISUSE, "save of a NULL array");
    size_t after_len;
    char *after = mxct_read_file(cut, &after_len);
    ck_assert_uint_eq(before_len, after_len);
    ck_assert_int_eq(memcmp(before, after, before_len), 0);
    free(before);
    free(after);
    mxc_nd_free(a);
    unlink(cut);
    free(cut);
    free(bytes);
    free(path);
}
END_TEST

/* A path that is not a regular file is MXC_EIO naming it, before anything is read or
 * allocated for it: a directory (whose size used to be read as 2^63 - 1 bytes), a FIFO
 * (which must not block the load) and /dev/zero (which never ends). */
START_TEST(test_load_refuses_what_is_not_a_regular_file) {
    char *dir = mxct_temp_dir("mxc-nd-dir-");
    char *fifo = mxct_temp_fifo("mxc-nd-fifo-");
    const char *paths[] = {dir, fifo, "/dev/zero"};
    const char *kinds[] = {"a directory", "a FIFO", "a character device"};
    for (int i = 0; i < 3; i++) {
        size_t n = 99;
        mxc_ndarray **arrays = NULL;
        char **names = NULL;
        mxc_clear_error();
        expect_code(mxc_nd_load(paths[i], mxc_cpu(), &n, &arrays, &names), MXC_EIO, paths[i]);
        char want[512];
        snprintf(want, sizeof want, "mxc_nd_load: %s is %s, not a regular file", paths[i],
                 kinds[i]);
        ck_assert_str_eq(mxc_last_error(), want);
        ck_assert_uint_eq(n, 0);
        ck_assert_ptr_null(arrays);
    }
    rmdir(dir);
    unlink(fifo);
    free(dir);
    free(fifo);
}
END_TEST

/* Allocations seen by the size-tracking allocator below. */
static _Atomic size_t largest_alloc;

static void *track_malloc(void *user, size_t size) {
    (void)user;
    if (size > largest_alloc)
        largest_alloc = size;
    return malloc(size);
}

static void *track_realloc(void *user, void *p, size_t size) {
    (void)user;
    if (size > largest_alloc)
        largest_alloc = size;
    return realloc(p, size);
}

static void track_free(void *user, void *p) {
    (void)user;
    free(p);
}

/* Headers claiming far more than the file holds (2^40 arrays; one array of 2^40
 * elements) fail with MXC_EFORMAT, and no allocation is larger than the file. */
START_TEST(test_load_checks_sizes_against_the_file) {
    /* list magic, reserved, count; then a v2 record: magic, storage type 0, ndim 2, dims,
     * context (cpu, 0), type flag float32, and 8 data bytes */
    const uint64_t many[] = {0x112, 0, (uint64_t)1 << 40};
    uint8_t big[128];
    size_t len = 0;
#define PUT(v)                             \
    do {                                   \
        __typeof__(v) v_ = (v);            \
        memcpy(big + len, &v_, sizeof v_); \
        len += sizeof v_;                  \
    } while (0)
    PUT((uint64_t)0x112);
    PUT((uint64_t)0);
    PUT((uint64_t)1);
    PUT((uint32_t)0xF993FAC9u);
    PUT((int32_t)0);
    PUT((uint32_t)2);
    PUT((int64_t)1 << 20);
    PUT((int64_t)1 << 20);
    PUT((int32_t)1);
    PUT((int32_t)0);
    PUT((int32_t)0);
    PUT((uint64_t)0);
#undef PUT
    const struct {
        const void *bytes;
        size_t len;
    } files[] = {{many, sizeof many}, {big, len}};
    mxc_storage_shutdown();
    mxc_allocator tracker = {track_malloc, track_realloc, track_free, NULL};
    for (int i = 0; i < 2; i++) {
        char *path = mxct_temp_file("mxc-nd-size-");
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(files[i].bytes, 1, files[i].len, f), files[i].len);
        fclose(f);
        size_t n;
        mxc_ndarray **arrays;
        char **names;
        largest_alloc = 0;
        mxc_set_allocator(&tracker);
        int rc = mxc_nd_load(path, mxc_cpu(), &n, &arrays, &names);
        mxc_set_allocator(NULL);
        expect_code(rc, MXC_EFORMAT, path);
        ck_assert_msg(strstr(mxc_last_error(), path), "no path in: %s", mxc_last_error());
        ck_assert_msg(largest_alloc <= 4096, "an allocation of %zu bytes for a %zu-byte file",
                      (size_t)largest_alloc, files[i].len);
        unlink(path);
        free(path);
    }
}
END_TEST

static struct mxct_alloc_counts counts; /* outlives the test: the engine ends at exit */

/* Allocator blocks live once everything has retired and pooled memory and freed
 * handles' slabs are given back. */
static long live_after_settling(void) {
    mxc_nd_wait_all();
    mxc_storage_trim(mxc_cpu());
    mxc__handles_trim();
    return atomic_load(&counts.live);
}

/* Sweeps the Nth allocation of `run` until it succeeds: each failure is MXC_ENOMEM and
 * the live allocations come back to where they were. The allocator is installed once,
 * before a warm-up run: replacing it gives freed handles' slabs back (base.h), which a
 * run's first steps would then have to allocate again. */
static void sweep_allocation_failures(int (*run)(void *), void *arg, const char *what) {
    mxct_alloc_install(&counts);
    ck_assert_int_eq(run(arg), MXC_OK); /* warms the default engine, pools and resources */
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
    long before = live_after_settling();
    for (long n = 0;; n++) {
        mxct_alloc_fail_after(&counts, n);
        int rc = run(arg);
        mxct_alloc_fail_after(&counts, -1);
        long live = live_after_settling();
        ck_assert_msg(live <= before, "%s failing after %ld allocations leaked %ld blocks", what, n,
                      live - before);
        if (rc == MXC_OK) {
            ck_assert_msg(n > 2,
                          "%s succeeded after only %ld allocations: the sweep tested "
                          "nothing",
                          what, n);
            break;
        }
        ck_assert_msg(rc == MXC_ENOMEM, "%s failing after %ld allocations returned %s (%s)", what,
                      n, mxc_err_name(rc), mxc_last_error());
        ck_assert_msg(n < 10000, "%s never succeeded", what);
    }
    mxct_alloc_uninstall();
}

static int load_and_free(void *path) {
    size_t n;
    mxc_ndarray **arrays;
    char **names;
    int rc = mxc_nd_load(path, mxc_cpu(), &n, &arrays, &names);
    if (rc == MXC_OK)
        mxc_nd_list_free(n, arrays, names);
    return rc;
}

START_TEST(test_load_allocation_failures) {
    char *path = fixture("named_dtypes");
    sweep_allocation_failures(load_and_free, path, "load");
    free(path);
}
END_TEST

struct save_job {
    const char *path;
    size_t n;
    mxc_ndarray **arrays;
    char **names;
};

static int save(void *arg) {
    struct save_job *j = arg;
    return mxc_nd_save(j->path, j->n, j->arrays, (const char *const *)j->names);
}

START_TEST(test_save_allocation_failures) {
    char *path = fixture("named_dtypes");
    struct save_job j = {mxct_temp_file("mxc-nd-save-"), 0, NULL, NULL};
    load_ok(path, &j.n, &j.arrays, &j.names);
    sweep_allocation_failures(save, &j, "save");
    mxc_nd_list_free(j.n, j.arrays, j.names);
    unlink(j.path);
    free((char *)j.path);
    free(path);
}
END_TEST

static Suite *nd_io_suite(void) {
    Suite *s = suite_create("nd_io");
    TCase *tc = tcase_create("files");
    tcase_set_timeout(tc, mxct_timeout(60));
    tcase_add_test(tc, test_mxnet_files_round_trip);
    tcase_add_test(tc, test_worked_example_values);
    tcase_add_test(tc, test_dtypes_survive_a_round_trip);
    tcase_add_test(tc, test_bad_files_and_paths);
    tcase_add_test(tc, test_load_refuses_what_is_not_a_regular_file);
    tcase_add_test(tc, test_load_checks_sizes_against_the_file);
    tcase_add_test(tc, test_load_allocation_failures);
    tcase_add_test(tc, test_save_allocation_failures);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(nd_io_suite()); }

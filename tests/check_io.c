/*
 * tests/check_io.c — the data iterators (io/): IDX files written here (raw and gzip) and
 * the committed fixtures in tests/data/io with known pixel values: batch shapes, values
 * and the 1/255 scale, labels; shuffling (a permutation, the same for a seed, new each
 * epoch); sharding (every sample exactly once across parts); round_batch wrap-around and
 * pad, and dropping the last batch without it; reset mid-epoch; every kind of malformed
 * IDX file (the message names the path); CSV good and bad rows (path:line); the array
 * iterator; the prefetch reuse rule (slow engine reads pending on a batch never see it
 * overwritten); a reader error surfacing at next; free mid-epoch; the real Fashion-MNIST
 * files when installed (skipped with a message otherwise).
 *
 * Run from the repository root, or point MXC_TEST_DATA at tests/data.
 */
#include "mxc/io.h"
#include "mxc/ndarray.h"
#include "mxc/storage.h"
#include "common/common.h"
#include "common/handle.h"
#include "io/io_impl.h"
#include "ndarray/ndarray_impl.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

/* ---- Helpers ----------------------------------------------------------------------- */

/* Writes `n` bytes to `path`, through gzip when `gz`. */
static void write_bytes(const char *path, const void *bytes, size_t n, bool gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(gzwrite(f, bytes, (unsigned)n), (int)n);
        ck_assert_int_eq(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
        ck_assert_int_eq(fclose(f), 0);
    }
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* An IDX file: magic, ndim dims, then `body_len` bytes of body; a new temp path. */
static char *write_idx(uint32_t magic, int ndim, const uint32_t *dims, const uint8_t *body,
                       size_t body_len, bool gz) {
    size_t n = 4 + 4 * (size_t)ndim + body_len;
    uint8_t *buf = malloc(n);
    ck_assert_ptr_nonnull(buf);
    put_be32(buf, magic);
    for (int i = 0; i < ndim; i++)
        put_be32(buf + 4 + 4 * i, dims[i]);
    if (body_len)
        memcpy(buf + 4 + 4 * ndim, body, body_len);
    char *path = mxct_temp_file("mxc-idx-");
    write_bytes(path, buf, n, gz);
    free(buf);
    return path;
}

/* The pixel values of the generated data sets: sample i, pixel j. */
static uint8_t pixel(int64_t i, int64_t j) { return (uint8_t)((i * 7 + j * 3) % 256); }
static uint8_t label_of(int64_t i) { return (uint8_t)(i % 256); }

/* A generated IDX pair of `count` rows x cols images (label i % 256). */
struct idx_pair {
    char *images, *labels;
};

static struct idx_pair make_idx(uint32_t count, uint32_t rows, uint32_t cols, bool gz) {
    size_t px = (size_t)rows * cols;
    uint8_t *img = malloc(count * px + 1), *lab = malloc(count + 1);
    ck_assert(img && lab);
    for (uint32_t i = 0; i < count; i++) {
        lab[i] = label_of(i);
        for (size_t j = 0; j < px; j++)
            img[i * px + j] = pixel(i, (int64_t)j);
    }
    uint32_t idims[3] = {count, rows, cols}, ldims[1] = {count};
    struct idx_pair p = {write_idx(0x803, 3, idims, img, count * px, gz),
                         write_idx(0x801, 1, ldims, lab, count, gz)};
    free(img);
    free(lab);
    return p;
}

static void drop_idx(struct idx_pair p) {
    unlink(p.images);
    unlink(p.labels);
    free(p.images);
    free(p.labels);
}

static mxc_data_iter_params params_of(int64_t batch) {
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = batch;
    return p;
}

/* The array's float32 contents in a new buffer (waits for its writes). */
static float *nd_read(const mxc_ndarray *a) {
    int64_t n = mxc_nd_size(a);
    ck_assert_int_gt(n, 0);
    float *v = malloc((size_t)n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    CK_OK(mxc_nd_sync_copy_to_cpu(a, v, (size_t)n * sizeof *v));
    return v;
}

static void expect_shape(mxc_shape got, mxc_shape want, const char *what) {
    ck_assert_msg(got.ndim == want.ndim, "%s: ndim %d, expected %d", what, got.ndim, want.ndim);
    for (int i = 0; i < want.ndim; i++)
        ck_assert_msg(got.dims[i] == want.dims[i], "%s: dims[%d] is %lld, expected %lld", what, i,
                      (long long)got.dims[i], (long long)want.dims[i]);
}

/* Asserts that the current batch of an IDX iterator over make_idx data holds samples
 * `ids` (batch entries), pixels scaled by 1/255, labels as floats. */
static void expect_idx_batch(mxc_data_iter *it, const int64_t *ids, int64_t batch, int64_t px) {
    float *d = nd_read(mxc_data_iter_data(it));
    float *l = nd_read(mxc_data_iter_label(it));
    for (int64_t b = 0; b < batch; b++) {
        ck_assert_msg(l[b] == (float)label_of(ids[b]), "row %lld: label %g, expected %d",
                      (long long)b, (double)l[b], label_of(ids[b]));
        for (int64_t j = 0; j < px; j++) {
            float want = (float)pixel(ids[b], j) * (1.0f / 255.0f);
            ck_assert_msg(d[b * px + j] == want, "row %lld pixel %lld: %.9g, expected %.9g",
                          (long long)b, (long long)j, (double)d[b * px + j], (double)want);
        }
    }
    free(d);
    free(l);
}

/* Runs one epoch and writes the sample id of every row (labels of make_idx data with
 * fewer than 256 samples are the ids) and the pads; returns the number of batches. */
static int64_t epoch_ids(mxc_data_iter *it, int64_t batch, int64_t *ids, int64_t *pads) {
    int64_t nb = 0;
    int rc;
    while ((rc = mxc_data_iter_next(it)) == 1) {
        float *l = nd_read(mxc_data_iter_label(it));
        for (int64_t b = 0; b < batch; b++)
            ids[nb * batch + b] = (int64_t)l[b];
        if (pads)
            pads[nb] = mxc_data_iter_pad(it);
        free(l);
        nb++;
    }
    ck_assert_msg(rc == 0, "next: %s: %s", mxc_err_name(rc), mxc_last_error());
    return nb;
}

static const char *data_dir(void) {
    const char *dir = getenv("MXC_TEST_DATA");
    return dir && *dir ? dir : "tests/data";
}

/* ---- IDX: values, shapes, last batch ------------------------------------------------ */

static void check_idx_basic(bool gz) {
    struct idx_pair f = make_idx(7, 2, 3, gz);
    mxc_data_iter_params p = params_of(3);
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it));
    ck_assert_int_eq(mxc_data_iter_num_samples(it), 7);
    ck_assert_int_eq(mxc_data_iter_num_batches(it), 3);
    mxc_shape s;
    CK_OK(mxc_data_iter_provide_data(it, &s));
    expect_shape(s, SHAPE(3, 6), "provide_data");
    CK_OK(mxc_data_iter_provide_label(it, &s));
    expect_shape(s, SHAPE(3), "provide_label");
    ck_assert_ptr_null(mxc_data_iter_data(it));

    static const int64_t want[3][3] = {{0, 1, 2}, {3, 4, 5}, {6, 0, 1}};
    for (int b = 0; b < 3; b++) {
        ck_assert_int_eq(mxc_data_iter_next(it), 1);
        CK_OK(mxc_nd_get_shape(mxc_data_iter_data(it), &s));
        expect_shape(s, SHAPE(3, 6), "batch data");
        CK_OK(mxc_nd_get_shape(mxc_data_iter_label(it), &s));
        expect_shape(s, SHAPE(3), "batch label");
        ck_assert_int_eq(mxc_nd_dtype(mxc_data_iter_data(it)), MXC_FLOAT32);
        ck_assert_int_eq(mxc_data_iter_pad(it), b == 2 ? 2 : 0);
        expect_idx_batch(it, want[b], 3, 6);
    }
    ck_assert_int_eq(mxc_data_iter_next(it), 0);
    ck_assert_ptr_null(mxc_data_iter_data(it));
    ck_assert_int_eq(mxc_data_iter_next(it), 0); /* stays at the end */

    /* A new epoch starts from the beginning (no carry-over of the wrapped samples). */
    CK_OK(mxc_data_iter_reset(it));
    ck_assert_int_eq(mxc_data_iter_next(it), 1);
    expect_idx_batch(it, want[0], 3, 6);
    mxc_data_iter_free(it);
    drop_idx(f);
}

START_TEST(idx_raw_flat) { check_idx_basic(false); }
END_TEST

START_TEST(idx_gzip_flat) { check_idx_basic(true); }
END_TEST

START_TEST(idx_4d_drop_last) {
    struct idx_pair f = make_idx(7, 2, 3, true);
    mxc_data_iter_params p = params_of(3);
    p.round_batch = 0;
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_idx(f.images, f.labels, 0, &p, &it));
    ck_assert_int_eq(mxc_data_iter_num_batches(it), 2);
    mxc_shape s;
    CK_OK(mxc_data_iter_provide_data(it, &s));
    expect_shape(s, SHAPE(3, 1, 2, 3), "provide_data");
    static const int64_t want[2][3] = {{0, 1, 2}, {3, 4, 5}};
    for (int b = 0; b < 2; b++) {
        ck_assert_int_eq(mxc_data_iter_next(it), 1);
        CK_OK(mxc_nd_get_shape(mxc_data_iter_data(it), &s));
        expect_shape(s, SHAPE(3, 1, 2, 3), "batch data");
        ck_assert_int_eq(mxc_data_iter_pad(it), 0);
        expect_idx_batch(it, want[b], 3, 6);
    }
    ck_assert_int_eq(mxc_data_iter_next(it), 0);
    mxc_data_iter_free(it);

    /* Without round_batch a part smaller than a batch gives nothing: refused. */
    p.batch_size = 8;
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_idx(f.images, f.labels, 0, &p, &it));
    ck_assert_ptr_null(it);
    drop_idx(f);
}
END_TEST

/* A part smaller than the batch wraps around several times. */
START_TEST(idx_round_batch_tiny) {
    struct idx_pair f = make_idx(3, 1, 2, false);
    mxc_data_iter_params p = params_of(8);
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it));
    ck_assert_int_eq(mxc_data_iter_num_batches(it), 1);
    ck_assert_int_eq(mxc_data_iter_next(it), 1);
    ck_assert_int_eq(mxc_data_iter_pad(it), 5);
    static const int64_t want[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    expect_idx_batch(it, want, 8, 2);
    ck_assert_int_eq(mxc_data_iter_next(it), 0);
    mxc_data_iter_free(it);
    drop_idx(f);
}
END_TEST

/* The committed fixtures: 5 images of 2 x 3 whose pixel k of image i is 50 * i + k
 * (0 .. 205), labels 3, 1, 4, 1, 5; the .gz twins hold the same bytes. */
START_TEST(idx_committed_fixtures) {
    static const char *const sets[2][2] = {
        {"tiny-images-idx3-ubyte", "tiny-labels-idx1-ubyte"},
        {"tiny-images-idx3-ubyte.gz", "tiny-labels-idx1-ubyte.gz"}};
    static const float labels[5] = {3, 1, 4, 1, 5};
    for (int g = 0; g < 2; g++) {
        char img[4096], lab[4096];
        snprintf(img, sizeof img, "%s/io/%s", data_dir(), sets[g][0]);
        snprintf(lab, sizeof lab, "%s/io/%s", data_dir(), sets[g][1]);
        mxc_data_iter_params p = params_of(5);
        mxc_data_iter *it = NULL;
        CK_OK(mxc_data_iter_create_idx(img, lab, 0, &p, &it));
        ck_assert_int_eq(mxc_data_iter_next(it), 1);
        float *d = nd_read(mxc_data_iter_data(it)), *l = nd_read(mxc_data_iter_label(it));
        for (int i = 0; i < 5; i++) {
            ck_assert_float_eq(l[i], labels[i]);
            for (int k = 0; k < 6; k++)
                ck_assert_float_eq(d[i * 6 + k], (float)(50 * i + k) * (1.0f / 255.0f));
        }
        free(d);
        free(l);
        mxc_data_iter_free(it);
    }
}
END_TEST

/* ---- Shuffle, sharding, reset ------------------------------------------------------- */

static void expect_permutation(const int64_t *ids, int64_t n) {
    bool *seen = calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(ids[i] >= 0 && ids[i] < n, "id %lld out of range", (long long)ids[i]);
        ck_assert_msg(!seen[ids[i]], "sample %lld seen twice", (long long)ids[i]);
        seen[ids[i]] = true;
    }
    free(seen);
}

START_TEST(idx_shuffle) {
    enum { N = 60, B = 6 };
    struct idx_pair f = make_idx(N, 2, 2, true);
    mxc_data_iter_params p = params_of(B);
    p.shuffle = 1;
    p.seed = 7;
    mxc_data_iter *a = NULL, *b = NULL, *c = NULL;
    CK_OK(mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &a));
    CK_OK(mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &b));
    p.seed = 8;
    CK_OK(mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &c));
    int64_t e0[N], e1[N], b0[N], b1[N], c0[N];
    ck_assert_int_eq(epoch_ids(a, B, e0, NULL), N / B);
    CK_OK(mxc_data_iter_reset(a));
    ck_assert_int_eq(epoch_ids(a, B, e1, NULL), N / B);
    ck_assert_int_eq(epoch_ids(b, B, b0, NULL), N / B);
    CK_OK(mxc_data_iter_reset(b));
    ck_assert_int_eq(epoch_ids(b, B, b1, NULL), N / B);
    ck_assert_int_eq(epoch_ids(c, B, c0, NULL), N / B);
    expect_permutation(e0, N);
    expect_permutation(e1, N);
    expect_permutation(c0, N);
    bool identity = true;
    for (int i = 0; i < N; i++)
        identity = identity && e0[i] == i;
    ck_assert_msg(!identity, "shuffle gave the file order");
    ck_assert_msg(memcmp(e0, b0, sizeof e0) == 0, "same seed, different epoch 0");
    ck_assert_msg(memcmp(e1, b1, sizeof e1) == 0, "same seed, different epoch 1");
    ck_assert_msg(memcmp(e0, e1, sizeof e0) != 0, "epochs 0 and 1 in the same order");
    ck_assert_msg(memcmp(e0, c0, sizeof e0) != 0, "seeds 7 and 8 in the same order");

    /* Pixels follow their labels through the shuffle. */
    CK_OK(mxc_data_iter_reset(c));
    ck_assert_int_eq(mxc_data_iter_next(c), 1);
    float *l = nd_read(mxc_data_iter_label(c));
    int64_t ids[B];
    for (int i = 0; i < B; i++)
        ids[i] = (int64_t)l[i];
    free(l);
    expect_idx_batch(c, ids, B, 4);

    /* An epoch cut short by reset does not disturb the sequence. */
    CK_OK(mxc_data_iter_reset(b)); /* b: epoch 2 */
    ck_assert_int_eq(mxc_data_iter_next(b), 1);
    CK_OK(mxc_data_iter_reset(b)); /* epoch 3 */
    CK_OK(mxc_data_iter_reset(a)); /* a: epoch 2 */
    CK_OK(mxc_data_iter_reset(a)); /* epoch 3 */
    ck_assert_int_eq(epoch_ids(a, B, e0, NULL), N / B);
    ck_assert_int_eq(epoch_ids(b, B, b0, NULL), N / B);
    ck_assert_msg(memcmp(e0, b0, sizeof e0) == 0, "same seed, different epoch 3");
    mxc_data_iter_free(a);
    mxc_data_iter_free(b);
    mxc_data_iter_free(c);
    drop_idx(f);
}
END_TEST

START_TEST(idx_sharding) {
    enum { N = 53, P = 4, B = 5 };
    struct idx_pair f = make_idx(N, 1, 3, false);
    int seen[N] = {0};
    int64_t total = 0;
    static const int64_t sizes[P] = {13, 13, 13, 14}; /* floor(N*k/P) boundaries */
    for (int k = 0; k < P; k++) {
        mxc_data_iter_params p = params_of(B);
        p.num_parts = P;
        p.part_index = k;
        p.shuffle = 1;
        p.seed = 3;
        mxc_data_iter *it = NULL;
        CK_OK(mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it));
        int64_t m = mxc_data_iter_num_samples(it);
        ck_assert_int_eq(m, sizes[k]);
        total += m;
        int64_t ids[64], pads[16];
        int64_t nb = epoch_ids(it, B, ids, pads);
        ck_assert_int_eq(nb, (m + B - 1) / B);
        for (int64_t b = 0; b < nb; b++)
            for (int64_t r = 0; r < B - pads[b]; r++) {
                int64_t id = ids[b * B + r];
                ck_assert_msg(id >= total - m && id < total, "part %d got sample %lld", k,
                              (long long)id);
                seen[id]++;
            }
        ck_assert_int_eq(pads[nb - 1], nb * B - m);
        mxc_data_iter_free(it);
    }
    ck_assert_int_eq(total, N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(seen[i] == 1, "sample %d seen %d times", i, seen[i]);
    drop_idx(f);
}
END_TEST

START_TEST(idx_reset_mid_epoch) {
    struct idx_pair f = make_idx(40, 1, 2, false);
    mxc_data_iter_params p = params_of(4);
    p.prefetch = 3;
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it));
    for (int round = 0; round < 20; round++) {
        int steps = round % 5;
        for (int s = 0; s < steps; s++)
            ck_assert_int_eq(mxc_data_iter_next(it), 1);
        if (round % 3 == 0)
            mxct_sleep_us(2000); /* let the prefetch thread fill the queue */
        CK_OK(mxc_data_iter_reset(it));
        ck_assert_int_eq(mxc_data_iter_next(it), 1);
        static const int64_t first[4] = {0, 1, 2, 3};
        expect_idx_batch(it, first, 4, 2);
        CK_OK(mxc_data_iter_reset(it));
    }
    int64_t ids[40];
    ck_assert_int_eq(epoch_ids(it, 4, ids, NULL), 10);
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(ids[i], i);
    mxc_data_iter_free(it);
    drop_idx(f);
}
END_TEST

/* ---- IDX: malformed files ----------------------------------------------------------- */

/* Asserts that creating an iterator over (images, labels) fails with `code` and a
 * message naming `path`. */
static void expect_bad(int code, const char *images, const char *labels, const char *path) {
    mxc_data_iter_params p = params_of(2);
    mxc_data_iter *it = (mxc_data_iter *)&p; /* must be reset to NULL */
    CK_ERR(code, mxc_data_iter_create_idx(images, labels, 1, &p, &it));
    ck_assert_ptr_null(it);
    ck_assert_msg(strstr(mxc_last_error(), path) != NULL, "message '%s' does not name %s",
                  mxc_last_error(), path);
}

START_TEST(idx_malformed) {
    for (int g = 0; g < 2; g++) {
        bool gz = g == 1;
        struct idx_pair good = make_idx(4, 2, 2, gz);
        uint8_t body[64] = {0};
        uint32_t d4[3] = {4, 2, 2}, l4[1] = {4}, l5[1] = {5};

        /* Unreadable paths. */
        expect_bad(MXC_EIO, "/nonexistent/mxc-images", good.labels, "/nonexistent/mxc-images");
        expect_bad(MXC_EIO, good.images, "/nonexistent/mxc-labels", "/nonexistent/mxc-labels");
        expect_bad(MXC_EIO, "/tmp", good.labels, "/tmp");
        /* Wrong magic: labels given as images and the reverse, garbage. */
        expect_bad(MXC_EFORMAT, good.labels, good.labels, good.labels);
        expect_bad(MXC_EFORMAT, good.images, good.images, good.images);
        char *m = write_idx(0x12345678, 3, d4, body, 16, gz);
        expect_bad(MXC_EFORMAT, m, good.labels, m);
        /* Truncated header, truncated body, bytes after the body. */
        char *th = write_idx(0x803, 1, d4, NULL, 0, gz);
        expect_bad(MXC_EFORMAT, th, good.labels, th);
        char *tb = write_idx(0x803, 3, d4, body, 15, gz);
        expect_bad(MXC_EFORMAT, tb, good.labels, tb);
        char *tl = write_idx(0x801, 1, l4, body, 3, gz);
        expect_bad(MXC_EFORMAT, good.images, tl, tl);
        char *ex = write_idx(0x803, 3, d4, body, 17, gz);
        expect_bad(MXC_EFORMAT, ex, good.labels, ex);
        /* Counts that differ. */
        char *l5p = write_idx(0x801, 1, l5, body, 5, gz);
        expect_bad(MXC_EFORMAT, good.images, l5p, l5p);
        /* Bad dimensions: zero, and a huge count announced over a tiny body (must fail
         * as truncated without allocating what the header claims). */
        uint32_t zero[3] = {4, 0, 2}, huge[3] = {100000000, 28, 28};
        char *z = write_idx(0x803, 3, zero, body, 0, gz);
        expect_bad(MXC_EFORMAT, z, good.labels, z);
        uint32_t lhuge[1] = {100000000};
        char *h = write_idx(0x803, 3, huge, body, 64, gz);
        char *hl = write_idx(0x801, 1, lhuge, body, 64, gz);
        expect_bad(MXC_EFORMAT, h, hl, h);
        uint32_t over[3] = {4, 100000, 100000};
        char *o = write_idx(0x803, 3, over, body, 64, gz);
        expect_bad(MXC_EFORMAT, o, good.labels, o);
        char *paths[] = {m, th, tb, tl, ex, l5p, z, h, hl, o};
        for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
            unlink(paths[i]);
            free(paths[i]);
        }
        drop_idx(good);
    }
    /* A gzip header followed by garbage; an empty file. */
    struct idx_pair good = make_idx(4, 2, 2, false);
    char *cg = mxct_temp_file("mxc-idx-");
    uint8_t junk[64] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    for (int i = 10; i < 64; i++)
        junk[i] = (uint8_t)(i * 37);
    write_bytes(cg, junk, sizeof junk, false);
    expect_bad(MXC_EFORMAT, cg, good.labels, cg);
    write_bytes(cg, junk, 0, false);
    expect_bad(MXC_EFORMAT, cg, good.labels, cg);
    unlink(cg);
    free(cg);
    drop_idx(good);
}
END_TEST

START_TEST(misuse) {
    struct idx_pair f = make_idx(8, 1, 1, false);
    mxc_data_iter_params p = params_of(2);
    mxc_data_iter *it = NULL;
    p.batch_size = 0;
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it));
    p = params_of(2);
    p.num_parts = 0;
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it));
    p = params_of(2);
    p.num_parts = 2;
    p.part_index = 2;
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it));
    p = params_of(2);
    p.num_parts = 9; /* part 0 of 8 samples in 9 parts is empty */
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it));
    p = params_of(2);
    p.prefetch = 0;
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it));
    p = params_of(2);
    p.ctx = mxc_gpu(0);
    CK_ERR(MXC_ENOTSUP, mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it));
    p = params_of(2);
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_idx(NULL, f.labels, 1, &p, &it));
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_idx(f.images, f.labels, 1, NULL, &it));
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_idx(f.images, f.labels, 1, &p, NULL));
    ck_assert_ptr_null(it);

    CK_ERR(MXC_EMISUSE, mxc_data_iter_next(NULL));
    CK_ERR(MXC_EMISUSE, mxc_data_iter_reset(NULL));
    mxc_shape s;
    CK_ERR(MXC_EMISUSE, mxc_data_iter_provide_data(NULL, &s));
    CK_ERR(MXC_EMISUSE, mxc_data_iter_provide_label(NULL, &s));
    ck_assert_ptr_null(mxc_data_iter_data(NULL));
    ck_assert_ptr_null(mxc_data_iter_label(NULL));
    ck_assert_int_eq(mxc_data_iter_pad(NULL), -1);
    ck_assert_int_eq(mxc_data_iter_num_samples(NULL), -1);
    ck_assert_int_eq(mxc_data_iter_num_batches(NULL), -1);
    mxc_data_iter_free(NULL);
    CK_OK(mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it));
    CK_ERR(MXC_EINVAL, mxc_data_iter_provide_data(it, NULL));
    /* A handle of another kind is refused, not trusted. */
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_zeros(&SHAPE(4), MXC_FLOAT32, mxc_cpu(), &a));
    CK_ERR(MXC_EMISUSE, mxc_data_iter_next((mxc_data_iter *)a));
    mxc_nd_free(a);
    mxc_data_iter_free(it);
    drop_idx(f);
}
END_TEST

/* ---- CSV ----------------------------------------------------------------------------- */

static char *write_text(const char *text) {
    char *path = mxct_temp_file("mxc-csv-");
    write_bytes(path, text, strlen(text), false);
    return path;
}

START_TEST(csv_good) {
    char *data = write_text("1,2,3,4\n 5 , 6,7 ,8\r\n\n9,10,11,12\n1e1,-2.5,0.25,3\n"
                            "0,0,0,1");
    char *label = write_text("0\n1\n2\n3\n4\n");
    mxc_data_iter_params p = params_of(2);
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_csv(data, &SHAPE(2, 2), label, NULL, &p, &it));
    ck_assert_int_eq(mxc_data_iter_num_samples(it), 5);
    mxc_shape s;
    CK_OK(mxc_data_iter_provide_data(it, &s));
    expect_shape(s, SHAPE(2, 2, 2), "provide_data");
    CK_OK(mxc_data_iter_provide_label(it, &s));
    expect_shape(s, SHAPE(2), "provide_label");
    static const float rows[5][4] = {
        {1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}, {10, -2.5f, 0.25f, 3}, {0, 0, 0, 1}};
    static const int order[6] = {0, 1, 2, 3, 4, 0};
    for (int b = 0; b < 3; b++) {
        ck_assert_int_eq(mxc_data_iter_next(it), 1);
        ck_assert_int_eq(mxc_data_iter_pad(it), b == 2 ? 1 : 0);
        float *d = nd_read(mxc_data_iter_data(it)), *l = nd_read(mxc_data_iter_label(it));
        for (int r = 0; r < 2; r++) {
            int id = order[b * 2 + r];
            ck_assert_float_eq(l[r], (float)id);
            for (int k = 0; k < 4; k++)
                ck_assert_float_eq(d[r * 4 + k], rows[id][k]);
        }
        free(d);
        free(l);
    }
    ck_assert_int_eq(mxc_data_iter_next(it), 0);
    mxc_data_iter_free(it);

    /* No labels; a label shape of two values. */
    CK_OK(mxc_data_iter_create_csv(data, &SHAPE(4), NULL, NULL, &p, &it));
    CK_OK(mxc_data_iter_provide_label(it, &s));
    ck_assert_int_eq(s.ndim, 0);
    ck_assert_int_eq(mxc_data_iter_next(it), 1);
    ck_assert_ptr_null(mxc_data_iter_label(it));
    mxc_data_iter_free(it);
    char *label2 = write_text("0,1\n1,0\n2,2\n3,3\n4,4\n");
    CK_OK(mxc_data_iter_create_csv(data, &SHAPE(4), label2, &SHAPE(2), &p, &it));
    CK_OK(mxc_data_iter_provide_label(it, &s));
    expect_shape(s, SHAPE(2, 2), "provide_label");
    ck_assert_int_eq(mxc_data_iter_next(it), 1);
    float *l = nd_read(mxc_data_iter_label(it));
    ck_assert_float_eq(l[0], 0);
    ck_assert_float_eq(l[1], 1);
    ck_assert_float_eq(l[2], 1);
    ck_assert_float_eq(l[3], 0);
    free(l);
    mxc_data_iter_free(it);
    char *paths[] = {data, label, label2};
    for (int i = 0; i < 3; i++) {
        unlink(paths[i]);
        free(paths[i]);
    }
}
END_TEST

/* Asserts that the CSV pair fails with EFORMAT and a message holding `want`. */
static void expect_csv_bad(const char *data_text, const char *label_text, const char *want) {
    char *data = write_text(data_text);
    char *label = label_text ? write_text(label_text) : NULL;
    mxc_data_iter_params p = params_of(1);
    mxc_data_iter *it = NULL;
    CK_ERR(MXC_EFORMAT, mxc_data_iter_create_csv(data, &SHAPE(3), label, NULL, &p, &it));
    ck_assert_ptr_null(it);
    char expect[4200];
    snprintf(expect, sizeof expect, want, label ? label : data);
    ck_assert_msg(strstr(mxc_last_error(), expect) != NULL, "message '%s' lacks '%s'",
                  mxc_last_error(), expect);
    unlink(data);
    free(data);
    if (label) {
        unlink(label);
        free(label);
    }
}

START_TEST(csv_bad) {
    expect_csv_bad("1,2,3\n4,5,6\n7,8\n", NULL, "%s:3: 2 values, expected 3");
    expect_csv_bad("1,2,3\n4,5,6,7\n", NULL, "%s:2: 4 values, expected 3");
    expect_csv_bad("1,2,3\n1,abc,3\n", NULL, "%s:2: field 2 'abc' is not a number");
    expect_csv_bad("1,2,3\n\n1,,3\n", NULL, "%s:3: field 2");
    expect_csv_bad("1,2,3x\n", NULL, "%s:1: field 3 '3x'");
    expect_csv_bad("1,2,3\n4,5,6\n", "1\nx\n", "%s:2: field 1 'x'");
    expect_csv_bad("1,2,3\n4,5,6\n", "1\n", "holds 2 rows but '%s' holds 1");
    expect_csv_bad("\n\n", NULL, "%s' holds no rows");

    mxc_data_iter_params p = params_of(1);
    mxc_data_iter *it = NULL;
    CK_ERR(MXC_EIO, mxc_data_iter_create_csv("/nonexistent/x.csv", &SHAPE(3), NULL, NULL, &p, &it));
    ck_assert(strstr(mxc_last_error(), "/nonexistent/x.csv") != NULL);
    CK_ERR(MXC_EINVAL,
           mxc_data_iter_create_csv("/nonexistent/x.csv", &SHAPE(0), NULL, NULL, &p, &it));
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_csv(NULL, &SHAPE(3), NULL, NULL, &p, &it));
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_csv("x", NULL, NULL, NULL, &p, &it));
}
END_TEST

/* A FIFO, a directory or a device given as a data file is MXC_EIO at once, not a wait for
 * a writer or a read that never ends (both loaders open through mxc__file_open_regular). */
START_TEST(not_regular_files) {
    char *fifo = mxct_temp_fifo("mxc-io-fifo-");
    struct idx_pair good = make_idx(4, 2, 2, false);
    mxc_data_iter_params p = params_of(1);
    const char *paths[] = {fifo, "/tmp", "/dev/zero"};
    for (int i = 0; i < 3; i++) {
        mxc_data_iter *it = NULL;
        CK_ERR(MXC_EIO, mxc_data_iter_create_csv(paths[i], &SHAPE(3), NULL, NULL, &p, &it));
        ck_assert_msg(strstr(mxc_last_error(), "not a regular file"), "%s", mxc_last_error());
        CK_ERR(MXC_EIO, mxc_data_iter_create_idx(paths[i], good.labels, 1, &p, &it));
        ck_assert_msg(strstr(mxc_last_error(), "not a regular file"), "%s", mxc_last_error());
        CK_ERR(MXC_EIO, mxc_data_iter_create_idx(good.images, paths[i], 1, &p, &it));
        ck_assert_ptr_null(it);
    }
    drop_idx(good);
    unlink(fifo);
    free(fifo);
}
END_TEST

START_TEST(csv_committed_fixtures) {
    char data[4096], label[4096], bad[4096];
    snprintf(data, sizeof data, "%s/io/small.csv", data_dir());
    snprintf(label, sizeof label, "%s/io/small-labels.csv", data_dir());
    snprintf(bad, sizeof bad, "%s/io/bad-row.csv", data_dir());
    mxc_data_iter_params p = params_of(4);
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_csv(data, &SHAPE(3), label, NULL, &p, &it));
    ck_assert_int_eq(mxc_data_iter_num_samples(it), 4);
    ck_assert_int_eq(mxc_data_iter_next(it), 1);
    float *d = nd_read(mxc_data_iter_data(it)), *l = nd_read(mxc_data_iter_label(it));
    for (int i = 0; i < 4; i++) {
        ck_assert_float_eq(l[i], (float)(i % 2));
        for (int k = 0; k < 3; k++)
            ck_assert_float_eq(d[i * 3 + k], (float)(i * 3 + k) * 0.5f);
    }
    free(d);
    free(l);
    mxc_data_iter_free(it);
    CK_ERR(MXC_EFORMAT, mxc_data_iter_create_csv(bad, &SHAPE(3), NULL, NULL, &p, &it));
    ck_assert_msg(strstr(mxc_last_error(), "bad-row.csv:3:") != NULL, "%s", mxc_last_error());
}
END_TEST

/* ---- Array iterator ----------------------------------------------------------------- */

static mxc_ndarray *nd_from(mxc_shape shape, const float *v) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_create(&shape, MXC_FLOAT32, mxc_cpu(), 0, &a));
    CK_OK(mxc_nd_sync_copy_from_cpu(a, v, (size_t)mxc_nd_size(a) * sizeof(float)));
    return a;
}

START_TEST(array_iter) {
    enum { N = 10, W = 3, B = 4 };
    float dv[N * W], lv[N];
    for (int i = 0; i < N; i++) {
        lv[i] = (float)i;
        for (int k = 0; k < W; k++)
            dv[i * W + k] = (float)(100 * i + k);
    }
    mxc_ndarray *data = nd_from(SHAPE(N, W), dv), *label = nd_from(SHAPE(N), lv);
    mxc_data_iter_params p = params_of(B);
    p.shuffle = 1;
    p.seed = 11;
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_array(data, label, &p, &it));
    mxc_nd_free(data); /* the iterator copied them */
    mxc_nd_free(label);
    mxc_shape s;
    CK_OK(mxc_data_iter_provide_data(it, &s));
    expect_shape(s, SHAPE(B, W), "provide_data");
    CK_OK(mxc_data_iter_provide_label(it, &s));
    expect_shape(s, SHAPE(B), "provide_label");
    for (int epoch = 0; epoch < 2; epoch++) {
        int64_t ids[3 * B];
        int nb = 0, rc;
        while ((rc = mxc_data_iter_next(it)) == 1) {
            float *d = nd_read(mxc_data_iter_data(it)), *l = nd_read(mxc_data_iter_label(it));
            for (int r = 0; r < B; r++) {
                ids[nb * B + r] = (int64_t)l[r];
                for (int k = 0; k < W; k++)
                    ck_assert_float_eq(d[r * W + k], l[r] * 100 + (float)k);
            }
            ck_assert_int_eq(mxc_data_iter_pad(it), nb == 2 ? 2 : 0);
            free(d);
            free(l);
            nb++;
        }
        ck_assert_int_eq(rc, 0);
        ck_assert_int_eq(nb, 3);
        expect_permutation(ids, N);
        /* The padding repeats the epoch's first samples. */
        ck_assert_int_eq(ids[10], ids[0]);
        ck_assert_int_eq(ids[11], ids[1]);
        CK_OK(mxc_data_iter_reset(it));
    }
    mxc_data_iter_free(it);

    /* Without labels; errors. */
    data = nd_from(SHAPE(N, W), dv);
    CK_OK(mxc_data_iter_create_array(data, NULL, &p, &it));
    ck_assert_int_eq(mxc_data_iter_next(it), 1);
    ck_assert_ptr_null(mxc_data_iter_label(it));
    mxc_data_iter_free(it);
    mxc_ndarray *short_label = nd_from(SHAPE(N - 1), lv), *ints = NULL;
    CK_ERR(MXC_ESHAPE, mxc_data_iter_create_array(data, short_label, &p, &it));
    CK_OK(mxc_nd_zeros(&SHAPE(N), MXC_INT32, mxc_cpu(), &ints));
    CK_ERR(MXC_ETYPE, mxc_data_iter_create_array(data, ints, &p, &it));
    CK_ERR(MXC_EINVAL, mxc_data_iter_create_array(NULL, NULL, &p, &it));
    CK_ERR(MXC_EMISUSE, mxc_data_iter_create_array((mxc_ndarray *)&p, NULL, &p, &it));
    ck_assert_ptr_null(it);
    mxc_nd_free(data);
    mxc_nd_free(short_label);
    mxc_nd_free(ints);
}
END_TEST

/* ---- Prefetch ----------------------------------------------------------------------- */

/* A slow engine operation reading a batch: after a pause it checks that every row still
 * holds the value it was pushed for (row r of batch b: b * rows + r). */
struct slow_check {
    int64_t batch, rows, width;
    long sleep_us;
};

static int slow_check_kernel(const struct mxc__nd_call *call) {
    const struct slow_check *c = call->params;
    mxct_sleep_us(c->sleep_us);
    const float *v = call->inputs[0].data;
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t k = 0; k < c->width; k++)
            if (v[r * c->width + k] != (float)(c->batch * c->rows + r)) {
                mxct_note("batch %lld row %lld overwritten early: %g", (long long)c->batch,
                          (long long)r, (double)v[r * c->width + k]);
                return MXC_OK;
            }
    return MXC_OK;
}

/* An array iterator whose row i holds the value i everywhere. */
static mxc_data_iter *counting_iter(int64_t n, int64_t width, int64_t batch, int prefetch) {
    float *v = malloc((size_t)(n * width) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < n * width; i++)
        v[i] = (float)(i / width);
    mxc_ndarray *a = nd_from(SHAPE(n, width), v);
    free(v);
    mxc_data_iter_params p = params_of(batch);
    p.prefetch = prefetch;
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_array(a, a, &p, &it));
    mxc_nd_free(a);
    return it;
}

static void push_slow_check(mxc_data_iter *it, int64_t batch, int64_t rows, int64_t width,
                            long sleep_us, mxc_ndarray *scratch) {
    struct slow_check c = {batch, rows, width, sleep_us};
    struct mxc__nd_op op = {.name = "slow_check",
                            .kernel = slow_check_kernel,
                            .params = &c,
                            .params_size = sizeof c,
                            .prop = MXC_PROP_NORMAL,
                            .run_ctx = mxc_cpu()};
    const mxc_ndarray *in[1] = {mxc_data_iter_data(it)};
    mxc_ndarray *outs[1] = {scratch};
    CK_OK(mxc__nd_push(&op, in, 1, outs, 1));
}

START_TEST(prefetch_reuse_rule) {
    enum { B = 4, W = 64, NB = 24 };
    mxct_notes_reset();
    for (int prefetch = 1; prefetch <= 3; prefetch += 2) {
        mxc_data_iter *it = counting_iter(NB * B, W, B, prefetch);
        mxc_ndarray *scratch[NB];
        for (int64_t b = 0; b < NB; b++) {
            ck_assert_int_eq(mxc_data_iter_next(it), 1);
            /* Own scratch outputs: the checks may run concurrently, each holding its
             * batch for a while after next() has moved on. */
            CK_OK(mxc_nd_create(&SHAPE(1), MXC_FLOAT32, mxc_cpu(), 0, &scratch[b]));
            push_slow_check(it, b, B, W, b % 3 == 0 ? 20000 : 2000, scratch[b]);
        }
        ck_assert_int_eq(mxc_data_iter_next(it), 0);
        CK_OK(mxc_nd_wait_all());
        for (int64_t b = 0; b < NB; b++)
            mxc_nd_free(scratch[b]);
        mxc_data_iter_free(it);
    }
    mxct_assert_no_notes();
}
END_TEST

/* A failure the consumer leaves on a batch array (here a copy from an array nothing
 * wrote) is not the iterator's: refilling the buffer overwrites it, and every later batch
 * reads back right. */
START_TEST(refill_overwrites_a_failed_batch) {
    enum { B = 4, W = 8, NB = 6 };
    mxc_data_iter *it = counting_iter(NB * B, W, B, 1);
    mxc_ndarray *unwritten = NULL;
    CK_OK(mxc_nd_create(&SHAPE(B, W), MXC_FLOAT32, mxc_cpu(), 1, &unwritten));
    for (int64_t b = 0; b < NB; b++) {
        ck_assert_int_eq(mxc_data_iter_next(it), 1);
        mxc_ndarray *d = mxc_data_iter_data(it);
        float *v = nd_read(d);
        for (int64_t i = 0; i < B * W; i++)
            ck_assert_float_eq(v[i], (float)(b * B + i / W));
        free(v);
        CK_OK(mxc_nd_copy_to(unwritten, d)); /* the consumer breaks the batch */
        CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(d));
    }
    ck_assert_int_eq(mxc_data_iter_next(it), 0);
    mxc_nd_free(unwritten);
    mxc_data_iter_free(it);
}
END_TEST

/* Free while the prefetch thread is busy and while reads of a batch are pending. */
START_TEST(free_mid_epoch) {
    for (int round = 0; round < 12; round++) {
        mxc_data_iter *it = counting_iter(200, 32, 8, 1 + round % 3);
        for (int s = 0; s < round % 4; s++)
            ck_assert_int_eq(mxc_data_iter_next(it), 1);
        mxc_ndarray *scratch = NULL;
        if (round % 2 && mxc_data_iter_data(it)) {
            CK_OK(mxc_nd_create(&SHAPE(1), MXC_FLOAT32, mxc_cpu(), 0, &scratch));
            push_slow_check(it, round % 4 - 1, 8, 32, 5000, scratch);
        }
        mxc_data_iter_free(it);
        mxc_nd_free(scratch);
    }
    CK_OK(mxc_nd_wait_all());
    mxct_assert_no_notes();
}
END_TEST

/* A source of `n` samples of one value with a one-value label, read by `read`. */
static struct mxc__io_source scalar_source(int64_t n,
                                           int (*read)(void *, int64_t, float *, float *)) {
    return (struct mxc__io_source){.name = "test",
                                   .num_samples = n,
                                   .data_shape = SHAPE(1),
                                   .label_shape = SHAPE(1),
                                   .read = read};
}

/* A source that takes a millisecond over every sample, so its prefetch thread stays busy. */
static _Atomic long slow_reads;

static int slow_read(void *impl, int64_t index, float *data, float *label) {
    (void)impl;
    mxct_sleep_us(1000);
    data[0] = (float)index;
    label[0] = (float)index;
    atomic_fetch_add(&slow_reads, 1);
    return MXC_OK;
}

/* Registered before the first mxc call, so it runs after the library's exit hooks: by then
 * no prefetch thread may read any more. */
static void reads_stopped_at_exit(void) {
    long before = atomic_load(&slow_reads);
    mxct_sleep_us(30000);
    if (atomic_load(&slow_reads) != before)
        _exit(6);
}

/* A program may exit without freeing its iterators, their prefetch threads busy reading and
 * copying, one of them refilling a batch that a slow reader still holds. The library's exit
 * hooks stop the threads before the engine goes: exit neither hangs (the engine's exit hook
 * waited for copies that a prefetch thread kept pushing) nor races with them
 * (ThreadSanitizer fails the child's exit status). */
START_TEST(exit_with_live_iterators) {
    const char *fork_mode = getenv("CK_FORK"); /* the child needs a process without engine */
    if (fork_mode && strcmp(fork_mode, "no") == 0) {
        printf("check_io: skipping exit_with_live_iterators: needs Check's fork mode\n");
        return;
    }
    fflush(NULL);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        if (atexit(reads_stopped_at_exit) != 0)
            _exit(2);
        mxc_data_iter *held = counting_iter(400, 32, 8, 1);
        mxc_ndarray *scratch = NULL;
        if (mxc_data_iter_next(held) != 1 ||
            mxc_nd_create(&SHAPE(1), MXC_FLOAT32, mxc_cpu(), 0, &scratch) != MXC_OK)
            _exit(3);
        push_slow_check(held, 0, 8, 32, 20000, scratch);
        if (mxc_data_iter_next(held) != 1) /* gives batch 0 back for a refill */
            _exit(4);
        for (int i = 0; i < 3; i++) {
            struct mxc__io_source src = scalar_source(1000, slow_read);
            mxc_data_iter_params p = params_of(4);
            p.prefetch = 8;
            mxc_data_iter *it = NULL;
            if (mxc__io_iter_create(&src, &p, &it) != MXC_OK)
                _exit(5);
        }
        exit(0); /* the exit hooks run, the iterators are still there */
    }
    int status = 0;
    double waited = 0, limit = 0.6 * mxct_timeout(30);
    pid_t got;
    while ((got = waitpid(child, &status, WNOHANG)) == 0 && waited < limit) {
        usleep(10000);
        waited += 0.01;
    }
    if (got == 0) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        ck_abort_msg("exit with live iterators hung for %.0f s", limit);
    }
    ck_assert_int_eq(got, child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the child's exit failed: status %#x (6: prefetch threads outlived exit)",
                  status);
}
END_TEST

/* A source whose sample 6 cannot be read: the error reaches next() with its message. */
static int failing_read(void *impl, int64_t index, float *data, float *label) {
    (void)impl;
    if (index == 6)
        return mxc__error(MXC_EIO, "test source: sample %lld is unreadable", (long long)index);
    data[0] = (float)index;
    if (label)
        label[0] = (float)index;
    return MXC_OK;
}

START_TEST(reader_error_at_next) {
    struct mxc__io_source src = scalar_source(12, failing_read);
    mxc_data_iter_params p = params_of(4);
    mxc_data_iter *it = NULL;
    CK_OK(mxc__io_iter_create(&src, &p, &it));
    for (int round = 0; round < 3; round++) {
        ck_assert_int_eq(mxc_data_iter_next(it), 1);
        for (int again = 0; again < 2; again++) {
            CK_ERR(MXC_EIO, mxc_data_iter_next(it));
            ck_assert_msg(strstr(mxc_last_error(), "sample 6 is unreadable") != NULL, "%s",
                          mxc_last_error());
            ck_assert_ptr_null(mxc_data_iter_data(it));
        }
        CK_OK(mxc_data_iter_reset(it));
    }
    mxc_data_iter_free(it);
}
END_TEST

/* ---- Allocation failures ------------------------------------------------------------- */

/* Static: the default engine, made through the allocator, outlives the test function. */
static struct mxct_alloc_counts counts;

static long live_after_settling(void) {
    mxc_nd_wait_all(); /* may report a failure injected earlier */
    CK_OK(mxc_storage_trim(mxc_cpu()));
    mxc__handles_trim(); /* freed handles' slabs */
    return atomic_load(&counts.live);
}

/* Every allocation of a constructor, failed in turn, gives a clean MXC_ENOMEM (or the
 * first successful run), no handle, and no leaked block. Case _i: 0 IDX, 1 CSV, 2 array. */
START_TEST(alloc_failure_sweep) {
    const char *fork = getenv("CK_FORK");
    if (fork && strcmp(fork, "no") == 0) {
        /* The allocator may only be replaced before any other mxc call. */
        printf("check_io: skipping alloc_failure_sweep: needs Check's fork mode\n");
        return;
    }
    mxct_alloc_install(&counts); /* the first mxc call of this process */
    struct idx_pair f = make_idx(20, 2, 2, false);
    char *csv = write_text("1,2\n3,4\n5,6\n7,8\n");
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    mxc_ndarray *arr = nd_from(SHAPE(4, 2), v);
    mxc_data_iter_params p = params_of(3);
    long before = 0, n;
    for (n = -1; n < 2000; n++) {
        mxc_data_iter *it = NULL;
        if (n == 0)
            before = live_after_settling(); /* after one successful warm-up run */
        mxct_alloc_fail_after(&counts, n);
        int rc = _i == 0   ? mxc_data_iter_create_idx(f.images, f.labels, 1, &p, &it)
                 : _i == 1 ? mxc_data_iter_create_csv(csv, &SHAPE(2), NULL, NULL, &p, &it)
                           : mxc_data_iter_create_array(arr, arr, &p, &it);
        if (rc == MXC_OK) {
            ck_assert_ptr_nonnull(it);
            mxc_data_iter_next(it); /* may fail: the prefetch thread meets failures too */
            mxct_alloc_fail_after(&counts, -1);
            mxc_data_iter_free(it);
            if (n >= 0)
                break;
            continue;
        }
        mxct_alloc_fail_after(&counts, -1);
        ck_assert_msg(rc == MXC_ENOMEM, "allocation %ld: %s: %s", n, mxc_err_name(rc),
                      mxc_last_error());
        ck_assert_ptr_null(it);
        ck_assert_int_eq(live_after_settling(), before);
    }
    ck_assert_msg(n > 0 && n < 2000, "no allocation failure was met (n = %ld)", n);
    ck_assert_int_eq(live_after_settling(), before);
    mxc_nd_free(arr);
    unlink(csv);
    free(csv);
    drop_idx(f);
    /* The allocator stays: engine workers use it until the process exits. */
}
END_TEST

/* ---- Fashion-MNIST ------------------------------------------------------------------ */

static const char *fashion_dir(void) {
    const char *dir = getenv("MXC_FASHION_MNIST_DIR");
    return dir && *dir ? dir : "/usr/share/datasets/fashion-mnist";
}

/* Checks one set: sample count, labels 0..9 each present, the first label, and the first
 * image's pixel sum (from the files: 76247 for train, 33456 for t10k). */
static void check_fashion(int train, int64_t count, float first_label, long first_sum) {
    mxc_data_iter_params p = params_of(100);
    p.round_batch = 0;
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_fashion_mnist(NULL, train, 0, &p, &it));
    ck_assert_int_eq(mxc_data_iter_num_samples(it), count);
    ck_assert_int_eq(mxc_data_iter_num_batches(it), count / 100);
    mxc_shape s;
    CK_OK(mxc_data_iter_provide_data(it, &s));
    expect_shape(s, SHAPE(100, 1, 28, 28), "provide_data");
    int64_t hist[10] = {0}, batches = 0;
    int rc;
    while ((rc = mxc_data_iter_next(it)) == 1) {
        float *l = nd_read(mxc_data_iter_label(it));
        if (batches == 0) {
            float *d = nd_read(mxc_data_iter_data(it));
            ck_assert_float_eq(l[0], first_label);
            double sum = 0;
            float lo = 1, hi = 0;
            for (int j = 0; j < 784; j++) {
                sum += d[j];
                lo = fminf(lo, d[j]);
                hi = fmaxf(hi, d[j]);
            }
            ck_assert_msg(fabs(sum * 255.0 - (double)first_sum) < 0.05,
                          "first image sums to %.3f / 255, expected %ld", sum * 255.0, first_sum);
            ck_assert(lo >= 0 && hi <= 1);
            free(d);
        }
        for (int i = 0; i < 100; i++) {
            ck_assert_msg(l[i] >= 0 && l[i] <= 9 && l[i] == floorf(l[i]), "label %g", l[i]);
            hist[(int)l[i]]++;
        }
        free(l);
        batches++;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(batches, count / 100);
    for (int c = 0; c < 10; c++)
        ck_assert_int_eq(hist[c], count / 10); /* Fashion-MNIST is balanced */
    mxc_data_iter_free(it);
}

START_TEST(fashion_mnist) {
    char path[4096];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", fashion_dir());
    if (access(path, R_OK) != 0) {
        printf("check_io: skipping fashion_mnist: %s not found (install dataset-fashion-mnist "
               "or set MXC_FASHION_MNIST_DIR)\n",
               path);
        return;
    }
    check_fashion(1, 60000, 9, 76247);
    check_fashion(0, 10000, 9, 33456);

    /* A directory without the files names the path it tried. */
    mxc_data_iter_params p = params_of(100);
    mxc_data_iter *it = NULL;
    CK_ERR(MXC_EIO, mxc_data_iter_create_fashion_mnist("/nonexistent", 1, 1, &p, &it));
    ck_assert(strstr(mxc_last_error(), "/nonexistent/train-images-idx3-ubyte.gz") != NULL);
}
END_TEST

/* ---- Suite -------------------------------------------------------------------------- */

static Suite *io_suite(void) {
    Suite *s = suite_create("io");
    TCase *tc = tcase_create("idx");
    tcase_set_timeout(tc, mxct_timeout(10));
    tcase_add_test(tc, idx_raw_flat);
    tcase_add_test(tc, idx_gzip_flat);
    tcase_add_test(tc, idx_4d_drop_last);
    tcase_add_test(tc, idx_round_batch_tiny);
    tcase_add_test(tc, idx_committed_fixtures);
    tcase_add_test(tc, idx_shuffle);
    tcase_add_test(tc, idx_sharding);
    tcase_add_test(tc, idx_reset_mid_epoch);
    tcase_add_test(tc, idx_malformed);
    tcase_add_test(tc, misuse);
    suite_add_tcase(s, tc);

    tc = tcase_create("csv_array");
    tcase_set_timeout(tc, mxct_timeout(10));
    tcase_add_test(tc, csv_good);
    tcase_add_test(tc, csv_bad);
    tcase_add_test(tc, not_regular_files);
    tcase_add_test(tc, csv_committed_fixtures);
    tcase_add_test(tc, array_iter);
    suite_add_tcase(s, tc);

    tc = tcase_create("prefetch");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_test(tc, prefetch_reuse_rule);
    tcase_add_test(tc, refill_overwrites_a_failed_batch);
    tcase_add_test(tc, free_mid_epoch);
    tcase_add_test(tc, exit_with_live_iterators);
    tcase_add_test(tc, reader_error_at_next);
    tcase_add_loop_test(tc, alloc_failure_sweep, 0, 3);
    suite_add_tcase(s, tc);

    tc = tcase_create("fashion_mnist");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_test(tc, fashion_mnist);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(io_suite()); }

/*
 * tests/check_image_iter.c — the image record iterator (mxc_data_iter_create_image_record):
 * its batches equal MXNet 1.9.1's ImageRecordIter output on the committed records
 * (tests/data/io/rec/iter.params, scripts/gen_rec_fixtures.py: centre crops, mean / std /
 * scale, resize, label vectors; every value exact, resize included), with 1 and 3
 * decoding threads and with and without the index; corrupt images are skipped and
 * counted; a label count other than label_width and a damaged file are errors; bad
 * options are refused; random crops are uniform over the valid positions and mirroring
 * happens half the time, the same for a seed whatever the threads; scale, aspect and colour
 * draws follow their definitions; im2rec turns class folders into a list and records
 * (the files' bytes, or resized and re-encoded, the same with any number of threads).
 *
 * Run from the repository root, or point MXC_TEST_DATA at tests/data.
 */
#include "mxc/io.h"
#include "mxc/recordio.h"
#include "io/io_impl.h"
#include "tests/util/op_check.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <libgen.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *rec_path(int slot, const char *name) {
    static char paths[2][512];
    const char *dir = getenv("MXC_TEST_DATA");
    snprintf(paths[slot], sizeof paths[slot], "%s/io/rec/%s", dir && *dir ? dir : "tests/data",
             name);
    return paths[slot];
}

/* CASES of scripts/gen_rec_fixtures.py; fields left out keep mxc_image_record_params_init's
 * defaults (zero here means the default). */
struct mx_case {
    const char *name, *rec;
    int64_t h, w, batch;
    int batches;
    int label_width, resize;
    float mean[3], std[3], scale;
    int dtype;
    int rotate, pad, fill_value; /* fill_value -1: the default */
    const char *mean_img;
    float tol; /* largest difference allowed (resize: see docs/io.md); 0: exact */
};
static const struct mx_case cases[] = {
    {.name = "center", .rec = "images", .h = 16, .w = 16, .batch = 4, .batches = 3},
    {.name = "norm",
     .rec = "images",
     .h = 18,
     .w = 20,
     .batch = 5,
     .batches = 2,
     .mean = {123.68f, 116.28f, 103.53f},
     .std = {58.395f, 57.12f, 57.375f},
     .scale = 0.5f},
    {.name = "resize", .rec = "images", .h = 12, .w = 14, .batch = 4, .batches = 3, .resize = 16},
    {.name = "upscale", .rec = "images", .h = 10, .w = 12, .batch = 3, .batches = 3, .resize = 25},
    {.name = "vector",
     .rec = "vector",
     .h = 20,
     .w = 24,
     .batch = 3,
     .batches = 2,
     .label_width = 3},
    {.name = "u8",
     .rec = "images",
     .h = 12,
     .w = 14,
     .batch = 4,
     .batches = 3,
     .resize = 16,
     .dtype = MXC_UINT8},
    {.name = "pad",
     .rec = "images",
     .h = 24,
     .w = 28,
     .batch = 3,
     .batches = 3,
     .pad = 2,
     .fill_value = 7},
    {.name = "rotate",
     .rec = "images",
     .h = 16,
     .w = 16,
     .batch = 3,
     .batches = 3,
     .rotate = 30,
     .fill_value = 200},
    {.name = "rotpad",
     .rec = "images",
     .h = 20,
     .w = 20,
     .batch = 4,
     .batches = 3,
     .resize = 22,
     .rotate = 45,
     .pad = 3,
     .fill_value = 0,
     .tol = 1},
    {.name = "meanimg",
     .rec = "images",
     .h = 16,
     .w = 16,
     .batch = 5,
     .batches = 2,
     .std = {2, 4, 8},
     .scale = 0.5f,
     .mean_img = "mean16.nd"},
};
#define NUM_CASES ((int)(sizeof cases / sizeof cases[0]))

static mxc_data_iter *open_case(const struct mx_case *k, int threads, bool with_idx) {
    char rec[64], idx[64];
    snprintf(rec, sizeof rec, "%s.rec", k->rec);
    snprintf(idx, sizeof idx, "%s.idx", k->rec);
    mxc_image_record_params ip;
    mxc_image_record_params_init(&ip);
    char mean_path[600];
    snprintf(mean_path, sizeof mean_path, "%s", rec_path(1, k->mean_img ? k->mean_img : ""));
    ip.path_imgrec = rec_path(0, rec);
    ip.path_imgidx = with_idx ? rec_path(1, idx) : NULL;
    ip.mean_img = k->mean_img ? mean_path : NULL;
    ip.data_shape[0] = 3;
    ip.data_shape[1] = k->h;
    ip.data_shape[2] = k->w;
    if (k->label_width)
        ip.label_width = k->label_width;
    if (k->resize)
        ip.resize = k->resize;
    ip.mean_r = k->mean[0], ip.mean_g = k->mean[1], ip.mean_b = k->mean[2];
    if (k->std[0])
        ip.std_r = k->std[0], ip.std_g = k->std[1], ip.std_b = k->std[2];
    if (k->scale)
        ip.scale = k->scale;
    ip.preprocess_threads = threads;
    ip.dtype = k->dtype;
    if (k->rotate)
        ip.rotate = k->rotate;
    ip.pad = k->pad;
    if (k->pad || k->rotate)
        ip.fill_value = k->fill_value;
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = k->batch;
    mxc_data_iter *it;
    CK_OK(mxc_data_iter_create_image_record(&ip, &p, &it));
    return it;
}

static float *copy_out(mxc_ndarray *a, int64_t *n) {
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(a, &s));
    *n = mxc_shape_size(&s);
    float *v = malloc((size_t)*n * sizeof(float));
    if (mxc_nd_dtype(a) == MXC_UINT8) {
        uint8_t *b = malloc((size_t)*n);
        CK_OK(mxc_nd_sync_copy_to_cpu(a, b, (size_t)*n));
        for (int64_t i = 0; i < *n; i++)
            v[i] = b[i];
        free(b);
    } else {
        ck_assert_int_eq(mxc_nd_dtype(a), MXC_FLOAT32);
        CK_OK(mxc_nd_sync_copy_to_cpu(a, v, (size_t)*n * sizeof(float)));
    }
    return v;
}

/* Every case, threads 1 and 3 (loop index / 2), index or scan (loop index % 2). */
START_TEST(matches_mxnet) {
    int threads = _i / 2 ? 3 : 1;
    bool with_idx = _i % 2;
    for (int c = 0; c < NUM_CASES; c++) {
        const struct mx_case *k = &cases[c];
        mxc_data_iter *it = open_case(k, threads, with_idx);
        ck_assert_int_eq(mxc_data_iter_num_batches(it), k->batches);
        int b = 0, rc;
        while ((rc = mxc_data_iter_next(it)) == 1) {
            char name[64];
            snprintf(name, sizeof name, "%s_data%d", k->name, b);
            struct mxct_tensor ref = mxct_ref_load("io/rec/iter.params", name);
            int64_t n;
            ck_assert_int_eq(mxc_nd_dtype(mxc_data_iter_data(it)), k->dtype);
            /* the batch buffers: pinned where a GPU could read them, else plain CPU memory */
            mxc_context bctx;
            CK_OK(mxc_nd_get_context(mxc_data_iter_data(it), &bctx));
            ck_assert_int_eq(bctx.dev_type, mxc_gpu_count() > 0 ? MXC_CPU_PINNED : MXC_CPU);
            CK_OK(mxc_nd_get_context(mxc_data_iter_label(it), &bctx));
            ck_assert_int_eq(bctx.dev_type, mxc_gpu_count() > 0 ? MXC_CPU_PINNED : MXC_CPU);
            float *got = copy_out(mxc_data_iter_data(it), &n);
            ck_assert_int_eq(n, mxc_shape_size(&ref.shape));
            int64_t off = 0;
            for (int64_t i = 0; i < n; i++) {
                ck_assert_msg(fabsf(got[i] - ref.data[i]) <= k->tol,
                              "%s batch %d value %lld: %.9g vs MXNet's %.9g", k->name, b,
                              (long long)i, got[i], ref.data[i]);
                off += got[i] != ref.data[i];
            }
            ck_assert_msg(off * 50 <= n, "%s batch %d: %lld of %lld values differ", k->name, b,
                          (long long)off, (long long)n);
            free(got);
            mxct_tensors_free(&ref, 1);

            snprintf(name, sizeof name, "%s_label%d", k->name, b);
            ref = mxct_ref_load("io/rec/iter.params", name);
            got = copy_out(mxc_data_iter_label(it), &n);
            ck_assert_int_eq(n, mxc_shape_size(&ref.shape));
            mxc_shape ls;
            CK_OK(mxc_nd_get_shape(mxc_data_iter_label(it), &ls));
            ck_assert_int_eq(ls.ndim, ref.shape.ndim);
            for (int64_t i = 0; i < n; i++)
                ck_assert_float_eq(got[i], ref.data[i]);
            free(got);
            mxct_tensors_free(&ref, 1);

            snprintf(name, sizeof name, "%s_pad%d", k->name, b);
            ref = mxct_ref_load("io/rec/iter.params", name);
            ck_assert_int_eq(mxc_data_iter_pad(it), (int64_t)ref.data[0]);
            mxct_tensors_free(&ref, 1);
            b++;
        }
        ck_assert_msg(rc == 0, "%s: %s", k->name, mxc_last_error());
        ck_assert_int_eq(b, k->batches);
        ck_assert_int_eq(mxc_data_iter_num_skipped(it), 0);
        mxc_data_iter_free(it);
    }
}
END_TEST

/* ---- Records made here ------------------------------------------------------------- */

/* A PNG of a w x h RGB image whose pixel (x, y) is (6x, 8y, 100), or with `gray`
 * (100 + 2x) in every channel; a new buffer. */
static void *make_png_of(int w, int h, bool gray, size_t *size) {
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = px + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(gray ? 100 + 2 * x : 6 * x);
            p[1] = (uint8_t)(gray ? 100 + 2 * x : 8 * y);
            p[2] = (uint8_t)(gray ? 100 + 2 * x : 100);
        }
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = PNG_FORMAT_RGB;
    png_alloc_size_t n = 0;
    ck_assert(png_image_write_to_memory(&img, NULL, &n, 0, px, 0, NULL));
    void *out = malloc(n);
    ck_assert(png_image_write_to_memory(&img, out, &n, 0, px, 0, NULL));
    free(px);
    *size = n;
    return out;
}

static void *make_png(int w, int h, size_t *size) { return make_png_of(w, h, false, size); }

/* Writes image records: `n` records of `image` (label = index), record `bad` (if >= 0)
 * with its image cut in half; returns a new temp path. */
static char *write_rec(const void *image, size_t size, int n, int bad, int num_labels) {
    char *path = mxct_temp_file("mxc-img-");
    mxc_recordio *w;
    CK_OK(mxc_recordio_open(path, NULL, 1, &w));
    size_t cap = size + 64 + 4 * (size_t)num_labels;
    void *buf = malloc(cap);
    for (int i = 0; i < n; i++) {
        mxc_image_record h = {.label = (float)i, .id = (uint64_t)i};
        float labels[4] = {(float)i, (float)i, (float)i, (float)i};
        size_t got;
        CK_OK(mxc_recordio_pack_image(&h, labels, (uint32_t)num_labels, image,
                                      i == bad ? size / 2 : size, buf, cap, &got));
        CK_OK(mxc_recordio_write(w, buf, got));
    }
    free(buf);
    CK_OK(mxc_recordio_close(w));
    return path;
}

static mxc_image_record_params image_params(const char *path, int h, int w) {
    mxc_image_record_params ip;
    mxc_image_record_params_init(&ip);
    ip.path_imgrec = path;
    ip.data_shape[0] = 3;
    ip.data_shape[1] = h;
    ip.data_shape[2] = w;
    return ip;
}

static mxc_data_iter_params batch_params(int64_t batch) {
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = batch;
    return p;
}

START_TEST(corrupt_records_skipped) {
    size_t size;
    void *png = make_png(12, 10, &size);
    char *path = write_rec(png, size, 3, 1, 0);
    mxc_image_record_params ip = image_params(path, 10, 12);
    ip.preprocess_threads = 2;
    mxc_data_iter_params p = batch_params(3);
    mxc_data_iter *it;
    CK_OK(mxc_data_iter_create_image_record(&ip, &p, &it));
    ck_assert_int_eq(mxc_data_iter_next(it), 1);
    int64_t n;
    float *labels = copy_out(mxc_data_iter_label(it), &n);
    ck_assert_int_eq(n, 3);
    /* record 1 does not decode: its row holds record 2, the next that does */
    ck_assert_float_eq(labels[0], 0);
    ck_assert_float_eq(labels[1], 2);
    ck_assert_float_eq(labels[2], 2);
    free(labels);
    float *data = copy_out(mxc_data_iter_data(it), &n);
    ck_assert_float_eq(data[1], 6); /* pixel (1, 0), red */
    free(data);
    ck_assert_int_eq(mxc_data_iter_num_skipped(it), 1);
    ck_assert_int_eq(mxc_data_iter_next(it), 0);
    mxc_data_iter_free(it);
    remove(path);
    free(path);
    free(png);
}
END_TEST

/* An index whose key 0 appears twice: the iterator reads every line's record. */
START_TEST(index_with_repeated_keys) {
    size_t size;
    void *png = make_png(12, 10, &size);
    char *rec = mxct_temp_file("mxc-img-"), *idx = mxct_temp_file("mxc-idx-");
    mxc_recordio *w;
    CK_OK(mxc_recordio_open(rec, idx, 1, &w));
    size_t cap = size + 64, got;
    void *buf = malloc(cap);
    for (int i = 0; i < 3; i++) {
        mxc_image_record h = {.label = (float)i};
        CK_OK(mxc_recordio_pack_image(&h, NULL, 0, png, size, buf, cap, &got));
        CK_OK(mxc_recordio_write_idx(w, i == 2, buf, got));
    }
    CK_OK(mxc_recordio_close(w));
    mxc_image_record_params ip = image_params(rec, 10, 12);
    ip.path_imgidx = idx;
    mxc_data_iter_params p = batch_params(3);
    mxc_data_iter *it;
    CK_OK(mxc_data_iter_create_image_record(&ip, &p, &it));
    ck_assert_int_eq(mxc_data_iter_num_samples(it), 3);
    ck_assert_int_eq(mxc_data_iter_next(it), 1);
    int64_t n;
    float *labels = copy_out(mxc_data_iter_label(it), &n);
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq(labels[i], (float)i);
    free(labels);
    mxc_data_iter_free(it);
    free(buf);
    remove(rec);
    remove(idx);
    free(rec);
    free(idx);
    free(png);
}
END_TEST

START_TEST(errors) {
    size_t size;
    void *png = make_png(12, 10, &size);
    /* label vectors of 2 with label_width 1 */
    char *path = write_rec(png, size, 2, -1, 2);
    mxc_image_record_params ip = image_params(path, 10, 12);
    mxc_data_iter_params p = batch_params(2);
    mxc_data_iter *it;
    CK_OK(mxc_data_iter_create_image_record(&ip, &p, &it));
    ck_assert_int_eq(mxc_data_iter_next(it), MXC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "holds 2 labels, label_width is 1"));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), path));
    mxc_data_iter_free(it);
    ip.label_width = 2;
    CK_OK(mxc_data_iter_create_image_record(&ip, &p, &it));
    ck_assert_int_eq(mxc_data_iter_next(it), 1);
    mxc_shape ls;
    CK_OK(mxc_data_iter_provide_label(it, &ls));
    ck_assert_int_eq(ls.ndim, 2);
    ck_assert_int_eq(ls.dims[1], 2);
    mxc_data_iter_free(it);

    /* an image smaller than the crop is skipped like a corrupt one; all of them: error */
    ip = image_params(path, 11, 12);
    ip.label_width = 2;
    CK_OK(mxc_data_iter_create_image_record(&ip, &p, &it));
    ck_assert_int_eq(mxc_data_iter_next(it), MXC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "no record"));
    ck_assert_int_ge(mxc_data_iter_num_skipped(it), 2); /* each sample tried both */
    mxc_data_iter_free(it);

    /* bad options */
    mxc_image_record_params q = image_params(path, 10, 12);
    q.data_shape[0] = 1;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_ENOTSUP);
    q = image_params(path, 0, 12);
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    q = image_params(path, 10, 12);
    q.label_width = 0;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    q = image_params(path, 10, 12);
    q.resize = 0;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "resize is 0"));
    q = image_params(path, 10, 12);
    q.preprocess_threads = 0;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    q = image_params(path, 10, 12);
    q.std_g = 0;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "std_g"));
    q = image_params(path, 10, 12);
    q.dtype = MXC_FLOAT16;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "dtype 2 (float16)"));
    q.dtype = MXC_UINT8; /* raw pixels: normalisation settings would do nothing */
    q.mean_b = 10;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "dtype uint8 gives raw pixels"));
    q.mean_b = 0;
    q.scale = 0.5f;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    q.scale = 1;
    q.std_r = 2;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    /* the affine map, pad, interpolation, mean image */
    q = image_params(path, 10, 12);
    q.max_rotate_angle = -1;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "max_rotate_angle -1"));
    q = image_params(path, 10, 12);
    q.rotate = 361;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    q = image_params(path, 10, 12);
    q.max_shear_ratio = -0.5f;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "max_shear_ratio"));
    q = image_params(path, 10, 12);
    q.pad = -2;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    q = image_params(path, 10, 12);
    q.fill_value = 256;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "fill_value 256"));
    q = image_params(path, 10, 12);
    q.inter_method = 2;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "inter_method 2"));
    q.inter_method = 0; /* documented by MXNet, refused by its code */
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    q = image_params(rec_path(0, "images.rec"), 10, 12);
    q.mean_img = "/nonexistent/mean.nd"; /* computed, then not writable */
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EIO);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "/nonexistent/mean.nd"));
    q.mean_img = rec_path(1, "mean16.nd"); /* (3, 16, 16), not (3, 10, 12) */
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "(3, 10, 12)"));
    q.mean_img = rec_path(1, "images.rec"); /* not an NDArray file */
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EFORMAT);
    q.mean_img = rec_path(1, "mean16.nd");
    q.mean_g = 3; /* MXNet ignores it beside mean_img */
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "mean_img replaces"));
    q.mean_g = 0;
    q.dtype = MXC_UINT8;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    q = image_params(NULL, 10, 12);
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    ck_assert_int_eq(mxc_data_iter_create_image_record(NULL, &p, &it), MXC_EINVAL);
    q = image_params("/nonexistent.rec", 10, 12);
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EIO);
    p.batch_size = 0;
    q = image_params(path, 10, 12);
    ck_assert_int_eq(mxc_data_iter_create_image_record(&q, &p, &it), MXC_EINVAL);
    p.batch_size = 2;

    /* a damaged file: refused at creation with the offset */
    size_t n;
    char *whole = mxct_read_file(path, &n);
    FILE *f = fopen(path, "wb");
    fwrite(whole, 1, n - 3, f);
    fclose(f);
    free(whole);
    ip = image_params(path, 10, 12);
    ip.label_width = 2;
    ck_assert_int_eq(mxc_data_iter_create_image_record(&ip, &p, &it), MXC_EFORMAT);
    ck_assert_ptr_null(it);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "at byte"));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "mxc_data_iter_create_image_record"));

    remove(path);
    free(path);
    free(png);
}
END_TEST

/* ---- Random crops and mirrors ------------------------------------------------------ */

/* The crop offsets (x0, y0) and mirror flag of each row of a batch of (3, 10, 10) crops of
 * make_png images: red is 6x, green 8y. */
static void crop_of(const float *sample, int *x0, int *y0, bool *mirrored) {
    float first = sample[0], last = sample[9];
    *mirrored = last < first;
    *x0 = (int)lrintf((*mirrored ? last : first) / 6);
    *y0 = (int)lrintf(sample[100] / 8);
}

/* The crops of `epochs` epochs of 50 records, with `threads` threads: counts per offset. */
static void draw_crops(int threads, uint64_t seed, int epochs, int *xs, int *ys, int *mirrors,
                       int *trace, int trace_len) {
    size_t size;
    void *png = make_png(40, 30, &size);
    char *path = write_rec(png, size, 50, -1, 0);
    mxc_image_record_params ip = image_params(path, 10, 10);
    ip.rand_crop = 1;
    ip.rand_mirror = 1;
    ip.preprocess_threads = threads;
    mxc_data_iter_params p = batch_params(10);
    p.seed = seed;
    mxc_data_iter *it;
    CK_OK(mxc_data_iter_create_image_record(&ip, &p, &it));
    int t = 0;
    for (int e = 0; e < epochs; e++) {
        while (mxc_data_iter_next(it) == 1) {
            int64_t n;
            float *d = copy_out(mxc_data_iter_data(it), &n);
            for (int r = 0; r < 10; r++) {
                int x0, y0;
                bool m;
                crop_of(d + r * 300, &x0, &y0, &m);
                ck_assert(x0 >= 0 && x0 <= 30 && y0 >= 0 && y0 <= 20);
                /* the crop is the image's: green 8 * (y0 + i) down the rows */
                ck_assert_float_eq(d[r * 300 + 100 + 90], 8.0f * (float)(y0 + 9));
                xs[x0]++;
                ys[y0]++;
                *mirrors += m;
                if (t < trace_len)
                    trace[t++] = x0 * 1000 + y0 * 10 + m;
            }
            free(d);
        }
        CK_OK(mxc_data_iter_reset(it));
    }
    mxc_data_iter_free(it);
    remove(path);
    free(path);
    free(png);
}

START_TEST(random_crop_and_mirror) {
    int xs[31] = {0}, ys[21] = {0}, mirrors = 0, trace1[100], trace3[100];
    int epochs = 40; /* 2,000 draws */
    draw_crops(1, 7, epochs, xs, ys, &mirrors, trace1, 100);
    int draws = epochs * 50;
    /* uniform over [0, 30] and [0, 20]: chi-square well below its 0.1% tail */
    double chi_x = 0, chi_y = 0, ex = draws / 31.0, ey = draws / 21.0;
    for (int i = 0; i <= 30; i++)
        chi_x += (xs[i] - ex) * (xs[i] - ex) / ex;
    for (int i = 0; i <= 20; i++)
        chi_y += (ys[i] - ey) * (ys[i] - ey) / ey;
    ck_assert_msg(chi_x < 59.7, "x offsets: chi-square %g (30 degrees of freedom)", chi_x);
    ck_assert_msg(chi_y < 45.3, "y offsets: chi-square %g (20 degrees of freedom)", chi_y);
    ck_assert_int_gt(xs[0], 0);
    ck_assert_int_gt(xs[30], 0);
    ck_assert_int_gt(ys[20], 0);
    /* mirror rate 0.5: within 4 standard deviations (sqrt(2000) / 2 = 22) */
    ck_assert_msg(abs(mirrors - draws / 2) < 90, "%d mirrored of %d", mirrors, draws);

    /* the same seed with 3 threads: the same crops; another seed: others */
    int xs3[31] = {0}, ys3[21] = {0}, m3 = 0;
    draw_crops(3, 7, 2, xs3, ys3, &m3, trace3, 100);
    ck_assert_mem_eq(trace1, trace3, sizeof trace1);
    memset(xs3, 0, sizeof xs3);
    memset(ys3, 0, sizeof ys3);
    draw_crops(1, 8, 2, xs3, ys3, &m3, trace3, 100);
    ck_assert(memcmp(trace1, trace3, sizeof trace1) != 0);
}
END_TEST

/* ---- Scale, aspect ratio, colour --------------------------------------------------- */

/* Runs `epochs` epochs over 40 records of a 40 x 30 image (make_png_of) with the options
 * `set` adds, centre crops of (3, 10, 10); calls `each` per sample. */
static void draw_samples(bool gray, void (*set)(mxc_image_record_params *), int epochs,
                         void (*each)(const float *sample, void *user), void *user) {
    size_t size;
    void *png = make_png_of(40, 30, gray, &size);
    char *path = write_rec(png, size, 40, -1, 0);
    mxc_image_record_params ip = image_params(path, 10, 10);
    ip.preprocess_threads = 2;
    set(&ip);
    mxc_data_iter_params p = batch_params(10);
    p.seed = 11;
    mxc_data_iter *it;
    CK_OK(mxc_data_iter_create_image_record(&ip, &p, &it));
    for (int e = 0; e < epochs; e++) {
        int rc;
        while ((rc = mxc_data_iter_next(it)) == 1) {
            int64_t n;
            float *d = copy_out(mxc_data_iter_data(it), &n);
            for (int r = 0; r < 10; r++)
                each(d + r * 300, user);
            free(d);
        }
        ck_assert_msg(rc == 0, "%s", mxc_last_error());
        CK_OK(mxc_data_iter_reset(it));
    }
    ck_assert_int_eq(mxc_data_iter_num_skipped(it), 0);
    mxc_data_iter_free(it);
    remove(path);
    free(path);
    free(png);
}

struct stats {
    int n, bins[5];
    double sum, min, max, sum2;
};

static void add(struct stats *st, double v, double lo, double hi) {
    if (st->n == 0)
        st->min = st->max = v;
    st->n++;
    st->sum += v;
    st->sum2 += v * v;
    st->min = v < st->min ? v : st->min;
    st->max = v > st->max ? v : st->max;
    int b = (int)((v - lo) / (hi - lo) * 5);
    st->bins[b < 0 ? 0 : b > 4 ? 4 : b]++;
}

/* The content's horizontal and vertical scale in a centre crop: red rises 6 and green 8
 * per source pixel. */
static double across(const float *x) { return 6.0 * 9 / (x[9] - x[0]); }
static double down(const float *x) { return 8.0 * 9 / (x[100 + 90] - x[100]); }

static void set_scale(mxc_image_record_params *ip) {
    ip->min_random_scale = 0.5f;
    ip->max_random_scale = 1.0f;
}
static void each_scale(const float *x, void *user) {
    struct stats *st = user;
    double hs = across(x), ws = down(x);
    ck_assert_msg(fabs(hs - ws) < 0.08, "scales %g across, %g down", hs, ws);
    add(st, hs, 0.5, 1.0);
}

static void set_aspect(mxc_image_record_params *ip) { ip->max_aspect_ratio = 0.4f; }
static void each_aspect(const float *x, void *user) {
    struct stats *st = user;
    double hs = across(x), ws = down(x), ratio = ws / hs;
    /* hs = 2 / (1 + ratio): the area's scale stays 1 */
    ck_assert_msg(fabs(hs * (1 + ratio) / 2 - 1) < 0.06, "hs %g, ratio %g", hs, ratio);
    add(st, ratio, 0.6, 1.4);
}

/* Scales uniform in [0.5, 1], aspect ratios in [0.6, 1.4] (MXNet's definitions). */
START_TEST(random_scale_and_aspect) {
    struct stats st = {0};
    draw_samples(false, set_scale, 10, each_scale, &st);
    ck_assert_int_eq(st.n, 400);
    ck_assert_msg(st.min > 0.47 && st.max < 1.04, "scales in [%g, %g]", st.min, st.max);
    ck_assert_msg(fabs(st.sum / st.n - 0.75) < 0.03, "mean scale %g", st.sum / st.n);
    for (int b = 0; b < 5; b++)
        ck_assert_msg(st.bins[b] > 40, "scale bin %d: %d of 400", b, st.bins[b]);

    memset(&st, 0, sizeof st);
    draw_samples(false, set_aspect, 10, each_aspect, &st);
    ck_assert_msg(st.min > 0.57 && st.max < 1.45, "ratios in [%g, %g]", st.min, st.max);
    ck_assert_msg(fabs(st.sum / st.n - 1.0) < 0.04, "mean ratio %g", st.sum / st.n);
    for (int b = 0; b < 5; b++)
        ck_assert_msg(st.bins[b] > 40, "ratio bin %d: %d of 400", b, st.bins[b]);
}
END_TEST

/* The slopes of red (6 x in the source) along a sample's columns and rows: the least-squares
 * plane through its 100 pixels. */
static void red_slopes(const float *x, double *along_x, double *along_y) {
    *along_x = *along_y = 0;
    for (int i = 0; i < 100; i++) {
        *along_x += (i % 10 - 4.5) * x[i];
        *along_y += (i / 10 - 4.5) * x[i];
    }
    *along_x /= 825; /* 10 rows times the sum of (k - 4.5)^2 over k < 10 */
    *along_y /= 825;
}

static void set_rotate(mxc_image_record_params *ip) { ip->max_rotate_angle = 10; }
static void set_rotate5(mxc_image_record_params *ip) { ip->rotate = 5; }
/* Rotated by t: red = 6 (cos t x - sin t y) + c, so t = atan2(-d/dy, d/dx), measured within
 * about half a degree (the 8-bit rounding of a shallow ramp over a 10 x 10 crop). */
static void each_rotate(const float *x, void *user) {
    double dx, dy;
    red_slopes(x, &dx, &dy);
    add(user, atan2(-dy, dx) * 180 / M_PI, -12.5, 12.5); /* bins of 3, 5, 5, 5, 3 angles */
}

static void set_shear(mxc_image_record_params *ip) { ip->max_shear_ratio = 0.2f; }
/* Sheared by m ((x, y) -> (x + m y, y)): red = 6 (x - m y) + c, green (8 y) stays. */
static void each_shear(const float *x, void *user) {
    double dx, dy;
    red_slopes(x, &dx, &dy);
    ck_assert_msg(fabs(dx - 6) < 0.1, "red slope along x %g", dx);
    ck_assert_float_eq_tol(x[100 + 90] - x[100], 72.0f, 1.5f);
    add(user, -dy / 6, -0.2, 0.2);
}

/* Angles uniform over the whole degrees of [-10, 10], shears over [-0.2, 0.2]: range, mean,
 * variance, five bins. */
START_TEST(random_rotate_and_shear) {
    /* whole degrees uniform over [-10, 10]: mean 0, variance 10 * 11 / 3 */
    struct stats rot = {0};
    draw_samples(false, set_rotate, 40, each_rotate, &rot);
    ck_assert_int_eq(rot.n, 1600);
    double mean = rot.sum / rot.n, var = rot.sum2 / rot.n - mean * mean;
    ck_assert_msg(rot.min > -10.6 && rot.max < 10.6 && rot.min < -9.4 && rot.max > 9.4,
                  "angles in [%g, %g]", rot.min, rot.max);
    ck_assert_msg(fabs(mean) < 0.5, "mean angle %g", mean);
    ck_assert_msg(fabs(var - 110.0 / 3) < 3.7, "angle variance %g, not %g", var, 110.0 / 3);
    for (int b = 0; b < 5; b++) /* 229 or 381 expected */
        ck_assert_msg(rot.bins[b] > (b % 4 ? 310 : 175), "angle bin %d: %d of 1600", b,
                      rot.bins[b]);
    /* a fixed angle: every sample */
    memset(&rot, 0, sizeof rot);
    draw_samples(false, set_rotate5, 2, each_rotate, &rot);
    ck_assert_msg(rot.min > 4.7 && rot.max < 5.3, "rotate 5: [%g, %g]", rot.min, rot.max);

    struct stats st = {0};
    draw_samples(false, set_shear, 20, each_shear, &st);
    ck_assert_int_eq(st.n, 800);
    mean = st.sum / st.n, var = st.sum2 / st.n - mean * mean;
    ck_assert_msg(st.min > -0.21 && st.max < 0.21, "shears in [%g, %g]", st.min, st.max);
    ck_assert_msg(fabs(mean) < 0.02, "mean shear %g", mean);
    ck_assert_msg(fabs(var - 0.04 / 3) < 0.0025, "shear variance %g, not %g", var, 0.04 / 3);
    for (int b = 0; b < 5; b++)
        ck_assert_msg(st.bins[b] > 110, "shear bin %d: %d of 800", b, st.bins[b]);
}
END_TEST

static void set_l(mxc_image_record_params *ip) { ip->random_l = 40; }
/* Gray (100 + 2x): lightness moves every pixel by the same dl in [-39, 39], stays gray. */
static void each_l(const float *x, void *user) {
    struct stats *st = user;
    double dl = x[0] - (100 + 2 * 15); /* the centre crop starts at column 15 */
    for (int i = 0; i < 100; i++) {
        ck_assert_float_eq(x[i], x[100 + i]);
        ck_assert_float_eq(x[i], x[200 + i]);
        ck_assert_float_eq(x[i] - (float)(100 + 2 * (15 + i % 10)), (float)dl);
    }
    add(st, dl, -40, 40);
}

static void set_h(mxc_image_record_params *ip) { ip->random_h = 30; }
/* Hue moves, lightness ((max + min) / 2) stays within a level or two of the source's. */
static void each_h(const float *x, void *user) {
    struct stats *st = user;
    int changed = 0;
    for (int i = 0; i < 100; i++) {
        float src[3] = {6.0f * (15 + i % 10), 8.0f * (10 + i / 10), 100};
        float r = x[i], g = x[100 + i], b = x[200 + i];
        float l_out = (fmaxf(r, fmaxf(g, b)) + fminf(r, fminf(g, b))) / 2;
        float l_in =
            (fmaxf(src[0], fmaxf(src[1], src[2])) + fminf(src[0], fminf(src[1], src[2]))) / 2;
        ck_assert_msg(fabsf(l_out - l_in) <= 2.5f, "lightness %g -> %g", l_in, l_out);
        changed += r != src[0] || g != src[1] || b != src[2];
    }
    add(st, changed, 0, 100);
}

START_TEST(random_hls) {
    struct stats st = {0};
    draw_samples(true, set_l, 5, each_l, &st);
    ck_assert_msg(st.min >= -39 && st.max <= 39, "dl in [%g, %g]", st.min, st.max);
    ck_assert_msg(st.min < -30 && st.max > 30, "dl in [%g, %g]", st.min, st.max);
    ck_assert_msg(fabs(st.sum / st.n) < 5, "mean dl %g", st.sum / st.n);

    memset(&st, 0, sizeof st);
    draw_samples(false, set_h, 2, each_h, &st);
    ck_assert_msg(st.sum / st.n > 50, "on average %g of 100 pixels changed", st.sum / st.n);
}
END_TEST

/* ---- im2rec ------------------------------------------------------------------------ */

static void put_file(const char *dir, const char *name, const void *bytes, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static char *sub(const char *dir, const char *name) {
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    return path;
}

/* The records of a .rec file: keys, labels and image sizes as read back. */
static int read_back(const char *rec, const char *idx, int64_t *keys, float *labels, int *shorter) {
    mxc_recordio *r;
    CK_OK(mxc_recordio_open(rec, idx, 0, &r));
    const int64_t *k;
    size_t n;
    CK_OK(mxc_recordio_keys(r, &k, &n));
    const void *data, *image;
    size_t size, image_size;
    for (size_t i = 0; i < n; i++) {
        keys[i] = k[i];
        ck_assert_int_eq(mxc_recordio_read(r, &data, &size), 1);
        mxc_image_record h;
        CK_OK(mxc_recordio_unpack_image(data, size, &h, &image, &image_size));
        ck_assert_int_eq(h.flag, 0);
        ck_assert_uint_eq(h.id, (uint64_t)k[i]);
        labels[i] = h.label;
        struct mxc__image img = {0};
        shorter[i] = -1;
        if (mxc__image_decode("r", image, image_size, &img) == MXC_OK)
            shorter[i] = img.height < img.width ? img.height : img.width;
        mxc__image_free(&img);
    }
    CK_OK(mxc_recordio_close(r));
    return (int)n;
}

START_TEST(im2rec_folders) {
    char *root = mxct_temp_dir("mxc-im2rec-");
    char *cat = sub(root, "cat"), *dog = sub(root, "dog"), *hidden = sub(root, ".hidden");
    ck_assert_int_eq(mkdir(cat, 0755), 0);
    ck_assert_int_eq(mkdir(dog, 0755), 0);
    ck_assert_int_eq(mkdir(hidden, 0755), 0);
    size_t n1, n2;
    void *a = make_png(20, 12, &n1), *b = make_png_of(16, 30, true, &n2);
    put_file(cat, "b.png", b, n2);
    put_file(cat, "a.png", a, n1);
    put_file(cat, "notes.txt", "x", 1);
    put_file(dog, "x.PNG", a, n1);
    put_file(dog, "y.jpg", "not a jpeg", 10);
    put_file(hidden, "z.png", a, n1);

    char *lst = sub(root, "all.lst"), *rec = sub(root, "all.rec"), *idx = sub(root, "all.idx");
    int64_t count;
    CK_OK(mxc_im2rec_make_list(root, lst, 0, 0, &count));
    ck_assert_int_eq(count, 4);
    char *text = mxct_read_file(lst, NULL);
    ck_assert_str_eq(text, "0\t0.000000\tcat/a.png\n1\t0.000000\tcat/b.png\n"
                           "2\t1.000000\tdog/x.PNG\n3\t1.000000\tdog/y.jpg\n");
    free(text);

    /* the files' bytes as they are: the broken one too */
    mxc_im2rec_params ip;
    mxc_im2rec_params_init(&ip);
    ck_assert_int_eq(ip.quality, 95);
    CK_OK(mxc_im2rec(lst, root, rec, idx, &ip, &count));
    ck_assert_int_eq(count, 4);
    int64_t keys[8];
    float labels[8];
    int shorter[8];
    ck_assert_int_eq(read_back(rec, idx, keys, labels, shorter), 4);
    static const float want_labels[] = {0, 0, 1, 1};
    static const int want_shorter[] = {12, 16, 12, -1};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(keys[i], i);
        ck_assert_float_eq(labels[i], want_labels[i]);
        ck_assert_int_eq(shorter[i], want_shorter[i]);
    }
    mxc_recordio *r;
    CK_OK(mxc_recordio_open(rec, idx, 0, &r));
    const void *data, *image;
    size_t size, image_size;
    CK_OK(mxc_recordio_seek(r, 1));
    ck_assert_int_eq(mxc_recordio_read(r, &data, &size), 1);
    mxc_image_record h;
    CK_OK(mxc_recordio_unpack_image(data, size, &h, &image, &image_size));
    ck_assert_uint_eq(image_size, n2);
    ck_assert_mem_eq(image, b, n2);
    CK_OK(mxc_recordio_close(r));

    /* resized and re-encoded, on 3 threads: the broken file skipped; 1 thread: same bytes */
    ip.resize = 8;
    ip.quality = 90;
    ip.num_threads = 3;
    CK_OK(mxc_im2rec(lst, root, rec, idx, &ip, &count));
    ck_assert_int_eq(count, 3);
    ck_assert_int_eq(read_back(rec, idx, keys, labels, shorter), 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(shorter[i], 8);
    size_t len3, len1;
    char *three = mxct_read_file(rec, &len3);
    ip.num_threads = 1;
    CK_OK(mxc_im2rec(lst, root, rec, idx, &ip, &count));
    char *one = mxct_read_file(rec, &len1);
    ck_assert_uint_eq(len1, len3);
    ck_assert_mem_eq(one, three, len1);
    free(one);
    free(three);

    /* the iterator reads it */
    mxc_image_record_params rp = image_params(rec, 8, 8);
    rp.path_imgidx = idx;
    mxc_data_iter_params p = batch_params(3);
    mxc_data_iter *it;
    CK_OK(mxc_data_iter_create_image_record(&rp, &p, &it));
    ck_assert_int_eq(mxc_data_iter_next(it), 1);
    mxc_data_iter_free(it);

    /* shuffled lists: a permutation, the same for a seed */
    CK_OK(mxc_im2rec_make_list(root, lst, 1, 5, &count));
    char *s1 = mxct_read_file(lst, NULL);
    CK_OK(mxc_im2rec_make_list(root, lst, 1, 5, &count));
    char *s2 = mxct_read_file(lst, NULL);
    ck_assert_str_eq(s1, s2);
    ck_assert_ptr_nonnull(strstr(s1, "2\t1.000000\tdog/x.PNG\n"));
    free(s1);
    free(s2);

    /* errors */
    put_file(root, "bad.lst", "0\t0.0\n", 6);
    char *bad = sub(root, "bad.lst");
    ck_assert_int_eq(mxc_im2rec(bad, root, rec, idx, &ip, &count), MXC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "bad.lst':1"));
    ip.quality = 0;
    ck_assert_int_eq(mxc_im2rec(lst, root, rec, idx, &ip, &count), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "mxc_im2rec: quality is 0"));
    ck_assert_int_eq(mxc_im2rec(NULL, root, rec, idx, &ip, &count), MXC_EINVAL);
    ck_assert_int_eq(mxc_im2rec_make_list(cat, lst, 0, 0, &count), MXC_EFORMAT);
    ck_assert_int_eq(mxc_im2rec_make_list("/nonexistent", lst, 0, 0, &count), MXC_EIO);
    ck_assert_int_eq(mxc_im2rec_make_list(NULL, lst, 0, 0, &count), MXC_EINVAL);

    const char *all[] = {"cat/a.png",     "cat/b.png", "cat/notes.txt", "dog/x.PNG", "dog/y.jpg",
                         ".hidden/z.png", "all.lst",   "all.rec",       "all.idx",   "bad.lst"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        char *f = sub(root, all[i]);
        remove(f);
        free(f);
    }
    rmdir(cat);
    rmdir(dog);
    rmdir(hidden);
    rmdir(root);
    free(bad);
    free(lst);
    free(rec);
    free(idx);
    free(cat);
    free(dog);
    free(hidden);
    free(root);
    free(a);
    free(b);
}
END_TEST

/* `mxc im2rec` and `mxc train --data rec:` as a user runs them (the mxc binary beside this
 * test). */
static char mxc_bin[4096];

/* Every value of `got` within `tol` of MXNet's `want` (as float32 tensors). */
static void expect_near_mxnet(mxc_ndarray *got_array, const struct mxct_tensor *want, float tol,
                              const char *what) {
    int64_t n;
    float *got = copy_out(got_array, &n);
    ck_assert_int_eq(n, mxc_shape_size(&want->shape));
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabsf(got[i] - want->data[i]) <= tol, "%s value %lld: %.9g vs MXNet's %.9g",
                      what, (long long)i, got[i], want->data[i]);
    free(got);
}

/* A mean_img that names no file is computed as MXNet computes it (the mean of the samples
 * normalised by scale and std, with any thread count), saved under "mean_img", and used:
 * the file and the first batch equal MXNet's (scripts/gen_rec_fixtures.py, MADE_MEAN);
 * the next iterator reads the saved file. */
START_TEST(made_mean_img) {
    char *dir = mxct_temp_dir("mxc-mean-");
    char made[1024];
    snprintf(made, sizeof made, "%s/mean.nd", dir);
    mxc_image_record_params ip = image_params(rec_path(0, "images.rec"), 12, 14);
    ip.resize = 16;
    ip.std_r = 2, ip.std_g = 4, ip.std_b = 8;
    ip.scale = 0.5f;
    ip.mean_img = made;
    ip.preprocess_threads = 3;
    mxc_data_iter_params p = batch_params(4);
    struct mxct_tensor mean = mxct_ref_load("io/rec/made_mean.params", "mean_img");
    struct mxct_tensor data0 = mxct_ref_load("io/rec/made_mean.params", "data0");
    for (int run = 0; run < 2; run++) { /* computed, then read back */
        mxc_data_iter *it = NULL;
        CK_OK(mxc_data_iter_create_image_record(&ip, &p, &it));
        size_t n = 0;
        mxc_ndarray **arrays = NULL;
        char **names = NULL;
        CK_OK(mxc_nd_load(made, mxc_cpu(), &n, &arrays, &names));
        ck_assert_msg(n == 1 && names && strcmp(names[0], "mean_img") == 0, "%zu arrays", n);
        expect_near_mxnet(arrays[0], &mean, 1e-5f, "mean_img");
        mxc_nd_list_free(n, arrays, names);
        ck_assert_int_eq(mxc_data_iter_next(it), 1);
        expect_near_mxnet(mxc_data_iter_data(it), &data0, 1e-5f, "the first batch");
        mxc_data_iter_free(it);
    }
    mxct_tensors_free(&mean, 1);
    mxct_tensors_free(&data0, 1);
    remove(made);
    rmdir(dir);
    free(dir);
}
END_TEST

static int run_mxc(const char *args, char *out, size_t cap) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", mxc_bin, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

START_TEST(im2rec_and_train_commands) {
    if (access(mxc_bin, X_OK) != 0) {
        printf("check_image_iter: skipping the command test: no %s (make tools)\n", mxc_bin);
        return;
    }
    char *root = mxct_temp_dir("mxc-cli-rec-");
    size_t n;
    void *png = make_png(32, 30, &n);
    for (int c = 0; c < 2; c++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/class%d", root, c);
        ck_assert_int_eq(mkdir(dir, 0755), 0);
        for (int i = 0; i < 10; i++) {
            char name[32];
            snprintf(name, sizeof name, "%d.png", i);
            put_file(dir, name, png, n);
        }
    }
    static char out[1 << 16];
    char args[4096];
    snprintf(args, sizeof args, "im2rec %s/data %s --resize 28 --threads 2", root, root);
    ck_assert_msg(run_mxc(args, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "packed 20 images"));
    /* the MLP, and ResNet-18 (global pooling: any image size) on small crops */
    const char *nets[2][2] = {{"mlp", "3,28,28"}, {"resnet", "3,8,8"}};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args,
                 "train --network %s --data rec:%s/data.rec,%s/data.rec --data-shape %s "
                 "--epochs 1 --batch-size 5 --frequent 0 --json --prefix %s/%s",
                 nets[k][0], root, root, nets[k][1], root, nets[k][0]);
        ck_assert_msg(run_mxc(args, out, sizeof out) == 0, "%s", out);
        ck_assert_ptr_nonnull(strstr(out, "\"test_accuracy\""));
        snprintf(args, sizeof args, "%s/%s-0001.params", root, nets[k][0]);
        ck_assert_int_eq(access(args, R_OK), 0);
    }
    /* the training set's augmenters under MXNet's names; an unknown name is a usage error,
     * a value out of range the library's refusal */
    snprintf(args, sizeof args,
             "train --network mlp --data rec:%s/data.rec,%s/data.rec --data-shape 3,28,28 "
             "--epochs 1 --batch-size 5 --frequent 0 --json --prefix %s/aug "
             "--aug max_rotate_angle=15,max_shear_ratio=0.1,pad=2,fill_value=0,random_l=20",
             root, root, root);
    ck_assert_msg(run_mxc(args, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\"test_accuracy\""));
    snprintf(args, sizeof args,
             "train --network mlp --data rec:%s/data.rec --data-shape 3,28,28 --aug tilt=3", root);
    ck_assert_int_eq(run_mxc(args, out, sizeof out), 2);
    ck_assert_ptr_nonnull(strstr(out, "unknown augmenter"));
    snprintf(args, sizeof args,
             "train --network mlp --data rec:%s/data.rec --data-shape 3,28,28 "
             "--aug max_rotate_angle=400",
             root);
    ck_assert_int_eq(run_mxc(args, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "max_rotate_angle"));
    /* usage errors */
    ck_assert_int_eq(run_mxc("im2rec --resize 3", out, sizeof out), 2);
    snprintf(args, sizeof args, "train --network mlp --data rec:%s/data.rec --data-shape 3,28",
             root);
    ck_assert_int_eq(run_mxc(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "rm -rf '%s'", root);
    ck_assert_int_eq(system(args), 0);
    free(root);
    free(png);
}
END_TEST

static Suite *image_iter_suite(void) {
    Suite *s = suite_create("image_iter");
    TCase *tc = tcase_create("image_iter");
    tcase_set_timeout(tc, mxct_timeout(60));
    tcase_add_loop_test(tc, matches_mxnet, 0, 4);
    tcase_add_test(tc, corrupt_records_skipped);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, index_with_repeated_keys);
    tcase_add_test(tc, random_crop_and_mirror);
    tcase_add_test(tc, random_scale_and_aspect);
    tcase_add_test(tc, random_hls);
    tcase_add_test(tc, random_rotate_and_shear);
    tcase_add_test(tc, im2rec_folders);
    tcase_add_test(tc, im2rec_and_train_commands);
    tcase_add_test(tc, made_mean_img);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = '\0';
        snprintf(mxc_bin, sizeof mxc_bin, "%s/mxc", dirname(self));
    }
    return mxct_run_suite(image_iter_suite());
}

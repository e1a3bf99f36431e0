/*
 * tests/check_image.c — image decoding (io/image.c): the JPEGs (RGB 4:2:0 and 4:4:4,
 * progressive, grayscale, CMYK) and PNGs (RGB, grayscale, RGBA, palette) of
 * tests/data/io/rec/images.rec decode to exactly the pixels MXNet 1.9.1's imdecode gives
 * (decoded.params, scripts/gen_rec_fixtures.py); truncated, damaged and foreign data is
 * MXC_EFORMAT naming the image, never a crash (run under AddressSanitizer too), with every
 * byte of a JPEG and a PNG damaged in turn; every allocation failing in turn.
 *
 * Run from the repository root, or point MXC_TEST_DATA at tests/data.
 */
#include "mxc/recordio.h"
#include "common/common.h"
#include "io/io_impl.h"
#include "tests/util/op_check.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NUM_IMAGES 9

static const char *const image_names[NUM_IMAGES] = {"rgb420.jpg", "rgb444.jpg", "progressive.jpg",
                                                    "gray.jpg",   "cmyk.jpg",   "rgb.png",
                                                    "gray.png",   "rgba.png",   "palette.png"};

/* The encoded bytes of image `i` of images.rec (a new buffer) and their size. */
static uint8_t *image_bytes(int i, size_t *size) {
    const char *dir = getenv("MXC_TEST_DATA");
    char rec[512], idx[512];
    snprintf(rec, sizeof rec, "%s/io/rec/images.rec", dir && *dir ? dir : "tests/data");
    snprintf(idx, sizeof idx, "%s/io/rec/images.idx", dir && *dir ? dir : "tests/data");
    mxc_recordio *r;
    CK_OK(mxc_recordio_open(rec, idx, 0, &r));
    CK_OK(mxc_recordio_seek(r, i));
    const void *data, *image;
    size_t n;
    ck_assert_int_eq(mxc_recordio_read(r, &data, &n), 1);
    mxc_image_record h;
    CK_OK(mxc_recordio_unpack_image(data, n, &h, &image, size));
    uint8_t *copy = malloc(*size);
    memcpy(copy, image, *size);
    CK_OK(mxc_recordio_close(r));
    return copy;
}

/* Each image against MXNet's pixels: exact. */
START_TEST(decode_like_mxnet) {
    int i = _i;
    size_t size;
    uint8_t *bytes = image_bytes(i, &size);
    struct mxc__image img = {0};
    CK_OK(mxc__image_decode(image_names[i], bytes, size, &img));
    char name[16];
    snprintf(name, sizeof name, "img%d", i);
    struct mxct_tensor ref = mxct_ref_load("io/rec/decoded.params", name);
    ck_assert_int_eq(ref.shape.ndim, 3);
    ck_assert_int_eq(img.height, ref.shape.dims[0]);
    ck_assert_int_eq(img.width, ref.shape.dims[1]);
    ck_assert_int_eq(ref.shape.dims[2], 3);
    int64_t n = mxc_shape_size(&ref.shape), differ = 0, worst = -1;
    float worst_diff = 0;
    for (int64_t k = 0; k < n; k++) {
        float d = (float)img.data[k] - ref.data[k];
        if (d != 0) {
            differ++;
            if (d * d > worst_diff * worst_diff) {
                worst_diff = d;
                worst = k;
            }
        }
    }
    ck_assert_msg(differ == 0,
                  "%s: %lld of %lld values differ from MXNet's; worst at %lld: %d vs %g",
                  image_names[i], (long long)differ, (long long)n, (long long)worst,
                  worst >= 0 ? img.data[worst] : 0, worst >= 0 ? ref.data[worst] : 0);
    /* the gray images are gray in every channel */
    if (i == 3 || i == 6)
        for (int64_t k = 0; k < n; k += 3)
            ck_assert(img.data[k] == img.data[k + 1] && img.data[k] == img.data[k + 2]);
    mxct_tensors_free(&ref, 1);
    mxc__image_free(&img);
    free(bytes);
}
END_TEST

/* Cut short, foreign or empty data: MXC_EFORMAT naming the image and the reason. */
START_TEST(bad_images) {
    struct mxc__image img = {0};
    size_t size;
    for (int i = 0; i < NUM_IMAGES; i++) {
        uint8_t *bytes = image_bytes(i, &size);
        int rc = mxc__image_decode("record 12 of 'x.rec'", bytes, size / 2, &img);
        ck_assert_msg(rc == MXC_EFORMAT, "%s cut in half: %d", image_names[i], rc);
        ck_assert_ptr_nonnull(strstr(mxc_last_error(), "record 12 of 'x.rec'"));
        ck_assert_ptr_nonnull(strstr(mxc_last_error(), i < 5 ? "corrupt JPEG" : "corrupt PNG"));
        free(bytes);
    }
    ck_assert_int_eq(mxc__image_decode("r", "GIF89a..", 8, &img), MXC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "neither JPEG nor PNG"));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "47 49 46"));
    ck_assert_int_eq(mxc__image_decode("r", "", 0, &img), MXC_EFORMAT);
    ck_assert_int_eq(mxc__image_decode("r", "\xff\xd8\xff", 3, &img), MXC_EFORMAT);

    /* a buffer reused by a smaller image after a larger one, and after a failure */
    uint8_t *bytes = image_bytes(0, &size);
    CK_OK(mxc__image_decode("r", bytes, size, &img));
    ck_assert_int_eq(img.height * img.width, 20 * 24);
    mxc__image_free(&img);
    free(bytes);
}
END_TEST

/* Every byte of a JPEG and a PNG replaced in turn: a picture or MXC_EFORMAT, nothing else. */
START_TEST(damaged_everywhere) {
    static const uint8_t values[] = {0x00, 0xff, 0x13};
    struct mxc__image img = {0};
    int failed = 0, decoded = 0;
    for (int which = 0; which < 2; which++) {
        int i = which ? 5 : 0;
        size_t size;
        uint8_t *bytes = image_bytes(i, &size);
        uint8_t *copy = malloc(size);
        for (size_t at = 0; at < size; at++) {
            for (size_t v = 0; v < sizeof values; v++) {
                memcpy(copy, bytes, size);
                copy[at] = values[v];
                int rc = mxc__image_decode(image_names[i], copy, size, &img);
                ck_assert_msg(rc == MXC_OK || rc == MXC_EFORMAT, "%s byte %zu: %d %s",
                              image_names[i], at, rc, mxc_last_error());
                if (rc == MXC_OK) {
                    decoded++;
                    ck_assert_int_gt(img.height, 0);
                } else {
                    failed++;
                }
            }
        }
        free(copy);
        free(bytes);
    }
    ck_assert_int_gt(failed, 0);
    ck_assert_int_gt(decoded, 0);
    mxc__image_free(&img);
}
END_TEST

/* Every allocation of decoding (JPEG and PNG), resizing and encoding failing in turn: a
 * clean MXC_ENOMEM and nothing leaked. */
START_TEST(alloc_failure_sweep) {
    const char *fork = getenv("CK_FORK");
    if (fork && strcmp(fork, "no") == 0) {
        printf("check_image: skipping alloc_failure_sweep: needs Check's fork mode\n");
        return;
    }
    static struct mxct_alloc_counts counts;
    size_t jsize, psize;
    mxct_alloc_install(&counts); /* the first mxc call of this process */
    uint8_t *jpeg = image_bytes(4, &jsize), *png = image_bytes(8, &psize); /* CMYK, palette */
    long before = atomic_load(&counts.live), n;
    for (n = 0; n < 100; n++) {
        mxct_alloc_fail_after(&counts, n);
        struct mxc__image a = {0}, b = {0};
        unsigned char *out = NULL;
        unsigned long out_size = 0;
        int rc = mxc__image_decode("jpeg", jpeg, jsize, &a);
        if (rc == MXC_OK)
            rc = mxc__image_decode("png", png, psize, &b);
        if (rc == MXC_OK)
            rc = mxc__image_resize_shorter(&a, 30, &b, "resize");
        if (rc == MXC_OK)
            rc = mxc__image_encode_jpeg(&b, 90, "encode", &out, &out_size);
        mxct_alloc_fail_after(&counts, -1);
        free(out);
        mxc__image_free(&a);
        mxc__image_free(&b);
        ck_assert_int_eq(atomic_load(&counts.live), before);
        if (rc == MXC_OK)
            break;
        ck_assert_msg(rc == MXC_ENOMEM, "allocation %ld: %s: %s", n, mxc_err_name(rc),
                      mxc_last_error());
    }
    ck_assert_msg(n > 0 && n < 100, "no allocation failure was met (n = %ld)", n);
    free(jpeg);
    free(png);
}
END_TEST

static Suite *image_suite(void) {
    Suite *s = suite_create("image");
    TCase *tc = tcase_create("image");
    tcase_set_timeout(tc, mxct_timeout(60));
    tcase_add_loop_test(tc, decode_like_mxnet, 0, NUM_IMAGES);
    tcase_add_test(tc, bad_images);
    tcase_add_test(tc, damaged_everywhere);
    tcase_add_test(tc, alloc_failure_sweep);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(image_suite()); }

/*
 * bench/bench_io.c — the image record pipeline's throughput: decoded-and-augmented images
 * per second of mxc_data_iter_create_image_record at 224 x 224 (resize 256, rand_crop,
 * rand_mirror, float32 output, MXNet's ImageNet settings) with 1 and 2 preprocess threads,
 * over a .rec file of JPEGs.
 *
 *   build/bin/bench_io [--json] [--rec PATH] [--images N] [--threads 1,2] [--epochs E]
 *
 * --rec PATH reads PATH, writing it first when it does not exist (N JPEGs of 500 x 375
 * pixels, quality 90, made from a smooth pattern with noise: about the size and decoding
 * cost of an ImageNet photo), so scripts/bench_io_mxnet.sh can give MXNet 1.9.1's
 * ImageRecordIter the same file. Without --rec a temporary file is made and removed.
 * Each thread count runs `epochs` epochs (default 2) of batches of 32 after one warm-up
 * batch; the figure is images / second over them. --json prints one object per thread
 * count: bench "io", case "rec_224_t<threads>", images_per_s, threads, images, seconds.
 * The MXNet baseline and the ratio come from scripts/bench_io_mxnet.sh (make bench).
 */
#include "mxc/mxc.h"

#include "bench/bench_util.h"
#include "io/io_impl.h"

#include <stdbool.h>
#include <unistd.h>

#define FAIL(what)                                                     \
    do {                                                               \
        fprintf(stderr, "bench_io: %s: %s\n", what, mxc_last_error()); \
        exit(1);                                                       \
    } while (0)

/* Writes `n` image records (label i % 10) of 500 x 375 JPEGs (the size of a typical
 * ImageNet photo, which resize 256 scales to 341 x 256) to `path` and its .idx. */
static void make_rec(const char *path, int n) {
    char idx[4096];
    snprintf(idx, sizeof idx, "%.*s.idx", (int)(strlen(path) > 4 ? strlen(path) - 4 : 0), path);
    mxc_recordio *w;
    if (mxc_recordio_open(path, idx, 1, &w) != MXC_OK)
        FAIL("writing the records");
    struct mxc__image img = {0};
    if (mxc__image_reserve(&img, "bench", 375, 500) != MXC_OK)
        FAIL("an image");
    uint64_t state = 42;
    for (int i = 0; i < n; i++) {
        for (int y = 0; y < img.height; y++)
            for (int x = 0; x < img.width; x++)
                for (int c = 0; c < 3; c++) {
                    int v = (x * (3 + c + i % 5) + y * (2 + c) + 40 * c + 7 * i) % 256;
                    v += (int)(mxc__io_splitmix64(&state) % 17) - 8;
                    img.data[((size_t)y * img.width + x) * 3 + c] = (uint8_t)(v < 0     ? 0
                                                                              : v > 255 ? 255
                                                                                        : v);
                }
        unsigned char *jpeg = NULL;
        unsigned long size = 0;
        if (mxc__image_encode_jpeg(&img, 90, "bench", &jpeg, &size) != MXC_OK)
            FAIL("encoding");
        size_t cap = size + 64, got;
        void *rec = malloc(cap);
        mxc_image_record h = {.label = (float)(i % 10), .id = (uint64_t)i};
        if (!rec || mxc_recordio_pack_image(&h, NULL, 0, jpeg, size, rec, cap, &got) != MXC_OK ||
            mxc_recordio_write_idx(w, i, rec, got) != MXC_OK)
            FAIL("packing");
        free(rec);
        free(jpeg);
    }
    mxc__image_free(&img);
    if (mxc_recordio_close(w) != MXC_OK)
        FAIL("closing the records");
}

/* Images per second with `threads` preprocess threads over `epochs` epochs. */
static double measure(const char *path, int threads, int epochs, int64_t *images, double *seconds) {
    mxc_image_record_params ip;
    mxc_image_record_params_init(&ip);
    ip.path_imgrec = path;
    ip.data_shape[0] = 3;
    ip.data_shape[1] = ip.data_shape[2] = 224;
    ip.resize = 256;
    ip.rand_crop = ip.rand_mirror = 1;
    ip.preprocess_threads = threads;
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = 32;
    p.shuffle = 1;
    mxc_data_iter *it;
    if (mxc_data_iter_create_image_record(&ip, &p, &it) != MXC_OK)
        FAIL("creating the iterator");
    if (mxc_data_iter_next(it) != 1) /* warm-up: threads started, buffers touched */
        FAIL("the first batch");
    int64_t n = 0;
    uint64_t start = bench_now_ns();
    for (int e = 0; e < epochs; e++) {
        int rc;
        while ((rc = mxc_data_iter_next(it)) == 1)
            n += 32 - mxc_data_iter_pad(it);
        if (rc < 0)
            FAIL("a batch");
        if (mxc_data_iter_reset(it) != MXC_OK)
            FAIL("reset");
    }
    *seconds = (double)(bench_now_ns() - start) * 1e-9;
    *images = n;
    mxc_data_iter_free(it);
    return (double)n / *seconds;
}

int main(int argc, char **argv) {
    bool json = false;
    const char *rec = NULL, *threads_arg = "1,2";
    int images = 256, epochs = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--rec") == 0 && v) {
            rec = v, i++;
        } else if (strcmp(a, "--images") == 0 && v && atoi(v) > 0) {
            images = atoi(v), i++;
        } else if (strcmp(a, "--threads") == 0 && v) {
            threads_arg = v, i++;
        } else if (strcmp(a, "--epochs") == 0 && v && atoi(v) > 0) {
            epochs = atoi(v), i++;
        } else {
            fprintf(stderr,
                    "usage: %s [--json] [--rec PATH] [--images N] [--threads 1,2] "
                    "[--epochs E]\n",
                    argv[0]);
            return 2;
        }
    }
    char tmp[64] = "", tmp_idx[80] = "";
    if (!rec) {
        snprintf(tmp, sizeof tmp, "/tmp/mxc-bench-io-%d.rec", (int)getpid());
        snprintf(tmp_idx, sizeof tmp_idx, "/tmp/mxc-bench-io-%d.idx", (int)getpid());
        rec = tmp;
    }
    if (access(rec, R_OK) != 0) {
        fprintf(stderr, "bench_io: writing %d images to %s\n", images, rec);
        make_rec(rec, images);
    }
    char list[64];
    snprintf(list, sizeof list, "%s", threads_arg);
    for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
        int threads = atoi(t);
        if (threads < 1 || threads > 64) {
            fprintf(stderr, "bench_io: bad thread count '%s'\n", t);
            return 2;
        }
        int64_t n;
        double seconds, rate = measure(rec, threads, epochs, &n, &seconds);
        if (json) {
            char kase[32];
            snprintf(kase, sizeof kase, "rec_224_t%d", threads);
            bench_json j;
            bench_json_begin(&j, "io", kase);
            bench_json_str(&j, "system", "mxc");
            bench_json_num(&j, "images_per_s", rate);
            bench_json_num(&j, "threads", threads);
            bench_json_num(&j, "images", (double)n);
            bench_json_num(&j, "seconds", seconds);
            bench_json_print(&j, stdout);
        } else {
            printf("image records at 224x224, %d thread%s: %.1f images/s (%lld in %.2f s)\n",
                   threads, threads == 1 ? "" : "s", rate, (long long)n, seconds);
        }
    }
    if (tmp[0]) {
        remove(tmp);
        remove(tmp_idx);
    }
    return 0;
}

/*
 * io/image_iter.c — the image record iterator (mxc_data_iter_create_image_record): a
 * source for the common iterator (iter.c) whose samples are the image records of a
 * RecordIO file, decoded (image.c), resized, cropped, mirrored and normalised as MXNet's
 * ImageRecordIter does (src/io/iter_image_recordio_2.cc and image_aug_default.cc there).
 *
 * Records are located once, at creation (offsets from the index, or a scan of the part
 * headers); samples are read by offset. A batch is spread over `preprocess_threads`
 * workers: the prefetch thread posts it, every worker (the prefetch thread too) takes the
 * next sample from a shared counter and writes its rows of the batch, and the prefetch
 * thread returns when all are done. Each worker has its own file handle and image
 * buffers, so workers share nothing but the counter, the first error and the skip count.
 * Random draws come from (seed, epoch, position in the epoch) alone, never from which
 * worker ran a sample, so a seed gives the same batches with any number of threads.
 */
#include "common/common.h"
#include "common/thread.h"
#include "io/io_impl.h"

#include <inttypes.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 64

struct image_source;

/* One decoding thread's own state. */
struct worker {
    struct image_source *src;
    mxc_recordio *rec; /* its own handle on the .rec file */
    struct mxc__image img, resized, warped, padded;
    mxc__thread thread;
    bool started;
};

struct image_source {
    mxc_image_record_params p;
    char *path;
    uint64_t *offsets; /* of the records, in file order */
    int64_t count;
    int64_t height, width; /* of a sample */
    float mean[3], mult[3];
    uint64_t seed;
    bool affine;    /* rotation, shear, random scale or aspect ratio */
    float *meanimg; /* mean_img's (3, H, W) values, or NULL */
    int num_workers;
    struct worker *workers;
    _Atomic int64_t skipped;

    /* The batch being filled: posted under `lock`, then read-only until done. */
    mxc__mutex lock;
    mxc__cond start_cv, done_cv;
    uint64_t generation; /* +1 per posted batch */
    bool stop;
    int busy; /* workers still on the batch */
    int64_t epoch, first, n;
    const int64_t *index;
    unsigned char *data; /* p.dtype elements */
    float *label;
    _Atomic int64_t next; /* next sample of the batch to take */
    int rc;               /* the batch's first error, with its message */
    char message[512];
};

/* ---- One sample ---------------------------------------------------------------------- */

/* Uniform in [0, 1). */
static float uniform(uint64_t *state) {
    return (float)(mxc__io_splitmix64(state) >> 40) * (1.0f / 16777216.0f);
}

/* MXNet's affine augmentation (image_aug_default.cc): shear s from [-max_shear_ratio,
 * max_shear_ratio], an angle of whole degrees from [-max_rotate_angle, max_rotate_angle]
 * (or `rotate` when > 0), scale and aspect ratio as documented in mxc/io.h. The canvas is
 * (scale * rows, scale * cols), truncated, and the image is mapped onto it by MXNet's matrix
 * M, in float as MXNet computes it, then resampled as OpenCV's warpAffine does on 8-bit
 * images with INTER_LINEAR and a constant border (fill_value): M inverted in double,
 * positions in fixed point rounded to 1/32 pixel, bilinear weights in units of 2^-15. So
 * for the same draws the pixels are OpenCV's, bit for bit. */
static int warp_affine(struct worker *w, const struct mxc__image *in, uint64_t *state,
                       const char *what) {
    const mxc_image_record_params *p = &w->src->p;
    float sh = uniform(state) * p->max_shear_ratio * 2 - p->max_shear_ratio;
    int angle =
        (int)mxc__io_below(state, 2 * (uint64_t)p->max_rotate_angle + 1) - p->max_rotate_angle;
    if (p->rotate > 0)
        angle = p->rotate;
    float a = (float)cos(angle / 180.0 * M_PI), b = (float)sin(angle / 180.0 * M_PI);
    float scale =
        uniform(state) * (p->max_random_scale - p->min_random_scale) + p->min_random_scale;
    float ratio = uniform(state) * p->max_aspect_ratio * 2 - p->max_aspect_ratio + 1;
    float hs = 2 * scale / (1 + ratio), ws = ratio * hs;
    float new_w = scale * (float)in->width, new_h = scale * (float)in->height;
    float m[6] = {hs * a - sh * b * ws, hs * b + sh * a * ws, 0, -b * ws, a * ws, 0};
    m[2] = (new_w - (m[0] * (float)in->width + m[1] * (float)in->height)) / 2;
    m[5] = (new_h - (m[3] * (float)in->width + m[4] * (float)in->height)) / 2;
    /* OpenCV's invertAffineTransform */
    double det = (double)m[0] * m[4] - (double)m[1] * m[3];
    det = det != 0 ? 1.0 / det : 0;
    double i00 = m[4] * det, i01 = -m[1] * det, i10 = -m[3] * det, i11 = m[0] * det;
    double i02 = -i00 * m[2] - i01 * m[5], i12 = -i10 * m[2] - i11 * m[5];

    int rc = mxc__image_reserve(&w->warped, what, (int64_t)new_h, (int64_t)new_w);
    if (rc != MXC_OK)
        return rc;
    struct mxc__image *out = &w->warped;
    const int fill = p->fill_value;
    for (int y = 0; y < out->height; y++) {
        /* 10 fractional bits, then 5: the round_delta of 16 rounds to the nearest 1/32 */
        long x0 = lrint((i01 * y + i02) * 1024) + 16, y0 = lrint((i11 * y + i12) * 1024) + 16;
        for (int x = 0; x < out->width; x++) {
            long fxp = (x0 + lrint(i00 * x * 1024)) >> 5, fyp = (y0 + lrint(i10 * x * 1024)) >> 5;
            long sx = fxp >> 5, sy = fyp >> 5;
            int fx = (int)(fxp & 31), fy = (int)(fyp & 31);
            int wgt[4] = {(32 - fy) * (32 - fx) * 32, (32 - fy) * fx * 32, fy * (32 - fx) * 32,
                          fy * fx * 32};
            uint8_t *o = out->data + ((size_t)y * out->width + x) * 3;
            for (int c = 0; c < 3; c++) {
                int v = 0;
                for (int k = 0; k < 4; k++) {
                    long xi = sx + (k & 1), yi = sy + (k >> 1);
                    bool inside = xi >= 0 && yi >= 0 && xi < in->width && yi < in->height;
                    v += wgt[k] * (inside ? in->data[((size_t)yi * in->width + xi) * 3 + c] : fill);
                }
                o[c] = (uint8_t)((v + (1 << 14)) >> 15);
            }
        }
    }
    return MXC_OK;
}

/* MXNet's pad: `pad` pixels of fill_value around `in`, into `out`. */
static int pad_image(const struct mxc__image *in, int pad, int fill, struct mxc__image *out,
                     const char *what) {
    int64_t h = in->height + 2 * (int64_t)pad, w = in->width + 2 * (int64_t)pad;
    int rc = mxc__image_reserve(out, what, h, w);
    if (rc != MXC_OK)
        return rc;
    memset(out->data, fill, (size_t)(h * w * 3));
    for (int y = 0; y < in->height; y++)
        memcpy(out->data + ((size_t)(y + pad) * (size_t)w + (size_t)pad) * 3,
               in->data + (size_t)y * in->width * 3, (size_t)in->width * 3);
    return MXC_OK;
}

static uint8_t to_byte(float v) {
    long r = lrintf(v);
    return (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
}

/* Adds (dh, ds, dl) to a pixel's 8-bit hue (0..180), saturation and lightness (0..255),
 * clamping each, through OpenCV's RGB <-> HLS conversions as MXNet's augmenter does. */
static void jitter_hls(const uint8_t in[3], const int delta[3], uint8_t out[3]) {
    float r = in[0] / 255.0f, g = in[1] / 255.0f, b = in[2] / 255.0f;
    float vmax = fmaxf(r, fmaxf(g, b)), vmin = fminf(r, fminf(g, b));
    float diff = vmax - vmin, l = (vmax + vmin) * 0.5f, h = 0, s = 0;
    if (diff > 1.1920929e-7f) { /* FLT_EPSILON */
        s = l < 0.5f ? diff / (vmax + vmin) : diff / (2 - vmax - vmin);
        diff = 60.0f / diff;
        if (vmax == r)
            h = (g - b) * diff;
        else if (vmax == g)
            h = (b - r) * diff + 120.0f;
        else
            h = (r - g) * diff + 240.0f;
        if (h < 0)
            h += 360.0f;
    }
    /* 8-bit HLS as OpenCV stores it, shifted and clamped as MXNet does */
    int hls[3] = {to_byte(h * 0.5f), to_byte(l * 255.0f), to_byte(s * 255.0f)};
    static const int limit[3] = {180, 255, 255};
    for (int k = 0; k < 3; k++) {
        int v = hls[k] + delta[k];
        hls[k] = v < 0 ? 0 : v > limit[k] ? limit[k] : v;
    }
    h = (float)hls[0];
    l = hls[1] * (1.0f / 255.0f);
    s = hls[2] * (1.0f / 255.0f);
    float rgb[3];
    if (s == 0) {
        rgb[0] = rgb[1] = rgb[2] = l;
    } else {
        static const int sector_data[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1},
                                              {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};
        float p2 = l <= 0.5f ? l * (1 + s) : l + s - l * s, p1 = 2 * l - p2;
        h *= 6.0f / 180.0f;
        while (h >= 6)
            h -= 6;
        int sector = (int)floorf(h);
        h -= (float)sector;
        float tab[4] = {p2, p1, p1 + (p2 - p1) * (1 - h), p1 + (p2 - p1) * h};
        /* sector_data gives (b, g, r) */
        rgb[2] = tab[sector_data[sector][0]];
        rgb[1] = tab[sector_data[sector][1]];
        rgb[0] = tab[sector_data[sector][2]];
    }
    for (int c = 0; c < 3; c++)
        out[c] = to_byte(rgb[c] * 255.0f);
}

/* The random state of the sample at `pos` of `epoch`. */
static uint64_t sample_state(const struct image_source *s, int64_t epoch, int64_t pos) {
    uint64_t state = s->seed ^ 0x696d6167652d696full;
    (void)mxc__io_splitmix64(&state);
    state ^= (uint64_t)epoch * 0xd1b54a32d192ed03ull;
    (void)mxc__io_splitmix64(&state);
    state ^= (uint64_t)pos * 0x9e3779b97f4a7c15ull;
    (void)mxc__io_splitmix64(&state);
    return state;
}

/* Crops, mirrors and normalises `img` into one sample's (3, H, W) elements: float32, or
 * uint8 pixels as they are. */
static void write_sample(const struct image_source *s, const struct mxc__image *img,
                         uint64_t *state, void *out) {
    int64_t H = s->height, W = s->width;
    int64_t y0 = img->height - H, x0 = img->width - W;
    if (s->p.rand_crop) {
        y0 = (int64_t)mxc__io_below(state, (uint64_t)y0 + 1);
        x0 = (int64_t)mxc__io_below(state, (uint64_t)x0 + 1);
    } else {
        y0 /= 2;
        x0 /= 2;
    }
    bool mirror = s->p.rand_mirror && (mxc__io_splitmix64(state) >> 63);
    const mxc_image_record_params *p = &s->p;
    bool hls = p->random_h || p->random_s || p->random_l;
    int delta[3] = {0, 0, 0}; /* h, l, s: MXNet's draws, truncated toward zero */
    if (hls) {
        delta[0] = (int)(uniform(state) * (float)p->random_h * 2 - (float)p->random_h);
        delta[2] = (int)(uniform(state) * (float)p->random_s * 2 - (float)p->random_s);
        delta[1] = (int)(uniform(state) * (float)p->random_l * 2 - (float)p->random_l);
    }
    for (int64_t i = 0; i < H; i++) {
        const uint8_t *row = img->data + ((size_t)(y0 + i) * img->width + (size_t)x0) * 3;
        for (int64_t j = 0; j < W; j++) {
            int64_t oj = mirror ? W - 1 - j : j;
            uint8_t px[3];
            if (hls)
                jitter_hls(row + j * 3, delta, px);
            else
                memcpy(px, row + j * 3, 3);
            for (int c = 0; c < 3; c++) {
                int64_t at = (c * H + i) * W + oj;
                if (p->dtype == MXC_UINT8)
                    ((uint8_t *)out)[at] = px[c];
                else if (s->meanimg) /* at the unmirrored position, as MXNet */
                    ((float *)out)[at] =
                        ((float)px[c] - s->meanimg[(c * H + i) * W + j]) * s->mult[c];
                else
                    ((float *)out)[at] = ((float)px[c] - s->mean[c]) * s->mult[c];
            }
        }
    }
}

/* Decodes and writes sample `index` (position `pos` of `epoch`); a record that does not
 * decode is skipped for the next one of the file. A damaged file or a wrong label count
 * is an error. */
static int process(struct worker *w, int64_t epoch, int64_t pos, int64_t index, void *data,
                   float *label) {
    struct image_source *s = w->src;
    int rc = MXC_OK;
    for (int64_t tries = 0; tries < s->count; tries++) {
        int64_t r = (index + tries) % s->count;
        char what[600];
        snprintf(what, sizeof what, "record %" PRId64 " (byte %" PRIu64 ") of '%s'", r,
                 s->offsets[r], s->path);
        const void *bytes, *image;
        size_t size, image_size;
        MXC_TRY(mxc_recordio_seek_offset(w->rec, s->offsets[r]));
        rc = mxc_recordio_read(w->rec, &bytes, &size);
        MXC_CHECK(rc == 1 || rc < 0, MXC_EFORMAT, "%s: the file ended early", what);
        if (rc < 0)
            goto fail;
        mxc_image_record h;
        rc = mxc_recordio_unpack_image(bytes, size, &h, &image, &image_size);
        if (rc == MXC_OK) {
            uint32_t got = h.flag ? h.flag : 1;
            MXC_CHECK(got == (uint32_t)s->p.label_width, MXC_EFORMAT,
                      "%s holds %" PRIu32 " label%s, label_width is %d", what, got,
                      got == 1 ? "" : "s", s->p.label_width);
            rc = mxc__image_decode(what, image, image_size, &w->img);
        }
        const struct mxc__image *img = &w->img;
        if (rc == MXC_OK && s->p.resize > 0) {
            rc = mxc__image_resize_shorter(&w->img, s->p.resize, &w->resized, what);
            img = &w->resized;
        }
        uint64_t state = sample_state(s, epoch, pos);
        if (rc == MXC_OK && s->affine) {
            rc = warp_affine(w, img, &state, what);
            img = &w->warped;
        }
        if (rc == MXC_OK && s->p.pad > 0) {
            rc = pad_image(img, s->p.pad, s->p.fill_value, &w->padded, what);
            img = &w->padded;
        }
        if (rc == MXC_OK && (img->height < s->height || img->width < s->width))
            rc =
                mxc__error(MXC_EFORMAT,
                           "%s: a %d x %d image is smaller than the %" PRId64 " x %" PRId64 " crop",
                           what, img->height, img->width, s->height, s->width);
        if (rc == MXC_ENOMEM)
            goto fail;
        if (rc != MXC_OK) {
            atomic_fetch_add(&s->skipped, 1);
            mxc__log(MXC_LOG_WARN, "image record iterator: skipping %s", mxc_last_error());
            continue;
        }
        write_sample(s, img, &state, data);
        if (label) {
            if (h.flag)
                memcpy(label, h.labels, (size_t)h.flag * sizeof(float));
            else
                label[0] = h.label;
        }
        return MXC_OK;
    }
    rc = mxc__error(MXC_EFORMAT, "image record iterator: no record of '%s' decodes", s->path);
fail:
    return rc;
}

/* ---- Workers ----------------------------------------------------------------------- */

/* Takes samples of the posted batch until none is left; records the first error. */
static void work_on_batch(struct worker *w) {
    struct image_source *s = w->src;
    size_t data_bytes = (size_t)(3 * s->height * s->width) * mxc_dtype_size(s->p.dtype);
    for (;;) {
        int64_t i = atomic_fetch_add(&s->next, 1);
        if (i >= s->n)
            return;
        float *label = s->label ? s->label + i * s->p.label_width : NULL;
        int rc = process(w, s->epoch, s->first + i, s->index[i], s->data + (size_t)i * data_bytes,
                         label);
        if (rc != MXC_OK) {
            mxc__mutex_lock(&s->lock);
            if (s->rc == MXC_OK) {
                s->rc = rc;
                snprintf(s->message, sizeof s->message, "%s", mxc_last_error());
            }
            mxc__mutex_unlock(&s->lock);
            atomic_store(&s->next, s->n); /* the others stop taking samples */
            return;
        }
    }
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct image_source *s = w->src;
    uint64_t seen = 0;
    mxc__mutex_lock(&s->lock);
    for (;;) {
        while (!s->stop && s->generation == seen)
            mxc__cond_wait(&s->start_cv, &s->lock);
        if (s->stop)
            break;
        seen = s->generation;
        mxc__mutex_unlock(&s->lock);
        work_on_batch(w);
        mxc__mutex_lock(&s->lock);
        if (--s->busy == 0)
            mxc__cond_signal(&s->done_cv);
    }
    mxc__mutex_unlock(&s->lock);
    return NULL;
}

static int read_batch(void *impl, int64_t epoch, int64_t first, const int64_t *index, int64_t n,
                      void *data, float *label) {
    struct image_source *s = impl;
    mxc__mutex_lock(&s->lock);
    s->epoch = epoch;
    s->first = first;
    s->index = index;
    s->n = n;
    s->data = data;
    s->label = label;
    s->rc = MXC_OK;
    atomic_store(&s->next, 0);
    s->busy = s->num_workers - 1; /* the helpers; worker 0 is this thread */
    s->generation++;
    mxc__cond_broadcast(&s->start_cv);
    mxc__mutex_unlock(&s->lock);

    work_on_batch(&s->workers[0]);

    mxc__mutex_lock(&s->lock);
    while (s->busy > 0)
        mxc__cond_wait(&s->done_cv, &s->lock);
    int rc = s->rc;
    mxc__mutex_unlock(&s->lock);
    return rc == MXC_OK ? MXC_OK : mxc__error_set(rc, s->message);
}

static int64_t skipped(void *impl) {
    struct image_source *s = impl;
    return atomic_load(&s->skipped);
}

static void source_free(void *impl) {
    struct image_source *s = impl;
    if (!s)
        return;
    mxc__mutex_lock(&s->lock);
    s->stop = true;
    mxc__cond_broadcast(&s->start_cv);
    mxc__mutex_unlock(&s->lock);
    for (int i = 0; s->workers && i < s->num_workers; i++) {
        struct worker *w = &s->workers[i];
        if (w->started)
            mxc__thread_join(w->thread);
        mxc_recordio_close(w->rec);
        mxc__image_free(&w->img);
        mxc__image_free(&w->resized);
        mxc__image_free(&w->warped);
        mxc__image_free(&w->padded);
    }
    mxc__free(s->workers);
    mxc__free(s->meanimg);
    mxc__free(s->offsets);
    mxc__free(s->path);
    mxc__cond_destroy(&s->start_cv);
    mxc__cond_destroy(&s->done_cv);
    mxc__mutex_destroy(&s->lock);
    mxc__free(s);
}

/* ---- Creation ---------------------------------------------------------------------- */

void mxc_image_record_params_init(mxc_image_record_params *params) {
    if (!params)
        return;
    memset(params, 0, sizeof *params);
    params->label_width = 1;
    params->resize = -1;
    params->std_r = params->std_g = params->std_b = 1;
    params->scale = 1;
    params->preprocess_threads = 4;
    params->max_random_scale = params->min_random_scale = 1;
    params->rotate = -1;
    params->fill_value = 255;
    params->inter_method = 1;
}

/* Reads mean_img: one float32 array of the sample's shape (3, H, W). */
static int load_mean_img(struct image_source *s, const char *path) {
    int rc = MXC_OK;
    size_t count = 0;
    mxc_ndarray **arrays = NULL;
    char **names = NULL;
    FILE *f = fopen(path, "rb");
    MXC_CHECK(f != NULL, MXC_EIO, "mean_img '%s' cannot be opened: %s", path, strerror(errno));
    fclose(f);
    MXC_TRY(mxc_nd_load(path, mxc_cpu(), &count, &arrays, &names));
    mxc_shape shape = {0};
    if (count == 1)
        MXC_TRY(mxc_nd_get_shape(arrays[0], &shape));
    MXC_CHECK(count == 1 && mxc_nd_dtype(arrays[0]) == MXC_FLOAT32 && shape.ndim == 3 &&
                  shape.dims[0] == 3 && shape.dims[1] == s->height && shape.dims[2] == s->width,
              MXC_EFORMAT,
              "mean_img '%s' must hold one float32 array of shape (3, %" PRId64 ", %" PRId64
              ") (data_shape); it holds %zu array%s, the first of %d dimensions",
              path, s->height, s->width, count, count == 1 ? "" : "s", shape.ndim);
    size_t bytes = (size_t)(3 * s->height * s->width) * sizeof(float);
    s->meanimg = mxc__malloc(bytes);
    MXC_CHECK(s->meanimg != NULL, MXC_ENOMEM, "out of memory for mean_img '%s'", path);
    MXC_TRY(mxc_nd_sync_copy_to_cpu(arrays[0], s->meanimg, bytes));
fail:
    mxc_nd_list_free(count, arrays, names);
    return rc;
}

static int read_batch(void *impl, int64_t epoch, int64_t first, const int64_t *index, int64_t n,
                      void *data, float *label);

/* MXNet's mean image, when mean_img names no file: the mean of every record's sample as
 * the iterator writes it without a mean (augmenters, scale and std applied), summed in
 * float32 in file order and multiplied by 1 / count, then saved to `path` under the key
 * "mean_img" for the next run. */
static int create_mean_img(struct image_source *s, const char *path) {
    enum { CHUNK = 64 };
    const int64_t per = 3 * s->height * s->width;
    int rc = MXC_OK;
    int64_t index[CHUNK];
    mxc_ndarray *saved = NULL;
    float *batch = mxc__malloc((size_t)(CHUNK * per) * sizeof(float));
    float *sum = mxc__calloc((size_t)per, sizeof(float));
    MXC_CHECK(s->count > 0, MXC_EFORMAT, "mean_img '%s': no records to compute it over", path);
    MXC_CHECK(batch && sum, MXC_ENOMEM, "mean_img '%s': out of memory", path);
    mxc__log(MXC_LOG_INFO,
             "image record iterator: mean_img '%s' does not exist: computing it "
             "over the %" PRId64 " records of '%s'",
             path, s->count, s->path);
    for (int64_t first = 0; first < s->count; first += CHUNK) {
        int64_t n = s->count - first < CHUNK ? s->count - first : CHUNK;
        for (int64_t i = 0; i < n; i++)
            index[i] = first + i;
        MXC_TRY(read_batch(s, 0, first, index, n, batch, NULL));
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < per; k++)
                sum[k] += batch[i * per + k];
    }
    const float inv = 1.0f / (float)s->count;
    for (int64_t k = 0; k < per; k++)
        sum[k] *= inv;
    const mxc_shape shape = {.ndim = 3, .dims = {3, s->height, s->width}};
    const char *const names[] = {"mean_img"};
    MXC_TRY(mxc_nd_create(&shape, MXC_FLOAT32, mxc_cpu(), 0, &saved));
    MXC_TRY(mxc_nd_sync_copy_from_cpu(saved, sum, (size_t)per * sizeof(float)));
    MXC_TRY(mxc_nd_save(path, 1, &saved, names));
    s->meanimg = sum;
    sum = NULL;
fail:
    mxc_nd_free(saved);
    mxc__free(batch);
    mxc__free(sum);
    return rc;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The records' offsets in file order: the index lines' (sorted, repeated offsets dropped),
 * or a scan of the record headers. */
static int locate_records(struct image_source *s, mxc_recordio *r) {
    int rc = MXC_OK;
    const int64_t *keys;
    size_t nkeys, cap = 1024;
    MXC_TRY(mxc_recordio_keys(r, &keys, &nkeys));
    if (s->p.path_imgidx) {
        s->offsets = mxc__malloc((nkeys ? nkeys : 1) * sizeof *s->offsets);
        MXC_CHECK(s->offsets != NULL, MXC_ENOMEM, "out of memory for %zu records", nkeys);
        /* every line's record, as MXNet's indexed reader takes them (keys do not matter) */
        mxc__recordio_index_offsets(r, s->offsets);
        qsort(s->offsets, nkeys, sizeof *s->offsets, cmp_u64);
        size_t n = 0;
        for (size_t i = 0; i < nkeys; i++)
            if (n == 0 || s->offsets[i] != s->offsets[n - 1])
                s->offsets[n++] = s->offsets[i];
        s->count = (int64_t)n;
    } else {
        s->offsets = mxc__malloc(cap * sizeof *s->offsets);
        MXC_CHECK(s->offsets != NULL, MXC_ENOMEM, "out of memory for the record offsets");
        uint64_t at;
        while ((rc = mxc__recordio_skip(r, &at)) == 1) {
            if ((size_t)s->count == cap) {
                uint64_t *grown = mxc__realloc(s->offsets, 2 * cap * sizeof *grown);
                MXC_CHECK(grown != NULL, MXC_ENOMEM, "out of memory for the record offsets");
                s->offsets = grown;
                cap *= 2;
            }
            s->offsets[s->count++] = at;
        }
        if (rc < 0)
            goto fail;
    }
    MXC_CHECK(s->count > 0, MXC_EFORMAT, "'%s' holds no record", s->path);
fail:
    return rc;
}

int mxc_data_iter_create_image_record(const mxc_image_record_params *image_params,
                                      const mxc_data_iter_params *params, mxc_data_iter **out) {
    int rc = MXC_OK;
    struct image_source *s = NULL;
    mxc_recordio *scan = NULL;
    if (out)
        *out = NULL;
    MXC_CHECK(image_params && params && out, MXC_EINVAL, "%s: %s is NULL", __func__,
              !image_params ? "image_params"
              : !params     ? "params"
                            : "out");
    const mxc_image_record_params *p = image_params;
    MXC_CHECK(p->path_imgrec != NULL, MXC_EINVAL, "%s: path_imgrec is NULL", __func__);
    MXC_CHECK(p->data_shape[0] == 3, MXC_ENOTSUP,
              "%s: data_shape has %" PRId64 " channels: only 3 (RGB) are supported", __func__,
              p->data_shape[0]);
    MXC_CHECK(p->data_shape[1] > 0 && p->data_shape[2] > 0 && p->data_shape[1] <= 65535 &&
                  p->data_shape[2] <= 65535,
              MXC_EINVAL,
              "%s: data_shape (3, %" PRId64 ", %" PRId64 ") must have sizes in [1, 65535]",
              __func__, p->data_shape[1], p->data_shape[2]);
    MXC_CHECK(p->label_width >= 1 && p->label_width <= 65536, MXC_EINVAL,
              "%s: label_width is %d, must be in [1, 65536]", __func__, p->label_width);
    MXC_CHECK(p->resize == -1 || (p->resize > 0 && p->resize <= 65535), MXC_EINVAL,
              "%s: resize is %d, must be -1 (off) or in [1, 65535]", __func__, p->resize);
    MXC_CHECK(p->preprocess_threads >= 1 && p->preprocess_threads <= MAX_THREADS, MXC_EINVAL,
              "%s: preprocess_threads is %d, must be in [1, %d]", __func__, p->preprocess_threads,
              MAX_THREADS);
    MXC_CHECK(p->min_random_scale > 0 && p->min_random_scale <= p->max_random_scale &&
                  p->max_random_scale <= 16,
              MXC_EINVAL,
              "%s: min_random_scale %g and max_random_scale %g must satisfy 0 < min <= max <= 16",
              __func__, (double)p->min_random_scale, (double)p->max_random_scale);
    MXC_CHECK(p->max_aspect_ratio >= 0 && p->max_aspect_ratio < 1, MXC_EINVAL,
              "%s: max_aspect_ratio is %g, must be in [0, 1)", __func__,
              (double)p->max_aspect_ratio);
    MXC_CHECK(p->random_h >= 0 && p->random_h <= 180 && p->random_s >= 0 && p->random_s <= 255 &&
                  p->random_l >= 0 && p->random_l <= 255,
              MXC_EINVAL,
              "%s: random_h %d, random_s %d, random_l %d must be in [0, 180], "
              "[0, 255], [0, 255]",
              __func__, p->random_h, p->random_s, p->random_l);
    const float stds[3] = {p->std_r, p->std_g, p->std_b};
    for (int c = 0; c < 3; c++)
        MXC_CHECK(stds[c] > 0, MXC_EINVAL, "%s: std_%c is %g, must be > 0", __func__, "rgb"[c],
                  (double)stds[c]);
    MXC_CHECK(p->dtype == MXC_FLOAT32 || p->dtype == MXC_UINT8, MXC_ENOTSUP,
              "%s: dtype %d (%s): only float32 and uint8 are supported", __func__, p->dtype,
              mxc_dtype_name(p->dtype) ? mxc_dtype_name(p->dtype) : "not a dtype");
    /* MXNet's uint8 output ignores these silently; a setting that would do nothing is
     * refused instead */
    MXC_CHECK(p->dtype != MXC_UINT8 ||
                  (p->mean_r == 0 && p->mean_g == 0 && p->mean_b == 0 && stds[0] == 1 &&
                   stds[1] == 1 && stds[2] == 1 && p->scale == 1 && !p->mean_img),
              MXC_EINVAL,
              "%s: dtype uint8 gives raw pixels: mean_r/g/b (%g, %g, %g), std_r/g/b "
              "(%g, %g, %g) and scale (%g) must keep their defaults (0, 1, 1), mean_img NULL",
              __func__, (double)p->mean_r, (double)p->mean_g, (double)p->mean_b, (double)stds[0],
              (double)stds[1], (double)stds[2], (double)p->scale);
    /* and MXNet ignores mean_r/g/b beside a mean image */
    MXC_CHECK(!p->mean_img || (p->mean_r == 0 && p->mean_g == 0 && p->mean_b == 0), MXC_EINVAL,
              "%s: mean_img replaces mean_r/g/b (%g, %g, %g), which must be 0", __func__,
              (double)p->mean_r, (double)p->mean_g, (double)p->mean_b);
    MXC_CHECK(p->max_rotate_angle >= 0 && p->max_rotate_angle <= 360 && p->rotate >= -1 &&
                  p->rotate <= 360,
              MXC_EINVAL, "%s: max_rotate_angle %d and rotate %d must be in [0, 360], [-1, 360]",
              __func__, p->max_rotate_angle, p->rotate);
    MXC_CHECK(p->max_shear_ratio >= 0 && p->max_shear_ratio <= 10, MXC_EINVAL,
              "%s: max_shear_ratio is %g, must be in [0, 10]", __func__,
              (double)p->max_shear_ratio);
    MXC_CHECK(p->pad >= 0 && p->pad <= 65535 && p->fill_value >= 0 && p->fill_value <= 255,
              MXC_EINVAL, "%s: pad %d and fill_value %d must be in [0, 65535], [0, 255]", __func__,
              p->pad, p->fill_value);
    MXC_CHECK(p->inter_method != 2 && p->inter_method != 3 && p->inter_method != 4 &&
                  p->inter_method != 9 && p->inter_method != 10,
              MXC_ENOTSUP,
              "%s: inter_method %d: only 1 (bilinear) is supported, not cubic (2), area (3), "
              "Lanczos (4), auto (9) or random (10)",
              __func__, p->inter_method);
    MXC_CHECK(p->inter_method == 1, MXC_EINVAL,
              "%s: inter_method is %d; MXNet's codes are 1 (bilinear), 2, 3, 4, 9, 10", __func__,
              p->inter_method);

    s = mxc__calloc(1, sizeof *s);
    MXC_CHECK(s != NULL, MXC_ENOMEM, "%s: out of memory", __func__);
    mxc__mutex_init(&s->lock);
    mxc__cond_init(&s->start_cv);
    mxc__cond_init(&s->done_cv);
    s->p = *p;
    s->path = mxc__strdup(p->path_imgrec);
    MXC_CHECK(s->path != NULL, MXC_ENOMEM, "%s: out of memory", __func__);
    s->p.path_imgrec = s->path;
    s->p.path_imgidx = NULL; /* not kept: used only now */
    s->p.mean_img = NULL;
    s->height = p->data_shape[1];
    s->width = p->data_shape[2];
    s->seed = params->seed;
    s->affine = p->min_random_scale != 1 || p->max_random_scale != 1 || p->max_aspect_ratio != 0 ||
                p->max_rotate_angle > 0 || p->rotate > 0 || p->max_shear_ratio > 0;
    const float means[3] = {p->mean_r, p->mean_g, p->mean_b};
    for (int c = 0; c < 3; c++) {
        s->mean[c] = means[c];
        s->mult[c] = p->scale / stds[c]; /* MXNet's RGBA_MULT: contrast 1 times scale, / std */
    }

    /* an existing mean image is read now; a missing one is computed once the decoding
     * threads run */
    const bool make_mean = p->mean_img && access(p->mean_img, F_OK) != 0 && errno == ENOENT;
    if (p->mean_img && !make_mean)
        MXC_TRY(load_mean_img(s, p->mean_img));
    MXC_TRY(mxc_recordio_open(p->path_imgrec, p->path_imgidx, 0, &scan));
    s->p.path_imgidx = p->path_imgidx;
    MXC_TRY(locate_records(s, scan));
    s->p.path_imgidx = NULL;

    s->num_workers = p->preprocess_threads;
    s->workers = mxc__calloc((size_t)s->num_workers, sizeof *s->workers);
    MXC_CHECK(s->workers != NULL, MXC_ENOMEM, "%s: out of memory", __func__);
    for (int i = 0; i < s->num_workers; i++) {
        struct worker *w = &s->workers[i];
        w->src = s;
        if (i == 0) {
            w->rec = scan; /* the prefetch thread's handle */
            scan = NULL;
        } else {
            MXC_TRY(mxc_recordio_open(p->path_imgrec, NULL, 0, &w->rec));
            MXC_TRY(mxc__thread_start(&w->thread, worker_main, w, "mxc-decode"));
            w->started = true;
        }
    }

    if (make_mean)
        MXC_TRY(create_mean_img(s, p->mean_img));

    struct mxc__io_source src = {
        .name = "image record",
        .impl = s,
        .num_samples = s->count,
        .read_batch = read_batch,
        .skipped = skipped,
        .free = source_free,
    };
    src.data_shape.ndim = 3;
    for (int d = 0; d < 3; d++)
        src.data_shape.dims[d] = p->data_shape[d];
    src.data_dtype = p->dtype;
    src.label_shape.ndim = 1;
    src.label_shape.dims[0] = p->label_width;
    s = NULL; /* the iterator owns it now, on failure too */
    rc = mxc__io_iter_create(&src, params, out);
fail:
    mxc_recordio_close(scan);
    source_free(s);
    return mxc__in_call(__func__, rc);
}

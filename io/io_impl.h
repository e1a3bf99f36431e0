/*
 * io/io_impl.h — how a data source plugs into the common iterator (io/iter.c). Internal.
 *
 * A source is a random-access table of samples held by the reader: it knows how many
 * samples it has, the shape of one sample's data and label, and how to write sample i
 * as float32 values. Everything else — sharding, permutations, batching, the last batch,
 * the prefetch thread, batch buffers and their reuse — lives once, in iter.c.
 */
#ifndef MXC_IO_IMPL_H
#define MXC_IO_IMPL_H

#include "mxc/io.h"
#include "mxc/recordio.h"

#include <stdint.h>

struct mxc__io_source {
    const char *name; /* "IDX", "CSV", "array": for messages */
    void *impl;       /* owned by the source; given to read and free */
    int64_t num_samples;
    mxc_shape data_shape;  /* one sample's data (without the batch axis), ndim ≥ 1 */
    int data_dtype;        /* of batch data: MXC_FLOAT32 (0, for `read`) or, with
                              read_batch, MXC_UINT8 */
    mxc_shape label_shape; /* one sample's label; ndim 0: no labels. A label of one
                              element gives batch labels of shape (batch_size,). */
    /* Writes sample `index` (0 ≤ index < num_samples) as float32: the data's elements to
     * `data` and, when there are labels, the label's to `label`. Runs on the prefetch
     * thread, never concurrently with itself. Returns MXC_OK or a status with the last
     * error set. */
    int (*read)(void *impl, int64_t index, float *data, float *label);
    void (*free)(void *impl); /* frees impl; may be NULL */
    /* Optional, used instead of `read` when set: writes the `n` samples `index[0..n)` of a
     * batch to consecutive rows of `data` (elements of data_dtype) and `label` (float32;
     * NULL without labels). Sample i sits
     * at position `first + i` of epoch `epoch`'s order (positions past the part's end are
     * padding), so a source can draw random numbers from where the sample is rather than
     * from timing. Runs on the prefetch thread, never concurrently with itself. */
    int (*read_batch)(void *impl, int64_t epoch, int64_t first, const int64_t *index, int64_t n,
                      void *data, float *label);
    /* Optional: samples skipped so far (mxc_data_iter_num_skipped); any thread. */
    int64_t (*skipped)(void *impl);
};

/* Makes an iterator that takes over `src` (freed on failure too) and starts its
 * prefetch thread. Validates `params` (NULL: invalid). */
int mxc__io_iter_create(struct mxc__io_source *src, const mxc_data_iter_params *params,
                        mxc_data_iter **out);

/* Checks an iterator handle (NULL, stale, not an iterator); records MXC_EMISUSE naming
 * public function `fn` and argument `what`. */
int mxc__data_iter_check(const mxc_data_iter *it, const char *fn, const char *what);

/* A source over float32 tables in host memory: `data` holds num_samples samples of
 * data_shape, `label` (NULL when label_shape has ndim 0) num_samples of label_shape. The
 * source takes over both buffers (allocated with mxc__malloc), on failure too. */
int mxc__io_table_source(const char *name, float *data, float *label, int64_t num_samples,
                         const mxc_shape *data_shape, const mxc_shape *label_shape,
                         struct mxc__io_source *out);

/* The iterators' random numbers (iter.c): the next splitmix64 value of `state`, and a
 * value uniform in [0, n), n > 0, without modulo bias. */
uint64_t mxc__io_splitmix64(uint64_t *state);
uint64_t mxc__io_below(uint64_t *state, uint64_t n);

/* ---- RecordIO (recordio.c) ------------------------------------------------------------ */

/* Steps a reader over its next record, checking the part headers but reading no payload:
 * *offset receives where the record starts. Returns 1, 0 at the end, or the errors of
 * mxc_recordio_read. */
int mxc__recordio_skip(mxc_recordio *r, uint64_t *offset);

/* The offsets of all the index's lines (mxc_recordio_keys' count of them, in no particular
 * order; a key given twice contributes both) into `offsets`. */
void mxc__recordio_index_offsets(const mxc_recordio *r, uint64_t *offsets);

/* ---- Images (image.c) -------------------------------------------------------------- */

/* A decoded image: height x width pixels of 3 bytes (R, G, B), rows top to bottom. The
 * buffer is reused by the next decode into the same struct; zero-initialise the struct
 * and free it with mxc__image_free. */
struct mxc__image {
    uint8_t *data;
    size_t cap;
    int height, width;
};

/* Decodes a JPEG (grayscale, RGB, CMYK, YCCK; baseline or progressive) or a PNG (any
 * color type and depth), told apart by their signatures, into `img` as MXNet's OpenCV
 * imdecode gives it in RGB. `what` names the image in messages ("record 7 of 'a.rec'").
 * Returns MXC_OK, MXC_EFORMAT (not JPEG or PNG, corrupt or truncated data, an empty or
 * huge image: the message names `what` and the library's reason), MXC_ENOMEM. */
int mxc__image_decode(const char *what, const void *bytes, size_t size, struct mxc__image *img);

void mxc__image_free(struct mxc__image *img);

/* Resizes `in` so that its shorter side is `size` (the longer one `size * long / short`,
 * MXNet's integer arithmetic), bilinearly as OpenCV's cv::resize(INTER_LINEAR) does on 8-bit
 * images, into `out` (not `in`). Returns MXC_OK, MXC_EFORMAT (a result too large),
 * MXC_ENOMEM; messages start with `what`. */
int mxc__image_resize_shorter(const struct mxc__image *in, int size, struct mxc__image *out,
                              const char *what);

/* Encodes `img` as a baseline JPEG of `quality` (1..100, 4:2:0, libjpeg's defaults) into a
 * buffer libjpeg allocates: *out (release it with free(), not mxc__free) of *size bytes.
 * Returns MXC_OK or MXC_ENOMEM (libjpeg failed; its message, after `what`). */
int mxc__image_encode_jpeg(const struct mxc__image *img, int quality, const char *what,
                           unsigned char **out, unsigned long *size);

/* Sizes `img` for height x width pixels, reusing its buffer. Returns MXC_OK, MXC_EFORMAT
 * (an empty image or one over 2^28 bytes: the message starts with `what`), MXC_ENOMEM. */
int mxc__image_reserve(struct mxc__image *img, const char *what, int64_t height, int64_t width);

#endif /* MXC_IO_IMPL_H */

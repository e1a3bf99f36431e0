/*
 * mxc/io.h — data iterators: batches of (data, label) arrays read from IDX files
 * (MNIST, Fashion-MNIST), CSV files or in-memory arrays, with shuffling from a seed,
 * sharding for data-parallel training, last-batch handling and a prefetch thread.
 *
 * Every iterator is an mxc_data_iter used the same way:
 *
 *     mxc_data_iter_params p;
 *     mxc_data_iter_params_init(&p);
 *     p.batch_size = 100;
 *     p.shuffle = 1;
 *     mxc_data_iter *it;
 *     if (mxc_data_iter_create_fashion_mnist(NULL, 1, 1, &p, &it) != MXC_OK) ...
 *     for (int epoch = 0; epoch < 10; epoch++) {
 *         int rc;
 *         while ((rc = mxc_data_iter_next(it)) == 1) {
 *             mxc_ndarray *x = mxc_data_iter_data(it), *y = mxc_data_iter_label(it);
 *             ... push work reading x and y; the last mxc_data_iter_pad(it) rows are padding
 *         }
 *         if (rc < 0) ... mxc_last_error() says why
 *         mxc_data_iter_reset(it);
 *     }
 *     mxc_data_iter_free(it);
 *
 * Batches: data is float32 of shape (batch_size, <sample shape>), label float32 of shape
 * (batch_size,) for one label per sample, else (batch_size, <label shape>). A batch's
 * arrays belong to the iterator and stay valid and unchanged until the next call to
 * mxc_data_iter_next, mxc_data_iter_reset or mxc_data_iter_free on it. Engine operations
 * the caller pushed reading them may still be pending then: the iterator refills a batch
 * buffer only after the engine has finished every operation on its arrays
 * (mxc_nd_wait_to_write), so such reads see the batch they were pushed for. Callers must
 * not write to batch arrays.
 *
 * Order: an epoch visits the samples of the iterator's part once, in file order, or with
 * `shuffle` in a permutation drawn from `seed` and the epoch number (0 at creation,
 * +1 at each reset): the same seed gives the same sequence of epochs on every run and
 * every engine, and each epoch a different permutation.
 *
 * Sharding: with num_parts = P and part_index = k, the iterator sees samples
 * [floor(N*k/P), floor(N*(k+1)/P)) of the N in the files: contiguous parts whose sizes
 * differ by at most one, the larger ones last (MXNet's MNISTIter splits the same way).
 * Shuffling permutes within the part.
 *
 * Last batch: when the part's sample count M is not a multiple of batch_size,
 *  - round_batch = 1 (the default, as MXNet's round_batch): the last batch is completed
 *    with the first samples of the same epoch's order (wrapping around) and
 *    mxc_data_iter_pad reports how many rows are such repeats; an epoch has
 *    ceil(M / batch_size) batches. The next epoch starts from its beginning.
 *  - round_batch = 0: the last partial batch is dropped, as MXNet's MNISTIter always
 *    does; an epoch has floor(M / batch_size) batches and pad is always 0. (MXNet's CSVIter
 *    with round_batch=False instead returns a partial batch with stale rows; mxc does not.)
 *
 * Prefetch: a thread per iterator fills up to `prefetch` batches ahead of the consumer
 * through a bounded queue (prefetch + 1 batch buffers in all). Errors met while filling a
 * batch are reported by the mxc_data_iter_next that would have returned it.
 *
 * Thread-safety: an iterator may be used from any thread but by one thread at a time;
 * distinct iterators are independent.
 */
#ifndef MXC_IO_H
#define MXC_IO_H

#include "mxc/base.h"
#include "mxc/ndarray.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A data iterator (opaque). */
typedef struct mxc_data_iter mxc_data_iter;

/** Options shared by every iterator. Initialise with mxc_data_iter_params_init, then set
 * the fields you need; fields are only ever added at the end. */
typedef struct mxc_data_iter_params {
    int64_t batch_size; /**< samples per batch, > 0; no default (0 is rejected) */
    int shuffle;        /**< non-zero: a new permutation each epoch; default 0 */
    uint64_t seed;      /**< seed of the permutations; default 0 */
    int round_batch;    /**< last batch: 1 wrap around and pad (default), 0 drop it */
    int num_parts;      /**< number of parts the samples are split into; default 1 */
    int part_index;     /**< which part this iterator reads, 0 ≤ part_index < num_parts */
    int prefetch;       /**< batches filled ahead, 1..64; default 2 */
    mxc_context ctx;    /**< where batch arrays live; only the CPU (the default) for now:
                             pinned host memory (MXC_CPU_PINNED) when mxc_gpu_count() > 0,
                             so that a copy to the GPU needs no staging, else plain CPU
                             memory (mxc_nd_get_context on a batch array tells which) */
} mxc_data_iter_params;

/** Fills `params` with the defaults listed above (batch_size 0: the caller must set it).
 * NULL is ignored. Thread-safe. */
MXC_API void mxc_data_iter_params_init(mxc_data_iter_params *params);

/* ---- Iterators --------------------------------------------------------------------- */

/** Creates an iterator over an IDX image file and its IDX label file (FORMATS.md): each
 * gzip-compressed or raw, told apart by the gzip magic. The images file must hold uint8
 * images (magic 0x00000803: count, rows, cols), the labels file uint8 labels (magic
 * 0x00000801) with the same count. Both files are read whole, now, into memory as bytes.
 * Batch data is (batch_size, rows * cols) with `flat` non-zero, else
 * (batch_size, 1, rows, cols), each pixel divided by 255 so values lie in [0, 1]
 * (MXNet's MNISTIter divides by 256). Labels are the label bytes as float32, shape
 * (batch_size,).
 * Returns MXC_OK, MXC_EINVAL (NULL path or out, bad params), MXC_EIO (a file cannot be
 * opened or read, with its path and the system's reason), MXC_EFORMAT (wrong magic,
 * zero or oversized dimensions, a truncated file, bytes after the data, corrupt gzip
 * data, image and label counts that differ — the message names the path), MXC_ENOTSUP
 * (a non-CPU ctx), MXC_ENOMEM. `*out` is NULL on failure. Thread-safe. */
MXC_API int mxc_data_iter_create_idx(const char *image_path, const char *label_path, int flat,
                                     const mxc_data_iter_params *params, mxc_data_iter **out);

/** The Fashion-MNIST training set (`train` non-zero: train-images-idx3-ubyte.gz and
 * train-labels-idx1-ubyte.gz, 60,000 samples) or test set (t10k-*, 10,000 samples) from
 * directory `dir`; for each file the name without ".gz" is used when only that exists.
 * `dir` NULL means $MXC_FASHION_MNIST_DIR when set and non-empty, else
 * /usr/share/datasets/fashion-mnist (where Debian's dataset-fashion-mnist installs it).
 * Otherwise as mxc_data_iter_create_idx. Thread-safe. */
MXC_API int mxc_data_iter_create_fashion_mnist(const char *dir, int train, int flat,
                                               const mxc_data_iter_params *params,
                                               mxc_data_iter **out);

/** Creates an iterator over CSV files: each line of `data_csv` is one sample, the
 * comma-separated numbers (decimal or exponent notation, spaces around them allowed) of
 * `data_shape` (1 to MXC_MAX_NDIM - 1 dimensions, all > 0) in row-major order. Empty lines
 * are skipped. `label_csv` (NULL: no labels) holds one line per sample of
 * `label_shape` numbers (NULL: (1)). Batch data is (batch_size, <data_shape>); batch
 * labels are (batch_size,) when the label shape has one element, else
 * (batch_size, <label_shape>). Both files are parsed now, into memory.
 * Returns MXC_OK, MXC_EINVAL (NULL data_csv, data_shape or out, bad shapes or params),
 * MXC_EIO (unreadable file, with its path), MXC_EFORMAT (a line with a wrong number of
 * values or a field that is not a number — the message gives path:line — or files with
 * different numbers of samples, or an empty file), MXC_ENOTSUP, MXC_ENOMEM. `*out` is
 * NULL on failure. Thread-safe. */
MXC_API int mxc_data_iter_create_csv(const char *data_csv, const mxc_shape *data_shape,
                                     const char *label_csv, const mxc_shape *label_shape,
                                     const mxc_data_iter_params *params, mxc_data_iter **out);

/** Creates an iterator over arrays: `data` holds one sample per index of its first axis;
 * `label` (may be NULL: no labels) the same number of samples (shape (N,) gives batch
 * labels (batch_size,)). Both must be float32 with at least one dimension. Their contents
 * are copied now (waiting for pending writes), so the caller keeps ownership and may
 * change or free them afterwards.
 * Returns MXC_OK, MXC_EINVAL (NULL data or out, bad params, ndim 0 or too many
 * dimensions), MXC_EMISUSE (a bad handle), MXC_ESHAPE (sample counts differ),
 * MXC_ETYPE (not float32), MXC_ENOTSUP, MXC_ENOMEM, or the failure of an operation that
 * wrote the arrays. `*out` is NULL on failure. Thread-safe. */
MXC_API int mxc_data_iter_create_array(const mxc_ndarray *data, const mxc_ndarray *label,
                                       const mxc_data_iter_params *params, mxc_data_iter **out);

/** Options of the image record iterator: MXNet's ImageRecordIter parameters of the same
 * names and meanings. Initialise with mxc_image_record_params_init; fields are only ever
 * added at the end. */
typedef struct mxc_image_record_params {
    const char *path_imgrec;      /**< the .rec file of image records; required */
    const char *path_imgidx;      /**< its .idx (NULL: the .rec file is scanned at creation) */
    int64_t data_shape[3];        /**< (channels, height, width) of a sample; channels must be 3 */
    int label_width;              /**< labels per image; default 1 (IRHeader flag 0) */
    int resize;                   /**< > 0: scale the shorter side to this first; default -1 */
    int rand_crop;                /**< non-zero: a random crop (default: the centre) */
    int rand_mirror;              /**< non-zero: mirror left-right with probability 0.5 */
    float mean_r, mean_g, mean_b; /**< subtracted per channel; default 0 */
    float std_r, std_g, std_b;    /**< then divided by; default 1 */
    float scale;                  /**< then multiplied by; default 1 */
    int preprocess_threads;       /**< threads decoding a batch, 1..64; default 4 */
    /** After resize, scale the image by s drawn uniformly from [min, max] (default 1, 1:
     * off) and stretch its content's aspect (width / height) by r from
     * [1 - max_aspect_ratio, 1 + max_aspect_ratio] (default 0: off) as MXNet does: the
     * canvas becomes (s * height, s * width), the content is scaled by 2s / (1 + r)
     * across and r times that down, centred, the rest filled with white (255). */
    float max_random_scale, min_random_scale, max_aspect_ratio;
    /** After the crop, add to hue (0..180, OpenCV's 8-bit HLS), saturation and lightness
     * (0..255) integers drawn from [-random_h, random_h] etc., clamped; default 0: off. */
    int random_h, random_s, random_l;
    /** Batch data type: MXC_FLOAT32 (default) or MXC_UINT8, the augmented pixels as they
     * are (MXNet's dtype='uint8'); uint8 needs mean, std and scale at their defaults (MXNet
     * ignores them silently). Labels stay float32. */
    int dtype;
    /** Rotation and shear, applied with the random scale and aspect ratio above (one affine
     * map, MXNet's): an angle in whole degrees drawn uniformly from [-max_rotate_angle,
     * max_rotate_angle] (0..360; default 0: off), or `rotate` degrees when `rotate` > 0
     * (1..360; default -1: off; 0 is off too, as in MXNet), counter-clockwise about the
     * centre; a shear (x, y) -> (x + m y, y) with m drawn from [-max_shear_ratio,
     * max_shear_ratio] (0..10; default 0: off). The canvas keeps the image's size times the
     * scale; what falls outside the image is fill_value. */
    int max_rotate_angle, rotate;
    float max_shear_ratio;
    /** After the affine map, `pad` pixels (0..65535; default 0) of fill_value around the
     * image, before the crop. */
    int pad;
    /** The value (0..255, every channel; default 255) of the pixels the affine map and pad
     * add. */
    int fill_value;
    /** Interpolation of resize and the affine map, MXNet's codes: only 1 (bilinear, the
     * default) is supported; 2, 3, 4, 9 and 10 (cubic, area, Lanczos, auto, random) are
     * MXC_ENOTSUP, other values MXC_EINVAL (MXNet refuses 0 too). */
    int inter_method;
    /** A file of MXNet's NDArray format (mx.nd.save) holding one float32 array of shape
     * data_shape: subtracted from each sample, before std and scale and before mirroring,
     * instead of mean_r/g/b (which must then be 0). NULL (default): none. A file that does
     * not exist is made as MXNet makes it, when the iterator is created: the mean over every
     * record of the samples as the iterator writes them without a mean (augmenters, scale
     * and std applied; summed in float32 in file order), saved under the key "mean_img". */
    const char *mean_img;
} mxc_image_record_params;

/** Fills `params` with the defaults listed above (path_imgrec NULL and data_shape zero: the
 * caller sets them). NULL is ignored. Thread-safe. */
MXC_API void mxc_image_record_params_init(mxc_image_record_params *params);

/** Creates an iterator over a RecordIO file of images as MXNet's ImageRecordIter: each
 * record an IRHeader with its label(s) and a JPEG or PNG (mxc/recordio.h). A sample is
 * decoded to RGB, its shorter side resized to `resize` (bilinear) when set, scaled,
 * stretched, rotated and sheared when asked (max/min_random_scale, max_aspect_ratio,
 * max_rotate_angle, rotate, max_shear_ratio: one affine map), padded with `pad`, cropped to
 * data_shape's height x width (at the centre, or at a uniformly random position with
 * rand_crop), mirrored with rand_mirror, shifted in hue, saturation and lightness with
 * random_h/s/l, and written as float32 (C, H, W) with (pixel - mean) * (scale / std) per
 * channel — MXNet's formula, the mean per channel or mean_img's — or, with dtype uint8, as
 * the pixels themselves. For the same draws the pixels are OpenCV's (docs/io.md says where
 * resize may differ by one level). Labels: the header's label
 * (label_width 1, batch labels (batch_size,)) or its label vector (label_width n,
 * (batch_size, n)). Random draws come from `params->seed`, the epoch and the sample's
 * position in the epoch, so they do not depend on the threads.
 * Decoding and augmentation of a batch run on `preprocess_threads` threads (the prefetch
 * thread among them) writing straight into the batch being filled. The common iterator
 * options (shuffle, seed, round_batch, num_parts / part_index over the records in file
 * order, prefetch) are as for every iterator; MXNet splits parts by bytes instead.
 * Records are located at creation: from the index, or by scanning the file's record
 * headers (not their payloads).
 * A record whose image cannot be decoded, or is smaller than the crop after resizing, is
 * skipped with a warning naming it (MXC_LOG_WARN) and replaced by the next record of the
 * part that decodes; mxc_data_iter_num_skipped counts them.
 * Returns MXC_OK, MXC_EINVAL (NULL image_params, params or out, a NULL path_imgrec, bad
 * shape or options), MXC_ENOTSUP (channels other than 3, a dtype other than float32 or
 * uint8, a non-CPU ctx), MXC_EIO, MXC_EFORMAT (a corrupt .rec or .idx file, with the offset or
 * line; an empty file), MXC_ENOMEM. A corrupt .rec file met while iterating, or a record with a
 * label count other than label_width, is an error of mxc_data_iter_next (MXC_EFORMAT naming the
 * record). `*out` is NULL on failure. Thread-safe. */
MXC_API int mxc_data_iter_create_image_record(const mxc_image_record_params *image_params,
                                              const mxc_data_iter_params *params,
                                              mxc_data_iter **out);

/* ---- Iterating --------------------------------------------------------------------- */

/** Advances to the next batch, waiting for the prefetch thread if it is not ready yet.
 * Returns 1 when a batch is available (read it with mxc_data_iter_data / _label / _pad),
 * 0 at the end of the epoch (again on every call until mxc_data_iter_reset), or a negative
 * status: MXC_EMISUSE (bad handle), or the error met while filling the batch (e.g. a
 * failure of an operation on a batch array), with its message — repeated on later calls
 * until a reset. The previous batch's arrays are handed back to the prefetch thread. */
MXC_API int mxc_data_iter_next(mxc_data_iter *it);

/** Starts a new epoch: the current epoch's remaining batches are discarded and, with
 * shuffle on, a new permutation is used. The next mxc_data_iter_next returns its first
 * batch. Returns MXC_OK or MXC_EMISUSE (bad handle). */
MXC_API int mxc_data_iter_reset(mxc_data_iter *it);

/** The current batch's data array, owned by the iterator (do not free or write it),
 * valid until the next call to next / reset / free; NULL before the first batch, at the
 * end of an epoch, after an error, or for a bad handle (NULL, freed or not an iterator:
 * MXC_EMISUSE is then recorded as the last error, as for the other getters' -1). */
MXC_API mxc_ndarray *mxc_data_iter_data(const mxc_data_iter *it);

/** The current batch's label array, as mxc_data_iter_data; also NULL for an iterator
 * without labels. */
MXC_API mxc_ndarray *mxc_data_iter_label(const mxc_data_iter *it);

/** How many of the current batch's last rows are padding (repeats of the epoch's first
 * samples, with round_batch); 0 when there is no current batch; -1 for a bad handle. */
MXC_API int64_t mxc_data_iter_pad(const mxc_data_iter *it);

/** The shape of every batch's data array, e.g. (100, 784), known from creation. Returns
 * MXC_OK, MXC_EMISUSE (bad handle), MXC_EINVAL (NULL out). */
MXC_API int mxc_data_iter_provide_data(const mxc_data_iter *it, mxc_shape *out);

/** The shape of every batch's label array, e.g. (100); ndim 0 for an iterator without
 * labels. Returns as mxc_data_iter_provide_data. */
MXC_API int mxc_data_iter_provide_label(const mxc_data_iter *it, mxc_shape *out);

/** Number of samples in this iterator's part (before padding), or -1 for a bad handle. */
MXC_API int64_t mxc_data_iter_num_samples(const mxc_data_iter *it);

/** Number of batches next returns per epoch (see "Last batch" above), or -1 for a bad
 * handle. */
MXC_API int64_t mxc_data_iter_num_batches(const mxc_data_iter *it);

/** Samples skipped since creation because they could not be decoded (image record
 * iterator; 0 for the others), or -1 for a bad handle. */
MXC_API int64_t mxc_data_iter_num_skipped(const mxc_data_iter *it);

/** Stops the prefetch thread (waiting for the batch it is filling, if any) and frees the
 * iterator, its batch arrays (their memory is recycled after operations still pending on
 * them) and its data. Safe at any point of an epoch. NULL is ignored; a freed or foreign
 * handle is logged at MXC_LOG_ERROR and frees nothing. */
MXC_API void mxc_data_iter_free(mxc_data_iter *it);

#ifdef __cplusplus
}
#endif

#endif /* MXC_IO_H */

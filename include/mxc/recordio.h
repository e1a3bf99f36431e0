/*
 * mxc/recordio.h — RecordIO files as MXNet (dmlc-core) reads and writes them: `.rec`
 * files of records, their `.idx` text index for random access, and the image record
 * header MXNet's im2rec and ImageRecordIter use. docs/formats.md describes the bytes.
 *
 *     mxc_recordio *r;
 *     if (mxc_recordio_open("train.rec", "train.idx", 0, &r) != MXC_OK) ...
 *     const void *rec;
 *     size_t n;
 *     int rc;
 *     while ((rc = mxc_recordio_read(r, &rec, &n)) == 1) {
 *         mxc_image_record h;
 *         const void *jpeg;
 *         size_t jpeg_size;
 *         if (mxc_recordio_unpack_image(rec, n, &h, &jpeg, &jpeg_size) != MXC_OK) ...
 *     }
 *     if (rc < 0) ... mxc_last_error() says why, with the byte offset
 *     mxc_recordio_close(r);
 *
 * Files written here are byte for byte what MXNet's MXRecordIO / MXIndexedRecordIO write
 * for the same records and keys (tests/check_recordio.c compares with files MXNet made).
 *
 * Thread-safety: a handle is used by one thread at a time; distinct handles are
 * independent (several readers may read one file).
 */
#ifndef MXC_RECORDIO_H
#define MXC_RECORDIO_H

#include "mxc/base.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** An open RecordIO file, for reading or for writing (opaque). */
typedef struct mxc_recordio mxc_recordio;

/** Largest record payload accepted (and written): 1 GiB. */
#define MXC_RECORDIO_MAX_RECORD ((size_t)1 << 30)

/** Opens `path` for reading (`write` 0) or creates / truncates it for writing (non-zero).
 * `idx_path` (may be NULL: no index) is the `.idx` file: read whole now when reading (lines
 * "key<TAB>offset", keys decimal integers, offsets of records in `path`), written a line
 * per mxc_recordio_write_idx when writing, as MXNet's MXIndexedRecordIO does.
 * Returns MXC_OK, MXC_EINVAL (NULL path or out), MXC_EIO (a file cannot be opened or is
 * not a regular file, with its path and the system's reason), MXC_EFORMAT (a malformed
 * index line or an offset past the end of `path`: path:line), MXC_ENOMEM. `*out` is NULL
 * on failure. Thread-safe. */
MXC_API int mxc_recordio_open(const char *path, const char *idx_path, int write,
                              mxc_recordio **out);

/** Reads the next record: `*data` points to its `*size` payload bytes (aligned to 8
 * bytes), owned by the handle and valid until the next call on it. Records split by the
 * writer (payloads holding the magic word) come back joined.
 * Returns 1 (a record), 0 (end of file, at a record boundary; `*data` NULL, `*size` 0),
 * MXC_EMISUSE (bad handle, or a handle opened for writing), MXC_EINVAL (NULL data or
 * size), MXC_EFORMAT (a bad magic word, a truncated record, a continuation where a record
 * should start, a record over MXC_RECORDIO_MAX_RECORD — the message gives the path and
 * the byte offset), MXC_EIO, MXC_ENOMEM. After an error the position is unchanged. */
MXC_API int mxc_recordio_read(mxc_recordio *r, const void **data, size_t *size);

/** Moves the reader to the record of index key `key` (the last line with that key, as
 * MXNet reads the index).
 * Returns MXC_OK, MXC_EMISUSE (bad handle, a writer, or a reader without an index),
 * MXC_EINVAL (no such key). */
MXC_API int mxc_recordio_seek(mxc_recordio *r, int64_t key);

/** Moves the reader to byte `offset` (0, or an offset from mxc_recordio_tell or the
 * index). Returns MXC_OK, MXC_EMISUSE (bad handle or a writer), MXC_EINVAL (an offset past
 * the end of the file or not a multiple of 4). */
MXC_API int mxc_recordio_seek_offset(mxc_recordio *r, uint64_t offset);

/** The byte offset where the next record will be read or written, or -1 for a bad
 * handle. */
MXC_API int64_t mxc_recordio_tell(const mxc_recordio *r);

/** The index's keys in the order of its lines: `*keys` (owned by the handle, valid until
 * it is closed) and their number `*count` (0 without an index or for a writer).
 * Returns MXC_OK, MXC_EMISUSE (bad handle), MXC_EINVAL (NULL keys or count). */
MXC_API int mxc_recordio_keys(const mxc_recordio *r, const int64_t **keys, size_t *count);

/** Appends a record of `size` bytes (`data` may be NULL when size is 0) as MXNet does:
 * the magic word, the length word, the payload and zero padding to 4 bytes; a payload
 * holding the magic word at a 4-aligned offset is split there into continued parts.
 * Returns MXC_OK, MXC_EMISUSE (bad handle or a reader), MXC_EINVAL (NULL data with a
 * size, a size over MXC_RECORDIO_MAX_RECORD), MXC_EIO (with the path). */
MXC_API int mxc_recordio_write(mxc_recordio *r, const void *data, size_t size);

/** mxc_recordio_write, after appending "key<TAB>offset" to the index (which the handle
 * must have). Returns as mxc_recordio_write, and MXC_EMISUSE for a writer without index. */
MXC_API int mxc_recordio_write_idx(mxc_recordio *r, int64_t key, const void *data, size_t size);

/** Closes the files (flushing a writer's) and frees the handle. NULL is ignored (MXC_OK).
 * Returns MXC_OK, MXC_EMISUSE (bad handle: nothing is freed), MXC_EIO (a writer's final
 * flush failed, with the path; the handle is freed all the same). */
MXC_API int mxc_recordio_close(mxc_recordio *r);

/* ---- Image records ----------------------------------------------------------------- */

/** The header MXNet's im2rec puts before each image (IRHeader, 24 bytes little-endian:
 * uint32 flag, float32 label, uint64 id, uint64 id2). flag 0: one label, `label`; flag
 * n > 0: n float32 labels follow the header (and `label` is unused, 0). */
typedef struct mxc_image_record {
    uint32_t flag;
    float label;
    uint64_t id, id2;
    const float *labels; /**< unpack: the flag labels (into the record); NULL for flag 0 */
} mxc_image_record;

/** Size of the IRHeader. */
#define MXC_IMAGE_RECORD_HEADER 24

/** Splits an image record (`size` bytes at `rec`, 4-byte aligned as mxc_recordio_read
 * gives them) into its header `*hdr` (hdr->labels points into `rec`) and the encoded image
 * `*image` (`*image_size` bytes, may be 0). Returns MXC_OK, MXC_EINVAL (NULL pointers, a
 * misaligned rec with labels), MXC_EFORMAT (shorter than its header and labels). */
MXC_API int mxc_recordio_unpack_image(const void *rec, size_t size, mxc_image_record *hdr,
                                      const void **image, size_t *image_size);

/** Writes an image record into `out` (`capacity` bytes) as MXNet's recordio.pack: the
 * header (flag = num_labels, label = hdr->label when num_labels is 0, else 0), the
 * `num_labels` floats of `labels`, then the image bytes; `*size` receives the record's
 * size (also when capacity is too small, so a call with capacity 0 sizes the buffer).
 * hdr->flag and hdr->labels are ignored. Returns MXC_OK, MXC_EINVAL (NULL hdr or size,
 * NULL labels with num_labels > 0, NULL image with image_size > 0, NULL out with a
 * capacity, or a capacity below the size). */
MXC_API int mxc_recordio_pack_image(const mxc_image_record *hdr, const float *labels,
                                    uint32_t num_labels, const void *image, size_t image_size,
                                    void *out, size_t capacity, size_t *size);

/* ---- im2rec ------------------------------------------------------------------------ */

/** Options of mxc_im2rec (MXNet's tools/im2rec.py). Initialise with
 * mxc_im2rec_params_init; fields are only ever added at the end. */
typedef struct mxc_im2rec_params {
    int resize;      /**< > 0: decode, resize the shorter side to this (bilinear) and re-encode
                          as JPEG; default 0: store each file's bytes unchanged */
    int quality;     /**< JPEG quality when re-encoding, 1..100; default 95 (im2rec.py's) */
    int num_threads; /**< threads reading and encoding, 1..64; default 1 */
} mxc_im2rec_params;

/** Fills `params` with the defaults above. NULL is ignored. Thread-safe. */
MXC_API void mxc_im2rec_params_init(mxc_im2rec_params *params);

/** Writes the image list `list_path` (MXNet's .lst: "index<TAB>label<TAB>path" lines, the
 * label printed as "%f", the path relative to `root`) of the image files (.jpg, .jpeg,
 * .png, any case) in the sub-folders of `root`: the sub-folders sorted by name are classes
 * 0, 1, ...; files sorted by name within each. Indexes count in that order; with `shuffle`
 * the lines are written in a permutation drawn from `seed` (indexes stay with their
 * files). Hidden entries (starting with '.') are ignored. `*count` (may be NULL) receives
 * the number of images. Returns MXC_OK, MXC_EINVAL (NULL root or list_path), MXC_EIO (a
 * folder cannot be read or the list written, with the path), MXC_EFORMAT (no image found),
 * MXC_ENOMEM. Thread-safe. */
MXC_API int mxc_im2rec_make_list(const char *root, const char *list_path, int shuffle,
                                 uint64_t seed, int64_t *count);

/** Packs the images of the list `list_path` (lines "index<TAB>label[<TAB>label...]<TAB>path",
 * paths relative to `root`) into the RecordIO file `rec_path` with its index `idx_path`, in
 * the list's order: one image record per line (mxc_recordio_pack_image: id = index, one
 * label as the header's label, several as a label vector), keyed by index, as im2rec.py
 * does. A file that cannot be read or (with resize) decoded is skipped with a warning naming
 * it. `*count` (may be NULL) receives the number of records written. Returns MXC_OK,
 * MXC_EINVAL (NULL paths or params, bad params), MXC_EIO, MXC_EFORMAT (a malformed list
 * line: path:line; no image packed), MXC_ENOMEM. Thread-safe. */
MXC_API int mxc_im2rec(const char *list_path, const char *root, const char *rec_path,
                       const char *idx_path, const mxc_im2rec_params *params, int64_t *count);

#ifdef __cplusplus
}
#endif

#endif /* MXC_RECORDIO_H */

/*
 * ndarray/nd_format.h — MXNet's NDArray list format (mx.nd.save, .params checkpoints) as
 * bytes: a decoder for every record version MXNet 1.x reads and an encoder that writes
 * version 2 exactly as MXNet 1.9.1 does. It knows nothing of mxc_ndarray: records carry a
 * shape, a dtype and a pointer to host bytes, and ndarray/io.c moves them to and from
 * arrays. The layout is described in FORMATS.md ("NDArray list"). Not part of the API.
 *
 * Decoding rules beyond FORMATS.md, taken from MXNet 1.9.1's NDArray::Load:
 *  - The reserved word after the list magic is not checked, and bytes after the last name
 *    are ignored, as MXNet ignores them.
 *  - v3 (numpy-shape) records: ndim -1 or a dimension of -1 is an unknown shape, which
 *    ends the record like ndim 0 does in the other versions. ndim 0 in v3 is a 0-d
 *    (scalar) array with one element; mxc has no 0-d arrays, so it is MXC_ENOTSUP.
 *  - A first word that is not a version magic is a legacy ndim; when its uint32 dims
 *    cannot fit in the bytes left it is reported as a bad record magic (MXC_EFORMAT).
 *  - A name containing a NUL byte is MXC_ENOTSUP (names are handed out NUL-terminated).
 *
 * Array data is copied verbatim: element bytes are little-endian in the file and in
 * memory, so these functions assume a little-endian host (every platform mxc builds
 * for). Headers are read and written byte by byte, so unaligned buffers are fine.
 */
#ifndef MXC_ND_FORMAT_H
#define MXC_ND_FORMAT_H

#include "common/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MXC__ND_LIST_MAGIC 0x112u
#define MXC__ND_V1_MAGIC   0xF993FAC8u
#define MXC__ND_V2_MAGIC   0xF993FAC9u
#define MXC__ND_V3_MAGIC   0xF993FACAu

/* One array of a list.
 *
 * An "empty" record (MXNet's none array) has shape.ndim == 0; its file record ends after
 * the shape, so it has no dtype, context or data: the decoder reports dtype MXC_FLOAT32,
 * context cpu(0), data NULL, nbytes 0, and the encoder ignores those fields.
 *
 * Decoded: `name` is NULL for an unnamed list, else a NUL-terminated copy that lives in
 * the same allocation as the record array (free both with mxc__nd_records_free, never
 * the name alone); `data` points into the decoded buffer (NULL when nbytes is 0), so the
 * buffer must outlive the records; `version` is 0 (legacy), 1, 2 or 3.
 * Encoded: `name` is read when the list is named; `data` holds exactly
 * nbytes = prod(dims) * mxc_dtype_size(dtype) bytes, C order; `version` is ignored
 * (version 2 is written). */
struct mxc__nd_record {
    const char *name;
    mxc_shape shape;
    int dtype;    /* an mxc_dtype, i.e. MXNet's type flag */
    int dev_type; /* the recorded context: informational, written as given */
    int dev_id;
    const void *data;
    size_t nbytes;
    int version;
};

/* Parses a whole NDArray list file image of `len` bytes. On success *records is a new
 * array of *count records (NULL when *count is 0) to free with mxc__nd_records_free. On
 * failure *records is NULL, *count is 0 and nothing is allocated:
 *   MXC_EFORMAT  truncated or malformed data (bad magic, counts or sizes that do not fit
 *                in the bytes left, negative dims, dims whose product overflows, K not 0
 *                and not N); the message gives the byte offset and the record index;
 *   MXC_ENOTSUP  a valid record mxc cannot hold: sparse or unknown storage type, unknown
 *                type flag, more than MXC_MAX_NDIM dims, a 0-d array, a NUL in a name;
 *   MXC_ENOMEM   the result could not be allocated;
 *   MXC_EINVAL   records or count is NULL, or buf is NULL while len is not 0.
 * Every count and size is checked against the bytes left before anything is allocated,
 * and one allocation holds the records and their names. Thread-safe. */
int mxc__nd_decode(const void *buf, size_t len, struct mxc__nd_record **records, size_t *count);

/* Frees what mxc__nd_decode returned; NULL is fine. */
void mxc__nd_records_free(struct mxc__nd_record *records, size_t count);

/* Receives the encoded bytes in order; returns MXC_OK or an error it has recorded. */
typedef int (*mxc__nd_sink)(void *user, const void *bytes, size_t len);

/* The size of the file mxc__nd_encode would produce, after checking every record:
 * MXC_EINVAL for records NULL with count > 0, ndim outside 0..MXC_MAX_NDIM, a negative
 * dim, an unknown dtype, nbytes not matching the shape and dtype, data NULL with
 * nbytes > 0, a NULL name in a named list, or a size that overflows size_t. */
int mxc__nd_encoded_size(const struct mxc__nd_record *records, size_t count, bool named,
                         size_t *len);

/* Streams the list to `sink` in pieces (headers, then each array's data straight from
 * `data`, so large arrays are not copied). Every record is checked first, as by
 * mxc__nd_encoded_size, so nothing is written for invalid input. Allocates nothing. */
int mxc__nd_write(const struct mxc__nd_record *records, size_t count, bool named, mxc__nd_sink sink,
                  void *user);

/* Writes the list to `f` through mxc__nd_write; MXC_EIO when a write fails. */
int mxc__nd_write_file(const struct mxc__nd_record *records, size_t count, bool named, FILE *f);

/* Encodes the list into one new buffer (free with mxc__free): *buf and *len, or NULL and
 * 0 on failure (MXC_ENOMEM, or the errors of mxc__nd_encoded_size). */
int mxc__nd_encode(const struct mxc__nd_record *records, size_t count, bool named, void **buf,
                   size_t *len);

#endif /* MXC_ND_FORMAT_H */

/*
 * ndarray/nd_format.c — the bytes of MXNet's NDArray list files (FORMATS.md, "NDArray
 * list"): a decoder for legacy, v1, v2 and v3 records and a version-2 encoder, both
 * independent of mxc_ndarray (ndarray/io.c connects them to arrays).
 *
 * Decoding makes two passes over the image: the first validates everything, checking each
 * count and size against the bytes left, and allocates nothing; the second, over bytes
 * now known to be good, fills one allocation holding the records and their names. So a
 * malformed file costs no memory and a failed allocation leaves nothing behind.
 * Encoding checks every record, then streams headers and data to a sink; the in-memory
 * encoder is that writer with a sink into one buffer sized in advance.
 */
#include "ndarray/nd_format.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* The smallest record: a legacy one with ndim 0 (just the ndim word). Bounds N. */
#define MIN_RECORD_BYTES 4
/* List header: magic, reserved, N. */
#define LIST_HEADER_BYTES 24
/* Largest v2 record header: magic, storage type, ndim, dims, context, type flag. */
#define RECORD_HEADER_MAX (4 + 4 + 4 + 8 * MXC_MAX_NDIM + 4 + 4 + 4)

/* ---- Reading ----------------------------------------------------------------------- */

/* A read position in a file image. `part` and `index` name what is being read in error
 * messages ("record", 3); part is NULL in the list header. */
struct cursor {
    const uint8_t *buf;
    size_t len, pos;
    const char *part;
    size_t index;
};

static size_t bytes_left(const struct cursor *c) { return c->len - c->pos; }

/* Takes the next `n` bytes; MXC_EFORMAT naming `what` when fewer are left. */
static int read_bytes(struct cursor *c, size_t n, const char *what, const uint8_t **p) {
    if (n > bytes_left(c)) {
        if (c->part == NULL)
            return mxc__error(MXC_EFORMAT,
                              "NDArray list truncated: the %s needs %zu bytes at offset %zu, "
                              "%zu left",
                              what, n, c->pos, bytes_left(c));
        return mxc__error(MXC_EFORMAT,
                          "NDArray list truncated: %s %zu's %s needs %zu bytes at offset %zu, "
                          "%zu left",
                          c->part, c->index, what, n, c->pos, bytes_left(c));
    }
    *p = c->buf + c->pos;
    c->pos += n;
    return MXC_OK;
}

static uint32_t load_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t load_le64(const uint8_t *p) {
    return (uint64_t)load_le32(p) | (uint64_t)load_le32(p + 4) << 32;
}

static int read_u32(struct cursor *c, const char *what, uint32_t *v) {
    const uint8_t *p = NULL;
    int rc = read_bytes(c, 4, what, &p);
    if (rc == MXC_OK)
        *v = load_le32(p);
    return rc;
}

static int read_u64(struct cursor *c, const char *what, uint64_t *v) {
    const uint8_t *p = NULL;
    int rc = read_bytes(c, 8, what, &p);
    if (rc == MXC_OK)
        *v = load_le64(p);
    return rc;
}

/* Two's complement without implementation-defined conversions. */
static int read_i32(struct cursor *c, const char *what, int32_t *v) {
    uint32_t u = 0;
    int rc = read_u32(c, what, &u);
    *v = u <= INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1;
    return rc;
}

static int read_i64(struct cursor *c, const char *what, int64_t *v) {
    uint64_t u = 0;
    int rc = read_u64(c, what, &u);
    *v = u <= INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
    return rc;
}

/* prod(dims) * esize. False when it overflows: the product of the non-zero dims must fit
 * in int64 (mxc_shape_size's rule, so later element counts cannot overflow, whatever the
 * order of the dims) and the byte count in size_t. */
static bool shape_bytes(const mxc_shape *s, size_t esize, size_t *nbytes) {
    int64_t elems = mxc_shape_size(s);
    if (elems < 0 || (uint64_t)elems > SIZE_MAX / esize)
        return false;
    *nbytes = (size_t)elems * esize;
    return true;
}

static const char *storage_name(int32_t stype) {
    return stype == 1 ? "row_sparse" : stype == 2 ? "csr" : "unknown";
}

/* Reads the record at the cursor into `r` (c->index is its index). */
static int parse_record(struct cursor *c, struct mxc__nd_record *r) {
    int rc = MXC_OK;
    const size_t start = c->pos, i = c->index;
    uint32_t magic = 0, ndim = 0;
    const uint8_t *data = NULL;
    bool unknown = false;
    /* A none array: no context, type or data follow its shape. */
    *r = (struct mxc__nd_record){.dtype = MXC_FLOAT32, .dev_type = MXC_CPU};

    MXC_TRY(read_u32(c, "magic", &magic));
    r->version = magic == MXC__ND_V1_MAGIC   ? 1
                 : magic == MXC__ND_V2_MAGIC ? 2
                 : magic == MXC__ND_V3_MAGIC ? 3
                                             : 0;
    if (r->version >= 2) {
        int32_t stype;
        MXC_TRY(read_i32(c, "storage type", &stype));
        MXC_CHECK(stype == 0, MXC_ENOTSUP,
                  "NDArray list: record %zu at offset %zu has storage type %" PRId32
                  " (%s); only dense arrays are supported",
                  i, start, stype, storage_name(stype));
    }
    ndim = magic; /* legacy records start with ndim */
    if (r->version != 0)
        MXC_TRY(read_u32(c, "ndim", &ndim));
    if (r->version == 3 && ndim == UINT32_MAX)
        return MXC_OK; /* ndim -1: unknown shape in numpy-shape mode */

    size_t dim_bytes = r->version == 0 ? 4 : 8;
    MXC_CHECK(ndim <= bytes_left(c) / dim_bytes, MXC_EFORMAT,
              r->version == 0 ? "NDArray list: bad magic 0x%08" PRIx32 " of record %zu at "
                                "offset %zu (no known version, nor a legacy ndim whose dims "
                                "fit in the %zu bytes left)"
                              : "NDArray list: ndim %" PRIu32 " of record %zu at offset %zu "
                                "does not fit in the %zu bytes left",
              ndim, i, start, bytes_left(c));
    MXC_CHECK(ndim <= MXC_MAX_NDIM, MXC_ENOTSUP,
              "NDArray list: record %zu at offset %zu has %" PRIu32 " dims; mxc supports at "
              "most %d",
              i, start, ndim, MXC_MAX_NDIM);
    for (uint32_t d = 0; d < ndim; d++) {
        int64_t dim;
        if (r->version == 0) {
            uint32_t u;
            MXC_TRY(read_u32(c, "dim", &u));
            dim = u;
        } else {
            MXC_TRY(read_i64(c, "dim", &dim));
        }
        if (r->version == 3 && dim == -1)
            unknown = true; /* an unknown dim in numpy-shape mode */
        else
            MXC_CHECK(dim >= 0, MXC_EFORMAT,
                      "NDArray list: dim %" PRIu32 " of record %zu at offset %zu is %" PRId64, d, i,
                      start, dim);
        r->shape.dims[d] = dim;
    }
    MXC_CHECK(r->version != 3 || ndim != 0, MXC_ENOTSUP,
              "NDArray list: record %zu at offset %zu is a 0-d (scalar) numpy-shape array; "
              "mxc arrays have at least one dim",
              i, start);
    if (unknown || ndim == 0) {
        r->shape = (mxc_shape){0};
        return MXC_OK;
    }
    r->shape.ndim = (int32_t)ndim;

    int32_t dev_type, dev_id, dtype;
    MXC_TRY(read_i32(c, "context", &dev_type));
    MXC_TRY(read_i32(c, "context", &dev_id));
    MXC_TRY(read_i32(c, "type flag", &dtype));
    size_t esize = mxc_dtype_size(dtype);
    MXC_CHECK(esize != 0, MXC_ENOTSUP,
              "NDArray list: record %zu at offset %zu has unknown type flag %" PRId32, i, start,
              dtype);
    MXC_CHECK(shape_bytes(&r->shape, esize, &r->nbytes), MXC_EFORMAT,
              "NDArray list: the size of record %zu at offset %zu overflows", i, start);
    MXC_TRY(read_bytes(c, r->nbytes, "data", &data));
    r->dtype = dtype;
    r->dev_type = dev_type;
    r->dev_id = dev_id;
    r->data = r->nbytes ? data : NULL;
    return MXC_OK;
fail:
    return rc;
}

/* Walks the whole list. With `out` NULL it only validates, setting *count and the bytes
 * the NUL-terminated names need; with `out` and `names` (room for *count records and
 * *name_bytes, as found by a validating pass) it fills them in. */
static int parse_list(struct cursor *c, struct mxc__nd_record *out, char *names, size_t *count,
                      size_t *name_bytes) {
    int rc = MXC_OK;
    uint64_t magic, reserved, n, k;
    struct mxc__nd_record scratch;
    size_t at;

    c->part = NULL;
    MXC_TRY(read_u64(c, "list magic", &magic));
    MXC_CHECK(magic == MXC__ND_LIST_MAGIC, MXC_EFORMAT,
              "NDArray list: bad list magic 0x%" PRIx64 " at offset 0 (expected 0x%x)", magic,
              MXC__ND_LIST_MAGIC);
    MXC_TRY(read_u64(c, "reserved word", &reserved)); /* MXNet does not check it */
    at = c->pos;
    MXC_TRY(read_u64(c, "array count", &n));
    MXC_CHECK(n <= bytes_left(c) / MIN_RECORD_BYTES, MXC_EFORMAT,
              "NDArray list: %" PRIu64 " arrays (count at offset %zu) cannot fit in the %zu "
              "bytes left",
              n, at, bytes_left(c));
    c->part = "record";
    for (c->index = 0; c->index < n; c->index++)
        MXC_TRY(parse_record(c, out ? &out[c->index] : &scratch));

    c->part = NULL;
    at = c->pos;
    MXC_TRY(read_u64(c, "name count", &k));
    MXC_CHECK(k == 0 || k == n, MXC_EFORMAT,
              "NDArray list: %" PRIu64 " names (count at offset %zu) for %" PRIu64
              " arrays; must be 0 or the same",
              k, at, n);
    *name_bytes = 0;
    c->part = "name";
    for (c->index = 0; c->index < k; c->index++) {
        uint64_t len;
        const uint8_t *p = NULL;
        at = c->pos;
        MXC_TRY(read_u64(c, "length", &len));
        MXC_CHECK(len <= bytes_left(c), MXC_EFORMAT,
                  "NDArray list: name %zu (length at offset %zu) is %" PRIu64 " bytes long, "
                  "%zu left",
                  c->index, at, len, bytes_left(c));
        MXC_TRY(read_bytes(c, (size_t)len, "bytes", &p));
        MXC_CHECK(memchr(p, 0, (size_t)len) == NULL, MXC_ENOTSUP,
                  "NDArray list: name %zu at offset %zu contains a NUL byte", c->index, at + 8);
        if (out) {
            memcpy(names, p, (size_t)len);
            names[len] = '\0';
            out[c->index].name = names;
            names += len + 1;
        }
        *name_bytes += (size_t)len + 1;
    }
    if (out == NULL && c->pos < c->len)
        mxc__log(MXC_LOG_INFO, "NDArray list: ignoring %zu bytes after the names (offset %zu)",
                 bytes_left(c), c->pos);
    *count = (size_t)n;
fail:
    return rc;
}

int mxc__nd_decode(const void *buf, size_t len, struct mxc__nd_record **records, size_t *count) {
    int rc = MXC_OK;
    struct cursor c = {.buf = buf, .len = len};
    size_t n = 0, name_bytes = 0;
    struct mxc__nd_record *out = NULL;

    MXC_CHECK(records != NULL && count != NULL, MXC_EINVAL,
              "mxc__nd_decode: records and count must not be NULL");
    *records = NULL;
    *count = 0;
    MXC_CHECK(buf != NULL || len == 0, MXC_EINVAL, "mxc__nd_decode: buf is NULL, len %zu", len);
    MXC_TRY(parse_list(&c, NULL, NULL, &n, &name_bytes));
    if (n == 0)
        return MXC_OK;
    /* n <= len / 4 and name_bytes <= len + n, so this only trips on 32-bit hosts. */
    MXC_CHECK(n <= (SIZE_MAX - name_bytes) / sizeof *out, MXC_ENOMEM,
              "mxc__nd_decode: %zu records do not fit in memory", n);
    out = mxc__malloc(n * sizeof *out + name_bytes);
    MXC_CHECK(out != NULL, MXC_ENOMEM, "mxc__nd_decode: out of memory for %zu records", n);
    c.pos = 0;
    rc = parse_list(&c, out, (char *)(out + n), &n, &name_bytes);
    MXC_ASSERT(rc == MXC_OK); /* the same bytes passed the validating pass */
    *records = out;
    *count = n;
    return MXC_OK;
fail:
    return rc;
}

void mxc__nd_records_free(struct mxc__nd_record *records, size_t count) {
    (void)count; /* the records and their names are one allocation */
    mxc__free(records);
}

/* ---- Writing ----------------------------------------------------------------------- */

static uint8_t *store_le32(uint8_t *p, uint32_t v) {
    for (int b = 0; b < 4; b++)
        p[b] = (uint8_t)(v >> (8 * b));
    return p + 4;
}

static uint8_t *store_le64(uint8_t *p, uint64_t v) {
    return store_le32(store_le32(p, (uint32_t)v), (uint32_t)(v >> 32));
}

/* Adds `n` to *total; false on overflow. */
static bool add_size(size_t *total, size_t n) {
    if (n > SIZE_MAX - *total)
        return false;
    *total += n;
    return true;
}

/* Checks what the encoder reads of record `i`. */
static int check_record(const struct mxc__nd_record *r, size_t i, bool named) {
    int rc = MXC_OK;
    size_t esize, nbytes = 0;
    MXC_CHECK(!named || r->name != NULL, MXC_EINVAL,
              "mxc__nd_encode: record %zu has no name in a named list", i);
    MXC_CHECK(r->shape.ndim >= 0 && r->shape.ndim <= MXC_MAX_NDIM, MXC_EINVAL,
              "mxc__nd_encode: record %zu has ndim %" PRId32, i, r->shape.ndim);
    if (r->shape.ndim == 0)
        return MXC_OK; /* a none array: nothing after the shape */
    for (int d = 0; d < r->shape.ndim; d++)
        MXC_CHECK(r->shape.dims[d] >= 0, MXC_EINVAL,
                  "mxc__nd_encode: dim %d of record %zu is %" PRId64, d, i, r->shape.dims[d]);
    esize = mxc_dtype_size(r->dtype);
    MXC_CHECK(esize != 0, MXC_EINVAL, "mxc__nd_encode: record %zu has unknown dtype %d", i,
              r->dtype);
    MXC_CHECK(shape_bytes(&r->shape, esize, &nbytes), MXC_EINVAL,
              "mxc__nd_encode: the size of record %zu overflows", i);
    MXC_CHECK(r->nbytes == nbytes, MXC_EINVAL,
              "mxc__nd_encode: record %zu has %zu bytes, its shape and %s need %zu", i, r->nbytes,
              mxc_dtype_name(r->dtype), nbytes);
    MXC_CHECK(nbytes == 0 || r->data != NULL, MXC_EINVAL, "mxc__nd_encode: record %zu has no data",
              i);
fail:
    return rc;
}

int mxc__nd_encoded_size(const struct mxc__nd_record *records, size_t count, bool named,
                         size_t *len) {
    int rc = MXC_OK;
    size_t total = LIST_HEADER_BYTES + 8; /* header and K */
    MXC_CHECK(len != NULL, MXC_EINVAL, "mxc__nd_encode: len is NULL");
    *len = 0;
    MXC_CHECK(count == 0 || records != NULL, MXC_EINVAL,
              "mxc__nd_encode: records is NULL, count %zu", count);
    for (size_t i = 0; i < count; i++) {
        const struct mxc__nd_record *r = &records[i];
        MXC_TRY(check_record(r, i, named));
        size_t bytes = 12 + 8 * (size_t)r->shape.ndim; /* magic, storage type, shape */
        if (r->shape.ndim > 0)
            bytes += 12; /* context, type flag */
        MXC_CHECK(add_size(&total, bytes) && (r->shape.ndim == 0 || add_size(&total, r->nbytes)) &&
                      (!named || add_size(&total, 8)) &&
                      (!named || add_size(&total, strlen(r->name))),
                  MXC_EINVAL, "mxc__nd_encode: the file size overflows at record %zu", i);
    }
    *len = total;
fail:
    return rc;
}

int mxc__nd_write(const struct mxc__nd_record *records, size_t count, bool named, mxc__nd_sink sink,
                  void *user) {
    int rc = MXC_OK;
    size_t total;
    uint8_t hdr[RECORD_HEADER_MAX], *p;
    MXC_CHECK(sink != NULL, MXC_EINVAL, "mxc__nd_write: sink is NULL");
    MXC_TRY(mxc__nd_encoded_size(records, count, named, &total));

    p = store_le64(store_le64(store_le64(hdr, MXC__ND_LIST_MAGIC), 0), count);
    MXC_TRY(sink(user, hdr, (size_t)(p - hdr)));
    for (size_t i = 0; i < count; i++) {
        const struct mxc__nd_record *r = &records[i];
        p = store_le32(store_le32(hdr, MXC__ND_V2_MAGIC), 0); /* dense storage */
        p = store_le32(p, (uint32_t)r->shape.ndim);
        for (int d = 0; d < r->shape.ndim; d++)
            p = store_le64(p, (uint64_t)r->shape.dims[d]);
        if (r->shape.ndim > 0) {
            p = store_le32(store_le32(p, (uint32_t)r->dev_type), (uint32_t)r->dev_id);
            p = store_le32(p, (uint32_t)r->dtype);
        }
        MXC_TRY(sink(user, hdr, (size_t)(p - hdr)));
        if (r->shape.ndim > 0 && r->nbytes > 0)
            MXC_TRY(sink(user, r->data, r->nbytes));
    }
    p = store_le64(hdr, named ? count : 0);
    MXC_TRY(sink(user, hdr, (size_t)(p - hdr)));
    for (size_t i = 0; named && i < count; i++) {
        size_t len = strlen(records[i].name);
        p = store_le64(hdr, len);
        MXC_TRY(sink(user, hdr, (size_t)(p - hdr)));
        if (len > 0)
            MXC_TRY(sink(user, records[i].name, len));
    }
fail:
    return rc;
}

static int file_sink(void *user, const void *bytes, size_t len) {
    if (fwrite(bytes, 1, len, (FILE *)user) != len)
        return mxc__error(MXC_EIO, "NDArray list: writing %zu bytes failed: %s", len,
                          strerror(errno));
    return MXC_OK;
}

int mxc__nd_write_file(const struct mxc__nd_record *records, size_t count, bool named, FILE *f) {
    if (f == NULL)
        return mxc__error(MXC_EINVAL, "mxc__nd_write_file: f is NULL");
    return mxc__nd_write(records, count, named, file_sink, f);
}

/* A buffer sized in advance by mxc__nd_encoded_size. */
struct memory_sink {
    uint8_t *buf;
    size_t len, cap;
};

static int memory_sink(void *user, const void *bytes, size_t len) {
    struct memory_sink *m = user;
    MXC_ASSERT(len <= m->cap - m->len);
    memcpy(m->buf + m->len, bytes, len);
    m->len += len;
    return MXC_OK;
}

int mxc__nd_encode(const struct mxc__nd_record *records, size_t count, bool named, void **buf,
                   size_t *len) {
    int rc = MXC_OK;
    struct memory_sink m = {0};
    MXC_CHECK(buf != NULL && len != NULL, MXC_EINVAL,
              "mxc__nd_encode: buf and len must not be NULL");
    *buf = NULL;
    *len = 0;
    MXC_TRY(mxc__nd_encoded_size(records, count, named, &m.cap));
    m.buf = mxc__malloc(m.cap);
    MXC_CHECK(m.buf != NULL, MXC_ENOMEM, "mxc__nd_encode: out of memory for %zu bytes", m.cap);
    MXC_TRY(mxc__nd_write(records, count, named, memory_sink, &m));
    MXC_ASSERT(m.len == m.cap);
    *buf = m.buf;
    *len = m.len;
    return MXC_OK;
fail:
    mxc__free(m.buf);
    return rc;
}

/*
 * io/recordio.c — RecordIO reading and writing as dmlc-core does it (mxc/recordio.h,
 * docs/formats.md), the `.idx` index, and the image record header. The image record
 * iterator (image_iter.c) reads through these functions.
 *
 * A record on disk is one or more parts, each: the magic word, a length word
 * lrec = cflag << 29 | length, `length` payload bytes and zero padding to a multiple of 4.
 * cflag 0 is a whole record; a payload holding the magic word at a 4-aligned offset is cut
 * there into parts flagged 1 (first), 2 (middle) and 3 (last), the magic words themselves
 * dropped, so a reader resynchronising on magic words never meets one inside a payload.
 * Every length is checked against the bytes the file really has before anything is
 * allocated or read, so a corrupt file is MXC_EFORMAT naming the offset, never a crash or
 * a huge allocation.
 */
#include "common/common.h"
#include "common/handle.h"
#include "io/io_impl.h"
#include "mxc/recordio.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RECORDIO_MAGIC 0xced7230au
#define RECIO_LIVE     0x5245434fu /* "RECO" */
#define RECIO_DEAD     0x52454346u /* "RECF": freed (common/handle.h) */
#define LEN_MASK       ((1u << 29) - 1)

struct idx_entry {
    int64_t key;
    uint64_t offset;
    size_t line; /* for equal keys the last line wins, as in MXNet's MXIndexedRecordIO */
};

struct mxc_recordio {
    _Atomic uint32_t magic;
    char *path, *idx_path;
    FILE *f, *idx; /* idx: a writer's index; NULL otherwise */
    bool write;
    uint64_t pos;       /* offset of the next record */
    uint64_t fpos;      /* where the stream is (a reader seeks only when pos differs) */
    uint64_t size;      /* a reader's file size, taken at open */
    unsigned char *buf; /* a reader's last record */
    size_t cap;
    int64_t *keys;            /* the index's keys, in line order */
    struct idx_entry *sorted; /* by key, then by line, the last line first */
    size_t num_keys;
};

static mxc__handle_kind recordio_kind =
    MXC__HANDLE_KIND(struct mxc_recordio, "a RecordIO handle", RECIO_LIVE, RECIO_DEAD);

static void put_le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- The index --------------------------------------------------------------------- */

static int cmp_entry(const void *a, const void *b) {
    const struct idx_entry *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->line > y->line ? -1 : x->line < y->line;
}

/* Parses one "key<TAB>offset" line (surrounding blanks allowed). */
static bool parse_line(const char *s, int64_t *key, uint64_t *offset) {
    char *end;
    errno = 0;
    long long k = strtoll(s, &end, 10);
    if (end == s || errno != 0 || *end != '\t' || end[1] < '0' || end[1] > '9')
        return false;
    s = end + 1;
    unsigned long long o = strtoull(s, &end, 10);
    if (errno != 0)
        return false;
    while (*end == ' ' || *end == '\t' || *end == '\r')
        end++;
    *key = k;
    *offset = o;
    return *end == '\0';
}

/* Reads the index: its lines (blank ones skipped), each offset checked against the data
 * file's size. */
static int read_index(mxc_recordio *r) {
    int rc = MXC_OK;
    char *text = NULL;
    size_t len, lines = 1, n = 0, line = 0;
    MXC_TRY(mxc__file_read("RecordIO", r->idx_path, &text, &len));
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    r->keys = mxc__malloc(lines * sizeof *r->keys);
    r->sorted = mxc__malloc(lines * sizeof *r->sorted);
    MXC_CHECK(r->keys && r->sorted, MXC_ENOMEM, "RecordIO: out of memory for index '%s'",
              r->idx_path);
    for (char *p = text; p < text + len;) {
        char *end = memchr(p, '\n', (size_t)(text + len - p));
        char *next = end ? end + 1 : text + len;
        if (end)
            *end = '\0';
        line++;
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (*p != '\0') {
            int64_t key;
            uint64_t offset;
            /* strlen: a NUL byte inside the line must not hide the rest of it */
            size_t line_len = (size_t)((end ? end : text + len) - p);
            MXC_CHECK(strlen(p) == line_len && parse_line(p, &key, &offset), MXC_EFORMAT,
                      "RecordIO: '%s':%zu: expected \"key<TAB>offset\"", r->idx_path, line);
            MXC_CHECK(offset <= r->size && offset % 4 == 0, MXC_EFORMAT,
                      "RecordIO: '%s':%zu: offset %" PRIu64 " is %s of '%s' (%" PRIu64 " bytes)",
                      r->idx_path, line, offset,
                      offset % 4 ? "not a record boundary" : "past the end", r->path, r->size);
            r->keys[n] = key;
            r->sorted[n] = (struct idx_entry){key, offset, line};
            n++;
        }
        p = next;
    }
    r->num_keys = n;
    qsort(r->sorted, n, sizeof *r->sorted, cmp_entry);
fail:
    mxc__free(text);
    return rc;
}

/* ---- Opening and closing ----------------------------------------------------------- */

/* Closes everything; returns MXC_EIO when a writer's data did not reach the files. */
static int recordio_destroy(mxc_recordio *r) {
    int rc = MXC_OK;
    if (r->f && fclose(r->f) != 0 && r->write)
        rc = mxc__error(MXC_EIO, "RecordIO: cannot write '%s': %s", r->path, strerror(errno));
    if (r->idx && fclose(r->idx) != 0 && rc == MXC_OK)
        rc = mxc__error(MXC_EIO, "RecordIO: cannot write '%s': %s", r->idx_path, strerror(errno));
    mxc__free(r->path);
    mxc__free(r->idx_path);
    mxc__free(r->buf);
    mxc__free(r->keys);
    mxc__free(r->sorted);
    mxc__handle_free(&recordio_kind, r);
    return rc;
}

static FILE *open_write(const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f)
        mxc__error(MXC_EIO, "RecordIO: cannot create '%s': %s", path, strerror(errno));
    return f;
}

int mxc_recordio_open(const char *path, const char *idx_path, int write, mxc_recordio **out) {
    int rc = MXC_OK;
    mxc_recordio *r = NULL;
    if (out)
        *out = NULL;
    MXC_CHECK(path != NULL, MXC_EINVAL, "%s: path is NULL", __func__);
    MXC_CHECK(out != NULL, MXC_EINVAL, "%s: out is NULL", __func__);
    r = mxc__handle_alloc(&recordio_kind);
    MXC_CHECK(r != NULL, MXC_ENOMEM, "%s: out of memory", __func__);
    r->write = write != 0;
    r->path = mxc__strdup(path);
    r->idx_path = idx_path ? mxc__strdup(idx_path) : NULL;
    MXC_CHECK(r->path && (!idx_path || r->idx_path), MXC_ENOMEM, "%s: out of memory", __func__);
    if (r->write) {
        r->f = open_write(path);
        if (!r->f)
            MXC_TRY(MXC_EIO);
        if (idx_path) {
            r->idx = open_write(idx_path);
            if (!r->idx)
                MXC_TRY(MXC_EIO);
        }
    } else {
        int fd;
        size_t size;
        MXC_TRY(mxc__file_open_regular("RecordIO", path, &fd, &size));
        r->size = size;
        r->f = fdopen(fd, "rb");
        if (!r->f) {
            close(fd);
            MXC_CHECK(false, MXC_ENOMEM, "RecordIO: out of memory opening '%s'", path);
        }
        if (idx_path)
            MXC_TRY(read_index(r));
    }
    mxc__handle_publish(&recordio_kind, r);
    *out = r;
    return MXC_OK;
fail:
    if (r)
        recordio_destroy(r);
    return mxc__in_call(__func__, rc);
}

int mxc_recordio_close(mxc_recordio *r) {
    if (!r)
        return MXC_OK;
    int rc = mxc__handle_check(&recordio_kind, r, __func__, "r");
    if (rc != MXC_OK)
        return rc;
    return mxc__in_call(__func__, recordio_destroy(r));
}

/* A live handle of the right direction (`write`: a writer). */
static int check_handle(const mxc_recordio *r, const char *fn, int write) {
    int rc = mxc__handle_check(&recordio_kind, r, fn, "r");
    if (rc == MXC_OK && write >= 0 && r->write != (write != 0))
        rc = mxc__error(MXC_EMISUSE, "%s: '%s' is open for %s", fn, r->path,
                        r->write ? "writing" : "reading");
    return rc;
}

/* ---- Reading ----------------------------------------------------------------------- */

/* Reads `n` bytes at the reader's stream position `at`. */
static int read_at(mxc_recordio *r, uint64_t at, void *dst, size_t n) {
    if (r->fpos != at) {
        if (fseeko(r->f, (off_t)at, SEEK_SET) != 0)
            return mxc__error(MXC_EIO, "RecordIO: cannot seek in '%s': %s", r->path,
                              strerror(errno));
        r->fpos = at;
    }
    size_t got = fread(dst, 1, n, r->f);
    r->fpos += got;
    if (got != n) {
        int err = ferror(r->f) ? errno : 0;
        clearerr(r->f);
        return mxc__error(err ? MXC_EIO : MXC_EFORMAT, "RecordIO: '%s': at byte %" PRIu64 ": %s",
                          r->path, at, err ? strerror(err) : "the file shrank while read");
    }
    return MXC_OK;
}

static int reserve(mxc_recordio *r, size_t need) {
    if (need <= r->cap)
        return MXC_OK;
    size_t cap = r->cap ? r->cap : 4096;
    while (cap < need)
        cap *= 2;
    unsigned char *grown = mxc__realloc(r->buf, cap);
    if (!grown)
        return mxc__error(MXC_ENOMEM, "RecordIO: out of memory for a record of %zu bytes", need);
    r->buf = grown;
    r->cap = cap;
    return MXC_OK;
}

/* Reads the record at r->pos into r->buf (`keep`) or only checks its part headers and
 * steps over it; 1, 0 at the end, or an error. */
static int next_record(mxc_recordio *r, bool keep, size_t *size) {
    int rc = MXC_OK;
    uint64_t pos = r->pos, start = r->pos;
    size_t have = 0;
    *size = 0;
    if (pos >= r->size)
        return 0;
    for (bool first = true;; first = false) {
        unsigned char head[8];
        MXC_CHECK(r->size - pos >= 8, MXC_EFORMAT,
                  "RecordIO: '%s' is truncated: a record header at byte %" PRIu64 " with %" PRIu64
                  " of its 8 bytes",
                  r->path, pos, r->size - pos);
        MXC_TRY(read_at(r, pos, head, 8));
        uint32_t magic = get_le32(head), lrec = get_le32(head + 4);
        MXC_CHECK(magic == RECORDIO_MAGIC, MXC_EFORMAT,
                  "RecordIO: '%s': bad magic 0x%08" PRIx32 " at byte %" PRIu64 " (expected 0x%08x)",
                  r->path, magic, pos, RECORDIO_MAGIC);
        uint32_t cflag = lrec >> 29, len = lrec & LEN_MASK;
        MXC_CHECK(first ? cflag <= 1 : cflag == 2 || cflag == 3, MXC_EFORMAT,
                  "RecordIO: '%s': %s part (flag %" PRIu32 ") at byte %" PRIu64
                  " where %s expected",
                  r->path, cflag <= 1 ? "a first" : "a continuation", cflag, pos,
                  first ? "a record start is" : "the continuation of the record at byte");
        uint64_t padded = ((uint64_t)len + 3) & ~(uint64_t)3;
        MXC_CHECK(r->size - pos - 8 >= padded, MXC_EFORMAT,
                  "RecordIO: '%s' is truncated: the record part at byte %" PRIu64 " holds %" PRIu32
                  " bytes (%" PRIu64 " padded), %" PRIu64 " remain",
                  r->path, pos, len, padded, r->size - pos - 8);
        bool more = cflag == 1 || cflag == 2;
        MXC_CHECK(have + len + (more ? 4 : 0) <= MXC_RECORDIO_MAX_RECORD, MXC_EFORMAT,
                  "RecordIO: '%s': the record at byte %" PRIu64 " exceeds %zu bytes", r->path,
                  start, MXC_RECORDIO_MAX_RECORD);
        if (keep) {
            MXC_TRY(reserve(r, have + (size_t)padded + 4));
            if (padded)
                MXC_TRY(read_at(r, pos + 8, r->buf + have, (size_t)padded));
            if (more) /* the writer cut the record at a magic word */
                put_le32(r->buf + have + len, RECORDIO_MAGIC);
        }
        have += len + (more ? 4 : 0);
        pos += 8 + padded;
        if (!more)
            break;
    }
    r->pos = pos;
    *size = have;
    return 1;
fail:
    return rc;
}

void mxc__recordio_index_offsets(const mxc_recordio *r, uint64_t *offsets) {
    for (size_t i = 0; i < r->num_keys; i++)
        offsets[i] = r->sorted[i].offset;
}

int mxc__recordio_skip(mxc_recordio *r, uint64_t *offset) {
    size_t size;
    *offset = r->pos;
    return next_record(r, false, &size);
}

int mxc_recordio_read(mxc_recordio *r, const void **data, size_t *size) {
    int rc = MXC_OK;
    if (data)
        *data = NULL;
    if (size)
        *size = 0;
    MXC_TRY(check_handle(r, __func__, 0));
    MXC_CHECK(data && size, MXC_EINVAL, "%s: %s is NULL", __func__, data ? "size" : "data");
    rc = next_record(r, true, size);
    if (rc == 1)
        *data = r->buf ? r->buf : (const unsigned char *)"";
fail:
    return mxc__in_call(__func__, rc);
}

int mxc_recordio_seek_offset(mxc_recordio *r, uint64_t offset) {
    int rc = MXC_OK;
    MXC_TRY(check_handle(r, __func__, 0));
    MXC_CHECK(offset <= r->size && offset % 4 == 0, MXC_EINVAL,
              "%s: offset %" PRIu64 " of '%s' (%" PRIu64 " bytes) is %s", __func__, offset, r->path,
              r->size, offset % 4 ? "not a multiple of 4" : "past the end");
    r->pos = offset;
fail:
    return rc;
}

int mxc_recordio_seek(mxc_recordio *r, int64_t key) {
    int rc = MXC_OK;
    MXC_TRY(check_handle(r, __func__, 0));
    MXC_CHECK(r->idx_path != NULL, MXC_EMISUSE, "%s: '%s' was opened without an index", __func__,
              r->path);
    struct idx_entry probe = {key, 0, SIZE_MAX}, *e = NULL;
    /* the lower bound of (key, last line): the first entry with this key */
    size_t lo = 0, hi = r->num_keys;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_entry(&r->sorted[mid], &probe) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < r->num_keys && r->sorted[lo].key == key)
        e = &r->sorted[lo];
    MXC_CHECK(e != NULL, MXC_EINVAL, "%s: no key %" PRId64 " in index '%s'", __func__, key,
              r->idx_path);
    r->pos = e->offset;
fail:
    return rc;
}

int64_t mxc_recordio_tell(const mxc_recordio *r) {
    return check_handle(r, __func__, -1) == MXC_OK ? (int64_t)r->pos : -1;
}

int mxc_recordio_keys(const mxc_recordio *r, const int64_t **keys, size_t *count) {
    int rc = MXC_OK;
    MXC_TRY(check_handle(r, __func__, -1));
    MXC_CHECK(keys && count, MXC_EINVAL, "%s: %s is NULL", __func__, keys ? "count" : "keys");
    *keys = r->keys;
    *count = r->num_keys;
fail:
    return rc;
}

/* ---- Writing ----------------------------------------------------------------------- */

static int write_bytes(mxc_recordio *r, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, r->f) != n)
        return mxc__error(MXC_EIO, "RecordIO: cannot write '%s': %s", r->path, strerror(errno));
    r->pos += n;
    return MXC_OK;
}

static int write_part(mxc_recordio *r, uint32_t cflag, const unsigned char *p, size_t n) {
    unsigned char head[8];
    put_le32(head, RECORDIO_MAGIC);
    put_le32(head + 4, cflag << 29 | (uint32_t)n);
    int rc = write_bytes(r, head, 8);
    return rc == MXC_OK ? write_bytes(r, p, n) : rc;
}

/* dmlc-core's RecordIOWriter::WriteRecord, byte for byte. */
static int write_record(mxc_recordio *r, const unsigned char *data, size_t size) {
    int rc = MXC_OK;
    if (!data) /* size 0: no pointer arithmetic on NULL below */
        data = (const unsigned char *)"";
    size_t done = 0; /* payload bytes written (the magic words cut out included) */
    for (size_t i = 0; i + 4 <= size; i += 4) {
        if (get_le32(data + i) != RECORDIO_MAGIC)
            continue;
        MXC_TRY(write_part(r, done == 0 ? 1u : 2u, data + done, i - done));
        done = i + 4;
    }
    MXC_TRY(write_part(r, done ? 3u : 0u, data + done, size - done));
    static const unsigned char zeros[4] = {0};
    MXC_TRY(write_bytes(r, zeros, (4 - size % 4) % 4));
fail:
    return rc;
}

/* The checks of mxc_recordio_write and _write_idx. */
static int check_write(mxc_recordio *r, const char *fn, const void *data, size_t size) {
    int rc = MXC_OK;
    MXC_TRY(check_handle(r, fn, 1));
    MXC_CHECK(data || size == 0, MXC_EINVAL, "%s: data is NULL with size %zu", fn, size);
    MXC_CHECK(size <= MXC_RECORDIO_MAX_RECORD, MXC_EINVAL,
              "%s: a record of %zu bytes exceeds the %zu bytes allowed", fn, size,
              MXC_RECORDIO_MAX_RECORD);
fail:
    return rc;
}

int mxc_recordio_write(mxc_recordio *r, const void *data, size_t size) {
    int rc = MXC_OK;
    MXC_TRY(check_write(r, __func__, data, size));
    rc = write_record(r, data, size);
fail:
    return mxc__in_call(__func__, rc);
}

int mxc_recordio_write_idx(mxc_recordio *r, int64_t key, const void *data, size_t size) {
    int rc = MXC_OK;
    MXC_TRY(check_write(r, __func__, data, size));
    MXC_CHECK(r->idx != NULL, MXC_EMISUSE, "%s: '%s' was opened without an index", __func__,
              r->path);
    MXC_CHECK(fprintf(r->idx, "%" PRId64 "\t%" PRIu64 "\n", key, r->pos) > 0, MXC_EIO,
              "RecordIO: cannot write '%s': %s", r->idx_path, strerror(errno));
    rc = write_record(r, data, size);
fail:
    return mxc__in_call(__func__, rc);
}

/* ---- Image records ----------------------------------------------------------------- */

int mxc_recordio_unpack_image(const void *rec, size_t size, mxc_image_record *hdr,
                              const void **image, size_t *image_size) {
    int rc = MXC_OK;
    MXC_CHECK(rec && hdr && image && image_size, MXC_EINVAL, "%s: %s is NULL", __func__,
              !rec     ? "rec"
              : !hdr   ? "hdr"
              : !image ? "image"
                       : "image_size");
    const unsigned char *p = rec;
    MXC_CHECK(size >= MXC_IMAGE_RECORD_HEADER, MXC_EFORMAT,
              "%s: a record of %zu bytes is shorter than the %d-byte image header", __func__, size,
              MXC_IMAGE_RECORD_HEADER);
    memset(hdr, 0, sizeof *hdr);
    hdr->flag = get_le32(p);
    memcpy(&hdr->label, p + 4, 4);
    memcpy(&hdr->id, p + 8, 8);
    memcpy(&hdr->id2, p + 16, 8);
    size_t rest = size - MXC_IMAGE_RECORD_HEADER;
    p += MXC_IMAGE_RECORD_HEADER;
    if (hdr->flag > 0) {
        MXC_CHECK(rest / 4 >= hdr->flag, MXC_EFORMAT,
                  "%s: the header announces %" PRIu32 " labels, the record holds %zu bytes after "
                  "it",
                  __func__, hdr->flag, rest);
        MXC_CHECK((uintptr_t)p % _Alignof(float) == 0, MXC_EINVAL,
                  "%s: rec is not aligned to 4 bytes", __func__);
        hdr->labels = (const float *)(const void *)p;
        p += (size_t)hdr->flag * 4;
        rest -= (size_t)hdr->flag * 4;
    }
    *image = p;
    *image_size = rest;
fail:
    return rc;
}

int mxc_recordio_pack_image(const mxc_image_record *hdr, const float *labels, uint32_t num_labels,
                            const void *image, size_t image_size, void *out, size_t capacity,
                            size_t *size) {
    int rc = MXC_OK;
    MXC_CHECK(hdr && size, MXC_EINVAL, "%s: %s is NULL", __func__, hdr ? "size" : "hdr");
    MXC_CHECK(labels || num_labels == 0, MXC_EINVAL, "%s: labels is NULL with num_labels %" PRIu32,
              __func__, num_labels);
    MXC_CHECK(image || image_size == 0, MXC_EINVAL, "%s: image is NULL with image_size %zu",
              __func__, image_size);
    MXC_CHECK(image_size <= MXC_RECORDIO_MAX_RECORD, MXC_EINVAL, "%s: image_size %zu is too large",
              __func__, image_size);
    size_t need = MXC_IMAGE_RECORD_HEADER + (size_t)num_labels * 4 + image_size;
    *size = need;
    MXC_CHECK(out || capacity == 0, MXC_EINVAL, "%s: out is NULL with capacity %zu", __func__,
              capacity);
    MXC_CHECK(capacity >= need, MXC_EINVAL, "%s: capacity %zu is below the record's %zu bytes",
              __func__, capacity, need);
    unsigned char *p = out;
    float label = num_labels ? 0.0f : hdr->label;
    put_le32(p, num_labels);
    memcpy(p + 4, &label, 4);
    memcpy(p + 8, &hdr->id, 8);
    memcpy(p + 16, &hdr->id2, 8);
    if (num_labels)
        memcpy(p + MXC_IMAGE_RECORD_HEADER, labels, (size_t)num_labels * 4);
    if (image_size)
        memcpy(p + MXC_IMAGE_RECORD_HEADER + (size_t)num_labels * 4, image, image_size);
fail:
    return rc;
}

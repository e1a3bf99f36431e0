/*
 * tests/check_nd_format.c — the NDArray list codec (ndarray/nd_format.c): every fixture
 * in tests/data/nd (files written by MXNet 1.9.1 and hand-built v1 / legacy / none-array
 * files, see scripts/make_nd_fixtures.py) decodes to what its description says, version-2
 * files re-encode byte for byte, FORMATS.md's worked example, truncation at every byte,
 * absurd counts, bad magics, unsupported records, encoder misuse, random round trips,
 * allocation-failure sweeps and random corruption, always without leaks.
 * Run from the repository root, or point MXC_TEST_DATA at tests/data.
 */
#include "ndarray/nd_format.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct mxct_alloc_counts counts;

/* ---- Fixtures and their descriptions ----------------------------------------------- */

#define MAX_FIXTURES 32
#define MAX_ARRAYS   16
#define MAX_BYTES    1024

struct expected_array {
    char name[64]; /* "" when unnamed */
    int dtype, dev_type, dev_id;
    mxc_shape shape;
    uint8_t data[MAX_BYTES];
    size_t nbytes;
};

/* A NAME.txt file (format in scripts/make_nd_fixtures.py). */
struct expected {
    int version;
    int code; /* MXC_OK, or the error decoding must give */
    bool named;
    size_t count;
    struct expected_array arrays[MAX_ARRAYS];
};

static char *data_path(const char *name, const char *ext) {
    const char *dir = getenv("MXC_TEST_DATA");
    static char path[4096];
    snprintf(path, sizeof path, "%s/nd/%s%s", dir && *dir ? dir : "tests/data", name, ext);
    return path;
}

/* The fixture's bytes in a heap block of exactly their size (so AddressSanitizer sees any
 * read past the end); free it. */
static uint8_t *load_params(const char *name, size_t *len) {
    char *text = mxct_read_file(data_path(name, ".params"), len);
    ck_assert_msg(text != NULL, "cannot read %s (run from the repo root or set MXC_TEST_DATA)",
                  data_path(name, ".params"));
    uint8_t *exact = malloc(*len ? *len : 1);
    ck_assert_ptr_nonnull(exact);
    memcpy(exact, text, *len);
    free(text);
    return exact;
}

static int dtype_by_name(const char *name) {
    for (int d = 0; mxc_dtype_name(d) != NULL; d++)
        if (strcmp(mxc_dtype_name(d), name) == 0)
            return d;
    ck_abort_msg("unknown dtype %s in a description", name);
    return -1;
}

static int code_by_name(const char *name) {
    char full[64];
    snprintf(full, sizeof full, "MXC_%s", name);
    for (int code = 0; code > -100; code--)
        if (strcmp(mxc_err_name(code), full) == 0)
            return code;
    ck_abort_msg("unknown status %s in a description", name);
    return 0;
}

static void parse_hex(const char *hex, struct expected_array *a) {
    size_t n = strlen(hex);
    ck_assert_msg(n % 2 == 0 && n / 2 <= MAX_BYTES, "bad data line (%zu hex digits)", n);
    for (size_t i = 0; i < n / 2; i++) {
        unsigned byte;
        ck_assert_int_eq(sscanf(hex + 2 * i, "%2x", &byte), 1);
        a->data[i] = (uint8_t)byte;
    }
    a->nbytes = n / 2;
}

static void parse_array_line(char *line, struct expected_array *a) {
    char *save = NULL, *tok[4 + 3 + 2 + MXC_MAX_NDIM];
    int n = 0;
    for (char *t = strtok_r(line, " \n", &save); t && n < (int)MXC_ARRAY_SIZE(tok);
         t = strtok_r(NULL, " \n", &save))
        tok[n++] = t;
    /* array NAME DTYPE ctx T ID shape NDIM dims... */
    ck_assert_msg(n >= 8 && strcmp(tok[3], "ctx") == 0 && strcmp(tok[6], "shape") == 0,
                  "bad array line");
    snprintf(a->name, sizeof a->name, "%s", strcmp(tok[1], "-") == 0 ? "" : tok[1]);
    a->dtype = dtype_by_name(tok[2]);
    a->dev_type = atoi(tok[4]);
    a->dev_id = atoi(tok[5]);
    a->shape.ndim = atoi(tok[7]);
    ck_assert_int_eq(n, 8 + a->shape.ndim);
    for (int d = 0; d < a->shape.ndim; d++)
        a->shape.dims[d] = strtoll(tok[8 + d], NULL, 10);
}

static void read_description(const char *name, struct expected *e) {
    FILE *f = fopen(data_path(name, ".txt"), "r");
    ck_assert_msg(f != NULL, "cannot open %s", data_path(name, ".txt"));
    memset(e, 0, sizeof *e);
    e->version = -1;
    char *line = NULL, word[32];
    size_t cap = 0, arrays = 0;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (sscanf(line, "version %d", &e->version) == 1)
            continue;
        if (sscanf(line, "expect %31s", word) == 1) {
            e->code = code_by_name(word);
        } else if (sscanf(line, "list %31s %zu", word, &e->count) == 2) {
            e->named = strcmp(word, "named") == 0;
            ck_assert_uint_le(e->count, MAX_ARRAYS);
        } else if (strncmp(line, "array ", 6) == 0) {
            ck_assert_uint_lt(arrays, e->count);
            parse_array_line(line, &e->arrays[arrays++]);
        } else if (strncmp(line, "data", 4) == 0) {
            ck_assert_uint_gt(arrays, 0);
            parse_hex(line[4] == ' ' ? line + 5 : "", &e->arrays[arrays - 1]);
        } else {
            ck_abort_msg("%s: unexpected line '%s'", name, line);
        }
    }
    free(line);
    fclose(f);
    ck_assert_msg(e->version >= 0, "%s: no version line", name);
    ck_assert_msg(e->code != MXC_OK || arrays == e->count, "%s: %zu of %zu arrays described", name,
                  arrays, e->count);
}

/* The fixture names from index.txt; returns how many. */
static size_t read_index(char names[][64]) {
    FILE *f = fopen(data_path("index", ".txt"), "r");
    ck_assert_msg(f != NULL, "cannot open %s (run from the repo root or set MXC_TEST_DATA)",
                  data_path("index", ".txt"));
    char line[256];
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        ck_assert_uint_lt(n, MAX_FIXTURES);
        ck_assert_uint_lt(strlen(line), 64);
        memcpy(names[n++], line, 64);
    }
    fclose(f);
    ck_assert_uint_ge(n, 11); /* what scripts/make_nd_fixtures.py writes */
    return n;
}

/* Records against a description; `version` -1 skips the version check. */
static void check_records(const char *what, const struct mxc__nd_record *r, size_t n,
                          const struct expected *e, int version) {
    ck_assert_msg(n == e->count, "%s: %zu records, expected %zu", what, n, e->count);
    for (size_t i = 0; i < n; i++) {
        const struct expected_array *a = &e->arrays[i];
        if (e->named)
            ck_assert_msg(r[i].name && strcmp(r[i].name, a->name) == 0,
                          "%s[%zu]: name '%s', expected '%s'", what, i,
                          r[i].name ? r[i].name : "(null)", a->name);
        else
            ck_assert_msg(r[i].name == NULL, "%s[%zu]: a name in an unnamed list", what, i);
        if (version >= 0)
            ck_assert_msg(r[i].version == version, "%s[%zu]: version %d, expected %d", what, i,
                          r[i].version, version);
        ck_assert_msg(r[i].dtype == a->dtype, "%s[%zu]: dtype %d, expected %d", what, i, r[i].dtype,
                      a->dtype);
        ck_assert_msg(r[i].dev_type == a->dev_type && r[i].dev_id == a->dev_id,
                      "%s[%zu]: context (%d, %d), expected (%d, %d)", what, i, r[i].dev_type,
                      r[i].dev_id, a->dev_type, a->dev_id);
        ck_assert_msg(r[i].shape.ndim == a->shape.ndim, "%s[%zu]: ndim %d, expected %d", what, i,
                      r[i].shape.ndim, a->shape.ndim);
        for (int d = 0; d < a->shape.ndim; d++)
            ck_assert_msg(r[i].shape.dims[d] == a->shape.dims[d],
                          "%s[%zu]: dim %d is %lld, expected %lld", what, i, d,
                          (long long)r[i].shape.dims[d], (long long)a->shape.dims[d]);
        ck_assert_msg(r[i].nbytes == a->nbytes, "%s[%zu]: %zu bytes, expected %zu", what, i,
                      r[i].nbytes, a->nbytes);
        ck_assert_msg((r[i].data == NULL) == (a->nbytes == 0), "%s[%zu]: data pointer", what, i);
        for (size_t b = 0; b < a->nbytes; b++)
            ck_assert_msg(((const uint8_t *)r[i].data)[b] == a->data[b],
                          "%s[%zu]: byte %zu is 0x%02x, expected 0x%02x", what, i, b,
                          ((const uint8_t *)r[i].data)[b], a->data[b]);
    }
}

START_TEST(test_fixtures) {
    char names[MAX_FIXTURES][64];
    size_t nfix = read_index(names);
    static struct expected e;
    for (size_t f = 0; f < nfix; f++) {
        const char *name = names[f];
        size_t len, n = 99, len2 = 0;
        uint8_t *file = load_params(name, &len);
        read_description(name, &e);
        struct mxc__nd_record *r = (void *)1;
        void *again = NULL;

        mxct_alloc_install(&counts);
        int rc = mxc__nd_decode(file, len, &r, &n);
        if (e.code != MXC_OK) {
            ck_assert_msg(rc == e.code, "%s: decode gave %s, expected %s (%s)", name,
                          mxc_err_name(rc), mxc_err_name(e.code), mxc_last_error());
            ck_assert_msg(r == NULL && n == 0, "%s: outputs not cleared", name);
            ck_assert_int_eq(atomic_load(&counts.mallocs), 0);
        } else {
            ck_assert_msg(rc == MXC_OK, "%s: %s", name, mxc_last_error());
            check_records(name, r, n, &e, e.version);
            ck_assert_int_eq(mxc__nd_encode(r, n, e.named, &again, &len2), MXC_OK);
            if (e.version == 2) {
                /* What MXNet wrote (or, for none_v2, the hand-built file) byte for byte. */
                ck_assert_msg(len2 == len && memcmp(again, file, len) == 0,
                              "%s: re-encoded %zu bytes differ from the %zu of the file", name,
                              len2, len);
            }
            /* Every version re-encodes as version 2 with the same contents. */
            struct mxc__nd_record *r2;
            size_t n2;
            ck_assert_int_eq(mxc__nd_decode(again, len2, &r2, &n2), MXC_OK);
            check_records(name, r2, n2, &e, 2);
            mxc__nd_records_free(r2, n2);
            mxc__free(again);
            mxc__nd_records_free(r, n);
        }
        ck_assert_msg(atomic_load(&counts.live) == 0, "%s: %ld blocks leaked", name,
                      (long)atomic_load(&counts.live));
        mxct_alloc_uninstall();
        free(file);
    }
}
END_TEST

/* ---- FORMATS.md's worked example --------------------------------------------------- */

START_TEST(test_worked_example) {
    /* One float32 (2,3) array named "arg:w": 109 bytes, spelled out from FORMATS.md. */
    static const uint8_t want[109] = {
        0x12, 0x01, 0,    0,    0, 0, 0,    0, /* list magic */
        0,    0,    0,    0,    0, 0, 0,    0, /* reserved */
        1,    0,    0,    0,    0, 0, 0,    0, /* N */
        0xC9, 0xFA, 0x93, 0xF9,                /* v2 magic */
        0,    0,    0,    0,                   /* dense */
        2,    0,    0,    0,                   /* ndim */
        2,    0,    0,    0,    0, 0, 0,    0,    3,   0,   0,    0,    0,   0, 0, 0, /* dims */
        1,    0,    0,    0,    0, 0, 0,    0,                                        /* cpu(0) */
        0,    0,    0,    0,                                                          /* float32 */
        0,    0,    0x80, 0x3f, 0, 0, 0,    0x40, 0,   0,   0x40, 0x40,               /* 1 2 3 */
        0,    0,    0x80, 0x40, 0, 0, 0xa0, 0x40, 0,   0,   0xc0, 0x40,               /* 4 5 6 */
        1,    0,    0,    0,    0, 0, 0,    0,                                        /* K */
        5,    0,    0,    0,    0, 0, 0,    0,    'a', 'r', 'g',  ':',  'w',
    };
    const float values[6] = {1, 2, 3, 4, 5, 6};
    struct mxc__nd_record rec = {.name = "arg:w",
                                 .shape = {2, {2, 3}},
                                 .dtype = MXC_FLOAT32,
                                 .dev_type = MXC_CPU,
                                 .data = values,
                                 .nbytes = sizeof values};
    void *buf;
    size_t len, size;
    ck_assert_int_eq(mxc__nd_encoded_size(&rec, 1, true, &size), MXC_OK);
    ck_assert_uint_eq(size, 109);
    ck_assert_int_eq(mxc__nd_encode(&rec, 1, true, &buf, &len), MXC_OK);
    ck_assert_uint_eq(len, 109);
    ck_assert_mem_eq(buf, want, sizeof want);

    size_t flen;
    uint8_t *file = load_params("worked_example", &flen);
    ck_assert_uint_eq(flen, 109);
    ck_assert_mem_eq(file, want, sizeof want); /* and MXNet 1.9.1 agrees */
    free(file);

    struct mxc__nd_record *r;
    size_t n;
    ck_assert_int_eq(mxc__nd_decode(buf, len, &r, &n), MXC_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(r[0].name, "arg:w");
    ck_assert_int_eq(r[0].version, 2);
    ck_assert_mem_eq(r[0].data, values, sizeof values);
    ck_assert_ptr_eq(r[0].data, (uint8_t *)buf + 24 + 28 + 12);
    mxc__nd_records_free(r, n);
    mxc__free(buf);
}
END_TEST

/* ---- Malformed input --------------------------------------------------------------- */

/* A file being built. */
struct bytes {
    uint8_t b[1 << 14];
    size_t n;
};

static void put32(struct bytes *b, uint32_t v) {
    ck_assert_uint_le(b->n + 4, sizeof b->b);
    for (int i = 0; i < 4; i++)
        b->b[b->n++] = (uint8_t)(v >> (8 * i));
}

static void put64(struct bytes *b, uint64_t v) {
    put32(b, (uint32_t)v);
    put32(b, (uint32_t)(v >> 32));
}

static void put_zeros(struct bytes *b, size_t n) {
    ck_assert_uint_le(b->n + n, sizeof b->b);
    memset(b->b + b->n, 0, n);
    b->n += n;
}

static void list_header(struct bytes *b, uint64_t n) {
    b->n = 0;
    put64(b, 0x112);
    put64(b, 0);
    put64(b, n);
}

/* A v2 / v3 record header up to and including the dims (none written when dims is NULL). */
static void record_head(struct bytes *b, uint32_t magic, int32_t stype, uint32_t ndim,
                        const int64_t *dims) {
    put32(b, magic);
    put32(b, (uint32_t)stype);
    put32(b, ndim);
    for (uint32_t d = 0; dims != NULL && d < ndim; d++)
        put64(b, (uint64_t)dims[d]);
}

/* A whole dense float32 (2,) v2 record: {1, 2} on cpu(0). */
static void good_record(struct bytes *b) {
    const int64_t dims[1] = {2};
    record_head(b, MXC__ND_V2_MAGIC, 0, 1, dims);
    put32(b, 1);
    put32(b, 0);
    put32(b, MXC_FLOAT32);
    put32(b, 0x3f800000);
    put32(b, 0x40000000);
}

/* Decodes a copy of buf[0, len) in a block of exactly that size under the counting
 * allocator and checks the failure: `code`, `needle` in the message, outputs cleared,
 * nothing allocated. */
static void expect_failure(const void *buf, size_t len, int code, const char *needle, int line) {
    uint8_t *copy = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, buf, len);
    struct mxc__nd_record *r = (void *)1;
    size_t n = 99;
    mxct_alloc_install(&counts);
    int rc = mxc__nd_decode(copy, len, &r, &n);
    long mallocs = atomic_load(&counts.mallocs);
    mxct_alloc_uninstall();
    free(copy);
    ck_assert_msg(rc == code, "line %d: %s, expected %s (%s)", line, mxc_err_name(rc),
                  mxc_err_name(code), mxc_last_error());
    ck_assert_msg(r == NULL && n == 0, "line %d: outputs not cleared", line);
    ck_assert_msg(mallocs == 0, "line %d: %ld allocations for a bad file", line, mallocs);
    ck_assert_msg(strstr(mxc_last_error(), needle) != NULL, "line %d: '%s' lacks '%s'", line,
                  mxc_last_error(), needle);
}

#define EXPECT_FAILURE(bytes, code, needle) \
    expect_failure((bytes)->b, (bytes)->n, (code), (needle), __LINE__)

/* Decodes `b`, which must succeed, into *r / *n. */
static void decode_ok(const struct bytes *b, struct mxc__nd_record **r, size_t *n) {
    ck_assert_msg(mxc__nd_decode(b->b, b->n, r, n) == MXC_OK, "%s", mxc_last_error());
}

START_TEST(test_truncation) {
    char names[MAX_FIXTURES][64];
    size_t nfix = read_index(names);
    static struct expected e;
    for (size_t f = 0; f < nfix; f++) {
        read_description(names[f], &e);
        if (e.code != MXC_OK)
            continue;
        size_t len;
        uint8_t *file = load_params(names[f], &len);
        for (size_t cut = 0; cut < len; cut++)
            expect_failure(file, cut, MXC_EFORMAT, "offset", (int)cut);
        free(file);
    }
}
END_TEST

START_TEST(test_trailing_bytes) {
    /* MXNet's loader stops after the names and never looks further; so does mxc. */
    struct bytes b;
    list_header(&b, 1);
    good_record(&b);
    put64(&b, 0);
    put32(&b, 0xdeadbeef);
    put32(&b, 0x112);
    struct mxc__nd_record *r;
    size_t n;
    decode_ok(&b, &r, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(r[0].shape.dims[0], 2);
    mxc__nd_records_free(r, n);
}
END_TEST

START_TEST(test_absurd_counts) {
    struct bytes b;
    list_header(&b, (uint64_t)1 << 60); /* N = 2^60 */
    good_record(&b);
    put64(&b, 0);
    EXPECT_FAILURE(&b, MXC_EFORMAT, "1152921504606846976 arrays");
    list_header(&b, UINT64_MAX);
    EXPECT_FAILURE(&b, MXC_EFORMAT, "cannot fit");

    list_header(&b, 1); /* name length 2^62 */
    good_record(&b);
    put64(&b, 1);
    put64(&b, (uint64_t)1 << 62);
    put32(&b, 0x41414141);
    EXPECT_FAILURE(&b, MXC_EFORMAT, "4611686018427387904 bytes long");
    b.n -= 12; /* name length one more than the bytes left */
    put64(&b, 5);
    put32(&b, 0x41414141);
    EXPECT_FAILURE(&b, MXC_EFORMAT, "name 0");

    list_header(&b, 1); /* K not 0 and not N */
    good_record(&b);
    put64(&b, 2);
    for (int i = 0; i < 2; i++) {
        put64(&b, 1);
        put_zeros(&b, 1);
    }
    EXPECT_FAILURE(&b, MXC_EFORMAT, "2 names");
    list_header(&b, 1);
    good_record(&b);
    put64(&b, (uint64_t)1 << 63);
    EXPECT_FAILURE(&b, MXC_EFORMAT, "9223372036854775808 names");

    list_header(&b, 1); /* ndim 1000: more than the bytes left, then more than supported */
    record_head(&b, MXC__ND_V2_MAGIC, 0, 1000, NULL);
    put_zeros(&b, 64);
    EXPECT_FAILURE(&b, MXC_EFORMAT, "ndim 1000");
    put_zeros(&b, 8000);
    EXPECT_FAILURE(&b, MXC_ENOTSUP, "1000 dims");
    list_header(&b, 1);
    record_head(&b, MXC__ND_V1_MAGIC, 0, 0, NULL);
    b.n -= 8; /* v1 has no storage type: magic, then ndim 9 */
    put32(&b, 9);
    put_zeros(&b, 9 * 8 + 12);
    EXPECT_FAILURE(&b, MXC_ENOTSUP, "9 dims");
    list_header(&b, 1); /* legacy ndim 9 */
    put32(&b, 9);
    put_zeros(&b, 9 * 4 + 12);
    EXPECT_FAILURE(&b, MXC_ENOTSUP, "9 dims");
    list_header(&b, 1); /* v2 ndim 2^32 - 1 */
    record_head(&b, MXC__ND_V2_MAGIC, 0, UINT32_MAX, NULL);
    EXPECT_FAILURE(&b, MXC_EFORMAT, "ndim 4294967295");

    /* Negative dims, in v2 and v1. */
    const int64_t negative[2] = {3, -2};
    list_header(&b, 1);
    record_head(&b, MXC__ND_V2_MAGIC, 0, 2, negative);
    put_zeros(&b, 64);
    EXPECT_FAILURE(&b, MXC_EFORMAT, "dim 1 of record 0 at offset 24 is -2");
    b.b[24] = 0xC8; /* as v1, its storage type 0 reads as ndim 0 and the rest as a bad K */
    EXPECT_FAILURE(&b, MXC_EFORMAT, "offset");

    /* Dims whose product overflows, and data larger than what is left. */
    const int64_t big[][3] = {{(int64_t)1 << 32, (int64_t)1 << 32, 1},
                              {(int64_t)1 << 62, 4, 1},
                              {(int64_t)1 << 61, 0, (int64_t)1 << 61},
                              {INT64_MAX, 2, 1},
                              {1000, 1, 1}};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(big); i++) {
        list_header(&b, 1);
        record_head(&b, MXC__ND_V2_MAGIC, 0, 3, big[i]);
        put32(&b, 1);
        put32(&b, 0);
        put32(&b, MXC_FLOAT32);
        put_zeros(&b, 64);
        EXPECT_FAILURE(&b, MXC_EFORMAT, i < 4 ? "overflows" : "data needs 4000 bytes");
    }
    /* A zero dim makes even huge other dims a valid empty array. */
    const int64_t zero[3] = {(int64_t)1 << 31, (int64_t)1 << 31, 0};
    list_header(&b, 1);
    record_head(&b, MXC__ND_V2_MAGIC, 0, 3, zero);
    put32(&b, 1);
    put32(&b, 0);
    put32(&b, MXC_FLOAT64);
    put64(&b, 0);
    struct mxc__nd_record *r;
    size_t n;
    decode_ok(&b, &r, &n);
    ck_assert_uint_eq(r[0].nbytes, 0);
    ck_assert_ptr_null(r[0].data);
    mxc__nd_records_free(r, n);
}
END_TEST

START_TEST(test_bad_magics) {
    struct bytes b;
    list_header(&b, 1);
    good_record(&b);
    put64(&b, 0);
    b.b[0] = 0x13;
    EXPECT_FAILURE(&b, MXC_EFORMAT, "bad list magic 0x113 at offset 0");

    /* Record 1 at offset 24 + 40 = 64 gets a magic that is no version and no legacy ndim. */
    list_header(&b, 2);
    good_record(&b);
    put32(&b, 0xF993FACF);
    put_zeros(&b, 100);
    EXPECT_FAILURE(&b, MXC_EFORMAT, "bad magic 0xf993facf of record 1 at offset 64");

    size_t len;
    uint8_t *file = load_params("unnamed", &len);
    file[24] ^= 0x40; /* first record's magic: 0xF993FA89 */
    expect_failure(file, len, MXC_EFORMAT, "record 0 at offset 24", __LINE__);
    free(file);
}
END_TEST

START_TEST(test_unsupported) {
    struct bytes b;
    const int64_t dims[1] = {2};
    static const struct {
        uint32_t magic;
        int32_t stype;
        const char *needle;
    } sparse[] = {
        {MXC__ND_V2_MAGIC, 1, "record 1 at offset 64 has storage type 1 (row_sparse)"},
        {MXC__ND_V2_MAGIC, 2, "record 1 at offset 64 has storage type 2 (csr)"},
        {MXC__ND_V2_MAGIC, -1, "storage type -1 (unknown)"},
        {MXC__ND_V3_MAGIC, 1, "storage type 1 (row_sparse)"},
    };
    for (size_t i = 0; i < MXC_ARRAY_SIZE(sparse); i++) {
        list_header(&b, 2);
        good_record(&b);
        record_head(&b, sparse[i].magic, sparse[i].stype, 1, dims);
        put_zeros(&b, 64);
        EXPECT_FAILURE(&b, MXC_ENOTSUP, sparse[i].needle);
    }

    const int32_t flags[] = {13, -1, 100, INT32_MIN};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(flags); i++) {
        char needle[64];
        list_header(&b, 1);
        record_head(&b, MXC__ND_V2_MAGIC, 0, 1, dims);
        put32(&b, 1);
        put32(&b, 0);
        put32(&b, (uint32_t)flags[i]);
        put_zeros(&b, 64);
        snprintf(needle, sizeof needle, "record 0 at offset 24 has unknown type flag %d",
                 (int)flags[i]);
        EXPECT_FAILURE(&b, MXC_ENOTSUP, needle);
    }

    list_header(&b, 1); /* a name with a NUL byte */
    good_record(&b);
    put64(&b, 1);
    put64(&b, 3);
    b.b[b.n++] = 'a';
    b.b[b.n++] = 0;
    b.b[b.n++] = 'b';
    EXPECT_FAILURE(&b, MXC_ENOTSUP, "name 0 at offset 80 contains a NUL");
}
END_TEST

START_TEST(test_numpy_shape_records) {
    struct bytes b;
    struct mxc__nd_record *r;
    size_t n;
    const int64_t unknown[2] = {3, -1}, minus_two[2] = {3, -2};

    /* ndim -1 and a dim of -1 are unknown shapes: none arrays, the record ends there. */
    list_header(&b, 3);
    record_head(&b, MXC__ND_V3_MAGIC, 0, UINT32_MAX, NULL);
    record_head(&b, MXC__ND_V3_MAGIC, 0, 2, unknown);
    good_record(&b);
    put64(&b, 0);
    decode_ok(&b, &r, &n);
    ck_assert_uint_eq(n, 3);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(r[i].version, 3);
        ck_assert_int_eq(r[i].shape.ndim, 0);
        ck_assert_int_eq(r[i].shape.dims[0], 0);
        ck_assert_int_eq(r[i].dtype, MXC_FLOAT32);
        ck_assert_int_eq(r[i].dev_type, MXC_CPU);
        ck_assert_ptr_null(r[i].data);
    }
    ck_assert_int_eq(r[2].shape.dims[0], 2);
    mxc__nd_records_free(r, n);

    list_header(&b, 1);
    record_head(&b, MXC__ND_V3_MAGIC, 0, 2, minus_two);
    put_zeros(&b, 64);
    EXPECT_FAILURE(&b, MXC_EFORMAT, "is -2");
    list_header(&b, 1); /* ndim 0 in v3 is a scalar (numpy_scalar_v3 is MXNet's) */
    record_head(&b, MXC__ND_V3_MAGIC, 0, 0, NULL);
    put_zeros(&b, 64);
    EXPECT_FAILURE(&b, MXC_ENOTSUP, "0-d");
}
END_TEST

START_TEST(test_empty_lists) {
    struct bytes b;
    list_header(&b, 0);
    put64(&b, 0);
    struct mxc__nd_record *r = (void *)1;
    size_t n = 99;
    mxct_alloc_install(&counts);
    decode_ok(&b, &r, &n);
    ck_assert_ptr_null(r);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(atomic_load(&counts.mallocs), 0);
    mxc__nd_records_free(r, n);

    void *buf;
    size_t len;
    ck_assert_int_eq(mxc__nd_encode(NULL, 0, true, &buf, &len), MXC_OK);
    ck_assert_uint_eq(len, 32);
    ck_assert_mem_eq(buf, b.b, 32);
    mxc__free(buf);
    ck_assert_int_eq(atomic_load(&counts.live), 0);
    mxct_alloc_uninstall();

    /* An empty name is a name. */
    list_header(&b, 1);
    good_record(&b);
    put64(&b, 1);
    put64(&b, 0);
    decode_ok(&b, &r, &n);
    ck_assert_str_eq(r[0].name, "");
    mxc__nd_records_free(r, n);
}
END_TEST

/* ---- Misuse ------------------------------------------------------------------------ */

START_TEST(test_decode_misuse) {
    struct mxc__nd_record *r = (void *)1;
    size_t n = 99;
    uint8_t byte = 0;
    ck_assert_int_eq(mxc__nd_decode(&byte, 1, NULL, &n), MXC_EINVAL);
    ck_assert_int_eq(mxc__nd_decode(&byte, 1, &r, NULL), MXC_EINVAL);
    ck_assert_int_eq(mxc__nd_decode(NULL, 5, &r, &n), MXC_EINVAL);
    ck_assert_ptr_null(r);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "buf is NULL"));
    ck_assert_int_eq(mxc__nd_decode(NULL, 0, &r, &n), MXC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "list magic needs 8 bytes at offset 0, 0 left"));
    mxc__nd_records_free(NULL, 0);
}
END_TEST

/* A sink that fails on its `fail_at`-th call. */
struct failing_sink {
    int calls, fail_at;
};

static int failing_sink(void *user, const void *bytes, size_t len) {
    struct failing_sink *s = user;
    (void)bytes;
    (void)len;
    if (++s->calls == s->fail_at)
        return mxc__error(MXC_EIO, "sink full");
    return MXC_OK;
}

START_TEST(test_encode_misuse) {
    const float v[2] = {1, 2};
    const struct mxc__nd_record good = {.name = "a",
                                        .shape = {1, {2}},
                                        .dtype = MXC_FLOAT32,
                                        .dev_type = MXC_CPU,
                                        .data = v,
                                        .nbytes = sizeof v};
    struct {
        struct mxc__nd_record r;
        const char *needle;
    } bad[] = {{good, "no name"},     {good, "ndim 9"},           {good, "ndim -1"},
               {good, "is -2"},       {good, "unknown dtype 13"}, {good, "unknown dtype -1"},
               {good, "has 4 bytes"}, {good, "no data"},          {good, "overflows"}};
    bad[0].r.name = NULL;
    bad[1].r.shape.ndim = 9;
    bad[2].r.shape.ndim = -1;
    bad[3].r.shape.dims[0] = -2;
    bad[4].r.dtype = 13;
    bad[5].r.dtype = -1;
    bad[6].r.nbytes = 4;
    bad[7].r.data = NULL;
    bad[8].r.shape = (mxc_shape){2, {INT64_MAX, 2}};

    mxct_alloc_install(&counts);
    for (size_t i = 0; i < MXC_ARRAY_SIZE(bad); i++) {
        struct mxc__nd_record list[2] = {good, bad[i].r};
        void *buf = (void *)1;
        size_t len = 99;
        ck_assert_int_eq(mxc__nd_encode(list, 2, true, &buf, &len), MXC_EINVAL);
        ck_assert_ptr_null(buf);
        ck_assert_uint_eq(len, 0);
        ck_assert_msg(strstr(mxc_last_error(), bad[i].needle) &&
                          strstr(mxc_last_error(), "record 1"),
                      "'%s' lacks '%s'", mxc_last_error(), bad[i].needle);
        struct failing_sink s = {0, 0};
        ck_assert_int_eq(mxc__nd_write(list, 2, true, failing_sink, &s), MXC_EINVAL);
        ck_assert_int_eq(s.calls, 0); /* nothing written for invalid input */
    }
    ck_assert_int_eq(atomic_load(&counts.mallocs), 0);
    mxct_alloc_uninstall();

    /* A nameless record is fine in an unnamed list; a none array needs nothing more. */
    struct mxc__nd_record list[2] = {bad[0].r, {.shape = {0}, .dtype = 99}};
    size_t size;
    ck_assert_int_eq(mxc__nd_encoded_size(list, 2, false, &size), MXC_OK);
    ck_assert_uint_eq(size, 32 + 40 + 12);

    void *buf;
    size_t len;
    ck_assert_int_eq(mxc__nd_encode(NULL, 1, false, &buf, &len), MXC_EINVAL);
    ck_assert_int_eq(mxc__nd_encode(&good, 1, false, NULL, &len), MXC_EINVAL);
    ck_assert_int_eq(mxc__nd_encode(&good, 1, false, &buf, NULL), MXC_EINVAL);
    ck_assert_int_eq(mxc__nd_encoded_size(&good, 1, false, NULL), MXC_EINVAL);
    ck_assert_int_eq(mxc__nd_write(&good, 1, false, NULL, NULL), MXC_EINVAL);
    ck_assert_int_eq(mxc__nd_write_file(&good, 1, false, NULL), MXC_EINVAL);

    /* A sink's failure at any point is returned as is. */
    for (int at = 1; at <= 6; at++) {
        struct failing_sink s = {0, at};
        ck_assert_int_eq(mxc__nd_write(&good, 1, true, failing_sink, &s), MXC_EIO);
        ck_assert_str_eq(mxc_last_error(), "sink full");
    }
    struct failing_sink s = {0, 7};
    ck_assert_int_eq(mxc__nd_write(&good, 1, true, failing_sink, &s), MXC_OK);
    ck_assert_int_eq(s.calls, 6); /* header, record header, data, K, name length, name */
}
END_TEST

/* ---- Round trips ------------------------------------------------------------------- */

START_TEST(test_random_round_trips) {
    struct mxct_rng rng;
    mxct_rng_seed(&rng, 20240611);
    static uint8_t pool[8][1 << 13];
    static char names[8][32];
    long iters = mxct_scaled(300, 50);
    for (long it = 0; it < iters; it++) {
        struct mxc__nd_record in[8];
        size_t count = mxct_rng_below(&rng, 8);
        bool named = mxct_rng_percent(&rng, 50);
        for (size_t i = 0; i < count; i++) {
            struct mxc__nd_record *r = &in[i];
            memset(r, 0, sizeof *r);
            r->shape.ndim = (int32_t)mxct_rng_below(&rng, MXC_MAX_NDIM + 1);
            r->dtype = (int)mxct_rng_below(&rng, MXC_BFLOAT16 + 1);
            r->dev_type = (int)mxct_rng_below(&rng, 6);
            r->dev_id = (int)mxct_rng_below(&rng, 4);
            size_t elems = 1;
            for (int d = 0; d < r->shape.ndim; d++) {
                r->shape.dims[d] = mxct_rng_below(&rng, r->shape.ndim > 4 ? 3 : 6);
                elems *= (size_t)r->shape.dims[d];
            }
            if (r->shape.ndim == 0) { /* a none array reads back as float32 on cpu(0) */
                r->dtype = MXC_FLOAT32;
                r->dev_type = MXC_CPU;
                r->dev_id = 0;
                elems = 0;
            }
            r->nbytes = elems * mxc_dtype_size(r->dtype);
            ck_assert_uint_le(r->nbytes, sizeof pool[i]);
            for (size_t k = 0; k < r->nbytes; k++)
                pool[i][k] = (uint8_t)mxct_rng_next(&rng);
            r->data = r->nbytes ? pool[i] : NULL;
            size_t nlen = mxct_rng_below(&rng, 20);
            for (size_t k = 0; k < nlen; k++)
                names[i][k] = (char)(1 + mxct_rng_below(&rng, 255));
            names[i][nlen] = '\0';
            r->name = named ? names[i] : NULL;
            r->version = 2;
        }
        void *buf;
        size_t len;
        struct mxc__nd_record *out;
        size_t n;
        ck_assert_int_eq(mxc__nd_encode(in, count, named, &buf, &len), MXC_OK);
        ck_assert_int_eq(mxc__nd_decode(buf, len, &out, &n), MXC_OK);
        ck_assert_uint_eq(n, count);
        for (size_t i = 0; i < n; i++) {
            ck_assert(named ? strcmp(out[i].name, in[i].name) == 0 : out[i].name == NULL);
            ck_assert_int_eq(out[i].version, 2);
            ck_assert_int_eq(out[i].dtype, in[i].dtype);
            ck_assert_int_eq(out[i].dev_type, in[i].dev_type);
            ck_assert_int_eq(out[i].dev_id, in[i].dev_id);
            ck_assert_mem_eq(&out[i].shape, &in[i].shape, sizeof in[i].shape);
            ck_assert_uint_eq(out[i].nbytes, in[i].nbytes);
            if (in[i].nbytes)
                ck_assert_mem_eq(out[i].data, in[i].data, in[i].nbytes);
        }
        /* The streaming writer produces the same bytes. */
        char *path = mxct_temp_file("nd_format");
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(mxc__nd_write_file(in, count, named, f), MXC_OK);
        ck_assert_int_eq(fclose(f), 0);
        size_t flen;
        char *written = mxct_read_file(path, &flen);
        ck_assert_uint_eq(flen, len);
        ck_assert_mem_eq(written, buf, len);
        free(written);
        unlink(path);
        free(path);
        mxc__nd_records_free(out, n);
        mxc__free(buf);
    }
}
END_TEST

/* ---- Allocation failures ----------------------------------------------------------- */

START_TEST(test_allocation_failures) {
    size_t len;
    uint8_t *file = load_params("named_dtypes", &len);
    struct mxc__nd_record *r = NULL;
    size_t n = 0;
    mxct_alloc_install(&counts);
    long failures = 0, allowed;
    for (allowed = 0;; allowed++) {
        mxct_alloc_fail_after(&counts, allowed);
        int rc = mxc__nd_decode(file, len, &r, &n);
        if (rc == MXC_OK)
            break;
        ck_assert_int_eq(rc, MXC_ENOMEM);
        ck_assert_ptr_null(r);
        ck_assert_int_eq(atomic_load(&counts.live), 0);
        ck_assert_ptr_nonnull(strstr(mxc_last_error(), "out of memory"));
        failures++;
    }
    ck_assert_int_ge(failures, 1);

    void *buf = NULL;
    size_t blen = 0;
    for (long enc = 0;; enc++) {
        mxct_alloc_fail_after(&counts, enc);
        int rc = mxc__nd_encode(r, n, true, &buf, &blen);
        if (rc == MXC_OK)
            break;
        ck_assert_int_eq(rc, MXC_ENOMEM);
        ck_assert_ptr_null(buf);
        ck_assert_int_eq(atomic_load(&counts.live), 1); /* only the decoded records */
        failures++;
    }
    ck_assert_int_ge(failures, 2);
    mxct_alloc_fail_after(&counts, -1);
    ck_assert_uint_eq(blen, len);
    ck_assert_mem_eq(buf, file, len);
    mxc__free(buf);
    mxc__nd_records_free(r, n);
    ck_assert_int_eq(atomic_load(&counts.live), 0);
    /* Every allocation that succeeded was freed once (each failed call failed once). */
    ck_assert_int_eq(atomic_load(&counts.mallocs) + atomic_load(&counts.reallocs) - failures,
                     atomic_load(&counts.frees));
    mxct_alloc_uninstall();
    free(file);
}
END_TEST

/* ---- Corruption -------------------------------------------------------------------- */

START_TEST(test_random_corruption) {
    /* Damaged fixtures decode or fail cleanly; what decodes satisfies the encoder. */
    static const uint32_t interesting[] = {0,          1,          8,          9,
                                           0x7fffffff, 0xffffffff, 0xF993FAC8, 0xF993FAC9,
                                           0xF993FACA, 0x112,      2,          0x80000000};
    char names[MAX_FIXTURES][64];
    size_t nfix = read_index(names);
    struct mxct_rng rng;
    mxct_rng_seed(&rng, 7);
    long iters = mxct_scaled(20000, 2000), decoded = 0;
    mxct_alloc_install(&counts);
    for (long it = 0; it < iters; it++) {
        size_t len;
        uint8_t *file = load_params(names[mxct_rng_below(&rng, (uint32_t)nfix)], &len);
        int edits = 1 + (int)mxct_rng_below(&rng, 3);
        for (int k = 0; k < edits && len >= 4; k++) {
            size_t at = mxct_rng_below(&rng, (uint32_t)len - 3);
            if (mxct_rng_percent(&rng, 50)) {
                file[at] ^= (uint8_t)(1u << mxct_rng_below(&rng, 8));
            } else {
                uint32_t v = interesting[mxct_rng_below(&rng, MXC_ARRAY_SIZE(interesting))];
                for (int byte = 0; byte < 4; byte++)
                    file[at + (size_t)byte] = (uint8_t)(v >> (8 * byte));
            }
        }
        if (mxct_rng_percent(&rng, 20)) { /* cut, keeping the block exactly as long */
            len = mxct_rng_below(&rng, (uint32_t)len + 1);
            uint8_t *cut = malloc(len ? len : 1);
            ck_assert_ptr_nonnull(cut);
            memcpy(cut, file, len);
            free(file);
            file = cut;
        }
        struct mxc__nd_record *r;
        size_t n;
        int rc = mxc__nd_decode(file, len, &r, &n);
        ck_assert_msg(rc == MXC_OK || rc == MXC_EFORMAT || rc == MXC_ENOTSUP, "%s: %s",
                      mxc_err_name(rc), mxc_last_error());
        if (rc == MXC_OK) {
            decoded++;
            bool named = n > 0 && r[0].name != NULL;
            for (size_t i = 0; i < n; i++) {
                ck_assert((r[i].name != NULL) == named);
                const uint8_t *d = r[i].data;
                ck_assert(d == NULL || (d >= file && d + r[i].nbytes <= file + len));
            }
            size_t size;
            ck_assert_msg(mxc__nd_encoded_size(r, n, named, &size) == MXC_OK, "%s",
                          mxc_last_error());
            mxc__nd_records_free(r, n);
        }
        free(file);
        ck_assert_int_eq(atomic_load(&counts.live), 0);
    }
    mxct_alloc_uninstall();
    ck_assert_int_gt(decoded, 0);
}
END_TEST

static Suite *nd_format_suite(void) {
    Suite *s = suite_create("nd_format");
    TCase *tc = tcase_create("codec");
    tcase_set_timeout(tc, mxct_timeout(60));
    tcase_add_test(tc, test_fixtures);
    tcase_add_test(tc, test_worked_example);
    tcase_add_test(tc, test_truncation);
    tcase_add_test(tc, test_trailing_bytes);
    tcase_add_test(tc, test_absurd_counts);
    tcase_add_test(tc, test_bad_magics);
    tcase_add_test(tc, test_unsupported);
    tcase_add_test(tc, test_numpy_shape_records);
    tcase_add_test(tc, test_empty_lists);
    tcase_add_test(tc, test_decode_misuse);
    tcase_add_test(tc, test_encode_misuse);
    tcase_add_test(tc, test_random_round_trips);
    tcase_add_test(tc, test_allocation_failures);
    tcase_add_test(tc, test_random_corruption);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(nd_format_suite()); }

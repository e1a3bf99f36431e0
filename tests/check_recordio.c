/*
 * tests/check_recordio.c — RecordIO (mxc/recordio.h) against files MXNet 1.9.1 wrote
 * (tests/data/io/rec, made by scripts/gen_rec_fixtures.py): MXNet's records and index read
 * back, records split at magic words joined; files mxc writes byte-identical to MXNet's
 * for the same records; image record headers with scalar and vector labels unpacked and
 * packed again byte for byte; a file truncated at every length and corrupted at every
 * byte never crashes (run under AddressSanitizer too) and fails with MXC_EFORMAT naming
 * the offset; malformed indexes; misuse; every allocation failing in turn.
 *
 * Run from the repository root, or point MXC_TEST_DATA at tests/data.
 */
#include "mxc/recordio.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Fixtures ---------------------------------------------------------------------- */

static const char *data_dir(void) {
    const char *dir = getenv("MXC_TEST_DATA");
    return dir && *dir ? dir : "tests/data";
}

/* tests/data/io/rec/<name>, in a static buffer (one at a time per slot). */
static const char *rec_path(int slot, const char *name) {
    static char paths[4][512];
    snprintf(paths[slot], sizeof paths[slot], "%s/io/rec/%s", data_dir(), name);
    return paths[slot];
}

#define MAGIC "\x0a\x23\xd7\xce"

/* The records of plain.rec: PLAIN in scripts/gen_rec_fixtures.py. */
struct plain {
    int64_t key;
    const char *bytes;
    size_t size;
};
static unsigned char counting[300];
static const struct plain plain[] = {
    {0, "", 0},
    {1, "a", 1},
    {2, "abcd", 4},
    {3, "hello, recordio", 15},
    {5, MAGIC "tail", 8},
    {7, "head" MAGIC "mid!" MAGIC MAGIC "xy", 22},
    {8, "ab" MAGIC "cd", 8},
    {9, "data" MAGIC, 8},
    {11, (const char *)counting, sizeof counting},
};
#define NUM_PLAIN ((int)(sizeof plain / sizeof plain[0]))

static void fill_counting(void) {
    for (size_t i = 0; i < sizeof counting; i++)
        counting[i] = (unsigned char)(i % 251);
}

static void write_file(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static void assert_same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = mxct_read_file(a, &na), *y = mxct_read_file(b, &nb);
    ck_assert_msg(x && y, "cannot read %s or %s", a, b);
    ck_assert_msg(na == nb, "%s has %zu bytes, %s %zu", a, na, b, nb);
    for (size_t i = 0; i < na; i++)
        ck_assert_msg(x[i] == y[i], "%s and %s differ at byte %zu", a, b, i);
    free(x);
    free(y);
}

/* Reads every record of an opened reader, checking them against plain[first...]; returns
 * the final status (0 at a clean end) and the number of records read. */
static int read_plain(mxc_recordio *r, int *count) {
    const void *data;
    size_t size;
    int rc;
    *count = 0;
    while ((rc = mxc_recordio_read(r, &data, &size)) == 1) {
        ck_assert_int_lt(*count, NUM_PLAIN);
        const struct plain *p = &plain[*count];
        ck_assert_msg(size == p->size && memcmp(data, p->bytes, size) == 0,
                      "record %d (key %" PRId64 "): %zu bytes, expected %zu", *count, p->key, size,
                      p->size);
        ck_assert_uint_eq((uintptr_t)data % 8, 0);
        (*count)++;
    }
    return rc;
}

/* ---- Reading MXNet's files --------------------------------------------------------- */

START_TEST(read_mxnet_records) {
    fill_counting();
    mxc_recordio *r;
    CK_OK(mxc_recordio_open(rec_path(0, "plain.rec"), rec_path(1, "plain.idx"), 0, &r));
    int count;
    ck_assert_int_eq(read_plain(r, &count), 0);
    ck_assert_int_eq(count, NUM_PLAIN);
    const void *data;
    size_t size;
    ck_assert_int_eq(mxc_recordio_read(r, &data, &size), 0); /* the end, again */
    ck_assert_ptr_null(data);
    ck_assert_uint_eq(size, 0);

    const int64_t *keys;
    size_t nkeys;
    CK_OK(mxc_recordio_keys(r, &keys, &nkeys));
    ck_assert_uint_eq(nkeys, NUM_PLAIN);
    /* random access by key, in reverse */
    for (int i = NUM_PLAIN - 1; i >= 0; i--) {
        ck_assert_int_eq(keys[i], plain[i].key);
        CK_OK(mxc_recordio_seek(r, plain[i].key));
        ck_assert_int_eq(mxc_recordio_read(r, &data, &size), 1);
        ck_assert_uint_eq(size, plain[i].size);
        ck_assert_mem_eq(data, plain[i].bytes, size);
    }
    ck_assert_int_eq(mxc_recordio_seek(r, 4), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "no key 4"));

    /* tell / seek_offset: back to the third record */
    CK_OK(mxc_recordio_seek(r, 2));
    int64_t at = mxc_recordio_tell(r);
    ck_assert_int_eq(at, 20); /* plain.idx says so */
    CK_OK(mxc_recordio_seek_offset(r, 0));
    ck_assert_int_eq(mxc_recordio_read(r, &data, &size), 1);
    ck_assert_uint_eq(size, 0);
    CK_OK(mxc_recordio_seek_offset(r, (uint64_t)at));
    ck_assert_int_eq(mxc_recordio_read(r, &data, &size), 1);
    ck_assert_mem_eq(data, "abcd", 4);
    ck_assert_int_eq(mxc_recordio_seek_offset(r, 2), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_seek_offset(r, 1u << 20), MXC_EINVAL);
    CK_OK(mxc_recordio_close(r));

    /* without an index: sequential reading only */
    CK_OK(mxc_recordio_open(rec_path(0, "plain.rec"), NULL, 0, &r));
    CK_OK(mxc_recordio_keys(r, &keys, &nkeys));
    ck_assert_uint_eq(nkeys, 0);
    ck_assert_int_eq(mxc_recordio_seek(r, 1), MXC_EMISUSE);
    ck_assert_int_eq(read_plain(r, &count), 0);
    ck_assert_int_eq(count, NUM_PLAIN);
    CK_OK(mxc_recordio_close(r));
}
END_TEST

/* The same records and keys written by mxc: MXNet's bytes exactly, index included. */
START_TEST(write_matches_mxnet) {
    fill_counting();
    char *rec = mxct_temp_file("mxc-rec-"), *idx = mxct_temp_file("mxc-idx-");
    mxc_recordio *w;
    CK_OK(mxc_recordio_open(rec, idx, 1, &w));
    for (int i = 0; i < NUM_PLAIN; i++)
        CK_OK(mxc_recordio_write_idx(w, plain[i].key, plain[i].bytes, plain[i].size));
    ck_assert_int_eq(mxc_recordio_tell(w), 464);
    CK_OK(mxc_recordio_close(w));
    assert_same_file(rec, rec_path(0, "plain.rec"));
    assert_same_file(idx, rec_path(1, "plain.idx"));

    /* a plain writer: the same data bytes */
    CK_OK(mxc_recordio_open(rec, NULL, 1, &w));
    for (int i = 0; i < NUM_PLAIN; i++)
        CK_OK(mxc_recordio_write(w, plain[i].bytes, plain[i].size));
    ck_assert_int_eq(mxc_recordio_write_idx(w, 0, "x", 1), MXC_EMISUSE);
    CK_OK(mxc_recordio_close(w));
    assert_same_file(rec, rec_path(0, "plain.rec"));

    /* MXNet's image files copied record by record through mxc: identical */
    const char *names[][2] = {{"images.rec", "images.idx"}, {"vector.rec", "vector.idx"}};
    for (int f = 0; f < 2; f++) {
        mxc_recordio *r;
        CK_OK(mxc_recordio_open(rec_path(0, names[f][0]), rec_path(1, names[f][1]), 0, &r));
        CK_OK(mxc_recordio_open(rec, idx, 1, &w));
        const int64_t *keys;
        size_t n;
        CK_OK(mxc_recordio_keys(r, &keys, &n));
        ck_assert_uint_gt(n, 0);
        for (size_t i = 0; i < n; i++) {
            const void *data;
            size_t size;
            ck_assert_int_eq(mxc_recordio_read(r, &data, &size), 1);
            CK_OK(mxc_recordio_write_idx(w, keys[i], data, size));
        }
        CK_OK(mxc_recordio_close(w));
        CK_OK(mxc_recordio_close(r));
        assert_same_file(rec, rec_path(0, names[f][0]));
        assert_same_file(idx, rec_path(1, names[f][1]));
    }
    remove(rec);
    remove(idx);
    free(rec);
    free(idx);
}
END_TEST

/* ---- Image records ----------------------------------------------------------------- */

START_TEST(image_records) {
    static const unsigned char jpeg[] = {0xff, 0xd8}, png[] = {0x89, 'P', 'N', 'G'};
    mxc_recordio *r;
    CK_OK(mxc_recordio_open(rec_path(0, "images.rec"), rec_path(1, "images.idx"), 0, &r));
    const void *data, *image;
    size_t size, image_size;
    int i = 0;
    while (mxc_recordio_read(r, &data, &size) == 1) {
        mxc_image_record h;
        CK_OK(mxc_recordio_unpack_image(data, size, &h, &image, &image_size));
        ck_assert_uint_eq(h.flag, 0);
        ck_assert_ptr_null(h.labels);
        ck_assert_float_eq(h.label, 0.5f + (float)i);
        ck_assert_uint_eq(h.id, 100 + (uint64_t)i);
        ck_assert_uint_eq(h.id2, 7 * (uint64_t)i);
        ck_assert_uint_eq(image_size, size - MXC_IMAGE_RECORD_HEADER);
        /* images 0-4 are JPEGs, 5-8 PNGs (IMAGES in the script) */
        if (i < 5)
            ck_assert_mem_eq(image, jpeg, sizeof jpeg);
        else
            ck_assert_mem_eq(image, png, sizeof png);
        /* packing the header and image again gives MXNet's record */
        unsigned char *again = malloc(size);
        size_t packed;
        ck_assert_int_eq(mxc_recordio_pack_image(&h, NULL, 0, image, image_size, NULL, 0, &packed),
                         MXC_EINVAL);
        ck_assert_uint_eq(packed, size);
        CK_OK(mxc_recordio_pack_image(&h, NULL, 0, image, image_size, again, size, &packed));
        ck_assert_mem_eq(again, data, size);
        free(again);
        i++;
    }
    ck_assert_int_eq(i, 9);
    CK_OK(mxc_recordio_close(r));

    CK_OK(mxc_recordio_open(rec_path(0, "vector.rec"), NULL, 0, &r));
    for (i = 0; mxc_recordio_read(r, &data, &size) == 1; i++) {
        mxc_image_record h;
        CK_OK(mxc_recordio_unpack_image(data, size, &h, &image, &image_size));
        ck_assert_uint_eq(h.flag, 3);
        ck_assert_float_eq(h.label, 0.0f);
        ck_assert_uint_eq(h.id, (uint64_t)i);
        ck_assert_ptr_nonnull(h.labels);
        ck_assert_float_eq(h.labels[0], (float)i);
        ck_assert_float_eq(h.labels[1], -(float)i);
        ck_assert_float_eq(h.labels[2], 0.25f * (float)i);
        ck_assert_mem_eq(image, jpeg, sizeof jpeg);
        ck_assert_uint_eq(image_size, size - MXC_IMAGE_RECORD_HEADER - 12);
        unsigned char *again = malloc(size);
        size_t packed;
        CK_OK(mxc_recordio_pack_image(&h, h.labels, 3, image, image_size, again, size, &packed));
        ck_assert_uint_eq(packed, size);
        ck_assert_mem_eq(again, data, size);
        free(again);
        /* a header announcing more labels than the record holds */
        unsigned char bad[MXC_IMAGE_RECORD_HEADER + 8] __attribute__((aligned(8)));
        memcpy(bad, data, MXC_IMAGE_RECORD_HEADER);
        ck_assert_int_eq(mxc_recordio_unpack_image(bad, sizeof bad, &h, &image, &image_size),
                         MXC_EFORMAT);
        ck_assert_ptr_nonnull(strstr(mxc_last_error(), "3 labels"));
    }
    ck_assert_int_eq(i, 4);
    CK_OK(mxc_recordio_close(r));
}
END_TEST

/* ---- Damaged files ----------------------------------------------------------------- */

/* The offset named by an MXC_EFORMAT message ("at byte N"), -1 if none. */
static long named_offset(const char *msg) {
    const char *p = strstr(msg, "at byte ");
    return p ? strtol(p + 8, NULL, 10) : -1;
}

/* plain.rec cut at every length: the records before the cut read back, then a clean end
 * (a cut at a record boundary) or MXC_EFORMAT naming the offset of the cut record. */
START_TEST(truncated_everywhere) {
    fill_counting();
    size_t n;
    char *whole = mxct_read_file(rec_path(0, "plain.rec"), &n);
    ck_assert_ptr_nonnull(whole);
    /* record boundaries: the offsets of plain.idx, and the end */
    static const long starts[] = {0, 8, 20, 32, 56, 76, 120, 136, 156, 464};
    char *path = mxct_temp_file("mxc-cut-");
    for (size_t len = 0; len <= n; len++) {
        write_file(path, whole, len);
        mxc_recordio *r;
        CK_OK(mxc_recordio_open(path, NULL, 0, &r));
        int count, rc = read_plain(r, &count);
        ck_assert_int_eq((long)len >= starts[count], 1);
        if ((long)len == starts[count]) {
            ck_assert_msg(rc == 0, "cut at %zu: %s", len, mxc_last_error());
        } else {
            ck_assert_msg(rc == MXC_EFORMAT, "cut at %zu: %d", len, rc);
            long at = named_offset(mxc_last_error());
            ck_assert_msg(at >= starts[count] && at < starts[count + 1], "cut at %zu: %s", len,
                          mxc_last_error());
            ck_assert_ptr_nonnull(strstr(mxc_last_error(), path));
            /* the position stays at the damaged record: the same error again */
            const void *data;
            size_t size;
            ck_assert_int_eq(mxc_recordio_read(r, &data, &size), MXC_EFORMAT);
        }
        CK_OK(mxc_recordio_close(r));
    }
    remove(path);
    free(path);
    free(whole);
}
END_TEST

/* Every byte of plain.rec replaced by several values: no crash, no overread (ASan), and
 * either records (a damaged payload is not detectable) or MXC_EFORMAT with an offset
 * inside the file; a damaged magic word is always detected at its own record. */
START_TEST(corrupted_everywhere) {
    fill_counting();
    size_t n;
    char *whole = mxct_read_file(rec_path(0, "plain.rec"), &n);
    ck_assert_ptr_nonnull(whole);
    char *path = mxct_temp_file("mxc-bad-");
    static const unsigned char values[] = {0x00, 0xff, 0x20, 0x3f, 0x7f};
    int detected = 0;
    for (size_t at = 0; at < n; at++) {
        for (size_t v = 0; v < sizeof values; v++) {
            if ((unsigned char)whole[at] == values[v])
                continue;
            char *copy = malloc(n);
            memcpy(copy, whole, n);
            copy[at] = (char)values[v];
            write_file(path, copy, n);
            free(copy);
            mxc_recordio *r;
            CK_OK(mxc_recordio_open(path, NULL, 0, &r));
            const void *data;
            size_t size;
            int rc;
            while ((rc = mxc_recordio_read(r, &data, &size)) == 1)
                ;
            ck_assert_msg(rc == 0 || rc == MXC_EFORMAT, "byte %zu = %u: %d %s", at, values[v], rc,
                          mxc_last_error());
            if (rc == MXC_EFORMAT) {
                long named = named_offset(mxc_last_error());
                ck_assert_msg(named >= 0 && named <= (long)n, "%s", mxc_last_error());
                detected++;
            }
            /* the first magic word: always seen, at byte 0 */
            if (at < 4) {
                ck_assert_int_eq(rc, MXC_EFORMAT);
                ck_assert_int_eq(named_offset(mxc_last_error()), 0);
            }
            CK_OK(mxc_recordio_close(r));
        }
    }
    ck_assert_int_gt(detected, 100);
    remove(path);
    free(path);
    free(whole);
}
END_TEST

/* A length word far beyond the file: MXC_EFORMAT before any allocation of that size. */
START_TEST(lying_lengths) {
    char *path = mxct_temp_file("mxc-lie-");
    unsigned char head[16] = {0x0a, 0x23, 0xd7, 0xce, 0xff, 0xff, 0xff, 0x1f};
    write_file(path, head, sizeof head);
    mxc_recordio *r;
    CK_OK(mxc_recordio_open(path, NULL, 0, &r));
    const void *data;
    size_t size;
    ck_assert_int_eq(mxc_recordio_read(r, &data, &size), MXC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "truncated"));
    ck_assert_int_eq(named_offset(mxc_last_error()), 0);
    CK_OK(mxc_recordio_close(r));

    /* a continuation part where a record starts, and a new record inside one */
    unsigned char cont[16] = {0x0a, 0x23, 0xd7, 0xce, 0x00, 0x00, 0x00, 0x40,
                              0x0a, 0x23, 0xd7, 0xce, 0x00, 0x00, 0x00, 0x20};
    write_file(path, cont, sizeof cont);
    CK_OK(mxc_recordio_open(path, NULL, 0, &r));
    ck_assert_int_eq(mxc_recordio_read(r, &data, &size), MXC_EFORMAT);
    ck_assert_int_eq(named_offset(mxc_last_error()), 0);
    CK_OK(mxc_recordio_close(r));
    write_file(path, cont + 8, 8);
    FILE *f = fopen(path, "ab");
    ck_assert_int_eq((int)fwrite(cont + 8, 1, 8, f), 8); /* flag 1, then flag 1 again */
    fclose(f);
    CK_OK(mxc_recordio_open(path, NULL, 0, &r));
    ck_assert_int_eq(mxc_recordio_read(r, &data, &size), MXC_EFORMAT);
    ck_assert_int_eq(named_offset(mxc_last_error()), 8);
    CK_OK(mxc_recordio_close(r));
    remove(path);
    free(path);
}
END_TEST

START_TEST(bad_index) {
    struct {
        const char *text;
        const char *message;
    } cases[] = {
        {"0\t0\nx\t8\n", ":2: expected"},
        {"0\t0\n1 8\n", ":2: expected"},
        {"0\t0\n1\t8 junk\n", ":2: expected"},
        {"0\t0\n\n3\t6\n", ":3: offset 6 is not a record boundary"},
        {"0\t4096\n", ":1: offset 4096 is past the end"},
        {"0\t-8\n", ":1: expected"},
    };
    char *idx = mxct_temp_file("mxc-idx-");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(idx, cases[i].text, strlen(cases[i].text));
        mxc_recordio *r = (mxc_recordio *)1;
        ck_assert_int_eq(mxc_recordio_open(rec_path(0, "plain.rec"), idx, 0, &r), MXC_EFORMAT);
        ck_assert_ptr_null(r);
        ck_assert_msg(strstr(mxc_last_error(), cases[i].message) && strstr(mxc_last_error(), idx),
                      "case %zu: %s", i, mxc_last_error());
    }
    /* blank lines and CRLF are fine; a key given twice means its last line */
    const char *ok = "0\t0\r\n\n2\t20\n2\t8\n";
    write_file(idx, ok, strlen(ok));
    mxc_recordio *r;
    CK_OK(mxc_recordio_open(rec_path(0, "plain.rec"), idx, 0, &r));
    const int64_t *keys;
    size_t n;
    CK_OK(mxc_recordio_keys(r, &keys, &n));
    ck_assert_uint_eq(n, 3);
    CK_OK(mxc_recordio_seek(r, 2));
    ck_assert_int_eq(mxc_recordio_tell(r), 8);
    CK_OK(mxc_recordio_close(r));
    remove(idx);
    free(idx);
}
END_TEST

START_TEST(misuse) {
    mxc_recordio *r = (mxc_recordio *)1, *w;
    ck_assert_int_eq(mxc_recordio_open(NULL, NULL, 0, &r), MXC_EINVAL);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(mxc_recordio_open("x", NULL, 0, NULL), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_open("/nonexistent/x.rec", NULL, 0, &r), MXC_EIO);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "/nonexistent/x.rec"));
    ck_assert_int_eq(mxc_recordio_open("/nonexistent/x.rec", NULL, 1, &r), MXC_EIO);
    ck_assert_int_eq(mxc_recordio_open(rec_path(0, "plain.rec"), "/nonexistent/i", 0, &r), MXC_EIO);
    ck_assert_int_eq(mxc_recordio_open(".", NULL, 0, &r), MXC_EIO);

    char *path = mxct_temp_file("mxc-rec-");
    CK_OK(mxc_recordio_open(path, NULL, 1, &w));
    const void *data;
    size_t size;
    ck_assert_int_eq(mxc_recordio_read(w, &data, &size), MXC_EMISUSE);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "open for writing"));
    ck_assert_int_eq(mxc_recordio_seek_offset(w, 0), MXC_EMISUSE);
    ck_assert_int_eq(mxc_recordio_write(w, NULL, 3), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_write(w, "x", MXC_RECORDIO_MAX_RECORD + 1), MXC_EINVAL);
    CK_OK(mxc_recordio_write(w, NULL, 0));
    CK_OK(mxc_recordio_close(w));

    CK_OK(mxc_recordio_open(path, NULL, 0, &r));
    ck_assert_int_eq(mxc_recordio_write(r, "abc", 3), MXC_EMISUSE);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "mxc_recordio_write"));
    ck_assert_int_eq(mxc_recordio_read(r, NULL, &size), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_read(r, &data, NULL), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_keys(r, NULL, &size), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_read(r, &data, &size), 1);
    ck_assert_uint_eq(size, 0);
    ck_assert_ptr_nonnull(data);
    CK_OK(mxc_recordio_close(r));
    /* a closed handle */
    ck_assert_int_eq(mxc_recordio_read(r, &data, &size), MXC_EMISUSE);
    ck_assert_int_eq(mxc_recordio_close(r), MXC_EMISUSE);
    ck_assert_int_eq(mxc_recordio_tell(r), -1);
    ck_assert_int_eq(mxc_recordio_close(NULL), MXC_OK);
    ck_assert_int_eq(mxc_recordio_tell(NULL), -1);

    /* image records */
    mxc_image_record h = {.label = 1};
    const void *image;
    unsigned char small[8] __attribute__((aligned(8))) = {0};
    ck_assert_int_eq(mxc_recordio_unpack_image(small, sizeof small, &h, &image, &size),
                     MXC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "shorter"));
    ck_assert_int_eq(mxc_recordio_unpack_image(NULL, 0, &h, &image, &size), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_unpack_image(small, 8, NULL, &image, &size), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_pack_image(NULL, NULL, 0, NULL, 0, NULL, 0, &size), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_pack_image(&h, NULL, 2, NULL, 0, NULL, 0, &size), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_pack_image(&h, NULL, 0, NULL, 5, NULL, 0, &size), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_pack_image(&h, NULL, 0, NULL, 0, NULL, 24, &size), MXC_EINVAL);
    ck_assert_int_eq(mxc_recordio_pack_image(&h, NULL, 0, NULL, 0, small, 8, &size), MXC_EINVAL);
    ck_assert_uint_eq(size, 24);
    remove(path);
    free(path);
}
END_TEST

/* Every allocation of open (with an index), reading and writing failing in turn: a clean
 * MXC_ENOMEM and nothing leaked. */
START_TEST(alloc_failure_sweep) {
    const char *fork = getenv("CK_FORK");
    if (fork && strcmp(fork, "no") == 0) {
        printf("check_recordio: skipping alloc_failure_sweep: needs Check's fork mode\n");
        return;
    }
    static struct mxct_alloc_counts counts;
    mxct_alloc_install(&counts); /* the first mxc call of this process */
    char *out = mxct_temp_file("mxc-oom-");
    long before = 0, n;
    for (n = -1; n < 1000; n++) {
        if (n == 0)
            before = atomic_load(&counts.live); /* after a warm-up run (handle slabs) */
        mxct_alloc_fail_after(&counts, n);
        mxc_recordio *r = NULL, *w = NULL;
        int rc = mxc_recordio_open(rec_path(0, "images.rec"), rec_path(1, "images.idx"), 0, &r);
        if (rc == MXC_OK)
            rc = mxc_recordio_open(out, NULL, 1, &w);
        const void *data;
        size_t size;
        while (rc == MXC_OK && (rc = mxc_recordio_read(r, &data, &size)) == 1)
            rc = mxc_recordio_write(w, data, size);
        mxct_alloc_fail_after(&counts, -1);
        mxc_recordio_close(r);
        mxc_recordio_close(w);
        if (rc == 0 && n >= 0)
            break;
        if (n >= 0) {
            ck_assert_msg(rc == MXC_ENOMEM, "allocation %ld: %s: %s", n, mxc_err_name(rc),
                          mxc_last_error());
            ck_assert_int_eq(atomic_load(&counts.live), before);
        }
    }
    ck_assert_msg(n > 0 && n < 1000, "no allocation failure was met (n = %ld)", n);
    ck_assert_int_eq(atomic_load(&counts.live), before);
    assert_same_file(out, rec_path(0, "images.rec"));
    remove(out);
    free(out);
}
END_TEST

static Suite *recordio_suite(void) {
    Suite *s = suite_create("recordio");
    TCase *tc = tcase_create("recordio");
    tcase_set_timeout(tc, mxct_timeout(60));
    tcase_add_test(tc, read_mxnet_records);
    tcase_add_test(tc, write_matches_mxnet);
    tcase_add_test(tc, image_records);
    tcase_add_test(tc, truncated_everywhere);
    tcase_add_test(tc, corrupted_everywhere);
    tcase_add_test(tc, lying_lengths);
    tcase_add_test(tc, bad_index);
    tcase_add_test(tc, misuse);
    tcase_add_test(tc, alloc_failure_sweep);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(recordio_suite()); }

/*
 * io/im2rec.c — MXNet's im2rec (tools/im2rec.py) as library calls (mxc/recordio.h): a
 * folder of class sub-folders becomes an image list, and an image list becomes a RecordIO
 * file of image records with its index. `mxc im2rec` (tools/mxc.c) is the command.
 *
 * Packing runs in chunks: the threads read (and with resize, decode, resize and re-encode)
 * the chunk's images into buffers of their own, then the calling thread writes the chunk's
 * records in list order, so the file is the same for any number of threads.
 */
#include "common/common.h"
#include "common/thread.h"
#include "io/io_impl.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define MAX_THREADS 64
#define MAX_LABELS  64

void mxc_im2rec_params_init(mxc_im2rec_params *params) {
    if (!params)
        return;
    memset(params, 0, sizeof *params);
    params->quality = 95;
    params->num_threads = 1;
}

/* ---- The list ---------------------------------------------------------------------- */

struct names {
    char **v;
    size_t n, cap;
};

static void names_free(struct names *ns) {
    for (size_t i = 0; i < ns->n; i++)
        mxc__free(ns->v[i]);
    mxc__free(ns->v);
    memset(ns, 0, sizeof *ns);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_image(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 ||
                   strcasecmp(dot, ".png") == 0);
}

/* The entries of folder `dir` that are folders (`folders`) or image files, sorted. */
static int list_dir(const char *dir, bool folders, struct names *out) {
    int rc = MXC_OK;
    DIR *d = opendir(dir);
    MXC_CHECK(d != NULL, MXC_EIO, "cannot read folder '%s': %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (folders ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode) || !is_image(e->d_name))
            continue;
        if (out->n == out->cap) {
            size_t cap = out->cap ? 2 * out->cap : 64;
            char **grown = mxc__realloc(out->v, cap * sizeof *grown);
            MXC_CHECK(grown != NULL, MXC_ENOMEM, "out of memory listing '%s'", dir);
            out->v = grown;
            out->cap = cap;
        }
        out->v[out->n] = mxc__strdup(e->d_name);
        MXC_CHECK(out->v[out->n] != NULL, MXC_ENOMEM, "out of memory listing '%s'", dir);
        out->n++;
    }
    if (out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, cmp_name);
fail:
    if (d)
        closedir(d);
    return rc;
}

struct entry {
    int64_t index;
    int label;
    char *path; /* relative to the root */
};

static int write_list(const char *list_path, const struct entry *e, size_t n) {
    FILE *f = fopen(list_path, "w");
    if (!f)
        return mxc__error(MXC_EIO, "cannot create '%s': %s", list_path, strerror(errno));
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%" PRId64 "\t%f\t%s\n", e[i].index, (double)e[i].label, e[i].path);
    if (ferror(f) | (fclose(f) != 0))
        return mxc__error(MXC_EIO, "cannot write '%s': %s", list_path, strerror(errno));
    return MXC_OK;
}

int mxc_im2rec_make_list(const char *root, const char *list_path, int shuffle, uint64_t seed,
                         int64_t *count) {
    int rc = MXC_OK;
    struct names classes = {0}, files = {0};
    struct entry *e = NULL;
    size_t n = 0, cap = 0;
    if (count)
        *count = 0;
    MXC_CHECK(root && list_path, MXC_EINVAL, "%s is NULL", root ? "list_path" : "root");
    MXC_TRY(list_dir(root, true, &classes));
    for (size_t c = 0; c < classes.n; c++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, classes.v[c]);
        MXC_TRY(list_dir(dir, false, &files));
        for (size_t i = 0; i < files.n; i++) {
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                struct entry *grown = mxc__realloc(e, cap * sizeof *grown);
                MXC_CHECK(grown != NULL, MXC_ENOMEM, "out of memory listing '%s'", root);
                e = grown;
            }
            size_t len = strlen(classes.v[c]) + strlen(files.v[i]) + 2;
            e[n].path = mxc__malloc(len);
            MXC_CHECK(e[n].path != NULL, MXC_ENOMEM, "out of memory listing '%s'", root);
            snprintf(e[n].path, len, "%s/%s", classes.v[c], files.v[i]);
            e[n].index = (int64_t)n;
            e[n].label = (int)c;
            n++;
        }
        names_free(&files);
    }
    MXC_CHECK(n > 0, MXC_EFORMAT, "no .jpg, .jpeg or .png file in the sub-folders of '%s'", root);
    if (shuffle) {
        uint64_t state = seed ^ 0x696d32726563ull;
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = (size_t)mxc__io_below(&state, (uint64_t)i + 1);
            struct entry t = e[i];
            e[i] = e[j];
            e[j] = t;
        }
    }
    MXC_TRY(write_list(list_path, e, n));
    if (count)
        *count = (int64_t)n;
fail:
    for (size_t i = 0; i < n; i++)
        mxc__free(e[i].path);
    mxc__free(e);
    names_free(&classes);
    names_free(&files);
    return mxc__in_call(__func__, rc);
}

/* ---- Packing ----------------------------------------------------------------------- */

/* One list line, and the record made of it. */
struct item {
    int64_t index;
    uint32_t num_labels;
    float labels[MAX_LABELS];
    char *path; /* root/path */
    unsigned char *record;
    size_t size; /* 0: skipped */
};

/* Parses "index<TAB>label...<TAB>path" (the line is modified). */
static bool parse_item(char *line, const char *root, struct item *it) {
    char *fields[MAX_LABELS + 2];
    int n = 0;
    for (char *t = line; t && n < MAX_LABELS + 2;) {
        fields[n++] = t;
        char *tab = strchr(t, '\t');
        if (tab)
            *tab = '\0';
        t = tab ? tab + 1 : NULL;
    }
    if (n < 3)
        return false;
    char *end;
    errno = 0;
    it->index = strtoll(fields[0], &end, 10);
    if (end == fields[0] || *end || errno || it->index < 0)
        return false;
    it->num_labels = (uint32_t)(n - 2);
    for (int i = 1; i < n - 1; i++) {
        it->labels[i - 1] = strtof(fields[i], &end);
        if (end == fields[i] || *end)
            return false;
    }
    const char *rel = fields[n - 1];
    size_t len = strlen(rel);
    while (len && (rel[len - 1] == '\r' || rel[len - 1] == ' '))
        len--;
    if (len == 0)
        return false;
    size_t total = strlen(root) + len + 2;
    it->path = mxc__malloc(total);
    if (!it->path)
        return false;
    snprintf(it->path, total, "%s/%.*s", root, (int)len, rel);
    return true;
}

struct pack_job {
    const mxc_im2rec_params *p;
    struct item *items;
    size_t n;
    _Atomic size_t next;
    _Atomic int oom;
};

/* Makes one item's record; a file that cannot be read or decoded is skipped (size 0). */
static int make_record(const mxc_im2rec_params *p, struct item *it, struct mxc__image *img,
                       struct mxc__image *small) {
    int rc = MXC_OK;
    char *bytes = NULL;
    size_t len;
    unsigned char *jpeg = NULL;
    unsigned long jpeg_size = 0;
    it->size = 0;
    rc = mxc__file_read("im2rec", it->path, &bytes, &len);
    const void *image = bytes;
    size_t image_size = len;
    if (rc == MXC_OK && p->resize > 0) {
        rc = mxc__image_decode(it->path, bytes, len, img);
        if (rc == MXC_OK)
            rc = mxc__image_resize_shorter(img, p->resize, small, it->path);
        if (rc == MXC_OK)
            rc = mxc__image_encode_jpeg(small, p->quality, it->path, &jpeg, &jpeg_size);
        image = jpeg;
        image_size = jpeg_size;
    }
    if (rc == MXC_OK) {
        mxc_image_record h = {.label = it->labels[0], .id = (uint64_t)it->index};
        uint32_t nl = it->num_labels > 1 ? it->num_labels : 0;
        size_t need = MXC_IMAGE_RECORD_HEADER + 4 * (size_t)nl + image_size;
        it->record = mxc__malloc(need);
        rc = it->record ? mxc_recordio_pack_image(&h, it->labels, nl, image, image_size, it->record,
                                                  need, &it->size)
                        : mxc__error(MXC_ENOMEM, "im2rec: out of memory for '%s'", it->path);
    }
    if (rc != MXC_OK && rc != MXC_ENOMEM) {
        mxc__log(MXC_LOG_WARN, "im2rec: skipping %s", mxc_last_error());
        it->size = 0;
        rc = MXC_OK;
    }
    mxc__free(bytes);
    free(jpeg);
    return rc;
}

static void *pack_main(void *arg) {
    struct pack_job *job = arg;
    struct mxc__image img = {0}, small = {0};
    for (;;) {
        size_t i = atomic_fetch_add(&job->next, 1);
        if (i >= job->n)
            break;
        if (make_record(job->p, &job->items[i], &img, &small) != MXC_OK)
            atomic_store(&job->oom, 1);
    }
    mxc__image_free(&img);
    mxc__image_free(&small);
    return NULL;
}

/* Makes the records of `items` on `threads` threads (this one among them). */
static int pack_chunk(const mxc_im2rec_params *p, struct item *items, size_t n, int threads) {
    struct pack_job job = {.p = p, .items = items, .n = n};
    mxc__thread t[MAX_THREADS];
    int started = 0;
    for (int i = 1; i < threads; i++)
        if (mxc__thread_start(&t[started], pack_main, &job, "mxc-im2rec") == MXC_OK)
            started++;
    pack_main(&job);
    for (int i = 0; i < started; i++)
        mxc__thread_join(t[i]);
    return atomic_load(&job.oom) ? mxc__error(MXC_ENOMEM, "im2rec: out of memory") : MXC_OK;
}

int mxc_im2rec(const char *list_path, const char *root, const char *rec_path, const char *idx_path,
               const mxc_im2rec_params *params, int64_t *count) {
    int rc = MXC_OK;
    char *text = NULL;
    struct item *items = NULL;
    mxc_recordio *w = NULL;
    size_t len, chunk = 0, line = 0, written = 0, per_chunk = 0;
    if (count)
        *count = 0;
    MXC_CHECK(list_path && root && rec_path && idx_path && params, MXC_EINVAL, "%s is NULL",
              !list_path  ? "list_path"
              : !root     ? "root"
              : !rec_path ? "rec_path"
              : !idx_path ? "idx_path"
                          : "params");
    const mxc_im2rec_params *p = params;
    MXC_CHECK(p->resize >= 0 && p->resize <= 65535, MXC_EINVAL,
              "resize is %d, must be 0 (keep the bytes) or in [1, 65535]", p->resize);
    MXC_CHECK(p->quality >= 1 && p->quality <= 100, MXC_EINVAL,
              "quality is %d, must be in [1, 100]", p->quality);
    MXC_CHECK(p->num_threads >= 1 && p->num_threads <= MAX_THREADS, MXC_EINVAL,
              "num_threads is %d, must be in [1, %d]", p->num_threads, MAX_THREADS);
    MXC_TRY(mxc__file_read("im2rec", list_path, &text, &len));
    MXC_TRY(mxc_recordio_open(rec_path, idx_path, 1, &w));
    items = mxc__calloc(16 * (size_t)p->num_threads, sizeof *items);
    MXC_CHECK(items != NULL, MXC_ENOMEM, "out of memory");
    per_chunk = 16 * (size_t)p->num_threads;
    for (char *s = text; s && *s;) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = '\0';
        line++;
        if (*s && !(s[0] == '\r' && s[1] == '\0')) {
            MXC_CHECK(parse_item(s, root, &items[chunk]), MXC_EFORMAT,
                      "'%s':%zu: expected \"index<TAB>label...<TAB>path\"", list_path, line);
            chunk++;
        }
        s = nl ? nl + 1 : NULL;
        if (chunk == per_chunk || (!s || !*s)) {
            MXC_TRY(pack_chunk(p, items, chunk, p->num_threads));
            for (size_t i = 0; i < chunk; i++) {
                if (items[i].size)
                    MXC_TRY(
                        mxc_recordio_write_idx(w, items[i].index, items[i].record, items[i].size));
                written += items[i].size != 0;
                mxc__free(items[i].record);
                mxc__free(items[i].path);
                memset(&items[i], 0, sizeof items[i]);
            }
            chunk = 0;
        }
    }
    MXC_CHECK(written > 0, MXC_EFORMAT, "no image of '%s' was packed", list_path);
    rc = mxc_recordio_close(w);
    w = NULL;
    if (rc == MXC_OK && count)
        *count = (int64_t)written;
fail:
    for (size_t i = 0; items && i < per_chunk; i++) {
        mxc__free(items[i].record);
        mxc__free(items[i].path);
    }
    mxc__free(items);
    mxc_recordio_close(w);
    mxc__free(text);
    return mxc__in_call(__func__, rc);
}

/*
 * io/idx.c — the IDX reader (MNIST, Fashion-MNIST; FORMATS.md) and the source that plugs
 * it into the common iterator. Files are read whole through zlib's gzread, which reads
 * gzip streams and passes raw files through (it looks for the gzip magic). Every header
 * field is checked, and memory grows only as bytes actually arrive, so a lying header
 * can never make us allocate more than about twice the file's real contents.
 */
#include "common/common.h"
#include "io/io_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAGIC_IMAGES 0x00000803u
/* Far above any real IDX data set, low enough that counts never overflow. */
#define IDX_MAX_DIM 100000000u

/* One opened IDX file. */
struct idx_file {
    const char *path;
    gzFile gz;
};

static int idx_open(struct idx_file *f, const char *path) {
    f->path = path;
    int fd;
    size_t size;
    int rc = mxc__file_open_regular("IDX", path, &fd, &size);
    if (rc != MXC_OK)
        return rc;
    errno = 0;
    f->gz = gzdopen(fd, "rb"); /* takes the descriptor */
    if (!f->gz) {
        close(fd);
        return mxc__error(MXC_ENOMEM, "IDX: out of memory opening '%s'", path);
    }
    return MXC_OK;
}

/* Reads up to `n` bytes; *got says how many. A read error is MXC_EIO (the system
 * failed) or MXC_EFORMAT (corrupt gzip data); the end of the file is not an error. */
static int idx_read(struct idx_file *f, void *buf, size_t n, size_t *got) {
    *got = 0;
    while (*got < n) {
        size_t want = n - *got;
        if (want > (1u << 30))
            want = 1u << 30;
        int r = gzread(f->gz, (char *)buf + *got, (unsigned)want);
        if (r < 0) {
            int zerr = 0;
            const char *msg = gzerror(f->gz, &zerr);
            if (zerr == Z_ERRNO)
                return mxc__error(MXC_EIO, "IDX: cannot read '%s': %s", f->path, strerror(errno));
            return mxc__error(MXC_EFORMAT, "IDX: '%s' is not valid gzip data: %s", f->path, msg);
        }
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return MXC_OK;
}

/* Reads a header: magic and `ndim` big-endian dimensions. */
static int idx_header(struct idx_file *f, uint32_t magic, int ndim, uint32_t *dims) {
    int rc = MXC_OK;
    unsigned char buf[4 * 4];
    size_t got;
    size_t need = 4 * (size_t)(ndim + 1);
    MXC_TRY(idx_read(f, buf, need, &got));
    MXC_CHECK(got == need, MXC_EFORMAT, "IDX: '%s' is truncated: %zu header bytes of %zu", f->path,
              got, need);
    uint32_t v[4];
    for (int i = 0; i <= ndim; i++)
        v[i] = (uint32_t)buf[4 * i] << 24 | (uint32_t)buf[4 * i + 1] << 16 |
               (uint32_t)buf[4 * i + 2] << 8 | (uint32_t)buf[4 * i + 3];
    MXC_CHECK(v[0] == magic, MXC_EFORMAT, "IDX: '%s' has magic 0x%08x, expected 0x%08x (%s)",
              f->path, (unsigned)v[0], (unsigned)magic,
              magic == IDX_MAGIC_IMAGES ? "uint8 images, 3 dimensions"
                                        : "uint8 labels, 1 dimension");
    for (int i = 0; i < ndim; i++) {
        dims[i] = v[i + 1];
        MXC_CHECK(dims[i] > 0 && dims[i] <= IDX_MAX_DIM, MXC_EFORMAT,
                  "IDX: '%s': dimension %d is %u, must be in [1, %u]", f->path, i,
                  (unsigned)dims[i], (unsigned)IDX_MAX_DIM);
    }
fail:
    return rc;
}

/* Reads exactly `n` body bytes into a new buffer (memory grown as data arrives), and
 * checks that nothing follows them. */
static int idx_body(struct idx_file *f, size_t n, uint8_t **out) {
    int rc = MXC_OK;
    uint8_t *buf = NULL;
    size_t have = 0, cap = 0;
    *out = NULL;
    while (have < n) {
        if (have == cap) {
            size_t next = cap ? cap * 2 : (size_t)1 << 20;
            if (next > n)
                next = n;
            uint8_t *grown = mxc__realloc(buf, next);
            MXC_CHECK(grown != NULL, MXC_ENOMEM, "IDX: out of memory reading '%s' (%zu bytes)",
                      f->path, next);
            buf = grown;
            cap = next;
        }
        size_t got;
        MXC_TRY(idx_read(f, buf + have, cap - have, &got));
        have += got;
        MXC_CHECK(got > 0 || have == n, MXC_EFORMAT,
                  "IDX: '%s' is truncated: %zu data bytes of the %zu its header announces", f->path,
                  have, n);
    }
    unsigned char extra;
    size_t got;
    MXC_TRY(idx_read(f, &extra, 1, &got));
    MXC_CHECK(got == 0, MXC_EFORMAT, "IDX: '%s' has bytes after the %zu its header announces",
              f->path, n);
    *out = buf;
    return MXC_OK;
fail:
    mxc__free(buf);
    return rc;
}

static void idx_close(struct idx_file *f) {
    if (f->gz)
        gzclose(f->gz);
    f->gz = NULL;
}

/* ---- The source -------------------------------------------------------------------- */

struct idx_source {
    uint8_t *images; /* count * pixels */
    uint8_t *labels; /* count */
    int64_t pixels;
};

static int idx_sample(void *impl, int64_t index, float *data, float *label) {
    const struct idx_source *s = impl;
    const uint8_t *src = s->images + index * s->pixels;
    for (int64_t i = 0; i < s->pixels; i++)
        data[i] = (float)src[i] * (1.0f / 255.0f);
    if (label)
        label[0] = (float)s->labels[index];
    return MXC_OK;
}

static void idx_source_free(void *impl) {
    struct idx_source *s = impl;
    if (!s)
        return;
    mxc__free(s->images);
    mxc__free(s->labels);
    mxc__free(s);
}

int mxc_data_iter_create_idx(const char *image_path, const char *label_path, int flat,
                             const mxc_data_iter_params *params, mxc_data_iter **out) {
    int rc = MXC_OK;
    struct idx_file img = {0}, lab = {0};
    struct idx_source *s = NULL;
    if (out)
        *out = NULL;
    MXC_CHECK(out != NULL, MXC_EINVAL, "%s: out is NULL", __func__);
    MXC_CHECK(image_path != NULL && label_path != NULL, MXC_EINVAL, "%s: %s path is NULL", __func__,
              image_path ? "label" : "image");
    MXC_CHECK(params != NULL, MXC_EINVAL, "%s: params is NULL", __func__);
    s = mxc__calloc(1, sizeof *s);
    MXC_CHECK(s != NULL, MXC_ENOMEM, "%s: out of memory", __func__);

    uint32_t idims[3] = {0}, ldims[1] = {0};
    MXC_TRY(idx_open(&img, image_path));
    MXC_TRY(idx_header(&img, IDX_MAGIC_IMAGES, 3, idims));
    MXC_TRY(idx_open(&lab, label_path));
    MXC_TRY(idx_header(&lab, IDX_MAGIC_LABELS, 1, ldims));
    MXC_CHECK(idims[0] == ldims[0], MXC_EFORMAT,
              "IDX: '%s' holds %u images but '%s' holds %u labels", image_path, (unsigned)idims[0],
              label_path, (unsigned)ldims[0]);
    s->pixels = (int64_t)idims[1] * idims[2];
    MXC_CHECK(s->pixels <= (int64_t)IDX_MAX_DIM &&
                  (uint64_t)idims[0] * (uint64_t)s->pixels <= (uint64_t)SIZE_MAX / 2,
              MXC_EFORMAT, "IDX: '%s': %u images of %u x %u pixels is too large", image_path,
              (unsigned)idims[0], (unsigned)idims[1], (unsigned)idims[2]);
    MXC_TRY(idx_body(&img, (size_t)idims[0] * (size_t)s->pixels, &s->images));
    MXC_TRY(idx_body(&lab, ldims[0], &s->labels));
    idx_close(&img);
    idx_close(&lab);

    struct mxc__io_source src = {
        .name = "IDX",
        .impl = s,
        .num_samples = idims[0],
        .read = idx_sample,
        .free = idx_source_free,
    };
    if (flat) {
        src.data_shape.ndim = 1;
        src.data_shape.dims[0] = s->pixels;
    } else {
        src.data_shape.ndim = 3;
        src.data_shape.dims[0] = 1;
        src.data_shape.dims[1] = idims[1];
        src.data_shape.dims[2] = idims[2];
    }
    src.label_shape.ndim = 1;
    src.label_shape.dims[0] = 1;
    s = NULL; /* the iterator owns it now, on failure too */
    return mxc__io_iter_create(&src, params, out);

fail:
    idx_close(&img);
    idx_close(&lab);
    idx_source_free(s);
    return rc;
}

/* The file `dir`/`name`.gz, or `dir`/`name` when only that exists; a new string. */
static char *dataset_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 8;
    char *path = mxc__malloc(n);
    if (!path)
        return NULL;
    snprintf(path, n, "%s/%s.gz", dir, name);
    if (access(path, F_OK) != 0) {
        char *raw = mxc__malloc(n);
        if (raw) {
            snprintf(raw, n, "%s/%s", dir, name);
            if (access(raw, F_OK) == 0) {
                mxc__free(path);
                return raw;
            }
            mxc__free(raw);
        }
    }
    return path; /* the .gz name: opening it reports what is missing */
}

int mxc_data_iter_create_fashion_mnist(const char *dir, int train, int flat,
                                       const mxc_data_iter_params *params, mxc_data_iter **out) {
    int rc = MXC_OK;
    char *images = NULL, *labels = NULL;
    if (out)
        *out = NULL;
    if (!dir) {
        const char *env = getenv("MXC_FASHION_MNIST_DIR");
        dir = env && env[0] ? env : "/usr/share/datasets/fashion-mnist";
    }
    const char *set = train ? "train" : "t10k";
    char name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", set);
    images = dataset_path(dir, name);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", set);
    labels = dataset_path(dir, name);
    MXC_CHECK(images && labels, MXC_ENOMEM, "%s: out of memory", __func__);
    rc = mxc__in_call(__func__, mxc_data_iter_create_idx(images, labels, flat, params, out));
fail:
    mxc__free(images);
    mxc__free(labels);
    return rc;
}

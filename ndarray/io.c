/*
 * ndarray/io.c — mxc_nd_save / mxc_nd_load: arrays to and from MXNet's NDArray list
 * files. The byte format lives in nd_format.c; this file moves array contents between
 * the engine and host buffers and does the file handling (whole-file reads; writes through
 * mxc__file_replace, a temporary file renamed into place).
 */
#include "ndarray/nd_format.h"
#include "ndarray/ndarray_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What mxc__file_replace writes: the list, in MXNet's format. */
struct list_file {
    const struct mxc__nd_record *records;
    size_t count;
    bool named;
};

static int write_list(FILE *f, void *arg) {
    const struct list_file *l = arg;
    return mxc__nd_write_file(l->records, l->count, l->named, f);
}

int mxc_nd_save(const char *path, size_t count, mxc_ndarray *const *arrays,
                const char *const *names) {
    int rc = MXC_OK;
    struct mxc__nd_record *records = NULL;
    size_t filled = 0;
    MXC_CHECK(path != NULL, MXC_EINVAL, "mxc_nd_save: path is NULL");
    MXC_CHECK(count == 0 || arrays != NULL, MXC_EINVAL, "mxc_nd_save: arrays is NULL");
    for (size_t i = 0; i < count; i++) {
        MXC_TRY(mxc__nd_check(arrays[i], __func__, "an array"));
        MXC_CHECK(names == NULL || names[i] != NULL, MXC_EINVAL,
                  "mxc_nd_save: names[%zu] is "
                  "NULL",
                  i);
    }
    records = mxc__calloc(count ? count : 1, sizeof *records);
    MXC_CHECK(records != NULL, MXC_ENOMEM, "mxc_nd_save: out of memory");
    for (; filled < count; filled++) {
        const mxc_ndarray *a = arrays[filled];
        struct mxc__nd_record *r = &records[filled];
        r->name = names ? names[filled] : NULL;
        r->shape = a->shape;
        r->dtype = a->dtype;
        r->dev_type = MXC_CPU; /* data is always written from the host */
        r->dev_id = 0;
        r->nbytes = mxc__nd_nbytes(a);
        void *host = mxc__malloc(r->nbytes);
        MXC_CHECK(host != NULL, MXC_ENOMEM, "mxc_nd_save: out of memory for %zu bytes", r->nbytes);
        r->data = host;
        MXC_TRY(mxc_nd_sync_copy_to_cpu(a, host, r->nbytes));
    }
    struct list_file list = {records, count, names != NULL};
    MXC_TRY(mxc__file_replace("mxc_nd_save", path, write_list, &list));
fail:
    for (size_t i = 0; records && i < count; i++)
        mxc__free((void *)records[i].data);
    mxc__free(records);
    return rc;
}

void mxc_nd_list_free(size_t count, mxc_ndarray **arrays, char **names) {
    for (size_t i = 0; i < count; i++) {
        if (arrays)
            mxc_nd_free(arrays[i]);
        if (names)
            mxc__free(names[i]);
    }
    mxc__free(arrays);
    mxc__free(names);
}

int mxc__nd_load_memory(const void *buf, size_t len, const char *source, mxc_context ctx,
                        size_t *count, mxc_ndarray ***arrays, char ***names) {
    int rc = MXC_OK;
    size_t n = 0;
    struct mxc__nd_record *records = NULL;
    mxc_ndarray **out = NULL;
    char **out_names = NULL;
    *count = 0;
    *arrays = NULL;
    *names = NULL;
    rc = mxc__nd_decode(buf, len, &records, &n);
    if (rc != MXC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", mxc_last_error());
        rc = mxc__error(rc, "mxc_nd_load: %s: %s", source, why);
        goto fail;
    }
    out = mxc__calloc(n ? n : 1, sizeof *out);
    MXC_CHECK(out != NULL, MXC_ENOMEM, "mxc_nd_load: out of memory");
    bool named = n > 0 && records[0].name != NULL;
    if (named) {
        out_names = mxc__calloc(n, sizeof *out_names);
        MXC_CHECK(out_names != NULL, MXC_ENOMEM, "mxc_nd_load: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const struct mxc__nd_record *r = &records[i];
        MXC_TRY(mxc_nd_create(&r->shape, r->dtype, ctx, 1, &out[i]));
        if (r->nbytes > 0)
            MXC_TRY(mxc_nd_sync_copy_from_cpu(out[i], r->data, r->nbytes));
        if (named) {
            out_names[i] = mxc__strdup(r->name);
            MXC_CHECK(out_names[i] != NULL, MXC_ENOMEM, "mxc_nd_load: out of memory");
        }
    }
    mxc__nd_records_free(records, n);
    *count = n;
    *arrays = out;
    *names = out_names;
    return MXC_OK;
fail:
    mxc_nd_list_free(n, out, out_names);
    mxc__nd_records_free(records, n);
    return rc;
}

int mxc_nd_load(const char *path, mxc_context ctx, size_t *count, mxc_ndarray ***arrays,
                char ***names) {
    int rc = MXC_OK;
    char *file = NULL;
    size_t len = 0;
    MXC_CHECK(path && count && arrays && names, MXC_EINVAL,
              "mxc_nd_load: path, count, arrays and names must not be NULL");
    *count = 0;
    *arrays = NULL;
    *names = NULL;
    MXC_TRY(mxc__file_read("mxc_nd_load", path, &file, &len));
    rc = mxc__nd_load_memory(file, len, path, ctx, count, arrays, names);
fail:
    mxc__free(file);
    return rc;
}

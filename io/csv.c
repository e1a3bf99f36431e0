/*
 * io/csv.c — the CSV iterator: one sample per line of comma-separated numbers, parsed
 * whole at creation into float32 tables that the common iterator's table source serves.
 * A bad line is an MXC_EFORMAT naming path:line and what was wrong.
 */
#include "common/common.h"
#include "io/io_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses `path` into rows of `width` numbers each: a new table in *out, rows in *rows. */
static int parse_csv(const char *path, int64_t width, float **out, int64_t *rows) {
    int rc = MXC_OK;
    char *text = NULL;
    float *table = NULL;
    size_t len, cap = 0;
    int64_t n = 0;
    *out = NULL;
    MXC_TRY(mxc__file_read("CSV", path, &text, &len));
    MXC_CHECK(strlen(text) == len, MXC_EFORMAT, "CSV: '%s' contains a NUL byte", path);
    char *line = text;
    for (long lineno = 1; *line; lineno++) {
        char *end = strchr(line, '\n');
        char *next = end ? end + 1 : line + strlen(line);
        if (end)
            *end = '\0';
        if (end > line && end[-1] == '\r')
            end[-1] = '\0';
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0') { /* empty line */
            line = next;
            continue;
        }
        if ((size_t)((n + 1) * width) > cap) {
            size_t grown_cap = cap ? cap * 2 : (size_t)width * 64;
            float *grown = mxc__realloc(table, grown_cap * sizeof(float));
            MXC_CHECK(grown != NULL, MXC_ENOMEM, "CSV: out of memory parsing '%s'", path);
            table = grown;
            cap = grown_cap;
        }
        float *row = table + n * width;
        int64_t count = 0;
        for (;;) {
            char *field = p, *stop;
            errno = 0;
            float v = strtof(field, &stop);
            char *q = stop;
            while (*q == ' ' || *q == '\t')
                q++;
            if (stop == field || (*q != ',' && *q != '\0')) {
                char *comma = strchr(field, ',');
                int flen = comma ? (int)(comma - field) : (int)strlen(field);
                MXC_CHECK(0, MXC_EFORMAT, "CSV: %s:%ld: field %lld '%.*s' is not a number", path,
                          lineno, (long long)count + 1, flen > 40 ? 40 : flen, field);
            }
            if (count < width)
                row[count] = v;
            count++;
            if (*q == '\0')
                break;
            p = q + 1;
        }
        MXC_CHECK(count == width, MXC_EFORMAT, "CSV: %s:%ld: %lld values, expected %lld", path,
                  lineno, (long long)count, (long long)width);
        n++;
        line = next;
    }
    MXC_CHECK(n > 0, MXC_EFORMAT, "CSV: '%s' holds no rows", path);
    mxc__free(text);
    *out = table;
    *rows = n;
    return MXC_OK;
fail:
    mxc__free(text);
    mxc__free(table);
    return rc;
}

static int check_shape(const char *what, const mxc_shape *s) {
    if (s->ndim < 1 || s->ndim >= MXC_MAX_NDIM)
        return mxc__error(MXC_EINVAL, "CSV: %s has %d dimensions, must have 1 to %d", what,
                          (int)s->ndim, MXC_MAX_NDIM - 1);
    int64_t size = mxc_shape_size(s);
    if (size <= 0 || size > (1 << 24))
        return mxc__error(MXC_EINVAL, "CSV: %s has %lld elements, must have 1 to %d", what,
                          (long long)size, 1 << 24);
    return MXC_OK;
}

int mxc_data_iter_create_csv(const char *data_csv, const mxc_shape *data_shape,
                             const char *label_csv, const mxc_shape *label_shape,
                             const mxc_data_iter_params *params, mxc_data_iter **out) {
    int rc = MXC_OK;
    float *data = NULL, *label = NULL;
    mxc_shape one = {.ndim = 1, .dims = {1}};
    mxc_shape none = {.ndim = 0};
    if (out)
        *out = NULL;
    MXC_CHECK(out != NULL, MXC_EINVAL, "%s: out is NULL", __func__);
    MXC_CHECK(data_csv != NULL && data_shape != NULL, MXC_EINVAL, "%s: %s is NULL", __func__,
              data_csv ? "data_shape" : "data_csv");
    MXC_CHECK(params != NULL, MXC_EINVAL, "%s: params is NULL", __func__);
    if (!label_shape)
        label_shape = &one;
    MXC_TRY(check_shape("data_shape", data_shape));
    if (label_csv)
        MXC_TRY(check_shape("label_shape", label_shape));

    int64_t rows, label_rows;
    MXC_TRY(parse_csv(data_csv, mxc_shape_size(data_shape), &data, &rows));
    if (label_csv) {
        MXC_TRY(parse_csv(label_csv, mxc_shape_size(label_shape), &label, &label_rows));
        MXC_CHECK(rows == label_rows, MXC_EFORMAT, "CSV: '%s' holds %lld rows but '%s' holds %lld",
                  data_csv, (long long)rows, label_csv, (long long)label_rows);
    }
    struct mxc__io_source src;
    rc = mxc__io_table_source("CSV", data, label, rows, data_shape, label_csv ? label_shape : &none,
                              &src);
    data = label = NULL; /* taken over, on failure too */
    MXC_TRY(rc);
    return mxc__io_iter_create(&src, params, out);
fail:
    mxc__free(data);
    mxc__free(label);
    return rc;
}

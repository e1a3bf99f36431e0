/*
 * io/array_iter.c — the iterator over caller-given arrays: their contents are copied to
 * host float32 tables at creation (so the caller keeps its arrays) and served by the
 * common iterator's table source.
 */
#include "common/common.h"
#include "io/io_impl.h"
#include "ndarray/ndarray_impl.h"

#include <string.h>

/* Checks `a` and copies its contents into a new host table; writes its shape. */
static int snapshot(const mxc_ndarray *a, const char *what, float **out, mxc_shape *shape) {
    int rc = MXC_OK;
    float *buf = NULL;
    *out = NULL;
    MXC_TRY(mxc__nd_check(a, "mxc_data_iter_create_array", what));
    MXC_TRY(mxc_nd_get_shape(a, shape));
    MXC_CHECK(mxc_nd_dtype(a) == MXC_FLOAT32, MXC_ETYPE,
              "array iterator: %s is %s, must be float32", what,
              mxc_dtype_name(mxc_nd_dtype(a)) ? mxc_dtype_name(mxc_nd_dtype(a)) : "?");
    MXC_CHECK(shape->ndim >= 1 && shape->ndim <= MXC_MAX_NDIM - 1 && shape->dims[0] > 0, MXC_EINVAL,
              "array iterator: %s needs 1 to %d dimensions and samples on the "
              "first axis",
              what, MXC_MAX_NDIM - 1);
    int64_t size = mxc_shape_size(shape);
    MXC_CHECK(size > 0, MXC_EINVAL, "array iterator: %s is empty", what);
    buf = mxc__malloc((size_t)size * sizeof(float));
    MXC_CHECK(buf != NULL, MXC_ENOMEM, "array iterator: out of memory copying %s", what);
    MXC_TRY(mxc_nd_sync_copy_to_cpu(a, buf, (size_t)size * sizeof(float)));
    *out = buf;
    return MXC_OK;
fail:
    mxc__free(buf);
    return rc;
}

/* The shape of one sample: `s` without its first axis, or (1) for a 1-D array. */
static mxc_shape sample_shape(const mxc_shape *s) {
    mxc_shape r = {.ndim = 1, .dims = {1}};
    if (s->ndim > 1) {
        r.ndim = s->ndim - 1;
        for (int d = 1; d < s->ndim; d++)
            r.dims[d - 1] = s->dims[d];
    }
    return r;
}

int mxc_data_iter_create_array(const mxc_ndarray *data, const mxc_ndarray *label,
                               const mxc_data_iter_params *params, mxc_data_iter **out) {
    int rc = MXC_OK;
    float *dbuf = NULL, *lbuf = NULL;
    mxc_shape dshape, lshape = {.ndim = 0};
    if (out)
        *out = NULL;
    MXC_CHECK(out != NULL, MXC_EINVAL, "%s: out is NULL", __func__);
    MXC_CHECK(data != NULL, MXC_EINVAL, "%s: data is NULL", __func__);
    MXC_CHECK(params != NULL, MXC_EINVAL, "%s: params is NULL", __func__);
    MXC_TRY(snapshot(data, "data", &dbuf, &dshape));
    if (label) {
        MXC_TRY(snapshot(label, "label", &lbuf, &lshape));
        MXC_CHECK(lshape.dims[0] == dshape.dims[0], MXC_ESHAPE,
                  "array iterator: data holds %lld samples but label %lld",
                  (long long)dshape.dims[0], (long long)lshape.dims[0]);
    }
    mxc_shape ds = sample_shape(&dshape);
    mxc_shape ls = label ? sample_shape(&lshape) : lshape;
    struct mxc__io_source src;
    rc = mxc__io_table_source("array", dbuf, lbuf, dshape.dims[0], &ds, &ls, &src);
    dbuf = lbuf = NULL; /* taken over, on failure too */
    MXC_TRY(rc);
    return mxc__io_iter_create(&src, params, out);
fail:
    mxc__free(dbuf);
    mxc__free(lbuf);
    return rc;
}

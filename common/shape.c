/*
 * common/shape.c — shape helpers every layer uses: construction, element counts with
 * overflow checks, and the "(2, 3)" spelling used in messages and MXNet's JSON.
 */
#include "common/common.h"

#include <stdio.h>

mxc_shape mxc_shape_make(int ndim, const int64_t *dims) {
    mxc_shape s = {0};
    if (dims == NULL)
        return s; /* the empty shape */
    s.ndim = ndim < 0 ? 0 : ndim > MXC_MAX_NDIM ? MXC_MAX_NDIM : ndim;
    for (int i = 0; i < s.ndim; i++)
        s.dims[i] = dims[i];
    return s;
}

int64_t mxc_shape_size(const mxc_shape *s) {
    if (s == NULL || s->ndim < 0 || s->ndim > MXC_MAX_NDIM)
        return -1;
    if (s->ndim == 0)
        return 0; /* the empty shape, as in MXNet's NDArray files */
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) {
        if (s->dims[i] < 0 || (s->dims[i] > 0 && n > INT64_MAX / s->dims[i]))
            return -1;
        n *= s->dims[i];
    }
    return n;
}

const char *mxc__shape_str(const mxc_shape *s, char *buf, size_t size) {
    size_t used = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < s->ndim && used < size; i++)
        used +=
            (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)s->dims[i]);
    if (used < size)
        snprintf(buf + used, size - used, ")");
    return buf;
}

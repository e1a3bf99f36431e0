/*
 * common/shape.c — shape helpers every layer uses: construction, element counts with
 * overflow checks, and the "(2, 3)" spelling used in messages and MXNet's JSON; the
 * spelling of contexts in messages.
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

/* The product of the non-zero dims must fit, not only the product of all: kernels and
 * inference multiply some of the dims of an empty array too (BatchNorm's (outer, C, inner)
 * of a (0, 3, 22, 1, 2^63 - 1) array overflowed), and with this rule every partial product
 * of a valid shape's dims fits in int64, whatever their order. */
int64_t mxc_shape_size(const mxc_shape *s) {
    if (s == NULL || s->ndim < 0 || s->ndim > MXC_MAX_NDIM)
        return -1;
    if (s->ndim == 0)
        return 0; /* the empty shape, as in MXNet's NDArray files */
    int64_t n = 1;
    bool empty = false;
    for (int i = 0; i < s->ndim; i++) {
        if (s->dims[i] < 0)
            return -1;
        if (s->dims[i] == 0)
            empty = true;
        else if (n > INT64_MAX / s->dims[i])
            return -1;
        else
            n *= s->dims[i];
    }
    return empty ? 0 : n;
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

const char *mxc__ctx_name(mxc_context ctx, char *buf, size_t len) {
    switch (ctx.dev_type) {
    case 0:
    case MXC_CPU: snprintf(buf, len, "cpu(%d)", (int)ctx.dev_id); break;
    case MXC_GPU: snprintf(buf, len, "gpu(%d)", (int)ctx.dev_id); break;
    case MXC_CPU_PINNED: snprintf(buf, len, "cpu_pinned(%d)", (int)ctx.dev_id); break;
    default: snprintf(buf, len, "ctx(%d, %d)", (int)ctx.dev_type, (int)ctx.dev_id); break;
    }
    return buf;
}

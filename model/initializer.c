/*
 * model/initializer.c — mxc_init_array: MXNet's Initializer, dispatching on the suffix of
 * the parameter's name and drawing weights from the random resource.
 */
#include "mxc/model.h"

#include "common/common.h"
#include "ndarray/ndarray_impl.h"

#include <math.h>
#include <string.h>

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Xavier's scale for a weight of `shape`; MXC_EINVAL when it has no fans. */
static int xavier_scale(const mxc_init_config *c, const mxc_shape *shape, const char *name,
                        float *scale) {
    if (shape->ndim < 2)
        return mxc__error(MXC_EINVAL,
                          "mxc_init_array: Xavier needs a weight of 2 or more "
                          "dimensions; %s has %d",
                          name, shape->ndim);
    double field = 1;
    for (int i = 2; i < shape->ndim; i++)
        field *= (double)shape->dims[i];
    double fan_in = (double)shape->dims[1] * field, fan_out = (double)shape->dims[0] * field;
    double factor = c->xavier_factor == MXC_XAVIER_IN    ? fan_in
                    : c->xavier_factor == MXC_XAVIER_OUT ? fan_out
                                                         : (fan_in + fan_out) / 2;
    float magnitude = c->xavier_magnitude > 0 ? c->xavier_magnitude : 3.0f;
    *scale = (float)sqrt(magnitude / factor);
    return MXC_OK;
}

static int init_weight(const mxc_init_config *c, const char *name, mxc_ndarray *a) {
    switch (c->kind) {
    case MXC_INIT_UNIFORM: return mxc_nd_random_uniform(a, -c->scale, c->scale);
    case MXC_INIT_NORMAL: return mxc_nd_random_normal(a, 0.0f, c->scale);
    case MXC_INIT_CONSTANT: return mxc_nd_fill(a, c->scale);
    case MXC_INIT_XAVIER: {
        mxc_shape s;
        float scale = 0;
        int rc = mxc_nd_get_shape(a, &s);
        if (rc == MXC_OK)
            rc = xavier_scale(c, &s, name, &scale);
        if (rc != MXC_OK)
            return rc;
        return c->xavier_gaussian ? mxc_nd_random_normal(a, 0.0f, scale)
                                  : mxc_nd_random_uniform(a, -scale, scale);
    }
    default: return mxc__error(MXC_EINVAL, "mxc_init_array: unknown initializer kind %d", c->kind);
    }
}

int mxc_init_array(const mxc_init_config *cfg, const char *name, mxc_ndarray *array) {
    if (cfg == NULL || name == NULL)
        return mxc__error(MXC_EINVAL, "mxc_init_array: NULL config or name");
    if (!(cfg->scale >= 0) && cfg->kind != MXC_INIT_CONSTANT)
        return mxc__error(MXC_EINVAL, "mxc_init_array: scale %g is negative", (double)cfg->scale);
    int rc = mxc__nd_check(array, __func__, name);
    if (rc != MXC_OK)
        return rc;
    if (mxc_nd_dtype(array) != MXC_FLOAT32)
        return mxc__error(MXC_ENOTSUP, "mxc_init_array: %s is not float32", name);
    if (ends_with(name, "weight"))
        return init_weight(cfg, name, array);
    if (ends_with(name, "bias") || ends_with(name, "beta") || ends_with(name, "moving_mean"))
        return mxc_nd_fill(array, 0.0);
    if (ends_with(name, "gamma") || ends_with(name, "moving_var"))
        return mxc_nd_fill(array, 1.0);
    return mxc__error(MXC_EINVAL,
                      "mxc_init_array: unknown initialization pattern for %s "
                      "(expected a name ending in weight, bias, gamma, beta, moving_mean or "
                      "moving_var)",
                      name);
}

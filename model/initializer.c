/*
 * model/initializer.c — mxc_init_array: MXNet's Initializer, dispatching on the suffix of
 * the parameter's name or on the variable's __init__ hint (mxc_init_array_hinted), and
 * drawing weights from the random resource.
 */
#include "mxc/model.h"

#include "common/common.h"
#include "common/json.h"
#include "ndarray/ndarray_impl.h"

#include <math.h>
#include <string.h>

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

/* What a name's suffix gives (MXNet's Initializer._legacy_init, and Gluon's running
 * statistics): the scheme for weights, else a constant. */
static const struct {
    const char *suffix;
    float value;
} constant_suffixes[] = {
    {"bias", 0},        {"gamma", 1},        {"beta", 0},
    {"moving_mean", 0}, {"moving_var", 1},   {"moving_inv_var", 0},
    {"moving_avg", 0},  {"running_mean", 0}, {"running_var", 1},
    {"min", 0},         {"max", 1},
};

static int check_args(const mxc_init_config *cfg, const char *name, mxc_ndarray *array,
                      const char *fn) {
    if (cfg == NULL || name == NULL)
        return mxc__error(MXC_EINVAL, "%s: NULL config or name", fn);
    if (!(cfg->scale >= 0) && cfg->kind != MXC_INIT_CONSTANT)
        return mxc__error(MXC_EINVAL, "%s: scale %g is negative", fn, (double)cfg->scale);
    int rc = mxc__nd_check(array, fn, name);
    if (rc != MXC_OK)
        return rc;
    if (mxc_nd_dtype(array) != MXC_FLOAT32)
        return mxc__error(MXC_ENOTSUP, "%s: %s is not float32", fn, name);
    return MXC_OK;
}

static int init_by_name(const mxc_init_config *cfg, const char *name, mxc_ndarray *array) {
    if (mxc__ends_with(name, "weight"))
        return init_weight(cfg, name, array);
    for (size_t i = 0; i < sizeof constant_suffixes / sizeof constant_suffixes[0]; i++)
        if (mxc__ends_with(name, constant_suffixes[i].suffix))
            return mxc_nd_fill(array, constant_suffixes[i].value);
    return mxc__error(MXC_EINVAL,
                      "mxc_init_array: unknown initialization pattern for %s "
                      "(expected a name ending in weight, bias, gamma, beta, moving_mean, "
                      "moving_var, moving_inv_var, moving_avg, running_mean, running_var, min "
                      "or max, or an __init__ hint)",
                      name);
}

int mxc_init_array(const mxc_init_config *cfg, const char *name, mxc_ndarray *array) {
    int rc = check_args(cfg, name, array, __func__);
    return rc == MXC_OK ? init_by_name(cfg, name, array) : rc;
}

/* ---- __init__ hints ---------------------------------------------------------------- */

/* Argument `key` of a hint as a number; `*out` keeps its default when absent. */
static int hint_num(const struct mxc__json *args, const char *key, const char *name, float *out) {
    const struct mxc__json *v = args ? mxc__json_get(args, key) : NULL;
    if (v == NULL)
        return MXC_OK;
    if (v->type != MXC__JSON_NUM)
        return mxc__error(MXC_EINVAL,
                          "mxc_init_array_hinted: %s's __init__ argument %s is %s, "
                          "not a number",
                          name, key, mxc__json_type_name(v->type));
    *out = (float)v->num;
    return MXC_OK;
}

/* Argument `key` of a hint as one of `choices` (its index); `*out` keeps its default. */
static int hint_choice(const struct mxc__json *args, const char *key, const char *name,
                       const char *const *choices, int *out) {
    const struct mxc__json *v = args ? mxc__json_get(args, key) : NULL;
    if (v == NULL)
        return MXC_OK;
    for (int i = 0; v->type == MXC__JSON_STR && choices[i]; i++)
        if (strcmp(v->str, choices[i]) == 0) {
            *out = i;
            return MXC_OK;
        }
    return mxc__error(MXC_EINVAL,
                      "mxc_init_array_hinted: %s's __init__ argument %s is not one "
                      "of the values MXNet accepts",
                      name, key);
}

/* Runs initializer `kind` (MXNet's registered name, lower case) with `args` (an object or
 * NULL) on the array, as MXNet's create(hint)._init_weight does: whatever the name. */
static int init_from_hint(const char *name, const char *kind, const struct mxc__json *args,
                          mxc_ndarray *array) {
    if (strcmp(kind, "zero") == 0 || strcmp(kind, "zeros") == 0)
        return mxc_nd_fill(array, 0.0);
    if (strcmp(kind, "one") == 0 || strcmp(kind, "ones") == 0)
        return mxc_nd_fill(array, 1.0);
    mxc_init_config c = {.kind = -1};
    int rc = MXC_OK;
    if (strcmp(kind, "constant") == 0) {
        float value = 0;
        rc = hint_num(args, "value", name, &value);
        return rc == MXC_OK ? mxc_nd_fill(array, value) : rc;
    } else if (strcmp(kind, "uniform") == 0) {
        c = (mxc_init_config){.kind = MXC_INIT_UNIFORM, .scale = 0.07f};
        rc = hint_num(args, "scale", name, &c.scale);
    } else if (strcmp(kind, "normal") == 0) {
        c = (mxc_init_config){.kind = MXC_INIT_NORMAL, .scale = 0.01f};
        rc = hint_num(args, "sigma", name, &c.scale);
    } else if (strcmp(kind, "xavier") == 0 || strcmp(kind, "msraprelu") == 0) {
        static const char *const rnd[] = {"uniform", "gaussian", NULL};
        static const char *const factor[] = {"avg", "in", "out", NULL};
        bool msra = kind[0] == 'm';
        float slope = 0.25f;
        c = (mxc_init_config){.kind = MXC_INIT_XAVIER,
                              .xavier_magnitude = 3.0f,
                              .xavier_gaussian = msra,
                              .xavier_factor = MXC_XAVIER_AVG};
        if (msra) /* MSRAPrelu: a Gaussian Xavier of magnitude 2 / (1 + slope^2) */
            rc = hint_num(args, "slope", name, &slope);
        else
            rc = hint_choice(args, "rnd_type", name, rnd, &c.xavier_gaussian);
        if (rc == MXC_OK)
            rc = hint_choice(args, "factor_type", name, factor, &c.xavier_factor);
        if (rc == MXC_OK && msra)
            c.xavier_magnitude = 2.0f / (1.0f + slope * slope);
        else if (rc == MXC_OK)
            rc = hint_num(args, "magnitude", name, &c.xavier_magnitude);
    } else {
        return mxc__error(MXC_ENOTSUP,
                          "mxc_init_array_hinted: %s's __init__ names initializer \"%s\", which "
                          "mxc does not have (zero, one, constant, uniform, normal, xavier, "
                          "msraprelu)",
                          name, kind);
    }
    return rc == MXC_OK ? init_weight(&c, name, array) : rc;
}

int mxc_init_array_hinted(const mxc_init_config *cfg, const char *name, const char *hint,
                          mxc_ndarray *array) {
    int rc = check_args(cfg, name, array, __func__);
    if (rc != MXC_OK || hint == NULL || hint[0] == '\0')
        return rc == MXC_OK ? init_by_name(cfg, name, array) : rc;
    if (hint[0] != '[') /* a bare name: "zeros" */
        return init_from_hint(name, hint, NULL, array);
    struct mxc__json j;
    rc = mxc__json_parse(hint, "__init__ hint", &j);
    if (rc != MXC_OK)
        return mxc__error_wrap(rc, "mxc_init_array_hinted: %s", name);
    const struct mxc__json *args = j.n > 1 ? &j.items[1] : NULL;
    if (j.type != MXC__JSON_ARR || j.n < 1 || j.n > 2 || j.items[0].type != MXC__JSON_STR ||
        (args && args->type != MXC__JSON_OBJ))
        rc = mxc__error(MXC_EINVAL,
                        "mxc_init_array_hinted: %s's __init__ hint is not [\"name\", {arguments}]",
                        name);
    else
        rc = init_from_hint(name, j.items[0].str, args, array);
    mxc__json_free(&j);
    return rc;
}

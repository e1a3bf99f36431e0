/*
 * operator/params.c — the one parameter parser: turns MXNet's string key/values into an
 * operator's typed param struct, driven by its parameter table, and prints values back
 * the way MXNet spells them. Shape helpers for inference live here too.
 */
#include "operator/op.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void *field(void *params, const struct mxc__param *p) { return (char *)params + p->offset; }

static const void *cfield(const void *params, const struct mxc__param *p) {
    return (const char *)params + p->offset;
}

static bool is_none(const char *s) { return strcmp(s, "None") == 0; }

static bool parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    while (*end == ' ')
        end++;
    if (end == s || *end != '\0' || errno == ERANGE)
        return false;
    *out = v;
    return true;
}

static bool parse_int64(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    while (*end == ' ')
        end++;
    if (end == s || *end != '\0' || errno == ERANGE)
        return false;
    *out = v;
    return true;
}

/* "(3, 3)", "[3,3]", "(3,)", "3", "()" -> a tuple of up to `max` values. With `none`
 * given, entries may be None ("(None, 2)"): they read as 0 with their bit set in *none. */
static bool parse_tuple(const char *s, int64_t *dims, int *ndim, int max, unsigned *none) {
    struct mxc__long_tuple t = {0};
    unsigned nones = 0;
    while (*s == ' ')
        s++;
    char close = *s == '(' ? ')' : *s == '[' ? ']' : '\0';
    if (close)
        s++;
    for (;;) {
        while (*s == ' ')
            s++;
        if (close && *s == close) {
            s++;
            break;
        }
        if (!close && *s == '\0')
            break;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (none && end == s && strncmp(s, "None", 4) == 0 && t.ndim < max && t.ndim < 32) {
            nones |= 1u << t.ndim;
            end = (char *)s + 4;
        }
        if (end == s || errno == ERANGE || t.ndim == max)
            return false;
        t.dims[t.ndim++] = v;
        s = end;
        while (*s == ' ')
            s++;
        if (*s == ',' || (*s == 'L' && s[1] == ',')) /* Python 2 longs: "(3L, 3L)" */
            s += *s == 'L' ? 2 : 1;
        else if (*s == 'L')
            s++;
        else if (!(close && *s == close) && *s != '\0')
            return false;
    }
    while (*s == ' ')
        s++;
    if (*s != '\0')
        return false;
    *ndim = t.ndim;
    memcpy(dims, t.dims, (size_t)t.ndim * sizeof *dims);
    if (none)
        *none = nones;
    return true;
}

static bool parse_bool(const char *s, bool *out) {
    if (strcmp(s, "True") == 0 || strcmp(s, "true") == 0 || strcmp(s, "1") == 0)
        *out = true;
    else if (strcmp(s, "False") == 0 || strcmp(s, "false") == 0 || strcmp(s, "0") == 0)
        *out = false;
    else
        return false;
    return true;
}

static int choice_index(const char *const *choices, const char *s) {
    for (int i = 0; choices[i]; i++)
        if (strcmp(choices[i], s) == 0)
            return i;
    return -1;
}

static void list_choices(const char *const *choices, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; choices[i] && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", choices[i]);
}

static bool in_bounds(const struct mxc__param *p, double v) {
    return p->min > p->max || (v >= p->min && v <= p->max);
}

/* Parses `value` into the field of `p`. */
static int set_param(const struct mxc__op_def *def, const struct mxc__param *p, const char *value,
                     void *params) {
    void *f = field(params, p);
    double d;
    int64_t i;
    char choices[256];
    switch (p->type) {
    case MXC__PARAM_INT:
        if (!parse_int64(value, &i) || i < INT32_MIN || i > INT32_MAX)
            goto bad;
        if (!in_bounds(p, (double)i))
            goto out_of_bounds;
        *(int *)f = (int)i;
        return MXC_OK;
    case MXC__PARAM_FLOAT:
    case MXC__PARAM_DOUBLE:
        if (!parse_double(value, &d))
            goto bad;
        if (!in_bounds(p, d))
            goto out_of_bounds;
        if (p->type == MXC__PARAM_FLOAT)
            *(float *)f = (float)d;
        else
            *(double *)f = d;
        return MXC_OK;
    case MXC__PARAM_OPT_FLOAT: {
        struct mxc__opt_float *o = f;
        if (is_none(value)) {
            *o = (struct mxc__opt_float){false, 0};
            return MXC_OK;
        }
        if (!parse_double(value, &d))
            goto bad;
        if (!in_bounds(p, d))
            goto out_of_bounds;
        *o = (struct mxc__opt_float){true, (float)d};
        return MXC_OK;
    }
    case MXC__PARAM_OPT_INT: {
        struct mxc__opt_int *o = f;
        if (is_none(value)) {
            *o = (struct mxc__opt_int){false, 0};
            return MXC_OK;
        }
        if (!parse_int64(value, &i) || i < INT32_MIN || i > INT32_MAX)
            goto bad;
        if (!in_bounds(p, (double)i))
            goto out_of_bounds;
        *o = (struct mxc__opt_int){true, (int)i};
        return MXC_OK;
    }
    case MXC__PARAM_BOOL:
        if (!parse_bool(value, (bool *)f))
            goto bad;
        return MXC_OK;
    case MXC__PARAM_TUPLE: {
        mxc_shape *t = f;
        if (!parse_tuple(value, t->dims, &t->ndim, MXC_MAX_NDIM, NULL))
            goto bad;
        return MXC_OK;
    }
    case MXC__PARAM_LONG_TUPLE: {
        struct mxc__long_tuple *t = f;
        if (!parse_tuple(value, t->dims, &t->ndim, MXC__LONG_TUPLE_MAX, NULL))
            goto bad;
        return MXC_OK;
    }
    case MXC__PARAM_OPT_TUPLE: {
        struct mxc__opt_tuple *o = f;
        *o = (struct mxc__opt_tuple){.has_value = !is_none(value)};
        if (o->has_value &&
            !parse_tuple(value, o->tuple.dims, &o->tuple.ndim, MXC_MAX_NDIM, &o->none))
            goto bad;
        return MXC_OK;
    }
    case MXC__PARAM_STRING:
        if (strlen(value) >= MXC__PARAM_STRING_MAX)
            return mxc__error(MXC_EINVAL, "%s: parameter %s='%s' is longer than %d characters",
                              def->name, p->name, value, MXC__PARAM_STRING_MAX - 1);
        strcpy(f, value);
        return MXC_OK;
    case MXC__PARAM_ENUM:
    case MXC__PARAM_OPT_ENUM: {
        int k =
            p->type == MXC__PARAM_OPT_ENUM && is_none(value) ? -1 : choice_index(p->choices, value);
        if (k < 0 && !(p->type == MXC__PARAM_OPT_ENUM && is_none(value))) {
            list_choices(p->choices, choices, sizeof choices);
            return mxc__error(MXC_EINVAL, "%s: parameter %s='%s' is not one of {%s}%s", def->name,
                              p->name, value, choices,
                              p->type == MXC__PARAM_OPT_ENUM ? " or None" : "");
        }
        *(int *)f = k;
        return MXC_OK;
    }
    }
bad:
    return mxc__error(
        MXC_EINVAL, "%s: parameter %s='%s' is not a valid %s", def->name, p->name, value,
        p->type == MXC__PARAM_TUPLE || p->type == MXC__PARAM_LONG_TUPLE ? "tuple such as (3, 3)"
        : p->type == MXC__PARAM_OPT_TUPLE ? "tuple such as (3, None) or None"
        : p->type == MXC__PARAM_BOOL      ? "boolean (True or False)"
        : p->type == MXC__PARAM_INT       ? "integer"
        : p->type == MXC__PARAM_OPT_INT   ? "integer or None"
                                          : "number");
out_of_bounds:
    return mxc__error(MXC_EINVAL, "%s: parameter %s=%s is outside [%g, %g]", def->name, p->name,
                      value, p->min, p->max);
}

static const struct mxc__param *find_param(const struct mxc__op_def *def, const char *key) {
    for (int i = 0; i < def->num_params; i++)
        if (strcmp(def->params[i].name, key) == 0)
            return &def->params[i];
    return NULL;
}

int mxc__op_parse_params(const struct mxc__op_def *def, int num, const char *const *keys,
                         const char *const *vals, void *params) {
    if (def->param_size)
        memset(params, 0, def->param_size);
    for (int i = 0; i < def->num_params; i++) {
        const struct mxc__param *p = &def->params[i];
        if (p->default_value) {
            int rc = set_param(def, p, p->default_value, params);
            MXC_ASSERT(rc == MXC_OK); /* the tables' defaults are tested to parse */
        }
    }
    bool given[64] = {false};
    MXC_ASSERT(def->num_params <= 64);
    for (int i = 0; i < num; i++) {
        if (keys[i] == NULL || vals[i] == NULL)
            return mxc__error(MXC_EINVAL, "%s: parameter %d has a NULL key or value", def->name, i);
        if (strncmp(keys[i], "__", 2) == 0)
            continue; /* symbol hints (__shape__, __init__, ...) are not parameters */
        const struct mxc__param *p = find_param(def, keys[i]);
        if (p == NULL) {
            char valid[512];
            size_t used = 0;
            valid[0] = '\0';
            for (int k = 0; k < def->num_params && used < sizeof valid; k++)
                used += (size_t)snprintf(valid + used, sizeof valid - used, "%s%s", k ? ", " : "",
                                         def->params[k].name);
            return mxc__error(MXC_EINVAL, "%s: unknown parameter '%s'; valid parameters: %s",
                              def->name, keys[i], def->num_params ? valid : "none");
        }
        int rc = set_param(def, p, vals[i], params);
        if (rc != MXC_OK)
            return rc;
        given[p - def->params] = true;
    }
    for (int i = 0; i < def->num_params; i++)
        if (def->params[i].default_value == NULL && !given[i])
            return mxc__error(MXC_EINVAL, "%s: required parameter '%s' is missing (%s)", def->name,
                              def->params[i].name, def->params[i].doc);
    return MXC_OK;
}

/* The shortest %g spelling of `v` that reads back to the same value (as a float when
 * `as_float`), so defaults print as MXNet writes them ("0.9", not "0.899999976"). */
static int format_number(char *buf, size_t size, double v, bool as_float) {
    char tmp[64];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(tmp, sizeof tmp, "%.*g", digits, v);
        double back = strtod(tmp, NULL);
        if (as_float ? (float)back == (float)v : back == v)
            break;
    }
    return snprintf(buf, size, "%s", tmp);
}

/* The tuple as Python prints it: "(1, 2)", "(3,)", "()"; entries whose bit is set in
 * `none` print as None. Returns the length it needed, as snprintf. */
static int format_tuple(char *buf, size_t size, const int64_t *dims, int ndim, unsigned none) {
    size_t used = 0;
    char item[32];
    for (int i = 0; i < ndim; i++) {
        if (i < 32 && (none & (1u << i)))
            snprintf(item, sizeof item, "None");
        else
            snprintf(item, sizeof item, "%lld", (long long)dims[i]);
        used += (size_t)snprintf(buf + (used < size ? used : size), used < size ? size - used : 0,
                                 "%s%s", i ? ", " : "(", item);
    }
    const char *close = ndim == 0 ? "()" : ndim == 1 ? ",)" : ")";
    used += (size_t)snprintf(buf + (used < size ? used : size), used < size ? size - used : 0, "%s",
                             close);
    return (int)used;
}

int mxc__op_format_param(const struct mxc__param *p, const void *params, char *buf, size_t size) {
    const void *f = cfield(params, p);
    switch (p->type) {
    case MXC__PARAM_INT: return snprintf(buf, size, "%d", *(const int *)f);
    case MXC__PARAM_FLOAT: return format_number(buf, size, (double)*(const float *)f, true);
    case MXC__PARAM_DOUBLE: return format_number(buf, size, *(const double *)f, false);
    case MXC__PARAM_OPT_FLOAT: {
        const struct mxc__opt_float *o = f;
        return o->has_value ? format_number(buf, size, (double)o->value, true)
                            : snprintf(buf, size, "None");
    }
    case MXC__PARAM_OPT_INT: {
        const struct mxc__opt_int *o = f;
        return o->has_value ? snprintf(buf, size, "%d", o->value) : snprintf(buf, size, "None");
    }
    case MXC__PARAM_OPT_TUPLE: {
        const struct mxc__opt_tuple *o = f;
        return o->has_value ? format_tuple(buf, size, o->tuple.dims, o->tuple.ndim, o->none)
                            : snprintf(buf, size, "None");
    }
    case MXC__PARAM_BOOL: return snprintf(buf, size, "%s", *(const bool *)f ? "True" : "False");
    case MXC__PARAM_STRING: return snprintf(buf, size, "%s", (const char *)f);
    case MXC__PARAM_TUPLE: {
        const mxc_shape *t = f;
        return format_tuple(buf, size, t->dims, t->ndim, 0);
    }
    case MXC__PARAM_LONG_TUPLE: {
        const struct mxc__long_tuple *t = f;
        return format_tuple(buf, size, t->dims, t->ndim, 0);
    }
    default: {
        int k = *(const int *)f;
        return snprintf(buf, size, "%s", k < 0 ? "None" : p->choices[k]);
    }
    }
}

/* ---- Inference helpers ------------------------------------------------------------- */

int mxc__shape_assign(mxc_shape *have, const mxc_shape *want, const char *op, const char *arg) {
    if (want->ndim == 0)
        return MXC_OK;
    if (have->ndim == 0) {
        *have = *want;
        return MXC_OK;
    }
    bool same = have->ndim == want->ndim;
    for (int i = 0; same && i < have->ndim; i++)
        same = have->dims[i] == want->dims[i];
    if (same)
        return MXC_OK;
    char b1[128], b2[128];
    return mxc__error(MXC_ESHAPE, "%s: %s has shape %s but %s is expected", op, arg,
                      mxc__shape_str(have, b1, sizeof b1), mxc__shape_str(want, b2, sizeof b2));
}

int mxc__type_assign(int *have, int want, const char *op, const char *arg) {
    if (want < 0)
        return MXC_OK;
    if (*have < 0) {
        *have = want;
        return MXC_OK;
    }
    if (*have == want)
        return MXC_OK;
    return mxc__error(MXC_ETYPE, "%s: %s is %s but %s is expected", op, arg, mxc_dtype_name(*have),
                      mxc_dtype_name(want));
}

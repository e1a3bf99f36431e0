/*
 * model/optimizer.c — SGD (with momentum) and Adam on top of the update operators, the
 * way MXNet's Python optimizers drive them: per-parameter update counts, learning-rate
 * and weight-decay multipliers, a learning-rate schedule over the highest update count,
 * and Adam's bias correction folded into the learning rate.
 */
#include "mxc/model.h"
#include "mxc/op.h"

#include "common/common.h"
#include "common/handle.h"
#include "ndarray/ndarray_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define OPT_MAGIC 0x4f505449u /* "OPTI" */
#define OPT_DEAD  0x4f505446u /* "OPTF": freed (common/handle.h) */

struct param_state {
    bool used;
    int count;             /* updates of this parameter */
    mxc_ndarray *state[2]; /* momentum, or Adam's mean and variance */
};

struct mult {
    char *name;
    float lr, wd;
};

struct mxc_optimizer {
    _Atomic uint32_t magic;
    mxc_optimizer_config cfg;
    struct param_state *params;
    int num_params;
    struct mult *mults;
    int num_mults;
    int num_update;  /* the highest update count of any parameter */
    float sched_lr;  /* the schedule's current rate */
    int sched_count; /* FACTOR: updates the schedule has accounted for */
    int sched_index; /* MULTI_FACTOR: the next step */
};

static mxc__handle_kind opt_kind =
    MXC__HANDLE_KIND(struct mxc_optimizer, "an optimizer", OPT_MAGIC, OPT_DEAD);

int mxc_optimizer_create(const mxc_optimizer_config *cfg, mxc_optimizer **out) {
    if (cfg == NULL || out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_optimizer_create: NULL argument");
    *out = NULL;
    if (cfg->kind != MXC_OPT_SGD && cfg->kind != MXC_OPT_ADAM)
        return mxc__error(MXC_EINVAL, "mxc_optimizer_create: unknown kind %d", cfg->kind);
    if (!(cfg->lr >= 0) || !(cfg->wd >= 0) || !(cfg->momentum >= 0 && cfg->momentum < 1))
        return mxc__error(MXC_EINVAL,
                          "mxc_optimizer_create: lr %g, wd %g, momentum %g: "
                          "need lr >= 0, wd >= 0, 0 <= momentum < 1",
                          (double)cfg->lr, (double)cfg->wd, (double)cfg->momentum);
    if (cfg->lr_schedule == MXC_LR_FACTOR && (cfg->step < 1 || !(cfg->factor > 0)))
        return mxc__error(MXC_EINVAL, "mxc_optimizer_create: a factor schedule needs step "
                                      ">= 1 and factor > 0");
    if (cfg->lr_schedule == MXC_LR_MULTI_FACTOR &&
        (cfg->num_steps < 1 || cfg->num_steps > MXC_LR_MAX_STEPS || !(cfg->factor > 0)))
        return mxc__error(MXC_EINVAL,
                          "mxc_optimizer_create: a multi-factor schedule needs 1 "
                          "to %d steps and factor > 0",
                          MXC_LR_MAX_STEPS);
    for (int i = 1; cfg->lr_schedule == MXC_LR_MULTI_FACTOR && i < cfg->num_steps; i++)
        if (cfg->steps[i] <= cfg->steps[i - 1])
            return mxc__error(MXC_EINVAL, "mxc_optimizer_create: steps must increase");
    mxc_optimizer *o = mxc__handle_alloc(&opt_kind);
    if (o == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_optimizer_create: out of memory");
    o->cfg = *cfg;
    if (o->cfg.rescale_grad == 0)
        o->cfg.rescale_grad = 1;
    if (o->cfg.beta1 == 0)
        o->cfg.beta1 = 0.9f;
    if (o->cfg.beta2 == 0)
        o->cfg.beta2 = 0.999f;
    if (o->cfg.epsilon == 0)
        o->cfg.epsilon = 1e-8f;
    o->sched_lr = cfg->lr;
    mxc__handle_publish(&opt_kind, o);
    *out = o;
    return MXC_OK;
}

static int check_opt(const mxc_optimizer *o, const char *fn) {
    return mxc__handle_check(&opt_kind, o, fn, "optimizer");
}

int mxc_optimizer_set_mult(mxc_optimizer *o, const char *name, float lr_mult, float wd_mult) {
    int rc = check_opt(o, __func__);
    if (rc != MXC_OK)
        return rc;
    if (name == NULL || !(lr_mult >= 0) || !(wd_mult >= 0))
        return mxc__error(MXC_EINVAL, "mxc_optimizer_set_mult: bad name or multipliers");
    for (int i = 0; i < o->num_mults; i++)
        if (strcmp(o->mults[i].name, name) == 0) {
            o->mults[i].lr = lr_mult;
            o->mults[i].wd = wd_mult;
            return MXC_OK;
        }
    struct mult *m = mxc__realloc(o->mults, sizeof *m * (size_t)(o->num_mults + 1));
    if (m == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_optimizer_set_mult: out of memory");
    o->mults = m;
    char *copy = mxc__strdup(name);
    if (copy == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_optimizer_set_mult: out of memory");
    m[o->num_mults++] = (struct mult){copy, lr_mult, wd_mult};
    return MXC_OK;
}

/* The schedule's rate after `num_update` updates (MXNet's FactorScheduler and
 * MultiFactorScheduler: the rate decays once per step passed). */
static float scheduled_lr(mxc_optimizer *o) {
    const mxc_optimizer_config *c = &o->cfg;
    if (c->lr_schedule == MXC_LR_FACTOR) {
        while (o->num_update > o->sched_count + c->step) {
            o->sched_count += c->step;
            o->sched_lr *= c->factor;
            if (o->sched_lr < c->stop_factor_lr)
                o->sched_lr = c->stop_factor_lr;
        }
    } else if (c->lr_schedule == MXC_LR_MULTI_FACTOR) {
        while (o->sched_index < c->num_steps && o->num_update > c->steps[o->sched_index]) {
            o->sched_index++;
            o->sched_lr *= c->factor;
        }
    }
    return o->sched_lr;
}

float mxc_optimizer_current_lr(const mxc_optimizer *o) {
    return check_opt(o, __func__) == MXC_OK ? o->sched_lr : NAN;
}

static int grow_params(mxc_optimizer *o, int index);

static int state_for(mxc_optimizer *o, int index, mxc_ndarray *weight, struct param_state **out) {
    if (grow_params(o, index) != MXC_OK)
        return mxc__error(MXC_ENOMEM, "mxc_optimizer_update: out of memory");
    struct param_state *s = &o->params[index];
    if (!s->used) {
        int nstates = o->cfg.kind == MXC_OPT_ADAM ? 2 : o->cfg.momentum > 0 ? 1 : 0;
        mxc_shape shape;
        mxc_context ctx;
        int rc = mxc_nd_get_shape(weight, &shape);
        if (rc == MXC_OK)
            rc = mxc_nd_get_context(weight, &ctx);
        for (int i = 0; i < nstates && rc == MXC_OK; i++)
            rc = mxc_nd_zeros(&shape, MXC_FLOAT32, ctx, &s->state[i]);
        if (rc != MXC_OK) {
            for (int i = 0; i < 2; i++) {
                mxc_nd_free(s->state[i]);
                s->state[i] = NULL;
            }
            return rc;
        }
        s->used = true;
    }
    /* States loaded from a checkpoint live on the CPU: they follow the weight. */
    mxc_context wctx;
    int rc = mxc_nd_get_context(weight, &wctx);
    for (int i = 0; i < 2 && rc == MXC_OK; i++) {
        mxc_context sctx;
        if (s->state[i] == NULL || mxc_nd_get_context(s->state[i], &sctx) != MXC_OK ||
            (sctx.dev_type == wctx.dev_type && sctx.dev_id == wctx.dev_id))
            continue;
        mxc_shape shape;
        mxc_ndarray *moved = NULL;
        rc = mxc_nd_get_shape(s->state[i], &shape);
        if (rc == MXC_OK)
            rc = mxc_nd_create(&shape, MXC_FLOAT32, wctx, 1, &moved);
        if (rc == MXC_OK)
            rc = mxc_nd_copy_to(s->state[i], moved);
        if (rc != MXC_OK) {
            mxc_nd_free(moved);
            return rc;
        }
        mxc_nd_free(s->state[i]);
        s->state[i] = moved;
    }
    if (rc != MXC_OK)
        return rc;
    *out = s;
    return MXC_OK;
}

/* Makes room for parameter `index` (a zeroed state). */
static int grow_params(mxc_optimizer *o, int index) {
    if (index < o->num_params)
        return MXC_OK;
    int n = index + 1 > 2 * o->num_params ? index + 1 : 2 * o->num_params;
    struct param_state *p = mxc__realloc(o->params, sizeof *p * (size_t)n);
    if (p == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory");
    memset(p + o->num_params, 0, sizeof *p * (size_t)(n - o->num_params));
    o->params = p;
    o->num_params = n;
    return MXC_OK;
}

int mxc_optimizer_update(mxc_optimizer *o, int index, const char *name, mxc_ndarray *weight,
                         mxc_ndarray *grad) {
    int rc = check_opt(o, __func__);
    if (rc == MXC_OK)
        rc = mxc__nd_check(weight, __func__, "weight");
    if (rc == MXC_OK)
        rc = mxc__nd_check(grad, __func__, "grad");
    if (rc != MXC_OK)
        return rc;
    if (index < 0 || name == NULL)
        return mxc__error(MXC_EINVAL, "mxc_optimizer_update: bad index %d or NULL name", index);
    struct param_state *s = NULL;
    rc = state_for(o, index, weight, &s);
    if (rc != MXC_OK)
        return rc;
    float lr_mult = 1, wd_mult = 1;
    for (int i = 0; i < o->num_mults; i++)
        if (strcmp(o->mults[i].name, name) == 0) {
            lr_mult = o->mults[i].lr;
            wd_mult = o->mults[i].wd;
        }
    s->count++;
    if (s->count > o->num_update)
        o->num_update = s->count;
    const mxc_optimizer_config *c = &o->cfg;
    double lr = (double)scheduled_lr(o) * lr_mult;
    if (c->kind == MXC_OPT_ADAM) /* bias correction, as MXNet's Adam.update */
        lr *= sqrt(1 - pow(c->beta2, s->count)) / (1 - pow(c->beta1, s->count));
    char v_lr[32], v_wd[32], v_rescale[32], v_clip[32], v_mom[32], v_b1[32], v_b2[32], v_eps[32];
    snprintf(v_lr, sizeof v_lr, "%.9g", lr);
    snprintf(v_wd, sizeof v_wd, "%.9g", (double)c->wd * wd_mult);
    snprintf(v_rescale, sizeof v_rescale, "%.9g", (double)c->rescale_grad);
    snprintf(v_clip, sizeof v_clip, "%.9g", c->clip_gradient > 0 ? (double)c->clip_gradient : -1.0);
    snprintf(v_mom, sizeof v_mom, "%.9g", (double)c->momentum);
    snprintf(v_b1, sizeof v_b1, "%.9g", (double)c->beta1);
    snprintf(v_b2, sizeof v_b2, "%.9g", (double)c->beta2);
    snprintf(v_eps, sizeof v_eps, "%.9g", (double)c->epsilon);
    const char *keys[] = {"lr", "wd", "rescale_grad", "clip_gradient", "momentum"};
    const char *vals[] = {v_lr, v_wd, v_rescale, v_clip, v_mom};
    const char *akeys[] = {"lr",    "wd",    "rescale_grad", "clip_gradient",
                           "beta1", "beta2", "epsilon"};
    const char *avals[] = {v_lr, v_wd, v_rescale, v_clip, v_b1, v_b2, v_eps};
    mxc_ndarray *in[4] = {weight, grad, s->state[0], s->state[1]};
    mxc_ndarray *outs[1] = {weight};
    if (c->kind == MXC_OPT_ADAM)
        return mxc_imperative_invoke("adam_update", 7, akeys, avals, 4, in, 1, outs, 1);
    if (c->momentum > 0)
        return mxc_imperative_invoke("sgd_mom_update", 5, keys, vals, 3, in, 1, outs, 1);
    return mxc_imperative_invoke("sgd_update", 4, keys, vals, 2, in, 1, outs, 1);
}

void mxc_optimizer_free(mxc_optimizer *o) {
    if (!mxc__handle_check_free(&opt_kind, o, __func__, "optimizer"))
        return;
    for (int i = 0; i < o->num_params; i++)
        for (int k = 0; k < 2; k++)
            mxc_nd_free(o->params[i].state[k]);
    for (int i = 0; i < o->num_mults; i++)
        mxc__free(o->mults[i].name);
    mxc__free(o->params);
    mxc__free(o->mults);
    mxc__handle_free(&opt_kind, o);
}

/* ---- Checkpoints of the state ------------------------------------------------------ */

/* Names of the states of an optimizer of this configuration (NULL past its count). */
static const char *const *state_names(const mxc_optimizer_config *c, int *count) {
    static const char *const adam[] = {"mean", "var"};
    static const char *const mom[] = {"mom"};
    *count = c->kind == MXC_OPT_ADAM ? 2 : c->momentum > 0 ? 1 : 0;
    return c->kind == MXC_OPT_ADAM ? adam : mom;
}

/* A new CPU array of `n` elements of `dtype` holding `data`. */
static int host_array(int dtype, const void *data, int64_t n, mxc_ndarray **out) {
    mxc_shape shape = {.ndim = 1, .dims = {n}};
    int rc = mxc_nd_create(&shape, dtype, mxc_cpu(), 0, out);
    if (rc == MXC_OK)
        rc = mxc_nd_sync_copy_from_cpu(*out, data, (size_t)n * mxc_dtype_size(dtype));
    return rc;
}

static int save_states(const mxc_optimizer *o, const char *path) {
    int rc = MXC_OK, nstates;
    const char *const *snames = state_names(&o->cfg, &nstates);
    size_t cap = 1 + (size_t)o->num_params * (size_t)(1 + nstates), n = 0;
    mxc_ndarray **arrays = mxc__calloc(cap, sizeof *arrays);
    char **names = mxc__calloc(cap, sizeof *names);
    bool *owned = mxc__calloc(cap, sizeof *owned);
    MXC_CHECK(arrays != NULL && names != NULL && owned != NULL, MXC_ENOMEM, "out of memory");
    double sched[4] = {o->num_update, o->sched_count, o->sched_index, o->sched_lr};
    MXC_TRY(host_array(MXC_FLOAT64, sched, 4, &arrays[n]));
    owned[n] = true;
    names[n++] = mxc__strdup("__schedule__");
    for (int i = 0; i < o->num_params; i++) {
        const struct param_state *s = &o->params[i];
        if (!s->used)
            continue;
        int64_t count = s->count;
        MXC_TRY(host_array(MXC_INT64, &count, 1, &arrays[n]));
        owned[n] = true;
        char name[48];
        snprintf(name, sizeof name, "%d_count", i);
        names[n++] = mxc__strdup(name);
        for (int k = 0; k < nstates; k++) {
            arrays[n] = s->state[k];
            snprintf(name, sizeof name, "%d_%s", i, snames[k]);
            names[n++] = mxc__strdup(name);
        }
    }
    for (size_t i = 0; i < n; i++)
        MXC_CHECK(names[i] != NULL, MXC_ENOMEM, "out of memory");
    rc = mxc_nd_save(path, n, arrays, (const char *const *)names);
fail:
    for (size_t i = 0; i < n; i++) {
        if (owned != NULL && owned[i])
            mxc_nd_free(arrays[i]);
        if (names != NULL)
            mxc__free(names[i]);
    }
    mxc__free(arrays);
    mxc__free(names);
    mxc__free(owned);
    return rc;
}

int mxc_optimizer_save_states(const mxc_optimizer *o, const char *path) {
    int rc = check_opt(o, __func__);
    if (rc != MXC_OK)
        return rc;
    if (path == NULL)
        return mxc__error(MXC_EINVAL, "mxc_optimizer_save_states: path is NULL");
    return mxc__in_call(__func__, save_states(o, path));
}

/* Reads the one element of a loaded (1) int64 array or the four of the float64 schedule. */
static int read_host(mxc_ndarray *a, int dtype, int64_t n, void *out, const char *name) {
    mxc_shape shape;
    int rc = mxc_nd_get_shape(a, &shape);
    if (rc != MXC_OK)
        return rc;
    if (mxc_nd_dtype(a) != dtype || shape.ndim != 1 || shape.dims[0] != n)
        return mxc__error(MXC_EINVAL, "entry \"%s\" is not %lld %s", name, (long long)n,
                          mxc_dtype_name(dtype));
    return mxc_nd_sync_copy_to_cpu(a, out, (size_t)n * mxc_dtype_size(dtype));
}

static int load_states(mxc_optimizer *o, const char *path) {
    size_t count = 0;
    mxc_ndarray **arrays = NULL;
    char **names = NULL;
    struct param_state *params = NULL;
    int num_params = 0, nstates;
    const char *const *snames = state_names(&o->cfg, &nstates);
    double sched[4] = {0};
    bool have_sched = false;
    int rc = mxc_nd_load(path, mxc_cpu(), &count, &arrays, &names);
    if (rc != MXC_OK)
        return rc;
    MXC_CHECK(names != NULL || count == 0, MXC_EINVAL, "%s holds unnamed arrays", path);
    /* The highest index first, for one allocation. */
    for (size_t i = 0; i < count; i++) {
        int index = -1;
        if (sscanf(names[i], "%d_", &index) == 1 && index >= num_params && index < (1 << 24))
            num_params = index + 1;
    }
    params = mxc__calloc((size_t)(num_params > 0 ? num_params : 1), sizeof *params);
    MXC_CHECK(params != NULL, MXC_ENOMEM, "out of memory");
    for (size_t i = 0; i < count; i++) {
        const char *name = names[i];
        if (strcmp(name, "__schedule__") == 0) {
            MXC_TRY(read_host(arrays[i], MXC_FLOAT64, 4, sched, name));
            have_sched = true;
            continue;
        }
        int index = -1, len = 0;
        MXC_CHECK(sscanf(name, "%d_%n", &index, &len) == 1 && len > 0 && index >= 0 &&
                      index < num_params,
                  MXC_EINVAL, "%s: unknown entry \"%s\"", path, name);
        struct param_state *s = &params[index];
        const char *what = name + len;
        if (strcmp(what, "count") == 0) {
            int64_t c = 0;
            MXC_TRY(read_host(arrays[i], MXC_INT64, 1, &c, name));
            MXC_CHECK(c >= 0 && c <= INT32_MAX, MXC_EINVAL, "%s: %s is %lld", path, name,
                      (long long)c);
            s->count = (int)c;
            s->used = true;
            continue;
        }
        int k = 0;
        while (k < nstates && strcmp(what, snames[k]) != 0)
            k++;
        MXC_CHECK(k < nstates, MXC_EINVAL, "%s: entry \"%s\" is no state of this optimizer (%s%s)",
                  path, name, o->cfg.kind == MXC_OPT_ADAM ? "adam" : "sgd",
                  o->cfg.kind == MXC_OPT_SGD && o->cfg.momentum > 0 ? " with momentum" : "");
        MXC_CHECK(mxc_nd_dtype(arrays[i]) == MXC_FLOAT32, MXC_EINVAL, "%s: %s is not float32", path,
                  name);
        s->state[k] = arrays[i];
        arrays[i] = NULL;
    }
    MXC_CHECK(have_sched, MXC_EINVAL, "%s: no entry \"__schedule__\"", path);
    for (int i = 0; i < num_params; i++) {
        struct param_state *s = &params[i];
        for (int k = 0; k < nstates; k++)
            MXC_CHECK(!s->used || s->state[k] != NULL, MXC_EINVAL, "%s: no entry \"%d_%s\"", path,
                      i, snames[k]);
        MXC_CHECK(s->used || (s->state[0] == NULL && s->state[1] == NULL), MXC_EINVAL,
                  "%s: no entry \"%d_count\"", path, i);
    }
    /* Everything read: the optimizer takes the new state. */
    for (int i = 0; i < o->num_params; i++)
        for (int k = 0; k < 2; k++)
            mxc_nd_free(o->params[i].state[k]);
    mxc__free(o->params);
    o->params = params;
    o->num_params = num_params;
    params = NULL;
    o->num_update = (int)sched[0];
    o->sched_count = (int)sched[1];
    o->sched_index = (int)sched[2];
    o->sched_lr = (float)sched[3];
fail:
    for (int i = 0; params != NULL && i < num_params; i++)
        for (int k = 0; k < 2; k++)
            mxc_nd_free(params[i].state[k]);
    mxc__free(params);
    mxc_nd_list_free(count, arrays, names);
    return rc;
}

int mxc_optimizer_load_states(mxc_optimizer *o, const char *path) {
    int rc = check_opt(o, __func__);
    if (rc != MXC_OK)
        return rc;
    if (path == NULL)
        return mxc__error(MXC_EINVAL, "mxc_optimizer_load_states: path is NULL");
    return mxc__in_call(__func__, load_states(o, path));
}

/* ---- The store's updater ----------------------------------------------------------- */

static int kvstore_updater(int key, mxc_ndarray *merged, mxc_ndarray *stored, void *user) {
    char name[16];
    snprintf(name, sizeof name, "%d", key);
    return mxc_optimizer_update(user, key, name, stored, merged);
}

int mxc_kvstore_set_optimizer(mxc_kvstore *kv, mxc_optimizer *opt) {
    int rc = check_opt(opt, __func__);
    if (rc != MXC_OK)
        return rc;
    return mxc__in_call(__func__, mxc_kvstore_set_updater(kv, kvstore_updater, opt));
}

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

static int state_for(mxc_optimizer *o, int index, mxc_ndarray *weight, struct param_state **out) {
    if (index >= o->num_params) {
        int n = index + 1 > 2 * o->num_params ? index + 1 : 2 * o->num_params;
        struct param_state *p = mxc__realloc(o->params, sizeof *p * (size_t)n);
        if (p == NULL)
            return mxc__error(MXC_ENOMEM, "mxc_optimizer_update: out of memory");
        memset(p + o->num_params, 0, sizeof *p * (size_t)(n - o->num_params));
        o->params = p;
        o->num_params = n;
    }
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
    *out = s;
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

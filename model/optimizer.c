/*
 * model/optimizer.c — MXNet 1.9.1's optimizers on top of the update operators, the way its
 * Python optimizers drive them: per-parameter update counts, learning-rate and
 * weight-decay multipliers, a learning-rate schedule over the highest update count, the
 * optimizer-level steps around the operators (Adam's and AdamW's bias correction in the
 * rate, LAMB's norms between its two phases), and AdaGrad and AdaDelta in array
 * arithmetic, operation for operation as MXNet writes them in Python.
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

#define MAX_STATES 3

struct param_state {
    bool used;
    int count;                      /* updates of this parameter */
    mxc_ndarray *state[MAX_STATES]; /* the kind's states, named by state_names */
    mxc_ndarray *master;            /* multi_precision: the float32 copy of a float16 weight */
};

/* The name of the master copy among the saved states. */
static const char master_name[] = "weight32";

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
    double sched_lr; /* the schedule's current rate (MXNet's scheduler.base_lr) */
    int sched_count; /* FACTOR: updates the schedule has accounted for */
    int sched_index; /* MULTI_FACTOR: the next step */
};

static mxc__handle_kind opt_kind =
    MXC__HANDLE_KIND(struct mxc_optimizer, "an optimizer", OPT_MAGIC, OPT_DEAD);

static const char *const kind_names[] = {"sgd",      "adam", "nag",    "rmsprop", "adagrad",
                                         "adadelta", "ftrl", "signum", "adamw",   "lamb"};

/* Names of the states of an optimizer of this configuration, and their count. */
static const char *const *state_names(const mxc_optimizer_config *c, int *count) {
    static const char *const mom[] = {"mom"}, *const adam[] = {"mean", "var"};
    static const char *const rms[] = {"n", "g", "delta"}, *const ada[] = {"history"};
    static const char *const delta[] = {"acc_g", "acc_delta"}, *const ftrl[] = {"z", "n"};
    switch (c->kind) {
    case MXC_OPT_ADAM:
    case MXC_OPT_ADAMW:
    case MXC_OPT_LAMB: *count = 2; return adam;
    case MXC_OPT_RMSPROP: *count = c->centered ? 3 : 1; return rms;
    case MXC_OPT_ADAGRAD: *count = 1; return ada;
    case MXC_OPT_ADADELTA: *count = 2; return delta;
    case MXC_OPT_FTRL: *count = 2; return ftrl;
    default: *count = c->momentum > 0 ? 1 : 0; return mom; /* SGD, NAG, Signum */
    }
}

/* `v` when it is not 0, else MXNet's default `def`. */
static float or_default(float v, float def) { return v != 0 ? v : def; }

/* The configuration's checks; MXC_EINVAL naming the values. */
static int check_config(const mxc_optimizer_config *c) {
    const char *fn = "mxc_optimizer_create";
    if (c->kind < MXC_OPT_SGD || c->kind > MXC_OPT_LAMB)
        return mxc__error(MXC_EINVAL, "%s: unknown kind %d", fn, c->kind);
    if (!(c->lr >= 0) || !(c->wd >= 0) || !(c->momentum >= 0 && c->momentum < 1))
        return mxc__error(MXC_EINVAL,
                          "%s: lr %g, wd %g, momentum %g: need lr >= 0, wd >= 0, "
                          "0 <= momentum < 1",
                          fn, (double)c->lr, (double)c->wd, (double)c->momentum);
    const float unit[] = {c->beta1, c->beta2, c->gamma1, c->gamma2, c->rho};
    const char *unit_names[] = {"beta1", "beta2", "gamma1", "gamma2", "rho"};
    for (int i = 0; i < 5; i++)
        if (!(unit[i] >= 0 && unit[i] <= 1))
            return mxc__error(MXC_EINVAL, "%s: %s %g is not in [0, 1]", fn, unit_names[i],
                              (double)unit[i]);
    if (!(c->epsilon >= 0) || !(c->lamda1 >= 0) || !(c->ftrl_beta >= 0) || !(c->pwr >= 0))
        return mxc__error(MXC_EINVAL, "%s: epsilon %g, lamda1 %g, ftrl_beta %g, pwr %g: need >= 0",
                          fn, (double)c->epsilon, (double)c->lamda1, (double)c->ftrl_beta,
                          (double)c->pwr);
    if (c->lr_schedule < MXC_LR_CONSTANT || c->lr_schedule > MXC_LR_POLY)
        return mxc__error(MXC_EINVAL, "%s: unknown lr_schedule %d", fn, c->lr_schedule);
    if (c->lr_schedule == MXC_LR_FACTOR && (c->step < 1 || !(c->factor > 0)))
        return mxc__error(MXC_EINVAL, "%s: a factor schedule needs step >= 1 and factor > 0", fn);
    if (c->lr_schedule == MXC_LR_MULTI_FACTOR &&
        (c->num_steps < 1 || c->num_steps > MXC_LR_MAX_STEPS || !(c->factor > 0)))
        return mxc__error(MXC_EINVAL,
                          "%s: a multi-factor schedule needs 1 to %d steps and factor > 0", fn,
                          MXC_LR_MAX_STEPS);
    for (int i = 1; c->lr_schedule == MXC_LR_MULTI_FACTOR && i < c->num_steps; i++)
        if (c->steps[i] <= c->steps[i - 1])
            return mxc__error(MXC_EINVAL, "%s: steps must increase", fn);
    if (c->warmup_steps < 0 || !(c->warmup_begin_lr >= 0 && c->warmup_begin_lr <= c->lr) ||
        (c->warmup_mode != MXC_WARMUP_LINEAR && c->warmup_mode != MXC_WARMUP_CONSTANT))
        return mxc__error(MXC_EINVAL,
                          "%s: warmup_steps %d, warmup_begin_lr %g, warmup_mode %d: need "
                          "warmup_steps >= 0, 0 <= warmup_begin_lr <= lr (%g), a warmup mode",
                          fn, c->warmup_steps, (double)c->warmup_begin_lr, c->warmup_mode,
                          (double)c->lr);
    if ((c->lr_schedule == MXC_LR_COSINE || c->lr_schedule == MXC_LR_POLY) &&
        !(c->max_update >= 1 && c->max_update > c->warmup_steps))
        return mxc__error(MXC_EINVAL,
                          "%s: a cosine or poly schedule needs max_update >= 1 and > "
                          "warmup_steps (max_update %d, warmup_steps %d)",
                          fn, c->max_update, c->warmup_steps);
    return MXC_OK;
}

int mxc_optimizer_create(const mxc_optimizer_config *cfg, mxc_optimizer **out) {
    if (cfg == NULL || out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_optimizer_create: NULL argument");
    *out = NULL;
    int rc = check_config(cfg);
    if (rc != MXC_OK)
        return rc;
    mxc_optimizer *o = mxc__handle_alloc(&opt_kind);
    if (o == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_optimizer_create: out of memory");
    mxc_optimizer_config *c = &o->cfg;
    *c = *cfg;
    c->rescale_grad = or_default(c->rescale_grad, 1);
    c->beta1 = or_default(c->beta1, 0.9f);
    c->beta2 = or_default(c->beta2, 0.999f);
    c->epsilon = or_default(c->epsilon, c->kind == MXC_OPT_ADAGRAD    ? 1e-7f
                                        : c->kind == MXC_OPT_ADADELTA ? 1e-5f
                                        : c->kind == MXC_OPT_LAMB     ? 1e-6f
                                                                      : 1e-8f);
    c->gamma1 = or_default(c->gamma1, 0.9f);
    c->gamma2 = or_default(c->gamma2, 0.9f);
    c->rho = or_default(c->rho, 0.9f);
    c->ftrl_beta = or_default(c->ftrl_beta, 1);
    c->pwr = or_default(c->pwr, 2);
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

/* The warm-up's rate at update count n < warmup_steps (LRScheduler.get_warmup_lr). */
static double warmup_lr(const mxc_optimizer_config *c, int n) {
    if (c->warmup_mode == MXC_WARMUP_CONSTANT)
        return c->warmup_begin_lr;
    const double increase = ((double)c->lr - c->warmup_begin_lr) * (double)n / c->warmup_steps;
    return c->warmup_begin_lr + increase;
}

/* The schedule's rate at update count num_update, advancing its state as MXNet's
 * schedulers do when the optimizer calls them (they are called with every update count in
 * turn; FACTOR and MULTI_FACTOR decay once per step passed, COSINE and POLY keep their
 * last rate after max_update). */
static double scheduled_lr(mxc_optimizer *o) {
    const mxc_optimizer_config *c = &o->cfg;
    const int n = o->num_update;
    if (n < c->warmup_steps)
        return warmup_lr(c, n);
    const double span = c->max_update - c->warmup_steps, done = n - c->warmup_steps;
    switch (c->lr_schedule) {
    case MXC_LR_FACTOR:
        while (n > o->sched_count + c->step) {
            o->sched_count += c->step;
            o->sched_lr *= c->factor;
            if (o->sched_lr < c->stop_factor_lr)
                o->sched_lr = c->stop_factor_lr;
        }
        break;
    case MXC_LR_MULTI_FACTOR:
        while (o->sched_index < c->num_steps && n > c->steps[o->sched_index]) {
            o->sched_index++;
            o->sched_lr *= c->factor;
        }
        break;
    case MXC_LR_COSINE:
        if (n <= c->max_update)
            o->sched_lr = c->final_lr + ((double)c->lr - c->final_lr) *
                                            (1 + cos(3.14159265358979323846 * done / span)) / 2;
        break;
    case MXC_LR_POLY:
        if (n <= c->max_update)
            o->sched_lr =
                c->final_lr + ((double)c->lr - c->final_lr) * pow(1 - done / span, c->pwr);
        break;
    default: break;
    }
    return o->sched_lr;
}

float mxc_optimizer_current_lr(const mxc_optimizer *o) {
    if (check_opt(o, __func__) != MXC_OK)
        return NAN;
    const mxc_optimizer_config *c = &o->cfg;
    return (float)(o->num_update < c->warmup_steps ? warmup_lr(c, o->num_update) : o->sched_lr);
}

static int grow_params(mxc_optimizer *o, int index);

/* x cast to `dtype` into *out (a new array when *out is NULL, else written). */
static int cast(mxc_ndarray *x, int dtype, mxc_ndarray **out) {
    const char *key[] = {"dtype"}, *val[] = {mxc_dtype_name(dtype)};
    return mxc_imperative_invoke("Cast", 1, key, val, 1, &x, 1, out, 0);
}

static int state_for(mxc_optimizer *o, int index, mxc_ndarray *weight, struct param_state **out) {
    if (grow_params(o, index) != MXC_OK)
        return mxc__error(MXC_ENOMEM, "mxc_optimizer_update: out of memory");
    struct param_state *s = &o->params[index];
    if (!s->used) {
        int nstates;
        state_names(&o->cfg, &nstates);
        mxc_shape shape;
        mxc_context ctx;
        int rc = mxc_nd_get_shape(weight, &shape);
        if (rc == MXC_OK)
            rc = mxc_nd_get_context(weight, &ctx);
        for (int i = 0; i < nstates && rc == MXC_OK; i++)
            rc = mxc_nd_zeros(&shape, MXC_FLOAT32, ctx, &s->state[i]);
        if (rc != MXC_OK) {
            for (int i = 0; i < MAX_STATES; i++) {
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
    mxc_ndarray **held[MAX_STATES + 1] = {&s->master};
    for (int i = 0; i < MAX_STATES; i++)
        held[i + 1] = &s->state[i];
    for (int i = 0; i < MAX_STATES + 1 && rc == MXC_OK; i++) {
        mxc_context sctx;
        mxc_ndarray **a = held[i];
        if (*a == NULL || mxc_nd_get_context(*a, &sctx) != MXC_OK ||
            (sctx.dev_type == wctx.dev_type && sctx.dev_id == wctx.dev_id))
            continue;
        mxc_shape shape;
        mxc_ndarray *moved = NULL;
        rc = mxc_nd_get_shape(*a, &shape);
        if (rc == MXC_OK)
            rc = mxc_nd_create(&shape, MXC_FLOAT32, wctx, 1, &moved);
        if (rc == MXC_OK)
            rc = mxc_nd_copy_to(*a, moved);
        if (rc != MXC_OK) {
            mxc_nd_free(moved);
            return rc;
        }
        mxc_nd_free(*a);
        *a = moved;
    }
    /* multi_precision: the master copy of a float16 weight, made from it at its first
     * update (or after loading states saved without one) */
    if (rc == MXC_OK && o->cfg.multi_precision && s->master == NULL &&
        mxc_nd_dtype(weight) == MXC_FLOAT16)
        rc = cast(weight, MXC_FLOAT32, &s->master);
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

/* ---- One step ------------------------------------------------------------------- */

/* An operator's parameters as strings, built one key at a time (8 at the most). */
struct op_args {
    int n;
    const char *keys[12];
    const char *vals[12];
    char buf[12][32];
};

static void arg(struct op_args *a, const char *key, double v) {
    snprintf(a->buf[a->n], sizeof a->buf[a->n], "%.9g", v);
    a->keys[a->n] = key;
    a->vals[a->n] = a->buf[a->n];
    a->n++;
}

/* Runs operator `op` on `in` with output `out` (the weight: in place). */
static int run(const char *op, const struct op_args *a, int num_in, mxc_ndarray **in,
               mxc_ndarray *out) {
    mxc_ndarray *outs[1] = {out};
    return mxc_imperative_invoke(op, a->n, a->keys, a->vals, num_in, in, 1, outs, 1);
}

/* What one step of one parameter needs besides the optimizer. */
struct step {
    mxc_ndarray *weight, *grad, **state;
    mxc_ndarray *master; /* multi_precision: the float32 copy of a float16 weight, or NULL */
    double lr;           /* the schedule's rate times the parameter's lr_mult */
    float wd;            /* wd times the parameter's wd_mult */
    int count;           /* this parameter's updates, this one included */
    bool clip;           /* clip_gradient > 0: MXNet passes it only then */
};

/* The temporaries of the array-arithmetic steps: freed at the end (the engine keeps them
 * until the operations pushed on them have run). AdaDelta, the most, takes 14. */
struct temps {
    mxc_ndarray *t[16];
    int n;
};

static mxc_ndarray **temp(struct temps *t) { return &t->t[t->n++]; }

static void temps_free(struct temps *t) {
    for (int i = 0; i < t->n; i++)
        mxc_nd_free(t->t[i]);
}

/* g = clip(grad * rescale_grad, clip_gradient), MXNet's AdaGrad and AdaDelta preamble. */
static int scaled_grad(const mxc_optimizer_config *c, const struct step *st, struct temps *t,
                       mxc_ndarray **g) {
    int rc = mxc_nd_mul_scalar(st->grad, c->rescale_grad, g);
    if (rc != MXC_OK || !st->clip)
        return rc;
    struct op_args a = {0};
    arg(&a, "a_min", -(double)c->clip_gradient);
    arg(&a, "a_max", c->clip_gradient);
    mxc_ndarray **clipped = temp(t);
    rc = mxc_imperative_invoke("clip", a.n, a.keys, a.vals, 1, g, 1, clipped, 0);
    if (rc == MXC_OK) {
        mxc_ndarray *x = *g;
        *g = *clipped;
        *clipped = x; /* freed with the temporaries */
    }
    return rc;
}

/* AdaGrad (MXNet's Python, operation for operation):
 *   g = clip(grad * rescale_grad); history += square(g);
 *   weight += (g / sqrt(history + eps) + weight * wd) * -lr */
static int adagrad_step(const mxc_optimizer_config *c, const struct step *st) {
    struct temps t = {0};
    mxc_ndarray **g = temp(&t), **sq = temp(&t), **h = temp(&t), **root = temp(&t);
    mxc_ndarray **div = temp(&t), **dec = temp(&t), **sum = temp(&t), **delta = temp(&t);
    mxc_ndarray *history = st->state[0], *w = st->weight;
    int rc = scaled_grad(c, st, &t, g);
    if (rc == MXC_OK)
        rc = mxc_imperative_invoke("square", 0, NULL, NULL, 1, g, 1, sq, 0);
    if (rc == MXC_OK)
        rc = mxc_nd_add(history, *sq, &history);
    if (rc == MXC_OK)
        rc = mxc_nd_add_scalar(history, c->epsilon, h);
    if (rc == MXC_OK)
        rc = mxc_imperative_invoke("sqrt", 0, NULL, NULL, 1, h, 1, root, 0);
    if (rc == MXC_OK)
        rc = mxc_nd_div(*g, *root, div);
    if (rc == MXC_OK)
        rc = mxc_nd_mul_scalar(w, st->wd, dec);
    if (rc == MXC_OK)
        rc = mxc_nd_add(*div, *dec, sum);
    if (rc == MXC_OK)
        rc = mxc_nd_mul_scalar(*sum, (float)-st->lr, delta);
    if (rc == MXC_OK)
        rc = mxc_nd_add(w, *delta, &w);
    temps_free(&t);
    return rc;
}

/* acc = acc * rho + (1 - rho) * x * x, AdaDelta's two accumulators. */
static int decay_square(mxc_ndarray *acc, mxc_ndarray *x, float rho, struct temps *t) {
    mxc_ndarray **part = temp(t), **sq = temp(t);
    int rc = mxc_nd_mul_scalar(acc, rho, &acc);
    if (rc == MXC_OK)
        rc = mxc_nd_mul_scalar(x, (float)(1.0 - rho), part);
    if (rc == MXC_OK)
        rc = mxc_nd_mul(*part, x, sq);
    if (rc == MXC_OK)
        rc = mxc_nd_add(acc, *sq, &acc);
    return rc;
}

/* AdaDelta (MXNet's Python, operation for operation; no learning rate):
 *   g = clip(grad * rescale_grad); acc_g = rho acc_g + (1 - rho) g g;
 *   delta = sqrt(acc_delta + eps) / sqrt(acc_g + eps) * g;
 *   acc_delta = rho acc_delta + (1 - rho) delta delta; weight -= delta + wd * weight */
static int adadelta_step(const mxc_optimizer_config *c, const struct step *st) {
    struct temps t = {0};
    mxc_ndarray **g = temp(&t), **a = temp(&t), **b = temp(&t), **ra = temp(&t);
    mxc_ndarray **rb = temp(&t), **q = temp(&t), **delta = temp(&t), **dec = temp(&t);
    mxc_ndarray **sum = temp(&t);
    mxc_ndarray *acc_g = st->state[0], *acc_delta = st->state[1], *w = st->weight;
    int rc = scaled_grad(c, st, &t, g);
    if (rc == MXC_OK)
        rc = decay_square(acc_g, *g, c->rho, &t);
    if (rc == MXC_OK)
        rc = mxc_nd_add_scalar(acc_delta, c->epsilon, a);
    if (rc == MXC_OK)
        rc = mxc_imperative_invoke("sqrt", 0, NULL, NULL, 1, a, 1, ra, 0);
    if (rc == MXC_OK)
        rc = mxc_nd_add_scalar(acc_g, c->epsilon, b);
    if (rc == MXC_OK)
        rc = mxc_imperative_invoke("sqrt", 0, NULL, NULL, 1, b, 1, rb, 0);
    if (rc == MXC_OK)
        rc = mxc_nd_div(*ra, *rb, q);
    if (rc == MXC_OK)
        rc = mxc_nd_mul(*q, *g, delta);
    if (rc == MXC_OK)
        rc = decay_square(acc_delta, *delta, c->rho, &t);
    if (rc == MXC_OK)
        rc = mxc_nd_mul_scalar(w, st->wd, dec);
    if (rc == MXC_OK)
        rc = mxc_nd_add(*delta, *dec, sum);
    if (rc == MXC_OK)
        rc = mxc_nd_sub(w, *sum, &w);
    temps_free(&t);
    return rc;
}

/* The L2 norm of x as a (1) array: sqrt(sum(square(x))). */
static int norm(mxc_ndarray *x, struct temps *t, mxc_ndarray **out) {
    mxc_ndarray **sq = temp(t), **sum = temp(t);
    int rc = mxc_imperative_invoke("square", 0, NULL, NULL, 1, &x, 1, sq, 0);
    if (rc == MXC_OK)
        rc = mxc_imperative_invoke("sum", 0, NULL, NULL, 1, sq, 1, sum, 0);
    if (rc == MXC_OK)
        rc = mxc_imperative_invoke("sqrt", 0, NULL, NULL, 1, sum, 1, out, 0);
    return rc;
}

/* LAMB (MXNet's LAMB.update, one parameter): g = lamb_update_phase1(...);
 * r1 = |weight|, r2 = |g|; weight = lamb_update_phase2(weight, g, r1, r2, lr). */
static int lamb_step(const mxc_optimizer_config *c, const struct step *st) {
    struct temps t = {0};
    mxc_ndarray **g = temp(&t), **r1 = temp(&t), **r2 = temp(&t);
    struct op_args a = {0};
    arg(&a, "beta1", c->beta1);
    arg(&a, "beta2", c->beta2);
    arg(&a, "epsilon", c->epsilon);
    arg(&a, "bias_correction", !c->no_bias_correction);
    arg(&a, "rescale_grad", c->rescale_grad);
    arg(&a, "t", st->count);
    arg(&a, "wd", st->wd);
    if (st->clip)
        arg(&a, "clip_gradient", c->clip_gradient);
    mxc_ndarray *in[4] = {st->weight, st->grad, st->state[0], st->state[1]};
    int rc = mxc_imperative_invoke("lamb_update_phase1", a.n, a.keys, a.vals, 4, in, 1, g, 0);
    if (rc == MXC_OK)
        rc = norm(st->weight, &t, r1);
    if (rc == MXC_OK)
        rc = norm(*g, &t, r2);
    if (rc == MXC_OK) {
        struct op_args b = {0};
        arg(&b, "lr", st->lr);
        if (c->lower_bound > 0)
            arg(&b, "lower_bound", c->lower_bound);
        if (c->upper_bound > 0)
            arg(&b, "upper_bound", c->upper_bound);
        mxc_ndarray *in2[4] = {st->weight, *g, *r1, *r2};
        rc = run("lamb_update_phase2", &b, 4, in2, st->weight);
    }
    temps_free(&t);
    return rc;
}

/* AdamW as GluonNLP's BERTAdam drives _adamw_update: lr 1, eta the rate with Adam's bias
 * correction, rescale_grad a (1) array on the weight's device. */
static int adamw_step(const mxc_optimizer_config *c, const struct step *st, struct op_args *a) {
    const double t = st->count;
    arg(a, "lr", 1);
    arg(a, "eta", st->lr * sqrt(1 - pow(c->beta2, t)) / (1 - pow(c->beta1, t)));
    arg(a, "beta1", c->beta1);
    arg(a, "beta2", c->beta2);
    arg(a, "epsilon", c->epsilon);
    mxc_context ctx;
    mxc_ndarray *scale = NULL;
    const mxc_shape one = {.ndim = 1, .dims = {1}};
    int rc = mxc_nd_get_context(st->weight, &ctx);
    if (rc == MXC_OK)
        rc = mxc_nd_full(&one, MXC_FLOAT32, ctx, c->rescale_grad, &scale);
    if (rc == MXC_OK) {
        mxc_ndarray *in[5] = {st->weight, st->grad, scale, st->state[0], st->state[1]};
        rc = run("_adamw_update", a, 5, in, st->weight);
    }
    mxc_nd_free(scale);
    return rc;
}

/* One step of parameter `st` by the optimizer's kind, as MXNet's Python optimizer of that
 * kind calls its operators. */
static int step(const mxc_optimizer_config *c, const struct step *st) {
    struct op_args a = {0};
    const bool mom = c->momentum > 0;
    mxc_ndarray *in[5] = {st->weight, st->grad, st->state[0], st->state[1], st->state[2]};
    if (c->kind == MXC_OPT_ADAGRAD)
        return adagrad_step(c, st);
    if (c->kind == MXC_OPT_ADADELTA)
        return adadelta_step(c, st);
    if (c->kind == MXC_OPT_LAMB)
        return lamb_step(c, st);
    arg(&a, "wd", st->wd);
    if (st->clip)
        arg(&a, "clip_gradient", c->clip_gradient);
    if (c->kind == MXC_OPT_ADAMW) /* rescale_grad is an input */
        return adamw_step(c, st, &a);
    arg(&a, "rescale_grad", c->rescale_grad);
    if (c->kind == MXC_OPT_ADAM) /* bias correction, as MXNet's Adam.update */
        arg(&a, "lr", st->lr * sqrt(1 - pow(c->beta2, st->count)) / (1 - pow(c->beta1, st->count)));
    else
        arg(&a, "lr", st->lr);
    switch (c->kind) {
    case MXC_OPT_ADAM:
        arg(&a, "beta1", c->beta1);
        arg(&a, "beta2", c->beta2);
        arg(&a, "epsilon", c->epsilon);
        return run("adam_update", &a, 4, in, st->weight);
    case MXC_OPT_RMSPROP:
        arg(&a, "gamma1", c->gamma1);
        arg(&a, "epsilon", c->epsilon);
        if (c->centered)
            arg(&a, "gamma2", c->gamma2);
        if (c->clip_weights > 0)
            arg(&a, "clip_weights", c->clip_weights);
        return c->centered ? run("rmspropalex_update", &a, 5, in, st->weight)
                           : run("rmsprop_update", &a, 3, in, st->weight);
    case MXC_OPT_FTRL:
        arg(&a, "lamda1", c->lamda1);
        arg(&a, "beta", c->ftrl_beta);
        return run("ftrl_update", &a, 4, in, st->weight);
    case MXC_OPT_SIGNUM:
        if (!mom)
            return run("signsgd_update", &a, 2, in, st->weight);
        arg(&a, "momentum", c->momentum);
        if (c->wd_lh != 0)
            arg(&a, "wd_lh", c->wd_lh);
        return run("signum_update", &a, 3, in, st->weight);
    default:                      /* SGD, NAG */
        if (st->master != NULL) { /* SGD's own multi-precision operators */
            mxc_ndarray *mp[4] = {st->weight, st->grad};
            int n = 2;
            if (mom) {
                mp[n++] = st->state[0];
                arg(&a, "momentum", c->momentum);
            }
            mp[n++] = st->master;
            return run(mom ? "mp_sgd_mom_update" : "mp_sgd_update", &a, n, mp, st->weight);
        }
        if (!mom)
            return run("sgd_update", &a, 2, in, st->weight);
        arg(&a, "momentum", c->momentum);
        return run(c->kind == MXC_OPT_NAG ? "nag_mom_update" : "sgd_mom_update", &a, 3, in,
                   st->weight);
    }
}

/* A multi-precision step as MXNet's Optimizer.update_multi_precision: SGD through its
 * operators; any other kind steps the master copy with the gradient cast to float32, then
 * the master is cast into the weight. */
static int step_multi_precision(const mxc_optimizer_config *c, const struct step *st) {
    if (c->kind == MXC_OPT_SGD)
        return step(c, st);
    mxc_ndarray *grad32 = NULL, *weight = st->weight;
    struct step on_master = *st;
    int rc = cast(st->grad, MXC_FLOAT32, &grad32);
    on_master.weight = st->master;
    on_master.grad = grad32;
    on_master.master = NULL;
    if (rc == MXC_OK)
        rc = step(c, &on_master);
    if (rc == MXC_OK)
        rc = cast(st->master, mxc_nd_dtype(weight), &weight);
    mxc_nd_free(grad32);
    return rc;
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
    const struct step st = {.weight = weight,
                            .grad = grad,
                            .state = s->state,
                            .lr = scheduled_lr(o) * lr_mult,
                            .wd = c->wd * wd_mult,
                            .count = s->count,
                            .clip = c->clip_gradient > 0,
                            .master = s->master};
    return mxc__in_call(__func__, st.master ? step_multi_precision(c, &st) : step(c, &st));
}

/* Frees the arrays of `n` parameters' states (not the table). */
static void free_states(struct param_state *params, int n) {
    for (int i = 0; params != NULL && i < n; i++) {
        for (int k = 0; k < MAX_STATES; k++)
            mxc_nd_free(params[i].state[k]);
        mxc_nd_free(params[i].master);
    }
}

void mxc_optimizer_free(mxc_optimizer *o) {
    if (!mxc__handle_check_free(&opt_kind, o, __func__, "optimizer"))
        return;
    free_states(o->params, o->num_params);
    for (int i = 0; i < o->num_mults; i++)
        mxc__free(o->mults[i].name);
    mxc__free(o->params);
    mxc__free(o->mults);
    mxc__handle_free(&opt_kind, o);
}

/* ---- Checkpoints of the state ------------------------------------------------------ */

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
    size_t cap = 1 + (size_t)o->num_params * (size_t)(2 + nstates), n = 0;
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
        if (s->master != NULL) {
            arrays[n] = s->master;
            snprintf(name, sizeof name, "%d_%s", i, master_name);
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
        if (strcmp(what, master_name) == 0) {
            MXC_CHECK(mxc_nd_dtype(arrays[i]) == MXC_FLOAT32 && s->master == NULL, MXC_EINVAL,
                      "%s: %s is not float32 or repeated", path, name);
            s->master = arrays[i];
            arrays[i] = NULL;
            continue;
        }
        int k = 0;
        while (k < nstates && strcmp(what, snames[k]) != 0)
            k++;
        MXC_CHECK(k<nstates, MXC_EINVAL,
                      "%s: entry \"%s\" is no state of this optimizer (%s, states:%s%s%s%s%s%s)",
                      path, name, kind_names[o->cfg.kind], nstates> 0
                      ? " "
                      : " none",
                  nstates > 0 ? snames[0] : "", nstates > 1 ? ", " : "",
                  nstates > 1 ? snames[1] : "", nstates > 2 ? ", " : "",
                  nstates > 2 ? snames[2] : "");
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
        MXC_CHECK(s->used || (s->state[0] == NULL && s->state[1] == NULL && s->state[2] == NULL),
                  MXC_EINVAL, "%s: no entry \"%d_count\"", path, i);
    }
    /* Everything read: the optimizer takes the new state. */
    free_states(o->params, o->num_params);
    mxc__free(o->params);
    o->params = params;
    o->num_params = num_params;
    params = NULL;
    o->num_update = (int)sched[0];
    o->sched_count = (int)sched[1];
    o->sched_index = (int)sched[2];
    o->sched_lr = sched[3];
fail:
    free_states(params, num_params);
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

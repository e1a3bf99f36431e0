/*
 * tests/check_optimizer.c — the model optimizers (mxc_optimizer_*): every kind against
 * MXNet 1.9.1's Python optimizer of that kind over several steps of two parameters, one
 * with lr and wd multipliers (tests/data/optimizers, made by scripts/gen_optimizer_refs.py);
 * each kind's states saved mid-way and loaded into a fresh optimizer, which continues bit
 * for bit as the uninterrupted one; the learning-rate schedules (factor, multi-factor,
 * cosine, poly, warm-up) step by step against MXNet's schedulers; the multipliers by hand;
 * the configuration checks; and `mxc train`'s --optimizer and schedule options.
 */
#include "mxc/model.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "tests/util/op_ref.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STEPS    5 /* as scripts/gen_optimizer_refs.py */
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define RTOL     1e-6
#define ATOL     1e-7

/* ---- Cases (the arguments of scripts/gen_optimizer_refs.py's CASES) ---------------- */

struct opt_case {
    const char *file; /* tests/data/optimizers/<file>.params */
    mxc_optimizer_config cfg;
};

/* MXNet's wd=0.01, rescale_grad=0.5, clip_gradient=1.0 */
#define COMMON .wd = 0.01f, .rescale_grad = 0.5f, .clip_gradient = 1.0f

static const struct opt_case cases[] = {
    {"nag", {.kind = MXC_OPT_NAG, .lr = 0.1f, .momentum = 0.9f, COMMON}},
    {"nag_nomomentum", {.kind = MXC_OPT_NAG, .lr = 0.1f, .wd = 0.01f}},
    {"rmsprop", {.kind = MXC_OPT_RMSPROP, .lr = 0.01f, .gamma1 = 0.8f, COMMON}},
    {"rmsprop_centered",
     {.kind = MXC_OPT_RMSPROP,
      .lr = 0.01f,
      .gamma1 = 0.8f,
      .gamma2 = 0.7f,
      .centered = 1,
      .clip_weights = 0.9f,
      COMMON}},
    {"adagrad", {.kind = MXC_OPT_ADAGRAD, .lr = 0.1f, COMMON}},
    {"adagrad_noclip", {.kind = MXC_OPT_ADAGRAD, .lr = 0.1f, .epsilon = 1e-5f, .wd = 0.02f}},
    {"adadelta", {.kind = MXC_OPT_ADADELTA, .lr = 0.01f, .rho = 0.9f, .epsilon = 1e-5f, COMMON}},
    {"adadelta_noclip", {.kind = MXC_OPT_ADADELTA, .lr = 0.01f, .rho = 0.8f, .epsilon = 1e-4f}},
    {"ftrl", {.kind = MXC_OPT_FTRL, .lr = 0.1f, .lamda1 = 0.01f, .ftrl_beta = 1, COMMON}},
    {"signum", {.kind = MXC_OPT_SIGNUM, .lr = 0.01f, .momentum = 0.9f, .wd_lh = 0.01f, COMMON}},
    {"signsgd", {.kind = MXC_OPT_SIGNUM, .lr = 0.01f, .wd = 0.01f}},
    {"adamw", {.kind = MXC_OPT_ADAMW, .lr = 0.01f, COMMON}},
    {"lamb", {.kind = MXC_OPT_LAMB, .lr = 0.01f, .lower_bound = 0.5f, .upper_bound = 2.0f, COMMON}},
    {"lamb_nobias", {.kind = MXC_OPT_LAMB, .lr = 0.01f, .no_bias_correction = 1, .wd = 0.01f}},
};

#define NUM_CASES COUNT(cases)

static const char *const param_names[2] = {"p0", "p1"};

/* Asserts that `rc` is `code` with a message holding `needle`. */
static void expect_err(int rc, int code, const char *needle, const char *what) {
    ck_assert_msg(rc == code, "%s = %s (%s), expected %s", what, mxc_err_name(rc), mxc_last_error(),
                  mxc_err_name(code));
    ck_assert_msg(strstr(mxc_last_error(), needle), "%s: message '%s' lacks '%s'", what,
                  mxc_last_error(), needle);
}

#define CK_ERR_MSG(code, call, needle) expect_err((call), (code), (needle), #call)

static struct mxct_tensor ref(const struct opt_case *c, const char *fmt, int p, int k) {
    char file[256], name[32];
    snprintf(file, sizeof file, "optimizers/%s.params", c->file);
    snprintf(name, sizeof name, fmt, p, k);
    return mxct_ref_load(file, name);
}

/* A new optimizer of case c; parameter "p1" gets lr_mult 0.5 and wd_mult 2 as in MXNet. */
static mxc_optimizer *make(const mxc_optimizer_config *cfg) {
    mxc_optimizer *o = NULL;
    int rc = mxc_optimizer_create(cfg, &o);
    ck_assert_msg(rc == MXC_OK, "%s", mxc_last_error());
    CK_OK(mxc_optimizer_set_mult(o, "p1", 0.5f, 2.0f));
    return o;
}

/* The CPU copy of array a. */
static struct mxct_tensor host(const mxc_ndarray *a) {
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(a, &s));
    struct mxct_tensor t = mxct_tensor_from(s, NULL);
    CK_OK(mxc_nd_sync_copy_to_cpu(a, t.data, (size_t)mxc_shape_size(&s) * sizeof(float)));
    return t;
}

/* Steps [from, to) of case c on `w` with optimizer o (the gradients of the case). */
static void run_steps(const struct opt_case *c, mxc_optimizer *o, mxc_ndarray **w, int from, int to,
                      bool compare) {
    for (int k = from; k < to; k++)
        for (int p = 0; p < 2; p++) {
            struct mxct_tensor g = ref(c, "g%d_%d", p, k);
            mxc_ndarray *grad = mxct_array_of(&g);
            int rc = mxc_optimizer_update(o, p, param_names[p], w[p], grad);
            ck_assert_msg(rc == MXC_OK, "%s step %d: %s", c->file, k, mxc_last_error());
            mxc_nd_free(grad);
            mxct_tensors_free(&g, 1);
            if (!compare)
                continue;
            struct mxct_tensor got = host(w[p]), want = ref(c, "w%d_%d", p, k);
            char what[96];
            snprintf(what, sizeof what, "%s: parameter %d after step %d vs MXNet", c->file, p, k);
            mxct_expect_close(&got, want.data, RTOL, ATOL, what);
            mxct_tensors_free(&got, 1);
            mxct_tensors_free(&want, 1);
        }
}

static void load_weights(const struct opt_case *c, mxc_ndarray **w) {
    for (int p = 0; p < 2; p++) {
        struct mxct_tensor t = ref(c, "w%d", p, 0);
        w[p] = mxct_array_of(&t);
        mxct_tensors_free(&t, 1);
    }
}

/* Every step of every parameter against MXNet's optimizer. */
START_TEST(test_against_mxnet) {
    const struct opt_case *c = &cases[_i];
    mxc_ndarray *w[2];
    load_weights(c, w);
    mxc_optimizer *o = make(&c->cfg);
    run_steps(c, o, w, 0, STEPS, true);
    mxc_optimizer_free(o);
    mxc_nd_free(w[0]);
    mxc_nd_free(w[1]);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* Saved after two steps, loaded into a fresh optimizer, continued: the weights equal the
 * uninterrupted run's bit for bit (a factor schedule rides along, its state saved too). */
START_TEST(test_save_load_resume) {
    const struct opt_case *c = &cases[_i];
    mxc_optimizer_config cfg = c->cfg;
    cfg.lr_schedule = MXC_LR_FACTOR;
    cfg.step = 1;
    cfg.factor = 0.9f;
    mxc_ndarray *a[2], *b[2];
    load_weights(c, a);
    load_weights(c, b);
    mxc_optimizer *whole = make(&cfg), *first = make(&cfg);
    run_steps(c, whole, a, 0, STEPS, false);
    run_steps(c, first, b, 0, 2, false);
    char path[64];
    snprintf(path, sizeof path, "check_optimizer_%s.states", c->file);
    CK_OK(mxc_optimizer_save_states(first, path));
    mxc_optimizer_free(first);
    mxc_optimizer *second = make(&cfg);
    CK_OK(mxc_optimizer_load_states(second, path));
    /* two updates, one factor step passed */
    ck_assert_float_eq_tol(mxc_optimizer_current_lr(second), 0.9f * cfg.lr, 1e-7f * cfg.lr);
    remove(path);
    run_steps(c, second, b, 2, STEPS, false);
    for (int p = 0; p < 2; p++) {
        struct mxct_tensor x = host(a[p]), y = host(b[p]);
        ck_assert_msg(memcmp(x.data, y.data, (size_t)mxc_shape_size(&x.shape) * 4) == 0,
                      "%s: parameter %d differs after a save and load", c->file, p);
        mxct_tensors_free(&x, 1);
        mxct_tensors_free(&y, 1);
    }
    mxc_optimizer_free(whole);
    mxc_optimizer_free(second);
    for (int p = 0; p < 2; p++) {
        mxc_nd_free(a[p]);
        mxc_nd_free(b[p]);
    }
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* multi_precision on float16 weights (scripts/gen_optimizer_refs.py's MP_CASES). */
static const struct opt_case mp_cases[] = {
    {"mp_sgd", {.kind = MXC_OPT_SGD, .lr = 0.1f, .multi_precision = 1, COMMON}},
    {"mp_sgd_mom",
     {.kind = MXC_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .multi_precision = 1, COMMON}},
    {"mp_adam", {.kind = MXC_OPT_ADAM, .lr = 0.01f, .multi_precision = 1, COMMON}},
};

/* The float32 values of array a (any float dtype), cast on the CPU. */
static struct mxct_tensor host_f32(mxc_ndarray *a) {
    mxc_ndarray *f = NULL;
    const char *key[] = {"dtype"}, *val[] = {"float32"};
    CK_OK(mxc_imperative_invoke("Cast", 1, key, val, 1, &a, 1, &f, 0));
    struct mxct_tensor t = host(f);
    mxc_nd_free(f);
    return t;
}

/* Every step against MXNet's update_multi_precision: the float16 weight within one
 * half-precision step (the float32 master rounds to it), and the master copy (saved as
 * "<i>_weight32") after the last step within float32 rounding; then the states load and
 * the update continues. */
START_TEST(test_multi_precision) {
    const struct opt_case *c = &mp_cases[_i];
    char file[64];
    snprintf(file, sizeof file, "optimizers/%s.params", c->file);
    struct mxct_refs r = mxct_refs_load(file);
    mxc_ndarray *w[2];
    char name[32];
    for (int p = 0; p < 2; p++) {
        mxc_ndarray *w0 = mxct_refs_get(&r, p ? "w1" : "w0");
        ck_assert_int_eq(mxc_nd_dtype(w0), MXC_FLOAT16);
        mxc_shape s;
        CK_OK(mxc_nd_get_shape(w0, &s));
        CK_OK(mxc_nd_create(&s, MXC_FLOAT16, mxc_cpu(), 0, &w[p]));
        CK_OK(mxc_nd_copy_to(w0, w[p]));
    }
    mxc_optimizer *o = make(&c->cfg);
    for (int k = 0; k < STEPS; k++)
        for (int p = 0; p < 2; p++) {
            snprintf(name, sizeof name, "g%d_%d", p, k);
            int rc = mxc_optimizer_update(o, p, param_names[p], w[p], mxct_refs_get(&r, name));
            ck_assert_msg(rc == MXC_OK, "%s step %d: %s", c->file, k, mxc_last_error());
            ck_assert_int_eq(mxc_nd_dtype(w[p]), MXC_FLOAT16);
            snprintf(name, sizeof name, "w%d_%d", p, k);
            struct mxct_tensor got = host_f32(w[p]), want = host_f32(mxct_refs_get(&r, name));
            char what[96];
            snprintf(what, sizeof what, "%s: float16 parameter %d after step %d", c->file, p, k);
            mxct_expect_close(&got, want.data, 1e-3, 1e-3, what); /* 2^-10: one half step */
            mxct_tensors_free(&got, 1);
            mxct_tensors_free(&want, 1);
        }
    const char *path = "check_optimizer_mp.states";
    CK_OK(mxc_optimizer_save_states(o, path));
    struct mxct_refs saved = {0};
    CK_OK(mxc_nd_load(path, mxc_cpu(), &saved.n, &saved.a, &saved.names));
    for (int p = 0; p < 2; p++) {
        snprintf(name, sizeof name, "%d_weight32", p);
        struct mxct_tensor got = host(mxct_refs_get(&saved, name));
        snprintf(name, sizeof name, "m%d", p);
        struct mxct_tensor want = host(mxct_refs_get(&r, name));
        mxct_expect_close(&got, want.data, RTOL, ATOL, c->file);
        mxct_tensors_free(&got, 1);
        mxct_tensors_free(&want, 1);
    }
    mxct_refs_free(&saved);
    /* a fresh optimizer from the states takes the same next step as this one */
    mxc_optimizer *second = make(&c->cfg);
    CK_OK(mxc_optimizer_load_states(second, path));
    remove(path);
    mxc_ndarray *again = NULL;
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(w[0], &s));
    CK_OK(mxc_nd_create(&s, MXC_FLOAT16, mxc_cpu(), 0, &again));
    CK_OK(mxc_nd_copy_to(w[0], again));
    mxc_ndarray *g = mxct_refs_get(&r, "g0_0");
    CK_OK(mxc_optimizer_update(o, 0, "p0", w[0], g));
    CK_OK(mxc_optimizer_update(second, 0, "p0", again, g));
    struct mxct_tensor x = host_f32(w[0]), y = host_f32(again);
    ck_assert_msg(memcmp(x.data, y.data, (size_t)mxc_shape_size(&x.shape) * 4) == 0,
                  "%s: the step after loading the states differs", c->file);
    mxct_tensors_free(&x, 1);
    mxct_tensors_free(&y, 1);
    mxc_nd_free(again);
    mxc_optimizer_free(second);
    mxc_optimizer_free(o);
    mxc_nd_free(w[0]);
    mxc_nd_free(w[1]);
    mxct_refs_free(&r);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* States of another configuration are refused, naming the entry; the optimizer keeps its
 * own. */
START_TEST(test_load_other_kind) {
    const struct opt_case *c = &cases[3]; /* rmsprop_centered: n, g, delta */
    mxc_ndarray *w[2];
    load_weights(c, w);
    mxc_optimizer *centered = make(&c->cfg);
    run_steps(c, centered, w, 0, 1, false);
    const char *path = "check_optimizer_other.states";
    CK_OK(mxc_optimizer_save_states(centered, path));
    mxc_optimizer_config plain = c->cfg;
    plain.centered = 0;
    mxc_optimizer *o = make(&plain);
    CK_ERR_MSG(MXC_EINVAL, mxc_optimizer_load_states(o, path), "is no state");
    CK_ERR_MSG(MXC_EINVAL, mxc_optimizer_load_states(o, path), "rmsprop, states: n");
    mxc_optimizer_config ftrl = {.kind = MXC_OPT_FTRL, .lr = 0.1f};
    mxc_optimizer *f = make(&ftrl);
    CK_ERR_MSG(MXC_EINVAL, mxc_optimizer_load_states(f, path), "ftrl, states: z, n");
    remove(path);
    mxc_optimizer_free(f);
    mxc_optimizer_free(o);
    mxc_optimizer_free(centered);
    mxc_nd_free(w[0]);
    mxc_nd_free(w[1]);
    CK_OK(mxc_nd_wait_all());
}
END_TEST

/* ---- Schedules (scripts/gen_optimizer_refs.py's SCHEDULES) -------------------------- */

struct sched_case {
    const char *name;
    mxc_optimizer_config cfg;
};

static const struct sched_case sched_cases[] = {
    {"factor",
     {.lr = 1, .lr_schedule = MXC_LR_FACTOR, .step = 5, .factor = 0.5f, .stop_factor_lr = 0.02f}},
    {"multifactor",
     {.lr = 1,
      .lr_schedule = MXC_LR_MULTI_FACTOR,
      .num_steps = 4,
      .steps = {3, 10, 11, 25},
      .factor = 0.3f}},
    {"cosine", {.lr = 0.5f, .lr_schedule = MXC_LR_COSINE, .max_update = 30, .final_lr = 0.01f}},
    {"cosine_warmup",
     {.lr = 0.5f,
      .lr_schedule = MXC_LR_COSINE,
      .max_update = 30,
      .final_lr = 0.01f,
      .warmup_steps = 6,
      .warmup_begin_lr = 0.1f}},
    {"cosine_warmup_constant",
     {.lr = 0.5f,
      .lr_schedule = MXC_LR_COSINE,
      .max_update = 30,
      .warmup_steps = 6,
      .warmup_begin_lr = 0.1f,
      .warmup_mode = MXC_WARMUP_CONSTANT}},
    {"poly",
     {.lr = 0.5f, .lr_schedule = MXC_LR_POLY, .max_update = 30, .pwr = 2, .final_lr = 0.01f}},
    {"poly_warmup",
     {.lr = 0.5f,
      .lr_schedule = MXC_LR_POLY,
      .max_update = 30,
      .pwr = 1.5f,
      .final_lr = 0.05f,
      .warmup_steps = 8}},
};

#define SCHED_UPDATES 40

/* The rate after each of 40 updates equals MXNet's scheduler's, and is the rate the update
 * used: SGD from weight 0 with gradient 1 gives -lr. */
START_TEST(test_schedule) {
    const struct sched_case *c = &sched_cases[_i];
    struct mxct_tensor want = mxct_ref_load("optimizers/schedules.params", c->name);
    mxc_optimizer *o = NULL;
    CK_OK(mxc_optimizer_create(&c->cfg, &o));
    ck_assert_float_eq(mxc_optimizer_current_lr(o),
                       c->cfg.warmup_steps ? c->cfg.warmup_begin_lr : c->cfg.lr);
    const int64_t one = 1;
    mxc_shape s = mxc_shape_make(1, &one);
    mxc_ndarray *w = NULL, *g = NULL;
    CK_OK(mxc_nd_zeros(&s, MXC_FLOAT32, mxc_cpu(), &w));
    CK_OK(mxc_nd_ones(&s, MXC_FLOAT32, mxc_cpu(), &g));
    for (int n = 1; n <= SCHED_UPDATES; n++) {
        CK_OK(mxc_nd_fill(w, 0));
        CK_OK(mxc_optimizer_update(o, 0, "w", w, g));
        const double lr = mxc_optimizer_current_lr(o), ref_lr = want.data[n - 1];
        ck_assert_msg(fabs(lr - ref_lr) <= 1e-6 * fabs(ref_lr) + 1e-9,
                      "%s: update %d: lr %.9g, MXNet %.9g", c->name, n, lr, ref_lr);
        float used;
        CK_OK(mxc_nd_sync_copy_to_cpu(w, &used, sizeof used));
        ck_assert_msg(fabs(-used - ref_lr) <= 1e-6 * fabs(ref_lr) + 1e-9,
                      "%s: update %d used lr %.9g, MXNet %.9g", c->name, n, -used, ref_lr);
    }
    mxc_nd_free(w);
    mxc_nd_free(g);
    mxc_optimizer_free(o);
    mxct_tensors_free(&want, 1);
}
END_TEST

/* ---- Multipliers and configuration --------------------------------------------------- */

/* SGD with lr 0.1, wd 0.1 from weight 1 and gradient 1: w - lr_mult 0.1 (1 + wd_mult 0.1). */
START_TEST(test_multipliers) {
    mxc_optimizer_config cfg = {.kind = MXC_OPT_SGD, .lr = 0.1f, .wd = 0.1f};
    mxc_optimizer *o = NULL;
    CK_OK(mxc_optimizer_create(&cfg, &o));
    CK_OK(mxc_optimizer_set_mult(o, "b", 0.5f, 3.0f));
    CK_OK(mxc_optimizer_set_mult(o, "c", 2.0f, 0.0f));
    CK_OK(mxc_optimizer_set_mult(o, "b", 0.5f, 0.0f)); /* replaces b's */
    const char *names[] = {"a", "b", "c"};
    const float want[] = {1 - 0.1f * (1 + 0.1f), 1 - 0.05f * 1, 1 - 0.2f * 1};
    const int64_t three = 3;
    mxc_shape s = mxc_shape_make(1, &three);
    for (int i = 0; i < 3; i++) {
        mxc_ndarray *w = NULL, *g = NULL;
        CK_OK(mxc_nd_ones(&s, MXC_FLOAT32, mxc_cpu(), &w));
        CK_OK(mxc_nd_ones(&s, MXC_FLOAT32, mxc_cpu(), &g));
        CK_OK(mxc_optimizer_update(o, i, names[i], w, g));
        float got[3];
        CK_OK(mxc_nd_sync_copy_to_cpu(w, got, sizeof got));
        for (int k = 0; k < 3; k++)
            ck_assert_msg(fabsf(got[k] - want[i]) <= 1e-7f, "%s: %.9g, expected %.9g", names[i],
                          got[k], want[i]);
        mxc_nd_free(w);
        mxc_nd_free(g);
    }
    CK_ERR_MSG(MXC_EINVAL, mxc_optimizer_set_mult(o, "d", -1, 1), "multipliers");
    CK_ERR_MSG(MXC_EINVAL, mxc_optimizer_set_mult(o, NULL, 1, 1), "name");
    mxc_optimizer_free(o);
}
END_TEST

START_TEST(test_bad_config) {
    struct {
        mxc_optimizer_config cfg;
        const char *needle;
    } bad[] = {
        {{.kind = 10, .lr = 0.1f}, "unknown kind 10"},
        {{.kind = -1, .lr = 0.1f}, "unknown kind -1"},
        {{.kind = MXC_OPT_RMSPROP, .lr = 0.1f, .gamma1 = 1.5f}, "gamma1 1.5"},
        {{.kind = MXC_OPT_ADADELTA, .lr = 0.1f, .rho = -0.5f}, "rho -0.5"},
        {{.kind = MXC_OPT_FTRL, .lr = 0.1f, .lamda1 = -1}, "lamda1 -1"},
        {{.kind = MXC_OPT_SIGNUM, .lr = 0.1f, .momentum = 1}, "momentum 1"},
        {{.kind = MXC_OPT_SGD, .lr = 0.1f, .lr_schedule = 9}, "unknown lr_schedule 9"},
        {{.kind = MXC_OPT_SGD, .lr = 0.1f, .lr_schedule = MXC_LR_COSINE}, "max_update 0"},
        {{.kind = MXC_OPT_SGD,
          .lr = 0.1f,
          .lr_schedule = MXC_LR_POLY,
          .max_update = 5,
          .warmup_steps = 5},
         "warmup_steps 5"},
        {{.kind = MXC_OPT_SGD, .lr = 0.1f, .warmup_steps = 3, .warmup_begin_lr = 0.2f},
         "warmup_begin_lr 0.2"},
        {{.kind = MXC_OPT_SGD, .lr = 0.1f, .warmup_steps = -1}, "warmup_steps -1"},
        {{.kind = MXC_OPT_SGD, .lr = 0.1f, .warmup_mode = 2}, "warmup_mode 2"},
        {{.kind = MXC_OPT_SGD, .lr = 0.1f, .lr_schedule = MXC_LR_POLY, .max_update = 9, .pwr = -1},
         "pwr -1"},
    };
    for (int i = 0; i < COUNT(bad); i++) {
        mxc_optimizer *o = (mxc_optimizer *)&bad[i]; /* must be set to NULL */
        CK_ERR_MSG(MXC_EINVAL, mxc_optimizer_create(&bad[i].cfg, &o), bad[i].needle);
        ck_assert_ptr_null(o);
    }
}
END_TEST

/* ---- mxc train ----------------------------------------------------------------------- */

/* build/bin/mxc beside this test binary (make test builds the tools). */
static const char *mxc_tool(void) {
    static char bin[4096];
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert(len > 0);
    self[len] = '\0';
    snprintf(bin, sizeof bin, "%s/mxc", dirname(self));
    return bin;
}

/* Runs mxc with `args` (NULL-terminated); its exit status, its output in *out (free it). */
static int run_tool(const char *const *args, char **out) {
    const char *argv[40] = {mxc_tool()};
    int n = 1;
    for (int i = 0; args[i] && n < 39; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return mxct_run("mxc train", argv, NULL, 120, NULL, out);
}

/* Unknown names are usage errors (exit 2) listing the valid ones; a schedule without what
 * it needs fails (exit 1) with the library's reason; a short run with RMSProp under a
 * warmed-up poly schedule trains. */
START_TEST(test_tool_options) {
    char *out = NULL;
    const char *bad_opt[] = {"train", "--network", "mlp", "--optimizer", "bogus", NULL};
    ck_assert_int_eq(run_tool(bad_opt, &out), 2);
    ck_assert_msg(strstr(out, "--optimizer must be one of sgd, adam, nag, rmsprop, adagrad, "
                              "adadelta, ftrl, signum, adamw, lamb; not bogus"),
                  "%s", out);
    free(out);
    const char *bad_sched[] = {"train", "--network", "mlp", "--lr-schedule", "step", NULL};
    ck_assert_int_eq(run_tool(bad_sched, &out), 2);
    ck_assert_msg(strstr(out, "constant, factor, multifactor, cosine, poly; not step"), "%s", out);
    free(out);
    const char *bad_mode[] = {"train", "--network", "mlp", "--warmup-mode", "exp", NULL};
    ck_assert_int_eq(run_tool(bad_mode, &out), 2);
    ck_assert_msg(strstr(out, "--warmup-mode must be one of linear, constant"), "%s", out);
    free(out);

    const char *dir = getenv("MXC_FASHION_MNIST_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte.gz",
             dir && *dir ? dir : "/usr/share/datasets/fashion-mnist");
    if (access(path, R_OK) != 0) {
        printf("check_optimizer: %s missing (scripts/deps.sh installs dataset-fashion-mnist); "
               "mxc train runs skipped\n",
               path);
        return;
    }
    const char *no_max[] = {"train",
                            "--network",
                            "mlp",
                            "--lr-schedule",
                            "cosine",
                            "--epochs",
                            "1",
                            "--num-samples",
                            "200",
                            "--prefix",
                            "build/check_optimizer_tool",
                            "--frequent",
                            "0",
                            NULL};
    ck_assert_int_eq(run_tool(no_max, &out), 1);
    ck_assert_msg(strstr(out, "max_update 0"), "%s", out);
    free(out);
    const char *train[] = {"train",   "--network",     "mlp",      "--optimizer",
                           "rmsprop", "--lr",          "0.002",    "--lr-schedule",
                           "poly",    "--max-update",  "30",       "--warmup-steps",
                           "5",       "--final-lr",    "0.0005",   "--epochs",
                           "1",       "--num-samples", "3000",     "--frequent",
                           "0",       "--json",        "--prefix", "build/check_optimizer_tool",
                           NULL};
    ck_assert_int_eq(run_tool(train, &out), 0);
    const char *acc = strstr(out, "\"test_accuracy\": ");
    ck_assert_msg(acc != NULL, "%s", out);
    ck_assert_msg(atof(acc + strlen("\"test_accuracy\": ")) > 0.4, "%s", out);
    free(out);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("optimizer");
    TCase *tc = tcase_create("optimizers");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_against_mxnet, 0, NUM_CASES);
    tcase_add_loop_test(tc, test_multi_precision, 0, COUNT(mp_cases));
    tcase_add_loop_test(tc, test_save_load_resume, 0, NUM_CASES);
    tcase_add_test(tc, test_load_other_kind);
    tcase_add_test(tc, test_multipliers);
    tcase_add_test(tc, test_bad_config);
    suite_add_tcase(s, tc);
    tc = tcase_create("schedules");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_schedule, 0, (int)COUNT(sched_cases));
    suite_add_tcase(s, tc);
    tc = tcase_create("tool");
    tcase_set_timeout(tc, mxct_timeout(240));
    tcase_add_test(tc, test_tool_options);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }

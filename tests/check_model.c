/*
 * tests/check_model.c — the training pieces of mxc/model.h: initializers (name patterns,
 * each scheme's range and spread, reproducibility for a seed), metrics (values on known
 * batches, padding, composites, bad input), optimizers (SGD, momentum and Adam against
 * the formulas over several steps, multipliers, learning-rate schedules), the network
 * builders of mxc/networks.h, fit, and checkpoints: crash-safe saves that clean up the
 * temporaries of killed saves, resuming from the newest checkpoint that loads, errors
 * that name the damaged file, and fit / score / predict on a context (GPU against CPU
 * where a GPU exists).
 */
#include "mxc/executor.h"
#include "mxc/io.h"
#include "mxc/model.h"
#include "mxc/ndarray.h"
#include "mxc/networks.h"
#include "mxc/symbol.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static mxc_ndarray *array(mxc_shape s, const float *values) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_create(&s, MXC_FLOAT32, mxc_cpu(), 0, &a));
    if (values)
        CK_OK(mxc_nd_sync_copy_from_cpu(a, values, sizeof(float) * (size_t)mxc_nd_size(a)));
    return a;
}

static float *host(mxc_ndarray *a) {
    float *h = malloc(sizeof(float) * (size_t)mxc_nd_size(a));
    CK_OK(mxc_nd_sync_copy_to_cpu(a, h, sizeof(float) * (size_t)mxc_nd_size(a)));
    return h;
}

/* ---- Initializers ------------------------------------------------------------------- */

START_TEST(test_init_patterns) {
    mxc_init_config cfg = {.kind = MXC_INIT_XAVIER};
    const char *names[] = {"fc1_bias",      "bn_gamma",        "bn_beta",        "bn_moving_mean",
                           "bn_moving_var", "bn_running_mean", "bn_running_var", "x_moving_inv_var",
                           "x_moving_avg",  "quantize_min",    "quantize_max"};
    const float want[] = {0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1};
    for (int i = 0; i < (int)(sizeof want / sizeof want[0]); i++) {
        mxc_ndarray *a = array(SHAPE(7), NULL);
        CK_OK(mxc_init_array(&cfg, names[i], a));
        float *h = host(a);
        for (int k = 0; k < 7; k++)
            ck_assert_float_eq(h[k], want[i]);
        free(h);
        mxc_nd_free(a);
    }
    mxc_ndarray *a = array(SHAPE(7), NULL);
    CK_ERR(MXC_EINVAL, mxc_init_array(&cfg, "data", a));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "data"));
    CK_ERR(MXC_EINVAL, mxc_init_array(&cfg, "fc_weight", a)); /* Xavier needs 2-D */
    CK_ERR(MXC_EINVAL, mxc_init_array(NULL, "fc_weight", a));
    mxc_nd_free(a);
}
END_TEST

/* Xavier uniform avg on (64, 32, 3, 3): scale sqrt(3 / ((288 + 576) / 2)). */
START_TEST(test_init_xavier_range_and_seed) {
    mxc_init_config cfg = {.kind = MXC_INIT_XAVIER};
    mxc_ndarray *a = array(SHAPE(64, 32, 3, 3), NULL), *b = array(SHAPE(64, 32, 3, 3), NULL);
    CK_OK(mxc_random_seed(5));
    CK_OK(mxc_init_array(&cfg, "conv_weight", a));
    CK_OK(mxc_random_seed(5));
    CK_OK(mxc_init_array(&cfg, "conv_weight", b));
    float *ha = host(a), *hb = host(b);
    int64_t n = mxc_nd_size(a);
    double scale = sqrt(3.0 / ((32 * 9 + 64 * 9) / 2.0)), lo = 0, hi = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_float_eq(ha[i], hb[i]);
        lo = fmin(lo, ha[i]);
        hi = fmax(hi, ha[i]);
        sq += (double)ha[i] * ha[i];
    }
    ck_assert(lo >= -scale && hi <= scale);
    ck_assert(lo < -0.95 * scale && hi > 0.95 * scale);
    /* the variance of U(-s, s) is s^2 / 3 */
    ck_assert_double_le(fabs(sq / (double)n - scale * scale / 3) / (scale * scale / 3), 0.05);
    free(ha);
    free(hb);
    mxc_nd_free(a);
    mxc_nd_free(b);
}
END_TEST

START_TEST(test_init_other_schemes) {
    mxc_ndarray *a = array(SHAPE(100, 100), NULL);
    mxc_init_config normal = {.kind = MXC_INIT_NORMAL, .scale = 0.5f};
    CK_OK(mxc_init_array(&normal, "w_weight", a));
    float *h = host(a);
    double sum = 0, sq = 0;
    for (int i = 0; i < 10000; i++) {
        sum += h[i];
        sq += (double)h[i] * h[i];
    }
    ck_assert_double_le(fabs(sum / 10000), 0.02);
    ck_assert_double_le(fabs(sqrt(sq / 10000) - 0.5), 0.02);
    free(h);
    mxc_init_config constant = {.kind = MXC_INIT_CONSTANT, .scale = 0.25f};
    CK_OK(mxc_init_array(&constant, "w_weight", a));
    h = host(a);
    ck_assert_float_eq(h[0], 0.25f);
    ck_assert_float_eq(h[9999], 0.25f);
    free(h);
    mxc_init_config uniform = {.kind = MXC_INIT_UNIFORM, .scale = 0.1f};
    CK_OK(mxc_init_array(&uniform, "w_weight", a));
    h = host(a);
    for (int i = 0; i < 10000; i++)
        ck_assert(h[i] >= -0.1f && h[i] <= 0.1f);
    free(h);
    mxc_nd_free(a);
}
END_TEST

/* "__init__" hints as MXNet and Gluon write them: the initializer they name fills the
 * array whatever its name, with the same draws as the equivalent configuration. */
static void expect_all(mxc_ndarray *a, float value) {
    float *h = host(a);
    for (int64_t i = 0; i < mxc_nd_size(a); i++)
        ck_assert_float_eq(h[i], value);
    free(h);
}

static void expect_same_draws(const char *hint, mxc_init_config cfg) {
    mxc_ndarray *a = array(SHAPE(16, 8, 3, 3), NULL), *b = array(SHAPE(16, 8, 3, 3), NULL);
    mxc_init_config other = {.kind = MXC_INIT_UNIFORM, .scale = 9};
    CK_OK(mxc_random_seed(11));
    CK_OK(mxc_init_array_hinted(&other, "conv_weight", hint, a));
    CK_OK(mxc_random_seed(11));
    CK_OK(mxc_init_array(&cfg, "conv_weight", b));
    float *ha = host(a), *hb = host(b);
    for (int64_t i = 0; i < mxc_nd_size(a); i++)
        ck_assert_msg(ha[i] == hb[i], "%s: element %lld", hint, (long long)i);
    free(ha);
    free(hb);
    mxc_nd_free(a);
    mxc_nd_free(b);
}

START_TEST(test_init_hints) {
    mxc_init_config cfg = {.kind = MXC_INIT_XAVIER};
    mxc_ndarray *a = array(SHAPE(3, 4), NULL);
    CK_OK(mxc_init_array_hinted(&cfg, "fc_weight", "zeros", a));
    expect_all(a, 0);
    CK_OK(mxc_init_array_hinted(&cfg, "fc_bias", "ones", a));
    expect_all(a, 1);
    CK_OK(mxc_init_array_hinted(&cfg, "bn_moving_var", "[\"one\", {}]", a));
    expect_all(a, 1);
    CK_OK(mxc_init_array_hinted(&cfg, "anything", "[\"constant\", {\"value\": 0.5}]", a));
    expect_all(a, 0.5f);
    CK_OK(mxc_init_array_hinted(&cfg, "fc_bias", NULL, a)); /* no hint: by the name */
    expect_all(a, 0);
    CK_OK(mxc_init_array_hinted(&cfg, "fc_gamma", "", a));
    expect_all(a, 1);
    expect_same_draws("[\"uniform\", {\"scale\": 0.3}]",
                      (mxc_init_config){.kind = MXC_INIT_UNIFORM, .scale = 0.3f});
    expect_same_draws("[\"normal\", {}]",
                      (mxc_init_config){.kind = MXC_INIT_NORMAL, .scale = 0.01f});
    expect_same_draws("[\"xavier\", {\"rnd_type\": \"gaussian\", \"factor_type\": \"in\", "
                      "\"magnitude\": 2}]",
                      (mxc_init_config){.kind = MXC_INIT_XAVIER,
                                        .xavier_gaussian = 1,
                                        .xavier_factor = MXC_XAVIER_IN,
                                        .xavier_magnitude = 2});
    expect_same_draws("[\"msraprelu\", {\"factor_type\": \"out\", \"slope\": 0.5}]",
                      (mxc_init_config){.kind = MXC_INIT_XAVIER,
                                        .xavier_gaussian = 1,
                                        .xavier_factor = MXC_XAVIER_OUT,
                                        .xavier_magnitude = 2.0f / 1.25f});
    /* bad hints: errors that name the parameter */
    CK_ERR(MXC_ENOTSUP, mxc_init_array_hinted(&cfg, "up_weight", "[\"bilinear\", {}]", a));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "up_weight"));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "bilinear"));
    CK_ERR(MXC_ENOTSUP, mxc_init_array_hinted(&cfg, "w", "orthogonal", a));
    CK_ERR(MXC_EFORMAT, mxc_init_array_hinted(&cfg, "w_weight", "[\"zero\", {", a));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "w_weight"));
    CK_ERR(MXC_EINVAL, mxc_init_array_hinted(&cfg, "w", "[\"xavier\", {\"rnd_type\": \"x\"}]", a));
    CK_ERR(MXC_EINVAL, mxc_init_array_hinted(&cfg, "w", "[\"uniform\", {\"scale\": \"1\"}]", a));
    CK_ERR(MXC_EINVAL, mxc_init_array_hinted(&cfg, "w", "[3, {}]", a));
    CK_ERR(MXC_EINVAL, mxc_init_array_hinted(&cfg, "w", "[\"zero\", []]", a));
    CK_ERR(MXC_EINVAL, mxc_init_array_hinted(NULL, "w", "zeros", a));
    mxc_nd_free(a);
}
END_TEST

/* ---- Metrics ------------------------------------------------------------------------ */

START_TEST(test_metrics_values) {
    /* 4 samples, 3 classes; the last one is padding */
    const float pred[] = {0.7f, 0.2f, 0.1f, /* argmax 0 */ 0.1f, 0.3f,  0.6f, /* 2 */
                          0.3f, 0.4f, 0.3f, /* 1 */ 0.9f,        0.05f, 0.05f};
    const float label[] = {0, 1, 1, 2};
    mxc_ndarray *p = array(SHAPE(4, 3), pred), *l = array(SHAPE(4), label);
    mxc_metric *acc, *top2, *ce, *all;
    CK_OK(mxc_metric_create("acc", 0, &acc));
    CK_OK(mxc_metric_create("top_k_accuracy", 2, &top2));
    CK_OK(mxc_metric_create("ce", 0, &ce));
    CK_OK(mxc_metric_create("composite", 0, &all));
    CK_OK(mxc_metric_add(all, acc));
    CK_OK(mxc_metric_add(all, top2));
    CK_OK(mxc_metric_add(all, ce));
    CK_OK(mxc_metric_update(all, 1, &l, &p, 1));
    int n;
    const char *const *names;
    const double *v;
    CK_OK(mxc_metric_get(all, &n, &names, &v));
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(names[0], "accuracy");
    ck_assert_double_eq_tol(v[0], 2.0 / 3, 1e-9); /* samples 0 and 2 */
    ck_assert_double_eq_tol(v[1], 3.0 / 3, 1e-9); /* class 1 second in sample 1 */
    double want_ce = -(log(0.7) + log(0.3) + log(0.4)) / 3;
    ck_assert_double_eq_tol(v[2], want_ce, 1e-6);
    CK_OK(mxc_metric_reset(all));
    CK_OK(mxc_metric_get(all, &n, &names, &v));
    ck_assert(isnan(v[0]));
    /* a label that is not a class */
    const float bad[] = {0, 1, 3, 0};
    mxc_ndarray *lb = array(SHAPE(4), bad);
    CK_ERR(MXC_EINVAL, mxc_metric_update(acc, 1, &lb, &p, 0));
    mxc_ndarray *short_label = array(SHAPE(3), label);
    CK_ERR(MXC_ESHAPE, mxc_metric_update(acc, 1, &short_label, &p, 0));
    CK_ERR(MXC_EINVAL, mxc_metric_create("f1", 0, &acc));
    mxc_metric_free(all);
    mxc_nd_free(p);
    mxc_nd_free(l);
    mxc_nd_free(lb);
    mxc_nd_free(short_label);
}
END_TEST

/* NaN scores (a diverged network) rank as MXNet's argmax ranks them, above every number
 * and the first NaN first: all-NaN rows predict class 0, and a NaN at the label is right
 * only if no earlier class is NaN. Before, every comparison with NaN was false and such
 * rows all counted as right (a diverged FTRL run reported accuracy 1.0). */
START_TEST(test_metric_accuracy_nan) {
    const float nan = NAN;
    const float pred[] = {nan,  nan,  nan,  /* predicts 0 */ nan, nan,  nan, /* 0 */
                          0.1f, nan,  0.2f, /* 1 */ 0.5f,         0.2f, nan, /* 2 */
                          nan,  0.1f, 0.9f /* 0 */};
    const float label[] = {0, 2, 1, 0, 2};
    mxc_ndarray *p = array(SHAPE(5, 3), pred), *l = array(SHAPE(5), label);
    mxc_metric *acc, *top2;
    CK_OK(mxc_metric_create("acc", 0, &acc));
    CK_OK(mxc_metric_create("top_k_accuracy", 2, &top2));
    CK_OK(mxc_metric_update(acc, 1, &l, &p, 0));
    CK_OK(mxc_metric_update(top2, 1, &l, &p, 0));
    int n;
    const char *const *names;
    const double *v;
    CK_OK(mxc_metric_get(acc, &n, &names, &v));
    ck_assert_double_eq_tol(v[0], 2.0 / 5, 1e-9); /* rows 0 and 2 */
    CK_OK(mxc_metric_get(top2, &n, &names, &v));
    /* in the top two also: row 3 (behind its NaN) and row 4 (behind its NaN) */
    ck_assert_double_eq_tol(v[0], 4.0 / 5, 1e-9); /* not row 1: two NaNs before its label */
    mxc_metric_free(acc);
    mxc_metric_free(top2);
    mxc_nd_free(p);
    mxc_nd_free(l);
}
END_TEST

START_TEST(test_metric_mse) {
    const float pred[] = {1, 2, 3, 4}, label[] = {1, 0, 3, 2};
    mxc_ndarray *p = array(SHAPE(4), pred), *l = array(SHAPE(4), label);
    mxc_metric *m;
    CK_OK(mxc_metric_create("mse", 0, &m));
    CK_OK(mxc_metric_update(m, 1, &l, &p, 0));
    int n;
    const char *const *names;
    const double *v;
    CK_OK(mxc_metric_get(m, &n, &names, &v));
    ck_assert_double_eq_tol(v[0], (0 + 4 + 0 + 4) / 4.0, 1e-9);
    mxc_metric_free(m);
    mxc_nd_free(p);
    mxc_nd_free(l);
}
END_TEST

/* ---- Networks ----------------------------------------------------------------------- */

static void expect_args(mxc_symbol *s, int want, const char *first, const char *last) {
    int n;
    const char *const *names;
    CK_OK(mxc_symbol_list_arguments(s, &n, &names));
    ck_assert_int_eq(n, want);
    ck_assert_str_eq(names[0], first);
    ck_assert_str_eq(names[n - 1], last);
}

START_TEST(test_networks) {
    mxc_symbol *s = NULL;
    int hidden[] = {128, 64};
    CK_OK(mxc_net_mlp(2, hidden, "relu", 10, &s));
    expect_args(s, 8, "data", "softmax_label");
    mxc_symbol_free(s);
    CK_OK(mxc_net_lenet(10, &s));
    expect_args(s, 10, "data", "softmax_label");
    mxc_symbol_free(s);
    CK_OK(mxc_net_resnet(2, 10, &s));
    int n;
    const char *const *aux;
    CK_OK(mxc_symbol_list_auxiliary_states(s, &n, &aux));
    ck_assert_int_eq(n, 2 * (1 + 8 * 2 + 3)); /* stem, 16 block convs, 3 projections */
    mxc_symbol_free(s);
    CK_ERR(MXC_EINVAL, mxc_net_mlp(1, (int[]){0}, "relu", 10, &s));
    ck_assert_ptr_null(s);
    CK_ERR(MXC_EINVAL, mxc_net_lenet(0, &s));
}
END_TEST

/* ---- Fit, checkpoints, score, predict ------------------------------------------------ */

/* 400 samples of 2 features in 2 linearly separable classes (label = x0 + x1 > 0). */
static mxc_data_iter *toy_iter(int batch, unsigned seed) {
    float x[800], y[400];
    srand(seed);
    for (int i = 0; i < 400; i++) {
        x[2 * i] = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;
        x[2 * i + 1] = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;
        y[i] = x[2 * i] + x[2 * i + 1] > 0 ? 1.0f : 0.0f;
    }
    mxc_ndarray *data = array(SHAPE(400, 2), x), *label = array(SHAPE(400), y);
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = batch;
    p.shuffle = 1;
    p.seed = seed;
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_array(data, label, &p, &it));
    mxc_nd_free(data);
    mxc_nd_free(label);
    return it;
}

struct progress_log {
    int lines, epochs;
    double last_metric;
};

static void log_progress(const mxc_fit_progress *p, void *user) {
    struct progress_log *log = user;
    log->lines++;
    log->epochs += p->end_of_epoch != 0;
    log->last_metric = p->train_metric;
}

START_TEST(test_fit_checkpoint_score_predict) {
    int hidden[] = {16};
    mxc_symbol *net = NULL;
    CK_OK(mxc_net_mlp(1, hidden, "relu", 2, &net));
    mxc_model *model = NULL;
    CK_OK(mxc_model_create(net, &model));
    mxc_symbol_free(net);
    mxc_data_iter *train = toy_iter(20, 1), *test = toy_iter(50, 2);
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.num_epochs = 5;
    cfg.optimizer.lr = 0.5f;
    cfg.optimizer.momentum = 0.9f;
    cfg.seed = 3;
    cfg.frequent = 10;
    cfg.checkpoint_prefix = "build/check_model_toy";
    struct progress_log log = {0};
    cfg.callback = log_progress;
    cfg.user = &log;
    mxc_fit_result res;
    CK_OK(mxc_model_fit(model, train, test, &cfg, &res));
    ck_assert_int_eq(log.epochs, 5);
    ck_assert_int_eq(log.lines, 5 * (1 + 2)); /* 20 batches: reports at 10 and 20 */
    ck_assert_msg(res.train_metric > 0.95 && res.eval_metric > 0.95,
                  "train %.3f, eval %.3f on a separable problem", res.train_metric,
                  res.eval_metric);
    ck_assert(res.samples_per_s > 0);
    /* the last checkpoint scores the same */
    mxc_model *loaded = NULL;
    CK_OK(mxc_model_load("build/check_model_toy", 5, &loaded));
    double acc = 0;
    CK_OK(mxc_model_score(loaded, test, "acc", &acc));
    ck_assert_double_eq_tol(acc, res.eval_metric, 1e-9);
    mxc_ndarray *pred = NULL;
    CK_OK(mxc_model_predict(loaded, test, &pred));
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(pred, &s));
    ck_assert_int_eq(s.ndim, 2);
    ck_assert_int_eq(s.dims[0], 400);
    ck_assert_int_eq(s.dims[1], 2);
    float *p = host(pred);
    for (int i = 0; i < 400; i++)
        ck_assert_float_eq_tol(p[2 * i] + p[2 * i + 1], 1.0f, 1e-5f); /* softmax rows */
    free(p);
    /* resuming: a second fit from the loaded model continues where it stopped */
    cfg.num_epochs = 1;
    cfg.begin_epoch = 5;
    cfg.quiet = 1;
    CK_OK(mxc_model_fit(loaded, train, NULL, &cfg, &res));
    ck_assert(res.train_metric > 0.95);
    ck_assert(isnan(res.eval_metric));
    mxc_model *again = NULL;
    CK_OK(mxc_model_load("build/check_model_toy", 6, &again));
    mxc_model_free(again);
    CK_ERR(MXC_EIO, mxc_model_load("build/check_model_toy", 7, &again));
    ck_assert_ptr_null(again);
    CK_ERR(MXC_EINVAL, mxc_model_fit(loaded, NULL, NULL, &cfg, &res));
    mxc_nd_free(pred);
    mxc_model_free(loaded);
    mxc_model_free(model);
    mxc_data_iter_free(train);
    mxc_data_iter_free(test);
}
END_TEST

/* An MLP with one hidden layer of `hidden` units and two classes, as a model. */
static mxc_model *toy_model(int hidden) {
    mxc_symbol *net = NULL;
    CK_OK(mxc_net_mlp(1, &hidden, "relu", 2, &net));
    mxc_model *model = NULL;
    CK_OK(mxc_model_create(net, &model));
    mxc_symbol_free(net);
    return model;
}

/* toy_model(hidden) fitted quietly for `epochs` epochs (SGD, lr 0.1, seed 11) on toy
 * data, without checkpoints. */
static mxc_model *fitted_mlp(int hidden, int epochs) {
    mxc_model *model = toy_model(hidden);
    mxc_data_iter *train = toy_iter(20, 4);
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.num_epochs = epochs;
    cfg.optimizer.lr = 0.1f;
    cfg.seed = 11;
    cfg.quiet = 1;
    CK_OK(mxc_model_fit(model, train, NULL, &cfg, NULL));
    mxc_data_iter_free(train);
    return model;
}

/* A model of the symbol in `json`. */
static mxc_model *model_from_json(const char *json) {
    mxc_symbol *net = NULL;
    CK_OK(mxc_symbol_load_json(json, &net));
    mxc_model *model = NULL;
    CK_OK(mxc_model_create(net, &model));
    mxc_symbol_free(net);
    return model;
}

/* The same seed and data give the same weights with the naive engine's order... and with
 * any engine here, since every kernel is deterministic and the order per variable fixed. */
/* A network as Gluon exports it: BatchNorm's statistics named running_mean / running_var
 * and every parameter with an "__init__" hint. Fit initialises by the hints (the first
 * layer's constant 0.5 beats the Xavier configured) and trains. */
static const char gluon_json[] =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"dense0_weight\", \"attrs\": {\"__init__\": "
    "\"[\\\"constant\\\", {\\\"value\\\": 0.5}]\"}, \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"dense0_bias\", \"attrs\": {\"__init__\": \"zeros\"}, "
    "\"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"dense0_fwd\", \"attrs\": {\"num_hidden\": \"4\"}, "
    "\"inputs\": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"bn_gamma\", \"attrs\": {\"__init__\": \"ones\"}, "
    "\"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"bn_beta\", \"attrs\": {\"__init__\": \"zeros\"}, "
    "\"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"bn_running_mean\", \"attrs\": {\"__init__\": \"zeros\"}, "
    "\"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"bn_running_var\", \"attrs\": {\"__init__\": \"ones\"}, "
    "\"inputs\": []},"
    "{\"op\": \"BatchNorm\", \"name\": \"bn_fwd\", \"attrs\": {\"fix_gamma\": \"False\"}, "
    "\"inputs\": [[3, 0, 0], [4, 0, 0], [5, 0, 0], [6, 0, 1], [7, 0, 1]]},"
    "{\"op\": \"null\", \"name\": \"out_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"out_bias\", \"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"out_fwd\", \"attrs\": {\"num_hidden\": \"2\"}, "
    "\"inputs\": [[8, 0, 0], [9, 0, 0], [10, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"softmax_label\", \"inputs\": []},"
    "{\"op\": \"SoftmaxOutput\", \"name\": \"softmax\", \"inputs\": [[11, 0, 0], [12, 0, 0]]}],"
    "\"arg_nodes\": [0, 1, 2, 4, 5, 6, 7, 9, 10, 12], \"heads\": [[13, 0, 0]]}";

START_TEST(test_fit_gluon_names_and_hints) {
    mxc_model *model = model_from_json(gluon_json);
    mxc_data_iter *train = toy_iter(20, 1);
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.num_epochs = 1;
    cfg.optimizer.lr = 0; /* the weights stay as initialised */
    cfg.quiet = 1;
    CK_OK(mxc_model_fit(model, train, NULL, &cfg, NULL));
    expect_all(mxc_model_param(model, "dense0_weight"), 0.5f);
    expect_all(mxc_model_param(model, "dense0_bias"), 0);
    expect_all(mxc_model_param(model, "bn_gamma"), 1);
    /* the running statistics started at 0 and 1 and moved towards the batches' */
    float *var = host(mxc_model_param(model, "bn_running_var"));
    for (int c = 0; c < 4; c++)
        ck_assert_msg(isfinite(var[c]) && var[c] > 0, "running_var[%d] = %g", c, var[c]);
    free(var);
    /* and it learns (the constant first layer makes its units alike: one line suffices) */
    cfg.optimizer.lr = 0.5f;
    cfg.num_epochs = 3;
    mxc_fit_result res;
    CK_OK(mxc_model_fit(model, train, NULL, &cfg, &res));
    ck_assert_msg(res.train_metric > 0.8, "train accuracy %.3f", res.train_metric);
    mxc_data_iter_free(train);
    mxc_model_free(model);
}
END_TEST

/* Multipliers from the symbol, as MXNet's Module sets them: fc_weight has __lr_mult__ 0
 * (frozen); three (1,) parameters of value 1 reach the loss through a multiplication by 0,
 * so their gradient is 0 and only weight decay moves them: decay_weight decays (a _weight),
 * decay_bias does not (Module's wd_mult 0 for names not ending in _weight or _gamma) and
 * faster_bias decays twice as fast (__wd_mult__ 2). */
static const char mults_json[] =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc_weight\", \"attrs\": {\"__lr_mult__\": \"0.0\", "
    "\"__init__\": \"[\\\"constant\\\", {\\\"value\\\": 0.5}]\"}, \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc_bias\", \"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"fc\", \"attrs\": {\"num_hidden\": \"2\"}, "
    "\"inputs\": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"decay_weight\", \"attrs\": {\"__shape__\": \"(1,)\", "
    "\"__init__\": \"ones\"}, \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"decay_bias\", \"attrs\": {\"__shape__\": \"(1,)\", "
    "\"__init__\": \"ones\"}, \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"faster_bias\", \"attrs\": {\"__shape__\": \"(1,)\", "
    "\"__init__\": \"ones\", \"__wd_mult__\": \"2\"}, \"inputs\": []},"
    "{\"op\": \"_mul_scalar\", \"name\": \"z1\", \"attrs\": {\"scalar\": \"0\"}, "
    "\"inputs\": [[4, 0, 0]]},"
    "{\"op\": \"_mul_scalar\", \"name\": \"z2\", \"attrs\": {\"scalar\": \"0\"}, "
    "\"inputs\": [[5, 0, 0]]},"
    "{\"op\": \"_mul_scalar\", \"name\": \"z3\", \"attrs\": {\"scalar\": \"0\"}, "
    "\"inputs\": [[6, 0, 0]]},"
    "{\"op\": \"broadcast_add\", \"name\": \"a1\", \"inputs\": [[3, 0, 0], [7, 0, 0]]},"
    "{\"op\": \"broadcast_add\", \"name\": \"a2\", \"inputs\": [[10, 0, 0], [8, 0, 0]]},"
    "{\"op\": \"broadcast_add\", \"name\": \"a3\", \"inputs\": [[11, 0, 0], [9, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"softmax_label\", \"inputs\": []},"
    "{\"op\": \"SoftmaxOutput\", \"name\": \"softmax\", \"inputs\": [[12, 0, 0], [13, 0, 0]]}],"
    "\"arg_nodes\": [0, 1, 2, 4, 5, 6, 13], \"heads\": [[14, 0, 0]]}";

static void expect_near(mxc_ndarray *a, double value) {
    float *h = host(a);
    ck_assert_msg(fabs(h[0] - value) <= 1e-5 * fabs(value), "%g, not %g", h[0], value);
    free(h);
}

START_TEST(test_fit_symbol_multipliers) {
    /* once updating directly, once through a store (its updater knows keys, not names) */
    const char *const stores[] = {NULL, "local"};
    for (int k = 0; k < 2; k++) {
        mxc_model *model = model_from_json(mults_json);
        mxc_data_iter *train = toy_iter(20, 1); /* 20 batches: 20 updates */
        mxc_fit_config cfg;
        mxc_fit_config_init(&cfg);
        cfg.optimizer.lr = 0.5f;
        cfg.optimizer.wd = 0.1f;
        cfg.kvstore = stores[k];
        cfg.quiet = 1;
        CK_OK(mxc_model_fit(model, train, NULL, &cfg, NULL));
        expect_all(mxc_model_param(model, "fc_weight"), 0.5f);
        expect_near(mxc_model_param(model, "decay_weight"), pow(1 - 0.5 * 0.1, 20));
        expect_all(mxc_model_param(model, "decay_bias"), 1);
        expect_near(mxc_model_param(model, "faster_bias"), pow(1 - 0.5 * 0.2, 20));
        float *b = host(mxc_model_param(model, "fc_bias")); /* lr_mult 1: it learned */
        ck_assert_msg(b[0] != 0 && b[1] != 0, "fc_bias %g %g", b[0], b[1]);
        free(b);
        mxc_data_iter_free(train);
        mxc_model_free(model);
    }
}
END_TEST

START_TEST(test_fit_bad_multiplier) {
    char json[sizeof mults_json];
    memcpy(json, mults_json, sizeof json);
    const char key[] = "\"__wd_mult__\": \"";
    char *mult = strstr(json, key);
    ck_assert_ptr_nonnull(mult);
    mult[sizeof key - 1] = 'x'; /* "__wd_mult__": "x" */
    mxc_model *model = model_from_json(json);
    mxc_data_iter *train = toy_iter(20, 1);
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.quiet = 1;
    ck_assert_int_eq(mxc_model_fit(model, train, NULL, &cfg, NULL), MXC_EINVAL);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "faster_bias's __wd_mult__ \"x\""));
    mxc_data_iter_free(train);
    mxc_model_free(model);
}
END_TEST

/* Two heads, each with its own label: a classifier (softmax_label) and a regression
 * (lro_label). Prediction feeds neither label and returns both outputs, named. */
static const char two_heads_json[] =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc1_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc1_bias\", \"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"fc1\", \"attrs\": {\"num_hidden\": \"2\"}, "
    "\"inputs\": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"softmax_label\", \"inputs\": []},"
    "{\"op\": \"SoftmaxOutput\", \"name\": \"softmax\", \"inputs\": [[3, 0, 0], [4, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"fc2_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc2_bias\", \"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"fc2\", \"attrs\": {\"num_hidden\": \"1\"}, "
    "\"inputs\": [[0, 0, 0], [6, 0, 0], [7, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"lro_label\", \"inputs\": []},"
    "{\"op\": \"LinearRegressionOutput\", \"name\": \"lro\", \"inputs\": [[8, 0, 0], [9, 0, 0]]}],"
    "\"arg_nodes\": [0, 1, 2, 4, 6, 7, 9], \"heads\": [[5, 0, 0], [10, 0, 0]]}";

START_TEST(test_predict_every_output) {
    const float w1[] = {1, -2, 0.5f, 3}, b1[] = {0.1f, -0.2f}, w2[] = {2, -1}, b2[] = {0.25f};
    mxc_ndarray *params[] = {array(SHAPE(2, 2), w1), array(SHAPE(2), b1), array(SHAPE(1, 2), w2),
                             array(SHAPE(1), b2)};
    const char *names[] = {"arg:fc1_weight", "arg:fc1_bias", "arg:fc2_weight", "arg:fc2_bias"};
    CK_OK(mxc_nd_save("build/check_model_two_heads-0000.params", 4, params, names));
    FILE *f = fopen("build/check_model_two_heads-symbol.json", "w");
    ck_assert_ptr_nonnull(f);
    fputs(two_heads_json, f);
    fclose(f);
    mxc_model *m = NULL;
    CK_OK(mxc_model_load("build/check_model_two_heads", 0, &m));
    /* a file naming a parameter the symbol lacks changes nothing */
    const char *bad_names[] = {"arg:fc1_weight", "arg:fc9_weight"};
    mxc_ndarray *bad[] = {array(SHAPE(2, 2), NULL), params[0]};
    float zeros4[4] = {0};
    CK_OK(mxc_nd_sync_copy_from_cpu(bad[0], zeros4, sizeof zeros4));
    CK_OK(mxc_nd_save("build/check_model_bad.params", 2, bad, bad_names));
    CK_ERR(MXC_EINVAL, mxc_model_load_params(m, "build/check_model_bad.params"));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "fc9_weight"));
    float *kept = host(mxc_model_param(m, "fc1_weight"));
    ck_assert_float_eq(kept[3], w1[3]);
    free(kept);
    mxc_nd_free(bad[0]);
    CK_ERR(MXC_EINVAL, mxc_model_load_params(m, NULL));
    CK_ERR(MXC_EMISUSE, mxc_model_load_params(NULL, "build/check_model_bad.params"));
    float x[2 * 30];
    for (int i = 0; i < 60; i++)
        x[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
    mxc_ndarray *data = array(SHAPE(30, 2), x);
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = 8; /* the last batch is padded: its padding rows are left out */
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_array(data, NULL, &p, &it));
    int num = -1;
    mxc_ndarray **outs = NULL;
    CK_OK(mxc_model_predict_outputs(m, mxc_cpu(), it, &num, &outs));
    ck_assert_int_eq(num, 2);
    int n_names = 0;
    const char *const *out_names = NULL;
    CK_OK(mxc_symbol_list_outputs(mxc_model_symbol(m), &n_names, &out_names));
    ck_assert_str_eq(out_names[0], "softmax_output");
    ck_assert_str_eq(out_names[1], "lro_output");
    float *cls = host(outs[0]), *reg = host(outs[1]);
    ck_assert_int_eq(mxc_nd_size(outs[0]), 60);
    ck_assert_int_eq(mxc_nd_size(outs[1]), 30);
    for (int i = 0; i < 30; i++) {
        double z0 = x[2 * i] * w1[0] + x[2 * i + 1] * w1[1] + b1[0];
        double z1 = x[2 * i] * w1[2] + x[2 * i + 1] * w1[3] + b1[1];
        double p1 = 1.0 / (1.0 + exp(z0 - z1));
        ck_assert_double_eq_tol(cls[2 * i + 1], p1, 1e-5);
        ck_assert_double_eq_tol(reg[i], x[2 * i] * w2[0] + x[2 * i + 1] * w2[1] + b2[0], 1e-5);
    }
    free(cls);
    free(reg);
    /* the first output alone, as before */
    mxc_ndarray *first = NULL;
    CK_OK(mxc_model_predict(m, it, &first));
    ck_assert_int_eq(mxc_nd_size(first), 60);
    mxc_nd_free(first);
    mxc_nd_list_free((size_t)num, outs, NULL);
    /* bad arguments */
    CK_ERR(MXC_EINVAL, mxc_model_predict_outputs(m, mxc_cpu(), it, NULL, &outs));
    CK_ERR(MXC_EINVAL, mxc_model_predict_outputs(m, mxc_cpu(), it, &num, NULL));
    CK_ERR(MXC_EMISUSE, mxc_model_predict_outputs(NULL, mxc_cpu(), it, &num, &outs));
    ck_assert_ptr_null(outs);
    ck_assert_int_eq(num, 0);
    mxc_data_iter_free(it);
    mxc_nd_free(data);
    for (int k = 0; k < 4; k++)
        mxc_nd_free(params[k]);
    mxc_model_free(m);
}
END_TEST

START_TEST(test_fit_reproducible) {
    float *w[2];
    for (int run = 0; run < 2; run++) {
        mxc_model *model = fitted_mlp(8, 2);
        w[run] = host(mxc_model_param(model, "fc1_weight"));
        mxc_model_free(model);
    }
    ck_assert_mem_eq(w[0], w[1], sizeof(float) * 16);
    free(w[0]);
    free(w[1]);
}
END_TEST

/* ---- Checkpoint files ----------------------------------------------------------------- */

/* Creates the file named by `fmt` and `pid` (printf-style) with some bytes; its path goes
 * to path[256]. */
static void touch(char *path, const char *fmt, long pid) {
    snprintf(path, 256, fmt, pid);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("half a checkpoint", f);
    fclose(f);
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* The pid of a process that has exited (and been reaped). */
static long dead_pid(void) {
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(child, NULL, 0), child);
    return (long)child;
}

/* A save removes the temporaries that killed saves of the same prefix left behind, and
 * nothing else: not other prefixes or names, not a live process's. */
START_TEST(test_checkpoint_removes_stale_temps) {
    mxc_model *model = fitted_mlp(4, 1);
    long dead = dead_pid(), self = (long)getpid();
    char stale[2][256], kept[7][256];
    touch(stale[0], "build/check_model_stale-0003.params.tmp.%ld", dead);
    touch(stale[1], "build/check_model_stale-symbol.json.tmp.%ld", dead);
    touch(kept[0], "build/check_model_stale-0004.params.tmp.%ld", self);  /* this process */
    touch(kept[1], "build/check_model_stale-0005.params.tmp.%ld", 1);     /* init: alive */
    touch(kept[2], "build/check_model_stalex-0003.params.tmp.%ld", dead); /* other prefix */
    touch(kept[3], "build/check_model_stale-3.params.tmp.%ld", dead);     /* not NNNN */
    touch(kept[4], "build/check_model_stale-0003.params.bak.tmp.%ld", dead);
    touch(kept[5], "build/check_model_stale-0003.params.tmp.%ldx", dead);
    touch(kept[6], "build/check_model_stale-0003.params.tmp.0%ld", dead);
    CK_OK(mxc_model_save(model, "build/check_model_stale", 1));
    for (int i = 0; i < 2; i++)
        ck_assert_msg(!exists(stale[i]), "%s was not removed", stale[i]);
    for (int i = 0; i < 7; i++) {
        ck_assert_msg(exists(kept[i]), "%s was removed", kept[i]);
        remove(kept[i]);
    }
    /* the save left no temporary of its own, and its pair loads */
    char own[256];
    snprintf(own, sizeof own, "build/check_model_stale-0001.params.tmp.%ld", self);
    ck_assert(!exists(own));
    snprintf(own, sizeof own, "build/check_model_stale-symbol.json.tmp.%ld", self);
    ck_assert(!exists(own));
    mxc_model *loaded = NULL;
    CK_OK(mxc_model_load("build/check_model_stale", 1, &loaded));
    ck_assert_ptr_nonnull(mxc_model_param(loaded, "fc1_weight"));
    mxc_model_free(loaded);
    /* a folder that cannot be written: the temporary's path and the reason */
    CK_ERR(MXC_EIO, mxc_model_save(model, "build/no-such-folder/m", 1));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "build/no-such-folder/m-symbol.json.tmp."));
    mxc_model_free(model);
}
END_TEST

/* Log lines at warn level and above, for the test to read. */
static char warnings[4096];

static void keep_warning(void *user, int level, const char *message) {
    (void)user;
    if (level >= MXC_LOG_WARN && strlen(warnings) + strlen(message) + 2 < sizeof warnings) {
        strcat(warnings, message);
        strcat(warnings, "\n");
    }
}

static void write_file(const char *path, const char *text, long truncate_to) {
    if (truncate_to >= 0) {
        ck_assert_int_eq(truncate(path, truncate_to), 0);
        return;
    }
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Resuming takes the newest checkpoint that loads, warning about and skipping damaged
 * newer ones; when none loads the error names the damaged file. */
START_TEST(test_checkpoint_resume_fallback) {
    const char *prefix = "build/check_model_resume";
    char path[256];
    for (int e = 0; e <= 10; e++) {
        snprintf(path, sizeof path, "%s-%04d.params", prefix, e);
        remove(path);
    }
    mxc_model *model = fitted_mlp(4, 1), *m = NULL;
    for (int e = 1; e <= 3; e++)
        CK_OK(mxc_model_save(model, prefix, e));
    mxc_model_free(model);
    int epoch = -1;
    CK_OK(mxc_model_load_latest(prefix, &epoch, &m));
    ck_assert_int_eq(epoch, 3);
    ck_assert_ptr_nonnull(m);
    mxc_model_free(m);

    mxc_set_log(keep_warning, NULL, MXC_LOG_WARN);
    /* truncated newest parameters: epoch 2, with a warning naming epoch 3's file */
    write_file("build/check_model_resume-0003.params", NULL, 100);
    warnings[0] = '\0';
    CK_OK(mxc_model_load_latest(prefix, &epoch, &m));
    ck_assert_int_eq(epoch, 2);
    ck_assert_ptr_nonnull(mxc_model_param(m, "fc1_weight"));
    mxc_model_free(m);
    ck_assert_msg(strstr(warnings, "skipping damaged checkpoint "
                                   "build/check_model_resume-0003.params") != NULL,
                  "warnings: %s", warnings);
    /* garbage in epoch 2 too: epoch 1 */
    write_file("build/check_model_resume-0002.params", "not a params file", -1);
    CK_OK(mxc_model_load_latest(prefix, &epoch, &m));
    ck_assert_int_eq(epoch, 1);
    mxc_model_free(m);

    /* an empty symbol file: no pair loads; the error names the symbol file */
    write_file("build/check_model_resume-symbol.json", "", -1);
    warnings[0] = '\0';
    epoch = -1;
    m = (mxc_model *)1;
    CK_ERR(MXC_EFORMAT, mxc_model_load_latest(prefix, &epoch, &m));
    ck_assert_ptr_null(m);
    ck_assert_int_eq(epoch, 0);
    ck_assert_msg(strstr(mxc_last_error(), "build/check_model_resume-symbol.json' is empty"), "%s",
                  mxc_last_error());
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "none of the 3 checkpoint(s)"));
    ck_assert_ptr_nonnull(strstr(warnings, "build/check_model_resume-0001.params"));
    CK_ERR(MXC_EFORMAT, mxc_model_load(prefix, 1, &m));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "build/check_model_resume-symbol.json"));
    /* a malformed one: the parser's position, and the file */
    write_file("build/check_model_resume-symbol.json", "{\"nodes\": [", -1);
    CK_ERR(MXC_EFORMAT, mxc_model_load(prefix, 1, &m));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "build/check_model_resume-symbol.json"));
    mxc_set_log(NULL, NULL, MXC_LOG_WARN);

    /* no checkpoint at all: nothing to resume, which is not an error */
    m = (mxc_model *)1;
    CK_OK(mxc_model_load_latest("build/check_model_none", &epoch, &m));
    ck_assert_ptr_null(m);
    ck_assert_int_eq(epoch, 0);
    CK_OK(mxc_model_load_latest("build/no-such-folder/m", &epoch, &m));
    ck_assert_ptr_null(m);
    CK_ERR(MXC_EINVAL, mxc_model_load_latest(NULL, &epoch, &m));
    CK_ERR(MXC_EINVAL, mxc_model_load_latest(prefix, NULL, &m));
    CK_ERR(MXC_EINVAL, mxc_model_load_latest(prefix, &epoch, NULL));
}
END_TEST

/* A fit waits for its own arrays only: a failure of an unrelated array neither fails the
 * fit nor is cleared by it; a copy into the array makes it readable again. */
START_TEST(test_fit_leaves_other_failures) {
    mxc_ndarray *unwritten = NULL, *failed = NULL;
    CK_OK(mxc_nd_create(&SHAPE(3), MXC_FLOAT32, mxc_cpu(), 1, &unwritten));
    CK_OK(mxc_nd_add_scalar(unwritten, 1, &failed)); /* reads what nothing wrote: fails */
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(failed));
    mxc_model *model = toy_model(4);
    mxc_data_iter *train = toy_iter(50, 5);
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.quiet = 1;
    CK_OK(mxc_model_fit(model, train, NULL, &cfg, NULL));
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(failed));
    const float fresh[3] = {4, 5, 6};
    CK_OK(mxc_nd_sync_copy_from_cpu(failed, fresh, sizeof fresh));
    float *got = host(failed);
    ck_assert_mem_eq(got, fresh, sizeof fresh);
    free(got);
    mxc_nd_free(unwritten);
    mxc_nd_free(failed);
    mxc_model_free(model);
    mxc_data_iter_free(train);
}
END_TEST

/* Fit, score and predict on a context: cpu(0) explicitly is the default; a GPU this build
 * or machine lacks, or a context of no known type, is a clear error before any work. With
 * a GPU, a fit on gpu(0) ends with the CPU's metrics and weights (within float rounding),
 * its checkpoint is a host file the CPU loads, and score and predict on the GPU agree with
 * the CPU's. */
START_TEST(test_fit_on_context) {
    int ngpu = mxc_gpu_count();
    mxc_model *model = toy_model(8);
    mxc_data_iter *train = toy_iter(20, 7), *test = toy_iter(50, 8);
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.quiet = 1;
    cfg.seed = 13;
    cfg.optimizer.lr = 0.1f;
    cfg.optimizer.momentum = 0.9f;
    cfg.num_epochs = 2;
    mxc_fit_result on_cpu, on_gpu;
    cfg.ctx = mxc_cpu();
    CK_OK(mxc_model_fit(model, train, test, &cfg, &on_cpu));
    double acc = 0;
    mxc_ndarray *pred = NULL;
    cfg.ctx = mxc_gpu(ngpu); /* one past the last */
    mxc_model *fresh = toy_model(8);
    CK_ERR(MXC_ENODEV, mxc_model_fit(fresh, train, NULL, &cfg, NULL));
    ck_assert_msg(strstr(mxc_last_error(), "mxc_model_fit") && strstr(mxc_last_error(), "gpu("),
                  "%s", mxc_last_error());
    ck_assert_ptr_null(mxc_model_param(fresh, "fc1_weight")); /* nothing was done */
    CK_ERR(MXC_ENODEV, mxc_model_score_on(model, mxc_gpu(ngpu), test, "acc", &acc));
    ck_assert(isnan(acc));
    CK_ERR(MXC_ENODEV, mxc_model_predict_on(model, mxc_gpu(ngpu), test, &pred));
    ck_assert_ptr_null(pred);
    CK_ERR(MXC_ENODEV, mxc_model_score_on(model, mxc_gpu(-1), test, "acc", &acc));
    CK_ERR(MXC_EINVAL, mxc_model_score_on(model, (mxc_context){7, 0}, test, "acc", &acc));
    cfg.ctx = (mxc_context){MXC_CPU_PINNED, 0};
    CK_ERR(MXC_EINVAL, mxc_model_fit(fresh, train, NULL, &cfg, NULL));
    CK_OK(mxc_model_score_on(model, (mxc_context){0, 0}, test, "acc", &acc)); /* zero: CPU */
    ck_assert_double_eq_tol(acc, on_cpu.eval_metric, 1e-9);
    if (ngpu == 0) {
        cfg.ctx = mxc_gpu(0);
        CK_ERR(MXC_ENODEV, mxc_model_fit(fresh, train, NULL, &cfg, NULL));
        ck_assert_ptr_nonnull(strstr(mxc_last_error(), "gpu(0)"));
    } else {
        cfg.ctx = mxc_gpu(0);
        cfg.checkpoint_prefix = "build/check_model_gpu";
        mxc_data_iter *again = toy_iter(20, 7); /* the CPU fit's batches, in its order */
        CK_OK(mxc_model_fit(fresh, again, test, &cfg, &on_gpu));
        mxc_data_iter_free(again);
        ck_assert_double_eq_tol(on_gpu.train_metric, on_cpu.train_metric, 0.01);
        ck_assert_double_eq_tol(on_gpu.eval_metric, on_cpu.eval_metric, 0.01);
        const char *names[] = {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"};
        for (int k = 0; k < 4; k++) {
            mxc_ndarray *a = mxc_model_param(model, names[k]),
                        *b = mxc_model_param(fresh, names[k]);
            mxc_context where;
            CK_OK(mxc_nd_get_context(b, &where));
            ck_assert_int_eq(where.dev_type, MXC_CPU); /* the model's parameters stay home */
            float *x = host(a), *y = host(b);
            for (int64_t i = 0; i < mxc_nd_size(a); i++)
                ck_assert_msg(fabsf(x[i] - y[i]) <= 1e-3f + 1e-3f * fabsf(x[i]),
                              "%s[%lld]: cpu %g, gpu %g", names[k], (long long)i, x[i], y[i]);
            free(x);
            free(y);
        }
        mxc_model *loaded = NULL; /* the GPU's checkpoint, on the CPU */
        CK_OK(mxc_model_load("build/check_model_gpu", 2, &loaded));
        double cpu_acc = 0, gpu_acc = 0;
        CK_OK(mxc_model_score(loaded, test, "acc", &cpu_acc));
        CK_OK(mxc_model_score_on(loaded, mxc_gpu(0), test, "acc", &gpu_acc));
        ck_assert_double_eq_tol(cpu_acc, on_gpu.eval_metric, 0.01);
        ck_assert_double_eq_tol(gpu_acc, cpu_acc, 0.01);
        mxc_ndarray *cpu_pred = NULL;
        CK_OK(mxc_model_predict(loaded, test, &cpu_pred));
        CK_OK(mxc_model_predict_on(loaded, mxc_gpu(0), test, &pred));
        ck_assert_int_eq(mxc_nd_size(pred), mxc_nd_size(cpu_pred));
        float *x = host(cpu_pred), *y = host(pred);
        for (int64_t i = 0; i < mxc_nd_size(pred); i++)
            ck_assert_float_eq_tol(x[i], y[i], 1e-4f);
        free(x);
        free(y);
        mxc_nd_free(cpu_pred);
        mxc_nd_free(pred);
        mxc_model_free(loaded);
    }
    mxc_model_free(fresh);
    mxc_model_free(model);
    mxc_data_iter_free(train);
    mxc_data_iter_free(test);
}
END_TEST

/* toy_model(8) fitted for 2 epochs (SGD momentum, batch 20) on `num` contexts (0: the
 * single-context path without a store) with store `kv`. */
static mxc_model *fitted_on(const mxc_context *ctxs, int num, const char *kv) {
    mxc_model *model = toy_model(8);
    mxc_data_iter *train = toy_iter(20, 4);
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.num_epochs = 2;
    cfg.optimizer.lr = 0.1f;
    cfg.optimizer.momentum = 0.9f;
    cfg.seed = 11;
    cfg.quiet = 1;
    cfg.ctxs = ctxs;
    cfg.num_ctxs = num;
    cfg.kvstore = kv;
    mxc_fit_result r;
    CK_OK(mxc_model_fit(model, train, NULL, &cfg, &r));
    ck_assert(r.train_metric > 0.8);
    mxc_data_iter_free(train);
    return model;
}

/* Two (and three: 7 + 7 + 6 rows) CPU contexts with a local store give the weights of
 * one context at the same global batch: the sum of the slices' gradients is the whole
 * batch's gradient up to rounding. */
START_TEST(test_fit_several_contexts) {
    const mxc_context ctxs[3] = {{MXC_CPU, 0}, {MXC_CPU, 1}, {MXC_CPU, 2}};
    const char *names[] = {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"};
    mxc_model *one = fitted_on(NULL, 0, NULL);
    struct {
        int num;
        const char *kv;
    } cases[] = {{2, "local"}, {3, NULL}, {1, "local"}, {2, "device"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mxc_model *many = fitted_on(ctxs, cases[c].num, cases[c].kv);
        for (int k = 0; k < 4; k++) {
            float *x = host(mxc_model_param(one, names[k])),
                  *y = host(mxc_model_param(many, names[k]));
            for (int64_t i = 0; i < mxc_nd_size(mxc_model_param(one, names[k])); i++)
                ck_assert_msg(fabsf(x[i] - y[i]) <= 1e-5f + 1e-5f * fabsf(x[i]),
                              "%d contexts, %s[%lld]: %g against %g", cases[c].num, names[k],
                              (long long)i, y[i], x[i]);
            free(x);
            free(y);
        }
        mxc_model_free(many);
    }
    mxc_model_free(one);
}
END_TEST

/* BatchNorm's moving statistics with two contexts: each executor sees its half of every
 * batch (here the halves differ: feature 0 is +1 in the first, -1 in the second), and at
 * the end of an epoch their statistics are averaged, as MXNet's Module does — the model
 * holds the whole batches' mean (0), not the first context's (+1). */
static const char bn_net_json[] =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"bn_gamma\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"bn_beta\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"bn_moving_mean\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"bn_moving_var\", \"inputs\": []},"
    "{\"op\": \"BatchNorm\", \"name\": \"bn\", \"inputs\": [[0, 0, 0], [1, 0, 0], [2, 0, 0], "
    "[3, 0, 1], [4, 0, 1]]},"
    "{\"op\": \"null\", \"name\": \"fc_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc_bias\", \"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"fc\", \"attrs\": {\"num_hidden\": \"2\"}, "
    "\"inputs\": [[5, 0, 0], [6, 0, 0], [7, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"softmax_label\", \"inputs\": []},"
    "{\"op\": \"SoftmaxOutput\", \"name\": \"softmax\", \"inputs\": [[8, 0, 0], [9, 0, 0]]}],"
    "\"arg_nodes\": [0, 1, 2, 3, 4, 6, 7, 9], \"heads\": [[10, 0, 0]]}";

START_TEST(test_fit_several_contexts_average_aux) {
    float x[2 * 400], y[400];
    for (int i = 0; i < 400; i++) {
        x[2 * i] = (i % 20 < 10 ? 1.0f : -1.0f) + 0.01f * (float)(i % 7);
        x[2 * i + 1] = (float)((i * 13) % 17) / 17.0f;
        y[i] = (float)(i % 2);
    }
    mxc_ndarray *data = array(SHAPE(400, 2), x), *label = array(SHAPE(400), y);
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = 20;
    mxc_data_iter *train = NULL;
    CK_OK(mxc_data_iter_create_array(data, label, &p, &train));
    const mxc_context ctxs[2] = {{MXC_CPU, 0}, {MXC_CPU, 1}};
    for (int num = 1; num <= 2; num++) {
        mxc_model *model = model_from_json(bn_net_json);
        mxc_fit_config cfg;
        mxc_fit_config_init(&cfg);
        cfg.num_epochs = 2;
        cfg.optimizer.lr = 0;
        cfg.quiet = 1;
        cfg.ctxs = ctxs;
        cfg.num_ctxs = num;
        CK_OK(mxc_model_fit(model, train, NULL, &cfg, NULL));
        float *mean = host(mxc_model_param(model, "bn_moving_mean"));
        ck_assert_msg(fabsf(mean[0] - 0.03f) < 0.05f,
                      "%d context(s): moving mean of feature 0 is %g, the batches' is 0.03", num,
                      mean[0]);
        free(mean);
        mxc_model_free(model);
    }
    mxc_data_iter_free(train);
    mxc_nd_free(data);
    mxc_nd_free(label);
}
END_TEST

START_TEST(test_fit_bad_kvstore) {
    mxc_model *model = toy_model(4);
    mxc_data_iter *train = toy_iter(20, 4);
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.quiet = 1;
    cfg.kvstore = "dist_async";
    CK_ERR(MXC_EINVAL, mxc_model_fit(model, train, NULL, &cfg, NULL));
    ck_assert_msg(strstr(mxc_last_error(), "mxc_model_fit") &&
                      strstr(mxc_last_error(), "dist_async"),
                  "%s", mxc_last_error());
    cfg.kvstore = NULL;
    cfg.num_ctxs = 2; /* and no list */
    CK_ERR(MXC_EINVAL, mxc_model_fit(model, train, NULL, &cfg, NULL));
    const mxc_context bad[2] = {{MXC_CPU, 0}, {MXC_CPU, -1}};
    cfg.ctxs = bad;
    CK_ERR(MXC_EINVAL, mxc_model_fit(model, train, NULL, &cfg, NULL));
    ck_assert_ptr_null(mxc_model_param(model, "fc1_weight")); /* nothing was done */
    mxc_model_free(model);
    mxc_data_iter_free(train);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_test(tc, test_init_patterns);
    tcase_add_test(tc, test_init_xavier_range_and_seed);
    tcase_add_test(tc, test_init_other_schemes);
    tcase_add_test(tc, test_init_hints);
    tcase_add_test(tc, test_metrics_values);
    tcase_add_test(tc, test_metric_accuracy_nan);
    tcase_add_test(tc, test_metric_mse);
    tcase_add_test(tc, test_networks);
    tcase_add_test(tc, test_fit_checkpoint_score_predict);
    tcase_add_test(tc, test_fit_reproducible);
    tcase_add_test(tc, test_fit_gluon_names_and_hints);
    tcase_add_test(tc, test_fit_symbol_multipliers);
    tcase_add_test(tc, test_fit_bad_multiplier);
    tcase_add_test(tc, test_predict_every_output);
    tcase_add_test(tc, test_checkpoint_removes_stale_temps);
    tcase_add_test(tc, test_checkpoint_resume_fallback);
    tcase_add_test(tc, test_fit_leaves_other_failures);
    tcase_add_test(tc, test_fit_on_context);
    tcase_add_test(tc, test_fit_several_contexts);
    tcase_add_test(tc, test_fit_several_contexts_average_aux);
    tcase_add_test(tc, test_fit_bad_kvstore);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }

/*
 * tests/check_handles.c — stale and foreign handles (DESIGN.md section 9, docs/c-api.md
 * "Handle lifetimes"): for every handle type, a freed handle passed back to the library
 * is MXC_EMISUSE with a message naming the call and saying the handle is stale, never a
 * read of freed memory (run this suite under AddressSanitizer too) and never an action
 * on another object; a pointer that is no handle of the expected type (a stack copy of a
 * handle, a page that cannot be read, a handle of another type, an address inside a
 * handle) is MXC_EMISUSE without being read; freeing a handle twice is logged and leaves
 * every live object alone, also after the memory would have been reused by malloc.
 */
#include "mxc/engine.h"
#include "mxc/executor.h"
#include "mxc/io.h"
#include "mxc/kvstore.h"
#include "mxc/model.h"
#include "mxc/ndarray.h"
#include "mxc/networks.h"
#include "mxc/op.h"
#include "mxc/symbol.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The quarantine every handle type keeps at least (docs/c-api.md): a freed handle stays
 * stale for this many later frees of its type. */
#define MIN_QUARANTINE 4096

/* ---- Error lines ------------------------------------------------------------------- */

/* Destructors return void: a bad handle given to one is reported on the log. */
static struct {
    pthread_mutex_t lock;
    int count;
    char last[1024];
} logged = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void log_sink(void *user, int level, const char *message) {
    (void)user;
    if (level < MXC_LOG_ERROR)
        return;
    pthread_mutex_lock(&logged.lock);
    logged.count++;
    snprintf(logged.last, sizeof logged.last, "%s", message);
    pthread_mutex_unlock(&logged.lock);
}

static void capture_log(void) {
    pthread_mutex_lock(&logged.lock);
    logged.count = 0;
    logged.last[0] = '\0';
    pthread_mutex_unlock(&logged.lock);
    mxc_set_log(log_sink, NULL, MXC_LOG_ERROR);
}

/* Asserts that exactly one error line was logged since the last call (or capture_log),
 * naming `fn` and containing `word`. */
static void expect_logged(const char *fn, const char *word) {
    pthread_mutex_lock(&logged.lock);
    int n = logged.count;
    char last[1024];
    snprintf(last, sizeof last, "%s", logged.last);
    logged.count = 0;
    logged.last[0] = '\0';
    pthread_mutex_unlock(&logged.lock);
    ck_assert_msg(n == 1, "%d error lines logged, expected 1 from %s (last: %s)", n, fn, last);
    ck_assert_msg(strstr(last, fn) && strstr(last, word), "logged \"%s\": expected %s and %s", last,
                  fn, word);
}

static void expect_nothing_logged(void) {
    pthread_mutex_lock(&logged.lock);
    int n = logged.count;
    pthread_mutex_unlock(&logged.lock);
    ck_assert_msg(n == 0, "%d unexpected error lines: %s", n, logged.last);
}

/* ---- Expectations ------------------------------------------------------------------ */

/* `call` fails with MXC_EMISUSE and a message naming `fn` and containing `word`
 * ("stale" for freed handles, "not" for pointers that are no handle of the type). */
#define EXPECT_BAD(fn, word, call)                                                             \
    do {                                                                                       \
        mxc_clear_error();                                                                     \
        int rc_ = (call);                                                                      \
        ck_assert_msg(rc_ == MXC_EMISUSE, "%s = %s (%s), expected MXC_EMISUSE", #call,         \
                      mxc_err_name(rc_), mxc_last_error());                                    \
        ck_assert_msg(strstr(mxc_last_error(), (fn)) && strstr(mxc_last_error(), (word)),      \
                      "%s: message \"%s\" should name %s and say %s", #call, mxc_last_error(), \
                      (fn), (word));                                                           \
    } while (0)

#define EXPECT_STALE(fn, call) EXPECT_BAD(fn, "stale", call)

/* A getter without a status returns its documented value and records MXC_EMISUSE. */
#define EXPECT_BAD_GETTER(fn, word, cond)                                                      \
    do {                                                                                       \
        mxc_clear_error();                                                                     \
        ck_assert_msg((cond), "%s on a bad handle", #cond);                                    \
        ck_assert_msg(mxc_last_error_code() == MXC_EMISUSE, "%s: last error %s (%s)", #cond,   \
                      mxc_err_name(mxc_last_error_code()), mxc_last_error());                  \
        ck_assert_msg(strstr(mxc_last_error(), (fn)) && strstr(mxc_last_error(), (word)),      \
                      "%s: message \"%s\" should name %s and say %s", #cond, mxc_last_error(), \
                      (fn), (word));                                                           \
    } while (0)

/* ---- Objects to work on ------------------------------------------------------------ */

static mxc_ndarray *nd_filled(int64_t n, float value) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_full(&SHAPE(n), MXC_FLOAT32, mxc_cpu(), value, &a));
    return a;
}

/* Asserts that every element of the (n) array `a` is `value`. */
static void expect_values(mxc_ndarray *a, int64_t n, float value) {
    float buf[64];
    ck_assert_int_le(n, 64);
    CK_OK(mxc_nd_sync_copy_to_cpu(a, buf, sizeof(float) * (size_t)n));
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(buf[i] == value, "element %lld is %g, expected %g", (long long)i,
                      (double)buf[i], (double)value);
}

static mxc_symbol *mlp(void) {
    mxc_symbol *net = NULL;
    CK_OK(mxc_net_mlp(1, (const int[]){4}, "relu", 2, &net));
    return net;
}

static mxc_executor *bound_mlp(mxc_symbol *net) {
    mxc_executor *x = NULL;
    const char *names[] = {"data"};
    mxc_shape shapes[] = {SHAPE(4, 3)};
    CK_OK(mxc_executor_simple_bind(net, mxc_cpu(), 1, names, shapes, MXC_GRAD_WRITE, &x));
    return x;
}

/* Eight samples of three features and a class label each, in batches of four. */
static mxc_data_iter *toy_iter(void) {
    float data[24], label[8];
    for (int i = 0; i < 24; i++)
        data[i] = (float)(i % 5) / 5;
    for (int i = 0; i < 8; i++)
        label[i] = (float)(i % 2);
    mxc_ndarray *d = NULL, *l = NULL;
    CK_OK(mxc_nd_create(&SHAPE(8, 3), MXC_FLOAT32, mxc_cpu(), 0, &d));
    CK_OK(mxc_nd_create(&SHAPE(8), MXC_FLOAT32, mxc_cpu(), 0, &l));
    CK_OK(mxc_nd_sync_copy_from_cpu(d, data, sizeof data));
    CK_OK(mxc_nd_sync_copy_from_cpu(l, label, sizeof label));
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = 4;
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_array(d, l, &p, &it));
    mxc_nd_free(d);
    mxc_nd_free(l);
    return it;
}

static mxc_optimizer *sgd(void) {
    mxc_optimizer_config cfg = {.kind = MXC_OPT_SGD, .lr = 0.1f};
    mxc_optimizer *o = NULL;
    CK_OK(mxc_optimizer_create(&cfg, &o));
    return o;
}

static mxc_metric *metric(const char *name) {
    mxc_metric *m = NULL;
    CK_OK(mxc_metric_create(name, 1, &m));
    return m;
}

static mxc_model *model_of_mlp(void) {
    mxc_symbol *net = mlp();
    mxc_model *m = NULL;
    CK_OK(mxc_model_create(net, &m));
    mxc_symbol_free(net);
    return m;
}

static void quiet_fit_config(mxc_fit_config *cfg) {
    mxc_fit_config_init(cfg);
    cfg->num_epochs = 1;
    cfg->quiet = 1;
    cfg->seed = 3;
}

/* A page that faults on any access: a pointer into it can only be checked without being
 * read. */
static void *unreadable_page(void) {
    void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    return p;
}

/* ---- The scenario ---------------------------------------------------------- */

/* Create a, free a, create arrays: with plain malloc the next array got a's address, so
 * a second mxc_nd_free(a) freed that live array. Now a's address is not reused within the
 * quarantine, the second free is reported and does nothing, and every array made after
 * it still holds its values. */
START_TEST(test_nd_double_free_after_reuse) {
    capture_log();
    enum { N = 64 };
    mxc_ndarray *a = nd_filled(4, 1);
    mxc_nd_free(a);
    mxc_ndarray *b[N];
    int reused = -1;
    for (int i = 0; i < N; i++) {
        b[i] = nd_filled(4, (float)i);
        if (b[i] == a && reused < 0)
            reused = i;
    }
    ck_assert_msg(reused < 0, "array %d of those made after the free got the freed address %p",
                  reused, (void *)a);
    mxc_nd_free(a);
    expect_logged("mxc_nd_free", "stale");
    for (int i = 0; i < N; i++)
        expect_values(b[i], 4, (float)i);
    for (int i = 0; i < N; i++)
        mxc_nd_free(b[i]);
    CK_OK(mxc_nd_wait_all());
    expect_nothing_logged();
}
END_TEST

/* A handle stays stale for at least MIN_QUARANTINE later frees of its type: no handle made
 * meanwhile has its address, and it is still reported as stale (symbols: no engine
 * involved, so the loop is quick). */
START_TEST(test_quarantine_bound) {
    mxc_symbol *stale = NULL;
    CK_OK(mxc_symbol_variable("x", &stale));
    mxc_symbol_free(stale);
    for (int i = 0; i < MIN_QUARANTINE; i++) {
        mxc_symbol *s = NULL;
        CK_OK(mxc_symbol_variable("y", &s));
        ck_assert_msg(s != stale, "the freed symbol's address came back after %d frees", i);
        mxc_symbol_free(s);
    }
    int n = 0;
    EXPECT_STALE("mxc_symbol_num_outputs", mxc_symbol_num_outputs(stale, &n));
}
END_TEST

/* ---- Stale handles, type by type ---------------------------------------------------- */

START_TEST(test_stale_ndarray) {
    capture_log();
    mxc_ndarray *good = nd_filled(4, 2);
    mxc_ndarray *a = nd_filled(4, 1);
    mxc_nd_free(a);
    mxc_ndarray *out = NULL;
    mxc_shape s;
    mxc_context ctx;
    float buf[4] = {0};
    EXPECT_STALE("mxc_nd_get_shape", mxc_nd_get_shape(a, &s));
    EXPECT_STALE("mxc_nd_get_context", mxc_nd_get_context(a, &ctx));
    EXPECT_STALE("mxc_nd_reshape", mxc_nd_reshape(a, &SHAPE(2, 2), &out));
    EXPECT_STALE("mxc_nd_slice", mxc_nd_slice(a, 0, 1, &out));
    EXPECT_STALE("mxc_nd_wait_to_read", mxc_nd_wait_to_read(a));
    EXPECT_STALE("mxc_nd_sync_copy_from_cpu", mxc_nd_sync_copy_from_cpu(a, buf, sizeof buf));
    EXPECT_STALE("mxc_nd_sync_copy_to_cpu", mxc_nd_sync_copy_to_cpu(a, buf, sizeof buf));
    EXPECT_STALE("mxc_nd_copy_to", mxc_nd_copy_to(good, a));
    EXPECT_STALE("mxc_nd_add", mxc_nd_add(good, a, &out));
    EXPECT_STALE("mxc_nd_fill", mxc_nd_fill(a, 3));
    EXPECT_STALE("mxc_nd_random_uniform", mxc_nd_random_uniform(a, 0, 1));
    mxc_ndarray *list[] = {good, a};
    EXPECT_STALE("mxc_nd_save", mxc_nd_save("/nonexistent-dir/x.params", 2, list, NULL));
    mxc_ndarray *in[] = {good}, *outs[] = {a};
    EXPECT_STALE("relu", /* invoke names the operator */
                 mxc_imperative_invoke("relu", 0, NULL, NULL, 1, in, 1, outs, 0));
    EXPECT_BAD_GETTER("mxc_nd_size", "stale", mxc_nd_size(a) == -1);
    EXPECT_BAD_GETTER("mxc_nd_dtype", "stale", mxc_nd_dtype(a) == -1);
    ck_assert_ptr_null(out);
    mxc_nd_free(a);
    expect_logged("mxc_nd_free", "stale");
    expect_values(good, 4, 2);
    mxc_nd_free(good);
    CK_OK(mxc_nd_wait_all());
    expect_nothing_logged();
}
END_TEST

START_TEST(test_stale_symbol) {
    capture_log();
    mxc_symbol *sym = mlp();
    mxc_symbol_free(sym);
    int n = 0;
    const char *name = NULL;
    const char *const *names = NULL;
    mxc_symbol *out = NULL;
    EXPECT_STALE("mxc_symbol_num_outputs", mxc_symbol_num_outputs(sym, &n));
    EXPECT_STALE("mxc_symbol_get_name", mxc_symbol_get_name(sym, &name));
    EXPECT_STALE("mxc_symbol_list_arguments", mxc_symbol_list_arguments(sym, &n, &names));
    EXPECT_STALE("mxc_symbol_copy", mxc_symbol_copy(sym, &out));
    EXPECT_STALE("mxc_symbol_get_internals", mxc_symbol_get_internals(sym, &out));
    EXPECT_STALE("mxc_symbol_group", mxc_symbol_group(1, &sym, &out));
    EXPECT_STALE("mxc_symbol_set_attr", mxc_symbol_set_attr(sym, "k", "v"));
    EXPECT_STALE("mxc_symbol_save_json", mxc_symbol_save_json(sym, &name));
    mxc_shape shapes[] = {SHAPE(4, 3)};
    const char *in_names[] = {"data"};
    EXPECT_STALE("mxc_symbol_infer_shape",
                 mxc_symbol_infer_shape(sym, 1, in_names, shapes, NULL, NULL, NULL, NULL, NULL));
    EXPECT_STALE("mxc_symbol_to_dot", mxc_symbol_to_dot(sym, 0, NULL, NULL, 0, &name));
    /* the layers above check the symbols they are given as well */
    mxc_executor *x = NULL;
    EXPECT_STALE("mxc_executor_simple_bind",
                 mxc_executor_simple_bind(sym, mxc_cpu(), 1, in_names, shapes, MXC_GRAD_WRITE, &x));
    EXPECT_STALE("mxc_executor_bind",
                 mxc_executor_bind(sym, mxc_cpu(), 0, NULL, NULL, NULL, 0, NULL, &x));
    ck_assert_ptr_null(x);
    mxc_model *m = NULL;
    EXPECT_STALE("mxc_model_create", mxc_model_create(sym, &m));
    ck_assert_ptr_null(m);
    ck_assert_ptr_null(out);
    mxc_symbol_free(sym);
    expect_logged("mxc_symbol_free", "stale");
}
END_TEST

START_TEST(test_stale_executor) {
    capture_log();
    mxc_symbol *net = mlp();
    mxc_executor *x = bound_mlp(net);
    mxc_executor_free(x);
    int n = 0;
    mxc_ndarray *const *arrays = NULL, *const *grads = NULL, *const *aux = NULL;
    const char *text = NULL;
    mxc_exec_plan_info info;
    mxc_executor *out = NULL;
    EXPECT_STALE("mxc_executor_forward", mxc_executor_forward(x, 1));
    EXPECT_STALE("mxc_executor_backward", mxc_executor_backward(x, 0, NULL));
    EXPECT_STALE("mxc_executor_outputs", mxc_executor_outputs(x, &n, &arrays));
    EXPECT_STALE("mxc_executor_arrays", mxc_executor_arrays(x, &n, &arrays, &grads, &n, &aux));
    EXPECT_STALE("mxc_executor_plan_info", mxc_executor_plan_info(x, &info));
    EXPECT_STALE("mxc_executor_print", mxc_executor_print(x, &text));
    EXPECT_STALE("mxc_executor_set_monitor", mxc_executor_set_monitor(x, NULL, NULL));
    mxc_shape shapes[] = {SHAPE(2, 3)};
    const char *names[] = {"data"};
    EXPECT_STALE("mxc_executor_reshape", mxc_executor_reshape(x, 1, names, shapes, &out));
    ck_assert_ptr_null(out);
    mxc_clear_error();
    ck_assert_int_lt(mxc_executor_entry_block(x, 0), 0);
    ck_assert_int_eq(mxc_last_error_code(), MXC_EMISUSE);
    mxc_executor_free(x);
    expect_logged("mxc_executor_free", "stale");
    mxc_symbol_free(net);
    CK_OK(mxc_nd_wait_all());
    expect_nothing_logged();
}
END_TEST

START_TEST(test_stale_data_iter) {
    capture_log();
    mxc_data_iter *it = toy_iter();
    mxc_data_iter_free(it);
    mxc_shape s;
    EXPECT_STALE("mxc_data_iter_next", mxc_data_iter_next(it));
    EXPECT_STALE("mxc_data_iter_reset", mxc_data_iter_reset(it));
    EXPECT_STALE("mxc_data_iter_provide_data", mxc_data_iter_provide_data(it, &s));
    EXPECT_STALE("mxc_data_iter_provide_label", mxc_data_iter_provide_label(it, &s));
    EXPECT_BAD_GETTER("mxc_data_iter_data", "stale", mxc_data_iter_data(it) == NULL);
    EXPECT_BAD_GETTER("mxc_data_iter_label", "stale", mxc_data_iter_label(it) == NULL);
    EXPECT_BAD_GETTER("mxc_data_iter_pad", "stale", mxc_data_iter_pad(it) == -1);
    EXPECT_BAD_GETTER("mxc_data_iter_num_samples", "stale", mxc_data_iter_num_samples(it) == -1);
    EXPECT_BAD_GETTER("mxc_data_iter_num_batches", "stale", mxc_data_iter_num_batches(it) == -1);
    /* a model given a stale iterator */
    mxc_model *m = model_of_mlp();
    mxc_fit_config cfg;
    quiet_fit_config(&cfg);
    double value = 0;
    mxc_ndarray *pred = NULL;
    EXPECT_STALE("mxc_model_fit", mxc_model_fit(m, it, NULL, &cfg, NULL));
    mxc_data_iter *good = toy_iter();
    EXPECT_STALE("mxc_model_fit", mxc_model_fit(m, good, it, &cfg, NULL));
    EXPECT_STALE("mxc_model_score", mxc_model_score(m, it, "acc", &value));
    EXPECT_STALE("mxc_model_predict", mxc_model_predict(m, it, &pred));
    ck_assert_ptr_null(pred);
    mxc_data_iter_free(it);
    expect_logged("mxc_data_iter_free", "stale");
    ck_assert_int_eq(mxc_data_iter_next(good), 1); /* the live one still works */
    mxc_data_iter_free(good);
    mxc_model_free(m);
    CK_OK(mxc_nd_wait_all());
    expect_nothing_logged();
}
END_TEST

/* A freed store: every function is MXC_EMISUSE "stale"; a live store given a stale array,
 * a stale optimizer given to set_optimizer, a double free. */
START_TEST(test_stale_kvstore) {
    capture_log();
    mxc_kvstore *kv = NULL;
    CK_OK(mxc_kvstore_create("local", &kv));
    mxc_kvstore_free(kv);
    mxc_ndarray *w = nd_filled(4, 1);
    int key = 0, r = 0;
    EXPECT_STALE("mxc_kvstore_init", mxc_kvstore_init(kv, 1, &key, &w));
    EXPECT_STALE("mxc_kvstore_push", mxc_kvstore_push(kv, 1, &key, &w, 0));
    EXPECT_STALE("mxc_kvstore_pull", mxc_kvstore_pull(kv, 1, &key, &w, 0));
    EXPECT_STALE("mxc_kvstore_pushpull", mxc_kvstore_pushpull(kv, 1, &key, &w, &w, 0));
    EXPECT_STALE("mxc_kvstore_set_updater", mxc_kvstore_set_updater(kv, NULL, NULL));
    EXPECT_STALE("mxc_kvstore_rank", mxc_kvstore_rank(kv, &r));
    EXPECT_STALE("mxc_kvstore_num_workers", mxc_kvstore_num_workers(kv, &r));
    EXPECT_STALE("mxc_kvstore_barrier", mxc_kvstore_barrier(kv));
    mxc_optimizer *o = sgd();
    EXPECT_STALE("mxc_kvstore_set_optimizer", mxc_kvstore_set_optimizer(kv, o));
    EXPECT_BAD_GETTER("mxc_kvstore_type", "stale", mxc_kvstore_type(kv) == NULL);
    mxc_kvstore_free(kv);
    expect_logged("mxc_kvstore_free", "stale");
    mxc_kvstore *live = NULL;
    CK_OK(mxc_kvstore_create("local", &live));
    CK_OK(mxc_kvstore_init(live, 1, &key, &w));
    mxc_optimizer_free(o);
    EXPECT_STALE("mxc_kvstore_set_optimizer", mxc_kvstore_set_optimizer(live, o));
    EXPECT_STALE("mxc_optimizer_save_states", mxc_optimizer_save_states(o, "never.tmp"));
    EXPECT_STALE("mxc_optimizer_load_states", mxc_optimizer_load_states(o, "never.tmp"));
    mxc_ndarray *g = nd_filled(4, 2);
    mxc_nd_free(g);
    EXPECT_STALE("mxc_kvstore_push", mxc_kvstore_push(live, 1, &key, &g, 0));
    EXPECT_STALE("mxc_kvstore_pull", mxc_kvstore_pull(live, 1, &key, &g, 0));
    CK_OK(mxc_kvstore_pull(live, 1, &key, &w, 0));
    expect_values(w, 4, 1);
    mxc_kvstore_free(live);
    mxc_nd_free(w);
    CK_OK(mxc_nd_wait_all());
    expect_nothing_logged();
}
END_TEST

START_TEST(test_stale_optimizer) {
    capture_log();
    mxc_optimizer *o = sgd();
    mxc_optimizer_free(o);
    mxc_ndarray *w = nd_filled(4, 1), *g = nd_filled(4, 1);
    EXPECT_STALE("mxc_optimizer_set_mult", mxc_optimizer_set_mult(o, "w", 1, 1));
    EXPECT_STALE("mxc_optimizer_update", mxc_optimizer_update(o, 0, "w", w, g));
    EXPECT_BAD_GETTER("mxc_optimizer_current_lr", "stale", isnan(mxc_optimizer_current_lr(o)));
    mxc_optimizer_free(o);
    expect_logged("mxc_optimizer_free", "stale");
    /* a live optimizer given a stale array */
    mxc_optimizer *live = sgd();
    mxc_nd_free(g);
    EXPECT_STALE("mxc_optimizer_update", mxc_optimizer_update(live, 0, "w", w, g));
    EXPECT_STALE("mxc_optimizer_update", mxc_optimizer_update(live, 0, "w", g, w));
    expect_values(w, 4, 1);
    mxc_optimizer_free(live);
    mxc_nd_free(w);
    CK_OK(mxc_nd_wait_all());
    expect_nothing_logged();
}
END_TEST

START_TEST(test_stale_metric) {
    capture_log();
    mxc_metric *m = metric("acc");
    mxc_metric_free(m);
    mxc_ndarray *label = nd_filled(4, 0), *pred = NULL;
    CK_OK(mxc_nd_zeros(&SHAPE(4, 2), MXC_FLOAT32, mxc_cpu(), &pred));
    int n = 0;
    const char *const *names = NULL;
    const double *values = NULL;
    EXPECT_STALE("mxc_metric_update", mxc_metric_update(m, 1, &label, &pred, 0));
    EXPECT_STALE("mxc_metric_get", mxc_metric_get(m, &n, &names, &values));
    EXPECT_STALE("mxc_metric_reset", mxc_metric_reset(m));
    mxc_metric *composite = metric("composite");
    EXPECT_STALE("mxc_metric_add", mxc_metric_add(composite, m));
    mxc_metric_free(m);
    expect_logged("mxc_metric_free", "stale");
    /* a live metric given a stale array */
    mxc_metric *live = metric("acc");
    mxc_nd_free(pred);
    EXPECT_STALE("mxc_metric_update", mxc_metric_update(live, 1, &label, &pred, 0));
    mxc_metric_free(live);
    mxc_metric_free(composite);
    mxc_nd_free(label);
    CK_OK(mxc_nd_wait_all());
    expect_nothing_logged();
}
END_TEST

START_TEST(test_stale_model) {
    capture_log();
    mxc_model *m = model_of_mlp();
    mxc_model_free(m);
    mxc_data_iter *it = toy_iter();
    mxc_fit_config cfg;
    quiet_fit_config(&cfg);
    double value = 0;
    mxc_ndarray *pred = NULL;
    EXPECT_STALE("mxc_model_save", mxc_model_save(m, "/nonexistent-dir/m", 1));
    EXPECT_STALE("mxc_model_fit", mxc_model_fit(m, it, NULL, &cfg, NULL));
    EXPECT_STALE("mxc_model_score", mxc_model_score(m, it, "acc", &value));
    EXPECT_STALE("mxc_model_predict", mxc_model_predict(m, it, &pred));
    EXPECT_BAD_GETTER("mxc_model_symbol", "stale", mxc_model_symbol(m) == NULL);
    EXPECT_BAD_GETTER("mxc_model_param", "stale", mxc_model_param(m, "fc1_weight") == NULL);
    mxc_model_free(m);
    expect_logged("mxc_model_free", "stale");
    mxc_data_iter_free(it);
    CK_OK(mxc_nd_wait_all());
    expect_nothing_logged();
}
END_TEST

/* Per engine type: a destroyed engine; a deleted variable and operator; a variable and
 * an operator of an engine destroyed since, given to another engine. */
static int noop(const mxc_run_ctx *rctx, void *arg) { return MXC_OK; }

static mxc_engine_op_desc op_on(mxc_var **v, const char *name) {
    mxc_engine_op_desc d = {.fn = noop, .mutable_vars = v, .num_mutable_vars = 1, .name = name};
    return d;
}

START_TEST(test_stale_engine) {
    capture_log();
    mxc_engine *e = NULL;
    CK_OK(mxc_engine_create(_i, NULL, &e));
    mxc_engine_destroy(e);
    mxc_var *v = NULL;
    mxc_engine_op_desc d = op_on(&v, "after destroy");
    mxc_engine_stats st;
    mxc_engine_config cfg;
    mxc_engine_opr *opr = NULL;
    EXPECT_STALE("mxc_engine_new_var", mxc_engine_new_var(e, &v));
    EXPECT_STALE("mxc_engine_push", mxc_engine_push(e, &d));
    EXPECT_STALE("mxc_engine_new_operator", mxc_engine_new_operator(e, &d, &opr));
    EXPECT_STALE("mxc_engine_wait_all", mxc_engine_wait_all(e));
    EXPECT_STALE("mxc_engine_get_stats", mxc_engine_get_stats(e, &st));
    EXPECT_STALE("mxc_engine_get_config", mxc_engine_get_config(e, &cfg));
    EXPECT_STALE("mxc_engine_profiler_start", mxc_engine_profiler_start(e));
    EXPECT_BAD_GETTER("mxc_engine_type_of", "stale", mxc_engine_type_of(e) == -1);
    ck_assert_ptr_null(v);
    ck_assert_ptr_null(opr);
    mxc_engine_destroy(e);
    expect_logged("mxc_engine_destroy", "stale");
}
END_TEST

START_TEST(test_stale_var_and_operator) {
    capture_log();
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var *v = NULL, *live = NULL;
    CK_OK(mxc_engine_new_var(e, &v));
    CK_OK(mxc_engine_new_var(e, &live));
    mxc_engine_op_desc d = op_on(&v, "stale var");
    mxc_engine_opr *opr = NULL;
    CK_OK(mxc_engine_new_operator(e, &d, &opr));
    CK_OK(mxc_engine_delete_operator(e, opr));
    CK_OK(mxc_engine_delete_var(e, v, NULL, NULL));
    CK_OK(mxc_engine_wait_all(e));
    EXPECT_STALE("mxc_engine_wait_for_var", mxc_engine_wait_for_var(e, v));
    EXPECT_STALE("mxc_engine_delete_var", mxc_engine_delete_var(e, v, NULL, NULL));
    mxc_engine_opr *none = NULL;
    EXPECT_STALE("stale var", mxc_engine_push(e, &d)); /* names the operation */
    EXPECT_STALE("stale var", mxc_engine_new_operator(e, &d, &none));
    ck_assert_ptr_null(none);
    EXPECT_STALE("mxc_engine_push_operator", mxc_engine_push_operator(e, opr, 0));
    EXPECT_STALE("mxc_engine_delete_operator", mxc_engine_delete_operator(e, opr));
    /* nothing happened to the live variable */
    mxc_engine_op_desc ok = op_on(&live, "live");
    CK_OK(mxc_engine_push(e, &ok));
    CK_OK(mxc_engine_wait_for_var(e, live));
    CK_OK(mxc_engine_delete_var(e, live, NULL, NULL));
    mxct_engine_finish(e);
    expect_nothing_logged();
}
END_TEST

START_TEST(test_handles_of_destroyed_engine) {
    capture_log();
    mxc_engine *gone = NULL;
    CK_OK(mxc_engine_create(_i, NULL, &gone));
    mxc_var *v = NULL;
    CK_OK(mxc_engine_new_var(gone, &v));
    mxc_engine_op_desc d = op_on(&v, "orphan");
    mxc_engine_opr *opr = NULL;
    CK_OK(mxc_engine_new_operator(gone, &d, &opr));
    mxc_engine_destroy(gone); /* frees the variable and the operator it still had */
    mxc_engine *e = mxct_engine_new(_i, NULL);
    EXPECT_STALE("mxc_engine_wait_for_var", mxc_engine_wait_for_var(e, v));
    EXPECT_STALE("mxc_engine_delete_var", mxc_engine_delete_var(e, v, NULL, NULL));
    EXPECT_STALE("orphan", mxc_engine_push(e, &d));
    EXPECT_STALE("mxc_engine_push_operator", mxc_engine_push_operator(e, opr, 0));
    EXPECT_STALE("mxc_engine_delete_operator", mxc_engine_delete_operator(e, opr));
    mxct_engine_finish(e);
    expect_nothing_logged();
}
END_TEST

/* An asynchronous operation's completion handle, completed twice: the second call is
 * reported and completes nothing, not even a run that took the first one's memory. */
struct async_box {
    _Atomic(mxc_engine_done *) done;
    bool complete_now;
};

static void async_stash(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done) {
    struct async_box *b = arg;
    atomic_store(&b->done, done);
    if (b->complete_now)
        mxc_engine_complete(done, MXC_OK);
}

static mxc_engine_done *push_async(mxc_engine *e, mxc_var *v, struct async_box *b) {
    mxc_engine_op_desc d = {.async_fn = async_stash,
                            .arg = b,
                            .mutable_vars = &v,
                            .num_mutable_vars = 1,
                            .prop = MXC_PROP_ASYNC,
                            .name = "async"};
    CK_OK(mxc_engine_push(e, &d));
    for (int i = 0; i < 100000 && atomic_load(&b->done) == NULL; i++)
        mxct_sleep_us(10);
    ck_assert_ptr_nonnull(atomic_load(&b->done));
    return atomic_load(&b->done);
}

START_TEST(test_stale_completion) {
    capture_log();
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var *v = NULL;
    CK_OK(mxc_engine_new_var(e, &v));
    struct async_box first = {.complete_now = true}, second = {.complete_now = false};
    mxc_engine_done *old = push_async(e, v, &first);
    CK_OK(mxc_engine_wait_all(e));
    mxc_engine_done *now = push_async(e, v, &second);
    ck_assert_msg(now != old, "the completed run's handle was reused at once");
    mxc_engine_complete(old, MXC_EINVAL); /* completed already */
    expect_logged("mxc_engine_complete", "stale");
    mxc_engine_complete(now, MXC_OK);
    CK_OK(mxc_engine_wait_all(e)); /* the second run's own status, not the stale call's */
    mxc_engine_complete(now, MXC_OK);
    expect_logged("mxc_engine_complete", "stale");
    CK_OK(mxc_engine_delete_var(e, v, NULL, NULL));
    mxct_engine_finish(e);
}
END_TEST

/* ---- Foreign pointers --------------------------------------------------------------- */

/* A copy of the first bytes of a live handle on the stack: a perfect forgery of the
 * magic number, which only a check of where the handle lives can reject. */
struct forgery {
    _Alignas(64) unsigned char bytes[4096];
};

static void *forge(struct forgery *f, const void *handle) {
    memset(f->bytes, 0, sizeof f->bytes);
    memcpy(f->bytes, handle, 32);
    return f->bytes;
}

START_TEST(test_foreign_pointers) {
    capture_log();
    struct forgery f;
    void *page = unreadable_page();
    mxc_ndarray *a = nd_filled(4, 1), *out = NULL;
    mxc_symbol *sym = mlp();
    mxc_executor *x = bound_mlp(sym);
    mxc_data_iter *it = toy_iter();
    mxc_model *model = model_of_mlp();
    mxc_optimizer *opt = sgd();
    mxc_metric *met = metric("acc");
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var *v = NULL;
    CK_OK(mxc_engine_new_var(e, &v));
    mxc_shape s;
    int n;
    mxc_engine_config cfg;

    /* each pointer: what it is, then one call per handle type */
    void *bad[4];
    const char *what[] = {"a stack copy", "an unreadable page", "another type's handle",
                          "an address inside a handle"};
    for (int k = 0; k < 4; k++) {
        bad[0] = forge(&f, a);
        bad[1] = page;
        bad[2] = sym;
        bad[3] = (char *)a + 8;
        EXPECT_BAD("mxc_nd_get_shape", "not", mxc_nd_get_shape(bad[k], &s));
        EXPECT_BAD("mxc_nd_add", "not", mxc_nd_add(a, bad[k], &out));
        bad[0] = forge(&f, sym);
        bad[2] = a;
        bad[3] = (char *)sym + 16;
        EXPECT_BAD("mxc_symbol_num_outputs", "not", mxc_symbol_num_outputs(bad[k], &n));
        bad[0] = forge(&f, x);
        bad[2] = model;
        bad[3] = (char *)x + 8;
        EXPECT_BAD("mxc_executor_forward", "not", mxc_executor_forward(bad[k], 0));
        bad[0] = forge(&f, it);
        bad[2] = x;
        bad[3] = (char *)it + 64;
        EXPECT_BAD("mxc_data_iter_provide_data", "not", mxc_data_iter_provide_data(bad[k], &s));
        bad[0] = forge(&f, model);
        bad[2] = opt;
        bad[3] = (char *)model + 8;
        EXPECT_BAD("mxc_model_save", "not", mxc_model_save(bad[k], "/nonexistent-dir/m", 0));
        bad[0] = forge(&f, opt);
        bad[2] = met;
        bad[3] = (char *)opt + 16;
        EXPECT_BAD("mxc_optimizer_set_mult", "not", mxc_optimizer_set_mult(bad[k], "w", 1, 1));
        bad[0] = forge(&f, met);
        bad[2] = it;
        bad[3] = (char *)met + 8;
        EXPECT_BAD("mxc_metric_reset", "not", mxc_metric_reset(bad[k]));
        bad[0] = forge(&f, e);
        bad[2] = v;
        bad[3] = (char *)e + 64;
        EXPECT_BAD("mxc_engine_get_config", "not", mxc_engine_get_config(bad[k], &cfg));
        bad[0] = forge(&f, v);
        bad[2] = e;
        bad[3] = (char *)v + 16;
        EXPECT_BAD("mxc_engine_wait_for_var", "not", mxc_engine_wait_for_var(e, bad[k]));
        ck_assert_msg(out == NULL, "%s: an output was made", what[k]);
    }
    /* destructors: reported, nothing freed */
    mxc_nd_free((mxc_ndarray *)forge(&f, a));
    expect_logged("mxc_nd_free", "not");
    mxc_symbol_free((mxc_symbol *)page);
    expect_logged("mxc_symbol_free", "not");
    mxc_executor_free((mxc_executor *)sym);
    expect_logged("mxc_executor_free", "not");
    mxc_data_iter_free((mxc_data_iter *)((char *)it + 64));
    expect_logged("mxc_data_iter_free", "not");
    mxc_engine_destroy((mxc_engine *)v);
    expect_logged("mxc_engine_destroy", "not");

    /* everything still works */
    expect_values(a, 4, 1);
    CK_OK(mxc_executor_forward(x, 0));
    ck_assert_int_eq(mxc_data_iter_next(it), 1);
    CK_OK(mxc_engine_wait_for_var(e, v));
    CK_OK(mxc_engine_delete_var(e, v, NULL, NULL));
    mxct_engine_finish(e);
    mxc_metric_free(met);
    mxc_optimizer_free(opt);
    mxc_model_free(model);
    mxc_data_iter_free(it);
    mxc_executor_free(x);
    mxc_symbol_free(sym);
    mxc_nd_free(a);
    CK_OK(mxc_nd_wait_all());
    munmap(page, 4096);
    expect_nothing_logged();
}
END_TEST

/* ---- Double frees ------------------------------------------------------------------- */

/* Per type: free x, make y of the same type, free x again: reported once, y still
 * works. */
START_TEST(test_double_free_each_type) {
    capture_log();
    mxc_symbol *s1 = mlp();
    mxc_symbol_free(s1);
    mxc_symbol *s2 = mlp();
    mxc_symbol_free(s1);
    expect_logged("mxc_symbol_free", "stale");
    int n = 0;
    CK_OK(mxc_symbol_num_outputs(s2, &n));

    mxc_executor *x1 = bound_mlp(s2);
    mxc_executor_free(x1);
    mxc_executor *x2 = bound_mlp(s2);
    mxc_executor_free(x1);
    expect_logged("mxc_executor_free", "stale");
    CK_OK(mxc_executor_forward(x2, 0));

    mxc_data_iter *i1 = toy_iter();
    mxc_data_iter_free(i1);
    mxc_data_iter *i2 = toy_iter();
    mxc_data_iter_free(i1);
    expect_logged("mxc_data_iter_free", "stale");
    ck_assert_int_eq(mxc_data_iter_next(i2), 1);

    mxc_optimizer *o1 = sgd();
    mxc_optimizer_free(o1);
    mxc_optimizer *o2 = sgd();
    mxc_optimizer_free(o1);
    expect_logged("mxc_optimizer_free", "stale");
    ck_assert_float_eq(mxc_optimizer_current_lr(o2), 0.1f);

    mxc_metric *m1 = metric("acc");
    mxc_metric_free(m1);
    mxc_metric *m2 = metric("acc");
    mxc_metric_free(m1);
    expect_logged("mxc_metric_free", "stale");
    CK_OK(mxc_metric_reset(m2));

    mxc_model *d1 = model_of_mlp();
    mxc_model_free(d1);
    mxc_model *d2 = model_of_mlp();
    mxc_model_free(d1);
    expect_logged("mxc_model_free", "stale");
    ck_assert_ptr_nonnull(mxc_model_symbol(d2));

    mxc_engine *e1 = NULL, *e2 = NULL;
    CK_OK(mxc_engine_create(MXC_ENGINE_NAIVE, NULL, &e1));
    mxc_engine_destroy(e1);
    CK_OK(mxc_engine_create(MXC_ENGINE_NAIVE, NULL, &e2));
    mxc_engine_destroy(e1);
    expect_logged("mxc_engine_destroy", "stale");
    mxc_var *v = NULL;
    CK_OK(mxc_engine_new_var(e2, &v));
    CK_OK(mxc_engine_delete_var(e2, v, NULL, NULL));
    CK_OK(mxc_engine_wait_all(e2));

    mxc_model_free(d2);
    mxc_metric_free(m2);
    mxc_optimizer_free(o2);
    mxc_data_iter_free(i2);
    mxc_executor_free(x2);
    mxc_symbol_free(s2);
    mxc_engine_destroy(e2);
    CK_OK(mxc_nd_wait_all());
    expect_nothing_logged();
}
END_TEST

/* ---- Memory ------------------------------------------------------------------------- */

/* Freed handles' memory goes back to the allocator when it is replaced (nothing leaks
 * through the hook), and a failing allocator reaches handle memory: a clean MXC_ENOMEM. */
START_TEST(test_memory_through_the_hook) {
    static struct mxct_alloc_counts counts; /* outlives the test: see check_ndarray.c */
    mxct_alloc_install(&counts);            /* first mxc call of this process (fork mode) */
    enum { N = 300 };
    mxc_symbol *s[N];
    for (int i = 0; i < N; i++)
        CK_OK(mxc_symbol_variable("v", &s[i]));
    for (int i = 0; i < N; i++)
        mxc_symbol_free(s[i]);
    mxct_alloc_fail_after(&counts, 0);
    mxc_symbol *none = NULL;
    mxc_optimizer *no_opt = NULL;
    mxc_optimizer_config cfg = {.kind = MXC_OPT_SGD, .lr = 0.1f};
    CK_ERR(MXC_ENOMEM, mxc_symbol_variable("v", &none));
    CK_ERR(MXC_ENOMEM, mxc_optimizer_create(&cfg, &no_opt)); /* its first slab */
    ck_assert_ptr_null(none);
    ck_assert_ptr_null(no_opt);
    mxct_alloc_fail_after(&counts, -1);
    mxct_alloc_uninstall();
    ck_assert_msg(atomic_load(&counts.live) == 0, "%ld blocks not given back",
                  atomic_load(&counts.live));
}
END_TEST

/* Handles come from slabs: taking one allocates nothing until a slab is full, and then
 * a failing allocator gives a clean MXC_ENOMEM; handles already made are unharmed. Views
 * allocate nothing but their handle, so they reach the slab's growth quickly. */
START_TEST(test_slab_growth_failure) {
    static struct mxct_alloc_counts counts;
    mxct_alloc_install(&counts); /* first mxc call of this process (fork mode) */
    mxc_ndarray *a = nd_filled(4, 1);
    CK_OK(mxc_nd_wait_all());
    enum { MAX = 100000 };
    mxc_ndarray **views = calloc(MAX + 1, sizeof *views);
    ck_assert_ptr_nonnull(views);
    mxct_alloc_fail_after(&counts, 0);
    int n = 0, rc = MXC_OK;
    while (n < MAX && (rc = mxc_nd_slice(a, 0, 2, &views[n])) == MXC_OK)
        n++;
    ck_assert_msg(rc == MXC_ENOMEM, "%d views made, then %s (%s)", n, mxc_err_name(rc),
                  mxc_last_error());
    ck_assert_ptr_null(views[n]);
    mxct_alloc_fail_after(&counts, -1);
    CK_OK(mxc_nd_slice(a, 0, 2, &views[n]));
    n++;
    for (int i = 0; i < n; i++)
        expect_values(views[i], 2, 1);
    for (int i = 0; i < n; i++)
        mxc_nd_free(views[i]);
    free(views);
    expect_values(a, 4, 1);
    mxc_nd_free(a);
    CK_OK(mxc_nd_wait_all());
    mxct_alloc_uninstall();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("handles");
    TCase *tc = tcase_create("handles");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_test(tc, test_nd_double_free_after_reuse);
    tcase_add_test(tc, test_quarantine_bound);
    tcase_add_test(tc, test_stale_ndarray);
    tcase_add_test(tc, test_stale_symbol);
    tcase_add_test(tc, test_stale_executor);
    tcase_add_test(tc, test_stale_data_iter);
    tcase_add_test(tc, test_stale_optimizer);
    tcase_add_test(tc, test_stale_kvstore);
    tcase_add_test(tc, test_stale_metric);
    tcase_add_test(tc, test_stale_model);
    MXCT_ADD_ENGINE_TEST(tc, test_stale_engine);
    MXCT_ADD_ENGINE_TEST(tc, test_stale_var_and_operator);
    MXCT_ADD_ENGINE_TEST(tc, test_handles_of_destroyed_engine);
    MXCT_ADD_ENGINE_TEST(tc, test_stale_completion);
    MXCT_ADD_ENGINE_TEST(tc, test_foreign_pointers);
    tcase_add_test(tc, test_double_free_each_type);
    tcase_add_test(tc, test_memory_through_the_hook);
    tcase_add_test(tc, test_slab_growth_failure);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }

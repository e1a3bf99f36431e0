/*
 * tests/check_null_args.c — the NULL rules of the public API (mxc/base.h, "NULL
 * arguments"): every public function that takes a pointer is called with NULL in each
 * pointer argument in turn, the others valid. It must not crash and must return the
 * documented code with a message that names the function; a function that returns a
 * value instead of a status must return its documented value for NULL.
 *
 * One row per function: its name and, per pointer argument in order, the code expected
 * when that argument is NULL. The row's call function receives k, the argument to make
 * NULL, and returns what the function returned (value-returning and void functions
 * return MXC_OK when they behaved as documented, MXC_EINTERNAL otherwise). Each row runs
 * in its own process (Check's fork mode), so a crash fails that row only. A last test
 * reads the public headers and checks that every function with a pointer parameter has a
 * row, so a new function needs one. Run from the repository root.
 */
#include "mxc/mxc.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Argument k of a call: NULL when it is the one under test (its position `i`). */
#define P(i, ...) (k == (i) ? NULL : (__VA_ARGS__))

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* What a value-returning or void function did, as a status. */
#define AS(cond) ((cond) ? MXC_OK : MXC_EINTERNAL)

/* ---- Valid objects, made on first use in each row's process --------------------------- */

static mxc_ndarray *array(void) { /* (2, 3) float32, ones */
    static mxc_ndarray *a;
    if (a == NULL)
        CK_OK(mxc_nd_ones(&SHAPE(2, 3), MXC_FLOAT32, mxc_cpu(), &a));
    return a;
}

static mxc_ndarray *labels(void) { /* (2), zeros */
    static mxc_ndarray *a;
    if (a == NULL)
        CK_OK(mxc_nd_zeros(&SHAPE(2), MXC_FLOAT32, mxc_cpu(), &a));
    return a;
}

static mxc_symbol *symbol(void) { /* data -> fc (3) -> SoftmaxOutput "softmax" */
    static mxc_symbol *s;
    if (s == NULL)
        CK_OK(mxc_net_mlp(0, NULL, "relu", 3, &s));
    return s;
}

static const char *const data_name[] = {"data"};
static const mxc_shape data_shape[] = {SHAPE(2, 3)};

static mxc_executor *executor(void) {
    static mxc_executor *x;
    if (x == NULL)
        CK_OK(mxc_executor_simple_bind(symbol(), mxc_cpu(), 1, data_name, data_shape,
                                       MXC_GRAD_WRITE, &x));
    return x;
}

static mxc_kvstore *kvstore(void) { /* local, key 0 initialised from array() */
    static mxc_kvstore *kv;
    static const int key = 0;
    if (kv == NULL) {
        CK_OK(mxc_kvstore_create("local", &kv));
        mxc_ndarray *v[] = {array()};
        CK_OK(mxc_kvstore_init(kv, 1, &key, v));
    }
    return kv;
}

static mxc_engine *engine(void) {
    static mxc_engine *e;
    if (e == NULL)
        CK_OK(mxc_engine_get_default(&e));
    return e;
}

static mxc_var *new_var(void) {
    mxc_var *v = NULL;
    CK_OK(mxc_engine_new_var(engine(), &v));
    return v;
}

static int nop(const mxc_run_ctx *rctx, void *arg) { return MXC_OK; }

static mxc_engine_op_desc *op_desc(void) {
    static mxc_engine_op_desc d;
    d = (mxc_engine_op_desc){.fn = nop, .name = "nop"};
    return &d;
}

static mxc_data_iter_params *iter_params(void) {
    static mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = 2;
    return &p;
}

static mxc_data_iter *new_iter(void) { /* the (2, 3) array with labels 0 */
    mxc_data_iter *it = NULL;
    CK_OK(mxc_data_iter_create_array(array(), labels(), iter_params(), &it));
    return it;
}

static mxc_data_iter *iter(void) {
    static mxc_data_iter *it;
    if (it == NULL)
        it = new_iter();
    return it;
}

static mxc_optimizer *optimizer(void) {
    static mxc_optimizer *o;
    mxc_optimizer_config c = {.kind = MXC_OPT_SGD, .lr = 0.1f};
    if (o == NULL)
        CK_OK(mxc_optimizer_create(&c, &o));
    return o;
}

static mxc_metric *metric(const char *name) {
    mxc_metric *m = NULL;
    CK_OK(mxc_metric_create(name, 1, &m));
    return m;
}

static mxc_model *model(void) {
    static mxc_model *m;
    if (m == NULL)
        CK_OK(mxc_model_create(symbol(), &m));
    return m;
}

static mxc_fit_config *fit_config(void) {
    static mxc_fit_config c;
    mxc_fit_config_init(&c);
    c.quiet = 1;
    return &c;
}

/* Temporary files and folders of the row, removed (and their paths freed) at its end. */
static char *temps[32];
static int num_temps;

static const char *temp_path(const char *prefix) {
    ck_assert_int_lt(num_temps, (int)COUNT(temps));
    return temps[num_temps++] = mxct_temp_file(prefix);
}

static void remove_temps(void) {
    for (int i = num_temps - 1; i >= 0; i--) {
        remove(temps[i]);
        free(temps[i]);
    }
    num_temps = 0;
}

/* A temporary file holding `text`. */
static const char *temp_with(const char *text) {
    const char *path = temp_path("mxc-null-");
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static const char *temp_dir(void) {
    const char *dir = temp_path("mxc-null-dir-");
    unlink(dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    return dir;
}

/* recordio.h: a folder ROOT holding c/x.png (any bytes: listing and packing without resize
 * never decode), removed with the row's temporaries; returns ROOT. */
static const char *image_folder(void) {
    const char *root = temp_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/c", root);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    temps[num_temps++] = strdup(path);
    snprintf(path, sizeof path, "%s/c/x.png", root);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("png", f);
    fclose(f);
    temps[num_temps++] = strdup(path);
    return root;
}

static mxc_recordio *reader(void) { /* tests/data/io/rec/plain.rec with its index */
    static mxc_recordio *r;
    if (r == NULL)
        CK_OK(
            mxc_recordio_open("tests/data/io/rec/plain.rec", "tests/data/io/rec/plain.idx", 0, &r));
    return r;
}

static mxc_recordio *writer(void) { /* a new file with an index */
    static mxc_recordio *w;
    if (w == NULL)
        CK_OK(mxc_recordio_open(temp_path("mxc-null-rec-"), temp_path("mxc-null-idx-"), 1, &w));
    return w;
}

/* ---- One call function per public function ------------------------------------------ */

#define CALL(fn) static int call_##fn(int k)

/* A void function with one pointer argument, where NULL does nothing (destructors). */
#define TAKES_NULL(fn) \
    CALL(fn) {         \
        (void)k;       \
        fn(NULL);      \
        return MXC_OK; \
    }

/* base.h */
CALL(mxc_shape_make) { return AS(mxc_shape_make(2, NULL).ndim == 0); }
CALL(mxc_shape_size) { return AS(mxc_shape_size(NULL) == -1); }
TAKES_NULL(mxc_set_allocator)
CALL(mxc_set_log) {
    mxc_set_log(NULL, NULL, MXC_LOG_WARN);
    return MXC_OK;
}

/* engine.h */
CALL(mxc_engine_create) {
    mxc_engine *e = NULL;
    int rc = mxc_engine_create(MXC_ENGINE_NAIVE, P(0, &(mxc_engine_config){0}), P(1, &e));
    mxc_engine_destroy(e);
    return rc;
}
TAKES_NULL(mxc_engine_destroy)
CALL(mxc_engine_get_default) { return mxc_engine_get_default(NULL); }
CALL(mxc_engine_type_of) { return AS(mxc_engine_type_of(NULL) == -1); }
/* The two variable constructors take the same arguments. */
static int make_var(int (*make)(mxc_engine *, mxc_var **), int k) {
    mxc_var *v = NULL;
    int rc = make(P(0, engine()), P(1, &v));
    if (v)
        mxc_engine_delete_var(engine(), v, NULL, NULL);
    return rc;
}
CALL(mxc_engine_new_var) { return make_var(mxc_engine_new_var, k); }
CALL(mxc_engine_new_state_var) { return make_var(mxc_engine_new_state_var, k); }
CALL(mxc_engine_delete_var) {
    mxc_var *v = new_var();
    int rc = mxc_engine_delete_var(P(0, engine()), P(1, v), P(2, nop), P(3, (void *)v));
    if (rc != MXC_OK)
        mxc_engine_delete_var(engine(), v, NULL, NULL);
    return rc;
}
CALL(mxc_engine_push) { return mxc_engine_push(P(0, engine()), P(1, op_desc())); }
CALL(mxc_engine_new_operator) {
    mxc_engine_opr *o = NULL;
    int rc = mxc_engine_new_operator(P(0, engine()), P(1, op_desc()), P(2, &o));
    mxc_engine_delete_operator(engine(), o);
    return rc;
}
CALL(mxc_engine_push_operator) {
    mxc_engine_opr *o = NULL;
    CK_OK(mxc_engine_new_operator(engine(), op_desc(), &o));
    int rc = mxc_engine_push_operator(P(0, engine()), P(1, o), 0);
    mxc_engine_delete_operator(engine(), o);
    return rc;
}
CALL(mxc_engine_delete_operator) {
    mxc_engine_opr *o = NULL;
    CK_OK(mxc_engine_new_operator(engine(), op_desc(), &o));
    int rc = mxc_engine_delete_operator(P(0, engine()), P(1, o));
    if (rc != MXC_OK || k == 1)
        mxc_engine_delete_operator(engine(), o);
    return rc;
}
CALL(mxc_engine_complete) {
    mxc_engine_complete(NULL, MXC_OK);
    return MXC_OK;
}
CALL(mxc_engine_wait_for_var) {
    mxc_var *v = new_var();
    int rc = mxc_engine_wait_for_var(P(0, engine()), P(1, v));
    mxc_engine_delete_var(engine(), v, NULL, NULL);
    return rc;
}
CALL(mxc_engine_wait_all) { return mxc_engine_wait_all(NULL); }
CALL(mxc_engine_get_stats) {
    mxc_engine_stats s;
    return mxc_engine_get_stats(P(0, engine()), P(1, &s));
}
CALL(mxc_engine_get_config) {
    mxc_engine_config c;
    return mxc_engine_get_config(P(0, engine()), P(1, &c));
}
CALL(mxc_gpu_info) {
    mxc_gpu_info_t info;
    int rc = mxc_gpu_info(0, P(0, &info));
    return rc == MXC_ENODEV ? MXC_OK : rc; /* valid arguments, but maybe no GPU */
}
CALL(mxc_engine_profiler_start) { return mxc_engine_profiler_start(NULL); }
CALL(mxc_engine_profiler_stop) { return mxc_engine_profiler_stop(NULL); }
CALL(mxc_engine_profiler_dump) {
    return mxc_engine_profiler_dump(P(0, engine()), P(1, temp_path("mxc-null-trace-")));
}

/* executor.h */
CALL(mxc_executor_bind) {
    mxc_ndarray *const *args, *grads[4] = {NULL};
    int na;
    CK_OK(mxc_executor_arrays(executor(), &na, &args, NULL, NULL, NULL));
    ck_assert_int_eq(na, 4); /* data, fc1_weight, fc1_bias, softmax_label */
    for (int i = 0; i < na; i++) {
        mxc_shape s;
        CK_OK(mxc_nd_get_shape(args[i], &s));
        CK_OK(mxc_nd_zeros(&s, MXC_FLOAT32, mxc_cpu(), &grads[i]));
    }
    mxc_executor *x = NULL;
    int rc = mxc_executor_bind(P(0, symbol()), mxc_cpu(), na, P(1, args), P(2, grads),
                               P(3, (const int[]){0, 1, 1, 0}), 0, P(4, args), P(5, &x));
    mxc_executor_free(x);
    for (int i = 0; i < na; i++)
        mxc_nd_free(grads[i]);
    return rc;
}
CALL(mxc_executor_simple_bind) {
    mxc_executor *x = NULL;
    int rc = mxc_executor_simple_bind(P(0, symbol()), mxc_cpu(), 1, P(1, data_name),
                                      P(2, data_shape), MXC_GRAD_WRITE, P(3, &x));
    mxc_executor_free(x);
    return rc;
}
CALL(mxc_executor_reshape) {
    mxc_executor *x = NULL;
    int rc = mxc_executor_reshape(P(0, executor()), 1, P(1, data_name), P(2, data_shape), P(3, &x));
    mxc_executor_free(x);
    return rc;
}
CALL(mxc_executor_forward) { return mxc_executor_forward(NULL, 1); }
CALL(mxc_executor_backward) {
    CK_OK(mxc_executor_forward(executor(), 1));
    return mxc_executor_backward(P(0, executor()), 0, P(1, (mxc_ndarray *const[]){NULL}));
}
CALL(mxc_executor_outputs) {
    int n;
    mxc_ndarray *const *o;
    return mxc_executor_outputs(P(0, executor()), P(1, &n), P(2, &o));
}
CALL(mxc_executor_arrays) {
    int na, nx;
    mxc_ndarray *const *a, *const *g, *const *x;
    return mxc_executor_arrays(P(0, executor()), P(1, &na), P(2, &a), P(3, &g), P(4, &nx),
                               P(5, &x));
}
CALL(mxc_executor_plan_info) {
    mxc_exec_plan_info info;
    return mxc_executor_plan_info(P(0, executor()), P(1, &info));
}
CALL(mxc_executor_entry_block) { return AS(mxc_executor_entry_block(NULL, 0) == -1); }
static void monitor(const char *name, mxc_ndarray *a, void *user) {}
CALL(mxc_executor_set_monitor) {
    return mxc_executor_set_monitor(P(0, executor()), P(1, monitor), P(2, (void *)monitor));
}
CALL(mxc_executor_print) {
    const char *text;
    return mxc_executor_print(P(0, executor()), P(1, &text));
}
TAKES_NULL(mxc_executor_free)

/* io.h */
TAKES_NULL(mxc_data_iter_params_init)
CALL(mxc_data_iter_create_idx) {
    mxc_data_iter *it = NULL;
    const char *img = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
    const char *lbl = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
    int rc = mxc_data_iter_create_idx(P(0, img), P(1, lbl), 1, P(2, iter_params()), P(3, &it));
    mxc_data_iter_free(it);
    return rc;
}
CALL(mxc_data_iter_create_fashion_mnist) {
    setenv("MXC_FASHION_MNIST_DIR", temp_dir(), 1); /* what dir NULL stands for */
    mxc_data_iter *it = NULL;
    int rc =
        mxc_data_iter_create_fashion_mnist(P(0, temp_dir()), 0, 1, P(1, iter_params()), P(2, &it));
    mxc_data_iter_free(it);
    return rc;
}
CALL(mxc_data_iter_create_csv) {
    mxc_data_iter *it = NULL;
    int rc = mxc_data_iter_create_csv(P(0, temp_with("1,2,3\n4,5,6\n")), P(1, &SHAPE(3)),
                                      P(2, temp_with("0\n1\n")), P(3, &SHAPE(1)),
                                      P(4, iter_params()), P(5, &it));
    mxc_data_iter_free(it);
    return rc;
}
CALL(mxc_data_iter_create_array) {
    mxc_data_iter *it = NULL;
    int rc =
        mxc_data_iter_create_array(P(0, array()), P(1, labels()), P(2, iter_params()), P(3, &it));
    mxc_data_iter_free(it);
    return rc;
}
TAKES_NULL(mxc_image_record_params_init)
CALL(mxc_data_iter_create_image_record) {
    mxc_image_record_params ip;
    mxc_image_record_params_init(&ip);
    ip.path_imgrec = "tests/data/io/rec/images.rec";
    ip.data_shape[0] = 3;
    ip.data_shape[1] = ip.data_shape[2] = 16;
    mxc_data_iter *it = NULL;
    int rc = mxc_data_iter_create_image_record(P(0, &ip), P(1, iter_params()), P(2, &it));
    mxc_data_iter_free(it);
    return rc;
}
CALL(mxc_data_iter_next) { return mxc_data_iter_next(NULL); }
CALL(mxc_data_iter_reset) { return mxc_data_iter_reset(NULL); }
CALL(mxc_data_iter_data) { return AS(mxc_data_iter_data(NULL) == NULL); }
CALL(mxc_data_iter_label) { return AS(mxc_data_iter_label(NULL) == NULL); }
CALL(mxc_data_iter_pad) { return AS(mxc_data_iter_pad(NULL) == -1); }
CALL(mxc_data_iter_provide_data) {
    mxc_shape s;
    return mxc_data_iter_provide_data(P(0, iter()), P(1, &s));
}
CALL(mxc_data_iter_provide_label) {
    mxc_shape s;
    return mxc_data_iter_provide_label(P(0, iter()), P(1, &s));
}
CALL(mxc_data_iter_num_samples) { return AS(mxc_data_iter_num_samples(NULL) == -1); }
CALL(mxc_data_iter_num_batches) { return AS(mxc_data_iter_num_batches(NULL) == -1); }
CALL(mxc_data_iter_num_skipped) { return AS(mxc_data_iter_num_skipped(NULL) == -1); }
TAKES_NULL(mxc_data_iter_free)

/* model.h */
CALL(mxc_init_array) {
    mxc_init_config c = {.kind = MXC_INIT_UNIFORM, .scale = 1};
    return mxc_init_array(P(0, &c), P(1, "fc_weight"), P(2, array()));
}
CALL(mxc_init_array_hinted) {
    mxc_init_config c = {.kind = MXC_INIT_UNIFORM, .scale = 1};
    return mxc_init_array_hinted(P(0, &c), P(1, "fc_weight"), P(2, "zeros"), P(3, array()));
}
CALL(mxc_optimizer_create) {
    mxc_optimizer *o = NULL;
    mxc_optimizer_config c = {.kind = MXC_OPT_SGD, .lr = 0.1f};
    int rc = mxc_optimizer_create(P(0, &c), P(1, &o));
    mxc_optimizer_free(o);
    return rc;
}
CALL(mxc_optimizer_set_mult) { return mxc_optimizer_set_mult(P(0, optimizer()), P(1, "w"), 1, 1); }
CALL(mxc_optimizer_update) {
    mxc_ndarray *g = NULL;
    CK_OK(mxc_nd_zeros(&SHAPE(2, 3), MXC_FLOAT32, mxc_cpu(), &g));
    int rc = mxc_optimizer_update(P(0, optimizer()), 0, P(1, "w"), P(2, array()), P(3, g));
    mxc_nd_free(g);
    return rc;
}
CALL(mxc_optimizer_current_lr) { return AS(isnan(mxc_optimizer_current_lr(NULL))); }
TAKES_NULL(mxc_optimizer_free)
CALL(mxc_optimizer_save_states) {
    return mxc_optimizer_save_states(P(0, optimizer()), P(1, "null_args_states.tmp"));
}
CALL(mxc_optimizer_load_states) {
    CK_OK(mxc_optimizer_save_states(optimizer(), "null_args_states.tmp"));
    int rc = mxc_optimizer_load_states(P(0, optimizer()), P(1, "null_args_states.tmp"));
    unlink("null_args_states.tmp");
    return rc;
}
CALL(mxc_kvstore_set_optimizer) {
    return mxc_kvstore_set_optimizer(P(0, kvstore()), P(1, optimizer()));
}

/* ---- kvstore.h ---------------------------------------------------------------------- */

static const int kv_key[] = {0};

CALL(mxc_kvstore_create) {
    mxc_kvstore *kv = NULL;
    int rc = mxc_kvstore_create(P(0, "local"), P(1, &kv));
    mxc_kvstore_free(kv);
    return rc;
}
TAKES_NULL(mxc_kvstore_free)
CALL(mxc_kvstore_type) { return AS(mxc_kvstore_type(NULL) == NULL); }
CALL(mxc_kvstore_init) {
    mxc_kvstore *kv = NULL;
    CK_OK(mxc_kvstore_create("local", &kv));
    mxc_ndarray *v[] = {array()};
    int rc = mxc_kvstore_init(P(0, kv), 1, P(1, kv_key), P(2, v));
    mxc_kvstore_free(kv);
    return rc;
}
CALL(mxc_kvstore_push) {
    mxc_ndarray *v[] = {array()};
    return mxc_kvstore_push(P(0, kvstore()), 1, P(1, kv_key), P(2, v), 0);
}
CALL(mxc_kvstore_pull) {
    mxc_ndarray *v[] = {array()};
    return mxc_kvstore_pull(P(0, kvstore()), 1, P(1, kv_key), P(2, v), 0);
}
CALL(mxc_kvstore_pushpull) {
    mxc_ndarray *v[] = {array()};
    return mxc_kvstore_pushpull(P(0, kvstore()), 1, P(1, kv_key), P(2, v), P(3, v), 0);
}
static int kv_nop_updater(int key, mxc_ndarray *merged, mxc_ndarray *stored, void *user) {
    (void)key, (void)merged, (void)stored, (void)user;
    return MXC_OK;
}
CALL(mxc_kvstore_set_updater) {
    return mxc_kvstore_set_updater(P(0, kvstore()), P(1, kv_nop_updater), P(2, NULL));
}
CALL(mxc_kvstore_rank) {
    int r;
    return mxc_kvstore_rank(P(0, kvstore()), P(1, &r));
}
CALL(mxc_kvstore_num_workers) {
    int n;
    return mxc_kvstore_num_workers(P(0, kvstore()), P(1, &n));
}
CALL(mxc_kvstore_barrier) { return mxc_kvstore_barrier(P(0, kvstore())); }
CALL(mxc_metric_create) {
    mxc_metric *m = NULL;
    int rc = mxc_metric_create(P(0, "acc"), 1, P(1, &m));
    mxc_metric_free(m);
    return rc;
}
CALL(mxc_metric_add) {
    mxc_metric *c = metric("composite"), *child = metric("acc");
    int rc = mxc_metric_add(P(0, c), P(1, child));
    if (rc != MXC_OK)
        mxc_metric_free(child);
    mxc_metric_free(c);
    return rc;
}
CALL(mxc_metric_update) {
    mxc_metric *m = metric("acc");
    mxc_ndarray *l = labels(), *p = array();
    int rc = mxc_metric_update(P(0, m), 1, P(1, &l), P(2, &p), 0);
    mxc_metric_free(m);
    return rc;
}
CALL(mxc_metric_get) {
    mxc_metric *m = metric("acc");
    int n;
    const char *const *names;
    const double *values;
    int rc = mxc_metric_get(P(0, m), P(1, &n), P(2, &names), P(3, &values));
    mxc_metric_free(m);
    return rc;
}
CALL(mxc_metric_reset) { return mxc_metric_reset(NULL); }
TAKES_NULL(mxc_metric_free)
CALL(mxc_model_create) {
    mxc_model *m = NULL;
    int rc = mxc_model_create(P(0, symbol()), P(1, &m));
    mxc_model_free(m);
    return rc;
}
CALL(mxc_model_load) {
    mxc_model *m = NULL;
    int rc = mxc_model_load(P(0, "/nonexistent/prefix"), 1, P(1, &m));
    mxc_model_free(m);
    return rc == MXC_EIO ? MXC_OK : rc; /* valid arguments, but no such checkpoint */
}
CALL(mxc_model_load_params) {
    mxc_model *m = NULL;
    CK_OK(mxc_model_create(symbol(), &m));
    int rc = mxc_model_load_params(P(0, m), P(1, "/nonexistent/params"));
    mxc_model_free(m);
    return rc == MXC_EIO ? MXC_OK : rc; /* valid arguments, but no such file */
}
CALL(mxc_model_load_latest) {
    mxc_model *m = NULL;
    int epoch = -1;
    int rc = mxc_model_load_latest(P(0, "/nonexistent/prefix"), P(1, &epoch), P(2, &m));
    mxc_model_free(m);
    return rc; /* valid arguments: no checkpoint there is MXC_OK with no model */
}
CALL(mxc_model_save) {
    return mxc_model_save(P(0, model()), P(1, temp_path("mxc-null-model-")), 1);
}
CALL(mxc_model_symbol) { return AS(mxc_model_symbol(NULL) == NULL); }
CALL(mxc_model_param) { return AS(mxc_model_param(P(0, model()), P(1, "fc1_weight")) == NULL); }
TAKES_NULL(mxc_model_free)
CALL(mxc_fit_print_progress) {
    mxc_fit_progress p = {.num_batches = 1, .metric_name = "accuracy"};
    mxc_fit_print_progress(P(0, &p), P(1, (void *)&p));
    return MXC_OK;
}
TAKES_NULL(mxc_fit_config_init)
CALL(mxc_model_fit) {
    mxc_model *m = NULL;
    CK_OK(mxc_model_create(symbol(), &m));
    mxc_fit_result r;
    int rc = mxc_model_fit(P(0, m), P(1, iter()), P(2, new_iter()), P(3, fit_config()), P(4, &r));
    mxc_model_free(m);
    return rc;
}
CALL(mxc_model_score) {
    double v;
    mxc_model *m = NULL;
    CK_OK(mxc_model_create(symbol(), &m));
    CK_OK(mxc_model_fit(m, iter(), NULL, fit_config(), NULL));
    int rc = mxc_model_score(P(0, m), P(1, iter()), P(2, "acc"), P(3, &v));
    mxc_model_free(m);
    return rc;
}
CALL(mxc_model_predict) {
    mxc_ndarray *out = NULL;
    mxc_model *m = NULL;
    CK_OK(mxc_model_create(symbol(), &m));
    CK_OK(mxc_model_fit(m, iter(), NULL, fit_config(), NULL));
    int rc = mxc_model_predict(P(0, m), P(1, iter()), P(2, &out));
    mxc_nd_free(out);
    mxc_model_free(m);
    return rc;
}

CALL(mxc_model_score_on) {
    double v;
    mxc_model *m = NULL;
    CK_OK(mxc_model_create(symbol(), &m));
    CK_OK(mxc_model_fit(m, iter(), NULL, fit_config(), NULL));
    int rc = mxc_model_score_on(P(0, m), mxc_cpu(), P(1, iter()), P(2, "acc"), P(3, &v));
    mxc_model_free(m);
    return rc;
}
CALL(mxc_model_predict_on) {
    mxc_ndarray *out = NULL;
    mxc_model *m = NULL;
    CK_OK(mxc_model_create(symbol(), &m));
    CK_OK(mxc_model_fit(m, iter(), NULL, fit_config(), NULL));
    int rc = mxc_model_predict_on(P(0, m), mxc_cpu(), P(1, iter()), P(2, &out));
    mxc_nd_free(out);
    mxc_model_free(m);
    return rc;
}

CALL(mxc_model_predict_outputs) {
    mxc_ndarray **outs = NULL;
    int num = 0;
    mxc_model *m = NULL;
    CK_OK(mxc_model_create(symbol(), &m));
    CK_OK(mxc_model_fit(m, iter(), NULL, fit_config(), NULL));
    int rc = mxc_model_predict_outputs(P(0, m), mxc_cpu(), P(1, iter()), P(2, &num), P(3, &outs));
    mxc_nd_list_free((size_t)num, outs, NULL);
    mxc_model_free(m);
    return rc;
}

/* ndarray.h */
CALL(mxc_nd_create) {
    mxc_ndarray *a = NULL;
    int rc = mxc_nd_create(P(0, &SHAPE(2)), MXC_FLOAT32, mxc_cpu(), 1, P(1, &a));
    mxc_nd_free(a);
    return rc;
}
CALL(mxc_nd_full) {
    mxc_ndarray *a = NULL;
    int rc = mxc_nd_full(P(0, &SHAPE(2)), MXC_FLOAT32, mxc_cpu(), 2, P(1, &a));
    mxc_nd_free(a);
    return rc;
}
CALL(mxc_nd_fill) { return mxc_nd_fill(NULL, 1); }
CALL(mxc_nd_zeros) {
    mxc_ndarray *a = NULL;
    int rc = mxc_nd_zeros(P(0, &SHAPE(2)), MXC_FLOAT32, mxc_cpu(), P(1, &a));
    mxc_nd_free(a);
    return rc;
}
CALL(mxc_nd_ones) {
    mxc_ndarray *a = NULL;
    int rc = mxc_nd_ones(P(0, &SHAPE(2)), MXC_FLOAT32, mxc_cpu(), P(1, &a));
    mxc_nd_free(a);
    return rc;
}
TAKES_NULL(mxc_nd_free)
CALL(mxc_nd_reshape) {
    mxc_ndarray *a = NULL;
    int rc = mxc_nd_reshape(P(0, array()), P(1, &SHAPE(3, 2)), P(2, &a));
    mxc_nd_free(a);
    return rc;
}
CALL(mxc_nd_slice) {
    mxc_ndarray *a = NULL;
    int rc = mxc_nd_slice(P(0, array()), 0, 1, P(1, &a));
    mxc_nd_free(a);
    return rc;
}
CALL(mxc_nd_at) {
    mxc_ndarray *a = NULL;
    int rc = mxc_nd_at(P(0, array()), 0, P(1, &a));
    mxc_nd_free(a);
    return rc;
}
CALL(mxc_nd_get_shape) {
    mxc_shape s;
    return mxc_nd_get_shape(P(0, array()), P(1, &s));
}
CALL(mxc_nd_dtype) { return AS(mxc_nd_dtype(NULL) == -1); }
CALL(mxc_nd_get_context) {
    mxc_context c;
    return mxc_nd_get_context(P(0, array()), P(1, &c));
}
CALL(mxc_nd_size) { return AS(mxc_nd_size(NULL) == -1); }
CALL(mxc_nd_wait_to_read) { return mxc_nd_wait_to_read(NULL); }
CALL(mxc_nd_wait_to_write) { return mxc_nd_wait_to_write(NULL); }
CALL(mxc_nd_sync_copy_from_cpu) {
    float v[6] = {0};
    return mxc_nd_sync_copy_from_cpu(P(0, array()), P(1, v), sizeof v);
}
CALL(mxc_nd_sync_copy_to_cpu) {
    float v[6];
    return mxc_nd_sync_copy_to_cpu(P(0, array()), P(1, v), sizeof v);
}
CALL(mxc_nd_copy_to) {
    mxc_ndarray *b = NULL;
    CK_OK(mxc_nd_zeros(&SHAPE(2, 3), MXC_FLOAT32, mxc_cpu(), &b));
    int rc = mxc_nd_copy_to(P(0, array()), P(1, b));
    mxc_nd_free(b);
    return rc;
}

/* The binary and unary arithmetic functions share their argument conventions. */
typedef int (*binary_fn)(const mxc_ndarray *, const mxc_ndarray *, mxc_ndarray **);
typedef int (*scalar_fn)(const mxc_ndarray *, float, mxc_ndarray **);

static int binary(binary_fn f, int k) {
    mxc_ndarray *out = NULL;
    int rc = f(P(0, array()), P(1, array()), P(2, &out));
    mxc_nd_free(out);
    return rc;
}

static int scalar(scalar_fn f, int k) {
    mxc_ndarray *out = NULL;
    int rc = f(P(0, array()), 2, P(1, &out));
    mxc_nd_free(out);
    return rc;
}

CALL(mxc_nd_add) { return binary(mxc_nd_add, k); }
CALL(mxc_nd_sub) { return binary(mxc_nd_sub, k); }
CALL(mxc_nd_mul) { return binary(mxc_nd_mul, k); }
CALL(mxc_nd_div) { return binary(mxc_nd_div, k); }
CALL(mxc_nd_add_scalar) { return scalar(mxc_nd_add_scalar, k); }
CALL(mxc_nd_sub_scalar) { return scalar(mxc_nd_sub_scalar, k); }
CALL(mxc_nd_mul_scalar) { return scalar(mxc_nd_mul_scalar, k); }
CALL(mxc_nd_div_scalar) { return scalar(mxc_nd_div_scalar, k); }
CALL(mxc_nd_dot) {
    mxc_ndarray *b = NULL, *out = NULL;
    CK_OK(mxc_nd_ones(&SHAPE(3, 2), MXC_FLOAT32, mxc_cpu(), &b));
    int rc = mxc_nd_dot(P(0, array()), P(1, b), P(2, &out));
    mxc_nd_free(b);
    mxc_nd_free(out);
    return rc;
}
CALL(mxc_nd_sum) {
    mxc_ndarray *out = NULL;
    int rc = mxc_nd_sum(P(0, array()), P(1, &out));
    mxc_nd_free(out);
    return rc;
}
CALL(mxc_nd_random_uniform) { return mxc_nd_random_uniform(NULL, 0, 1); }
CALL(mxc_nd_random_normal) { return mxc_nd_random_normal(NULL, 0, 1); }
CALL(mxc_nd_save) {
    mxc_ndarray *a = array();
    const char *name = "a";
    return mxc_nd_save(P(0, temp_path("mxc-null-nd-")), 1, P(1, &a), P(2, &name));
}
CALL(mxc_nd_load) {
    mxc_ndarray *a = array(), **arrays = NULL;
    const char *path = temp_path("mxc-null-nd-");
    CK_OK(mxc_nd_save(path, 1, &a, NULL));
    size_t n = 0;
    char **names = NULL;
    int rc = mxc_nd_load(P(0, path), mxc_cpu(), P(1, &n), P(2, &arrays), P(3, &names));
    if (rc == MXC_OK)
        mxc_nd_list_free(n, arrays, names);
    return rc;
}
CALL(mxc_nd_list_free) {
    mxc_nd_list_free(2, NULL, NULL);
    return MXC_OK;
}

/* autograd.h */
CALL(mxc_autograd_set_recording) { return mxc_autograd_set_recording(0, NULL); }
CALL(mxc_autograd_set_training) { return mxc_autograd_set_training(0, NULL); }
CALL(mxc_autograd_mark_variables) {
    mxc_ndarray *g = NULL;
    CK_OK(mxc_nd_zeros(&SHAPE(2, 3), MXC_FLOAT32, mxc_cpu(), &g));
    mxc_ndarray *v[] = {array()}, *gs[] = {g};
    const int req[] = {MXC_GRAD_WRITE};
    int rc = mxc_autograd_mark_variables(1, P(0, v), P(1, gs), P(2, req));
    mxc_nd_free(g);
    return rc;
}
/* y = x * x recorded from a marked x (2, 3) */
static mxc_ndarray *recorded(void) {
    mxc_ndarray *x = NULL, *g = NULL, *y = NULL;
    CK_OK(mxc_nd_ones(&SHAPE(2, 3), MXC_FLOAT32, mxc_cpu(), &x));
    CK_OK(mxc_nd_zeros(&SHAPE(2, 3), MXC_FLOAT32, mxc_cpu(), &g));
    CK_OK(mxc_autograd_mark_variables(1, &x, &g, NULL));
    CK_OK(mxc_autograd_set_recording(1, NULL));
    CK_OK(mxc_nd_mul(x, x, &y));
    CK_OK(mxc_autograd_set_recording(0, NULL));
    mxc_nd_free(x);
    mxc_nd_free(g);
    return y;
}
CALL(mxc_autograd_backward) {
    mxc_ndarray *h[] = {recorded()};
    int rc = mxc_autograd_backward(1, P(0, h), P(1, (mxc_ndarray *[]){NULL}), 0);
    mxc_nd_free(h[0]);
    return rc;
}
CALL(mxc_autograd_grad) {
    mxc_ndarray *x = NULL, *g = NULL, *y = NULL, *dx[1] = {NULL};
    CK_OK(mxc_nd_ones(&SHAPE(2), MXC_FLOAT32, mxc_cpu(), &x));
    CK_OK(mxc_nd_zeros(&SHAPE(2), MXC_FLOAT32, mxc_cpu(), &g));
    CK_OK(mxc_autograd_mark_variables(1, &x, &g, NULL));
    CK_OK(mxc_autograd_set_recording(1, NULL));
    CK_OK(mxc_nd_mul(x, x, &y));
    CK_OK(mxc_autograd_set_recording(0, NULL));
    int rc =
        mxc_autograd_grad(1, P(0, &y), P(1, (mxc_ndarray *[]){NULL}), 1, P(2, &x), 0, P(3, dx));
    mxc_nd_free(dx[0]);
    mxc_nd_free(y);
    mxc_nd_free(x);
    mxc_nd_free(g);
    return rc;
}

/* networks.h */
CALL(mxc_net_mlp) {
    mxc_symbol *s = NULL;
    int rc = mxc_net_mlp(1, P(0, (const int[]){4}), P(1, "relu"), 3, P(2, &s));
    mxc_symbol_free(s);
    return rc;
}
CALL(mxc_net_lenet) { return mxc_net_lenet(10, NULL); }
CALL(mxc_net_resnet) { return mxc_net_resnet(1, 10, NULL); }

/* op.h */
CALL(mxc_op_list) {
    size_t n;
    const char *const *names;
    return mxc_op_list(P(0, &n), P(1, &names));
}
CALL(mxc_op_get_info) {
    mxc_op_info info;
    return mxc_op_get_info(P(0, "relu"), P(1, &info));
}
CALL(mxc_op_supports) { return AS(mxc_op_supports(NULL, mxc_cpu(), MXC_FLOAT32) == 0); }
CALL(mxc_imperative_invoke) {
    mxc_ndarray *in = array(), *out = NULL;
    int rc = mxc_imperative_invoke(P(0, "_plus_scalar"), 1, P(1, (const char *[]){"scalar"}),
                                   P(2, (const char *[]){"1"}), 1, P(3, &in), 1, P(4, &out), 0);
    mxc_nd_free(out);
    return rc;
}

/* storage.h */
CALL(mxc_storage_alloc) { return mxc_storage_alloc(mxc_cpu(), 64, NULL); }
CALL(mxc_storage_free) { return mxc_storage_free(NULL); }
CALL(mxc_storage_get_stats) { return mxc_storage_get_stats(mxc_cpu(), NULL); }

/* symbol.h */
static mxc_symbol *variable(void) {
    static mxc_symbol *v;
    if (v == NULL)
        CK_OK(mxc_symbol_variable("x", &v));
    return v;
}

/* The calls that write a new symbol through `out`: free it. */
static int made(int rc, mxc_symbol *s) {
    mxc_symbol_free(s);
    return rc;
}

CALL(mxc_symbol_variable) {
    mxc_symbol *s = NULL;
    return made(mxc_symbol_variable(P(0, "v"), P(1, &s)), s);
}
CALL(mxc_symbol_create) {
    mxc_symbol *s = NULL, *in = variable();
    int rc = mxc_symbol_create(P(0, "FullyConnected"), 1, P(1, (const char *[]){"num_hidden"}),
                               P(2, (const char *[]){"4"}), P(3, "fc"), 1,
                               P(4, (const char *[]){"data"}), P(5, &in), P(6, &s));
    return made(rc, s);
}
CALL(mxc_symbol_compose) {
    mxc_symbol *s = NULL, *arg = variable();
    int rc =
        mxc_symbol_compose(P(0, symbol()), 1, P(1, (const char *[]){"data"}), P(2, &arg), P(3, &s));
    return made(rc, s);
}
CALL(mxc_symbol_group) {
    mxc_symbol *s = NULL, *in[] = {symbol(), variable()};
    return made(mxc_symbol_group(2, P(0, in), P(1, &s)), s);
}
CALL(mxc_symbol_get_output) {
    mxc_symbol *s = NULL;
    return made(mxc_symbol_get_output(P(0, symbol()), 0, P(1, &s)), s);
}
CALL(mxc_symbol_get_internals) {
    mxc_symbol *s = NULL;
    return made(mxc_symbol_get_internals(P(0, symbol()), P(1, &s)), s);
}
CALL(mxc_symbol_copy) {
    mxc_symbol *s = NULL;
    return made(mxc_symbol_copy(P(0, symbol()), P(1, &s)), s);
}
TAKES_NULL(mxc_symbol_free)
CALL(mxc_symbol_num_outputs) {
    int n;
    return mxc_symbol_num_outputs(P(0, symbol()), P(1, &n));
}
CALL(mxc_symbol_get_name) {
    const char *name;
    return mxc_symbol_get_name(P(0, symbol()), P(1, &name));
}
CALL(mxc_symbol_list_arguments) {
    int n;
    const char *const *names;
    return mxc_symbol_list_arguments(P(0, symbol()), P(1, &n), P(2, &names));
}
CALL(mxc_symbol_list_outputs) {
    int n;
    const char *const *names;
    return mxc_symbol_list_outputs(P(0, symbol()), P(1, &n), P(2, &names));
}
CALL(mxc_symbol_list_auxiliary_states) {
    int n;
    const char *const *names;
    return mxc_symbol_list_auxiliary_states(P(0, symbol()), P(1, &n), P(2, &names));
}
CALL(mxc_symbol_set_attr) {
    return mxc_symbol_set_attr(P(0, variable()), P(1, "__note__"), P(2, "yes"));
}
CALL(mxc_symbol_get_attr) {
    const char *value;
    return mxc_symbol_get_attr(P(0, variable()), P(1, "__note__"), P(2, &value));
}
CALL(mxc_symbol_list_attrs) {
    int n;
    const char *const *triples;
    return mxc_symbol_list_attrs(P(0, symbol()), P(1, &n), P(2, &triples));
}
CALL(mxc_symbol_infer_shape) {
    mxc_shape args[4], outs[1], aux[1];
    int unknown;
    const char *const *unknown_names;
    return mxc_symbol_infer_shape(P(0, symbol()), 1, P(1, data_name), P(2, data_shape), P(3, args),
                                  P(4, outs), P(5, aux), P(6, &unknown), P(7, &unknown_names));
}
CALL(mxc_symbol_infer_type) {
    int args[4], outs[1], aux[1], unknown;
    return mxc_symbol_infer_type(P(0, symbol()), 1, P(1, data_name),
                                 P(2, (const int[]){MXC_FLOAT32}), P(3, args), P(4, outs),
                                 P(5, aux), P(6, &unknown));
}
CALL(mxc_symbol_load_json) {
    const char *json;
    CK_OK(mxc_symbol_save_json(symbol(), &json));
    mxc_symbol *s = NULL;
    return made(mxc_symbol_load_json(P(0, json), P(1, &s)), s);
}
CALL(mxc_symbol_load) {
    const char *path = temp_path("mxc-null-sym-");
    CK_OK(mxc_symbol_save(symbol(), path));
    mxc_symbol *s = NULL;
    return made(mxc_symbol_load(P(0, path), P(1, &s)), s);
}
CALL(mxc_symbol_save_json) {
    const char *json;
    return mxc_symbol_save_json(P(0, symbol()), P(1, &json));
}
CALL(mxc_symbol_save) { return mxc_symbol_save(P(0, symbol()), P(1, temp_path("mxc-null-sym-"))); }
CALL(mxc_symbol_to_dot) {
    const char *dot;
    return mxc_symbol_to_dot(P(0, symbol()), 1, P(1, data_name), P(2, data_shape), 1, P(3, &dot));
}

/* recordio.h */
CALL(mxc_recordio_open) {
    mxc_recordio *r = NULL;
    int rc = mxc_recordio_open(P(0, "tests/data/io/rec/plain.rec"),
                               P(1, "tests/data/io/rec/plain.idx"), 0, P(2, &r));
    mxc_recordio_close(r);
    return rc;
}
CALL(mxc_recordio_read) {
    const void *data;
    size_t size;
    return mxc_recordio_read(P(0, reader()), P(1, &data), P(2, &size));
}
CALL(mxc_recordio_seek) { return mxc_recordio_seek(NULL, 1); }
CALL(mxc_recordio_seek_offset) { return mxc_recordio_seek_offset(NULL, 0); }
CALL(mxc_recordio_tell) { return AS(mxc_recordio_tell(NULL) == -1); }
CALL(mxc_recordio_keys) {
    const int64_t *keys;
    size_t n;
    return mxc_recordio_keys(P(0, reader()), P(1, &keys), P(2, &n));
}
CALL(mxc_recordio_write) { return mxc_recordio_write(P(0, writer()), P(1, "abc"), 3); }
CALL(mxc_recordio_write_idx) { return mxc_recordio_write_idx(P(0, writer()), 4, P(1, "abc"), 3); }
CALL(mxc_recordio_close) { return mxc_recordio_close(NULL); }
CALL(mxc_recordio_unpack_image) {
    static const uint64_t rec[4] = {0}; /* 32 aligned bytes: a header, flag 0 */
    mxc_image_record h;
    const void *image;
    size_t n;
    return mxc_recordio_unpack_image(P(0, rec), sizeof rec, P(1, &h), P(2, &image), P(3, &n));
}
CALL(mxc_recordio_pack_image) {
    mxc_image_record h = {.label = 1};
    float label = 2;
    unsigned char out[64];
    size_t n;
    return mxc_recordio_pack_image(P(0, &h), P(1, &label), 1, P(2, "abc"), 3, P(3, out), sizeof out,
                                   P(4, &n));
}
TAKES_NULL(mxc_im2rec_params_init)
/* The files of the im2rec rows, made once per row (each row runs in its own process). */
static const char *im2rec_file(int which) {
    static const char *paths[4];
    if (paths[0] == NULL) {
        paths[0] = image_folder();
        paths[1] = temp_with("0\t1.000000\tc/x.png\n");
        paths[2] = temp_path("mxc-null-rec-");
        paths[3] = temp_path("mxc-null-idx-");
    }
    return paths[which];
}
CALL(mxc_im2rec_make_list) {
    int64_t n;
    return mxc_im2rec_make_list(P(0, im2rec_file(0)), P(1, im2rec_file(1)), 0, 0, P(2, &n));
}
CALL(mxc_im2rec) {
    mxc_im2rec_params ip;
    mxc_im2rec_params_init(&ip);
    int64_t n;
    return mxc_im2rec(P(0, im2rec_file(1)), P(1, im2rec_file(0)), P(2, im2rec_file(2)),
                      P(3, im2rec_file(3)), P(4, &ip), P(5, &n));
}

/* ---- The table ----------------------------------------------------------------------- */

#define OK  MXC_OK
#define INV MXC_EINVAL
#define MIS MXC_EMISUSE

struct row {
    const char *name;
    int (*call)(int k);
    int num;      /* pointer arguments */
    int want[10]; /* per pointer argument: the code when it is NULL */
};

#define ROW(fn, ...)                                                                       \
    {                                                                                      \
#fn, call_##fn, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), { __VA_ARGS__ } \
    }

static const struct row rows[] = {
    /* base.h: NULL dims give the empty shape; NULL restores the default allocator / log */
    ROW(mxc_shape_make, OK),
    ROW(mxc_shape_size, OK),
    ROW(mxc_set_allocator, OK),
    ROW(mxc_set_log, OK, OK),
    /* engine.h */
    ROW(mxc_engine_create, OK, INV),
    ROW(mxc_engine_destroy, OK),
    ROW(mxc_engine_get_default, INV),
    ROW(mxc_engine_type_of, OK),
    ROW(mxc_engine_new_var, MIS, INV),
    ROW(mxc_engine_new_state_var, MIS, INV),
    ROW(mxc_engine_delete_var, MIS, MIS, OK, OK),
    ROW(mxc_engine_push, MIS, INV),
    ROW(mxc_engine_new_operator, MIS, INV, INV),
    ROW(mxc_engine_push_operator, MIS, MIS),
    ROW(mxc_engine_delete_operator, MIS, OK),
    ROW(mxc_engine_complete, OK),
    ROW(mxc_engine_wait_for_var, MIS, MIS),
    ROW(mxc_engine_wait_all, MIS),
    ROW(mxc_engine_get_stats, MIS, INV),
    ROW(mxc_engine_get_config, MIS, INV),
    ROW(mxc_engine_profiler_start, MIS),
    ROW(mxc_engine_profiler_stop, MIS),
    ROW(mxc_engine_profiler_dump, MIS, INV),
    ROW(mxc_gpu_info, INV),
    /* executor.h: no requests (all write) and no aux list (none) are valid choices; no
     * gradient arrays while requests want gradients is not */
    ROW(mxc_executor_bind, MIS, INV, INV, OK, OK, INV),
    ROW(mxc_executor_simple_bind, MIS, INV, INV, INV),
    ROW(mxc_executor_reshape, MIS, INV, INV, INV),
    ROW(mxc_executor_forward, MIS),
    ROW(mxc_executor_backward, MIS, OK),
    ROW(mxc_executor_outputs, MIS, INV, INV),
    ROW(mxc_executor_arrays, MIS, OK, OK, OK, OK, OK),
    ROW(mxc_executor_plan_info, MIS, INV),
    ROW(mxc_executor_entry_block, OK),
    ROW(mxc_executor_set_monitor, MIS, OK, OK),
    ROW(mxc_executor_print, MIS, INV),
    ROW(mxc_executor_free, OK),
    /* io.h: a NULL fashion-mnist dir is the default one (here: a folder without it) */
    ROW(mxc_data_iter_params_init, OK),
    ROW(mxc_data_iter_create_idx, INV, INV, INV, INV),
    ROW(mxc_data_iter_create_fashion_mnist, MXC_EIO, INV, INV),
    ROW(mxc_data_iter_create_csv, INV, INV, OK, OK, INV, INV),
    ROW(mxc_data_iter_create_array, INV, OK, INV, INV),
    ROW(mxc_image_record_params_init, OK),
    ROW(mxc_data_iter_create_image_record, INV, INV, INV),
    ROW(mxc_data_iter_next, MIS),
    ROW(mxc_data_iter_reset, MIS),
    ROW(mxc_data_iter_data, OK),
    ROW(mxc_data_iter_label, OK),
    ROW(mxc_data_iter_pad, OK),
    ROW(mxc_data_iter_provide_data, MIS, INV),
    ROW(mxc_data_iter_provide_label, MIS, INV),
    ROW(mxc_data_iter_num_samples, OK),
    ROW(mxc_data_iter_num_batches, OK),
    ROW(mxc_data_iter_num_skipped, OK),
    ROW(mxc_data_iter_free, OK),
    /* model.h: fit without an eval iterator or a result, progress without a user; a NULL
     * iterator given to fit, score or predict is MXC_EINVAL, a NULL metric "acc" */
    ROW(mxc_init_array, INV, INV, MIS),
    ROW(mxc_init_array_hinted, INV, INV, OK, MIS), /* no hint: by the name */
    ROW(mxc_optimizer_create, INV, INV),
    ROW(mxc_optimizer_set_mult, MIS, INV),
    ROW(mxc_optimizer_update, MIS, INV, MIS, MIS),
    ROW(mxc_optimizer_current_lr, OK),
    ROW(mxc_optimizer_free, OK),
    ROW(mxc_optimizer_save_states, MIS, INV),
    ROW(mxc_optimizer_load_states, MIS, INV),
    ROW(mxc_kvstore_set_optimizer, MIS, MIS),
    /* kvstore.h: a NULL updater removes it (its user is then ignored) */
    ROW(mxc_kvstore_create, INV, INV),
    ROW(mxc_kvstore_free, OK),
    ROW(mxc_kvstore_type, OK),
    ROW(mxc_kvstore_init, MIS, INV, INV),
    ROW(mxc_kvstore_push, MIS, INV, INV),
    ROW(mxc_kvstore_pull, MIS, INV, INV),
    ROW(mxc_kvstore_pushpull, MIS, INV, INV, INV),
    ROW(mxc_kvstore_set_updater, MIS, OK, OK),
    ROW(mxc_kvstore_rank, MIS, INV),
    ROW(mxc_kvstore_num_workers, MIS, INV),
    ROW(mxc_kvstore_barrier, MIS),
    ROW(mxc_metric_create, INV, INV),
    ROW(mxc_metric_add, MIS, MIS),
    ROW(mxc_metric_update, MIS, INV, INV),
    ROW(mxc_metric_get, MIS, INV, INV, INV),
    ROW(mxc_metric_reset, MIS),
    ROW(mxc_metric_free, OK),
    ROW(mxc_model_create, MIS, INV),
    ROW(mxc_model_load, INV, INV),
    ROW(mxc_model_load_params, MIS, INV),
    ROW(mxc_model_load_latest, INV, INV, INV),
    ROW(mxc_model_save, MIS, INV),
    ROW(mxc_model_symbol, OK),
    ROW(mxc_model_param, OK, OK),
    ROW(mxc_model_free, OK),
    ROW(mxc_fit_print_progress, OK, OK),
    ROW(mxc_fit_config_init, OK),
    ROW(mxc_model_fit, MIS, INV, OK, INV, OK),
    ROW(mxc_model_score, MIS, INV, OK, INV),
    ROW(mxc_model_predict, MIS, INV, INV),
    ROW(mxc_model_score_on, MIS, INV, OK, INV),
    ROW(mxc_model_predict_on, MIS, INV, INV),
    ROW(mxc_model_predict_outputs, MIS, INV, INV, INV),
    /* ndarray.h: names NULL saves an unnamed list; list_free takes NULL lists */
    ROW(mxc_nd_create, INV, INV),
    ROW(mxc_nd_full, INV, INV),
    ROW(mxc_nd_fill, MIS),
    ROW(mxc_nd_zeros, INV, INV),
    ROW(mxc_nd_ones, INV, INV),
    ROW(mxc_nd_free, OK),
    ROW(mxc_nd_reshape, MIS, INV, INV),
    ROW(mxc_nd_slice, MIS, INV),
    ROW(mxc_nd_at, MIS, INV),
    ROW(mxc_nd_get_shape, MIS, INV),
    ROW(mxc_nd_dtype, OK),
    ROW(mxc_nd_get_context, MIS, INV),
    ROW(mxc_nd_size, OK),
    ROW(mxc_nd_wait_to_read, MIS),
    ROW(mxc_nd_wait_to_write, MIS),
    ROW(mxc_nd_sync_copy_from_cpu, MIS, INV),
    ROW(mxc_nd_sync_copy_to_cpu, MIS, INV),
    ROW(mxc_nd_copy_to, MIS, MIS),
    ROW(mxc_nd_add, MIS, MIS, INV),
    ROW(mxc_nd_sub, MIS, MIS, INV),
    ROW(mxc_nd_mul, MIS, MIS, INV),
    ROW(mxc_nd_div, MIS, MIS, INV),
    ROW(mxc_nd_add_scalar, MIS, INV),
    ROW(mxc_nd_sub_scalar, MIS, INV),
    ROW(mxc_nd_mul_scalar, MIS, INV),
    ROW(mxc_nd_div_scalar, MIS, INV),
    ROW(mxc_nd_dot, MIS, MIS, INV),
    ROW(mxc_nd_sum, MIS, INV),
    ROW(mxc_nd_random_uniform, MIS),
    ROW(mxc_nd_random_normal, MIS),
    ROW(mxc_nd_save, INV, INV, OK),
    ROW(mxc_nd_load, INV, INV, INV, INV),
    ROW(mxc_nd_list_free, OK),
    /* autograd.h: prev NULL is not wanted; reqs NULL is all write; head_grads NULL ones */
    ROW(mxc_autograd_set_recording, OK),
    ROW(mxc_autograd_set_training, OK),
    ROW(mxc_autograd_mark_variables, INV, INV, OK),
    ROW(mxc_autograd_backward, INV, OK),
    ROW(mxc_autograd_grad, INV, OK, INV, INV),
    /* networks.h */
    ROW(mxc_net_mlp, INV, INV, INV),
    ROW(mxc_net_lenet, INV),
    ROW(mxc_net_resnet, INV),
    /* op.h */
    ROW(mxc_op_list, INV, INV),
    ROW(mxc_op_get_info, INV, INV),
    ROW(mxc_op_supports, OK),
    ROW(mxc_imperative_invoke, INV, INV, INV, INV, INV),
    /* storage.h: freeing NULL does nothing */
    ROW(mxc_storage_alloc, INV),
    ROW(mxc_storage_free, OK),
    ROW(mxc_storage_get_stats, INV),
    /* symbol.h: a NULL node name is automatic, NULL input names and compose names are
     * positional, inference results may be left out */
    ROW(mxc_symbol_variable, INV, INV),
    ROW(mxc_symbol_create, INV, INV, INV, OK, OK, INV, INV),
    ROW(mxc_symbol_compose, MIS, OK, INV, INV),
    ROW(mxc_symbol_group, INV, INV),
    ROW(mxc_symbol_get_output, MIS, INV),
    ROW(mxc_symbol_get_internals, MIS, INV),
    ROW(mxc_symbol_copy, MIS, INV),
    ROW(mxc_symbol_free, OK),
    ROW(mxc_symbol_num_outputs, MIS, INV),
    ROW(mxc_symbol_get_name, MIS, INV),
    ROW(mxc_symbol_list_arguments, MIS, INV, INV),
    ROW(mxc_symbol_list_outputs, MIS, INV, INV),
    ROW(mxc_symbol_list_auxiliary_states, MIS, INV, INV),
    ROW(mxc_symbol_set_attr, MIS, INV, INV),
    ROW(mxc_symbol_get_attr, MIS, INV, INV),
    ROW(mxc_symbol_list_attrs, MIS, INV, INV),
    ROW(mxc_symbol_infer_shape, MIS, OK, INV, OK, OK, OK, OK, OK),
    ROW(mxc_symbol_infer_type, MIS, OK, INV, OK, OK, OK, OK),
    ROW(mxc_symbol_load_json, INV, INV),
    ROW(mxc_symbol_load, INV, INV),
    ROW(mxc_symbol_save_json, MIS, INV),
    ROW(mxc_symbol_save, MIS, INV),
    ROW(mxc_symbol_to_dot, MIS, INV, INV, INV),
    /* recordio.h: no index path means no index; the counts may be left out */
    ROW(mxc_recordio_open, INV, OK, INV),
    ROW(mxc_recordio_read, MIS, INV, INV),
    ROW(mxc_recordio_seek, MIS),
    ROW(mxc_recordio_seek_offset, MIS),
    ROW(mxc_recordio_tell, OK),
    ROW(mxc_recordio_keys, MIS, INV, INV),
    ROW(mxc_recordio_write, MIS, INV),
    ROW(mxc_recordio_write_idx, MIS, INV),
    ROW(mxc_recordio_close, OK),
    ROW(mxc_recordio_unpack_image, INV, INV, INV, INV),
    ROW(mxc_recordio_pack_image, INV, INV, INV, INV, INV),
    ROW(mxc_im2rec_params_init, OK),
    ROW(mxc_im2rec_make_list, INV, INV, OK),
    ROW(mxc_im2rec, INV, INV, INV, INV, INV, OK),
};

/* Row _i: NULL in each pointer argument in turn. */
START_TEST(test_null_arguments) {
    const struct row *r = &rows[_i];
    for (int k = 0; k < r->num; k++) {
        mxc_clear_error();
        int rc = r->call(k);
        ck_assert_msg(rc == r->want[k], "%s with argument %d NULL: %s (%s), expected %s", r->name,
                      k + 1, mxc_err_name(rc), mxc_last_error(), mxc_err_name(r->want[k]));
        if (rc != MXC_OK)
            ck_assert_msg(mxc_last_error()[0] != '\0', "%s: %s without a message", r->name,
                          mxc_err_name(rc));
        if (rc != MXC_OK && rc != MXC_EIO)
            ck_assert_msg(strstr(mxc_last_error(), r->name) != NULL,
                          "%s with argument %d NULL: the message does not name the call: %s",
                          r->name, k + 1, mxc_last_error());
    }
    CK_OK(mxc_nd_wait_all());
    remove_temps();
}
END_TEST

/* Every function of the public headers that takes a pointer has a row. */
START_TEST(test_every_function_has_a_row) {
    const char *headers[] = {"autograd", "base",    "engine",  "executor", "io",
                             "kvstore",  "model",   "ndarray", "networks", "op",
                             "recordio", "storage", "symbol"};
    int checked = 0;
    for (size_t h = 0; h < COUNT(headers); h++) {
        char path[256];
        snprintf(path, sizeof path, "include/mxc/%s.h", headers[h]);
        char *text = mxct_read_file(path, NULL);
        ck_assert_msg(text != NULL, "cannot read %s (run from the repository root)", path);
        for (char *p = strstr(text, "MXC_API "); p; p = strstr(p + 1, "MXC_API ")) {
            char *open = strchr(p, '('), *close = open ? strchr(open, ')') : NULL;
            ck_assert_ptr_nonnull(close);
            char *name = open;
            while (name > p && (name[-1] == '_' || isalnum((unsigned char)name[-1])))
                name--;
            int len = (int)(open - name);
            /* a '*', or a function pointer type (mxc_log_fn, mxc_executor_monitor) */
            char params[512];
            snprintf(params, sizeof params, "%.*s", (int)(close - open), open);
            bool has_pointer =
                strchr(params, '*') || strstr(params, "_fn ") || strstr(params, "_monitor ");
            if (!has_pointer)
                continue;
            bool found = false;
            for (size_t i = 0; i < COUNT(rows) && !found; i++)
                found = (int)strlen(rows[i].name) == len && strncmp(rows[i].name, name, len) == 0;
            ck_assert_msg(found, "%.*s (%s) takes a pointer but has no row", len, name, path);
            checked++;
        }
        free(text);
    }
    ck_assert_int_eq(checked, (int)COUNT(rows));
}
END_TEST

static Suite *null_suite(void) {
    Suite *s = suite_create("null_args");
    TCase *tc = tcase_create("null_args");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_null_arguments, 0, (int)COUNT(rows));
    tcase_add_test(tc, test_every_function_has_a_row);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(null_suite()); }

/*
 * tests/check_oom.c — the allocation-failure sweep, in the style of SQLite's: one
 * representative sequence of the library's work (arrays created and filled, a symbol
 * loaded from JSON, simple_bind, forward(is_train), backward, an optimizer update, params
 * saved, loaded back as a checkpoint (mxc_model_load_latest: symbol file and params) and
 * saved as one (mxc_model_save), everything freed, storage shut down) is run once to count
 * its
 * allocations M, then for every N in [0, M) with allocation N failing alone (transient),
 * and with every allocation from N on failing (persistent). Each run must stop at a call
 * that returns MXC_ENOMEM with a message, or succeed; freeing what exists must work with
 * allocations still failing (releasing memory needs none), the storage shutdown must then
 * return MXC_OK, no error may be logged (the library logs when it has to leak), and the
 * allocator's live-block count must come back to where it started. Run it under
 * AddressSanitizer (make test SANITIZE=address TESTS=oom) for LeakSanitizer's view too.
 *
 * The naive engine runs every operation inline on the pushing thread, so allocation N is
 * the same allocation in every run (worker threads would make the order vary).
 */
#include "mxc/mxc.h"
#include "common/handle.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* static: the default engine, made through the allocator, is destroyed at exit */
static struct mxct_alloc_counts counts;

/* A small network touching the layers' allocation paths: temp space (Convolution's
 * im2col), the random generator (Dropout), auxiliary states (BatchNorm), a loss. */
static const char net_json[] =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"conv_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"conv_bias\", \"inputs\": []},"
    "{\"op\": \"Convolution\", \"name\": \"conv\", "
    "\"attrs\": {\"kernel\": \"(3, 3)\", \"num_filter\": \"2\"}, "
    "\"inputs\": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"bn_gamma\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"bn_beta\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"bn_moving_mean\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"bn_moving_var\", \"inputs\": []},"
    "{\"op\": \"BatchNorm\", \"name\": \"bn\", "
    "\"inputs\": [[3, 0, 0], [4, 0, 0], [5, 0, 0], [6, 0, 0], [7, 0, 0]]},"
    "{\"op\": \"Activation\", \"name\": \"relu\", \"attrs\": {\"act_type\": \"relu\"}, "
    "\"inputs\": [[8, 0, 0]]},"
    "{\"op\": \"Dropout\", \"name\": \"drop\", \"attrs\": {\"p\": \"0.25\"}, "
    "\"inputs\": [[9, 0, 0]]},"
    "{\"op\": \"Flatten\", \"name\": \"flat\", \"inputs\": [[10, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"fc_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc_bias\", \"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"fc\", \"attrs\": {\"num_hidden\": \"3\"}, "
    "\"inputs\": [[11, 0, 0], [12, 0, 0], [13, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"softmax_label\", \"inputs\": []},"
    "{\"op\": \"SoftmaxOutput\", \"name\": \"softmax\", \"inputs\": [[14, 0, 0], [15, 0, 0]]}"
    "], \"arg_nodes\": [0, 1, 2, 4, 5, 6, 7, 12, 13, 15], \"heads\": [[16, 0, 0]], "
    "\"attrs\": {\"mxnet_version\": [\"int\", 10901]}}";

#define BATCH 4

/* The checkpoint: <folder>/net-symbol.json and <folder>/net-0001.params in a new folder. */
static char ckpt_dir[256], ckpt_prefix[300], params_path[320], symbol_path[320];

/* In memory (/dev/shm) where there is one: each run fsyncs files and their folder, which
 * on a disk makes the sweep several times slower. */
static void make_checkpoint_folder(void) {
    const char *tmp = getenv("TMPDIR");
    if (access("/dev/shm", W_OK) == 0)
        tmp = "/dev/shm";
    snprintf(ckpt_dir, sizeof ckpt_dir, "%s/mxc_oom_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(ckpt_dir));
    snprintf(ckpt_prefix, sizeof ckpt_prefix, "%s/net", ckpt_dir);
    snprintf(params_path, sizeof params_path, "%s-0001.params", ckpt_prefix);
    snprintf(symbol_path, sizeof symbol_path, "%s-symbol.json", ckpt_prefix);
    FILE *f = fopen(symbol_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(net_json, f);
    fclose(f);
}

static void remove_checkpoint_folder(void) {
    remove(params_path);
    remove(symbol_path);
    ck_assert_int_eq(rmdir(ckpt_dir), 0); /* no temporary left behind */
}

/* Error-level log lines (the library logs one when it has to leak memory). */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int error_logs;
static char first_error_log[512];

static void count_error_log(void *user, int level, const char *message) {
    (void)user;
    (void)level;
    pthread_mutex_lock(&log_lock);
    if (error_logs++ == 0)
        snprintf(first_error_log, sizeof first_error_log, "%s", message);
    pthread_mutex_unlock(&log_lock);
}

/* What one run holds; everything is freed by release(). */
struct run {
    mxc_ndarray *data, *label;
    mxc_symbol *sym;
    mxc_executor *exec;
    mxc_optimizer *opt;
    mxc_model *model;
    int epoch;
    const char *failed; /* the call that failed */
};

/* Runs `call`; on failure records it and returns its status from the sequence. */
#define STEP(r, call)            \
    do {                         \
        int rc_ = (call);        \
        if (rc_ != MXC_OK) {     \
            (r)->failed = #call; \
            return rc_;          \
        }                        \
    } while (0)

/* The sequence, up to its first failing call. */
static int sequence(struct run *r) {
    float x[BATCH * 6 * 6], y[BATCH];
    for (int i = 0; i < BATCH * 36; i++)
        x[i] = (float)((i * 7) % 11) / 11.0f;
    for (int i = 0; i < BATCH; i++)
        y[i] = (float)(i % 3);
    const mxc_context cpu = mxc_cpu();
    STEP(r, mxc_nd_create(&SHAPE(BATCH, 1, 6, 6), MXC_FLOAT32, cpu, 0, &r->data));
    STEP(r, mxc_nd_create(&SHAPE(BATCH), MXC_FLOAT32, cpu, 1, &r->label));
    STEP(r, mxc_nd_sync_copy_from_cpu(r->data, x, sizeof x));
    STEP(r, mxc_nd_sync_copy_from_cpu(r->label, y, sizeof y));
    STEP(r, mxc_symbol_load_json(net_json, &r->sym));
    const char *inputs[] = {"data", "softmax_label"};
    const mxc_shape shapes[] = {SHAPE(BATCH, 1, 6, 6), SHAPE(BATCH)};
    STEP(r, mxc_executor_simple_bind(r->sym, cpu, 2, inputs, shapes, MXC_GRAD_WRITE, &r->exec));
    int num_args, num_names;
    mxc_ndarray *const *args, *const *grads;
    const char *const *names;
    STEP(r, mxc_executor_arrays(r->exec, &num_args, &args, &grads, NULL, NULL));
    STEP(r, mxc_symbol_list_arguments(r->sym, &num_names, &names));
    for (int i = 0; i < num_args; i++) {
        if (strcmp(names[i], "data") == 0)
            STEP(r, mxc_nd_copy_to(r->data, args[i]));
        else if (strcmp(names[i], "softmax_label") == 0)
            STEP(r, mxc_nd_copy_to(r->label, args[i]));
        else if (strstr(names[i], "weight") != NULL)
            STEP(r, mxc_nd_random_uniform(args[i], -0.5f, 0.5f));
        else if (strcmp(names[i], "bn_gamma") == 0)
            STEP(r, mxc_nd_fill(args[i], 1));
    }
    STEP(r, mxc_executor_forward(r->exec, 1));
    STEP(r, mxc_executor_backward(r->exec, 0, NULL));
    mxc_optimizer_config cfg = {.kind = MXC_OPT_SGD, .lr = 0.1f, .momentum = 0.9f};
    STEP(r, mxc_optimizer_create(&cfg, &r->opt));
    for (int i = 0; i < num_args; i++)
        if (grads[i] != NULL)
            STEP(r, mxc_optimizer_update(r->opt, i, names[i], args[i], grads[i]));
    STEP(r, mxc_nd_wait_all()); /* a failure inside an operation surfaces here */
    char keys[16][64];          /* as a checkpoint names them: "arg:conv_weight" */
    const char *key_ptrs[16];
    for (int i = 0; i < num_args && i < 16; i++) {
        snprintf(keys[i], sizeof keys[i], "arg:%s", names[i]);
        key_ptrs[i] = keys[i];
    }
    STEP(r, mxc_nd_save(params_path, (size_t)num_args, args, key_ptrs));
    STEP(r, mxc_model_load_latest(ckpt_prefix, &r->epoch, &r->model));
    STEP(r, mxc_model_save(r->model, ckpt_prefix, 1));
    return MXC_OK;
}

/* Frees everything the run holds, waits for the engine (its status in *wait_rc) and
 * shuts storage down, returning the shutdown's status. */
static int release(struct run *r, int *wait_rc) {
    mxc_model_free(r->model);
    mxc_optimizer_free(r->opt);
    mxc_executor_free(r->exec);
    mxc_symbol_free(r->sym);
    mxc_nd_free(r->data);
    mxc_nd_free(r->label);
    *r = (struct run){0};
    *wait_rc = mxc_nd_wait_all();
    int rc = mxc_storage_shutdown();
    /* Freed handles stay in their slabs (a quarantine against stale handles): give the
     * unused slabs back so every run starts from the same allocator state. */
    mxc__handles_trim();
    return rc;
}

/* One run with allocation `n` failing (only it, or every one from it on when
 * `persistent`): a clean MXC_ENOMEM or success, freeing with allocations still failing,
 * a clean shutdown, no leak. `live` is the allocator's live-block count to come back to.
 * True when the run stopped at MXC_ENOMEM (false: it recovered and succeeded). */
static bool run_failing(long n, bool persistent, long live) {
    const char *mode = persistent ? "from allocation %ld on" : "allocation %ld alone";
    char what[64];
    snprintf(what, sizeof what, mode, n);
    if (persistent)
        mxct_alloc_fail_after(&counts, n);
    else
        mxct_alloc_fail_once(&counts, n);
    mxc_clear_error();
    struct run r = {0};
    int rc = sequence(&r);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", mxc_last_error());
    const char *failed = r.failed;
    int wait_rc;
    int shutdown_rc = release(&r, &wait_rc);
    char shutdown_msg[600];
    snprintf(shutdown_msg, sizeof shutdown_msg, "%s", mxc_last_error());
    long failures = atomic_load(&counts.failures);
    mxct_alloc_fail_after(&counts, -1);

    ck_assert_msg(failures > 0, "%s: the allocation was never made (M differs per run)", what);
    ck_assert_msg(rc == MXC_OK || rc == MXC_ENOMEM, "%s: %s returned %s: %s", what, failed,
                  mxc_err_name(rc), msg);
    ck_assert_msg(rc == MXC_OK || msg[0] != '\0', "%s: %s returned MXC_ENOMEM without a message",
                  what, failed);
    ck_assert_msg(wait_rc == MXC_OK || wait_rc == MXC_ENOMEM,
                  "%s: the wait after freeing returned %s", what, mxc_err_name(wait_rc));
    ck_assert_msg(shutdown_rc == MXC_OK, "%s (%s failed): storage shutdown after freeing: %s", what,
                  failed ? failed : "nothing", shutdown_msg);
    pthread_mutex_lock(&log_lock);
    int logs = error_logs;
    pthread_mutex_unlock(&log_lock);
    ck_assert_msg(logs == 0, "%s (%s failed): logged '%s'", what, failed ? failed : "nothing",
                  first_error_log);
    long now = atomic_load(&counts.live);
    ck_assert_msg(now == live, "%s (%s failed): %ld allocator blocks leaked", what,
                  failed ? failed : "nothing", now - live);
    return rc == MXC_ENOMEM;
}

/* _i: 0 fails one allocation at a time, 1 every allocation from N on. */
START_TEST(test_sweep) {
    const bool persistent = _i == 1;
    mxct_alloc_install(&counts); /* the first mxc call of this process (fork mode) */
    mxc_set_log(count_error_log, NULL, MXC_LOG_ERROR);
    make_checkpoint_folder();
    /* a first run makes what lives until exit (the default engine and its pools, the
     * resources); what stays allocated after a later run is a leak */
    struct run r = {0};
    int wait_rc;
    CK_OK(sequence(&r));
    ck_assert_int_eq(r.epoch, 1);
    ck_assert_ptr_nonnull(mxc_model_param(r.model, "fc_weight"));
    CK_OK(release(&r, &wait_rc));
    CK_OK(wait_rc);
    const long live = atomic_load(&counts.live);
    /* M: the allocations of one clean run */
    mxct_alloc_fail_after(&counts, -1);
    CK_OK(sequence(&r));
    CK_OK(release(&r, &wait_rc));
    const long m = atomic_load(&counts.succeeded);
    ck_assert_int_eq(atomic_load(&counts.live), live);
    ck_assert_int_gt(m, 100);
    printf("check_oom: the sequence makes %ld allocations; failing %s\n", m,
           persistent ? "every one from N on" : "each one alone");
    long stopped = 0;
    for (long n = 0; n < m; n++)
        stopped += run_failing(n, persistent, live);
    /* A run recovers when the failed allocation had a fallback (storage trims its pool and
     * retries; a freed block that cannot be filed in the pool goes to the system) or came
     * after the sequence, in the frees. */
    printf("check_oom: %ld run(s) stopped at MXC_ENOMEM, %ld recovered\n", stopped, m - stopped);
    ck_assert_int_gt(stopped, 0);
    remove_checkpoint_folder();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("oom");
    TCase *tc = tcase_create("sweep");
    tcase_set_timeout(tc, mxct_timeout(120));
    tcase_add_loop_test(tc, test_sweep, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    setenv("MXC_ENGINE_TYPE", "naive", 1); /* before the default engine exists */
    return mxct_run_suite(suite());
}

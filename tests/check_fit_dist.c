/*
 * tests/check_fit_dist.c — data-parallel training across processes: mxc_model_fit with a
 * dist_sync store, and `mxc train --kvstore dist_sync --resume`, under mpirun.
 *
 * Started by `make test` (outside mpirun) the binary is a Check suite: it trains the MLP
 * on Fashion-MNIST for one epoch in this process (one rank, batch 100, no store), then
 * starts itself again under `mpirun --allow-run-as-root --oversubscribe -np 2`, where each
 * rank trains on its half of the data (batch 50: the same global batch of 100) for two
 * epochs, one mxc_model_fit call per epoch (the second loading the optimizer state saved
 * beside the first's checkpoint). After each epoch every rank saves its weights to
 * build/check_fit_dist-rank<r>-EEEE.params and, after a barrier, rank 0 compares the files
 * byte for byte; then the ranks train on shards of different sizes (10 and 7 batches), all
 * on 7 batches per epoch, ending with identical weights. The launcher checks that every rank
 * passed, that 2 ranks reach the 1-rank accuracy within 1.5 %, and then that `mpirun -np 2 mxc
 * train --kvstore dist_sync
 * --resume` continues from the last checkpoint (epoch 3 saved, one result line: rank 0's).
 * Without the dataset or without MPI the cases say so and pass.
 */
#include "mxc/kvstore.h"
#include "mxc/model.h"
#include "mxc/networks.h"
#include "tests/util/test_util.h"
#include <check.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PREFIX "build/check_fit_dist"

static bool have_data(void) {
    const char *dir = getenv("MXC_FASHION_MNIST_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte.gz",
             dir && *dir ? dir : "/usr/share/datasets/fashion-mnist");
    if (access(path, R_OK) == 0)
        return true;
    printf("check_fit_dist: %s missing (scripts/deps.sh installs dataset-fashion-mnist); "
           "skipped\n",
           path);
    return false;
}

/* The MLP fitted (or to be fitted) by both sides: SGD lr 0.1 momentum 0.5, seed 5. */
static void config(mxc_fit_config *cfg) {
    mxc_fit_config_init(cfg);
    cfg->optimizer.lr = 0.1f;
    cfg->optimizer.momentum = 0.5f;
    cfg->seed = 5;
    cfg->quiet = 1;
}

static mxc_data_iter *fashion(int train, int batch, int parts, int part) {
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = batch;
    p.shuffle = train;
    p.seed = 5;
    p.num_parts = parts;
    p.part_index = part;
    mxc_data_iter *it = NULL;
    int rc = mxc_data_iter_create_fashion_mnist(NULL, train, 1, &p, &it);
    if (rc != MXC_OK) {
        printf("fashion-mnist: %s\n", mxc_last_error());
        return NULL;
    }
    return it;
}

static mxc_model *mlp(void) {
    mxc_symbol *net = NULL;
    mxc_model *m = NULL;
    int hidden[] = {128, 64};
    if (mxc_net_mlp(2, hidden, "relu", 10, &net) == MXC_OK)
        mxc_model_create(net, &m);
    mxc_symbol_free(net);
    return m;
}

/* ---- Under mpirun: one rank ------------------------------------------------------------ */

#ifdef MXC_USE_MPI
/* What the progress callback saw: the batches per epoch and the epochs ended. */
struct trim_log {
    int64_t num_batches;
    int epochs;
};

static void count_batches(const mxc_fit_progress *p, void *user) {
    struct trim_log *log = user;
    log->num_batches = p->num_batches;
    log->epochs += p->end_of_epoch;
}

static bool same_file(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    char *x = mxct_read_file(a, &la), *y = mxct_read_file(b, &lb);
    bool same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* Shards of different sizes (rank 0: 10 batches, the others 7): every rank trains 7 per
 * epoch, and the weights still agree bit for bit. */
static bool unequal_shards(mxc_kvstore *kv, int rank) {
    int64_t rows = rank == 0 ? 200 : 140;
    float *x = malloc(sizeof(float) * 784 * (size_t)rows), *y = malloc(sizeof(float) * 140 * 2);
    for (int64_t i = 0; i < 784 * rows; i++)
        x[i] = (float)((i * 7 + rank) % 13) / 13.0f;
    for (int64_t i = 0; i < rows; i++)
        y[i] = (float)(i % 10);
    mxc_shape xs = {2, {rows, 784}}, ys = {1, {rows}};
    mxc_ndarray *data = NULL, *label = NULL;
    mxc_data_iter *it = NULL;
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = 20;
    mxc_model *model = mlp();
    int rc = mxc_nd_create(&xs, MXC_FLOAT32, mxc_cpu(), 0, &data);
    if (rc == MXC_OK)
        rc = mxc_nd_create(&ys, MXC_FLOAT32, mxc_cpu(), 0, &label);
    if (rc == MXC_OK)
        rc = mxc_nd_sync_copy_from_cpu(data, x, sizeof(float) * 784 * (size_t)rows);
    if (rc == MXC_OK)
        rc = mxc_nd_sync_copy_from_cpu(label, y, sizeof(float) * (size_t)rows);
    if (rc == MXC_OK)
        rc = mxc_data_iter_create_array(data, label, &p, &it);
    mxc_fit_config cfg;
    config(&cfg);
    cfg.kvstore = "dist_sync";
    cfg.num_epochs = 2;
    struct trim_log log = {0};
    cfg.quiet = 0;
    cfg.callback = count_batches;
    cfg.user = &log;
    if (rc == MXC_OK)
        rc = mxc_model_fit(model, it, NULL, &cfg, NULL);
    char mine[256];
    snprintf(mine, sizeof mine, "%s-shards-rank%d", PREFIX, rank);
    if (rc == MXC_OK)
        rc = mxc_model_save(model, mine, 1);
    if (rc == MXC_OK)
        rc = mxc_kvstore_barrier(kv);
    bool ok = rc == MXC_OK;
    if (!ok)
        printf("rank %d: unequal shards: %s\n", rank, mxc_last_error());
    if (ok && rank == 0) {
        printf("rank 0: unequal shards: %lld batches per epoch\n", (long long)log.num_batches);
        ok = log.num_batches == 7 && log.epochs == 2;
        char a[300], b[300];
        snprintf(a, sizeof a, "%s-shards-rank0-0001.params", PREFIX);
        snprintf(b, sizeof b, "%s-shards-rank1-0001.params", PREFIX);
        bool same = same_file(a, b);
        printf("rank 0: unequal shards: weights %s\n", same ? "identical" : "DIFFER");
        ok = ok && same;
    }
    if (ok)
        ok = mxc_kvstore_barrier(kv) == MXC_OK;
    mxc_data_iter_free(it);
    mxc_nd_free(data);
    mxc_nd_free(label);
    mxc_model_free(model);
    free(x);
    free(y);
    return ok;
}

static int rank_main(void) {
    mxc_kvstore *kv = NULL; /* for the rank, the job's size and the barriers */
    int rank = -1, size = 0, rc = mxc_kvstore_create("dist_sync", &kv);
    if (rc == MXC_OK)
        rc = mxc_kvstore_rank(kv, &rank);
    if (rc == MXC_OK)
        rc = mxc_kvstore_num_workers(kv, &size);
    mxc_data_iter *train = fashion(1, 50, size, rank), *test = fashion(0, 100, 1, 0);
    mxc_model *model = mlp();
    bool ok = rc == MXC_OK && train && test && model;
    for (int e = 0; ok && e < 2; e++) {
        mxc_fit_config cfg;
        config(&cfg);
        cfg.kvstore = "dist_sync";
        cfg.begin_epoch = e;
        cfg.checkpoint_prefix = PREFIX;
        cfg.optimizer_states = 1;
        mxc_fit_result r;
        rc = mxc_model_fit(model, train, test, &cfg, &r);
        if (rc != MXC_OK) {
            printf("rank %d: fit: %s\n", rank, mxc_last_error());
            ok = false;
            break;
        }
        if (rank == 0)
            printf("rank 0: epoch %d accuracy %.4f\n", e + 1, r.eval_metric);
        char mine[256];
        snprintf(mine, sizeof mine, "%s-rank%d", PREFIX, rank);
        rc = mxc_model_save(model, mine, e + 1);
        if (rc == MXC_OK)
            rc = mxc_kvstore_barrier(kv); /* every rank's file is written */
        for (int other = 1; rc == MXC_OK && rank == 0 && other < size; other++) {
            char a[300], b[300];
            snprintf(a, sizeof a, "%s-rank0-%04d.params", PREFIX, e + 1);
            snprintf(b, sizeof b, "%s-rank%d-%04d.params", PREFIX, other, e + 1);
            bool same = same_file(a, b);
            printf("rank 0: epoch %d weights of rank %d %s\n", e + 1, other,
                   same ? "identical" : "DIFFER");
            ok = ok && same;
        }
        if (rc == MXC_OK)
            rc = mxc_kvstore_barrier(kv); /* rank 0 has compared (and saved the states) */
        if (rc != MXC_OK) {
            printf("rank %d: %s\n", rank, mxc_last_error());
            ok = false;
        }
    }
    if (ok)
        ok = unequal_shards(kv, rank);
    printf("rank %d of %d: %s\n", rank, size, ok ? "passed" : "FAILED");
    fflush(stdout);
    mxc_model_free(model);
    mxc_data_iter_free(train);
    mxc_data_iter_free(test);
    mxc_kvstore_free(kv);
    return ok ? 0 : 1;
}
#endif

/* ---- Outside mpirun ----------------------------------------------------------------- */

static char self[4096], mxc_bin[4096];

/* Runs `cmd` under `mpirun -np 2` with a time limit; returns its exit status (-1: killed
 * after `limit_s`) and what it printed in *output (free it). */
static int run_mpirun(const char *const *cmd, double limit_s, char **output) {
    const char *argv[32] = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"};
    int n = 5;
    for (int i = 0; cmd[i] && n < 31; i++)
        argv[n++] = cmd[i];
    argv[n] = NULL;
    char label[256];
    snprintf(label, sizeof label, "mpirun -np 2 %s", cmd[0]);
    return mxct_run(label, argv, NULL, limit_s, NULL, output);
}

START_TEST(test_two_ranks_train_like_one) {
#ifndef MXC_USE_MPI
    printf("check_fit_dist: a build without MPI (USE_MPI=0): skipped\n");
    return;
#else
    if (!have_data() || mxct_under_tsan())
        return;
    for (int e = 1; e < 10; e++) { /* an earlier run's checkpoints: --resume must find 2 */
        char path[256];
        const char *kinds[] = {"", "-rank0", "-rank1"};
        for (int k = 0; k < 3; k++) {
            snprintf(path, sizeof path, "%s%s-%04d.params", PREFIX, kinds[k], e);
            unlink(path);
            snprintf(path, sizeof path, "%s%s-%04d.states", PREFIX, kinds[k], e);
            unlink(path);
        }
    }
    /* one rank, the whole data, batch 100, no store */
    mxc_data_iter *train = fashion(1, 100, 1, 0), *test = fashion(0, 100, 1, 0);
    ck_assert(train && test);
    mxc_model *model = mlp();
    mxc_fit_config cfg;
    config(&cfg);
    mxc_fit_result one;
    CK_OK(mxc_model_fit(model, train, test, &cfg, &one));
    mxc_model_free(model);
    mxc_data_iter_free(train);
    mxc_data_iter_free(test);
    /* two ranks of batch 50 */
    char *out = NULL;
    const char *cmd[] = {self, NULL};
    int status = run_mpirun(cmd, mxct_timeout(60), &out);
    ck_assert_msg(status == 0, "mpirun -np 2: exit %d (-1: hung, killed)", status);
    for (int r = 0; r < 2; r++) {
        char line[64];
        snprintf(line, sizeof line, "rank %d of 2: passed", r);
        ck_assert_msg(strstr(out, line), "rank %d did not pass", r);
    }
    const char *at = strstr(out, "rank 0: epoch 1 accuracy ");
    ck_assert_ptr_nonnull(at);
    double two = strtod(at + strlen("rank 0: epoch 1 accuracy "), NULL);
    printf("check_fit_dist: 1 rank %.4f, 2 ranks %.4f after one epoch\n", one.eval_metric, two);
    ck_assert_msg(fabs(two - one.eval_metric) <= 0.015, "2 ranks %.4f, 1 rank %.4f", two,
                  one.eval_metric);
    free(out);

    /* the tool resumes both ranks from the last checkpoint (epoch 2) */
    const char *resume[] = {
        mxc_bin,  "train",      "--network", "mlp",          "--epochs", "1",          "--lr",
        "0.1",    "--momentum", "0.5",       "--batch-size", "50",       "--frequent", "0",
        "--json", "--kvstore",  "dist_sync", "--prefix",     PREFIX,     "--resume",   NULL};
    status = run_mpirun(resume, mxct_timeout(60), &out);
    ck_assert_msg(status == 0, "mpirun -np 2 mxc train --resume: exit %d", status);
    ck_assert_msg(strstr(out, "resuming from " PREFIX "-0002.params"), "%s", out);
    const char *json = strstr(out, "{\"train_accuracy\"");
    ck_assert_msg(json && !strstr(json + 1, "{\"train_accuracy\""), "one result line: %s", out);
    ck_assert_msg(strstr(json, "\"epochs\": 3"), "%s", json);
    at = strstr(json, "\"test_accuracy\": ");
    ck_assert(at && strtod(at + strlen("\"test_accuracy\": "), NULL) > 0.8);
    ck_assert_int_eq(access(PREFIX "-0003.params", R_OK), 0);
    ck_assert_int_eq(access(PREFIX "-0003.states", R_OK), 0);
    free(out);
#endif
}
END_TEST

int main(void) {
#ifdef MXC_USE_MPI
    if (getenv("OMPI_COMM_WORLD_SIZE"))
        return rank_main();
#endif
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return 1;
    self[len] = '\0';
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", self);
    snprintf(mxc_bin, sizeof mxc_bin, "%s/mxc", dirname(dir));
    Suite *s = suite_create("fit_dist");
    TCase *tc = tcase_create("fit_dist");
    tcase_set_timeout(tc, mxct_timeout(150));
    tcase_add_test(tc, test_two_ranks_train_like_one);
    suite_add_tcase(s, tc);
    return mxct_run_suite(s);
}

/*
 * tests/check_cli.c — the `mxc` command run as a user runs it (a child process of the
 * binary next to this test): info, usage errors, a short training on Fashion-MNIST whose
 * JSON summary has the promised fields and an accuracy no broken gradient reaches,
 * scoring the checkpoint, resuming (falling back, with a warning, past a damaged newest
 * checkpoint), predictions written as an NDArray list, a Gluon model-zoo export predicted
 * as MXNet predicts it, and --ctx (bad values, a missing GPU; with a GPU, training there).
 */
#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "tests/util/seeded.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char mxc_bin[4096];

/* Runs `mxc <args>` (stderr to stdout when `merge`), returns its exit status and the
 * output in a static buffer. */
static int run(const char *args, const char **out) {
    static char buf[1 << 16];
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", mxc_bin, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = '\0';
    int status = pclose(p);
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static bool have_data(void) {
    const char *dir = getenv("MXC_FASHION_MNIST_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz",
             dir && *dir ? dir : "/usr/share/datasets/fashion-mnist");
    if (access(path, R_OK) == 0)
        return true;
    printf("check_cli: %s missing (scripts/deps.sh installs dataset-fashion-mnist); "
           "training tests skipped\n",
           path);
    return false;
}

/* The number after "key": in a JSON line, or -1. */
static double json_number(const char *text, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(text, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

START_TEST(test_info_and_usage) {
    const char *out;
    ck_assert_int_eq(run("info", &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "operators:"));
    ck_assert_ptr_nonnull(strstr(out, "engine:"));
    ck_assert_ptr_nonnull(strstr(out, "CPU worker(s)"));
    ck_assert_int_eq(run("", &out), 2);
    ck_assert_ptr_nonnull(strstr(out, "usage:"));
    ck_assert_int_eq(run("--help", &out), 0);
    ck_assert_int_eq(run("train --network mlp --epochs zero", &out), 2);
    ck_assert_ptr_nonnull(strstr(out, "--epochs"));
    ck_assert_int_eq(run("frobnicate", &out), 2);
    ck_assert_int_eq(run("train", &out), 2);
    ck_assert_ptr_nonnull(strstr(out, "--network"));
    ck_assert_int_eq(run("train --network build/no-such-symbol.json", &out), 1);
    ck_assert_ptr_nonnull(strstr(out, "no-such-symbol.json"));
    ck_assert_int_eq(run("score --prefix build/no-such-model --epoch 1", &out), 1);
    ck_assert_int_eq(run("train --network mlp --data a,b,c", &out), 2);
}
END_TEST

/* --ctx: a bad value is a usage error; a GPU this build or machine lacks fails at once with
 * the reason, before any data is read; cpu and cpu:0 are the default. info lists the GPUs. */
START_TEST(test_ctx) {
    const char *out;
    const char *bad[] = {"bogus", "gpu:",   "gpu:x",  "gpu:-1",       "cpu:x",      "gpu:0x",
                         "",      "cpu:0,", ",cpu:0", "cpu:0,,cpu:1", "cpu:0,bogus"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "train --network mlp --ctx '%s'", bad[i]);
        ck_assert_msg(run(cmd, &out) == 2, "--ctx '%s': %s", bad[i], out);
        ck_assert_msg(strstr(out, "--ctx") != NULL, "%s", out);
    }
    ck_assert_int_eq(run("score --prefix p --epoch 1 --ctx", &out), 2); /* no value */
    ck_assert_int_eq(run("info --ctx gpu", &out), 2);
    ck_assert_int_eq(run("info", &out), 0);
    const char *devices = strstr(out, "devices: cpu, ");
    ck_assert_ptr_nonnull(devices);
    int ngpu = atoi(devices + strlen("devices: cpu, "));
    ck_assert_int_eq(ngpu, mxc_gpu_count());
    if (ngpu > 0)
        ck_assert_msg(strstr(out, "gpu(0): ") && strstr(out, "compute capability"), "%s", out);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "train --network mlp --data build/none,build/none --ctx gpu:%d",
             ngpu);
    ck_assert_int_eq(run(cmd, &out), 1);
    ck_assert_msg(strstr(out, "--ctx gpu:") && strstr(out, "gpu("), "%s", out);
    snprintf(cmd, sizeof cmd,
             "predict --prefix build/no-such-model --epoch 1 --input x "
             "--output y --ctx gpu:%d",
             ngpu);
    ck_assert_int_eq(run(cmd, &out), 1);
    if (ngpu == 0) {
        ck_assert_int_eq(run("score --prefix build/no-such-model --epoch 1 --ctx gpu:0", &out), 1);
        ck_assert_msg(strstr(out, "--ctx gpu:0") &&
                          (strstr(out, "without CUDA") || strstr(out, "no gpu(0)")),
                      "%s", out); /* a CPU build, or a CUDA build on a machine without GPU */
    }
    /* cpu:0 is accepted (it fails on the missing checkpoint, after the context) */
    ck_assert_int_eq(run("score --prefix build/no-such-model --epoch 1 --ctx cpu:0", &out), 1);
    ck_assert_ptr_null(strstr(out, "--ctx"));
}
END_TEST

START_TEST(test_train_score_resume_predict) {
    if (!have_data())
        return;
    const char *out;
    for (int e = 1; e <= 20; e++) { /* checkpoints of an earlier run would be resumed */
        char path[64];
        snprintf(path, sizeof path, "build/check_cli_mlp-%04d.params", e);
        remove(path);
    }
    /* 3 epochs on 5,000 samples: about 0.75 on the test set; chance is 0.1 */
    ck_assert_int_eq(run("train --network mlp --epochs 3 --num-samples 5000 --seed 1 "
                         "--prefix build/check_cli_mlp --frequent 0 --json",
                         &out),
                     0);
    const char *json = strrchr(out, '{');
    ck_assert_ptr_nonnull(json);
    double test_acc = json_number(json, "test_accuracy");
    ck_assert_msg(test_acc > 0.6, "test accuracy %g:\n%s", test_acc, out);
    ck_assert(json_number(json, "train_accuracy") > 0.6);
    ck_assert(json_number(json, "samples_per_s") > 0);
    ck_assert(json_number(json, "seconds") > 0);
    ck_assert_int_eq((int)json_number(json, "epochs"), 3);
    /* the checkpoint scores the same */
    ck_assert_int_eq(run("score --prefix build/check_cli_mlp --epoch 3 --json", &out), 0);
    ck_assert_double_eq_tol(json_number(strrchr(out, '{'), "test_accuracy"), test_acc, 1e-6);
    /* fine-tuning from those parameters at a negligible rate keeps their accuracy (from
     * scratch it would be near chance) */
    remove("build/check_cli_ft-0001.params");
    ck_assert_int_eq(run("train --network mlp --epochs 1 --num-samples 5000 --lr 0.0000001 "
                         "--params build/check_cli_mlp-0003.params --prefix build/check_cli_ft "
                         "--frequent 0 --json",
                         &out),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "starting from the parameters in"));
    ck_assert_double_eq_tol(json_number(strrchr(out, '{'), "test_accuracy"), test_acc, 0.01);
    /* a resumed run continues the numbering */
    ck_assert_int_eq(run("train --network mlp --epochs 1 --num-samples 5000 --resume "
                         "--prefix build/check_cli_mlp --frequent 0 --json",
                         &out),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "resuming from build/check_cli_mlp-0003.params"));
    ck_assert_int_eq((int)json_number(strrchr(out, '{'), "epochs"), 4);
    ck_assert_int_eq(access("build/check_cli_mlp-0004.params", R_OK), 0);
    /* predictions for 7 inputs, as an NDArray list */
    mxc_ndarray *x = NULL;
    CK_OK(mxc_nd_create(&SHAPE(7, 784), MXC_FLOAT32, mxc_cpu(), 0, &x));
    CK_OK(mxc_nd_random_uniform(x, 0, 1));
    CK_OK(mxc_nd_save("build/check_cli_input.params", 1, &x, NULL));
    mxc_nd_free(x);
    ck_assert_int_eq(run("predict --prefix build/check_cli_mlp --epoch 4 "
                         "--input build/check_cli_input.params "
                         "--output build/check_cli_output.params",
                         &out),
                     0);
    size_t n = 0;
    mxc_ndarray **arrays = NULL;
    char **names = NULL;
    CK_OK(mxc_nd_load("build/check_cli_output.params", mxc_cpu(), &n, &arrays, &names));
    ck_assert_uint_eq(n, 1); /* every output of the model, named as MXNet names it */
    ck_assert_ptr_nonnull(names);
    ck_assert_str_eq(names[0], "softmax_output");
    ck_assert_ptr_nonnull(strstr(out, "softmax_output"));
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(arrays[0], &s));
    ck_assert_int_eq(s.ndim, 2);
    ck_assert_int_eq(s.dims[0], 7);
    ck_assert_int_eq(s.dims[1], 10);
    float p[70];
    CK_OK(mxc_nd_sync_copy_to_cpu(arrays[0], p, sizeof p));
    for (int i = 0; i < 7; i++) {
        float sum = 0;
        for (int k = 0; k < 10; k++)
            sum += p[10 * i + k];
        ck_assert_float_eq_tol(sum, 1.0f, 1e-4f);
    }
    mxc_nd_list_free(n, arrays, names);
    /* parameters without names cannot be fine-tuned from */
    ck_assert_int_eq(run("train --network mlp --epochs 1 --num-samples 1000 "
                         "--params build/check_cli_input.params --prefix build/check_cli_ft "
                         "--frequent 0",
                         &out),
                     1);
    ck_assert_ptr_nonnull(strstr(out, "have no names"));
}
END_TEST

/* A Gluon model-zoo export (tests/data/zoo/squeezenet1.1, scripts/gen_model_zoo.py) as a
 * checkpoint: its symbol and its seeded weights (tests/util/seeded.h) saved by mxc; predict
 * on the seeded input writes MXNet's output, named as MXNet names it. */
START_TEST(test_predict_gluon_export) {
    mxc_symbol *sym = NULL;
    CK_OK(mxc_symbol_load("tests/data/zoo/squeezenet1.1-symbol.json", &sym));
    CK_OK(mxc_symbol_save(sym, "build/check_cli_zoo-symbol.json"));
    const char *input = "data";
    mxc_shape shape = SHAPE(1, 3, 209, 209);
    mxc_executor *x = NULL;
    CK_OK(mxc_executor_simple_bind(sym, mxc_cpu(), 1, &input, &shape, MXC_GRAD_NULL, &x));
    mxct_seeded_fill_executor(x, sym);
    int na, nx;
    mxc_ndarray *const *args, *const *aux;
    const char *const *arg_names, *const *aux_names;
    CK_OK(mxc_executor_arrays(x, &na, &args, NULL, &nx, &aux));
    CK_OK(mxc_symbol_list_arguments(sym, &na, &arg_names));
    CK_OK(mxc_symbol_list_auxiliary_states(sym, &nx, &aux_names));
    mxc_ndarray **params = malloc(sizeof *params * (size_t)(na + nx));
    char **names = malloc(sizeof *names * (size_t)(na + nx));
    ck_assert(params && names);
    int np = 0;
    for (int i = 0; i < na + nx; i++) {
        const char *name = i < na ? arg_names[i] : aux_names[i - na];
        if (strcmp(name, "data") == 0) {
            CK_OK(mxc_nd_save("build/check_cli_zoo_input.params", 1, &args[i], NULL));
            continue;
        }
        names[np] = malloc(strlen(name) + 5);
        ck_assert_ptr_nonnull(names[np]);
        sprintf(names[np], "%s:%s", i < na ? "arg" : "aux", name);
        params[np++] = i < na ? args[i] : aux[i - na];
    }
    CK_OK(mxc_nd_save("build/check_cli_zoo-0000.params", (size_t)np, params,
                      (const char *const *)names));
    for (int i = 0; i < np; i++)
        free(names[i]);
    free(names);
    free(params);
    mxc_executor_free(x);
    mxc_symbol_free(sym);

    const char *out;
    ck_assert_msg(run("predict --prefix build/check_cli_zoo --epoch 0 "
                      "--input build/check_cli_zoo_input.params "
                      "--output build/check_cli_zoo_output.params",
                      &out) == 0,
                  "%s", out);
    size_t ng = 0, nr = 0;
    mxc_ndarray **got = NULL, **ref = NULL;
    char **got_names = NULL, **ref_names = NULL;
    CK_OK(mxc_nd_load("build/check_cli_zoo_output.params", mxc_cpu(), &ng, &got, &got_names));
    CK_OK(mxc_nd_load("tests/data/zoo/squeezenet1.1.params", mxc_cpu(), &nr, &ref, &ref_names));
    ck_assert_uint_eq(ng, 1);
    ck_assert_str_eq(got_names[0], "squeezenet0_flatten0_flatten0_output");
    size_t k = 0;
    while (k < nr && strcmp(ref_names[k], "out0") != 0)
        k++;
    ck_assert_uint_lt(k, nr);
    mxct_seeded_expect_output("mxc predict squeezenet1.1", got[0], ref[k]);
    mxc_nd_list_free(ng, got, got_names);
    mxc_nd_list_free(nr, ref, ref_names);
}
END_TEST

/* Two classes of 784-value rows as CSV: class 0 is 0.9 in the first half and 0.1 in the
 * second, class 1 the reverse; linearly separable with a wide margin, so training reaches
 * 100% at any sensible learning rate. (Rows of all 0.1 against all 0.9 differ only in
 * scale, which left a 3-epoch run's last accuracy to rounding.) */
static void write_csv(const char *data_path, const char *label_path, int rows) {
    FILE *d = fopen(data_path, "w"), *l = fopen(label_path, "w");
    ck_assert(d && l);
    for (int i = 0; i < rows; i++) {
        for (int k = 0; k < 784; k++)
            fprintf(d, "%s%s", k ? "," : "", (k < 392) == (i % 2 == 0) ? "0.9" : "0.1");
        fprintf(d, "\n");
        fprintf(l, "%d\n", i % 2);
    }
    fclose(d);
    fclose(l);
}

START_TEST(test_train_on_csv) {
    write_csv("build/check_cli_x.csv", "build/check_cli_y.csv", 200);
    const char *out;
    ck_assert_int_eq(run("train --network mlp --epochs 3 --batch-size 20 --frequent 0 --json "
                         "--prefix build/check_cli_csv --data csv:build/check_cli_x.csv,"
                         "build/check_cli_y.csv,build/check_cli_x.csv,build/check_cli_y.csv",
                         &out),
                     0);
    ck_assert_msg(json_number(strrchr(out, '{'), "test_accuracy") > 0.99, "%s", out);
    /* a bad row is reported with its line */
    FILE *f = fopen("build/check_cli_x.csv", "a");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "1,2,oops\n");
    fclose(f);
    ck_assert_int_eq(run("train --network mlp --data csv:build/check_cli_x.csv,"
                         "build/check_cli_y.csv --prefix build/check_cli_csv",
                         &out),
                     1);
    ck_assert_msg(strstr(out, "check_cli_x.csv:201") != NULL, "%s", out);
}
END_TEST

/* --ctx with a list and --kvstore: two CPU contexts train through a local store; bad
 * values and the options outside train are usage errors. */
START_TEST(test_train_data_parallel) {
    write_csv("build/check_cli_dp_x.csv", "build/check_cli_dp_y.csv", 200);
    const char *out;
    const char *data = "--data csv:build/check_cli_dp_x.csv,build/check_cli_dp_y.csv,"
                       "build/check_cli_dp_x.csv,build/check_cli_dp_y.csv";
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "train --network mlp --epochs 3 --batch-size 20 --frequent 0 --json "
             "--prefix build/check_cli_dp --ctx cpu:0,cpu:1 --kvstore local %s",
             data);
    ck_assert_int_eq(run(cmd, &out), 0);
    ck_assert_msg(json_number(strrchr(out, '{'), "test_accuracy") > 0.99, "%s", out);
    ck_assert_int_eq(access("build/check_cli_dp-0003.states", R_OK), 0); /* for --resume */
    snprintf(cmd, sizeof cmd, "train --network mlp --epochs 1 --kvstore bogus %s", data);
    ck_assert_int_eq(run(cmd, &out), 2);
    ck_assert_msg(strstr(out, "--kvstore must be local, device or dist_sync"), "%s", out);
    ck_assert_int_eq(run("score --prefix build/check_cli_dp --epoch 3 --kvstore local", &out), 2);
    ck_assert_int_eq(run("score --prefix build/check_cli_dp --epoch 3 --ctx cpu:0,cpu:1", &out), 2);
    ck_assert_msg(strstr(out, "only train takes a list"), "%s", out);
}
END_TEST

/* --resume takes the newest checkpoint that loads: past a truncated newest one with a
 * warning naming it; when none loads (an empty symbol file) it fails naming the file. */
START_TEST(test_resume_skips_damaged_checkpoint) {
    write_csv("build/check_cli_rx.csv", "build/check_cli_ry.csv", 40);
    const char *train = "train --network mlp --batch-size 20 --frequent 0 --json "
                        "--prefix build/check_cli_resume "
                        "--data csv:build/check_cli_rx.csv,build/check_cli_ry.csv";
    char cmd[512];
    for (int e = 1; e <= 9; e++) {
        snprintf(cmd, sizeof cmd, "build/check_cli_resume-%04d.params", e);
        remove(cmd);
    }
    const char *out;
    snprintf(cmd, sizeof cmd, "%s --epochs 2", train);
    ck_assert_int_eq(run(cmd, &out), 0);
    ck_assert_int_eq(truncate("build/check_cli_resume-0002.params", 64), 0);
    snprintf(cmd, sizeof cmd, "%s --epochs 1 --resume", train);
    ck_assert_msg(run(cmd, &out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "warn: mxc_model_load_latest: skipping damaged checkpoint "
                              "build/check_cli_resume-0002.params") != NULL,
                  "%s", out);
    ck_assert_msg(strstr(out, "resuming from build/check_cli_resume-0001.params") != NULL, "%s",
                  out);
    ck_assert_int_eq((int)json_number(strrchr(out, '{'), "epochs"), 2);
    /* epoch 2 was written again, whole */
    ck_assert_int_eq(run("score --prefix build/check_cli_resume --epoch 2 "
                         "--data csv:build/check_cli_rx.csv,build/check_cli_ry.csv,"
                         "build/check_cli_rx.csv,build/check_cli_ry.csv",
                         &out),
                     0);
    FILE *f = fopen("build/check_cli_resume-symbol.json", "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(run(cmd, &out), 1);
    ck_assert_msg(strstr(out, "build/check_cli_resume-symbol.json' is empty") != NULL, "%s", out);
}
END_TEST

/* With a GPU: a short CSV training on gpu:0 reaches the CPU's accuracy, and its checkpoint
 * scores the same on the CPU. Without a GPU, nothing to do. */
START_TEST(test_train_on_gpu) {
    if (mxc_gpu_count() == 0)
        return;
    write_csv("build/check_cli_gx.csv", "build/check_cli_gy.csv", 200);
    const char *data = "--data csv:build/check_cli_gx.csv,build/check_cli_gy.csv,"
                       "build/check_cli_gx.csv,build/check_cli_gy.csv";
    char cmd[512];
    const char *out;
    snprintf(cmd, sizeof cmd,
             "train --network mlp --epochs 3 --batch-size 20 --frequent 0 --json --ctx gpu:0 "
             "--prefix build/check_cli_gpu %s",
             data);
    ck_assert_msg(run(cmd, &out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "running on gpu(0)"));
    double acc = json_number(strrchr(out, '{'), "test_accuracy");
    ck_assert_msg(acc > 0.99, "%s", out);
    snprintf(cmd, sizeof cmd, "score --prefix build/check_cli_gpu --epoch 3 --json %s", data);
    ck_assert_msg(run(cmd, &out) == 0, "%s", out);
    ck_assert_double_eq_tol(json_number(strrchr(out, '{'), "test_accuracy"), acc, 1e-6);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, mxct_timeout(120));
    tcase_add_test(tc, test_info_and_usage);
    tcase_add_test(tc, test_ctx);
    tcase_add_test(tc, test_train_score_resume_predict);
    tcase_add_test(tc, test_predict_gluon_export);
    tcase_add_test(tc, test_train_on_csv);
    tcase_add_test(tc, test_train_data_parallel);
    tcase_add_test(tc, test_resume_skips_damaged_checkpoint);
    tcase_add_test(tc, test_train_on_gpu);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv) {
    (void)argc;
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        fprintf(stderr, "check_cli: cannot find its own path\n");
        return 1;
    }
    self[len] = '\0';
    snprintf(mxc_bin, sizeof mxc_bin, "%s/mxc", dirname(self));
    (void)argv;
    return mxct_run_suite(suite());
}

/*
 * bench/bench_train.c — training and inference throughput and peak memory of mxc on the
 * MLP, LeNet and ResNet-18 at batch 100, against PyTorch (scripts/bench_train_pytorch.py)
 * run in the same invocation.
 *
 *   mlp_train    MLP 784-128-64-10 (relu, mxc_net_mlp), SGD lr 0.1
 *   lenet_train  LeNet (mxc_net_lenet) on 1x28x28, SGD lr 0.05 momentum 0.9
 *   mlp_infer, lenet_infer   the same networks, forward(is_train = 0) only
 *   resnet_train ResNet-18 (mxc_net_resnet(2, 10), as `mxc train --network resnet`) on
 *                3x32x32, SGD lr 0.1 momentum 0.9, over --resnet-samples (default 500)
 *
 * Training: Xavier init (uniform, fan average, magnitude 3), rescale_grad 1/100 (the
 * batch mean, as PyTorch's cross-entropy). Each batch copies its data and labels from a
 * host buffer of synthetic data (random pixels in [0, 1), random labels: throughput does
 * not depend on the values) into the executor's arrays with mxc_nd_sync_copy_from_cpu,
 * then pushes forward(is_train = 1), backward and mxc_optimizer_update of every weight.
 * After one warm-up batch, samples/s over one epoch (--epochs-samples, default 60,000;
 * ResNet-18's --resnet-samples),
 * timed up to the end of mxc_nd_wait_all. Inference: the same over 10,000 samples
 * (--infer-samples) with forward(is_train = 0) and a wait for the output of each batch.
 * With --repeats R (default 3) the epoch is timed R times in one process and the median
 * is reported. Peak RSS is the VmHWM of the process that ran the case (it includes the
 * host data buffer, 179 MiB for 60,000 training samples, as PyTorch's does).
 *
 * Every case runs in a fresh child process (this binary re-executed with --child), once
 * with the environment as given (the engine's defaults when MXC_CPU_WORKER_NTHREADS and
 * MXC_OP_NTHREADS are unset: one CPU worker, whose operators get every core) and once
 * with MXC_CPU_WORKER_NTHREADS set to the number of cores ("percore": one thread per
 * operator, two operators at once on 2 cores); both are reported, and the faster is
 * compared. The PyTorch side runs as a child process of this benchmark:
 * `/usr/bin/python3 scripts/bench_train_pytorch.py --json --cases CASE ...`
 * (Debian's python, which python3-torch installs for), which itself runs each case under
 * two thread settings in fresh subprocesses and reports the faster (`baseline_threads`).
 * If torch is missing, mxc's figures are still printed and the ratios are null.
 *
 *   build/bin/bench_train [--json] [--quick] [--epochs-samples N] [--infer-samples N]
 *                         [--repeats R] [--cases mlp_train,...] [--no-baseline]
 *                         [--python PATH] [--pytorch-script PATH]
 *   build/bin/bench_train --contention K[,K...] [--cases ...] [--epochs-samples N] ...
 *       each training case quiet and then beside K busy processes (each one thread
 *       spinning on the CPU, started before and killed after the loaded runs), for every
 *       K given: mxc as configured and mxc with MXC_OP_NTHREADS=1 under the same load
 *       (one epoch per child, the two alternating, medians of --repeats each), and
 *       PyTorch quiet and loaded; prints samples/s, the loaded/quiet ratios, mxc loaded
 *       over mxc single-threaded, and each run's CPU seconds (JSON bench
 *       "train_contention")
 *   build/bin/bench_train --data-parallel [--json] [--epochs-samples N]
 *       LeNet trained by mxc_model_fit through a dist_sync store under
 *       `mpirun -np 1` and `mpirun -np 2` of this binary (--dp-rank TRACE), one core per
 *       rank (MXC_OP_NTHREADS=1 MXC_CPU_WORKER_NTHREADS=1), batch 100 per rank, two
 *       epochs of N synthetic samples per rank (default 60,000), the second timed:
 *       samples/s of the job for each, the speed-up, and from an engine trace of rank 0's
 *       second epoch (build/bench_dp_trace.json) the share of it with a
 *       kvstore_allreduce in flight and the share in which one was in flight while no
 *       other operation ran (exposed communication). JSON bench "train_data_parallel".
 *   build/bin/bench_train --child CASE [...]   one case in this process (for profiling:
 *       MXC_PROFILER_AUTOSTART=1 MXC_PROFILER_OUTPUT=trace.json build/bin/bench_train
 *       --child mlp_train --epochs-samples 1000 --repeats 1)
 *
 *   build/bin/bench_train --ctx gpu [--json] [--quick] [--cases ...] [--epochs-samples N]
 *       [--infer-samples N] [--resnet-samples N] [--repeats R]
 *       (a CUDA build) every case on gpu(0) at batch 100 and 1024, and resnet_train
 *       (ResNet-18, mxc_net_resnet(2, 10), on 3x32x32, SGD lr 0.1 momentum 0.9 as `mxc
 *       train --network resnet`) at batch 128 over --resnet-samples (default
 *       12,800), in this process: the executor bound on gpu(0), parameters and optimizer
 *       states there, each batch copied from the host buffer into the GPU inputs with
 *       mxc_nd_sync_copy_from_cpu as on the CPU. Each training case also runs the same
 *       step written as direct cuBLAS / cuDNN calls on one stream (bench/gpu_baseline.c),
 *       from mxc's initial weights on the same data, the two alternating epoch by epoch;
 *       before timing, the largest difference of their softmax outputs after a forward
 *       pass and after one training step is printed, with a WARNING line above
 *       CHECK_TOLERANCE. Samples/s of each, medians of --repeats, and mxc / baseline
 *       (JSON bench "train_gpu", case CASE_bBATCH, device "gpu(0)", baseline
 *       "cublas_cudnn", baseline_samples_per_s, ratio_vs_baseline, check_*). No PyTorch
 *       baseline and no CPU figure here: the CPU's batch-100 figures come from the
 *       default run.
 *
 * JSON lines (DESIGN.md section 10): bench "train", case, system "mxc", samples_per_s,
 * peak_rss_mib, mxc_settings (the faster setting) with both settings' figures,
 * baseline "pytorch", baseline_samples_per_s, baseline_threads, baseline_peak_rss_mib,
 * ratio_vs_baseline (mxc samples/s over PyTorch's) and rss_ratio_vs_baseline (PyTorch's
 * peak RSS over mxc's: above 1, mxc uses less).
 */
#include "bench_util.h"
#include "gpu_baseline.h"

#include "common/common.h"
#include "common/parallel.h"
#include "mxc/mxc.h"

#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define BATCH        100
#define NUM_CASES    5
#define NUM_SETTINGS 2

#define CHECK(call)                                                                \
    do {                                                                           \
        int rc_ = (call);                                                          \
        if (rc_ != MXC_OK) {                                                       \
            fprintf(stderr, "bench_train: %s: %s: %s\n", #call, mxc_err_name(rc_), \
                    mxc_last_error());                                             \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

static const char *const case_names[NUM_CASES] = {"mlp_train", "mlp_infer", "lenet_train",
                                                  "lenet_infer", "resnet_train"};
/* The mxc settings: the environment as given (by default one CPU worker whose operators
 * use every core), and one CPU worker per core (one thread per operator). */
static const char *const setting_names[NUM_SETTINGS] = {"default", "percore"};

struct options {
    bool json, quick, no_baseline, gpu;
    long batch; /* BATCH, or each of gpu_batches with --ctx gpu */
    long epochs_samples, infer_samples, resnet_samples, repeats;
    bool cases[NUM_CASES];
    const char *python, *script;
};

/* ---- The networks of the cases ------------------------------------------------------- */

static const char *const mlp_ops[] = {"FullyConnected", "Activation", "SoftmaxOutput", "sgd_update",
                                      NULL};
static const char *const lenet_ops[] = {
    "Convolution",    "Activation",    "Pooling",        "Flatten",
    "FullyConnected", "SoftmaxOutput", "sgd_mom_update", NULL};
static const char *const resnet_ops[] = {
    "Convolution", "BatchNorm",      "Activation",    "_plus",          "Pooling",
    "Flatten",     "FullyConnected", "SoftmaxOutput", "sgd_mom_update", NULL};

/* A network (mxc/networks.h), one sample's shape and its training's SGD: the MLP and
 * LeNet as in the header comment, ResNet-18 as `mxc train --network resnet` trains it. */
struct net {
    const char *prefix; /* of its cases' names */
    enum gpu_baseline_net kind;
    int ndim;    /* of a batch: 2, (batch, c) for the MLP, or 4, (batch, c, h, w) */
    int c, h, w; /* one sample */
    float lr, momentum;
    const char *const *ops; /* the operators it needs */
};

static const struct net nets[] = {
    {"mlp", GPU_BASELINE_MLP, 2, 784, 1, 1, 0.1f, 0.0f, mlp_ops},
    {"lenet", GPU_BASELINE_LENET, 4, 1, 28, 28, 0.05f, 0.9f, lenet_ops},
    {"resnet", GPU_BASELINE_RESNET18, 4, 3, 32, 32, 0.1f, 0.9f, resnet_ops},
};

static const struct net *net_of(const char *kase) {
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        size_t len = strlen(nets[i].prefix);
        if (strncmp(kase, nets[i].prefix, len) == 0 && kase[len] == '_')
            return &nets[i];
    }
    return NULL;
}

/* The samples of one epoch of case `kase`. */
static long case_samples(const struct options *o, const char *kase) {
    if (net_of(kase)->kind == GPU_BASELINE_RESNET18)
        return o->resnet_samples;
    return strstr(kase, "_train") ? o->epochs_samples : o->infer_samples;
}

static void build_net(const struct net *net, mxc_symbol **sym) {
    int hidden[2] = {128, 64};
    switch (net->kind) {
    case GPU_BASELINE_MLP: CHECK(mxc_net_mlp(2, hidden, "relu", 10, sym)); break;
    case GPU_BASELINE_LENET: CHECK(mxc_net_lenet(10, sym)); break;
    case GPU_BASELINE_RESNET18: CHECK(mxc_net_resnet(2, 10, sym)); break;
    }
}

/* Writes the operators case `kase` needs that are not registered to `buf`; returns how
 * many are missing. */
static int missing_ops(const char *kase, char *buf, size_t size) {
    const char *const *needed = net_of(kase)->ops;
    int missing = 0;
    buf[0] = '\0';
    for (int i = 0; needed[i]; i++) {
        mxc_op_info info;
        if (mxc_op_get_info(needed[i], &info) != MXC_OK) {
            size_t len = strlen(buf);
            snprintf(buf + len, size - len, "%s%s", missing ? ", " : "", needed[i]);
            missing++;
        }
    }
    return missing;
}

/* ---- One case: mxc's executor and its synthetic data ---------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static float rand_unit(void) { /* xorshift64*: [0, 1) with 24 random bits */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (float)((rng_state * 0x2545f4914f6cdd1du) >> 40) * (1.0f / 16777216.0f);
}

static int find_arg(int num, const char *const *names, const char *name) {
    for (int i = 0; i < num; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

/* A case bound on its device with its data set: random pixels in [0, 1) and random
 * labels 0..9 (throughput does not depend on the values). */
struct run {
    const struct net *net;
    bool train;
    long batch, n; /* n samples: a whole number of batches */
    size_t sample; /* floats per sample */
    float *data, *labels;
    mxc_symbol *sym;
    mxc_executor *x;
    mxc_optimizer *opt;
    int num_args, di, li;
    mxc_ndarray *const *args, *const *grads, *const *outs;
    const char *const *names;
};

/* Sets up case `kase` at batch o->batch on gpu(0) (o->gpu) or the CPU: data, executor,
 * Xavier initialisation (uniform, fan average, magnitude 3), optimizer. Returns 0, or 2
 * when mxc lacks an operator the case needs. */
static int run_open(const char *kase, const struct options *o, struct run *r) {
    memset(r, 0, sizeof *r);
    char missing[256];
    if (missing_ops(kase, missing, sizeof missing)) {
        fprintf(stderr,
                "bench_train: operators not registered yet: %s "
                "(operator/op_list.h); mxc cannot run %s\n",
                missing, kase);
        return 2;
    }
    const struct net *net = r->net = net_of(kase);
    r->train = strstr(kase, "_train") != NULL;
    r->batch = o->batch;
    long n = case_samples(o, kase);
    n -= n % r->batch;
    r->n = n < r->batch ? r->batch : n;
    r->sample = (size_t)net->c * (size_t)net->h * (size_t)net->w;
    r->data = malloc(sizeof *r->data * (size_t)r->n * r->sample);
    r->labels = malloc(sizeof *r->labels * (size_t)r->n);
    if (r->data == NULL || r->labels == NULL) {
        fprintf(stderr, "bench_train: out of memory for %ld samples\n", r->n);
        exit(1);
    }
    for (size_t i = 0; i < (size_t)r->n * r->sample; i++)
        r->data[i] = rand_unit();
    for (long i = 0; i < r->n; i++)
        r->labels[i] = (float)(int)(rand_unit() * 10);

    build_net(net, &r->sym);
    const long b = r->batch;
    mxc_shape dshape =
        net->ndim == 2 ? (mxc_shape){2, {b, net->c}} : (mxc_shape){4, {b, net->c, net->h, net->w}};
    mxc_shape lshape = {1, {b}};
    const char *in_names[] = {"data", "softmax_label"};
    mxc_shape in_shapes[] = {dshape, lshape};
    CHECK(mxc_executor_simple_bind(r->sym, o->gpu ? mxc_gpu(0) : mxc_cpu(), 2, in_names, in_shapes,
                                   r->train ? MXC_GRAD_WRITE : MXC_GRAD_NULL, &r->x));
    int num_names = 0, num_out = 0, num_aux = 0, num_aux_names = 0;
    mxc_ndarray *const *aux = NULL;
    const char *const *aux_names = NULL;
    CHECK(mxc_executor_arrays(r->x, &r->num_args, &r->args, &r->grads, &num_aux, &aux));
    CHECK(mxc_executor_outputs(r->x, &num_out, &r->outs));
    CHECK(mxc_symbol_list_arguments(r->sym, &num_names, &r->names));
    CHECK(mxc_symbol_list_auxiliary_states(r->sym, &num_aux_names, &aux_names));
    r->di = find_arg(num_names, r->names, "data");
    r->li = find_arg(num_names, r->names, "softmax_label");
    if (r->di < 0 || r->li < 0 || num_names != r->num_args || num_aux_names != num_aux) {
        fprintf(stderr, "bench_train: the network has no data / softmax_label argument\n");
        exit(1);
    }
    mxc_init_config init = {
        .kind = MXC_INIT_XAVIER, .xavier_factor = MXC_XAVIER_AVG, .xavier_magnitude = 3};
    for (int i = 0; i < r->num_args; i++)
        if (i != r->di && i != r->li)
            CHECK(mxc_init_array(&init, r->names[i], r->args[i]));
    for (int i = 0; i < num_aux; i++) /* BatchNorm's moving mean 0 and variance 1 */
        CHECK(mxc_init_array(&init, aux_names[i], aux[i]));
    mxc_optimizer_config oc = {.kind = MXC_OPT_SGD,
                               .lr = net->lr,
                               .momentum = net->momentum,
                               .rescale_grad = 1.0f / (float)b};
    CHECK(mxc_optimizer_create(&oc, &r->opt));
    CHECK(mxc_nd_wait_all());
    return 0;
}

/* Pushes batch `k` of the data set: its copies into the executor's inputs, forward
 * (is_train when training) and, when training, backward and the update of every
 * weight; an inference batch waits for its output. */
static void run_batch(struct run *r, long k) {
    const size_t b = (size_t)r->batch;
    CHECK(mxc_nd_sync_copy_from_cpu(r->args[r->li], r->labels + (size_t)k * b, sizeof(float) * b));
    CHECK(mxc_nd_sync_copy_from_cpu(r->args[r->di], r->data + (size_t)k * b * r->sample,
                                    sizeof(float) * b * r->sample));
    CHECK(mxc_executor_forward(r->x, r->train));
    if (!r->train) {
        CHECK(mxc_nd_wait_to_read(r->outs[0]));
        return;
    }
    CHECK(mxc_executor_backward(r->x, 0, NULL));
    for (int i = 0; i < r->num_args; i++)
        if (r->grads[i] != NULL)
            CHECK(mxc_optimizer_update(r->opt, i, r->names[i], r->args[i], r->grads[i]));
}

/* Samples/s of `batches` batches, timed up to the end of mxc_nd_wait_all. */
static double run_epoch(struct run *r, long batches) {
    uint64_t t0 = bench_now_ns();
    for (long k = 0; k < batches; k++)
        run_batch(r, k);
    CHECK(mxc_nd_wait_all());
    return (double)(batches * r->batch) / ((double)(bench_now_ns() - t0) / 1e9);
}

static void run_close(struct run *r) {
    mxc_optimizer_free(r->opt);
    mxc_executor_free(r->x);
    mxc_symbol_free(r->sym);
    free(r->data);
    free(r->labels);
}

/* Runs case `kase` (the CPU child, --child): one warm-up batch, then o->repeats epochs;
 * prints its JSON line ("train_child"). */
static int run_case(const char *kase, const struct options *o) {
    struct run r;
    int rc = run_open(kase, o, &r);
    if (rc != 0)
        return rc;
    double *rates = malloc(sizeof *rates * (size_t)o->repeats);
    if (rates == NULL)
        return 1;
    run_epoch(&r, 1);
    for (long rep = 0; rep < o->repeats; rep++)
        rates[rep] = run_epoch(&r, r.n / r.batch);
    long peak_kib = bench_peak_rss_kib();
    char runs[512] = "";
    for (long k = 0; k < o->repeats; k++) {
        size_t len = strlen(runs);
        snprintf(runs + len, sizeof runs - len, "%s%.0f", k ? " " : "", rates[k]);
    }
    double rate = bench_median(rates, (int)o->repeats);

    mxc_engine *eng = NULL;
    CHECK(mxc_engine_get_default(&eng));
    long workers = mxc__default_cpu_workers();
    bench_json j;
    bench_json_begin(&j, "train_child", kase);
    bench_json_num(&j, "samples_per_s", rate);
    bench_json_num(&j, "peak_rss_mib", peak_kib < 0 ? NAN : peak_kib / 1024.0);
    bench_json_str(&j, "runs", runs);
    bench_json_num(&j, "samples", (double)r.n);
    bench_json_str(&j, "engine", mxc_engine_type_name(mxc_engine_type_of(eng)));
    bench_json_num(&j, "cpu_workers", (double)workers);
    bench_json_num(&j, "op_threads", (double)mxc__op_threads());
    bench_json_print(&j, stdout);
    free(rates);
    run_close(&r);
    return 0;
}

/* ---- Parent: child processes and their JSON lines ------------------------------------ */

/* Runs argv[0] with argv, with `env_name`=`env_value` set when env_name is not NULL,
 * and collects its stdout into `out` (stderr passes through). Returns its exit status,
 * or -1 when it could not be started; `cpu_s` (if not NULL) receives the CPU seconds
 * (user + system) the child and the processes it waited for used. */
static int capture(char *const *argv, const char *env_name, const char *env_value, char *out,
                   size_t size, double *cpu_s) {
    int fd[2];
    out[0] = '\0';
    if (pipe(fd) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        if (env_name)
            setenv(env_name, env_value, 1);
        execv(argv[0], argv);
        fprintf(stderr, "bench_train: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0;
    for (;;) {
        char chunk[4096];
        ssize_t got = read(fd[0], chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        size_t take = (size_t)got < size - 1 - len ? (size_t)got : size - 1 - len;
        memcpy(out + len, chunk, take);
        len += take;
    }
    out[len] = '\0';
    close(fd[0]);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    if (cpu_s)
        *cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The line of `text` that is a JSON object holding `"case": "<kase>"` (or, when kase is
 * NULL, any object holding `key`), copied to `line`; false when there is none. */
static bool find_line(const char *text, const char *kase, const char *key, char *line,
                      size_t size) {
    char want[96];
    snprintf(want, sizeof want, "\"%s\"", kase ? kase : key);
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (*p == '{' && len < size) {
            memcpy(line, p, len);
            line[len] = '\0';
            if (strstr(line, want))
                return true;
        }
        p += len + (end ? 1 : 0);
    }
    return false;
}

/* The value of top-level key `key` in a flat JSON object (either "k":v or "k": v). */
static const char *json_value(const char *line, const char *key) {
    char want[96];
    snprintf(want, sizeof want, "\"%s\"", key);
    const char *p = strstr(line, want);
    if (p == NULL)
        return NULL;
    p += strlen(want);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

static double json_number(const char *line, const char *key) {
    const char *v = json_value(line, key);
    if (v == NULL || strncmp(v, "null", 4) == 0)
        return NAN;
    char *end;
    double d = strtod(v, &end);
    return end == v ? NAN : d;
}

static void json_string(const char *line, const char *key, char *out, size_t size) {
    const char *v = json_value(line, key);
    out[0] = '\0';
    if (v == NULL || *v != '"')
        return;
    v++;
    size_t len = 0;
    while (v[len] && v[len] != '"' && len + 1 < size) {
        out[len] = v[len];
        len++;
    }
    out[len] = '\0';
}

struct mxc_result {
    bool ok;
    double rate, rss, cpu_s;
    int workers, op_threads;
    char runs[128], engine[32];
};

struct torch_result {
    bool ok;
    double cpu_s, rate, rss, rate_torch2, rate_openblas1, rss_torch2, rss_openblas1;
    char threads[32], version[32];
};

/* The sample counts and repeats, as a child's arguments. */
struct sample_args {
    char epochs[24], infer[24], resnet[24], repeats[24];
};

static void sample_args(const struct options *o, struct sample_args *a) {
    snprintf(a->epochs, sizeof a->epochs, "%ld", o->epochs_samples);
    snprintf(a->infer, sizeof a->infer, "%ld", o->infer_samples);
    snprintf(a->resnet, sizeof a->resnet, "%ld", o->resnet_samples);
    snprintf(a->repeats, sizeof a->repeats, "%ld", o->repeats);
}

/* Runs case `kase` in a child with `env_name`=`env_value` (none when NULL). */
static void run_mxc(const char *self, const char *kase, const char *env_name, const char *env_value,
                    const struct options *o, struct mxc_result *r) {
    struct sample_args sa;
    sample_args(o, &sa);
    char *argv[] = {(char *)self, "--child",         (char *)kase, "--epochs-samples",
                    sa.epochs,    "--infer-samples", sa.infer,     "--resnet-samples",
                    sa.resnet,    "--repeats",       sa.repeats,   NULL};
    static char out[1 << 16];
    char line[2048];
    memset(r, 0, sizeof *r);
    int st = capture(argv, env_name, env_value, out, sizeof out, &r->cpu_s);
    if (st != 0 || !find_line(out, kase, NULL, line, sizeof line)) {
        fprintf(stderr, "bench_train: mxc %s (%s=%s) failed (status %d)\n", kase,
                env_name ? env_name : "defaults", env_name ? env_value : "", st);
        return;
    }
    r->ok = true;
    r->rate = json_number(line, "samples_per_s");
    r->rss = json_number(line, "peak_rss_mib");
    r->workers = (int)json_number(line, "cpu_workers");
    r->op_threads = (int)json_number(line, "op_threads");
    json_string(line, "runs", r->runs, sizeof r->runs);
    json_string(line, "engine", r->engine, sizeof r->engine);
}

/* Runs the PyTorch script for one case. Returns false when the baseline is unavailable
 * altogether (no python, no script, no torch), with the reason in `why`. */
static bool run_torch(const char *kase, const struct options *o, struct torch_result *r, char *why,
                      size_t why_size) {
    memset(r, 0, sizeof *r);
    if (access(o->python, X_OK) != 0) {
        snprintf(why, why_size, "%s not found (Debian's python3; scripts/deps.sh --bench)",
                 o->python);
        return false;
    }
    if (o->script == NULL || access(o->script, R_OK) != 0) {
        snprintf(why, why_size,
                 "scripts/bench_train_pytorch.py not found (run from the "
                 "repository root or pass --pytorch-script)");
        return false;
    }
    struct sample_args sa;
    sample_args(o, &sa);
    char *argv[] = {
        (char *)o->python,  (char *)o->script, "--json",          "--cases", (char *)kase,
        "--epochs-samples", sa.epochs,         "--infer-samples", sa.infer,  "--resnet-samples",
        sa.resnet,          "--repeats",       sa.repeats,        NULL};
    static char out[1 << 16];
    char line[2048];
    double cpu_s = 0;
    int st = capture(argv, NULL, NULL, out, sizeof out, &cpu_s);
    if (find_line(out, NULL, "error", line, sizeof line) &&
        !find_line(out, kase, NULL, line, sizeof line)) {
        find_line(out, NULL, "error", line, sizeof line);
        json_string(line, "error", why, why_size);
        return false;
    }
    if (!find_line(out, kase, NULL, line, sizeof line) ||
        !isfinite(json_number(line, "samples_per_s"))) {
        fprintf(stderr, "bench_train: PyTorch %s failed (status %d)\n", kase, st);
        return true;
    }
    r->ok = true;
    r->cpu_s = cpu_s;
    r->rate = json_number(line, "samples_per_s");
    r->rss = json_number(line, "peak_rss_mib");
    r->rate_torch2 = json_number(line, "samples_per_s_torch2");
    r->rate_openblas1 = json_number(line, "samples_per_s_torch2_openblas1");
    r->rss_torch2 = json_number(line, "peak_rss_mib_torch2");
    r->rss_openblas1 = json_number(line, "peak_rss_mib_torch2_openblas1");
    json_string(line, "threads", r->threads, sizeof r->threads);
    json_string(line, "torch_version", r->version, sizeof r->version);
    return true;
}

/* The script beside the repository this binary was built in, or in the working folder. */
static const char *find_script(const char *self) {
    static char path[4096];
    const char *rel = "scripts/bench_train_pytorch.py";
    if (access(rel, R_OK) == 0)
        return rel;
    const char *slash = strrchr(self, '/');
    if (slash) { /* <repo>/build*'/bin/bench_train */
        snprintf(path, sizeof path, "%.*s/../../%s", (int)(slash - self), self, rel);
        if (access(path, R_OK) == 0)
            return path;
    }
    return NULL;
}

static double fmt_rate(double v) { return isfinite(v) ? v : 0; }

static void print_row(FILE *f, const char *kase, const struct mxc_result *m,
                      const struct torch_result *t, int best, bool runnable) {
    char cell[NUM_SETTINGS][24], tcell[2][24], ratio[16], rss[32];
    for (int s = 0; s < NUM_SETTINGS; s++)
        snprintf(cell[s], sizeof cell[s],
                 m[s].ok    ? "%.0f"
                 : runnable ? "failed"
                            : "n/a",
                 fmt_rate(m[s].rate));
    snprintf(tcell[0], sizeof tcell[0], t->ok ? "%.0f" : "-", fmt_rate(t->rate_torch2));
    snprintf(tcell[1], sizeof tcell[1], t->ok ? "%.0f" : "-", fmt_rate(t->rate_openblas1));
    if (best >= 0 && t->ok)
        snprintf(ratio, sizeof ratio, "%.2fx", m[best].rate / t->rate);
    else
        snprintf(ratio, sizeof ratio, "-");
    if (best >= 0)
        snprintf(rss, sizeof rss, t->ok ? "%.0f / %.0f" : "%.0f / -", m[best].rss, t->rss);
    else
        snprintf(rss, sizeof rss, t->ok ? "- / %.0f" : "-", t->rss);
    fprintf(f, "%-12s %12s %12s %12s %12s %8s  %-9s %-17s %s\n", kase, cell[0], cell[1], tcell[0],
            tcell[1], ratio, best >= 0 ? setting_names[best] : "-", t->ok ? t->threads : "-", rss);
    fflush(f);
}

static void print_json(const char *kase, const struct mxc_result *m, const struct torch_result *t,
                       int best, const struct options *o, const char *baseline_error) {
    bench_json j;
    bench_json_begin(&j, "train", kase);
    bench_json_str(&j, "system", "mxc");
    bench_json_num(&j, "samples_per_s", best >= 0 ? m[best].rate : NAN);
    bench_json_num(&j, "peak_rss_mib", best >= 0 ? m[best].rss : NAN);
    bench_json_str(&j, "mxc_settings", best >= 0 ? setting_names[best] : NULL);
    bench_json_num(&j, "mxc_cpu_workers", best >= 0 ? m[best].workers : NAN);
    bench_json_num(&j, "mxc_op_threads", best >= 0 ? m[best].op_threads : NAN);
    for (int s = 0; s < NUM_SETTINGS; s++) {
        char key[64];
        snprintf(key, sizeof key, "samples_per_s_%s", setting_names[s]);
        bench_json_num(&j, key, m[s].ok ? m[s].rate : NAN);
        snprintf(key, sizeof key, "peak_rss_mib_%s", setting_names[s]);
        bench_json_num(&j, key, m[s].ok ? m[s].rss : NAN);
    }
    bench_json_str(&j, "baseline", "pytorch");
    bench_json_num(&j, "baseline_samples_per_s", t->ok ? t->rate : NAN);
    bench_json_str(&j, "baseline_threads", t->ok ? t->threads : NULL);
    bench_json_num(&j, "baseline_peak_rss_mib", t->ok ? t->rss : NAN);
    bench_json_num(&j, "baseline_samples_per_s_torch2", t->ok ? t->rate_torch2 : NAN);
    bench_json_num(&j, "baseline_samples_per_s_torch2_openblas1", t->ok ? t->rate_openblas1 : NAN);
    bench_json_num(&j, "ratio_vs_baseline", best >= 0 && t->ok ? m[best].rate / t->rate : NAN);
    bench_json_num(&j, "rss_ratio_vs_baseline", best >= 0 && t->ok ? t->rss / m[best].rss : NAN);
    if (baseline_error && baseline_error[0])
        bench_json_str(&j, "baseline_error", baseline_error);
    long n = case_samples(o, kase);
    bench_json_num(&j, "samples", (double)(n - n % BATCH < BATCH ? BATCH : n - n % BATCH));
    bench_json_num(&j, "repeats", (double)o->repeats);
    bench_json_print(&j, stdout);
}

/* ---- Contention: training beside busy processes -------------------------------------- */

#define MAX_BUSY_SETS 8

/* Starts `k` processes that spin on the CPU until stop_busy; returns how many started. */
static int start_busy(int k, pid_t *pids) {
    fflush(stdout);
    fflush(stderr);
    int started = 0;
    for (; started < k; started++) {
        pid_t pid = fork();
        if (pid < 0)
            break;
        if (pid == 0) {
            volatile unsigned long spin = 0;
            for (;;)
                spin++;
        }
        pids[started] = pid;
    }
    bench_sleep_ms(300); /* let the scheduler spread them before a run starts */
    return started;
}

static void stop_busy(const pid_t *pids, int k) {
    for (int i = 0; i < k; i++)
        kill(pids[i], SIGKILL);
    for (int i = 0; i < k; i++)
        while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR) {
        }
}

/* mxc as configured and with one thread per operator, in alternating single-epoch
 * children so that both meet the same load over time (a busy process's share drifts);
 * each result is the median of its runs, its CPU seconds those of all its runs (the same
 * epochs as a quiet run of o->repeats). */
static void run_mxc_alternating(const char *self, const char *kase, const struct options *o,
                                struct mxc_result *configured, struct mxc_result *single) {
    struct options one = *o;
    one.repeats = 1;
    double rates[2][64], cpu[2] = {0, 0};
    int n = o->repeats < 64 ? (int)o->repeats : 64, ok[2] = {0, 0};
    for (int r = 0; r < n; r++)
        for (int k = 0; k < 2; k++) {
            int which = (r + k) % 2; /* who goes first alternates too */
            struct mxc_result *res = which ? single : configured;
            run_mxc(self, kase, which ? "MXC_OP_NTHREADS" : NULL, which ? "1" : NULL, &one, res);
            if (res->ok) {
                rates[which][ok[which]++] = res->rate;
                cpu[which] += res->cpu_s;
            }
        }
    for (int which = 0; which < 2; which++) {
        struct mxc_result *res = which ? single : configured;
        res->ok = ok[which] == n;
        res->rate = bench_median(rates[which], ok[which]);
        res->cpu_s = cpu[which];
    }
}

/* One case quiet and beside each number of busy processes in `busy`: mxc as configured
 * (by default one worker whose operators use every core), mxc with one thread per
 * operator under the same load (the floor a multi-threaded run must not fall below), and
 * PyTorch quiet and loaded. */
static int run_contention(const char *self, const struct options *o, const int *busy, int nbusy) {
    FILE *tf = o->json ? stderr : stdout;
    fprintf(tf,
            "bench_train --contention: each run quiet, then beside K busy processes (one "
            "spinning thread each) on %d cores; %ld training samples (ResNet-18: %ld), "
            "median of %ld run(s)\n"
            "  loaded/quiet: samples/s beside K over samples/s quiet; vs 1-thread: mxc "
            "loaded over mxc with MXC_OP_NTHREADS=1 under the same load; CPU s: the run's CPU "
            "seconds (all its threads)\n",
            mxc__cpu_count(), o->epochs_samples, o->resnet_samples, o->repeats);
    fprintf(tf, "%-12s %2s %10s %10s %7s %10s %7s %14s %10s %10s %7s\n", "case", "K", "mxc quiet",
            "mxc loaded", "ratio", "mxc 1-thr", "vs 1-thr", "CPU s q/l", "torch q", "torch l",
            "ratio");
    bool baseline = !o->no_baseline;
    char why[512] = "";
    int status = 0;
    for (int c = 0; c < NUM_CASES; c++) {
        if (!o->cases[c] || strstr(case_names[c], "_train") == NULL)
            continue;
        const char *kase = case_names[c];
        struct mxc_result quiet;
        struct torch_result tquiet;
        memset(&tquiet, 0, sizeof tquiet);
        run_mxc(self, kase, NULL, NULL, o, &quiet);
        if (baseline && !run_torch(kase, o, &tquiet, why, sizeof why)) {
            baseline = false;
            fprintf(tf, "bench_train: NO PyTorch BASELINE: %s\n", why);
        }
        for (int b = 0; b < nbusy; b++) {
            pid_t pids[64];
            int k = start_busy(busy[b], pids);
            struct mxc_result loaded, single;
            struct torch_result tloaded;
            memset(&tloaded, 0, sizeof tloaded);
            run_mxc_alternating(self, kase, o, &loaded, &single);
            if (baseline)
                run_torch(kase, o, &tloaded, why, sizeof why);
            stop_busy(pids, k);
            if (!quiet.ok || !loaded.ok || !single.ok || k != busy[b])
                status = 1;
            double ratio = loaded.rate / quiet.rate, vs_single = loaded.rate / single.rate;
            double tratio = tloaded.rate / tquiet.rate;
            char cpu[32], torch[48] = "         -          -       -";
            snprintf(cpu, sizeof cpu, "%.1f / %.1f", quiet.cpu_s, loaded.cpu_s);
            if (tquiet.ok && tloaded.ok) /* else no baseline: dashes, not 0 and nan */
                snprintf(torch, sizeof torch, "%10.0f %10.0f %6.2fx", fmt_rate(tquiet.rate),
                         fmt_rate(tloaded.rate), tratio);
            fprintf(tf, "%-12s %2d %10.0f %10.0f %6.2fx %10.0f %6.2fx %14s %s\n", kase, k,
                    fmt_rate(quiet.rate), fmt_rate(loaded.rate), ratio, fmt_rate(single.rate),
                    vs_single, cpu, torch);
            fflush(tf);
            if (!o->json)
                continue;
            bench_json j;
            bench_json_begin(&j, "train_contention", kase);
            bench_json_str(&j, "system", "mxc");
            bench_json_num(&j, "busy_processes", k);
            bench_json_num(&j, "samples_per_s_quiet", quiet.ok ? quiet.rate : NAN);
            bench_json_num(&j, "samples_per_s", loaded.ok ? loaded.rate : NAN);
            bench_json_num(&j, "ratio_loaded_vs_quiet", ratio);
            bench_json_num(&j, "samples_per_s_one_thread", single.ok ? single.rate : NAN);
            bench_json_num(&j, "ratio_vs_one_thread", vs_single);
            bench_json_num(&j, "cpu_s_quiet", quiet.cpu_s);
            bench_json_num(&j, "cpu_s", loaded.cpu_s);
            bench_json_str(&j, "baseline", "pytorch");
            bench_json_num(&j, "baseline_samples_per_s_quiet", tquiet.ok ? tquiet.rate : NAN);
            bench_json_num(&j, "baseline_samples_per_s", tloaded.ok ? tloaded.rate : NAN);
            bench_json_num(&j, "baseline_ratio_loaded_vs_quiet", tratio);
            bench_json_num(&j, "ratio_vs_baseline", loaded.rate / tloaded.rate);
            bench_json_num(&j, "samples", (double)case_samples(o, kase));
            bench_json_num(&j, "repeats", (double)o->repeats);
            bench_json_print(&j, stdout);
        }
    }
    return status;
}

/* ---- --data-parallel: LeNet on 1 and 2 ranks under mpirun --------------------------- */

struct dp_state {
    mxc_engine *engine;
    const char *trace;
    double rate; /* samples/s of the last epoch (all ranks) */
    int epochs;
};

/* Rank 0's progress callback: epoch 0 is the warm-up; the profiler records epoch 1. */
static void dp_progress(const mxc_fit_progress *p, void *user) {
    struct dp_state *st = user;
    if (!p->end_of_epoch)
        return;
    st->rate = p->samples_per_s;
    if (++st->epochs == 1 && st->trace)
        CHECK(mxc_engine_profiler_start(st->engine));
}

struct dp_span {
    double t;
    int comm, delta;
};

static int dp_cmp(const void *a, const void *b) {
    const struct dp_span *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t ? 1 : 0;
}

/* From a Chrome trace: the share of the traced time in which a kvstore_allreduce was in
 * flight and no other operation ran (communication nobody waited behind: exposed), and
 * the share in which one was in flight at all. */
static void dp_comm_share(const char *path, double *exposed, double *in_flight, long *steps) {
    *exposed = *in_flight = NAN;
    *steps = 0;
    size_t len = 0;
    char *text = NULL;
    FILE *f = fopen(path, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        len = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        text = malloc(len + 1);
        if (text && fread(text, 1, len, f) == len)
            text[len] = '\0';
        else {
            free(text);
            text = NULL;
        }
        fclose(f);
    }
    if (!text)
        return;
    size_t cap = 1024, n = 0;
    struct dp_span *v = malloc(sizeof *v * cap);
    for (char *e = strstr(text, "\"name\""); e && v; e = strstr(e + 1, "\"name\"")) {
        char *end = strchr(e, '}'), *ph = strstr(e, "\"ph\""), *ts = strstr(e, "\"ts\""),
             *dur = strstr(e, "\"dur\"");
        if (!end || !ph || !ts || !dur || ph > end || ts > end || dur > end ||
            !strstr(ph, "\"X\"") || strstr(ph, "\"X\"") > end)
            continue;
        double t0 = strtod(strchr(ts, ':') + 1, NULL), d = strtod(strchr(dur, ':') + 1, NULL);
        int comm = strncmp(strchr(e + 6, '"') + 1, "kvstore_allreduce", 17) == 0;
        *steps += comm;
        if (n + 2 > cap) {
            cap *= 2;
            struct dp_span *w = realloc(v, sizeof *v * cap);
            if (!w)
                break;
            v = w;
        }
        v[n++] = (struct dp_span){t0, comm, 1};
        v[n++] = (struct dp_span){t0 + d, comm, -1};
    }
    free(text);
    if (!v || n == 0) {
        free(v);
        return;
    }
    qsort(v, n, sizeof *v, dp_cmp);
    int active[2] = {0, 0};
    double exp = 0, fl = 0;
    for (size_t i = 0; i + 1 <= n; i++) {
        active[v[i].comm] += v[i].delta;
        double dt = i + 1 < n ? v[i + 1].t - v[i].t : 0;
        if (active[1] > 0) {
            fl += dt;
            if (active[0] == 0)
                exp += dt;
        }
    }
    double span = v[n - 1].t - v[0].t;
    *exposed = span > 0 ? exp / span : NAN;
    *in_flight = span > 0 ? fl / span : NAN;
    free(v);
}

/* One rank of --data-parallel (under mpirun): LeNet fitted through a dist_sync store on
 * this rank's synthetic data (batch 100 per rank) for two epochs of `o->epochs_samples`
 * samples per rank; rank 0 prints the second epoch's samples/s of the job and, from an
 * engine trace of that epoch, the share of it spent waiting for communication. */
static int run_dp_rank(const struct options *o, const char *trace) {
    mxc_kvstore *kv = NULL;
    int rank = 0, size = 1;
    CHECK(mxc_kvstore_create("dist_sync", &kv));
    CHECK(mxc_kvstore_rank(kv, &rank));
    CHECK(mxc_kvstore_num_workers(kv, &size));
    long n = o->epochs_samples - o->epochs_samples % BATCH;
    n = n < BATCH ? BATCH : n;
    rng_state += (uint64_t)rank * 7919u;
    float *data = malloc(sizeof *data * (size_t)n * 784),
          *labels = malloc(sizeof *labels * (size_t)n);
    if (!data || !labels)
        return 1;
    for (size_t i = 0; i < (size_t)n * 784; i++)
        data[i] = rand_unit();
    for (long i = 0; i < n; i++)
        labels[i] = (float)(int)(rand_unit() * 10);
    mxc_ndarray *d = NULL, *l = NULL;
    mxc_shape ds = {4, {n, 1, 28, 28}}, ls = {1, {n}};
    CHECK(mxc_nd_create(&ds, MXC_FLOAT32, mxc_cpu(), 0, &d));
    CHECK(mxc_nd_create(&ls, MXC_FLOAT32, mxc_cpu(), 0, &l));
    CHECK(mxc_nd_sync_copy_from_cpu(d, data, sizeof(float) * (size_t)n * 784));
    CHECK(mxc_nd_sync_copy_from_cpu(l, labels, sizeof(float) * (size_t)n));
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = BATCH;
    mxc_data_iter *it = NULL;
    CHECK(mxc_data_iter_create_array(d, l, &p, &it));
    mxc_symbol *sym = NULL;
    mxc_model *model = NULL;
    CHECK(mxc_net_lenet(10, &sym));
    CHECK(mxc_model_create(sym, &model));
    struct dp_state st = {.trace = rank == 0 ? trace : NULL};
    CHECK(mxc_engine_get_default(&st.engine));
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.num_epochs = 2;
    cfg.optimizer.lr = 0.05f;
    cfg.optimizer.momentum = 0.9f;
    cfg.kvstore = "dist_sync";
    cfg.callback = dp_progress;
    cfg.user = &st;
    cfg.frequent = 0;
    CHECK(mxc_model_fit(model, it, NULL, &cfg, NULL));
    if (rank == 0) {
        double exposed = NAN, in_flight = NAN;
        long pushes = 0;
        if (trace) {
            CHECK(mxc_engine_profiler_stop(st.engine));
            CHECK(mxc_engine_profiler_dump(st.engine, trace));
            dp_comm_share(trace, &exposed, &in_flight, &pushes);
        }
        printf("{\"ranks\": %d, \"samples_per_s\": %.1f, \"comm_exposed_share\": %.4f, "
               "\"comm_in_flight_share\": %.4f, \"allreduces\": %ld}\n",
               size, st.rate, exposed, in_flight, pushes);
        fflush(stdout);
    }
    CHECK(mxc_kvstore_barrier(kv));
    mxc_kvstore_free(kv);
    mxc_model_free(model);
    mxc_symbol_free(sym);
    mxc_data_iter_free(it);
    mxc_nd_free(d);
    mxc_nd_free(l);
    free(data);
    free(labels);
    return 0;
}

/* --data-parallel: `mpirun -np 1` and `-np 2` of this binary (--dp-rank), one core per
 * rank (MXC_OP_NTHREADS=1, MXC_CPU_WORKER_NTHREADS=1); prints samples/s of each, the
 * speed-up, and rank 0's communication shares of the 2-rank run. */
static int run_data_parallel(const char *self, const struct options *o) {
    FILE *tf = o->json ? stderr : stdout;
    setenv("MXC_OP_NTHREADS", "1", 1);
    setenv("MXC_CPU_WORKER_NTHREADS", "1", 1);
    double rate[3] = {NAN, NAN, NAN}, exposed = NAN, in_flight = NAN;
    char samples[32], trace[64];
    snprintf(samples, sizeof samples, "%ld", o->epochs_samples);
    snprintf(trace, sizeof trace, "build/bench_dp_trace.json");
    fprintf(tf,
            "bench_train --data-parallel: LeNet, batch %d per rank, %ld samples per rank per "
            "epoch, the second epoch timed; MXC_OP_NTHREADS=1 MXC_CPU_WORKER_NTHREADS=1\n",
            BATCH, o->epochs_samples);
    char mpirun[4096] = "mpirun"; /* capture() runs a path: mpirun's, from PATH */
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        const char *colon = strchr(p, ':');
        int dl = colon ? (int)(colon - p) : (int)strlen(p);
        char cand[4096];
        snprintf(cand, sizeof cand, "%.*s/mpirun", dl, p);
        if (access(cand, X_OK) == 0) {
            snprintf(mpirun, sizeof mpirun, "%s", cand);
            break;
        }
        p += dl + (colon != NULL);
    }
    for (int np = 1; np <= 2; np++) {
        char nps[16], out[8192]; /* nps: room for any int (-O1 checks) */
        snprintf(nps, sizeof nps, "%d", np);
        char *const argv[] = {
            mpirun, "--allow-run-as-root", "--oversubscribe", "-np", nps, (char *)self, "--dp-rank",
            trace,  "--epochs-samples",    samples,           NULL};
        int st = capture(argv, NULL, NULL, out, sizeof out, NULL);
        const char *line = strstr(out, "{\"ranks\"");
        if (st != 0 || !line) {
            fprintf(stderr, "bench_train: mpirun -np %d failed (status %d)\n%s", np, st, out);
            return 1;
        }
        rate[np] = json_number(line, "samples_per_s");
        if (np == 2) {
            exposed = json_number(line, "comm_exposed_share");
            in_flight = json_number(line, "comm_in_flight_share");
        }
        fprintf(tf, "  %d rank(s): %10.1f samples/s  comm in flight %5.1f %%, exposed %5.1f %%\n",
                np, rate[np], 100 * json_number(line, "comm_in_flight_share"),
                100 * json_number(line, "comm_exposed_share"));
    }
    fprintf(tf, "  speed-up 2 ranks / 1 rank: %.2f (rank 0's trace of the 2-rank run: %s)\n",
            rate[2] / rate[1], trace);
    if (o->json) {
        bench_json j;
        bench_json_begin(&j, "train_data_parallel", "lenet_train");
        bench_json_str(&j, "system", "mxc");
        bench_json_num(&j, "batch_per_rank", BATCH);
        bench_json_num(&j, "samples_per_rank", (double)o->epochs_samples);
        bench_json_num(&j, "samples_per_s_1_rank", rate[1]);
        bench_json_num(&j, "samples_per_s_2_ranks", rate[2]);
        bench_json_num(&j, "speedup", rate[2] / rate[1]);
        bench_json_num(&j, "comm_in_flight_share", in_flight);
        bench_json_num(&j, "comm_exposed_share", exposed);
        bench_json_print(&j, stdout);
    }
    return 0;
}

static void usage(const char *prog) {
    fprintf(
        stderr,
        "usage: %s [--json] [--quick] [--epochs-samples N] [--infer-samples N]\n"
        "          [--resnet-samples N] [--repeats R]\n"
        "          [--cases mlp_train,mlp_infer,lenet_train,lenet_infer,resnet_train]\n"
        "          [--no-baseline] [--python PATH] [--pytorch-script PATH]\n"
        "          [--contention K[,K...]]\n"
        "       %s --ctx gpu [--json] [--quick] [--cases ...]\n"
        "          [--epochs-samples N] [--infer-samples N] [--resnet-samples N] [--repeats R]\n"
        "       %s --child CASE [--epochs-samples N] [--infer-samples N] [--resnet-samples N]\n"
        "          [--repeats R]\n"
        "       %s --data-parallel [--json] [--epochs-samples N]\n",
        prog, prog, prog, prog);
    exit(2);
}

static long parse_count(const char *prog, const char *v) {
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (v == NULL || *end != '\0' || n < 1)
        usage(prog);
    return n;
}

/* ---- --ctx gpu: mxc on gpu(0) against the hand-written cuBLAS / cuDNN step ------------ */

/* The largest difference of the softmax outputs the correctness check lets pass: both
 * compute in float32 (no TF32) but with different algorithms and summation orders. */
#define CHECK_TOLERANCE 1e-3

/* gpu_baseline's cfg->init: parameter `name` as mxc initialised it. */
static bool init_from_mxc(void *user, const char *name, int64_t count, float *values) {
    const struct run *r = user;
    int i = find_arg(r->num_args, r->names, name);
    if (i < 0 || i == r->di || i == r->li || mxc_nd_size(r->args[i]) != count)
        return false;
    CHECK(mxc_nd_sync_copy_to_cpu(r->args[i], values, sizeof(float) * (size_t)count));
    return true;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d))
            return d; /* a NaN on either side fails the check */
        worst = d > worst ? d : worst;
    }
    return worst;
}

/* The correctness check before timing: the softmax outputs of mxc and the baseline on
 * the same weights and batch, from a training-mode forward pass (diff[0]), then after one
 * training step of both on batch 0, on batch 1 (diff[1]: the backward and the update). */
static void check_baseline(struct run *r, gpu_baseline *b, double diff[2]) {
    const size_t n = (size_t)r->batch * 10;
    float *pm = malloc(sizeof(float) * n), *pb = malloc(sizeof(float) * n);
    float *onehot = calloc(n, sizeof(float));
    if (pm == NULL || pb == NULL || onehot == NULL) {
        fprintf(stderr, "bench_train: out of memory\n");
        exit(1);
    }
    for (long i = 0; i < r->batch; i++)
        onehot[(size_t)i * 10 + (size_t)r->labels[i]] = 1;
    for (int k = 0; k < 2; k++) {
        long at = k % (r->n / r->batch); /* the batch after the step, if there is one */
        if (k == 1) {
            run_batch(r, 0);
            gpu_baseline_train(b, r->data, onehot, 1);
        }
        const size_t b0 = (size_t)(at * r->batch);
        CHECK(mxc_nd_sync_copy_from_cpu(r->args[r->li], r->labels + b0,
                                        sizeof(float) * (size_t)r->batch));
        CHECK(mxc_nd_sync_copy_from_cpu(r->args[r->di], r->data + b0 * r->sample,
                                        sizeof(float) * (size_t)r->batch * r->sample));
        CHECK(mxc_executor_forward(r->x, 1));
        CHECK(mxc_nd_sync_copy_to_cpu(r->outs[0], pm, sizeof(float) * n));
        gpu_baseline_forward(b, r->data + b0 * r->sample, pb);
        diff[k] = max_abs_diff(pm, pb, n);
    }
    free(pm);
    free(pb);
    free(onehot);
}

/* Samples/s of the baseline over the data set's first `batches` batches. */
static double baseline_epoch(gpu_baseline *b, const struct run *r, const float *onehot,
                             long batches) {
    uint64_t t0 = bench_now_ns();
    gpu_baseline_train(b, r->data, onehot, batches);
    return (double)(batches * r->batch) / ((double)(bench_now_ns() - t0) / 1e9);
}

/* The one-hot labels of the whole data set (n x 10), for the baseline's loss. */
static float *one_hot(const struct run *r) {
    float *v = calloc((size_t)r->n * 10, sizeof(float));
    if (v == NULL) {
        fprintf(stderr, "bench_train: out of memory for the one-hot labels\n");
        exit(1);
    }
    for (long i = 0; i < r->n; i++)
        v[(size_t)i * 10 + (size_t)r->labels[i]] = 1;
    return v;
}

/* Case `kase` at batch o->batch on gpu(0): for a training case the baseline too, set up
 * with mxc's initial weights and checked against mxc, then o->repeats epochs of each,
 * alternating; prints the text row and the JSON line. Returns 0, or the failed status. */
static int run_gpu_case(const char *kase, const struct options *o, const char *gpu_name, FILE *tf) {
    struct run r;
    int rc = run_open(kase, o, &r);
    if (rc != 0)
        return rc;
    const long batches = r.n / r.batch;
    char why[256] = "", name[64];
    snprintf(name, sizeof name, "%s_b%ld", kase, r.batch);
    gpu_baseline *b = NULL;
    float *onehot = NULL;
    double diff[2] = {NAN, NAN};
    if (r.train) {
        const gpu_baseline_config cfg = {.net = r.net->kind,
                                         .batch = (int)r.batch,
                                         .channels = r.net->c,
                                         .height = r.net->h,
                                         .width = r.net->w,
                                         .lr = r.net->lr,
                                         .momentum = r.net->momentum,
                                         .wd = 0,
                                         .init = init_from_mxc,
                                         .user = &r};
        int asked = 0, have = 0;
        b = gpu_baseline_create(&cfg, &asked, why, sizeof why);
        for (int i = 0; i < r.num_args; i++)
            have += i != r.di && i != r.li;
        if (b && asked != have) { /* a layer list that misses some of mxc's parameters */
            snprintf(why, sizeof why, "the baseline has %d parameter arrays, mxc's %s %d", asked,
                     r.net->prefix, have);
            gpu_baseline_free(b);
            b = NULL;
        }
        if (b == NULL)
            fprintf(tf, "bench_train: %s: NO BASELINE: %s\n", name, why);
        else {
            onehot = one_hot(&r);
            check_baseline(&r, b, diff);
        }
    }
    const bool check_ok = b && diff[0] <= CHECK_TOLERANCE && diff[1] <= CHECK_TOLERANCE;
    if (b && !check_ok)
        fprintf(tf,
                "bench_train: WARNING: %s: the baseline's softmax output differs from mxc's by "
                "%.3g (forward) and %.3g (after one step), above %.0e: one of them computes "
                "something else, and the ratio means nothing until that is fixed\n",
                name, diff[0], diff[1], CHECK_TOLERANCE);

    double *rates = malloc(sizeof(double) * 2 * (size_t)o->repeats);
    if (rates == NULL)
        return 1;
    double *base_rates = rates + o->repeats;
    run_epoch(&r, 1); /* warm-up batches */
    if (b)
        baseline_epoch(b, &r, onehot, 1);
    for (long rep = 0; rep < o->repeats; rep++) { /* alternating: the same conditions */
        rates[rep] = run_epoch(&r, batches);
        if (b)
            base_rates[rep] = baseline_epoch(b, &r, onehot, batches);
    }
    double rate = bench_median(rates, (int)o->repeats);
    double base = b ? bench_median(base_rates, (int)o->repeats) : NAN;
    char base_cell[24] = "-", ratio[16] = "-", check[48] = "-";
    if (b) {
        snprintf(base_cell, sizeof base_cell, "%.0f", base);
        snprintf(ratio, sizeof ratio, "%.2fx", rate / base);
        snprintf(check, sizeof check, "%.1e / %.1e %s", diff[0], diff[1],
                 check_ok ? "ok" : "MISMATCH");
    }
    fprintf(tf, "%-20s %14.0f %14s %8s  %s\n", name, rate, base_cell, ratio, check);
    fflush(tf);
    if (o->json) {
        bench_json j;
        bench_json_begin(&j, "train_gpu", name);
        bench_json_str(&j, "system", "mxc");
        bench_json_str(&j, "device", "gpu(0)");
        bench_json_str(&j, "gpu", gpu_name);
        bench_json_num(&j, "batch", (double)r.batch);
        bench_json_num(&j, "samples", (double)r.n);
        bench_json_num(&j, "repeats", (double)o->repeats);
        bench_json_num(&j, "samples_per_s", rate);
        if (r.train) {
            bench_json_str(&j, "baseline", "cublas_cudnn");
            bench_json_num(&j, "baseline_samples_per_s", base);
            bench_json_num(&j, "ratio_vs_baseline", rate / base);
            bench_json_num(&j, "check_max_abs_diff_forward", diff[0]);
            bench_json_num(&j, "check_max_abs_diff_step", diff[1]);
            bench_json_num(&j, "check_tolerance", CHECK_TOLERANCE);
            bench_json_str(&j, "check", b ? (check_ok ? "ok" : "mismatch") : NULL);
            if (b == NULL)
                bench_json_str(&j, "baseline_error", why);
        }
        bench_json_print(&j, stdout);
    }
    free(rates);
    free(onehot);
    gpu_baseline_free(b);
    run_close(&r);
    return 0;
}

/* --ctx gpu: every chosen case on gpu(0), in this process: the MLP and LeNet at batch 100
 * and 1024, ResNet-18 at batch 128. */
static int run_gpu(struct options *o) {
#ifndef MXC_USE_CUDA
    (void)o;
    (void)run_gpu_case;
    fprintf(stderr, "bench_train: --ctx gpu needs a CUDA build (make USE_CUDA=1 [USE_CUDNN=1])\n");
    return 1;
#else
    mxc_gpu_info_t info;
    if (mxc_gpu_info(0, &info) != MXC_OK) {
        fprintf(stderr, "bench_train: --ctx gpu: %s\n", mxc_last_error());
        return 1;
    }
    static const long gpu_batches[] = {100, 1024}, resnet_batch = 128;
    FILE *tf = o->json ? stderr : stdout;
    fprintf(tf,
            "bench_train: gpu(0) %s, %ld training samples (ResNet-18: %ld), %ld inference "
            "samples, median of %ld run(s); baseline: the same training step as direct "
            "cuBLAS/cuDNN calls on one stream (bench/gpu_baseline.c); ratio = mxc / baseline; "
            "check = max |softmax mxc - baseline|, forward / after one step (tolerance %.0e)\n",
            info.name, o->epochs_samples, o->resnet_samples, o->infer_samples, o->repeats,
            CHECK_TOLERANCE);
    fprintf(tf, "%-20s %14s %14s %8s  %s\n", "case", "mxc samples/s", "baseline", "ratio", "check");
    for (int c = 0; c < NUM_CASES; c++) {
        if (!o->cases[c])
            continue;
        const bool resnet = net_of(case_names[c])->kind == GPU_BASELINE_RESNET18;
        for (size_t k = 0; k < (resnet ? 1 : sizeof gpu_batches / sizeof gpu_batches[0]); k++) {
            o->batch = resnet ? resnet_batch : gpu_batches[k];
            int rc = run_gpu_case(case_names[c], o, info.name, tf);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
#endif
}

int main(int argc, char **argv) {
    struct options o = {.epochs_samples = 60000,
                        .infer_samples = 10000,
                        .repeats = 3,
                        .batch = BATCH,
                        .python = "/usr/bin/python3"};
    const char *child = NULL, *cases = NULL, *dp_trace = NULL;
    bool data_parallel = false;
    int busy[MAX_BUSY_SETS], nbusy = 0;
    bool epochs_given = false, infer_given = false, resnet_given = false, repeats_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            o.json = true;
        } else if (strcmp(a, "--quick") == 0) {
            o.quick = true;
        } else if (strcmp(a, "--no-baseline") == 0) {
            o.no_baseline = true;
        } else if (strcmp(a, "--epochs-samples") == 0) {
            o.epochs_samples = parse_count(argv[0], v);
            epochs_given = true;
            i++;
        } else if (strcmp(a, "--infer-samples") == 0) {
            o.infer_samples = parse_count(argv[0], v);
            infer_given = true;
            i++;
        } else if (strcmp(a, "--resnet-samples") == 0) {
            o.resnet_samples = parse_count(argv[0], v);
            resnet_given = true;
            i++;
        } else if (strcmp(a, "--repeats") == 0) {
            o.repeats = parse_count(argv[0], v);
            repeats_given = true;
            i++;
        } else if (strcmp(a, "--cases") == 0 && v) {
            cases = v;
            i++;
        } else if (strcmp(a, "--python") == 0 && v) {
            o.python = v;
            i++;
        } else if (strcmp(a, "--pytorch-script") == 0 && v) {
            o.script = v;
            i++;
        } else if (strcmp(a, "--contention") == 0 && v) {
            for (const char *p = v; *p && nbusy < MAX_BUSY_SETS;) {
                char *end;
                long k = strtol(p, &end, 10);
                if (end == p || k < 1 || k > 64 || (*end != ',' && *end != '\0'))
                    usage(argv[0]);
                busy[nbusy++] = (int)k;
                p = *end ? end + 1 : end;
            }
            i++;
        } else if (strcmp(a, "--ctx") == 0 && v && (!strcmp(v, "cpu") || !strcmp(v, "gpu"))) {
            o.gpu = strcmp(v, "gpu") == 0;
            i++;
        } else if (strcmp(a, "--data-parallel") == 0) {
            data_parallel = true;
        } else if (strcmp(a, "--dp-rank") == 0 && v) {
            dp_trace = v;
            i++;
        } else if (strcmp(a, "--child") == 0 && v) {
            child = v;
            i++;
        } else {
            usage(argv[0]);
        }
    }
    if (o.quick) {
        if (!epochs_given)
            o.epochs_samples = 6000;
        if (!infer_given)
            o.infer_samples = 2000;
        if (!repeats_given)
            o.repeats = 1;
    }
    int want = 0;
    for (int c = 0; c < NUM_CASES; c++) {
        o.cases[c] = cases == NULL;
        if (cases) {
            const char *p = strstr(cases, case_names[c]);
            size_t len = strlen(case_names[c]);
            o.cases[c] = p && (p == cases || p[-1] == ',') && (p[len] == ',' || !p[len]);
        }
        want += o.cases[c];
    }
    if (!resnet_given) /* an epoch of ResNet-18 is 500 samples on two cores: 20-30 s */
        o.resnet_samples = o.gpu ? (o.quick ? 1280 : 12800) : (o.quick ? 200 : 500);
    if (dp_trace)
        return run_dp_rank(&o, dp_trace);
    if (o.gpu && (child || nbusy > 0))
        usage(argv[0]); /* --ctx gpu runs in this process, without contention */
    if (o.gpu)
        return run_gpu(&o);
    if (child) {
        for (int c = 0; c < NUM_CASES; c++)
            if (strcmp(child, case_names[c]) == 0)
                return run_case(child, &o);
        usage(argv[0]);
    }
    if (want == 0)
        usage(argv[0]);

    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        fprintf(stderr, "bench_train: cannot find this binary (/proc/self/exe)\n");
        return 1;
    }
    self[len] = '\0';
    if (o.script == NULL)
        o.script = find_script(self);
    if (nbusy > 0)
        return run_contention(self, &o, busy, nbusy);
    if (data_parallel)
        return run_data_parallel(self, &o);

    FILE *tf = o.json ? stderr : stdout;
    const char *ew = getenv("MXC_CPU_WORKER_NTHREADS"), *eo = getenv("MXC_OP_NTHREADS");
    fprintf(tf,
            "bench_train: batch %d, %ld training samples (ResNet-18: %ld), %ld inference "
            "samples, median of %ld run(s); mxc settings: default = MXC_CPU_WORKER_NTHREADS=%s "
            "MXC_OP_NTHREADS=%s, percore = MXC_CPU_WORKER_NTHREADS=%d MXC_OP_NTHREADS=%s\n",
            BATCH, o.epochs_samples, o.resnet_samples, o.infer_samples, o.repeats,
            ew ? ew : "(unset)", eo ? eo : "(unset)", mxc__cpu_count(), eo ? eo : "(unset)");
    fprintf(tf, "%-12s %12s %12s %12s %12s %8s  %-9s %-17s %s\n", "case", "mxc default",
            "mxc percore", "torch2", "torch2+ob1", "ratio", "mxc best", "torch best",
            "RSS MiB mxc/torch");
    bool baseline = !o.no_baseline;
    char why[512] = "";
    int status = 0;
    struct mxc_result seen[NUM_SETTINGS];
    memset(seen, 0, sizeof seen);
    char torch_version[32] = "";
    for (int c = 0; c < NUM_CASES; c++) {
        if (!o.cases[c])
            continue;
        struct mxc_result m[NUM_SETTINGS];
        memset(m, 0, sizeof m);
        int best = -1;
        char missing[256];
        bool runnable = missing_ops(case_names[c], missing, sizeof missing) == 0;
        if (!runnable) {
            status = 1;
            fprintf(tf,
                    "bench_train: mxc cannot run %s yet: operators not registered: %s "
                    "(operator/op_list.h); only the PyTorch baseline runs\n",
                    case_names[c], missing);
        }
        char cores[16];
        snprintf(cores, sizeof cores, "%d", mxc__cpu_count());
        for (int s = 0; s < NUM_SETTINGS && runnable; s++) {
            run_mxc(self, case_names[c], s == 1 ? "MXC_CPU_WORKER_NTHREADS" : NULL, cores, &o,
                    &m[s]);
            if (!m[s].ok) {
                status = 1;
                continue;
            }
            if (!seen[s].ok)
                seen[s] = m[s];
            if (best < 0 || m[s].rate > m[best].rate)
                best = s;
        }
        struct torch_result t;
        memset(&t, 0, sizeof t);
        if (baseline && !run_torch(case_names[c], &o, &t, why, sizeof why)) {
            baseline = false;
            fprintf(tf,
                    "bench_train: NO PyTorch BASELINE: %s; printing mxc's figures "
                    "alone (ratios null)\n",
                    why);
        }
        if (t.ok)
            snprintf(torch_version, sizeof torch_version, "%s", t.version);
        print_row(tf, case_names[c], m, &t, best, runnable);
        if (o.json)
            print_json(case_names[c], m, &t, best, &o, why);
    }
    for (int s = 0; s < NUM_SETTINGS; s++)
        if (seen[s].ok)
            fprintf(tf, "mxc %-8s = engine %s, %d CPU worker(s), %d thread(s) per operator\n",
                    setting_names[s], seen[s].engine, seen[s].workers, seen[s].op_threads);
    if (torch_version[0])
        fprintf(tf,
                "PyTorch %s (%s): torch2 = torch.set_num_threads(2); torch2+ob1 = the same "
                "with OPENBLAS_NUM_THREADS=1\n",
                torch_version, o.python);
    return status;
}

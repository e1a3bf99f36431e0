/*
 * tools/mxc.c — the `mxc` command: train a network on Fashion-MNIST (or IDX/CSV files),
 * score or run a checkpoint, and describe the build. Everything goes through the public
 * C API (mxc/model.h, mxc/io.h, mxc/networks.h), so this file is also a worked example of
 * it. docs/tool.md is its manual.
 *
 *   mxc train  --network mlp|lenet|resnet|<symbol.json> [--data fashion-mnist|<paths>] ...
 *   mxc score  --prefix P --epoch E [--data ...] [--json]
 *   mxc predict --prefix P --epoch E --input <NDArray list> --output <file>
 *   mxc im2rec PREFIX ROOT [--list] [--resize N] [--quality Q] [--threads N] ...
 *   mxc info
 * train, score and predict take --ctx cpu|gpu|gpu:N (default cpu).
 */
#include "mxc/mxc.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE_ERROR 2

/* Prints the library's message for a failed call and exits 1. */
#define CHECK(call)                                         \
    do {                                                    \
        int rc_ = (call);                                   \
        if (rc_ != MXC_OK) {                                \
            fprintf(stderr, "mxc: %s\n", mxc_last_error()); \
            exit(1);                                        \
        }                                                   \
    } while (0)

#define MAX_CTXS 64

struct options {
    const char *network, *data, *prefix, *input, *output, *optimizer, *ctx_arg, *kvstore;
    const char *params;              /* train: initial parameters to fine-tune from */
    mxc_context ctx, ctxs[MAX_CTXS]; /* ctx: the first of --ctx's list */
    int num_ctxs;
    int epochs, epoch, batch_size, frequent, resume, json, num_samples;
    float lr, momentum, wd;
    /* image records: rec: data and im2rec */
    int64_t data_shape[3];
    int resize, quality, threads, shuffle, list_only;
    const char *aug; /* --aug: the training set's augmenters, MXNet's names */
    unsigned long long seed;
    mxc_optimizer_config sched; /* --lr-schedule and its options (the schedule fields) */
};

/* --optimizer's names, in mxc_optimizer_kind order */
static const char *const optimizer_names[] = {"sgd",      "adam", "nag",    "rmsprop", "adagrad",
                                              "adadelta", "ftrl", "signum", "adamw",   "lamb"};

/* --lr-schedule's names, in mxc_lr_schedule order */
static const char *const schedule_names[] = {"constant", "factor", "multifactor", "cosine", "poly"};

/* The index of `v` among the n `names`; a usage error naming `flag` when it is none. */
static int pick(const char *v, const char *const *names, int n, const char *flag) {
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    fprintf(stderr, "mxc: %s must be one of", flag);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "%s%s", i ? ", " : " ", names[i]);
    fprintf(stderr, "; not %s\n", v);
    exit(2);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage:\n"
            "  mxc train --network mlp|lenet|resnet|<symbol.json> [--data fashion-mnist|DATA]\n"
            "            [--epochs N] [--batch-size B] [--lr X] [--momentum M] [--wd W]\n"
            "            [--optimizer sgd|adam|nag|rmsprop|adagrad|adadelta|ftrl|signum|\n"
            "                         adamw|lamb]\n"
            "            [--lr-schedule constant|factor|multifactor|cosine|poly]\n"
            "            [--lr-step N] [--lr-steps N,N,...] [--lr-factor F] [--max-update N]\n"
            "            [--final-lr X] [--pwr P] [--warmup-steps N] [--warmup-begin-lr X]\n"
            "            [--warmup-mode linear|constant]\n"
            "            [--prefix P] [--seed S] [--resume]\n"
            "            [--num-samples N] [--frequent N] [--json] [--ctx CTX[,CTX...]]\n"
            "            [--kvstore local|device|dist_sync] [--params FILE]\n"
            "            [--data-shape C,H,W] [--resize N] [--threads N]\n"
            "            [--aug NAME=VALUE[,NAME=VALUE...]] (rec: data)\n"
            "  mxc score --prefix P --epoch E [--data fashion-mnist|DATA] [--json] [--ctx CTX]\n"
            "  mxc predict --prefix P --epoch E --input FILE --output FILE [--ctx CTX]\n"
            "  mxc im2rec PREFIX ROOT [--list] [--resize N] [--quality Q] [--threads N]\n"
            "             [--shuffle 0|1] [--seed S]\n"
            "  mxc info\n"
            "CTX is where the network runs: cpu (the default, also cpu:N), gpu (gpu:0) or gpu:N;\n"
            "train takes a list (cpu:0,cpu:1) and splits each batch across them.\n"
            "--kvstore sums the gradients: local (the default for a list), device, or\n"
            "dist_sync across the processes of `mpirun -np N mxc train ...` (each reads its\n"
            "shard of the data; rank 0 prints and checkpoints).\n"
            "DATA is fashion-mnist (Debian's dataset-fashion-mnist, or $MXC_FASHION_MNIST_DIR),\n"
            "or TRAIN_IMAGES,TRAIN_LABELS,TEST_IMAGES,TEST_LABELS (IDX files, gzip or raw),\n"
            "or csv:TRAIN_DATA,TRAIN_LABELS,TEST_DATA,TEST_LABELS (784 values per line),\n"
            "or rec:TRAIN.rec[,TEST.rec] (image records, e.g. from mxc im2rec; with\n"
            "--data-shape C,H,W (default 3,28,28), --resize N, --threads N, and --aug with\n"
            "ImageRecordIter's augmenters for training: rand_crop, rand_mirror (0|1),\n"
            "max_rotate_angle, max_shear_ratio, max_random_scale, min_random_scale,\n"
            "max_aspect_ratio, random_h, random_s, random_l, pad, fill_value).\n");
}

static void usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "mxc: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    usage(stderr);
    exit(USAGE_ERROR);
}

static long parse_int(const char *s, const char *flag, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        usage_error("bad integer for", flag);
    return v;
}

static float parse_float(const char *s, const char *flag) {
    char *end;
    float v = strtof(s, &end);
    if (*end || end == s || !(v >= 0))
        usage_error("bad non-negative number for", flag);
    return v;
}

/* --aug NAME=VALUE,...: the training set's augmenters under MXNet's ImageRecordIter names
 * (their ranges are the library's to check). */
static void parse_aug(const char *spec, mxc_image_record_params *ip) {
    char buf[1024], *save = NULL;
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *v = strchr(t, '=');
        if (v == NULL)
            usage_error("--aug takes NAME=VALUE pairs", t);
        *v++ = '\0';
        struct {
            const char *name;
            int *i;
            float *f;
        } const fields[] = {
            {"rand_crop", &ip->rand_crop, NULL},
            {"rand_mirror", &ip->rand_mirror, NULL},
            {"max_rotate_angle", &ip->max_rotate_angle, NULL},
            {"max_shear_ratio", NULL, &ip->max_shear_ratio},
            {"max_random_scale", NULL, &ip->max_random_scale},
            {"min_random_scale", NULL, &ip->min_random_scale},
            {"max_aspect_ratio", NULL, &ip->max_aspect_ratio},
            {"random_h", &ip->random_h, NULL},
            {"random_s", &ip->random_s, NULL},
            {"random_l", &ip->random_l, NULL},
            {"pad", &ip->pad, NULL},
            {"fill_value", &ip->fill_value, NULL},
        };
        size_t k = 0;
        while (k < sizeof fields / sizeof fields[0] && strcmp(t, fields[k].name) != 0)
            k++;
        if (k == sizeof fields / sizeof fields[0])
            usage_error("--aug: unknown augmenter (see mxc --help)", t);
        if (fields[k].i)
            *fields[k].i = (int)parse_int(v, t, INT_MIN, INT_MAX);
        else
            *fields[k].f = parse_float(v, t);
    }
}

/* --lr-steps N,N,...: the multi-factor schedule's update counts (checked for order by
 * mxc_optimizer_create). */
static void parse_steps(const char *v, mxc_optimizer_config *c) {
    char buf[512];
    if (strlen(v) >= sizeof buf)
        usage_error("too long a list for", "--lr-steps");
    strcpy(buf, v);
    c->num_steps = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (c->num_steps == MXC_LR_MAX_STEPS)
            usage_error("too many steps (16 at most) in", "--lr-steps");
        c->steps[c->num_steps++] = (int)parse_int(t, "--lr-steps", 1, 1 << 30);
    }
}

/* One context of --ctx: cpu (cpu 0), cpu:N, gpu (gpu 0) or gpu:N. */
static mxc_context parse_one_ctx(const char *s) {
    if (strcmp(s, "cpu") == 0)
        return mxc_cpu();
    if (strcmp(s, "gpu") == 0)
        return mxc_gpu(0);
    if (strncmp(s, "cpu:", 4) == 0 && s[4] >= '0' && s[4] <= '9')
        return (mxc_context){MXC_CPU, (int32_t)parse_int(s + 4, "--ctx", 0, 1023)};
    if (strncmp(s, "gpu:", 4) == 0 && s[4] >= '0' && s[4] <= '9')
        return mxc_gpu((int32_t)parse_int(s + 4, "--ctx", 0, 1023));
    usage_error("--ctx must be a comma-separated list of cpu, cpu:N, gpu or gpu:N, not", s);
    return mxc_cpu();
}

/* --ctx: one context or a comma-separated list of them. */
static void parse_ctx(const char *s, struct options *o) {
    char buf[4096];
    if (strlen(s) >= sizeof buf || s[0] == ',' || (s[0] && s[strlen(s) - 1] == ',') ||
        strstr(s, ",,"))
        usage_error("bad --ctx list", s);
    snprintf(buf, sizeof buf, "%s", s);
    o->num_ctxs = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->num_ctxs == MAX_CTXS)
            usage_error("too many contexts in --ctx (at most 64)", s);
        o->ctxs[o->num_ctxs++] = parse_one_ctx(t);
    }
    if (o->num_ctxs == 0)
        usage_error("bad --ctx list", s);
    o->ctx = o->ctxs[0];
}

/* --data-shape C,H,W */
static void parse_shape(const char *v, int64_t *shape) {
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", v);
    int n = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == 3)
            usage_error("--data-shape needs C,H,W, not", v);
        shape[n++] = parse_int(t, "--data-shape", 1, 65535);
    }
    if (n != 3)
        usage_error("--data-shape needs C,H,W, not", v);
}

static void parse(int argc, char **argv, int first, struct options *o) {
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--resume") == 0) {
            o->resume = 1;
            continue;
        }
        if (strcmp(a, "--list") == 0) {
            o->list_only = 1;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (i + 1 >= argc)
            usage_error("missing value after", a);
        const char *v = argv[++i];
        if (strcmp(a, "--network") == 0)
            o->network = v;
        else if (strcmp(a, "--data") == 0)
            o->data = v;
        else if (strcmp(a, "--prefix") == 0)
            o->prefix = v;
        else if (strcmp(a, "--input") == 0)
            o->input = v;
        else if (strcmp(a, "--params") == 0)
            o->params = v;
        else if (strcmp(a, "--output") == 0)
            o->output = v;
        else if (strcmp(a, "--optimizer") == 0)
            o->optimizer = v;
        else if (strcmp(a, "--epochs") == 0)
            o->epochs = (int)parse_int(v, a, 1, 100000);
        else if (strcmp(a, "--epoch") == 0)
            o->epoch = (int)parse_int(v, a, 0, 9999);
        else if (strcmp(a, "--batch-size") == 0)
            o->batch_size = (int)parse_int(v, a, 1, 1 << 20);
        else if (strcmp(a, "--frequent") == 0)
            o->frequent = (int)parse_int(v, a, 0, 1 << 30);
        else if (strcmp(a, "--num-samples") == 0)
            o->num_samples = (int)parse_int(v, a, 1, 1 << 30);
        else if (strcmp(a, "--seed") == 0)
            o->seed = (unsigned long long)parse_int(v, a, 0, 0x7fffffffL);
        else if (strcmp(a, "--lr") == 0)
            o->lr = parse_float(v, a);
        else if (strcmp(a, "--momentum") == 0)
            o->momentum = parse_float(v, a);
        else if (strcmp(a, "--wd") == 0)
            o->wd = parse_float(v, a);
        else if (strcmp(a, "--lr-schedule") == 0)
            o->sched.lr_schedule = pick(v, schedule_names, 5, a);
        else if (strcmp(a, "--lr-step") == 0)
            o->sched.step = (int)parse_int(v, a, 1, 1 << 30);
        else if (strcmp(a, "--lr-steps") == 0)
            parse_steps(v, &o->sched);
        else if (strcmp(a, "--lr-factor") == 0)
            o->sched.factor = parse_float(v, a);
        else if (strcmp(a, "--max-update") == 0)
            o->sched.max_update = (int)parse_int(v, a, 1, 1 << 30);
        else if (strcmp(a, "--final-lr") == 0)
            o->sched.final_lr = parse_float(v, a);
        else if (strcmp(a, "--pwr") == 0)
            o->sched.pwr = parse_float(v, a);
        else if (strcmp(a, "--warmup-steps") == 0)
            o->sched.warmup_steps = (int)parse_int(v, a, 0, 1 << 30);
        else if (strcmp(a, "--warmup-begin-lr") == 0)
            o->sched.warmup_begin_lr = parse_float(v, a);
        else if (strcmp(a, "--warmup-mode") == 0)
            o->sched.warmup_mode = pick(v, (const char *const[]){"linear", "constant"}, 2, a);
        else if (strcmp(a, "--data-shape") == 0)
            parse_shape(v, o->data_shape);
        else if (strcmp(a, "--resize") == 0)
            o->resize = (int)parse_int(v, a, 1, 65535);
        else if (strcmp(a, "--quality") == 0)
            o->quality = (int)parse_int(v, a, 1, 100);
        else if (strcmp(a, "--threads") == 0)
            o->threads = (int)parse_int(v, a, 1, 64);
        else if (strcmp(a, "--aug") == 0)
            o->aug = v;
        else if (strcmp(a, "--shuffle") == 0)
            o->shuffle = (int)parse_int(v, a, 0, 1);
        else if (strcmp(a, "--ctx") == 0) {
            parse_ctx(v, o);
            o->ctx_arg = v;
        } else if (strcmp(a, "--kvstore") == 0) {
            if (strcmp(v, "local") != 0 && strcmp(v, "device") != 0 && strcmp(v, "dist_sync") != 0)
                usage_error("--kvstore must be local, device or dist_sync, not", v);
            o->kvstore = v;
        } else
            usage_error("unknown option", a);
    }
}

/* Exits 1 with the library's reason when --ctx names a GPU this build or machine lacks,
 * before any data is read; says which GPU runs the work. */
static void check_ctx(const struct options *o) {
    for (int k = 0; k < o->num_ctxs; k++) {
        if (o->ctxs[k].dev_type != MXC_GPU)
            continue;
        mxc_gpu_info_t info;
        if (mxc_gpu_info(o->ctxs[k].dev_id, &info) != MXC_OK) {
            fprintf(stderr, "mxc: --ctx %s: %s\n", o->ctx_arg, mxc_last_error());
            exit(1);
        }
        fprintf(stderr, "mxc: running on gpu(%d), %s\n", o->ctxs[k].dev_id, info.name);
    }
}

/* ---- Data ----------------------------------------------------------------------------- */

/* An iterator over --data's train or test files with `p`; NULL when --data has no test
 * files. */
static mxc_data_iter *create(const struct options *o, int train, int flat,
                             const mxc_data_iter_params *p) {
    mxc_data_iter *it = NULL;
    const char *data = o->data ? o->data : "fashion-mnist";
    if (strcmp(data, "fashion-mnist") == 0) {
        CHECK(mxc_data_iter_create_fashion_mnist(NULL, train, flat, p, &it));
        return it;
    }
    if (strncmp(data, "rec:", 4) == 0) { /* TRAIN.rec[,TEST.rec] */
        char buf[4096], *save = NULL, *paths[2] = {NULL};
        snprintf(buf, sizeof buf, "%s", data + 4);
        int n = 0;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
            paths[n < 2 ? n : 1] = t, n++;
        if (n < 1 || n > 2)
            usage_error("--data rec: needs TRAIN.rec or TRAIN.rec,TEST.rec", data);
        if (!train && n == 1)
            return NULL;
        /* pixels scaled to [0, 1] as the other data; random crops and mirrors to train */
        mxc_image_record_params ip;
        mxc_image_record_params_init(&ip);
        ip.path_imgrec = paths[train ? 0 : 1];
        memcpy(ip.data_shape, o->data_shape, sizeof ip.data_shape);
        ip.resize = o->resize > 0 ? o->resize : -1;
        ip.rand_crop = ip.rand_mirror = train;
        ip.scale = 1.0f / 255;
        ip.preprocess_threads = o->threads;
        if (train && o->aug)
            parse_aug(o->aug, &ip);
        CHECK(mxc_data_iter_create_image_record(&ip, p, &it));
        return it;
    }
    bool csv = strncmp(data, "csv:", 4) == 0;
    char buf[4096], *paths[4] = {NULL};
    snprintf(buf, sizeof buf, "%s", csv ? data + 4 : data);
    int n = 0;
    for (char *t = strtok(buf, ","); t && n < 4; t = strtok(NULL, ","))
        paths[n++] = t;
    if (n != 4 && n != 2)
        usage_error("--data needs fashion-mnist or 2 or 4 comma-separated paths", data);
    if (!train && n == 2)
        return NULL;
    const char *images = paths[train ? 0 : 2], *labels = paths[train ? 1 : 3];
    if (csv) { /* one 28x28 image of 784 numbers in [0, 1] per line, one label per line */
        mxc_shape shape = flat ? (mxc_shape){1, {784}} : (mxc_shape){3, {1, 28, 28}};
        CHECK(mxc_data_iter_create_csv(images, &shape, labels, NULL, p, &it));
    } else {
        CHECK(mxc_data_iter_create_idx(images, labels, flat, p, &it));
    }
    return it;
}

/* The train (shuffled; with --num-samples N only about the first N samples, as the first
 * of ceil(total / N) parts; with `workers` > 1 this rank's part of those) or test
 * iterator, flat (N, 784) or (N, 1, 28, 28). */
static mxc_data_iter *open_data(const struct options *o, int train, int flat, int rank,
                                int workers) {
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    p.batch_size = o->batch_size;
    p.shuffle = train;
    p.seed = o->seed;
    mxc_data_iter *it = create(o, train, flat, &p);
    int64_t total = it ? mxc_data_iter_num_samples(it) : 0;
    int parts = 1;
    if (train && o->num_samples > 0 && o->num_samples < total)
        parts = (int)((total + o->num_samples - 1) / o->num_samples);
    if (train && parts * workers > 1) {
        mxc_data_iter_free(it);
        p.num_parts = parts * workers;
        p.part_index = rank;
        it = create(o, train, flat, &p);
    }
    return it;
}

/* ---- Commands ------------------------------------------------------------------------- */

/* The symbol of --network and whether its input is flat. */
static mxc_symbol *network(const char *name, int *flat) {
    mxc_symbol *net = NULL;
    *flat = 0;
    if (strcmp(name, "mlp") == 0) {
        int hidden[] = {128, 64};
        *flat = 1;
        CHECK(mxc_net_mlp(2, hidden, "relu", 10, &net));
    } else if (strcmp(name, "lenet") == 0) {
        CHECK(mxc_net_lenet(10, &net));
    } else if (strcmp(name, "resnet") == 0) { /* ResNet-18 for small images, any size */
        CHECK(mxc_net_resnet(2, 10, &net));
    } else {
        CHECK(mxc_symbol_load(name, &net));
        /* a user network: flat input when its first layer is fully connected */
        const char *json;
        CHECK(mxc_symbol_save_json(net, &json));
        *flat = strstr(json, "Convolution") == NULL;
    }
    return net;
}

static int cmd_train(struct options *o) {
    if (o->network == NULL)
        usage_error("train needs --network", NULL);
    int lenet = strcmp(o->network, "lenet") == 0, resnet = strcmp(o->network, "resnet") == 0;
    if (o->lr == 0)
        o->lr = lenet ? 0.05f : 0.1f;
    if (o->momentum < 0)
        o->momentum = lenet || resnet ? 0.9f : 0.0f;
    const char *prefix = o->prefix ? o->prefix
                         : lenet   ? "build/lenet"
                         : resnet  ? "build/resnet"
                                   : "build/mlp";
    int rank = 0, workers = 1;
    if (o->kvstore && strcmp(o->kvstore, "dist_sync") == 0) {
        /* rank and job size, for the shards: a store of its own (MPI stays up for the fit's) */
        mxc_kvstore *kv = NULL;
        CHECK(mxc_kvstore_create("dist_sync", &kv));
        CHECK(mxc_kvstore_rank(kv, &rank));
        CHECK(mxc_kvstore_num_workers(kv, &workers));
        mxc_kvstore_free(kv);
    }
    int flat;
    mxc_symbol *net = network(o->network, &flat);
    mxc_model *model = NULL;
    int begin = 0;
    /* the newest checkpoint that loads; a damaged newer one is skipped with a warning */
    if (o->resume)
        CHECK(mxc_model_load_latest(prefix, &begin, &model));
    if (model != NULL && rank == 0)
        fprintf(stderr, "mxc: resuming from %s-%04d.params\n", prefix, begin);
    else if (model == NULL)
        CHECK(mxc_model_create(net, &model));
    if (o->params && begin == 0) { /* fine-tuning: the rest is initialised */
        CHECK(mxc_model_load_params(model, o->params));
        if (rank == 0)
            fprintf(stderr, "mxc: starting from the parameters in %s\n", o->params);
    }
    mxc_data_iter *train = open_data(o, 1, flat, rank, workers),
                  *test = open_data(o, 0, flat, 0, 1);
    mxc_fit_config cfg;
    mxc_fit_config_init(&cfg);
    cfg.num_epochs = o->epochs;
    cfg.begin_epoch = begin;
    cfg.optimizer = o->sched; /* the schedule's fields; the rest below */
    cfg.optimizer.kind = pick(o->optimizer, optimizer_names, 10, "--optimizer");
    cfg.optimizer.lr = o->lr;
    cfg.optimizer.momentum = o->momentum;
    cfg.optimizer.wd = o->wd;
    cfg.seed = o->seed;
    cfg.checkpoint_prefix = prefix;
    cfg.frequent = o->frequent;
    cfg.ctx = o->ctx;
    if (o->num_ctxs > 1) {
        cfg.ctxs = o->ctxs;
        cfg.num_ctxs = o->num_ctxs;
    }
    cfg.kvstore = o->kvstore;
    cfg.optimizer_states = 1; /* <prefix>-EEEE.states beside each checkpoint, for --resume */
    mxc_fit_result r;
    CHECK(mxc_model_fit(model, train, test, &cfg, &r));
    if (rank != 0) {
        mxc_data_iter_free(train);
        mxc_data_iter_free(test);
        mxc_model_free(model);
        mxc_symbol_free(net);
        return 0;
    }
    fprintf(stderr,
            "mxc: train accuracy %.4f, test accuracy %.4f, %.0f samples/s, %.1f s\n"
            "mxc: checkpoint %s-symbol.json and %s-%04d.params\n",
            r.train_metric, r.eval_metric, r.samples_per_s, r.seconds, prefix, prefix,
            begin + o->epochs);
    if (o->json)
        printf("{\"train_accuracy\": %.6f, \"test_accuracy\": %.6f, \"samples_per_s\": %.1f, "
               "\"epochs\": %d, \"seconds\": %.3f, \"prefix\": \"%s\", "
               "\"checkpoint\": \"%s-%04d.params\"}\n",
               r.train_metric, r.eval_metric, r.samples_per_s, begin + o->epochs, r.seconds, prefix,
               prefix, begin + o->epochs);
    mxc_data_iter_free(train);
    mxc_data_iter_free(test);
    mxc_model_free(model);
    mxc_symbol_free(net);
    return 0;
}

static mxc_model *load_checkpoint(const struct options *o) {
    if (o->prefix == NULL || o->epoch < 0)
        usage_error("needs --prefix and --epoch", NULL);
    mxc_model *m = NULL;
    CHECK(mxc_model_load(o->prefix, o->epoch, &m));
    return m;
}

static int cmd_score(struct options *o) {
    mxc_model *m = load_checkpoint(o);
    const char *json;
    CHECK(mxc_symbol_save_json(mxc_model_symbol(m), &json));
    int flat = strstr(json, "Convolution") == NULL;
    mxc_data_iter *test = open_data(o, 0, flat, 0, 1);
    if (test == NULL)
        usage_error("score needs test files in --data", o->data);
    double acc;
    CHECK(mxc_model_score_on(m, o->ctx, test, "acc", &acc));
    if (o->json)
        printf("{\"test_accuracy\": %.6f, \"samples\": %lld}\n", acc,
               (long long)mxc_data_iter_num_samples(test));
    else
        printf("test accuracy %.4f on %lld samples\n", acc,
               (long long)mxc_data_iter_num_samples(test));
    mxc_data_iter_free(test);
    mxc_model_free(m);
    return 0;
}

static int cmd_predict(struct options *o) {
    if (o->input == NULL || o->output == NULL)
        usage_error("predict needs --input and --output", NULL);
    mxc_model *m = load_checkpoint(o);
    size_t n = 0;
    mxc_ndarray **arrays = NULL;
    char **names = NULL;
    CHECK(mxc_nd_load(o->input, mxc_cpu(), &n, &arrays, &names));
    if (n == 0) {
        fprintf(stderr, "mxc: %s holds no array\n", o->input);
        return 1;
    }
    mxc_data_iter_params p;
    mxc_data_iter_params_init(&p);
    mxc_shape s;
    CHECK(mxc_nd_get_shape(arrays[0], &s));
    p.batch_size = s.ndim > 0 && s.dims[0] < 100 ? s.dims[0] : 100;
    mxc_data_iter *it = NULL;
    CHECK(mxc_data_iter_create_array(arrays[0], NULL, &p, &it));
    int num_outs = 0, num_names = 0;
    mxc_ndarray **outs = NULL;
    const char *const *out_names = NULL;
    CHECK(mxc_model_predict_outputs(m, o->ctx, it, &num_outs, &outs));
    CHECK(mxc_symbol_list_outputs(mxc_model_symbol(m), &num_names, &out_names));
    CHECK(mxc_nd_save(o->output, (size_t)num_outs, outs, out_names));
    mxc_shape os;
    CHECK(mxc_nd_get_shape(outs[0], &os));
    fprintf(stderr, "mxc: wrote %lld predictions of %d output(s) to %s:", (long long)os.dims[0],
            num_outs, o->output);
    for (int k = 0; k < num_outs; k++)
        fprintf(stderr, " %s", out_names[k]);
    fprintf(stderr, "\n");
    mxc_nd_list_free((size_t)num_outs, outs, NULL);
    mxc_data_iter_free(it);
    mxc_nd_list_free(n, arrays, names);
    mxc_model_free(m);
    return 0;
}

/* PREFIX.lst from ROOT's class folders (unless it exists; always with --list, which stops
 * there), then PREFIX.rec and PREFIX.idx from the list, as MXNet's im2rec.py. */
static int cmd_im2rec(const char *prefix, const char *root, const struct options *o) {
    char lst[4096], rec[4096], idx[4096];
    snprintf(lst, sizeof lst, "%s.lst", prefix);
    snprintf(rec, sizeof rec, "%s.rec", prefix);
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    int64_t n;
    FILE *f = o->list_only ? NULL : fopen(lst, "r");
    if (f) {
        fclose(f);
        fprintf(stderr, "mxc: using the existing list %s\n", lst);
    } else {
        CHECK(mxc_im2rec_make_list(root, lst, o->shuffle, o->seed, &n));
        fprintf(stderr, "mxc: listed %lld images in %s\n", (long long)n, lst);
        if (o->list_only)
            return 0;
    }
    mxc_im2rec_params ip;
    mxc_im2rec_params_init(&ip);
    ip.resize = o->resize;
    if (o->quality > 0)
        ip.quality = o->quality;
    ip.num_threads = o->threads;
    CHECK(mxc_im2rec(lst, root, rec, idx, &ip, &n));
    fprintf(stderr, "mxc: packed %lld images into %s and %s\n", (long long)n, rec, idx);
    return 0;
}

static int cmd_info(void) {
    mxc_engine *eng;
    CHECK(mxc_engine_get_default(&eng));
    size_t nops;
    const char *const *ops;
    CHECK(mxc_op_list(&nops, &ops));
    printf("mxc %s\n", mxc_version());
    printf("features: BLAS (OpenBLAS)");
#ifdef MXC_USE_CUDA
    printf(", CUDA");
#endif
#ifdef MXC_USE_CUDNN
    printf(", cuDNN");
#endif
#ifdef MXC_USE_MPI
    printf(", MPI");
#endif
    mxc_engine_config cfg;
    CHECK(mxc_engine_get_config(eng, &cfg));
    printf("\nengine: %s, %d CPU worker(s) (MXC_CPU_WORKER_NTHREADS)\n",
           mxc_engine_type_name(mxc_engine_type_of(eng)), cfg.cpu_workers);
    int ngpu = mxc_gpu_count();
    printf("devices: cpu, %d GPU(s)\n", ngpu);
    for (int i = 0; i < ngpu; i++) {
        mxc_gpu_info_t g;
        CHECK(mxc_gpu_info(i, &g));
        printf("  gpu(%d): %s, %.1f GiB, compute capability %d.%d, %d multiprocessors\n", i, g.name,
               (double)g.total_memory / (1024.0 * 1024.0 * 1024.0), g.major, g.minor,
               g.multiprocessors);
    }
    printf("operators: %zu registered\n", nops);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return USAGE_ERROR;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    struct options o = {.epochs = 1,
                        .epoch = -1,
                        .batch_size = 100,
                        .frequent = 100,
                        .momentum = -1,
                        .optimizer = "sgd",
                        .data_shape = {3, 28, 28},
                        .threads = 4,
                        .shuffle = 1};
    /* im2rec's two positional arguments come first */
    bool im2rec = strcmp(cmd, "im2rec") == 0;
    if (im2rec && (argc < 4 || argv[2][0] == '-' || argv[3][0] == '-'))
        usage_error("im2rec needs PREFIX and ROOT", NULL);
    parse(argc, argv, im2rec ? 4 : 2, &o);
    if (im2rec)
        return cmd_im2rec(argv[2], argv[3], &o);
    if (o.ctx_arg && strcmp(cmd, "info") == 0)
        usage_error("info takes no --ctx", o.ctx_arg);
    if (o.num_ctxs > 1 && strcmp(cmd, "train") != 0)
        usage_error("only train takes a list of contexts, not", o.ctx_arg);
    if (o.kvstore && strcmp(cmd, "train") != 0)
        usage_error("only train takes --kvstore", o.kvstore);
    if (strcmp(cmd, "train") == 0 || strcmp(cmd, "score") == 0 || strcmp(cmd, "predict") == 0)
        check_ctx(&o);
    if (strcmp(cmd, "train") == 0)
        return cmd_train(&o);
    if (strcmp(cmd, "score") == 0)
        return cmd_score(&o);
    if (strcmp(cmd, "predict") == 0)
        return cmd_predict(&o);
    if (strcmp(cmd, "info") == 0)
        return cmd_info();
    usage_error("unknown command", cmd);
    return USAGE_ERROR;
}

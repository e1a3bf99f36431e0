/*
 * bench/bench_kvstore.c — allreduce throughput of the dist_sync communicator
 * (kvstore/dist_mpi.c) against a bare MPI_Allreduce of the same buffers in the same run.
 *
 *   build/bin/bench_kvstore [--json] [--quick] [--np N]
 *
 * Started outside mpirun it starts itself again under
 * `mpirun --allow-run-as-root --oversubscribe -np N` (N = 2 by default); rank 0 prints.
 * Cases:
 *   allreduce_<bytes>  one key of 4 KB .. 64 MB: the communicator driven through an
 *                      engine operation (as the store does) vs MPI_Allreduce; GB/s is
 *                      bytes / time (the key's size over the median time of one sum).
 *   allreduce_64x<bytes>  64 keys of 4 KB .. 256 KB pushed together (each its own
 *                      variable, as a model's layers): bytes of all over the time of all,
 *                      vs 64 MPI_Allreduce calls one after the other.
 *   model_<net>        every parameter of LeNet / ResNet-18, one key each, pushed
 *                      together: the communicator with fusion (default settings) and
 *                      without (MXC_KV_FUSION_BYTES=4), vs one MPI_Allreduce per key.
 * Each repetition of a measurement alternates with one of its baseline (the same machine
 * load for both), and each starts after a barrier; the communicator is opened for its
 * repetition and closed before the bare one, whose MPI calls must not run beside it.
 * A build without MPI prints one line saying so.
 */
#include "bench/bench_util.h"
#include "kvstore/kvstore_impl.h"

#include <stdbool.h>
#include <errno.h>
#include <unistd.h>

#ifndef MXC_USE_MPI
int main(void) {
    printf("bench_kvstore: built without MPI (USE_MPI=0): nothing to measure\n");
    return 0;
}
#else
#include <mpi.h>

static struct mxc__kv_comm *comm;
static mxc_engine *engine;
/* One variable per key, as the store gives each key's array its own: the sums of
 * different keys may run together (and fuse), as in training. */
#define MAX_KEYS    128
static mxc_var *key_var[MAX_KEYS];
static bool json;

struct ar_arg {
    int key;
    float *data;
    int64_t n;
};

static void ar_fn(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done) {
    struct ar_arg *a = arg;
    comm->ops->allreduce(comm, a->key, a->data, a->n, done);
}

static void die(const char *what) {
    fprintf(stderr, "bench_kvstore: %s: %s\n", what, mxc_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void open_comm(void) {
    if (mxc__kv_comm_mpi(&comm) != MXC_OK)
        die("mxc__kv_comm_mpi");
}

static void close_comm(void) {
    comm->ops->free(comm);
    comm = NULL;
}

/* The communicator's time for one sum of every key (pushed together, then waited for). */
static double time_ours(int num, float **bufs, const int64_t *n) {
    if (comm->ops->barrier(comm) != MXC_OK)
        die("barrier");
    uint64_t t0 = bench_now_ns();
    for (int k = 0; k < num; k++) {
        struct ar_arg *a = malloc(sizeof *a);
        *a = (struct ar_arg){k, bufs[k], n[k]};
        mxc_engine_op_desc d = {0};
        d.async_fn = ar_fn;
        d.arg = a;
        d.arg_free = free;
        d.mutable_vars = &key_var[k];
        d.num_mutable_vars = 1;
        d.name = "kv_allreduce";
        if (mxc_engine_push(engine, &d) != MXC_OK)
            die("push");
    }
    if (mxc_engine_wait_all(engine) != MXC_OK)
        die("allreduce");
    return (double)(bench_now_ns() - t0) * 1e-9;
}

/* MPI_Allreduce, one per key, in place. */
static double time_bare(int num, float **bufs, const int64_t *n) {
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t0 = bench_now_ns();
    for (int k = 0; k < num; k++)
        MPI_Allreduce(MPI_IN_PLACE, bufs[k], (int)n[k], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return (double)(bench_now_ns() - t0) * 1e-9;
}

/* The communicator's time for one sum of every key: opened afresh (a bare MPI call must
 * not run beside its thread), warmed up by one untimed sum, then timed. */
static double time_ours_fresh(int num, float **bufs, const int64_t *n) {
    open_comm();
    time_ours(num, bufs, n);
    double t = time_ours(num, bufs, n);
    close_comm();
    return t;
}

/* Medians of `reps` timings of the communicator and of the bare baseline, alternated
 * repetition by repetition so that both see the same machine; with `unfused`, also of
 * the communicator without fusion (MXC_KV_FUSION_BYTES=4). */
static void measure(int reps, int num, float **bufs, const int64_t *n, double *ours, double *bare,
                    double *unfused) {
    double t[3][64];
    for (int r = 0; r < reps; r++) {
        t[0][r] = time_ours_fresh(num, bufs, n);
        time_bare(num, bufs, n); /* warm-up, as the communicator's */
        t[1][r] = time_bare(num, bufs, n);
        if (unfused) {
            setenv("MXC_KV_FUSION_BYTES", "4", 1);
            t[2][r] = time_ours_fresh(num, bufs, n);
            unsetenv("MXC_KV_FUSION_BYTES");
        }
    }
    *ours = bench_median(t[0], reps);
    *bare = bench_median(t[1], reps);
    if (unfused)
        *unfused = bench_median(t[2], reps);
}

static void report(const char *kase, const char *metric, double ours, double base,
                   const char *base_name, const char *extra_key, double extra) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != 0)
        return;
    bool gbps = strcmp(metric, "gbps") == 0;
    if (json) {
        bench_json j;
        bench_json_begin(&j, "kvstore", kase);
        bench_json_str(&j, "system", "mxc-dist_mpi");
        bench_json_num(&j, "ranks", size);
        bench_json_num(&j, metric, ours);
        bench_json_str(&j, "baseline", base_name);
        bench_json_num(&j, gbps ? "baseline_gbps" : "baseline_ms", base);
        bench_json_num(&j, "ratio_vs_baseline", gbps ? ours / base : base / ours);
        if (extra_key)
            bench_json_num(&j, extra_key, extra);
        bench_json_print(&j, stdout);
    } else if (gbps) {
        printf("%-22s mxc %8.3f GB/s  %s %8.3f GB/s  ratio %.3f\n", kase, ours, base_name, base,
               ours / base);
    } else {
        printf("%-22s mxc %8.3f ms    %s %8.3f ms    speed-up %.2f", kase, ours, base_name, base,
               base / ours);
        if (extra_key)
            printf("  (%s %.3f ms)", extra_key, extra);
        printf("\n");
    }
    fflush(stdout);
}

/* Keys of one size pushed together in the streamed cases. */
#define STREAM_KEYS 64

/* LeNet's parameters (mxc's models: conv 20 5x5, conv 50 5x5, fc 500, fc 10) */
static const int64_t lenet[] = {500, 20, 25000, 50, 400000, 500, 5000, 10};

/* ResNet-18's (ImageNet): convolutions, batch-norm scales and shifts, the classifier */
static int resnet18(int64_t *n) {
    int k = 0;
    n[k++] = 64 * 3 * 49;
    n[k++] = 64;
    n[k++] = 64;
    int in = 64;
    for (int stage = 0, ch = 64; stage < 4; stage++, ch *= 2) {
        for (int block = 0; block < 2; block++) {
            n[k++] = (int64_t)ch * in * 9;
            n[k++] = ch;
            n[k++] = ch;
            n[k++] = (int64_t)ch * ch * 9;
            n[k++] = ch;
            n[k++] = ch;
            if (in != ch) {
                n[k++] = (int64_t)ch * in;
                n[k++] = ch;
                n[k++] = ch;
            }
            in = ch;
        }
    }
    n[k++] = 1000 * 512;
    n[k++] = 1000;
    return k;
}

static float **alloc_bufs(int num, const int64_t *n) {
    float **b = malloc((size_t)num * sizeof *b);
    for (int k = 0; k < num; k++) {
        b[k] = malloc((size_t)n[k] * sizeof(float));
        for (int64_t i = 0; i < n[k]; i++)
            b[k][i] = (float)(i % 7) * 1e-3f; /* stays small after repeated sums */
    }
    return b;
}

static void free_bufs(int num, float **b) {
    for (int k = 0; k < num; k++)
        free(b[k]);
    free(b);
}

static void model_case(const char *name, int num, const int64_t *n, int reps) {
    float **b = alloc_bufs(num, n);
    double fused, bare, unfused;
    measure(reps, num, b, n, &fused, &bare, &unfused);
    char kase[64];
    snprintf(kase, sizeof kase, "model_%s_%dkeys", name, num);
    report(kase, "ms", fused * 1e3, bare * 1e3, "MPI_Allreduce_per_key", "mxc_unfused_ms",
           unfused * 1e3);
    free_bufs(num, b);
}

static int rank_main(int argc, char **argv) {
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        json = json || strcmp(argv[i], "--json") == 0;
        quick = quick || strcmp(argv[i], "--quick") == 0;
    }
    open_comm(); /* starts MPI */
    /* one CPU worker runs the operations in push order, so every rank hands its sums to
     * the communicator in the same order (the store numbers them for the same end) */
    mxc_engine_config ec = {.cpu_workers = 1, .cpu_priority_workers = 1};
    if (mxc_engine_create(MXC_ENGINE_POOLED, &ec, &engine) != MXC_OK)
        die("engine");
    for (int k = 0; k < MAX_KEYS; k++)
        if (mxc_engine_new_var(engine, &key_var[k]) != MXC_OK)
            die("engine var");
    close_comm();
    int64_t max_bytes = quick ? (16 << 20) : (64 << 20);
    for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
        int reps = bytes >= (16 << 20) ? (quick ? 3 : 7) : (quick ? 7 : 21);
        /* one key alone (the latency of a sum), then for small sizes a stream of keys
         * pushed together as a model's layers push them (what fusion is for) */
        for (int num = 1; num <= (bytes <= (256 << 10) ? STREAM_KEYS : 1); num *= STREAM_KEYS) {
            int64_t n[STREAM_KEYS];
            for (int k = 0; k < num; k++)
                n[k] = bytes / 4;
            float **b = alloc_bufs(num, n);
            double ours, bare;
            measure(reps, num, b, n, &ours, &bare, NULL);
            char kase[64];
            if (num == 1)
                snprintf(kase, sizeof kase, "allreduce_%lldKB", (long long)(bytes >> 10));
            else
                snprintf(kase, sizeof kase, "allreduce_%dx%lldKB", num, (long long)(bytes >> 10));
            double total = (double)bytes * num;
            report(kase, "gbps", total / ours * 1e-9, total / bare * 1e-9, "MPI_Allreduce", NULL,
                   0);
            free_bufs(num, b);
        }
    }
    int reps = quick ? 5 : 15;
    model_case("lenet", (int)(sizeof lenet / sizeof lenet[0]), lenet, reps);
    int64_t rn[128];
    model_case("resnet18", resnet18(rn), rn, quick ? 3 : 7);
    for (int k = 0; k < MAX_KEYS; k++)
        mxc_engine_delete_var(engine, key_var[k], NULL, NULL);
    mxc_engine_destroy(engine);
    return 0;
}

int main(int argc, char **argv) {
    if (getenv("OMPI_COMM_WORLD_SIZE"))
        return rank_main(argc, argv);
    /* outside mpirun: start this binary again under it */
    const char *np = "2";
    char *args[64];
    int k = 0;
    args[k++] = "mpirun";
    args[k++] = "--allow-run-as-root";
    args[k++] = "--oversubscribe";
    args[k++] = "-np";
    int np_slot = k;
    args[k++] = (char *)np;
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        perror("bench_kvstore: /proc/self/exe");
        return 1;
    }
    self[len] = '\0';
    args[k++] = self;
    for (int i = 1; i < argc && k < 62; i++) {
        if (strcmp(argv[i], "--np") == 0 && i + 1 < argc) {
            args[np_slot] = argv[++i];
            continue;
        }
        args[k++] = argv[i];
    }
    args[k] = NULL;
    execvp("mpirun", args);
    fprintf(stderr, "bench_kvstore: cannot run mpirun (install openmpi-bin): %s\n",
            strerror(errno));
    return 1;
}
#endif

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
 *   allreduce_<N>x<bytes>  N keys of one size pushed together (each its own variable,
 *                      as a model's layers): 64 keys up to 1 MB, 64 MB of keys above:
 *                      bytes of all over the time of all (the store's throughput), vs N
 *                      MPI_Allreduce calls one after the other.
 *   model_<net>        every parameter of LeNet / ResNet-18, one key each, pushed
 *                      together: the communicator with fusion (default settings) and
 *                      without (MXC_KV_FUSION_BYTES=4), vs one MPI_Allreduce per key.
 * Each repetition of a measurement alternates with one of its baseline (the same machine
 * load for both), and each starts after a barrier; the communicator is opened for its
 * repetition and closed before the bare one, whose MPI calls must not run beside it.
 * Speeds are of median times; ratios are medians of the repetitions' own ratios (both
 * timed back to back), which a machine whose speed drifts during a run disturbs less.
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
#define MAX_KEYS 128
static mxc_var *key_var[MAX_KEYS];
static bool json;

struct ar_arg {
    int key;
    float *data;
    int64_t n;
    bool more;
};

static void ar_fn(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done) {
    struct ar_arg *a = arg;
    comm->ops->allreduce(comm, a->key, a->data, a->n, a->more, done);
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

/* Pushes a sum of every key and waits for them. */
static void sum_keys(int num, float **bufs, const int64_t *n) {
    for (int k = 0; k < num; k++) {
        struct ar_arg *a = malloc(sizeof *a);
        /* as the store issues them: one push call of every key (each but the last says
         * more follow), an asynchronous operation run by the thread that makes it ready */
        *a = (struct ar_arg){k, bufs[k], n[k], k + 1 < num};
        mxc_engine_op_desc d = {0};
        d.async_fn = ar_fn;
        d.arg = a;
        d.arg_free = free;
        d.mutable_vars = &key_var[k];
        d.num_mutable_vars = 1;
        d.prop = MXC_PROP_ASYNC;
        d.name = "kv_allreduce";
        if (mxc_engine_push(engine, &d) != MXC_OK)
            die("push");
    }
    if (mxc_engine_wait_all(engine) != MXC_OK)
        die("allreduce");
}

/* The communicator's time for one sum of every key (pushed together, then waited for),
 * the mean of `times` sums in a row. */
static double time_ours(int num, float **bufs, const int64_t *n, int times) {
    if (comm->ops->barrier(comm) != MXC_OK)
        die("barrier");
    uint64_t t0 = bench_now_ns();
    for (int t = 0; t < times; t++)
        sum_keys(num, bufs, n);
    return (double)(bench_now_ns() - t0) * 1e-9 / times;
}

/* MPI_Allreduce, one per key, in place; as time_ours. */
static double time_bare(int num, float **bufs, const int64_t *n, int times) {
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t0 = bench_now_ns();
    for (int t = 0; t < times; t++)
        for (int k = 0; k < num; k++)
            MPI_Allreduce(MPI_IN_PLACE, bufs[k], (int)n[k], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return (double)(bench_now_ns() - t0) * 1e-9 / times;
}

/* The bound of any store that, like this one, adds in its own fixed order so that every
 * process holds the same bits: the same ring (reduce-scatter, then allgather) run on the
 * calling thread with blocking MPI_Sendrecv, one key after another: no engine operation,
 * no communication thread, no agreement round, no fusion. */
static float *ring_tmp;
static int64_t ring_cap;

static void ring_sum(float *buf, int64_t n) {
    int p = 1, r = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    if (n / p + 1 > ring_cap) {
        free(ring_tmp);
        ring_cap = n / p + 1;
        ring_tmp = calloc((size_t)ring_cap, sizeof(float));
        if (!ring_tmp)
            die("calloc");
    }
#define LO(b)    ((int64_t)(b)*n / p)
#define LEN(b)   ((int)(LO((b) + 1) - LO(b)))
    int next = (r + 1) % p, prev = (r + p - 1) % p;
    for (int s = 0; s < p - 1; s++) {
        int sb = (r - s + p) % p, rb = (r - s - 1 + 2 * p) % p;
        MPI_Sendrecv(buf + LO(sb), LEN(sb), MPI_FLOAT, next, 5, ring_tmp, LEN(rb), MPI_FLOAT, prev,
                     5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        float *dst = buf + LO(rb);
        for (int i = 0; i < LEN(rb); i++)
            dst[i] += ring_tmp[i];
    }
    for (int s = 0; s < p - 1; s++) {
        int sb = (r + 1 - s + p) % p, rb = (r - s + p) % p;
        MPI_Sendrecv(buf + LO(sb), LEN(sb), MPI_FLOAT, next, 6, buf + LO(rb), LEN(rb), MPI_FLOAT,
                     prev, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
#undef LO
#undef LEN
}

static double time_ring(int num, float **bufs, const int64_t *n, int times) {
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t0 = bench_now_ns();
    for (int t = 0; t < times; t++)
        for (int k = 0; k < num; k++)
            ring_sum(bufs[k], n[k]);
    return (double)(bench_now_ns() - t0) * 1e-9 / times;
}

/* The communicator's time for one sum of every key: opened afresh (a bare MPI call must
 * not run beside its thread), warmed up by one untimed sum, then timed. */
static double time_ours_fresh(int num, float **bufs, const int64_t *n, int times) {
    open_comm();
    time_ours(num, bufs, n, 1);
    double t = time_ours(num, bufs, n, times);
    close_comm();
    return t;
}

/* Medians of timings of one sum of every key, and of the per-repetition ratios of the
 * bare baseline's time over the communicator's and over the ring bound's. */
struct timings {
    double ours, bare, ring, unfused;
    double ratio, ring_ratio;
};

/* `reps` timings of the communicator, the bare baseline and the ring bound (each the mean
 * of `times` sums in a row), alternated repetition by repetition so that all see the same
 * machine (each warmed up as the communicator is); with `unfused`, also of the
 * communicator without fusion (MXC_KV_FUSION_BYTES=4). */
static struct timings measure(int reps, int num, float **bufs, const int64_t *n, int times,
                              bool unfused) {
    double t[4][64];
    for (int r = 0; r < reps; r++) {
        t[0][r] = time_ours_fresh(num, bufs, n, times);
        time_bare(num, bufs, n, 1);
        t[1][r] = time_bare(num, bufs, n, times);
        time_ring(num, bufs, n, 1);
        t[2][r] = time_ring(num, bufs, n, times);
        if (unfused) {
            setenv("MXC_KV_FUSION_BYTES", "4", 1);
            t[3][r] = time_ours_fresh(num, bufs, n, times);
            unsetenv("MXC_KV_FUSION_BYTES");
        }
    }
    double ratio[64], ring_ratio[64];
    for (int r = 0; r < reps; r++) {
        ratio[r] = t[1][r] / t[0][r];
        ring_ratio[r] = t[1][r] / t[2][r];
    }
    struct timings m = {bench_median(t[0], reps),  bench_median(t[1], reps),
                        bench_median(t[2], reps),  0,
                        bench_median(ratio, reps), bench_median(ring_ratio, reps)};
    if (unfused)
        m.unfused = bench_median(t[3], reps);
    return m;
}

/* Prints a case: with `bytes` > 0 as GB/s of that many bytes per sum, else as times in
 * ms (the model cases, with the unfused communicator beside). Ratios are the
 * communicator's and the ring bound's speed over the bare baseline's. */
static void report(const char *kase, double bytes, struct timings m, bool unfused,
                   const char *base_name) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != 0)
        return;
    bool gbps = bytes > 0;
    double scale = gbps ? 1e-9 * bytes : 1e3; /* GB/s = scale / t, ms = scale * t */
    double ours = gbps ? scale / m.ours : scale * m.ours;
    double base = gbps ? scale / m.bare : scale * m.bare;
    double ring = gbps ? scale / m.ring : scale * m.ring;
    const char *unit = gbps ? "GB/s" : "ms";
    if (json) {
        bench_json j;
        bench_json_begin(&j, "kvstore", kase);
        bench_json_str(&j, "system", "mxc-dist_mpi");
        bench_json_num(&j, "ranks", size);
        bench_json_num(&j, gbps ? "gbps" : "ms", ours);
        bench_json_str(&j, "baseline", base_name);
        bench_json_num(&j, gbps ? "baseline_gbps" : "baseline_ms", base);
        bench_json_num(&j, "ratio_vs_baseline", m.ratio);
        bench_json_num(&j, gbps ? "ring_bound_gbps" : "ring_bound_ms", ring);
        bench_json_num(&j, "ring_bound_ratio_vs_baseline", m.ring_ratio);
        if (unfused)
            bench_json_num(&j, "mxc_unfused_ms", scale * m.unfused);
        bench_json_print(&j, stdout);
    } else {
        printf("%-22s mxc %8.3f %-4s  %s %8.3f %-4s  ratio %.2f  (ring bound %.3f %s, %.2f)", kase,
               ours, unit, base_name, base, unit, m.ratio, ring, unit, m.ring_ratio);
        if (unfused)
            printf("  (mxc unfused %.3f ms)", scale * m.unfused);
        printf("\n");
    }
    fflush(stdout);
}

/* Keys of one size pushed together in the streamed cases. */
#define STREAM_KEYS  64
/* ... and at most this many bytes of them. */
#define STREAM_BYTES (64 << 20)

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
    struct timings m = measure(reps, num, b, n, 1, true);
    char kase[64];
    snprintf(kase, sizeof kase, "model_%s_%dkeys", name, num);
    report(kase, 0, m, true, "MPI_Allreduce_per_key");
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
        /* one key alone (the latency of a sum), then a stream of keys of that size pushed
         * together as a model's layers push them (the store's throughput, and what fusion
         * is for): 64 keys, fewer above 1 MB (64 MB of keys at most) */
        int stream = (int)((int64_t)STREAM_BYTES / bytes);
        stream = stream > STREAM_KEYS ? STREAM_KEYS : stream;
        const int counts[2] = {1, stream};
        for (int c = 0; c < (stream > 1 ? 2 : 1); c++) {
            const int num = counts[c];
            int64_t n[STREAM_KEYS];
            for (int k = 0; k < num; k++)
                n[k] = bytes / 4;
            float **b = alloc_bufs(num, n);
            /* a lone key's sum is the mean of sums one after the other (each waited for
             * before the next is pushed), about 1 MB in all: a few microseconds each are
             * too short to time alone */
            int64_t times = num > 1 ? 1 : (1 << 20) / bytes;
            times = times < 1 ? 1 : times > 64 ? 64 : times;
            struct timings m = measure(reps, num, b, n, (int)times, false);
            char kase[64];
            if (num == 1)
                snprintf(kase, sizeof kase, "allreduce_%lldKB", (long long)(bytes >> 10));
            else
                snprintf(kase, sizeof kase, "allreduce_%dx%lldKB", num, (long long)(bytes >> 10));
            report(kase, (double)bytes * num, m, false, "MPI_Allreduce");
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

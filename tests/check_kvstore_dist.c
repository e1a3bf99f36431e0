/*
 * tests/check_kvstore_dist.c — the MPI communicator of dist_sync stores
 * (kvstore/dist_mpi.c, kvstore/kvstore_impl.h).
 *
 * Started by `make test` (outside mpirun) the binary is a Check suite whose tests start
 * itself again under `mpirun --allow-run-as-root --oversubscribe -np 2` and `-np 3` and
 * check that every rank passed, and that a rank killed mid-allreduce stops the job within
 * the bound instead of hanging. Under mpirun (OMPI_COMM_WORLD_SIZE set) each rank runs
 * the rank cases (Check's no-fork mode: MPI and fork do not mix) through the internal
 * communicator and an engine: sums of many sizes, bitwise identity across ranks, fusion,
 * check_keys, broadcast, barrier; and a dist_sync store through the public API (init
 * takes rank 0's values, pushes sum across ranks, optimizer updates leave identical
 * weights everywhere). A build without MPI checks the refusal.
 */
#include "common/common.h"
#include "kvstore/kvstore_impl.h"
#include "mxc/kvstore.h"
#include "mxc/model.h"
#include "tests/util/test_util.h"
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- Outside mpirun ---------------------------------------------------------------- */

#ifndef MXC_USE_MPI
START_TEST(test_refused_without_mpi) {
    struct mxc__kv_comm *c = (struct mxc__kv_comm *)1;
    CK_ERR(MXC_ENOTSUP, mxc__kv_comm_mpi(&c));
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "USE_MPI=1"));
}
END_TEST
#else
START_TEST(test_refused_outside_mpirun) {
    unsetenv("MXC_KV_ALLOW_SINGLETON");
    struct mxc__kv_comm *c = (struct mxc__kv_comm *)1;
    CK_ERR(MXC_EDEVICE, mxc__kv_comm_mpi(&c));
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(mxc_last_error(), "mpirun -np N"), "%s", mxc_last_error());
}
END_TEST

/* Runs this binary under mpirun with `np` ranks (0: alone) and `mode` (with --enable-recovery when
 * `recovery`: mpirun then lets the other ranks run on when one dies); returns its exit
 * status (-1: killed after `limit_s`), the seconds it took in *took and what it printed
 * in *output (free it). */
static int run_mpirun(int np, const char *mode, const char *timeout_s, bool recovery,
                      double limit_s, double *took, char **output) {
    ck_assert_msg(np == 0 || mxct_on_path("mpirun"),
                  "mpirun is not on PATH: install openmpi-bin "
                  "(apt-get install openmpi-bin, or bash scripts/deps.sh)");
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert(len > 0);
    self[len] = '\0';
    char nps[16], mode_env[64], timeout_env[64], label[128];
    snprintf(nps, sizeof nps, "%d", np);
    snprintf(mode_env, sizeof mode_env, "MXC_KVD_MODE=%s", mode);
    snprintf(timeout_env, sizeof timeout_env, "MXC_KV_TIMEOUT_S=%s", timeout_s);
    snprintf(label, sizeof label, "%s%s (%s%s)", np ? "mpirun -np " : "alone", np ? nps : "", mode,
             recovery ? ", --enable-recovery" : "");
    const char *const env[] = {mode_env, timeout_env, NULL};
    const char *argv[10];
    int n = 0;
    if (np > 0) { /* else the binary alone, outside mpirun */
        argv[n++] = "mpirun";
        argv[n++] = "--allow-run-as-root";
        argv[n++] = "--oversubscribe";
        if (recovery)
            argv[n++] = "--enable-recovery";
        argv[n++] = "-np";
        argv[n++] = nps;
    }
    argv[n++] = self;
    argv[n] = NULL;
    return mxct_run(label, argv, env, limit_s, took, output);
}

/* Under ThreadSanitizer the ranks run with tests/tsan_mpi.supp, which names OpenMPI's
 * own findings (it is not instrumented); without the file (a run from elsewhere than the
 * repository root) the mpirun cases are skipped with a line saying so. */
static bool skip_under_tsan(void) {
    if (!mxct_under_tsan())
        return false;
    char *supp = realpath("tests/tsan_mpi.supp", NULL);
    if (!supp) {
        printf("check_kvstore_dist: mpirun cases skipped under ThreadSanitizer: "
               "tests/tsan_mpi.supp not found (run from the repository root)\n");
        return true;
    }
    const char *old = getenv("TSAN_OPTIONS");
    char opts[2048];
    snprintf(opts, sizeof opts, "%s%ssuppressions=%s", old ? old : "", old && old[0] ? ":" : "",
             supp);
    setenv("TSAN_OPTIONS", opts, 1);
    free(supp);
    return false;
}

static void run_ranks(int np) {
    if (skip_under_tsan())
        return;
    double took = 0;
    char *out = NULL;
    int status = run_mpirun(np, "cases", "20", false, mxct_timeout(60), &took, &out);
    ck_assert_msg(status == 0, "mpirun -np %d: exit status %d after %.1f s (-1: hung, killed)", np,
                  status, took);
    for (int r = 0; r < np; r++) {
        char line[64];
        snprintf(line, sizeof line, "rank %d of %d: ", r, np);
        const char *at = strstr(out, line);
        int passed = -1, run = -2;
        if (at)
            sscanf(at + strlen(line), "%d of %d cases passed", &passed, &run);
        ck_assert_msg(passed == run && run > 0, "rank %d of %d did not pass every case", r, np);
    }
    free(out);
}

/* MXC_KV_ALLOW_SINGLETON=1 outside mpirun: a job of one process (another process, so that
 * this one's MPI stays unstarted). */
START_TEST(test_singleton_allowed) {
    if (skip_under_tsan())
        return;
    setenv("MXC_KV_ALLOW_SINGLETON", "1", 1);
    double took = 0;
    char *out = NULL;
    int status = run_mpirun(0, "singleton", "20", false, mxct_timeout(60), &took, &out);
    unsetenv("MXC_KV_ALLOW_SINGLETON");
    ck_assert_msg(status == 0 && strstr(out, "singleton: rank 0 of 1: ok"), "exit %d", status);
    free(out);
}
END_TEST

START_TEST(test_mpirun_np2) { run_ranks(2); }
END_TEST

START_TEST(test_mpirun_np3) { run_ranks(3); }
END_TEST

/* Rank 1 is killed (SIGKILL) in the middle of an allreduce. By default OpenMPI's mpirun
 * then ends the whole job at once (it kills the other ranks), so what holds is: no hang,
 * a non-zero exit, quickly. */
START_TEST(test_killed_rank_aborts_job) {
    if (skip_under_tsan())
        return;
    double took = 0;
    char *out = NULL;
    int status = run_mpirun(2, "kill", "3", false, mxct_timeout(40), &took, &out);
    ck_assert_msg(status != -1, "the job hung after a rank died (killed after %.1f s)", took);
    ck_assert_msg(status != 0, "the job succeeded although a rank died");
    ck_assert_msg(took < mxct_timeout(30), "took %.1f s", took);
    free(out);
}
END_TEST

/* The same with --enable-recovery, where mpirun lets the survivor run on: its allreduce
 * must fail with MXC_EDEVICE and the timeout's message within MXC_KV_TIMEOUT_S (3 s). */
START_TEST(test_killed_rank_survivor_fails) {
    if (skip_under_tsan())
        return;
    double took = 0;
    char *out = NULL;
    int status = run_mpirun(2, "kill", "3", true, mxct_timeout(40), &took, &out);
    ck_assert_msg(status != -1, "the survivor hung after a rank died (killed after %.1f s)", took);
    ck_assert_msg(strstr(out, "rank 0: survivor: MXC_EDEVICE") &&
                      strstr(out, "no answer from the other processes within 3 s"),
                  "the survivor did not report the failure");
    ck_assert_msg(strstr(out, "rank 0: barrier after: MXC_EDEVICE in 0.0 s"),
                  "a barrier after the failure did not fail at once");
    ck_assert_msg(took < mxct_timeout(30), "took %.1f s", took);
    free(out);
}
END_TEST
#endif

static Suite *launcher_suite(void) {
    Suite *s = suite_create("kvstore_dist");
    TCase *tc = tcase_create("launch");
    tcase_set_timeout(tc, mxct_timeout(120));
#ifndef MXC_USE_MPI
    tcase_add_test(tc, test_refused_without_mpi);
#else
    tcase_add_test(tc, test_refused_outside_mpirun);
    tcase_add_test(tc, test_singleton_allowed);
    tcase_add_test(tc, test_mpirun_np2);
    tcase_add_test(tc, test_mpirun_np3);
    tcase_add_test(tc, test_killed_rank_aborts_job);
    tcase_add_test(tc, test_killed_rank_survivor_fails);
#endif
    suite_add_tcase(s, tc);
    return s;
}

/* ---- Inside mpirun: the rank cases ------------------------------------------------- */

#ifdef MXC_USE_MPI
static struct mxc__kv_comm *comm;
static mxc_engine *engine;
static mxc_var *order; /* every allreduce writes it: they run in push order */

struct ar_arg {
    int key;
    float *data;
    int64_t n;
    bool more;
};

/* Sums completed off the communication thread (by the worker that issued them). */
static atomic_int off_thread;

static void ar_fn(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done) {
    struct ar_arg *a = arg;
    comm->ops->allreduce(comm, a->key, a->data, a->n, a->more, done);
}

/* Runs on the thread that completes the operation. */
static void ar_free(void *arg) {
    struct ar_arg *a = arg;
    char name[17] = "";
    prctl(PR_GET_NAME, name, 0, 0, 0);
    if (strcmp(name, "mxc-kv-mpi") != 0)
        atomic_fetch_add(&off_thread, 1);
    free(a);
}

/* Pushes an engine operation calling allreduce (in push order, on the CPU worker),
 * without waiting; `more`: another follows at once. */
static int push_allreduce_rc(int key, float *data, int64_t n, bool more) {
    struct ar_arg *a = calloc(1, sizeof *a);
    *a = (struct ar_arg){key, data, n, more};
    mxc_engine_op_desc d = {0};
    d.async_fn = ar_fn;
    d.arg = a;
    d.arg_free = ar_free;
    d.mutable_vars = &order;
    d.num_mutable_vars = 1;
    d.name = "kv_allreduce";
    return mxc_engine_push(engine, &d);
}

static void push_allreduce(int key, float *data, int64_t n, bool more) {
    CK_OK(push_allreduce_rc(key, data, n, more));
}

static uint64_t hash_floats(const float *x, int64_t n) {
    uint64_t h = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], 4);
        h = mxct_mix64(h ^ b ^ ((uint64_t)i << 32));
    }
    return h;
}

/* True when `h` is the same on every rank (the ranks' hashes summed exactly: one
 * 16-bit piece per float, one rank per slot). */
static bool same_everywhere(uint64_t h) {
    int size = comm->size;
    float *v = calloc((size_t)size * 4, sizeof(float));
    for (int j = 0; j < 4; j++)
        v[comm->rank * 4 + j] = (float)((h >> (16 * j)) & 0xffff);
    push_allreduce(-1, v, size * 4, false);
    CK_OK(mxc_engine_wait_all(engine));
    bool same = true;
    for (int r = 0; r < size; r++)
        for (int j = 0; j < 4; j++)
            same = same && v[r * 4 + j] == (float)((h >> (16 * j)) & 0xffff);
    free(v);
    return same;
}

/* Values whose sums are exact in float whatever the order: multiples of 1/8, small. */
static float exact_value(int rank, int key, int64_t i) {
    return (float)((i * 7 + rank * 13 + key * 5) % 1024 - 512) * 0.125f;
}

static float exact_sum(int size, int key, int64_t i) {
    double s = 0;
    for (int r = 0; r < size; r++)
        s += exact_value(r, key, i);
    return (float)s;
}

static const int64_t sizes[] = {1,    2,     3,     7,      100,     1000,
                                4097, 16384, 65537, 300001, 1 << 20, (3 << 20) + 5};
enum { NUM_SIZES = sizeof sizes / sizeof sizes[0] };

START_TEST(test_sums_exact) {
    float *d[NUM_SIZES];
    for (int k = 0; k < NUM_SIZES; k++) {
        d[k] = malloc((size_t)sizes[k] * sizeof(float));
        for (int64_t i = 0; i < sizes[k]; i++)
            d[k][i] = exact_value(comm->rank, k, i);
        push_allreduce(k, d[k], sizes[k], k + 1 < NUM_SIZES);
    }
    CK_OK(mxc_engine_wait_all(engine));
    for (int k = 0; k < NUM_SIZES; k++) {
        /* one assertion per key: Check records every assertion (a system call) */
        int64_t i = 0;
        while (i < sizes[k] && d[k][i] == exact_sum(comm->size, k, i))
            i++;
        ck_assert_msg(i == sizes[k], "key %d (%lld floats) [%lld]: %g, expected %g", k,
                      (long long)sizes[k], (long long)i, d[k][i], exact_sum(comm->size, k, i));
        ck_assert(same_everywhere(hash_floats(d[k], sizes[k])));
        free(d[k]);
    }
}
END_TEST

static float random_value(struct mxct_rng *g) {
    return (float)((double)(mxct_rng_next(g) >> 11) * 0x1.0p-53 * 2.0 - 1.0) * 3.14159f;
}

START_TEST(test_sums_bitwise_identical) {
    for (int k = 0; k < NUM_SIZES; k++) {
        int64_t n = sizes[k];
        float *d = malloc((size_t)n * sizeof(float));
        struct mxct_rng g;
        mxct_rng_seed(&g, 1000 + (uint64_t)comm->rank * 77 + (uint64_t)k);
        for (int64_t i = 0; i < n; i++)
            d[i] = random_value(&g);
        push_allreduce(k, d, n, false);
        CK_OK(mxc_engine_wait_all(engine));
        ck_assert_msg(same_everywhere(hash_floats(d, n)),
                      "key of %lld floats differs between "
                      "ranks",
                      (long long)n);
        /* the serial sum, generated here for every rank's values */
        struct mxct_rng gs[8];
        for (int r = 0; r < comm->size; r++)
            mxct_rng_seed(&gs[r], 1000 + (uint64_t)r * 77 + (uint64_t)k);
        int64_t bad = -1;
        double serial = 0;
        for (int64_t i = 0; i < n && bad < 0; i++) {
            double s = 0;
            for (int r = 0; r < comm->size; r++)
                s += random_value(&gs[r]);
            if (!(d[i] - s < 1e-5 && s - d[i] < 1e-5)) {
                bad = i;
                serial = s;
            }
        }
        ck_assert_msg(bad < 0, "[%lld] of %lld: %.9g, serial %.9g", (long long)bad, (long long)n,
                      bad < 0 ? 0.0 : d[bad], serial);
        free(d);
    }
}
END_TEST

/* Many small keys pushed at once (fused into buckets) give what one at a time does. */
START_TEST(test_fused_equals_one_by_one) {
    enum { KEYS = 300 };
    struct mxct_rng g;
    mxct_rng_seed(&g, 42); /* the same sizes on every rank */
    int64_t n[KEYS];
    float *a[KEYS], *b[KEYS];
    for (int k = 0; k < KEYS; k++) {
        n[k] = 1 + mxct_rng_below(&g, k % 50 == 0 ? 40000 : 3000);
        a[k] = malloc((size_t)n[k] * sizeof(float));
        b[k] = malloc((size_t)n[k] * sizeof(float));
        for (int64_t i = 0; i < n[k]; i++)
            a[k][i] = b[k][i] = exact_value(comm->rank, k, i);
    }
    for (int k = 0; k < KEYS; k++)
        push_allreduce(k, a[k], n[k], k + 1 < KEYS);
    CK_OK(mxc_engine_wait_all(engine));
    for (int k = 0; k < KEYS; k++) {
        push_allreduce(k, b[k], n[k], false);
        CK_OK(mxc_engine_wait_all(engine));
    }
    uint64_t h = 0;
    for (int k = 0; k < KEYS; k++) {
        ck_assert_msg(memcmp(a[k], b[k], (size_t)n[k] * sizeof(float)) == 0, "key %d differs", k);
        int64_t i = 0;
        while (i < n[k] && a[k][i] == exact_sum(comm->size, k, i))
            i++;
        ck_assert_msg(i == n[k], "key %d [%lld] is not the exact sum", k, (long long)i);
        h = mxct_mix64(h ^ hash_floats(a[k], n[k]));
        free(a[k]);
        free(b[k]);
    }
    ck_assert(same_everywhere(h));
}
END_TEST

/* Keys that reach the ranks at different paces, so that a round meets different counts
 * on different ranks (each offers the bucket its own count cuts; the sum covers the
 * prefix the least count cuts), small and large mixed, with buckets both below and above
 * what a round carries (the larger ones by the ring): the sums are the exact ones and
 * bitwise the same everywhere. */
START_TEST(test_uneven_arrival) {
    enum { KEYS = 200 };
    struct mxc__kv_comm *saved = comm;
    setenv("MXC_KV_FUSION_BYTES", "49152", 1);
    setenv("MXC_KV_BUCKET_BYTES", "65536", 1);
    int rc = mxc__kv_comm_mpi(&comm);
    unsetenv("MXC_KV_FUSION_BYTES");
    unsetenv("MXC_KV_BUCKET_BYTES");
    CK_OK(rc);
    struct mxct_rng g;
    mxct_rng_seed(&g, 7); /* the same sizes on every rank */
    int64_t n[KEYS];
    float *a[KEYS];
    for (int k = 0; k < KEYS; k++) {
        /* a few large keys (> 12288 floats), some small ones above what a round carries
         * (8188 floats) */
        n[k] = 1 + mxct_rng_below(&g, k % 40 == 0 ? 30000 : k % 7 == 0 ? 12000 : 3000);
        a[k] = malloc((size_t)n[k] * sizeof(float));
        for (int64_t i = 0; i < n[k]; i++)
            a[k][i] = exact_value(comm->rank, k, i);
    }
    for (int k = 0; k < KEYS; k++) {
        /* every third one said to come alone: summed at once on the worker when the
         * communication thread is not driving, else left to it */
        push_allreduce(k, a[k], n[k], k % 3 != 0);
        if (k % (comm->rank + 2) == 0 && k % 100 > 50) /* each rank its own pace */
            usleep(20 * (useconds_t)(comm->rank + 1));
    }
    CK_OK(mxc_engine_wait_all(engine));
    uint64_t h = 0;
    for (int k = 0; k < KEYS; k++) {
        int64_t i = 0;
        while (i < n[k] && a[k][i] == exact_sum(comm->size, k, i))
            i++;
        ck_assert_msg(i == n[k], "key %d [%lld] is not the exact sum", k, (long long)i);
        h = mxct_mix64(h ^ hash_floats(a[k], n[k]));
        free(a[k]);
    }
    ck_assert(same_everywhere(h));
    comm->ops->free(comm);
    comm = saved;
}
END_TEST

/* Keys pushed one at a time, each alone, of sizes whose ring work is within one bucket and
 * beyond it: the worker that issues a key sums it at once when the communication thread is
 * not driving, and hands over what it cannot finish; the sums are exact either way. Each
 * try one rank comes 1 ms after the others, so that it finds them waiting: some of the
 * sums (over all ranks) must have been completed off the communication thread. */
START_TEST(test_lone_keys) {
    static const int64_t lone[] = {1, 1000, 4096, 65536, 262144, (1 << 20) + 7};
    enum { TRIES = 36, NUM = sizeof lone / sizeof lone[0] };
    int before = atomic_load(&off_thread);
    for (int t = 0; t < TRIES; t++) {
        int k = t % NUM;
        int64_t n = lone[k];
        float *d = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++)
            d[i] = exact_value(comm->rank, k, i);
        CK_OK(comm->ops->barrier(comm));
        if (comm->rank == t % comm->size)
            mxct_sleep_us(1000);
        push_allreduce(k, d, n, false);
        CK_OK(mxc_engine_wait_all(engine));
        int64_t i = 0;
        while (i < n && d[i] == exact_sum(comm->size, k, i))
            i++;
        ck_assert_msg(i == n, "try %d, key of %lld floats [%lld]: %g, expected %g", t, (long long)n,
                      (long long)i, d[i], exact_sum(comm->size, k, i));
        free(d);
    }
    float total = (float)(atomic_load(&off_thread) - before);
    push_allreduce(-2, &total, 1, false);
    CK_OK(mxc_engine_wait_all(engine));
    ck_assert_msg(total > 0,
                  "none of %d lone keys on %d ranks was summed by the thread that "
                  "issued it",
                  TRIES, comm->size);
}
END_TEST

/* A lone key whose partner comes late (the last rank pushes 20 ms after the others): the
 * issuing worker waits MXC__SPIN_NS for it, then hands the round over to the
 * communication thread, which finishes it; then the same with a key larger than a bucket,
 * whose ring the worker leaves to the thread even when everyone is there. */
START_TEST(test_late_partner) {
    static const int64_t n[2] = {3000, (2 << 20) + 1};
    for (int k = 0; k < 2; k++) {
        float *d = malloc((size_t)n[k] * sizeof(float));
        for (int64_t i = 0; i < n[k]; i++)
            d[i] = exact_value(comm->rank, k, i);
        CK_OK(comm->ops->barrier(comm));
        if (k == 0 && comm->rank == comm->size - 1)
            mxct_sleep_us(20000);
        push_allreduce(k, d, n[k], false);
        CK_OK(mxc_engine_wait_all(engine));
        int64_t i = 0;
        while (i < n[k] && d[i] == exact_sum(comm->size, k, i))
            i++;
        ck_assert_msg(i == n[k], "key of %lld floats [%lld]: %g, expected %g", (long long)n[k],
                      (long long)i, d[i], exact_sum(comm->size, k, i));
        ck_assert(same_everywhere(hash_floats(d, n[k])));
        free(d);
    }
}
END_TEST

START_TEST(test_check_keys) {
    int keys[4] = {0, 1, 3, 7};
    mxc_shape shapes[4] = {SHAPE(10), SHAPE(3, 4), SHAPE(5, 6, 7), SHAPE(1)};
    CK_OK(comm->ops->check_keys(comm, 4, keys, shapes));
    bool last = comm->rank == comm->size - 1;
    /* a shape that differs on the last rank: an error on every rank */
    shapes[2] = last ? SHAPE(5, 6, 8) : SHAPE(5, 6, 7);
    CK_ERR(MXC_EINVAL, comm->ops->check_keys(comm, 4, keys, shapes));
    ck_assert_msg(strstr(mxc_last_error(), "key 3 has shape (5, 6, 7) on rank 0 but (5, 6, 8)"),
                  "%s", mxc_last_error());
    shapes[2] = SHAPE(5, 6, 7);
    /* a key the last rank lacks */
    CK_ERR(MXC_EINVAL, comm->ops->check_keys(comm, last ? 3 : 4, keys, shapes));
    ck_assert_msg(strstr(mxc_last_error(), "rank 0 initialises 4 keys"), "%s", mxc_last_error());
    /* another key on rank 0 */
    keys[1] = comm->rank == 0 ? 2 : 1;
    CK_ERR(MXC_EINVAL, comm->ops->check_keys(comm, 4, keys, shapes));
    ck_assert_msg(strstr(mxc_last_error(), "is 2 on rank 0 but 1"), "%s", mxc_last_error());
    keys[1] = 1;
    CK_OK(comm->ops->check_keys(comm, 0, keys, shapes));
}
END_TEST

START_TEST(test_broadcast_barrier) {
    int64_t n = (1 << 20) + 3;
    float *d = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        d[i] = (float)(comm->rank * 1000003 + i) * 0.37f;
    CK_OK(comm->ops->broadcast(comm, d, n));
    int64_t i = 0;
    while (i < n && d[i] == (float)i * 0.37f)
        i++;
    ck_assert_msg(i == n, "[%lld] is not rank 0's", (long long)i);
    CK_OK(comm->ops->broadcast(comm, d, 0));
    free(d);
    CK_OK(comm->ops->barrier(comm));
    CK_OK(comm->ops->barrier(comm));
}
END_TEST

/* A dist_sync store through the public API: init gives everyone rank 0's values, a push
 * without updater leaves the sum over ranks, and SGD-momentum updates on random
 * gradients (sums not exact in float) leave bitwise identical weights on every rank. */
static mxc_ndarray *host_array(int64_t n, float (*value)(int rank, int key, int64_t i), int key) {
    mxc_ndarray *a;
    mxc_shape shape = mxc_shape_make(1, &n);
    CK_OK(mxc_nd_create(&shape, MXC_FLOAT32, mxc_cpu(), 0, &a));
    float *v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        v[i] = value(comm->rank, key, i);
    CK_OK(mxc_nd_sync_copy_from_cpu(a, v, (size_t)n * sizeof(float)));
    free(v);
    return a;
}

static float *read_all(mxc_ndarray *a, int64_t n) {
    float *v = malloc((size_t)n * sizeof(float));
    CK_OK(mxc_nd_sync_copy_to_cpu(a, v, (size_t)n * sizeof(float)));
    return v;
}

static float noisy_value(int rank, int key, int64_t i) {
    return sinf((float)(rank * 7919 + key * 104729 + i) * 0.37f) * 0.731f;
}

START_TEST(test_store_public_api) {
    enum { K = 4 };
    const int64_t n[K] = {1, 1000, 70001, (1 << 20) + 7};
    int keys[K];
    mxc_ndarray *w[K], *g[K];
    mxc_kvstore *kv;
    CK_OK(mxc_kvstore_create("dist_sync", &kv));
    int rank, num;
    CK_OK(mxc_kvstore_rank(kv, &rank));
    CK_OK(mxc_kvstore_num_workers(kv, &num));
    ck_assert_int_eq(rank, comm->rank);
    ck_assert_int_eq(num, comm->size);
    for (int k = 0; k < K; k++) {
        keys[k] = 10 + k;
        w[k] = host_array(n[k], exact_value, k); /* differs per rank */
        g[k] = host_array(n[k], exact_value, 100 + k);
    }
    CK_OK(mxc_kvstore_init(kv, K, keys, w));
    /* init: rank 0's values everywhere */
    CK_OK(mxc_kvstore_pull(kv, K, keys, w, 0));
    for (int k = 0; k < K; k++) {
        float *v = read_all(w[k], n[k]);
        int64_t i = 0;
        while (i < n[k] && v[i] == exact_value(0, k, i))
            i++;
        ck_assert_msg(i == n[k], "key %d: [%lld] = %g is not rank 0's %g", keys[k], (long long)i,
                      v[i], exact_value(0, k, i));
        free(v);
    }
    /* no updater: the sum over ranks (exact values, so any order gives the same) */
    CK_OK(mxc_kvstore_pushpull(kv, K, keys, g, w, K)); /* priorities K..1 below */
    for (int k = 0; k < K; k++) {
        float *v = read_all(w[k], n[k]);
        int64_t i = 0;
        while (i < n[k] && v[i] == exact_sum(comm->size, 100 + k, i))
            i++;
        ck_assert_msg(i == n[k], "key %d: [%lld] = %g, the sum over ranks is %g", keys[k],
                      (long long)i, v[i], exact_sum(comm->size, 100 + k, i));
        free(v);
    }
    /* an optimizer on the store: identical weights after every step */
    mxc_optimizer_config oc = {.kind = MXC_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .wd = 1e-4f};
    mxc_optimizer *opt;
    CK_OK(mxc_optimizer_create(&oc, &opt));
    CK_OK(mxc_kvstore_set_optimizer(kv, opt));
    for (int step = 0; step < 3; step++) {
        for (int k = 0; k < K; k++) {
            mxc_nd_free(g[k]);
            g[k] = host_array(n[k], noisy_value, step * 10 + k);
            CK_OK(mxc_kvstore_push(kv, 1, &keys[k], &g[k], k));
        }
        CK_OK(mxc_kvstore_pull(kv, K, keys, w, 0));
        for (int k = 0; k < K; k++) {
            float *v = read_all(w[k], n[k]);
            ck_assert_msg(same_everywhere(hash_floats(v, n[k])),
                          "step %d, key %d: the weights differ between ranks", step, keys[k]);
            free(v);
        }
    }
    CK_OK(mxc_kvstore_barrier(kv));
    mxc_kvstore_free(kv);
    mxc_optimizer_free(opt);
    for (int k = 0; k < K; k++) {
        mxc_nd_free(w[k]);
        mxc_nd_free(g[k]);
    }
}
END_TEST

/* Rank 1 is killed in the middle of a large allreduce; rank 0 must not hang. */
static int kill_mode(void) {
    int64_t n = 8 << 20;
    float *d = calloc((size_t)n, sizeof(float));
    if (comm->rank == 1) {
        push_allreduce_rc(0, d, n, false);
        mxct_sleep_us(2000);
        raise(SIGKILL);
    }
    mxct_sleep_us(500000);
    push_allreduce_rc(0, d, n, false);
    int rc = mxc_engine_wait_all(engine);
    printf("rank %d: survivor: %s: %s\n", comm->rank, mxc_err_name(rc), mxc_last_error());
    /* once broken, the other collectives fail at once too */
    uint64_t t0 = mxct_now_ns();
    int brc = comm->ops->barrier(comm);
    printf("rank %d: barrier after: %s in %.1f s\n", comm->rank, mxc_err_name(brc),
           (double)(mxct_now_ns() - t0) * 1e-9);
    fflush(stdout);
    /* a broken communicator still frees (its thread stops at once) */
    mxc_engine_delete_var(engine, order, NULL, NULL);
    mxc_engine_destroy(engine);
    comm->ops->free(comm);
    free(d);
    return rc == MXC_EDEVICE ? 0 : 4;
}

/* MXC_KV_ALLOW_SINGLETON=1 outside mpirun: size 1, sums are the values themselves. */
static int singleton_main(void) {
    if (mxc__kv_comm_mpi(&comm) != MXC_OK) {
        printf("singleton: %s\n", mxc_last_error());
        return 1;
    }
    if (mxc_engine_create(MXC_ENGINE_POOLED, NULL, &engine) != MXC_OK ||
        mxc_engine_new_var(engine, &order) != MXC_OK)
        return 1;
    float v[3] = {1.5f, -2, 3};
    int key = 0;
    mxc_shape shape = SHAPE(3);
    bool ok = comm->size == 1 && comm->rank == 0 && push_allreduce_rc(0, v, 3, false) == MXC_OK &&
              mxc_engine_wait_all(engine) == MXC_OK && v[0] == 1.5f && v[1] == -2 && v[2] == 3 &&
              comm->ops->check_keys(comm, 1, &key, &shape) == MXC_OK &&
              comm->ops->broadcast(comm, v, 3) == MXC_OK && comm->ops->barrier(comm) == MXC_OK;
    printf("singleton: rank %d of %d: %s\n", comm->rank, comm->size, ok ? "ok" : "FAILED");
    mxc_engine_delete_var(engine, order, NULL, NULL);
    mxc_engine_destroy(engine);
    comm->ops->free(comm);
    return ok ? 0 : 1;
}

static int rank_main(void) {
    int rc = mxc__kv_comm_mpi(&comm);
    if (rc != MXC_OK) {
        fprintf(stderr, "rank: mxc__kv_comm_mpi: %s\n", mxc_last_error());
        return 1;
    }
    if (mxc_engine_create(MXC_ENGINE_POOLED, NULL, &engine) != MXC_OK ||
        mxc_engine_new_var(engine, &order) != MXC_OK)
        return 1;
    const char *mode = getenv("MXC_KVD_MODE");
    if (mode && strcmp(mode, "kill") == 0)
        return kill_mode();
    Suite *s = suite_create("kvstore_dist_rank");
    /* one case each, so that CK_RUN_CASE=fused runs one */
    const struct {
        const char *name;
        const TTest *test;
    } cases[] = {{"sums_exact", test_sums_exact},
                 {"bitwise", test_sums_bitwise_identical},
                 {"fused", test_fused_equals_one_by_one},
                 {"uneven", test_uneven_arrival},
                 {"lone", test_lone_keys},
                 {"late_partner", test_late_partner},
                 {"check_keys", test_check_keys},
                 {"broadcast_barrier", test_broadcast_barrier},
                 {"store", test_store_public_api}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    /* each rank's own summary, prefixed so that it is not the suite's (the launcher's
     * line comes last) */
    srunner_run_all(sr, CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    TestResult **tr = srunner_failures(sr);
    for (int i = 0; i < failed; i++)
        printf("rank %d: FAILED %s: %s\n", comm->rank, tr_tcname(tr[i]), tr_msg(tr[i]));
    free(tr);
    printf("rank %d of %d: %d of %d cases passed\n", comm->rank, comm->size,
           srunner_ntests_run(sr) - failed, srunner_ntests_run(sr));
    fflush(stdout);
    srunner_free(sr);
    mxc_engine_delete_var(engine, order, NULL, NULL);
    mxc_engine_destroy(engine);
    comm->ops->free(comm);
    return failed == 0 ? 0 : 1;
}
#endif

int main(void) {
#ifdef MXC_USE_MPI
    if (getenv("OMPI_COMM_WORLD_SIZE"))
        return rank_main();
    const char *mode = getenv("MXC_KVD_MODE");
    if (mode && strcmp(mode, "singleton") == 0)
        return singleton_main();
#endif
    return mxct_run_suite(launcher_suite());
}

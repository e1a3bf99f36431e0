/*
 * tests/check_kvstore.c — the key-value store (mxc/kvstore.h, kvstore/kvstore.c): sums of
 * several arrays per key, pulls ordered after pushes by the engine alone, the updater
 * called once per push, repeated keys, many keys at once, priorities on the engine's
 * priority worker, every error with its message, device stores over CPU contexts (and
 * GPUs where there are some), dist_sync over an in-process communicator (the MPI one is
 * kvstore/dist_mpi.c's), and optimizer state saved and loaded mid-training.
 */
#include "mxc/mxc.h"
#include "kvstore/kvstore_store.h"
#include "ndarray/ndarray_impl.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static mxc_ndarray *filled(const mxc_shape *s, mxc_context ctx, float v) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_full(s, MXC_FLOAT32, ctx, v, &a));
    return a;
}

static mxc_ndarray *vec(int64_t n, float v) { return filled(&SHAPE(n), mxc_cpu(), v); }

/* Asserts every element of `a` (n elements) equals `want`. */
static void expect_all(const mxc_ndarray *a, int64_t n, float want) {
    float buf[4096];
    ck_assert_int_le(n, 4096);
    CK_OK(mxc_nd_sync_copy_to_cpu(a, buf, (size_t)n * sizeof(float)));
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(buf[i] == want, "element %lld is %g, expected %g", (long long)i,
                      (double)buf[i], (double)want);
}

static mxc_kvstore *store(const char *type) {
    mxc_kvstore *kv = NULL;
    CK_OK(mxc_kvstore_create(type, &kv));
    ck_assert_str_eq(mxc_kvstore_type(kv), type);
    return kv;
}

static void init1(mxc_kvstore *kv, int key, mxc_ndarray *v) {
    CK_OK(mxc_kvstore_init(kv, 1, &key, &v));
}

/* ---- Sums and ordering ------------------------------------------------------------- */

/* Three values of one key are summed; the pull, pushed right after, sees the sum. */
START_TEST(test_sum_of_several) {
    mxc_kvstore *kv = store("local");
    mxc_ndarray *z = vec(7, 0);
    init1(kv, 3, z);
    mxc_ndarray *v[3] = {vec(7, 1), vec(7, 2), vec(7, 4)};
    int keys[3] = {3, 3, 3};
    CK_OK(mxc_kvstore_push(kv, 3, keys, v, 0));
    mxc_ndarray *out = vec(7, -1);
    CK_OK(mxc_kvstore_pull(kv, 1, keys, &out, 0));
    expect_all(out, 7, 7);
    /* A second push replaces the copy (no updater). */
    CK_OK(mxc_kvstore_push(kv, 1, keys, v, 0));
    CK_OK(mxc_kvstore_pull(kv, 1, keys, &out, 0));
    expect_all(out, 7, 1);
    int rank = -1, num = -1;
    CK_OK(mxc_kvstore_rank(kv, &rank));
    CK_OK(mxc_kvstore_num_workers(kv, &num));
    ck_assert_int_eq(rank, 0);
    ck_assert_int_eq(num, 1);
    CK_OK(mxc_kvstore_barrier(kv));
    mxc_kvstore_free(kv);
    for (int i = 0; i < 3; i++)
        mxc_nd_free(v[i]);
    mxc_nd_free(z);
    mxc_nd_free(out);
}
END_TEST

/* More values for one key than one sum kernel call takes (MXC__MAX_OP_ARGS). */
START_TEST(test_sum_of_many_values) {
    enum { N = 37 };
    mxc_kvstore *kv = store("local");
    mxc_ndarray *z = vec(5, 0), *v[N];
    int keys[N];
    init1(kv, 0, z);
    for (int i = 0; i < N; i++) {
        v[i] = vec(5, (float)i);
        keys[i] = 0;
    }
    CK_OK(mxc_kvstore_push(kv, N, keys, v, 0));
    CK_OK(mxc_kvstore_pull(kv, 1, keys, &z, 0));
    expect_all(z, 5, (float)(N * (N - 1) / 2));
    mxc_kvstore_free(kv);
    for (int i = 0; i < N; i++)
        mxc_nd_free(v[i]);
    mxc_nd_free(z);
}
END_TEST

struct counting {
    atomic_int calls;
    int last_key;
};

/* stored += merged, counting calls. */
static int add_updater(int key, mxc_ndarray *merged, mxc_ndarray *stored, void *user) {
    struct counting *c = user;
    atomic_fetch_add(&c->calls, 1);
    c->last_key = key;
    return mxc_nd_add(stored, merged, &stored);
}

START_TEST(test_updater_once_per_push) {
    mxc_kvstore *kv = store("local");
    struct counting c = {0};
    CK_OK(mxc_kvstore_set_updater(kv, add_updater, &c));
    mxc_ndarray *w = vec(4, 10);
    init1(kv, 5, w);
    mxc_ndarray *g[2] = {vec(4, 1), vec(4, 2)};
    int keys[2] = {5, 5};
    for (int step = 0; step < 6; step++)
        CK_OK(mxc_kvstore_push(kv, 2, keys, g, 0));
    ck_assert_int_eq(atomic_load(&c.calls), 6);
    ck_assert_int_eq(c.last_key, 5);
    CK_OK(mxc_kvstore_pull(kv, 1, keys, &w, 0));
    expect_all(w, 4, 10 + 6 * 3);
    /* Removing it: pushes replace again. */
    CK_OK(mxc_kvstore_set_updater(kv, NULL, NULL));
    CK_OK(mxc_kvstore_pushpull(kv, 2, keys, g, g, 0));
    expect_all(g[0], 4, 3);
    expect_all(g[1], 4, 3);
    ck_assert_int_eq(atomic_load(&c.calls), 6);
    mxc_kvstore_free(kv);
    mxc_nd_free(g[0]);
    mxc_nd_free(g[1]);
    mxc_nd_free(w);
}
END_TEST

/* Keys repeating in one call, in any order; outputs are the values themselves. */
START_TEST(test_pushpull_repeated_keys) {
    mxc_kvstore *kv = store("local");
    mxc_ndarray *init[2] = {vec(3, 0), vec(3, 0)};
    int ikeys[2] = {1, 2};
    CK_OK(mxc_kvstore_init(kv, 2, ikeys, init));
    int keys[5] = {1, 2, 1, 2, 1};
    mxc_ndarray *v[5];
    for (int i = 0; i < 5; i++)
        v[i] = vec(3, (float)(i + 1));
    CK_OK(mxc_kvstore_pushpull(kv, 5, keys, v, v, 0));
    for (int i = 0; i < 5; i++)
        expect_all(v[i], 3, keys[i] == 1 ? 1 + 3 + 5 : 2 + 4);
    mxc_kvstore_free(kv);
    for (int i = 0; i < 5; i++)
        mxc_nd_free(v[i]);
    mxc_nd_free(init[0]);
    mxc_nd_free(init[1]);
}
END_TEST

/* Many keys pushed in one call and several calls, then pulled: each has its own sum. */
START_TEST(test_many_keys) {
    enum { K = 300, N = 33 };
    mxc_kvstore *kv = store("local");
    int keys[K];
    mxc_ndarray *a[K], *b[K];
    for (int k = 0; k < K; k++) {
        keys[k] = 1000 - 3 * k; /* not in order */
        a[k] = vec(N, 0);
    }
    CK_OK(mxc_kvstore_init(kv, K, keys, a));
    for (int k = 0; k < K; k++) {
        mxc_nd_free(a[k]);
        a[k] = vec(N, (float)k);
        b[k] = vec(N, 0.5f);
    }
    CK_OK(mxc_kvstore_push(kv, K, keys, a, 0));
    for (int k = 0; k < K; k++) /* b's pushes interleave with a's pending ones */
        CK_OK(mxc_kvstore_push(kv, 1, &keys[k], &b[k], k % 7));
    CK_OK(mxc_kvstore_pull(kv, K, keys, a, 0));
    for (int k = 0; k < K; k++)
        expect_all(a[k], N, 0.5f);
    CK_OK(mxc_kvstore_push(kv, K, keys, b, 0));
    int twice[2 * K];
    mxc_ndarray *vals[2 * K];
    for (int k = 0; k < K; k++) {
        twice[2 * k] = twice[2 * k + 1] = keys[k];
        vals[2 * k] = a[k];
        vals[2 * k + 1] = b[k];
    }
    CK_OK(mxc_kvstore_push(kv, 2 * K, twice, vals, 1));
    CK_OK(mxc_kvstore_pull(kv, K, keys, a, 0));
    for (int k = 0; k < K; k++)
        expect_all(a[k], N, 1.0f);
    mxc_kvstore_free(kv);
    for (int k = 0; k < K; k++) {
        mxc_nd_free(a[k]);
        mxc_nd_free(b[k]);
    }
}
END_TEST

/* ---- Priorities -------------------------------------------------------------------- */

struct gate {
    atomic_int started, open;
};

static int gate_fn(const mxc_run_ctx *rctx, void *arg) {
    (void)rctx;
    struct gate *g = arg;
    atomic_store(&g->started, 1);
    while (!atomic_load(&g->open))
        mxct_sleep_us(200);
    return MXC_OK;
}

struct order_log {
    atomic_int next;
    int keys[64];
};

struct recorder {
    struct order_log *log;
    int key;
};

static int record_fn(const mxc_run_ctx *rctx, void *arg) {
    (void)rctx;
    struct recorder *r = arg;
    int at = atomic_fetch_add(&r->log->next, 1);
    if (at < 64)
        r->log->keys[at] = r->key;
    return MXC_OK;
}

/* With the priority worker blocked, pushes of keys at different priorities queue up;
 * released, they run highest priority first: each key's pull finishes (seen by an
 * operation reading its output on the normal worker) in priority order. */
START_TEST(test_priorities_honoured) {
    mxc_engine *eng = NULL;
    CK_OK(mxc_engine_get_default(&eng));
    mxc_engine_config cfg;
    CK_OK(mxc_engine_get_config(eng, &cfg));
    if (mxc_engine_type_of(eng) != MXC_ENGINE_PERDEVICE || cfg.cpu_priority_workers != 1 ||
        cfg.cpu_workers != 1) {
        fprintf(stderr, "test_priorities_honoured: skipped (needs the perdevice engine with one "
                        "CPU and one priority worker)\n");
        return;
    }
    enum { K = 8 };
    static const int prios[K] = {3, -2, 10, 0, 7, 1, 5, -9};
    mxc_kvstore *kv = store("local");
    int keys[K];
    mxc_ndarray *v[K], *out[K];
    for (int k = 0; k < K; k++) {
        keys[k] = k;
        v[k] = vec(64, (float)k);
        out[k] = vec(64, 0);
    }
    CK_OK(mxc_kvstore_init(kv, K, keys, v));
    CK_OK(mxc_nd_wait_all());

    struct gate g = {0};
    mxc_engine_op_desc d = {.fn = gate_fn,
                            .arg = &g,
                            .prop = MXC_PROP_CPU_PRIORITIZED,
                            .priority = 1000,
                            .name = "gate"};
    CK_OK(mxc_engine_push(eng, &d));
    ck_assert(mxct_wait_at_least(&g.started, 1, 10000));
    struct order_log log = {0};
    struct recorder rec[K];
    for (int k = 0; k < K; k++) {
        CK_OK(mxc_kvstore_push(kv, 1, &keys[k], &v[k], prios[k]));
        CK_OK(mxc_kvstore_pull(kv, 1, &keys[k], &out[k], prios[k]));
        rec[k] = (struct recorder){&log, k};
        mxc_var *r[1] = {mxc__nd_var(out[k])};
        mxc_engine_op_desc rd = {.fn = record_fn,
                                 .arg = &rec[k],
                                 .const_vars = r,
                                 .num_const_vars = 1,
                                 .name = "record"};
        CK_OK(mxc_engine_push(eng, &rd));
    }
    mxct_sleep_us(20000);
    ck_assert_int_eq(atomic_load(&log.next), 0);
    atomic_store(&g.open, 1);
    CK_OK(mxc_nd_wait_all());
    ck_assert_int_eq(atomic_load(&log.next), K);
    char got[256] = "";
    for (int i = 0; i < K; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), " key%d(p%d)", log.keys[i],
                 prios[log.keys[i]]);
    for (int i = 1; i < K; i++)
        ck_assert_msg(prios[log.keys[i - 1]] > prios[log.keys[i]], "order:%s", got);
    for (int k = 0; k < K; k++)
        expect_all(out[k], 64, (float)k);
    mxc_kvstore_free(kv);
    for (int k = 0; k < K; k++) {
        mxc_nd_free(v[k]);
        mxc_nd_free(out[k]);
    }
}
END_TEST

/* ---- Errors ------------------------------------------------------------------------ */

#define CK_ERR_MSG(code, call, text)                                                             \
    do {                                                                                         \
        CK_ERR(code, call);                                                                      \
        ck_assert_msg(strstr(mxc_last_error(), text) != NULL, "%s: message \"%s\" lacks \"%s\"", \
                      #call, mxc_last_error(), text);                                            \
    } while (0)

START_TEST(test_errors) {
    mxc_kvstore *kv = NULL;
    CK_ERR_MSG(MXC_EINVAL, mxc_kvstore_create("dist_async", &kv), "local, device, dist_sync");
    ck_assert_ptr_null(kv);
#ifdef MXC_USE_MPI
    /* this suite is not started by mpirun (check_kvstore_dist covers the runs that are) */
    if (getenv("OMPI_COMM_WORLD_SIZE") == NULL)
        CK_ERR_MSG(MXC_EDEVICE, mxc_kvstore_create("dist_sync", &kv), "mpirun -np N");
#else
    CK_ERR_MSG(MXC_ENOTSUP, mxc_kvstore_create("dist_sync", &kv), "USE_MPI=1");
#endif
    ck_assert_ptr_null(kv);
    ck_assert(strstr(mxc_last_error(), "mxc_kvstore_create") == mxc_last_error());
    kv = store("local");
    mxc_ndarray *a = vec(4, 1), *b = vec(5, 1);
    int key = 7, other = 8, neg = -1;
    CK_ERR_MSG(MXC_EINVAL, mxc_kvstore_push(kv, 1, &key, &a, 0), "key 7 was never initialised");
    CK_ERR_MSG(MXC_EINVAL, mxc_kvstore_pull(kv, 1, &key, &a, 0), "key 7 was never initialised");
    CK_ERR_MSG(MXC_EINVAL, mxc_kvstore_init(kv, 1, &neg, &a), "key -1 is negative");
    init1(kv, key, a);
    CK_ERR_MSG(MXC_EINVAL, mxc_kvstore_init(kv, 1, &key, &a), "key 7 is already initialised");
    int dup[2] = {other, other};
    mxc_ndarray *two[2] = {a, a};
    CK_ERR_MSG(MXC_EINVAL, mxc_kvstore_init(kv, 2, dup, two), "key 8 is given twice");
    CK_ERR_MSG(MXC_ESHAPE, mxc_kvstore_push(kv, 1, &key, &b, 0), "key 7 is (4), values[0] is (5)");
    CK_ERR_MSG(MXC_ESHAPE, mxc_kvstore_pull(kv, 1, &key, &b, 0), "key 7 is (4), outputs[0] is (5)");
    mxc_ndarray *d = NULL;
    CK_OK(mxc_nd_zeros(&SHAPE(4), MXC_FLOAT64, mxc_cpu(), &d));
    CK_ERR_MSG(MXC_ENOTSUP, mxc_kvstore_push(kv, 1, &key, &d, 0), "float64");
    CK_ERR_MSG(MXC_ENOTSUP, mxc_kvstore_init(kv, 1, &other, &d), "float64");
    CK_ERR_MSG(MXC_EINVAL, mxc_kvstore_push(kv, -1, &key, &a, 0), "num is -1");
    CK_ERR_MSG(MXC_EMISUSE, mxc_kvstore_push(kv, 1, &key, (mxc_ndarray *[]){NULL}, 0), "values[0]");
    /* A failed push pushed nothing: the copy is still the init value. */
    CK_OK(mxc_kvstore_pull(kv, 1, &key, &a, 0));
    expect_all(a, 4, 1);
    mxc_kvstore_free(kv);
    CK_ERR_MSG(MXC_EMISUSE, mxc_kvstore_push(kv, 1, &key, &a, 0), "stale");
    mxc_nd_free(a);
    mxc_nd_free(b);
    mxc_nd_free(d);
}
END_TEST

/* An updater's failure is push's. */
static int failing_updater(int key, mxc_ndarray *merged, mxc_ndarray *stored, void *user) {
    (void)merged, (void)stored, (void)user;
    return mxc__error(MXC_EINVAL, "updater refuses key %d", key);
}

START_TEST(test_updater_failure) {
    mxc_kvstore *kv = store("local");
    mxc_ndarray *a = vec(2, 1);
    init1(kv, 0, a);
    CK_OK(mxc_kvstore_set_updater(kv, failing_updater, NULL));
    int key = 0;
    CK_ERR_MSG(MXC_EINVAL, mxc_kvstore_push(kv, 1, &key, &a, 0), "updater refuses key 0");
    mxc_kvstore_free(kv);
    mxc_nd_free(a);
}
END_TEST

/* ---- Device stores ----------------------------------------------------------------- */

/* Values on cpu(0) and cpu(1) (host memory both: no staging) and a pinned one. */
START_TEST(test_device_cpu_contexts) {
    mxc_kvstore *kv = store("device");
    mxc_context c1 = {MXC_CPU, 1};
    mxc_ndarray *w = filled(&SHAPE(2, 3), c1, 0);
    init1(kv, 0, w);
    mxc_ndarray *v[3] = {filled(&SHAPE(2, 3), mxc_cpu(), 1), filled(&SHAPE(2, 3), c1, 2),
                         filled(&SHAPE(2, 3), c1, 3)};
    int keys[3] = {0, 0, 0};
    CK_OK(mxc_kvstore_pushpull(kv, 3, keys, v, v, 5));
    for (int i = 0; i < 3; i++)
        expect_all(v[i], 6, 6);
    mxc_kvstore_free(kv);
    for (int i = 0; i < 3; i++)
        mxc_nd_free(v[i]);
    mxc_nd_free(w);
}
END_TEST

/* GPU values: a device store sums on the GPU of the first value, staging the others. */
START_TEST(test_device_gpu) {
    int n = mxc_gpu_count();
    if (n <= 0) {
        fprintf(stderr, "test_device_gpu: skipped (no GPU)\n");
        return;
    }
    const char *types[2] = {"device", "local"};
    for (int t = 0; t < 2; t++) {
        mxc_kvstore *kv = store(types[t]);
        mxc_ndarray *w = filled(&SHAPE(300), mxc_cpu(), 0);
        init1(kv, 4, w);
        mxc_ndarray *v[3] = {filled(&SHAPE(300), mxc_gpu(0), 1),
                             filled(&SHAPE(300), mxc_gpu(n - 1), 2),
                             filled(&SHAPE(300), mxc_cpu(), 4)};
        int keys[3] = {4, 4, 4};
        for (int step = 0; step < 3; step++)
            CK_OK(mxc_kvstore_pushpull(kv, 3, keys, v, v, step));
        /* 7, then 21, then 63 */
        for (int i = 0; i < 3; i++)
            expect_all(v[i], 300, 63);
        mxc_kvstore_free(kv);
        for (int i = 0; i < 3; i++)
            mxc_nd_free(v[i]);
        mxc_nd_free(w);
    }
}
END_TEST

/* ---- dist_sync over an in-process communicator -------------------------------------- */

/* Stands for `ranks` processes that all push what this one pushes: allreduce multiplies
 * by `ranks`. Records the keys in the order allreduce was called, and its `more` hints. */
struct fake_comm {
    struct mxc__kv_comm base;
    int checked, broadcasts, barriers;
    atomic_int issued;
    int keys[256];
    bool more[256];
    bool fail_check;
};

static int fake_check_keys(struct mxc__kv_comm *c, int num, const int *keys,
                           const mxc_shape *shapes) {
    struct fake_comm *f = (struct fake_comm *)c;
    (void)shapes;
    f->checked += num;
    if (f->fail_check)
        return mxc__error(MXC_EINVAL, "key %d: rank 1 has (3), rank 0 (4)", keys[0]);
    return MXC_OK;
}

static int fake_broadcast(struct mxc__kv_comm *c, float *data, int64_t n) {
    (void)data, (void)n;
    ((struct fake_comm *)c)->broadcasts++;
    return MXC_OK;
}

static void fake_allreduce(struct mxc__kv_comm *c, int key, float *data, int64_t n, bool more,
                           mxc_engine_done *done) {
    struct fake_comm *f = (struct fake_comm *)c;
    int at = atomic_fetch_add(&f->issued, 1);
    if (at < 256) {
        f->keys[at] = key;
        f->more[at] = more;
    }
    for (int64_t i = 0; i < n; i++)
        data[i] *= (float)c->size;
    mxc_engine_complete(done, MXC_OK);
}

static int fake_barrier(struct mxc__kv_comm *c) {
    ((struct fake_comm *)c)->barriers++;
    return MXC_OK;
}

static void fake_free(struct mxc__kv_comm *c) { (void)c; }

static const struct mxc__kv_comm_ops fake_ops = {fake_check_keys, fake_broadcast, fake_allreduce,
                                                 fake_barrier, fake_free};

START_TEST(test_dist_sync_in_process) {
    struct fake_comm f = {.base = {&fake_ops, 1, 3}};
    mxc_kvstore *kv = NULL;
    CK_OK(mxc__kvstore_create_dist("test", &f.base, &kv));
    ck_assert_str_eq(mxc_kvstore_type(kv), "dist_sync");
    int rank = -1, num = -1;
    CK_OK(mxc_kvstore_rank(kv, &rank));
    CK_OK(mxc_kvstore_num_workers(kv, &num));
    ck_assert_int_eq(rank, 1);
    ck_assert_int_eq(num, 3);
    enum { K = 20 };
    int keys[K];
    mxc_ndarray *v[K];
    for (int k = 0; k < K; k++) {
        keys[k] = k;
        v[k] = vec(10 + k, (float)k);
    }
    CK_OK(mxc_kvstore_init(kv, K, keys, v));
    ck_assert_int_eq(f.checked, K);
    ck_assert_int_eq(f.broadcasts, K);
    /* Pushed in reverse key order with priorities rising the other way: allreduces are
     * still issued in push order, as every process must issue them alike. */
    for (int k = K - 1; k >= 0; k--)
        CK_OK(mxc_kvstore_push(kv, 1, &keys[k], &v[k], k));
    for (int k = 0; k < K; k++)
        CK_OK(mxc_kvstore_pull(kv, 1, &keys[k], &v[k], 0));
    CK_OK(mxc_kvstore_barrier(kv));
    ck_assert_int_eq(f.barriers, 1);
    ck_assert_int_eq(atomic_load(&f.issued), K);
    for (int i = 0; i < K; i++)
        ck_assert_int_eq(f.keys[i], K - 1 - i);
    for (int k = 0; k < K; k++)
        expect_all(v[k], 10 + k, 3.0f * (float)k);
    /* One call pushing every key: each allreduce but the last says more follow (the
     * communicator fuses them rather than summing each at once). */
    CK_OK(mxc_kvstore_push(kv, K, keys, v, 0));
    CK_OK(mxc_kvstore_barrier(kv));
    ck_assert_int_eq(atomic_load(&f.issued), 2 * K);
    for (int i = 0; i < K; i++) {
        ck_assert_int_eq(f.keys[K + i], i);
        ck_assert_msg(f.more[K + i] == (i < K - 1), "allreduce %d of the call: more %d", i,
                      f.more[K + i]);
    }
    f.fail_check = true;
    int key = 99;
    CK_ERR_MSG(MXC_EINVAL, mxc_kvstore_init(kv, 1, &key, &v[0]), "key 99: rank 1 has (3)");
    CK_ERR_MSG(MXC_EINVAL, mxc_kvstore_push(kv, 1, &key, &v[0], 0), "never initialised");
    mxc_kvstore_free(kv);
    for (int k = 0; k < K; k++)
        mxc_nd_free(v[k]);
}
END_TEST

/* ---- Optimizer through the store, and its state in checkpoints ---------------------- */

enum { W = 6 };

/* Trains weight key 0 (and key 1) for `steps` pushes of deterministic gradients from
 * step `from`, through a store driven by `opt`; returns the weights through `out`. */
static void train(mxc_optimizer *opt, mxc_ndarray *w0, mxc_ndarray *w1, int from, int steps) {
    mxc_kvstore *kv = store("local");
    CK_OK(mxc_kvstore_set_optimizer(kv, opt));
    int keys[2] = {0, 1};
    mxc_ndarray *w[2] = {w0, w1};
    CK_OK(mxc_kvstore_init(kv, 2, keys, w));
    for (int t = from; t < from + steps; t++) {
        float g[W];
        for (int i = 0; i < W; i++)
            g[i] = (float)((t * 7 + i * 3) % 11) * 0.125f - 0.6f;
        mxc_ndarray *grad[2] = {vec(W, 0), vec(W, 0)};
        CK_OK(mxc_nd_sync_copy_from_cpu(grad[0], g, sizeof g));
        CK_OK(mxc_nd_mul_scalar(grad[0], 0.5f, &grad[1]));
        CK_OK(mxc_kvstore_pushpull(kv, 2, keys, grad, w, 0));
        mxc_nd_free(grad[0]);
        mxc_nd_free(grad[1]);
    }
    CK_OK(mxc_kvstore_barrier(kv));
    mxc_kvstore_free(kv);
}

static void check_resume(const mxc_optimizer_config *cfg) {
    enum { K = 4, M = 5 };
    mxc_optimizer *whole = NULL, *first = NULL, *second = NULL;
    CK_OK(mxc_optimizer_create(cfg, &whole));
    CK_OK(mxc_optimizer_create(cfg, &first));
    CK_OK(mxc_optimizer_create(cfg, &second));
    mxc_ndarray *a0 = vec(W, 1), *a1 = vec(W, -1), *b0 = vec(W, 1), *b1 = vec(W, -1);
    train(whole, a0, a1, 0, K + M);
    train(first, b0, b1, 0, K);
    char path[64];
    snprintf(path, sizeof path, "kv_states_%d.tmp", (int)getpid());
    CK_OK(mxc_optimizer_save_states(first, path));
    CK_OK(mxc_optimizer_load_states(second, path));
    ck_assert_float_eq(mxc_optimizer_current_lr(second), mxc_optimizer_current_lr(first));
    mxc_optimizer_free(first);
    train(second, b0, b1, K, M);
    float x[W], y[W];
    mxc_ndarray *pa[2] = {a0, a1}, *pb[2] = {b0, b1};
    for (int p = 0; p < 2; p++) {
        CK_OK(mxc_nd_sync_copy_to_cpu(pa[p], x, sizeof x));
        CK_OK(mxc_nd_sync_copy_to_cpu(pb[p], y, sizeof y));
        ck_assert_msg(memcmp(x, y, sizeof x) == 0, "param %d: %.9g vs %.9g after resume", p,
                      (double)x[0], (double)y[0]);
        ck_assert_msg(x[0] != (p == 0 ? 1.0f : -1.0f), "param %d did not train", p);
    }
    /* A file of another kind of optimizer is refused, naming the entry. */
    mxc_optimizer_config other = *cfg;
    other.kind = cfg->kind == MXC_OPT_ADAM ? MXC_OPT_SGD : MXC_OPT_ADAM;
    other.momentum = 0.9f;
    mxc_optimizer *wrong = NULL;
    CK_OK(mxc_optimizer_create(&other, &wrong));
    CK_ERR_MSG(MXC_EINVAL, mxc_optimizer_load_states(wrong, path), "is no state");
    CK_ERR_MSG(MXC_EIO, mxc_optimizer_load_states(wrong, "no/such/states"), "no/such/states");
    mxc_optimizer_free(wrong);
    unlink(path);
    mxc_optimizer_free(whole);
    mxc_optimizer_free(second);
    mxc_nd_free(a0);
    mxc_nd_free(a1);
    mxc_nd_free(b0);
    mxc_nd_free(b1);
}

START_TEST(test_optimizer_states_sgd_momentum) {
    mxc_optimizer_config cfg = {.kind = MXC_OPT_SGD,
                                .lr = 0.1f,
                                .momentum = 0.9f,
                                .wd = 1e-3f,
                                .lr_schedule = MXC_LR_FACTOR,
                                .step = 3,
                                .factor = 0.5f};
    check_resume(&cfg);
}
END_TEST

START_TEST(test_optimizer_states_adam) {
    mxc_optimizer_config cfg = {.kind = MXC_OPT_ADAM, .lr = 0.01f};
    check_resume(&cfg);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kvstore");
    TCase *tc = tcase_create("kvstore");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_test(tc, test_sum_of_several);
    tcase_add_test(tc, test_sum_of_many_values);
    tcase_add_test(tc, test_updater_once_per_push);
    tcase_add_test(tc, test_pushpull_repeated_keys);
    tcase_add_test(tc, test_many_keys);
    tcase_add_test(tc, test_priorities_honoured);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_updater_failure);
    tcase_add_test(tc, test_device_cpu_contexts);
    tcase_add_test(tc, test_device_gpu);
    tcase_add_test(tc, test_dist_sync_in_process);
    tcase_add_test(tc, test_optimizer_states_sgd_momentum);
    tcase_add_test(tc, test_optimizer_states_adam);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }

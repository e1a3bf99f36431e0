/*
 * kvstore/kvstore.c — the key-value store (mxc/kvstore.h): local, device and dist_sync.
 *
 * Per key the store keeps its copy (`stored`), a merge buffer where a push sums its values,
 * and staging arrays on the merge buffer's device for values that live elsewhere (kept
 * across pushes). Every step is an engine operation pushed here with the caller's
 * priority, on the arrays' chunk variables (the NDArray API has no priorities):
 *
 *   push:  [copy value_i -> staging_i]  (values on another device)
 *          sum values -> merge          (ElementWiseSum's kernel, on the merge device)
 *          [allreduce merge]            (dist_sync: asynchronous, the communicator's)
 *          copy merge -> stored, or updater(key, merge, stored)
 *   pull:  copy stored -> output_i
 *
 * Work on the host is pushed as MXC_PROP_CPU_PRIORITIZED, so the engine's priority
 * worker runs what is ready highest priority first (MXNet's CommCPU does the same); GPU
 * work goes to the device's workers, whose queues are ordered by priority too.
 *
 * dist_sync: the communicator wants every process to issue the same sequence of
 * allreduces. Operations become ready in an order that depends on timing, so each push
 * numbers its allreduce and the store issues them in that order (ar_submit); several
 * may be in flight at once, which lets the communicator fuse small keys.
 */
#include "kvstore/kvstore_store.h"

#include "common/handle.h"
#include "common/thread.h"
#include "ndarray/ndarray_impl.h"
#include "operator/op.h"

#include <sched.h>
#include <string.h>

#define KV_MAGIC 0x4b565331u /* "KVS1" */
#define KV_DEAD  0x4b565346u /* "KVSF": freed (common/handle.h) */

enum kv_type { KV_LOCAL = 0, KV_DEVICE = 1, KV_DIST_SYNC = 2 };
static const char *const type_names[] = {"local", "device", "dist_sync"};

struct kv_entry {
    int key;
    mxc_shape shape;
    mxc_ndarray *stored;   /* the store's copy */
    mxc_ndarray *merge;    /* the sum of a push; NULL until the first push */
    mxc_ndarray **staging; /* per value position in a push: a copy on merge's device */
    int num_staging;
};

/* An allreduce whose operation is running, waiting to be issued after those pushed
 * before it. */
struct ar_ready {
    uint64_t seq;
    int key;
    float *data;
    int64_t n;
    mxc_engine_done *done; /* NULL: the operation was skipped or failed, nothing to issue */
    bool more;             /* its push call sums more keys after this one */
    struct ar_ready *next;
};

struct mxc_kvstore {
    _Atomic uint32_t magic;
    int type;
    struct kv_entry *entries; /* sorted by key */
    int num_entries, cap_entries;
    mxc_kvstore_updater updater;
    void *updater_user;
    const struct mxc__op_def *sum_def;
    struct mxc__kv_comm *comm; /* dist_sync */
    mxc__mutex ar_lock;        /* the three fields below */
    uint64_t ar_next_issue;
    struct ar_ready *ar_ready;
    bool ar_dispatching;
    uint64_t ar_next_seq; /* the number of the next push's allreduce (caller's thread) */
};

static mxc__handle_kind kv_kind =
    MXC__HANDLE_KIND(struct mxc_kvstore, "a key-value store", KV_MAGIC, KV_DEAD);

static int check_kv(const mxc_kvstore *kv, const char *fn) {
    return mxc__handle_check(&kv_kind, kv, fn, "kv");
}

static struct kv_entry *find(mxc_kvstore *kv, int key) {
    int lo = 0, hi = kv->num_entries;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (kv->entries[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < kv->num_entries && kv->entries[lo].key == key ? &kv->entries[lo] : NULL;
}

static bool same_shape(const mxc_shape *a, const mxc_shape *b) {
    return a->ndim == b->ndim && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* ---- Operations -------------------------------------------------------------------- */

/* An array as an operation sees it: the handle's fields, copied at push. They stay valid
 * while it runs whatever becomes of the handle, because the chunk's delete is ordered
 * after the operation on the chunk's variable (as in mxc__nd_push). */
static void snap(struct mxc_ndarray *dst, const mxc_ndarray *a) { memcpy(dst, a, sizeof *dst); }

static bool covers_chunk(const mxc_ndarray *a) {
    return a->offset == 0 && mxc__nd_nbytes(a) == a->chunk->nbytes;
}

struct copy_arg {
    struct mxc_ndarray src, dst;
};

static int copy_fn(const mxc_run_ctx *rctx, void *arg) {
    struct copy_arg *c = arg;
    struct mxc__tensor s, d;
    int rc = mxc__nd_tensor(&c->src, false, &s);
    if (rc == MXC_OK)
        rc = mxc__nd_tensor(&c->dst, true, &d);
    if (rc == MXC_OK)
        rc = mxc__copy_bytes(d.data, d.ctx, s.data, s.ctx, mxc__nd_nbytes(&c->src), rctx->stream);
    return rc;
}

/* Pushes dst = src (same shape, float32) with `priority`: on the copy workers when a GPU
 * is involved (as mxc_nd_copy_to), else on the CPU priority worker. */
static int push_copy(const mxc_ndarray *src, mxc_ndarray *dst, int priority, const char *name) {
    mxc_context s = src->chunk->ctx, d = dst->chunk->ctx;
    bool s_gpu = s.dev_type == MXC_GPU, d_gpu = d.dev_type == MXC_GPU;
    struct copy_arg *a = mxc__malloc(sizeof *a);
    if (a == NULL)
        return mxc__error(MXC_ENOMEM, "%s: out of memory", name);
    snap(&a->src, src);
    snap(&a->dst, dst);
    /* A destination not written whole is read too, so a failure it carries stays. */
    mxc_var *reads[2] = {src->chunk->var, dst->chunk->var};
    mxc_var *writes[1] = {dst->chunk->var};
    mxc_engine_op_desc desc = {
        .fn = copy_fn,
        .arg = a,
        .arg_free = mxc__free,
        .ctx = d_gpu ? d : s,
        .const_vars = reads,
        .num_const_vars = covers_chunk(dst) ? 1 : 2,
        .mutable_vars = writes,
        .num_mutable_vars = 1,
        .prop = d_gpu && !s_gpu   ? MXC_PROP_COPY_TO_DEVICE
                : s_gpu && !d_gpu ? MXC_PROP_COPY_FROM_DEVICE
                : s_gpu           ? MXC_PROP_COPY_TO_DEVICE
                                  : MXC_PROP_CPU_PRIORITIZED,
        .priority = priority,
        .name = name,
        .overwrite = 1,
    };
    int rc = mxc_engine_push(src->chunk->engine, &desc);
    if (rc != MXC_OK)
        mxc__free(a);
    return rc;
}

struct sum_arg {
    const struct mxc__op_def *def;
    int n;
    struct mxc_ndarray out;
    struct mxc_ndarray in[]; /* n */
};

/* out = in_0 + ... + in_(n-1) with ElementWiseSum's kernel for the run's device, at most
 * MXC__MAX_OP_ARGS inputs at a time (the later groups add to out). */
static int sum_fn(const mxc_run_ctx *rctx, void *arg) {
    struct sum_arg *s = arg;
    struct mxc__tensor out, in[MXC__MAX_OP_ARGS];
    mxc__op_kernel kernel =
        rctx->ctx.dev_type == MXC_GPU ? s->def->forward_gpu : s->def->forward_cpu;
    if (kernel == NULL)
        return mxc__error(MXC_ENOTSUP, "kvstore_sum: no sum kernel on this device");
    int rc = mxc__nd_tensor(&s->out, true, &out);
    for (int b = 0; rc == MXC_OK && b < s->n; b += MXC__MAX_OP_ARGS) {
        int m = s->n - b < MXC__MAX_OP_ARGS ? s->n - b : MXC__MAX_OP_ARGS;
        for (int i = 0; i < m && rc == MXC_OK; i++)
            rc = mxc__nd_tensor(&s->in[b + i], false, &in[i]);
        if (rc != MXC_OK)
            break;
        int req = b == 0 ? MXC__REQ_WRITE : MXC__REQ_ADD;
        struct {
            int num_args;
        } params = {m};
        struct mxc__op_call call = {.rctx = rctx,
                                    .params = &params,
                                    .in_data = in,
                                    .num_in = m,
                                    .out_data = &out,
                                    .num_out = 1,
                                    .req = &req};
        rc = mxc__op_run(kernel, &call);
    }
    return rc;
}

/* Pushes merge = the sum of `n` arrays on merge's device. */
static int push_sum(mxc_kvstore *kv, mxc_ndarray *const *in, int n, mxc_ndarray *merge,
                    int priority) {
    struct sum_arg *s = mxc__malloc(sizeof *s + (size_t)n * sizeof s->in[0]);
    mxc_var **reads = mxc__malloc((size_t)n * sizeof *reads);
    if (s == NULL || reads == NULL) {
        mxc__free(s);
        mxc__free(reads);
        return mxc__error(MXC_ENOMEM, "kvstore_sum: out of memory");
    }
    s->def = kv->sum_def;
    s->n = n;
    snap(&s->out, merge);
    for (int i = 0; i < n; i++) {
        snap(&s->in[i], in[i]);
        reads[i] = in[i]->chunk->var;
    }
    mxc_var *writes[1] = {merge->chunk->var};
    mxc_context ctx = merge->chunk->ctx;
    mxc_engine_op_desc desc = {
        .fn = sum_fn,
        .arg = s,
        .arg_free = mxc__free,
        .ctx = ctx,
        .const_vars = reads,
        .num_const_vars = n,
        .mutable_vars = writes,
        .num_mutable_vars = 1,
        .prop = ctx.dev_type == MXC_GPU ? MXC_PROP_NORMAL : MXC_PROP_CPU_PRIORITIZED,
        .priority = priority,
        .name = "kvstore_sum",
        .overwrite = 1, /* the merge buffer is the store's, written whole */
    };
    int rc = mxc_engine_push(merge->chunk->engine, &desc);
    mxc__free(reads);
    if (rc != MXC_OK)
        mxc__free(s);
    return rc;
}

/* ---- dist_sync: allreduces issued in push order ------------------------------------ */

/* Queues `r` and, unless another thread is at it, issues every allreduce whose turn has
 * come. Issuing happens outside the lock (a communicator may complete at once, which can
 * run further operations on this thread and bring us back here). */
static struct ar_ready **ar_find(mxc_kvstore *kv, uint64_t seq) {
    struct ar_ready **p = &kv->ar_ready;
    while (*p != NULL && (*p)->seq != seq)
        p = &(*p)->next;
    return p;
}

static void ar_submit(mxc_kvstore *kv, struct ar_ready *r) {
    mxc__mutex_lock(&kv->ar_lock);
    r->next = kv->ar_ready;
    kv->ar_ready = r;
    if (kv->ar_dispatching) {
        mxc__mutex_unlock(&kv->ar_lock);
        return;
    }
    kv->ar_dispatching = true;
    for (;;) {
        struct ar_ready **p = ar_find(kv, kv->ar_next_issue);
        if (*p == NULL)
            break;
        struct ar_ready *x = *p;
        *p = x->next;
        kv->ar_next_issue++;
        /* another allreduce follows at once: this one waits to be fused with it */
        bool more = x->more || *ar_find(kv, kv->ar_next_issue) != NULL;
        mxc__mutex_unlock(&kv->ar_lock);
        if (x->done != NULL)
            kv->comm->ops->allreduce(kv->comm, x->key, x->data, x->n, more, x->done);
        mxc__free(x);
        mxc__mutex_lock(&kv->ar_lock);
    }
    kv->ar_dispatching = false;
    mxc__mutex_unlock(&kv->ar_lock);
}

struct ar_arg {
    mxc_kvstore *kv;
    struct mxc_ndarray buf;
    struct ar_ready *ready; /* handed to ar_submit when the operation runs or is retired */
};

static void ar_fn(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done) {
    (void)rctx;
    struct ar_arg *a = arg;
    struct ar_ready *r = a->ready;
    a->ready = NULL;
    struct mxc__tensor t;
    int rc = mxc__nd_tensor(&a->buf, true, &t);
    if (rc != MXC_OK) {
        ar_submit(a->kv, r); /* done NULL: its turn passes */
        mxc_engine_complete(done, rc);
        return;
    }
    r->data = t.data;
    r->n = t.size;
    r->done = done;
    ar_submit(a->kv, r);
}

/* A skipped operation (its merge buffer failed) still takes its turn, so the later ones
 * are issued. */
static void ar_free(void *arg) {
    struct ar_arg *a = arg;
    if (a->ready != NULL)
        ar_submit(a->kv, a->ready);
    mxc__free(a);
}

/* Pushes the sum of merge across processes, as an asynchronous operation writing it;
 * `more`: the push call sums more keys after this one. */
static int push_allreduce(mxc_kvstore *kv, int key, mxc_ndarray *merge, int priority, bool more) {
    struct ar_arg *a = mxc__malloc(sizeof *a);
    struct ar_ready *r = mxc__calloc(1, sizeof *r);
    if (a == NULL || r == NULL) {
        mxc__free(a);
        mxc__free(r);
        return mxc__error(MXC_ENOMEM, "kvstore_allreduce: out of memory");
    }
    r->seq = kv->ar_next_seq;
    r->key = key;
    r->more = more;
    a->kv = kv;
    a->ready = r;
    snap(&a->buf, merge);
    mxc_var *writes[1] = {merge->chunk->var};
    mxc_engine_op_desc desc = {
        .async_fn = ar_fn,
        .arg = a,
        .arg_free = ar_free,
        .ctx = mxc_cpu(),
        .const_vars = writes,
        .num_const_vars = 1,
        .mutable_vars = writes,
        .num_mutable_vars = 1,
        .prop = MXC_PROP_ASYNC,
        .priority = priority,
        .name = "kvstore_allreduce",
    };
    int rc = mxc_engine_push(merge->chunk->engine, &desc);
    if (rc != MXC_OK) {
        mxc__free(a);
        mxc__free(r);
        return rc;
    }
    kv->ar_next_seq++;
    return MXC_OK;
}

/* ---- Create and free --------------------------------------------------------------- */

static int kv_new(int type, struct mxc__kv_comm *comm, mxc_kvstore **out) {
    mxc_kvstore *kv = mxc__handle_alloc(&kv_kind);
    if (kv == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory");
    kv->type = type;
    kv->comm = comm;
    kv->sum_def = mxc__op_find("ElementWiseSum");
    MXC_ASSERT(kv->sum_def != NULL); /* a registered operator */
    mxc__mutex_init(&kv->ar_lock);
    mxc__handle_publish(&kv_kind, kv);
    *out = kv;
    return MXC_OK;
}

int mxc__kvstore_create_dist(const char *fn, struct mxc__kv_comm *comm, mxc_kvstore **out) {
    int rc = kv_new(KV_DIST_SYNC, comm, out);
    if (rc != MXC_OK)
        comm->ops->free(comm);
    return mxc__in_call(fn, rc);
}

int mxc_kvstore_create(const char *type, mxc_kvstore **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_kvstore_create: out is NULL");
    *out = NULL;
    if (type == NULL)
        return mxc__error(MXC_EINVAL, "mxc_kvstore_create: type is NULL (valid types: local, "
                                      "device, dist_sync)");
    for (int t = 0; t < (int)MXC_ARRAY_SIZE(type_names); t++) {
        if (strcmp(type, type_names[t]) != 0)
            continue;
        if (t != KV_DIST_SYNC)
            return mxc__in_call(__func__, kv_new(t, NULL, out));
        struct mxc__kv_comm *comm = NULL;
        int rc = mxc__kv_comm_mpi(&comm);
        if (rc != MXC_OK)
            return mxc__in_call(__func__, rc);
        return mxc__kvstore_create_dist(__func__, comm, out);
    }
    return mxc__error(MXC_EINVAL,
                      "mxc_kvstore_create: unknown type \"%s\" (valid types: local, device, "
                      "dist_sync)",
                      type);
}

/* Waits for every operation pushed on the store's arrays (reads included); the first
 * failure found, or MXC_OK. */
static int wait_store(mxc_kvstore *kv) {
    int first = MXC_OK;
    char msg[512] = "";
    for (int i = 0; i < kv->num_entries; i++) {
        struct kv_entry *e = &kv->entries[i];
        mxc_ndarray *arrays[2] = {e->stored, e->merge};
        for (int k = 0; k < 2 + e->num_staging; k++) {
            mxc_ndarray *a = k < 2 ? arrays[k] : e->staging[k - 2];
            if (a == NULL)
                continue;
            int rc = mxc_nd_wait_to_write(a);
            if (rc != MXC_OK && first == MXC_OK) {
                first = rc;
                snprintf(msg, sizeof msg, "%s", mxc_last_error());
            }
        }
    }
    if (first != MXC_OK)
        mxc__error_set(first, msg);
    return first;
}

void mxc_kvstore_free(mxc_kvstore *kv) {
    if (!mxc__handle_check_free(&kv_kind, kv, __func__, "kv"))
        return;
    (void)wait_store(kv);
    /* The last allreduce may have completed inside ar_submit, which still holds on. */
    mxc__mutex_lock(&kv->ar_lock);
    while (kv->ar_dispatching) {
        mxc__mutex_unlock(&kv->ar_lock);
        sched_yield();
        mxc__mutex_lock(&kv->ar_lock);
    }
    mxc__mutex_unlock(&kv->ar_lock);
    while (kv->ar_ready != NULL) {
        struct ar_ready *r = kv->ar_ready;
        kv->ar_ready = r->next;
        mxc__free(r);
    }
    for (int i = 0; i < kv->num_entries; i++) {
        struct kv_entry *e = &kv->entries[i];
        mxc_nd_free(e->stored);
        mxc_nd_free(e->merge);
        for (int k = 0; k < e->num_staging; k++)
            mxc_nd_free(e->staging[k]);
        mxc__free(e->staging);
    }
    mxc__free(kv->entries);
    if (kv->comm != NULL)
        kv->comm->ops->free(kv->comm);
    mxc__mutex_destroy(&kv->ar_lock);
    mxc__handle_free(&kv_kind, kv);
}

const char *mxc_kvstore_type(const mxc_kvstore *kv) {
    return check_kv(kv, __func__) == MXC_OK ? type_names[kv->type] : NULL;
}

/* ---- Checking arguments ------------------------------------------------------------ */

/* Checks the store, the lists and every array (`what`: "values" or "outputs"): each key
 * initialised unless `for_init`, each array a float32 array of its key's shape. */
static int check_args(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *arrays,
                      const char *what, bool for_init, const char *fn) {
    int rc = check_kv(kv, fn);
    if (rc != MXC_OK)
        return rc;
    if (num < 0)
        return mxc__error(MXC_EINVAL, "%s: num is %d", fn, num);
    if (num > 0 && (keys == NULL || arrays == NULL))
        return mxc__error(MXC_EINVAL, "%s: %s is NULL", fn, keys == NULL ? "keys" : what);
    char b1[128], b2[128];
    for (int i = 0; i < num; i++) {
        char name[48];
        snprintf(name, sizeof name, "%s[%d]", what, i);
        rc = mxc__nd_check(arrays[i], fn, name);
        if (rc != MXC_OK)
            return rc;
        if (arrays[i]->dtype != MXC_FLOAT32)
            return mxc__error(MXC_ENOTSUP, "%s: %s (key %d) is %s; the store holds float32", fn,
                              name, keys[i], mxc_dtype_name(arrays[i]->dtype));
        if (for_init)
            continue;
        struct kv_entry *e = find(kv, keys[i]);
        if (e == NULL)
            return mxc__error(MXC_EINVAL, "%s: key %d was never initialised (mxc_kvstore_init)", fn,
                              keys[i]);
        if (!same_shape(&arrays[i]->shape, &e->shape))
            return mxc__error(MXC_ESHAPE, "%s: key %d is %s, %s is %s", fn, keys[i],
                              mxc__shape_str(&e->shape, b1, sizeof b1), name,
                              mxc__shape_str(&arrays[i]->shape, b2, sizeof b2));
    }
    return MXC_OK;
}

/* ---- Init -------------------------------------------------------------------------- */

/* dist_sync: every process checks the keys and takes rank 0's values. */
static int dist_init(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *stored) {
    int rc = MXC_OK;
    mxc_shape *shapes = mxc__malloc(sizeof *shapes * (size_t)(num > 0 ? num : 1));
    float *buf = NULL;
    MXC_CHECK(shapes != NULL, MXC_ENOMEM, "out of memory");
    for (int i = 0; i < num; i++)
        shapes[i] = stored[i]->shape;
    MXC_TRY(kv->comm->ops->check_keys(kv->comm, num, keys, shapes));
    for (int i = 0; i < num; i++) {
        size_t bytes = mxc__nd_nbytes(stored[i]);
        buf = mxc__malloc(bytes > 0 ? bytes : 1);
        MXC_CHECK(buf != NULL, MXC_ENOMEM, "out of memory for key %d", keys[i]);
        MXC_TRY(mxc_nd_sync_copy_to_cpu(stored[i], buf, bytes));
        MXC_TRY(kv->comm->ops->broadcast(kv->comm, buf, mxc_shape_size(&stored[i]->shape)));
        MXC_TRY(mxc_nd_sync_copy_from_cpu(stored[i], buf, bytes));
        mxc__free(buf);
        buf = NULL;
    }
fail:
    mxc__free(buf);
    mxc__free(shapes);
    return rc;
}

static int init(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *values,
                const char *fn) {
    int rc = check_args(kv, num, keys, values, "values", true, fn);
    if (rc != MXC_OK)
        return rc;
    for (int i = 0; i < num; i++) {
        if (keys[i] < 0)
            return mxc__error(MXC_EINVAL, "%s: key %d is negative", fn, keys[i]);
        if (find(kv, keys[i]) != NULL)
            return mxc__error(MXC_EINVAL, "%s: key %d is already initialised", fn, keys[i]);
        for (int j = 0; j < i; j++)
            if (keys[j] == keys[i])
                return mxc__error(MXC_EINVAL, "%s: key %d is given twice", fn, keys[i]);
    }
    mxc_ndarray **stored = mxc__calloc((size_t)(num > 0 ? num : 1), sizeof *stored);
    MXC_CHECK(stored != NULL, MXC_ENOMEM, "%s: out of memory", fn);
    if (kv->num_entries + num > kv->cap_entries) {
        int cap = kv->num_entries + num > 2 * kv->cap_entries ? kv->num_entries + num
                                                              : 2 * kv->cap_entries;
        struct kv_entry *e = mxc__realloc(kv->entries, sizeof *e * (size_t)cap);
        MXC_CHECK(e != NULL, MXC_ENOMEM, "%s: out of memory", fn);
        kv->entries = e;
        kv->cap_entries = cap;
    }
    for (int i = 0; i < num; i++) {
        mxc_context ctx = kv->type == KV_DEVICE ? values[i]->chunk->ctx : mxc_cpu();
        MXC_TRY(mxc__nd_create(fn, &values[i]->shape, MXC_FLOAT32, ctx, true, &stored[i]));
        MXC_TRY(push_copy(values[i], stored[i], 0, "kvstore_init"));
    }
    if (kv->type == KV_DIST_SYNC)
        MXC_TRY(dist_init(kv, num, keys, stored));
    for (int i = 0; i < num; i++) {
        int at = 0;
        while (at < kv->num_entries && kv->entries[at].key < keys[i])
            at++;
        memmove(&kv->entries[at + 1], &kv->entries[at],
                sizeof kv->entries[0] * (size_t)(kv->num_entries - at));
        kv->entries[at] =
            (struct kv_entry){.key = keys[i], .shape = values[i]->shape, .stored = stored[i]};
        kv->num_entries++;
        stored[i] = NULL;
    }
fail:
    for (int i = 0; stored != NULL && i < num; i++)
        mxc_nd_free(stored[i]);
    mxc__free(stored);
    return rc;
}

int mxc_kvstore_init(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *values) {
    return mxc__in_call(__func__, init(kv, num, keys, values, __func__));
}

/* ---- Push and pull ----------------------------------------------------------------- */

/* The merge buffer of `e`, made at its first push: on the CPU, or for a device store on
 * the device of the first value, where the store's copy then moves too. */
static int ensure_merge(mxc_kvstore *kv, struct kv_entry *e, const mxc_ndarray *first, int priority,
                        const char *fn) {
    if (e->merge != NULL)
        return MXC_OK;
    mxc_context ctx = kv->type == KV_DEVICE ? first->chunk->ctx : mxc_cpu();
    int rc = mxc__nd_create(fn, &e->shape, MXC_FLOAT32, ctx, true, &e->merge);
    if (rc != MXC_OK || kv->type != KV_DEVICE || mxc__ctx_same_device(ctx, e->stored->chunk->ctx))
        return rc;
    mxc_ndarray *moved = NULL;
    rc = mxc__nd_create(fn, &e->shape, MXC_FLOAT32, ctx, true, &moved);
    if (rc == MXC_OK)
        rc = push_copy(e->stored, moved, priority, "kvstore_copy");
    if (rc != MXC_OK) {
        mxc_nd_free(moved);
        return rc;
    }
    mxc_nd_free(e->stored); /* safe: pending operations keep its memory */
    e->stored = moved;
    return MXC_OK;
}

/* Staging array `i` of `e`, on the merge buffer's device. */
static int staging(struct kv_entry *e, int i, const char *fn, mxc_ndarray **out) {
    if (i >= e->num_staging) {
        mxc_ndarray **s = mxc__realloc(e->staging, sizeof *s * (size_t)(i + 1));
        if (s == NULL)
            return mxc__error(MXC_ENOMEM, "%s: out of memory", fn);
        for (int k = e->num_staging; k <= i; k++)
            s[k] = NULL;
        e->staging = s;
        e->num_staging = i + 1;
    }
    if (e->staging[i] == NULL) {
        int rc =
            mxc__nd_create(fn, &e->shape, MXC_FLOAT32, e->merge->chunk->ctx, true, &e->staging[i]);
        if (rc != MXC_OK)
            return rc;
    }
    *out = e->staging[i];
    return MXC_OK;
}

/* Pushes the `n` values of one key; `more`: the call pushes more keys after it. */
static int push_key(mxc_kvstore *kv, struct kv_entry *e, mxc_ndarray **vals, int n, int priority,
                    bool more, const char *fn) {
    int rc = ensure_merge(kv, e, vals[0], priority, fn);
    for (int i = 0; i < n && rc == MXC_OK; i++) {
        if (mxc__ctx_same_device(vals[i]->chunk->ctx, e->merge->chunk->ctx))
            continue;
        mxc_ndarray *s = NULL;
        rc = staging(e, i, fn, &s);
        if (rc == MXC_OK)
            rc = push_copy(vals[i], s, priority, "kvstore_stage");
        if (rc == MXC_OK)
            vals[i] = s;
    }
    if (rc == MXC_OK)
        rc = push_sum(kv, vals, n, e->merge, priority);
    if (rc == MXC_OK && kv->type == KV_DIST_SYNC)
        rc = push_allreduce(kv, e->key, e->merge, priority, more);
    if (rc != MXC_OK)
        return rc;
    if (kv->updater != NULL)
        return kv->updater(e->key, e->merge, e->stored, kv->updater_user);
    return push_copy(e->merge, e->stored, priority, "kvstore_copy");
}

static int push(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *values, int priority,
                const char *fn) {
    int rc = check_args(kv, num, keys, values, "values", false, fn);
    if (rc != MXC_OK || num == 0)
        return rc;
    /* Values grouped by key, keys in order of first appearance. */
    bool *taken = mxc__calloc((size_t)num, sizeof *taken);
    mxc_ndarray **group = mxc__malloc(sizeof *group * (size_t)num);
    MXC_CHECK(taken != NULL && group != NULL, MXC_ENOMEM, "%s: out of memory", fn);
    for (int i = 0; i < num; i++) {
        if (taken[i])
            continue;
        int n = 0;
        bool more = false;
        for (int j = i; j < num; j++) {
            if (!taken[j] && keys[j] == keys[i]) {
                taken[j] = true;
                group[n++] = values[j];
            }
            more = more || !taken[j];
        }
        MXC_TRY(push_key(kv, find(kv, keys[i]), group, n, priority, more, fn));
    }
fail:
    mxc__free(taken);
    mxc__free(group);
    return rc;
}

int mxc_kvstore_push(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *values,
                     int priority) {
    return mxc__in_call(__func__, push(kv, num, keys, values, priority, __func__));
}

static int pull(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *outputs,
                int priority, const char *fn) {
    int rc = check_args(kv, num, keys, outputs, "outputs", false, fn);
    for (int i = 0; i < num && rc == MXC_OK; i++)
        rc = push_copy(find(kv, keys[i])->stored, outputs[i], priority, "kvstore_pull");
    return rc;
}

int mxc_kvstore_pull(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *outputs,
                     int priority) {
    return mxc__in_call(__func__, pull(kv, num, keys, outputs, priority, __func__));
}

int mxc_kvstore_pushpull(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *values,
                         mxc_ndarray *const *outputs, int priority) {
    /* Both lists are checked before anything is pushed. */
    int rc = check_args(kv, num, keys, values, "values", false, __func__);
    if (rc == MXC_OK)
        rc = check_args(kv, num, keys, outputs, "outputs", false, __func__);
    if (rc == MXC_OK)
        rc = push(kv, num, keys, values, priority, __func__);
    if (rc == MXC_OK)
        rc = pull(kv, num, keys, outputs, priority, __func__);
    return mxc__in_call(__func__, rc);
}

/* ---- Updater, ranks, barrier ------------------------------------------------------- */

int mxc_kvstore_set_updater(mxc_kvstore *kv, mxc_kvstore_updater fn, void *user) {
    int rc = check_kv(kv, __func__);
    if (rc != MXC_OK)
        return rc;
    kv->updater = fn;
    kv->updater_user = fn != NULL ? user : NULL;
    return MXC_OK;
}

int mxc_kvstore_rank(const mxc_kvstore *kv, int *rank) {
    int rc = check_kv(kv, __func__);
    if (rc != MXC_OK)
        return rc;
    if (rank == NULL)
        return mxc__error(MXC_EINVAL, "mxc_kvstore_rank: rank is NULL");
    *rank = kv->comm != NULL ? kv->comm->rank : 0;
    return MXC_OK;
}

int mxc_kvstore_num_workers(const mxc_kvstore *kv, int *num) {
    int rc = check_kv(kv, __func__);
    if (rc != MXC_OK)
        return rc;
    if (num == NULL)
        return mxc__error(MXC_EINVAL, "mxc_kvstore_num_workers: num is NULL");
    *num = kv->comm != NULL ? kv->comm->size : 1;
    return MXC_OK;
}

int mxc_kvstore_barrier(mxc_kvstore *kv) {
    int rc = check_kv(kv, __func__);
    if (rc != MXC_OK)
        return rc;
    rc = wait_store(kv);
    if (kv->comm != NULL) {
        int brc = kv->comm->ops->barrier(kv->comm);
        if (rc == MXC_OK)
            rc = brc;
    }
    return mxc__in_call(__func__, rc);
}

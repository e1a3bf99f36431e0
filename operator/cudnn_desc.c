/*
 * operator/cudnn_desc.c — the per-thread cache of cuDNN descriptors (operator/cudnn_desc.h):
 * a table of DNN_ENTRIES entries per engine worker thread, made on the thread's first use
 * and destroyed with the thread (a pthread key's destructor), the least recently used
 * entry replaced when the table is full. Descriptors are host-side objects of cuDNN, so an
 * entry serves any device; a worker serves one device anyway.
 */
#ifdef MXC_USE_CUDNN

#include "operator/cudnn_desc.h"

#include "common/common.h"
#include "operator/gpu.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Problems a worker keeps described: a network's layers of these five kinds, each forward
 * and backward sharing one entry. */
#define DNN_ENTRIES 64

struct entry {
    struct mxc__dnn_key key;
    bool used, usable;
    unsigned long long last_use;
    struct mxc__dnn d;
};

struct table {
    unsigned long long clock;
    struct entry e[DNN_ENTRIES];
};

static pthread_key_t table_key;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

int mxc__dnn_error(cudnnStatus_t s, const char *op, const char *call) {
    return mxc__error(MXC_EDEVICE, "%s: %s: %s", op, call, cudnnGetErrorString(s));
}

bool mxc__dnn_dims(int *dst, const int64_t *src, int n) {
    for (int i = 0; i < n; i++) {
        if (src[i] < 1 || src[i] > INT_MAX)
            return false;
        dst[i] = (int)src[i];
    }
    return true;
}

static void entry_destroy(struct entry *e) {
    if (e->d.x)
        cudnnDestroyTensorDescriptor(e->d.x);
    if (e->d.y)
        cudnnDestroyTensorDescriptor(e->d.y);
    if (e->d.act)
        cudnnDestroyActivationDescriptor(e->d.act);
    if (e->d.pool)
        cudnnDestroyPoolingDescriptor(e->d.pool);
    if (e->d.lrn)
        cudnnDestroyLRNDescriptor(e->d.lrn);
    memset(e, 0, sizeof *e);
}

static void table_free(void *p) {
    struct table *t = p;
    for (int i = 0; i < DNN_ENTRIES; i++)
        entry_destroy(&t->e[i]);
    free(t);
}

static void table_key_init(void) { pthread_key_create(&table_key, table_free); }

static bool ok(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS; }

/* A float32 NCHW tensor descriptor of dims v (N, C, H, W). */
static bool tensor(cudnnTensorDescriptor_t *t, const int *v) {
    return ok(cudnnCreateTensorDescriptor(t)) &&
           ok(cudnnSetTensor4dDescriptor(*t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, v[0], v[1], v[2],
                                         v[3]));
}

/* Makes e's descriptors from its key; false when cuDNN rejects one (the own path then). */
static bool describe(struct entry *e) {
    const struct mxc__dnn_key *k = &e->key;
    struct mxc__dnn *d = &e->d;
    if (!tensor(&d->x, k->x))
        return false;
    switch (k->kind) {
    case MXC__DNN_TENSOR: return true;
    case MXC__DNN_ACT:
        /* NaN is not propagated: relu(NaN) is 0, as the CPU's x > 0 ? x : 0 gives */
        return ok(cudnnCreateActivationDescriptor(&d->act)) &&
               ok(cudnnSetActivationDescriptor(d->act, (cudnnActivationMode_t)k->p[0],
                                               CUDNN_NOT_PROPAGATE_NAN, 0.0));
    case MXC__DNN_POOL: {
        /* NaN is not propagated: the CPU's max skips NaN (e > v is false for it) */
        int n, c, h, w;
        return ok(cudnnCreatePoolingDescriptor(&d->pool)) &&
               ok(cudnnSetPooling2dDescriptor(d->pool, (cudnnPoolingMode_t)k->p[0],
                                              CUDNN_NOT_PROPAGATE_NAN, k->p[1], k->p[2], k->p[3],
                                              k->p[4], k->p[5], k->p[6])) &&
               ok(cudnnGetPooling2dForwardOutputDim(d->pool, d->x, &n, &c, &h, &w)) &&
               n == k->y[0] && c == k->y[1] && h == k->y[2] && w == k->y[3] && tensor(&d->y, k->y);
    }
    case MXC__DNN_BN:
        return ok(cudnnCreateTensorDescriptor(&d->y)) &&
               ok(cudnnDeriveBNTensorDescriptor(d->y, d->x, CUDNN_BATCHNORM_SPATIAL));
    case MXC__DNN_LRN:
        return ok(cudnnCreateLRNDescriptor(&d->lrn)) &&
               ok(cudnnSetLRNDescriptor(d->lrn, (unsigned)k->p[0], k->f[0], k->f[1], k->f[2]));
    default: return false;
    }
}

int mxc__dnn_get(const mxc_run_ctx *rctx, const struct mxc__dnn_key *k, const struct mxc__dnn **d,
                 void **handle) {
    pthread_once(&table_once, table_key_init);
    struct table *t = pthread_getspecific(table_key);
    if (t == NULL) {
        t = calloc(1, sizeof *t);
        if (t == NULL)
            return MXC__DNN_OWN;
        if (pthread_setspecific(table_key, t) != 0) {
            free(t);
            return MXC__DNN_OWN;
        }
    }
    struct entry *e = NULL, *victim = NULL; /* a free entry, else the least recently used */
    for (int i = 0; i < DNN_ENTRIES && !e; i++)
        if (t->e[i].used && memcmp(&t->e[i].key, k, sizeof *k) == 0)
            e = &t->e[i];
    for (int i = 0; i < DNN_ENTRIES && !e; i++) {
        struct entry *x = &t->e[i];
        if (!x->used) {
            victim = x;
            break;
        }
        if (!victim || x->last_use < victim->last_use)
            victim = x;
    }
    if (!e) {
        entry_destroy(victim);
        e = victim;
        e->key = *k;
        e->used = true;
        e->usable = describe(e);
    }
    e->last_use = ++t->clock;
    *d = &e->d;
    return !e->usable ? MXC__DNN_OWN : rctx ? mxc__cudnn(rctx, handle) : MXC_OK;
}

#else
/* ISO C wants a declaration in every translation unit. */
typedef int cudnn_desc_unused;
#endif /* MXC_USE_CUDNN */

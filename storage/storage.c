/*
 * storage/storage.c — memory blocks by context. One process-wide pool per context (CPU,
 * pinned host, each GPU) keeps freed blocks by size class for reuse, counts what is in
 * use, pooled and at peak, and gives pooled memory back on trim. CPU memory comes from
 * the allocator hook, device memory from the backend in storage_cuda.c.
 */
#include "storage/storage_impl.h"

#include "common/thread.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define STORAGE_ALIGN    ((size_t)64)
#define STORAGE_POW2_MAX ((size_t)64 * 1024) /* power-of-two classes up to here */
#define STORAGE_PAGE     ((size_t)4096)      /* then multiples of a page */
#define STORAGE_MAX_GPUS 64

enum { POOL_CPU = 0, POOL_PINNED = 1, POOL_GPU0 = 2, NUM_POOLS = 2 + STORAGE_MAX_GPUS };

/* The free blocks of one size class, used as a stack: the most recently freed block is
 * handed out first, while it may still be in cache. */
struct bucket {
    size_t cls;
    size_t count, cap;
    void **ptrs;
};

struct pool {
    mxc__mutex lock;        /* guards everything below */
    mxc_context ctx;        /* cpu(0), cpu_pinned(0) or gpu(i): for messages and frees */
    struct bucket *buckets; /* sorted by cls; empty buckets stay until a trim */
    size_t nbuckets, bucket_cap;
    mxc_storage_stats stats;
};

static struct pool pools[NUM_POOLS];
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;
static atomic_int pooling_on = 1;
static _Atomic(void (*)(void)) shutdown_hook;

static void pools_init(void) {
    for (int i = 0; i < NUM_POOLS; i++) {
        mxc__mutex_init(&pools[i].lock);
        if (i == POOL_CPU)
            pools[i].ctx = mxc_cpu();
        else if (i == POOL_PINNED)
            pools[i].ctx = (mxc_context){MXC_CPU_PINNED, 0};
        else
            pools[i].ctx = mxc_gpu(i - POOL_GPU0);
    }
    atomic_store(&pooling_on, mxc__env_long("MXC_STORAGE_POOL", 1) != 0);
}

static void ensure_init(void) { pthread_once(&pools_once, pools_init); }

/* The pool of `ctx`, after checking that the context can hold memory in this build on
 * this machine. Errors name `fn`. */
static int find_pool(const char *fn, mxc_context ctx, struct pool **out) {
    char name[48];
    *out = NULL;
    if (ctx.dev_type != 0 && ctx.dev_type != MXC_CPU && ctx.dev_type != MXC_GPU &&
        ctx.dev_type != MXC_CPU_PINNED)
        return mxc__error(MXC_EINVAL,
                          "%s: unknown device type %d (expected MXC_CPU, MXC_GPU or "
                          "MXC_CPU_PINNED)",
                          fn, (int)ctx.dev_type);
    if (ctx.dev_id < 0)
        return mxc__error(MXC_ENODEV, "%s: no device %s: dev_id is negative", fn,
                          mxc__ctx_name(ctx, name, sizeof name));
    ensure_init();
    if (ctx.dev_type == 0 || ctx.dev_type == MXC_CPU) {
        *out = &pools[POOL_CPU];
        return MXC_OK;
    }
    int rc = mxc__storage_device_check(fn, ctx);
    if (rc != MXC_OK)
        return rc;
    if (ctx.dev_type == MXC_CPU_PINNED) {
        *out = &pools[POOL_PINNED];
        return MXC_OK;
    }
    if (ctx.dev_id >= STORAGE_MAX_GPUS)
        return mxc__error(MXC_ENOTSUP, "%s: %s: mxc supports at most %d GPUs", fn,
                          mxc__ctx_name(ctx, name, sizeof name), STORAGE_MAX_GPUS);
    *out = &pools[POOL_GPU0 + ctx.dev_id];
    return MXC_OK;
}

size_t mxc_storage_class_size(size_t size) {
    if (size == 0)
        return 0;
    if (size <= STORAGE_POW2_MAX) {
        size_t c = STORAGE_ALIGN;
        while (c < size)
            c <<= 1;
        return c;
    }
    if (size > SIZE_MAX - (STORAGE_PAGE - 1))
        return 0;
    return (size + STORAGE_PAGE - 1) & ~(STORAGE_PAGE - 1);
}

/* ---- Memory from the system ------------------------------------------------------- */

/* On failure the last error holds a short reason; the caller adds size and context. */
static int system_alloc(struct pool *p, mxc_context ctx, size_t bytes, void **out) {
    if (p == &pools[POOL_CPU]) {
        *out = mxc__aligned_alloc(STORAGE_ALIGN, bytes);
        return *out != NULL ? MXC_OK : mxc__error(MXC_ENOMEM, "the allocator returned NULL");
    }
    return mxc__storage_device_alloc(ctx, bytes, out);
}

static void system_free(struct pool *p, void *ptr) {
    if (p == &pools[POOL_CPU])
        mxc__aligned_free(ptr);
    else
        mxc__storage_device_free(p->ctx, ptr);
    p->stats.system_frees++;
}

/* ---- Buckets (all with the pool's lock held) --------------------------------------- */

/* Index of the first bucket whose class is >= cls. */
static size_t bucket_search(const struct pool *p, size_t cls) {
    size_t lo = 0, hi = p->nbuckets;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->buckets[mid].cls < cls)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A pooled block of class `cls`, or NULL. */
static void *pool_take(struct pool *p, size_t cls) {
    size_t i = bucket_search(p, cls);
    if (i == p->nbuckets || p->buckets[i].cls != cls || p->buckets[i].count == 0)
        return NULL;
    p->stats.bytes_pooled -= cls;
    p->stats.blocks_pooled--;
    return p->buckets[i].ptrs[--p->buckets[i].count];
}

/* Files a free block under its class; false (the block not kept) if the bookkeeping
 * cannot grow. */
static bool pool_put(struct pool *p, size_t cls, void *ptr) {
    size_t i = bucket_search(p, cls);
    if (i == p->nbuckets || p->buckets[i].cls != cls) {
        if (p->nbuckets == p->bucket_cap) {
            size_t cap = p->bucket_cap ? 2 * p->bucket_cap : 16;
            struct bucket *nb = mxc__realloc(p->buckets, cap * sizeof *nb);
            if (nb == NULL)
                return false;
            p->buckets = nb;
            p->bucket_cap = cap;
        }
        memmove(&p->buckets[i + 1], &p->buckets[i], (p->nbuckets - i) * sizeof *p->buckets);
        p->buckets[i] = (struct bucket){.cls = cls};
        p->nbuckets++;
    }
    struct bucket *b = &p->buckets[i];
    if (b->count == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 4;
        void **np = mxc__realloc(b->ptrs, cap * sizeof *np);
        if (np == NULL)
            return false;
        b->ptrs = np;
        b->cap = cap;
    }
    b->ptrs[b->count++] = ptr;
    p->stats.bytes_pooled += cls;
    p->stats.blocks_pooled++;
    return true;
}

/* Gives every pooled block back to the system and frees the bookkeeping. */
static void pool_trim_locked(struct pool *p) {
    for (size_t i = 0; i < p->nbuckets; i++) {
        struct bucket *b = &p->buckets[i];
        for (size_t j = 0; j < b->count; j++)
            system_free(p, b->ptrs[j]);
        mxc__free(b->ptrs);
    }
    mxc__free(p->buckets);
    p->buckets = NULL;
    p->nbuckets = p->bucket_cap = 0;
    p->stats.bytes_pooled = 0;
    p->stats.blocks_pooled = 0;
}

/* ---- API --------------------------------------------------------------------------- */

int mxc_storage_alloc(mxc_context ctx, size_t size, mxc_storage_block *out) {
    int rc = MXC_OK;
    struct pool *p = NULL;
    void *ptr = NULL;
    char name[48];
    if (ctx.dev_type == 0)
        ctx.dev_type = MXC_CPU;
    if (out != NULL)
        *out = (mxc_storage_block){.ctx = ctx};
    MXC_CHECK(out != NULL, MXC_EINVAL, "mxc_storage_alloc: out is NULL");
    MXC_TRY(find_pool("mxc_storage_alloc", ctx, &p));
    if (size == 0)
        return MXC_OK;
    mxc__ctx_name(ctx, name, sizeof name);

    bool pooling = atomic_load(&pooling_on) != 0;
    size_t cap = pooling ? mxc_storage_class_size(size) : size;
    MXC_CHECK(cap != 0, MXC_ENOMEM,
              "mxc_storage_alloc: cannot allocate %zu bytes on %s: larger than any size class",
              size, name);

    bool hit = false;
    if (pooling) {
        mxc__mutex_lock(&p->lock);
        ptr = pool_take(p, cap);
        mxc__mutex_unlock(&p->lock);
        hit = ptr != NULL;
    }
    if (ptr == NULL) {
        rc = system_alloc(p, ctx, cap, &ptr);
        if (rc == MXC_ENOMEM) {
            /* What the pool holds may be what is missing: give it back and try again. */
            mxc__mutex_lock(&p->lock);
            bool had_pooled = p->stats.blocks_pooled > 0;
            if (had_pooled)
                pool_trim_locked(p);
            mxc__mutex_unlock(&p->lock);
            if (had_pooled)
                rc = system_alloc(p, ctx, cap, &ptr);
        }
        if (rc != MXC_OK) {
            char reason[512];
            snprintf(reason, sizeof reason, "%s", mxc_last_error());
            rc = mxc__error(rc,
                            "mxc_storage_alloc: cannot allocate %zu bytes (capacity %zu) "
                            "on %s: %s",
                            size, cap, name, reason);
            goto fail;
        }
    }

    mxc__mutex_lock(&p->lock);
    mxc_storage_stats *s = &p->stats;
    s->bytes_in_use += cap;
    s->bytes_requested += size;
    s->blocks_in_use++;
    if (s->bytes_in_use > s->peak_bytes_in_use)
        s->peak_bytes_in_use = s->bytes_in_use;
    s->alloc_count++;
    if (hit)
        s->pool_hits++;
    else
        s->system_allocs++;
    mxc__mutex_unlock(&p->lock);

    *out = (mxc_storage_block){.ptr = ptr, .size = size, .capacity = cap, .ctx = ctx};
    return MXC_OK;
fail:
    return rc;
}

int mxc_storage_free(mxc_storage_block *block) {
    int rc = MXC_OK;
    struct pool *p = NULL;
    char name[48];
    if (block == NULL || block->ptr == NULL)
        return MXC_OK;
    mxc_storage_block b = *block;
    mxc__ctx_name(b.ctx, name, sizeof name);
    MXC_CHECK(find_pool("mxc_storage_free", b.ctx, &p) == MXC_OK, MXC_EMISUSE,
              "mxc_storage_free: block %p names context %s, where mxc_storage_alloc cannot "
              "have allocated it",
              b.ptr, name);
    MXC_CHECK(b.capacity != 0 && b.capacity >= b.size, MXC_EMISUSE,
              "mxc_storage_free: block %p on %s has size %zu and capacity %zu: not a block "
              "from mxc_storage_alloc",
              b.ptr, name, b.size, b.capacity);
    MXC_CHECK(((uintptr_t)b.ptr & (STORAGE_ALIGN - 1)) == 0, MXC_EMISUSE,
              "mxc_storage_free: block %p on %s is not %zu-byte aligned: not a block from "
              "mxc_storage_alloc",
              b.ptr, name, STORAGE_ALIGN);

    mxc__mutex_lock(&p->lock);
    mxc_storage_stats *s = &p->stats;
    if (s->blocks_in_use == 0 || s->bytes_in_use < b.capacity) {
        size_t in_use = s->bytes_in_use;
        mxc__mutex_unlock(&p->lock);
        rc = mxc__error(MXC_EMISUSE,
                        "mxc_storage_free: block %p of capacity %zu is larger than all %zu "
                        "bytes in use on %s: freed twice (through a copy?) or not from "
                        "mxc_storage_alloc",
                        b.ptr, b.capacity, in_use, name);
        goto fail;
    }
    s->bytes_in_use -= b.capacity;
    s->bytes_requested -= b.size <= s->bytes_requested ? b.size : s->bytes_requested;
    s->blocks_in_use--;
    s->free_count++;
    /* Read under the lock, so a block freed while pooling is being turned off is either
     * trimmed by mxc_storage_set_pooling or not pooled at all. */
    bool kept = atomic_load(&pooling_on) && mxc_storage_class_size(b.capacity) == b.capacity &&
                pool_put(p, b.capacity, b.ptr);
    if (!kept)
        system_free(p, b.ptr);
    mxc__mutex_unlock(&p->lock);

    *block = (mxc_storage_block){.ctx = b.ctx};
    return MXC_OK;
fail:
    return rc;
}

int mxc_storage_trim(mxc_context ctx) {
    struct pool *p = NULL;
    int rc = find_pool("mxc_storage_trim", ctx, &p);
    if (rc != MXC_OK)
        return rc;
    mxc__mutex_lock(&p->lock);
    pool_trim_locked(p);
    mxc__mutex_unlock(&p->lock);
    return MXC_OK;
}

void mxc__storage_set_shutdown_hook(void (*release)(void)) {
    atomic_store(&shutdown_hook, release);
}

int mxc_storage_shutdown(void) {
    int rc = MXC_OK;
    ensure_init();
    void (*release)(void) = atomic_load(&shutdown_hook);
    if (release != NULL)
        release();
    for (int i = 0; i < NUM_POOLS; i++) {
        struct pool *p = &pools[i];
        mxc__mutex_lock(&p->lock);
        pool_trim_locked(p);
        size_t blocks = p->stats.blocks_in_use, bytes = p->stats.bytes_in_use;
        mxc__mutex_unlock(&p->lock);
        if (blocks > 0 && rc == MXC_OK) {
            char name[48];
            rc = mxc__error(
                MXC_EMISUSE, "mxc_storage_shutdown: %zu block%s (%zu bytes) still in use on %s",
                blocks, blocks == 1 ? "" : "s", bytes, mxc__ctx_name(p->ctx, name, sizeof name));
        }
    }
    return rc;
}

int mxc_storage_get_stats(mxc_context ctx, mxc_storage_stats *out) {
    struct pool *p = NULL;
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_storage_get_stats: out is NULL");
    *out = (mxc_storage_stats){0};
    int rc = find_pool("mxc_storage_get_stats", ctx, &p);
    if (rc != MXC_OK)
        return rc;
    mxc__mutex_lock(&p->lock);
    *out = p->stats;
    mxc__mutex_unlock(&p->lock);
    return MXC_OK;
}

int mxc_storage_reset_stats(mxc_context ctx) {
    struct pool *p = NULL;
    int rc = find_pool("mxc_storage_reset_stats", ctx, &p);
    if (rc != MXC_OK)
        return rc;
    mxc__mutex_lock(&p->lock);
    mxc_storage_stats *s = &p->stats;
    s->peak_bytes_in_use = s->bytes_in_use;
    s->alloc_count = s->free_count = s->pool_hits = 0;
    s->system_allocs = s->system_frees = 0;
    mxc__mutex_unlock(&p->lock);
    return MXC_OK;
}

void mxc_storage_set_pooling(int enabled) {
    ensure_init();
    atomic_store(&pooling_on, enabled != 0);
    if (enabled)
        return;
    for (int i = 0; i < NUM_POOLS; i++) {
        mxc__mutex_lock(&pools[i].lock);
        pool_trim_locked(&pools[i]);
        mxc__mutex_unlock(&pools[i].lock);
    }
}

int mxc_storage_pooling(void) {
    ensure_init();
    return atomic_load(&pooling_on) != 0;
}

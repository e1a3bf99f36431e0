/*
 * resource/resource.c — the resource manager: per device context, a few temp-space
 * copies and a random generator, each guarded by its own engine variable on the default
 * engine. Created on first request; released at exit before the engine is destroyed. The
 * temp buffers are also given back at mxc_storage_shutdown (they belong to no user
 * object) and grow again on the next use.
 */
#include "resource/resource.h"

#include "common/common.h"
#include "common/thread.h"
#include "storage/storage_impl.h"

#include <stdatomic.h>
#include <stdlib.h>

#define RES_MAX_COPIES  16
#define RES_MAX_DEVICES 17 /* the CPU, then GPUs 0..15 */

struct device_resources {
    bool ready;
    int num_temp;
    struct mxc__resource temp[RES_MAX_COPIES];
    struct mxc__resource random;
    atomic_uint next_temp;
};

static mxc__mutex lock = PTHREAD_MUTEX_INITIALIZER;
static struct device_resources devices[RES_MAX_DEVICES];
static mxc_engine *engine;
static uint64_t current_seed = 0;
static bool exit_hook;

static int device_slot(mxc_context ctx) {
    if (ctx.dev_type == MXC_CPU || ctx.dev_type == MXC_CPU_PINNED || ctx.dev_type == 0)
        return 0;
    if (ctx.dev_type == MXC_GPU && ctx.dev_id >= 0 && ctx.dev_id < RES_MAX_DEVICES - 1)
        return 1 + ctx.dev_id;
    return -1;
}

static int free_space(const mxc_run_ctx *rctx, void *arg) {
    struct mxc__resource *r = arg;
    mxc_storage_free(&r->space);
    return MXC_OK;
}

/* Pushes the deletion of every resource variable (and so of its memory) after the
 * operations that use it; the default engine, destroyed later at exit, drains them. */
static void release_all(void) {
    mxc__mutex_lock(&lock);
    for (int d = 0; d < RES_MAX_DEVICES; d++) {
        struct device_resources *dev = &devices[d];
        if (!dev->ready)
            continue;
        for (int i = 0; i < dev->num_temp; i++)
            mxc_engine_delete_var(engine, dev->temp[i].var, free_space, &dev->temp[i]);
        mxc_engine_delete_var(engine, dev->random.var, NULL, NULL);
        dev->ready = false;
    }
    mxc__mutex_unlock(&lock);
}

/* The storage shutdown hook: frees every temp buffer in an operation on its variable, so
 * after the operations that use it and before the next (which grows a new one), and waits
 * for that. Neither takes memory once the engine's pools have grown (the naive engine's
 * wait on an idle variable never does); when the push cannot be made the buffer stays,
 * and the shutdown reports it. */
static void release_temp_space(void) {
    mxc__mutex_lock(&lock);
    for (int d = 0; d < RES_MAX_DEVICES; d++) {
        struct device_resources *dev = &devices[d];
        for (int i = 0; dev->ready && i < dev->num_temp; i++) {
            mxc_engine_op_desc desc = {.fn = free_space,
                                       .arg = &dev->temp[i],
                                       .mutable_vars = &dev->temp[i].var,
                                       .num_mutable_vars = 1,
                                       .name = "release_temp_space"};
            if (mxc_engine_push(engine, &desc) == MXC_OK)
                mxc_engine_wait_for_var(engine, dev->temp[i].var);
        }
    }
    mxc__mutex_unlock(&lock);
}

static int init_resource(struct mxc__resource *r, int kind, mxc_context ctx, uint64_t seed) {
    r->kind = kind;
    r->ctx = ctx;
    r->space = (mxc_storage_block){0};
    mxc__philox_init(&r->rng, seed, 0);
    /* a state variable: an operation that fails with a resource does not fail its next users */
    return mxc_engine_new_state_var(engine, &r->var);
}

static int init_device(struct device_resources *dev, mxc_context ctx) {
    int rc = MXC_OK;
    int made = 0;
    if (engine == NULL)
        MXC_TRY(mxc_engine_get_default(&engine));
    long n = mxc__env_long("MXC_EXEC_NUM_TEMP", 1);
    dev->num_temp = n < 1 ? 1 : n > RES_MAX_COPIES ? RES_MAX_COPIES : (int)n;
    for (; made < dev->num_temp; made++)
        MXC_TRY(init_resource(&dev->temp[made], MXC__RES_TEMP, ctx, 0));
    MXC_TRY(init_resource(&dev->random, MXC__RES_RANDOM, ctx, current_seed));
    atomic_init(&dev->next_temp, 0);
    dev->ready = true;
    if (!exit_hook) {
        /* atexit handlers run in reverse: this one runs before the engine's. */
        atexit(release_all);
        mxc__storage_set_shutdown_hook(release_temp_space);
        exit_hook = true;
    }
    return MXC_OK;
fail:
    for (int i = 0; i < made; i++)
        mxc_engine_delete_var(engine, dev->temp[i].var, NULL, NULL);
    return rc;
}

int mxc__resource_get(mxc_context ctx, int kind, struct mxc__resource **out) {
    int rc = MXC_OK;
    *out = NULL;
    int slot = device_slot(ctx);
    MXC_CHECK(slot >= 0, MXC_EINVAL, "resource: bad context (%d, %d)", ctx.dev_type, ctx.dev_id);
    MXC_CHECK(slot == 0 || ctx.dev_id < mxc_gpu_count(), MXC_ENODEV,
              "resource: gpu(%d) does not exist (%d usable)", ctx.dev_id, mxc_gpu_count());
    MXC_CHECK(kind == MXC__RES_TEMP || kind == MXC__RES_RANDOM, MXC_EINVAL,
              "resource: unknown kind %d", kind);
    struct device_resources *dev = &devices[slot];
    mxc__mutex_lock(&lock);
    if (!dev->ready)
        rc = init_device(dev, slot == 0 ? mxc_cpu() : ctx);
    mxc__mutex_unlock(&lock);
    if (rc != MXC_OK)
        return rc;
    if (kind == MXC__RES_RANDOM) {
        *out = &dev->random;
    } else {
        unsigned i = atomic_fetch_add_explicit(&dev->next_temp, 1, memory_order_relaxed);
        *out = &dev->temp[i % (unsigned)dev->num_temp];
    }
    return MXC_OK;
fail:
    return rc;
}

int mxc__resource_temp(struct mxc__resource *r, size_t bytes, void **out) {
    if (r->space.ptr == NULL || r->space.capacity < bytes) {
        mxc_storage_free(&r->space);
        int rc = mxc_storage_alloc(r->ctx, bytes, &r->space);
        if (rc != MXC_OK)
            return rc;
    }
    *out = r->space.ptr;
    return MXC_OK;
}

struct seed_request {
    struct mxc__resource *resource;
    uint64_t seed;
};

static int seed_fn(const mxc_run_ctx *rctx, void *arg) {
    struct seed_request *req = arg;
    mxc__philox_init(&req->resource->rng, req->seed, 0);
    return MXC_OK;
}

int mxc_random_seed(uint64_t seed) {
    int rc = MXC_OK;
    mxc__mutex_lock(&lock);
    current_seed = seed;
    if (!devices[0].ready)
        rc = init_device(&devices[0], mxc_cpu());
    for (int d = 0; d < RES_MAX_DEVICES && rc == MXC_OK; d++) {
        if (!devices[d].ready)
            continue;
        struct seed_request *req = mxc__malloc(sizeof *req);
        if (req == NULL) {
            rc = mxc__error(MXC_ENOMEM, "mxc_random_seed: out of memory");
            break;
        }
        *req = (struct seed_request){&devices[d].random, seed};
        mxc_engine_op_desc desc = {.fn = seed_fn,
                                   .arg = req,
                                   .arg_free = mxc__free,
                                   .mutable_vars = &devices[d].random.var,
                                   .num_mutable_vars = 1,
                                   .name = "random_seed"};
        rc = mxc_engine_push(engine, &desc);
        if (rc != MXC_OK)
            mxc__free(req);
    }
    mxc__mutex_unlock(&lock);
    return rc;
}

/*
 * engine/workers.c — where ready runs execute. The naive engine runs them on the thread
 * that made them ready; the pooled engine has one CPU pool and one pool for copies; the
 * per-device engine has CPU workers, a CPU priority worker and, created on first use,
 * compute and copy workers per GPU, each GPU worker owning a CUDA stream.
 *
 * A worker that finishes a run and thereby makes another ready on its own pool keeps it
 * and runs it next instead of queueing it: a chain of dependent operations then costs no
 * queue hand-off or thread wake-up per step.
 */
#include "engine/engine_impl.h"

#include <stdio.h>
#include <string.h>

static _Thread_local struct worker *tl_worker;

/* Runs made ready while this thread already executes inline runs wait here, so inline
 * execution is a loop, not a recursion as deep as the chain. */
static _Thread_local struct {
    struct mxc_engine_done *head, *tail;
    bool active;
} tl_inline;

struct worker *mxc__current_worker(void) {
    return tl_worker;
}

static void run_inline(struct mxc_engine_done *run) {
    run->next_inline = NULL;
    if (tl_inline.active) {
        if (tl_inline.tail)
            tl_inline.tail->next_inline = run;
        else
            tl_inline.head = run;
        tl_inline.tail = run;
        return;
    }
    tl_inline.active = true;
    while (run) {
        mxc_run_ctx rctx = {run->op->ctx, NULL, -1};
        mxc__engine_execute(run, &rctx);
        run = tl_inline.head;
        if (run) {
            tl_inline.head = run->next_inline;
            if (tl_inline.head == NULL)
                tl_inline.tail = NULL;
        }
    }
    tl_inline.active = false;
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct worker_pool *pool = w->pool;
    tl_worker = w;
    if (pool->ctx.dev_type == MXC_GPU &&
        mxc__cuda_worker_init(pool->ctx.dev_id, pool->copy_pool, &w->stream) != MXC_OK)
        mxc__log(MXC_LOG_ERROR, "engine: worker %s/%d: %s", pool->name, w->index, mxc_last_error());
    for (;;) {
        struct mxc_engine_done *run = w->next_run;
        if (run) {
            w->next_run = NULL;
        } else {
            void *item;
            if (!mxc__queue_pop(&pool->queue, &item))
                break;
            run = item;
        }
        mxc_run_ctx rctx = {run->op->ctx, w->stream, w->index};
        mxc__engine_execute(run, &rctx);
    }
    if (w->stream)
        mxc__cuda_worker_fini(w->stream);
    tl_worker = NULL;
    return NULL;
}

static void pool_free(struct worker_pool *pool, int started) {
    if (pool == NULL)
        return;
    mxc__queue_close(&pool->queue);
    for (int i = 0; i < started; i++)
        mxc__thread_join(pool->workers[i].thread);
    for (int i = 0; i < pool->num_workers; i++)
        mxc__prof_buffer_destroy(&pool->workers[i].prof);
    mxc__queue_destroy(&pool->queue);
    mxc__free(pool->workers);
    mxc__free(pool);
}

static int pool_create(struct mxc_engine *eng, const char *name, mxc_context ctx, bool copy,
                       bool by_priority, int num_workers, struct worker_pool **out) {
    *out = NULL;
    struct worker_pool *pool = mxc__calloc(1, sizeof *pool);
    if (pool == NULL)
        return mxc__error(MXC_ENOMEM, "engine: out of memory creating pool %s", name);
    pool->workers = mxc__calloc((size_t)num_workers, sizeof *pool->workers);
    if (pool->workers == NULL || mxc__queue_init(&pool->queue, by_priority, true) != MXC_OK) {
        mxc__free(pool->workers);
        mxc__free(pool);
        return mxc__error(MXC_ENOMEM, "engine: out of memory creating pool %s", name);
    }
    pool->engine = eng;
    pool->ctx = ctx;
    pool->copy_pool = copy;
    pool->num_workers = num_workers;
    snprintf(pool->name, sizeof pool->name, "%s", name);
    for (int i = 0; i < num_workers; i++) {
        struct worker *w = &pool->workers[i];
        w->pool = pool;
        w->index = i;
        mxc__prof_buffer_init(&w->prof);
    }
    for (int i = 0; i < num_workers; i++) {
        char thread_name[16];
        snprintf(thread_name, sizeof thread_name, "mxc-%s%d", name, i);
        int rc = mxc__thread_start(&pool->workers[i].thread, worker_main, &pool->workers[i],
                                   thread_name);
        if (rc != MXC_OK) {
            pool_free(pool, i);
            return rc;
        }
    }
    *out = pool;
    return MXC_OK;
}

int mxc__workers_start(struct mxc_engine *eng) {
    const mxc_engine_config *c = &eng->config;
    int rc = MXC_OK;
    switch (eng->type) {
    case MXC_ENGINE_POOLED:
        rc = pool_create(eng, "cpu", mxc_cpu(), false, false, c->cpu_workers, &eng->cpu);
        if (rc == MXC_OK)
            rc = pool_create(eng, "io", mxc_cpu(), true, false, 1, &eng->io);
        break;
    case MXC_ENGINE_PERDEVICE:
        rc = pool_create(eng, "cpu", mxc_cpu(), false, false, c->cpu_workers, &eng->cpu);
        if (rc == MXC_OK)
            rc = pool_create(eng, "prio", mxc_cpu(), false, true, c->cpu_priority_workers,
                             &eng->cpu_priority);
        break;
    default: break;
    }
    return rc;
}

void mxc__workers_stop(struct mxc_engine *eng) {
    struct worker_pool *pools[] = {eng->cpu, eng->cpu_priority, eng->io};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(pools); i++)
        if (pools[i])
            pool_free(pools[i], pools[i]->num_workers);
    eng->cpu = eng->cpu_priority = eng->io = NULL;
    for (int d = 0; d < ENGINE_MAX_GPUS; d++) {
        for (int k = 0; k < 2; k++) {
            struct worker_pool *p = atomic_load(&eng->gpu[d][k]);
            if (p)
                pool_free(p, p->num_workers);
            atomic_store(&eng->gpu[d][k], NULL);
        }
    }
}

/* The GPU pool for (device, copy?), created on first use. */
static struct worker_pool *gpu_pool(struct mxc_engine *eng, int dev_id, bool copy) {
    _Atomic(struct worker_pool *) *slot = &eng->gpu[dev_id][copy ? 1 : 0];
    struct worker_pool *pool = atomic_load_explicit(slot, memory_order_acquire);
    if (pool)
        return pool;
    mxc__mutex_lock(&eng->gpu_lock);
    pool = atomic_load_explicit(slot, memory_order_relaxed);
    if (pool == NULL) {
        char name[8];
        snprintf(name, sizeof name, "%s%d", copy ? "gcp" : "gpu", dev_id);
        int n = copy ? eng->config.gpu_copy_workers : eng->config.gpu_workers;
        if (pool_create(eng, name, mxc_gpu(dev_id), copy, !copy, n, &pool) == MXC_OK)
            atomic_store_explicit(slot, pool, memory_order_release);
    }
    mxc__mutex_unlock(&eng->gpu_lock);
    return pool;
}

static bool is_copy(int prop) {
    return prop == MXC_PROP_COPY_TO_DEVICE || prop == MXC_PROP_COPY_FROM_DEVICE;
}

static struct worker_pool *pool_for(struct mxc_engine *eng, const struct engine_op *op) {
    if (eng->type == MXC_ENGINE_POOLED)
        return is_copy(op->prop) ? eng->io : eng->cpu;
    if (op->ctx.dev_type == MXC_GPU)
        return gpu_pool(eng, op->ctx.dev_id, is_copy(op->prop));
    return op->prop == MXC_PROP_CPU_PRIORITIZED ? eng->cpu_priority : eng->cpu;
}

void mxc__engine_dispatch(struct mxc_engine *eng, struct mxc_engine_done *run) {
    const struct engine_op *op = run->op;
    if (eng->type == MXC_ENGINE_NAIVE || op->prop == MXC_PROP_ASYNC) {
        run_inline(run);
        return;
    }
    struct worker_pool *pool = pool_for(eng, op);
    if (pool == NULL) { /* a GPU pool could not start; the last error says why */
        mxc__engine_fail(run, mxc_last_error_code());
        return;
    }
    struct worker *w = tl_worker;
    if (w && w->pool == pool && w->next_run == NULL && !pool->queue.by_priority) {
        w->next_run = run;
        return;
    }
    if (mxc__queue_push(&pool->queue, run, run->priority) != MXC_OK)
        run_inline(run); /* no memory to queue it: correct, only less parallel */
}

void mxc__workers_foreach_prof(struct mxc_engine *eng,
                               void (*fn)(struct prof_buffer *b, void *user), void *user) {
    struct worker_pool *pools[3 + 2 * ENGINE_MAX_GPUS];
    size_t n = 0;
    pools[n++] = eng->cpu;
    pools[n++] = eng->cpu_priority;
    pools[n++] = eng->io;
    for (int d = 0; d < ENGINE_MAX_GPUS; d++)
        for (int k = 0; k < 2; k++)
            pools[n++] = atomic_load(&eng->gpu[d][k]);
    for (size_t i = 0; i < n; i++)
        if (pools[i])
            for (int j = 0; j < pools[i]->num_workers; j++)
                fn(&pools[i]->workers[j].prof, user);
    fn(&eng->prof_shared, user);
}

/*
 * io/iter.c — the common data iterator: sharding, per-epoch permutations, batching with
 * the last-batch rule, and the prefetch thread that fills batch buffers ahead of the
 * consumer. Readers (idx.c, csv.c, array_iter.c) only provide a source (io_impl.h).
 *
 * Buffers and the reuse rule. The iterator owns prefetch + 1 slots, each a data and a
 * label array. A slot is in exactly one place: the free list, the prefetch thread's hands
 * (being filled), the ready queue, or the consumer's hands (the current batch). The
 * consumer gives its slot back at the next call to next/reset; the prefetch thread then
 * refills it inside an engine write on its arrays (fill_slot), so engine operations the
 * consumer pushed reading the batch finish before its memory is rewritten. Sources write
 * straight into the batch arrays, which live in pinned memory when a GPU can read them.
 *
 * Epochs. `want_epoch` (under the lock) is the epoch the consumer wants; reset increments
 * it and, in the same critical section, drains the ready queue. The prefetch thread
 * publishes a batch (or the end marker, or an error) only while its epoch is still the
 * wanted one, else it returns the slot to the free list and starts over, so the ready
 * queue never holds a stale entry and needs at most one entry per slot plus one marker.
 */
#include "common/common.h"
#include "common/handle.h"
#include "common/thread.h"
#include "io/io_impl.h"
#include "mxc/engine.h"
#include "ndarray/ndarray_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITER_MAGIC   0x49544552u /* "ITER" */
#define ITER_DEAD    0x49544546u /* "ITEF": freed (common/handle.h) */
#define MAX_PREFETCH 64

enum entry_kind { ENTRY_BATCH, ENTRY_END, ENTRY_ERROR };

/* One element of the ready queue. */
struct entry {
    int kind;
    int slot;
    int64_t pad;
    int code;
    char message[512];
};

struct slot {
    mxc_ndarray *data, *label;
};

enum consumer_state { STATE_RUNNING, STATE_END, STATE_ERROR };

struct mxc_data_iter {
    _Atomic uint32_t magic;
    struct mxc__io_source src;
    mxc_data_iter_params params;
    int64_t part_begin, part_count, num_batches;
    int64_t data_elems, label_elems; /* per sample */
    mxc_shape batch_data_shape, batch_label_shape;
    int num_slots;
    struct slot *slots;

    /* Prefetch thread only. */
    size_t data_bytes; /* one sample's data */
    int64_t *perm;
    int64_t *batch_index; /* the samples of the batch being filled */

    /* Shared, under `lock`. */
    mxc__mutex lock;
    mxc__cond producer_cv, consumer_cv;
    int *free_slots;
    int num_free;
    struct entry *ready; /* ring of num_slots + 1 */
    int ready_head, ready_count;
    int64_t want_epoch;
    bool stop;
    bool thread_started;
    mxc__thread thread;
    mxc_data_iter *prefetch_prev, *prefetch_next; /* under prefetch_lock while the thread runs */

    /* The engine's hand-over of the buffer being filled (fill_slot), under `lock`. */
    int filling;           /* its slot */
    bool handed;           /* the engine ran hand_over for it */
    mxc_engine_done *done; /* that run, completed once the buffer is written */
    int hand_rc;           /* mxc__nd_tensor's outcome */
    struct mxc__tensor to_data, to_label;

    /* Consumer only. */
    int current; /* slot of the current batch, -1 when none */
    int64_t pad;
    int state;
    int error_code;
    char error_message[512];
};

static mxc__handle_kind iter_kind =
    MXC__HANDLE_KIND(struct mxc_data_iter, "a data iterator", ITER_MAGIC, ITER_DEAD);

/* ---- Permutations ------------------------------------------------------------------ */

uint64_t mxc__io_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t mxc__io_below(uint64_t *state, uint64_t n) {
    uint64_t threshold = (0 - n) % n;
    for (;;) {
        uint64_t r = mxc__io_splitmix64(state);
        if (r >= threshold)
            return r % n;
    }
}

/* The order of epoch `epoch`: identity, or a Fisher-Yates permutation drawn from a
 * generator seeded by (seed, epoch) only, so it never depends on timing. */
static void epoch_order(const mxc_data_iter *it, int64_t epoch, int64_t *perm) {
    for (int64_t i = 0; i < it->part_count; i++)
        perm[i] = i;
    if (!it->params.shuffle)
        return;
    uint64_t state = it->params.seed ^ 0x6d78632d696f0000ull;
    (void)mxc__io_splitmix64(&state);
    state ^= (uint64_t)epoch * 0xd1b54a32d192ed03ull;
    for (int64_t i = it->part_count - 1; i > 0; i--) {
        int64_t j = (int64_t)mxc__io_below(&state, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* ---- Prefetch thread --------------------------------------------------------------- */

/* The engine operation that owns the buffer being filled: it runs once every operation
 * pushed before on the buffer's arrays has finished (the reuse rule), hands their memory
 * to the prefetch thread and returns; the prefetch thread completes it when the batch is
 * written. Pushed with `overwrite`, so a failure the consumer's work left on the arrays
 * neither stops it (it always runs: the prefetch thread waits for it) nor outlives it. */
static void hand_over(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done) {
    (void)rctx;
    mxc_data_iter *it = arg;
    struct slot *s = &it->slots[it->filling];
    int rc = mxc__nd_tensor(s->data, true, &it->to_data);
    if (rc == MXC_OK && s->label)
        rc = mxc__nd_tensor(s->label, true, &it->to_label);
    mxc__mutex_lock(&it->lock);
    it->done = done;
    it->hand_rc = rc;
    it->handed = true;
    mxc__cond_broadcast(&it->producer_cv);
    mxc__mutex_unlock(&it->lock);
}

/* Fills slot `slot` with batch `b` of epoch `epoch`'s order `perm`, the source writing
 * straight into the batch arrays; writes the padding count. */
static int fill_slot(mxc_data_iter *it, int64_t epoch, const int64_t *perm, int64_t b, int slot,
                     int64_t *pad) {
    int rc = MXC_OK;
    int64_t bs = it->params.batch_size;
    *pad = 0;
    for (int64_t i = 0; i < bs; i++) {
        int64_t pos = b * bs + i;
        if (pos >= it->part_count) {
            (*pad)++;
            pos %= it->part_count; /* wrap around; several times if the part is tiny */
        }
        it->batch_index[i] = it->part_begin + perm[pos];
    }

    struct slot *s = &it->slots[slot];
    mxc_engine *eng;
    MXC_TRY(mxc_engine_get_default(&eng));
    mxc_var *vars[2] = {mxc__nd_var(s->data), s->label ? mxc__nd_var(s->label) : NULL};
    mxc_engine_op_desc d = {.async_fn = hand_over,
                            .arg = it,
                            .mutable_vars = vars,
                            .num_mutable_vars = s->label ? 2 : 1,
                            .prop = MXC_PROP_ASYNC,
                            .name = "data iterator batch",
                            .overwrite = 1};
    mxc__mutex_lock(&it->lock);
    it->filling = slot;
    it->handed = false;
    mxc__mutex_unlock(&it->lock);
    MXC_TRY(mxc_engine_push(eng, &d));
    mxc__mutex_lock(&it->lock);
    while (!it->handed)
        mxc__cond_wait(&it->producer_cv, &it->lock);
    mxc_engine_done *done = it->done;
    rc = it->hand_rc;
    mxc__mutex_unlock(&it->lock);

    unsigned char *data = it->to_data.data;
    float *label = s->label ? it->to_label.data : NULL;
    if (rc == MXC_OK && it->src.read_batch) {
        rc = it->src.read_batch(it->src.impl, epoch, b * bs, it->batch_index, bs, data, label);
    } else if (rc == MXC_OK) {
        for (int64_t i = 0; rc == MXC_OK && i < bs; i++)
            rc = it->src.read(it->src.impl, it->batch_index[i],
                              (float *)(void *)(data + (size_t)i * it->data_bytes),
                              label ? label + i * it->label_elems : NULL);
    }
    mxc_engine_complete(done, rc);
fail:
    return rc;
}

/* Appends an entry; the caller holds the lock and has checked the epoch. */
static void publish(mxc_data_iter *it, int kind, int slot, int64_t pad, int code) {
    int n = it->num_slots + 1;
    struct entry *e = &it->ready[(it->ready_head + it->ready_count) % n];
    MXC_ASSERT(it->ready_count < n);
    e->kind = kind;
    e->slot = slot;
    e->pad = pad;
    e->code = code;
    e->message[0] = '\0';
    if (kind == ENTRY_ERROR)
        snprintf(e->message, sizeof e->message, "%s", mxc_last_error());
    it->ready_count++;
    mxc__cond_signal(&it->consumer_cv);
}

static void *prefetch_main(void *arg) {
    mxc_data_iter *it = arg;
    int64_t done_epoch = -1; /* the last epoch run to its end (or to an error) */
    mxc__mutex_lock(&it->lock);
    for (;;) {
        while (!it->stop && it->want_epoch == done_epoch)
            mxc__cond_wait(&it->producer_cv, &it->lock);
        if (it->stop)
            break;
        int64_t epoch = it->want_epoch;
        mxc__mutex_unlock(&it->lock);

        epoch_order(it, epoch, it->perm);
        bool abandoned = false;
        for (int64_t b = 0; b < it->num_batches && !abandoned; b++) {
            mxc__mutex_lock(&it->lock);
            while (!it->stop && it->want_epoch == epoch && it->num_free == 0)
                mxc__cond_wait(&it->producer_cv, &it->lock);
            if (it->stop || it->want_epoch != epoch) {
                abandoned = true;
                mxc__mutex_unlock(&it->lock);
                break;
            }
            int slot = it->free_slots[--it->num_free];
            mxc__mutex_unlock(&it->lock);

            int64_t pad = 0;
            int rc = fill_slot(it, epoch, it->perm, b, slot, &pad);

            mxc__mutex_lock(&it->lock);
            bool current = !it->stop && it->want_epoch == epoch;
            if (rc == MXC_OK && current) {
                publish(it, ENTRY_BATCH, slot, pad, MXC_OK);
            } else {
                it->free_slots[it->num_free++] = slot;
                if (rc != MXC_OK && current) {
                    publish(it, ENTRY_ERROR, -1, 0, rc);
                    done_epoch = epoch; /* an error ends the epoch */
                }
                abandoned = true;
            }
            mxc__mutex_unlock(&it->lock);
        }

        mxc__mutex_lock(&it->lock);
        if (!abandoned && !it->stop && it->want_epoch == epoch) {
            publish(it, ENTRY_END, -1, 0, MXC_OK);
            done_epoch = epoch;
        }
        /* Abandoned for a newer epoch: the loop starts it; for stop: the loop exits. */
    }
    mxc__mutex_unlock(&it->lock);
    return NULL;
}

/* ---- Creation ---------------------------------------------------------------------- */

void mxc_data_iter_params_init(mxc_data_iter_params *params) {
    if (!params)
        return;
    memset(params, 0, sizeof *params);
    params->batch_size = 0;
    params->shuffle = 0;
    params->seed = 0;
    params->round_batch = 1;
    params->num_parts = 1;
    params->part_index = 0;
    params->prefetch = 2;
    params->ctx = mxc_cpu();
}

/* The shape (batch, dims of `s`...), or (batch) for a one-element label. */
static int batch_shape(int64_t batch, const mxc_shape *s, bool squeeze, mxc_shape *out) {
    memset(out, 0, sizeof *out);
    if (squeeze && mxc_shape_size(s) == 1) {
        out->ndim = 1;
        out->dims[0] = batch;
        return MXC_OK;
    }
    if (s->ndim < 1 || s->ndim >= MXC_MAX_NDIM)
        return mxc__error(MXC_EINVAL, "data iterator: a sample shape needs 1 to %d dimensions",
                          MXC_MAX_NDIM - 1);
    out->ndim = s->ndim + 1;
    out->dims[0] = batch;
    for (int d = 0; d < s->ndim; d++)
        out->dims[d + 1] = s->dims[d];
    return MXC_OK;
}

/* ---- Prefetch threads at exit -------------------------------------------------------
 * A program may exit with iterators it never freed. Their prefetch threads would go on
 * pushing copies onto the default engine while the engine's exit hook destroys it (a hang
 * or a use after free), so the hook below stops them first: it is registered when the
 * first thread starts, after the engine's, and exit hooks run in reverse order. */

static pthread_mutex_t prefetch_lock = PTHREAD_MUTEX_INITIALIZER;
static mxc_data_iter *prefetching; /* iterators whose prefetch thread runs */
static bool exit_hook;

/* Ends the prefetch thread; the caller holds prefetch_lock. */
static void stop_prefetch(mxc_data_iter *it) {
    if (!it->thread_started)
        return;
    mxc__mutex_lock(&it->lock);
    it->stop = true;
    mxc__cond_broadcast(&it->producer_cv);
    mxc__mutex_unlock(&it->lock);
    mxc__thread_join(it->thread);
    it->thread_started = false;
    if (it->prefetch_prev)
        it->prefetch_prev->prefetch_next = it->prefetch_next;
    else
        prefetching = it->prefetch_next;
    if (it->prefetch_next)
        it->prefetch_next->prefetch_prev = it->prefetch_prev;
}

static void stop_all_prefetch(void) {
    pthread_mutex_lock(&prefetch_lock);
    while (prefetching)
        stop_prefetch(prefetching);
    pthread_mutex_unlock(&prefetch_lock);
}

static int start_prefetch(mxc_data_iter *it) {
    int rc = MXC_OK;
    pthread_mutex_lock(&prefetch_lock);
    if (!exit_hook)
        exit_hook = atexit(stop_all_prefetch) == 0;
    MXC_TRY(mxc__thread_start(&it->thread, prefetch_main, it, "mxc-prefetch"));
    it->thread_started = true;
    it->prefetch_prev = NULL;
    it->prefetch_next = prefetching;
    if (prefetching)
        prefetching->prefetch_prev = it;
    prefetching = it;
fail:
    pthread_mutex_unlock(&prefetch_lock);
    return rc;
}

static void iter_destroy(mxc_data_iter *it) {
    pthread_mutex_lock(&prefetch_lock);
    stop_prefetch(it);
    pthread_mutex_unlock(&prefetch_lock);
    if (it->slots) {
        for (int i = 0; i < it->num_slots; i++) {
            mxc_nd_free(it->slots[i].data);
            mxc_nd_free(it->slots[i].label);
        }
    }
    mxc__free(it->slots);
    mxc__free(it->free_slots);
    mxc__free(it->ready);
    mxc__free(it->perm);
    mxc__free(it->batch_index);
    if (it->src.free)
        it->src.free(it->src.impl);
    mxc__cond_destroy(&it->producer_cv);
    mxc__cond_destroy(&it->consumer_cv);
    mxc__mutex_destroy(&it->lock);
    mxc__handle_free(&iter_kind, it);
}

int mxc__io_iter_create(struct mxc__io_source *src, const mxc_data_iter_params *params,
                        mxc_data_iter **out) {
    int rc = MXC_OK;
    mxc_data_iter *it = NULL;
    const char *name = src->name;
    if (out)
        *out = NULL;
    MXC_CHECK(out != NULL, MXC_EINVAL, "%s iterator: out is NULL", name);
    MXC_CHECK(params != NULL, MXC_EINVAL, "%s iterator: params is NULL", name);
    const mxc_data_iter_params *p = params;
    MXC_CHECK(p->batch_size > 0, MXC_EINVAL, "%s iterator: batch_size is %lld, must be > 0", name,
              (long long)p->batch_size);
    MXC_CHECK(p->num_parts >= 1, MXC_EINVAL, "%s iterator: num_parts is %d, must be >= 1", name,
              p->num_parts);
    MXC_CHECK(p->part_index >= 0 && p->part_index < p->num_parts, MXC_EINVAL,
              "%s iterator: part_index is %d, must be in [0, num_parts = %d)", name, p->part_index,
              p->num_parts);
    MXC_CHECK(p->prefetch >= 1 && p->prefetch <= MAX_PREFETCH, MXC_EINVAL,
              "%s iterator: prefetch is %d, must be in [1, %d]", name, p->prefetch, MAX_PREFETCH);
    MXC_CHECK(p->ctx.dev_type == MXC_CPU, MXC_ENOTSUP,
              "%s iterator: batch arrays on device type %d: only the CPU is supported", name,
              (int)p->ctx.dev_type);

    it = mxc__handle_alloc(&iter_kind);
    MXC_CHECK(it != NULL, MXC_ENOMEM, "%s iterator: out of memory", name);
    it->src = *src;
    src->impl = NULL; /* taken over: freed with the iterator from here on */
    src->free = NULL;
    it->params = *p;
    it->current = -1;
    it->state = STATE_RUNNING;
    mxc__mutex_init(&it->lock);
    mxc__cond_init(&it->producer_cv);
    mxc__cond_init(&it->consumer_cv);

    int64_t n = it->src.num_samples;
    int64_t parts = p->num_parts, k = p->part_index;
    MXC_CHECK(n > 0 && n <= INT64_MAX / parts, MXC_EINVAL, "%s iterator: %lld samples", name,
              (long long)n);
    it->part_begin = n * k / parts;
    it->part_count = n * (k + 1) / parts - it->part_begin;
    MXC_CHECK(it->part_count > 0, MXC_EINVAL, "%s iterator: part %d of %d of %lld samples is empty",
              name, p->part_index, p->num_parts, (long long)n);
    if (p->round_batch) {
        it->num_batches = (it->part_count + p->batch_size - 1) / p->batch_size;
    } else {
        it->num_batches = it->part_count / p->batch_size;
        MXC_CHECK(it->num_batches > 0, MXC_EINVAL,
                  "%s iterator: batch_size %lld exceeds the %lld samples of the part, and "
                  "round_batch is off",
                  name, (long long)p->batch_size, (long long)it->part_count);
    }

    it->data_elems = mxc_shape_size(&it->src.data_shape);
    MXC_CHECK(it->data_elems > 0, MXC_EINVAL, "%s iterator: empty sample shape", name);
    MXC_ASSERT(it->src.data_dtype == MXC_FLOAT32 || it->src.read_batch);
    it->data_bytes = (size_t)it->data_elems * mxc_dtype_size(it->src.data_dtype);
    MXC_TRY(batch_shape(p->batch_size, &it->src.data_shape, false, &it->batch_data_shape));
    bool labels = it->src.label_shape.ndim > 0;
    if (labels) {
        it->label_elems = mxc_shape_size(&it->src.label_shape);
        MXC_CHECK(it->label_elems > 0, MXC_EINVAL, "%s iterator: empty label shape", name);
        MXC_TRY(batch_shape(p->batch_size, &it->src.label_shape, true, &it->batch_label_shape));
    }
    MXC_CHECK(mxc_shape_size(&it->batch_data_shape) > 0 &&
                  (!labels || mxc_shape_size(&it->batch_label_shape) > 0),
              MXC_EINVAL, "%s iterator: batch of %lld samples is too large", name,
              (long long)p->batch_size);

    size_t bs = (size_t)p->batch_size;
    it->perm = mxc__malloc((size_t)it->part_count * sizeof(int64_t));
    it->batch_index = mxc__malloc(bs * sizeof(int64_t));
    it->num_slots = p->prefetch + 1;
    it->slots = mxc__calloc((size_t)it->num_slots, sizeof *it->slots);
    it->free_slots = mxc__malloc((size_t)it->num_slots * sizeof(int));
    it->ready = mxc__calloc((size_t)it->num_slots + 1, sizeof *it->ready);
    MXC_CHECK(it->perm && it->batch_index && it->slots && it->free_slots && it->ready, MXC_ENOMEM,
              "%s iterator: out of memory for batch buffers", name);
    /* Pinned host memory when a GPU can read it (a CUDA build on a machine with a GPU), so
     * that copying a batch there needs no staging; plain CPU memory otherwise. */
    mxc_context mem = mxc_gpu_count() > 0 ? (mxc_context){MXC_CPU_PINNED, 0} : p->ctx;
    for (int i = 0; i < it->num_slots; i++) {
        MXC_TRY(
            mxc_nd_create(&it->batch_data_shape, it->src.data_dtype, mem, 0, &it->slots[i].data));
        if (labels)
            MXC_TRY(
                mxc_nd_create(&it->batch_label_shape, MXC_FLOAT32, mem, 0, &it->slots[i].label));
        it->free_slots[it->num_free++] = i;
    }

    it->want_epoch = 0;
    mxc__handle_publish(&iter_kind, it);
    MXC_TRY(start_prefetch(it));
    *out = it;
    return MXC_OK;

fail:
    if (it) {
        iter_destroy(it);
    } else if (src->free) {
        src->free(src->impl);
        src->impl = NULL;
        src->free = NULL;
    }
    return rc;
}

/* ---- The float table source -------------------------------------------------------- */

struct table {
    float *data, *label;
    int64_t data_elems, label_elems;
};

static int table_read(void *impl, int64_t index, float *data, float *label) {
    struct table *t = impl;
    memcpy(data, t->data + index * t->data_elems, (size_t)t->data_elems * sizeof(float));
    if (label && t->label)
        memcpy(label, t->label + index * t->label_elems, (size_t)t->label_elems * sizeof(float));
    return MXC_OK;
}

static void table_free(void *impl) {
    struct table *t = impl;
    if (!t)
        return;
    mxc__free(t->data);
    mxc__free(t->label);
    mxc__free(t);
}

int mxc__io_table_source(const char *name, float *data, float *label, int64_t num_samples,
                         const mxc_shape *data_shape, const mxc_shape *label_shape,
                         struct mxc__io_source *out) {
    memset(out, 0, sizeof *out);
    struct table *t = mxc__calloc(1, sizeof *t);
    if (!t) {
        mxc__free(data);
        mxc__free(label);
        return mxc__error(MXC_ENOMEM, "%s iterator: out of memory", name);
    }
    t->data = data;
    t->label = label;
    t->data_elems = mxc_shape_size(data_shape);
    t->label_elems = label_shape->ndim > 0 ? mxc_shape_size(label_shape) : 0;
    out->name = name;
    out->impl = t;
    out->num_samples = num_samples;
    out->data_shape = *data_shape;
    out->label_shape = *label_shape;
    out->read = table_read;
    out->free = table_free;
    return MXC_OK;
}

/* ---- Iterating --------------------------------------------------------------------- */

int mxc__data_iter_check(const mxc_data_iter *it, const char *fn, const char *what) {
    return mxc__handle_check(&iter_kind, it, fn, what);
}

/* For the getters without a status: a bad handle is recorded as the last error. */
static bool live(const mxc_data_iter *it, const char *fn) {
    return mxc__data_iter_check(it, fn, "iterator") == MXC_OK;
}

/* Gives the current batch's slot back to the prefetch thread; the caller holds the lock. */
static void release_current(mxc_data_iter *it) {
    if (it->current >= 0) {
        it->free_slots[it->num_free++] = it->current;
        it->current = -1;
        mxc__cond_signal(&it->producer_cv);
    }
    it->pad = 0;
}

int mxc_data_iter_next(mxc_data_iter *it) {
    int rc = MXC_OK;
    MXC_TRY(mxc__data_iter_check(it, __func__, "iterator"));
    mxc__mutex_lock(&it->lock);
    release_current(it);
    if (it->state == STATE_RUNNING) {
        while (it->ready_count == 0)
            mxc__cond_wait(&it->consumer_cv, &it->lock);
        struct entry *e = &it->ready[it->ready_head];
        it->ready_head = (it->ready_head + 1) % (it->num_slots + 1);
        it->ready_count--;
        if (e->kind == ENTRY_BATCH) {
            it->current = e->slot;
            it->pad = e->pad;
        } else if (e->kind == ENTRY_END) {
            it->state = STATE_END;
        } else {
            it->state = STATE_ERROR;
            it->error_code = e->code;
            snprintf(it->error_message, sizeof it->error_message, "%s", e->message);
        }
    }
    mxc__mutex_unlock(&it->lock);
    if (it->state == STATE_END)
        return 0;
    if (it->state == STATE_ERROR)
        return mxc__error_set(it->error_code, it->error_message);
    return 1;
fail:
    return rc;
}

int mxc_data_iter_reset(mxc_data_iter *it) {
    int rc = MXC_OK;
    MXC_TRY(mxc__data_iter_check(it, __func__, "iterator"));
    mxc__mutex_lock(&it->lock);
    release_current(it);
    /* Everything queued belongs to the old epoch. */
    for (; it->ready_count > 0; it->ready_count--) {
        struct entry *e = &it->ready[it->ready_head];
        if (e->kind == ENTRY_BATCH)
            it->free_slots[it->num_free++] = e->slot;
        it->ready_head = (it->ready_head + 1) % (it->num_slots + 1);
    }
    it->want_epoch++;
    it->state = STATE_RUNNING;
    mxc__cond_broadcast(&it->producer_cv);
    mxc__mutex_unlock(&it->lock);
fail:
    return rc;
}

mxc_ndarray *mxc_data_iter_data(const mxc_data_iter *it) {
    return live(it, __func__) && it->current >= 0 ? it->slots[it->current].data : NULL;
}

mxc_ndarray *mxc_data_iter_label(const mxc_data_iter *it) {
    return live(it, __func__) && it->current >= 0 ? it->slots[it->current].label : NULL;
}

int64_t mxc_data_iter_pad(const mxc_data_iter *it) {
    if (!live(it, __func__))
        return -1;
    return it->current >= 0 ? it->pad : 0;
}

int mxc_data_iter_provide_data(const mxc_data_iter *it, mxc_shape *out) {
    int rc = MXC_OK;
    MXC_TRY(mxc__data_iter_check(it, __func__, "iterator"));
    MXC_CHECK(out != NULL, MXC_EINVAL, "%s: out is NULL", __func__);
    *out = it->batch_data_shape;
fail:
    return rc;
}

int mxc_data_iter_provide_label(const mxc_data_iter *it, mxc_shape *out) {
    int rc = MXC_OK;
    MXC_TRY(mxc__data_iter_check(it, __func__, "iterator"));
    MXC_CHECK(out != NULL, MXC_EINVAL, "%s: out is NULL", __func__);
    *out = it->batch_label_shape;
fail:
    return rc;
}

int64_t mxc_data_iter_num_samples(const mxc_data_iter *it) {
    return live(it, __func__) ? it->part_count : -1;
}

int64_t mxc_data_iter_num_batches(const mxc_data_iter *it) {
    return live(it, __func__) ? it->num_batches : -1;
}

int64_t mxc_data_iter_num_skipped(const mxc_data_iter *it) {
    if (!live(it, __func__))
        return -1;
    return it->src.skipped ? it->src.skipped(it->src.impl) : 0;
}

void mxc_data_iter_free(mxc_data_iter *it) {
    if (mxc__handle_check_free(&iter_kind, it, __func__, "iterator"))
        iter_destroy(it);
}

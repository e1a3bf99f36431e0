/*
 * common/queue.c — the blocking queue: a growable ring buffer for FIFO order, a binary
 * heap keyed by (priority, push order) for priority order.
 *
 * Sleeping without lost wake-ups: a consumer announces itself in `sleepers` and then
 * re-reads `size` under sleep_lock; a producer publishes `size` and then reads
 * `sleepers`. Both are sequentially consistent, so at least one sees the other, and the
 * producer signals under sleep_lock, which the consumer holds until it waits.
 */
#include "common/queue.h"

#include "common/common.h"

#include <string.h>

int mxc__queue_init(mxc__queue *q, bool by_priority, bool spin) {
    memset(q, 0, sizeof *q);
    q->capacity = 64;
    q->items = mxc__malloc(q->capacity * sizeof *q->items);
    if (q->items == NULL)
        return mxc__error(MXC_ENOMEM, "queue: cannot allocate %zu slots", q->capacity);
    mxc__spin_init(&q->lock);
    mxc__mutex_init(&q->sleep_lock);
    mxc__cond_init(&q->nonempty);
    atomic_init(&q->sleepers, 0);
    atomic_init(&q->closed, false);
    atomic_init(&q->size, 0);
    atomic_init(&q->spinners, 0);
    q->by_priority = by_priority;
    q->spin = spin;
    return MXC_OK;
}

void mxc__queue_destroy(mxc__queue *q) {
    if (q->items == NULL)
        return;
    mxc__cond_destroy(&q->nonempty);
    mxc__mutex_destroy(&q->sleep_lock);
    mxc__free(q->items);
    q->items = NULL;
}

/* a comes out before b */
static bool heap_before(const struct mxc__queue_item *a, const struct mxc__queue_item *b) {
    return a->priority > b->priority || (a->priority == b->priority && a->seq < b->seq);
}

static void heap_swap(struct mxc__queue_item *h, size_t i, size_t j) {
    struct mxc__queue_item t = h[i];
    h[i] = h[j];
    h[j] = t;
}

static int grow(mxc__queue *q) {
    size_t n = atomic_load_explicit(&q->size, memory_order_relaxed);
    struct mxc__queue_item *bigger = mxc__malloc(2 * q->capacity * sizeof *bigger);
    if (bigger == NULL)
        return mxc__error(MXC_ENOMEM, "queue: cannot grow to %zu slots", 2 * q->capacity);
    for (size_t i = 0; i < n; i++) /* unrolls the ring; a heap keeps head == 0 */
        bigger[i] = q->items[(q->head + i) % q->capacity];
    mxc__free(q->items);
    q->items = bigger;
    q->capacity *= 2;
    q->head = 0;
    return MXC_OK;
}

static void wake_one(mxc__queue *q) {
    mxc__mutex_lock(&q->sleep_lock);
    mxc__cond_signal(&q->nonempty);
    mxc__mutex_unlock(&q->sleep_lock);
}

int mxc__queue_push(mxc__queue *q, void *ptr, int priority) {
    mxc__spin_lock(&q->lock);
    size_t n = atomic_load_explicit(&q->size, memory_order_relaxed);
    if (n == q->capacity) {
        int rc = grow(q);
        if (rc != MXC_OK) {
            mxc__spin_unlock(&q->lock);
            return rc;
        }
    }
    struct mxc__queue_item item = {ptr, priority, q->next_seq++};
    if (q->by_priority) {
        size_t i = n;
        q->items[i] = item;
        while (i > 0 && heap_before(&q->items[i], &q->items[(i - 1) / 2])) {
            heap_swap(q->items, i, (i - 1) / 2);
            i = (i - 1) / 2;
        }
    } else {
        q->items[(q->head + n) % q->capacity] = item;
    }
    atomic_store(&q->size, n + 1);
    mxc__spin_unlock(&q->lock);
    if (atomic_load(&q->sleepers) > 0 && atomic_load(&q->spinners) == 0)
        wake_one(q);
    return MXC_OK;
}

/* Removes the front item; the lock is held and the queue is not empty. */
static void *take_front(mxc__queue *q) {
    size_t n = atomic_load_explicit(&q->size, memory_order_relaxed);
    void *ptr;
    if (q->by_priority) {
        ptr = q->items[0].ptr;
        q->items[0] = q->items[n - 1];
        size_t i = 0, m = n - 1;
        for (;;) {
            size_t l = 2 * i + 1, r = l + 1, best = i;
            if (l < m && heap_before(&q->items[l], &q->items[best]))
                best = l;
            if (r < m && heap_before(&q->items[r], &q->items[best]))
                best = r;
            if (best == i)
                break;
            heap_swap(q->items, i, best);
            i = best;
        }
    } else {
        ptr = q->items[q->head].ptr;
        q->head = (q->head + 1) % q->capacity;
    }
    atomic_store_explicit(&q->size, n - 1, memory_order_relaxed);
    return ptr;
}

bool mxc__queue_try_pop(mxc__queue *q, void **out) {
    if (atomic_load_explicit(&q->size, memory_order_acquire) == 0)
        return false;
    mxc__spin_lock(&q->lock);
    bool got = atomic_load_explicit(&q->size, memory_order_relaxed) > 0;
    if (got)
        *out = take_front(q);
    mxc__spin_unlock(&q->lock);
    return got;
}

/* Wakes a sleeping consumer when items are left for it. */
static void wake_one_if_backlog(mxc__queue *q) {
    if (atomic_load(&q->size) > 0 && atomic_load(&q->sleepers) > 0)
        wake_one(q);
}

/* At most one consumer spins at a time, and for at most MXC__SPIN_NS: on a machine with
 * few cores, several spinning consumers would take the CPU from the producer they wait
 * for. The spinner that finds work wakes a sleeper if more is queued, so parallelism
 * ramps up with the backlog. */
static bool spin_pop(mxc__queue *q, void **out) {
    int idle = 0;
    if (!q->spin || !atomic_compare_exchange_strong(&q->spinners, &idle, 1))
        return false;
    bool got = false;
    for (mxc__spin sp = {0, 0}; !got && mxc__spin_more(&sp);)
        got = mxc__queue_try_pop(q, out);
    atomic_store(&q->spinners, 0);
    if (got)
        wake_one_if_backlog(q);
    return got;
}

bool mxc__queue_pop(mxc__queue *q, void **out) {
    for (;;) {
        if (mxc__queue_try_pop(q, out)) {
            wake_one_if_backlog(q);
            return true;
        }
        if (spin_pop(q, out))
            return true;
        mxc__mutex_lock(&q->sleep_lock);
        atomic_fetch_add(&q->sleepers, 1);
        while (atomic_load(&q->size) == 0 && !atomic_load(&q->closed))
            mxc__cond_wait(&q->nonempty, &q->sleep_lock);
        atomic_fetch_sub(&q->sleepers, 1);
        mxc__mutex_unlock(&q->sleep_lock);
        if (atomic_load(&q->size) == 0 && atomic_load(&q->closed))
            return false;
    }
}

void mxc__queue_close(mxc__queue *q) {
    mxc__mutex_lock(&q->sleep_lock);
    atomic_store(&q->closed, true);
    mxc__cond_broadcast(&q->nonempty);
    mxc__mutex_unlock(&q->sleep_lock);
}

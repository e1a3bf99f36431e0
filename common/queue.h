/*
 * common/queue.h — a blocking multi-producer multi-consumer queue of pointers, in FIFO
 * order or by priority (highest first, FIFO among equals). The items sit behind a
 * spinlock held for a few instructions (a mutex would put contending consumers to sleep
 * in the kernel); consumers sleep on a condition only when the queue stays empty, and one
 * consumer at a time spins briefly first, so a busy producer hands work over without a
 * wake-up.
 * Internal.
 */
#ifndef MXC_QUEUE_H
#define MXC_QUEUE_H

#include "common/thread.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct mxc__queue_item {
    void *ptr;
    int priority;
    uint64_t seq; /* push order, breaks priority ties */
};

typedef struct mxc__queue {
    mxc__spinlock lock;    /* guards the items: held for a few instructions */
    mxc__mutex sleep_lock; /* consumers sleep on `nonempty` under it */
    mxc__cond nonempty;
    struct mxc__queue_item *items; /* ring buffer (FIFO) or binary heap (priority) */
    size_t capacity, head;
    atomic_size_t size;
    uint64_t next_seq;
    atomic_int sleepers;
    atomic_int spinners;
    bool by_priority;
    atomic_bool closed;
    bool spin; /* consumers spin briefly before sleeping */
} mxc__queue;

/* Initialises an empty queue. With `spin`, one consumer at a time polls an empty queue for
 * up to MXC__SPIN_NS before it sleeps. Returns MXC_OK or MXC_ENOMEM. */
int mxc__queue_init(mxc__queue *q, bool by_priority, bool spin);

/* Frees the queue's storage; items still inside are not touched. */
void mxc__queue_destroy(mxc__queue *q);

/* Appends `ptr`. Returns MXC_OK, or MXC_ENOMEM when growing fails (the item is then not
 * queued). Pushing to a closed queue still succeeds; consumers drain it. */
int mxc__queue_push(mxc__queue *q, void *ptr, int priority);

/* Takes the next item, waiting while the queue is empty and open. Returns false once the
 * queue is closed and empty. */
bool mxc__queue_pop(mxc__queue *q, void **out);

/* Takes the next item if there is one, without waiting. */
bool mxc__queue_try_pop(mxc__queue *q, void **out);

/* Wakes every consumer; pops return false once the queue is empty. */
void mxc__queue_close(mxc__queue *q);

#endif /* MXC_QUEUE_H */

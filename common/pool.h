/*
 * common/pool.h — a pool of fixed-size objects for hot paths (the engine allocates
 * several objects per push). Objects come from pages of many objects; a freed object
 * goes onto a lock-free return stack, so workers freeing never block a producer, and
 * allocation takes a spinlock that only concurrent allocators contend for. Memory goes
 * back to the system when the pool is destroyed. Internal.
 */
#ifndef MXC_POOL_H
#define MXC_POOL_H

#include "common/thread.h"

#include <stdatomic.h>
#include <stddef.h>

struct mxc__pool_node {
    struct mxc__pool_node *next;
};

/* The allocating side and the freeing side sit on separate cache lines: a worker freeing
 * must not evict the producer's free list. */
typedef struct mxc__pool {
    _Alignas(64) mxc__spinlock lock;  /* guards free_list, pages, counters */
    struct mxc__pool_node *free_list; /* owned by allocators */
    struct mxc__pool_node *pages;
    size_t object_size, objects_per_page;
    size_t capacity;                                        /* objects in all pages */
    _Alignas(64) _Atomic(struct mxc__pool_node *) returned; /* pushed by any thread */
} mxc__pool;

/* Prepares a pool of objects of `object_size` bytes, each aligned to `alignment` (a power
 * of two from 16 to 64; 64 keeps objects that different threads write off each other's
 * cache lines). Allocates nothing. */
void mxc__pool_init(mxc__pool *pool, size_t object_size, size_t alignment);

/* Returns every page to the allocator; objects still in use become invalid. */
void mxc__pool_destroy(mxc__pool *pool);

/* An object of the pool's size (contents undefined), or NULL if memory ran out.
 * Thread-safe. */
void *mxc__pool_alloc(mxc__pool *pool);

/* Bytes held in pages (in use or free). Thread-safe. */
size_t mxc__pool_bytes(mxc__pool *pool);

/* Gives an object back. Thread-safe, lock-free. */
void mxc__pool_free(mxc__pool *pool, void *obj);

#endif /* MXC_POOL_H */

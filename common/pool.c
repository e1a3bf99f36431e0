/*
 * common/pool.c — see pool.h. A page is one allocation holding a header and
 * objects_per_page objects; the header links pages for destruction.
 */
#include "common/pool.h"

#include "common/common.h"

#define POOL_PAGE_BYTES  16384
#define POOL_PAGE_HEADER 64 /* the page link, padded so objects keep their alignment */

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

void mxc__pool_init(mxc__pool *pool, size_t object_size, size_t alignment) {
    mxc__spin_init(&pool->lock);
    pool->free_list = NULL;
    atomic_init(&pool->returned, NULL);
    pool->pages = NULL;
    pool->object_size = round_up(
        object_size < sizeof(struct mxc__pool_node) ? sizeof(struct mxc__pool_node) : object_size,
        alignment < 16 ? 16 : alignment);
    size_t n = (POOL_PAGE_BYTES - POOL_PAGE_HEADER) / pool->object_size;
    pool->objects_per_page = n < 8 ? 8 : n;
    pool->capacity = 0;
}

void mxc__pool_destroy(mxc__pool *pool) {
    struct mxc__pool_node *page = pool->pages;
    while (page) {
        struct mxc__pool_node *next = page->next;
        mxc__aligned_free(page);
        page = next;
    }
    pool->pages = NULL;
    pool->free_list = NULL;
    atomic_store(&pool->returned, NULL);
    pool->capacity = 0;
}

/* Adds a page's objects to the free list; the lock is held. */
static int add_page(mxc__pool *pool) {
    char *page = mxc__aligned_alloc(POOL_PAGE_HEADER,
                                    POOL_PAGE_HEADER + pool->objects_per_page * pool->object_size);
    if (page == NULL)
        return MXC_ENOMEM;
    ((struct mxc__pool_node *)page)->next = pool->pages;
    pool->pages = (struct mxc__pool_node *)page;
    char *obj = page + POOL_PAGE_HEADER;
    for (size_t i = 0; i < pool->objects_per_page; i++, obj += pool->object_size) {
        struct mxc__pool_node *node = (struct mxc__pool_node *)obj;
        node->next = pool->free_list;
        pool->free_list = node;
    }
    pool->capacity += pool->objects_per_page;
    return MXC_OK;
}

void *mxc__pool_alloc(mxc__pool *pool) {
    mxc__spin_lock(&pool->lock);
    if (pool->free_list == NULL) {
        /* Taking the whole return stack at once is immune to ABA: nobody pops it. */
        pool->free_list = atomic_exchange_explicit(&pool->returned, NULL, memory_order_acquire);
        if (pool->free_list == NULL && add_page(pool) != MXC_OK) {
            mxc__spin_unlock(&pool->lock);
            return NULL;
        }
    }
    struct mxc__pool_node *node = pool->free_list;
    pool->free_list = node->next;
    mxc__spin_unlock(&pool->lock);
    return node;
}

void mxc__pool_free(mxc__pool *pool, void *obj) {
    struct mxc__pool_node *node = obj;
    struct mxc__pool_node *top = atomic_load_explicit(&pool->returned, memory_order_relaxed);
    do {
        node->next = top;
    } while (!atomic_compare_exchange_weak_explicit(&pool->returned, &top, node,
                                                    memory_order_release, memory_order_relaxed));
}

size_t mxc__pool_bytes(mxc__pool *pool) {
    mxc__spin_lock(&pool->lock);
    size_t bytes = pool->capacity * pool->object_size;
    mxc__spin_unlock(&pool->lock);
    return bytes;
}

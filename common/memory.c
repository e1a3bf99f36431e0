/*
 * common/memory.c — every host allocation of the library goes through the allocator
 * hook set by mxc_set_allocator, so tests can count allocations and inject failures.
 */
#include "common/common.h"
#include "common/handle.h"

#include <stdlib.h>
#include <string.h>

static void *default_malloc(void *user, size_t size) {
    (void)user;
    return malloc(size);
}

static void *default_realloc(void *user, void *ptr, size_t size) {
    (void)user;
    return realloc(ptr, size);
}

static void default_free(void *user, void *ptr) {
    (void)user;
    free(ptr);
}

static mxc_allocator allocator = {default_malloc, default_realloc, default_free, NULL};

void mxc_set_allocator(const mxc_allocator *a) {
    mxc__handles_release(); /* freed handles' slabs go back to the allocator that gave them */
    if (a == NULL || a->malloc_fn == NULL || a->realloc_fn == NULL || a->free_fn == NULL) {
        allocator = (mxc_allocator){default_malloc, default_realloc, default_free, NULL};
        return;
    }
    allocator = *a;
}

void *mxc__malloc(size_t size) { return allocator.malloc_fn(allocator.user, size ? size : 1); }

void *mxc__calloc(size_t count, size_t size) {
    if (size != 0 && count > SIZE_MAX / size)
        return NULL;
    void *p = mxc__malloc(count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

void *mxc__realloc(void *ptr, size_t size) {
    return allocator.realloc_fn(allocator.user, ptr, size ? size : 1);
}

void mxc__free(void *ptr) {
    if (ptr)
        allocator.free_fn(allocator.user, ptr);
}

char *mxc__strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = mxc__malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/* The hook has no aligned entry point, so over-allocate and keep the original pointer
 * just below the aligned block. */
void *mxc__aligned_alloc(size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0 ||
        size > SIZE_MAX - alignment - sizeof(void *))
        return NULL;
    char *raw = mxc__malloc(size + alignment + sizeof(void *));
    if (raw == NULL)
        return NULL;
    uintptr_t aligned =
        ((uintptr_t)(raw + sizeof(void *)) + alignment - 1) & ~(uintptr_t)(alignment - 1);
    ((void **)aligned)[-1] = raw;
    return (void *)aligned;
}

void mxc__aligned_free(void *ptr) {
    if (ptr)
        mxc__free(((void **)ptr)[-1]);
}

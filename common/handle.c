/*
 * common/handle.c — see handle.h. Slabs are runs of 4 KiB pages aligned to 4 KiB, taken
 * through the allocator hook, 16 KiB for a kind's first and doubling up to 1 MiB. The
 * page table maps each page of every slab to its kind: open addressing with linear
 * probing, at most half full, read without a lock (a table that grows is replaced, and
 * the old one is kept until mxc__handles_release, when nobody reads). Slabs are added under
 * one mutex; each kind's FIFO and fresh slots are under the kind's spinlock.
 */
#include "common/handle.h"

#include "common/common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_SHIFT       12
#define PAGE_BYTES       ((size_t)1 << PAGE_SHIFT)
#define FIRST_SLAB_BYTES ((size_t)16 << 10)
#define MAX_SLAB_BYTES   ((size_t)1 << 20)
#define MIN_TABLE_SIZE   256

/* A freed slot: the dead magic, then the FIFO link. */
struct mxc__handle_free {
    _Atomic uint32_t magic;
    struct mxc__handle_free *next;
};

struct mxc__handle_slab {
    struct mxc__handle_slab *next;
    char *base;
    size_t bytes;
};

struct page_entry {
    _Atomic uintptr_t page; /* page number (address >> PAGE_SHIFT); 0: empty */
    _Atomic(const mxc__handle_kind *) kind;
};

struct page_table {
    size_t mask, used;
    unsigned bits;              /* log2 of the size */
    struct page_table *retired; /* an older table readers may still hold */
    struct page_entry entries[];
};

static _Atomic(struct page_table *) table;
static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER; /* slabs, tables, kinds */
static mxc__handle_kind *kinds;                              /* every kind with slabs */
static struct page_table *retired;
static bool exit_hook;

/* ---- The page table ---------------------------------------------------------------- */

static size_t home(const struct page_table *t, uintptr_t page) {
    return (size_t)(((uint64_t)page * 0x9e3779b97f4a7c15ull) >> (64 - t->bits));
}

static const mxc__handle_kind *kind_of_page(uintptr_t page) {
    struct page_table *t = atomic_load_explicit(&table, memory_order_acquire);
    if (t == NULL)
        return NULL;
    for (size_t i = home(t, page);; i = (i + 1) & t->mask) {
        uintptr_t p = atomic_load_explicit(&t->entries[i].page, memory_order_acquire);
        if (p == page)
            return atomic_load_explicit(&t->entries[i].kind, memory_order_relaxed);
        if (p == 0)
            return NULL;
    }
}

static void table_insert(struct page_table *t, uintptr_t page, const mxc__handle_kind *k) {
    size_t i = home(t, page);
    while (atomic_load_explicit(&t->entries[i].page, memory_order_relaxed) != 0)
        i = (i + 1) & t->mask;
    atomic_store_explicit(&t->entries[i].kind, k, memory_order_relaxed);
    atomic_store_explicit(&t->entries[i].page, page, memory_order_release);
    t->used++;
}

/* Deletes `page` by shifting later entries of its probe run back (no tombstones). Only
 * while nobody reads the table. */
static void table_remove(struct page_table *t, uintptr_t page) {
    size_t i = home(t, page);
    while (atomic_load_explicit(&t->entries[i].page, memory_order_relaxed) != page)
        i = (i + 1) & t->mask;
    for (size_t j = i;;) {
        j = (j + 1) & t->mask;
        uintptr_t p = atomic_load_explicit(&t->entries[j].page, memory_order_relaxed);
        if (p == 0)
            break;
        size_t h = home(t, p);
        bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (stays)
            continue;
        atomic_store_explicit(&t->entries[i].page, p, memory_order_relaxed);
        atomic_store_explicit(&t->entries[i].kind,
                              atomic_load_explicit(&t->entries[j].kind, memory_order_relaxed),
                              memory_order_relaxed);
        i = j;
    }
    atomic_store_explicit(&t->entries[i].page, 0, memory_order_relaxed);
    t->used--;
}

/* Makes room for `more` pages; the registry lock is held. */
static int table_reserve(size_t more) {
    struct page_table *old = atomic_load_explicit(&table, memory_order_relaxed);
    size_t used = old ? old->used : 0;
    if (old && (used + more) * 2 <= old->mask + 1)
        return MXC_OK;
    unsigned bits = 8;
    while (((size_t)1 << bits) < MIN_TABLE_SIZE || ((size_t)1 << bits) < (used + more) * 2)
        bits++;
    size_t size = (size_t)1 << bits;
    struct page_table *t = mxc__calloc(1, sizeof *t + size * sizeof t->entries[0]);
    if (t == NULL)
        return MXC_ENOMEM;
    t->mask = size - 1;
    t->bits = bits;
    for (size_t i = 0; old && i <= old->mask; i++) {
        uintptr_t p = atomic_load_explicit(&old->entries[i].page, memory_order_relaxed);
        if (p != 0)
            table_insert(t, p, atomic_load_explicit(&old->entries[i].kind, memory_order_relaxed));
    }
    atomic_store_explicit(&table, t, memory_order_release);
    if (old) {
        old->retired = retired;
        retired = old;
    }
    return MXC_OK;
}

bool mxc__handle_owns(const mxc__handle_kind *k, const void *p) {
    uintptr_t a = (uintptr_t)p;
    return a != 0 && (a & (k->slot - 1)) == 0 && kind_of_page(a >> PAGE_SHIFT) == k;
}

/* ---- Slabs ------------------------------------------------------------------------- */

static void release_at_exit(void) { mxc__handles_release(); }

/* Gives the kind a new slab of fresh slots, unless another thread just did. */
static int add_slab(mxc__handle_kind *k) {
    int rc = MXC_OK;
    struct mxc__handle_slab *s = NULL;
    char *base = NULL;
    pthread_mutex_lock(&registry);
    mxc__spin_lock(&k->lock);
    bool needed = k->fresh == k->fresh_end && k->num_free <= k->quarantine;
    size_t bytes = k->next_slab_bytes ? k->next_slab_bytes : FIRST_SLAB_BYTES;
    mxc__spin_unlock(&k->lock);
    if (!needed)
        goto done;
    s = mxc__malloc(sizeof *s);
    base = s ? mxc__aligned_alloc(PAGE_BYTES, bytes) : NULL;
    if (base == NULL || table_reserve(bytes / PAGE_BYTES) != MXC_OK) {
        rc = MXC_ENOMEM;
        goto done;
    }
    for (char *p = base; p < base + bytes; p += k->slot)
        atomic_store_explicit((_Atomic uint32_t *)p, k->dead, memory_order_relaxed);
    struct page_table *t = atomic_load_explicit(&table, memory_order_relaxed);
    for (size_t off = 0; off < bytes; off += PAGE_BYTES)
        table_insert(t, (uintptr_t)(base + off) >> PAGE_SHIFT, k);
    if (!k->listed) {
        k->next_kind = kinds;
        kinds = k;
        k->listed = true;
    }
    if (!exit_hook)
        exit_hook = atexit(release_at_exit) == 0;
    s->base = base;
    s->bytes = bytes;
    mxc__spin_lock(&k->lock);
    s->next = k->slabs;
    k->slabs = s;
    k->fresh = base;
    k->fresh_end = base + bytes;
    k->next_slab_bytes = bytes < MAX_SLAB_BYTES ? 2 * bytes : MAX_SLAB_BYTES;
    mxc__spin_unlock(&k->lock);
    s = NULL;
    base = NULL;
done:
    pthread_mutex_unlock(&registry);
    mxc__aligned_free(base);
    mxc__free(s);
    return rc;
}

/* A slot to hand out, or NULL; the kind's lock is held. */
static void *take(mxc__handle_kind *k) {
    if (k->num_free > k->quarantine) {
        struct mxc__handle_free *f = k->head;
        k->head = f->next;
        if (k->head == NULL)
            k->tail = NULL;
        k->num_free--;
        return f;
    }
    if (k->fresh == k->fresh_end)
        return NULL;
    void *obj = k->fresh;
    k->fresh += k->slot;
    return obj;
}

void *mxc__handle_alloc(mxc__handle_kind *k) {
    for (;;) {
        mxc__spin_lock(&k->lock);
        char *obj = take(k);
        mxc__spin_unlock(&k->lock);
        if (obj != NULL) {
            memset(obj + sizeof(uint32_t), 0, k->size - sizeof(uint32_t));
            return obj;
        }
        if (add_slab(k) != MXC_OK)
            return NULL;
    }
}

/* Poisons `obj` and queues it last; the kind's lock is held. */
static void quarantine(mxc__handle_kind *k, void *obj) {
    struct mxc__handle_free *f = obj;
    atomic_store_explicit(&f->magic, k->dead, memory_order_release);
    f->next = NULL;
    if (k->tail)
        k->tail->next = f;
    else
        k->head = f;
    k->tail = f;
    k->num_free++;
}

void mxc__handle_free(mxc__handle_kind *k, void *obj) {
    mxc__spin_lock(&k->lock);
    quarantine(k, obj);
    mxc__spin_unlock(&k->lock);
}

void mxc__handle_sweep(mxc__handle_kind *k, bool (*doomed)(void *obj, void *user), void *user) {
    mxc__spin_lock(&k->lock);
    for (struct mxc__handle_slab *s = k->slabs; s; s = s->next)
        for (char *p = s->base; p < s->base + s->bytes; p += k->slot)
            if (mxc__handle_magic(p) != k->dead && doomed(p, user))
                quarantine(k, p);
    mxc__spin_unlock(&k->lock);
}

/* ---- Checks ------------------------------------------------------------------------ */

/* The message for a `p` that is not an object of the kind with magic `magic`. */
static int bad_handle(const mxc__handle_kind *k, const void *p, const char *fn, const char *what) {
    if (p == NULL)
        return mxc__error(MXC_EMISUSE, "%s: %s is NULL", fn, what);
    if (!mxc__handle_owns(k, p))
        return mxc__error(MXC_EMISUSE, "%s: %s (%p) is not a handle of %s", fn, what, p, k->noun);
    if (mxc__handle_magic(p) == k->dead)
        return mxc__error(MXC_EMISUSE, "%s: %s is a stale handle: %s freed earlier", fn, what,
                          k->noun);
    return mxc__error(MXC_EMISUSE, "%s: %s is not a live handle of %s", fn, what, k->noun);
}

int mxc__handle_check_magic(const mxc__handle_kind *k, const void *p, uint32_t magic,
                            const char *fn, const char *what) {
    if (MXC_LIKELY(mxc__handle_owns(k, p) && mxc__handle_magic(p) == magic))
        return MXC_OK;
    return bad_handle(k, p, fn, what);
}

bool mxc__handle_check_free(const mxc__handle_kind *k, const void *p, const char *fn,
                            const char *what) {
    if (p == NULL)
        return false;
    if (mxc__handle_check(k, p, fn, what) == MXC_OK)
        return true;
    mxc__log(MXC_LOG_ERROR, "%s; nothing freed", mxc_last_error());
    return false;
}

/* ---- Giving memory back ------------------------------------------------------------ */

static bool slab_in_use(const mxc__handle_kind *k, const struct mxc__handle_slab *s) {
    for (const char *p = s->base; p < s->base + s->bytes; p += k->slot)
        if (mxc__handle_magic(p) != k->dead)
            return true;
    return false;
}

static bool in_slabs(const void *p, const struct mxc__handle_slab *list) {
    for (const struct mxc__handle_slab *s = list; s; s = s->next)
        if ((const char *)p >= s->base && (const char *)p < s->base + s->bytes)
            return true;
    return false;
}

/* Takes the kind's unused slabs (but one, with `keep_one`, if all are unused) off its
 * lists and the table, and frees them. */
static void trim_kind(mxc__handle_kind *k, struct page_table *t, bool keep_one) {
    struct mxc__handle_slab *gone = NULL;
    mxc__spin_lock(&k->lock);
    for (struct mxc__handle_slab **link = &k->slabs; *link;) {
        struct mxc__handle_slab *s = *link;
        if (slab_in_use(k, s)) {
            link = &s->next;
            continue;
        }
        *link = s->next;
        s->next = gone;
        gone = s;
    }
    if (keep_one && k->slabs == NULL && gone) { /* the list is oldest first: the smallest */
        k->slabs = gone;
        gone = gone->next;
        k->slabs->next = NULL;
    }
    if (gone) {
        struct mxc__handle_free *f = k->head;
        k->head = k->tail = NULL;
        k->num_free = 0;
        for (struct mxc__handle_free *next; f; f = next) {
            next = f->next;
            if (!in_slabs(f, gone))
                quarantine(k, f);
        }
        if (in_slabs(k->fresh, gone))
            k->fresh = k->fresh_end = NULL;
    }
    if (k->slabs == NULL)
        k->next_slab_bytes = 0;
    mxc__spin_unlock(&k->lock);
    while (gone) {
        struct mxc__handle_slab *s = gone;
        gone = s->next;
        for (size_t off = 0; off < s->bytes; off += PAGE_BYTES)
            table_remove(t, (uintptr_t)(s->base + off) >> PAGE_SHIFT);
        mxc__aligned_free(s->base);
        mxc__free(s);
    }
}

static void trim(bool keep_one) {
    pthread_mutex_lock(&registry);
    struct page_table *t = atomic_load_explicit(&table, memory_order_relaxed);
    for (mxc__handle_kind *k = kinds; k && t; k = k->next_kind)
        trim_kind(k, t, keep_one);
    while (retired) {
        struct page_table *old = retired;
        retired = old->retired;
        mxc__free(old);
    }
    if (t && t->used == 0) {
        atomic_store_explicit(&table, NULL, memory_order_relaxed);
        mxc__free(t);
    }
    pthread_mutex_unlock(&registry);
}

void mxc__handles_release(void) { trim(false); }

void mxc__handles_trim(void) { trim(true); }

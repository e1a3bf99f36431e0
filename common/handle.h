/*
 * common/handle.h — where the objects behind public handles live, so that a freed
 * (stale) or foreign handle given to the library is an MXC_EMISUSE error and never a
 * use-after-free (DESIGN.md section 9, docs/c-api.md "Handle lifetimes"). Internal.
 *
 * Each handle type is a kind. Its objects come from slabs the library owns and keeps
 * while handles may be used (they go back to the allocator only in mxc__handles_release):
 * freeing a handle poisons it (its magic becomes the kind's dead value) and queues its
 * slot at the tail of the kind's FIFO of freed slots; a slot is reused, from the head,
 * only once more than `quarantine` freed slots of the kind wait. So a stale handle reads
 * memory the library owns, is reported as freed for at least the next `quarantine` frees
 * of its kind, and after that can only alias an object of the same kind. A table of the
 * slabs' 4 KiB pages, shared by all kinds, tells in a probe or two whether a pointer is a
 * slot of one of a kind's slabs: anything else (a struct on the stack, a handle of
 * another kind, an address inside a handle, an unmapped page) is rejected unread.
 *
 * Every handle struct starts with `_Atomic uint32_t magic`: the kind's dead value from
 * allocation until mxc__handle_publish, then the module's live value(s), and the dead
 * value again from mxc__handle_free on.
 */
#ifndef MXC_HANDLE_H
#define MXC_HANDLE_H

#include "common/thread.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest handle struct: a slot never straddles a 4 KiB page of a slab. */
#define MXC__HANDLE_MAX_SIZE 4096

/* Bytes per slot for a struct of `size` bytes: a power of two, so that in a slab aligned
 * to 4 KiB a slot boundary is an alignment test. */
#define MXC__HANDLE_SLOT(size) \
    ((size) <= 32     ? 32     \
     : (size) <= 64   ? 64     \
     : (size) <= 128  ? 128    \
     : (size) <= 256  ? 256    \
     : (size) <= 512  ? 512    \
     : (size) <= 1024 ? 1024   \
     : (size) <= 2048 ? 2048   \
                      : 4096)

/* Freed slots that wait before the oldest is reused: 4096 handles or 1 MiB of slots,
 * whichever is more (docs/c-api.md). */
#define MXC__HANDLE_QUARANTINE(slot) \
    (((size_t)1 << 20) / (slot) > 4096 ? ((size_t)1 << 20) / (slot) : (size_t)4096)

struct mxc__handle_free;
struct mxc__handle_slab;

typedef struct mxc__handle_kind {
    const char *noun;  /* one handle, with its article: "an array" */
    uint32_t live;     /* the magic mxc__handle_check and _publish use */
    uint32_t dead;     /* the magic of a freed or never used slot */
    size_t size;       /* bytes of the struct (zeroed by mxc__handle_alloc) */
    size_t slot;       /* MXC__HANDLE_SLOT(size) */
    size_t quarantine; /* MXC__HANDLE_QUARANTINE(slot) */

    /* The rest belongs to handle.c. */
    mxc__spinlock lock;                   /* the FIFO, the fresh slots, the slab list */
    struct mxc__handle_free *head, *tail; /* freed slots, oldest first */
    size_t num_free;
    char *fresh, *fresh_end; /* never used slots of the newest slab */
    struct mxc__handle_slab *slabs;
    size_t next_slab_bytes;
    struct mxc__handle_kind *next_kind; /* kinds that have slabs, for releasing them */
    bool listed;
} mxc__handle_kind;

/* A kind of `size`-byte objects whose first 4 bytes are the magic. */
#define MXC__HANDLE_KIND_SIZED(noun_, size_, live_, dead_)                  \
    {                                                                       \
        .noun = (noun_), .live = (live_), .dead = (dead_), .size = (size_), \
        .slot = MXC__HANDLE_SLOT(size_),                                    \
        .quarantine = MXC__HANDLE_QUARANTINE(MXC__HANDLE_SLOT(size_))       \
    }

/* The kind of `type`, a struct starting with `_Atomic uint32_t magic` (checked). */
#define MXC__HANDLE_KIND(type, noun_, live_, dead_)                                                \
    MXC__HANDLE_KIND_SIZED(noun_, sizeof(type) + 0 * sizeof(struct {                               \
                                                     int unused;                                   \
                                                     _Static_assert(                               \
                                                         offsetof(type, magic) == 0 &&             \
                                                             sizeof(type) <= MXC__HANDLE_MAX_SIZE, \
                                                         #type " is not a handle struct");         \
                                                 }),                                               \
                           live_, dead_)

/* A new object of the kind: zeroed after the magic, which is still the dead value (not a
 * live handle until mxc__handle_publish). NULL when memory ran out (nothing recorded).
 * Thread-safe. */
void *mxc__handle_alloc(mxc__handle_kind *k);

/* Poisons `obj` (live, or allocated and never published) and queues its slot for reuse
 * after the quarantine. The caller has released everything the object held. Thread-safe. */
void mxc__handle_free(mxc__handle_kind *k, void *obj);

/* The magic of an object of some kind (a slot of a slab: mxc__handle_owns). */
static inline uint32_t mxc__handle_magic(const void *obj) {
    return atomic_load_explicit((_Atomic uint32_t *)obj, memory_order_acquire);
}

/* Sets the magic; stores before it are visible to whoever reads this value. */
static inline void mxc__handle_set_magic(void *obj, uint32_t magic) {
    atomic_store_explicit((_Atomic uint32_t *)obj, magic, memory_order_release);
}

/* Makes an initialised object a live handle (magic = k->live). */
static inline void mxc__handle_publish(const mxc__handle_kind *k, void *obj) {
    mxc__handle_set_magic(obj, k->live);
}

/* Moves the magic from `from` to `to` if it is `from`; false if it was not. So of two
 * threads completing or deleting the same handle, one wins. */
static inline bool mxc__handle_swap_magic(void *obj, uint32_t from, uint32_t to) {
    return atomic_compare_exchange_strong_explicit((_Atomic uint32_t *)obj, &from, to,
                                                   memory_order_acq_rel, memory_order_acquire);
}

/* True when `p` is the start of a slot of one of the kind's slabs, whatever the state of
 * the object there: only then may its magic be read. Never reads *p. Thread-safe. */
bool mxc__handle_owns(const mxc__handle_kind *k, const void *p);

/* MXC_OK when `p` is an object of the kind with magic `magic`. Otherwise records
 * MXC_EMISUSE with a message naming public function `fn` and argument `what`: NULL, a
 * stale handle (the object was freed), not a handle of the kind, or not live. */
int mxc__handle_check_magic(const mxc__handle_kind *k, const void *p, uint32_t magic,
                            const char *fn, const char *what);

/* mxc__handle_check_magic with the kind's live magic. */
static inline int mxc__handle_check(const mxc__handle_kind *k, const void *p, const char *fn,
                                    const char *what) {
    return mxc__handle_check_magic(k, p, k->live, fn, what);
}

/* For destructors, which return void: true when `p` is a live handle to free now; false
 * for NULL (silently) and for anything else, which is recorded as mxc__handle_check does
 * and logged at error level (a double free, a stale or a foreign handle), so nothing is
 * freed twice. */
bool mxc__handle_check_free(const mxc__handle_kind *k, const void *p, const char *fn,
                            const char *what);

/* Frees (as mxc__handle_free) every object of the kind that is not freed already and for
 * which `doomed(obj, user)` is true; `doomed` runs under the kind's lock and may read
 * only what stays fixed while an object is live. When it returns true it may first
 * release what the object holds (other kinds' handles: never one of this kind). For an
 * owner's destruction (an engine's variables). Thread-safe. */
void mxc__handle_sweep(mxc__handle_kind *k, bool (*doomed)(void *obj, void *user), void *user);

/* Gives every slab none of whose objects is in use back to the allocator, so an
 * allocation-counting caller sees the memory return. Stale handles into those slabs are
 * still rejected (their pages leave the table), but the quarantine restarts. Called by
 * mxc_set_allocator (with the allocator that gave the memory) and at exit; not
 * thread-safe with any other mxc call. */
void mxc__handles_release(void);

/* mxc__handles_release, except that a kind keeps one slab (its smallest) when all of
 * its slabs are unused: its next handle then needs no allocation, as in a running program.
 * For tests that compare allocator counts before and after a step. Not thread-safe with
 * any other mxc call. */
void mxc__handles_trim(void);

#endif /* MXC_HANDLE_H */

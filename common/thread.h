/*
 * common/thread.h — threads, mutexes, condition variables and a spinlock, as thin
 * wrappers over POSIX threads so the rest of mxc names one vocabulary. Internal.
 */
#ifndef MXC_THREAD_H
#define MXC_THREAD_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef pthread_mutex_t mxc__mutex;
typedef pthread_cond_t mxc__cond;
typedef pthread_t mxc__thread;

static inline void mxc__mutex_init(mxc__mutex *m) { pthread_mutex_init(m, NULL); }
static inline void mxc__mutex_destroy(mxc__mutex *m) { pthread_mutex_destroy(m); }
static inline void mxc__mutex_lock(mxc__mutex *m) { pthread_mutex_lock(m); }
static inline void mxc__mutex_unlock(mxc__mutex *m) { pthread_mutex_unlock(m); }
/* 0 when taken, else the lock is held elsewhere. */
static inline int mxc__mutex_trylock(mxc__mutex *m) { return pthread_mutex_trylock(m); }

static inline void mxc__cond_init(mxc__cond *c) { pthread_cond_init(c, NULL); }
static inline void mxc__cond_destroy(mxc__cond *c) { pthread_cond_destroy(c); }
static inline void mxc__cond_wait(mxc__cond *c, mxc__mutex *m) { pthread_cond_wait(c, m); }
static inline void mxc__cond_signal(mxc__cond *c) { pthread_cond_signal(c); }
static inline void mxc__cond_broadcast(mxc__cond *c) { pthread_cond_broadcast(c); }

/* Starts `fn(arg)` on a new thread named `name` (≤ 15 chars shown by debuggers).
 * Returns MXC_OK or MXC_ENOMEM with the last error set. */
int mxc__thread_start(mxc__thread *t, void *(*fn)(void *), void *arg, const char *name);
static inline void mxc__thread_join(mxc__thread t) { pthread_join(t, NULL); }

/* A small id of the calling thread, stable for its life (for traces and logs). */
int mxc__thread_id(void);

/* Busy-wait hint for spin loops. */
static inline void mxc__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ---- Waiting: a short spin, then sleep ------------------------------------------------ *
 * No thread of mxc spins for longer than MXC__SPIN_NS before it sleeps in the kernel: on a
 * machine busy with other processes, a spinning thread takes the CPU from the thread it
 * waits for. The spin covers the common case of a wait that ends within microseconds
 * (the next operator's loop, a lock held for a few instructions) without a system call.
 *
 * Sleeping without lost wake-ups: a waiter announces itself in a counter and re-reads the
 * word before it sleeps; a waker writes the word and then reads the counter. Both sides
 * use sequentially consistent atomics, so at least one sees the other. */

/* How long a waiter spins before it sleeps. */
#define MXC__SPIN_NS 50000

/* A bounded spin: `for (mxc__spin sp = {0, 0}; mxc__spin_more(&sp);) if (ready) ...;`
 * pauses once per poll and ends after MXC__SPIN_NS (the clock is read every 64 polls). */
typedef struct mxc__spin {
    unsigned polls;
    uint64_t start_ns;
} mxc__spin;
bool mxc__spin_more(mxc__spin *sp);

/* Sleeps while *word == expected (or until woken; callers re-check). */
void mxc__futex_wait(atomic_uint *word, unsigned expected);
/* Wakes up to `n` threads sleeping on `word`. */
void mxc__futex_wake(atomic_uint *word, int n);

/* Waits until *word != seen and returns its new value; while asleep it is counted in
 * *sleepers, which a writer of *word reads to decide whether to wake anyone. */
unsigned mxc__spin_wait_change(atomic_uint *word, unsigned seen, atomic_int *sleepers);

/* Waits until *word == want; *sleeping is set while it sleeps (for the writer, as above). */
void mxc__spin_wait_value(atomic_uint *word, unsigned want, atomic_int *sleeping);

/* A lock for critical sections of a few instructions: taken with one atomic exchange when
 * free; a contender spins a little (the holder is likely running on another core) and
 * then sleeps on a futex, so a holder preempted on a loaded machine is not starved by
 * spinning contenders. States: 0 free, 1 held, 2 held with sleepers (Drepper's "Futexes
 * are tricky", mutex 3). */
typedef struct mxc__spinlock {
    atomic_uint state;
} mxc__spinlock;

static inline void mxc__spin_init(mxc__spinlock *s) { atomic_init(&s->state, 0); }

void mxc__spin_lock_slow(mxc__spinlock *s);

static inline void mxc__spin_lock(mxc__spinlock *s) {
    unsigned free_state = 0;
    if (!atomic_compare_exchange_strong_explicit(&s->state, &free_state, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        mxc__spin_lock_slow(s);
}

static inline void mxc__spin_unlock(mxc__spinlock *s) {
    if (atomic_exchange_explicit(&s->state, 0, memory_order_release) == 2)
        mxc__futex_wake(&s->state, 1);
}

#endif /* MXC_THREAD_H */

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

typedef pthread_mutex_t mxc__mutex;
typedef pthread_cond_t mxc__cond;
typedef pthread_t mxc__thread;

static inline void mxc__mutex_init(mxc__mutex *m) { pthread_mutex_init(m, NULL); }
static inline void mxc__mutex_destroy(mxc__mutex *m) { pthread_mutex_destroy(m); }
static inline void mxc__mutex_lock(mxc__mutex *m) { pthread_mutex_lock(m); }
static inline void mxc__mutex_unlock(mxc__mutex *m) { pthread_mutex_unlock(m); }

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

/* A test-and-test-and-set lock for critical sections of a few instructions. After a
 * short spin it yields, so a preempted holder on an oversubscribed machine gets the CPU
 * back instead of being starved. */
typedef struct mxc__spinlock {
    atomic_bool locked;
} mxc__spinlock;

static inline void mxc__spin_init(mxc__spinlock *s) { atomic_init(&s->locked, false); }

static inline void mxc__spin_lock(mxc__spinlock *s) {
    for (int spins = 0;; spins++) {
        if (!atomic_exchange_explicit(&s->locked, true, memory_order_acquire))
            return;
        while (atomic_load_explicit(&s->locked, memory_order_relaxed)) {
            if (++spins < 64)
                mxc__cpu_relax();
            else
                sched_yield();
        }
    }
}

static inline void mxc__spin_unlock(mxc__spinlock *s) {
    atomic_store_explicit(&s->locked, false, memory_order_release);
}

#endif /* MXC_THREAD_H */

/*
 * common/parallel.c — the intra-operator thread budget T (see parallel.h for the policy)
 * and mxc__parallel_for on mxc's own pool of T - 1 helper threads.
 *
 * Why not OpenMP: libgomp's threads spin for a long time at every barrier before they
 * sleep, which on a loaded machine takes the CPU from the very thread they wait for
 * (LeNet training fell to a tenth of its speed beside busy processes). Here every wait
 * spins for at most MXC__SPIN_NS and then sleeps on a futex, and work is handed out in
 * chunks that threads claim one at a time, so a helper the scheduler does not run simply
 * takes fewer chunks and the others finish the loop without waiting for it.
 *
 * One region runs at a time. A caller publishes a job (body, arg, n, chunk count) and
 * bumps `job_seq`, on which idle helpers wait; every participant, the caller included,
 * claims chunks from `claim`, a 64-bit word holding the job's sequence number and the next
 * chunk index, with a compare-and-swap that fails once the job is replaced — so a helper
 * that wakes late never runs a chunk of a job it did not read. The caller returns once
 * `done` counts every chunk; the job's fields are atomics because a late helper may read
 * them while the next caller writes them (the failed claim then discards what it read).
 */
#include "common/parallel.h"

#include "common/common.h"
#include "common/thread.h"

#include <stdatomic.h>
#include <stdio.h>

/* 0: not computed yet. Computing twice in a race gives the same value, so a relaxed
 * atomic is enough. */
static atomic_int op_threads;

int mxc__default_cpu_workers(void) {
    long v = mxc__env_long("MXC_CPU_WORKER_NTHREADS", 0);
    return v > 0 && v < 4096 ? (int)v : 1;
}

static int compute_op_threads(void) {
    long forced = mxc__env_long("MXC_OP_NTHREADS", 0);
    if (forced > 0)
        return forced < MXC__MAX_OP_THREADS ? (int)forced : MXC__MAX_OP_THREADS;
    int cores = mxc__cpu_count();
    int t = cores / mxc__default_cpu_workers();
    if (t < 1)
        t = 1;
    return t < MXC__MAX_OP_THREADS ? t : MXC__MAX_OP_THREADS;
}

int mxc__op_threads(void) {
    int t = atomic_load_explicit(&op_threads, memory_order_relaxed);
    if (t == 0) {
        t = compute_op_threads();
        atomic_store_explicit(&op_threads, t, memory_order_relaxed);
    }
    return t;
}

void mxc__op_threads_reset(void) { atomic_store(&op_threads, 0); }

/* Depth of parallel bodies running on this thread (caller or helper). */
static _Thread_local int tl_region_depth;

int mxc__in_parallel(void) { return tl_region_depth > 0; }

/* ---- The pool ---------------------------------------------------------------------- */

#define CLAIM_INDEX_MASK 0xffffffffu

static struct {
    mxc__mutex caller_lock; /* one region at a time; a second caller runs serially */
    mxc__mutex start_lock;  /* guards starting helpers */
    int num_helpers;        /* started, under start_lock; read under caller_lock */

    _Alignas(64) atomic_uint job_seq; /* futex word idle helpers sleep on */
    atomic_int sleeping_helpers;

    _Alignas(64) atomic_ullong claim; /* (seq << 32) | next chunk */
    _Atomic(mxc__range_fn) body;
    _Atomic(void *) arg;
    atomic_llong n;
    atomic_int chunks;
    atomic_int max_helpers; /* helpers allowed into this job */
    atomic_ullong joined;   /* (seq << 32) | helpers that entered job seq */

    _Alignas(64) atomic_uint done; /* chunks finished; futex word the caller sleeps on */
    atomic_int caller_sleeping;
} pool = {.caller_lock = PTHREAD_MUTEX_INITIALIZER, .start_lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- Whether helpers pay off -------------------------------------------------------- *
 * On a machine busy with other processes the helpers may cost more than they give: a
 * helper preempted in the middle of its chunk holds the loop until the scheduler runs it
 * again (milliseconds), and LeNet beside three busy processes on 2 cores trained slower
 * with two threads than with one. So the caller measures what the helpers bring: over a
 * window of loops they took part in, the time the caller alone would have needed (its own time per chunk ×
 * chunks) over the loops' time, both summed, so that the loops where the time goes
 * decide (a relu of microseconds gains nothing from a helper that has to wake up, a
 * product of a millisecond nearly twice). Below MIN_SPEEDUP the helpers are left out for a while —
 * a back-off that doubles while they keep not paying, so probing costs little — and the
 * loops run on the caller alone. All of it runs under caller_lock. */
#define WINDOW_LOOPS      16
#define MIN_SPEEDUP       1.15
#define BACKOFF_LOOPS     64
#define MAX_BACKOFF_LOOPS 4096

static struct {
    int loops;                  /* in the current window */
    uint64_t alone_ns, took_ns; /* summed over the window */
    int serial_left;            /* loops left to run without helpers */
    int backoff;                /* the next serial stretch */
} adapt = {0, 0, 0, 0, BACKOFF_LOOPS};

/* Whether this loop may use helpers. */
static bool helpers_wanted(void) {
    if (adapt.serial_left == 0)
        return true;
    adapt.serial_left--;
    return false;
}

/* Records a loop the helpers took part in: `alone_ns` estimated for the caller alone,
 * `took_ns` measured. */
static void record_speedup(uint64_t alone_ns, uint64_t took_ns) {
    adapt.alone_ns += alone_ns;
    adapt.took_ns += took_ns;
    if (++adapt.loops < WINDOW_LOOPS)
        return;
    double speedup = (double)adapt.alone_ns / (double)(adapt.took_ns ? adapt.took_ns : 1);
    adapt.loops = 0;
    adapt.alone_ns = adapt.took_ns = 0;
    if (speedup >= MIN_SPEEDUP) {
        adapt.backoff = BACKOFF_LOOPS;
        return;
    }
    adapt.serial_left = adapt.backoff;
    mxc__log(MXC_LOG_DEBUG,
             "op threads: helpers gave %.2fx over %d loops; the next %d loops run "
             "on one thread",
             speedup, WINDOW_LOOPS, adapt.backoff);
    if (adapt.backoff < MAX_BACKOFF_LOOPS)
        adapt.backoff *= 2;
}

/* Range `i` of `parts` near-equal contiguous ranges of [0, n). */
static void split(int64_t n, int parts, int64_t i, int64_t *begin, int64_t *end) {
    int64_t q = n / parts, r = n % parts;
    *begin = i * q + (i < r ? i : r);
    *end = *begin + q + (i < r);
}

/* What the caller measures of its own part of a loop (helpers pass NULL). */
struct caller_share {
    int chunks;
    uint64_t busy_ns;
};

/* Claims and runs chunks of job `seq` until none is left or the job has been replaced. */
static void run_chunks(unsigned seq, struct caller_share *mine) {
    for (;;) {
        unsigned long long c = atomic_load_explicit(&pool.claim, memory_order_acquire);
        unsigned idx = (unsigned)(c & CLAIM_INDEX_MASK);
        if ((unsigned)(c >> 32) != seq)
            return;
        int chunks = atomic_load_explicit(&pool.chunks, memory_order_relaxed);
        if (idx >= (unsigned)chunks)
            return;
        mxc__range_fn body = atomic_load_explicit(&pool.body, memory_order_relaxed);
        void *arg = atomic_load_explicit(&pool.arg, memory_order_relaxed);
        int64_t n = atomic_load_explicit(&pool.n, memory_order_relaxed);
        if (!atomic_compare_exchange_weak_explicit(&pool.claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_relaxed))
            continue;
        int64_t b, e;
        split(n, chunks, idx, &b, &e);
        uint64_t t0 = mine ? mxc__now_ns() : 0;
        tl_region_depth++;
        body(arg, b, e);
        tl_region_depth--;
        if (mine) {
            mine->chunks++;
            mine->busy_ns += mxc__now_ns() - t0;
        }
        unsigned finished = atomic_fetch_add(&pool.done, 1) + 1; /* seq_cst: see thread.h */
        if (finished == (unsigned)chunks && atomic_load(&pool.caller_sleeping))
            mxc__futex_wake(&pool.done, 1);
    }
}

/* Whether a helper may enter job `seq`: a job takes only the helpers it asked for (a loop
 * of two chunks needs one), and a helper that wakes for a job already replaced does not
 * count against the next. */
static bool join(unsigned seq) {
    unsigned long long j = atomic_load(&pool.joined);
    for (;;) {
        if ((unsigned)(j >> 32) != seq ||
            (j & CLAIM_INDEX_MASK) >= (unsigned)atomic_load(&pool.max_helpers))
            return false;
        if (atomic_compare_exchange_weak(&pool.joined, &j, j + 1))
            return true;
    }
}

static void *helper_main(void *unused) {
    unsigned seen = atomic_load(&pool.job_seq);
    for (;;) {
        unsigned seq = mxc__spin_wait_change(&pool.job_seq, seen, &pool.sleeping_helpers);
        seen = seq;
        if (join(seq))
            run_chunks(seq, NULL);
    }
    return NULL;
}

/* Starts helpers up to `want` (under caller_lock). Returns how many exist. */
static int ensure_helpers(int want) {
    mxc__mutex_lock(&pool.start_lock);
    while (pool.num_helpers < want) {
        mxc__thread t;
        char name[24];
        snprintf(name, sizeof name, "mxc-op%d", pool.num_helpers + 1);
        if (mxc__thread_start(&t, helper_main, NULL, name) != MXC_OK)
            break; /* fewer helpers: the loops stay correct, only slower */
        pthread_detach(t);
        pool.num_helpers++;
    }
    int have = pool.num_helpers;
    mxc__mutex_unlock(&pool.start_lock);
    return have;
}

void mxc__parallel_for(int64_t n, int64_t grain, mxc__range_fn body, void *arg) {
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    int t = mxc__op_threads();
    int64_t parts = n / grain;
    if (t < 2 || parts < 2 || mxc__in_parallel() || mxc__mutex_trylock(&pool.caller_lock) != 0) {
        body(arg, 0, n);
        return;
    }
    if (!helpers_wanted()) {
        body(arg, 0, n);
        mxc__mutex_unlock(&pool.caller_lock);
        return;
    }
    int helpers = ensure_helpers(t - 1);
    int64_t most = (int64_t)t * MXC__CHUNKS_PER_THREAD;
    int64_t chunks = parts < most ? parts : most;
    if (helpers > chunks - 1)
        helpers = (int)chunks - 1;

    uint64_t start_ns = mxc__now_ns();
    unsigned seq = atomic_load_explicit(&pool.job_seq, memory_order_relaxed) + 1;
    /* Close the old job before rewriting the fields a late helper might still read. */
    atomic_store_explicit(&pool.claim, (unsigned long long)seq << 32 | CLAIM_INDEX_MASK,
                          memory_order_release);
    atomic_store_explicit(&pool.body, body, memory_order_relaxed);
    atomic_store_explicit(&pool.arg, arg, memory_order_relaxed);
    atomic_store_explicit(&pool.n, n, memory_order_relaxed);
    atomic_store_explicit(&pool.chunks, (int)chunks, memory_order_relaxed);
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.max_helpers, helpers, memory_order_relaxed);
    atomic_store_explicit(&pool.joined, (unsigned long long)seq << 32, memory_order_relaxed);
    atomic_store_explicit(&pool.claim, (unsigned long long)seq << 32, memory_order_release);
    atomic_store(&pool.job_seq, seq);
    if (atomic_load(&pool.sleeping_helpers) > 0)
        mxc__futex_wake(&pool.job_seq, helpers);

    struct caller_share mine = {0, 0};
    run_chunks(seq, &mine);
    mxc__spin_wait_value(&pool.done, (unsigned)chunks, &pool.caller_sleeping);
    /* Only loops the helpers took part in say whether they pay: one that the caller ran
     * alone because they came late cost them nothing (and taught nothing). */
    if (mine.chunks > 0 && mine.chunks < chunks)
        record_speedup(mine.busy_ns / (uint64_t)mine.chunks * (uint64_t)chunks,
                       mxc__now_ns() - start_ns);
    mxc__mutex_unlock(&pool.caller_lock);
}

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
 * again (milliseconds), and the MLP beside three busy processes on 2 cores trained 10-20%
 * slower with two threads than with one. Estimating from inside a parallel loop what the
 * caller alone would have taken proved unreliable under load (a preemption of the caller
 * in its own chunk counted as work it would have had to do for every chunk), so the
 * caller measures both ways: a window of WINDOW_LOOPS loops with helpers and one on the
 * caller alone, each as work done per wall-clock time — the work being the caller's
 * thread CPU time per chunk it ran × chunks, which leaves out the time it waited for a
 * core — and then runs the better way for a stretch of loops before it measures again.
 * Helpers must do MIN_SPEEDUP times better to be kept. The stretch doubles while the
 * verdict stays the same, to MAX_STRETCH_LOOPS (the alone window then costs a quiet
 * machine under 2%), and starts over when it changes. Loops outside the windows are not
 * timed at all. The very first window is the one alone too: the window with helpers can
 * end early only once the caller alone has been measured, and a process started on a
 * loaded machine would otherwise spend its first 32 loops waiting for preempted helpers
 * (a scheduler slice each, a large part of a short run). All of it runs under
 * caller_lock. */
#define WINDOW_LOOPS        32
#define MIN_SPEEDUP         1.1
#define FIRST_STRETCH_LOOPS 256
#define MAX_STRETCH_LOOPS   4096
#define EARLY_LOOPS         4 /* the window with helpers may end after this many loops */

enum phase { MEASURE_ALONE, MEASURE_HELPERS, DECIDED };

static struct {
    enum phase phase;
    int left;                      /* loops left in this window or stretch */
    double work_ns[2], wall_ns[2]; /* the windows' sums: [0] with helpers, [1] alone */
    bool helpers;                  /* the verdict */
    int stretch;                   /* the next stretch */
} adapt = {MEASURE_ALONE, WINDOW_LOOPS, {0, 0}, {0, 0}, true, FIRST_STRETCH_LOOPS};

void mxc__parallel_for_reset_to_helpers(void) {
    mxc__mutex_lock(&pool.caller_lock);
    adapt.phase = MEASURE_HELPERS;
    adapt.left = WINDOW_LOOPS;
    adapt.work_ns[0] = adapt.wall_ns[0] = adapt.work_ns[1] = adapt.wall_ns[1] = 0;
    adapt.helpers = true;
    adapt.stretch = FIRST_STRETCH_LOOPS;
    mxc__mutex_unlock(&pool.caller_lock);
}

/* How the next loop runs: with helpers or alone, and whether it is measured. */
static bool helpers_wanted(bool *measured) {
    *measured = adapt.phase != DECIDED;
    if (adapt.phase == DECIDED)
        return adapt.helpers;
    return adapt.phase == MEASURE_HELPERS;
}

static double per_wall(int way) {
    return adapt.work_ns[way] / (adapt.wall_ns[way] > 0 ? adapt.wall_ns[way] : 1);
}

static void decide(void) {
    double with = per_wall(0), alone = per_wall(1);
    bool helpers = with >= MIN_SPEEDUP * alone;
    if (helpers == adapt.helpers)
        adapt.stretch = adapt.stretch < MAX_STRETCH_LOOPS ? 2 * adapt.stretch : MAX_STRETCH_LOOPS;
    else
        adapt.stretch = FIRST_STRETCH_LOOPS;
    adapt.helpers = helpers;
    adapt.phase = DECIDED;
    adapt.left = adapt.stretch;
    mxc__log(MXC_LOG_DEBUG,
             "op threads: work per wall time %.2f with helpers, %.2f alone; the next %d "
             "loops run %s",
             with, alone, adapt.stretch, helpers ? "with helpers" : "on one thread");
}

/* Counts a loop; a measured one adds its work and wall-clock time to its window. After a
 * stretch the window alone comes first, and the one with helpers then ends as soon as
 * they do no better than alone (after EARLY_LOOPS): under load a loop may wait a whole
 * time slice for a preempted helper, and a short run (a fresh process) would otherwise
 * spend much of its time measuring. */
static void count_loop(bool measured, bool with_helpers, uint64_t work_ns, uint64_t wall_ns) {
    if (measured) {
        adapt.work_ns[!with_helpers] += (double)work_ns;
        adapt.wall_ns[!with_helpers] += (double)wall_ns;
    }
    --adapt.left;
    if (adapt.phase == MEASURE_HELPERS && adapt.wall_ns[1] > 0 &&
        WINDOW_LOOPS - adapt.left >= EARLY_LOOPS && per_wall(0) < per_wall(1))
        adapt.left = 0;
    if (adapt.left > 0)
        return;
    if (adapt.phase == DECIDED) {
        adapt.work_ns[0] = adapt.wall_ns[0] = adapt.work_ns[1] = adapt.wall_ns[1] = 0;
        adapt.phase = MEASURE_ALONE;
        adapt.left = WINDOW_LOOPS;
    } else if (adapt.wall_ns[adapt.phase == MEASURE_ALONE ? 0 : 1] > 0) {
        decide(); /* both ways measured */
    } else {
        adapt.phase = adapt.phase == MEASURE_ALONE ? MEASURE_HELPERS : MEASURE_ALONE;
        adapt.left = WINDOW_LOOPS;
    }
}

/* Range `i` of `parts` near-equal contiguous ranges of [0, n). */
static void split(int64_t n, int parts, int64_t i, int64_t *begin, int64_t *end) {
    int64_t q = n / parts, r = n % parts;
    *begin = i * q + (i < r ? i : r);
    *end = *begin + q + (i < r);
}

/* What the caller measures of its own part of a loop (helpers pass NULL). */
struct caller_share {
    bool timed; /* whether to read the CPU clock around each chunk */
    int chunks;
    uint64_t cpu_ns;
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
        uint64_t t0 = mine && mine->timed ? mxc__thread_cpu_ns() : 0;
        tl_region_depth++;
        body(arg, b, e);
        tl_region_depth--;
        if (mine) {
            mine->chunks++;
            if (mine->timed)
                mine->cpu_ns += mxc__thread_cpu_ns() - t0;
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
    bool measured;
    if (!helpers_wanted(&measured)) {
        uint64_t wall0 = measured ? mxc__now_ns() : 0, cpu0 = measured ? mxc__thread_cpu_ns() : 0;
        body(arg, 0, n);
        count_loop(measured, false, measured ? mxc__thread_cpu_ns() - cpu0 : 0,
                   measured ? mxc__now_ns() - wall0 : 0);
        mxc__mutex_unlock(&pool.caller_lock);
        return;
    }
    int helpers = ensure_helpers(t - 1);
    int64_t most = (int64_t)t * MXC__CHUNKS_PER_THREAD;
    int64_t chunks = parts < most ? parts : most;
    if (helpers > chunks - 1)
        helpers = (int)chunks - 1;

    uint64_t start_ns = measured ? mxc__now_ns() : 0;
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

    struct caller_share mine = {measured, 0, 0};
    run_chunks(seq, &mine);
    mxc__spin_wait_value(&pool.done, (unsigned)chunks, &pool.caller_sleeping);
    /* the work: the caller's CPU time per chunk for every chunk (when the helpers took
     * them all there is no estimate, and the loop does not count) */
    if (!measured || mine.chunks > 0)
        count_loop(measured, true,
                   measured ? mine.cpu_ns / (uint64_t)mine.chunks * (uint64_t)chunks : 0,
                   measured ? mxc__now_ns() - start_ns : 0);
    mxc__mutex_unlock(&pool.caller_lock);
}

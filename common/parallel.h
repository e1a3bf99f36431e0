/*
 * common/parallel.h — the intra-operator thread budget, decided in one place
 * (DESIGN.md section 5), and the loop that spends it.
 *
 * The cores are a budget shared by the engine's CPU workers and the threads an operator
 * starts: an operator running on a worker may use
 *     T = max(1, cores / cpu_workers)
 * threads, cpu_workers being the default engine's CPU worker count
 * (MXC_CPU_WORKER_NTHREADS, default 1, as MXNet's); MXC_OP_NTHREADS overrides T. So
 * workers × T never exceeds the cores: by default one worker runs one operator at a time
 * on every core, the faster choice for a network (its operators mostly wait on each
 * other); MXC_CPU_WORKER_NTHREADS=2 on 2 cores runs two operators at once, one core each.
 * OpenBLAS itself always runs single-threaded inside mxc (common/gemm.h splits products).
 * The threads are mxc's own (common/parallel.c says why not OpenMP's).
 * Internal.
 */
#ifndef MXC_PARALLEL_H
#define MXC_PARALLEL_H

#include <stdint.h>

/* The CPU worker count of an engine created without one: MXC_CPU_WORKER_NTHREADS when it
 * is in (0, 4096), else 1. Thread-safe. */
int mxc__default_cpu_workers(void);

/* The most threads an operator may use whatever MXC_OP_NTHREADS asks. */
#define MXC__MAX_OP_THREADS 64

/* T, the threads one operator may use (1 .. MXC__MAX_OP_THREADS). Read from the
 * environment on first use and cached; cheap afterwards. Thread-safe. */
int mxc__op_threads(void);

/* Forgets the cached T so the next mxc__op_threads reads the environment again; for
 * tests that change MXC_OP_NTHREADS. Not to be called while operators run. */
void mxc__op_threads_reset(void);

/* Forgets what the pool measured of its helpers, and lets the next 32 loops run with
 * helpers whatever they measure (a process starts measuring on the caller alone); for
 * tests of loops shared with helpers. Not to be called while loops run. */
void mxc__parallel_for_reset_to_helpers(void);

/* Chunks per thread mxc__parallel_for cuts a loop into when its grain allows: enough that
 * a thread the scheduler delays (a loaded machine) leaves its share to the others, few
 * enough that claiming them costs nothing next to the work. */
#define MXC__CHUNKS_PER_THREAD 4

/* body(arg, begin, end) for contiguous ranges that cover [0, n) exactly once, each at
 * least `grain` long when there are several (at most T × MXC__CHUNKS_PER_THREAD of them),
 * run by the calling thread and up to T - 1 helper threads of mxc's pool, which claim
 * ranges one at a time; returns when all are done. Runs body(arg, 0, n) on the calling
 * thread when T is 1, when n < 2 * grain, when called from inside another parallel body
 * (so nesting never multiplies threads) and when another thread's loop holds the pool.
 * Bodies must not depend on which thread runs them or in which order ranges run. No
 * thread of the pool spins for more than MXC__SPIN_NS (common/thread.h) before it sleeps. */
typedef void (*mxc__range_fn)(void *arg, int64_t begin, int64_t end);
void mxc__parallel_for(int64_t n, int64_t grain, mxc__range_fn body, void *arg);

/* Whether the calling thread is running a body of a parallel mxc__parallel_for: code that
 * could split its work further must then stay serial. */
int mxc__in_parallel(void);

#endif /* MXC_PARALLEL_H */

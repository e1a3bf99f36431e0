/*
 * engine/engine_impl.h — the engine's private structures, shared by the dependency
 * tracker (engine.c), the worker pools (workers.c), the profiler (profiler.c) and the
 * CUDA glue (cuda.c).
 *
 * Dependency tracking follows the seed design. Each variable keeps a queue of pending
 * accesses (var_block) ending in an empty sentinel (`head`, where the next access is
 * appended), a count of running reads, and a pointer to the oldest pending write. Each
 * pushed run carries an atomic count of unmet dependencies; whoever brings it to zero
 * dispatches it. Appending is O(1) whatever the backlog; completing a write releases the
 * run of reads queued after it, or the next write.
 *
 * Waits are counted in epochs: every run belongs to the epoch open when it was pushed,
 * and a wait closes the open epoch and sleeps until it has drained (see wait_pushed in
 * engine.c). Releasing its epoch is the last thing a run's completion does with the
 * engine, so a wait that has returned leaves nothing of the runs it covered touching it.
 */
#ifndef MXC_ENGINE_IMPL_H
#define MXC_ENGINE_IMPL_H

#include "mxc/engine.h"

#include "common/common.h"
#include "common/pool.h"
#include "common/queue.h"
#include "common/thread.h"

#include <stdatomic.h>
#include <stdbool.h>

#define ENGINE_MAGIC 0x454e4731u /* "ENG1" */
#define ENGINE_FREED 0x454e4746u /* "ENGF": freed (common/handle.h) */
#define VAR_MAGIC    0x56415231u /* "VAR1" */
#define VAR_DEAD     0x56415244u /* "VARD": delete scheduled */
#define VAR_FREED    0x56415246u /* "VARF": freed */
#define OPR_MAGIC    0x4f505231u /* "OPR1" */
#define OPR_DEAD     0x4f505244u /* "OPRD": delete scheduled */
#define OPR_FREED    0x4f505246u /* "OPRF": freed */
#define RUN_QUEUED   0x52554e30u /* "RUN0": a run pushed, running or completing */
#define RUN_ACTIVE   0x52554e31u /* an asynchronous run between dispatch and completion */
#define RUN_RESERVED 0x52554e52u /* "RUNR": held by a variable for its delete */
#define RUN_FREED    0x52554e46u /* "RUNF": retired */

#define ENGINE_MAX_GPUS 16
#define OP_INLINE_VARS  4
#define PROF_NAME_MAX   48
#define ENGINE_EPOCHS   64 /* epochs not yet drained at once; more waiters queue */

/* A failure travelling through variables; shared by every variable it reached. It lives
 * while a variable holds it, or, when it reached none, until a wait_all reported it. */
struct engine_error {
    atomic_int refs;
    int code;
    int orphan_refs;                  /* under error_lock: references held for wait_all */
    bool linked;                      /* under error_lock: on the engine's list */
    uint64_t seq;                     /* the failed run's place in the push order */
    struct engine_error *prev, *next; /* the engine's live errors, newest first */
    char message[512];
};

struct var_block {
    struct var_block *next;
    struct mxc_engine_done *trigger; /* the run waiting for this access */
    bool write;
};

struct mxc_var {
    _Atomic uint32_t magic;
    mxc__spinlock lock;
    int32_t num_pending_reads;       /* reads dispatched and not yet completed */
    bool state;                      /* never carries a failure (mxc_engine_new_state_var) */
    struct var_block *head;          /* empty sentinel at the end of the queue */
    struct var_block *pending_write; /* oldest write not yet completed, NULL if none */
    struct engine_error *error;      /* the failure it carries, or NULL */
    struct mxc_engine *engine;
    /* What its delete needs, taken when it is created, so a delete never allocates: a run
     * slot (NULL once the delete is pushed) and a queue block. */
    struct engine_op_temp *delete_op;
    struct var_block *delete_block;
};

/* The fixed part of an operation: what to run and on which variables. A push creates a
 * temporary one (freed when its single run retires); new_operator a reusable one. */
struct engine_op {
    _Atomic uint32_t magic;
    uint8_t prop;
    bool temporary;
    struct mxc_engine *engine;
    bool always_run;  /* delete and wait operations: run even on failed variables */
    bool deletes_var; /* the (single) mutable variable is freed after this op */
    int num_const, num_mutable;
    int num_overwritten; /* the first mutable vars, written wholly (desc.overwrite) */
    mxc_var **vars;      /* const vars, then mutable vars; inline_vars or allocated */
    mxc_var *inline_vars[OP_INLINE_VARS];
    mxc_engine_fn fn;
    mxc_engine_async_fn async_fn;
    void *arg;
    void (*arg_free)(void *arg);
    mxc_context ctx;
    const char *name;
    char *owned_name;              /* reusable operations copy their name */
    atomic_int refs;               /* reusable: the handle plus each pending run */
    struct engine_op *prev, *next; /* live reusable operations, for destroy */
};

/* One run of an operation: what the dependency tracker schedules. Temporary operations
 * embed theirs; reusable operations take one per push. The public completion handle
 * (mxc_engine_done) is this struct; every run sits at the start of a slot of
 * engine_op_temp's size (common/handle.h). */
struct mxc_engine_done {
    _Atomic uint32_t magic;
    atomic_int wait; /* unmet dependencies + 1 until the push has appended them all */
    struct engine_op *op;
    struct mxc_engine *engine;
    uint64_t epoch; /* the epoch it was pushed in */
    uint64_t seq;   /* its place in the push order */
    int priority;
    int tid;                             /* thread that started it, for the profiler */
    uint64_t start_ns;                   /* 0 unless profiled */
    struct mxc_engine_done *next_inline; /* runs waiting on an inline-running thread */
};

struct engine_op_temp {
    struct mxc_engine_done run; /* first: the completion handle starts the slot */
    struct engine_op op;
};

/* ---- Profiler ---------------------------------------------------------------------- */

struct prof_record {
    char name[PROF_NAME_MAX];
    mxc_context ctx;
    int tid;
    uint64_t start_ns, end_ns;
};

struct prof_buffer {
    mxc__mutex lock;
    struct prof_record *records;
    size_t count, capacity;
};

void mxc__prof_buffer_init(struct prof_buffer *b);
void mxc__prof_buffer_destroy(struct prof_buffer *b);
void mxc__prof_record(struct mxc_engine *eng, struct mxc_engine_done *run, uint64_t end_ns);
void mxc__prof_clear(struct mxc_engine *eng);

/* ---- Workers ----------------------------------------------------------------------- */

struct worker_pool;

struct worker {
    struct worker_pool *pool;
    int index;
    mxc__thread thread;
    void *stream;                     /* GPU pools: this worker's CUDA stream */
    struct mxc_engine_done *next_run; /* a run made ready by this worker's last one */
    struct prof_buffer prof;
};

struct worker_pool {
    struct mxc_engine *engine;
    mxc__queue queue;
    mxc_context ctx; /* GPU pools set the device and own streams */
    bool copy_pool;
    int num_workers;
    struct worker *workers;
    char name[16];
};

/* ---- The engine -------------------------------------------------------------------- */

struct mxc_engine {
    _Atomic uint32_t magic;
    int type;
    mxc_engine_config config;

    /* Pushing side. */
    _Alignas(64) mxc__spinlock push_lock; /* one order of appends across all variables */
    uint64_t pushed;                      /* under push_lock */
    struct var_block *spare_blocks;       /* under push_lock: reserved before appending */
    int num_spare_blocks;
    mxc__pool block_pool; /* variables, operators and runs are handles (engine.c) */

    uint64_t epoch; /* under push_lock: the open epoch */
    _Alignas(64) atomic_llong pending;
    _Alignas(64) atomic_ullong failed;
    atomic_llong live_vars;

    mxc__mutex wait_lock; /* throttled pushes sleep on it */
    mxc__cond wait_cond;
    atomic_int wait_sleepers;

    /* Epochs not yet drained, by number modulo ENGINE_EPOCHS. Each counts its runs not
     * yet retired, plus one while it is open, plus one until the epoch before it has
     * drained; so it reaches zero once it and every older epoch have drained. Not a
     * cache line each: all runs share one epoch but while a wait is in progress, and
     * padded the ring would make the engine outgrow its 4 KiB handle slot. */
    _Alignas(64) atomic_llong epochs[ENGINE_EPOCHS];
    mxc__mutex epoch_lock; /* waits sleep on it */
    mxc__cond epoch_cond;
    uint64_t drained;    /* under epoch_lock: every epoch below it has drained */
    uint64_t last_epoch; /* under epoch_lock: destroy's, after which none opens */

    mxc__mutex error_lock;
    struct engine_error *errors;   /* every live failure record, newest first */
    struct engine_error oom_error; /* the record used when allocating one fails */

    mxc__mutex opr_lock;
    struct engine_op *oprs; /* live reusable operations */

    /* Worker pools. perdevice: cpu, cpu_priority and lazily created GPU pools;
     * pooled: cpu (everything) and io (copies); naive: none. */
    struct worker_pool *cpu, *cpu_priority, *io;
    mxc__mutex gpu_lock;
    _Atomic(struct worker_pool *) gpu[ENGINE_MAX_GPUS][2]; /* [id][compute, copy] */

    atomic_bool profiling;
    uint64_t prof_origin_ns;
    struct prof_buffer prof_shared; /* records from threads that are not workers */
    char *prof_autodump;
};

/* engine.c: checks an engine handle (NULL, stale, not an engine); records MXC_EMISUSE
 * naming public function `fn`. */
int mxc__engine_check(const struct mxc_engine *eng, const char *fn);

/* engine.c: runs a dispatched run on the calling thread (checks failed variables, calls
 * the function, completes it when synchronous). `rctx` describes the caller. */
void mxc__engine_execute(struct mxc_engine_done *run, const mxc_run_ctx *rctx);

/* engine.c: completes a run that cannot be executed with failure `code` (message: the
 * calling thread's last error). */
void mxc__engine_fail(struct mxc_engine_done *run, int code);

/* workers.c */
int mxc__workers_start(struct mxc_engine *eng);
void mxc__workers_stop(struct mxc_engine *eng);
void mxc__engine_dispatch(struct mxc_engine *eng, struct mxc_engine_done *run);
struct worker *mxc__current_worker(void);
/* Visits every worker's profiler buffer. */
void mxc__workers_foreach_prof(struct mxc_engine *eng,
                               void (*fn)(struct prof_buffer *b, void *user), void *user);

/* cuda.c: no-ops returning MXC_ENODEV without USE_CUDA */
int mxc__cuda_worker_init(int dev_id, bool copy_stream, void **stream);
void mxc__cuda_worker_fini(void *stream);
int mxc__cuda_stream_sync(void *stream);

#endif /* MXC_ENGINE_IMPL_H */

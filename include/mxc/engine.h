/*
 * mxc/engine.h — the dependency engine: everything mxc computes is an operation pushed
 * here, and everything it computes on is an engine variable.
 *
 * The rule: two operations that share a variable, at least one of them mutating it, run
 * in the order they were pushed; everything else may run in parallel. A variable is a
 * token for a resource the caller owns (an array's memory, a random generator, a temp
 * buffer); the engine never looks inside.
 *
 * Failures never stop the engine. An operation whose function fails marks the variables
 * it writes as failed. A failure stays with its variable until the variable is deleted or
 * overwritten: written by an operation that succeeds and whose description says it
 * overwrites (desc.overwrite) and does not also read it. An operation that reads a failed
 * variable, or writes one without overwriting it, is skipped: its function is not called
 * and it passes the failure on to what it writes (delete and wait operations still run).
 * Waits report failures with their messages and never clear them. Variables made with
 * mxc_engine_new_state_var never carry a failure.
 *
 * Waits cover what was pushed before them: mxc_engine_wait_for_var the operations on one
 * variable, mxc_engine_wait_all every operation. Operations pushed after a wait started,
 * from any thread, do not make it longer. Once a wait has returned, nothing of the
 * operations it covered uses the engine any more (their mxc_engine_complete calls
 * included), so the engine may be destroyed at once.
 *
 * Deleting a variable needs no memory: what its delete uses is taken when the variable is
 * made, so memory can always be given back (an array's free is a delete).
 *
 * Handles (base.h): a deleted variable, a deleted reusable operation, a completion handle
 * after mxc_engine_complete, and a destroyed engine with all of its variables and
 * operations are stale. Given to any function here, of any engine, they are MXC_EMISUSE,
 * never a read of freed memory; of two threads deleting one variable or operation, or
 * completing one run, at the same time, exactly one acts.
 *
 * Thread-safety: every function here may be called from any thread unless its comment
 * says otherwise. Pushes from several threads are ordered consistently on every shared
 * variable (as if the pushes happened one at a time in some order).
 */
#ifndef MXC_ENGINE_H
#define MXC_ENGINE_H

#include "mxc/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An engine: workers plus dependency tracking. */
typedef struct mxc_engine mxc_engine;
/** A variable: a token standing for a resource that operations read or mutate. */
typedef struct mxc_var mxc_var;
/** A reusable operation: function and variables fixed once, pushed many times. */
typedef struct mxc_engine_opr mxc_engine_opr;
/** The completion handle an asynchronous function receives. */
typedef struct mxc_engine_done mxc_engine_done;

/** Engine kinds. MXC_ENGINE_TYPE selects the default engine's kind by name: "naive",
 * "pooled" or "perdevice" (MXNet's NaiveEngine / ThreadedEngine /
 * ThreadedEnginePerDevice are accepted too). */
typedef enum mxc_engine_type {
    /** Runs each operation on the pushing thread, inside push: for debugging. */
    MXC_ENGINE_NAIVE = 0,
    /** One pool of CPU workers for all devices plus one pool for device copies. */
    MXC_ENGINE_POOLED = 1,
    /** Per device: CPU workers, a CPU priority worker, and for each GPU compute workers
     * (one CUDA stream each) and copy workers. The default. */
    MXC_ENGINE_PERDEVICE = 2,
} mxc_engine_type;

/** Properties of an operation, deciding which workers run it. */
typedef enum mxc_fn_property {
    MXC_PROP_NORMAL = 0,           /**< computation on its context's compute workers */
    MXC_PROP_COPY_TO_DEVICE = 1,   /**< host-to-device copy: the device's copy workers */
    MXC_PROP_COPY_FROM_DEVICE = 2, /**< device-to-host copy: the device's copy workers */
    MXC_PROP_CPU_PRIORITIZED = 3,  /**< CPU work ordered by priority on the priority worker */
    MXC_PROP_DELETE_VAR = 4,       /**< runs even when its variables failed */
    MXC_PROP_ASYNC = 5,            /**< a short function run on the thread that makes it ready */
} mxc_fn_property;

/** What a running function learns about where it runs. */
typedef struct mxc_run_ctx {
    mxc_context ctx; /**< the operation's context */
    void *stream;    /**< the worker's cudaStream_t for GPU operations, else NULL */
    int worker;      /**< index of the worker thread in its pool, -1 when run inline */
} mxc_run_ctx;

/** A synchronous operation: returns MXC_OK or a negative status, with a message recorded
 * through the library's last-error mechanism (mxc_last_error on this thread). */
typedef int (*mxc_engine_fn)(const mxc_run_ctx *rctx, void *arg);

/** An asynchronous operation: starts its work and returns; the work (on any thread)
 * must call mxc_engine_complete(done, status) exactly once when it is finished. */
typedef void (*mxc_engine_async_fn)(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done);

/** Everything that describes an operation. Zero-initialise it and set what you need. */
typedef struct mxc_engine_op_desc {
    mxc_engine_fn fn; /**< set exactly one of fn and async_fn */
    mxc_engine_async_fn async_fn;
    void *arg;                   /**< passed to the function */
    void (*arg_free)(void *arg); /**< if set, called once when the operation is retired */
    mxc_context ctx;             /**< where it runs; an all-zero context means the CPU */
    mxc_var *const *const_vars;  /**< variables it reads */
    int num_const_vars;
    mxc_var *const *mutable_vars; /**< variables it writes; one in both lists counts once,
                                       as written; duplicates are removed */
    int num_mutable_vars;
    int prop;         /**< an mxc_fn_property */
    int priority;     /**< higher runs first where a queue orders by priority */
    const char *name; /**< for the profiler and error messages; must stay
                                       valid until the operation has run (a literal) */
    int overwrite;    /**< nonzero: the function writes every mutable variable that is not
                           also in const_vars wholly, whatever it held (a copy into an array,
                           a fill). A failure such a variable carries does not stop the
                           operation, and is cleared when it succeeds (see the top of this file). */
} mxc_engine_op_desc;

/** Engine settings; a zero field takes its environment variable, then the default. */
typedef struct mxc_engine_config {
    int cpu_workers;          /**< MXC_CPU_WORKER_NTHREADS, default 1: one operator at a
                                   time, each given every core (operators.md) */
    int cpu_priority_workers; /**< MXC_CPU_PRIORITY_NTHREADS, default 1 */
    int gpu_workers;          /**< MXC_GPU_WORKER_NTHREADS, default 1 per GPU */
    int gpu_copy_workers;     /**< MXC_GPU_COPY_NTHREADS, default 1 per GPU */
    long max_pending;         /**< MXC_ENGINE_MAX_PENDING: a push from a thread that is
                                   not a worker waits while this many operations are
                                   pending; default 65536 */
} mxc_engine_config;

/** Counters of an engine, for tests and benchmarks. */
typedef struct mxc_engine_stats {
    uint64_t pushed;     /**< operations pushed since creation */
    uint64_t completed;  /**< operations retired (run, skipped or failed) */
    uint64_t failed;     /**< operations that failed or were skipped */
    int64_t pending;     /**< pushed but not retired */
    int64_t live_vars;   /**< variables created and not yet deleted */
    uint64_t pool_bytes; /**< bytes the engine holds for its live variables (their slots,
                              and the run slot each holds for its delete) and for queued
                              accesses to variables */
} mxc_engine_stats;

/** Creates an engine of `type` (an mxc_engine_type) with `config` (NULL: environment and
 * defaults) and writes it to `*out`. Returns MXC_OK, MXC_EINVAL (unknown type, negative
 * setting), MXC_ENOMEM. The caller owns the engine and frees it with mxc_engine_destroy.
 * Several engines can exist side by side; their variables must not be mixed. */
MXC_API int mxc_engine_create(int type, const mxc_engine_config *config, mxc_engine **out);

/** Waits for every pushed operation (and those they push), stops and joins the workers
 * and frees the engine with its variables and reusable operations. NULL is ignored. Call
 * it from a thread that is not one of its workers, once nothing else pushes to or waits
 * on it; right after a wait has returned is fine, whichever thread completes operations.
 * Afterwards the engine's handle and those of its variables and operations are stale
 * (see the top of this file); a second destroy is logged at MXC_LOG_ERROR and does
 * nothing. */
MXC_API void mxc_engine_destroy(mxc_engine *engine);

/** The process's default engine, created on first use with the kind named by
 * MXC_ENGINE_TYPE (default perdevice); it is drained and destroyed at exit. Returns
 * MXC_OK, MXC_EINVAL (bad MXC_ENGINE_TYPE), MXC_ENOMEM. */
MXC_API int mxc_engine_get_default(mxc_engine **out);

/** The engine's kind, an mxc_engine_type, or -1 for a bad handle (MXC_EMISUSE recorded
 * as the last error). */
MXC_API int mxc_engine_type_of(const mxc_engine *engine);

/** The static name of an engine kind ("naive", "pooled", "perdevice"), or NULL. */
MXC_API const char *mxc_engine_type_name(int type);

/** Creates a variable and writes it to `*out` (NULL on failure). Costs tens of
 * nanoseconds (pooled); what deleting it will need is taken now. Returns MXC_OK,
 * MXC_EINVAL (out is NULL), MXC_EMISUSE (bad engine), MXC_ENOMEM. */
MXC_API int mxc_engine_new_var(mxc_engine *engine, mxc_var **out);

/** As mxc_engine_new_var, for state that stays usable whatever an operation on it does,
 * such as a scratch buffer or a random generator shared by many operations: an operation
 * that fails does not mark it failed, so one failure cannot stop every later user. */
MXC_API int mxc_engine_new_state_var(mxc_engine *engine, mxc_var **out);

/** Schedules the deletion of `var`: `delete_fn(arg)` (may be NULL) runs on a CPU worker
 * after every operation pushed before on `var`, even if `var` failed; then the variable
 * and its failure are freed. The handle must not be used after this call: given again it
 * is MXC_EMISUSE. Needs no memory (what it uses was taken when `var` was made), so it
 * cannot fail for lack of it. Returns MXC_OK, or MXC_EMISUSE (bad engine or variable, or
 * its deletion already scheduled, by this thread or another at the same time; nothing
 * was scheduled). */
MXC_API int mxc_engine_delete_var(mxc_engine *engine, mxc_var *var, mxc_engine_fn delete_fn,
                                  void *arg);

/** Pushes an operation and returns at once. The variable lists are copied. On MXC_OK the
 * engine owns `arg` (arg_free is called when the operation retires); on failure nothing
 * was scheduled and `arg` stays the caller's. Returns MXC_OK, MXC_EINVAL (no function or
 * both, negative counts, unknown property), MXC_EMISUSE (bad engine or variable),
 * MXC_ENODEV (a GPU context this build or machine does not have), MXC_ENOMEM. */
MXC_API int mxc_engine_push(mxc_engine *engine, const mxc_engine_op_desc *desc);

/** Creates a reusable operation from `desc` (variables copied, name copied). Pushing it
 * costs no allocation. arg_free, if set, is called when it is deleted. Returns as
 * mxc_engine_push. */
MXC_API int mxc_engine_new_operator(mxc_engine *engine, const mxc_engine_op_desc *desc,
                                    mxc_engine_opr **out);

/** Pushes one run of a reusable operation with `priority`. Returns MXC_OK, MXC_EMISUSE,
 * MXC_ENOMEM. */
MXC_API int mxc_engine_push_operator(mxc_engine *engine, mxc_engine_opr *opr, int priority);

/** Schedules the deletion of a reusable operation after its pending runs; the handle
 * must not be used after this call. Its variables must still exist (delete them after).
 * Returns MXC_OK, MXC_EMISUSE, MXC_ENOMEM. NULL is ignored (MXC_OK). */
MXC_API int mxc_engine_delete_operator(mxc_engine *engine, mxc_engine_opr *opr);

/** Reports the end of an asynchronous function with `status` (MXC_OK or a negative code;
 * on failure the calling thread's last error is taken as the message). Call exactly once
 * per run, from any thread. A second call, or a handle that is not an active run's, is
 * logged at MXC_LOG_ERROR and ignored: it never completes another run. */
MXC_API void mxc_engine_complete(mxc_engine_done *done, int status);

/** Blocks until every operation that reads or writes `var` and was pushed before this
 * call has retired; later pushes do not extend the wait. Returns MXC_OK, or the status of
 * the failure `var` carries (its message in mxc_last_error), which stays until `var` is
 * overwritten or deleted; MXC_EMISUSE for a bad handle or when called from inside an
 * engine operation (it would wait for itself); MXC_ENOMEM (nothing was waited for). */
MXC_API int mxc_engine_wait_for_var(mxc_engine *engine, mxc_var *var);

/** Blocks until every operation pushed before this call, from any thread, has retired;
 * operations pushed meanwhile do not extend the wait. Returns MXC_OK, or the status and
 * message of the first failure among those operations that still stands: one a variable
 * still carries, or one that reached no variable (its operation writes none) and that no
 * earlier wait_all reported. Clears no variable's failure. Needs no memory. MXC_EMISUSE
 * for a bad handle or from inside an engine operation. */
MXC_API int mxc_engine_wait_all(mxc_engine *engine);

/** Reads the engine's counters. Returns MXC_OK or MXC_EMISUSE. */
MXC_API int mxc_engine_get_stats(mxc_engine *engine, mxc_engine_stats *out);

/** Writes the settings the engine runs with, every field resolved (what the config asked
 * for, else the environment, else the default), e.g. its CPU worker count. Returns
 * MXC_OK, MXC_EMISUSE (bad handle) or MXC_EINVAL (out is NULL). Thread-safe. */
MXC_API int mxc_engine_get_config(mxc_engine *engine, mxc_engine_config *out);

/* ---- Profiler ---------------------------------------------------------------------- *
 * While on, every operation's name, context, worker thread, start and end are recorded in
 * per-thread buffers. MXC_PROFILER_AUTOSTART=1 turns it on when an engine is created and
 * MXC_PROFILER_OUTPUT (default "profile.json") names the file written when it is
 * destroyed. */

/** Starts recording (clears earlier records). Returns MXC_OK or MXC_EMISUSE. */
MXC_API int mxc_engine_profiler_start(mxc_engine *engine);

/** Stops recording; records are kept for dump. Returns MXC_OK or MXC_EMISUSE. */
MXC_API int mxc_engine_profiler_stop(mxc_engine *engine);

/** Writes the records as Chrome trace JSON (chrome://tracing, Perfetto) to `path`.
 * Call it after stop or after a wait. Returns MXC_OK, MXC_EMISUSE, MXC_EIO (with the
 * path and the system's reason). */
MXC_API int mxc_engine_profiler_dump(mxc_engine *engine, const char *path);

/* ---- Devices ----------------------------------------------------------------------- */

/** What mxc_gpu_info reports of one GPU. */
typedef struct mxc_gpu_info_t {
    char name[256];        /**< the device's name ("NVIDIA H100 80GB HBM3"), NUL-terminated */
    uint64_t total_memory; /**< global memory in bytes */
    int major, minor;      /**< compute capability (9 and 0 for sm_90) */
    int multiprocessors;   /**< streaming multiprocessors */
} mxc_gpu_info_t;

/** Describes GPU `dev` (0 <= dev < mxc_gpu_count()) in *out (zeroed first).
 * Returns MXC_OK, MXC_EINVAL (out is NULL), MXC_ENODEV (a build without CUDA, or no GPU
 * `dev`; the message says which), MXC_EDEVICE (the CUDA runtime failed, with its message).
 * Thread-safe. */
MXC_API int mxc_gpu_info(int dev, mxc_gpu_info_t *out);

#ifdef __cplusplus
}
#endif

#endif /* MXC_ENGINE_H */

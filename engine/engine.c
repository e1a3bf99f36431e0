/*
 * engine/engine.c — the dependency tracker and the engine API: variables, pushes,
 * completion, failure propagation, waits and reusable operations. Where a ready run is
 * executed (inline or by which worker pool) is decided in workers.c.
 */
#include "engine/engine_impl.h"

#include "common/gemm.h"
#include "common/handle.h"
#include "common/parallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Depth of engine functions running on this thread: waiting from inside one would wait
 * for itself. */
static _Thread_local int tl_running;

static int noop_fn(const mxc_run_ctx *rctx, void *arg) { return MXC_OK; }

/* ---- Handles (common/handle.h) ------------------------------------------------------ *
 * Engines, variables, reusable operators and runs live in process-wide slabs, so a
 * variable or operator outlives its engine's memory as a poisoned slot: handed to another
 * engine it is MXC_EMISUSE, not a read of freed memory. Every run (the completion handle)
 * takes a slot big enough for a temporary operation; a variable holds, from its creation,
 * the one its delete will use (new_var). */

static mxc__handle_kind engine_kind =
    MXC__HANDLE_KIND(struct mxc_engine, "an engine", ENGINE_MAGIC, ENGINE_FREED);
static mxc__handle_kind var_kind =
    MXC__HANDLE_KIND(struct mxc_var, "an engine variable", VAR_MAGIC, VAR_FREED);
static mxc__handle_kind opr_kind =
    MXC__HANDLE_KIND(struct engine_op, "an engine operator", OPR_MAGIC, OPR_FREED);
static mxc__handle_kind run_kind = MXC__HANDLE_KIND_SIZED(
    "an operation's completion", sizeof(struct engine_op_temp), RUN_ACTIVE, RUN_FREED);
_Static_assert(offsetof(struct engine_op_temp, run) == 0 &&
                   offsetof(struct mxc_engine_done, magic) == 0,
               "a run starts its slot, with its magic");

int mxc__engine_check(const struct mxc_engine *eng, const char *fn) {
    return mxc__handle_check(&engine_kind, eng, fn, "engine");
}

/* ---- Failure records --------------------------------------------------------------- */

/* A new record (one reference, the caller's) for a failure of `run`'s operation; the
 * message is the calling thread's last error. Never NULL: without memory for a record,
 * the engine's own one serves, shared by every failure while it is in use. */
static struct engine_error *error_new(struct mxc_engine *eng, int code,
                                      const struct mxc_engine_done *run) {
    struct engine_error *e = mxc__malloc(sizeof *e);
    const char *name = run->op->name ? run->op->name : "(unnamed)";
    mxc__mutex_lock(&eng->error_lock);
    if (e == NULL) {
        e = &eng->oom_error;
        if (atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed) > 0) {
            mxc__mutex_unlock(&eng->error_lock);
            return e;
        }
        snprintf(e->message, sizeof e->message,
                 "operation '%s' failed (%s); no memory was left to record why", name,
                 mxc_err_name(code));
    } else {
        atomic_init(&e->refs, 1);
        e->linked = false;
        const char *why = mxc_last_error_code() == code && mxc_last_error()[0] != '\0'
                              ? mxc_last_error()
                              : mxc_strerror(code);
        snprintf(e->message, sizeof e->message, "operation '%s' failed: %s", name, why);
    }
    e->code = code;
    e->orphan_refs = 0;
    e->seq = run->seq;
    if (!e->linked) { /* the engine's record may still be listed from its last use */
        e->prev = NULL;
        e->next = eng->errors;
        if (eng->errors)
            eng->errors->prev = e;
        eng->errors = e;
        e->linked = true;
    }
    mxc__mutex_unlock(&eng->error_lock);
    return e;
}

static void error_ref(struct engine_error *e) {
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
}

static void error_unref(struct mxc_engine *eng, struct engine_error *e) {
    if (e == NULL || atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1)
        return;
    mxc__mutex_lock(&eng->error_lock);
    /* Only the engine's own record can be taken again meanwhile (error_new). */
    bool dead = atomic_load_explicit(&e->refs, memory_order_relaxed) == 0 && e->linked;
    if (dead) {
        if (e->prev)
            e->prev->next = e->next;
        else
            eng->errors = e->next;
        if (e->next)
            e->next->prev = e->prev;
        e->linked = false;
    }
    mxc__mutex_unlock(&eng->error_lock);
    if (dead && e != &eng->oom_error)
        mxc__free(e);
}

/* Sets the failure `v` carries (NULL: none) and returns the one it replaces, which the
 * caller unrefs once it has let go of `v`'s lock. The caller holds `v`'s lock. */
static struct engine_error *var_set_error(struct mxc_var *v, struct engine_error *err) {
    struct engine_error *old = v->error;
    if (err)
        error_ref(err);
    v->error = err;
    return old;
}

/* ---- Appending and completing dependencies ----------------------------------------- */

static struct var_block *take_spare_block(struct mxc_engine *eng) {
    struct var_block *b = eng->spare_blocks;
    eng->spare_blocks = b->next;
    eng->num_spare_blocks--;
    b->next = NULL;
    b->trigger = NULL;
    b->write = false;
    return b;
}

static void release_dependency(struct mxc_engine *eng, struct mxc_engine_done *run) {
    if (atomic_fetch_sub_explicit(&run->wait, 1, memory_order_acq_rel) == 1)
        mxc__engine_dispatch(eng, run);
}

/* Called with push_lock held. The run's +1 keeps it from reaching zero here. */
static void append_read(struct mxc_engine *eng, struct mxc_var *v, struct mxc_engine_done *run) {
    mxc__spin_lock(&v->lock);
    if (v->pending_write == NULL) {
        v->num_pending_reads++;
        mxc__spin_unlock(&v->lock);
        atomic_fetch_sub_explicit(&run->wait, 1, memory_order_relaxed);
        return;
    }
    struct var_block *tail = take_spare_block(eng);
    v->head->trigger = run;
    v->head->write = false;
    v->head->next = tail;
    v->head = tail;
    mxc__spin_unlock(&v->lock);
}

static void append_write(struct mxc_engine *eng, struct mxc_var *v, struct mxc_engine_done *run) {
    struct var_block *tail = take_spare_block(eng);
    bool ready = false;
    mxc__spin_lock(&v->lock);
    v->head->trigger = run;
    v->head->write = true;
    v->head->next = tail;
    if (v->pending_write == NULL) {
        v->pending_write = v->head;
        ready = v->num_pending_reads == 0;
    }
    v->head = tail;
    mxc__spin_unlock(&v->lock);
    if (ready)
        atomic_fetch_sub_explicit(&run->wait, 1, memory_order_relaxed);
}

static void complete_read(struct mxc_engine *eng, struct mxc_var *v) {
    struct mxc_engine_done *trigger = NULL;
    mxc__spin_lock(&v->lock);
    if (--v->num_pending_reads == 0 && v->pending_write != NULL)
        trigger = v->pending_write->trigger;
    mxc__spin_unlock(&v->lock);
    if (trigger)
        release_dependency(eng, trigger);
}

static void free_var(struct mxc_engine *eng, struct mxc_var *v) {
    error_unref(eng, var_set_error(v, NULL));
    mxc__pool_free(&eng->block_pool, v->head);
    mxc__handle_free(&var_kind, v);
    atomic_fetch_sub_explicit(&eng->live_vars, 1, memory_order_relaxed);
}

/* Completes the oldest pending write of `v`, by an operation that failed with `err`
 * (NULL: it succeeded) and `overwrote` v or not: a failure marks `v` unless it carries
 * one already that the operation did not overwrite; a success that overwrote it clears
 * its failure. Then releases the reads queued behind the write, or the next write.
 * Returns whether `v` holds `err` now. */
static bool complete_write(struct mxc_engine *eng, struct mxc_var *v, struct engine_error *err,
                           bool overwrote, bool delete_after) {
    struct engine_error *old = NULL;
    mxc__spin_lock(&v->lock);
    if (!v->state && v->error != err && (overwrote || v->error == NULL))
        old = var_set_error(v, err);
    bool took = err != NULL && v->error == err;
    struct var_block *done = v->pending_write;
    struct var_block *first = done->next, *end = first;
    int reads = 0;
    while (end != v->head && !end->write) {
        end = end->next;
        reads++;
    }
    v->num_pending_reads += reads;
    struct mxc_engine_done *write_trigger = NULL;
    if (end == v->head) {
        v->pending_write = NULL;
    } else {
        v->pending_write = end;
        if (reads == 0)
            write_trigger = end->trigger;
    }
    bool idle = v->pending_write == NULL && v->num_pending_reads == 0;
    mxc__spin_unlock(&v->lock);
    error_unref(eng, old);

    mxc__pool_free(&eng->block_pool, done);
    /* The blocks from first to end are ours alone now: appends touch only the head. */
    for (struct var_block *b = first; b != end;) {
        struct var_block *next = b->next;
        struct mxc_engine_done *trigger = b->trigger;
        mxc__pool_free(&eng->block_pool, b);
        release_dependency(eng, trigger);
        b = next;
    }
    if (write_trigger)
        release_dependency(eng, write_trigger);
    if (delete_after) {
        if (idle)
            free_var(eng, v);
        else
            mxc__log(MXC_LOG_ERROR, "engine: a variable was used after its deletion was "
                                    "scheduled; it is leaked");
    }
    return took;
}

/* ---- Runs -------------------------------------------------------------------------- */

static void operator_unref(struct mxc_engine *eng, struct engine_op *op);

/* Wakes pushes throttled by max_pending once half of the pending runs have retired. */
static void notify_throttled(struct mxc_engine *eng, long long pending) {
    if (pending == eng->config.max_pending / 2 &&
        atomic_load_explicit(&eng->wait_sleepers, memory_order_seq_cst) > 0) {
        mxc__mutex_lock(&eng->wait_lock);
        mxc__cond_broadcast(&eng->wait_cond);
        mxc__mutex_unlock(&eng->wait_lock);
    }
}

static atomic_llong *epoch_slot(struct mxc_engine *eng, uint64_t epoch) {
    return &eng->epochs[epoch % ENGINE_EPOCHS];
}

/* Drops one count of `epoch`. Whoever drains an epoch (brings it to zero) wakes its
 * waiters, then drops the count it held on the next one. Nothing here reads the engine
 * after the decrement that does not drain, nor after the wake-up of destroy's epoch: from
 * then on a returned wait may have freed it. Up to that point some wait that has not
 * returned, destroy's included, still needs this epoch or the next one to drain. */
static void epoch_release(struct mxc_engine *eng, uint64_t epoch) {
    for (;;) {
        if (atomic_fetch_sub_explicit(epoch_slot(eng, epoch), 1, memory_order_acq_rel) != 1)
            return;
        mxc__mutex_lock(&eng->epoch_lock);
        eng->drained = epoch + 1;
        bool last = epoch == eng->last_epoch;
        mxc__cond_broadcast(&eng->epoch_cond);
        mxc__mutex_unlock(&eng->epoch_lock);
        if (last)
            return;
        epoch++;
    }
}

/* Frees the run (and a temporary operation) once its dependencies are released; the
 * operation's arg_free already ran. Releasing its epoch comes last (epoch_release). */
static void retire(struct mxc_engine *eng, struct mxc_engine_done *run) {
    struct engine_op *op = run->op;
    uint64_t epoch = run->epoch;
    if (op->temporary) {
        if (op->vars != op->inline_vars)
            mxc__free(op->vars);
        mxc__handle_free(&run_kind, run); /* the operation is embedded in the same slot */
    } else {
        mxc__handle_free(&run_kind, run);
        operator_unref(eng, op);
    }
    long long left = atomic_fetch_sub_explicit(&eng->pending, 1, memory_order_seq_cst) - 1;
    notify_throttled(eng, left);
    epoch_release(eng, epoch);
}

/* Releases the run's dependencies, passing `err` (a reference the caller gives up, or
 * NULL) to the variables it writes, and retires it. A failure of its own (`fresh`) that
 * no variable took is kept for wait_all to report. */
static void complete_run(struct mxc_engine_done *run, struct engine_error *err, bool fresh) {
    struct mxc_engine *eng = run->engine;
    struct engine_op *op = run->op;
    if (run->start_ns != 0)
        mxc__prof_record(eng, run, mxc__now_ns());
    if (err)
        atomic_fetch_add_explicit(&eng->failed, 1, memory_order_relaxed);
    /* arg_free runs before the variables are released, so a wait on them also covers
     * the operation's cleanup. */
    if (op->temporary && op->arg_free)
        op->arg_free(op->arg);
    for (int i = 0; i < op->num_const; i++)
        complete_read(eng, op->vars[i]);
    bool taken = false;
    for (int i = 0; i < op->num_mutable; i++)
        taken |= complete_write(eng, op->vars[op->num_const + i], err, i < op->num_overwritten,
                                op->deletes_var);
    if (err && fresh && !taken) {
        mxc__mutex_lock(&eng->error_lock);
        err->orphan_refs++; /* the caller's reference, now wait_all's */
        mxc__mutex_unlock(&eng->error_lock);
    } else {
        error_unref(eng, err);
    }
    retire(eng, run);
}

static void finish_run(struct mxc_engine_done *run, int status) {
    if (status > 0) /* not a status code: someone returned a count or a boolean */
        status = mxc__error(MXC_EINTERNAL, "returned %d, which is not a status code", status);
    if (status == MXC_OK)
        complete_run(run, NULL, false);
    else
        complete_run(run, error_new(run->engine, status, run), true);
}

/* The failure that stops `op`: one carried by a variable it reads, or by one it writes
 * without overwriting it. A run has access to its variables, so their failures hold
 * still while it looks. */
static struct engine_error *blocking_error(const struct engine_op *op) {
    if (op->always_run)
        return NULL;
    int overwritten_end = op->num_const + op->num_overwritten;
    for (int i = 0; i < op->num_const + op->num_mutable; i++) {
        if (i >= op->num_const && i < overwritten_end)
            continue;
        if (op->vars[i]->error)
            return op->vars[i]->error;
    }
    return NULL;
}

void mxc__engine_execute(struct mxc_engine_done *run, const mxc_run_ctx *rctx) {
    struct mxc_engine *eng = run->engine;
    struct engine_op *op = run->op;
    run->start_ns = 0;
    if (atomic_load_explicit(&eng->profiling, memory_order_relaxed)) {
        run->start_ns = mxc__now_ns();
        run->tid = mxc__thread_id();
    }
    struct engine_error *err = blocking_error(op);
    if (err) {
        error_ref(err);
        complete_run(run, err, false);
        return;
    }
    tl_running++;
    if (op->fn) {
        int status = op->fn(rctx, op->arg);
        if (status == MXC_OK && rctx->stream != NULL)
            status = mxc__cuda_stream_sync(rctx->stream);
        tl_running--;
        finish_run(run, status);
    } else {
        mxc__handle_set_magic(run, RUN_ACTIVE);
        op->async_fn(rctx, op->arg, run);
        tl_running--;
    }
}

void mxc__engine_fail(struct mxc_engine_done *run, int code) {
    finish_run(run, code == MXC_OK ? MXC_EINTERNAL : code);
}

void mxc_engine_complete(mxc_engine_done *done, int status) {
    /* Of two racing completions of one run, the one that swaps the magic wins. */
    if (!mxc__handle_owns(&run_kind, done) ||
        !mxc__handle_swap_magic(done, RUN_ACTIVE, RUN_QUEUED)) {
        mxc__handle_check_magic(&run_kind, done, RUN_ACTIVE, __func__, "done");
        mxc__log(MXC_LOG_ERROR, "%s (completed twice?); ignored", mxc_last_error());
        return;
    }
    finish_run(done, status);
}

/* Appends `run` to the queues of its operation's variables and dispatches it if nothing
 * is in its way. `reserved` (may be NULL) joins the spare blocks first: a delete brings
 * the one its variable reserved, so it needs no memory. Fails only for lack of memory,
 * before anything is appended. */
static int push_run(struct mxc_engine *eng, struct mxc_engine_done *run,
                    struct var_block *reserved) {
    struct engine_op *op = run->op;
    int n = op->num_const + op->num_mutable;
    if (mxc__current_worker() == NULL && tl_running == 0 &&
        atomic_load_explicit(&eng->pending, memory_order_relaxed) >= eng->config.max_pending) {
        /* Throttle a producer far ahead of the workers (never a worker: that could
         * deadlock). */
        mxc__mutex_lock(&eng->wait_lock);
        atomic_fetch_add(&eng->wait_sleepers, 1);
        while (atomic_load(&eng->pending) > eng->config.max_pending / 2)
            mxc__cond_wait(&eng->wait_cond, &eng->wait_lock);
        atomic_fetch_sub(&eng->wait_sleepers, 1);
        mxc__mutex_unlock(&eng->wait_lock);
    }
    mxc__handle_set_magic(run, RUN_QUEUED);
    run->engine = eng;
    run->start_ns = 0;
    run->next_inline = NULL;
    atomic_init(&run->wait, n + 1);

    mxc__spin_lock(&eng->push_lock);
    if (reserved) {
        reserved->next = eng->spare_blocks;
        eng->spare_blocks = reserved;
        eng->num_spare_blocks++;
    }
    while (eng->num_spare_blocks < n) {
        struct var_block *b = mxc__pool_alloc(&eng->block_pool);
        if (b == NULL) {
            mxc__spin_unlock(&eng->push_lock);
            return mxc__error(MXC_ENOMEM, "engine: out of memory queueing '%s'",
                              op->name ? op->name : "(unnamed)");
        }
        b->next = eng->spare_blocks;
        eng->spare_blocks = b;
        eng->num_spare_blocks++;
    }
    run->seq = eng->pushed++;
    run->epoch = eng->epoch;
    atomic_fetch_add_explicit(epoch_slot(eng, run->epoch), 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&eng->pending, 1, memory_order_relaxed);
    for (int i = 0; i < op->num_const; i++)
        append_read(eng, op->vars[i], run);
    for (int i = op->num_const; i < n; i++)
        append_write(eng, op->vars[i], run);
    mxc__spin_unlock(&eng->push_lock);

    release_dependency(eng, run);
    return MXC_OK;
}

/* ---- Operations -------------------------------------------------------------------- */

static bool contains(mxc_var *const *vars, int n, const mxc_var *v) {
    for (int i = 0; i < n; i++)
        if (vars[i] == v)
            return true;
    return false;
}

static int check_var(struct mxc_engine *eng, const mxc_var *v, const char *list, int i,
                     const char *name) {
    if (MXC_UNLIKELY(!mxc__handle_owns(&var_kind, v) || mxc__handle_magic(v) != VAR_MAGIC)) {
        char what[160];
        snprintf(what, sizeof what, "%s[%d] of '%s'", list, i, name);
        return mxc__handle_check(&var_kind, v, "engine", what);
    }
    if (v->engine != eng)
        return mxc__error(MXC_EMISUSE, "engine: %s[%d] of '%s' belongs to another engine", list, i,
                          name);
    return MXC_OK;
}

/* Validates `d`, a caller's description: function, variable lists, property, device and
 * that every variable is a live one of `eng`. */
static int op_check(struct mxc_engine *eng, const mxc_engine_op_desc *d) {
    const char *name = d->name ? d->name : "(unnamed)";
    if ((d->fn == NULL) == (d->async_fn == NULL))
        return mxc__error(MXC_EINVAL, "engine: '%s' must set exactly one of fn and async_fn", name);
    if (d->num_const_vars < 0 || d->num_mutable_vars < 0 ||
        (d->num_const_vars > 0 && d->const_vars == NULL) ||
        (d->num_mutable_vars > 0 && d->mutable_vars == NULL))
        return mxc__error(MXC_EINVAL,
                          "engine: '%s' has bad variable lists (%d const, %d "
                          "mutable)",
                          name, d->num_const_vars, d->num_mutable_vars);
    if (d->prop < MXC_PROP_NORMAL || d->prop > MXC_PROP_ASYNC)
        return mxc__error(MXC_EINVAL, "engine: '%s' has unknown property %d", name, d->prop);
    mxc_context ctx = d->ctx;
    if (ctx.dev_type == MXC_GPU) {
        int n = mxc_gpu_count();
        if (ctx.dev_id < 0 || ctx.dev_id >= n || ctx.dev_id >= ENGINE_MAX_GPUS)
            return mxc__error(MXC_ENODEV, "engine: '%s' asks for gpu(%d) but %d GPU%s usable", name,
                              ctx.dev_id, n, n == 1 ? " is" : "s are");
    } else if (ctx.dev_type != 0 && ctx.dev_type != MXC_CPU && ctx.dev_type != MXC_CPU_PINNED) {
        return mxc__error(MXC_EINVAL, "engine: '%s' has unknown device type %d", name,
                          ctx.dev_type);
    }
    for (int i = 0; i < d->num_const_vars; i++) {
        int rc = check_var(eng, d->const_vars[i], "const_vars", i, name);
        if (rc != MXC_OK)
            return rc;
    }
    for (int i = 0; i < d->num_mutable_vars; i++) {
        int rc = check_var(eng, d->mutable_vars[i], "mutable_vars", i, name);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

/* Fills `op` (whose inline_vars are usable) from `d`, which op_check accepted: function,
 * context, property and the deduplicated variables. Fails only for lack of memory, and
 * only with more than OP_INLINE_VARS variables. */
static int op_init(struct mxc_engine *eng, struct engine_op *op, const mxc_engine_op_desc *d) {
    int total = d->num_const_vars + d->num_mutable_vars;
    op->vars = op->inline_vars;
    if (total > OP_INLINE_VARS) {
        op->vars = mxc__malloc((size_t)total * sizeof *op->vars);
        if (op->vars == NULL)
            return mxc__error(MXC_ENOMEM, "engine: out of memory for %d variables of '%s'", total,
                              d->name ? d->name : "(unnamed)");
    }
    /* A variable listed twice, or as both read and written, counts once (written). The
     * written ones an overwriting operation does not read come first: it overwrites them. */
    int nc = 0, nm = 0, now = 0;
    for (int i = 0; i < d->num_const_vars; i++) {
        mxc_var *v = d->const_vars[i];
        if (!contains(d->mutable_vars, d->num_mutable_vars, v) && !contains(op->vars, nc, v))
            op->vars[nc++] = v;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < d->num_mutable_vars; i++) {
            mxc_var *v = d->mutable_vars[i];
            bool overwritten = d->overwrite && !contains(d->const_vars, d->num_const_vars, v);
            if (overwritten == (pass == 0) && !contains(op->vars + nc, nm, v)) {
                op->vars[nc + nm++] = v;
                now += overwritten;
            }
        }
    }
    op->magic = OPR_MAGIC;
    op->engine = eng;
    op->num_const = nc;
    op->num_mutable = nm;
    op->num_overwritten = now;
    op->fn = d->fn;
    op->async_fn = d->async_fn;
    op->arg = d->arg;
    op->arg_free = d->arg_free;
    op->ctx = d->ctx;
    if (op->ctx.dev_type == 0)
        op->ctx.dev_type = MXC_CPU;
    op->prop = (uint8_t)d->prop;
    op->always_run = d->prop == MXC_PROP_DELETE_VAR;
    op->deletes_var = false;
    op->temporary = false;
    op->name = d->name;
    op->owned_name = NULL;
    op->prev = op->next = NULL;
    return MXC_OK;
}

static void op_release_vars(struct engine_op *op) {
    if (op->vars != op->inline_vars)
        mxc__free(op->vars);
    op->vars = op->inline_vars;
}

/* Pushes the one-shot operation described by `desc` (checked) in run slot `t`, freeing the
 * slot on failure. `always_run` makes it run on failed variables. `doomed` is the variable
 * this operation deletes (marked VAR_DEAD; `t` is the slot it reserved), or NULL: its
 * delete brings the queue block it reserved too, so nothing is allocated and the push
 * cannot fail. Otherwise fails only for lack of memory. */
static int push_temp(struct mxc_engine *eng, struct engine_op_temp *t,
                     const mxc_engine_op_desc *desc, bool always_run, struct mxc_var *doomed) {
    int rc = op_init(eng, &t->op, desc);
    if (rc == MXC_OK) {
        t->op.temporary = true;
        t->op.always_run |= always_run;
        t->op.deletes_var = doomed != NULL;
        t->run.op = &t->op;
        t->run.priority = desc->priority;
        rc = push_run(eng, &t->run, doomed ? doomed->delete_block : NULL);
        if (rc != MXC_OK)
            op_release_vars(&t->op);
    }
    if (rc != MXC_OK)
        mxc__handle_free(&run_kind, t);
    return rc;
}

/* push_temp in a new run slot. */
static int push_new_temp(struct mxc_engine *eng, const mxc_engine_op_desc *desc, bool always_run) {
    struct engine_op_temp *t = mxc__handle_alloc(&run_kind);
    if (t == NULL)
        return mxc__error(MXC_ENOMEM, "engine: out of memory pushing '%s'",
                          desc->name ? desc->name : "(unnamed)");
    return push_temp(eng, t, desc, always_run, NULL);
}

#define CHECK_ENGINE_AS(eng, fn)                        \
    do {                                                \
        int check_rc_ = mxc__engine_check((eng), (fn)); \
        if (check_rc_ != MXC_OK)                        \
            return check_rc_;                           \
    } while (0)
#define CHECK_ENGINE(eng) CHECK_ENGINE_AS(eng, __func__)

int mxc_engine_push(mxc_engine *eng, const mxc_engine_op_desc *desc) {
    CHECK_ENGINE(eng);
    if (desc == NULL)
        return mxc__error(MXC_EINVAL, "mxc_engine_push: desc is NULL");
    int rc = op_check(eng, desc);
    if (rc != MXC_OK)
        return rc;
    return push_new_temp(eng, desc, false);
}

/* ---- Variables --------------------------------------------------------------------- */

/* A new variable with what its delete will need: a run slot (magic RUN_RESERVED, so it is
 * no live completion handle and its slab stays in use) and a queue block. So a delete
 * never allocates, and its run is a slot of run_kind like every other. */
static int new_var(struct mxc_engine *eng, bool state, mxc_var **out, const char *fn) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "%s: out is NULL", fn);
    *out = NULL;
    CHECK_ENGINE_AS(eng, fn);
    struct mxc_var *v = mxc__handle_alloc(&var_kind);
    struct var_block *sentinel = mxc__pool_alloc(&eng->block_pool);
    struct var_block *delete_block = mxc__pool_alloc(&eng->block_pool);
    struct engine_op_temp *delete_op = mxc__handle_alloc(&run_kind);
    if (v == NULL || sentinel == NULL || delete_block == NULL || delete_op == NULL) {
        if (v)
            mxc__handle_free(&var_kind, v);
        if (sentinel)
            mxc__pool_free(&eng->block_pool, sentinel);
        if (delete_block)
            mxc__pool_free(&eng->block_pool, delete_block);
        if (delete_op)
            mxc__handle_free(&run_kind, delete_op);
        return mxc__error(MXC_ENOMEM, "%s: out of memory", fn);
    }
    mxc__handle_set_magic(&delete_op->run, RUN_RESERVED);
    sentinel->next = NULL;
    sentinel->trigger = NULL;
    sentinel->write = false;
    mxc__spin_init(&v->lock);
    v->num_pending_reads = 0;
    v->state = state;
    v->head = sentinel;
    v->pending_write = NULL;
    v->error = NULL;
    v->engine = eng;
    v->delete_op = delete_op;
    v->delete_block = delete_block;
    mxc__handle_publish(&var_kind, v);
    atomic_fetch_add_explicit(&eng->live_vars, 1, memory_order_relaxed);
    *out = v;
    return MXC_OK;
}

int mxc_engine_new_var(mxc_engine *eng, mxc_var **out) {
    return new_var(eng, false, out, __func__);
}

int mxc_engine_new_state_var(mxc_engine *eng, mxc_var **out) {
    return new_var(eng, true, out, __func__);
}

int mxc_engine_delete_var(mxc_engine *eng, mxc_var *var, mxc_engine_fn delete_fn, void *arg) {
    CHECK_ENGINE(eng);
    int rc = check_var(eng, var, "var", 0, __func__);
    if (rc != MXC_OK)
        return rc;
    /* Of two racing deletes, the one that swaps the magic owns the reserved slot. From
     * now on pushes naming var are MXC_EMISUSE, and the delete may free it at any time. */
    if (!mxc__handle_swap_magic(var, VAR_MAGIC, VAR_DEAD))
        return mxc__error(MXC_EMISUSE, "%s: another thread deleted var at the same time", __func__);
    struct engine_op_temp *t = var->delete_op;
    var->delete_op = NULL;
    mxc_engine_op_desc d = {.fn = delete_fn ? delete_fn : noop_fn,
                            .arg = arg,
                            .mutable_vars = &var,
                            .num_mutable_vars = 1,
                            .prop = MXC_PROP_DELETE_VAR,
                            .name = "delete_var"};
    rc = push_temp(eng, t, &d, true, var);
    MXC_ASSERT(rc == MXC_OK); /* one variable, its reserved slot and block: no allocation */
    return rc;
}

/* ---- Reusable operations ----------------------------------------------------------- */

int mxc_engine_new_operator(mxc_engine *eng, const mxc_engine_op_desc *desc, mxc_engine_opr **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_engine_new_operator: out is NULL");
    *out = NULL;
    CHECK_ENGINE(eng);
    if (desc == NULL)
        return mxc__error(MXC_EINVAL, "mxc_engine_new_operator: desc is NULL");
    struct engine_op *op = mxc__handle_alloc(&opr_kind);
    if (op == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_engine_new_operator: out of memory");
    int rc = op_check(eng, desc);
    if (rc == MXC_OK)
        rc = op_init(eng, op, desc);
    if (rc == MXC_OK && desc->name) {
        op->owned_name = mxc__strdup(desc->name);
        op->name = op->owned_name;
        if (op->owned_name == NULL) {
            op_release_vars(op);
            rc = mxc__error(MXC_ENOMEM, "mxc_engine_new_operator: out of memory");
        }
    }
    if (rc != MXC_OK) {
        mxc__handle_free(&opr_kind, op);
        return rc;
    }
    atomic_init(&op->refs, 1);
    mxc__mutex_lock(&eng->opr_lock);
    op->next = eng->oprs;
    if (eng->oprs)
        eng->oprs->prev = op;
    eng->oprs = op;
    mxc__mutex_unlock(&eng->opr_lock);
    *out = (mxc_engine_opr *)op;
    return MXC_OK;
}

/* Checks that `op` is a live reusable operation of `eng`, for public function `fn`. */
static int check_opr(struct mxc_engine *eng, const struct engine_op *op, const char *fn) {
    int rc = mxc__handle_check(&opr_kind, op, fn, "operator");
    if (rc == MXC_OK && op->engine != eng)
        rc = mxc__error(MXC_EMISUSE, "%s: the operator belongs to another engine", fn);
    return rc;
}

int mxc_engine_push_operator(mxc_engine *eng, mxc_engine_opr *opr, int priority) {
    CHECK_ENGINE(eng);
    struct engine_op *op = (struct engine_op *)opr;
    int rc = check_opr(eng, op, __func__);
    if (rc != MXC_OK)
        return rc;
    struct engine_op_temp *t = mxc__handle_alloc(&run_kind); /* only the run part is used */
    if (t == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_engine_push_operator: out of memory");
    struct mxc_engine_done *run = &t->run;
    run->op = op;
    run->priority = priority;
    atomic_fetch_add_explicit(&op->refs, 1, memory_order_relaxed);
    rc = push_run(eng, run, NULL);
    if (rc != MXC_OK) {
        atomic_fetch_sub_explicit(&op->refs, 1, memory_order_relaxed);
        mxc__handle_free(&run_kind, t);
    }
    return rc;
}

static void free_operator(struct engine_op *op) {
    if (op->arg_free)
        op->arg_free(op->arg);
    op_release_vars(op);
    mxc__free(op->owned_name);
    mxc__handle_free(&opr_kind, op);
}

/* Drops a reference to a reusable operation: one per pending run, one for the handle. */
static void operator_unref(struct mxc_engine *eng, struct engine_op *op) {
    if (atomic_fetch_sub_explicit(&op->refs, 1, memory_order_acq_rel) != 1)
        return;
    mxc__mutex_lock(&eng->opr_lock);
    if (op->prev)
        op->prev->next = op->next;
    else
        eng->oprs = op->next;
    if (op->next)
        op->next->prev = op->prev;
    mxc__mutex_unlock(&eng->opr_lock);
    free_operator(op);
}

int mxc_engine_delete_operator(mxc_engine *eng, mxc_engine_opr *opr) {
    CHECK_ENGINE(eng);
    struct engine_op *op = (struct engine_op *)opr;
    if (op == NULL)
        return MXC_OK;
    int rc = check_opr(eng, op, __func__);
    if (rc != MXC_OK)
        return rc;
    if (!mxc__handle_swap_magic(op, OPR_MAGIC, OPR_DEAD)) /* another thread deleted it */
        return mxc__handle_check(&opr_kind, op, __func__, "operator");
    operator_unref(eng, op); /* freed now, or when its last pending run retires */
    return MXC_OK;
}

/* ---- Waiting ----------------------------------------------------------------------- */

struct var_waiter {
    mxc__mutex lock;
    mxc__cond cond;
    bool done;
    int code;
    char message[sizeof(((struct engine_error *)0)->message)];
    mxc_var *var;
};

/* Reads the failure `v` carries (it stays there); the caller holds `v`'s lock or has
 * access to `v`. */
static int read_var_error(const mxc_var *v, char *message, size_t size) {
    if (v->error == NULL)
        return MXC_OK;
    snprintf(message, size, "%s", v->error->message);
    return v->error->code;
}

static int wait_var_fn(const mxc_run_ctx *rctx, void *arg) {
    struct var_waiter *w = arg;
    int code = read_var_error(w->var, w->message, sizeof w->message);
    mxc__mutex_lock(&w->lock);
    w->code = code;
    w->done = true;
    mxc__cond_signal(&w->cond);
    mxc__mutex_unlock(&w->lock);
    return MXC_OK;
}

static int check_can_wait(const char *fn) {
    if (tl_running > 0 || mxc__current_worker() != NULL)
        return mxc__error(MXC_EMISUSE,
                          "%s: called from inside an engine operation, where "
                          "it would wait for itself",
                          fn);
    return MXC_OK;
}

static uint64_t wait_pushed(struct mxc_engine *eng, bool last);

int mxc_engine_wait_for_var(mxc_engine *eng, mxc_var *var) {
    CHECK_ENGINE(eng);
    int rc = check_var(eng, var, "var", 0, "mxc_engine_wait_for_var");
    if (rc == MXC_OK)
        rc = check_can_wait(__func__);
    if (rc != MXC_OK)
        return rc;

    struct var_waiter w = {.done = false, .code = MXC_OK, .var = var};
    mxc__spin_lock(&var->lock);
    bool idle = var->pending_write == NULL && var->num_pending_reads == 0;
    if (idle)
        w.code = read_var_error(var, w.message, sizeof w.message);
    mxc__spin_unlock(&var->lock);
    if (!idle) {
        mxc__mutex_init(&w.lock);
        mxc__cond_init(&w.cond);
        /* A write that always runs: it comes after every earlier read and write. */
        mxc_engine_op_desc d = {.fn = wait_var_fn,
                                .arg = &w,
                                .mutable_vars = &var,
                                .num_mutable_vars = 1,
                                .prop = MXC_PROP_ASYNC,
                                .name = "wait_for_var"};
        rc = push_new_temp(eng, &d, true);
        if (rc == MXC_OK) {
            mxc__mutex_lock(&w.lock);
            while (!w.done)
                mxc__cond_wait(&w.cond, &w.lock);
            mxc__mutex_unlock(&w.lock);
        }
        mxc__cond_destroy(&w.cond);
        mxc__mutex_destroy(&w.lock);
        if (rc == MXC_ENOMEM) {
            /* No memory for the waiting operation: wait for everything pushed so far,
             * which needs none. A wait must never return while what it waits for still
             * runs: callers free what those operations use (a copy's host buffer). */
            wait_pushed(eng, false);
            mxc__spin_lock(&var->lock);
            w.code = read_var_error(var, w.message, sizeof w.message);
            mxc__spin_unlock(&var->lock);
        } else if (rc != MXC_OK) {
            return rc;
        }
    }
    if (w.code != MXC_OK)
        return mxc__error_set(w.code, w.message);
    return MXC_OK;
}

/*
 * Waits for every run pushed before the call: closes the open epoch (opening the next,
 * unless `last`, for destroy) and sleeps until it has drained, which it does only after
 * every older epoch. Runs pushed meanwhile belong to the next epoch and do not make the
 * wait longer; only when ENGINE_EPOCHS epochs are undrained at once (as many waits in
 * progress) does a wait queue for the oldest to drain before it closes its own. Returns
 * the number of runs pushed before it closed the epoch: runs with a lower sequence
 * number are the ones it covered.
 */
static uint64_t wait_pushed(struct mxc_engine *eng, bool last) {
    uint64_t epoch, pushed;
    mxc__mutex_lock(&eng->epoch_lock);
    for (;;) {
        mxc__spin_lock(&eng->push_lock);
        epoch = eng->epoch;
        pushed = eng->pushed;
        /* Only its open count left: it and every older epoch have drained. */
        bool idle = atomic_load_explicit(epoch_slot(eng, epoch), memory_order_acquire) == 1;
        if (!last && idle) {
            mxc__spin_unlock(&eng->push_lock);
            mxc__mutex_unlock(&eng->epoch_lock);
            return pushed;
        }
        if (last || epoch + 1 - eng->drained < ENGINE_EPOCHS)
            break;
        mxc__spin_unlock(&eng->push_lock); /* every slot busy: wait for the oldest */
        mxc__cond_wait(&eng->epoch_cond, &eng->epoch_lock);
    }
    if (last) {
        eng->last_epoch = epoch;
    } else {
        /* open, and the epoch before it (this one) not drained */
        atomic_store_explicit(epoch_slot(eng, epoch + 1), 2, memory_order_relaxed);
        eng->epoch = epoch + 1;
    }
    mxc__spin_unlock(&eng->push_lock);
    mxc__mutex_unlock(&eng->epoch_lock);
    epoch_release(eng, epoch); /* its open count */
    mxc__mutex_lock(&eng->epoch_lock);
    while (eng->drained <= epoch)
        mxc__cond_wait(&eng->epoch_cond, &eng->epoch_lock);
    mxc__mutex_unlock(&eng->epoch_lock);
    return pushed;
}

/* Reports the first failure among the runs pushed before `pushed` that still stands:
 * carried by a variable, or, having reached none, not yet reported by a wait_all. The
 * latter are dropped now. */
static int report_failures(struct mxc_engine *eng, uint64_t pushed) {
    int rc = MXC_OK;
    for (bool more = true; more;) {
        struct engine_error *orphans[16];
        int n = 0;
        const struct engine_error *first = NULL;
        mxc__mutex_lock(&eng->error_lock);
        for (struct engine_error *e = eng->errors; e; e = e->next) {
            if (e->seq >= pushed)
                continue;
            first = e; /* newest first: the last one is the oldest */
            for (; e->orphan_refs > 0 && n < (int)MXC_ARRAY_SIZE(orphans); e->orphan_refs--)
                orphans[n++] = e;
        }
        if (first && rc == MXC_OK)
            rc = mxc__error_set(first->code, first->message);
        mxc__mutex_unlock(&eng->error_lock);
        more = n == (int)MXC_ARRAY_SIZE(orphans);
        for (int i = 0; i < n; i++)
            error_unref(eng, orphans[i]);
    }
    return rc;
}

int mxc_engine_wait_all(mxc_engine *eng) {
    CHECK_ENGINE(eng);
    int rc = check_can_wait(__func__);
    if (rc != MXC_OK)
        return rc;
    return report_failures(eng, wait_pushed(eng, false));
}

/* ---- Engine life ------------------------------------------------------------------- */

static int config_value(int given, const char *env, int fallback) {
    if (given > 0)
        return given;
    long v = mxc__env_long(env, 0);
    return v > 0 && v < 4096 ? (int)v : fallback;
}

int mxc_engine_create(int type, const mxc_engine_config *config, mxc_engine **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_engine_create: out is NULL");
    *out = NULL;
    if (type < MXC_ENGINE_NAIVE || type > MXC_ENGINE_PERDEVICE)
        return mxc__error(MXC_EINVAL, "mxc_engine_create: unknown engine type %d", type);
    mxc_engine_config cfg = {0};
    if (config) {
        if (config->cpu_workers < 0 || config->cpu_priority_workers < 0 ||
            config->gpu_workers < 0 || config->gpu_copy_workers < 0 || config->max_pending < 0)
            return mxc__error(MXC_EINVAL, "mxc_engine_create: negative setting in config");
        cfg = *config;
    }
    if (cfg.cpu_workers == 0) /* one rule with the operators' thread budget */
        cfg.cpu_workers = mxc__default_cpu_workers();
    cfg.cpu_priority_workers =
        config_value(cfg.cpu_priority_workers, "MXC_CPU_PRIORITY_NTHREADS", 1);
    cfg.gpu_workers = config_value(cfg.gpu_workers, "MXC_GPU_WORKER_NTHREADS", 1);
    cfg.gpu_copy_workers = config_value(cfg.gpu_copy_workers, "MXC_GPU_COPY_NTHREADS", 1);
    if (cfg.max_pending == 0)
        cfg.max_pending = mxc__env_long("MXC_ENGINE_MAX_PENDING", 65536);
    if (cfg.max_pending < 2)
        cfg.max_pending = 2;

    struct mxc_engine *eng = mxc__handle_alloc(&engine_kind); /* zeroed, 64-byte aligned */
    if (eng == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_engine_create: out of memory");
    eng->type = type;
    eng->config = cfg;
    mxc__spin_init(&eng->push_lock);
    mxc__pool_init(&eng->block_pool, sizeof(struct var_block), 16);
    mxc__mutex_init(&eng->wait_lock);
    mxc__cond_init(&eng->wait_cond);
    mxc__mutex_init(&eng->error_lock);
    mxc__mutex_init(&eng->epoch_lock);
    mxc__cond_init(&eng->epoch_cond);
    atomic_init(&eng->epochs[0], 1); /* epoch 0 is open */
    eng->last_epoch = UINT64_MAX;
    mxc__mutex_init(&eng->opr_lock);
    mxc__mutex_init(&eng->gpu_lock);
    mxc__prof_buffer_init(&eng->prof_shared);
    mxc__handle_publish(&engine_kind, eng);
    /* Before any worker can run an operator: OpenBLAS must not start threads of its own
     * on top of the workers' (common/parallel.h, the thread budget). */
    mxc__blas_init();
    int rc = mxc__workers_start(eng);
    if (rc != MXC_OK) {
        mxc_engine_destroy(eng);
        return rc;
    }
    const char *autostart = getenv("MXC_PROFILER_AUTOSTART");
    if (autostart && strcmp(autostart, "1") == 0) {
        const char *path = getenv("MXC_PROFILER_OUTPUT");
        eng->prof_autodump = mxc__strdup(path && *path ? path : "profile.json");
        mxc_engine_profiler_start(eng);
    }
    *out = eng;
    return MXC_OK;
}

/* For destroy's sweep: whether `var` is one of `eng`'s, and if so gives back the run slot
 * it holds for its delete (its blocks go with the engine's pool). */
static bool sweep_var(void *var, void *eng) {
    struct mxc_var *v = var;
    if (v->engine != eng)
        return false;
    if (v->delete_op) /* NULL once its delete was pushed */
        mxc__handle_free(&run_kind, v->delete_op);
    return true;
}

void mxc_engine_destroy(mxc_engine *eng) {
    if (!mxc__handle_check_free(&engine_kind, eng, __func__, "engine"))
        return;
    wait_pushed(eng, true);
    if (eng->prof_autodump) { /* before the workers go: their buffers hold the records */
        mxc_engine_profiler_stop(eng);
        if (mxc_engine_profiler_dump(eng, eng->prof_autodump) != MXC_OK)
            mxc__log(MXC_LOG_ERROR, "profiler: %s", mxc_last_error());
        mxc__free(eng->prof_autodump);
    }
    mxc__workers_stop(eng);
    while (eng->oprs) {
        struct engine_op *op = eng->oprs;
        eng->oprs = op->next;
        free_operator(op);
    }
    while (eng->errors) {
        struct engine_error *e = eng->errors;
        eng->errors = e->next;
        if (e != &eng->oom_error)
            mxc__free(e);
    }
    mxc__handle_sweep(&var_kind, sweep_var, eng); /* the variables it still had */
    mxc__prof_buffer_destroy(&eng->prof_shared);
    mxc__mutex_destroy(&eng->gpu_lock);
    mxc__mutex_destroy(&eng->opr_lock);
    mxc__mutex_destroy(&eng->error_lock);
    mxc__cond_destroy(&eng->epoch_cond);
    mxc__mutex_destroy(&eng->epoch_lock);
    mxc__cond_destroy(&eng->wait_cond);
    mxc__mutex_destroy(&eng->wait_lock);
    mxc__pool_destroy(&eng->block_pool);
    mxc__handle_free(&engine_kind, eng);
}

int mxc_engine_type_of(const mxc_engine *eng) {
    return mxc__engine_check(eng, __func__) == MXC_OK ? eng->type : -1;
}

static const char *const type_names[] = {"naive", "pooled", "perdevice"};

const char *mxc_engine_type_name(int type) {
    return type >= 0 && type < 3 ? type_names[type] : NULL;
}

static int parse_engine_type(const char *s) {
    static const char *const mxnet_names[] = {"NaiveEngine", "ThreadedEngine",
                                              "ThreadedEnginePerDevice"};
    if (s == NULL || *s == '\0')
        return MXC_ENGINE_PERDEVICE;
    for (int i = 0; i < 3; i++)
        if (strcasecmp(s, type_names[i]) == 0 || strcmp(s, mxnet_names[i]) == 0)
            return i;
    return -1;
}

static mxc_engine *default_engine;
static int default_status = MXC_OK;
static char default_message[256];
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void destroy_default(void) {
    mxc_engine_destroy(default_engine);
    default_engine = NULL;
}

static void create_default(void) {
    const char *name = getenv("MXC_ENGINE_TYPE");
    int type = parse_engine_type(name);
    if (type < 0) {
        default_status = mxc__error(MXC_EINVAL,
                                    "MXC_ENGINE_TYPE=%s is not naive, pooled or "
                                    "perdevice",
                                    name);
    } else {
        default_status = mxc_engine_create(type, NULL, &default_engine);
    }
    if (default_status != MXC_OK)
        snprintf(default_message, sizeof default_message, "%s", mxc_last_error());
    else
        atexit(destroy_default);
}

int mxc_engine_get_default(mxc_engine **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_engine_get_default: out is NULL");
    pthread_once(&default_once, create_default);
    *out = default_engine;
    if (default_status != MXC_OK)
        return mxc__error_set(default_status, default_message);
    return MXC_OK;
}

int mxc_engine_get_config(mxc_engine *eng, mxc_engine_config *out) {
    CHECK_ENGINE(eng);
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_engine_get_config: out is NULL");
    *out = eng->config; /* fixed at creation */
    return MXC_OK;
}

int mxc_engine_get_stats(mxc_engine *eng, mxc_engine_stats *out) {
    CHECK_ENGINE(eng);
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_engine_get_stats: out is NULL");
    mxc__spin_lock(&eng->push_lock);
    out->pushed = eng->pushed;
    mxc__spin_unlock(&eng->push_lock);
    out->pending = atomic_load(&eng->pending);
    out->completed = out->pushed - (uint64_t)out->pending;
    out->failed = atomic_load(&eng->failed);
    out->live_vars = atomic_load(&eng->live_vars);
    /* a live variable's slot and the run slot it holds for its delete */
    out->pool_bytes = mxc__pool_bytes(&eng->block_pool) +
                      (uint64_t)out->live_vars * (uint64_t)(var_kind.slot + run_kind.slot);
    return MXC_OK;
}

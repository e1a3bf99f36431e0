/*
 * tests/check_engine.c — the dependency engine against its contract (DESIGN.md section 2,
 * include/mxc/engine.h). Most tests run once per engine type (naive, pooled, perdevice)
 * through Check loop tests, each in its own process with a time-out, so a deadlock fails
 * one test instead of hanging the suite.
 *
 * What is checked: the seed programs (values, order, and overlap of independent reads),
 * randomized programs replayed serially (10,000 small workloads and one run of 1,000,000
 * operations per engine), asynchronous functions completed from other threads, reusable
 * operations, deletion of variables (also by two threads at once, and with no memory
 * left) and operations, priorities, error propagation, waits from inside operations,
 * pushes from many threads, misuse, the profiler, the counters and allocation through
 * the allocator hook (leaks, injected failures).
 *
 * MXC_TEST_QUICK=1 scales the long loops down.
 */
#include "common/common.h"
#include "common/handle.h"
#include "common/queue.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Pushing ----------------------------------------------------------------------- */

/* A variable list and its length, for the push helpers: VARS(a, b) or NO_VARS. */
#define VARS(...) \
    (mxc_var *const[]){__VA_ARGS__}, (int)(sizeof((mxc_var *[]){__VA_ARGS__}) / sizeof(mxc_var *))
#define NO_VARS NULL, 0

#define ENGINE_NAME mxc_engine_type_name(_i)

/* A non-NULL pointer that is no handle: constructors must overwrite it with NULL. */
static char sentinel_byte;
#define SENTINEL(type) ((type *)(void *)&sentinel_byte)

static mxc_engine_op_desc sync_desc(mxc_engine_fn fn, void *arg, mxc_var *const *cv, int nc,
                                    mxc_var *const *mv, int nm, const char *name) {
    mxc_engine_op_desc d;
    memset(&d, 0, sizeof d);
    d.fn = fn;
    d.arg = arg;
    d.ctx = mxc_cpu();
    d.const_vars = cv;
    d.num_const_vars = nc;
    d.mutable_vars = mv;
    d.num_mutable_vars = nm;
    d.prop = MXC_PROP_NORMAL;
    d.name = name;
    return d;
}

static void push_desc(mxc_engine *e, const mxc_engine_op_desc *d) {
    int rc = mxc_engine_push(e, d);
    ck_assert_msg(rc == MXC_OK, "push of '%s' = %s: %s", d->name ? d->name : "(unnamed)",
                  mxc_err_name(rc), mxc_last_error());
}

static void push_fn(mxc_engine *e, mxc_engine_fn fn, void *arg, mxc_var *const *cv, int nc,
                    mxc_var *const *mv, int nm, const char *name) {
    mxc_engine_op_desc d = sync_desc(fn, arg, cv, nc, mv, nm, name);
    push_desc(e, &d);
}

static void wait_all_ok(mxc_engine *e) {
    int rc = mxc_engine_wait_all(e);
    ck_assert_msg(rc == MXC_OK, "wait_all = %s: %s", mxc_err_name(rc), mxc_last_error());
}

static void wait_var_ok(mxc_engine *e, mxc_var *v) {
    int rc = mxc_engine_wait_for_var(e, v);
    ck_assert_msg(rc == MXC_OK, "wait_for_var = %s: %s", mxc_err_name(rc), mxc_last_error());
}

static mxc_engine_stats stats_of(mxc_engine *e) {
    mxc_engine_stats s;
    memset(&s, 0xff, sizeof s);
    ck_assert_int_eq(mxc_engine_get_stats(e, &s), MXC_OK);
    return s;
}

static void delete_var_ok(mxc_engine *e, mxc_var *v, mxc_engine_fn fn, void *arg) {
    int rc = mxc_engine_delete_var(e, v, fn, arg);
    ck_assert_msg(rc == MXC_OK, "delete_var = %s: %s", mxc_err_name(rc), mxc_last_error());
}

/* Expects `expr` to fail with `want`, with the code recorded and a message containing
 * `what` (the function, or the operation, the message must name). */
#define EXPECT_CODE(want, what, expr)                                                           \
    do {                                                                                        \
        mxc_clear_error();                                                                      \
        int rc_ = (expr);                                                                       \
        ck_assert_msg(rc_ == (want), "%s returned %s, expected %s (last error: \"%s\")", #expr, \
                      mxc_err_name(rc_), mxc_err_name(want), mxc_last_error());                 \
        ck_assert_msg(strstr(mxc_last_error(), (what)) != NULL,                                 \
                      "%s: message \"%s\" does not name %s", #expr, mxc_last_error(), (what));  \
        ck_assert_int_eq(mxc_last_error_code(), rc_);                                           \
    } while (0)

/* For cases the header leaves open: some failure, with a message. */
#define EXPECT_ERROR(expr)                                                                      \
    do {                                                                                        \
        mxc_clear_error();                                                                      \
        int rc_ = (expr);                                                                       \
        ck_assert_msg(rc_ < 0, "%s returned %s, expected a failure", #expr, mxc_err_name(rc_)); \
        ck_assert_msg(mxc_last_error()[0] != '\0', "%s: %s without a message", #expr,           \
                      mxc_err_name(rc_));                                                       \
    } while (0)

/* ---- Tracked arguments ------------------------------------------------------------- *
 * An operation's argument that counts its runs and its arg_free, and can fail. */

struct tracked {
    atomic_int runs, frees, runs_at_free;
    int status;          /* what the function returns */
    const char *message; /* recorded with mxc__error when status != MXC_OK */
};

static int tracked_fn(const mxc_run_ctx *rctx, void *arg) {
    struct tracked *t = arg;
    atomic_fetch_add(&t->runs, 1);
    if (t->status != MXC_OK)
        return mxc__error(t->status, "%s", t->message);
    return MXC_OK;
}

static void tracked_free(void *arg) {
    struct tracked *t = arg;
    atomic_store(&t->runs_at_free, atomic_load(&t->runs));
    atomic_fetch_add(&t->frees, 1);
}

static void push_tracked(mxc_engine *e, struct tracked *t, mxc_var *const *cv, int nc,
                         mxc_var *const *mv, int nm, const char *name) {
    mxc_engine_op_desc d = sync_desc(tracked_fn, t, cv, nc, mv, nm, name);
    d.arg_free = tracked_free;
    push_desc(e, &d);
}

#define EXPECT_RUNS(t, n)                                                            \
    ck_assert_msg(atomic_load(&(t).runs) == (n), "%s ran %d times, expected %d", #t, \
                  atomic_load(&(t).runs), (n))

/* ---- A gate: an operation that blocks its worker until the test opens it ----------- */

struct gate {
    atomic_int started, open;
};

static int gate_fn(const mxc_run_ctx *rctx, void *arg) {
    struct gate *g = arg;
    atomic_fetch_add(&g->started, 1);
    while (!atomic_load(&g->open))
        mxct_sleep_us(200);
    return MXC_OK;
}

/* ---- Arithmetic programs: the seed examples ---------------------------------------- *
 * An operation `dst = lhs <op> rhs` on int64 values, where an operand is a variable
 * index or, when -1, the immediate. It reads its inputs, sleeps, then writes, so an
 * operation started too early reads stale values. */

enum { VA, VB, VC, VD, CALC_VARS };

struct calc {
    const char *name;
    int dst, lhs, rhs;
    char op; /* '=', '+', '*' */
    int64_t imm;
    int sleep_ms;
    /* set by the run */
    int64_t *vals;
    struct mxct_span span;
    atomic_int runs;
    int worker;
    pthread_t thread;
};

static int calc_fn(const mxc_run_ctx *rctx, void *arg) {
    struct calc *c = arg;
    mxct_span_begin(&c->span);
    int64_t a = c->lhs >= 0 ? c->vals[c->lhs] : c->imm;
    int64_t b = c->rhs >= 0 ? c->vals[c->rhs] : c->imm;
    mxct_sleep_us(c->sleep_ms * 1000L);
    c->vals[c->dst] = c->op == '=' ? a : c->op == '+' ? a + b : a * b;
    c->worker = rctx->worker;
    c->thread = pthread_self();
    atomic_fetch_add(&c->runs, 1);
    mxct_span_end(&c->span);
    return MXC_OK;
}

static void calc_push(mxc_engine *e, mxc_var **vars, int64_t *vals, struct calc *c) {
    mxc_var *reads[2];
    int nr = 0;
    if (c->lhs >= 0)
        reads[nr++] = vars[c->lhs];
    if (c->rhs >= 0)
        reads[nr++] = vars[c->rhs];
    c->vals = vals;
    push_fn(e, calc_fn, c, reads, nr, &vars[c->dst], 1, c->name);
}

static void calc_push_all(mxc_engine *e, mxc_var **vars, int64_t *vals, struct calc *c, int n) {
    for (int i = 0; i < n; i++)
        calc_push(e, vars, vals, &c[i]);
}

#define EXPECT_BEFORE(x, y)                                                                   \
    ck_assert_msg(mxct_span_before(&(x).span, &(y).span), "'%s' must end before '%s' starts", \
                  (x).name, (y).name)
#define EXPECT_OVERLAP(x, y)                                                                  \
    ck_assert_msg(mxct_span_overlap(&(x).span, &(y).span),                                    \
                  "'%s' and '%s' are independent but did not run at the same time", (x).name, \
                  (y).name)

/* Each operation ran once: inline on the pushing thread for the naive engine, on a
 * worker thread for the others. */
static void expect_calcs_ran(int type, struct calc *c, int n, pthread_t pusher) {
    for (int i = 0; i < n; i++) {
        ck_assert_msg(atomic_load(&c[i].runs) == 1, "'%s' ran %d times", c[i].name,
                      atomic_load(&c[i].runs));
        bool on_pusher = pthread_equal(c[i].thread, pusher);
        if (mxct_engine_threaded(type)) {
            ck_assert_msg(!on_pusher && c[i].worker >= 0,
                          "'%s' ran on the pushing thread (worker %d)", c[i].name, c[i].worker);
        } else {
            ck_assert_msg(on_pusher && c[i].worker == -1, "'%s' did not run inline (worker %d)",
                          c[i].name, c[i].worker);
        }
    }
}

/* A = 2; B = A + 1; C = A + 2; D = B * C — B and C only read A, so they overlap. */
START_TEST(test_seed_parallel_reads) {
    mxc_engine_config cfg = {.cpu_workers = 2};
    mxc_engine *e = mxct_engine_new(_i, &cfg);
    mxc_var **v = mxct_vars_new(e, CALC_VARS);
    int64_t vals[CALC_VARS] = {0};
    struct calc c[] = {
        {.name = "A = 2", .dst = VA, .lhs = -1, .rhs = -1, .op = '=', .imm = 2},
        {.name = "B = A + 1", .dst = VB, .lhs = VA, .rhs = -1, .op = '+', .imm = 1, .sleep_ms = 60},
        {.name = "C = A + 2", .dst = VC, .lhs = VA, .rhs = -1, .op = '+', .imm = 2, .sleep_ms = 60},
        {.name = "D = B * C", .dst = VD, .lhs = VB, .rhs = VC, .op = '*'},
    };
    uint64_t t0 = mxct_now_ns();
    calc_push_all(e, v, vals, c, 4);
    uint64_t pushed = mxct_now_ns();
    if (mxct_engine_threaded(_i)) {
        ck_assert_msg(pushed - t0 < 50 * 1000000u, "%s: pushes took %.1f ms: push waited",
                      ENGINE_NAME, (double)(pushed - t0) / 1e6);
    } else {
        ck_assert_int_eq(vals[VD], 12); /* naive: all done inside push */
    }
    wait_all_ok(e);

    ck_assert_int_eq(vals[VA], 2);
    ck_assert_int_eq(vals[VB], 3);
    ck_assert_int_eq(vals[VC], 4);
    ck_assert_int_eq(vals[VD], 12);
    EXPECT_BEFORE(c[0], c[1]);
    EXPECT_BEFORE(c[0], c[2]);
    EXPECT_BEFORE(c[1], c[3]);
    EXPECT_BEFORE(c[2], c[3]);
    if (mxct_engine_threaded(_i))
        EXPECT_OVERLAP(c[1], c[2]);
    else
        EXPECT_BEFORE(c[1], c[2]);
    expect_calcs_ran(_i, c, 4, pthread_self());
    free(v);
    mxct_engine_finish(e);
}
END_TEST

struct seed_delete {
    struct calc *readers[2];
    int64_t *vals;
    struct mxct_span span;
    atomic_int runs;
    int64_t a_seen;
    bool readers_done;
};

static int seed_delete_fn(const mxc_run_ctx *rctx, void *arg) {
    struct seed_delete *d = arg;
    mxct_span_begin(&d->span);
    d->a_seen = d->vals[VA];
    d->readers_done =
        atomic_load(&d->readers[0]->runs) == 1 && atomic_load(&d->readers[1]->runs) == 1;
    atomic_fetch_add(&d->runs, 1);
    mxct_span_end(&d->span);
    return MXC_OK;
}

/* A = 2; B = 2; B = A + B; C = A + 2; delete A — the delete waits for both readers. */
START_TEST(test_seed_delete_after_readers) {
    mxc_engine_config cfg = {.cpu_workers = 2};
    mxc_engine *e = mxct_engine_new(_i, &cfg);
    mxc_var **v = mxct_vars_new(e, CALC_VARS);
    int64_t vals[CALC_VARS] = {0};
    struct calc c[] = {
        {.name = "A = 2", .dst = VA, .lhs = -1, .rhs = -1, .op = '=', .imm = 2},
        {.name = "B = 2", .dst = VB, .lhs = -1, .rhs = -1, .op = '=', .imm = 2},
        {.name = "B = A + B", .dst = VB, .lhs = VA, .rhs = VB, .op = '+', .sleep_ms = 50},
        {.name = "C = A + 2", .dst = VC, .lhs = VA, .rhs = -1, .op = '+', .imm = 2, .sleep_ms = 50},
    };
    calc_push_all(e, v, vals, c, 4);
    struct seed_delete del = {.readers = {&c[2], &c[3]}, .vals = vals};
    delete_var_ok(e, v[VA], seed_delete_fn, &del);
    wait_all_ok(e);

    ck_assert_int_eq(vals[VB], 4);
    ck_assert_int_eq(vals[VC], 4);
    ck_assert_int_eq(atomic_load(&del.runs), 1);
    ck_assert_msg(del.readers_done, "delete A ran before B = A + B and C = A + 2 finished");
    ck_assert_int_eq(del.a_seen, 2);
    ck_assert_msg(mxct_span_before(&c[2].span, &del.span) &&
                      mxct_span_before(&c[3].span, &del.span),
                  "delete A overlapped a reader of A");
    EXPECT_BEFORE(c[0], c[2]);
    EXPECT_BEFORE(c[1], c[2]);
    if (mxct_engine_threaded(_i))
        EXPECT_OVERLAP(c[2], c[3]);
    expect_calcs_ran(_i, c, 4, pthread_self());
    ck_assert_int_eq(stats_of(e).live_vars, CALC_VARS - 1);
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* op0: B = A + 1; op1: C = A + 2; op2: D = B + C; op3: A = D (the talk's example). */
START_TEST(test_seed_write_after_read) {
    mxc_engine_config cfg = {.cpu_workers = 2};
    mxc_engine *e = mxct_engine_new(_i, &cfg);
    mxc_var **v = mxct_vars_new(e, CALC_VARS);
    int64_t vals[CALC_VARS] = {0};
    struct calc c[] = {
        {.name = "A = 1", .dst = VA, .lhs = -1, .rhs = -1, .op = '=', .imm = 1},
        {.name = "op0: B = A + 1",
         .dst = VB,
         .lhs = VA,
         .rhs = -1,
         .op = '+',
         .imm = 1,
         .sleep_ms = 40},
        {.name = "op1: C = A + 2",
         .dst = VC,
         .lhs = VA,
         .rhs = -1,
         .op = '+',
         .imm = 2,
         .sleep_ms = 40},
        {.name = "op2: D = B + C", .dst = VD, .lhs = VB, .rhs = VC, .op = '+'},
        {.name = "op3: A = D", .dst = VA, .lhs = VD, .rhs = -1, .op = '='},
    };
    calc_push_all(e, v, vals, c, 5);
    wait_all_ok(e);

    ck_assert_int_eq(vals[VB], 2);
    ck_assert_int_eq(vals[VC], 3);
    ck_assert_int_eq(vals[VD], 5);
    ck_assert_int_eq(vals[VA], 5);
    EXPECT_BEFORE(c[1], c[3]);
    EXPECT_BEFORE(c[2], c[3]);
    EXPECT_BEFORE(c[3], c[4]);
    EXPECT_BEFORE(c[1], c[4]); /* A's readers finish before A is overwritten */
    EXPECT_BEFORE(c[2], c[4]);
    if (mxct_engine_threaded(_i))
        EXPECT_OVERLAP(c[1], c[2]);
    expect_calcs_ran(_i, c, 5, pthread_self());
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* ---- Randomized workloads against a serial replay ---------------------------------- *
 * A workload is a small random program over 100 slots, each slot a variable standing
 * for one 64-bit cell. An operation hashes its id and the cells it reads, then replaces
 * each cell it writes by a hash of that and the cell's old value, so running two
 * conflicting operations in the wrong order, or together, changes the final cells. The
 * same operations are applied to a second array in push order (the serial replay) and
 * the arrays must be equal at every wait. Lists are drawn with replacement, so they hold
 * duplicates and variables in both lists. Some operations sleep (read, sleep, write),
 * some are asynchronous (completed inline or by a completer thread), properties and
 * priorities vary, and slots are sometimes recycled: the old variable is deleted (its
 * delete function checks the cell's final value) and a new one takes its place. */

enum { WL_SLOTS = 100, WL_MAX_R = 4, WL_MAX_W = 3 };
enum { WL_SYNC, WL_ASYNC_INLINE, WL_ASYNC_THREAD };

struct wl;

struct wl_op {
    struct wl *wl;
    mxc_engine_done *done; /* WL_ASYNC_THREAD: the handle the completer finishes */
    uint32_t id;
    uint16_t sleep_us;
    uint8_t nr, nw, kind;
    uint16_t r[WL_MAX_R], w[WL_MAX_W]; /* cells */
};

struct wl_params {
    int max_reads, max_writes;
    unsigned sleep_pct, async_inline_pct, async_thread_pct, recycle_pct;
};

struct wl {
    int type;
    mxc_engine *engine;
    uint64_t *cells, *replay;
    size_t ncells, cap_cells;
    mxc_var *slot_var[WL_SLOTS];
    uint16_t slot_cell[WL_SLOTS];
    struct wl_op *ops;
    size_t nops, cap_ops;
    mxc__queue completer_q;
    pthread_t completer;
    atomic_long deletes_run;
    long deletes_pushed;
    struct mxct_rng rng;
};

struct wl_delete {
    struct wl *wl;
    uint16_t cell;
    uint64_t expected;
};

/* The operation's effect on `cells`; `sleep` between reading and writing. */
static void wl_apply(const struct wl_op *op, uint64_t *cells, bool sleep) {
    uint64_t h = mxct_mix64(op->id + 0x51ed27u);
    for (int i = 0; i < op->nr; i++)
        h = mxct_mix64(h ^ cells[op->r[i]]) + (uint64_t)i;
    if (sleep)
        mxct_sleep_us(op->sleep_us);
    for (int i = 0; i < op->nw; i++)
        cells[op->w[i]] = mxct_mix64(h ^ cells[op->w[i]] ^ ((uint64_t)(i + 1) << 56));
}

static int wl_sync_fn(const mxc_run_ctx *rctx, void *arg) {
    struct wl_op *op = arg;
    wl_apply(op, op->wl->cells, true);
    return MXC_OK;
}

static void wl_async_fn(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done) {
    struct wl_op *op = arg;
    if (op->kind == WL_ASYNC_INLINE) {
        wl_apply(op, op->wl->cells, true);
        mxc_engine_complete(done, MXC_OK);
        return;
    }
    op->done = done;
    if (mxc__queue_push(&op->wl->completer_q, op, 0) != MXC_OK) {
        mxct_note("completer queue push failed");
        mxc_engine_complete(done, MXC_OK);
    }
}

static void *wl_completer_main(void *arg) {
    struct wl *wl = arg;
    void *item;
    while (mxc__queue_pop(&wl->completer_q, &item)) {
        struct wl_op *op = item;
        wl_apply(op, wl->cells, true);
        mxc_engine_complete(op->done, MXC_OK);
    }
    return NULL;
}

static int wl_delete_fn(const mxc_run_ctx *rctx, void *arg) {
    struct wl_delete *d = arg;
    if (d->wl->cells[d->cell] != d->expected)
        mxct_note("delete of cell %u ran before its last writer: %016llx, replay %016llx", d->cell,
                  (unsigned long long)d->wl->cells[d->cell], (unsigned long long)d->expected);
    atomic_fetch_add(&d->wl->deletes_run, 1);
    free(d);
    return MXC_OK;
}

/* Gives `slot` a new variable and a new cell. */
static void wl_new_slot(struct wl *wl, int slot) {
    ck_assert_msg(wl->ncells < wl->cap_cells && wl->ncells < 65536, "out of cells");
    uint16_t cell = (uint16_t)wl->ncells++;
    wl->cells[cell] = wl->replay[cell] = mxct_mix64(cell * 7919u + 1);
    int rc = mxc_engine_new_var(wl->engine, &wl->slot_var[slot]);
    ck_assert_msg(rc == MXC_OK, "new_var: %s", mxc_last_error());
    wl->slot_cell[slot] = cell;
}

static struct wl *wl_new(int type, const mxc_engine_config *cfg, size_t max_ops, size_t max_cells,
                         uint64_t seed) {
    struct wl *wl = calloc(1, sizeof *wl);
    ck_assert_ptr_nonnull(wl);
    wl->type = type;
    wl->engine = mxct_engine_new(type, cfg);
    wl->cap_cells = max_cells;
    wl->cells = calloc(max_cells, sizeof *wl->cells);
    wl->replay = calloc(max_cells, sizeof *wl->replay);
    wl->cap_ops = max_ops;
    wl->ops = calloc(max_ops, sizeof *wl->ops);
    ck_assert(wl->cells && wl->replay && wl->ops);
    mxct_rng_seed(&wl->rng, seed);
    for (int s = 0; s < WL_SLOTS; s++)
        wl_new_slot(wl, s);
    ck_assert_int_eq(mxc__queue_init(&wl->completer_q, false, 0), MXC_OK);
    ck_assert_int_eq(pthread_create(&wl->completer, NULL, wl_completer_main, wl), 0);
    return wl;
}

/* Pushes one operation reading slots rs and writing slots ws; applies it to the replay. */
static void wl_emit(struct wl *wl, const int *rs, int nr, const int *ws, int nw, int kind, int prop,
                    int priority, int sleep_us) {
    ck_assert_msg(wl->nops < wl->cap_ops, "out of operations");
    struct wl_op *op = &wl->ops[wl->nops];
    *op = (struct wl_op){.wl = wl,
                         .id = (uint32_t)wl->nops,
                         .sleep_us = (uint16_t)sleep_us,
                         .nr = (uint8_t)nr,
                         .nw = (uint8_t)nw,
                         .kind = (uint8_t)kind};
    wl->nops++;
    mxc_var *cv[WL_MAX_R], *mv[WL_MAX_W];
    for (int i = 0; i < nr; i++) {
        op->r[i] = wl->slot_cell[rs[i]];
        cv[i] = wl->slot_var[rs[i]];
    }
    for (int i = 0; i < nw; i++) {
        op->w[i] = wl->slot_cell[ws[i]];
        mv[i] = wl->slot_var[ws[i]];
    }
    mxc_engine_op_desc d = sync_desc(wl_sync_fn, op, cv, nr, mv, nw, "wl");
    if (kind != WL_SYNC) {
        d.fn = NULL;
        d.async_fn = wl_async_fn;
    }
    d.prop = prop;
    d.priority = priority;
    push_desc(wl->engine, &d);
    wl_apply(op, wl->replay, false);
}

static void wl_random_op(struct wl *wl, const int *hot, int nhot, const struct wl_params *p) {
    struct mxct_rng *rng = &wl->rng;
    int rs[WL_MAX_R], ws[WL_MAX_W];
    int nr = (int)mxct_rng_below(rng, (uint32_t)p->max_reads + 1);
    int nw = (int)mxct_rng_below(rng, (uint32_t)p->max_writes + 1);
    if (nr + nw == 0 && !mxct_rng_percent(rng, 10))
        nw = 1; /* a few operations touch nothing at all */
    for (int i = 0; i < nr; i++)
        rs[i] = hot[mxct_rng_below(rng, (uint32_t)nhot)];
    for (int i = 0; i < nw; i++)
        ws[i] = hot[mxct_rng_below(rng, (uint32_t)nhot)];

    unsigned roll = mxct_rng_below(rng, 100);
    int kind = roll < p->async_thread_pct                         ? WL_ASYNC_THREAD
               : roll < p->async_thread_pct + p->async_inline_pct ? WL_ASYNC_INLINE
                                                                  : WL_SYNC;
    static const int props[10] = {
        MXC_PROP_NORMAL,           MXC_PROP_NORMAL, MXC_PROP_NORMAL,
        MXC_PROP_NORMAL,           MXC_PROP_NORMAL, MXC_PROP_NORMAL,
        MXC_PROP_CPU_PRIORITIZED,  MXC_PROP_ASYNC,  MXC_PROP_COPY_TO_DEVICE,
        MXC_PROP_COPY_FROM_DEVICE,
    };
    int prop = props[mxct_rng_below(rng, 10)];
    int priority = (int)mxct_rng_below(rng, 11) - 5;
    int sleep_us = mxct_rng_percent(rng, p->sleep_pct) ? (int)mxct_rng_below(rng, 51) : 0;
    wl_emit(wl, rs, nr, ws, nw, kind, prop, priority, sleep_us);
}

static void wl_expect_cell(struct wl *wl, unsigned cell, long workload) {
    ck_assert_msg(wl->cells[cell] == wl->replay[cell],
                  "%s, workload %ld: cell %u = %016llx, serial replay %016llx",
                  mxc_engine_type_name(wl->type), workload, cell,
                  (unsigned long long)wl->cells[cell], (unsigned long long)wl->replay[cell]);
}

static void wl_recycle(struct wl *wl, int slot) {
    struct wl_delete *d = malloc(sizeof *d);
    ck_assert_ptr_nonnull(d);
    *d = (struct wl_delete){wl, wl->slot_cell[slot], wl->replay[wl->slot_cell[slot]]};
    delete_var_ok(wl->engine, wl->slot_var[slot], wl_delete_fn, d);
    wl->deletes_pushed++;
    wl_new_slot(wl, slot);
}

/* One small random program, then a random kind of wait: wait_all and compare every
 * cell; wait_for_var on each slot it used and compare that slot's cell at once (other
 * operations may still run); or no wait, so the next workload overlaps this one. */
static void wl_workload(struct wl *wl, const struct wl_params *p, long index) {
    struct mxct_rng *rng = &wl->rng;
    static const int hot_sizes[] = {1, 2, 3, 4, 6, 10, 25, 100};
    int nhot = hot_sizes[mxct_rng_below(rng, MXC_ARRAY_SIZE(hot_sizes))];
    int hot[WL_SLOTS], perm[WL_SLOTS];
    for (int s = 0; s < WL_SLOTS; s++)
        perm[s] = s;
    for (int i = 0; i < nhot; i++) { /* a partial Fisher-Yates shuffle */
        int j = i + (int)mxct_rng_below(rng, (uint32_t)(WL_SLOTS - i));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        hot[i] = perm[i];
    }
    int nops = 1 + (int)mxct_rng_below(rng, 12);
    for (int k = 0; k < nops; k++)
        wl_random_op(wl, hot, nhot, p);
    if (mxct_rng_percent(rng, p->recycle_pct))
        wl_recycle(wl, hot[mxct_rng_below(rng, (uint32_t)nhot)]);

    unsigned mode = mxct_rng_below(rng, 10);
    if (mode < 4) {
        wait_all_ok(wl->engine);
        for (size_t c = 0; c < wl->ncells; c++)
            wl_expect_cell(wl, (unsigned)c, index);
    } else if (mode < 7) {
        for (int i = 0; i < nhot; i++) {
            wait_var_ok(wl->engine, wl->slot_var[hot[i]]);
            wl_expect_cell(wl, wl->slot_cell[hot[i]], index);
        }
    }
}

/* Final wait and checks, then frees everything. */
static void wl_finish(struct wl *wl, long index) {
    wait_all_ok(wl->engine);
    for (size_t c = 0; c < wl->ncells; c++)
        wl_expect_cell(wl, (unsigned)c, index);
    ck_assert_int_eq(atomic_load(&wl->deletes_run), wl->deletes_pushed);
    mxc_engine_stats s = stats_of(wl->engine);
    ck_assert_int_eq(s.pending, 0);
    ck_assert_uint_eq(s.completed, s.pushed);
    ck_assert_uint_eq(s.failed, 0);
    ck_assert_uint_ge(s.pushed, wl->nops);
    ck_assert_int_eq(s.live_vars, WL_SLOTS);
    mxc__queue_close(&wl->completer_q);
    pthread_join(wl->completer, NULL);
    mxc__queue_destroy(&wl->completer_q);
    mxct_assert_no_notes();
    mxct_engine_finish(wl->engine);
    free(wl->cells);
    free(wl->replay);
    free(wl->ops);
    free(wl);
}

START_TEST(test_random_workloads) {
    long n = mxct_scaled(10000, 1000);
    const struct wl_params p = {.max_reads = WL_MAX_R,
                                .max_writes = WL_MAX_W,
                                .sleep_pct = 10,
                                .async_inline_pct = 10,
                                .async_thread_pct = 5,
                                .recycle_pct = 5};
    /* more workers than cores: more interleavings */
    mxc_engine_config cfg = {.cpu_workers = 3, .cpu_priority_workers = 1};
    struct wl *wl =
        wl_new(_i, &cfg, (size_t)n * 12, WL_SLOTS + (size_t)n + 1, 0x5eed0000u + (uint64_t)_i);
    for (long k = 0; k < n; k++)
        wl_workload(wl, &p, k);
    wl_finish(wl, n);
}
END_TEST

/* One long stream: 1,000,000 cheap operations over 100 variables, pushed without a
 * pause (the producer is throttled by max_pending), then one wait. */
START_TEST(test_million_operations) {
    long n = mxct_scaled(1000000, 100000);
    const struct wl_params p = {.max_reads = 3, .max_writes = 2, .async_inline_pct = 3};
    mxc_engine_config cfg = {.cpu_workers = 2, .max_pending = 50000};
    struct wl *wl = wl_new(_i, &cfg, (size_t)n, WL_SLOTS, 0xabc0000u + (uint64_t)_i);
    int all[WL_SLOTS];
    for (int s = 0; s < WL_SLOTS; s++)
        all[s] = s;
    for (long k = 0; k < n; k++)
        wl_random_op(wl, all, WL_SLOTS, &p);
    mxc_engine_stats s = stats_of(wl->engine);
    ck_assert_msg(s.pending <= 50000 + 64, "%s: %lld pending, max_pending is 50000", ENGINE_NAME,
                  (long long)s.pending);
    wl_finish(wl, 0);
}
END_TEST

/* ---- Asynchronous functions completed from other threads --------------------------- */

struct async_job {
    const char *name;
    int dst, lhs; /* vals[dst] = (lhs >= 0 ? vals[lhs] : 0) * mul + add */
    int64_t mul, add;
    int status; /* completion status; on failure `message` is recorded first */
    const char *message;
    long delay_us;
    int64_t *vals;
    pthread_t thread;
    atomic_int started;
    mxc_engine_done *done;
    struct mxct_span span; /* the helper thread's work */
    uint64_t complete_ns;  /* just before mxc_engine_complete */
};

static void *async_helper_main(void *arg) {
    struct async_job *j = arg;
    mxct_span_begin(&j->span);
    mxct_sleep_us(j->delay_us);
    if (j->status == MXC_OK)
        j->vals[j->dst] = (j->lhs >= 0 ? j->vals[j->lhs] : 0) * j->mul + j->add;
    else
        mxc__error(j->status, "%s", j->message);
    mxct_span_end(&j->span);
    j->complete_ns = mxct_now_ns();
    mxc_engine_complete(j->done, j->status);
    return NULL;
}

static void async_start_fn(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done) {
    struct async_job *j = arg;
    j->done = done;
    atomic_fetch_add(&j->started, 1);
    if (pthread_create(&j->thread, NULL, async_helper_main, j) != 0) {
        mxct_note("%s: cannot start its helper thread", j->name);
        mxc_engine_complete(done, mxc__error(MXC_EINTERNAL, "no thread"));
    }
}

static void push_async_job(mxc_engine *e, mxc_var **vars, int64_t *vals, struct async_job *j) {
    j->vals = vals;
    mxc_engine_op_desc d = sync_desc(NULL, j, j->lhs >= 0 ? &vars[j->lhs] : NULL,
                                     j->lhs >= 0 ? 1 : 0, &vars[j->dst], 1, j->name);
    d.async_fn = async_start_fn;
    push_desc(e, &d);
}

START_TEST(test_async_completed_elsewhere) {
    enum { X, Y, Z, W, E1, E2, NV };
    mxc_engine_config cfg = {.cpu_workers = 2};
    mxc_engine *e = mxct_engine_new(_i, &cfg);
    mxc_var **v = mxct_vars_new(e, NV);
    int64_t vals[NV] = {0};
    struct async_job jobs[] = {
        {.name = "X = 7 (async)", .dst = X, .lhs = -1, .add = 7, .delay_us = 40000},
        {.name = "Z = Y * 2 (async)", .dst = Z, .lhs = Y, .mul = 2, .delay_us = 10000},
        {.name = "W = 5 (async)", .dst = W, .lhs = -1, .add = 5, .delay_us = 40000},
        {.name = "E1 fails (async)",
         .dst = E1,
         .lhs = -1,
         .status = MXC_EIO,
         .message = "helper failed: disk 3",
         .delay_us = 10000},
    };
    struct calc y = {.name = "Y = X + 1", .dst = Y, .lhs = X, .rhs = -1, .op = '+', .imm = 1};
    struct calc e2 = {.name = "E2 = E1 + 1", .dst = E2, .lhs = E1, .rhs = -1, .op = '+', .imm = 1};
    push_async_job(e, v, vals, &jobs[0]);
    calc_push(e, v, vals, &y);
    push_async_job(e, v, vals, &jobs[1]);
    push_async_job(e, v, vals, &jobs[2]);
    push_async_job(e, v, vals, &jobs[3]);
    calc_push(e, v, vals, &e2);

    int rc = mxc_engine_wait_for_var(e, v[E2]);
    ck_assert_msg(rc == MXC_EIO, "wait_for_var(E2) = %s, expected MXC_EIO", mxc_err_name(rc));
    ck_assert_msg(strstr(mxc_last_error(), "helper failed: disk 3") != NULL,
                  "message \"%s\" lost the helper's", mxc_last_error());
    wait_var_ok(e, v[Z]);
    ck_assert_int_eq(vals[Z], 16); /* read right after the wait on Z */
    rc = mxc_engine_wait_all(e);
    ck_assert_msg(rc == MXC_EIO, "wait_all = %s, expected the failure of E1", mxc_err_name(rc));
    delete_var_ok(e, v[E1], NULL, NULL); /* the failure goes with its variables */
    delete_var_ok(e, v[E2], NULL, NULL);
    wait_all_ok(e);

    ck_assert_int_eq(vals[X], 7);
    ck_assert_int_eq(vals[Y], 8);
    ck_assert_int_eq(vals[W], 5);
    ck_assert_int_eq(atomic_load(&e2.runs), 0);
    for (size_t k = 0; k < MXC_ARRAY_SIZE(jobs); k++) {
        ck_assert_int_eq(atomic_load(&jobs[k].started), 1);
        pthread_join(jobs[k].thread, NULL);
    }
    ck_assert_msg(atomic_load(&y.span.start_ns) >= jobs[0].complete_ns,
                  "Y = X + 1 started before X's completion was reported");
    ck_assert_msg(mxct_span_before(&y.span, &jobs[1].span), "Z = Y * 2 started before Y ended");
    if (mxct_engine_threaded(_i))
        ck_assert_msg(mxct_span_overlap(&jobs[0].span, &jobs[2].span),
                      "independent asynchronous operations did not overlap");
    mxct_assert_no_notes();
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* ---- Reusable operations ----------------------------------------------------------- */

struct counter {
    atomic_int in_use;
    long count;
    long expected_at_check; /* a reader's expectation, set before it is pushed */
    atomic_int runs_at_free, frees;
};

static int counter_fn(const mxc_run_ctx *rctx, void *arg) {
    struct counter *c = arg;
    if (atomic_exchange(&c->in_use, 1))
        mxct_note("two runs of one reusable operation overlapped");
    c->count++;
    atomic_store(&c->in_use, 0);
    return MXC_OK;
}

static void counter_free(void *arg) {
    struct counter *c = arg;
    atomic_store(&c->runs_at_free, (int)c->count);
    atomic_fetch_add(&c->frees, 1);
}

struct counter_check {
    struct counter *c;
    long expected;
};

static int counter_check_fn(const mxc_run_ctx *rctx, void *arg) {
    struct counter_check *k = arg;
    if (k->c->count != k->expected)
        mxct_note("a reader pushed after %ld runs saw %ld", k->expected, k->c->count);
    return MXC_OK;
}

START_TEST(test_reusable_operator) {
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var **v = mxct_vars_new(e, 2);
    struct counter c = {0};
    char name[32] = "counter";
    mxc_engine_op_desc d = sync_desc(counter_fn, &c, VARS(v[1]), VARS(v[0]), name);
    d.arg_free = counter_free;
    mxc_engine_opr *opr = NULL;
    int rc = mxc_engine_new_operator(e, &d, &opr);
    ck_assert_msg(rc == MXC_OK, "new_operator: %s", mxc_last_error());
    ck_assert_ptr_nonnull(opr);
    memset(name, 'x', sizeof name - 1); /* the name was copied */

    long n = mxct_scaled(100000, 20000);
    enum { CHECK_EVERY = 1000 };
    struct counter_check *checks = calloc((size_t)(n / CHECK_EVERY + 1), sizeof *checks);
    ck_assert_ptr_nonnull(checks);
    for (long i = 1; i <= n; i++) {
        rc = mxc_engine_push_operator(e, opr, (int)(i % 5) - 2);
        ck_assert_msg(rc == MXC_OK, "push_operator #%ld: %s", i, mxc_last_error());
        if (i % CHECK_EVERY == 0) { /* readers interleaved with the runs */
            struct counter_check *k = &checks[i / CHECK_EVERY];
            *k = (struct counter_check){&c, i};
            push_fn(e, counter_check_fn, k, VARS(v[0]), NO_VARS, "check counter");
        }
    }
    wait_all_ok(e);
    ck_assert_int_eq(c.count, n);
    ck_assert_int_eq(atomic_load(&c.frees), 0);
    mxc_engine_stats s = stats_of(e);
    ck_assert_uint_ge(s.pushed, (uint64_t)(n + n / CHECK_EVERY));
    ck_assert_uint_eq(s.completed, s.pushed);

    ck_assert_int_eq(mxc_engine_delete_operator(e, opr), MXC_OK);
    wait_all_ok(e);
    ck_assert_int_eq(atomic_load(&c.frees), 1);
    ck_assert_int_eq(atomic_load(&c.runs_at_free), n);
    mxct_assert_no_notes();
    free(checks);
    free(v);
    mxct_engine_finish(e);
}
END_TEST

static int slow_counter_fn(const mxc_run_ctx *rctx, void *arg) {
    mxct_sleep_us(200);
    return counter_fn(rctx, arg);
}

/* delete_operator right after pushing runs: arg_free comes after the last run. */
START_TEST(test_delete_operator_waits_for_runs) {
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var **v = mxct_vars_new(e, 1);
    struct counter c = {0};
    mxc_engine_op_desc d = sync_desc(slow_counter_fn, &c, NO_VARS, VARS(v[0]), "slow counter");
    d.arg_free = counter_free;
    mxc_engine_opr *opr = NULL;
    ck_assert_int_eq(mxc_engine_new_operator(e, &d, &opr), MXC_OK);
    enum { RUNS = 200 };
    for (int i = 0; i < RUNS; i++)
        ck_assert_int_eq(mxc_engine_push_operator(e, opr, 0), MXC_OK);
    ck_assert_int_eq(mxc_engine_delete_operator(e, opr), MXC_OK);
    ck_assert_int_eq(mxc_engine_delete_operator(e, NULL), MXC_OK);
    wait_all_ok(e);
    ck_assert_int_eq(c.count, RUNS);
    ck_assert_int_eq(atomic_load(&c.frees), 1);
    ck_assert_msg(atomic_load(&c.runs_at_free) == RUNS, "arg_free ran after %d of %d runs",
                  atomic_load(&c.runs_at_free), RUNS);
    mxct_assert_no_notes();
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* ---- Deleting variables ------------------------------------------------------------ */

struct slow_reader {
    int64_t *value;
    atomic_int *done;
    struct mxct_span span;
};

static int slow_reader_fn(const mxc_run_ctx *rctx, void *arg) {
    struct slow_reader *r = arg;
    mxct_span_begin(&r->span);
    mxct_sleep_us(30000);
    if (*r->value != 1)
        mxct_note("a reader saw %lld, not the writer's 1", (long long)*r->value);
    atomic_fetch_add(r->done, 1);
    mxct_span_end(&r->span);
    return MXC_OK;
}

struct deleter {
    atomic_int *readers_done;
    int readers_expected;
    atomic_int runs;
    int readers_seen;
    struct mxct_span span;
};

static int deleter_fn(const mxc_run_ctx *rctx, void *arg) {
    struct deleter *d = arg;
    mxct_span_begin(&d->span);
    d->readers_seen = d->readers_done ? atomic_load(d->readers_done) : 0;
    if (rctx->ctx.dev_type != MXC_CPU)
        mxct_note("a delete function ran with device type %d", rctx->ctx.dev_type);
    atomic_fetch_add(&d->runs, 1);
    mxct_span_end(&d->span);
    return MXC_OK;
}

static int set_one_fn(const mxc_run_ctx *rctx, void *arg) {
    mxct_sleep_us(5000);
    *(int64_t *)arg = 1;
    return MXC_OK;
}

START_TEST(test_delete_var_ordering) {
    mxc_engine_config cfg = {.cpu_workers = 3};
    mxc_engine *e = mxct_engine_new(_i, &cfg);
    enum { V, F, G, H, O, NV };
    mxc_var **v = mxct_vars_new(e, NV);
    ck_assert_int_eq(stats_of(e).live_vars, NV);

    /* V: a writer, three slow readers, then the delete. */
    int64_t value = 0;
    atomic_int readers_done = 0;
    struct slow_reader readers[3];
    memset(readers, 0, sizeof readers);
    push_fn(e, set_one_fn, &value, NO_VARS, VARS(v[V]), "V = 1");
    for (int i = 0; i < 3; i++) {
        readers[i] = (struct slow_reader){.value = &value, .done = &readers_done};
        push_fn(e, slow_reader_fn, &readers[i], VARS(v[V]), NO_VARS, "slow reader of V");
    }
    struct deleter dv = {.readers_done = &readers_done, .readers_expected = 3};
    delete_var_ok(e, v[V], deleter_fn, &dv);

    /* F failed before its delete: the delete still runs. G: an operation with the
     * delete property on a failed variable runs too. H: deleted without a function. */
    struct tracked fail_f = {.status = MXC_EINVAL, .message = "F is broken"};
    struct tracked fail_g = {.status = MXC_EINVAL, .message = "G is broken"};
    struct tracked cleanup_g = {0};
    push_tracked(e, &fail_f, VARS(v[O]), VARS(v[F]), "fail F");
    struct deleter df = {0};
    delete_var_ok(e, v[F], deleter_fn, &df);
    push_tracked(e, &fail_g, NO_VARS, VARS(v[G], v[O]), "fail G"); /* after fail F */
    mxc_engine_op_desc d = sync_desc(tracked_fn, &cleanup_g, NO_VARS, VARS(v[G]), "clean G");
    d.prop = MXC_PROP_DELETE_VAR;
    push_desc(e, &d);
    delete_var_ok(e, v[H], NULL, NULL);

    /* F's failure went with F; G's stays on G and O. */
    int rc = mxc_engine_wait_all(e);
    ck_assert_msg(rc == MXC_EINVAL, "wait_all = %s, expected the failure of G", mxc_err_name(rc));
    ck_assert_msg(strstr(mxc_last_error(), "G is broken") != NULL, "message: %s", mxc_last_error());

    ck_assert_int_eq(atomic_load(&dv.runs), 1);
    ck_assert_msg(dv.readers_seen == 3, "delete of V ran after %d of 3 readers", dv.readers_seen);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(mxct_span_before(&readers[i].span, &dv.span),
                      "reader %d of V overlapped its delete", i);
    if (mxct_engine_threaded(_i))
        ck_assert_msg(mxct_span_overlap(&readers[0].span, &readers[1].span) ||
                          mxct_span_overlap(&readers[1].span, &readers[2].span),
                      "the readers of V never ran together");
    EXPECT_RUNS(fail_f, 1);
    ck_assert_int_eq(atomic_load(&df.runs), 1);
    EXPECT_RUNS(cleanup_g, 1);
    ck_assert_int_eq(stats_of(e).live_vars, NV - 3);
    delete_var_ok(e, v[G], NULL, NULL); /* and with them, the last failure */
    delete_var_ok(e, v[O], NULL, NULL);
    mxct_assert_no_notes();
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* Two threads delete the same variable at the same moment, many times: exactly one call
 * schedules the deletion (its function runs once), the other is MXC_EMISUSE. Each
 * variable holds one run slot for its delete, which only the winner may fill. Each thread
 * spins until the other has started too, so that they call at once. */
struct delete_race {
    atomic_int *ready;
    mxc_engine *e;
    mxc_var *var;
    struct deleter *deleter;
    int rc;
};

static void *delete_racer(void *arg) {
    struct delete_race *r = arg;
    atomic_fetch_add(r->ready, 1);
    while (atomic_load(r->ready) < 2) /* the other one is being started: microseconds */
        ;
    r->rc = mxc_engine_delete_var(r->e, r->var, deleter_fn, r->deleter);
    return NULL;
}

START_TEST(test_delete_var_racing) {
    mxc_engine *e = mxct_engine_new(_i, NULL);
    int rounds = mxct_quick() ? 50 : 300;
    for (int r = 0; r < rounds; r++) {
        mxc_var *v = NULL;
        CK_OK(mxc_engine_new_var(e, &v));
        atomic_int ready = 0;
        struct deleter d = {0};
        struct delete_race racers[2];
        pthread_t threads[2];
        for (int k = 0; k < 2; k++) {
            racers[k] = (struct delete_race){.ready = &ready, .e = e, .var = v, .deleter = &d};
            ck_assert_int_eq(pthread_create(&threads[k], NULL, delete_racer, &racers[k]), 0);
        }
        for (int k = 0; k < 2; k++)
            pthread_join(threads[k], NULL);
        int ok = (racers[0].rc == MXC_OK) + (racers[1].rc == MXC_OK);
        ck_assert_msg(ok == 1, "round %d: %d of 2 deletes succeeded (%s, %s)", r, ok,
                      mxc_err_name(racers[0].rc), mxc_err_name(racers[1].rc));
        for (int k = 0; k < 2; k++)
            ck_assert(racers[k].rc == MXC_OK || racers[k].rc == MXC_EMISUSE);
        CK_OK(mxc_engine_wait_all(e));
        ck_assert_int_eq(atomic_load(&d.runs), 1);
    }
    ck_assert_int_eq(stats_of(e).live_vars, 0);
    mxct_engine_finish(e);
}
END_TEST

/* A variable holds the run slot its delete will use from its creation on, as a slot in
 * use: giving every unused handle slab back (mxc__handles_release, which
 * mxc_set_allocator does) keeps it, and the delete then needs no memory. Had the
 * reserved slot looked free, its slab would have gone, and the delete would write freed
 * memory (AddressSanitizer: heap-use-after-free). */
START_TEST(test_delete_slot_outlives_release) {
    struct mxct_alloc_counts counts;
    mxct_alloc_install(&counts); /* first mxc call of this process (fork mode) */
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var *v = NULL, *other = NULL;
    CK_OK(mxc_engine_new_var(e, &v));
    CK_OK(mxc_engine_new_var(e, &other));
    struct tracked ops[3];
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < 3; i++) /* runs that retire: their slots are freed */
        push_tracked(e, &ops[i], VARS(other), VARS(v), "write v");
    CK_OK(mxc_engine_delete_var(e, other, NULL, NULL));
    CK_OK(mxc_engine_wait_all(e));
    mxc__handles_release();
    mxct_alloc_fail_after(&counts, 0); /* every allocation from now on fails */
    struct deleter d = {0};
    CK_OK(mxc_engine_delete_var(e, v, deleter_fn, &d));
    CK_OK(mxc_engine_wait_all(e));
    ck_assert_int_eq(atomic_load(&counts.failures), 0);
    mxct_alloc_fail_after(&counts, -1);
    ck_assert_int_eq(atomic_load(&d.runs), 1);
    for (int i = 0; i < 3; i++)
        EXPECT_RUNS(ops[i], 1);
    ck_assert_int_eq(stats_of(e).live_vars, 0);
    mxct_engine_finish(e);
    mxct_alloc_uninstall();
}
END_TEST

/* ---- Priorities -------------------------------------------------------------------- */

struct prio_log {
    atomic_int next;
    int order[32];
};

struct prio_op {
    struct prio_log *log;
    int index;
};

static int prio_fn(const mxc_run_ctx *rctx, void *arg) {
    struct prio_op *p = arg;
    int at = atomic_fetch_add(&p->log->next, 1);
    if (at < 32)
        p->log->order[at] = p->index;
    return MXC_OK;
}

/* perdevice with one priority worker: block it, queue prioritized operations with
 * mixed priorities, release: they run highest priority first, in push order among
 * equals. */
START_TEST(test_priority_worker_order) {
    mxc_engine_config cfg = {.cpu_workers = 2, .cpu_priority_workers = 1};
    mxc_engine *e = mxct_engine_new(MXC_ENGINE_PERDEVICE, &cfg);
    struct gate g = {0};
    mxc_engine_op_desc d = sync_desc(gate_fn, &g, NO_VARS, NO_VARS, "gate");
    d.prop = MXC_PROP_CPU_PRIORITIZED;
    d.priority = 100;
    push_desc(e, &d);
    ck_assert_msg(mxct_wait_at_least(&g.started, 1, 10000), "the gate never started");

    static const int prios[] = {3, -2, 10, 0, 7, 7, 10, -2, 5, 0};
    enum { N = MXC_ARRAY_SIZE(prios) };
    struct prio_log log = {0};
    struct prio_op ops[N];
    for (int i = 0; i < N; i++) {
        ops[i] = (struct prio_op){&log, i};
        d = sync_desc(prio_fn, &ops[i], NO_VARS, NO_VARS, "prioritized");
        d.prop = MXC_PROP_CPU_PRIORITIZED;
        d.priority = prios[i];
        push_desc(e, &d);
    }
    mxct_sleep_us(20000);
    ck_assert_msg(atomic_load(&log.next) == 0, "prioritized operations ran beside a busy "
                                               "priority worker");
    atomic_store(&g.open, 1);
    wait_all_ok(e);
    ck_assert_int_eq(atomic_load(&log.next), N);
    char got[256] = "";
    for (int i = 0; i < N; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), " %d(p%d)", log.order[i],
                 prios[log.order[i]]);
    for (int i = 1; i < N; i++) {
        int a = log.order[i - 1], b = log.order[i];
        ck_assert_msg(prios[a] > prios[b] || (prios[a] == prios[b] && a < b),
                      "run order (index(priority)):%s", got);
    }
    mxct_engine_finish(e);
}
END_TEST

/* ---- Errors ------------------------------------------------------------------------ */

/* Expects wait_for_var(v) to report `want` with `what` in the message. */
#define EXPECT_VAR_FAILED(e, v, want, what)                                                       \
    do {                                                                                          \
        int rc_ = mxc_engine_wait_for_var((e), (v));                                              \
        ck_assert_msg(rc_ == (want), "wait_for_var(%s) = %s, expected %s", #v, mxc_err_name(rc_), \
                      mxc_err_name(want));                                                        \
        ck_assert_msg(strstr(mxc_last_error(), (what)) != NULL,                                   \
                      "wait_for_var(%s) message: \"%s\"", #v, mxc_last_error());                  \
    } while (0)

static void push_overwriting(mxc_engine *e, struct tracked *t, mxc_var *const *cv, int nc,
                             mxc_var *const *mv, int nm, const char *name) {
    mxc_engine_op_desc d = sync_desc(tracked_fn, t, cv, nc, mv, nm, name);
    d.arg_free = tracked_free;
    d.overwrite = 1;
    push_desc(e, &d);
}

START_TEST(test_error_propagation) {
    enum { T, X, Y, Z, W, N, NV };
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var **v = mxct_vars_new(e, NV);
    struct tracked fail = {.status = MXC_EINVAL, .message = "op_fail: bad value 42"};
    struct tracked dep1 = {0}, dep2 = {0}, indep = {0};
    struct tracked second = {.status = MXC_EDEVICE, .message = "second failure"};

    push_tracked(e, &fail, VARS(v[T]), VARS(v[X]), "op_fail");
    push_tracked(e, &dep1, VARS(v[X]), VARS(v[Y]), "Y = f(X)");
    push_tracked(e, &dep2, VARS(v[Y]), VARS(v[Z]), "Z = f(Y)");
    push_tracked(e, &indep, NO_VARS, VARS(v[W]), "W = 1");
    /* writes T, which op_fail read: runs after op_fail completed, and fails itself */
    push_tracked(e, &second, NO_VARS, VARS(v[T]), "op_second");

    EXPECT_VAR_FAILED(e, v[Y], MXC_EINVAL, "op_fail: bad value 42");
    EXPECT_VAR_FAILED(e, v[Z], MXC_EINVAL, "op_fail: bad value 42");
    ck_assert_int_eq(mxc_last_error_code(), MXC_EINVAL);
    EXPECT_VAR_FAILED(e, v[Y], MXC_EINVAL, "op_fail: bad value 42"); /* waits do not clear */
    wait_var_ok(e, v[W]);

    /* Y and Z still carry the failure: new work reading Y, or writing Z without
     * overwriting it, is skipped; work elsewhere runs. */
    struct tracked again_z = {0}, fresh = {0};
    push_tracked(e, &again_z, VARS(v[Y]), VARS(v[Z]), "Z = g(Y)");
    push_tracked(e, &fresh, NO_VARS, VARS(v[N]), "N = 1");
    EXPECT_VAR_FAILED(e, v[Z], MXC_EINVAL, "op_fail: bad value 42");
    wait_var_ok(e, v[N]);

    /* wait_all reports the first failure still standing, as often as it is asked. */
    for (int k = 0; k < 2; k++) {
        int rc = mxc_engine_wait_all(e);
        ck_assert_msg(rc == MXC_EINVAL, "wait_all = %s, expected the first failure (MXC_EINVAL)",
                      mxc_err_name(rc));
        ck_assert_msg(strstr(mxc_last_error(), "op_fail: bad value 42") != NULL,
                      "wait_all message: \"%s\"", mxc_last_error());
    }

    /* Overwriting clears a failure: an operation that overwrites Y runs though Y failed. */
    struct tracked over_y = {0}, rmw_x = {0}, from_z = {0};
    struct tracked over_t = {.status = MXC_EIO, .message = "third failure"};
    push_overwriting(e, &over_y, NO_VARS, VARS(v[Y]), "Y = 0");
    wait_var_ok(e, v[Y]);
    /* one that also reads what it writes does not overwrite it */
    push_overwriting(e, &rmw_x, VARS(v[X]), VARS(v[X]), "X = h(X)");
    EXPECT_VAR_FAILED(e, v[X], MXC_EINVAL, "op_fail: bad value 42");
    /* one that fails replaces the failure it overwrote */
    push_overwriting(e, &over_t, NO_VARS, VARS(v[T]), "T = 0");
    EXPECT_VAR_FAILED(e, v[T], MXC_EIO, "third failure");
    /* one that reads a failed variable is skipped and passes that failure on */
    push_overwriting(e, &from_z, VARS(v[Z]), VARS(v[N]), "N = Z");
    EXPECT_VAR_FAILED(e, v[N], MXC_EINVAL, "op_fail: bad value 42");

    EXPECT_RUNS(fail, 1);
    EXPECT_RUNS(dep1, 0);
    EXPECT_RUNS(dep2, 0);
    EXPECT_RUNS(indep, 1);
    EXPECT_RUNS(second, 1);
    EXPECT_RUNS(again_z, 0);
    EXPECT_RUNS(fresh, 1);
    EXPECT_RUNS(over_y, 1);
    EXPECT_RUNS(rmw_x, 0);
    EXPECT_RUNS(over_t, 1);
    EXPECT_RUNS(from_z, 0);
    /* Deleting the failed variables deletes their failures. */
    mxc_var *failed[] = {v[X], v[Z], v[T], v[N]};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(failed); i++)
        delete_var_ok(e, failed[i], NULL, NULL);
    wait_all_ok(e);
    /* skipped operations are retired too: their arguments are freed */
    struct tracked *all[] = {&fail,  &dep1,   &dep2,  &indep,  &second, &again_z,
                             &fresh, &over_y, &rmw_x, &over_t, &from_z};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(all); i++)
        ck_assert_msg(atomic_load(&all[i]->frees) == 1, "arg_free of operation %zu ran %d times", i,
                      atomic_load(&all[i]->frees));
    mxc_engine_stats s = stats_of(e);
    /* op_fail, dep1, dep2, op_second, again_z, rmw_x, over_t, from_z */
    ck_assert_uint_eq(s.failed, 8);
    ck_assert_uint_ge(s.pushed, 11); /* the header leaves open whether waits count */
    ck_assert_uint_eq(s.completed, s.pushed);
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* A variable made with mxc_engine_new_state_var (a resource shared by many operations)
 * never carries a failure: one failed user does not stop the next. */
START_TEST(test_state_var_never_fails) {
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var **v = mxct_vars_new(e, 1);
    mxc_var *scratch = NULL;
    ck_assert_int_eq(mxc_engine_new_state_var(e, &scratch), MXC_OK);
    struct tracked bad = {.status = MXC_EINVAL, .message = "user of the scratch failed"};
    struct tracked next = {0};
    push_tracked(e, &bad, NO_VARS, VARS(v[0], scratch), "first user");
    push_tracked(e, &next, NO_VARS, VARS(scratch), "next user");
    wait_var_ok(e, scratch);
    EXPECT_RUNS(next, 1);
    EXPECT_VAR_FAILED(e, v[0], MXC_EINVAL, "user of the scratch failed");
    delete_var_ok(e, v[0], NULL, NULL);
    delete_var_ok(e, scratch, NULL, NULL);
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* A failure that reaches no variable (its operation writes none) is reported by the
 * wait_all that covers it, once; one that a variable carries, until the variable goes. */
START_TEST(test_wait_all_reports) {
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var **v = mxct_vars_new(e, 2);
    struct tracked reader = {.status = MXC_EIO, .message = "a read-only operation failed"};
    struct tracked writer = {.status = MXC_EINVAL, .message = "a writer failed"};
    push_tracked(e, &reader, VARS(v[0]), NO_VARS, "reads only");
    EXPECT_CODE(MXC_EIO, "a read-only operation failed", mxc_engine_wait_all(e));
    wait_all_ok(e);
    push_tracked(e, &writer, NO_VARS, VARS(v[1]), "writes v1");
    push_tracked(e, &reader, VARS(v[0]), NO_VARS, "reads only");
    /* the first failure is reported; the read-only one is dropped as covered */
    int rc = mxc_engine_wait_all(e);
    ck_assert_int_lt(rc, 0);
    rc = mxc_engine_wait_all(e);
    ck_assert_msg(rc == MXC_EINVAL && strstr(mxc_last_error(), "a writer failed"),
                  "wait_all = %s (%s), expected the writer's failure still standing",
                  mxc_err_name(rc), mxc_last_error());
    delete_var_ok(e, v[1], NULL, NULL);
    wait_all_ok(e);
    mxc_engine_stats s = stats_of(e);
    ck_assert_uint_eq(s.failed, 3);
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* A wait returns once the operations it covers have retired, and retiring includes
 * freeing the argument: after the wait, arg_free has run. */
struct slow_free {
    atomic_int freed;
};

static int noop_fn(const mxc_run_ctx *rctx, void *arg) { return MXC_OK; }

static void slow_free_fn(void *arg) {
    struct slow_free *f = arg;
    mxct_sleep_us(20000);
    atomic_fetch_add(&f->freed, 1);
}

START_TEST(test_wait_covers_arg_free) {
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var **v = mxct_vars_new(e, 2);
    struct slow_free by_var = {0}, by_all = {0};
    mxc_engine_op_desc d = sync_desc(noop_fn, &by_var, NO_VARS, VARS(v[0]), "freed slowly");
    d.arg_free = slow_free_fn;
    push_desc(e, &d);
    wait_var_ok(e, v[0]);
    ck_assert_msg(atomic_load(&by_var.freed) == 1,
                  "wait_for_var returned before the operation's arg_free ran");
    d.arg = &by_all;
    d.mutable_vars = &v[1];
    push_desc(e, &d);
    wait_all_ok(e);
    ck_assert_msg(atomic_load(&by_all.freed) == 1,
                  "wait_all returned before the operation's arg_free ran");
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* ---- Waiting from inside an operation ---------------------------------------------- */

struct wait_probe {
    mxc_engine *e;
    mxc_var *busy;
    int rc_all, rc_var;
    char msg_all[256], msg_var[256];
    atomic_int ran;
};

static void wait_probe_body(struct wait_probe *p) {
    p->rc_all = mxc_engine_wait_all(p->e);
    snprintf(p->msg_all, sizeof p->msg_all, "%s", mxc_last_error());
    p->rc_var = mxc_engine_wait_for_var(p->e, p->busy);
    snprintf(p->msg_var, sizeof p->msg_var, "%s", mxc_last_error());
    atomic_fetch_add(&p->ran, 1);
}

static int wait_probe_fn(const mxc_run_ctx *rctx, void *arg) {
    wait_probe_body(arg);
    return MXC_OK;
}

static void wait_probe_async_fn(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done) {
    wait_probe_body(arg);
    mxc_engine_complete(done, MXC_OK);
}

static int sleep_20ms_fn(const mxc_run_ctx *rctx, void *arg) {
    mxct_sleep_us(20000);
    return MXC_OK;
}

START_TEST(test_wait_inside_operation) {
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var **v = mxct_vars_new(e, 4);
    /* v[0] stays busy for a while, so a wait that did not detect the misuse would block */
    push_fn(e, sleep_20ms_fn, NULL, NO_VARS, VARS(v[0]), "busy");
    struct wait_probe probes[3];
    memset(probes, 0, sizeof probes);
    for (int k = 0; k < 3; k++) {
        probes[k].e = e;
        probes[k].busy = v[0];
        mxc_engine_op_desc d =
            sync_desc(wait_probe_fn, &probes[k], NO_VARS, VARS(v[1 + k]), "waits inside");
        if (k == 1) { /* an asynchronous function */
            d.fn = NULL;
            d.async_fn = wait_probe_async_fn;
        } else if (k == 2) { /* run on whichever thread makes it ready */
            d.prop = MXC_PROP_ASYNC;
        }
        push_desc(e, &d);
    }
    wait_all_ok(e);
    static const char *kinds[] = {"sync", "async_fn", "PROP_ASYNC"};
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(atomic_load(&probes[k].ran), 1);
        ck_assert_msg(probes[k].rc_all == MXC_EMISUSE, "%s: wait_all inside = %s", kinds[k],
                      mxc_err_name(probes[k].rc_all));
        ck_assert_msg(probes[k].rc_var == MXC_EMISUSE, "%s: wait_for_var inside = %s", kinds[k],
                      mxc_err_name(probes[k].rc_var));
        ck_assert_msg(probes[k].msg_all[0] && probes[k].msg_var[0], "%s: no message", kinds[k]);
    }
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* ---- Pushes from many threads ------------------------------------------------------ *
 * Six threads push operations over ten shared variables. Each operation checks, with
 * atomic flags, that no other operation writes a variable it uses while it runs, counts
 * its writes, and records where it ran in each variable's history: a reader of version
 * k at position 2k, the writer that makes version k+1 at 2k+1. From the positions the
 * test checks each thread's push order on every variable, and that one order of all
 * pushes explains every variable's history (the recorded order graph has no cycle). */

enum { MT_THREADS = 6, MT_VARS = 10, MT_MAX_M = 3, MT_MAX_C = 2 };

struct mt;

struct mt_op {
    struct mt *mt;
    uint8_t nm, nc;
    uint8_t m[MT_MAX_M], c[MT_MAX_C];
    uint32_t pos_m[MT_MAX_M], pos_c[MT_MAX_C];
    uint16_t spin;
};

struct mt {
    mxc_engine *e;
    mxc_var **vars;
    atomic_int writer[MT_VARS], readers[MT_VARS];
    uint32_t version[MT_VARS];
    long count[MT_VARS];
    long per_thread;
    struct mt_op *ops; /* thread t's k-th push at t * per_thread + k */
};

struct mt_pusher {
    struct mt *mt;
    int id;
};

static int mt_fn(const mxc_run_ctx *rctx, void *arg) {
    struct mt_op *op = arg;
    struct mt *mt = op->mt;
    for (int i = 0; i < op->nc; i++) {
        atomic_fetch_add(&mt->readers[op->c[i]], 1);
        if (atomic_load(&mt->writer[op->c[i]]))
            mxct_note("var %d read while written", op->c[i]);
    }
    for (int i = 0; i < op->nm; i++) {
        if (atomic_exchange(&mt->writer[op->m[i]], 1))
            mxct_note("var %d written by two operations at once", op->m[i]);
        if (atomic_load(&mt->readers[op->m[i]]))
            mxct_note("var %d written while read", op->m[i]);
    }
    for (int i = 0; i < op->nc; i++)
        op->pos_c[i] = 2 * mt->version[op->c[i]];
    for (int i = 0; i < op->nm; i++) {
        op->pos_m[i] = 2 * mt->version[op->m[i]] + 1;
        mt->version[op->m[i]]++;
        mt->count[op->m[i]]++;
    }
    for (volatile int s = 0; s < op->spin; s++) {
    }
    for (int i = 0; i < op->nm; i++)
        atomic_store(&mt->writer[op->m[i]], 0);
    for (int i = 0; i < op->nc; i++)
        atomic_fetch_sub(&mt->readers[op->c[i]], 1);
    return MXC_OK;
}

static void *mt_pusher_main(void *arg) {
    struct mt_pusher *p = arg;
    struct mt *mt = p->mt;
    struct mxct_rng rng;
    mxct_rng_seed(&rng, 0x7417u + (uint64_t)p->id);
    for (long k = 0; k < mt->per_thread; k++) {
        struct mt_op *op = &mt->ops[p->id * mt->per_thread + k];
        int perm[MT_VARS];
        for (int i = 0; i < MT_VARS; i++)
            perm[i] = i;
        for (int i = 0; i < MT_MAX_M + MT_MAX_C; i++) {
            int j = i + (int)mxct_rng_below(&rng, (uint32_t)(MT_VARS - i));
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        op->mt = mt;
        op->nm = (uint8_t)(1 + mxct_rng_below(&rng, MT_MAX_M));
        op->nc = (uint8_t)mxct_rng_below(&rng, MT_MAX_C + 1);
        op->spin = (uint16_t)(mxct_rng_percent(&rng, 10) ? mxct_rng_below(&rng, 2000) : 0);
        mxc_var *mv[MT_MAX_M], *cv[MT_MAX_C];
        for (int i = 0; i < op->nm; i++)
            mv[i] = mt->vars[op->m[i] = (uint8_t)perm[i]];
        for (int i = 0; i < op->nc; i++)
            cv[i] = mt->vars[op->c[i] = (uint8_t)perm[MT_MAX_M + i]];
        mxc_engine_op_desc d = sync_desc(mt_fn, op, cv, op->nc, mv, op->nm, "mt");
        if (mxct_rng_percent(&rng, 10))
            d.prop = MXC_PROP_CPU_PRIORITIZED;
        int rc = mxc_engine_push(mt->e, &d);
        if (rc != MXC_OK) {
            mxct_note("thread %d push %ld: %s", p->id, k, mxc_last_error());
            return NULL;
        }
    }
    return NULL;
}

struct mt_access {
    uint32_t pos;
    int op;
    bool write;
};

static int compare_access(const void *a, const void *b) {
    const struct mt_access *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

struct edge_list {
    int *from, *to;
    size_t n, cap;
};

static void add_edge(struct edge_list *l, int from, int to) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->from = realloc(l->from, l->cap * sizeof *l->from);
        l->to = realloc(l->to, l->cap * sizeof *l->to);
        ck_assert(l->from && l->to);
    }
    l->from[l->n] = from;
    l->to[l->n] = to;
    l->n++;
}

/* Kahn's algorithm over `nodes` operations; returns how many could be ordered. */
static int topo_order_count(int nodes, const struct edge_list *l) {
    int *indeg = calloc((size_t)nodes, sizeof *indeg);
    int *start = calloc((size_t)nodes + 1, sizeof *start);
    int *adj = malloc((l->n + 1) * sizeof *adj);
    int *stack = malloc((size_t)nodes * sizeof *stack);
    ck_assert(indeg && start && adj && stack);
    for (size_t i = 0; i < l->n; i++) {
        indeg[l->to[i]]++;
        start[l->from[i] + 1]++;
    }
    for (int i = 0; i < nodes; i++)
        start[i + 1] += start[i];
    int *fill = calloc((size_t)nodes, sizeof *fill);
    ck_assert_ptr_nonnull(fill);
    for (size_t i = 0; i < l->n; i++)
        adj[start[l->from[i]] + fill[l->from[i]]++] = l->to[i];
    int top = 0, ordered = 0;
    for (int i = 0; i < nodes; i++)
        if (indeg[i] == 0)
            stack[top++] = i;
    while (top > 0) {
        int u = stack[--top];
        ordered++;
        for (int k = start[u]; k < start[u + 1]; k++)
            if (--indeg[adj[k]] == 0)
                stack[top++] = adj[k];
    }
    free(indeg);
    free(start);
    free(adj);
    free(stack);
    free(fill);
    return ordered;
}

static void mt_check_history(struct mt *mt) {
    int nops = (int)(MT_THREADS * mt->per_thread);
    struct edge_list edges = {0};
    /* each thread's pushes, in order */
    for (int t = 0; t < MT_THREADS; t++)
        for (long k = 1; k < mt->per_thread; k++)
            add_edge(&edges, (int)(t * mt->per_thread + k - 1), (int)(t * mt->per_thread + k));
    /* each variable's history */
    struct mt_access *acc = malloc((size_t)nops * sizeof *acc);
    ck_assert_ptr_nonnull(acc);
    for (int var = 0; var < MT_VARS; var++) {
        int n = 0;
        long writes = 0;
        for (int o = 0; o < nops; o++) {
            const struct mt_op *op = &mt->ops[o];
            for (int i = 0; i < op->nm; i++)
                if (op->m[i] == var) {
                    acc[n++] = (struct mt_access){op->pos_m[i], o, true};
                    writes++;
                }
            for (int i = 0; i < op->nc; i++)
                if (op->c[i] == var)
                    acc[n++] = (struct mt_access){op->pos_c[i], o, false};
        }
        ck_assert_msg(mt->count[var] == writes, "var %d: %ld writes ran, %ld pushed", var,
                      mt->count[var], writes);
        qsort(acc, (size_t)n, sizeof *acc, compare_access);
        int last_writer = -1, first_reader = -1; /* readers since the last write */
        for (int i = 0; i < n; i++) {
            if (acc[i].write) {
                ck_assert_msg(i == 0 || acc[i - 1].pos != acc[i].pos,
                              "var %d: two writers at position %u", var, acc[i].pos);
                if (first_reader >= 0) {
                    for (int r = first_reader; r < i; r++)
                        add_edge(&edges, acc[r].op, acc[i].op);
                } else if (last_writer >= 0) {
                    add_edge(&edges, last_writer, acc[i].op);
                }
                last_writer = acc[i].op;
                first_reader = -1;
            } else {
                if (last_writer >= 0)
                    add_edge(&edges, last_writer, acc[i].op);
                if (first_reader < 0)
                    first_reader = i;
            }
        }
    }
    /* Per thread and variable, positions follow push order: precise message first. */
    for (int t = 0; t < MT_THREADS; t++) {
        long last_pos[MT_VARS];
        bool last_write[MT_VARS];
        for (int var = 0; var < MT_VARS; var++)
            last_pos[var] = -1, last_write[var] = false;
        for (long k = 0; k < mt->per_thread; k++) {
            const struct mt_op *op = &mt->ops[t * mt->per_thread + k];
            for (int i = 0; i < op->nm + op->nc; i++) {
                bool w = i < op->nm;
                int var = w ? op->m[i] : op->c[i - op->nm];
                long pos = w ? op->pos_m[i] : op->pos_c[i - op->nm];
                bool ok = (w || last_write[var]) ? pos > last_pos[var] : pos >= last_pos[var];
                ck_assert_msg(ok,
                              "thread %d push %ld ran at position %ld of var %d, before "
                              "an earlier push of the same thread (position %ld)",
                              t, k, pos, var, last_pos[var]);
                last_pos[var] = pos;
                last_write[var] = w;
            }
        }
    }
    int ordered = topo_order_count(nops, &edges);
    ck_assert_msg(ordered == nops,
                  "no single push order explains the variables' histories (%d operations "
                  "in or behind a cycle)",
                  nops - ordered);
    free(acc);
    free(edges.from);
    free(edges.to);
}

START_TEST(test_push_from_many_threads) {
    struct mt *mt = calloc(1, sizeof *mt);
    ck_assert_ptr_nonnull(mt);
    mxc_engine_config cfg = {.cpu_workers = 3};
    mt->e = mxct_engine_new(_i, &cfg);
    mt->vars = mxct_vars_new(mt->e, MT_VARS);
    mt->per_thread = mxct_scaled(20000, 2000);
    mt->ops = calloc((size_t)(MT_THREADS * mt->per_thread), sizeof *mt->ops);
    ck_assert_ptr_nonnull(mt->ops);
    struct mt_pusher pushers[MT_THREADS];
    for (int t = 0; t < MT_THREADS; t++)
        pushers[t] = (struct mt_pusher){mt, t};
    mxct_run_threads(MT_THREADS, mt_pusher_main, pushers, sizeof pushers[0]);
    wait_all_ok(mt->e);
    mxct_assert_no_notes();
    mt_check_history(mt);
    mxc_engine_stats s = stats_of(mt->e);
    ck_assert_uint_eq(s.pushed, (uint64_t)(MT_THREADS * mt->per_thread));
    ck_assert_uint_eq(s.completed, s.pushed);
    mxct_engine_finish(mt->e);
    free(mt->vars);
    free(mt->ops);
    free(mt);
}
END_TEST

/* ---- Misuse ------------------------------------------------------------------------ */

static int never_fn(const mxc_run_ctx *rctx, void *arg) {
    mxct_note("an operation whose push failed ran");
    return MXC_OK;
}

static void never_async_fn(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done) {
    mxct_note("an asynchronous operation whose push failed ran");
    mxc_engine_complete(done, MXC_OK);
}

static void never_free(void *arg) { mxct_note("arg_free ran for a push that failed"); }

/* The name of the operations whose push must fail; their messages must name them. */
#define OP_NAME "never"

START_TEST(test_misuse_create) {
    mxc_engine *e = SENTINEL(mxc_engine); /* must be overwritten with NULL */
    EXPECT_CODE(MXC_EINVAL, "mxc_engine_create", mxc_engine_create(3, NULL, &e));
    ck_assert_ptr_null(e);
    EXPECT_CODE(MXC_EINVAL, "mxc_engine_create", mxc_engine_create(-1, NULL, &e));
    const mxc_engine_config bad[] = {
        {.cpu_workers = -1},      {.cpu_priority_workers = -1}, {.gpu_workers = -2},
        {.gpu_copy_workers = -1}, {.max_pending = -5},
    };
    for (size_t i = 0; i < MXC_ARRAY_SIZE(bad); i++) {
        e = SENTINEL(mxc_engine);
        EXPECT_CODE(MXC_EINVAL, "mxc_engine_create", mxc_engine_create(_i, &bad[i], &e));
        ck_assert_ptr_null(e);
    }
    EXPECT_ERROR(mxc_engine_create(_i, NULL, NULL));

    ck_assert_int_eq(mxc_engine_type_of(NULL), -1);
    ck_assert_ptr_null(mxc_engine_type_name(-1));
    ck_assert_ptr_null(mxc_engine_type_name(3));
    ck_assert_str_eq(mxc_engine_type_name(MXC_ENGINE_NAIVE), "naive");
    ck_assert_str_eq(mxc_engine_type_name(MXC_ENGINE_POOLED), "pooled");
    ck_assert_str_eq(mxc_engine_type_name(MXC_ENGINE_PERDEVICE), "perdevice");
    mxc_engine_destroy(NULL);
}
END_TEST

/* The settings an engine reports: what its config asked for, else the environment, else
 * the defaults (one CPU worker, one priority worker, 65536 pending operations). */
START_TEST(test_config_resolved) {
    unsetenv("MXC_CPU_WORKER_NTHREADS");
    unsetenv("MXC_CPU_PRIORITY_NTHREADS");
    unsetenv("MXC_ENGINE_MAX_PENDING");
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_engine_config got;
    ck_assert_int_eq(mxc_engine_get_config(e, &got), MXC_OK);
    ck_assert_int_eq(got.cpu_workers, 1);
    ck_assert_int_eq(got.cpu_priority_workers, 1);
    ck_assert_int_eq(got.max_pending, 65536);
    mxct_engine_finish(e);

    setenv("MXC_CPU_WORKER_NTHREADS", "3", 1);
    setenv("MXC_ENGINE_MAX_PENDING", "500", 1);
    mxc_engine_config asked = {.cpu_priority_workers = 2, .max_pending = 1000};
    e = mxct_engine_new(_i, &asked);
    ck_assert_int_eq(mxc_engine_get_config(e, &got), MXC_OK);
    ck_assert_int_eq(got.cpu_workers, 3);          /* from the environment */
    ck_assert_int_eq(got.cpu_priority_workers, 2); /* from the config */
    ck_assert_int_eq(got.max_pending, 1000);       /* the config wins */
    mxct_engine_finish(e);
    unsetenv("MXC_CPU_WORKER_NTHREADS");
    unsetenv("MXC_ENGINE_MAX_PENDING");
}
END_TEST

START_TEST(test_misuse_calls) {
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var **v = mxct_vars_new(e, 2);
    mxc_var *null_var = NULL;
    mxc_engine_op_desc ok = sync_desc(never_fn, NULL, VARS(v[0]), VARS(v[1]), OP_NAME);
    ok.arg_free = never_free;
    mxc_engine_op_desc d;
    mxc_engine_opr *opr = SENTINEL(mxc_engine_opr);
    mxc_var *out = SENTINEL(mxc_var);

    /* NULL handles */
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_new_var", mxc_engine_new_var(NULL, &out));
    ck_assert_ptr_null(out);
    EXPECT_ERROR(mxc_engine_new_var(e, NULL));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_push", mxc_engine_push(NULL, &ok));
    EXPECT_ERROR(mxc_engine_push(e, NULL));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_delete_var",
                mxc_engine_delete_var(NULL, v[0], NULL, NULL));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_delete_var", mxc_engine_delete_var(e, NULL, NULL, NULL));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_wait_for_var", mxc_engine_wait_for_var(NULL, v[0]));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_wait_for_var", mxc_engine_wait_for_var(e, NULL));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_wait_all", mxc_engine_wait_all(NULL));
    mxc_engine_stats st;
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_get_stats", mxc_engine_get_stats(NULL, &st));
    EXPECT_ERROR(mxc_engine_get_stats(e, NULL));
    mxc_engine_config cfg;
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_get_config", mxc_engine_get_config(NULL, &cfg));
    EXPECT_ERROR(mxc_engine_get_config(e, NULL));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_new_operator", mxc_engine_new_operator(NULL, &ok, &opr));
    ck_assert_ptr_null(opr);
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_push_operator", mxc_engine_push_operator(e, NULL, 0));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_profiler_start", mxc_engine_profiler_start(NULL));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_profiler_stop", mxc_engine_profiler_stop(NULL));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_profiler_dump", mxc_engine_profiler_dump(NULL, "x.json"));

    /* bad descriptions: push and new_operator reject them alike, naming the operation */
    d = ok;
    d.fn = NULL;
    EXPECT_CODE(MXC_EINVAL, OP_NAME, mxc_engine_push(e, &d));
    EXPECT_CODE(MXC_EINVAL, OP_NAME, mxc_engine_new_operator(e, &d, &opr));
    ck_assert_ptr_null(opr);
    d = ok;
    d.async_fn = never_async_fn;
    EXPECT_CODE(MXC_EINVAL, OP_NAME, mxc_engine_push(e, &d));
    EXPECT_CODE(MXC_EINVAL, OP_NAME, mxc_engine_new_operator(e, &d, &opr));
    d = ok;
    d.num_const_vars = -1;
    EXPECT_CODE(MXC_EINVAL, OP_NAME, mxc_engine_push(e, &d));
    d = ok;
    d.num_mutable_vars = -3;
    EXPECT_CODE(MXC_EINVAL, OP_NAME, mxc_engine_push(e, &d));
    const int bad_props[] = {-1, MXC_PROP_ASYNC + 1, 99};
    for (size_t i = 0; i < MXC_ARRAY_SIZE(bad_props); i++) {
        d = ok;
        d.prop = bad_props[i];
        EXPECT_CODE(MXC_EINVAL, OP_NAME, mxc_engine_push(e, &d));
    }
    d = ok;
    d.mutable_vars = &null_var;
    d.num_mutable_vars = 1;
    EXPECT_CODE(MXC_EMISUSE, OP_NAME, mxc_engine_push(e, &d));
    d = ok;
    d.const_vars = &null_var;
    d.num_const_vars = 1;
    EXPECT_CODE(MXC_EMISUSE, OP_NAME, mxc_engine_push(e, &d));
    d = ok;
    d.const_vars = NULL;
    d.num_const_vars = 2;
    EXPECT_ERROR(mxc_engine_push(e, &d));

    /* devices this build or machine does not have */
    d = ok;
    d.ctx = mxc_gpu(mxc_gpu_count() + 3);
    EXPECT_CODE(MXC_ENODEV, OP_NAME, mxc_engine_push(e, &d));
    EXPECT_CODE(MXC_ENODEV, OP_NAME, mxc_engine_new_operator(e, &d, &opr));
    if (mxc_gpu_count() == 0) {
        d.ctx = mxc_gpu(0);
        EXPECT_CODE(MXC_ENODEV, OP_NAME, mxc_engine_push(e, &d));
        d.prop = MXC_PROP_COPY_TO_DEVICE;
        EXPECT_CODE(MXC_ENODEV, OP_NAME, mxc_engine_push(e, &d));
    }
    d = ok;
    d.ctx = mxc_gpu(-1);
    EXPECT_ERROR(mxc_engine_push(e, &d));
    d.ctx = (mxc_context){77, 0};
    EXPECT_ERROR(mxc_engine_push(e, &d));

    /* handles of another engine */
    mxc_engine *other = NULL;
    ck_assert_int_eq(mxc_engine_create(_i, NULL, &other), MXC_OK);
    mxc_var *foreign = NULL;
    ck_assert_int_eq(mxc_engine_new_var(other, &foreign), MXC_OK);
    d = ok;
    d.mutable_vars = &foreign;
    d.num_mutable_vars = 1;
    EXPECT_CODE(MXC_EMISUSE, OP_NAME, mxc_engine_push(e, &d));
    EXPECT_CODE(MXC_EMISUSE, OP_NAME, mxc_engine_new_operator(e, &d, &opr));
    d = ok;
    d.const_vars = &foreign;
    d.num_const_vars = 1;
    EXPECT_CODE(MXC_EMISUSE, OP_NAME, mxc_engine_push(e, &d));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_wait_for_var", mxc_engine_wait_for_var(e, foreign));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_delete_var",
                mxc_engine_delete_var(e, foreign, NULL, NULL));
    mxc_engine_op_desc od = sync_desc(never_fn, NULL, NO_VARS, VARS(foreign), "foreign op");
    mxc_engine_opr *foreign_opr = NULL;
    ck_assert_int_eq(mxc_engine_new_operator(other, &od, &foreign_opr), MXC_OK);
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_push_operator",
                mxc_engine_push_operator(e, foreign_opr, 0));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_delete_operator",
                mxc_engine_delete_operator(e, foreign_opr));
    ck_assert_int_eq(mxc_engine_delete_operator(other, foreign_opr), MXC_OK);
    wait_all_ok(other);
    mxc_engine_destroy(other);

    /* a deleted variable (the wait orders the delete before the misuse) */
    mxc_var *gone = NULL;
    ck_assert_int_eq(mxc_engine_new_var(e, &gone), MXC_OK);
    delete_var_ok(e, gone, NULL, NULL);
    wait_all_ok(e);
    d = ok;
    d.mutable_vars = &gone;
    d.num_mutable_vars = 1;
    EXPECT_CODE(MXC_EMISUSE, OP_NAME, mxc_engine_push(e, &d));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_delete_var", mxc_engine_delete_var(e, gone, NULL, NULL));
    EXPECT_CODE(MXC_EMISUSE, "mxc_engine_wait_for_var", mxc_engine_wait_for_var(e, gone));

    /* an unwritable profile path */
    EXPECT_CODE(MXC_EIO, "/nonexistent-mxc-dir/profile.json",
                mxc_engine_profiler_dump(e, "/nonexistent-mxc-dir/profile.json"));

    /* nothing that failed ran, and the engine still works */
    wait_all_ok(e);
    mxct_assert_no_notes();
    struct tracked t = {0};
    push_tracked(e, &t, VARS(v[0]), VARS(v[1]), "still works");
    wait_all_ok(e);
    EXPECT_RUNS(t, 1);
    ck_assert_int_eq(stats_of(e).failed, 0);
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* ---- Profiler ---------------------------------------------------------------------- */

static int count_occurrences(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Dumps the profile and returns the file's text, checked to be JSON with traceEvents. */
static char *dump_profile(mxc_engine *e) {
    char *path = mxct_temp_file("mxc-profile-");
    int rc = mxc_engine_profiler_dump(e, path);
    ck_assert_msg(rc == MXC_OK, "profiler_dump(%s) = %s: %s", path, mxc_err_name(rc),
                  mxc_last_error());
    char *text = mxct_read_file(path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    ck_assert_msg(mxct_json_valid(text), "%s is not valid JSON:\n%.2000s", path, text);
    ck_assert_msg(strstr(text, "\"traceEvents\"") != NULL, "no traceEvents in %s", path);
    unlink(path);
    free(path);
    return text;
}

static void push_named(mxc_engine *e, mxc_var *v, const char *name) {
    push_fn(e, sleep_20ms_fn, NULL, NO_VARS, VARS(v), name);
}

START_TEST(test_profiler_dump) {
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var **v = mxct_vars_new(e, 3);
    push_named(e, v[0], "prof_before_start");
    wait_all_ok(e);

    ck_assert_int_eq(mxc_engine_profiler_start(e), MXC_OK);
    for (int i = 0; i < 3; i++)
        push_named(e, v[i % 2], "prof_alpha");
    push_named(e, v[2], "prof_beta");
    push_named(e, v[2], "prof \"quoted\" \\ name\twith a tab");
    push_named(e, v[1], "prof_a_name_longer_than_any_fixed_buffer_is_likely_to_be_0123456789");
    struct async_job job = {.name = "prof_gamma", .dst = 0, .lhs = -1, .add = 1};
    int64_t vals[3] = {0};
    push_async_job(e, v, vals, &job);
    wait_all_ok(e);
    ck_assert_int_eq(mxc_engine_profiler_stop(e), MXC_OK);
    pthread_join(job.thread, NULL);
    push_named(e, v[0], "prof_after_stop");
    wait_all_ok(e);

    char *text = dump_profile(e);
    ck_assert_msg(count_occurrences(text, "prof_alpha") >= 3, "prof_alpha missing:\n%.2000s", text);
    ck_assert_msg(strstr(text, "prof_beta") && strstr(text, "prof_gamma"),
                  "op names missing:\n%.2000s", text);
    ck_assert_msg(strstr(text, "prof_a_name_longer"), "the long name is missing");
    ck_assert_msg(!strstr(text, "prof_before_start") && !strstr(text, "prof_after_stop"),
                  "operations outside start/stop were recorded");
    free(text);

    /* start clears the earlier records */
    ck_assert_int_eq(mxc_engine_profiler_start(e), MXC_OK);
    push_named(e, v[0], "prof_second");
    wait_all_ok(e);
    ck_assert_int_eq(mxc_engine_profiler_stop(e), MXC_OK);
    text = dump_profile(e);
    ck_assert_msg(strstr(text, "prof_second") && !strstr(text, "prof_alpha"),
                  "second session:\n%.2000s", text);
    free(text);
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* MXC_PROFILER_AUTOSTART records from creation and writes the trace at destroy, while
 * the workers' buffers still exist. */
START_TEST(test_profiler_autostart) {
    char *path = mxct_temp_file("mxc-autoprofile-");
    setenv("MXC_PROFILER_AUTOSTART", "1", 1);
    setenv("MXC_PROFILER_OUTPUT", path, 1);
    mxc_engine *e = mxct_engine_new(_i, NULL);
    unsetenv("MXC_PROFILER_AUTOSTART");
    unsetenv("MXC_PROFILER_OUTPUT");
    mxc_var **v = mxct_vars_new(e, 2);
    push_named(e, v[0], "auto_alpha");
    push_named(e, v[1], "auto_beta");
    mxct_engine_finish(e); /* waits, destroys the engine and so writes the file */
    char *text = mxct_read_file(path, NULL);
    ck_assert_msg(text != NULL, "destroy wrote no trace to %s", path);
    ck_assert_msg(mxct_json_valid(text), "%s is not valid JSON:\n%.2000s", path, text);
    ck_assert_msg(strstr(text, "auto_alpha") && strstr(text, "auto_beta"),
                  "operation names missing:\n%.2000s", text);
    free(text);
    free(v);
    unlink(path);
    free(path);
}
END_TEST

/* ---- Counters ---------------------------------------------------------------------- */

START_TEST(test_stats_counters) {
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_engine_stats s = stats_of(e);
    ck_assert_uint_eq(s.pushed, 0);
    ck_assert_uint_eq(s.completed, 0);
    ck_assert_uint_eq(s.failed, 0);
    ck_assert_int_eq(s.pending, 0);
    ck_assert_int_eq(s.live_vars, 0);

    enum { NV = 10, OK_OPS = 20, BAD_OPS = 3 };
    mxc_var **v = mxct_vars_new(e, NV);
    s = stats_of(e);
    ck_assert_int_eq(s.live_vars, NV);
    ck_assert_uint_gt(s.pool_bytes, 0);

    uint64_t expect_pushed = 0;
    if (mxct_engine_threaded(_i)) { /* a blocked chain is visible as pending */
        struct gate g = {0};
        struct tracked chain = {0};
        push_fn(e, gate_fn, &g, NO_VARS, VARS(v[0]), "gate");
        for (int i = 0; i < 5; i++)
            push_tracked(e, &chain, VARS(v[0]), VARS(v[1 + i]), "behind the gate");
        ck_assert(mxct_wait_at_least(&g.started, 1, 10000));
        s = stats_of(e);
        ck_assert_uint_eq(s.pushed, 6);
        ck_assert_int_eq(s.pending, 6);
        ck_assert_uint_eq(s.completed, 0);
        atomic_store(&g.open, 1);
        wait_all_ok(e);
        EXPECT_RUNS(chain, 5);
        expect_pushed = 6;
    }
    struct tracked good = {0};
    struct tracked bad = {.status = MXC_EINVAL, .message = "counted failure"};
    for (int i = 0; i < OK_OPS; i++)
        push_tracked(e, &good, VARS(v[i % 3]), VARS(v[3 + i % 4]), "good");
    for (int i = 0; i < BAD_OPS; i++)
        push_tracked(e, &bad, NO_VARS, VARS(v[7 + i]), "bad");
    ck_assert_int_eq(mxc_engine_wait_all(e), MXC_EINVAL);
    expect_pushed += OK_OPS + BAD_OPS;
    s = stats_of(e);
    ck_assert_uint_eq(s.pushed, expect_pushed);
    ck_assert_uint_eq(s.completed, expect_pushed);
    ck_assert_uint_eq(s.failed, BAD_OPS);
    ck_assert_int_eq(s.pending, 0);
    EXPECT_RUNS(good, OK_OPS);

    mxc_engine_opr *opr = NULL;
    mxc_engine_op_desc d = sync_desc(tracked_fn, &good, NO_VARS, VARS(v[0]), "reusable");
    ck_assert_int_eq(mxc_engine_new_operator(e, &d, &opr), MXC_OK);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(mxc_engine_push_operator(e, opr, 0), MXC_OK);
    /* the failed variables still carry their failures */
    ck_assert_int_eq(mxc_engine_wait_all(e), MXC_EINVAL);
    expect_pushed += 5;
    s = stats_of(e);
    ck_assert_uint_eq(s.pushed, expect_pushed);
    ck_assert_uint_eq(s.completed, expect_pushed);

    ck_assert_int_eq(mxc_engine_delete_operator(e, opr), MXC_OK);
    for (int i = 0; i < NV; i++)
        delete_var_ok(e, v[i], NULL, NULL);
    wait_all_ok(e);
    s = stats_of(e);
    ck_assert_int_eq(s.live_vars, 0);
    ck_assert_int_eq(s.pending, 0);
    ck_assert_uint_eq(s.completed, s.pushed);
    ck_assert_uint_eq(s.failed, BAD_OPS);
    free(v);
    mxct_engine_finish(e);
}
END_TEST

/* ---- What a wait covers ------------------------------------------------------------ *
 * A wait covers the operations pushed before it. Another thread that keeps pushing must
 * not hold it up: wait_all and wait_for_var return once their own operations are done,
 * while the pushes go on. */

struct busy_pusher {
    mxc_engine *e;
    mxc_var *chain;         /* every push writes it: a backlog that never drains early */
    atomic_int pushed, ran; /* operations pushed, operations run */
    atomic_int stopped;     /* set when the pusher pushed its last operation */
    long period_us, op_us, duration_us;
};

static int busy_op_fn(const mxc_run_ctx *rctx, void *arg) {
    struct busy_pusher *p = arg;
    mxct_sleep_us(p->op_us);
    atomic_fetch_add(&p->ran, 1);
    return MXC_OK;
}

static void *busy_pusher_main(void *arg) {
    struct busy_pusher *p = arg;
    uint64_t end = mxct_now_ns() + (uint64_t)p->duration_us * 1000u;
    while (mxct_now_ns() < end) {
        mxc_engine_op_desc d = sync_desc(busy_op_fn, p, NO_VARS, &p->chain, 1, "busy");
        if (mxc_engine_push(p->e, &d) != MXC_OK) {
            mxct_note("busy pusher: %s", mxc_last_error());
            break;
        }
        atomic_fetch_add(&p->pushed, 1);
        mxct_sleep_us(p->period_us);
    }
    atomic_store(&p->stopped, 1);
    return NULL;
}

static int sleep_50ms_fn(const mxc_run_ctx *rctx, void *arg) {
    mxct_sleep_us(50000);
    atomic_fetch_add((atomic_int *)arg, 1);
    return MXC_OK;
}

START_TEST(test_wait_not_extended_by_later_pushes) {
    mxc_engine_config cfg = {.cpu_workers = 2};
    mxc_engine *e = mxct_engine_new(_i, &cfg);
    mxc_var **v = mxct_vars_new(e, 2);
    /* Operations of 10 ms pushed every 5 ms for 0.8 s: the engine stays busy until about
     * 1.6 s, so a wait for it to go idle would return only then. */
    struct busy_pusher p = {
        .e = e, .chain = v[0], .period_us = 5000, .op_us = 10000, .duration_us = 800000};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, busy_pusher_main, &p), 0);
    ck_assert(mxct_wait_at_least(&p.pushed, 10, 10000));

    atomic_int own = 0;
    push_fn(e, sleep_50ms_fn, &own, NO_VARS, VARS(v[1]), "own 50 ms");
    int pushed_before = atomic_load(&p.pushed);
    wait_all_ok(e);
    int ran_by_then = atomic_load(&p.ran);
    bool still_pushing = !atomic_load(&p.stopped);
    ck_assert_int_eq(atomic_load(&own), 1);
    ck_assert_msg(ran_by_then >= pushed_before,
                  "wait_all returned before the %d operations pushed before it ran (%d did)",
                  pushed_before, ran_by_then);
    ck_assert_msg(still_pushing, "wait_all returned only after the other thread stopped pushing");

    /* wait_for_var on the variable the other thread keeps writing */
    pushed_before = atomic_load(&p.pushed);
    wait_var_ok(e, v[0]);
    ran_by_then = atomic_load(&p.ran);
    still_pushing = !atomic_load(&p.stopped);
    ck_assert_msg(ran_by_then >= pushed_before,
                  "wait_for_var returned before the %d operations pushed before it ran (%d did)",
                  pushed_before, ran_by_then);
    ck_assert_msg(still_pushing,
                  "wait_for_var returned only after the other thread stopped pushing");

    pthread_join(t, NULL);
    mxct_assert_no_notes();
    free(v);
    mxct_engine_finish(e);
    ck_assert_int_eq(atomic_load(&p.ran), atomic_load(&p.pushed));
}
END_TEST

/* ---- Lifetime ---------------------------------------------------------------------- *
 * Once a wait has returned, the caller may destroy the engine at once: a thread that
 * completed one of the operations the wait covered must be done with the engine by then.
 * ThreadSanitizer sees any read of the engine after that point as a race with the free. */

/* A thread of the test's own that completes one asynchronous run. */
struct completer {
    pthread_t thread;
    mxc_engine_done *done;
    int status;
    atomic_int started;
};

static void *completer_main(void *arg) {
    struct completer *c = arg;
    if (c->status != MXC_OK)
        mxc__error(c->status, "completed with a failure on purpose");
    mxc_engine_complete(c->done, c->status);
    return NULL;
}

static void completer_async_fn(const mxc_run_ctx *rctx, void *arg, mxc_engine_done *done) {
    struct completer *c = arg;
    c->done = done;
    if (pthread_create(&c->thread, NULL, completer_main, c) != 0) {
        mxct_note("cannot start a completer thread");
        mxc_engine_complete(done, mxc__error(MXC_EINTERNAL, "no thread"));
        return;
    }
    atomic_store(&c->started, 1);
}

static void push_completed_elsewhere(mxc_engine *e, struct completer *c, mxc_var *const *mv,
                                     int nm) {
    mxc_engine_op_desc d = sync_desc(NULL, c, NO_VARS, mv, nm, "completed elsewhere");
    d.async_fn = completer_async_fn;
    push_desc(e, &d);
}

static void completer_join(struct completer *c) {
    if (atomic_load(&c->started))
        pthread_join(c->thread, NULL);
}

START_TEST(test_destroy_right_after_wait) {
    long rounds = mxct_scaled(300, 60);
    for (long r = 0; r < rounds; r++) {
        mxc_engine_config cfg = {.cpu_workers = 1};
        mxc_engine *e = mxct_engine_new(_i, &cfg);
        mxc_var **v = mxct_vars_new(e, 1);
        struct completer c = {.status = MXC_OK};
        push_completed_elsewhere(e, &c, VARS(v[0]));
        if (r % 2)
            wait_all_ok(e);
        else
            wait_var_ok(e, v[0]);
        mxc_engine_destroy(e); /* at once: the completer may still be returning */
        completer_join(&c);
        free(v);
    }
    mxct_assert_no_notes();
}
END_TEST

/* ---- Teardown under load ----------------------------------------------------------- *
 * Engines made, used and destroyed in a loop: synchronous operations and asynchronous ones
 * completed from threads of the test's own, some of each failing, on a few shared
 * variables; one wait (wait_all or wait_for_var), then destroy at once. Under
 * ThreadSanitizer and AddressSanitizer nothing may touch an engine after its destroy, and
 * every operation retires exactly once. */

struct stress_async {
    struct completer c; /* first: the asynchronous function's argument */
    atomic_int *frees;
};

static void stress_async_free(void *arg) {
    atomic_fetch_add(((struct stress_async *)arg)->frees, 1);
}

START_TEST(test_teardown_stress) {
    enum { NV = 4, MAX_OPS = 12 };
    long rounds = mxct_scaled(300, 60);
    struct mxct_rng rng;
    mxct_rng_seed(&rng, 0x5eed + (uint64_t)_i);
    for (long r = 0; r < rounds; r++) {
        mxc_engine_config cfg = {.cpu_workers = 1 + (int)(r % 2)};
        mxc_engine *e = mxct_engine_new(_i, &cfg);
        mxc_var **v = mxct_vars_new(e, NV);
        struct tracked sync_ops[MAX_OPS];
        struct stress_async async_ops[MAX_OPS];
        memset(sync_ops, 0, sizeof sync_ops);
        memset(async_ops, 0, sizeof async_ops);
        atomic_int async_frees = 0;
        int n = 4 + (int)mxct_rng_below(&rng, MAX_OPS - 3);
        for (int k = 0; k < n; k++) {
            mxc_var *in = v[mxct_rng_below(&rng, NV)], *out = v[mxct_rng_below(&rng, NV)];
            bool fails = mxct_rng_percent(&rng, 15);
            if (mxct_rng_percent(&rng, 50)) {
                sync_ops[k].status = fails ? MXC_EINVAL : MXC_OK;
                sync_ops[k].message = "a synchronous operation failed on purpose";
                push_tracked(e, &sync_ops[k], VARS(in), VARS(out), "sync");
            } else {
                struct stress_async *a = &async_ops[k];
                a->c.status = fails ? MXC_EIO : MXC_OK;
                a->frees = &async_frees;
                mxc_engine_op_desc d = sync_desc(NULL, &a->c, VARS(in), VARS(out), "async");
                d.async_fn = completer_async_fn;
                d.arg_free = stress_async_free;
                push_desc(e, &d);
            }
        }
        int rc = r % 3 == 0 ? mxc_engine_wait_all(e) : mxc_engine_wait_for_var(e, v[r % NV]);
        ck_assert_msg(rc == MXC_OK || rc == MXC_EINVAL || rc == MXC_EIO, "round %ld: wait = %s: %s",
                      r, mxc_err_name(rc), mxc_last_error());
        if (r % 4 == 1) /* the others go with the engine */
            delete_var_ok(e, v[r % NV], NULL, NULL);
        mxc_engine_destroy(e);
        int frees = atomic_load(&async_frees);
        for (int k = 0; k < n; k++) {
            completer_join(&async_ops[k].c);
            frees += atomic_load(&sync_ops[k].frees);
        }
        ck_assert_msg(frees == n, "round %ld: %d of %d operations retired", r, frees, n);
        mxct_assert_no_notes();
        free(v);
    }
}
END_TEST

/* ---- Memory through the allocator hook --------------------------------------------- */

/* Allocator blocks still held once freed handles' slabs are given back. */
static long live_blocks(struct mxct_alloc_counts *counts) {
    mxc__handles_release();
    return atomic_load(&counts->live);
}

/* A small session touching every allocating call. Allocations fail after `fail_after`
 * successful ones (< 0: never); every failure must be a clean MXC_ENOMEM. Returns true
 * when no allocation failed. Variables it does not delete go with the engine (and the
 * run slots they hold for their deletes). */

static bool memory_session(int type, struct mxct_alloc_counts *counts, long fail_after) {
    mxct_alloc_fail_after(counts, fail_after);
    mxc_engine_config cfg = {.cpu_workers = 2};
    mxc_engine *e = SENTINEL(mxc_engine);
    struct tracked ops[3];
    memset(ops, 0, sizeof ops);
    bool pushed[3] = {false, false, false};
    int rc = mxc_engine_create(type, &cfg, &e);
    if (rc != MXC_OK) {
        ck_assert_msg(rc == MXC_ENOMEM, "create, failing after %ld: %s", fail_after,
                      mxc_err_name(rc));
        ck_assert_ptr_null(e);
        ck_assert_int_eq(live_blocks(counts), 0);
        return false;
    }
    mxc_var *v[3] = {NULL, NULL, NULL};
    mxc_engine_opr *opr = NULL;
    for (int i = 0; i < 3; i++) {
        rc = mxc_engine_new_var(e, &v[i]);
        if (rc != MXC_OK)
            goto done;
    }
    for (int i = 0; i < 2; i++) {
        mxc_engine_op_desc d = sync_desc(tracked_fn, &ops[i], VARS(v[i]), VARS(v[2]), "op");
        d.arg_free = tracked_free;
        rc = mxc_engine_push(e, &d);
        if (rc != MXC_OK)
            goto done;
        pushed[i] = true;
    }
    mxc_engine_op_desc d = sync_desc(tracked_fn, &ops[2], VARS(v[0], v[1]), VARS(v[2]), "opr");
    d.arg_free = tracked_free;
    rc = mxc_engine_new_operator(e, &d, &opr);
    if (rc != MXC_OK) {
        ck_assert_ptr_null(opr);
        goto done;
    }
    pushed[2] = true;
    for (int i = 0; i < 3 && rc == MXC_OK; i++)
        rc = mxc_engine_push_operator(e, opr, i);
    if (rc == MXC_OK)
        rc = mxc_engine_delete_operator(e, opr);
    if (rc == MXC_OK)
        rc = mxc_engine_delete_var(e, v[0], NULL, NULL);
done:
    ck_assert_msg(rc == MXC_OK || rc == MXC_ENOMEM, "failing after %ld: %s: %s", fail_after,
                  mxc_err_name(rc), mxc_last_error());
    int wrc = mxc_engine_wait_all(e);
    ck_assert_msg(wrc == MXC_OK, "wait_all after an allocation failure: %s: %s", mxc_err_name(wrc),
                  mxc_last_error());
    mxc_engine_destroy(e);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(atomic_load(&ops[i].runs), pushed[i] ? 1 : 0);
        ck_assert_int_eq(atomic_load(&ops[i].frees), pushed[i] ? 1 : 0);
    }
    ck_assert_int_eq(atomic_load(&ops[2].frees), pushed[2] ? 1 : 0);
    long live = live_blocks(counts);
    ck_assert_msg(live == 0, "%ld blocks leaked (allocations failing after %ld)", live, fail_after);
    return rc == MXC_OK && atomic_load(&counts->failures) == 0;
}

START_TEST(test_memory_no_leaks) {
    struct mxct_alloc_counts counts;
    mxct_alloc_install(&counts);
    for (int round = 0; round < 20; round++)
        ck_assert(memory_session(_i, &counts, -1));
    ck_assert_msg(atomic_load(&counts.mallocs) > 0, "the engine bypasses the allocator hook");
    mxct_alloc_uninstall();
}
END_TEST

START_TEST(test_memory_failure_sweep) {
    struct mxct_alloc_counts counts;
    mxct_alloc_install(&counts);
    long n = 0;
    while (!memory_session(_i, &counts, n)) {
        n++;
        ck_assert_msg(n < 20000, "the session never completed");
    }
    ck_assert_msg(n > 0, "the session allocates nothing through the hook");
    mxct_alloc_uninstall();
}
END_TEST

/* A wait with no memory for its waiting operation still waits: it returns only after the
 * variable's pending write ran (mxc_nd_save freed the host buffer of a copy still running
 * when the wait failed with MXC_ENOMEM; TSan's report in CI). */
static int slow_write_fn(const mxc_run_ctx *rctx, void *arg) {
    (void)rctx;
    mxct_sleep_us(30000);
    atomic_store((atomic_int *)arg, 1);
    return MXC_OK;
}

START_TEST(test_wait_for_var_without_memory) {
    mxc_engine *e = mxct_engine_new(_i, NULL);
    mxc_var *v = NULL, *w = NULL;
    CK_OK(mxc_engine_new_var(e, &v));
    CK_OK(mxc_engine_new_var(e, &w));
    for (int round = 0; round < 3; round++) {
        atomic_int ran = 0;
        struct mxct_alloc_counts counts;
        mxct_alloc_install(&counts);
        mxc_engine_op_desc d = sync_desc(slow_write_fn, &ran, NO_VARS, VARS(v), "slow write");
        push_desc(e, &d);
        mxct_alloc_fail_after(&counts, 0);
        /* use up the operation slots there are: the wait's own operation then needs memory */
        mxc_engine_op_desc noop = sync_desc(noop_fn, NULL, NO_VARS, VARS(w), "noop");
        int pushed = 0;
        while (pushed < 1000000 && mxc_engine_push(e, &noop) == MXC_OK)
            pushed++;
        ck_assert_int_lt(pushed, 1000000);
        int rc = mxc_engine_wait_for_var(e, v);
        mxct_alloc_fail_after(&counts, -1);
        ck_assert_msg(atomic_load(&ran) == 1, "round %d: the wait (%s) returned before the write",
                      round, mxc_err_name(rc));
        CK_OK(rc);
        CK_OK(mxc_engine_wait_all(e));
        mxct_alloc_uninstall();
    }
    CK_OK(mxc_engine_delete_var(e, v, NULL, NULL));
    CK_OK(mxc_engine_delete_var(e, w, NULL, NULL));
    mxc_engine_destroy(e);
}
END_TEST

/* ---- Suite ------------------------------------------------------------------------- */

static TCase *engine_tcase(Suite *s, const char *name, double timeout_s) {
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, mxct_timeout(timeout_s));
    suite_add_tcase(s, tc);
    return tc;
}

static Suite *engine_suite(void) {
    Suite *s = suite_create("engine");
    TCase *tc = engine_tcase(s, "seeds", 20);
    MXCT_ADD_ENGINE_TEST(tc, test_seed_parallel_reads);
    MXCT_ADD_ENGINE_TEST(tc, test_seed_delete_after_readers);
    MXCT_ADD_ENGINE_TEST(tc, test_seed_write_after_read);

    tc = engine_tcase(s, "random", 120);
    MXCT_ADD_ENGINE_TEST(tc, test_random_workloads);
    MXCT_ADD_ENGINE_TEST(tc, test_million_operations);

    tc = engine_tcase(s, "async", 20);
    MXCT_ADD_ENGINE_TEST(tc, test_async_completed_elsewhere);

    tc = engine_tcase(s, "reusable", 60);
    MXCT_ADD_ENGINE_TEST(tc, test_reusable_operator);
    MXCT_ADD_ENGINE_TEST(tc, test_delete_operator_waits_for_runs);

    tc = engine_tcase(s, "delete", 20);
    MXCT_ADD_ENGINE_TEST(tc, test_delete_var_ordering);
    MXCT_ADD_ENGINE_TEST(tc, test_delete_var_racing);
    MXCT_ADD_ENGINE_TEST(tc, test_delete_slot_outlives_release);

    tc = engine_tcase(s, "priority", 20);
    tcase_add_test(tc, test_priority_worker_order);

    tc = engine_tcase(s, "errors", 20);
    MXCT_ADD_ENGINE_TEST(tc, test_error_propagation);
    MXCT_ADD_ENGINE_TEST(tc, test_state_var_never_fails);
    MXCT_ADD_ENGINE_TEST(tc, test_wait_all_reports);
    MXCT_ADD_ENGINE_TEST(tc, test_wait_inside_operation);
    MXCT_ADD_ENGINE_TEST(tc, test_wait_covers_arg_free);

    tc = engine_tcase(s, "threads", 60);
    MXCT_ADD_ENGINE_TEST(tc, test_push_from_many_threads);

    tc = engine_tcase(s, "misuse", 20);
    MXCT_ADD_ENGINE_TEST(tc, test_misuse_create);
    MXCT_ADD_ENGINE_TEST(tc, test_misuse_calls);

    tc = engine_tcase(s, "profiler", 20);
    MXCT_ADD_ENGINE_TEST(tc, test_profiler_dump);
    MXCT_ADD_ENGINE_TEST(tc, test_profiler_autostart);

    tc = engine_tcase(s, "stats", 20);
    MXCT_ADD_ENGINE_TEST(tc, test_stats_counters);
    MXCT_ADD_ENGINE_TEST(tc, test_config_resolved);

    tc = engine_tcase(s, "waits", 20);
    MXCT_ADD_ENGINE_TEST(tc, test_wait_not_extended_by_later_pushes);

    tc = engine_tcase(s, "lifetime", 60);
    MXCT_ADD_ENGINE_TEST(tc, test_destroy_right_after_wait);
    MXCT_ADD_ENGINE_TEST(tc, test_teardown_stress);

    tc = engine_tcase(s, "memory", 60);
    MXCT_ADD_ENGINE_TEST(tc, test_memory_no_leaks);
    MXCT_ADD_ENGINE_TEST(tc, test_memory_failure_sweep);
    MXCT_ADD_ENGINE_TEST(tc, test_wait_for_var_without_memory);
    return s;
}

int main(void) { return mxct_run_suite(engine_suite()); }

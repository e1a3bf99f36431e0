/*
 * tests/util/test_util.h — helpers shared by the Check suites: iteration scaling
 * (MXC_TEST_QUICK) and sanitizer-aware timeouts, clocks and time spans, a seeded random
 * generator and a hash, notes recorded by worker threads and asserted on the test's own
 * thread, a per-engine-type test loop, a counting / failure-injecting allocator, files
 * and a JSON syntax check. Every test binary links the sources in tests/util/.
 */
#ifndef MXC_TEST_UTIL_H
#define MXC_TEST_UTIL_H

#include "mxc/engine.h"
#include "mxc/symbol.h"

#include <check.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Scaling and timeouts ---------------------------------------------------------- */

/* True when MXC_TEST_QUICK is set to anything but "" or "0". */
bool mxct_quick(void);

/* Runs every test of `suite` (Check's fork mode, normal output) and returns the process
 * exit status: EXIT_SUCCESS when all passed. Each suite's main() is this one call. */
int mxct_run_suite(Suite *suite);

/* `normal` iterations, or `quick` under MXC_TEST_QUICK. */
long mxct_scaled(long normal, long quick);

/* True in a ThreadSanitizer / AddressSanitizer build. */
bool mxct_under_tsan(void);
bool mxct_under_asan(void);

/* A Check timeout in seconds for a test that needs about `seconds` at most in a plain
 * build: multiplied for sanitizer builds (Check's CK_TIMEOUT_MULTIPLIER still applies on
 * top). */
double mxct_timeout(double seconds);

/* ---- Time -------------------------------------------------------------------------- */

/* Monotonic clock in nanoseconds. */
uint64_t mxct_now_ns(void);

/* Sleeps for `us` microseconds (0: returns at once). */
void mxct_sleep_us(long us);

/* CPU time used so far by the whole process / by the calling thread, in nanoseconds. */
uint64_t mxct_process_cpu_ns(void);
uint64_t mxct_thread_cpu_ns(void);

/* When something ran: set by the code being timed, read once it is known to be done. */
struct mxct_span {
    _Atomic uint64_t start_ns, end_ns;
};

void mxct_span_begin(struct mxct_span *s);
void mxct_span_end(struct mxct_span *s);
/* Both spans complete and overlapping in time. */
bool mxct_span_overlap(struct mxct_span *a, struct mxct_span *b);
/* Both complete and `a` ended no later than `b` started. */
bool mxct_span_before(struct mxct_span *a, struct mxct_span *b);

/* Waits until `*flag` reaches at least `value`, up to `timeout_ms`; false on time-out. */
bool mxct_wait_at_least(atomic_int *flag, int value, long timeout_ms);

/* ---- Random numbers and hashing ---------------------------------------------------- */

/* splitmix64: small, seedable, good enough for test workloads. */
struct mxct_rng {
    uint64_t state;
};

void mxct_rng_seed(struct mxct_rng *r, uint64_t seed);
uint64_t mxct_rng_next(struct mxct_rng *r);
/* Uniform in [0, n); n > 0. */
uint32_t mxct_rng_below(struct mxct_rng *r, uint32_t n);
/* True with probability `percent` / 100. */
bool mxct_rng_percent(struct mxct_rng *r, unsigned percent);

/* A 64-bit mixing function (the splitmix64 finaliser): every input bit changes about
 * half of the output bits, so any change in what a computation read shows up. */
uint64_t mxct_mix64(uint64_t x);

/* ---- Notes from other threads ------------------------------------------------------ *
 * Check's assertions must run on the test's own thread. Code running on engine workers
 * or helper threads records what went wrong with mxct_note(); the test asserts
 * mxct_assert_no_notes() at the end, which reports the count and the first note. */

void mxct_notes_reset(void);
void mxct_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int mxct_note_count(void);
#define mxct_assert_no_notes()                                                                 \
    ck_assert_msg(mxct_note_count() == 0, "%d problem(s) seen off the test thread; first: %s", \
                  mxct_note_count(), mxct_first_note())
const char *mxct_first_note(void);

/* ---- Engines ----------------------------------------------------------------------- */

#define MXCT_NUM_ENGINE_TYPES 3

/* Adds `test` to `tc` once per engine type: inside the test, `_i` is the
 * mxc_engine_type (MXC_ENGINE_NAIVE, MXC_ENGINE_POOLED, MXC_ENGINE_PERDEVICE). */
#define MXCT_ADD_ENGINE_TEST(tc, test) \
    tcase_add_loop_test((tc), (test), MXC_ENGINE_NAIVE, MXC_ENGINE_PERDEVICE + 1)

/* True for the engines that run operations on worker threads. */
bool mxct_engine_threaded(int type);

/* Creates an engine (asserting success) and resets the notes. */
mxc_engine *mxct_engine_new(int type, const mxc_engine_config *config);

/* Creates `n` variables (asserting success) into a new array the caller frees. */
mxc_var **mxct_vars_new(mxc_engine *engine, int n);

/* Asserts that wait_all succeeds, then destroys the engine. */
void mxct_engine_finish(mxc_engine *engine);

/* ---- Threads ----------------------------------------------------------------------- */

/* Runs fn(args + i * arg_size) on `n` threads and joins them. */
void mxct_run_threads(int n, void *(*fn)(void *), void *args, size_t arg_size);

/* ---- Allocator --------------------------------------------------------------------- *
 * A thread-safe counting allocator for mxc_set_allocator that can be told to fail. */

struct mxct_alloc_counts {
    atomic_long mallocs, reallocs, frees, failures;
    atomic_long live;       /* blocks handed out and not freed */
    atomic_long fail_after; /* < 0: never fail; else fail once this many succeeded */
    atomic_long succeeded;  /* successful malloc / realloc(NULL, n) calls */
    atomic_bool fail_once;  /* only one allocation fails, then none (mxct_alloc_fail_once) */
};

/* Installs the counting allocator with counters reset and no failure. */
void mxct_alloc_install(struct mxct_alloc_counts *counts);
/* Makes every allocation after the next `n` successful ones fail (n < 0: none). */
void mxct_alloc_fail_after(struct mxct_alloc_counts *counts, long n);
/* Makes only the allocation after the next `n` successful ones fail, and none after it
 * (a transient failure: the code's recovery path then allocates successfully). */
void mxct_alloc_fail_once(struct mxct_alloc_counts *counts, long n);
/* Restores the C library's allocator. */
void mxct_alloc_uninstall(void);

/* ---- Files and JSON ---------------------------------------------------------------- */

/* A new empty file's path under $TMPDIR (or /tmp); the caller unlinks and frees it. */
char *mxct_temp_file(const char *prefix);

/* A new empty directory's path under $TMPDIR (or /tmp); the caller removes and frees it. */
char *mxct_temp_dir(const char *prefix);

/* A new FIFO's path under $TMPDIR (or /tmp); the caller unlinks and frees it. */
char *mxct_temp_fifo(const char *prefix);

/* The file's contents, NUL-terminated (length in *len if not NULL), or NULL. Free it. */
char *mxct_read_file(const char *path, size_t *len);

/* ---- Child processes --------------------------------------------------------------- */

/* Runs argv[0] (looked up on PATH) with `argv` in a process group of its own, with the
 * environment variables `env` ("NAME=value" strings, NULL-terminated; NULL for none) set
 * and, under AddressSanitizer, leak detection off (OpenMPI leaks by design at
 * MPI_Finalize and unloads its components, so no suppression can name the leaks). Its
 * stdout and stderr go to *output (free it; printed as well, between "----" lines, with
 * `label`). Returns its exit status (128 + signal when killed), or -1 when it ran past
 * `limit_s` seconds and the group was killed; the seconds it took in *took if not NULL. */
int mxct_run(const char *label, const char *const *argv, const char *const *env, double limit_s,
             double *took, char **output);

/* True when `name` is an executable in a folder of $PATH. */
bool mxct_on_path(const char *name);

/* True when `text` is one JSON value (RFC 8259 syntax) surrounded by whitespace only. */
bool mxct_json_valid(const char *text);

/* A shape from its dimensions: SHAPE(2, 3) is (2, 3); an lvalue, so &SHAPE(2, 3) works. */
#define SHAPE(...) \
    ((mxc_shape){(int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}})

/* Asserts that `call` returns MXC_OK, showing the code and message otherwise. */
#define CK_OK(call)                                                                              \
    do {                                                                                         \
        int rc_ = (call);                                                                        \
        ck_assert_msg(rc_ == MXC_OK, "%s = %s: %s", #call, mxc_err_name(rc_), mxc_last_error()); \
    } while (0)

/* Asserts that `call` fails with `code` and leaves a message in mxc_last_error(). */
#define CK_ERR(code, call)                                                                  \
    do {                                                                                    \
        mxc_clear_error();                                                                  \
        int rc_ = (call);                                                                   \
        ck_assert_msg(rc_ == (code), "%s = %s (%s), expected %s", #call, mxc_err_name(rc_), \
                      mxc_last_error(), mxc_err_name(code));                                \
        ck_assert_msg(mxc_last_error()[0] != '\0', "%s: %s without a message", #call,       \
                      mxc_err_name(rc_));                                                   \
    } while (0)

/* Asserts that status `rc` is `code` and that mxc_last_error() holds every string of the
 * NULL-terminated `needles` (the values a useful message names), showing both otherwise. */
void mxct_expect_error(int rc, int code, const char *const *needles);
/* Asserts that shape `got` equals `want`, showing both and `what` otherwise. */
void mxct_expect_shape(const mxc_shape *got, const mxc_shape *want, const char *what);

/* mxct_expect_error(rc, code, {needle, ...}): CK_ERR_HAS(rc, MXC_EINVAL, "slice", "(2, 3)"). */
#define CK_ERR_HAS(rc, code, ...) \
    mxct_expect_error((rc), (code), (const char *const[]){__VA_ARGS__, NULL})

/* ---- Symbols ----------------------------------------------------------------------- */

/* A variable (asserting success). */
mxc_symbol *mxct_sym_var(const char *name);

/* op(in[0..n)) named `name` (NULL: automatic) with `np` string parameters, asserting
 * success; consumes the `n` input handles. */
mxc_symbol *mxct_sym_apply(const char *op, const char *name, int n, mxc_symbol **in, int np,
                           const char *const *keys, const char *const *vals);

/* Another handle on `s`'s output `index` (to use one output twice). */
mxc_symbol *mxct_sym_output(const mxc_symbol *s, int index);

#endif /* MXC_TEST_UTIL_H */

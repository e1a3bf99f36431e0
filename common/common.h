/*
 * common/common.h — internal helpers every module uses: error recording with a single
 * cleanup path, the allocator hook, logging, time. Not part of the API.
 */
#ifndef MXC_COMMON_H
#define MXC_COMMON_H

#include "mxc/base.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MXC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define MXC_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#define MXC_LIKELY(x)                __builtin_expect(!!(x), 1)
#define MXC_UNLIKELY(x)              __builtin_expect(!!(x), 0)
#else
#define MXC_PRINTF(fmt_idx, arg_idx)
#define MXC_LIKELY(x)   (x)
#define MXC_UNLIKELY(x) (x)
#endif

/* ---- Errors ------------------------------------------------------------------------ */

/* Records `code` and a printf-formatted message as the calling thread's last error and
 * returns `code`, so `return mxc__error(MXC_EINVAL, "...")` reads naturally. The
 * arguments may point into the last error itself (mxc_last_error()). */
int mxc__error(int code, const char *fmt, ...) MXC_PRINTF(2, 3);

/* Records a message that was produced elsewhere (e.g. on another thread). */
int mxc__error_set(int code, const char *message);

/* Re-records the calling thread's last error, which an inner step recorded, as
 * "<prefix>: <message>" (the prefix printf-formatted) unless the message already starts
 * with "<prefix>:". Public functions call it once on their way out with their own name,
 * so a message names the call the user made once however deep the failure was; inner
 * steps use it to add context (a node's name). A public call named at the head of the
 * inner message ("mxc_nd_copy_to: ", a public function used inside another) is dropped,
 * and an inner step that recorded nothing gives mxc_strerror(code). Returns `code`. */
int mxc__error_wrap(int code, const char *fmt, ...) MXC_PRINTF(2, 3);

/* `rc` as public function `fn` returns it: a failure (negative) gets `fn` named in front
 * of its message (mxc__error_wrap), MXC_OK and positive results pass unchanged. */
static inline int mxc__in_call(const char *fn, int rc) {
    return rc >= 0 ? rc : mxc__error_wrap(rc, "%s", fn);
}

/* Functions with cleanup declare `int rc = MXC_OK;` and end with a `fail:` label.
 * MXC_CHECK records the message and jumps there when `cond` is false. */
#define MXC_CHECK(cond, code, ...)                \
    do {                                          \
        if (MXC_UNLIKELY(!(cond))) {              \
            rc = mxc__error((code), __VA_ARGS__); \
            goto fail;                            \
        }                                         \
    } while (0)

/* Evaluates an int-returning call and jumps to `fail` with its status if it failed
 * (the callee already recorded the message). */
#define MXC_TRY(call)                   \
    do {                                \
        rc = (call);                    \
        if (MXC_UNLIKELY(rc != MXC_OK)) \
            goto fail;                  \
    } while (0)

/* For proven internal invariants only, never for anything a caller controls. */
void mxc__assert_fail(const char *expr, const char *file, int line);
#define MXC_ASSERT(cond) ((cond) ? (void)0 : mxc__assert_fail(#cond, __FILE__, __LINE__))

/* ---- Memory ------------------------------------------------------------------------ */

/* Go through the allocator hook; return NULL on failure without recording an error. */
void *mxc__malloc(size_t size);
void *mxc__calloc(size_t count, size_t size);
void *mxc__realloc(void *ptr, size_t size);
void mxc__free(void *ptr);
char *mxc__strdup(const char *s);

/* Whether string `s` ends with `suffix` (parameter-name conventions: "_weight", "label"). */
static inline bool mxc__ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Aligned allocation through the hook (alignment a power of two ≤ 4096). */
void *mxc__aligned_alloc(size_t alignment, size_t size);
void mxc__aligned_free(void *ptr);

/* ---- Shapes ------------------------------------------------------------------------ */

/* Formats a shape as "(2, 3)" into buf (returns buf). */
const char *mxc__shape_str(const mxc_shape *s, char *buf, size_t size);

/* Formats a context as "cpu(0)", "gpu(1)" or "cpu_pinned(0)" into buf (returns buf). */
const char *mxc__ctx_name(mxc_context ctx, char *buf, size_t len);

/* Whether memory on `a` and on `b` is reachable by one kernel: the same GPU, or host
 * memory on both sides (plain and pinned alike). */
static inline bool mxc__ctx_same_device(mxc_context a, mxc_context b) {
    if (a.dev_type == MXC_GPU || b.dev_type == MXC_GPU)
        return a.dev_type == b.dev_type && a.dev_id == b.dev_id;
    return true;
}

/* ---- Logging ----------------------------------------------------------------------- */

void mxc__log(int level, const char *fmt, ...) MXC_PRINTF(2, 3);
bool mxc__log_enabled(int level);

/* ---- Files ------------------------------------------------------------------------- */

/* Opens `path` for reading when it is a regular file: *fd (the caller closes it) and its
 * *size, the one size a loader takes from outside before checking the file's own counts
 * against it. A directory (whose size says nothing: ftell gave 2^63 - 1), a FIFO (an open
 * would block until a writer came), /dev/zero (never ends) or another non-regular file is
 * MXC_EIO naming `path` and what it is, before anything is read. Messages start with `fn`.
 * Returns MXC_OK, MXC_EIO, MXC_ENOMEM (a size no buffer can hold). */
int mxc__file_open_regular(const char *fn, const char *path, int *fd, size_t *size);

/* Reads the whole regular file `path` (mxc__file_open_regular) into a new buffer (freed
 * with mxc__free) holding its *len bytes and a NUL after them, so text parsers can use it
 * as a string. Returns as mxc__file_open_regular, or MXC_EIO when a read fails. */
int mxc__file_read(const char *fn, const char *path, char **data, size_t *len);

/* Replaces `path` crash-safely: `fill(f, arg)` writes the temporary `<path>.tmp.<pid>` (same
 * folder), which is flushed, fsynced, closed and renamed over `path`; then the folder is
 * fsynced so the rename survives a crash too. On failure the temporary is removed and
 * `path` is left as it was (except when only the folder sync fails: the new file is then
 * in place). Messages start with `fn`. Returns MXC_OK, MXC_ENOMEM, MXC_EIO (with the path
 * and the system's reason) or fill's status. One call per path at a time per process. */
int mxc__file_replace(const char *fn, const char *path, int (*fill)(FILE *f, void *arg), void *arg);

/* True when `name` (a file name) is a temporary `<target>.tmp.<pid>` of mxc__file_replace
 * whose process no longer exists (never this process's); *target_len is then the length of
 * `<target>`. Such a file is a leftover of a save that was killed midway. */
bool mxc__file_stale_temp(const char *name, size_t *target_len);

/* ---- Time and environment ---------------------------------------------------------- */

/* Monotonic clock in nanoseconds. */
uint64_t mxc__now_ns(void);

/* CPU time of the calling thread in nanoseconds: the time it ran, not the time it waited
 * for a core (a system call, unlike mxc__now_ns). */
uint64_t mxc__thread_cpu_ns(void);

/* Reads a non-negative integer from the environment; `fallback` when unset. Invalid
 * values are logged and ignored. */
long mxc__env_long(const char *name, long fallback);

/* Number of online CPUs (at least 1). */
int mxc__cpu_count(void);

#endif /* MXC_COMMON_H */

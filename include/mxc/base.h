/*
 * mxc/base.h — what every layer of mxc shares: version, status codes and the
 * thread-local last error, device contexts, dtypes and shapes, and the
 * allocator and log hooks.
 *
 * Conventions used by every public header:
 *  - Every fallible function returns an int: MXC_OK (0) or a negative MXC_E* code.
 *    On failure, mxc_last_error() describes what went wrong on the calling thread.
 *  - Constructors write the new handle through their last argument, which is set to
 *    NULL on failure. Destructors accept NULL.
 *  - A handle that is not a live handle of the expected type (freed, of another type, a
 *    copy or an address inside one) makes any function return MXC_EMISUSE, its message
 *    naming the function and saying whether the handle is stale (freed) or no handle of
 *    the type; the library never reads freed memory to find out. Functions without a
 *    status return their documented "bad handle" value and record the same error;
 *    destructors (void) log it at MXC_LOG_ERROR and free nothing, so a double free is
 *    harmless. A freed handle's memory is reused only after at least 4096 more handles
 *    of its type were freed, and then only for a handle of the same type (docs/c-api.md,
 *    "Handle lifetimes").
 *  - NULL arguments: a NULL handle (an array, symbol, executor, engine, iterator, ... the
 *    function is to use) is MXC_EMISUSE, as a freed one is; a NULL for any other pointer
 *    the function needs (an out parameter, a shape, a list, a string, a config) is
 *    MXC_EINVAL. Functions that return a value instead of a status return their "bad
 *    handle" value (-1, NULL, 0, NAN) as their comment says. Where NULL means something
 *    (none, the default, not wanted) or a function departs from this rule, its comment
 *    says so. No function dereferences a NULL it was given; tests/check_null_args.c calls
 *    every function with NULL in each pointer argument and holds it to this.
 *  - Messages start with the name of the public function that was called.
 */
#ifndef MXC_BASE_H
#define MXC_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MXC_BUILDING_LIBRARY) && defined(__GNUC__)
#define MXC_API __attribute__((visibility("default")))
#else
#define MXC_API
#endif

#define MXC_VERSION_MAJOR 0
#define MXC_VERSION_MINOR 1
#define MXC_VERSION_PATCH 0
/** The version as one integer: major * 10000 + minor * 100 + patch. */
#define MXC_VERSION (MXC_VERSION_MAJOR * 10000 + MXC_VERSION_MINOR * 100 + MXC_VERSION_PATCH)

/** The library's version string ("0.1.0"); may differ from MXC_VERSION when a program
 * runs against a newer shared library. Thread-safe. */
MXC_API const char *mxc_version(void);

/* ---- Status codes ------------------------------------------------------------------ */

/* X(name, value, description). The one table of status codes; values never change and
 * new codes are added at the end. */
#define MXC_STATUS_MAP(X)                                                  \
    X(OK, 0, "success")                                                    \
    X(EINVAL, -1, "invalid argument")                                      \
    X(ENOMEM, -2, "out of memory")                                         \
    X(EMISUSE, -3, "API misuse (bad handle, wrong thread or wrong order)") \
    X(ESHAPE, -4, "shape mismatch")                                        \
    X(ENOTSUP, -5, "not supported")                                        \
    X(ENODEV, -6, "no such device")                                        \
    X(EDEVICE, -7, "device error")                                         \
    X(EIO, -8, "input/output error")                                       \
    X(EFORMAT, -9, "malformed data")                                       \
    X(EINTERNAL, -10, "internal error")                                    \
    X(ECANCELED, -11, "operation canceled")                                \
    X(ETYPE, -12, "data type mismatch")

typedef enum mxc_status {
#define MXC__STATUS_ENUM(name, value, desc) MXC_##name = (value),
    MXC_STATUS_MAP(MXC__STATUS_ENUM)
#undef MXC__STATUS_ENUM
} mxc_status;

/** A static description of a status code ("out of memory"); "unknown status code" for
 * values not in the table. Thread-safe. */
MXC_API const char *mxc_strerror(int code);

/** The code's name as a static string ("MXC_ENOMEM"); "MXC_UNKNOWN" for values not in
 * the table. Thread-safe. */
MXC_API const char *mxc_err_name(int code);

/** The message of the last failure on the calling thread (the function, the arguments
 * and the values involved), or "" if none. The string is owned by the library and stays
 * valid until the next mxc call on this thread. */
MXC_API const char *mxc_last_error(void);

/** The status code of the last failure recorded on the calling thread, MXC_OK if none. */
MXC_API int mxc_last_error_code(void);

/** Forgets the calling thread's last error. */
MXC_API void mxc_clear_error(void);

/* ---- Contexts ---------------------------------------------------------------------- */

/** Device types; values match MXNet's dev_type (FORMATS.md). */
typedef enum mxc_device_type {
    MXC_CPU = 1,
    MXC_GPU = 2,
    MXC_CPU_PINNED = 3,
} mxc_device_type;

/** Where data lives and where an operation runs: a device type and an id (0-based). */
typedef struct mxc_context {
    int32_t dev_type; /* an mxc_device_type */
    int32_t dev_id;
} mxc_context;

/** The CPU context. */
static inline mxc_context mxc_cpu(void) {
    mxc_context c = {MXC_CPU, 0};
    return c;
}

/** The context of GPU `id`. */
static inline mxc_context mxc_gpu(int32_t id) {
    mxc_context c = {MXC_GPU, id};
    return c;
}

/** Number of CUDA devices usable by this build: 0 without USE_CUDA or without a GPU. */
MXC_API int mxc_gpu_count(void);

/* ---- Data types and shapes --------------------------------------------------------- */

/** Element types; values are MXNet's type flags (FORMATS.md). */
typedef enum mxc_dtype {
    MXC_FLOAT32 = 0,
    MXC_FLOAT64 = 1,
    MXC_FLOAT16 = 2,
    MXC_UINT8 = 3,
    MXC_INT32 = 4,
    MXC_INT8 = 5,
    MXC_INT64 = 6,
    MXC_BOOL = 7,
    MXC_INT16 = 8,
    MXC_UINT16 = 9,
    MXC_UINT32 = 10,
    MXC_UINT64 = 11,
    MXC_BFLOAT16 = 12,
} mxc_dtype;

/** Size in bytes of one element of `dtype`, 0 for a value that is not an mxc_dtype. */
MXC_API size_t mxc_dtype_size(int dtype);

/** The dtype's name ("float32"), or NULL for a value that is not an mxc_dtype. */
MXC_API const char *mxc_dtype_name(int dtype);

/** Most dimensions an array may have. */
#define MXC_MAX_NDIM 8

/** A shape: ndim dimensions, each >= 0. ndim 0 is the empty (unknown) shape. */
typedef struct mxc_shape {
    int32_t ndim;
    int64_t dims[MXC_MAX_NDIM];
} mxc_shape;

/** Makes a shape from `ndim` dimensions (ndim ≤ MXC_MAX_NDIM; extra are ignored; a
 * negative ndim is 0). `dims` NULL gives the empty shape (ndim 0). Thread-safe. */
MXC_API mxc_shape mxc_shape_make(int ndim, const int64_t *dims);

/** Number of elements of `shape` (0 for ndim 0, the empty shape), or -1 if `shape` is
 * NULL, its ndim is outside [0, MXC_MAX_NDIM], a dimension is negative or the product of
 * the non-zero dimensions overflows int64 (a shape with a 0 dimension is valid only when
 * the others multiply without overflow, so that no product of some of a valid shape's
 * dimensions overflows). Thread-safe. */
MXC_API int64_t mxc_shape_size(const mxc_shape *shape);

/* ---- Hooks ------------------------------------------------------------------------- */

/** An allocator: malloc/realloc/free with an opaque user pointer. All host memory the
 * library takes goes through it, so tests can count allocations and inject failures. */
typedef struct mxc_allocator {
    void *(*malloc_fn)(void *user, size_t size);
    void *(*realloc_fn)(void *user, void *ptr, size_t size);
    void (*free_fn)(void *user, void *ptr);
    void *user;
} mxc_allocator;

/** Replaces the allocator; NULL restores the C library's. Call it before any other mxc
 * function or after every handle has been freed: memory must be freed by the allocator
 * that gave it. Before switching, the memory of freed handles (kept while handles of
 * their type may still be used, see above) goes back to the allocator that gave it, so a
 * counting allocator sees every block return. Not thread-safe with respect to any other
 * mxc call. */
MXC_API void mxc_set_allocator(const mxc_allocator *allocator);

/** Log levels, most verbose first. */
typedef enum mxc_log_level {
    MXC_LOG_DEBUG = 0,
    MXC_LOG_INFO = 1,
    MXC_LOG_WARN = 2,
    MXC_LOG_ERROR = 3,
} mxc_log_level;

/** A log sink: receives one formatted line (no trailing newline). */
typedef void (*mxc_log_fn)(void *user, int level, const char *message);

/** Sends log lines at `min_level` and above to `fn` (NULL: stderr, the default), which
 * receives `user` (may be NULL) with each line. The default minimum level is
 * MXC_LOG_WARN, or the value of MXC_LOG_LEVEL (debug, info, warn, error). Thread-safe
 * with respect to logging, not to another set_log call. */
MXC_API void mxc_set_log(mxc_log_fn fn, void *user, int min_level);

#ifdef __cplusplus
}
#endif

#endif /* MXC_BASE_H */

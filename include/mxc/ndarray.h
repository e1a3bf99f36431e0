/*
 * mxc/ndarray.h — n-dimensional arrays computed on asynchronously by the engine.
 *
 * An array is a view (shape, dtype, offset) on a reference-counted chunk of memory that
 * owns one engine variable. Every operation on arrays is pushed to the process's default
 * engine (mxc_engine_get_default) and returns at once: reads of its inputs and writes of
 * its outputs are ordered by the engine. mxc_nd_wait_to_read, mxc_nd_sync_copy_to_cpu and
 * friends are where a program waits. A failure inside an operation (out of memory, a
 * device error) marks the arrays it writes: every wait on them reports it, with its
 * message, and operations reading them fail the same way, until the array is freed or
 * overwritten whole (a copy into it, a fill, an operator's output; not a write through a
 * view of part of it). Waiting does not clear a failure.
 *
 * Views made by reshape, slice and at share their chunk (and so their variable): writes
 * through one are seen by the others in push order. Freeing an array while operations on
 * it are pending is safe: its memory returns to the pool after the last of them.
 *
 * Output convention of the arithmetic functions: `out` points to an array handle. If
 * `*out` is NULL a new array of the result's shape is created and written to `*out` (the
 * caller frees it); otherwise `*out` must already have the result's shape and dtype and
 * is overwritten — it may be one of the inputs, which makes the operation in place.
 * On failure a created output is freed and `*out` is left as it was.
 *
 * Arithmetic is defined on float32 arrays; other dtypes can be created, copied, saved and
 * loaded, and arithmetic on them returns MXC_ENOTSUP.
 *
 * Every function taking an array returns MXC_EMISUSE for a handle that is NULL, freed
 * (stale) or not an array, naming the function and the argument (base.h).
 *
 * Autograd (mxc/autograd.h): every function that writes an array (arithmetic outputs,
 * fills, copies, random fills) returns MXC_EINVAL, writing nothing, when that array's
 * memory is kept by a recorded operation for its backward, until a backward without
 * retain_graph (or freeing the recorded results) lets it go.
 *
 * Thread-safety: functions may be called from any thread; operations pushed from
 * several threads on the same arrays are ordered as the engine orders pushes.
 */
#ifndef MXC_NDARRAY_H
#define MXC_NDARRAY_H

#include "mxc/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxc_ndarray mxc_ndarray;

/* ---- Creation and views ------------------------------------------------------------ */

/** Creates an array of `shape` and `dtype` on `ctx` with undefined contents. With
 * `delay_alloc` non-zero its memory is taken when the first operation that writes it
 * runs; otherwise now. Returns MXC_OK, MXC_EINVAL (NULL shape/out, bad dtype, negative
 * dimension, ndim out of range), MXC_ENODEV (no such device), MXC_ENOMEM. */
MXC_API int mxc_nd_create(const mxc_shape *shape, int dtype, mxc_context ctx, int delay_alloc,
                          mxc_ndarray **out);

/** Creates an array filled with `value` (converted to `dtype`; the fill is an engine
 * operation). Returns as mxc_nd_create. */
MXC_API int mxc_nd_full(const mxc_shape *shape, int dtype, mxc_context ctx, double value,
                        mxc_ndarray **out);

/** Sets every element of `array` (a view: only its elements) to `value`, converted to its
 * dtype, as an engine operation. Returns MXC_OK, MXC_EMISUSE (bad handle), MXC_ENOMEM. */
MXC_API int mxc_nd_fill(mxc_ndarray *array, double value);

/** mxc_nd_full with 0 and 1. */
MXC_API int mxc_nd_zeros(const mxc_shape *shape, int dtype, mxc_context ctx, mxc_ndarray **out);
MXC_API int mxc_nd_ones(const mxc_shape *shape, int dtype, mxc_context ctx, mxc_ndarray **out);

/** Releases the handle. The memory is recycled after every operation already pushed on
 * the chunk and once no other view holds it. NULL is ignored; a freed (stale) or foreign
 * handle, e.g. a second free, is logged at MXC_LOG_ERROR and frees nothing (base.h). */
MXC_API void mxc_nd_free(mxc_ndarray *array);

/** A view of `array` with a new shape of the same number of elements. While the thread
 * records for autograd (mxc/autograd.h) and `array` is on the tape, the view is recorded
 * as the Reshape operator, so gradients flow through it. Returns MXC_OK, MXC_EMISUSE (bad
 * handle), MXC_EINVAL, MXC_ESHAPE (element counts differ), MXC_ENOMEM. */
MXC_API int mxc_nd_reshape(const mxc_ndarray *array, const mxc_shape *shape, mxc_ndarray **out);

/** A view of rows [begin, end) along the first axis. Returns MXC_OK, MXC_EMISUSE,
 * MXC_EINVAL (range outside [0, dims[0]], begin > end, ndim 0, or `array` is on the
 * autograd tape while the thread records: slices are not recorded), MXC_ENOMEM. */
MXC_API int mxc_nd_slice(const mxc_ndarray *array, int64_t begin, int64_t end, mxc_ndarray **out);

/** A view of row `index` along the first axis, with that axis removed (of a 1-D array:
 * a (1) array holding that element, as in MXNet). Returns as mxc_nd_slice. */
MXC_API int mxc_nd_at(const mxc_ndarray *array, int64_t index, mxc_ndarray **out);

/* ---- Properties -------------------------------------------------------------------- */

/** Writes the shape. Returns MXC_OK, MXC_EMISUSE, MXC_EINVAL. Never waits. */
MXC_API int mxc_nd_get_shape(const mxc_ndarray *array, mxc_shape *out);

/** The dtype, or -1 for a bad handle (NULL, freed, not an array; MXC_EMISUSE is recorded
 * as the last error). Never waits. */
MXC_API int mxc_nd_dtype(const mxc_ndarray *array);

/** Writes the context. Returns MXC_OK, MXC_EMISUSE, MXC_EINVAL. Never waits. */
MXC_API int mxc_nd_get_context(const mxc_ndarray *array, mxc_context *out);

/** Number of elements, or -1 for a bad handle (as mxc_nd_dtype). Never waits. */
MXC_API int64_t mxc_nd_size(const mxc_ndarray *array);

/* ---- Synchronisation and copies ---------------------------------------------------- */

/** Waits until every pending write of the array's chunk is done (reads may still run).
 * Returns MXC_OK, MXC_EMISUSE (bad handle, or called inside an engine operation), or the
 * failure of an operation that wrote it. */
MXC_API int mxc_nd_wait_to_read(const mxc_ndarray *array);

/** Waits until every pending read and write of the array's chunk is done. Returns as
 * mxc_nd_wait_to_read. */
MXC_API int mxc_nd_wait_to_write(const mxc_ndarray *array);

/** Waits for every array operation pushed before the call (later ones, from other
 * threads, do not extend the wait). Returns MXC_OK or the first failure among them that
 * still stands (see mxc_engine_wait_all), without clearing it. */
MXC_API int mxc_nd_wait_all(void);

/** Copies `nbytes` from host memory into the array (nbytes must be its size in bytes)
 * and waits until done; `data` may be reused at return. Returns MXC_OK, MXC_EMISUSE,
 * MXC_EINVAL (NULL data), MXC_ESHAPE (size differs), or a failure of the copy. */
MXC_API int mxc_nd_sync_copy_from_cpu(mxc_ndarray *array, const void *data, size_t nbytes);

/** Waits for the array's pending writes and copies its contents to host memory.
 * Returns as mxc_nd_sync_copy_from_cpu. */
MXC_API int mxc_nd_sync_copy_to_cpu(const mxc_ndarray *array, void *data, size_t nbytes);

/** Pushes a copy of `src` into `dst` (same shape and dtype, any contexts; copies between
 * devices run on the copy workers). Returns MXC_OK, MXC_EMISUSE, MXC_ESHAPE, MXC_ETYPE,
 * MXC_ENOMEM. */
MXC_API int mxc_nd_copy_to(const mxc_ndarray *src, mxc_ndarray *dst);

/* ---- Arithmetic (float32) ---------------------------------------------------------- *
 * Element-wise operations need equal shapes. Each pushes one engine operation that
 * reads the inputs' variables and writes the output's. Returns MXC_OK, MXC_EMISUSE,
 * MXC_EINVAL (NULL out), MXC_ESHAPE, MXC_ETYPE (dtypes differ), MXC_ENOTSUP (not float32),
 * MXC_ENOMEM. */

MXC_API int mxc_nd_add(const mxc_ndarray *a, const mxc_ndarray *b, mxc_ndarray **out);
MXC_API int mxc_nd_sub(const mxc_ndarray *a, const mxc_ndarray *b, mxc_ndarray **out);
MXC_API int mxc_nd_mul(const mxc_ndarray *a, const mxc_ndarray *b, mxc_ndarray **out);
MXC_API int mxc_nd_div(const mxc_ndarray *a, const mxc_ndarray *b, mxc_ndarray **out);

/** out = a (op) scalar. */
MXC_API int mxc_nd_add_scalar(const mxc_ndarray *a, float scalar, mxc_ndarray **out);
MXC_API int mxc_nd_sub_scalar(const mxc_ndarray *a, float scalar, mxc_ndarray **out);
MXC_API int mxc_nd_mul_scalar(const mxc_ndarray *a, float scalar, mxc_ndarray **out);
MXC_API int mxc_nd_div_scalar(const mxc_ndarray *a, float scalar, mxc_ndarray **out);

/** Matrix product of 2-D arrays: (m, k) x (k, n) -> (m, n), through BLAS sgemm. */
MXC_API int mxc_nd_dot(const mxc_ndarray *a, const mxc_ndarray *b, mxc_ndarray **out);

/** Sum of all elements, as an array of shape (1). */
MXC_API int mxc_nd_sum(const mxc_ndarray *a, mxc_ndarray **out);

/* ---- Random numbers ---------------------------------------------------------------- *
 * Draws come from the device's counter-based generator (Philox-4x32-10), an engine
 * resource: a seed gives the same stream on every run. */

/** Fills `array` with uniform draws in [low, high). Returns MXC_OK, MXC_EMISUSE,
 * MXC_EINVAL (low > high), MXC_ENOTSUP (not float32), MXC_ENOMEM. */
MXC_API int mxc_nd_random_uniform(mxc_ndarray *array, float low, float high);

/** Fills `array` with normal draws of mean `mean` and standard deviation `std` (≥ 0). */
MXC_API int mxc_nd_random_normal(mxc_ndarray *array, float mean, float std);

/** Reseeds every random generator (pushed after the operations already using them).
 * Returns MXC_OK or a failure creating the generators. */
MXC_API int mxc_random_seed(uint64_t seed);

/* ---- Files (MXNet's NDArray list format) ------------------------------------------- */

/** Saves `count` arrays to `path` in MXNet's format (version 2), readable by
 * mx.nd.load. `names` is NULL for an unnamed list, else `count` names. Waits for the
 * arrays' pending writes; writes to a temporary file renamed over `path`, so a failure
 * never leaves a partial file. Returns MXC_OK, MXC_EMISUSE, MXC_EINVAL, MXC_EIO, MXC_ENOMEM,
 * or a failure of an operation that wrote an array. */
MXC_API int mxc_nd_save(const char *path, size_t count, mxc_ndarray *const *arrays,
                        const char *const *names);

/** Loads the arrays of an MXNet NDArray list file (versions 1, 2, 3 and legacy) onto
 * `ctx`. On success `*arrays` holds `*count` new arrays and `*names` their names (NULL
 * for an unnamed list); free both with mxc_nd_list_free. `path` must name a regular
 * file: a directory, FIFO or device is MXC_EIO before anything is read. Every count and
 * size in the file is checked against the bytes it really has before anything is
 * allocated for it. NULL: any pointer argument NULL is MXC_EINVAL. Returns MXC_OK,
 * MXC_EINVAL, MXC_EIO (cannot read, not a regular file; the message names the path),
 * MXC_EFORMAT (malformed, with the byte offset), MXC_ENOTSUP (sparse storage, unknown
 * dtype), MXC_ENODEV, MXC_ENOMEM. */
MXC_API int mxc_nd_load(const char *path, mxc_context ctx, size_t *count, mxc_ndarray ***arrays,
                        char ***names);

/** Frees what mxc_nd_load returned (arrays and names may be NULL). */
MXC_API void mxc_nd_list_free(size_t count, mxc_ndarray **arrays, char **names);

#ifdef __cplusplus
}
#endif

#endif /* MXC_NDARRAY_H */

/*
 * ndarray/ndarray_impl.h — arrays, chunks, and the one helper that pushes a kernel on
 * arrays to the engine. Every array operation (arithmetic, copies, fills, and later the
 * registered operators) goes through mxc__nd_push, so the engine variables an operation
 * reads and writes are declared in one place.
 */
#ifndef MXC_NDARRAY_IMPL_H
#define MXC_NDARRAY_IMPL_H

#include "mxc/engine.h"
#include "mxc/ndarray.h"
#include "mxc/storage.h"

#include "common/common.h"
#include "operator/op.h"
#include "resource/resource.h"

#include <stdatomic.h>

#define ND_MAGIC 0x4e444131u /* "NDA1" */
#define ND_DEAD  0x4e444146u /* "NDAF": freed (common/handle.h) */

/* Memory plus the engine variable that orders every access to it. */
struct nd_chunk {
    atomic_int refs; /* views holding it; pending operations need no reference:
                                the delete pushed on `var` runs after them */
    mxc_engine *engine;
    mxc_var *var;
    mxc_storage_block block; /* ptr NULL until allocated (delay-alloc) */
    size_t nbytes;
    mxc_context ctx;
    atomic_int ag_saved; /* handles the autograd tape keeps for a backward: while any is
                            held, no operation may write the chunk (ndarray/autograd.c) */
};

struct mxc_ndarray {
    _Atomic uint32_t magic;
    struct nd_chunk *chunk;
    mxc_shape shape;
    int dtype;
    size_t offset;           /* bytes from the chunk's start */
    struct mxc__ag_node *ag; /* the tape node that made it (a reference), or NULL */
    int ag_index;            /* which output of `ag` it is */
};

/* Everything a kernel receives. */
struct mxc__nd_call {
    const mxc_run_ctx *rctx;
    const void *params;
    const struct mxc__tensor *inputs;
    int num_inputs;
    const struct mxc__tensor *outputs;
    int num_outputs;
    struct mxc__resource *const *resources;
    int num_resources;
};

typedef int (*mxc__nd_kernel)(const struct mxc__nd_call *call);

/* The outcome of one run, with the message recorded on the worker. */
struct mxc__nd_status {
    int code;
    char message[256];
};

/* How an operation is pushed. */
struct mxc__nd_op {
    const char *name; /* a literal: the profiler and error messages show it */
    mxc__nd_kernel kernel;
    const void *params; /* copied (params_size bytes) */
    size_t params_size;
    int prop;             /* an mxc_fn_property; copies between devices use the copy ones */
    mxc_context run_ctx;  /* where the kernel runs */
    const int *resources; /* mxc__resource kinds to request on run_ctx */
    int num_resources;
    int num_overwritten; /* the first outputs the kernel writes wholly, whatever they held:
                            where such an output covers its chunk, the push says so
                            (desc.overwrite), so it clears a failure the chunk carries */
    struct mxc__nd_status *status; /* if set, receives the run's outcome (for callers that
                                      wait on an operation that writes no array) */
};

/* Room for any operator's parameter struct (check_operator's registry test proves every
 * table's fits, which makes the MXC_ASSERTs on it unreachable). */
#define MXC__ND_MAX_PARAM_BYTES 1024

/* Most arrays one pushed operation reads, and most it writes: an operator's inputs plus
 * auxiliary states, or its outputs plus auxiliary states (mxc__nd_invoke). */
#define MXC__ND_MAX_OPERANDS (2 * MXC__MAX_OP_ARGS)

/* Pushes `op` reading `inputs` and writing `outputs` (whose memory is allocated when it
 * runs, if still delayed). The arrays may be freed right after: their chunks outlive the
 * operation because a chunk's delete is ordered after it on the chunk's variable.
 * At least one array, at most MXC__ND_MAX_OPERANDS of each kind and of resources, else
 * MXC_EINTERNAL (a library caller's bug, never reached from user input). */
int mxc__nd_push(const struct mxc__nd_op *op, const mxc_ndarray *const *inputs, int num_inputs,
                 mxc_ndarray *const *outputs, int num_outputs);

/* Runs operator `def` with already parsed `params` on arrays: mxc_imperative_invoke
 * without the string parsing, for library code that calls operators. */
int mxc__nd_invoke(const struct mxc__op_def *def, const void *params, int num_inputs,
                   mxc_ndarray *const *inputs, int num_outputs, mxc_ndarray **outputs,
                   bool is_train);

/* Copies `nbytes` between memory on any two contexts; GPU copies are issued on `stream`
 * (the calling worker's) and complete before the worker retires the operation. */
int mxc__copy_bytes(void *dst, mxc_context dst_ctx, const void *src, mxc_context src_ctx,
                    size_t nbytes, void *stream);

/* mxc_nd_load on a file image already in memory (`len` bytes at `buf`, which may be freed
 * at return): the one loader behind mxc_nd_load, also driven directly by the fuzz target
 * tests/fuzz/nd_list.c. `source` names the image in error messages (the path). Returns as
 * mxc_nd_load, which checks the pointers first. */
int mxc__nd_load_memory(const void *buf, size_t len, const char *source, mxc_context ctx,
                        size_t *count, mxc_ndarray ***arrays, char ***names);

/* mxc_nd_create for public function `fn`, whose name its messages carry. */
int mxc__nd_create(const char *fn, const mxc_shape *shape, int dtype, mxc_context ctx,
                   bool delay_alloc, mxc_ndarray **out);

/* Checks an array handle (NULL, stale, not an array); records MXC_EMISUSE naming `fn`
 * and `what`. */
int mxc__nd_check(const mxc_ndarray *a, const char *fn, const char *what);

/* ---- For the executor, which manages memory itself --------------------------------- */

/* A new array of `shape` and `dtype` at byte `offset` of `base`'s memory, sharing its
 * chunk (and so its engine variable): the executor's entries inside a planned block.
 * MXC_EINTERNAL if it does not fit. */
int mxc__nd_view(const mxc_ndarray *base, size_t offset, const mxc_shape *shape, int dtype,
                 mxc_ndarray **out);

/* The engine variable that orders every access to `a`'s memory. */
mxc_var *mxc__nd_var(const mxc_ndarray *a);

/* What a kernel sees of `a`, inside an operation that declared `a`'s variable. Delayed
 * memory is taken now; reading (`written` false) memory nothing wrote is MXC_EINVAL. An
 * array without elements gets a valid, never-touched data pointer, never NULL. */
int mxc__nd_tensor(const mxc_ndarray *a, bool written, struct mxc__tensor *out);

/* Gives `a`'s memory back to the storage pool; the next operation that writes the chunk
 * takes memory again (as for a delay-alloc array). Only inside an operation that declared
 * the chunk's variable mutable. */
void mxc__nd_release_memory(const mxc_ndarray *a);

/* Size of the array's data in bytes. */
size_t mxc__nd_nbytes(const mxc_ndarray *a);

#ifdef MXC_USE_CUDA
/* Queues on CUDA stream `stream` the fill of n elements of `size` bytes (1, 2, 4 or 8) at
 * GPU memory `data`, each the low bytes of `bits` (ndarray/fill_gpu.cu). Returns MXC_OK or
 * MXC_EDEVICE. */
int mxc__fill_gpu(void *data, int64_t n, int size, uint64_t bits, void *stream);
#endif

#endif /* MXC_NDARRAY_IMPL_H */

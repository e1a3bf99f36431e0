/*
 * mxc/kvstore.h — a key-value store that keeps one copy of each parameter and sums the
 * gradients pushed for it: from several arrays in one process (one per device or
 * executor) and, for a distributed store, from every process of an MPI job.
 *
 * Types (mxc_kvstore_create):
 *   "local"      sums on the CPU; the store's copies live in host memory.
 *   "device"     sums on the device of the first value pushed for a key (a GPU when the
 *                values are GPU arrays), where the store's copy lives.
 *   "dist_sync"  as "local" in each process, then summed across all processes with MPI
 *                (a build with USE_MPI=1, started by mpirun): after every push every
 *                process holds the same sum, bit for bit, and with an updater the same
 *                weights. Keys and shapes must agree across processes (checked by init).
 *
 * Every push and pull is pushed to the engine and returns at once: it reads the values'
 * variables and writes the store's copy, and pulls write the outputs' variables, so a
 * pull after a push sees the push's result and the caller waits on the output arrays as
 * on any array. `priority` orders operations that are ready at the same time (higher
 * first): push a late layer's gradient with a higher priority than an early one so that
 * its communication overlaps the rest of the backward pass.
 *
 * Without an updater, a push replaces the store's copy by the sum of the values pushed.
 * With one (mxc_kvstore_set_updater, or mxc_kvstore_set_optimizer in mxc/model.h), a push
 * calls it with the sum and the store's copy, and the updater changes the copy in place
 * (an optimizer step); a pull then returns the updated weights, the same on every device
 * and, for dist_sync, every process.
 *
 * Thread-safety: one store is used from one thread at a time.
 */
#ifndef MXC_KVSTORE_H
#define MXC_KVSTORE_H

#include "mxc/base.h"
#include "mxc/ndarray.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxc_kvstore mxc_kvstore;

/** Creates a store of `type` ("local", "device" or "dist_sync"). A dist_sync store
 * initialises MPI (once per process) and is a collective call: every process of the job
 * must create one. Returns MXC_OK, MXC_EINVAL (unknown type, naming the valid ones),
 * MXC_ENOTSUP (dist_sync in a build without MPI: the message says to build with
 * USE_MPI=1), MXC_EDEVICE (MPI failed to start, e.g. not run by mpirun), MXC_ENOMEM. */
MXC_API int mxc_kvstore_create(const char *type, mxc_kvstore **out);

/** Frees the store after its pending operations (NULL is fine). A dist_sync store's MPI
 * stays initialised until the process exits. */
MXC_API void mxc_kvstore_free(mxc_kvstore *kv);

/** The store's type as given to create ("local", ...); NULL for a bad handle. */
MXC_API const char *mxc_kvstore_type(const mxc_kvstore *kv);

/** Initialises `num` keys with copies of `values` (float32; the store copies them, the
 * arrays stay the caller's). Keys are non-negative and unique within the store; a key
 * initialised twice is MXC_EINVAL. For dist_sync this is collective: every process
 * calls it with the same keys and shapes, and rank 0's values become everyone's; any
 * mismatch is MXC_EINVAL on every process, naming the key and both shapes. Returns
 * MXC_OK, MXC_EINVAL, MXC_EMISUSE, MXC_ENOTSUP (not float32), MXC_ENOMEM. */
MXC_API int mxc_kvstore_init(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *values);

/** Pushes `num` values: those with the same key (one per device or executor) are summed,
 * then the sum replaces the store's copy or goes to the updater (for dist_sync, after the
 * sum across processes). Values must have the key's shape. Returns MXC_OK, MXC_EINVAL (a
 * key never initialised, naming it), MXC_ESHAPE, MXC_EMISUSE, MXC_ENOMEM; failures inside
 * the pushed operations (a process that died) reach the arrays they write. */
MXC_API int mxc_kvstore_push(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *values,
                             int priority);

/** Pulls the store's copy of each key into `outputs` (a key may repeat: one output per
 * device). Returns MXC_OK, MXC_EINVAL, MXC_ESHAPE, MXC_EMISUSE. */
MXC_API int mxc_kvstore_pull(mxc_kvstore *kv, int num, const int *keys, mxc_ndarray *const *outputs,
                             int priority);

/** mxc_kvstore_push of `values` then mxc_kvstore_pull into `outputs` (which may be the
 * values themselves), in one call. */
MXC_API int mxc_kvstore_pushpull(mxc_kvstore *kv, int num, const int *keys,
                                 mxc_ndarray *const *values, mxc_ndarray *const *outputs,
                                 int priority);

/** What an updater does with key `key`: change `stored` (the store's copy) in place from
 * `merged` (the sum of the gradients pushed), by pushing operations on those arrays (it
 * runs on the pushing thread and must not wait). Returns MXC_OK or a status, which
 * push returns. */
typedef int (*mxc_kvstore_updater)(int key, mxc_ndarray *merged, mxc_ndarray *stored, void *user);

/** Sets the updater (NULL: pushes replace the copy). Returns MXC_OK, MXC_EMISUSE. */
MXC_API int mxc_kvstore_set_updater(mxc_kvstore *kv, mxc_kvstore_updater fn, void *user);

/** This process's rank (0 for a store that is not distributed) and the number of
 * processes (1). Return MXC_OK or MXC_EMISUSE. */
MXC_API int mxc_kvstore_rank(const mxc_kvstore *kv, int *rank);
MXC_API int mxc_kvstore_num_workers(const mxc_kvstore *kv, int *num);

/** Waits until every operation pushed to the store has finished here and, for
 * dist_sync, until every process has called barrier. Returns MXC_OK, MXC_EMISUSE, or
 * the first failure of the store's operations (MXC_EDEVICE naming the rank that failed
 * or vanished). */
MXC_API int mxc_kvstore_barrier(mxc_kvstore *kv);

#ifdef __cplusplus
}
#endif

#endif /* MXC_KVSTORE_H */

/*
 * mxc/storage.h — raw memory blocks by device context: CPU memory aligned to 64 bytes,
 * GPU memory (cudaMalloc) and pinned host memory (cudaHostAlloc), with a pool per context
 * that keeps freed blocks for reuse, a way to give pooled memory back, and statistics.
 *
 * Pools. There is one process-wide pool per context: every CPU context (any dev_id) shares
 * the CPU pool, every pinned context shares the pinned pool, and each GPU id has its own.
 * A freed block goes back to its pool, filed under its size class (see
 * mxc_storage_class_size), and the next allocation of the same class takes it again
 * without asking the system. Pooled memory stays reserved until mxc_storage_trim() or
 * mxc_storage_shutdown() returns it, or until an allocation on the same context fails,
 * which trims that context's pool and retries once. Setting MXC_STORAGE_POOL=0 in the
 * environment (or calling mxc_storage_set_pooling(0)) turns pooling off: blocks are then
 * allocated at their exact size and released on free, which helps memory checkers.
 *
 * CPU blocks come from the allocator hook (mxc_set_allocator), so tests can count them and
 * inject failures. Pooled CPU blocks belong to the allocator that made them: call
 * mxc_storage_shutdown() before changing the allocator.
 *
 * Thread-safety: every function here may be called from any thread at any time (each
 * pool has its own mutex), except mxc_set_allocator as noted above. A block may be freed
 * on a different thread than the one that allocated it.
 */
#ifndef MXC_STORAGE_H
#define MXC_STORAGE_H

#include "mxc/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A block of device memory, passed by value. Treat the fields as read-only: the block is
 * described to mxc_storage_free exactly as mxc_storage_alloc returned it. Copies of a block
 * name the same memory; free only one of them. A zero-initialised block is "empty". */
typedef struct mxc_storage_block {
    void *ptr;       /**< start of the memory (NULL for an empty block); 64-byte aligned */
    size_t size;     /**< bytes requested */
    size_t capacity; /**< bytes usable at ptr: size rounded up to its size class, or size
                          itself when the block was allocated with pooling off */
    mxc_context ctx; /**< where the memory lives */
} mxc_storage_block;

/** Allocates `size` bytes on `ctx`.
 *
 * Params: ctx: MXC_CPU (a dev_type of 0 also means CPU; any dev_id >= 0), MXC_GPU with
 *         dev_id < the number of GPUs, or MXC_CPU_PINNED (needs a CUDA build and a GPU);
 *         size: bytes wanted; 0 gives an empty block (ptr NULL) with MXC_OK and allocates
 *         nothing; out: receives the block (an empty block with out->ctx == ctx on failure).
 * Ownership: the caller owns the block and gives it back with mxc_storage_free. The memory
 *         is not initialised (a pooled block holds what its last user left).
 * Returns: MXC_OK; MXC_EINVAL if out is NULL or dev_type is unknown; MXC_ENODEV for a
 *         negative dev_id, for a GPU or pinned context in a build without CUDA
 *         (USE_CUDA=1) or on a machine without that GPU; MXC_ENOTSUP for a GPU id beyond
 *         what mxc supports (64); MXC_ENOMEM when the memory cannot be had even after
 *         trimming the context's pool, the message naming the size and the context;
 *         MXC_EDEVICE for another CUDA failure, with CUDA's message.
 * Thread-safe. */
MXC_API int mxc_storage_alloc(mxc_context ctx, size_t size, mxc_storage_block *out);

/** Gives a block back: to its context's pool if pooling is on and its capacity is a size
 * class, otherwise to the system. Sets *block to an empty block (its ctx kept), so freeing
 * the same variable twice is harmless.
 *
 * Params: block: a block from mxc_storage_alloc; NULL or an empty block (ptr NULL) is
 *         accepted and does nothing.
 * Returns: MXC_OK; MXC_EMISUSE, freeing nothing, when the block cannot have come from
 *         mxc_storage_alloc: an invalid context, a capacity smaller than its size, a CPU
 *         pointer that is not 64-byte aligned, or more bytes than its context has in use
 *         (which catches many double frees through copies of a block).
 * Thread-safe. */
MXC_API int mxc_storage_free(mxc_storage_block *block);

/** The capacity a pooled allocation of `size` bytes gets (its size class):
 *  - 0 for size 0;
 *  - up to 64 KiB: the next power of two, at least 64 (64, 128, ..., 65536), so a block
 *    wastes less than half its class (and at most 63 bytes below 64);
 *  - above 64 KiB: the next multiple of 4 KiB, so a block wastes less than 4096 bytes,
 *    under 6.25% of its size;
 *  - 0 when the rounded size would not fit in a size_t (such sizes fail with MXC_ENOMEM).
 * Thread-safe, pure. */
MXC_API size_t mxc_storage_class_size(size_t size);

/** Returns every pooled (free) block of `ctx`'s pool to the system and frees the pool's
 * bookkeeping. Blocks in use are not affected.
 * Returns: MXC_OK; the same codes as mxc_storage_alloc for an invalid context.
 * Thread-safe. */
MXC_API int mxc_storage_trim(mxc_context ctx);

/** Gives back the temp space operators used (the resource layer's buffers, which belong
 * to no user object; random generators hold no block), then trims every pool, CPU, pinned
 * and GPU. The temp space is freed by an engine operation ordered after the operations
 * using it, and waited for; it grows again on its next use. Pools stay usable too, so
 * this is safe at any time; call it before mxc_set_allocator and at exit when checking
 * for leaks. An array's block is in use until the delete that mxc_nd_free pushes has run:
 * wait for the engine (mxc_nd_wait_all) before counting on MXC_OK.
 * Returns: MXC_OK if no block is in use in any pool, else MXC_EMISUSE with a message
 *         naming the first context that still has blocks in use, their count and bytes
 *         (those blocks stay valid): a live array, executor or other user object.
 * Thread-safe. Called from inside an engine operation it cannot wait, so temp space still
 * counts as in use there. */
MXC_API int mxc_storage_shutdown(void);

/** Memory statistics of one context's pool. Byte counts use capacities (what is really
 * reserved), except bytes_requested. Counters run from the start of the process or the
 * last mxc_storage_reset_stats. */
typedef struct mxc_storage_stats {
    size_t bytes_in_use;      /**< capacity of blocks allocated and not yet freed */
    size_t bytes_requested;   /**< sizes asked for by those blocks (<= bytes_in_use) */
    size_t bytes_pooled;      /**< capacity of freed blocks kept for reuse */
    size_t peak_bytes_in_use; /**< highest bytes_in_use since the last reset */
    size_t blocks_in_use;     /**< blocks allocated and not yet freed */
    size_t blocks_pooled;     /**< freed blocks kept for reuse */
    uint64_t alloc_count;     /**< successful allocations of size > 0 */
    uint64_t free_count;      /**< frees of non-empty blocks */
    uint64_t pool_hits;       /**< allocations served from the pool */
    uint64_t system_allocs;   /**< allocations that went to the system */
    uint64_t system_frees;    /**< blocks given back to the system (free or trim) */
} mxc_storage_stats;

/** Reads the statistics of `ctx`'s pool (CPU contexts share one pool, as do pinned ones).
 * Params: ctx: as for mxc_storage_alloc; out: receives the statistics (zeroed on failure).
 * Returns: MXC_OK; MXC_EINVAL if out is NULL; the codes of mxc_storage_alloc for an invalid
 *         context. Thread-safe: a consistent snapshot of one pool. */
MXC_API int mxc_storage_get_stats(mxc_context ctx, mxc_storage_stats *out);

/** Starts a new measurement on `ctx`'s pool: the peak becomes the current bytes in use and
 * the counters (alloc_count, free_count, pool_hits, system_allocs, system_frees) go to
 * 0. The in-use and pooled amounts, which describe the present, are kept.
 * Returns: MXC_OK; the codes of mxc_storage_alloc for an invalid context. Thread-safe. */
MXC_API int mxc_storage_reset_stats(mxc_context ctx);

/** Turns pooling on (non-zero) or off (0) for the whole process. Turning it off trims
 * every pool; blocks in use stay valid and are released when freed. The initial state is
 * on, or off when the environment has MXC_STORAGE_POOL=0 at the first storage call; this
 * function overrides the environment. Thread-safe. */
MXC_API void mxc_storage_set_pooling(int enabled);

/** 1 if pooling is on, 0 if off. Thread-safe. */
MXC_API int mxc_storage_pooling(void);

#ifdef __cplusplus
}
#endif

#endif /* MXC_STORAGE_H */

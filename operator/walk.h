/*
 * operator/walk.h — the index mapping of the tensor-manipulation operators (operator/
 * tensor.c), shared by their CPU loops and CUDA kernels (operator/tensor_gpu.cu): a walk
 * takes the flat index j of one array, row-major over `dims`, to the element
 * base + sum_i j_i * strides[i] of another. Slices (strides times steps, base at the first
 * element), flips (negative strides), tiles, repeats and broadcasts (stride 0 along the
 * copied axes, an output axis split in two where it wraps) and stack's parts are all walks,
 * so each operator is made of three moves over them:
 *   gather   dst[j] = src[walk(j)]                 (the forwards)
 *   scatter  dst[walk(j)] = src[j]                 (the backward of a one-to-one gather)
 *   sum      dst[k] = sum_t src[walk(k) + sum_walk(t)]   (the backward of tile, repeat and
 *                                                  broadcast: every copy of an element)
 * The walks are made on the host and reach the device by value (Dropout's mask, shared
 * along some axes, is read through one too). Internal.
 */
#ifndef MXC_OPERATOR_WALK_H
#define MXC_OPERATOR_WALK_H

#include "common/hd.h"
#include "mxc/base.h"
#include "mxc/engine.h"

#include <stdint.h>

/* An output axis may be split in two (tile: repetition and position), so a walk has up to
 * twice the axes an array has. */
#define MXC__WALK_MAX (2 * MXC_MAX_NDIM)

struct mxc__walk {
    int nd; /* >= 1 */
    int64_t base;
    int64_t dims[MXC__WALK_MAX];
    int64_t strides[MXC__WALK_MAX];
};

/* The element of the other array that flat index j maps to. */
static inline MXC__HD int64_t mxc__walk_at(const struct mxc__walk *w, int64_t j) {
    int64_t off = w->base;
    for (int i = w->nd - 1; i >= 0; i--) {
        int64_t q = j / w->dims[i];
        off += (j - q * w->dims[i]) * w->strides[i];
        j = q;
    }
    return off;
}

/* The element dst[k] of a sum move starts at: src[mxc__walk_at(w, k)], then adds the
 * elements the sum walk `t` reaches from there (sum's base is 0). */
static inline MXC__HD float mxc__walk_sum_at(const struct mxc__walk *w, const struct mxc__walk *t,
                                             int64_t count, const float *src, int64_t k) {
    int64_t off = mxc__walk_at(w, k);
    float acc = 0;
    for (int64_t r = 0; r < count; r++)
        acc += src[off + mxc__walk_at(t, r)];
    return acc;
}

#ifdef __cplusplus
extern "C" {
#endif

/* dst[j] (=, += as `req`, an enum mxc__req, says) = src[walk(j)] for every index j of the
 * walk, both arrays of `dtype` (any of operator/cast.h's; add-to in the dtype): on the CPU,
 * or on the GPU of gpu_rctx when it is not NULL (operator/tensor.c; the permutations of
 * transpose and SwapAxis use it too). MXC_OK or MXC_EDEVICE. */
int mxc__walk_gather(const mxc_run_ctx *gpu_rctx, void *dst, const void *src, struct mxc__walk w,
                     int req, int dtype);

/* ---- GPU launchers (operator/tensor_gpu.cu, CUDA builds only): device pointers, work
 * queued on `stream`; MXC_OK or MXC_EDEVICE. Requests are enum mxc__req values. `n` is
 * the number of indices walked (the product of the walk's dims). */

/* dst[j] (=, +=) src[walk(j)], j < n. */
int mxc__walk_gather_gpu(float *dst, const float *src, struct mxc__walk w, int64_t n, int req,
                         void *stream);

/* The same of arrays of `dtype` (operator/cast.h's element load and store). */
int mxc__walk_gather_typed_gpu(void *dst, const void *src, struct mxc__walk w, int64_t n, int req,
                               int dtype, void *stream);

/* dst[walk(j)] (=, +=) src[j], j < n; the walk is one to one. */
int mxc__walk_scatter_gpu(float *dst, const float *src, struct mxc__walk w, int64_t n, int req,
                          void *stream);

/* dst[k] (=, +=) mxc__walk_sum_at(w, t, count, src, k), k < n. */
int mxc__walk_sum_gpu(float *dst, const float *src, struct mxc__walk w, struct mxc__walk t,
                      int64_t count, int64_t n, int req, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* MXC_OPERATOR_WALK_H */

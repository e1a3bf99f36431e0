/*
 * operator/broadcast.h — what broadcast_add/sub/mul/div share between the CPU kernels
 * (operator/broadcast.c) and the CUDA ones (operator/broadcast_gpu.cu): the view of the
 * output as runs of axes along which each operand moves or is broadcast, and the
 * per-element arithmetic. Internal.
 */
#ifndef MXC_OPERATOR_BROADCAST_H
#define MXC_OPERATOR_BROADCAST_H

#include "common/hd.h"
#include "mxc/base.h"

#include <stdint.h>

enum { MXC__B_ADD, MXC__B_SUB, MXC__B_MUL, MXC__B_DIV };

/* The output (row-major) as runs of axes over which each operand either moves with the
 * output or stays put (size 1, broadcast): strides sa / sb are 0 on the runs an operand
 * is broadcast along. Size-1 output axes are dropped. */
struct mxc__bview {
    int ndim;
    int64_t dims[MXC_MAX_NDIM];
    int64_t sa[MXC_MAX_NDIM], sb[MXC_MAX_NDIM];
    int64_t size;
};

static inline MXC__HD float mxc__b_add(float x, float y) { return x + y; }
static inline MXC__HD float mxc__b_sub(float x, float y) { return x - y; }
static inline MXC__HD float mxc__b_mul(float x, float y) { return x * y; }
static inline MXC__HD float mxc__b_div(float x, float y) { return x / y; }

/* out (v->size, req, device pointers) = a op b (an MXC__B_ value) on a GPU, enqueued on
 * `stream`; out may be a when a is not broadcast. MXC_OK or MXC_EDEVICE
 * (operator/broadcast_gpu.cu, CUDA builds only). */
int mxc__bcast_walk_gpu(int op, const struct mxc__bview *v, const float *a, const float *b,
                        float *out, int req, void *stream);

#endif /* MXC_OPERATOR_BROADCAST_H */

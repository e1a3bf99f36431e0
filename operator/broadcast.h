/*
 * operator/broadcast.h — the broadcast_* family, shared between the CPU kernels
 * (operator/broadcast.c) and the CUDA ones (operator/broadcast_gpu.cu): its table (each
 * operator runs the arithmetic and gradients of one binary row of operator/elemwise_ops.h,
 * so broadcast_maximum is _maximum broadcast) and the view of the output as runs of axes
 * along which each operand moves or is broadcast. Internal.
 */
#ifndef MXC_OPERATOR_BROADCAST_H
#define MXC_OPERATOR_BROADCAST_H

#include "mxc/base.h"
#include "operator/elemwise_ops.h"

#include <stdint.h>

/* X(ident, element-wise ident, "description"): operator `ident` computes the element-wise
 * operator's forward and gradients on broadcast operands. */
#define MXC__BCAST_OPS(X)                                                                    \
    X(broadcast_add, _plus, "lhs + rhs, broadcast")                                          \
    X(broadcast_sub, _minus, "lhs - rhs, broadcast")                                         \
    X(broadcast_mul, _mul, "lhs * rhs, broadcast")                                           \
    X(broadcast_div, _div, "lhs / rhs, broadcast")                                           \
    X(broadcast_maximum, _maximum, "max(lhs, rhs), broadcast; a tie's gradient goes to lhs") \
    X(broadcast_minimum, _minimum, "min(lhs, rhs), broadcast; a tie's gradient goes to lhs") \
    X(broadcast_power, _power, "lhs ^ rhs, broadcast")                                       \
    X(broadcast_hypot, _hypot, "sqrt(lhs^2 + rhs^2), broadcast")                             \
    X(broadcast_equal, _equal, "(lhs == rhs) as 1 or 0, broadcast")                          \
    X(broadcast_not_equal, _not_equal, "(lhs != rhs) as 1 or 0, broadcast")                  \
    X(broadcast_greater, _greater, "(lhs > rhs) as 1 or 0, broadcast")                       \
    X(broadcast_greater_equal, _greater_equal, "(lhs >= rhs) as 1 or 0, broadcast")          \
    X(broadcast_lesser, _lesser, "(lhs < rhs) as 1 or 0, broadcast")                         \
    X(broadcast_lesser_equal, _lesser_equal, "(lhs <= rhs) as 1 or 0, broadcast")            \
    X(broadcast_logical_and, _logical_and, "(lhs != 0 and rhs != 0) as 1 or 0, broadcast")   \
    X(broadcast_logical_or, _logical_or, "(lhs != 0 or rhs != 0) as 1 or 0, broadcast")      \
    X(broadcast_logical_xor, _logical_xor, "((lhs != 0) != (rhs != 0)) as 1 or 0, broadcast")

/* The kinds: MXC__B_broadcast_add, ... */
#define MXC__BCAST_KIND(ident, ew, desc) MXC__B_##ident,
enum { MXC__BCAST_OPS(MXC__BCAST_KIND) MXC__B_COUNT };

/* The output (row-major) as runs of axes over which each operand either moves with the
 * output or stays put (size 1, broadcast): strides sa / sb are 0 on the runs an operand
 * is broadcast along. Size-1 output axes are dropped. */
struct mxc__bview {
    int ndim;
    int64_t dims[MXC_MAX_NDIM];
    int64_t sa[MXC_MAX_NDIM], sb[MXC_MAX_NDIM];
    int64_t size;
};

/* GPU launchers (operator/broadcast_gpu.cu, CUDA builds only; device pointers, enqueued on
 * `stream`, nothing for a null request): MXC_OK or MXC_EDEVICE. */

/* out (v->size, req) = the forward of `kind` (an MXC__B_ value) on a and b through v; out
 * may be a when a is not broadcast. */
int mxc__bcast_walk_gpu(int kind, const struct mxc__bview *v, const float *a, const float *b,
                        float *out, int req, void *stream);

/* out (v->size, req) = the gradient of `kind` with respect to operand j (0: lhs, 1: rhs)
 * for head gradient g (v->size), a and b read through v. */
int mxc__bcast_grad_gpu(int kind, int j, const struct mxc__bview *v, const float *g, const float *a,
                        const float *b, float *out, int req, void *stream);

#endif /* MXC_OPERATOR_BROADCAST_H */

/*
 * operator/op_gpu.cuh — what an operator's .cu file includes: the kernel interface
 * (operator/op.h), the GPU services (operator/gpu.h), the map launcher (common/launch.cuh)
 * and the write-request store for device code. A GPU kernel has the CPU kernel's
 * signature and honours the same four requests; its per-element arithmetic is the
 * MXC__HD function the CPU kernel calls, so the .cu file holds launch and indexing only.
 */
#ifndef MXC_OPERATOR_OP_GPU_CUH
#define MXC_OPERATOR_OP_GPU_CUH

#include "common/launch.cuh"

extern "C" {
#include "operator/gpu.h"
#include "operator/op.h"
}

/* o[i] = or += v as `req` asks; nothing for a null request (o may then be NULL). */
static __device__ __forceinline__ void mxc__put(int req, float *o, int64_t i, float v) {
    if (req == MXC__REQ_ADD)
        o[i] += v;
    else if (req != MXC__REQ_NULL)
        o[i] = v;
}

#endif /* MXC_OPERATOR_OP_GPU_CUH */

/*
 * operator/strided.cuh — for .cu files: reading one array in another's element order. A
 * walk (nd axes, row-major over `dims`) maps the flat index j of the array being written to
 * the offset sum_i j_i * strides[i] of the array read: a permutation (transpose), or a
 * broadcast with stride 0 along an axis (Dropout's shared mask). Passed to kernels by value.
 */
#ifndef MXC_OPERATOR_STRIDED_CUH
#define MXC_OPERATOR_STRIDED_CUH

extern "C" {
#include "mxc/base.h"
}

#include <stdint.h>

struct mxc__strided {
    int nd;
    int64_t dims[MXC_MAX_NDIM], strides[MXC_MAX_NDIM];
};

/* The walk of dims and strides (nd <= MXC_MAX_NDIM); *n gets the element count. */
static inline mxc__strided mxc__strided_make(int nd, const int64_t *dims, const int64_t *strides,
                                             int64_t *n) {
    mxc__strided s;
    s.nd = nd;
    *n = 1;
    for (int i = 0; i < nd; i++) {
        s.dims[i] = dims[i];
        s.strides[i] = strides[i];
        *n *= dims[i];
    }
    return s;
}

/* The offset read for flat index j. */
static __device__ __forceinline__ int64_t mxc__strided_offset(const mxc__strided &s, int64_t j) {
    int64_t off = 0;
    for (int i = s.nd - 1; i >= 0; i--) {
        int64_t q = j / s.dims[i];
        off += (j - q * s.dims[i]) * s.strides[i];
        j = q;
    }
    return off;
}

#endif /* MXC_OPERATOR_STRIDED_CUH */

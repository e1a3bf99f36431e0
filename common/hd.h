/*
 * common/hd.h — MXC__HD marks a function that is compiled for the host and, under nvcc,
 * for a CUDA device too (`__host__ __device__`), so that an operator's per-element
 * arithmetic is written once: the CPU loop and the CUDA kernel call the same
 * `static inline MXC__HD` function (DESIGN.md section 5a). In C it expands to nothing.
 */
#ifndef MXC_COMMON_HD_H
#define MXC_COMMON_HD_H

#ifdef __CUDACC__
#define MXC__HD __host__ __device__
#else
#define MXC__HD
#endif

#endif /* MXC_COMMON_HD_H */

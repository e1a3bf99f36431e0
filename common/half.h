/*
 * common/half.h — IEEE binary16 (float16) <-> float32 conversions, bit-exact with numpy's
 * (npy_halfbits_to_floatbits, npy_floatbits_to_halfbits) and so with MXNet 1.9.1's Cast:
 * round to nearest, ties to even; overflow to a signed infinity; subnormals both ways;
 * NaN payloads kept (the top 10 bits of a float's, never turned into an infinity).
 * A float16 is stored as its 16 bits (uint16_t). MXC__HD: the CPU loops and the CUDA
 * kernels call these same functions (tests/check_op_dtype.c checks every half value).
 */
#ifndef MXC_COMMON_HALF_H
#define MXC_COMMON_HALF_H

#include "common/hd.h"

#include <stdint.h>
#include <string.h>

static inline MXC__HD float mxc__bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline MXC__HD uint32_t mxc__float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The float32 of half `h` (exact: every half is a float). */
static inline MXC__HD float mxc__half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) /* infinity or NaN (payload kept) */
        return mxc__bits_float(sign | 0x7f800000u | (man << 13));
    if (exp != 0) /* normal: rebias 15 -> 127 */
        return mxc__bits_float(sign | ((exp + 112u) << 23) | (man << 13));
    if (man == 0)
        return mxc__bits_float(sign);
    /* subnormal man * 2^-24: normalise so that bit 10 is the hidden one */
    uint32_t e = 113;
    while (!(man & 0x400u)) {
        man <<= 1;
        e--;
    }
    return mxc__bits_float(sign | (e << 23) | ((man & 0x3ffu) << 13));
}

/* The half nearest float `v` (ties to even). */
static inline MXC__HD uint16_t mxc__float_to_half(float v) {
    uint32_t f = mxc__float_bits(v);
    uint16_t sign = (uint16_t)((f & 0x80000000u) >> 16);
    uint32_t exp = f & 0x7f800000u;
    if (exp >= 0x47800000u) { /* beyond the halves: infinity, or NaN */
        uint32_t sig = f & 0x007fffffu;
        if (exp == 0x7f800000u && sig != 0) {
            uint16_t h = (uint16_t)(0x7c00u + (sig >> 13));
            return (uint16_t)(sign + (h == 0x7c00u ? 0x7c01u : h)); /* still a NaN */
        }
        return (uint16_t)(sign + 0x7c00u);
    }
    if (exp <= 0x38000000u) { /* a half subnormal, or zero */
        if (exp < 0x33000000u)
            return sign;
        uint32_t e = exp >> 23;
        uint32_t sig = (0x00800000u + (f & 0x007fffffu)) >> (113 - e);
        /* ties to even: the bits shifted out of f count as sticky bits */
        if ((sig & 0x3fffu) != 0x1000u || (f & 0x7ffu))
            sig += 0x1000u;
        return (uint16_t)(sign + (sig >> 13)); /* a carry makes the smallest normal */
    }
    uint32_t h_exp = (exp - 0x38000000u) >> 13;
    uint32_t sig = f & 0x007fffffu;
    if ((sig & 0x3fffu) != 0x1000u)
        sig += 0x1000u;
    /* a carry out of the significand increments the exponent (to infinity at most) */
    return (uint16_t)(sign + h_exp + (sig >> 13));
}

#endif /* MXC_COMMON_HALF_H */

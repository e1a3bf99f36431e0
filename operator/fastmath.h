/*
 * operator/fastmath.h — exp, tanh and sigmoid for float32 kernels, written so that loops
 * calling them vectorise: no branches (selects only), no calls, no errno. libm's scalar
 * expf/tanhf stop the vectoriser and cost most of a LeNet training step's activation
 * time. Accuracy (tests/check_fastmath.c sweeps every float in [-100, 100] at a stride
 * and compares with double libm): exp within a few ulp for x >= -86.6 (0 below, where
 * e^x < 3e-38), sigmoid within 2e-7 absolute, tanh within 4e-7 absolute and 2e-6
 * relative. NaN in gives NaN out. Each is MXC__HD: the GPU kernels call the same code.
 */
#ifndef MXC_OPERATOR_FASTMATH_H
#define MXC_OPERATOR_FASTMATH_H

#include "common/hd.h"

#include <stdint.h>
#include <string.h>

/* e^x: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact product), e^r
 * by a degree-6 polynomial, 2^n put into the exponent. */
static inline MXC__HD float mxc__expf(float x) {
    const float hi = 88.7228391f, lo = -86.6f; /* ln(FLT_MAX); e^lo ~ 2.6e-38 */
    /* clamped so that NaN becomes hi (every comparison with NaN is false): n must stay a
     * number, converting NaN to int32 is undefined behaviour; NaN is returned below */
    float c = x < hi ? x : hi;
    c = c > lo ? c : lo;
    /* round to nearest by adding and removing 1.5 * 2^23 (SSE2 has no round
     * instruction, and a call would stop the vectoriser); n in [-125, 128] */
    const float shifter = 12582912.0f;
    float n = (c * 1.44269504088896341f + shifter) - shifter;
    float r = c - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 126) << 23; /* 2^(n-1): a normal float for every n */
    float half_scale;
    memcpy(&half_scale, &bits, sizeof half_scale);
    float y = (p * half_scale) * 2.0f; /* overflows to inf only when e^x does */
    y = x > hi ? __builtin_inff() : y;
    y = x < lo ? 0.0f : y;
    return x != x ? x : y;
}

/* tanh(x) as a rational function x P(x²) / Q(x²) of degrees 13 and 6 (the minimax fit
 * Eigen uses), x clamped to ±7.9053 where float tanh reaches ±1, and x itself below
 * 0.0004 where tanh(x) rounds to x: no exp, one division; about twice as fast as
 * 1 - 2 / (e^{2x} + 1), within 3e-7 absolute (5 ulp of 1). */
static inline MXC__HD float mxc__tanhf(float x) {
    const float lim = 7.90531110763549805f;
    float c = x > lim ? lim : x;
    c = c < -lim ? -lim : c;
    float x2 = c * c;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    float t = c * p / q;
    float a = x < 0 ? -x : x;
    t = a < 0.0004f ? x : t;
    return x != x ? x : t;
}

/* 1 / (1 + e^-x) */
static inline MXC__HD float mxc__sigmoidf(float x) { return 1.0f / (1.0f + mxc__expf(-x)); }

#endif /* MXC_OPERATOR_FASTMATH_H */

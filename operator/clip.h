/*
 * operator/clip.h — clip's parameters and per-element arithmetic, shared by the CPU
 * kernels (operator/clip.c) and the CUDA ones (operator/clip_gpu.cu).
 */
#ifndef MXC_OPERATOR_CLIP_H
#define MXC_OPERATOR_CLIP_H

#include "common/hd.h"

struct mxc__clip_param {
    float a_min;
    float a_max;
};

/* a_max if x > a_max, else a_min if x < a_min, else x (the upper bound tested first) */
static inline MXC__HD float mxc__clip_fwd(float x, float lo, float hi) {
    return x > hi ? hi : (x < lo ? lo : x);
}

/* g where a_min <= x <= a_max, bounds included, else 0 */
static inline MXC__HD float mxc__clip_grad(float g, float x, float lo, float hi) {
    return x > hi || x < lo ? 0.0f : g;
}

#endif /* MXC_OPERATOR_CLIP_H */

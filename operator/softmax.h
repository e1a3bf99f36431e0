/*
 * operator/softmax.h — the per-element arithmetic of softmax, log_softmax and SoftmaxOutput
 * (MXC__HD: operator/softmax.c's CPU loops and operator/softmax_gpu.cu's kernels call the
 * same functions) and the GPU launchers. Tensors are viewed as (outer, n, inner) with the
 * softmax along n; float32, row-major. The launchers take device pointers, queue their work
 * on `stream` (a cudaStream_t) and return MXC_OK or MXC_EDEVICE; they are declared in every
 * build and defined only in a CUDA build.
 */
#ifndef MXC_OPERATOR_SOFTMAX_H
#define MXC_OPERATOR_SOFTMAX_H

#include "common/hd.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* exp((x - max) / t): softmax's numerator. */
static inline MXC__HD float mxc__softmax_exp(float x, float mx, float t) {
    return expf((x - mx) / t);
}

/* log_softmax: (x - max) / t - log_sum, log_sum = log(sum exp((x - max) / t)). */
static inline MXC__HD float mxc__log_softmax_of(float x, float mx, float t, float log_sum) {
    return (x - mx) / t - log_sum;
}

/* The gradient at one element from y, its head gradient g and the row's sum s:
 *   softmax:     s = sum(g * y), dx = y * (g - s) / t
 *   log_softmax: s = sum(g),     dx = (g - exp(y) * s) / t */
static inline MXC__HD float mxc__softmax_grad_term(float y, float g, bool log_out) {
    return log_out ? g : g * y;
}
static inline MXC__HD float mxc__softmax_grad(float y, float g, float s, float t, bool log_out) {
    return log_out ? (g - expf(y) * s) / t : y * (g - s) / t;
}

/* A label value as a class index the way MXNet casts it (int truncation); values no int
 * can hold match no class. */
static inline MXC__HD int64_t mxc__label_class(float v) {
    return v > (float)INT_MIN && v < (float)INT_MAX ? (int64_t)(int)v : INT64_MIN;
}

/* grad_scale over the normaliser; no valid label (0) counts as 1. */
static inline MXC__HD float mxc__so_scale(float grad_scale, double norm) {
    return (float)((double)grad_scale / (norm > 0 ? norm : 1));
}

/* SoftmaxOutput's gradient at channel ch of a row labelled cls: (y - target) * scale with
 * target `on` at the label and `off` elsewhere (label smoothing); 0 for a skipped row. */
static inline MXC__HD float mxc__so_grad(float y, int64_t ch, int64_t cls, bool skip, float on,
                                         float off, float scale) {
    return skip ? 0.0f : (y - (ch == cls ? on : off)) * scale;
}

/* SoftmaxOutput's gradient with probability labels l (data's shape): no normaliser. */
static inline MXC__HD float mxc__so_prob_grad(float y, float l, float grad_scale) {
    return (y - l) * grad_scale;
}

/* y (=, +=) softmax (or log-softmax) of x along n, temperature t; y may be x (not adding). */
int mxc__softmax_gpu(const float *x, float *y, int64_t outer, int64_t n, int64_t inner, float t,
                     bool log_out, int req, void *stream);

/* dx (=, +=) the softmax (log_softmax) gradient from y and g; dx may be g (not adding). */
int mxc__softmax_grad_gpu(const float *y, const float *g, float *dx, int64_t outer, int64_t n,
                          int64_t inner, float t, bool log_out, int req, void *stream);

/* SoftmaxOutput's gradient dx (outer, n, inner) (=, +=) mxc__so_grad with the class of
 * label (outer, inner) at each row. scale: the scale, or, when valid_scale is not NULL,
 * grad_scale, the scale then computed on the device (into valid_scale, one float of device
 * memory) from the labels (all label_size of them, as the CPU counts) that are not
 * `ignore`. */
int mxc__so_grad_gpu(const float *y, const float *label, int64_t label_size, float *dx,
                     int64_t outer, int64_t n, int64_t inner, int64_t ignore, bool use_ignore,
                     float on, float off, float scale, float *valid_scale, int req, void *stream);

/* dx (n) (=, +=) mxc__so_prob_grad of y and label (n). */
int mxc__so_prob_grad_gpu(const float *y, const float *label, float *dx, int64_t n,
                          float grad_scale, int req, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* MXC_OPERATOR_SOFTMAX_H */

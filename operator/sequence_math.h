/*
 * operator/sequence_math.h — the indexing of SequenceMask, SequenceLast and SequenceReverse,
 * shared by their CPU kernels (operator/sequence.c) and GPU kernels
 * (operator/sequence_gpu.cu). Data is seen as (T, B, rest) when the sequence axis is 0 and
 * as (B, T, rest) when it is 1 (T steps, B sequences, rest the product of the other axes),
 * row-major; sequence b has len(b) steps: the truncation of sequence_length[b], or T
 * without lengths. Every kernel is a gather: one output (or input-gradient) element reads
 * at most one element, so no atomics. The lengths are checked before a kernel runs
 * (mxc__seq_range); the functions here also clamp them, so a length that was not checked
 * (a backward run alone) never reads outside the arrays.
 */
#ifndef MXC_OPERATOR_SEQUENCE_MATH_H
#define MXC_OPERATOR_SEQUENCE_MATH_H

#include "common/hd.h"

#include <stdint.h>

/* The three operators (operator/sequence.c names them in this order). */
enum mxc__seq_kind { MXC__SEQ_MASK, MXC__SEQ_LAST, MXC__SEQ_REVERSE };

struct mxc__seq_view {
    int64_t steps, batch, rest;
    int axis;            /* the sequence axis: 0 or 1 */
    const float *length; /* (B) lengths, or NULL: every sequence has T steps */
};

/* The length of sequence b clamped to [lo, T]: lo is 0 (mask, reverse) or 1 (last). */
static inline MXC__HD int64_t mxc__seq_len(const struct mxc__seq_view *v, int64_t b, int64_t lo) {
    if (v->length == 0)
        return v->steps;
    const float x = v->length[b];
    if (!(x >= (float)lo)) /* NaN too */
        return lo;
    return x >= (float)v->steps ? v->steps : (int64_t)x;
}

/* Data element e: its sequence b and step t. */
static inline MXC__HD void mxc__seq_pos(const struct mxc__seq_view *v, int64_t e, int64_t *b,
                                        int64_t *t) {
    const int64_t q = e / v->rest;
    if (v->axis == 0)
        *t = q / v->batch, *b = q % v->batch;
    else
        *b = q / v->steps, *t = q % v->steps;
}

/* The data element of sequence b, step t, position r of the rest. */
static inline MXC__HD int64_t mxc__seq_at(const struct mxc__seq_view *v, int64_t b, int64_t t,
                                          int64_t r) {
    return (v->axis == 0 ? t * v->batch + b : b * v->steps + t) * v->rest + r;
}

/* SequenceMask: element e of the output (x: data, value: the mask) or of the data gradient
 * (x: the head gradient, value 0): kept for the first len(b) steps. */
static inline MXC__HD float mxc__seq_mask(const struct mxc__seq_view *v, const float *x, int64_t e,
                                          float value) {
    int64_t b, t;
    mxc__seq_pos(v, e, &b, &t);
    return t < mxc__seq_len(v, b, 0) ? x[e] : value;
}

/* SequenceLast: output element o of (B, rest) is step len(b) - 1 of its sequence. */
static inline MXC__HD float mxc__seq_last(const struct mxc__seq_view *v, const float *x,
                                          int64_t o) {
    const int64_t b = o / v->rest, r = o % v->rest;
    return x[mxc__seq_at(v, b, mxc__seq_len(v, b, 1) - 1, r)];
}

/* SequenceLast's backward: data element e gets the head gradient dy (B, rest) of its
 * sequence where it is the last step, 0 elsewhere. */
static inline MXC__HD float mxc__seq_last_grad(const struct mxc__seq_view *v, const float *dy,
                                               int64_t e) {
    int64_t b, t;
    mxc__seq_pos(v, e, &b, &t);
    return t == mxc__seq_len(v, b, 1) - 1 ? dy[b * v->rest + e % v->rest] : 0.0f;
}

/* SequenceReverse: element e takes the element at the mirrored step of the first len(b)
 * steps; the steps after them stay. The mapping is its own inverse, so the backward is the
 * same gather of the head gradient. */
static inline MXC__HD float mxc__seq_reverse(const struct mxc__seq_view *v, const float *x,
                                             int64_t e) {
    int64_t b, t;
    mxc__seq_pos(v, e, &b, &t);
    const int64_t n = mxc__seq_len(v, b, 0);
    return t < n ? x[mxc__seq_at(v, b, n - 1 - t, e % v->rest)] : x[e];
}

#endif /* MXC_OPERATOR_SEQUENCE_MATH_H */

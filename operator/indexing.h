/*
 * operator/indexing.h — what the indexing, selection and sorting operators share between
 * their CPU kernels (operator/indexing.c, operator/sort.c) and their GPU kernels
 * (operator/indexing_gpu.cu, operator/sort_gpu.cu): the per-element rules as MXC__HD
 * functions (which element an index value names, where's choice, one_hot's test, the
 * first extreme of a row, the sort order) and the GPU launchers (device pointers, work
 * queued on `stream`, a cudaStream_t; MXC_OK or MXC_EDEVICE; declared in every build,
 * defined in a CUDA build). Index inputs are float32 arrays holding integers, as MXNet's.
 *
 * Every tensor here is seen around one axis as (outer, n, inner), row-major: element j of
 * the row (o, r) is at (o * n + j) * inner + r.
 */
#ifndef MXC_OPERATOR_INDEXING_H
#define MXC_OPERATOR_INDEXING_H

#include "common/hd.h"
#include "operator/embedding.h"
#include "operator/op.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* take's and pick's `mode` (the order of their choices lists). */
enum mxc__index_mode { MXC__INDEX_CLIP, MXC__INDEX_WRAP, MXC__INDEX_RAISE };

/* The element an index value names on an axis of n >= 1: truncated toward zero (as
 * MXNet's cast to int), then clipped to [0, n) (clip, Embedding's rule) or taken modulo n
 * into [0, n) (wrap; -1 is the last). NaN names 0. raise checks the range beforehand
 * (mxc__index_raise_range) and resolves like clip. */
static inline MXC__HD int64_t mxc__index_resolve(float v, int64_t n, int mode) {
    if (mode != MXC__INDEX_WRAP)
        return mxc__embedding_row(v, n);
    if (!(v == v))
        return 0;
    const float lim = 4611686018427387904.0f; /* 2^62: the cast below stays defined */
    int64_t t = (int64_t)(v > lim ? lim : v < -lim ? -lim : v);
    int64_t r = t % n;
    return r < 0 ? r + n : r;
}

/* An interval of index values (float32 inputs holding positions or lengths), each bound
 * inclusive or not: take's mode=raise accepts [0, n - 1]; the sequence operators accept
 * the lengths whose truncation is a length they can use (SequenceLast: 1 <= trunc(v) <= T,
 * so 1 <= v < T + 1). NaN is in no range. The bounds are doubles: exact for any length. */
struct mxc__index_range {
    double lo, hi;
    bool lo_open, hi_open;
};

static inline MXC__HD bool mxc__index_range_has(const struct mxc__index_range *r, float v) {
    const double d = (double)v;
    return (r->lo_open ? d > r->lo : d >= r->lo) && (r->hi_open ? d < r->hi : d <= r->hi);
}

/* mode=raise's range, MXNet's test: 0 <= v <= n - 1 (so 2.5 passes for 3 elements and 3.5
 * fails for 4, though both truncate into range). */
static inline struct mxc__index_range mxc__index_raise_range(int64_t n) {
    return (struct mxc__index_range){0, (double)(n - 1), false, false};
}

/* The position of the first of v[0 .. n) outside `r`, or -1 (host memory). */
static inline int64_t mxc__index_find_outside(const float *v, int64_t n,
                                              const struct mxc__index_range *r) {
    for (int64_t i = 0; i < n; i++)
        if (!mxc__index_range_has(r, v[i]))
            return i;
    return -1;
}

/* where: x where the condition is not zero (NaN is not zero), else y. */
static inline MXC__HD float mxc__where(float cond, float x, float y) {
    return cond != 0.0f ? x : y;
}

/* one_hot: whether index value v (truncated toward zero) is class d of `depth`; values
 * outside [0, depth) are no class, so their row is all off_value. */
static inline MXC__HD bool mxc__one_hot_is(float v, int64_t d, int64_t depth) {
    return v > -1.0f && v < (float)depth && (int64_t)v == d;
}

/* The position of the first maximum (or minimum) of the row p[0], p[stride], ...,
 * p[(n - 1) * stride], n >= 1. A NaN is an extreme, the first one wins (MXNet's rule). */
static inline MXC__HD int64_t mxc__arg_extreme(const float *p, int64_t n, int64_t stride,
                                               bool is_max) {
    int64_t best = 0;
    float b = p[0];
    for (int64_t j = 1; j < n && b == b; j++) {
        float v = p[j * stride];
        if (!(v == v) || (is_max ? v > b : v < b)) {
            best = j;
            b = v;
        }
    }
    return best;
}

/* The sort order of topk, sort and argsort: whether element i (value a) comes before
 * element j (value b). Ascending or descending by value, equal values by position (the
 * first occurrence first, as MXNet 1.9.1 orders ties both ways), NaN after every number.
 * A total order, so every sorting method gives the same result on either device. */
static inline MXC__HD bool mxc__sort_before(float a, int64_t i, float b, int64_t j, bool ascend) {
    bool an = !(a == a), bn = !(b == b);
    if (an || bn)
        return an == bn ? i < j : bn;
    if (a != b)
        return ascend ? a < b : a > b;
    return i < j;
}

/* gather_nd: the position index value v names on an axis of n: truncated toward zero, a
 * negative one counted from the end (-1 is the last), as MXNet's; outside [0, n) (and NaN)
 * it is out of range, which the CPU refuses and the GPU clips (mxc__gather_row). */
static inline MXC__HD int64_t mxc__gather_pos(float v, int64_t n) {
    if (!(v == v))
        return -1;
    const float lim = 4611686018427387904.0f; /* 2^62: the cast below stays defined */
    int64_t t = (int64_t)(v > lim ? lim : v < -lim ? -lim : v);
    return t < 0 ? t + n : t;
}

/* gather_nd's index view: data (n[0], ..., n[m - 1], inner), indices (m, count). */
struct mxc__gather_view {
    int m;
    int64_t n[MXC_MAX_NDIM];
    int64_t count, inner, rows; /* rows = n[0] * ... * n[m - 1] */
};

/* The row of data (as rows x inner) that column y of indices (m, count) names, each
 * position clipped into its axis (the GPU's rule for out-of-range indices). */
static inline MXC__HD int64_t mxc__gather_row(const struct mxc__gather_view *v, const float *idx,
                                              int64_t y) {
    int64_t row = 0;
    for (int d = 0; d < v->m; d++) {
        int64_t p = mxc__gather_pos(idx[d * v->count + y], v->n[d]);
        row = row * v->n[d] + (p < 0 ? 0 : p >= v->n[d] ? v->n[d] - 1 : p);
    }
    return row;
}

/* o[k] = or += v as `req` says (not MXC__REQ_NULL): the CPU kernels' store. */
static inline void mxc__index_store(int req, float *o, int64_t k, float v) {
    if (req == MXC__REQ_ADD)
        o[k] += v;
    else
        o[k] = v;
}

/* ---- Shapes and gradients (operator/indexing.c) ----------------------------------- */

#define MXC__AXIS_NONE (-1) /* an `axis` of None: the whole array, flattened */

/* The axis an `axis` parameter (int or None) names on data of shape `s`, counted from 0
 * (a negative one from the end), or MXC__AXIS_NONE; MXC_EINVAL naming `op` when it is not
 * an integer or not an axis of `s`. */
int mxc__index_axis(const char *op, const struct mxc__opt_float *axis, const mxc_shape *s,
                    int *out);

/* `s` seen around `axis` as (outer, n, inner); MXC__AXIS_NONE sees it as (1, size, 1). */
void mxc__index_view(const mxc_shape *s, int axis, int64_t *outer, int64_t *n, int64_t *inner);

/* The zero gradient MXNet gives index inputs (and argmax's, one_hot's, ...): zeroes
 * in_grad[0 .. num_in) that have a write request, on the GPU when `gpu` (a CUDA build). */
int mxc__index_zero_grads(const struct mxc__op_call *c, int num_in, bool gpu);

/* The position of the first of the n floats at v outside `r` into *first (and its value
 * into *value), or -1: on the CPU, or on the GPU of c->rctx when `gpu` (a CUDA build; v a
 * device pointer). The GPU check marks the first position in 8 bytes of the temp space
 * `temp` and waits for the stream to read it back, so an operator that needs it asks for
 * temp space and pays one synchronisation. MXC_OK, MXC_ENOMEM or MXC_EDEVICE. */
int mxc__index_find_outside_on(const struct mxc__op_call *c, bool gpu, struct mxc__resource *temp,
                               const float *v, int64_t n, struct mxc__index_range r, int64_t *first,
                               float *value);

/* ---- GPU launchers ----------------------------------------------------------------- */

/* *first = the first position of v[0 .. n) outside `r` (*value = its value), or -1, using
 * 8 bytes of device memory at `mark`; waits for `stream`. */
int mxc__index_find_outside_gpu(const float *v, int64_t n, struct mxc__index_range r, void *mark,
                                void *stream, int64_t *first, float *value);

/* out (size) (=, +=) where(cond[k / cond_inner], x[k], y[k]); cond_inner is 1 when the
 * condition has x's shape, the size of a first-axis slice when it is 1-D. */
int mxc__where_gpu(const float *cond, const float *x, const float *y, float *out, int64_t size,
                   int64_t cond_inner, int req, void *stream);

/* gx, gy (size) (=, +=) g where the condition holds, resp. does not (NULL: not wanted). */
int mxc__where_grad_gpu(const float *cond, const float *g, float *gx, float *gy, int64_t size,
                        int64_t cond_inner, int req_x, int req_y, void *stream);

/* take: out (outer, m, inner) (=, +=) data (outer, n, inner) at the m indices idx. */
int mxc__take_gpu(const float *data, const float *idx, float *out, int64_t outer, int64_t n,
                  int64_t inner, int64_t m, int mode, int req, void *stream);

/* take backward: gdata (outer, n, inner) += g (outer, m, inner) scattered to the indices,
 * with atomics. */
int mxc__take_grad_gpu(const float *g, const float *idx, float *gdata, int64_t outer, int64_t n,
                       int64_t inner, int64_t m, int mode, void *stream);

/* pick: out (outer, inner) (=, +=) data (outer, n, inner) at idx (outer, inner). */
int mxc__pick_gpu(const float *data, const float *idx, float *out, int64_t outer, int64_t n,
                  int64_t inner, int mode, int req, void *stream);

/* pick backward: gdata (outer, n, inner) (=, +=) g (outer, inner) at the picked element,
 * 0 elsewhere. */
int mxc__pick_grad_gpu(const float *g, const float *idx, float *gdata, int64_t outer, int64_t n,
                       int64_t inner, int mode, int req, void *stream);

/* one_hot: out (m, depth) (=, +=) on where idx (m) names the class, off elsewhere. */
int mxc__one_hot_gpu(const float *idx, float *out, int64_t m, int64_t depth, float on, float off,
                     int req, void *stream);

/* argmax / argmin: out (outer, inner) (=, +=) the position of the first extreme of each
 * row of x (outer, n, inner), n >= 1. */
int mxc__arg_extreme_gpu(const float *x, float *out, int64_t outer, int64_t n, int64_t inner,
                         bool is_max, int req, void *stream);

/* topk, sort, argsort on rows of x (outer, n, inner) in mxc__sort_before's order, the
 * first k kept: value and index (outer, k, inner) and mask (outer, n, inner, 1 on the
 * kept elements), each (=, +=) as its request says (NULL with MXC__REQ_NULL). */
int mxc__topk_gpu(const float *x, float *value, float *index, float *mask, int64_t outer, int64_t n,
                  int64_t inner, int64_t k, bool ascend, int req_value, int req_index, int req_mask,
                  void *stream);

/* topk and sort backward: gx (outer, n, inner) (=, +=) g (outer, k, inner) at the kept
 * elements' places, 0 elsewhere. */
int mxc__topk_grad_gpu(const float *x, const float *g, float *gx, int64_t outer, int64_t n,
                       int64_t inner, int64_t k, bool ascend, int req, void *stream);

/* gather_nd: out (count, inner) (=, +=) data (rows, inner) at the rows indices name. */
int mxc__gather_nd_gpu(struct mxc__gather_view v, const float *data, const float *idx, float *out,
                       int req, void *stream);

/* gather_nd backward: gdata (rows, inner) += g (count, inner) at those rows, with atomics. */
int mxc__gather_nd_grad_gpu(struct mxc__gather_view v, const float *g, const float *idx,
                            float *gdata, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* MXC_OPERATOR_INDEXING_H */

/*
 * operator/pooling.c — Pooling: max, average and sum over 1-D and 2-D windows (NCW /
 * NCHW), with padding, strides, global pooling and MXNet's "valid" (floor) and "full"
 * (ceil) output conventions. Backward routes each output's gradient to the first input
 * of its window equal to the output (max; recomputed from in_data and out_data) or spreads
 * it over the window (avg, sum). A 1-D problem is a 2-D one of height 1. float32,
 * row-major.
 */
#include "operator/pooling_math.h"

#include "common/parallel.h"
#include "operator/cudnn_desc.h"
#include "operator/gpu.h"

#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

struct pool_param {
    mxc_shape kernel;
    int pool_type;
    bool global_pool;
    int pooling_convention;
    mxc_shape stride, pad;
    struct mxc__opt_float p_value;
    int count_include_pad; /* -1: None (include), else the choice index; even: False */
    bool cudnn_off;
    int layout;
};

enum { CONV_FULL, CONV_VALID, CONV_SAME };

static const char *const type_choices[] = {"max", "avg", "sum", "lp", NULL};
static const char *const convention_choices[] = {"full", "valid", "same", NULL};
static const char *const bool_choices[] = {"False", "True", "0", "1", "false", "true", NULL};
static const char *const layout_choices[] = {"NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC", NULL};

#define PP struct pool_param
static const struct mxc__param pool_params[] = {
    MXC__P_TUPLE(PP, kernel, "()", "window size: (w,) or (h, w)"),
    MXC__P_ENUM(PP, pool_type, "max", type_choices, "max, avg, sum (lp: not supported)"),
    MXC__P_BOOL(PP, global_pool, "False", "pool over the whole spatial extent"),
    MXC__P_ENUM(PP, pooling_convention, "valid", convention_choices,
                "output size: valid (floor) or full (ceil); same: not supported"),
    MXC__P_TUPLE(PP, stride, "()", "stride per spatial axis (default 1)"),
    MXC__P_TUPLE(PP, pad, "()", "zero padding per spatial axis (default 0)"),
    MXC__P_OPT_FLOAT(PP, p_value, "the p of lp pooling (not supported)"),
    MXC__P_OPT_ENUM(PP, count_include_pad, bool_choices,
                    "avg: count padding in the divisor (None: True)"),
    MXC__P_BOOL(PP, cudnn_off, "False", "do not use cuDNN (ignored on CPU)"),
    MXC__P_OPT_ENUM(PP, layout, layout_choices, "data layout; NCW / NCHW (None) supported"),
};
#undef PP

static const char *const pool_inputs[] = {"data", NULL};
static const char *const pool_outputs[] = {"output", NULL};

static int64_t pick(const mxc_shape *t, int nsp, int hw, int64_t dflt) {
    if (nsp == 1 && hw == 0)
        return dflt == 0 ? 0 : 1;
    return t->ndim ? t->dims[nsp == 1 ? 0 : hw] : dflt;
}

/* Windows of k with stride s over `padded` (>= k) positions: floor, or ceil when full. */
static int64_t out_size(int64_t padded, int64_t k, int64_t s, bool full) {
    int64_t span = padded - k;
    return 1 + span / s + (full && span % s != 0);
}

/* Checks the parameters against data (N, C, [H,] W) and fills the geometry. */
static int make_pgeom(const struct pool_param *p, const mxc_shape *data, struct pgeom *g) {
    const char *op = "Pooling";
    char buf[128], buf2[128];
    if (p->pool_type == POOL_LP)
        return mxc__error(MXC_ENOTSUP,
                          "%s: pool_type lp is not supported (max, avg, sum "
                          "are)",
                          op);
    if (p->pooling_convention == CONV_SAME)
        return mxc__error(MXC_ENOTSUP,
                          "%s: pooling_convention same is not supported "
                          "(valid, full are)",
                          op);
    int nsp = p->global_pool && p->kernel.ndim == 0 ? data->ndim - 2 : p->kernel.ndim;
    if (nsp == 3)
        return mxc__error(MXC_ENOTSUP, "%s: 3-D pooling is not supported (1-D and 2-D are)", op);
    if (nsp != 1 && nsp != 2)
        return mxc__error(MXC_EINVAL, "%s: kernel must have 1 or 2 axes, not %d%s", op,
                          p->kernel.ndim, p->kernel.ndim ? "" : " (or set global_pool)");
    if (data->ndim != nsp + 2)
        return mxc__error(MXC_ESHAPE, "%s: data has shape %s but %d-D pooling needs %d axes", op,
                          mxc__shape_str(data, buf, sizeof buf), nsp, nsp + 2);
    const mxc_shape *tuples[] = {&p->stride, &p->pad};
    static const char *const names[] = {"stride", "pad"};
    for (int t = 0; t < 2; t++) {
        if (tuples[t]->ndim != 0 && tuples[t]->ndim != nsp)
            return mxc__error(MXC_EINVAL, "%s: %s has %d axes but the pooling has %d", op, names[t],
                              tuples[t]->ndim, nsp);
        for (int i = 0; i < tuples[t]->ndim; i++)
            if (tuples[t]->dims[i] < (t == 0 ? 1 : 0))
                return mxc__error(MXC_EINVAL, "%s: %s[%d] = %lld is out of range", op, names[t], i,
                                  (long long)tuples[t]->dims[i]);
    }
    int want = nsp == 1 ? 0 : 1; /* NCW, NCHW */
    if (p->layout >= 0 && p->layout != want)
        return mxc__error(MXC_ENOTSUP, "%s: layout %s is not supported (only %s)", op,
                          layout_choices[p->layout], layout_choices[want]);
    struct pgeom q;
    q.planes = data->dims[0] * data->dims[1];
    q.ih = nsp == 1 ? 1 : data->dims[2];
    q.iw = data->dims[nsp + 1];
    if (p->global_pool) {
        q.kh = q.ih, q.kw = q.iw, q.sh = q.sw = 1, q.ph = q.pw = 0;
        q.oh = q.ow = 1;
        *g = q;
        return MXC_OK;
    }
    q.kh = pick(&p->kernel, nsp, 0, 1);
    q.kw = pick(&p->kernel, nsp, 1, 1);
    q.sh = pick(&p->stride, nsp, 0, 1);
    q.sw = pick(&p->stride, nsp, 1, 1);
    q.ph = pick(&p->pad, nsp, 0, 0);
    q.pw = pick(&p->pad, nsp, 1, 0);
    if (q.kh < 1 || q.kw < 1)
        return mxc__error(MXC_EINVAL, "%s: kernel sizes must be positive", op);
    int64_t hp, wp; /* the padded input */
    if (!mxc__mul_add(q.ih, 2, q.ph, &hp) || !mxc__mul_add(q.iw, 2, q.pw, &wp))
        return mxc__error(MXC_ESHAPE, "%s: data %s padded by %s has sizes beyond int64", op,
                          mxc__shape_str(data, buf, sizeof buf),
                          mxc__shape_str(&p->pad, buf2, sizeof buf2));
    if (q.kh > hp || q.kw > wp)
        return mxc__error(MXC_ESHAPE,
                          "%s: kernel (%lld, %lld) exceeds the padded input "
                          "(%lld, %lld)",
                          op, (long long)q.kh, (long long)q.kw, (long long)hp, (long long)wp);
    bool full = p->pooling_convention == CONV_FULL;
    q.oh = out_size(hp, q.kh, q.sh, full);
    q.ow = out_size(wp, q.kw, q.sw, full);
    *g = q;
    return MXC_OK;
}

/* data (N, C, [H,] W) -> out (N, C, [OH,] OW) */
static int pool_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                      mxc_shape *aux, int num_aux) {
    const struct pool_param *p = params;
    if (in[0].ndim == 0)
        return MXC_OK;
    struct pgeom g;
    int rc = make_pgeom(p, &in[0], &g);
    if (rc != MXC_OK)
        return rc;
    mxc_shape o = in[0];
    o.dims[o.ndim - 1] = g.ow;
    if (o.ndim == 4)
        o.dims[2] = g.oh;
    return mxc__shape_assign(&out[0], &o, "Pooling", "output");
}

static bool include_pad(const struct pool_param *p) {
    return p->count_include_pad < 0 || p->count_include_pad % 2 == 1;
}

/* One call split over threads by planes (N * C). */
struct pool_job {
    const struct pool_param *p;
    const struct mxc__op_call *c;
    struct pgeom g;
    bool incl;
    bool fast_2x2; /* max 2x2 / stride 2, no padding, every window inside the input */
};

static bool is_fast_2x2(const struct pool_param *p, const struct pgeom *g) {
    return p->pool_type == POOL_MAX && g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 &&
           g->ph == 0 && g->pw == 0 && 2 * g->oh <= g->ih && 2 * g->ow <= g->iw;
}

static int pool_job_make(const struct mxc__op_call *c, struct pool_job *j) {
    j->p = c->params;
    j->c = c;
    j->incl = include_pad(j->p);
    int rc = make_pgeom(j->p, &c->in_data[0].shape, &j->g);
    j->fast_2x2 = rc == MXC_OK && is_fast_2x2(j->p, &j->g);
    return rc;
}

/* y of one plane for max 2x2 / stride 2: the maximum of each input row pair's column
 * pairs, branch-free so that the row loop vectorises. */
static void max2x2_forward_plane(const struct pgeom *g, const float *restrict x, float *restrict y,
                                 int req) {
    bool add = req == MXC__REQ_ADD;
    for (int64_t oy = 0; oy < g->oh; oy++) {
        const float *x0 = x + 2 * oy * g->iw, *x1 = x0 + g->iw;
        float *yr = y + oy * g->ow;
        for (int64_t ox = 0; ox < g->ow; ox++) {
            float a = x0[2 * ox] > x0[2 * ox + 1] ? x0[2 * ox] : x0[2 * ox + 1];
            float b = x1[2 * ox] > x1[2 * ox + 1] ? x1[2 * ox] : x1[2 * ox + 1];
            float v = a > b ? a : b;
            yr[ox] = add ? yr[ox] + v : v;
        }
    }
}

/* Planes [p0, p1) of the forward pass. */
static void pool_forward_planes(void *arg, int64_t p0, int64_t p1) {
    const struct pool_job *jb = arg;
    const struct pgeom *g = &jb->g;
    int req = jb->c->req[0], type = jb->p->pool_type;
    for (int64_t pl = p0; pl < p1; pl++) {
        const float *x = (const float *)jb->c->in_data[0].data + pl * g->ih * g->iw;
        float *y = (float *)jb->c->out_data[0].data + pl * g->oh * g->ow;
        if (jb->fast_2x2) {
            max2x2_forward_plane(g, x, y, req);
            continue;
        }
        for (int64_t oy = 0; oy < g->oh; oy++) {
            for (int64_t ox = 0; ox < g->ow; ox++) {
                float v = pool_value(x, g->iw, pool_window_at(g, jb->incl, oy, ox), type);
                float *d = &y[oy * g->ow + ox];
                *d = req == MXC__REQ_ADD ? *d + v : v;
            }
        }
    }
}

/* One row pair of max 2x2 / stride 2 backward, outputs [ox0, ox1): the gradient of each
 * output goes to the first of its four inputs (scan order) equal to it, the others get 0
 * (or keep their value under an add request). Branch-free. */
static void max2x2_route(const float *x0, const float *x1, const float *yr, const float *gr,
                         float *d0, float *d1, int64_t ox0, int64_t ox1, bool add) {
    for (int64_t ox = ox0; ox < ox1; ox++) {
        float m = yr[ox], gv = gr[ox];
        float a = x0[2 * ox], b = x0[2 * ox + 1], c = x1[2 * ox];
        bool f0 = a == m, f1 = !f0 && b == m, f2 = !f0 && !f1 && c == m;
        bool f3 = !f0 && !f1 && !f2;
        float v0 = f0 ? gv : 0.0f, v1 = f1 ? gv : 0.0f, v2 = f2 ? gv : 0.0f;
        float v3 = f3 ? gv : 0.0f;
        d0[2 * ox] = add ? d0[2 * ox] + v0 : v0;
        d0[2 * ox + 1] = add ? d0[2 * ox + 1] + v1 : v1;
        d1[2 * ox] = add ? d1[2 * ox] + v2 : v2;
        d1[2 * ox + 1] = add ? d1[2 * ox + 1] + v3 : v3;
    }
}

#ifdef __SSE2__
/* max2x2_route for four outputs at a time with SSE2 (every x86-64 has it): the row pair's
 * windows de-interleaved into their four corners, the first-match masks built from three
 * comparisons, the results interleaved back. LeNet's rows are 12 and 4 outputs wide, too
 * short for the compiler's 8-wide loop. Returns the first output it left undone. */
static int64_t max2x2_route4(const float *x0, const float *x1, const float *yr, const float *gr,
                             float *d0, float *d1, int64_t ow, bool add) {
    int64_t ox = 0;
    for (; ox + 4 <= ow; ox += 4) {
        __m128 r0a = _mm_loadu_ps(x0 + 2 * ox), r0b = _mm_loadu_ps(x0 + 2 * ox + 4);
        __m128 r1a = _mm_loadu_ps(x1 + 2 * ox), r1b = _mm_loadu_ps(x1 + 2 * ox + 4);
        __m128 m = _mm_loadu_ps(yr + ox), gv = _mm_loadu_ps(gr + ox);
        __m128 top_left = _mm_shuffle_ps(r0a, r0b, _MM_SHUFFLE(2, 0, 2, 0));
        __m128 top_right = _mm_shuffle_ps(r0a, r0b, _MM_SHUFFLE(3, 1, 3, 1));
        __m128 bottom_left = _mm_shuffle_ps(r1a, r1b, _MM_SHUFFLE(2, 0, 2, 0));
        __m128 f0 = _mm_cmpeq_ps(top_left, m);
        __m128 taken = f0;
        __m128 f1 = _mm_andnot_ps(taken, _mm_cmpeq_ps(top_right, m));
        taken = _mm_or_ps(taken, f1);
        __m128 f2 = _mm_andnot_ps(taken, _mm_cmpeq_ps(bottom_left, m));
        taken = _mm_or_ps(taken, f2);
        __m128 v0 = _mm_and_ps(f0, gv), v1 = _mm_and_ps(f1, gv), v2 = _mm_and_ps(f2, gv);
        __m128 v3 = _mm_andnot_ps(taken, gv);
        __m128 top_a = _mm_unpacklo_ps(v0, v1), top_b = _mm_unpackhi_ps(v0, v1);
        __m128 bottom_a = _mm_unpacklo_ps(v2, v3), bottom_b = _mm_unpackhi_ps(v2, v3);
        if (add) {
            top_a = _mm_add_ps(top_a, _mm_loadu_ps(d0 + 2 * ox));
            top_b = _mm_add_ps(top_b, _mm_loadu_ps(d0 + 2 * ox + 4));
            bottom_a = _mm_add_ps(bottom_a, _mm_loadu_ps(d1 + 2 * ox));
            bottom_b = _mm_add_ps(bottom_b, _mm_loadu_ps(d1 + 2 * ox + 4));
        }
        _mm_storeu_ps(d0 + 2 * ox, top_a);
        _mm_storeu_ps(d0 + 2 * ox + 4, top_b);
        _mm_storeu_ps(d1 + 2 * ox, bottom_a);
        _mm_storeu_ps(d1 + 2 * ox + 4, bottom_b);
    }
    return ox;
}
#endif

/* dx of one plane for max 2x2 / stride 2, row pair by row pair; every covered input is
 * written, so a write request needs no separate zeroing (only the uncovered edge, when
 * the input is odd). */
static void max2x2_backward_plane(const struct pgeom *g, const float *x, const float *y,
                                  const float *dy, float *dx, int req) {
    bool add = req == MXC__REQ_ADD;
    if (!add && (2 * g->oh < g->ih || 2 * g->ow < g->iw))
        memset(dx, 0, (size_t)(g->ih * g->iw) * sizeof(float));
    for (int64_t oy = 0; oy < g->oh; oy++) {
        const float *x0 = x + 2 * oy * g->iw, *x1 = x0 + g->iw;
        float *d0 = dx + 2 * oy * g->iw, *d1 = d0 + g->iw;
        const float *yr = y + oy * g->ow, *gr = dy + oy * g->ow;
        int64_t done = 0;
#ifdef __SSE2__
        done = max2x2_route4(x0, x1, yr, gr, d0, d1, g->ow, add);
#endif
        max2x2_route(x0, x1, yr, gr, d0, d1, done, g->ow, add);
    }
}

/* Planes [p0, p1) of the backward pass: max routes each output's gradient to the first
 * input of its window equal to the output (scan order), avg and sum spread it. */
static void pool_backward_planes(void *arg, int64_t p0, int64_t p1) {
    const struct pool_job *jb = arg;
    const struct pgeom *g = &jb->g;
    const struct mxc__op_call *c = jb->c;
    int type = jb->p->pool_type;
    for (int64_t pl = p0; pl < p1; pl++) {
        const float *x = (const float *)c->in_data[0].data + pl * g->ih * g->iw;
        const float *y = (const float *)c->out_data[0].data + pl * g->oh * g->ow;
        const float *dy = (const float *)c->out_grad[0].data + pl * g->oh * g->ow;
        float *dx = (float *)c->in_grad[0].data + pl * g->ih * g->iw;
        if (jb->fast_2x2) {
            max2x2_backward_plane(g, x, y, dy, dx, c->req[0]);
            continue;
        }
        if (c->req[0] != MXC__REQ_ADD)
            memset(dx, 0, (size_t)(g->ih * g->iw) * sizeof(float));
        for (int64_t oy = 0; oy < g->oh; oy++) {
            for (int64_t ox = 0; ox < g->ow; ox++) {
                float gv = dy[oy * g->ow + ox], m = y[oy * g->ow + ox];
                struct pool_window w = pool_window_at(g, jb->incl, oy, ox);
                if (type == POOL_MAX) {
                    int64_t first = pool_first_max(x, g->iw, w, m);
                    if (first >= 0)
                        dx[first] += gv;
                    continue;
                }
                if (type == POOL_AVG)
                    gv /= w.divisor;
                for (int64_t i = w.h0; i < w.h1; i++)
                    for (int64_t k = w.w0; k < w.w1; k++)
                        dx[i * g->iw + k] += gv;
            }
        }
    }
}

/* Planes per thread: a LeNet plane is a few hundred outputs. */
#define POOL_GRAIN 16

static int pool_forward(const struct mxc__op_call *c) {
    struct pool_job j;
    int rc = c->req[0] == MXC__REQ_NULL ? MXC_OK : pool_job_make(c, &j);
    if (rc == MXC_OK && c->req[0] != MXC__REQ_NULL)
        mxc__parallel_for(j.g.planes, POOL_GRAIN, pool_forward_planes, &j);
    return rc;
}

static int pool_backward(const struct mxc__op_call *c) {
    struct pool_job j;
    int rc = c->req[0] == MXC__REQ_NULL ? MXC_OK : pool_job_make(c, &j);
    if (rc == MXC_OK && c->req[0] != MXC__REQ_NULL)
        mxc__parallel_for(j.g.planes, POOL_GRAIN, pool_backward_planes, &j);
    return rc;
}

#ifdef MXC_USE_CUDA
#ifdef MXC_USE_CUDNN
/* Pooling through cuDNN: max and avg (count_include_pad: CUDNN_POOLING_AVERAGE_COUNT_
 * INCLUDE_PADDING, else EXCLUDE_PADDING), the planes as a (planes, 1, ih, iw) tensor (a
 * 1-D problem has ih 1). Forward: y (req) from x; backward (avg): dx (req) from dy.
 * MXC__DNN_OWN for cudnn_off, sum, a padding as large as the window, and any problem
 * whose output size cuDNN's descriptor does not give exactly (the full convention's
 * ceiling): with the same size the windows are the same (start i * s - pad, clipped to
 * the input), and every window lies inside the padded input, where both divisors agree
 * with the CPU's. Max does not propagate NaN (the CPU's max skips it). Max's backward
 * stays on the own kernel: the CPU gives each output's gradient to the first input of its
 * window equal to the maximum, and cuDNN does not say which of tied inputs it picks (ties
 * are common: windows of zeros after a relu). */
static int pool_dnn(const struct mxc__op_call *c, const struct pool_job *j, bool backward) {
    const struct pgeom *g = &j->g;
    const int req = c->req[0], type = j->p->pool_type;
    /* a padding as large as the window makes windows wholly in the padding, for which
     * what cuDNN gives is not written down */
    if (j->p->cudnn_off || (type != POOL_MAX && type != POOL_AVG) ||
        (backward && type == POOL_MAX) || g->ph >= g->kh || g->pw >= g->kw)
        return MXC__DNN_OWN;
    struct mxc__dnn_key k;
    memset(&k, 0, sizeof k);
    k.kind = MXC__DNN_POOL;
    k.p[0] = type == POOL_MAX ? CUDNN_POOLING_MAX_DETERMINISTIC
             : j->incl        ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                              : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    const int64_t xd[4] = {g->planes, 1, g->ih, g->iw}, yd[4] = {g->planes, 1, g->oh, g->ow};
    const int64_t win[4] = {g->kh, g->kw, g->sh, g->sw};
    if (!mxc__dnn_dims(k.x, xd, 4) || !mxc__dnn_dims(k.y, yd, 4) ||
        !mxc__dnn_dims(k.p + 1, win, 2) || !mxc__dnn_dims(k.p + 5, win + 2, 2))
        return MXC__DNN_OWN;
    k.p[3] = (int)g->ph, k.p[4] = (int)g->pw; /* below the window's sizes, so ints */
    const struct mxc__dnn *d;
    void *h;
    int rc = mxc__dnn_get(c->rctx, &k, &d, &h);
    if (rc != MXC_OK)
        return rc;
    const float one = 1.0f, beta = mxc__dnn_beta(req);
    const void *x = c->in_data[0].data, *y = c->out_data[0].data;
    if (!backward)
        return mxc__dnn_status(
            cudnnPoolingForward(h, d->pool, &one, d->x, x, &beta, d->y, c->out_data[0].data),
            "Pooling", "cudnnPoolingForward");
    return mxc__dnn_status(cudnnPoolingBackward(h, d->pool, &one, d->y, y, d->y,
                                                c->out_grad[0].data, d->x, x, &beta, d->x,
                                                c->in_grad[0].data),
                           "Pooling", "cudnnPoolingBackward");
}
#endif

/* The GPU kernels: the geometry here, cuDNN where it takes the problem (a build with
 * USE_CUDNN), else the launches in operator/pooling_gpu.cu. */
static int pool_gpu(const struct mxc__op_call *c, bool backward) {
    struct pool_job j;
    if (c->req[0] == MXC__REQ_NULL)
        return MXC_OK;
    int rc = pool_job_make(c, &j);
    if (rc != MXC_OK)
        return rc;
#ifdef MXC_USE_CUDNN
    rc = pool_dnn(c, &j, backward);
    if (rc != MXC__DNN_OWN)
        return rc;
#endif
    const void *x = c->in_data[0].data, *y = c->out_data[0].data;
    if (!backward)
        return mxc__pool_forward_gpu(&j.g, j.p->pool_type, j.incl, x, c->out_data[0].data,
                                     c->req[0], c->rctx->stream);
    return mxc__pool_backward_gpu(&j.g, j.p->pool_type, j.incl, x, y, c->out_grad[0].data,
                                  c->in_grad[0].data, c->req[0], c->rctx->stream);
}

static int pool_forward_gpu(const struct mxc__op_call *c) { return pool_gpu(c, false); }
static int pool_backward_gpu(const struct mxc__op_call *c) { return pool_gpu(c, true); }
#endif

const struct mxc__op_def mxc__op_Pooling = {
    .name = "Pooling",
    .description = "max / average / sum pooling over 1-D or 2-D windows",
    .param_size = sizeof(struct pool_param),
    .params = pool_params,
    .num_params = (int)MXC_ARRAY_SIZE(pool_params),
    .inputs = pool_inputs,
    .outputs = pool_outputs,
    .infer_shape = pool_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA | MXC__DEP_OUT_DATA,
    .forward_cpu = pool_forward,
    .backward_cpu = pool_backward,
    .forward_gpu = MXC__GPU(pool_forward_gpu),
    .backward_gpu = MXC__GPU(pool_backward_gpu),
};

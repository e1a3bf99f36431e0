/*
 * operator/rnn_math.h — what the fused RNN operator's CPU kernels (operator/rnn.c) and GPU
 * kernels (operator/rnn_gpu.cu) share: the gate arithmetic of one time step for one element
 * (batch row n, hidden unit j), forward and backward, as MXC__HD functions, and the table of
 * device primitives (products, copies, sums, the step, dropout) through which rnn.c drives
 * both devices with one description of the layers, directions and time steps.
 *
 * A step's gate pre-activations are a_k = xp_k + bx_k + hp_k + bh_k for gate k (H units
 * each, G gates in MXNet's and cuDNN's order): xp is the input projection W_x x_t (computed
 * for the whole sequence at once), hp the recurrent one W_h h_{t-1}, bx and bh the two biases.
 *   rnn_relu, rnn_tanh (G = 1): h = act(a)
 *   lstm (G = 4: i, f, g, o):   c = f c_{t-1} + i g; h = o tanh(c)    (i, f, o sigmoid, g tanh)
 *   gru  (G = 3: r, z, n):      n = tanh(xp_n + bx_n + r (hp_n + bh_n)); h = (1 - z) n + z h_{t-1}
 * The forward saves the gate activations (and c, and GRU's hp_n + bh_n) for the backward.
 */
#ifndef MXC_OPERATOR_RNN_MATH_H
#define MXC_OPERATOR_RNN_MATH_H

#include "common/hd.h"
#include "mxc/engine.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { MXC__RNN_RELU, MXC__RNN_TANH, MXC__RNN_LSTM, MXC__RNN_GRU };

/* Gates per mode: 1, 1, 4, 3. */
static inline MXC__HD int mxc__rnn_gates(int mode) {
    return mode == MXC__RNN_LSTM ? 4 : mode == MXC__RNN_GRU ? 3 : 1;
}

/* One time step of one layer and direction over a batch of n rows. Row r of a (rows, G*H)
 * matrix starts at r * G * H; h_prev, h and dy are rows of `ld` floats (a direction's H
 * columns inside a layer's (N, D*H) output, or a state slice (N, H)); the rest is packed. */
struct mxc__rnn_step {
    int mode;
    int64_t h; /* hidden units */
    /* forward */
    const float *xp, *hp;    /* (N, G*H) the input and recurrent projections */
    const float *bx, *bh;    /* (G*H) */
    const float *h_prev;     /* (N, ld_prev) */
    const float *c_prev;     /* (N, H) lstm */
    float *gates;            /* (N, G*H) activations, saved for the backward */
    float *c;                /* (N, H) lstm: the cell */
    float *hn;               /* (N, H) gru: hp_n + bh_n */
    float *out;              /* (N, ld_out) h */
    int64_t ld_prev, ld_out; /* row strides of h_prev and out (and dy) */
    /* backward: reads gates, c, hn, h_prev, c_prev as the forward wrote them */
    const float *dy; /* (N, ld_out) the gradient of this step's h from above */
    float *dh;       /* (N, H) in: from later steps; out: the direct part for h_{t-1} */
    float *dc;       /* (N, H) lstm, in: from later steps; out: for c_{t-1} */
    float *dax;      /* (N, G*H) the pre-activation gradient for the input side */
    float *dah;      /* (N, G*H) ... for the recurrent side (differs in gru's n) */
};

static inline MXC__HD float mxc__rnn_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The forward of element (row r, unit j). */
static inline MXC__HD void mxc__rnn_step_forward(const struct mxc__rnn_step *s, int64_t r,
                                                 int64_t j) {
    const int64_t H = s->h, gh = mxc__rnn_gates(s->mode) * H, o = r * gh + j;
    const float *xp = s->xp + o, *hp = s->hp + o, *bx = s->bx + j, *bh = s->bh + j;
    float *g = s->gates + o, h;
#define MXC__RNN_A(k) (xp[(k)*H] + bx[(k)*H] + hp[(k)*H] + bh[(k)*H])
    if (s->mode == MXC__RNN_LSTM) {
        float i = mxc__rnn_sigmoid(MXC__RNN_A(0)), f = mxc__rnn_sigmoid(MXC__RNN_A(1));
        float gg = tanhf(MXC__RNN_A(2)), og = mxc__rnn_sigmoid(MXC__RNN_A(3));
        float c = f * s->c_prev[r * H + j] + i * gg;
        g[0] = i, g[H] = f, g[2 * H] = gg, g[3 * H] = og;
        s->c[r * H + j] = c;
        h = og * tanhf(c);
    } else if (s->mode == MXC__RNN_GRU) {
        float rg = mxc__rnn_sigmoid(MXC__RNN_A(0)), z = mxc__rnn_sigmoid(MXC__RNN_A(1));
        float hn = hp[2 * H] + bh[2 * H];
        float n = tanhf(xp[2 * H] + bx[2 * H] + rg * hn);
        g[0] = rg, g[H] = z, g[2 * H] = n;
        s->hn[r * H + j] = hn;
        h = (1.0f - z) * n + z * s->h_prev[r * s->ld_prev + j];
    } else {
        float a = MXC__RNN_A(0);
        h = s->mode == MXC__RNN_RELU ? (a > 0.0f ? a : 0.0f) : tanhf(a);
        g[0] = h;
    }
#undef MXC__RNN_A
    s->out[r * s->ld_out + j] = h;
}

/* The backward of element (r, j): the gradient of h_t is dy + dh (from step t + 1). */
static inline MXC__HD void mxc__rnn_step_backward(const struct mxc__rnn_step *s, int64_t r,
                                                  int64_t j) {
    const int64_t H = s->h, gh = mxc__rnn_gates(s->mode) * H, o = r * gh + j, e = r * H + j;
    const float *g = s->gates + o;
    float *dax = s->dax + o, *dah = s->dah + o;
    float dh = s->dy[r * s->ld_out + j] + s->dh[e];
    if (s->mode == MXC__RNN_LSTM) {
        float i = g[0], f = g[H], gg = g[2 * H], og = g[3 * H], tc = tanhf(s->c[e]);
        float dc = s->dc[e] + dh * og * (1.0f - tc * tc);
        dax[0] = dah[0] = dc * gg * i * (1.0f - i);
        dax[H] = dah[H] = dc * s->c_prev[e] * f * (1.0f - f);
        dax[2 * H] = dah[2 * H] = dc * i * (1.0f - gg * gg);
        dax[3 * H] = dah[3 * H] = dh * tc * og * (1.0f - og);
        s->dc[e] = dc * f;
        s->dh[e] = 0.0f;
    } else if (s->mode == MXC__RNN_GRU) {
        float rg = g[0], z = g[H], n = g[2 * H], hp = s->h_prev[r * s->ld_prev + j];
        float dn = dh * (1.0f - z) * (1.0f - n * n);
        dax[0] = dah[0] = dn * s->hn[e] * rg * (1.0f - rg);
        dax[H] = dah[H] = dh * (hp - n) * z * (1.0f - z);
        dax[2 * H] = dn;
        dah[2 * H] = dn * rg;
        s->dh[e] = dh * z;
    } else {
        float y = g[0];
        dax[0] = dah[0] = dh * (s->mode == MXC__RNN_RELU ? (y > 0.0f ? 1.0f : 0.0f) : 1.0f - y * y);
        s->dh[e] = 0.0f;
    }
}

struct mxc__resource;

/* The primitives of one device; each enqueues on rctx's stream (a GPU) or runs (the CPU)
 * and returns MXC_OK or an error code with a message. Pointers are the device's. */
struct mxc__rnn_ops {
    /* c (m, n) = op(a) op(b) + beta c, row-major with row strides lda, ldb, ldc (as
     * stored); k == 0 gives beta c. */
    int (*gemm)(const mxc_run_ctx *rctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                int64_t ldc);
    /* dst (rows, cols; stride ldd) =, += src (stride lds) as the request says */
    int (*copy2d)(const mxc_run_ctx *rctx, int req, int64_t rows, int64_t cols, const float *src,
                  int64_t lds, float *dst, int64_t ldd);
    int (*zero)(const mxc_run_ctx *rctx, float *p, int64_t n);
    /* g (n) += the sum of the rows of x (m, n) */
    int (*col_sums)(const mxc_run_ctx *rctx, int64_t m, int64_t n, const float *x, float *g);
    /* every element of a step over `rows` rows, forward or backward */
    int (*step)(const mxc_run_ctx *rctx, const struct mxc__rnn_step *s, int64_t rows,
                bool backward);
    /* mask (n) = dropout masks (0 or 1 / keep) drawn from the random resource */
    int (*dropout_mask)(const mxc_run_ctx *rctx, struct mxc__resource *rng, float *mask, int64_t n,
                        float keep);
    /* o (n) = a * mask */
    int (*mul)(const mxc_run_ctx *rctx, float *o, const float *a, const float *mask, int64_t n);
};

#ifdef MXC_USE_CUDA
extern const struct mxc__rnn_ops mxc__rnn_ops_gpu; /* operator/rnn_gpu.cu */
#endif

#ifdef __cplusplus
}
#endif

#endif /* MXC_OPERATOR_RNN_MATH_H */

/*
 * operator/rnn.c — RNN, MXNet's fused recurrent layer stack (cuDNN's semantics): modes
 * rnn_relu, rnn_tanh, lstm and gru, num_layers layers, each uni- or bidirectional, over data
 * (T, N, I) with initial states state (L*D, N, H) (and state_cell for lstm), giving out
 * (T, N, D*H) and, with state_outputs, the last states hy (and cy).
 *
 * The parameters are one flat vector in MXNet's layout: every weight first — layer by layer,
 * direction by direction, W_x (G*H, in) then W_h (G*H, H) — then every bias the same way,
 * b_x (G*H) then b_h (G*H); the gates in cuDNN's order (operator/rnn_math.h). A layer's
 * input is data for the first layer and the previous layer's output (T, N, D*H) after it;
 * the reverse direction runs from t = T-1 down to 0 and fills the second H columns.
 *
 * Forward, per layer and direction: one product projects the whole sequence (T*N rows) onto
 * the gates, then each step multiplies h_{t-1} by W_h and applies the gate arithmetic of
 * rnn_math.h. Everything the backward needs (each layer's output, the gate activations, the
 * cells, GRU's recurrent n term, the dropout masks) goes into the hidden output `reserve`, so
 * the backward (back-propagation through time) reruns nothing. In training, p drops elements
 * of every layer's output but the last before the next layer reads it (as Dropout does, from
 * the random resource). One driver serves both devices through the primitives table of
 * rnn_math.h: here on the CPU (mxc__sgemm), on a GPU in operator/rnn_gpu.cu (cuBLAS).
 * float32. use_sequence_length, projection_size and the LSTM state clipping are refused
 * (MXC_ENOTSUP): MXNet 1.9.1's CPU operator refuses the clipping too.
 */
#include "operator/op.h"

#include "common/gemm.h"
#include "operator/dropout.h"
#include "operator/gpu.h"
#include "operator/rnn_math.h"

#include <string.h>

struct rnn_param {
    int state_size;
    int num_layers;
    bool bidirectional;
    int mode;
    float p;
    bool state_outputs;
    struct mxc__opt_int projection_size;
    struct mxc__opt_float lstm_state_clip_min;
    struct mxc__opt_float lstm_state_clip_max;
    bool lstm_state_clip_nan;
    bool use_sequence_length;
};

/* in the order of MXC__RNN_RELU ... (rnn_math.h) */
static const char *const mode_choices[] = {"rnn_relu", "rnn_tanh", "lstm", "gru", NULL};

#define RP struct rnn_param
static const struct mxc__param rnn_params[] = {
    MXC__P_INT(RP, state_size, NULL, 1, 2147483647, "size of the state of each layer"),
    MXC__P_INT(RP, num_layers, NULL, 1, 2147483647, "number of stacked layers"),
    MXC__P_BOOL(RP, bidirectional, "False", "whether the layers are bidirectional"),
    MXC__P_ENUM(RP, mode, NULL, mode_choices, "the type of RNN to compute"),
    MXC__P_FLOAT(RP, p, "0", 0, 1,
                 "drop rate of the dropout on the outputs of each layer but the last"),
    MXC__P_BOOL(RP, state_outputs, "False", "whether the last states are outputs"),
    MXC__P_OPT_INT(RP, projection_size, "None", 1, 2147483647,
                   "size of the LSTM projection (not supported)"),
    MXC__P_OPT_FLOAT(RP, lstm_state_clip_min, "minimum of the LSTM cell (not supported)"),
    MXC__P_OPT_FLOAT(RP, lstm_state_clip_max, "maximum of the LSTM cell (not supported)"),
    MXC__P_BOOL(RP, lstm_state_clip_nan, "False", "clip NaN cells to min/max (not supported)"),
    MXC__P_BOOL(RP, use_sequence_length, "False",
                "take per-sequence lengths as an input (not supported)"),
};
#undef RP

static int rnn_list_inputs(const void *params, const char **names, int max) {
    const struct rnn_param *p = params;
    const char *all[5] = {"data", "parameters", "state"};
    int n = 3;
    if (p->mode == MXC__RNN_LSTM)
        all[n++] = "state_cell";
    if (p->use_sequence_length)
        all[n++] = "sequence_length";
    for (int i = 0; i < n && i < max; i++)
        names[i] = all[i];
    return n;
}

/* out, then hy (and cy for lstm) with state_outputs, then the hidden reserve */
static int rnn_visible_outputs(const void *params) {
    const struct rnn_param *p = params;
    return 1 + (p->state_outputs ? (p->mode == MXC__RNN_LSTM ? 2 : 1) : 0);
}

static int rnn_list_outputs(const void *params, const char **names, int max) {
    static const char *const all[] = {"out", "hy", "cy"};
    int n = rnn_visible_outputs(params);
    for (int i = 0; i < n && i < max; i++)
        names[i] = all[i];
    if (n < max)
        names[n] = "reserve";
    return n + 1;
}

/* ---- Geometry ------------------------------------------------------------------------ */

struct rnn_geom {
    int mode;
    int64_t T, N, I, H, L, D;
    int64_t gh;    /* G * H: the gate rows of one direction */
    bool dropout;  /* p > 0: the reserve holds masks and dropped outputs */
    int64_t param; /* elements of the parameter vector */
    int64_t reserve;
};

static int64_t layer_in(const struct rnn_geom *g, int64_t l) { return l == 0 ? g->I : g->D * g->H; }

/* Fills g from the parameters and data (T, N, I); false when a size overflows int64. */
static bool rnn_geom(const struct rnn_param *p, const mxc_shape *data, struct rnn_geom *g) {
    g->mode = p->mode;
    g->T = data->dims[0], g->N = data->dims[1], g->I = data->dims[2];
    g->H = p->state_size, g->L = p->num_layers, g->D = p->bidirectional ? 2 : 1;
    g->gh = mxc__rnn_gates(p->mode) * g->H;
    g->dropout = p->p > 0.0f;
    /* bounded in doubles first, so the exact sums below cannot overflow */
    double tn = (double)g->T * (double)g->N, dh = (double)(g->D * g->H);
    double in_max = (double)g->I > dh ? (double)g->I : dh;
    double est = (double)g->L * g->D * g->gh * (in_max + g->H + 2) +
                 (double)g->L * tn * (dh * 3 + g->D * (g->gh + 2.0 * g->H));
    if (est > 4e18)
        return false;
    g->param = g->reserve = 0;
    int64_t lstm = g->mode == MXC__RNN_LSTM, gru = g->mode == MXC__RNN_GRU;
    for (int64_t l = 0; l < g->L; l++) {
        g->param += g->D * g->gh * (layer_in(g, l) + g->H + 2);
        g->reserve += g->T * g->N * (g->D * g->H + g->D * (g->gh + (lstm + gru) * g->H));
        if (g->dropout && l < g->L - 1)
            g->reserve += 2 * g->T * g->N * g->D * g->H;
    }
    return true;
}

/* Offsets in the parameter vector of layer l, direction d. */
struct rnn_offsets {
    int64_t wx, wh, bx, bh;
};

static struct rnn_offsets rnn_offsets(const struct rnn_geom *g, int64_t l, int64_t d) {
    int64_t weights = 0, at = 0;
    for (int64_t k = 0; k < g->L; k++) {
        if (k == l)
            at = weights + d * g->gh * (layer_in(g, k) + g->H);
        weights += g->D * g->gh * (layer_in(g, k) + g->H);
    }
    int64_t b = weights + (l * g->D + d) * 2 * g->gh;
    return (struct rnn_offsets){at, at + g->gh * layer_in(g, l), b, b + g->gh};
}

/* Where layer l keeps what the backward reads, in the reserve. */
struct rnn_layer_mem {
    float *y;                       /* (T, N, D*H) the layer's output */
    float *gates[2], *c[2], *hn[2]; /* per direction: (T, N, G*H), (T, N, H) */
    float *mask, *dropped;          /* (T, N, D*H) with dropout, below the last layer */
};

static struct rnn_layer_mem rnn_layer_mem(const struct rnn_geom *g, float *reserve, int64_t l) {
    struct rnn_layer_mem m = {0};
    const int64_t tn = g->T * g->N, ysz = tn * g->D * g->H;
    for (int64_t k = 0; k <= l; k++) {
        m.y = reserve, reserve += ysz;
        for (int64_t d = 0; d < g->D; d++) {
            m.gates[d] = reserve, reserve += tn * g->gh;
            m.c[d] = m.hn[d] = NULL;
            if (g->mode == MXC__RNN_LSTM)
                m.c[d] = reserve, reserve += tn * g->H;
            if (g->mode == MXC__RNN_GRU)
                m.hn[d] = reserve, reserve += tn * g->H;
        }
        m.mask = m.dropped = NULL;
        if (g->dropout && k < g->L - 1) {
            m.mask = reserve, reserve += ysz;
            m.dropped = reserve, reserve += ysz;
        }
    }
    return m;
}

/* ---- Inference ----------------------------------------------------------------------- */

static int rnn_check_params(const struct rnn_param *p) {
    const char *op = "RNN";
    if (p->use_sequence_length)
        return mxc__error(MXC_ENOTSUP, "%s: use_sequence_length = True is not supported", op);
    if (p->projection_size.has_value)
        return mxc__error(MXC_ENOTSUP, "%s: projection_size = %d is not supported (only None)", op,
                          p->projection_size.value);
    if (p->lstm_state_clip_min.has_value || p->lstm_state_clip_max.has_value)
        return mxc__error(MXC_ENOTSUP,
                          "%s: lstm_state_clip_min / lstm_state_clip_max are not supported "
                          "(MXNet clips LSTM states only with cuDNN)",
                          op);
    return MXC_OK;
}

/* data (T, N, I) gives the parameter vector's length, the states (L*D, N, H), out
 * (T, N, D*H), hy and cy, and the reserve. */
static int rnn_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                     mxc_shape *aux, int num_aux) {
    const struct rnn_param *p = params;
    const char *op = "RNN";
    char buf[128];
    (void)aux, (void)num_aux;
    int rc = rnn_check_params(p);
    if (rc != MXC_OK || in[0].ndim == 0)
        return rc; /* nothing to deduce without data */
    if (in[0].ndim != 3)
        return mxc__error(MXC_EINVAL, "%s: data must be 3-D (sequence, batch, input), not %s", op,
                          mxc__shape_str(&in[0], buf, sizeof buf));
    struct rnn_geom g;
    if (!rnn_geom(p, &in[0], &g))
        return mxc__error(MXC_EINVAL,
                          "%s: data %s with state_size %d and %d layers has too many "
                          "elements",
                          op, mxc__shape_str(&in[0], buf, sizeof buf), p->state_size,
                          p->num_layers);
    mxc_shape w = mxc_shape_make(1, &g.param);
    int64_t sd[3] = {g.L * g.D, g.N, g.H}, od[3] = {g.T, g.N, g.D * g.H};
    mxc_shape s = mxc_shape_make(3, sd), o = mxc_shape_make(3, od);
    mxc_shape r = mxc_shape_make(1, &g.reserve);
    MXC_TRY(mxc__shape_assign(&in[1], &w, op, "parameters"));
    MXC_TRY(mxc__shape_assign(&in[2], &s, op, "state"));
    if (num_in > 3)
        MXC_TRY(mxc__shape_assign(&in[3], &s, op, "state_cell"));
    MXC_TRY(mxc__shape_assign(&out[0], &o, op, "out"));
    for (int k = 1; k < num_out - 1; k++)
        MXC_TRY(mxc__shape_assign(&out[k], &s, op, k == 1 ? "hy" : "cy"));
    if (num_out > 1)
        MXC_TRY(mxc__shape_assign(&out[num_out - 1], &r, op, "reserve"));
fail:
    return rc;
}

/* ---- The driver, for either device ------------------------------------------------------ */

/* h_{t-1} (rows of *ld) and c_{t-1} for step t of layer l, direction d: the initial states
 * at the direction's first step, else the previous step's output and cell. */
static void rnn_prev(const struct rnn_geom *g, const struct rnn_layer_mem *m, const float *hx,
                     const float *cx, int64_t l, int64_t d, int64_t s, const float **h, int64_t *ld,
                     const float **c) {
    const int64_t nh = g->N * g->H;
    if (s == 0) {
        *h = hx + (l * g->D + d) * nh, *ld = g->H;
        *c = cx ? cx + (l * g->D + d) * nh : NULL;
        return;
    }
    int64_t t = d ? g->T - s : s - 1; /* the step before step s in this direction */
    *h = m->y + t * g->N * g->D * g->H + d * g->H, *ld = g->D * g->H;
    *c = cx ? m->c[d] + t * nh : NULL;
}

/* The step struct of step s (time t) of layer l, direction d, its forward fields. */
static struct mxc__rnn_step rnn_step_at(const struct rnn_geom *g, const struct rnn_layer_mem *m,
                                        const float *w, struct rnn_offsets o, const float *hx,
                                        const float *cx, int64_t l, int64_t d, int64_t s) {
    const int64_t t = d ? g->T - 1 - s : s, nh = g->N * g->H;
    struct mxc__rnn_step st = {.mode = g->mode, .h = g->H, .bx = w + o.bx, .bh = w + o.bh};
    rnn_prev(g, m, hx, cx, l, d, s, &st.h_prev, &st.ld_prev, &st.c_prev);
    st.gates = m->gates[d] + t * g->N * g->gh;
    st.c = m->c[d] ? m->c[d] + t * nh : NULL;
    st.hn = m->hn[d] ? m->hn[d] + t * nh : NULL;
    st.out = m->y + t * g->N * g->D * g->H + d * g->H;
    st.ld_out = g->D * g->H;
    return st;
}

/* The input of layer l: data, or the previous layer's output (after dropout in training). */
static const float *rnn_layer_input(const struct rnn_geom *g, float *reserve, const float *x,
                                    int64_t l, bool drop) {
    if (l == 0)
        return x;
    struct rnn_layer_mem below = rnn_layer_mem(g, reserve, l - 1);
    return drop ? below.dropped : below.y;
}

/* The reserve: the hidden output when the caller keeps it, else temp space after `ws`. */
static float *rnn_reserve(const struct mxc__op_call *c, float *ws_end) {
    int k = c->num_out - 1;
    bool kept = c->req[k] == MXC__REQ_WRITE || c->req[k] == MXC__REQ_INPLACE;
    return kept ? c->out_data[k].data : ws_end;
}

/* The geometry of a call and its inputs: data, parameters, state, state_cell (NULL but
 * for lstm). */
static void rnn_inputs(const struct mxc__op_call *c, struct rnn_geom *g, const float **x,
                       const float **w, const float **hx, const float **cx) {
    rnn_geom(c->params, &c->in_data[0].shape, g);
    *x = c->in_data[0].data, *w = c->in_data[1].data, *hx = c->in_data[2].data;
    *cx = g->mode == MXC__RNN_LSTM ? c->in_data[3].data : NULL;
}

static int rnn_forward_run(const struct mxc__op_call *c, const struct mxc__rnn_ops *ops) {
    const struct rnn_param *p = c->params;
    const mxc_run_ctx *rctx = c->rctx;
    struct rnn_geom g;
    const float *x, *w, *hx, *cx;
    rnn_inputs(c, &g, &x, &w, &hx, &cx);
    const bool drop = g.dropout && c->is_train;
    const int64_t tn = g.T * g.N, dh = g.D * g.H;
    int rc = MXC_OK;
    /* temp: the sequence's input projection, one step's recurrent one, maybe the reserve */
    int64_t ws_n = tn * g.gh + g.N * g.gh;
    float *ws;
    MXC_TRY(mxc__resource_temp(c->resources[0], (size_t)(ws_n + g.reserve + 1) * sizeof(float),
                               (void **)&ws));
    float *xp = ws, *hp = ws + tn * g.gh, *reserve = rnn_reserve(c, ws + ws_n);
    for (int64_t l = 0; l < g.L; l++) {
        struct rnn_layer_mem m = rnn_layer_mem(&g, reserve, l);
        const float *in = rnn_layer_input(&g, reserve, x, l, drop);
        const int64_t ni = layer_in(&g, l);
        for (int64_t d = 0; d < g.D; d++) {
            struct rnn_offsets o = rnn_offsets(&g, l, d);
            MXC_TRY(
                ops->gemm(rctx, false, true, tn, g.gh, ni, in, ni, w + o.wx, ni, 0.0f, xp, g.gh));
            for (int64_t s = 0; s < g.T; s++) {
                struct mxc__rnn_step st = rnn_step_at(&g, &m, w, o, hx, cx, l, d, s);
                const int64_t t = d ? g.T - 1 - s : s;
                MXC_TRY(ops->gemm(rctx, false, true, g.N, g.gh, g.H, st.h_prev, st.ld_prev,
                                  w + o.wh, g.H, 0.0f, hp, g.gh));
                st.xp = xp + t * g.N * g.gh, st.hp = hp;
                MXC_TRY(ops->step(rctx, &st, g.N, false));
            }
        }
        if (drop && l < g.L - 1) {
            MXC_TRY(ops->dropout_mask(rctx, c->resources[1], m.mask, tn * dh, 1.0f - p->p));
            MXC_TRY(ops->mul(rctx, m.dropped, m.y, m.mask, tn * dh));
        }
    }
    struct rnn_layer_mem top = rnn_layer_mem(&g, reserve, g.L - 1);
    MXC_TRY(ops->copy2d(rctx, c->req[0], tn, dh, top.y, dh, c->out_data[0].data, dh));
    if (!p->state_outputs)
        return MXC_OK;
    for (int64_t l = 0; l < g.L; l++) {
        struct rnn_layer_mem m = rnn_layer_mem(&g, reserve, l);
        for (int64_t d = 0; d < g.D; d++) {
            /* the state after the direction's last step (the initial one when T is 0) */
            const float *h, *cl;
            int64_t ld, at = (l * g.D + d) * g.N * g.H;
            rnn_prev(&g, &m, hx, cx, l, d, g.T, &h, &ld, &cl);
            MXC_TRY(ops->copy2d(rctx, c->req[1], g.N, g.H, h, ld, (float *)c->out_data[1].data + at,
                                g.H));
            if (cl)
                MXC_TRY(ops->copy2d(rctx, c->req[2], g.N, g.H, cl, g.H,
                                    (float *)c->out_data[2].data + at, g.H));
        }
    }
fail:
    return rc;
}

/* dh and dc at the direction's last step: the head gradients of hy and cy, or zeros. */
static int rnn_grad_init(const struct mxc__op_call *c, const struct rnn_geom *g,
                         const struct mxc__rnn_ops *ops, int64_t at, float *dh, float *dc) {
    const struct rnn_param *p = c->params;
    int rc = MXC_OK;
    const int64_t nh = g->N * g->H;
    float *dst[2] = {dh, dc};
    for (int k = 0; k < (dc ? 2 : 1); k++) {
        if (p->state_outputs)
            MXC_TRY(ops->copy2d(c->rctx, MXC__REQ_WRITE, 1, nh,
                                (const float *)c->out_grad[1 + k].data + at, nh, dst[k], nh));
        else
            MXC_TRY(ops->zero(c->rctx, dst[k], nh));
    }
fail:
    return rc;
}

/* Back-propagation through time, layer by layer from the top, each direction's steps in
 * reverse. dax and dah hold the pre-activation gradients of the whole sequence, so the
 * input-side products (data and W_x gradients) and the bias sums run once per direction;
 * the recurrent ones (h_{t-1} and W_h gradients) once per step. */
static int rnn_backward_run(const struct mxc__op_call *c, const struct mxc__rnn_ops *ops) {
    const mxc_run_ctx *rctx = c->rctx;
    struct rnn_geom g;
    const float *x, *w, *hx, *cx;
    rnn_inputs(c, &g, &x, &w, &hx, &cx);
    float *reserve = c->out_data[c->num_out - 1].data;
    const bool drop = g.dropout && c->is_train;
    const int64_t tn = g.T * g.N, dh_cols = g.D * g.H, nh = g.N * g.H;
    const bool want_w = c->req[1] != MXC__REQ_NULL;
    int rc = MXC_OK;
    float *ws;
    int64_t ws_n = 2 * tn * g.gh + 2 * tn * dh_cols + 2 * nh;
    MXC_TRY(mxc__resource_temp(c->resources[0], (size_t)(ws_n + 1) * sizeof(float), (void **)&ws));
    float *dax = ws, *dah = dax + tn * g.gh, *dy_buf[2] = {dah + tn * g.gh, 0};
    dy_buf[1] = dy_buf[0] + tn * dh_cols;
    float *dh = dy_buf[1] + tn * dh_cols, *dc = cx ? dh + nh : NULL;
    float *dw = c->in_grad[1].data;
    if (want_w && c->req[1] != MXC__REQ_ADD)
        MXC_TRY(ops->zero(rctx, dw, g.param)); /* every product below adds */
    const float *dy = c->out_grad[0].data;     /* the gradient of layer l's output */
    for (int64_t l = g.L - 1; l >= 0; l--) {
        struct rnn_layer_mem m = rnn_layer_mem(&g, reserve, l);
        const float *in = rnn_layer_input(&g, reserve, x, l, drop);
        const int64_t ni = layer_in(&g, l);
        /* where the input's gradient goes: the data's, or the layer below's */
        float *din = l > 0 ? dy_buf[l % 2] : c->req[0] != MXC__REQ_NULL ? c->in_grad[0].data : NULL;
        for (int64_t d = 0; d < g.D; d++) {
            struct rnn_offsets o = rnn_offsets(&g, l, d);
            const int64_t at = (l * g.D + d) * nh;
            MXC_TRY(rnn_grad_init(c, &g, ops, at, dh, dc));
            for (int64_t s = g.T - 1; s >= 0; s--) {
                struct mxc__rnn_step st = rnn_step_at(&g, &m, w, o, hx, cx, l, d, s);
                const int64_t t = d ? g.T - 1 - s : s;
                st.dy = dy + t * g.N * dh_cols + d * g.H;
                st.dh = dh, st.dc = dc;
                st.dax = dax + t * g.N * g.gh, st.dah = dah + t * g.N * g.gh;
                MXC_TRY(ops->step(rctx, &st, g.N, true));
                /* dh_{t-1} = its direct part + dah · W_h; dW_h += dahᵀ · h_{t-1} */
                MXC_TRY(ops->gemm(rctx, false, false, g.N, g.H, g.gh, st.dah, g.gh, w + o.wh, g.H,
                                  1.0f, dh, g.H));
                if (want_w)
                    MXC_TRY(ops->gemm(rctx, true, false, g.gh, g.H, g.N, st.dah, g.gh, st.h_prev,
                                      st.ld_prev, 1.0f, dw + o.wh, g.H));
            }
            if (c->req[2] != MXC__REQ_NULL)
                MXC_TRY(ops->copy2d(rctx, c->req[2], 1, nh, dh, nh,
                                    (float *)c->in_grad[2].data + at, nh));
            if (dc && c->req[3] != MXC__REQ_NULL)
                MXC_TRY(ops->copy2d(rctx, c->req[3], 1, nh, dc, nh,
                                    (float *)c->in_grad[3].data + at, nh));
            if (want_w) { /* db_x, db_h: column sums; dW_x += daxᵀ · input */
                MXC_TRY(ops->col_sums(rctx, tn, g.gh, dax, dw + o.bx));
                MXC_TRY(ops->col_sums(rctx, tn, g.gh, dah, dw + o.bh));
                MXC_TRY(ops->gemm(rctx, true, false, g.gh, ni, tn, dax, g.gh, in, ni, 1.0f,
                                  dw + o.wx, ni));
            }
            if (din) { /* d input = dax · W_x, the directions summed */
                bool add = d > 0 || (l == 0 && c->req[0] == MXC__REQ_ADD);
                MXC_TRY(ops->gemm(rctx, false, false, tn, ni, g.gh, dax, g.gh, w + o.wx, ni,
                                  add ? 1.0f : 0.0f, din, ni));
            }
        }
        if (l > 0 && drop) {
            struct rnn_layer_mem below = rnn_layer_mem(&g, reserve, l - 1);
            MXC_TRY(ops->mul(rctx, din, din, below.mask, tn * dh_cols));
        }
        dy = din;
    }
fail:
    return rc;
}

/* ---- CPU primitives ---------------------------------------------------------------------- */

static int gemm_cpu(const mxc_run_ctx *rctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                    int64_t ldc) {
    (void)rctx;
    if (m == 0 || n == 0)
        return MXC_OK;
    if (k > 0)
        mxc__sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    else if (beta == 0.0f)
        for (int64_t i = 0; i < m; i++)
            memset(c + i * ldc, 0, (size_t)n * sizeof(float));
    return MXC_OK;
}

static int copy2d_cpu(const mxc_run_ctx *rctx, int req, int64_t rows, int64_t cols,
                      const float *src, int64_t lds, float *dst, int64_t ldd) {
    (void)rctx;
    for (int64_t r = 0; r < rows; r++)
        mxc__copy_req(dst + r * ldd, src + r * lds, cols, req);
    return MXC_OK;
}

static int zero_cpu(const mxc_run_ctx *rctx, float *p, int64_t n) {
    (void)rctx;
    memset(p, 0, (size_t)n * sizeof(float));
    return MXC_OK;
}

static int col_sums_cpu(const mxc_run_ctx *rctx, int64_t m, int64_t n, const float *x, float *g) {
    (void)rctx;
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < n; j++)
            g[j] += x[r * n + j];
    return MXC_OK;
}

static int step_cpu(const mxc_run_ctx *rctx, const struct mxc__rnn_step *s, int64_t rows,
                    bool backward) {
    (void)rctx;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < s->h; j++) {
            if (backward)
                mxc__rnn_step_backward(s, r, j);
            else
                mxc__rnn_step_forward(s, r, j);
        }
    return MXC_OK;
}

static int dropout_mask_cpu(const mxc_run_ctx *rctx, struct mxc__resource *rng, float *mask,
                            int64_t n, float keep) {
    (void)rctx;
    int rc = mxc__philox_uniform(&rng->rng, mask, n, 0.0f, 1.0f);
    const float scale = mxc__dropout_scale(keep);
    for (int64_t i = 0; rc == MXC_OK && i < n; i++)
        mask[i] = mxc__dropout_mask(mask[i], keep, scale);
    return rc;
}

static int mul_cpu(const mxc_run_ctx *rctx, float *o, const float *a, const float *mask,
                   int64_t n) {
    (void)rctx;
    for (int64_t i = 0; i < n; i++)
        o[i] = a[i] * mask[i];
    return MXC_OK;
}

static const struct mxc__rnn_ops rnn_ops_cpu = {
    .gemm = gemm_cpu,
    .copy2d = copy2d_cpu,
    .zero = zero_cpu,
    .col_sums = col_sums_cpu,
    .step = step_cpu,
    .dropout_mask = dropout_mask_cpu,
    .mul = mul_cpu,
};

static int rnn_forward(const struct mxc__op_call *c) { return rnn_forward_run(c, &rnn_ops_cpu); }
static int rnn_backward(const struct mxc__op_call *c) { return rnn_backward_run(c, &rnn_ops_cpu); }

#ifdef MXC_USE_CUDA
static int rnn_forward_gpu(const struct mxc__op_call *c) {
    return rnn_forward_run(c, &mxc__rnn_ops_gpu);
}
static int rnn_backward_gpu(const struct mxc__op_call *c) {
    return rnn_backward_run(c, &mxc__rnn_ops_gpu);
}
#endif

const struct mxc__op_def mxc__op_RNN = {
    .name = "RNN",
    .description = "a stack of recurrent layers (rnn_relu, rnn_tanh, lstm, gru) over a sequence, "
                   "parameters in one flat vector (MXNet's and cuDNN's layout)",
    .param_size = sizeof(struct rnn_param),
    .params = rnn_params,
    .num_params = (int)MXC_ARRAY_SIZE(rnn_params),
    .list_inputs = rnn_list_inputs,
    .list_outputs = rnn_list_outputs,
    .visible_outputs = rnn_visible_outputs,
    .infer_shape = rnn_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA | MXC__DEP_OUT_DATA,
    .forward_resources = {MXC__RES_TEMP + 1, MXC__RES_RANDOM + 1},
    .backward_resources = {MXC__RES_TEMP + 1},
    .forward_cpu = rnn_forward,
    .backward_cpu = rnn_backward,
    .forward_gpu = MXC__GPU(rnn_forward_gpu),
    .backward_gpu = MXC__GPU(rnn_backward_gpu),
};

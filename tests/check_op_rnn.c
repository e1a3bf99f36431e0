/*
 * tests/check_op_rnn.c — the fused RNN operator (operator/rnn.c): every mode (rnn_relu,
 * rnn_tanh, lstm, gru) with 1 and 2 layers, uni- and bidirectional, with and without state
 * outputs, forward and every gradient against MXNet 1.9.1 (tests/data/ops/rnn, made by
 * scripts/gen_op_refs_rnn.py); finite-difference gradient checks with write and add-to
 * requests; gradients through the executor with some requests null; dropout between layers;
 * parameter defaults; bad parameters and shapes as error codes with messages; one run through
 * mxc_imperative_invoke and the engine.
 */
#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "operator/op.h"
#include "tests/util/op_check.h"
#include "tests/util/op_ref.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO 4

/* ---- Reference cases (as scripts/gen_op_refs_rnn.py makes them: H = 6) --------------- */

struct ref_case {
    const char *file; /* tests/data/ops/rnn/<file>.params */
    const char *mode;
    const char *layers;
    bool bidirectional, state_outputs;
};

#define REF_MODE(m)                                                               \
    {m "_l1_uni", m, "1", false, false}, {m "_l1_bi_states", m, "1", true, true}, \
        {m "_l2_uni_states", m, "2", false, true}, {                              \
        m "_l2_bi", m, "2", true, false                                           \
    }

static const struct ref_case ref_cases[] = {
    REF_MODE("rnn_relu"),
    REF_MODE("rnn_tanh"),
    REF_MODE("lstm"),
    REF_MODE("gru"),
};

static bool is_lstm(const struct ref_case *c) { return strcmp(c->mode, "lstm") == 0; }
static int ref_num_in(const struct ref_case *c) { return is_lstm(c) ? 4 : 3; }
static int ref_num_out(const struct ref_case *c) {
    return c->state_outputs ? (is_lstm(c) ? 3 : 2) : 1;
}

static struct mxct_params ref_params(const struct ref_case *c) {
    return MXCT_KV("state_size", "6", "num_layers", c->layers, "mode", c->mode, "bidirectional",
                   c->bidirectional ? "True" : "False", "state_outputs",
                   c->state_outputs ? "True" : "False");
}

static void load_all(const struct ref_case *c, const char *prefix, int n, struct mxct_tensor *t) {
    char file[256];
    snprintf(file, sizeof file, "ops/rnn/%s.params", c->file);
    mxct_ref_load_all(file, prefix, n, t);
}

/* The case as the reference helpers take it. */
static struct mxct_ref_case ref_of(const struct ref_case *c) {
    return (struct mxct_ref_case){.group = "rnn",
                                  .file = c->file,
                                  .op = "RNN",
                                  .params = ref_params(c),
                                  .num_in = ref_num_in(c),
                                  .num_out = ref_num_out(c)};
}

/* Visible outputs: shapes (the shape-inference reference, the parameter vector's length
 * included: inference must accept it) and values. */
START_TEST(test_forward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_forward(&r, true, 1e-5, 1e-5);
}
END_TEST

START_TEST(test_backward_reference) {
    struct mxct_ref_case r = ref_of(&ref_cases[_i]);
    mxct_ref_expect_backward(&r, 1e-4, 1e-5);
}
END_TEST

/* Through the executor, the data's and state's gradients not wanted, the others written:
 * the wanted ones still equal MXNet's, and the kernels write nothing for the null ones. */
START_TEST(test_bound_null_requests) {
    const struct ref_case *c = &ref_cases[11]; /* lstm_l2_bi: out only */
    ck_assert_str_eq(c->file, "lstm_l2_bi");
    struct mxct_tensor in[4], og, want[4], grads[4];
    load_all(c, "in", 4, in);
    load_all(c, "og", 1, &og);
    load_all(c, "grad", 4, want);
    const int reqs[4] = {MXC_GRAD_NULL, MXC_GRAD_WRITE, MXC_GRAD_NULL, MXC_GRAD_WRITE};
    mxct_op_bound_grads("RNN", ref_params(c), in, 4, NULL, 0, reqs, &og, grads);
    ck_assert_int_eq(grads[0].shape.ndim, 0);
    ck_assert_int_eq(grads[2].shape.ndim, 0);
    mxct_expect_close(&grads[1], want[1].data, 1e-4, 1e-5, "parameters' gradient, bound");
    mxct_expect_close(&grads[3], want[3].data, 1e-4, 1e-5, "state_cell's gradient, bound");
    mxct_tensors_free(grads, 4);
    mxct_tensors_free(want, 4);
    mxct_tensors_free(&og, 1);
    mxct_tensors_free(in, 4);
}
END_TEST

/* ---- Finite differences ------------------------------------------------------------- */

struct grad_case {
    const char *mode, *layers, *bidirectional, *state_outputs;
};

static const struct grad_case grad_cases[] = {
    {"rnn_relu", "2", "True", "True"}, {"rnn_tanh", "2", "True", "True"},
    {"lstm", "2", "True", "True"},     {"gru", "2", "True", "True"},
    {"lstm", "1", "False", "False"},   {"gru", "3", "False", "True"},
};

/* data (T 3, N 2, I 3), H 3; the parameter vector's length from shape inference */
START_TEST(test_gradients) {
    const struct grad_case *c = &grad_cases[_i];
    struct mxct_params kv =
        MXCT_KV("state_size", "3", "num_layers", c->layers, "mode", c->mode, "bidirectional",
                c->bidirectional, "state_outputs", c->state_outputs);
    mxc_shape shapes[4] = {SHAPE(3, 2, 3)}, outs[4] = {{0}};
    bool lstm = strcmp(c->mode, "lstm") == 0;
    int num_in = lstm ? 4 : 3;
    int rc = mxct_op_infer("RNN", kv, shapes, num_in, outs,
                           strcmp(c->state_outputs, "True") == 0 ? (lstm ? 4 : 3) : 2);
    ck_assert_msg(rc == MXC_OK, "%s", mxc_last_error());
    struct mxct_tensor in[4];
    for (int i = 0; i < num_in; i++)
        in[i] = mxct_tensor_random(shapes[i], i == 1 ? -0.6f : -1, i == 1 ? 0.6f : 1,
                                   40u + (unsigned)i + 7u * (unsigned)_i);
    mxct_op_gradcheck("RNN", kv, true, in, num_in, NULL, 0, 1e-2, 2e-2, 2e-3);
    mxct_tensors_free(in, num_in);
}
END_TEST

/* ---- Dropout between layers ---------------------------------------------------------- */

/* At inference p changes nothing: the p = 0 reference holds. */
START_TEST(test_dropout_inference) {
    const struct ref_case *c = &ref_cases[15]; /* gru_l2_bi */
    ck_assert_str_eq(c->file, "gru_l2_bi");
    struct mxct_tensor in[3], out[2], want;
    load_all(c, "in", 3, in);
    load_all(c, "out", 1, &want);
    struct mxct_params kv = MXCT_KV("state_size", "6", "num_layers", "2", "mode", "gru",
                                    "bidirectional", "True", "p", "0.5");
    ck_assert_int_eq(mxct_op_forward("RNN", kv, false, in, 3, NULL, out), MXC_OK);
    mxct_expect_close(&out[0], want.data, 1e-5, 1e-5, "p = 0.5 at inference vs MXNet's p = 0");
    mxct_tensors_free(out, 2);
    mxct_tensors_free(&want, 1);
    mxct_tensors_free(in, 3);
}
END_TEST

/* In training, p = 1 drops the whole first layer's output: the second layer sees zeros, so
 * out does not depend on data and no gradient reaches data or the first layer's weights;
 * the second layer's biases still get theirs. */
START_TEST(test_dropout_all) {
    struct mxct_params kv = MXCT_KV("state_size", "4", "num_layers", "2", "mode", "lstm", "p", "1");
    mxc_shape shapes[4] = {SHAPE(3, 2, 5)}, outs[2] = {{0}};
    ck_assert_int_eq(mxct_op_infer("RNN", kv, shapes, 4, outs, 2), MXC_OK);
    struct mxct_tensor in[4], out_a[2], out_b[2], grads[4];
    for (int i = 0; i < 4; i++)
        in[i] = mxct_tensor_random(shapes[i], -1, 1, 60u + (unsigned)i);
    ck_assert_int_eq(mxct_op_forward("RNN", kv, true, in, 4, NULL, out_a), MXC_OK);
    struct mxct_tensor x2 = mxct_tensor_random(shapes[0], -1, 1, 99u), keep = in[0];
    in[0] = x2;
    ck_assert_int_eq(mxct_op_forward("RNN", kv, true, in, 4, NULL, out_b), MXC_OK);
    in[0] = keep;
    mxct_expect_close(&out_b[0], out_a[0].data, 0, 0, "out with p = 1 for other data");
    struct mxct_tensor og = mxct_tensor_random(out_a[0].shape, -1, 1, 7u);
    ck_assert_int_eq(mxct_op_backward("RNN", kv, true, in, 4, NULL, &og, grads), MXC_OK);
    for (int64_t k = 0; k < mxc_shape_size(&grads[0].shape); k++)
        ck_assert_msg(grads[0].data[k] == 0.0f, "data gradient [%lld] = %g", (long long)k,
                      grads[0].data[k]);
    /* layer 0: W_x (16, 5), W_h (16, 4); its biases sit after all weights */
    const int64_t l0 = 16 * (5 + 4), l1 = 16 * (4 + 4), bias = l0 + l1;
    for (int64_t k = 0; k < l0; k++)
        ck_assert_msg(grads[1].data[k] == 0.0f, "layer 0 weight gradient [%lld] = %g", (long long)k,
                      grads[1].data[k]);
    for (int64_t k = bias; k < bias + 32; k++)
        ck_assert_msg(grads[1].data[k] == 0.0f, "layer 0 bias gradient [%lld]", (long long)k);
    double l1_bias = 0;
    for (int64_t k = bias + 32; k < bias + 64; k++)
        l1_bias += fabs(grads[1].data[k]);
    ck_assert_msg(l1_bias > 1e-3, "layer 1's bias gradient is %g", l1_bias);
    mxct_tensors_free(grads, 4);
    mxct_tensors_free(&og, 1);
    mxct_tensors_free(&x2, 1);
    mxct_tensors_free(out_a, 2);
    mxct_tensors_free(out_b, 2);
    mxct_tensors_free(in, 4);
}
END_TEST

/* p = 0.5 in training: the reserve's mask (after layer 0's output, gates and cells) holds 0
 * or 2, about half of each; out differs from inference. */
START_TEST(test_dropout_half) {
    struct mxct_params kv =
        MXCT_KV("state_size", "8", "num_layers", "2", "mode", "rnn_tanh", "p", "0.5");
    mxc_shape shapes[3] = {SHAPE(10, 8, 3)}, outs[2] = {{0}};
    ck_assert_int_eq(mxct_op_infer("RNN", kv, shapes, 3, outs, 2), MXC_OK);
    struct mxct_tensor in[3], train[2], infer[2];
    for (int i = 0; i < 3; i++)
        in[i] = mxct_tensor_random(shapes[i], -1, 1, 80u + (unsigned)i);
    ck_assert_int_eq(mxct_op_forward("RNN", kv, true, in, 3, NULL, train), MXC_OK);
    ck_assert_int_eq(mxct_op_forward("RNN", kv, false, in, 3, NULL, infer), MXC_OK);
    /* reserve: layer 0's y (640) and gates (640), then its mask (640) */
    const int64_t n = 10 * 8 * 8, at = 2 * n;
    int zeros = 0;
    for (int64_t k = at; k < at + n; k++) {
        float m = train[1].data[k];
        ck_assert_msg(m == 0.0f || m == 2.0f, "mask [%lld] = %g", (long long)k, m);
        zeros += m == 0.0f;
    }
    ck_assert_msg(zeros > n / 2 - 80 && zeros < n / 2 + 80, "%d of %lld dropped", zeros,
                  (long long)n);
    double diff = 0;
    for (int64_t k = 0; k < mxc_shape_size(&train[0].shape); k++)
        diff += fabs(train[0].data[k] - infer[0].data[k]);
    ck_assert_msg(diff > 1e-2, "dropout changed nothing (%g)", diff);
    mxct_tensors_free(train, 2);
    mxct_tensors_free(infer, 2);
    mxct_tensors_free(in, 3);
}
END_TEST

/* ---- Parameters and shapes ------------------------------------------------------------ */

static void expect_default(const char *key, const char *want) {
    mxc_op_info info;
    ck_assert_int_eq(mxc_op_get_info("RNN", &info), MXC_OK);
    for (int i = 0; i < info.num_params; i++)
        if (strcmp(info.params[i].name, key) == 0) {
            if (!want) {
                ck_assert_msg(info.params[i].default_value == NULL, "RNN.%s has a default", key);
                return;
            }
            ck_assert_msg(info.params[i].default_value != NULL, "RNN.%s is required", key);
            ck_assert_str_eq(info.params[i].default_value, want);
            return;
        }
    ck_abort_msg("RNN has no parameter %s", key);
}

START_TEST(test_params) {
    expect_default("state_size", NULL);
    expect_default("num_layers", NULL);
    expect_default("mode", NULL);
    expect_default("bidirectional", "False");
    expect_default("p", "0");
    expect_default("state_outputs", "False");
    expect_default("projection_size", "None");
    expect_default("lstm_state_clip_min", "None");
    expect_default("lstm_state_clip_max", "None");
    expect_default("lstm_state_clip_nan", "False");
    expect_default("use_sequence_length", "False");
    /* inputs and visible outputs follow mode and state_outputs */
    const struct mxc__op_def *d = mxc__op_find("RNN");
    _Alignas(16) unsigned char params[512];
    const char *names[MXC__MAX_OP_ARGS];
    struct mxct_params kv =
        MXCT_KV("state_size", "2", "num_layers", "1", "mode", "lstm", "state_outputs", "True");
    ck_assert_int_eq(mxc__op_parse_params(d, kv.num, kv.keys, kv.vals, params), MXC_OK);
    ck_assert_int_eq(mxc__op_num_inputs(d, params, names), 4);
    ck_assert_str_eq(names[3], "state_cell");
    ck_assert_int_eq(mxc__op_num_outputs(d, params, names), 4);
    ck_assert_str_eq(names[2], "cy");
    ck_assert_int_eq(mxc__op_num_visible_outputs(d, params), 3);
    kv = MXCT_KV("state_size", "2", "num_layers", "1", "mode", "gru");
    ck_assert_int_eq(mxc__op_parse_params(d, kv.num, kv.keys, kv.vals, params), MXC_OK);
    ck_assert_int_eq(mxc__op_num_inputs(d, params, NULL), 3);
    ck_assert_int_eq(mxc__op_num_visible_outputs(d, params), 1);
}
END_TEST

static void expect_forward_error(struct mxct_params kv, int num_in, const mxc_shape *shapes,
                                 int code, const char *const *needles) {
    struct mxct_tensor in[MAX_IO + 1], out[MAX_IO + 1];
    for (int i = 0; i < num_in; i++)
        in[i] = mxct_tensor_random(shapes[i], -1, 1, 5u + (unsigned)i);
    mxct_expect_error(mxct_op_forward("RNN", kv, true, in, num_in, NULL, out), code, needles);
    mxct_tensors_free(in, num_in);
}

#define BASE "state_size", "2", "num_layers", "1"

START_TEST(test_bad_params) {
    /* rnn_tanh, H 2, I 3: 2 * (3 + 2 + 2) = 14 parameters */
    const mxc_shape ok[3] = {SHAPE(4, 2, 3), SHAPE(14), SHAPE(1, 2, 2)};
    const mxc_shape lstm[4] = {SHAPE(4, 2, 3), SHAPE(56), SHAPE(1, 2, 2), SHAPE(1, 2, 2)};
    expect_forward_error(MXCT_KV(BASE, "mode", "lstm", "projection_size", "2"), 4, lstm,
                         MXC_ENOTSUP, MXCT_NEEDLES("RNN", "projection_size = 2"));
    expect_forward_error(
        MXCT_KV(BASE, "mode", "lstm", "lstm_state_clip_min", "-1", "lstm_state_clip_max", "1"), 4,
        lstm, MXC_ENOTSUP, MXCT_NEEDLES("RNN", "lstm_state_clip_min"));
    const mxc_shape seq[4] = {SHAPE(4, 2, 3), SHAPE(14), SHAPE(1, 2, 2), SHAPE(2)};
    expect_forward_error(MXCT_KV(BASE, "mode", "rnn_tanh", "use_sequence_length", "True"), 4, seq,
                         MXC_ENOTSUP, MXCT_NEEDLES("RNN", "use_sequence_length"));
    expect_forward_error(MXCT_KV(BASE), 3, ok, MXC_EINVAL, MXCT_NEEDLES("RNN", "mode"));
    expect_forward_error(MXCT_KV(BASE, "mode", "rnn_sigmoid"), 3, ok, MXC_EINVAL,
                         MXCT_NEEDLES("mode", "rnn_sigmoid"));
    expect_forward_error(MXCT_KV("num_layers", "1", "mode", "gru"), 3, ok, MXC_EINVAL,
                         MXCT_NEEDLES("RNN", "state_size"));
    expect_forward_error(MXCT_KV(BASE, "mode", "rnn_tanh", "p", "1.5"), 3, ok, MXC_EINVAL,
                         MXCT_NEEDLES("RNN", "p"));
    const mxc_shape flat[3] = {SHAPE(4, 6), SHAPE(14), SHAPE(1, 2, 2)};
    expect_forward_error(MXCT_KV(BASE, "mode", "rnn_tanh"), 3, flat, MXC_EINVAL,
                         MXCT_NEEDLES("RNN", "(4, 6)"));
    const mxc_shape short_w[3] = {SHAPE(4, 2, 3), SHAPE(13), SHAPE(1, 2, 2)};
    expect_forward_error(MXCT_KV(BASE, "mode", "rnn_tanh"), 3, short_w, MXC_ESHAPE,
                         MXCT_NEEDLES("parameters", "(13)"));
    const mxc_shape bad_state[3] = {SHAPE(4, 2, 3), SHAPE(14), SHAPE(2, 2, 2)};
    expect_forward_error(MXCT_KV(BASE, "mode", "rnn_tanh"), 3, bad_state, MXC_ESHAPE,
                         MXCT_NEEDLES("state", "(2, 2, 2)"));
    /* too many elements: shape inference refuses, nothing is allocated */
    mxc_shape huge[3] = {SHAPE((int64_t)1 << 40, (int64_t)1 << 20, 4)}, outs[2] = {{0}};
    CK_ERR_HAS(mxct_op_infer("RNN", MXCT_KV(BASE, "mode", "gru"), huge, 3, outs, 2), MXC_EINVAL,
               "RNN", "too many elements");
}
END_TEST

/* ---- Through the engine ---------------------------------------------------------------- */

/* A bidirectional LSTM with state outputs through mxc_imperative_invoke: out, hy and cy. */
START_TEST(test_invoke) {
    const struct ref_case *c = &ref_cases[9]; /* lstm_l1_bi_states */
    ck_assert_str_eq(c->file, "lstm_l1_bi_states");
    struct mxct_params kv = ref_params(c);
    struct mxct_tensor in[4], want[3];
    load_all(c, "in", 4, in);
    load_all(c, "out", 3, want);
    mxc_ndarray *arrays[4], *out[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 4; i++)
        arrays[i] = mxct_array_of(&in[i]);
    int rc = mxc_imperative_invoke("RNN", kv.num, kv.keys, kv.vals, 4, arrays, 3, out, 0);
    ck_assert_msg(rc == MXC_OK, "%s", mxc_last_error());
    for (int k = 0; k < 3; k++) { /* each output has MXNet's shape and values */
        mxc_shape s;
        ck_assert_int_eq(mxc_nd_get_shape(out[k], &s), MXC_OK);
        mxct_expect_shape(&s, &want[k].shape, "through mxc_imperative_invoke");
        struct mxct_tensor got = mxct_tensor_from(s, NULL);
        size_t bytes = (size_t)mxc_shape_size(&s) * sizeof(float);
        ck_assert_int_eq(mxc_nd_sync_copy_to_cpu(out[k], got.data, bytes), MXC_OK);
        mxct_expect_close(&got, want[k].data, 1e-5, 1e-5, "through mxc_imperative_invoke");
        mxct_tensors_free(&got, 1);
        mxc_nd_free(out[k]);
    }
    for (int i = 0; i < 4; i++)
        mxc_nd_free(arrays[i]);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
    mxct_tensors_free(in, 4);
    mxct_tensors_free(want, 3);
}
END_TEST

/* ---- Training ------------------------------------------------------------------------ */

/* An LSTM learns to repeat its input one step late, through the executor: data (T, N, 1) ->
 * RNN (lstm, 8 units) -> FullyConnected (1) per step -> LinearRegressionOutput against
 * label_t = x_{t-1}, full-batch SGD (sgd_update) on every argument with a gradient. Only a
 * state carried across steps can do it: the mean squared error must fall from about 1/3
 * (the variance of x) to a tenth of where it starts. */
START_TEST(test_train_lstm) {
    enum { T = 10, N = 8, STEPS = 800 };
    mxc_symbol *x = mxct_sym_var("data"), *label = mxct_sym_var("label");
    const char *const rk[] = {"state_size", "num_layers", "mode"}, *const rv[] = {"8", "1", "lstm"};
    mxc_symbol *h = mxct_sym_apply("RNN", "lstm", 1, &x, 3, rk, rv);
    const char *const sk[] = {"shape"}, *const sv[] = {"(-1, 8)"};
    h = mxct_sym_apply("Reshape", "flat", 1, &h, 1, sk, sv);
    const char *const fk[] = {"num_hidden"}, *const fv[] = {"1"};
    h = mxct_sym_apply("FullyConnected", "fc", 1, &h, 1, fk, fv);
    mxc_symbol *loss_in[2] = {h, label};
    mxc_symbol *net = mxct_sym_apply("LinearRegressionOutput", "loss", 2, loss_in, 0, NULL, NULL);
    const char *names[2] = {"data", "label"};
    mxc_shape shapes[2] = {SHAPE(T, N, 1), SHAPE(T * N, 1)};
    mxc_executor *ex = NULL;
    CK_OK(mxc_executor_simple_bind(net, mxc_cpu(), 2, names, shapes, MXC_GRAD_WRITE, &ex));
    int na;
    mxc_ndarray *const *args, *const *grads;
    CK_OK(mxc_executor_arrays(ex, &na, &args, &grads, NULL, NULL));
    /* the sequences and their one-step-late copies */
    struct mxct_tensor seq = mxct_tensor_random(shapes[0], -1, 1, 123u);
    float want[T * N];
    for (int i = 0; i < T * N; i++)
        want[i] = i < N ? 0.0f : seq.data[i - N];
    for (int i = 0; i < na; i++) {
        if (grads[i])
            CK_OK(mxc_nd_random_uniform(args[i], -0.3f, 0.3f));
        else if (mxc_nd_dtype(args[i]) == MXC_FLOAT32) /* data or label */
            CK_OK(mxc_nd_sync_copy_from_cpu(args[i], i == 0 ? seq.data : want,
                                            sizeof(float) * T * N));
    }
    double first = 0, last = 0;
    const char *const lk[] = {"lr"}, *const lv[] = {"0.01"};
    for (int step = 0; step < STEPS; step++) {
        CK_OK(mxc_executor_forward(ex, 1));
        CK_OK(mxc_executor_backward(ex, 0, NULL));
        int no;
        mxc_ndarray *const *outs;
        CK_OK(mxc_executor_outputs(ex, &no, &outs));
        float pred[T * N];
        CK_OK(mxc_nd_sync_copy_to_cpu(outs[0], pred, sizeof pred));
        double mse = 0;
        for (int i = 0; i < T * N; i++)
            mse += (pred[i] - want[i]) * (pred[i] - want[i]) / (T * N);
        if (step == 0)
            first = mse;
        last = mse;
        for (int i = 0; i < na; i++) {
            if (!grads[i])
                continue;
            mxc_ndarray *in[2] = {args[i], grads[i]}, *out[1] = {args[i]};
            CK_OK(mxc_imperative_invoke("sgd_update", 1, lk, lv, 2, in, 1, out, 1));
        }
    }
    CK_OK(mxc_nd_wait_all());
    ck_assert_msg(last < first / 10, "the LSTM did not learn: MSE %g after %d steps, %g first",
                  last, STEPS, first);
    mxc_executor_free(ex);
    mxc_symbol_free(net);
    mxct_tensors_free(&seq, 1);
}
END_TEST

/* ---- A Gluon export ------------------------------------------------------------------- */

/* Copies reference array `name` of tests/data/`file` into `a`. */
static void fill_from_ref(mxc_ndarray *a, const char *file, const char *name) {
    struct mxct_tensor t = mxct_ref_load(file, name);
    CK_OK(mxc_nd_sync_copy_from_cpu(a, t.data, (size_t)mxc_shape_size(&t.shape) * sizeof(float)));
    mxct_tensors_free(&t, 1);
}

/* Gluon's LSTM language model (Embedding -> 2-layer LSTM -> Dense, begin states as inputs)
 * as HybridBlock.export writes it — the fused RNN fed by Reshape and _rnn_param_concat of
 * the per-layer weights — loads, runs and gives MXNet's output, and every weight's gradient
 * for a head gradient equals MXNet's. */
START_TEST(test_gluon_lm) {
    const char *dir = getenv("MXC_TEST_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/ops/rnn/lm-symbol.json", dir ? dir : "tests/data");
    mxc_symbol *net = NULL;
    CK_OK(mxc_symbol_load(path, &net));
    const char *inputs[3] = {"data0", "data1", "data2"}, *io_names[3] = {"data", "h0", "c0"};
    const char *io = "ops/rnn/lm_io.params", *weights = "ops/rnn/lm-0000.params";
    mxc_shape shapes[3] = {SHAPE(5, 3), SHAPE(2, 3, 6), SHAPE(2, 3, 6)};
    mxc_executor *ex = NULL;
    CK_OK(mxc_executor_simple_bind(net, mxc_cpu(), 3, inputs, shapes, MXC_GRAD_WRITE, &ex));
    int na;
    const char *const *names;
    mxc_ndarray *const *args, *const *grads;
    CK_OK(mxc_symbol_list_arguments(net, &na, &names));
    CK_OK(mxc_executor_arrays(ex, &na, &args, &grads, NULL, NULL));
    char key[256];
    for (int i = 0; i < na; i++) {
        const char *ref = NULL;
        for (int k = 0; k < 3; k++)
            if (strcmp(names[i], inputs[k]) == 0)
                ref = io_names[k];
        snprintf(key, sizeof key, "arg:%s", names[i]);
        fill_from_ref(args[i], ref ? io : weights, ref ? ref : key);
    }
    CK_OK(mxc_executor_forward(ex, 1));
    int no;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(ex, &no, &outs));
    ck_assert_int_eq(no, 1);
    struct mxct_tensor want = mxct_ref_load(io, "out"), got = mxct_tensor_from(want.shape, NULL);
    CK_OK(mxc_nd_sync_copy_to_cpu(outs[0], got.data,
                                  (size_t)mxc_shape_size(&want.shape) * sizeof(float)));
    mxct_expect_close(&got, want.data, 1e-5, 1e-5, "Gluon LM output vs MXNet");
    struct mxct_tensor og = mxct_ref_load(io, "og");
    mxc_ndarray *head = mxct_array_of(&og);
    CK_OK(mxc_executor_backward(ex, 1, &head));
    int compared = 0;
    for (int i = 0; i < na; i++) {
        if (!grads[i])
            continue;
        compared++;
        snprintf(key, sizeof key, "grad:%s", names[i]);
        struct mxct_tensor g = mxct_ref_load(io, key), mine = mxct_tensor_from(g.shape, NULL);
        CK_OK(mxc_nd_sync_copy_to_cpu(grads[i], mine.data,
                                      (size_t)mxc_shape_size(&g.shape) * sizeof(float)));
        mxct_expect_close(&mine, g.data, 1e-4, 1e-5, key);
        mxct_tensors_free(&g, 1);
        mxct_tensors_free(&mine, 1);
    }
    ck_assert_int_eq(compared, na - 3); /* every weight: embedding, 8 of the LSTM, dense 2 */
    mxc_nd_free(head);
    mxc_executor_free(ex);
    mxc_symbol_free(net);
    mxct_tensors_free(&og, 1);
    mxct_tensors_free(&want, 1);
    mxct_tensors_free(&got, 1);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("op_rnn");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, mxct_timeout(30));
    tcase_add_loop_test(tc, test_forward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    tcase_add_loop_test(tc, test_backward_reference, 0, (int)MXC_ARRAY_SIZE(ref_cases));
    tcase_add_test(tc, test_bound_null_requests);
    suite_add_tcase(s, tc);
    tc = tcase_create("gradients");
    tcase_set_timeout(tc, mxct_timeout(60));
    tcase_add_loop_test(tc, test_gradients, 0, (int)MXC_ARRAY_SIZE(grad_cases));
    suite_add_tcase(s, tc);
    tc = tcase_create("dropout");
    tcase_set_timeout(tc, mxct_timeout(20));
    tcase_add_test(tc, test_dropout_inference);
    tcase_add_test(tc, test_dropout_all);
    tcase_add_test(tc, test_dropout_half);
    suite_add_tcase(s, tc);
    tc = tcase_create("params");
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_bad_params);
    tcase_add_test(tc, test_invoke);
    suite_add_tcase(s, tc);
    tc = tcase_create("training");
    tcase_set_timeout(tc, mxct_timeout(60));
    tcase_add_test(tc, test_train_lstm);
    tcase_add_test(tc, test_gluon_lm);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }

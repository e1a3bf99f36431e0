/*
 * tests/check_executor.c — binding symbols and running them: forward equals the same
 * operators run imperatively, backward equals finite differences of the whole graph,
 * add-to gradients accumulate across passes, the memory plan shares blocks (in place and
 * reused) and the memory in use stays within it, independent branches run at the same
 * time, reshape shares weights, and misuse is reported.
 */
#include "mxc/engine.h"
#include "mxc/executor.h"
#include "mxc/model.h"
#include "mxc/networks.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "mxc/storage.h"
#include "mxc/symbol.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- Building symbols --------------------------------------------------------------- */

static mxc_symbol *var(const char *name) {
    mxc_symbol *s = NULL;
    CK_OK(mxc_symbol_variable(name, &s));
    return s;
}

/* op(inputs) with `np` string parameters; consumes the `n` input handles. */
static mxc_symbol *apply_n(const char *op, const char *name, int n, mxc_symbol **in, int np,
                           const char *const *keys, const char *const *vals) {
    mxc_symbol *out = NULL;
    CK_OK(mxc_symbol_create(op, np, keys, vals, name, n, NULL, in, &out));
    for (int i = 0; i < n; i++)
        mxc_symbol_free(in[i]);
    return out;
}

/* op(input) with up to two string parameters; consumes `in`. */
static mxc_symbol *apply(const char *op, const char *name, mxc_symbol *in, const char *k1,
                         const char *v1, const char *k2, const char *v2) {
    const char *keys[2] = {k1, k2}, *vals[2] = {v1, v2};
    return apply_n(op, name, 1, &in, k2 ? 2 : k1 ? 1 : 0, keys, vals);
}

static mxc_symbol *apply2(const char *op, const char *name, mxc_symbol *a, mxc_symbol *b) {
    mxc_symbol *ins[2] = {a, b};
    return apply_n(op, name, 2, ins, 0, NULL, NULL);
}

/* Another handle on `s`'s (single) output, e.g. to pass one array twice. */
static mxc_symbol *again(const mxc_symbol *s) {
    mxc_symbol *h = NULL;
    CK_OK(mxc_symbol_get_output(s, 0, &h));
    return h;
}

/* data -> fc1 (5) -> relu -> fc2 (3) */
static mxc_symbol *mlp(void) {
    mxc_symbol *s = apply("FullyConnected", "fc1", var("data"), "num_hidden", "5", NULL, NULL);
    s = apply("relu", "relu1", s, NULL, NULL, NULL, NULL);
    return apply("FullyConnected", "fc2", s, "num_hidden", "3", NULL, NULL);
}

/* ---- Arrays ------------------------------------------------------------------------- */

static void fill(mxc_ndarray *a, unsigned seed, float lo, float hi) {
    int64_t n = mxc_nd_size(a);
    float *h = malloc(sizeof(float) * (size_t)n);
    srand(seed);
    for (int64_t i = 0; i < n; i++)
        h[i] = lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
    CK_OK(mxc_nd_sync_copy_from_cpu(a, h, sizeof(float) * (size_t)n));
    free(h);
}

static float *read_all(mxc_ndarray *a) {
    int64_t n = mxc_nd_size(a);
    float *h = malloc(sizeof(float) * (size_t)(n + 1));
    CK_OK(mxc_nd_sync_copy_to_cpu(a, h, sizeof(float) * (size_t)n));
    return h;
}

static void expect_close(mxc_ndarray *got, const float *want, double tol, const char *what) {
    float *g = read_all(got);
    int64_t n = mxc_nd_size(got), worst = 0;
    double err = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)g[i] - want[i]) / (1.0 + fabs((double)want[i]));
        if (e > err) {
            err = e;
            worst = i;
        }
    }
    ck_assert_msg(err <= tol, "%s: element %lld is %g, expected %g", what, (long long)worst,
                  (double)g[worst], (double)want[worst]);
    free(g);
}

/* The MLP bound by simple_bind on a (4, 6) batch with random weights. */
static mxc_executor *bind_mlp(mxc_symbol *sym, int grad_req) {
    mxc_executor *x = NULL;
    const char *names[] = {"data"};
    mxc_shape shapes[] = {SHAPE(4, 6)};
    CK_OK(mxc_executor_simple_bind(sym, mxc_cpu(), 1, names, shapes, grad_req, &x));
    int na;
    mxc_ndarray *const *args;
    CK_OK(mxc_executor_arrays(x, &na, &args, NULL, NULL, NULL));
    ck_assert_int_eq(na, 5); /* data, fc1_weight, fc1_bias, fc2_weight, fc2_bias */
    for (int i = 0; i < na; i++)
        fill(args[i], 10 + (unsigned)i, -1, 1);
    return x;
}

/* ---- Forward and backward ----------------------------------------------------------- */

START_TEST(test_forward_equals_imperative) {
    mxc_symbol *sym = mlp();
    mxc_executor *x = bind_mlp(sym, MXC_GRAD_NULL);
    CK_OK(mxc_executor_forward(x, 0));
    int nout;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &nout, &outs));
    ck_assert_int_eq(nout, 1);
    mxc_ndarray *const *args;
    CK_OK(mxc_executor_arrays(x, NULL, &args, NULL, NULL, NULL));
    /* the same computation, imperatively */
    const char *k[] = {"num_hidden"}, *v5[] = {"5"}, *v3[] = {"3"};
    mxc_ndarray *h = NULL, *r = NULL, *y = NULL;
    mxc_ndarray *in1[] = {args[0], args[1], args[2]};
    CK_OK(mxc_imperative_invoke("FullyConnected", 1, k, v5, 3, in1, 1, &h, 0));
    CK_OK(mxc_imperative_invoke("relu", 0, NULL, NULL, 1, &h, 1, &r, 0));
    mxc_ndarray *in2[] = {r, args[3], args[4]};
    CK_OK(mxc_imperative_invoke("FullyConnected", 1, k, v3, 3, in2, 1, &y, 0));
    float *want = read_all(y);
    expect_close(outs[0], want, 1e-6, "output");
    free(want);
    mxc_nd_free(h);
    mxc_nd_free(r);
    mxc_nd_free(y);
    mxc_executor_free(x);
    mxc_symbol_free(sym);
}
END_TEST

/* A scalar loss of the executor's outputs after a training forward pass, in double. */
struct fd_loss {
    double (*fn)(mxc_executor *x, const void *arg);
    const void *arg;
};

/* sum(w * output 0) for the current arguments; arg: w (the output's size). */
static double weighted_sum(mxc_executor *x, const void *w_) {
    const float *w = w_;
    CK_OK(mxc_executor_forward(x, 1));
    int n;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &n, &outs));
    float *y = read_all(outs[0]);
    double l = 0;
    for (int64_t i = 0; i < mxc_nd_size(outs[0]); i++)
        l += (double)w[i] * y[i];
    free(y);
    return l;
}

/* Compares every gradient array of `x` (bound from `sym`, backward already run) but that of
 * `skip` (a name, or NULL) with central differences of `loss` with step eps:
 * |fd - g| <= atol + rtol |fd|, at every element or, with samples > 0, at that many
 * elements per array drawn with rand() (the caller seeds it). */
static void expect_grads_match_fd(mxc_executor *x, mxc_symbol *sym, struct fd_loss loss,
                                  const char *skip, int samples, float eps, double atol,
                                  double rtol) {
    int na;
    const char *const *names;
    mxc_ndarray *const *args, *const *grads;
    CK_OK(mxc_symbol_list_arguments(sym, &na, &names));
    CK_OK(mxc_executor_arrays(x, NULL, &args, &grads, NULL, NULL));
    for (int a = 0; a < na; a++) {
        if (grads[a] == NULL || (skip && strcmp(names[a], skip) == 0))
            continue;
        float *g = read_all(grads[a]), *p = read_all(args[a]);
        int64_t n = mxc_nd_size(args[a]);
        size_t bytes = sizeof(float) * (size_t)n;
        for (int64_t t = 0; t < (samples > 0 ? samples : n); t++) {
            int64_t i = samples > 0 ? rand() % n : t;
            float keep = p[i];
            p[i] = keep + eps;
            CK_OK(mxc_nd_sync_copy_from_cpu(args[a], p, bytes));
            double up = loss.fn(x, loss.arg);
            p[i] = keep - eps;
            CK_OK(mxc_nd_sync_copy_from_cpu(args[a], p, bytes));
            double down = loss.fn(x, loss.arg);
            p[i] = keep;
            CK_OK(mxc_nd_sync_copy_from_cpu(args[a], p, bytes));
            double fd = (up - down) / (2 * eps);
            ck_assert_msg(fabs(fd - g[i]) <= atol + rtol * fabs(fd),
                          "%s[%lld]: backward %g, finite difference %g", names[a], (long long)i,
                          (double)g[i], fd);
        }
        free(g);
        free(p);
    }
}

/* A training pass of `x` (whose output is (4, 3)) with a head gradient w drawn from `seed`,
 * then every gradient against finite differences of sum(w * output). */
static void expect_weighted_grads_match_fd(mxc_executor *x, mxc_symbol *sym, unsigned seed) {
    mxc_ndarray *head = NULL;
    CK_OK(mxc_nd_create(&SHAPE(4, 3), MXC_FLOAT32, mxc_cpu(), 0, &head));
    fill(head, seed, -1, 1);
    float *w = read_all(head);
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 1, &head));
    expect_grads_match_fd(x, sym, (struct fd_loss){weighted_sum, w}, NULL, 0, 1e-2f, 2e-3, 2e-3);
    free(w);
    mxc_nd_free(head);
}

START_TEST(test_backward_equals_finite_differences) {
    mxc_symbol *sym = mlp();
    mxc_executor *x = bind_mlp(sym, MXC_GRAD_WRITE);
    mxc_ndarray *const *grads;
    CK_OK(mxc_executor_arrays(x, NULL, NULL, &grads, NULL, NULL));
    ck_assert_ptr_null(grads[0]); /* data: an input, no gradient */
    expect_weighted_grads_match_fd(x, sym, 99);
    mxc_executor_free(x);
    mxc_symbol_free(sym);
}
END_TEST

START_TEST(test_add_to_accumulates_across_passes) {
    mxc_symbol *sym = mlp();
    mxc_executor *wx = bind_mlp(sym, MXC_GRAD_WRITE), *ax = bind_mlp(sym, MXC_GRAD_ADD);
    mxc_ndarray *head = NULL;
    CK_OK(mxc_nd_create(&SHAPE(4, 3), MXC_FLOAT32, mxc_cpu(), 0, &head));
    fill(head, 7, -1, 1);
    for (int pass = 0; pass < 2; pass++) {
        CK_OK(mxc_executor_forward(wx, 1));
        CK_OK(mxc_executor_backward(wx, 1, &head));
        CK_OK(mxc_executor_forward(ax, 1));
        CK_OK(mxc_executor_backward(ax, 1, &head));
    }
    mxc_ndarray *const *wg, *const *ag;
    int na;
    CK_OK(mxc_executor_arrays(wx, &na, NULL, &wg, NULL, NULL));
    CK_OK(mxc_executor_arrays(ax, NULL, NULL, &ag, NULL, NULL));
    for (int a = 1; a < na; a++) {
        float *once = read_all(wg[a]);
        for (int64_t i = 0; i < mxc_nd_size(wg[a]); i++)
            once[i] *= 2; /* the gradient arrays started at zero */
        expect_close(ag[a], once, 1e-5, "accumulated gradient");
        free(once);
    }
    mxc_nd_free(head);
    mxc_executor_free(wx);
    mxc_executor_free(ax);
    mxc_symbol_free(sym);
}
END_TEST

/* r = relu(x) read twice (r * r): the two gradients meet and are summed. */
START_TEST(test_fan_out_gradients_are_summed) {
    mxc_symbol *x = var("x"), *r = apply("relu", "r", x, NULL, NULL, NULL, NULL);
    mxc_symbol *y = apply2("_mul", "square", r, again(r));
    const float xs[] = {-1.5f, -0.5f, 0.5f, 2.0f}, hs[] = {1.0f, 2.0f, 3.0f, -1.0f};
    mxc_ndarray *xa = NULL, *ga = NULL, *ha = NULL;
    CK_OK(mxc_nd_create(&SHAPE(4), MXC_FLOAT32, mxc_cpu(), 0, &xa));
    CK_OK(mxc_nd_create(&SHAPE(4), MXC_FLOAT32, mxc_cpu(), 0, &ga));
    CK_OK(mxc_nd_create(&SHAPE(4), MXC_FLOAT32, mxc_cpu(), 0, &ha));
    CK_OK(mxc_nd_sync_copy_from_cpu(xa, xs, sizeof xs));
    CK_OK(mxc_nd_sync_copy_from_cpu(ha, hs, sizeof hs));
    mxc_executor *e = NULL;
    CK_OK(mxc_executor_bind(y, mxc_cpu(), 1, &xa, &ga, NULL, 0, NULL, &e));
    const char *text;
    CK_OK(mxc_executor_print(e, &text));
    ck_assert_msg(strstr(text, "ElementWiseSum") != NULL, "no gradient sum in\n%s", text);
    CK_OK(mxc_executor_forward(e, 1));
    CK_OK(mxc_executor_backward(e, 1, &ha));
    float want[4];
    for (int i = 0; i < 4; i++)
        want[i] = xs[i] > 0 ? 2 * xs[i] * hs[i] : 0.0f;
    expect_close(ga, want, 1e-6, "d(r*r)/dx");
    mxc_executor_free(e);
    mxc_nd_free(xa);
    mxc_nd_free(ga);
    mxc_nd_free(ha);
    mxc_symbol_free(y);
}
END_TEST

/* The labels of softmax_loss: n samples of `classes` classes. */
struct labels {
    const float *labels;
    int n, classes;
};
/* x read by 41 nodes (y = x + x + ... + x): more gradient contributions than one
 * ElementWiseSum takes are summed in parts, dy/dx = 41. */
START_TEST(test_many_gradients_are_summed_in_parts) {
    mxc_symbol *x = var("x"), *y = NULL;
    CK_OK(mxc_symbol_get_output(x, 0, &y));
    for (int k = 0; k < 40; k++) {
        mxc_symbol *x2 = NULL;
        CK_OK(mxc_symbol_get_output(x, 0, &x2));
        y = apply2("_plus", NULL, y, x2);
    }
    mxc_ndarray *xa = NULL, *ga = NULL, *ha = NULL;
    CK_OK(mxc_nd_ones(&SHAPE(3), MXC_FLOAT32, mxc_cpu(), &xa));
    CK_OK(mxc_nd_zeros(&SHAPE(3), MXC_FLOAT32, mxc_cpu(), &ga));
    CK_OK(mxc_nd_full(&SHAPE(3), MXC_FLOAT32, mxc_cpu(), 0.5, &ha));
    mxc_executor *e = NULL;
    CK_OK(mxc_executor_bind(y, mxc_cpu(), 1, &xa, &ga, NULL, 0, NULL, &e));
    CK_OK(mxc_executor_forward(e, 1));
    CK_OK(mxc_executor_backward(e, 1, &ha));
    const float want[3] = {20.5f, 20.5f, 20.5f};
    expect_close(ga, want, 1e-6, "d(x + ... + x)/dx");
    mxc_executor_free(e);
    mxc_nd_free(xa);
    mxc_nd_free(ga);
    mxc_nd_free(ha);
    mxc_symbol_free(x);
    mxc_symbol_free(y);
}
END_TEST

/* A training step on a batch of 0 samples (LeNet, and a ResNet with BatchNorm's
 * fix_gamma): forward, backward and the optimizer's updates all succeed, with nothing for
 * the kernels to do on the batch; the UBSan builds stop on NULL arithmetic in any of them. */
START_TEST(test_batch_of_zero_trains) {
    mxc_symbol *nets[2] = {NULL};
    CK_OK(mxc_net_lenet(10, &nets[0]));
    CK_OK(mxc_net_resnet(1, 10, &nets[1]));
    mxc_optimizer *opt = NULL;
    mxc_optimizer_config oc = {.kind = MXC_OPT_SGD, .lr = 0.1f, .momentum = 0.9f};
    CK_OK(mxc_optimizer_create(&oc, &opt));
    for (int k = 0; k < 2; k++) {
        mxc_executor *x = NULL;
        const char *names[] = {"data", "softmax_label"};
        const mxc_shape shapes[] = {SHAPE(0, 1, 28, 28), SHAPE(0)};
        CK_OK(mxc_executor_simple_bind(nets[k], mxc_cpu(), 2, names, shapes, MXC_GRAD_WRITE, &x));
        int na;
        mxc_ndarray *const *args, *const *grads;
        CK_OK(mxc_executor_arrays(x, &na, &args, &grads, NULL, NULL));
        for (int step = 0; step < 2; step++) {
            CK_OK(mxc_executor_forward(x, 1));
            CK_OK(mxc_executor_backward(x, 0, NULL));
            for (int i = 0; i < na; i++)
                if (grads[i])
                    CK_OK(mxc_optimizer_update(opt, 1000 * k + i, "w", args[i], grads[i]));
        }
        CK_OK(mxc_nd_wait_all());
        mxc_executor_free(x);
        mxc_symbol_free(nets[k]);
    }
    mxc_optimizer_free(opt);
}
END_TEST

/* -sum log p[label] of the bound LeNet's softmax output, in double. */
static double softmax_loss(mxc_executor *x, const void *arg) {
    const struct labels *lab = arg;
    CK_OK(mxc_executor_forward(x, 1));
    int no;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &no, &outs));
    float *p = read_all(outs[0]);
    double l = 0;
    for (int i = 0; i < lab->n; i++)
        l -= log((double)p[i * lab->classes + (int)lab->labels[i]]);
    free(p);
    return l;
}

/* LeNet (conv, tanh, max-pool, fc, SoftmaxOutput): the gradient of every weight array
 * at sampled elements equals finite differences of the cross-entropy. */
START_TEST(test_lenet_backward_equals_finite_differences) {
    mxc_symbol *net = NULL;
    CK_OK(mxc_net_lenet(10, &net));
    mxc_executor *x = NULL;
    const char *names[] = {"data", "softmax_label"};
    mxc_shape shapes[] = {SHAPE(2, 1, 28, 28), SHAPE(2)};
    CK_OK(mxc_executor_simple_bind(net, mxc_cpu(), 2, names, shapes, MXC_GRAD_WRITE, &x));
    int na;
    mxc_ndarray *const *args;
    CK_OK(mxc_executor_arrays(x, &na, &args, NULL, NULL, NULL));
    const char *const *arg_names;
    CK_OK(mxc_symbol_list_arguments(net, &na, &arg_names));
    const float labels[2] = {3, 7};
    mxc_init_config init = {.kind = MXC_INIT_XAVIER, .xavier_magnitude = 3};
    CK_OK(mxc_random_seed(17));
    for (int a = 0; a < na; a++) {
        if (strcmp(arg_names[a], "data") == 0)
            fill(args[a], 5, 0, 1);
        else if (strcmp(arg_names[a], "softmax_label") == 0)
            CK_OK(mxc_nd_sync_copy_from_cpu(args[a], labels, sizeof labels));
        else
            CK_OK(mxc_init_array(&init, arg_names[a], args[a]));
    }
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 0, NULL));
    srand(23);
    /* a small step: max pooling has kinks a larger one crosses (1e-2 does) */
    struct labels lab = {labels, 2, 10};
    expect_grads_match_fd(x, net, (struct fd_loss){softmax_loss, &lab}, "softmax_label", 4, 5e-4f,
                          5e-3, 2e-2);
    mxc_executor_free(x);
    mxc_symbol_free(net);
}
END_TEST

/* ---- Operators on computed arrays ----------------------------------------------------- */

/* A backward may write its left operand's gradient over its output gradient (in place) only
 * where both are blocks of the plan: the operand is computed, not an argument, and the output
 * gradient comes from a later operator's backward. These graphs make that happen:
 *   data -> a = FullyConnected(data), b = sigmoid(FullyConnected(data))
 *        -> op(operands) -> FullyConnected (3)
 * with `positive` a and b both sigmoid(...) + 0.5 (bases of powers, divisors). */
struct computed_case {
    const char *op;
    const char *operands; /* one letter per input: 'a' or 'b' */
    bool positive;
};

static const struct computed_case computed_cases[] = {
    {"_mul", "ab", false}, /* FullyConnected(x) * sigmoid(FullyConnected(x)): gating */
    {"_mul", "aa", false}, /* h * h */
    {"_div", "ab", true},
    {"_div", "aa", true},
    {"_maximum", "ab", false},
    {"_maximum", "aa", false},
    {"_minimum", "ab", false},
    {"_minimum", "aa", false},
    {"_power", "ab", true},
    {"_power", "aa", true},
    {"ElementWiseSum", "aba", false}, /* written over a, which it reads twice */
};

/* FullyConnected(data) named `name` with 5 outputs, through sigmoid(...) (+ 0.5). */
static mxc_symbol *computed(mxc_symbol *data, const char *name, bool squash, bool positive) {
    mxc_symbol *s = apply("FullyConnected", name, data, "num_hidden", "5", NULL, NULL);
    if (squash || positive)
        s = apply("sigmoid", NULL, s, NULL, NULL, NULL, NULL);
    return positive ? apply("_plus_scalar", NULL, s, "scalar", "0.5", NULL, NULL) : s;
}

static mxc_symbol *computed_net(const struct computed_case *c) {
    mxc_symbol *data = var("data");
    mxc_symbol *a = computed(again(data), "fa", false, c->positive);
    mxc_symbol *b =
        strchr(c->operands, 'b') ? computed(again(data), "fb", true, c->positive) : NULL;
    mxc_symbol *ins[4];
    int n = (int)strlen(c->operands);
    for (int i = 0; i < n; i++)
        ins[i] = again(c->operands[i] == 'a' ? a : b);
    char num[16];
    snprintf(num, sizeof num, "%d", n);
    const char *keys[] = {"num_args"}, *vals[] = {num};
    bool variadic = strcmp(c->op, "ElementWiseSum") == 0;
    mxc_symbol *y = apply_n(c->op, "op", n, ins, variadic ? 1 : 0, keys, vals);
    mxc_symbol_free(data);
    mxc_symbol_free(a);
    mxc_symbol_free(b);
    return apply("FullyConnected", "out", y, "num_hidden", "3", NULL, NULL);
}

/* Whether the `kind` node ("forward", "backward") named `name` writes its first output
 * into the block of its first input, as mxc_executor_print shows the plan. */
static bool writes_in_place(mxc_executor *x, const char *kind, const char *name) {
    const char *text;
    CK_OK(mxc_executor_print(x, &text));
    for (const char *line = text; *line; line = strchr(line, '\n') + 1) {
        char k[16], op[64], nm[64];
        if (sscanf(line, "%*d %15s %63s %63[^:]", k, op, nm) == 3 && strcmp(k, kind) == 0 &&
            strcmp(nm, name) == 0) {
            const char *arrow = strstr(line, " ->"), *in = strchr(line, '[');
            const char *out = arrow ? strchr(arrow, '[') : NULL;
            int bi = -1, bo = -2;
            return in && out && in < arrow && sscanf(in, "[b%d]", &bi) == 1 &&
                   sscanf(out, "[b%d]", &bo) == 1 && bi == bo;
        }
        if (strchr(line, '\n') == NULL)
            break;
    }
    return false;
}

/* The gradient of every weight equals finite differences of sum(w * output), with the
 * plan taking the operator's in-place option (so the kernel runs with aliased buffers). */
START_TEST(test_computed_operands_gradients) {
    const struct computed_case *c = &computed_cases[_i];
    mxc_symbol *sym = computed_net(c);
    mxc_executor *x = NULL;
    const char *names[] = {"data"};
    CK_OK(mxc_executor_simple_bind(sym, mxc_cpu(), 1, names, &SHAPE(4, 6), MXC_GRAD_WRITE, &x));
    bool variadic = strcmp(c->op, "ElementWiseSum") == 0;
    ck_assert_msg(writes_in_place(x, variadic ? "forward" : "backward", "op"),
                  "%s(%s): the plan does not run it in place", c->op, c->operands);
    int na;
    mxc_ndarray *const *args;
    CK_OK(mxc_executor_arrays(x, &na, &args, NULL, NULL, NULL));
    for (int i = 0; i < na; i++)
        fill(args[i], 30 + (unsigned)i, -1, 1);
    expect_weighted_grads_match_fd(x, sym, 41);
    mxc_executor_free(x);
    mxc_symbol_free(sym);
}
END_TEST

/* ---- Memory ------------------------------------------------------------------------- */

/* data -> 8 x (fc 64 -> relu) ; training */
START_TEST(test_plan_shares_memory_and_peak_stays_within) {
    mxc_symbol *s = var("data");
    char name[32];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "fc%d", i);
        s = apply("FullyConnected", name, s, "num_hidden", "64", NULL, NULL);
        snprintf(name, sizeof name, "relu%d", i);
        s = apply("relu", name, s, NULL, NULL, NULL, NULL);
    }
    mxc_executor *x = NULL;
    const char *names[] = {"data"};
    mxc_shape shapes[] = {SHAPE(32, 64)};
    CK_OK(mxc_executor_simple_bind(s, mxc_cpu(), 1, names, shapes, MXC_GRAD_WRITE, &x));
    mxc_exec_plan_info info;
    CK_OK(mxc_executor_plan_info(x, &info));
    ck_assert_int_gt(info.num_forward_nodes, 0);
    ck_assert_int_gt(info.num_nodes, info.num_forward_nodes);
    ck_assert_uint_lt(info.planned_bytes, info.naive_bytes);
    ck_assert_uint_le(info.planned_bytes * 2, info.naive_bytes); /* relu works in place */
    const char *text;
    CK_OK(mxc_executor_print(x, &text));
    ck_assert_ptr_nonnull(strstr(text, "planned"));
    mxc_ndarray *head = NULL;
    CK_OK(mxc_nd_ones(&SHAPE(32, 64), MXC_FLOAT32, mxc_cpu(), &head));
    /* first pass warms the pool; the second is measured */
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 1, &head));
    CK_OK(mxc_nd_wait_all());
    mxc_storage_stats before, after;
    CK_OK(mxc_storage_reset_stats(mxc_cpu()));
    CK_OK(mxc_storage_get_stats(mxc_cpu(), &before));
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 1, &head));
    CK_OK(mxc_nd_wait_all());
    CK_OK(mxc_storage_get_stats(mxc_cpu(), &after));
    size_t peak = after.peak_bytes_in_use - before.bytes_in_use;
    /* the pool rounds each block up to its size class; temp space may also be taken */
    ck_assert_msg(peak <= info.planned_bytes + info.planned_bytes / 4 + (64 << 10),
                  "peak %zu bytes over a plan of %zu", peak, info.planned_bytes);
    ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use); /* all released again */
    mxc_nd_free(head);
    mxc_executor_free(x);
    mxc_symbol_free(s);
}
END_TEST

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Two branches of four 50 ms sleeps each, joined by _plus: about 200 ms, not 400, on
 * two CPU workers (the default is one; each test runs in its own process, created before
 * the default engine, so the setting is read when the engine is). */
START_TEST(test_independent_branches_run_concurrently) {
    setenv("MXC_CPU_WORKER_NTHREADS", "2", 1);
    mxc_symbol *a = var("a"), *b = var("b");
    for (int i = 0; i < 4; i++) {
        a = apply("_sleep", NULL, a, "seconds", "0.05", NULL, NULL);
        b = apply("_sleep", NULL, b, "seconds", "0.05", NULL, NULL);
    }
    mxc_symbol *s = apply2("_plus", "join", a, b);
    mxc_executor *x = NULL;
    const char *names[] = {"a", "b"};
    mxc_shape shapes[] = {SHAPE(8), SHAPE(8)};
    CK_OK(mxc_executor_simple_bind(s, mxc_cpu(), 2, names, shapes, MXC_GRAD_NULL, &x));
    int nout;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &nout, &outs));
    double t0 = now();
    CK_OK(mxc_executor_forward(x, 0));
    CK_OK(mxc_nd_wait_to_read(outs[0]));
    double t = now() - t0;
    ck_assert_msg(t < 0.35, "two branches of 0.2 s took %.3f s", t);
    ck_assert_msg(t >= 0.19, "a branch of 0.2 s took %.3f s", t);
    mxc_executor_free(x);
    mxc_symbol_free(s);
}
END_TEST

START_TEST(test_reshape_shares_weights) {
    mxc_symbol *sym = mlp();
    mxc_executor *x = bind_mlp(sym, MXC_GRAD_WRITE), *y = NULL;
    const char *names[] = {"data"};
    mxc_shape shapes[] = {SHAPE(9, 6)};
    CK_OK(mxc_executor_reshape(x, 1, names, shapes, &y));
    mxc_ndarray *const *xa, *const *ya;
    CK_OK(mxc_executor_arrays(x, NULL, &xa, NULL, NULL, NULL));
    CK_OK(mxc_executor_arrays(y, NULL, &ya, NULL, NULL, NULL));
    mxc_shape s;
    CK_OK(mxc_nd_get_shape(ya[0], &s));
    ck_assert_int_eq(s.dims[0], 9);
    /* fc1_weight is the same memory: a write through one is seen by the other */
    float *w = read_all(xa[1]);
    w[0] = 42.0f;
    CK_OK(mxc_nd_sync_copy_from_cpu(ya[1], w, sizeof(float) * (size_t)mxc_nd_size(ya[1])));
    float *back = read_all(xa[1]);
    ck_assert_float_eq(back[0], 42.0f);
    free(w);
    free(back);
    CK_OK(mxc_executor_forward(y, 0));
    int n;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(y, &n, &outs));
    CK_OK(mxc_nd_get_shape(outs[0], &s));
    ck_assert_int_eq(s.dims[0], 9);
    CK_OK(mxc_nd_wait_to_read(outs[0]));
    mxc_executor_free(y);
    mxc_executor_free(x);
    mxc_symbol_free(sym);
}
END_TEST

/* ---- MXNet's own networks ------------------------------------------------------------ */

/* The array named `name` in a loaded list, or NULL. */
static mxc_ndarray *named(size_t n, mxc_ndarray **arrays, char **names, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return arrays[i];
    return NULL;
}

/* tests/data/symbol/<net>: the symbol, parameters and a forward pass saved by MXNet 1.9.1
 * (scripts/gen_symbol_fixtures.py). Bound here with the same arrays, forward in inference
 * mode gives MXNet's outputs within 1e-4 (relative to 1 + |value|). */
static void check_mxnet_forward(const char *net) {
    char path[256];
    mxc_symbol *sym = NULL;
    snprintf(path, sizeof path, "tests/data/symbol/%s-symbol.json", net);
    CK_OK(mxc_symbol_load(path, &sym));
    size_t np = 0, nio = 0;
    mxc_ndarray **params = NULL, **io = NULL;
    char **pnames = NULL, **ionames = NULL;
    snprintf(path, sizeof path, "tests/data/symbol/%s-0000.params", net);
    CK_OK(mxc_nd_load(path, mxc_cpu(), &np, &params, &pnames));
    snprintf(path, sizeof path, "tests/data/symbol/%s-io.params", net);
    CK_OK(mxc_nd_load(path, mxc_cpu(), &nio, &io, &ionames));
    int na, nx, no;
    const char *const *args, *const *auxs, *const *outs;
    CK_OK(mxc_symbol_list_arguments(sym, &na, &args));
    CK_OK(mxc_symbol_list_auxiliary_states(sym, &nx, &auxs));
    mxc_ndarray *arg_arrays[64], *aux_arrays[64];
    ck_assert_int_le(na, 64);
    ck_assert_int_le(nx, 64);
    for (int i = 0; i < na; i++) {
        char key[128];
        snprintf(key, sizeof key, "input:%s", args[i]);
        arg_arrays[i] = named(nio, io, ionames, key);
        snprintf(key, sizeof key, "arg:%s", args[i]);
        if (arg_arrays[i] == NULL)
            arg_arrays[i] = named(np, params, pnames, key);
        ck_assert_msg(arg_arrays[i] != NULL, "%s: no value for %s", net, args[i]);
    }
    for (int i = 0; i < nx; i++) {
        char key[128];
        snprintf(key, sizeof key, "aux:%s", auxs[i]);
        aux_arrays[i] = named(np, params, pnames, key);
        ck_assert_msg(aux_arrays[i] != NULL, "%s: no value for %s", net, auxs[i]);
    }
    mxc_executor *x = NULL;
    CK_OK(mxc_executor_bind(sym, mxc_cpu(), na, arg_arrays, NULL, NULL, nx, aux_arrays, &x));
    CK_OK(mxc_executor_forward(x, 0));
    mxc_ndarray *const *got;
    int ng;
    CK_OK(mxc_executor_outputs(x, &ng, &got));
    CK_OK(mxc_symbol_list_outputs(sym, &no, &outs));
    ck_assert_int_eq(ng, no);
    for (int i = 0; i < no; i++) {
        char key[128];
        snprintf(key, sizeof key, "output:%s", outs[i]);
        mxc_ndarray *want = named(nio, io, ionames, key);
        ck_assert_msg(want != NULL, "%s: no reference for %s", net, outs[i]);
        ck_assert_int_eq(mxc_nd_size(got[i]), mxc_nd_size(want));
        float *w = read_all(want);
        snprintf(key, sizeof key, "%s: %s", net, outs[i]);
        expect_close(got[i], w, 1e-4, key);
        free(w);
    }
    mxc_executor_free(x);
    mxc_nd_list_free(np, params, pnames);
    mxc_nd_list_free(nio, io, ionames);
    mxc_symbol_free(sym);
}

START_TEST(test_mxnet_networks_forward) {
    const char *nets[] = {"mlp", "lenet", "resblock", "concat"};
    for (int i = 0; i < 4; i++)
        check_mxnet_forward(nets[i]);
}
END_TEST

/* The gating network of computed_cases[0] bound to the arguments MXNet 1.9.1 used
 * (tests/data/executor/gating.params, scripts/gen_grad_fixtures.py): its output and the
 * gradient of every argument, data included, equal MXNet's within 1e-5. */
START_TEST(test_gating_gradients_equal_mxnet) {
    mxc_symbol *sym = computed_net(&computed_cases[0]);
    size_t nf = 0;
    mxc_ndarray **ref = NULL;
    char **rnames = NULL;
    CK_OK(mxc_nd_load("tests/data/executor/gating.params", mxc_cpu(), &nf, &ref, &rnames));
    int na;
    const char *const *names;
    CK_OK(mxc_symbol_list_arguments(sym, &na, &names));
    ck_assert_int_eq(na, 7);
    mxc_ndarray *args[7], *grads[7];
    char key[128];
    for (int i = 0; i < na; i++) {
        snprintf(key, sizeof key, "arg:%s", names[i]);
        args[i] = named(nf, ref, rnames, key);
        ck_assert_msg(args[i] != NULL, "gating.params has no %s", key);
        mxc_shape s;
        CK_OK(mxc_nd_get_shape(args[i], &s));
        CK_OK(mxc_nd_zeros(&s, MXC_FLOAT32, mxc_cpu(), &grads[i]));
    }
    mxc_executor *x = NULL;
    CK_OK(mxc_executor_bind(sym, mxc_cpu(), na, args, grads, NULL, 0, NULL, &x));
    ck_assert(writes_in_place(x, "backward", "op"));
    mxc_ndarray *head = named(nf, ref, rnames, "head");
    ck_assert_ptr_nonnull(head);
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 1, &head));
    int no;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &no, &outs));
    float *want = read_all(named(nf, ref, rnames, "output"));
    expect_close(outs[0], want, 1e-5, "gating output vs MXNet");
    free(want);
    CK_OK(mxc_symbol_list_arguments(sym, &na, &names)); /* binding listed them again */
    for (int i = 0; i < na; i++) {
        snprintf(key, sizeof key, "grad:%s", names[i]);
        mxc_ndarray *g = named(nf, ref, rnames, key);
        ck_assert_msg(g != NULL, "gating.params has no %s", key);
        want = read_all(g);
        snprintf(key, sizeof key, "gradient of %s vs MXNet", names[i]);
        expect_close(grads[i], want, 1e-5, key);
        free(want);
        mxc_nd_free(grads[i]);
    }
    mxc_executor_free(x);
    mxc_nd_list_free(nf, ref, rnames);
    mxc_symbol_free(sym);
}
END_TEST

struct monitor_log {
    int calls;
    bool saw_fc1, saw_backward;
};

static void monitor(const char *name, mxc_ndarray *array, void *user) {
    struct monitor_log *log = user;
    log->calls++;
    log->saw_fc1 |= strcmp(name, "fc1_output0") == 0 && mxc_nd_size(array) == 4 * 5;
    log->saw_backward |= strstr(name, "_backward_") != NULL;
}

START_TEST(test_monitor_sees_every_output) {
    mxc_symbol *sym = mlp();
    mxc_executor *x = bind_mlp(sym, MXC_GRAD_WRITE);
    struct monitor_log log = {0};
    CK_OK(mxc_executor_set_monitor(x, monitor, &log));
    mxc_ndarray *head = NULL;
    CK_OK(mxc_nd_ones(&SHAPE(4, 3), MXC_FLOAT32, mxc_cpu(), &head));
    CK_OK(mxc_executor_forward(x, 1));
    ck_assert_int_eq(log.calls, 3); /* fc1, relu1, fc2 */
    ck_assert(log.saw_fc1);
    CK_OK(mxc_executor_backward(x, 1, &head));
    ck_assert(log.saw_backward);
    CK_OK(mxc_executor_set_monitor(x, NULL, NULL));
    int before = log.calls;
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_nd_wait_all());
    ck_assert_int_eq(log.calls, before);
    mxc_nd_free(head);
    mxc_executor_free(x);
    mxc_symbol_free(sym);
}
END_TEST

/* ---- Messages ------------------------------------------------------------------------ */

/* A failure passed on through several layers names the public call once, each layer's
 * context once, and keeps the innermost words intact. */
START_TEST(test_error_messages_name_the_call_once) {
    mxc_symbol *sym = mlp();
    const mxc_shape shapes[] = {SHAPE(4, 6), SHAPE(5, 6), SHAPE(5), SHAPE(3, 4), SHAPE(3)};
    mxc_ndarray *a[5] = {NULL};
    for (int i = 0; i < 5; i++)
        CK_OK(mxc_nd_create(&shapes[i], MXC_FLOAT32, mxc_cpu(), i == 1, &a[i]));
    mxc_executor *x = NULL;
    CK_ERR(MXC_ESHAPE, mxc_executor_bind(sym, mxc_cpu(), 5, a, NULL, NULL, 0, NULL, &x));
    ck_assert_str_eq(mxc_last_error(), "mxc_executor_bind: node fc2: FullyConnected: weight has "
                                       "shape (3, 4) but (3, 5) is expected");
    /* at run time: fc1 reads its weight, which nothing wrote */
    mxc_nd_free(a[3]);
    CK_OK(mxc_nd_zeros(&SHAPE(3, 5), MXC_FLOAT32, mxc_cpu(), &a[3]));
    CK_OK(mxc_executor_bind(sym, mxc_cpu(), 5, a, NULL, NULL, 0, NULL, &x));
    CK_OK(mxc_executor_forward(x, 0));
    int n;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &n, &outs));
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(outs[0]));
    ck_assert_str_eq(mxc_last_error(), "operation 'FullyConnected' failed: node fc1: an array is "
                                       "read before anything wrote it");
    mxc_executor_free(x);
    /* a head gradient of the wrong shape */
    x = bind_mlp(sym, MXC_GRAD_WRITE);
    CK_OK(mxc_executor_forward(x, 1));
    mxc_ndarray *head = NULL;
    CK_OK(mxc_nd_zeros(&SHAPE(4, 4), MXC_FLOAT32, mxc_cpu(), &head));
    CK_ERR(MXC_ESHAPE, mxc_executor_backward(x, 1, &head));
    ck_assert_str_eq(mxc_last_error(),
                     "mxc_executor_backward: head gradient 0: src (4, 4) and dst (4, 3) differ");
    mxc_nd_free(head);
    mxc_executor_free(x);
    for (int i = 0; i < 5; i++)
        mxc_nd_free(a[i]);
    mxc_symbol_free(sym);
}
END_TEST

/* A failed pass does not break the executor: once the input is fixed, the next pass
 * overwrites what the failure reached (its nodes write their outputs whole) and the
 * results are right again, forward and backward. */
START_TEST(test_recovers_after_a_failed_pass) {
    mxc_symbol *sym = mlp();
    mxc_executor *x = bind_mlp(sym, MXC_GRAD_WRITE);
    mxc_ndarray *const *args, *const *grads;
    CK_OK(mxc_executor_arrays(x, NULL, &args, &grads, NULL, NULL));
    int n;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &n, &outs));
    mxc_ndarray *head = NULL;
    CK_OK(mxc_nd_create(&SHAPE(4, 3), MXC_FLOAT32, mxc_cpu(), 0, &head));
    fill(head, 7, -1, 1);
    /* the expected results, from a healthy pass */
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 1, &head));
    float *want_out = read_all(outs[0]), *want_grad = read_all(grads[1]);
    /* break the data: a copy from an array nothing wrote fails, and so does the pass */
    mxc_ndarray *unwritten = NULL, *saved = NULL;
    CK_OK(mxc_nd_create(&SHAPE(4, 6), MXC_FLOAT32, mxc_cpu(), 1, &unwritten));
    CK_OK(mxc_nd_create(&SHAPE(4, 6), MXC_FLOAT32, mxc_cpu(), 0, &saved));
    CK_OK(mxc_nd_copy_to(args[0], saved));
    CK_OK(mxc_nd_copy_to(unwritten, args[0]));
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 1, &head));
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(outs[0]));
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(grads[1]));
    /* repair the data: the next pass is whole again */
    CK_OK(mxc_nd_copy_to(saved, args[0]));
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 1, &head));
    expect_close(outs[0], want_out, 0, "output after the repair");
    expect_close(grads[1], want_grad, 0, "fc1_weight gradient after the repair");
    free(want_out);
    free(want_grad);
    mxc_nd_free(unwritten);
    mxc_nd_free(saved);
    mxc_nd_free(head);
    mxc_executor_free(x);
    mxc_symbol_free(sym);
}
END_TEST

/* ---- Freeing: what it waits for ----------------------------------------------------- */

/* An array whose computation failed: the operation read an array nothing wrote. */
static mxc_ndarray *failed_array(void) {
    mxc_ndarray *unwritten = NULL, *failed = NULL;
    CK_OK(mxc_nd_create(&SHAPE(3), MXC_FLOAT32, mxc_cpu(), 1, &unwritten));
    CK_OK(mxc_nd_add_scalar(unwritten, 1, &failed));
    mxc_nd_free(unwritten);
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(failed));
    return failed;
}

/* Freeing an executor waits for its own work, and neither reports nor clears a failure
 * of an unrelated array; a copy into that array makes it readable again. */
START_TEST(test_free_leaves_other_failures) {
    mxc_ndarray *failed = failed_array();
    mxc_symbol *sym = mlp();
    mxc_executor *x = bind_mlp(sym, MXC_GRAD_WRITE);
    CK_OK(mxc_executor_forward(x, 1));
    mxc_executor_free(x);
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(failed));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "read before anything wrote it"));
    CK_ERR(MXC_EINVAL, mxc_nd_wait_all());
    CK_ERR(MXC_EINVAL, mxc_nd_wait_to_read(failed)); /* and wait_all did not clear it */
    const float fresh[3] = {1, 2, 3};
    mxc_ndarray *src = NULL;
    CK_OK(mxc_nd_create(&SHAPE(3), MXC_FLOAT32, mxc_cpu(), 0, &src));
    CK_OK(mxc_nd_sync_copy_from_cpu(src, fresh, sizeof fresh));
    CK_OK(mxc_nd_copy_to(src, failed));
    expect_close(failed, (const float[]){1, 2, 3}, 0, "the array copied into");
    CK_OK(mxc_nd_wait_all());
    mxc_nd_free(src);
    mxc_nd_free(failed);
    mxc_symbol_free(sym);
}
END_TEST

/* A thread keeping the engine busy with operations of its own does not hold up
 * mxc_executor_free: it returns once the executor's operations are done. */
struct busy {
    mxc_engine *e;
    mxc_var *shared;
    atomic_int pushed, stopped;
};

static int busy_fn(const mxc_run_ctx *rctx, void *arg) {
    (void)rctx;
    (void)arg;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return MXC_OK;
}

static void *busy_main(void *arg) {
    struct busy *b = arg;
    uint64_t end = mxct_now_ns() + 800u * 1000 * 1000; /* 10 ms operations every 5 ms */
    while (mxct_now_ns() < end) {
        /* reads only: each is ready at once and queues behind the ones before */
        mxc_engine_op_desc d = {
            .fn = busy_fn, .const_vars = &b->shared, .num_const_vars = 1, .name = "busy"};
        if (mxc_engine_push(b->e, &d) != MXC_OK)
            break;
        atomic_fetch_add(&b->pushed, 1);
        mxct_sleep_us(5000);
    }
    atomic_store(&b->stopped, 1);
    return NULL;
}

START_TEST(test_free_waits_for_own_work_only) {
    struct busy b = {0};
    CK_OK(mxc_engine_get_default(&b.e));
    CK_OK(mxc_engine_new_var(b.e, &b.shared));
    mxc_symbol *sym = mlp();
    mxc_executor *x = bind_mlp(sym, MXC_GRAD_WRITE);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, busy_main, &b), 0);
    ck_assert(mxct_wait_at_least(&b.pushed, 10, 10000));
    CK_OK(mxc_executor_forward(x, 1));
    mxc_executor_free(x);
    ck_assert_msg(!atomic_load(&b.stopped),
                  "mxc_executor_free returned only after the other thread stopped pushing");
    pthread_join(t, NULL);
    CK_OK(mxc_engine_delete_var(b.e, b.shared, NULL, NULL));
    CK_OK(mxc_nd_wait_all());
    mxc_symbol_free(sym);
}
END_TEST

/* ---- Misuse ------------------------------------------------------------------------- */

static const mxc_shape mlp_shapes[5] = {SHAPE(4, 6), SHAPE(5, 6), SHAPE(5), SHAPE(3, 5), SHAPE(3)};

/* The MLP's five arguments (data, fc1_weight, fc1_bias, fc2_weight, fc2_bias) for a (4, 6)
 * batch: zero float32 arrays. */
static void mlp_zeros(mxc_ndarray **a) {
    for (int i = 0; i < 5; i++)
        CK_OK(mxc_nd_zeros(&mlp_shapes[i], MXC_FLOAT32, mxc_cpu(), &a[i]));
}

static void free_all(mxc_ndarray **a, int n) {
    for (int i = 0; i < n; i++)
        mxc_nd_free(a[i]);
}

START_TEST(test_misuse) {
    mxc_symbol *sym = mlp();
    mxc_executor *x = NULL;
    mxc_ndarray *a[5] = {NULL};
    const mxc_shape *shapes = mlp_shapes;
    mlp_zeros(a);
    CK_ERR(MXC_EINVAL, mxc_executor_bind(sym, mxc_cpu(), 4, a, NULL, NULL, 0, NULL, &x));
    ck_assert_ptr_null(x);
    /* fc2_weight of the wrong shape: a failure deep inside bind names the public call
     * once, then the node, then the operator's own words */
    mxc_ndarray *bad = NULL;
    CK_OK(mxc_nd_zeros(&SHAPE(3, 4), MXC_FLOAT32, mxc_cpu(), &bad));
    mxc_ndarray *b[5] = {a[0], a[1], a[2], bad, a[4]};
    CK_ERR(MXC_ESHAPE, mxc_executor_bind(sym, mxc_cpu(), 5, b, NULL, NULL, 0, NULL, &x));
    ck_assert_str_eq(mxc_last_error(), "mxc_executor_bind: node fc2: FullyConnected: weight "
                                       "has shape (3, 4) but (3, 5) is expected");
    const mxc_shape given[] = {SHAPE(4, 6), SHAPE(3, 4)};
    CK_ERR(MXC_ESHAPE,
           mxc_executor_simple_bind(sym, mxc_cpu(), 2, (const char *[]){"data", "fc2_weight"},
                                    given, MXC_GRAD_WRITE, &x));
    ck_assert_str_eq(mxc_last_error(), "mxc_executor_simple_bind: node 'fc2': FullyConnected: "
                                       "weight has shape (3, 4) but (3, 5) is expected");
    /* no gradients bound: backward is an error */
    CK_OK(mxc_executor_bind(sym, mxc_cpu(), 5, a, NULL, NULL, 0, NULL, &x));
    CK_OK(mxc_executor_forward(x, 1));
    CK_ERR(MXC_EINVAL, mxc_executor_backward(x, 0, NULL));
    mxc_executor_free(x);
    /* gradients bound but the head gradient missing */
    CK_OK(mxc_executor_simple_bind(sym, mxc_cpu(), 1, (const char *[]){"data"}, shapes,
                                   MXC_GRAD_WRITE, &x));
    CK_OK(mxc_executor_forward(x, 1));
    CK_ERR(MXC_EINVAL, mxc_executor_backward(x, 0, NULL));
    mxc_executor_free(x);
    CK_ERR(MXC_EINVAL, mxc_executor_simple_bind(sym, mxc_cpu(), 1, (const char *[]){"nope"}, shapes,
                                                MXC_GRAD_WRITE, &x));
    CK_ERR(MXC_EMISUSE, mxc_executor_forward(NULL, 0));
    free_all(a, 5);
    mxc_nd_free(bad);
    mxc_symbol_free(sym);
}
END_TEST

/* A NULL or freed symbol is refused at the call, naming it, never dereferenced. */
START_TEST(test_bind_refuses_a_bad_symbol) {
    mxc_executor *x = (mxc_executor *)1;
    const char *names[] = {"data"};
    mxc_shape shapes[] = {SHAPE(4, 6)};
    CK_ERR(MXC_EMISUSE,
           mxc_executor_simple_bind(NULL, mxc_cpu(), 1, names, shapes, MXC_GRAD_WRITE, &x));
    ck_assert_ptr_null(x);
    ck_assert_str_eq(mxc_last_error(), "mxc_executor_simple_bind: symbol is NULL");
    CK_ERR(MXC_EMISUSE, mxc_executor_bind(NULL, mxc_cpu(), 0, NULL, NULL, NULL, 0, NULL, &x));
    ck_assert_str_eq(mxc_last_error(), "mxc_executor_bind: symbol is NULL");
    CK_ERR(MXC_EMISUSE, mxc_executor_reshape(NULL, 1, names, shapes, &x));
    ck_assert_ptr_null(x);
}
END_TEST

/* Arrays whose dtype differs from what the symbol declares are MXC_ETYPE at bind, naming
 * the argument and both types; a declared dtype no kernel computes in is MXC_ENOTSUP. */
START_TEST(test_bind_checks_dtypes) {
    mxc_symbol *sym = mlp();
    mxc_executor *x = NULL;
    mxc_ndarray *a[5] = {NULL}, *g[5] = {NULL}, *d32 = NULL, *g64 = NULL;
    const mxc_shape *shapes = mlp_shapes;
    mlp_zeros(a);
    mlp_zeros(g);
    CK_OK(mxc_nd_zeros(&shapes[0], MXC_INT32, mxc_cpu(), &d32));
    mxc_ndarray *b[5] = {d32, a[1], a[2], a[3], a[4]};
    CK_ERR(MXC_ETYPE, mxc_executor_bind(sym, mxc_cpu(), 5, b, NULL, NULL, 0, NULL, &x));
    ck_assert_ptr_null(x);
    ck_assert_str_eq(mxc_last_error(),
                     "mxc_executor_bind: argument data is int32 but the symbol declares float32");
    /* a gradient of another dtype than its argument */
    CK_OK(mxc_nd_zeros(&shapes[1], MXC_FLOAT64, mxc_cpu(), &g64));
    mxc_ndarray *gb[5] = {g[0], g64, g[2], g[3], g[4]};
    CK_ERR(MXC_ETYPE, mxc_executor_bind(sym, mxc_cpu(), 5, a, gb, NULL, 0, NULL, &x));
    ck_assert_str_eq(mxc_last_error(), "mxc_executor_bind: the gradient of fc1_weight is "
                                       "float64 but the argument is float32");
    CK_OK(mxc_executor_bind(sym, mxc_cpu(), 5, a, g, NULL, 0, NULL, &x));
    mxc_executor_free(x);
    /* declared float64 (a __dtype__ hint): simple_bind makes float64 arrays, and no
     * operator computes in float64 */
    mxc_symbol *data = var("data");
    CK_OK(mxc_symbol_set_attr(data, "__dtype__", "float64"));
    mxc_symbol *fc = apply("FullyConnected", "fc", data, "num_hidden", "3", NULL, NULL);
    CK_ERR(MXC_ENOTSUP, mxc_executor_simple_bind(fc, mxc_cpu(), 1, (const char *[]){"data"}, shapes,
                                                 MXC_GRAD_WRITE, &x));
    ck_assert_ptr_null(x);
    ck_assert_str_eq(mxc_last_error(), "mxc_executor_simple_bind: node fc: FullyConnected has "
                                       "no CPU kernel for float64 on cpu(0)");
    free_all(a, 5);
    free_all(g, 5);
    mxc_nd_free(d32);
    mxc_nd_free(g64);
    mxc_symbol_free(fc);
    mxc_symbol_free(sym);
}
END_TEST

/* backward reads what the last forward(is_train = 1) wrote, and its pass releases that
 * memory: without one it is MXC_EMISUSE at the call, not a failure at a later wait. */
START_TEST(test_backward_needs_a_training_forward) {
    mxc_symbol *sym = mlp();
    mxc_executor *x = bind_mlp(sym, MXC_GRAD_WRITE);
    mxc_ndarray *head = NULL;
    CK_OK(mxc_nd_ones(&SHAPE(4, 3), MXC_FLOAT32, mxc_cpu(), &head));
    CK_ERR(MXC_EMISUSE, mxc_executor_backward(x, 1, &head));
    ck_assert_ptr_nonnull(strstr(mxc_last_error(), "mxc_executor_backward: no forward"));
    CK_OK(mxc_executor_forward(x, 0));
    CK_ERR(MXC_EMISUSE, mxc_executor_backward(x, 1, &head));
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 1, &head));
    CK_ERR(MXC_EMISUSE, mxc_executor_backward(x, 1, &head)); /* its memory was released */
    CK_OK(mxc_nd_wait_all());
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 1, &head));
    CK_OK(mxc_nd_wait_all());
    mxc_nd_free(head);
    mxc_executor_free(x);
    mxc_symbol_free(sym);
}
END_TEST

/* A batch whose memory cannot exist (more than the machine's memory and swap, or more
 * bytes than a size_t holds) is MXC_ENOMEM at bind; one whose element counts overflow
 * int64 is already a shape error (MXC_ESHAPE) in inference; nothing runs. */
START_TEST(test_bind_refuses_memory_that_cannot_exist) {
    mxc_symbol *sym = mlp();
    mxc_executor *x = NULL;
    const char *names[] = {"data"};
    const mxc_shape huge[] = {SHAPE((int64_t)1 << 40, 6), SHAPE((int64_t)1 << 60, 1),
                              SHAPE((int64_t)1 << 62, 1)};
    const int want[] = {MXC_ENOMEM, MXC_ENOMEM, MXC_ESHAPE};
    const char *says[] = {"memory and swap", "size_t", "int64"};
    for (int i = 0; i < 3; i++) {
        CK_ERR(want[i],
               mxc_executor_simple_bind(sym, mxc_cpu(), 1, names, &huge[i], MXC_GRAD_WRITE, &x));
        ck_assert_ptr_null(x);
        ck_assert_msg(strncmp(mxc_last_error(), "mxc_executor_simple_bind: ", 26) == 0, "%s",
                      mxc_last_error());
        ck_assert_msg(strstr(mxc_last_error(), says[i]), "%s", mxc_last_error());
    }
    CK_OK(mxc_nd_wait_all());
    mxc_symbol_free(sym);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("executor");
    TCase *tc = tcase_create("executor");
    tcase_set_timeout(tc, mxct_timeout(60));
    tcase_add_test(tc, test_forward_equals_imperative);
    tcase_add_test(tc, test_backward_equals_finite_differences);
    tcase_add_test(tc, test_add_to_accumulates_across_passes);
    tcase_add_test(tc, test_fan_out_gradients_are_summed);
    tcase_add_test(tc, test_many_gradients_are_summed_in_parts);
    tcase_add_test(tc, test_batch_of_zero_trains);
    tcase_add_test(tc, test_lenet_backward_equals_finite_differences);
    tcase_add_loop_test(tc, test_computed_operands_gradients, 0,
                        (int)(sizeof computed_cases / sizeof computed_cases[0]));
    tcase_add_test(tc, test_plan_shares_memory_and_peak_stays_within);
    tcase_add_test(tc, test_independent_branches_run_concurrently);
    tcase_add_test(tc, test_reshape_shares_weights);
    tcase_add_test(tc, test_mxnet_networks_forward);
    tcase_add_test(tc, test_gating_gradients_equal_mxnet);
    tcase_add_test(tc, test_monitor_sees_every_output);
    tcase_add_test(tc, test_misuse);
    tcase_add_test(tc, test_bind_refuses_a_bad_symbol);
    tcase_add_test(tc, test_bind_checks_dtypes);
    tcase_add_test(tc, test_backward_needs_a_training_forward);
    tcase_add_test(tc, test_bind_refuses_memory_that_cannot_exist);
    tcase_add_test(tc, test_error_messages_name_the_call_once);
    tcase_add_test(tc, test_recovers_after_a_failed_pass);
    tcase_add_test(tc, test_free_leaves_other_failures);
    tcase_add_test(tc, test_free_waits_for_own_work_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return mxct_run_suite(suite()); }

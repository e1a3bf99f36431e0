/*
 * tests/check_autograd.c — imperative autograd (mxc/autograd.h): LeNet's and the MLP's
 * gradients recorded imperatively equal a bound executor's bit for bit (naive engine);
 * a graph with fan-out, a reshape view and an in-place operation matches finite
 * differences; head gradients, write / add requests, retain_graph, gradients of a subset,
 * training mode; recording off records nothing; misuse is an error code with a message.
 */
#include "mxc/autograd.h"
#include "mxc/engine.h"
#include "mxc/executor.h"
#include "mxc/model.h"
#include "mxc/networks.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "mxc/storage.h"
#include "mxc/symbol.h"
#include "common/handle.h"
#include "tests/util/test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Helpers ------------------------------------------------------------------------ */

/* Runs `name` on `n` inputs with up to three parameters (NULL-ended key/value pairs);
 * returns the new output. */
static mxc_ndarray *op(const char *name, int n, mxc_ndarray *const *ins, const char *k1,
                       const char *v1, const char *k2, const char *v2, const char *k3,
                       const char *v3) {
    const char *keys[3] = {k1, k2, k3}, *vals[3] = {v1, v2, v3};
    int np = k3 ? 3 : k2 ? 2 : k1 ? 1 : 0;
    mxc_ndarray *out = NULL;
    CK_OK(mxc_imperative_invoke(name, np, keys, vals, n, ins, 1, &out, 1));
    return out;
}

static mxc_ndarray *op1(const char *name, mxc_ndarray *x) {
    return op(name, 1, &x, NULL, NULL, NULL, NULL, NULL, NULL);
}

static mxc_ndarray *op2(const char *name, mxc_ndarray *a, mxc_ndarray *b) {
    mxc_ndarray *ins[2] = {a, b};
    return op(name, 2, ins, NULL, NULL, NULL, NULL, NULL, NULL);
}

static mxc_ndarray *array(mxc_shape s, const float *data) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_create(&s, MXC_FLOAT32, mxc_cpu(), 0, &a));
    if (data)
        CK_OK(mxc_nd_sync_copy_from_cpu(a, data, sizeof(float) * (size_t)mxc_nd_size(a)));
    return a;
}

static mxc_ndarray *full(mxc_shape s, float v) {
    mxc_ndarray *a = NULL;
    CK_OK(mxc_nd_full(&s, MXC_FLOAT32, mxc_cpu(), v, &a));
    return a;
}

static void fill_random(mxc_ndarray *a, unsigned seed, float lo, float hi) {
    int64_t n = mxc_nd_size(a);
    float *h = malloc(sizeof(float) * (size_t)n);
    srand(seed);
    for (int64_t i = 0; i < n; i++)
        h[i] = lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
    CK_OK(mxc_nd_sync_copy_from_cpu(a, h, sizeof(float) * (size_t)n));
    free(h);
}

/* The array's values, malloc'ed. */
static float *values(const mxc_ndarray *a) {
    int64_t n = mxc_nd_size(a);
    float *h = malloc(sizeof(float) * (size_t)n + 1);
    CK_OK(mxc_nd_sync_copy_to_cpu(a, h, sizeof(float) * (size_t)n));
    return h;
}

static float scalar(const mxc_ndarray *a) {
    float *h = values(a), v = h[0];
    free(h);
    return v;
}

static void expect_values(const mxc_ndarray *a, const float *want, float tol) {
    float *h = values(a);
    for (int64_t i = 0; i < mxc_nd_size(a); i++)
        ck_assert_msg(fabsf(h[i] - want[i]) <= tol, "element %lld: %g, expected %g", (long long)i,
                      h[i], want[i]);
    free(h);
}

static void expect_error(int rc, int code, const char *words) {
    ck_assert_int_eq(rc, code);
    ck_assert_msg(strstr(mxc_last_error(), words) != NULL, "message '%s' lacks '%s'",
                  mxc_last_error(), words);
}

/* ---- Gradients equal the executor's --------------------------------------------------- */

/* A network's forward, written imperatively: `arg(name)` gives the array of an argument. */
struct net_args {
    const char *const *names;
    mxc_ndarray **arrays;
    int num;
};

static mxc_ndarray *arg(const struct net_args *a, const char *name) {
    for (int i = 0; i < a->num; i++)
        if (strcmp(a->names[i], name) == 0)
            return a->arrays[i];
    ck_abort_msg("no argument %s", name);
    return NULL;
}

/* FullyConnected / Convolution `layer` of `x` with its weight and bias; frees `x` when
 * `consume`. */
static mxc_ndarray *layer(const struct net_args *a, const char *opname, const char *layer_name,
                          mxc_ndarray *x, const char *k1, const char *v1, const char *k2,
                          const char *v2, bool consume) {
    char w[64], b[64];
    snprintf(w, sizeof w, "%s_weight", layer_name);
    snprintf(b, sizeof b, "%s_bias", layer_name);
    mxc_ndarray *ins[3] = {x, arg(a, w), arg(a, b)};
    mxc_ndarray *y = op(opname, 3, ins, k1, v1, k2, v2, NULL, NULL);
    if (consume)
        mxc_nd_free(x);
    return y;
}

static mxc_ndarray *activation(mxc_ndarray *x, const char *act) {
    mxc_ndarray *y = op("Activation", 1, &x, "act_type", act, NULL, NULL, NULL, NULL);
    mxc_nd_free(x);
    return y;
}

/* `fc` (10 classes) on `h` (consumed), then SoftmaxOutput: the networks' head. */
static mxc_ndarray *softmax_head(const struct net_args *a, const char *fc, mxc_ndarray *h) {
    h = layer(a, "FullyConnected", fc, h, "num_hidden", "10", 0, 0, true);
    mxc_ndarray *y = op2("SoftmaxOutput", h, arg(a, "softmax_label"));
    mxc_nd_free(h);
    return y;
}

/* data -> fc1 (16) -> relu -> fc2 (8) -> relu -> fc3 (10) -> SoftmaxOutput */
static mxc_ndarray *mlp_forward(const struct net_args *a) {
    mxc_ndarray *h =
        layer(a, "FullyConnected", "fc1", arg(a, "data"), "num_hidden", "16", 0, 0, false);
    h = activation(h, "relu");
    h = layer(a, "FullyConnected", "fc2", h, "num_hidden", "8", 0, 0, true);
    h = activation(h, "relu");
    return softmax_head(a, "fc3", h);
}

static mxc_ndarray *lenet_forward(const struct net_args *a) {
    mxc_ndarray *h = arg(a, "data");
    const char *const filters[2] = {"20", "50"};
    for (int i = 0; i < 2; i++) {
        char conv[16];
        snprintf(conv, sizeof conv, "conv%d", i + 1);
        h = layer(a, "Convolution", conv, h, "kernel", "(5, 5)", "num_filter", filters[i], i > 0);
        h = activation(h, "tanh");
        mxc_ndarray *p =
            op("Pooling", 1, &h, "pool_type", "max", "kernel", "(2, 2)", "stride", "(2, 2)");
        mxc_nd_free(h);
        h = p;
    }
    mxc_ndarray *f = op1("Flatten", h);
    mxc_nd_free(h);
    h = layer(a, "FullyConnected", "fc1", f, "num_hidden", "500", 0, 0, true);
    h = activation(h, "tanh");
    return softmax_head(a, "fc2", h);
}

/* Binds `net` with `data_shape`, runs forward and backward; records the same forward
 * imperatively on copies of the same arguments and runs autograd's backward; every
 * gradient must be the executor's, bit for bit. */
static void expect_equal_to_executor(mxc_symbol *net, mxc_shape data_shape,
                                     mxc_ndarray *(*forward)(const struct net_args *)) {
    mxc_executor *x = NULL;
    const char *names[] = {"data", "softmax_label"};
    mxc_shape shapes[] = {data_shape, mxc_shape_make(1, (int64_t[]){data_shape.dims[0]})};
    CK_OK(mxc_executor_simple_bind(net, mxc_cpu(), 2, names, shapes, MXC_GRAD_WRITE, &x));
    int na;
    mxc_ndarray *const *args, *const *grads;
    CK_OK(mxc_executor_arrays(x, &na, &args, &grads, NULL, NULL));
    const char *const *arg_names;
    CK_OK(mxc_symbol_list_arguments(net, &na, &arg_names));
    mxc_init_config init = {.kind = MXC_INIT_XAVIER, .xavier_magnitude = 3};
    CK_OK(mxc_random_seed(17));
    float labels[8];
    for (int i = 0; i < data_shape.dims[0]; i++)
        labels[i] = (float)((3 * i + 1) % 10);
    for (int a = 0; a < na; a++) {
        if (strcmp(arg_names[a], "data") == 0)
            fill_random(args[a], 5, 0, 1);
        else if (strcmp(arg_names[a], "softmax_label") == 0)
            CK_OK(mxc_nd_sync_copy_from_cpu(args[a], labels,
                                            sizeof(float) * (size_t)mxc_nd_size(args[a])));
        else
            CK_OK(mxc_init_array(&init, arg_names[a], args[a]));
    }
    CK_OK(mxc_executor_forward(x, 1));
    CK_OK(mxc_executor_backward(x, 0, NULL));

    mxc_ndarray *mine[32] = {NULL}, *my_grads[32] = {NULL}, *vars[32], *var_grads[32];
    int nv = 0;
    ck_assert_int_le(na, 32);
    for (int a = 0; a < na; a++) {
        mxc_shape s;
        CK_OK(mxc_nd_get_shape(args[a], &s));
        mine[a] = array(s, NULL);
        CK_OK(mxc_nd_copy_to(args[a], mine[a]));
        if (grads[a] == NULL)
            continue;
        my_grads[a] = full(s, 7); /* overwritten: write requests */
        vars[nv] = mine[a];
        var_grads[nv++] = my_grads[a];
    }
    CK_OK(mxc_autograd_mark_variables(nv, vars, var_grads, NULL));
    struct net_args na_ = {arg_names, mine, na};
    CK_OK(mxc_autograd_set_recording(1, NULL));
    mxc_ndarray *loss = forward(&na_);
    CK_OK(mxc_autograd_set_recording(0, NULL));
    CK_OK(mxc_autograd_backward(1, &loss, NULL, 0));

    int num_out;
    mxc_ndarray *const *outs;
    CK_OK(mxc_executor_outputs(x, &num_out, &outs));
    float *want = values(outs[0]), *got = values(loss);
    ck_assert_int_eq(memcmp(want, got, sizeof(float) * (size_t)mxc_nd_size(loss)), 0);
    free(want);
    free(got);
    for (int a = 0; a < na; a++) {
        if (grads[a] == NULL)
            continue;
        want = values(grads[a]);
        got = values(my_grads[a]);
        int64_t n = mxc_nd_size(grads[a]);
        double norm = 0;
        for (int64_t i = 0; i < n; i++)
            norm += fabs(want[i]);
        ck_assert_msg(norm > 0, "%s: the executor's gradient is zero", arg_names[a]);
        ck_assert_msg(memcmp(want, got, sizeof(float) * (size_t)n) == 0,
                      "%s: autograd's gradient differs from the executor's", arg_names[a]);
        free(want);
        free(got);
    }
    mxc_nd_free(loss);
    for (int a = 0; a < na; a++) {
        mxc_nd_free(mine[a]);
        mxc_nd_free(my_grads[a]);
    }
    mxc_executor_free(x);
}

START_TEST(test_lenet_equals_executor) {
    mxc_symbol *net = NULL;
    CK_OK(mxc_net_lenet(10, &net));
    expect_equal_to_executor(net, mxc_shape_make(4, (int64_t[]){3, 1, 28, 28}), lenet_forward);
    mxc_symbol_free(net);
}
END_TEST

START_TEST(test_mlp_equals_executor) {
    mxc_symbol *net = NULL;
    CK_OK(mxc_net_mlp(2, (int[]){16, 8}, "relu", 10, &net));
    expect_equal_to_executor(net, mxc_shape_make(2, (int64_t[]){4, 12}), mlp_forward);
    mxc_symbol_free(net);
}
END_TEST

/* The same on the threaded engine (chosen here, before this test's process makes its
 * default engine): backward's operations run on workers, ordered by their arrays only. */
START_TEST(test_mlp_equals_executor_threaded) {
    setenv("MXC_ENGINE_TYPE", "perdevice", 1);
    mxc_symbol *net = NULL;
    CK_OK(mxc_net_mlp(2, (int[]){16, 8}, "relu", 10, &net));
    expect_equal_to_executor(net, mxc_shape_make(2, (int64_t[]){4, 12}), mlp_forward);
    mxc_symbol_free(net);
    mxc_engine *eng = NULL;
    CK_OK(mxc_engine_get_default(&eng));
    ck_assert_str_eq(mxc_engine_type_name(mxc_engine_type_of(eng)), "perdevice");
}
END_TEST

/* ---- Finite differences: fan-out, a view, in place ------------------------------------ */

/* loss = sum(relu_(v * v)) + sum(tanh(x)), v = reshape(FullyConnected(x, w), (5, 3)):
 * v is a view read twice, relu writes over its input, x feeds two operators. */
static mxc_ndarray *fd_forward(mxc_ndarray *x, mxc_ndarray *w) {
    mxc_ndarray *ins[2] = {x, w};
    mxc_ndarray *h = op("FullyConnected", 2, ins, "num_hidden", "5", "no_bias", "True", 0, 0);
    mxc_ndarray *v = NULL;
    mxc_shape vs = mxc_shape_make(2, (int64_t[]){5, 3});
    CK_OK(mxc_nd_reshape(h, &vs, &v));
    mxc_nd_free(h);
    mxc_ndarray *a = op2("_mul", v, v);
    mxc_nd_free(v);
    CK_OK(mxc_imperative_invoke("relu", 0, NULL, NULL, 1, &a, 1, &a, 1)); /* in place */
    mxc_ndarray *b = op1("tanh", x);
    mxc_ndarray *sa = op1("sum", a), *sb = op1("sum", b);
    mxc_ndarray *loss = op2("_plus", sa, sb);
    mxc_nd_free(a);
    mxc_nd_free(b);
    mxc_nd_free(sa);
    mxc_nd_free(sb);
    return loss;
}

static float fd_loss(mxc_ndarray *x, mxc_ndarray *w) {
    mxc_ndarray *l = fd_forward(x, w);
    float v = scalar(l);
    mxc_nd_free(l);
    return v;
}

/* Central differences of fd_loss along every element of `p` against `grad`. */
static void expect_fd(mxc_ndarray *x, mxc_ndarray *w, mxc_ndarray *p, const float *grad) {
    const float eps = 1e-2f;
    float *h = values(p);
    int64_t n = mxc_nd_size(p);
    for (int64_t i = 0; i < n; i++) {
        float keep = h[i];
        h[i] = keep + eps;
        CK_OK(mxc_nd_sync_copy_from_cpu(p, h, sizeof(float) * (size_t)n));
        float up = fd_loss(x, w);
        h[i] = keep - eps;
        CK_OK(mxc_nd_sync_copy_from_cpu(p, h, sizeof(float) * (size_t)n));
        float down = fd_loss(x, w);
        h[i] = keep;
        float fd = (up - down) / (2 * eps);
        ck_assert_msg(fabsf(fd - grad[i]) <= 2e-2f + 2e-2f * fabsf(fd),
                      "element %lld: autograd %g, finite differences %g", (long long)i, grad[i],
                      fd);
    }
    CK_OK(mxc_nd_sync_copy_from_cpu(p, h, sizeof(float) * (size_t)n));
    free(h);
}

START_TEST(test_fan_out_view_and_in_place_match_finite_differences) {
    mxc_ndarray *x = array(mxc_shape_make(2, (int64_t[]){3, 4}), NULL);
    mxc_ndarray *w = array(mxc_shape_make(2, (int64_t[]){5, 4}), NULL);
    fill_random(x, 3, -1, 1);
    fill_random(w, 4, -1, 1);
    mxc_ndarray *gx = array(mxc_shape_make(2, (int64_t[]){3, 4}), NULL);
    mxc_ndarray *gw = array(mxc_shape_make(2, (int64_t[]){5, 4}), NULL);
    mxc_ndarray *vars[2] = {x, w}, *grads[2] = {gx, gw};
    CK_OK(mxc_autograd_mark_variables(2, vars, grads, NULL));
    CK_OK(mxc_autograd_set_recording(1, NULL));
    mxc_ndarray *loss = fd_forward(x, w);
    CK_OK(mxc_autograd_set_recording(0, NULL));
    CK_OK(mxc_autograd_backward(1, &loss, NULL, 0));
    mxc_nd_free(loss);
    float *g = values(gx);
    expect_fd(x, w, x, g);
    free(g);
    g = values(gw);
    expect_fd(x, w, w, g);
    free(g);
    mxc_nd_free(x);
    mxc_nd_free(w);
    mxc_nd_free(gx);
    mxc_nd_free(gw);
}
END_TEST

/* ---- Requests, head gradients, retain_graph, subsets ---------------------------------- */

/* x (4) marked with `req` into g (holding 1); records y = x * x * 3 - x. */
struct small {
    mxc_ndarray *x, *g, *y;
};

static const float small_x[4] = {1, -2, 0.5f, 3};

static struct small small_graph(int req) {
    struct small s;
    s.x = array(mxc_shape_make(1, (int64_t[]){4}), small_x);
    s.g = full(mxc_shape_make(1, (int64_t[]){4}), 1);
    CK_OK(mxc_autograd_mark_variables(1, &s.x, &s.g, &req));
    CK_OK(mxc_autograd_set_recording(1, NULL));
    mxc_ndarray *xx = op2("_mul", s.x, s.x);
    mxc_ndarray *t = op("_mul_scalar", 1, &xx, "scalar", "3", 0, 0, 0, 0);
    s.y = op2("_minus", t, s.x);
    CK_OK(mxc_autograd_set_recording(0, NULL));
    mxc_nd_free(xx);
    mxc_nd_free(t);
    return s;
}

static void small_free(struct small *s) {
    mxc_nd_free(s->x);
    mxc_nd_free(s->g);
    mxc_nd_free(s->y);
}

START_TEST(test_head_gradients_given_and_not) {
    struct small s = small_graph(MXC_GRAD_WRITE);
    float want[4];
    CK_OK(mxc_autograd_backward(1, &s.y, NULL, 1)); /* ones */
    for (int i = 0; i < 4; i++)
        want[i] = 6 * small_x[i] - 1;
    expect_values(s.g, want, 1e-6f);
    const float hg[4] = {2, 0, -1, 0.5f};
    mxc_ndarray *head = array(mxc_shape_make(1, (int64_t[]){4}), hg);
    CK_OK(mxc_autograd_backward(1, &s.y, &head, 0));
    for (int i = 0; i < 4; i++)
        want[i] = hg[i] * (6 * small_x[i] - 1);
    expect_values(s.g, want, 1e-6f);
    mxc_nd_free(head);
    small_free(&s);
}
END_TEST

START_TEST(test_write_and_add_requests) {
    struct small s = small_graph(MXC_GRAD_ADD);
    CK_OK(mxc_autograd_backward(1, &s.y, NULL, 1));
    CK_OK(mxc_autograd_backward(1, &s.y, NULL, 0)); /* retained: a second pass adds again */
    float want[4];
    for (int i = 0; i < 4; i++)
        want[i] = 1 + 2 * (6 * small_x[i] - 1);
    expect_values(s.g, want, 1e-5f);
    small_free(&s);

    s = small_graph(MXC_GRAD_WRITE);
    CK_OK(mxc_autograd_backward(1, &s.y, NULL, 1));
    CK_OK(mxc_autograd_backward(1, &s.y, NULL, 0));
    for (int i = 0; i < 4; i++)
        want[i] = 6 * small_x[i] - 1;
    expect_values(s.g, want, 1e-6f);
    small_free(&s);

    s = small_graph(MXC_GRAD_NULL);
    expect_error(mxc_autograd_backward(1, &s.y, NULL, 0), MXC_EINVAL, "no marked variable");
    const float ones[4] = {1, 1, 1, 1};
    expect_values(s.g, ones, 0);
    small_free(&s);
}
END_TEST

START_TEST(test_grad_of_a_subset_leaves_marked_gradients) {
    struct small s = small_graph(MXC_GRAD_WRITE);
    mxc_ndarray *w = full(mxc_shape_make(1, (int64_t[]){4}), 2),
                *gw = full(mxc_shape_make(1, (int64_t[]){4}), 5);
    CK_OK(mxc_autograd_mark_variables(1, &w, &gw, NULL));
    CK_OK(mxc_autograd_set_recording(1, NULL));
    mxc_ndarray *z = op2("_mul", s.y, w); /* z = y * w */
    CK_OK(mxc_autograd_set_recording(0, NULL));
    mxc_ndarray *dx = NULL;
    CK_OK(mxc_autograd_grad(1, &z, NULL, 1, &s.x, 0, &dx));
    float want[4];
    for (int i = 0; i < 4; i++)
        want[i] = 2 * (6 * small_x[i] - 1);
    expect_values(dx, want, 1e-5f);
    const float ones[4] = {1, 1, 1, 1}, fives[4] = {5, 5, 5, 5};
    expect_values(s.g, ones, 0); /* untouched */
    expect_values(gw, fives, 0);
    /* released: a second call fails and returns no arrays */
    mxc_ndarray *again = (mxc_ndarray *)1;
    expect_error(mxc_autograd_grad(1, &z, NULL, 1, &s.x, 0, &again), MXC_EINVAL, "released");
    ck_assert_ptr_null(again);
    mxc_nd_free(dx);
    mxc_nd_free(z);
    mxc_nd_free(w);
    mxc_nd_free(gw);
    small_free(&s);
}
END_TEST

/* ---- Recording state ------------------------------------------------------------------ */

START_TEST(test_recording_off_records_nothing) {
    int prev = -1;
    ck_assert_int_eq(mxc_autograd_is_recording(), 0);
    CK_OK(mxc_autograd_set_recording(1, &prev));
    ck_assert_int_eq(prev, 0);
    ck_assert_int_eq(mxc_autograd_is_recording(), 1);
    CK_OK(mxc_autograd_set_recording(0, &prev));
    ck_assert_int_eq(prev, 1);

    mxc_ndarray *x = array(mxc_shape_make(1, (int64_t[]){4}), small_x);
    mxc_ndarray *g = full(mxc_shape_make(1, (int64_t[]){4}), 0);
    CK_OK(mxc_autograd_mark_variables(1, &x, &g, NULL));
    mxc_ndarray *y = op2("_mul", x, x); /* not recording */
    expect_error(mxc_autograd_backward(1, &y, NULL, 0), MXC_EINVAL, "not recorded");
    /* nothing was kept: x may be written at once */
    CK_OK(mxc_nd_fill(x, 2));
    /* an operation on constants only is not recorded either */
    CK_OK(mxc_autograd_set_recording(1, NULL));
    mxc_ndarray *c = op2("_mul", y, y);
    mxc_ndarray *ins[2] = {c, y};
    CK_OK(mxc_imperative_invoke("_mul", 0, NULL, NULL, 2, ins, 1, &c, 1)); /* c *= y */
    CK_OK(mxc_autograd_set_recording(0, NULL));
    expect_error(mxc_autograd_backward(1, &c, NULL, 0), MXC_EINVAL, "not recorded");
    mxc_nd_free(c);
    mxc_nd_free(y);
    mxc_nd_free(x);
    mxc_nd_free(g);
}
END_TEST

START_TEST(test_training_mode_is_per_call_default) {
    int prev = -1;
    CK_OK(mxc_autograd_set_training(1, &prev));
    ck_assert_int_eq(prev, 0);
    ck_assert_int_eq(mxc_autograd_is_training(), 1);
    mxc_ndarray *x = full(mxc_shape_make(1, (int64_t[]){1000}), 1), *y = NULL;
    const char *k[] = {"p"}, *v[] = {"0.5"};
    CK_OK(mxc_imperative_invoke("Dropout", 1, k, v, 1, &x, 1, &y, 0)); /* is_train 0 */
    float *h = values(y);
    int zeros = 0;
    for (int i = 0; i < 1000; i++)
        zeros += h[i] == 0;
    free(h);
    ck_assert_int_gt(zeros, 300); /* dropped: training mode wins */
    mxc_nd_free(y);
    y = NULL;
    CK_OK(mxc_autograd_set_training(0, NULL));
    CK_OK(mxc_imperative_invoke("Dropout", 1, k, v, 1, &x, 1, &y, 0));
    ck_assert_float_eq(scalar(y), 1);
    mxc_nd_free(y);
    mxc_nd_free(x);
}
END_TEST

/* ---- Misuse --------------------------------------------------------------------------- */

START_TEST(test_misuse) {
    struct small s = small_graph(MXC_GRAD_WRITE);
    /* backward while recording */
    CK_OK(mxc_autograd_set_recording(1, NULL));
    expect_error(mxc_autograd_backward(1, &s.y, NULL, 0), MXC_EMISUSE, "while recording");
    CK_OK(mxc_autograd_set_recording(0, NULL));
    /* arrays the tape keeps cannot be overwritten until backward releases them */
    expect_error(mxc_nd_fill(s.x, 0), MXC_EINVAL, "keeps for its backward");
    CK_OK(mxc_autograd_backward(1, &s.y, NULL, 0));
    CK_OK(mxc_nd_fill(s.x, 0));
    /* backward twice without retain_graph */
    expect_error(mxc_autograd_backward(1, &s.y, NULL, 0), MXC_EINVAL, "released");
    /* bad arguments */
    expect_error(mxc_autograd_backward(0, &s.y, NULL, 0), MXC_EINVAL, "0 heads");
    expect_error(mxc_autograd_backward(1, NULL, NULL, 0), MXC_EINVAL, "heads");
    mxc_ndarray *bad_head = full(mxc_shape_make(1, (int64_t[]){3}), 1);
    small_free(&s);

    s = small_graph(MXC_GRAD_WRITE);
    expect_error(mxc_autograd_backward(1, &s.y, &bad_head, 0), MXC_EINVAL, "head gradient");
    mxc_nd_free(bad_head);
    int bad_req = 2;
    expect_error(mxc_autograd_mark_variables(1, &s.x, &s.g, &bad_req), MXC_EINVAL, "reqs[0]");
    mxc_ndarray *small_g = full(mxc_shape_make(1, (int64_t[]){3}), 1);
    expect_error(mxc_autograd_mark_variables(1, &s.x, &small_g, NULL), MXC_ESHAPE, "gradient");
    mxc_nd_free(small_g);
    expect_error(mxc_autograd_mark_variables(-1, NULL, NULL, NULL), MXC_EINVAL, "variables");

    CK_OK(mxc_autograd_set_recording(1, NULL));
    /* a marked variable is not written while recording */
    mxc_ndarray *x = s.x;
    expect_error(mxc_imperative_invoke("relu", 0, NULL, NULL, 1, &x, 1, &x, 1), MXC_EINVAL,
                 "marked");
    /* nor an input the operator's backward needs */
    mxc_ndarray *t = op1("sigmoid", s.x), *u = op1("sigmoid", s.x);
    mxc_ndarray *ins[2] = {t, u};
    expect_error(mxc_imperative_invoke("_mul", 0, NULL, NULL, 2, ins, 1, &t, 1), MXC_EINVAL,
                 "needs that input");
    /* nor an output another handle views (p: its backward keeps nothing) */
    mxc_ndarray *p = op("_plus_scalar", 1, &s.x, "scalar", "1", 0, 0, 0, 0), *view = NULL;
    mxc_shape vs = mxc_shape_make(2, (int64_t[]){2, 2});
    CK_OK(mxc_nd_reshape(p, &vs, &view));
    expect_error(mxc_imperative_invoke("tanh", 0, NULL, NULL, 1, &p, 1, &p, 1), MXC_EINVAL,
                 "shares its memory");
    /* nor an array a recorded operation keeps (sigmoid keeps its output u) */
    expect_error(mxc_imperative_invoke("tanh", 0, NULL, NULL, 1, &u, 1, &u, 1), MXC_EINVAL,
                 "keeps for its backward");
    /* slices of recorded arrays are refused while recording */
    mxc_ndarray *sl = NULL;
    expect_error(mxc_nd_slice(t, 0, 2, &sl), MXC_EINVAL, "slice");
    ck_assert_ptr_null(sl);
    expect_error(mxc_nd_at(t, 1, &sl), MXC_EINVAL, "slice");
    CK_OK(mxc_autograd_set_recording(0, NULL));
    CK_OK(mxc_nd_slice(t, 0, 2, &sl)); /* outside recording: a plain view */
    mxc_nd_free(sl);
    mxc_nd_free(view);
    mxc_nd_free(p);
    mxc_nd_free(t);
    mxc_nd_free(u);
    small_free(&s);
}
END_TEST

/* A long chain is released without recursion and every node goes (ASan checks leaks). */
START_TEST(test_long_chain_is_released) {
    mxc_ndarray *x = full(mxc_shape_make(1, (int64_t[]){2}), 1);
    mxc_ndarray *g = full(mxc_shape_make(1, (int64_t[]){2}), 0);
    CK_OK(mxc_autograd_mark_variables(1, &x, &g, NULL));
    CK_OK(mxc_autograd_set_recording(1, NULL));
    mxc_ndarray *h = op("_mul_scalar", 1, &x, "scalar", "1", 0, 0, 0, 0);
    int n = (int)mxct_scaled(20000, 2000);
    for (int i = 0; i < n; i++) {
        mxc_ndarray *next = op("_plus_scalar", 1, &h, "scalar", "1", 0, 0, 0, 0);
        mxc_nd_free(h);
        h = next;
    }
    CK_OK(mxc_autograd_set_recording(0, NULL));
    CK_OK(mxc_autograd_backward(1, &h, NULL, 0));
    const float ones[2] = {1, 1};
    expect_values(g, ones, 0);
    mxc_nd_free(h); /* drops the whole chain */
    mxc_nd_free(x);
    mxc_nd_free(g);
}
END_TEST

/* ---- Allocation failures -------------------------------------------------------------- */

/* What one run of the autograd sequence holds. */
struct ag_run {
    mxc_ndarray *x, *g, *h, *v, *p, *s;
};

/* Mark, record h = x * x, v = reshape(h), p = v + v (fan-out), s = sum(p), backward. */
static int ag_sequence(struct ag_run *r) {
    int rc;
    if ((rc = mxc_nd_full(&(mxc_shape){2, {2, 3}}, MXC_FLOAT32, mxc_cpu(), 1.5, &r->x)) ||
        (rc = mxc_nd_zeros(&(mxc_shape){2, {2, 3}}, MXC_FLOAT32, mxc_cpu(), &r->g)) ||
        (rc = mxc_autograd_mark_variables(1, &r->x, &r->g, NULL)) ||
        (rc = mxc_autograd_set_recording(1, NULL)) || (rc = mxc_nd_mul(r->x, r->x, &r->h)) ||
        (rc = mxc_nd_reshape(r->h, &(mxc_shape){2, {3, 2}}, &r->v)) ||
        (rc = mxc_nd_add(r->v, r->v, &r->p)) || (rc = mxc_nd_sum(r->p, &r->s)) ||
        (rc = mxc_autograd_set_recording(0, NULL)) ||
        (rc = mxc_autograd_backward(1, &r->s, NULL, 0)))
        return rc;
    return mxc_nd_wait_all();
}

static int ag_release(struct ag_run *r) {
    mxc_autograd_set_recording(0, NULL);
    mxc_ndarray **all[] = {&r->x, &r->g, &r->h, &r->v, &r->p, &r->s};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        mxc_nd_free(*all[i]);
        *all[i] = NULL;
    }
    int wait_rc = mxc_nd_wait_all();
    (void)wait_rc; /* an operation that failed for memory reports it here */
    mxc__handles_trim();
    return mxc_storage_shutdown();
}

/* Every allocation of the sequence fails in turn (alone, then from it on): each run ends
 * in MXC_OK or MXC_ENOMEM with a message, and freeing gives every block back. */
START_TEST(test_allocation_failures_are_clean) {
    static struct mxct_alloc_counts counts;
    mxct_alloc_install(&counts);
    struct ag_run r = {0};
    CK_OK(ag_sequence(&r)); /* makes what lives until exit: the engine, the resources */
    float *g = values(r.g);
    ck_assert_float_eq(g[0], 6.0f); /* d/dx sum(2 x^2) = 4 x */
    free(g);
    CK_OK(ag_release(&r));
    const long live = atomic_load(&counts.live);
    mxct_alloc_fail_after(&counts, -1); /* resets the counts: M is one clean run's */
    CK_OK(ag_sequence(&r));
    CK_OK(ag_release(&r));
    const long m = atomic_load(&counts.succeeded);
    ck_assert_int_gt(m, 10);
    for (int persistent = 0; persistent < 2; persistent++)
        for (long n = 0; n < m; n++) {
            if (persistent)
                mxct_alloc_fail_after(&counts, n);
            else
                mxct_alloc_fail_once(&counts, n);
            mxc_clear_error();
            int rc = ag_sequence(&r);
            char msg[600];
            snprintf(msg, sizeof msg, "%s", mxc_last_error());
            int shutdown = ag_release(&r);
            mxct_alloc_fail_after(&counts, -1);
            ck_assert_msg(rc == MXC_OK || (rc == MXC_ENOMEM && msg[0] != '\0'),
                          "allocation %ld (%s): %s: %s", n, persistent ? "on" : "alone",
                          mxc_err_name(rc), msg);
            ck_assert_int_eq(shutdown, MXC_OK);
            ck_assert_msg(atomic_load(&counts.live) == live, "allocation %ld (%s): %ld leaked", n,
                          persistent ? "on" : "alone", atomic_load(&counts.live) - live);
        }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("autograd");
    TCase *tc = tcase_create("autograd");
    tcase_set_timeout(tc, mxct_timeout(120));
    tcase_add_test(tc, test_lenet_equals_executor);
    tcase_add_test(tc, test_mlp_equals_executor);
    tcase_add_test(tc, test_mlp_equals_executor_threaded);
    tcase_add_test(tc, test_fan_out_view_and_in_place_match_finite_differences);
    tcase_add_test(tc, test_head_gradients_given_and_not);
    tcase_add_test(tc, test_write_and_add_requests);
    tcase_add_test(tc, test_grad_of_a_subset_leaves_marked_gradients);
    tcase_add_test(tc, test_recording_off_records_nothing);
    tcase_add_test(tc, test_training_mode_is_per_call_default);
    tcase_add_test(tc, test_misuse);
    tcase_add_test(tc, test_long_chain_is_released);
    tcase_add_test(tc, test_allocation_failures_are_clean);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    /* bit-for-bit comparisons with the executor run every kernel inline, in push order */
    setenv("MXC_ENGINE_TYPE", "naive", 1);
    return mxct_run_suite(suite());
}

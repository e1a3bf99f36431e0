/*
 * tests/util/op_check.c — see op_check.h. Kernels are called directly through the
 * operator definitions (operator/op.h), on the test thread, with the CPU context;
 * resources come from the resource manager as they would in an engine operation.
 */
#include "tests/util/op_check.h"

#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/symbol.h"
#include "operator/op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS    MXC__MAX_OP_ARGS
#define PARAM_BYTES 1024

struct mxct_params mxct_params_from_pairs(const char *const *kv) {
    static const char *ring[32][2][16];
    static int next;
    int slot = next++ % 32, n = 0;
    for (; kv[2 * n] != NULL; n++) {
        ck_assert_msg(n < 16 && kv[2 * n + 1] != NULL, "MXCT_KV: odd or too many items");
        ring[slot][0][n] = kv[2 * n];
        ring[slot][1][n] = kv[2 * n + 1];
    }
    return (struct mxct_params){n, ring[slot][0], ring[slot][1]};
}

struct mxct_tensor mxct_tensor_from(mxc_shape shape, const float *values) {
    int64_t n = mxc_shape_size(&shape);
    ck_assert_msg(n >= 0, "bad test shape");
    struct mxct_tensor t = {shape, calloc((size_t)(n ? n : 1), sizeof(float))};
    ck_assert_ptr_nonnull(t.data);
    if (values)
        memcpy(t.data, values, (size_t)n * sizeof(float));
    return t;
}

struct mxct_tensor mxct_tensor_random(mxc_shape shape, float lo, float hi, unsigned seed) {
    struct mxct_tensor t = mxct_tensor_from(shape, NULL);
    uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (int64_t i = 0; i < mxc_shape_size(&shape); i++) {
        x ^= x >> 12; /* xorshift64* */
        x ^= x << 25;
        x ^= x >> 27;
        double u = (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
        t.data[i] = (float)(lo + (hi - lo) * u);
    }
    return t;
}

void mxct_tensors_free(struct mxct_tensor *t, int n) {
    for (int i = 0; i < n; i++) {
        free(t[i].data);
        t[i].data = NULL;
    }
}

static struct mxc__tensor view(const struct mxct_tensor *t) {
    return (struct mxc__tensor){t->data, t->shape, MXC_FLOAT32, mxc_cpu(),
                                mxc_shape_size(&t->shape)};
}

/* An operator with parsed params and inferred shapes, ready to call. */
struct prepared {
    const struct mxc__op_def *def;
    _Alignas(16) unsigned char params[PARAM_BYTES];
    int num_in, num_out, num_visible, num_aux;
    mxc_shape out_shapes[MAX_ARGS];
    struct mxc__resource *fwd_res[2], *bwd_res[2];
    int num_fwd_res, num_bwd_res;
};

static void get_resources(const unsigned char *kinds, struct mxc__resource **res, int *n) {
    *n = 0;
    for (int i = 0; i < 2 && kinds[i]; i++) {
        int rc = mxc__resource_get(mxc_cpu(), kinds[i] - 1, &res[(*n)++]);
        ck_assert_msg(rc == MXC_OK, "resource: %s", mxc_last_error());
    }
}

static int prepare(const char *name, struct mxct_params params, const struct mxct_tensor *in,
                   int num_in, const struct mxct_tensor *aux, struct prepared *p) {
    int rc = mxc__op_lookup(name, &p->def);
    if (rc != MXC_OK)
        return rc;
    ck_assert(p->def->param_size <= PARAM_BYTES);
    rc = mxc__op_parse_params(p->def, params.num, params.keys, params.vals, p->params);
    if (rc != MXC_OK)
        return rc;
    p->num_in = mxc__op_num_inputs(p->def, p->params, NULL);
    p->num_out = mxc__op_num_outputs(p->def, p->params, NULL);
    p->num_visible = mxc__op_num_visible_outputs(p->def, p->params);
    p->num_aux = mxc__op_num_aux(p->def);
    ck_assert_msg(num_in == p->num_in, "%s takes %d inputs, the test gives %d", name, p->num_in,
                  num_in);
    ck_assert_msg(p->num_aux == 0 || aux != NULL, "%s has auxiliary states", name);
    mxc_shape in_s[MAX_ARGS], aux_s[MAX_ARGS];
    for (int i = 0; i < num_in; i++)
        in_s[i] = in[i].shape;
    for (int i = 0; i < p->num_aux; i++)
        aux_s[i] = aux[i].shape;
    memset(p->out_shapes, 0, sizeof p->out_shapes);
    rc = p->def->infer_shape(p->params, in_s, num_in, p->out_shapes, p->num_out, aux_s, p->num_aux);
    if (rc != MXC_OK)
        return rc;
    get_resources(p->def->forward_resources, p->fwd_res, &p->num_fwd_res);
    get_resources(p->def->backward_resources, p->bwd_res, &p->num_bwd_res);
    return MXC_OK;
}

static int run_forward(const struct prepared *p, bool is_train, const struct mxct_tensor *in,
                       struct mxct_tensor *aux, struct mxct_tensor *out) {
    struct mxc__tensor tin[MAX_ARGS], tout[MAX_ARGS], taux[MAX_ARGS];
    int req[MAX_ARGS];
    for (int i = 0; i < p->num_in; i++)
        tin[i] = view(&in[i]);
    for (int i = 0; i < p->num_out; i++) {
        tout[i] = view(&out[i]);
        req[i] = MXC__REQ_WRITE;
    }
    for (int i = 0; i < p->num_aux; i++)
        taux[i] = view(&aux[i]);
    mxc_run_ctx rctx = {mxc_cpu(), NULL, -1};
    struct mxc__op_call call = {.rctx = &rctx,
                                .is_train = is_train,
                                .params = p->def->param_size ? p->params : NULL,
                                .in_data = tin,
                                .num_in = p->num_in,
                                .out_data = tout,
                                .num_out = p->num_out,
                                .aux = taux,
                                .num_aux = p->num_aux,
                                .req = req,
                                .resources = p->fwd_res,
                                .num_resources = p->num_fwd_res};
    return p->def->forward_cpu(&call);
}

int mxct_op_forward(const char *name, struct mxct_params params, bool is_train,
                    const struct mxct_tensor *in, int num_in, struct mxct_tensor *aux,
                    struct mxct_tensor *out) {
    struct prepared p;
    int rc = prepare(name, params, in, num_in, aux, &p);
    if (rc != MXC_OK)
        return rc;
    for (int i = 0; i < p.num_out; i++)
        out[i] = mxct_tensor_from(p.out_shapes[i], NULL);
    return run_forward(&p, is_train, in, aux, out);
}

void mxct_expect_close(const struct mxct_tensor *got, const float *want, double rtol, double atol,
                       const char *what) {
    int64_t n = mxc_shape_size(&got->shape), worst = -1;
    double worst_excess = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got->data[i], w = want[i];
        double excess = fabs(g - w) - (atol + rtol * fabs(w));
        if (isnan(g) != isnan(w) || excess > worst_excess) {
            worst_excess = isnan(g) != isnan(w) ? INFINITY : excess;
            worst = i;
        }
    }
    ck_assert_msg(worst < 0,
                  "%s: %lld element(s) checked, worst at [%lld]: got %.9g, "
                  "expected %.9g (rtol %g, atol %g)",
                  what, (long long)n, (long long)worst, worst >= 0 ? got->data[worst] : 0.0,
                  worst >= 0 ? want[worst] : 0.0, rtol, atol);
}

/* loss = sum_k w_k . out_k over the visible outputs. */
static double loss_of(const struct prepared *p, bool is_train, const struct mxct_tensor *in,
                      const struct mxct_tensor *aux0, struct mxct_tensor *aux,
                      struct mxct_tensor *out, const struct mxct_tensor *w) {
    for (int i = 0; i < p->num_aux; i++)
        memcpy(aux[i].data, aux0[i].data, (size_t)mxc_shape_size(&aux0[i].shape) * 4);
    int rc = run_forward(p, is_train, in, aux, out);
    ck_assert_msg(rc == MXC_OK, "%s forward: %s", p->def->name, mxc_last_error());
    double loss = 0;
    for (int k = 0; k < p->num_visible; k++)
        for (int64_t i = 0; i < mxc_shape_size(&out[k].shape); i++)
            loss += (double)w[k].data[i] * out[k].data[i];
    return loss;
}

static void run_backward(const struct prepared *p, bool is_train, const struct mxct_tensor *in,
                         const struct mxct_tensor *out, const struct mxct_tensor *aux,
                         const struct mxct_tensor *w, struct mxct_tensor *grads, int req) {
    unsigned deps = p->def->backward_deps;
    struct mxc__tensor tin[MAX_ARGS], tout[MAX_ARGS], taux[MAX_ARGS], tog[MAX_ARGS], tig[MAX_ARGS];
    int reqs[MAX_ARGS];
    for (int i = 0; i < p->num_in; i++) {
        tin[i] = view(&in[i]);
        tig[i] = view(&grads[i]);
        reqs[i] = req;
    }
    for (int i = 0; i < p->num_out; i++) {
        tout[i] = view(&out[i]);
        tog[i] = view(&w[i]);
    }
    for (int i = 0; i < p->num_aux; i++)
        taux[i] = view(&aux[i]);
    mxc_run_ctx rctx = {mxc_cpu(), NULL, -1};
    /* Only what the operator declared: a backward reading more fails here, not later. */
    struct mxc__op_call call = {.rctx = &rctx,
                                .is_train = is_train,
                                .params = p->def->param_size ? p->params : NULL,
                                .in_data = (deps & MXC__DEP_IN_DATA) ? tin : NULL,
                                .num_in = p->num_in,
                                .out_data = (deps & MXC__DEP_OUT_DATA) ? tout : NULL,
                                .num_out = p->num_out,
                                .aux = taux,
                                .num_aux = p->num_aux,
                                .out_grad = (deps & MXC__DEP_OUT_GRAD) ? tog : NULL,
                                .in_grad = tig,
                                .req = reqs,
                                .resources = p->bwd_res,
                                .num_resources = p->num_bwd_res};
    int rc = p->def->backward_cpu(&call);
    ck_assert_msg(rc == MXC_OK, "%s backward: %s", p->def->name, mxc_last_error());
}

void mxct_op_gradcheck(const char *name, struct mxct_params params, bool is_train,
                       const struct mxct_tensor *in0, int num_in, const struct mxct_tensor *aux0,
                       unsigned skip, double eps, double rtol, double atol) {
    struct prepared p;
    int rc = prepare(name, params, in0, num_in, aux0, &p);
    ck_assert_msg(rc == MXC_OK, "%s: %s", name, mxc_last_error());
    ck_assert_msg(p.def->backward_cpu != NULL, "%s has no backward", name);
    struct mxct_tensor in[MAX_ARGS], out[MAX_ARGS], aux[MAX_ARGS], w[MAX_ARGS], grads[MAX_ARGS];
    for (int i = 0; i < num_in; i++) {
        in[i] = mxct_tensor_from(in0[i].shape, in0[i].data);
        grads[i] = mxct_tensor_from(in0[i].shape, NULL);
    }
    for (int i = 0; i < p.num_aux; i++)
        aux[i] = mxct_tensor_from(aux0[i].shape, aux0[i].data);
    for (int k = 0; k < p.num_out; k++) {
        out[k] = mxct_tensor_from(p.out_shapes[k], NULL);
        w[k] = k < p.num_visible ? mxct_tensor_random(p.out_shapes[k], -1, 1, 1000u + (unsigned)k)
                                 : mxct_tensor_from(p.out_shapes[k], NULL);
    }

    /* Analytic gradient, at the unperturbed point (forward first: out_data for backward). */
    loss_of(&p, is_train, in, aux0, aux, out, w);
    run_backward(&p, is_train, in, out, aux, w, grads, MXC__REQ_WRITE);

    char what[128];
    for (int i = 0; i < num_in; i++) {
        if (skip & (1u << i))
            continue;
        int64_t n = mxc_shape_size(&in[i].shape);
        float *numeric = malloc((size_t)(n ? n : 1) * sizeof(float));
        ck_assert_ptr_nonnull(numeric);
        for (int64_t j = 0; j < n; j++) {
            float x = in[i].data[j];
            in[i].data[j] = x + (float)eps;
            double up = loss_of(&p, is_train, in, aux0, aux, out, w);
            in[i].data[j] = x - (float)eps;
            double down = loss_of(&p, is_train, in, aux0, aux, out, w);
            in[i].data[j] = x;
            numeric[j] = (float)((up - down) / (2 * eps));
        }
        snprintf(what, sizeof what, "%s: gradient of input %d vs finite differences", name, i);
        mxct_expect_close(&grads[i], numeric, rtol, atol, what);
        free(numeric);
    }
    /* add-to: in_grad preset to 1 receives 1 + gradient */
    struct mxct_tensor added[MAX_ARGS];
    for (int i = 0; i < num_in; i++) {
        added[i] = mxct_tensor_from(in[i].shape, NULL);
        for (int64_t j = 0; j < mxc_shape_size(&in[i].shape); j++)
            added[i].data[j] = 1.0f;
    }
    loss_of(&p, is_train, in, aux0, aux, out, w);
    run_backward(&p, is_train, in, out, aux, w, added, MXC__REQ_ADD);
    for (int i = 0; i < num_in; i++) {
        if (skip & (1u << i))
            continue;
        float *want = malloc((size_t)(mxc_shape_size(&in[i].shape) + 1) * sizeof(float));
        ck_assert_ptr_nonnull(want);
        for (int64_t j = 0; j < mxc_shape_size(&in[i].shape); j++)
            want[j] = 1.0f + grads[i].data[j];
        snprintf(what, sizeof what, "%s: add-to gradient of input %d", name, i);
        mxct_expect_close(&added[i], want, 1e-5, 1e-6, what);
        free(want);
    }
    mxct_tensors_free(added, num_in);
    mxct_tensors_free(in, num_in);
    mxct_tensors_free(grads, num_in);
    mxct_tensors_free(aux, p.num_aux);
    mxct_tensors_free(out, p.num_out);
    mxct_tensors_free(w, p.num_out);
}

int mxct_op_backward(const char *name, struct mxct_params params, bool is_train,
                     const struct mxct_tensor *in, int num_in, struct mxct_tensor *aux,
                     const struct mxct_tensor *out_grad, struct mxct_tensor *in_grad_out) {
    struct prepared p;
    int rc = prepare(name, params, in, num_in, aux, &p);
    if (rc != MXC_OK)
        return rc;
    ck_assert_msg(p.def->backward_cpu != NULL, "%s has no backward", name);
    struct mxct_tensor out[MAX_ARGS], og[MAX_ARGS];
    for (int k = 0; k < p.num_out; k++) {
        out[k] = mxct_tensor_from(p.out_shapes[k], NULL);
        bool given = out_grad != NULL && k < p.num_visible;
        og[k] = mxct_tensor_from(p.out_shapes[k], given ? out_grad[k].data : NULL);
    }
    rc = run_forward(&p, is_train, in, aux, out);
    if (rc == MXC_OK) {
        for (int i = 0; i < num_in; i++) {
            in_grad_out[i] = mxct_tensor_from(in[i].shape, NULL);
            for (int64_t j = 0; j < mxc_shape_size(&in[i].shape); j++)
                in_grad_out[i].data[j] = NAN;
        }
        run_backward(&p, is_train, in, out, aux, og, in_grad_out, MXC__REQ_WRITE);
    }
    mxct_tensors_free(out, p.num_out);
    mxct_tensors_free(og, p.num_out);
    return rc;
}

mxc_ndarray *mxct_array_of(const struct mxct_tensor *t) {
    mxc_ndarray *a = NULL;
    ck_assert_int_eq(mxc_nd_create(&t->shape, MXC_FLOAT32, mxc_cpu(), 0, &a), MXC_OK);
    ck_assert_int_eq(
        mxc_nd_sync_copy_from_cpu(a, t->data, (size_t)mxc_shape_size(&t->shape) * sizeof(float)),
        MXC_OK);
    return a;
}

void mxct_op_bound_grads(const char *name, struct mxct_params params, const struct mxct_tensor *in,
                         int num_in, const struct mxct_tensor *aux, int num_aux, const int *reqs,
                         const struct mxct_tensor *head, struct mxct_tensor *grads) {
    mxc_symbol *sym = NULL;
    mxc_executor *x = NULL;
    mxc_ndarray *args[MAX_ARGS], *g[MAX_ARGS] = {NULL}, *states[MAX_ARGS], *h = NULL;
    ck_assert_msg(mxc_symbol_create(name, params.num, params.keys, params.vals, "op", 0, NULL, NULL,
                                    &sym) == MXC_OK,
                  "%s: %s", name, mxc_last_error());
    for (int i = 0; i < num_in; i++) {
        args[i] = mxct_array_of(&in[i]);
        g[i] = reqs[i] == MXC_GRAD_NULL ? NULL : mxct_array_of(&in[i]);
    }
    for (int i = 0; i < num_aux; i++)
        states[i] = mxct_array_of(&aux[i]);
    int rc = mxc_executor_bind(sym, mxc_cpu(), num_in, args, g, reqs, num_aux, states, &x);
    ck_assert_msg(rc == MXC_OK, "bind %s: %s", name, mxc_last_error());
    ck_assert_int_eq(mxc_executor_forward(x, 1), MXC_OK);
    if (head)
        h = mxct_array_of(head);
    ck_assert_msg(mxc_executor_backward(x, h ? 1 : 0, &h) == MXC_OK, "%s", mxc_last_error());
    for (int i = 0; i < num_in; i++) {
        grads[i] = (struct mxct_tensor){{0}, NULL};
        if (g[i] == NULL)
            continue;
        grads[i] = mxct_tensor_from(in[i].shape, NULL);
        rc = mxc_nd_sync_copy_to_cpu(g[i], grads[i].data,
                                     (size_t)mxc_shape_size(&in[i].shape) * sizeof(float));
        ck_assert_msg(rc == MXC_OK, "%s: %s", name, mxc_last_error());
    }
    mxc_executor_free(x);
    for (int i = 0; i < num_in; i++) {
        mxc_nd_free(args[i]);
        mxc_nd_free(g[i]);
    }
    for (int i = 0; i < num_aux; i++)
        mxc_nd_free(states[i]);
    mxc_nd_free(h);
    mxc_symbol_free(sym);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
}

struct mxct_tensor mxct_ref_load(const char *file, const char *name) {
    const char *dir = getenv("MXC_TEST_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/data", file);
    size_t n;
    mxc_ndarray **arrays;
    char **names;
    int rc = mxc_nd_load(path, mxc_cpu(), &n, &arrays, &names);
    ck_assert_msg(rc == MXC_OK,
                  "cannot load %s (run from the repo root or set "
                  "MXC_TEST_DATA): %s",
                  path, mxc_last_error());
    for (size_t i = 0; names && i < n; i++) {
        if (strcmp(names[i], name) != 0)
            continue;
        ck_assert_msg(mxc_nd_dtype(arrays[i]) == MXC_FLOAT32, "%s:%s is not float32", path, name);
        mxc_shape s;
        mxc_nd_get_shape(arrays[i], &s);
        struct mxct_tensor t = mxct_tensor_from(s, NULL);
        rc = mxc_nd_sync_copy_to_cpu(arrays[i], t.data, (size_t)mxc_shape_size(&s) * sizeof(float));
        ck_assert_msg(rc == MXC_OK, "%s:%s: %s", path, name, mxc_last_error());
        mxc_nd_list_free(n, arrays, names);
        return t;
    }
    mxc_nd_list_free(n, arrays, names);
    ck_abort_msg("%s has no array named %s", path, name);
    return (struct mxct_tensor){{0}, NULL};
}

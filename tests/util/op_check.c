/*
 * tests/util/op_check.c — see op_check.h. Kernels are called directly through the
 * operator definitions (operator/op.h), on the test thread, with the CPU context;
 * resources come from the resource manager as they would in an engine operation.
 */
#include "tests/util/op_check.h"

#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "mxc/symbol.h"
#include "operator/op.h"
#include "tests/util/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* Runs the forward kernel; `reqs` gives each output's request (NULL: all write). */
static int run_forward(const struct prepared *p, bool is_train, const struct mxct_tensor *in,
                       struct mxct_tensor *aux, struct mxct_tensor *out, const int *reqs) {
    struct mxc__tensor tin[MAX_ARGS], tout[MAX_ARGS], taux[MAX_ARGS];
    int req[MAX_ARGS];
    for (int i = 0; i < p->num_in; i++)
        tin[i] = view(&in[i]);
    for (int i = 0; i < p->num_out; i++) {
        tout[i] = view(&out[i]);
        req[i] = reqs ? reqs[i] : MXC__REQ_WRITE;
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

void mxct_expect_close(const struct mxct_tensor *got, const float *want, double rtol, double atol,
                       const char *what) {
    int64_t n = mxc_shape_size(&got->shape), worst = -1;
    double worst_excess = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got->data[i], w = want[i];
        /* NaN matches NaN only, an infinity itself only (a tolerance scaled by |want|
         * would let any value pass against one) */
        bool mismatch = isnan(g) != isnan(w) || ((isinf(g) || isinf(w)) && g != w);
        double excess = mismatch ? INFINITY : fabs(g - w) - (atol + rtol * fabs(w));
        if (excess > worst_excess) {
            worst_excess = excess;
            worst = i;
        }
    }
    ck_assert_msg(worst < 0,
                  "%s: %lld element(s) checked, worst at [%lld]: got %.9g, "
                  "expected %.9g (rtol %g, atol %g)",
                  what, (long long)n, (long long)worst, worst >= 0 ? got->data[worst] : 0.0,
                  worst >= 0 ? want[worst] : 0.0, rtol, atol);
}

void mxct_expect_tensor(const struct mxct_tensor *got, const struct mxct_tensor *want, double rtol,
                        double atol, const char *what) {
    mxct_expect_shape(&got->shape, &want->shape, what);
    mxct_expect_close(got, want->data, rtol, atol, what);
}

/* loss = sum_k w_k . out_k over the visible outputs. */
static double loss_of(const struct prepared *p, bool is_train, const struct mxct_tensor *in,
                      const struct mxct_tensor *aux0, struct mxct_tensor *aux,
                      struct mxct_tensor *out, const struct mxct_tensor *w) {
    for (int i = 0; i < p->num_aux; i++)
        memcpy(aux[i].data, aux0[i].data, (size_t)mxc_shape_size(&aux0[i].shape) * 4);
    int rc = run_forward(p, is_train, in, aux, out, NULL);
    ck_assert_msg(rc == MXC_OK, "%s forward: %s", p->def->name, mxc_last_error());
    double loss = 0;
    for (int k = 0; k < p->num_visible; k++)
        for (int64_t i = 0; i < mxc_shape_size(&out[k].shape); i++)
            loss += (double)w[k].data[i] * out[k].data[i];
    return loss;
}

/* Runs the backward kernel with out_grad w, writing grads with requests `reqs` (one per
 * input). */
static void run_backward(const struct prepared *p, bool is_train, const struct mxct_tensor *in,
                         const struct mxct_tensor *out, const struct mxct_tensor *aux,
                         const struct mxct_tensor *w, struct mxct_tensor *grads, const int *reqs) {
    unsigned deps = p->def->backward_deps;
    struct mxc__tensor tin[MAX_ARGS], tout[MAX_ARGS], taux[MAX_ARGS], tog[MAX_ARGS], tig[MAX_ARGS];
    for (int i = 0; i < p->num_in; i++) {
        tin[i] = view(&in[i]);
        tig[i] = view(&grads[i]);
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

/* n requests of one kind, in `r`. */
static const int *reqs_of(int *r, int n, int req) {
    for (int i = 0; i < n; i++)
        r[i] = req;
    return r;
}

/* ---- In place -------------------------------------------------------------------------
 * What the executor does with an operator's in-place options (executor/graph.c, plan.c):
 *   forward:  out_data[o] takes in_data[i]'s block when this node is the input's last
 *             reader; the same array may also be passed as another input (h * h), which
 *             then shares the block too. The block is grown to the larger of the two.
 *   backward: in_grad[i] takes out_grad[o]'s block, only for operators whose backward reads
 *             out_grad and o a visible output; the other in_grads are written as the
 *             argument asks (write, or add for an argument bound with add-to).
 * The kernel gets a write request on the shared output (the executor's) or write-in-place
 * (mxc_imperative_invoke's): both are run. Every run is compared with the same call on
 * separate buffers, element for element with no tolerance (the worst element reported). */

static const int alias_reqs[] = {MXC__REQ_INPLACE, MXC__REQ_WRITE};

static const char *req_name(int req) {
    return req == MXC__REQ_INPLACE ? "write-in-place" : req == MXC__REQ_ADD ? "add" : "write";
}

/* The state of the operator's forward random generator (if it has one), to be put back:
 * runs compared with each other must draw the same numbers. */
struct rng_saved {
    struct mxc__philox *gen; /* NULL: no generator */
    struct mxc__philox state;
};

static struct rng_saved rng_save(const struct prepared *p) {
    struct rng_saved s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < p->num_fwd_res; i++)
        if (p->fwd_res[i]->kind == MXC__RES_RANDOM) {
            s.gen = &p->fwd_res[i]->rng;
            s.state = *s.gen;
        }
    return s;
}

static void rng_restore(const struct rng_saved *s) {
    if (s && s->gen)
        *s->gen = s->state;
}

static bool same_shape(const mxc_shape *a, const mxc_shape *b) {
    return a->ndim == b->ndim && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* A buffer for two tensors of shapes a and b sharing memory, holding a copy of `init`. */
static float *shared_buffer(const mxc_shape *a, const mxc_shape *b,
                            const struct mxct_tensor *init) {
    int64_t na = mxc_shape_size(a), nb = mxc_shape_size(b), n = na > nb ? na : nb;
    float *buf = calloc((size_t)(n ? n : 1), sizeof(float));
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, init->data, (size_t)mxc_shape_size(&init->shape) * sizeof(float));
    return buf;
}

/* Asserts got[k] == want[k] for each of the n tensors. */
static void expect_same(const struct mxct_tensor *got, const struct mxct_tensor *want, int n,
                        unsigned skip, const char *array, const char *how) {
    char what[256];
    for (int k = 0; k < n; k++) {
        if (skip & (1u << k))
            continue;
        snprintf(what, sizeof what, "%s: %s[%d] differs from the out-of-place result", how, array,
                 k);
        mxct_expect_close(&got[k], want[k].data, 0, 0, what);
    }
}

/* One forward on copies of x (auxiliary states from aux0, the generator from rng0 when
 * given) whose outputs and updated states come back in new tensors `out` and `aux`. With
 * ai >= 0, in_data[ai] (and in_data[dup], when dup >= 0) and out_data[ao] are one buffer,
 * out_data[ao] written with request `req`. */
static void forward_run(const struct prepared *p, bool is_train, const struct mxct_tensor *x,
                        const struct mxct_tensor *aux0, const struct rng_saved *rng0, int ai,
                        int ao, int dup, int req, struct mxct_tensor *out,
                        struct mxct_tensor *aux) {
    struct mxct_tensor in[MAX_ARGS], vin[MAX_ARGS], vout[MAX_ARGS];
    int reqs[MAX_ARGS];
    reqs_of(reqs, p->num_out, MXC__REQ_WRITE);
    for (int i = 0; i < p->num_in; i++)
        vin[i] = in[i] = mxct_tensor_from(x[i].shape, x[i].data);
    for (int k = 0; k < p->num_out; k++)
        vout[k] = out[k] = mxct_tensor_from(p->out_shapes[k], NULL);
    for (int k = 0; k < p->num_aux; k++)
        aux[k] = mxct_tensor_from(aux0[k].shape, aux0[k].data);
    float *buf = NULL;
    if (ai >= 0) {
        buf = shared_buffer(&x[ai].shape, &p->out_shapes[ao], &x[ai]);
        vin[ai].data = vout[ao].data = buf;
        if (dup >= 0)
            vin[dup].data = buf;
        reqs[ao] = req;
    }
    rng_restore(rng0);
    int rc = run_forward(p, is_train, vin, aux, vout, reqs);
    ck_assert_msg(rc == MXC_OK, "%s forward: %s", p->def->name, mxc_last_error());
    if (buf)
        memcpy(out[ao].data, buf, (size_t)mxc_shape_size(&out[ao].shape) * sizeof(float));
    free(buf);
    mxct_tensors_free(in, p->num_in);
}

/* The forward option: every run with in_data[i] and out_data[o] sharing memory, and with
 * each other input of in_data[i]'s shape passed as that same array too (its values then
 * in_data[i]'s), against the same inputs on separate buffers. aux0 and rng0 (NULL: the
 * generator as it is) are the states before the forward; the generator is left as found. */
static void check_forward_inplace(const struct prepared *p, bool is_train,
                                  const struct mxct_tensor *x, const struct mxct_tensor *aux0,
                                  const struct rng_saved *rng0) {
    int ai, ao;
    if (!mxc__inplace_get(p->def->inplace, &ai, &ao))
        return;
    ck_assert_msg(ai < p->num_in && ao < p->num_out,
                  "%s declares its forward in place from in_data[%d] to out_data[%d], but has "
                  "%d inputs and %d outputs",
                  p->def->name, ai, ao, p->num_in, p->num_out);
    struct rng_saved found = rng_save(p);
    const struct rng_saved *start = rng0 ? rng0 : &found;
    struct mxct_tensor xs[MAX_ARGS];
    for (int i = 0; i < p->num_in; i++)
        xs[i] = mxct_tensor_from(x[i].shape, x[i].data);
    for (int dup = -1; dup < p->num_in; dup++) {
        if (dup == ai || (dup >= 0 && !same_shape(&xs[dup].shape, &xs[ai].shape)))
            continue;
        if (dup >= 0)
            memcpy(xs[dup].data, xs[ai].data, (size_t)mxc_shape_size(&xs[ai].shape) * 4);
        struct mxct_tensor ref[MAX_ARGS], ref_aux[MAX_ARGS], got[MAX_ARGS], got_aux[MAX_ARGS];
        forward_run(p, is_train, xs, aux0, start, -1, -1, -1, 0, ref, ref_aux);
        for (size_t r = 0; r < MXC_ARRAY_SIZE(alias_reqs); r++) {
            char how[160], with[48] = "";
            if (dup >= 0)
                snprintf(with, sizeof with, " and in_data[%d] (the same array)", dup);
            snprintf(how, sizeof how, "%s forward in place (in_data[%d]%s -> out_data[%d], %s)",
                     p->def->name, ai, with, ao, req_name(alias_reqs[r]));
            forward_run(p, is_train, xs, aux0, start, ai, ao, dup, alias_reqs[r], got, got_aux);
            expect_same(got, ref, p->num_out, 0, "out_data", how);
            expect_same(got_aux, ref_aux, p->num_aux, 0, "aux", how);
            mxct_tensors_free(got, p->num_out);
            mxct_tensors_free(got_aux, p->num_aux);
        }
        mxct_tensors_free(ref, p->num_out);
        mxct_tensors_free(ref_aux, p->num_aux);
        if (dup >= 0)
            memcpy(xs[dup].data, x[dup].data, (size_t)mxc_shape_size(&xs[dup].shape) * 4);
    }
    mxct_tensors_free(xs, p->num_in);
    rng_restore(&found);
}

/* One backward with out_grad w on the forward's x, out and aux, every in_grad starting at
 * zero, into new tensors `grads`. With gi >= 0, in_grad[gi] and out_grad[go] are one
 * buffer, in_grad[gi] written with request `req`; the other in_grads with `others`. */
static void backward_run(const struct prepared *p, bool is_train, const struct mxct_tensor *x,
                         const struct mxct_tensor *out, const struct mxct_tensor *aux,
                         const struct mxct_tensor *w, int gi, int go, int req, int others,
                         struct mxct_tensor *grads) {
    struct mxct_tensor vw[MAX_ARGS], vg[MAX_ARGS];
    int reqs[MAX_ARGS];
    reqs_of(reqs, p->num_in, others);
    for (int k = 0; k < p->num_out; k++)
        vw[k] = w[k];
    for (int i = 0; i < p->num_in; i++)
        vg[i] = grads[i] = mxct_tensor_from(x[i].shape, NULL);
    float *buf = NULL;
    if (gi >= 0) {
        buf = shared_buffer(&w[go].shape, &x[gi].shape, &w[go]);
        vw[go].data = vg[gi].data = buf;
        reqs[gi] = req;
    }
    run_backward(p, is_train, x, out, aux, vw, vg, reqs);
    if (buf)
        memcpy(grads[gi].data, buf, (size_t)mxc_shape_size(&x[gi].shape) * sizeof(float));
    free(buf);
}

/* The backward option: in_grad[i] sharing out_grad[o]'s memory (write or write-in-place),
 * the other gradients written or added (onto zeros), against separate buffers. Inputs in
 * `skip` are not compared. */
static void check_backward_inplace(const struct prepared *p, bool is_train,
                                   const struct mxct_tensor *x, const struct mxct_tensor *out,
                                   const struct mxct_tensor *aux, const struct mxct_tensor *w,
                                   unsigned skip) {
    int gi, go;
    if (!mxc__inplace_get(p->def->backward_inplace, &gi, &go))
        return;
    ck_assert_msg((p->def->backward_deps & MXC__DEP_OUT_GRAD) && p->def->backward_cpu &&
                      gi < p->num_in && go < p->num_visible,
                  "%s declares its backward in place from out_grad[%d] to in_grad[%d], which "
                  "the executor never applies (a backward reading out_grad, %d inputs, %d "
                  "visible outputs)",
                  p->def->name, go, gi, p->num_in, p->num_visible);
    struct mxct_tensor ref[MAX_ARGS], got[MAX_ARGS];
    backward_run(p, is_train, x, out, aux, w, -1, -1, 0, MXC__REQ_WRITE, ref);
    static const int others[] = {MXC__REQ_WRITE, MXC__REQ_ADD};
    for (size_t r = 0; r < MXC_ARRAY_SIZE(alias_reqs); r++)
        for (size_t o = 0; o < MXC_ARRAY_SIZE(others); o++) {
            char how[160];
            snprintf(how, sizeof how,
                     "%s backward in place (out_grad[%d] -> in_grad[%d], %s; the others %s)",
                     p->def->name, go, gi, req_name(alias_reqs[r]), req_name(others[o]));
            backward_run(p, is_train, x, out, aux, w, gi, go, alias_reqs[r], others[o], got);
            expect_same(got, ref, p->num_in, skip, "in_grad", how);
            mxct_tensors_free(got, p->num_in);
        }
    mxct_tensors_free(ref, p->num_in);
}

/* Both options of an operator from a forward's inputs x with auxiliary states aux0 and
 * generator rng0 (NULL: as it is) before it: the forward's, then the backward's with out_grad
 * w (NULL: random, zeros for hidden outputs) on a forward run here. */
static void check_inplace(const struct prepared *p, bool is_train, const struct mxct_tensor *x,
                          const struct mxct_tensor *aux0, const struct rng_saved *rng0,
                          const struct mxct_tensor *w, unsigned skip) {
    check_forward_inplace(p, is_train, x, aux0, rng0);
    if (!p->def->backward_inplace.in1)
        return;
    struct mxct_tensor out[MAX_ARGS], aux[MAX_ARGS], rw[MAX_ARGS];
    struct rng_saved found = rng_save(p);
    forward_run(p, is_train, x, aux0, rng0, -1, -1, -1, 0, out, aux);
    rng_restore(&found);
    for (int k = 0; k < p->num_out && w == NULL; k++)
        rw[k] = k < p->num_visible
                    ? mxct_tensor_random(p->out_shapes[k], -1, 1, 2000u + (unsigned)k)
                    : mxct_tensor_from(p->out_shapes[k], NULL);
    check_backward_inplace(p, is_train, x, out, aux, w ? w : rw, skip);
    if (w == NULL)
        mxct_tensors_free(rw, p->num_out);
    mxct_tensors_free(out, p->num_out);
    mxct_tensors_free(aux, p->num_aux);
}

/* ---- Backend comparison: every case again on gpu(0) ------------------------------------
 * In the manner of ggml's test-backend-ops: when a GPU is present and the operator has a
 * GPU kernel, mxct_op_forward, mxct_op_gradcheck and mxct_op_backward run their case again
 * on gpu(0) through the public API (mxc_imperative_invoke for the forward; an executor
 * bound on gpu(0) for the backward, with write and then add-to requests) and compare with
 * the CPU kernel's result. Without a GPU nothing of it runs.
 *
 * The suites run each test in a forked child (Check's default) and CUDA cannot be used in
 * a child of a process that initialised it, so the parent never touches CUDA: each process
 * that runs a case decides once whether a GPU is present, and what it saw (cases compared,
 * kernels missing, random operators) goes to a page shared by the parent and its children,
 * printed by the parent once at exit. */

/* Tolerances for GPU vs CPU, per operator: |gpu - cpu| <= atol * max(1, max |cpu|) +
 * rtol * |cpu|, the absolute part scaled by the magnitude of the data compared. */
struct gpu_tolerance {
    const char *op;
    double rtol, atol;
};

static const struct gpu_tolerance gpu_default_tolerance = {"(default)", 1e-4, 1e-5};

static const struct gpu_tolerance gpu_tolerances[] = {
    /* cuDNN picks among implicit-GEMM, Winograd and FFT algorithms: a different order of
     * summation over C * kh * kw terms, and Winograd / FFT transform the data first, which
     * loses a few more bits than im2col + GEMM; the CPU runs either (its own Winograd
     * F(2x2, 3x3) on 3x3 stride-1 layers of 16 channels or more) */
    {"Convolution", 1e-3, 1e-4},
    {"Deconvolution", 1e-3, 1e-4},
    /* cuBLAS sums the K products in blocks (and split-K in parallel), not in the CPU
     * BLAS's order: the error grows with K, and cancelling sums lose relative precision */
    {"FullyConnected", 1e-3, 1e-4},
    {"dot", 1e-3, 1e-4},
    {"batch_dot", 1e-3, 1e-4},
    /* tree reductions over up to millions of elements, in another order than the CPU */
    {"sum", 1e-4, 1e-4},
    {"mean", 1e-4, 1e-4},
    /* batch mean and variance by block reductions (variance subtracts nearly equal
     * numbers), and the gradient's two sums over N * H * W, in another order */
    {"BatchNorm", 1e-3, 1e-4},
    /* a row's sum of exponentials in another order; the gradient sums over the row */
    {"softmax", 1e-4, 1e-5},
    {"log_softmax", 1e-4, 1e-4},
    {"SoftmaxOutput", 1e-4, 1e-5},
    /* cuDNN's LRN (a build with USE_CUDNN) sums the window and raises to -beta in its own
     * order and functions, and its gradient goes through y / norm rather than x *
     * norm^(-beta - 1); MXNet compares its cuDNN LRN with the CPU's at 1e-3 too */
    {"LRN", 1e-3, 1e-4},
};

static struct gpu_tolerance gpu_tolerance_of(const char *op) {
    for (size_t i = 0; i < MXC_ARRAY_SIZE(gpu_tolerances); i++)
        if (strcmp(gpu_tolerances[i].op, op) == 0)
            return gpu_tolerances[i];
    return gpu_default_tolerance;
}

/* What the processes of one suite saw, on a page they share. */
struct gpu_seen {
    int cases;            /* cases that reached the comparison (GPU or not) */
    int compared;         /* cases compared on gpu(0) */
    int no_gpu;           /* a process found no GPU */
    char missing[2048];   /* "op (forward), op (backward), ..." */
    char random_ops[256]; /* operators compared in inference mode only */
    char not_bound[512];  /* backward comparisons the executor could not run */
};

static struct gpu_seen *gpu_seen;
static pid_t gpu_seen_owner;
static int gpu_present = -1; /* per process: -1 not decided yet */

bool mxct_gpu_stand_in(void) {
    const char *e = getenv("MXC_TEST_COMPARE_ON_CPU");
    return e && *e && strcmp(e, "0") != 0;
}

mxc_context mxct_gpu_device(void) { return mxct_gpu_stand_in() ? mxc_cpu() : mxc_gpu(0); }

bool mxct_gpu_tests_run(void) { return mxct_gpu_stand_in() || mxc_gpu_count() > 0; }

/* Appends `item` to the list `list` (of `size` bytes) unless it is there already. */
static void list_add(char *list, size_t size, const char *item) {
    size_t n = strlen(item), len = strlen(list);
    for (const char *s = strstr(list, item); s; s = strstr(s + 1, item))
        if ((s == list || s[-1] == ' ') && (s[n] == ',' || s[n] == '\0'))
            return;
    if (len + n + 3 < size)
        snprintf(list + len, size - len, "%s%s", len ? ", " : "", item);
}

static void gpu_seen_report(void) {
    if (gpu_seen == NULL || getpid() != gpu_seen_owner || gpu_seen->cases == 0)
        return;
    if (gpu_seen->no_gpu) {
        printf("GPU comparison: skipped (no GPU)\n");
        return;
    }
    printf("GPU comparison: %d case(s) compared with the CPU on %s\n", gpu_seen->compared,
           mxct_gpu_stand_in() ? "the CPU itself (MXC_TEST_COMPARE_ON_CPU)" : "gpu(0)");
    if (gpu_seen->random_ops[0])
        printf("GPU comparison: operators drawing random numbers compared in inference mode "
               "only, backward not compared: %s\n",
               gpu_seen->random_ops);
    if (gpu_seen->not_bound[0])
        printf("GPU comparison: backward not compared (no gradient to bind): %s\n",
               gpu_seen->not_bound);
    if (gpu_seen->missing[0])
        printf("GPU kernels missing: %s\n", gpu_seen->missing);
    fflush(stdout);
}

__attribute__((constructor)) static void gpu_seen_init(void) {
    void *m = mmap(NULL, sizeof(struct gpu_seen), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return;
    gpu_seen = m;
    gpu_seen_owner = getpid();
    atexit(gpu_seen_report);
}

/* True when operator p's case is to be compared on gpu(0) (a GPU is present and the
 * operator has a GPU forward, and a GPU backward when `backward`); records what is
 * missing. Costs nothing without a GPU. */
static bool gpu_wanted(const struct prepared *p, bool backward) {
    if (gpu_seen)
        gpu_seen->cases++;
    if (gpu_present < 0)
        gpu_present = mxct_gpu_tests_run();
    if (!gpu_present) {
        if (gpu_seen)
            gpu_seen->no_gpu = 1;
        return false;
    }
    char item[128];
    bool ok = true;
    if (!mxc_op_supports(p->def->name, mxct_gpu_device(), MXC_FLOAT32)) {
        snprintf(item, sizeof item, "%s (forward)", p->def->name);
        ok = false;
    } else if (backward && p->def->backward_cpu && !mxct_gpu_stand_in() && !p->def->backward_gpu) {
        snprintf(item, sizeof item, "%s (backward)", p->def->name);
        ok = false;
    }
    if (!ok && gpu_seen)
        list_add(gpu_seen->missing, sizeof gpu_seen->missing, item);
    return ok;
}

/* The CPU forward of a case into new tensors `out` (every output) and `aux` (from aux0). */
static void cpu_forward(const struct prepared *p, bool is_train, const struct mxct_tensor *in,
                        const struct mxct_tensor *aux0, struct mxct_tensor *out,
                        struct mxct_tensor *aux) {
    for (int k = 0; k < p->num_out; k++)
        out[k] = mxct_tensor_from(p->out_shapes[k], NULL);
    for (int i = 0; i < p->num_aux; i++)
        aux[i] = mxct_tensor_from(aux0[i].shape, aux0[i].data);
    int rc = run_forward(p, is_train, in, aux, out, NULL);
    ck_assert_msg(rc == MXC_OK, "%s forward (is_train=%d): %s", p->def->name, is_train,
                  mxc_last_error());
}

/* True when the CPU forward of the case draws random numbers (its generator moves; it is
 * left as found): GPU and CPU generators give different streams, so such a case is
 * compared in inference mode only (Dropout and LeakyReLU rrelu in training). */
static bool case_draws(const struct prepared *p, bool is_train, const struct mxct_tensor *in,
                       const struct mxct_tensor *aux0) {
    struct rng_saved before = rng_save(p);
    if (before.gen == NULL)
        return false;
    struct mxct_tensor out[MAX_ARGS], aux[MAX_ARGS];
    cpu_forward(p, is_train, in, aux0, out, aux);
    bool drew = memcmp(&before.state, before.gen, sizeof before.state) != 0;
    rng_restore(&before);
    mxct_tensors_free(out, p->num_out);
    mxct_tensors_free(aux, p->num_aux);
    return drew;
}

/* "Convolution(kernel=(3, 3), num_filter=4) is_train=1, inputs data (2, 3, 5, 5), ..." */
static void describe_case(const struct prepared *p, struct mxct_params params, bool is_train,
                          const struct mxct_tensor *in, const struct mxct_tensor *aux, char *buf,
                          size_t size) {
    size_t len = (size_t)snprintf(buf, size, "%s(", p->def->name);
    for (int k = 0; k < params.num && len < size; k++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s=%s", k ? ", " : "", params.keys[k],
                                params.vals[k]);
    const char *names[MAX_ARGS];
    mxc__op_num_inputs(p->def, p->params, names);
    if (len < size)
        len += (size_t)snprintf(buf + len, size - len, ") is_train=%d, inputs", is_train);
    for (int i = 0; i < p->num_in + p->num_aux && len < size; i++) {
        const mxc_shape *s = i < p->num_in ? &in[i].shape : &aux[i - p->num_in].shape;
        len += (size_t)snprintf(buf + len, size - len, "%s %s (", i ? "," : "",
                                i < p->num_in ? names[i] : p->def->aux[i - p->num_in]);
        for (int d = 0; d < s->ndim && len < size; d++)
            len += (size_t)snprintf(buf + len, size - len, "%s%lld", d ? ", " : "",
                                    (long long)s->dims[d]);
        if (len < size)
            len += (size_t)snprintf(buf + len, size - len, ")");
    }
}

/* "[1, 0, 4]" for flat index i of shape s. */
static void index_of(const mxc_shape *s, int64_t i, char *buf, size_t size) {
    int64_t idx[MXC_MAX_NDIM];
    for (int d = s->ndim - 1; d >= 0; d--) {
        idx[d] = s->dims[d] ? i % s->dims[d] : 0;
        i = s->dims[d] ? i / s->dims[d] : 0;
    }
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < s->ndim && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (len < size)
        snprintf(buf + len, size - len, "]");
}

/* Asserts the GPU's `got` ≈ the CPU's `want` (plus `base` where base is not NAN: add-to
 * requests; an element the CPU left NaN then must stay `base`), naming the case, what is
 * compared and the worst element with both values. */
static void gpu_expect_close(const struct prepared *p, const char *desc, const char *what,
                             const struct mxct_tensor *got, const struct mxct_tensor *want,
                             float base) {
    struct gpu_tolerance tol = gpu_tolerance_of(p->def->name);
    int64_t n = mxc_shape_size(&got->shape), worst = -1, bad = 0;
    double scale = 1, worst_excess = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(want->data[i]))
            scale = fmax(scale, fabs((double)want->data[i]));
    double atol = tol.atol * scale;
    for (int64_t i = 0; i < n; i++) {
        double w = want->data[i], g = got->data[i];
        if (!isnan(base))
            w = isnan(w) ? base : base + w;
        double excess = fabs(g - w) - (atol + tol.rtol * fabs(w));
        bool nan_differs = isnan(g) != isnan(w);
        if (nan_differs || excess > 0)
            bad++;
        if (nan_differs || excess > worst_excess) {
            worst_excess = nan_differs ? INFINITY : excess;
            worst = i;
        }
    }
    if (worst < 0)
        return;
    char at[128];
    index_of(&got->shape, worst, at, sizeof at);
    double w = want->data[worst];
    if (!isnan(base))
        w = isnan(w) ? base : base + w;
    ck_abort_msg("GPU vs CPU: %s: %s: %lld of %lld element(s) differ, worst at %s (flat %lld): "
                 "gpu %.9g, cpu %.9g (rtol %g, atol %g = %g x max(1, max |cpu|); tolerance of "
                 "%s)",
                 desc, what, (long long)bad, (long long)n, at, (long long)worst,
                 (double)got->data[worst], w, tol.rtol, atol, tol.atol, tol.op);
}

/* A new array on `ctx` holding a copy of `t`. */
static mxc_ndarray *array_on(mxc_context ctx, const struct mxct_tensor *t) {
    mxc_ndarray *a = NULL;
    int rc = mxc_nd_create(&t->shape, MXC_FLOAT32, ctx, 0, &a);
    ck_assert_msg(rc == MXC_OK, "mxc_nd_create on %s: %s", ctx.dev_type == MXC_GPU ? "gpu" : "cpu",
                  mxc_last_error());
    rc = mxc_nd_sync_copy_from_cpu(a, t->data, (size_t)mxc_shape_size(&t->shape) * sizeof(float));
    ck_assert_msg(rc == MXC_OK, "copy to %s: %s", ctx.dev_type == MXC_GPU ? "gpu" : "cpu",
                  mxc_last_error());
    return a;
}

/* A new tensor holding array a's values (waiting for it): failures of the kernels that
 * wrote it surface here, named by `desc` and `what`. */
static struct mxct_tensor tensor_of(mxc_ndarray *a, const char *desc, const char *what) {
    mxc_shape s;
    ck_assert_int_eq(mxc_nd_get_shape(a, &s), MXC_OK);
    struct mxct_tensor t = mxct_tensor_from(s, NULL);
    int rc = mxc_nd_sync_copy_to_cpu(a, t.data, (size_t)mxc_shape_size(&s) * sizeof(float));
    ck_assert_msg(rc == MXC_OK, "GPU vs CPU: %s: reading %s: %s", desc, what, mxc_last_error());
    return t;
}

/* The forward of a case on gpu(0) against the CPU's outputs `out` and updated auxiliary
 * states `aux` (from `aux0`). Random operators in training mode are run again on the CPU in
 * inference mode and compared so. */
static void gpu_compare_forward(const struct prepared *p, struct mxct_params params, bool is_train,
                                const struct mxct_tensor *in, const struct mxct_tensor *aux0,
                                const struct mxct_tensor *out, const struct mxct_tensor *aux) {
    if (!gpu_wanted(p, false))
        return;
    struct mxct_tensor ref[MAX_ARGS], ref_aux[MAX_ARGS];
    bool rerun = case_draws(p, is_train, in, aux0);
    if (rerun) {
        if (gpu_seen)
            list_add(gpu_seen->random_ops, sizeof gpu_seen->random_ops, p->def->name);
        if (!is_train || case_draws(p, false, in, aux0))
            return; /* random even in inference mode (Dropout mode=always): not comparable */
        is_train = false;
        cpu_forward(p, false, in, aux0, ref, ref_aux);
        out = ref;
        aux = ref_aux;
    }
    char desc[512], what[160];
    describe_case(p, params, is_train, in, aux0, desc, sizeof desc);
    mxc_ndarray *args[2 * MAX_ARGS], *outs[MAX_ARGS] = {NULL};
    for (int i = 0; i < p->num_in; i++)
        args[i] = array_on(mxct_gpu_device(), &in[i]);
    for (int i = 0; i < p->num_aux; i++)
        args[p->num_in + i] = array_on(mxct_gpu_device(), &aux0[i]);
    /* an operator without inputs (_zeros) runs where its given output is */
    for (int k = 0; p->num_in + p->num_aux == 0 && k < p->num_visible; k++)
        ck_assert_msg(mxc_nd_create(&out[k].shape, MXC_FLOAT32, mxct_gpu_device(), 0, &outs[k]) ==
                          MXC_OK,
                      "%s: %s", desc, mxc_last_error());
    int rc = mxc_imperative_invoke(p->def->name, params.num, params.keys, params.vals,
                                   p->num_in + p->num_aux, args, p->num_visible, outs, is_train);
    ck_assert_msg(rc == MXC_OK,
                  "GPU vs CPU: %s: mxc_imperative_invoke on gpu(0): %s (the CPU "
                  "kernel succeeded)",
                  desc, mxc_last_error());
    const char *out_names[MAX_ARGS];
    mxc__op_num_outputs(p->def, p->params, out_names);
    for (int k = 0; k < p->num_visible; k++) {
        snprintf(what, sizeof what, "forward output %d (%s)", k, out_names[k]);
        struct mxct_tensor got = tensor_of(outs[k], desc, what);
        gpu_expect_close(p, desc, what, &got, &out[k], NAN);
        mxct_tensors_free(&got, 1);
    }
    for (int i = 0; i < p->num_aux; i++) {
        snprintf(what, sizeof what, "auxiliary state %d (%s) after the forward", i, p->def->aux[i]);
        struct mxct_tensor got = tensor_of(args[p->num_in + i], desc, what);
        gpu_expect_close(p, desc, what, &got, &aux[i], NAN);
        mxct_tensors_free(&got, 1);
    }
    for (int i = 0; i < p->num_in + p->num_aux; i++)
        mxc_nd_free(args[i]);
    for (int k = 0; k < p->num_visible; k++)
        mxc_nd_free(outs[k]);
    ck_assert_msg(mxc_nd_wait_all() == MXC_OK, "%s: %s", desc, mxc_last_error());
    if (rerun) {
        mxct_tensors_free(ref, p->num_out);
        mxct_tensors_free(ref_aux, p->num_aux);
    }
    if (gpu_seen)
        gpu_seen->compared++;
}

/* Binds operator `name` on `ctx` to arrays holding `in` and `aux`, gradient request
 * reqs[i] for input i (mxc_grad_req) with the gradient array starting at `preset` (NAN
 * included; NULL: a copy of the input), runs forward (training) and backward with head
 * gradients `heads` (num_heads of them; NULL entries for loss outputs), and fills `grads`
 * (one per input; empty, ndim 0, where the request is MXC_GRAD_NULL). `desc` names the
 * case in messages. */
static void exec_grads(mxc_context ctx, const char *name, struct mxct_params params,
                       const struct mxct_tensor *in, int num_in, const struct mxct_tensor *aux,
                       int num_aux, const int *reqs, const float *preset,
                       const struct mxct_tensor *heads, int num_heads, const char *desc,
                       struct mxct_tensor *grads) {
    mxc_symbol *sym = NULL;
    mxc_executor *x = NULL;
    mxc_ndarray *args[MAX_ARGS], *g[MAX_ARGS] = {NULL}, *states[MAX_ARGS], *h[MAX_ARGS] = {NULL};
    const char *dev = ctx.dev_type == MXC_GPU ? "gpu(0)" : "cpu";
    if (ctx.dev_type == MXC_CPU && mxct_gpu_stand_in())
        dev = "cpu (MXC_TEST_COMPARE_ON_CPU)";
    ck_assert_msg(mxc_symbol_create(name, params.num, params.keys, params.vals, "op", 0, NULL, NULL,
                                    &sym) == MXC_OK,
                  "%s: %s", desc, mxc_last_error());
    for (int i = 0; i < num_in; i++) {
        args[i] = array_on(ctx, &in[i]);
        if (reqs[i] == MXC_GRAD_NULL)
            continue;
        g[i] = array_on(ctx, &in[i]);
        if (preset)
            ck_assert_int_eq(mxc_nd_fill(g[i], *preset), MXC_OK);
    }
    for (int i = 0; i < num_aux; i++)
        states[i] = array_on(ctx, &aux[i]);
    int rc = mxc_executor_bind(sym, ctx, num_in, args, g, reqs, num_aux, states, &x);
    ck_assert_msg(rc == MXC_OK, "%s: bind on %s: %s", desc, dev, mxc_last_error());
    ck_assert_msg(mxc_executor_forward(x, 1) == MXC_OK, "%s: forward on %s: %s", desc, dev,
                  mxc_last_error());
    for (int k = 0; k < num_heads; k++)
        h[k] = heads[k].data ? array_on(ctx, &heads[k]) : NULL;
    ck_assert_msg(mxc_executor_backward(x, num_heads, h) == MXC_OK, "%s: backward on %s: %s", desc,
                  dev, mxc_last_error());
    char what[96];
    for (int i = 0; i < num_in; i++) {
        grads[i] = (struct mxct_tensor){{0}, NULL};
        if (g[i] == NULL)
            continue;
        snprintf(what, sizeof what, "the gradient of input %d on %s", i, dev);
        grads[i] = tensor_of(g[i], desc, what);
    }
    mxc_executor_free(x);
    for (int i = 0; i < num_in; i++) {
        mxc_nd_free(args[i]);
        mxc_nd_free(g[i]);
    }
    for (int i = 0; i < num_aux; i++)
        mxc_nd_free(states[i]);
    for (int k = 0; k < num_heads; k++)
        mxc_nd_free(h[k]);
    mxc_symbol_free(sym);
    ck_assert_msg(mxc_nd_wait_all() == MXC_OK, "%s: %s", desc, mxc_last_error());
}

/* The backward of a case on gpu(0), through an executor, with head gradients `heads` (one
 * per output; the visible ones are used), against the CPU kernel's gradients `cpu_grads`
 * written with write requests (from a training-mode forward; for an inference-mode case
 * the reference is the same executor run on the CPU, since an executor's backward follows
 * a training forward). Once with write requests (gradients starting as NaN, so an element
 * left unwritten shows), once with add-to requests onto 1. Inputs in `skip` get none. */
static void gpu_compare_backward(const struct prepared *p, struct mxct_params params, bool is_train,
                                 const struct mxct_tensor *in, const struct mxct_tensor *aux0,
                                 const struct mxct_tensor *heads,
                                 const struct mxct_tensor *cpu_grads, unsigned skip) {
    if (!gpu_wanted(p, true))
        return;
    if (case_draws(p, true, in, aux0)) {
        if (gpu_seen)
            list_add(gpu_seen->random_ops, sizeof gpu_seen->random_ops, p->def->name);
        return;
    }
    int reqs[MAX_ARGS];
    bool any = false;
    for (int i = 0; i < p->num_in; i++) {
        reqs[i] = (skip & (1u << i)) ? MXC_GRAD_NULL : MXC_GRAD_WRITE;
        any |= reqs[i] != MXC_GRAD_NULL;
    }
    if (!any) {
        if (gpu_seen)
            list_add(gpu_seen->not_bound, sizeof gpu_seen->not_bound, p->def->name);
        return;
    }
    char desc[512], what[160];
    describe_case(p, params, is_train, in, aux0, desc, sizeof desc);
    struct mxct_tensor ref[MAX_ARGS], got[MAX_ARGS];
    const float nan = NAN, one = 1.0f;
    if (!is_train)
        exec_grads(mxc_cpu(), p->def->name, params, in, p->num_in, aux0, p->num_aux, reqs, &nan,
                   heads, p->num_visible, desc, ref);
    const struct mxct_tensor *want = is_train ? cpu_grads : ref;
    const char *in_names[MAX_ARGS];
    mxc__op_num_inputs(p->def, p->params, in_names);
    for (int pass = 0; pass < 2; pass++) {
        bool add = pass == 1;
        for (int i = 0; i < p->num_in; i++)
            if (reqs[i] != MXC_GRAD_NULL)
                reqs[i] = add ? MXC_GRAD_ADD : MXC_GRAD_WRITE;
        exec_grads(mxct_gpu_device(), p->def->name, params, in, p->num_in, aux0, p->num_aux, reqs,
                   add ? &one : &nan, heads, p->num_visible, desc, got);
        for (int i = 0; i < p->num_in; i++) {
            if (reqs[i] == MXC_GRAD_NULL)
                continue;
            snprintf(what, sizeof what, "gradient of input %d (%s), %s", i, in_names[i],
                     add ? "add-to request onto 1 (expected 1 + gradient)" : "write request");
            gpu_expect_close(p, desc, what, &got[i], &want[i], add ? 1.0f : NAN);
        }
        mxct_tensors_free(got, p->num_in);
    }
    if (!is_train)
        mxct_tensors_free(ref, p->num_in);
    if (gpu_seen)
        gpu_seen->compared++;
}

void mxct_op_check_inplace(const char *name, struct mxct_params params, bool is_train,
                           const struct mxct_tensor *in, int num_in,
                           const struct mxct_tensor *aux) {
    struct prepared p;
    int rc = prepare(name, params, in, num_in, aux, &p);
    ck_assert_msg(rc == MXC_OK, "%s: %s", name, mxc_last_error());
    ck_assert_msg(p.def->inplace.in1 || p.def->backward_inplace.in1,
                  "%s declares no in-place option", name);
    check_inplace(&p, is_train, in, aux, NULL, NULL, 0);
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
    struct mxct_tensor aux0[MAX_ARGS];
    for (int i = 0; i < p.num_aux; i++)
        aux0[i] = mxct_tensor_from(aux[i].shape, aux[i].data);
    struct rng_saved before = rng_save(&p);
    rc = run_forward(&p, is_train, in, aux, out, NULL);
    if (rc == MXC_OK) {
        check_inplace(&p, is_train, in, aux0, &before, NULL, 0);
        gpu_compare_forward(&p, params, is_train, in, aux0, out, aux);
    }
    mxct_tensors_free(aux0, p.num_aux);
    return rc;
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
    int reqs[MAX_ARGS];
    run_backward(&p, is_train, in, out, aux, w, grads, reqs_of(reqs, num_in, MXC__REQ_WRITE));
    check_inplace(&p, is_train, in, aux0, NULL, w, skip);
    gpu_compare_forward(&p, params, is_train, in, aux0, out, aux);
    gpu_compare_backward(&p, params, is_train, in, aux0, w, grads, skip);

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
    run_backward(&p, is_train, in, out, aux, w, added, reqs_of(reqs, num_in, MXC__REQ_ADD));
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
    struct mxct_tensor aux0[MAX_ARGS];
    for (int i = 0; i < p.num_aux; i++)
        aux0[i] = mxct_tensor_from(aux[i].shape, aux[i].data);
    struct rng_saved before = rng_save(&p);
    rc = run_forward(&p, is_train, in, aux, out, NULL);
    if (rc == MXC_OK) {
        for (int i = 0; i < num_in; i++) {
            in_grad_out[i] = mxct_tensor_from(in[i].shape, NULL);
            for (int64_t j = 0; j < mxc_shape_size(&in[i].shape); j++)
                in_grad_out[i].data[j] = NAN;
        }
        int reqs[MAX_ARGS];
        run_backward(&p, is_train, in, out, aux, og, in_grad_out,
                     reqs_of(reqs, num_in, MXC__REQ_WRITE));
        check_inplace(&p, is_train, in, aux0, &before, og, 0);
        gpu_compare_forward(&p, params, is_train, in, aux0, out, aux);
        gpu_compare_backward(&p, params, is_train, in, aux0, og, in_grad_out, 0);
    }
    mxct_tensors_free(aux0, p.num_aux);
    mxct_tensors_free(out, p.num_out);
    mxct_tensors_free(og, p.num_out);
    return rc;
}

mxc_ndarray *mxct_array_of(const struct mxct_tensor *t) { return array_on(mxc_cpu(), t); }

void mxct_op_bound_grads(const char *name, struct mxct_params params, const struct mxct_tensor *in,
                         int num_in, const struct mxct_tensor *aux, int num_aux, const int *reqs,
                         const struct mxct_tensor *head, struct mxct_tensor *grads) {
    exec_grads(mxc_cpu(), name, params, in, num_in, aux, num_aux, reqs, NULL, head, head ? 1 : 0,
               name, grads);
}

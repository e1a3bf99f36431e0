/*
 * tests/util/op_ref.c — the helpers of tests/util/op_ref.h.
 */
#include "tests/util/op_ref.h"

#include "mxc/op.h"
#include "operator/op.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mxct_params mxct_kv_split(const char *const *kv, const char **keys, const char **vals,
                                 int max) {
    int n = 0;
    for (; kv[2 * n]; n++) {
        ck_assert_msg(n < max, "more than %d parameters", max);
        keys[n] = kv[2 * n];
        vals[n] = kv[2 * n + 1];
    }
    return (struct mxct_params){n, keys, vals};
}

void mxct_ref_load_all(const char *file, const char *prefix, int n, struct mxct_tensor *t) {
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s%d", prefix, i);
        t[i] = mxct_ref_load(file, name);
    }
}

struct mxct_tensor mxct_tensor_of(mxc_ndarray *a) {
    mxc_shape s;
    ck_assert_int_eq(mxc_nd_get_shape(a, &s), MXC_OK);
    struct mxct_tensor t = mxct_tensor_from(s, NULL);
    ck_assert_int_eq(mxc_nd_sync_copy_to_cpu(a, t.data, (size_t)mxc_shape_size(&s) * sizeof(float)),
                     MXC_OK);
    return t;
}

struct mxct_refs mxct_refs_load(const char *file) {
    const char *dir = getenv("MXC_TEST_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/data", file);
    struct mxct_refs r = {0};
    int rc = mxc_nd_load(path, mxc_cpu(), &r.n, &r.a, &r.names);
    ck_assert_msg(rc == MXC_OK, "cannot load %s (run from the repo root or set MXC_TEST_DATA): %s",
                  path, mxc_last_error());
    ck_assert_msg(r.names != NULL || r.n == 0, "%s holds unnamed arrays", path);
    return r;
}

mxc_ndarray *mxct_refs_get(const struct mxct_refs *r, const char *name) {
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->names[i], name) == 0)
            return r->a[i];
    ck_abort_msg("reference array %s missing", name);
    return NULL;
}

void mxct_refs_free(struct mxct_refs *r) { mxc_nd_list_free(r->n, r->a, r->names); }

struct mxct_tensor mxct_ref_load(const char *file, const char *name) {
    struct mxct_refs r = mxct_refs_load(file);
    mxc_ndarray *a = mxct_refs_get(&r, name);
    ck_assert_msg(mxc_nd_dtype(a) == MXC_FLOAT32, "%s:%s is not float32", file, name);
    struct mxct_tensor t = mxct_tensor_of(a);
    mxct_refs_free(&r);
    return t;
}

void mxct_ref_load_case(const char *group, const char *name, const char *prefix, int n,
                        struct mxct_tensor *t) {
    char file[256];
    snprintf(file, sizeof file, "ops/%s/%s.params", group, name);
    mxct_ref_load_all(file, prefix, n, t);
}

/* The most inputs or outputs a reference case has. */
enum { REF_MAX_IO = 8 };

struct mxct_ref_case mxct_ref_case_of(const char *group, const char *file, const char *op,
                                      const char *const *kv, int num_in, int num_out) {
    return (struct mxct_ref_case){.group = group,
                                  .file = file,
                                  .op = op,
                                  .params = mxct_params_from_pairs(kv),
                                  .num_in = num_in,
                                  .num_out = num_out};
}

void mxct_ref_expect_forward(const struct mxct_ref_case *c, bool is_train, double rtol,
                             double atol) {
    ck_assert_int_le(c->num_in, REF_MAX_IO);
    ck_assert_int_le(c->num_out, REF_MAX_IO);
    struct mxct_tensor in[REF_MAX_IO], want[REF_MAX_IO], out[REF_MAX_IO] = {{{0}, NULL}};
    char what[160];
    mxct_ref_load_case(c->group, c->file, "in", c->num_in, in);
    mxct_ref_load_case(c->group, c->file, "out", c->num_out, want);
    int rc = mxct_op_forward(c->op, c->params, is_train, in, c->num_in, NULL, out);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->file, mxc_last_error());
    for (int k = 0; k < c->num_out; k++) {
        snprintf(what, sizeof what, "%s output %d vs MXNet", c->file, k);
        mxct_expect_tensor(&out[k], &want[k], rtol, atol, what);
    }
    mxct_tensors_free(out, REF_MAX_IO); /* hidden outputs included */
    mxct_tensors_free(want, c->num_out);
    mxct_tensors_free(in, c->num_in);
}

void mxct_ref_expect_backward(const struct mxct_ref_case *c, double rtol, double atol) {
    ck_assert_int_le(c->num_in, REF_MAX_IO);
    ck_assert_int_le(c->num_out, REF_MAX_IO);
    struct mxct_tensor in[REF_MAX_IO], og[REF_MAX_IO], grads[REF_MAX_IO];
    char file[256], what[160];
    snprintf(file, sizeof file, "ops/%s/%s.params", c->group, c->file);
    mxct_ref_load_all(file, "in", c->num_in, in);
    bool heads = mxct_op_def(c->op)->backward_deps & MXC__DEP_OUT_GRAD;
    if (heads)
        mxct_ref_load_all(file, "og", c->num_out, og);
    int rc =
        mxct_op_backward(c->op, c->params, true, in, c->num_in, NULL, heads ? og : NULL, grads);
    ck_assert_msg(rc == MXC_OK, "%s: %s", c->file, mxc_last_error());
    for (int i = 0; i < c->num_in; i++) {
        if (c->grad_skip & (1u << i))
            continue;
        snprintf(what, sizeof what, "%s gradient of input %d vs MXNet", c->file, i);
        char name[16];
        snprintf(name, sizeof name, "grad%d", i);
        if (c->grad_zero & (1u << i)) {
            struct mxct_tensor zeros = mxct_tensor_from(in[i].shape, NULL);
            mxct_expect_close(&grads[i], zeros.data, 0, 0, what);
            mxct_tensors_free(&zeros, 1);
            continue;
        }
        struct mxct_tensor want = mxct_ref_load(file, name);
        mxct_expect_close(&grads[i], want.data, rtol, atol, what);
        mxct_tensors_free(&want, 1);
    }
    mxct_tensors_free(grads, c->num_in);
    if (heads)
        mxct_tensors_free(og, c->num_out);
    mxct_tensors_free(in, c->num_in);
}

/* The case's inputs as new arrays; with `bad`, input bad->index replaced by zeros of
 * bad->shape. */
struct bad_input {
    int index;
    mxc_shape shape;
};

static void ref_arrays(const struct mxct_ref_case *c, const struct bad_input *bad,
                       mxc_ndarray **arrays) {
    struct mxct_tensor in[REF_MAX_IO];
    mxct_ref_load_case(c->group, c->file, "in", c->num_in, in);
    for (int i = 0; i < c->num_in; i++) {
        if (bad && i == bad->index) {
            struct mxct_tensor zeros = mxct_tensor_from(bad->shape, NULL);
            arrays[i] = mxct_array_of(&zeros);
            mxct_tensors_free(&zeros, 1);
        } else {
            arrays[i] = mxct_array_of(&in[i]);
        }
    }
    mxct_tensors_free(in, c->num_in);
}

static void free_arrays(mxc_ndarray **arrays, int n) {
    for (int i = 0; i < n; i++)
        mxc_nd_free(arrays[i]);
    ck_assert_int_eq(mxc_nd_wait_all(), MXC_OK);
}

void mxct_ref_expect_invoke(const struct mxct_ref_case *c, const char *name, bool is_train,
                            double rtol, double atol) {
    ck_assert_int_le(c->num_in, REF_MAX_IO);
    ck_assert_int_le(c->num_out, REF_MAX_IO);
    name = name ? name : c->op;
    struct mxct_tensor want[REF_MAX_IO];
    mxct_ref_load_case(c->group, c->file, "out", c->num_out, want);
    mxc_ndarray *arrays[REF_MAX_IO], *out[REF_MAX_IO] = {NULL};
    ref_arrays(c, NULL, arrays);
    int rc = mxc_imperative_invoke(name, c->params.num, c->params.keys, c->params.vals, c->num_in,
                                   arrays, c->num_out, out, is_train);
    ck_assert_msg(rc == MXC_OK, "%s (%s): %s", c->file, name, mxc_last_error());
    char what[160];
    for (int k = 0; k < c->num_out; k++) {
        struct mxct_tensor got = mxct_tensor_of(out[k]);
        snprintf(what, sizeof what, "%s output %d through mxc_imperative_invoke as %s", c->file, k,
                 name);
        mxct_expect_tensor(&got, &want[k], rtol, atol, what);
        mxct_tensors_free(&got, 1);
    }
    free_arrays(out, c->num_out);
    free_arrays(arrays, c->num_in);
    mxct_tensors_free(want, c->num_out);
}

void mxct_ref_expect_invoke_error(const struct mxct_ref_case *c, int bad, mxc_shape shape, int code,
                                  const char *const *needles) {
    ck_assert_int_le(c->num_in, REF_MAX_IO);
    ck_assert(bad >= 0 && bad < c->num_in);
    mxc_ndarray *arrays[REF_MAX_IO], *out[REF_MAX_IO] = {NULL};
    ref_arrays(c, &(struct bad_input){bad, shape}, arrays);
    int rc = mxc_imperative_invoke(c->op, c->params.num, c->params.keys, c->params.vals, c->num_in,
                                   arrays, c->num_out, out, 0);
    mxct_expect_error(rc, code, needles);
    for (int k = 0; k < c->num_out; k++)
        ck_assert_ptr_null(out[k]);
    free_arrays(arrays, c->num_in);
}

const struct mxc__op_def *mxct_op_def(const char *name) {
    const struct mxc__op_def *d = mxc__op_find(name);
    ck_assert_msg(d != NULL, "%s is not registered", name);
    return d;
}

int mxct_op_parse(const char *op, struct mxct_params kv) {
    const struct mxc__op_def *d = mxct_op_def(op);
    _Alignas(16) unsigned char params[1024];
    ck_assert_uint_le(d->param_size, sizeof params);
    return mxc__op_parse_params(d, kv.num, kv.keys, kv.vals, params);
}

int mxct_op_infer(const char *op, struct mxct_params kv, mxc_shape *in, int num_in, mxc_shape *out,
                  int num_out) {
    return mxct_op_infer_aux(op, kv, in, num_in, out, num_out, NULL, -1);
}

/* num_aux -1: not checked (mxct_op_infer). */
int mxct_op_infer_aux(const char *op, struct mxct_params kv, mxc_shape *in, int num_in,
                      mxc_shape *out, int num_out, mxc_shape *aux, int num_aux) {
    const struct mxc__op_def *d = mxct_op_def(op);
    _Alignas(16) unsigned char params[1024];
    ck_assert_uint_le(d->param_size, sizeof params);
    int rc = mxc__op_parse_params(d, kv.num, kv.keys, kv.vals, params);
    if (rc != MXC_OK)
        return rc;
    ck_assert_int_eq(mxc__op_num_inputs(d, params, NULL), num_in);
    ck_assert_int_eq(mxc__op_num_outputs(d, params, NULL), num_out);
    if (num_aux >= 0)
        ck_assert_int_eq(mxc__op_num_aux(d), num_aux);
    return d->infer_shape(params, in, num_in, out, num_out, aux, num_aux < 0 ? 0 : num_aux);
}

void mxct_expect_default(const char *op, const char *key, const char *want) {
    mxc_op_info info;
    ck_assert_int_eq(mxc_op_get_info(op, &info), MXC_OK);
    for (int i = 0; i < info.num_params; i++)
        if (strcmp(info.params[i].name, key) == 0) {
            ck_assert_msg(info.params[i].default_value != NULL, "%s.%s is required", op, key);
            ck_assert_str_eq(info.params[i].default_value, want);
            return;
        }
    ck_abort_msg("%s has no parameter %s", op, key);
}

void mxct_expect_param(const char *op, struct mxct_params kv, const char *key, const char *want) {
    const struct mxc__op_def *d = mxct_op_def(op);
    _Alignas(16) unsigned char params[1024];
    char buf[64];
    ck_assert_uint_le(d->param_size, sizeof params);
    ck_assert_msg(mxc__op_parse_params(d, kv.num, kv.keys, kv.vals, params) == MXC_OK, "%s",
                  mxc_last_error());
    for (int i = 0; i < d->num_params; i++)
        if (strcmp(d->params[i].name, key) == 0) {
            mxc__op_format_param(&d->params[i], params, buf, sizeof buf);
            char *end1, *end2;
            double got_v = strtod(buf, &end1), want_v = strtod(want, &end2);
            bool numeric = *end1 == '\0' && *end2 == '\0' && end1 != buf;
            ck_assert_msg(numeric ? fabs(got_v - want_v) <= 1e-7 * fabs(want_v)
                                  : strcmp(buf, want) == 0,
                          "%s.%s = %s, expected %s", op, key, buf, want);
            return;
        }
    ck_abort_msg("%s has no parameter %s", op, key);
}

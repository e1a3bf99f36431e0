/*
 * ndarray/invoke.c — mxc_imperative_invoke: any registered operator run on arrays. Parses
 * the parameters, infers output shapes and dtypes, creates the outputs the caller left
 * NULL, and pushes one engine operation through mxc__nd_push that reads the inputs and
 * writes the outputs and auxiliary states (and the operator's resources).
 */
#include "ndarray/ndarray_impl.h"

#include "ndarray/autograd_impl.h"

#include <string.h>

#define MAX_PARAM_BYTES MXC__ND_MAX_PARAM_BYTES

/* What the pushed operation carries: the operator, the call's shape, then its params. */
struct invoke_params {
    const struct mxc__op_def *def;
    bool is_train;
    int num_in, num_out, num_aux, num_visible;
    int req[MXC__MAX_OP_ARGS];
    _Alignas(16) unsigned char params[];
};

/* Splits the pushed tensors (inputs | outputs, aux) into an operator call. */
static int invoke_kernel(const struct mxc__nd_call *nd) {
    const struct invoke_params *p = nd->params;
    struct mxc__op_call call = {
        .rctx = nd->rctx,
        .is_train = p->is_train,
        .params = p->def->param_size ? p->params : NULL,
        .in_data = nd->inputs,
        .num_in = p->num_in,
        .out_data = nd->outputs,
        .num_out = p->num_out,
        .aux = nd->outputs + p->num_out,
        .num_aux = p->num_aux,
        .req = p->req,
        .resources = nd->resources,
        .num_resources = nd->num_resources,
    };
    mxc__op_kernel k =
        nd->rctx->ctx.dev_type == MXC_GPU ? p->def->forward_gpu : p->def->forward_cpu;
    return mxc__op_run(k, &call);
}

/* Whether a and b share any byte of memory. */
static bool overlap(const mxc_ndarray *a, const mxc_ndarray *b) {
    return a->chunk == b->chunk && a->offset < b->offset + mxc__nd_nbytes(b) &&
           b->offset < a->offset + mxc__nd_nbytes(a);
}

static bool same_memory(const mxc_ndarray *a, const mxc_ndarray *b) {
    return a->chunk == b->chunk && a->offset == b->offset && mxc__nd_nbytes(a) == mxc__nd_nbytes(b);
}

/* The write request of given output `o` (index i) after checking how it shares memory
 * with the inputs (arguments then auxiliary states, n_in + n_aux of them) and the
 * outputs before it. A kernel may write an output over an input only where the operator
 * declares that pair in place (the same rule the executor's planner follows) — over that
 * input, the output may also be any other argument passed as the same array — or over
 * any argument of an element-wise operator. Any other sharing would read what the kernel
 * already overwrote: MXC_EINVAL. */
static int output_request(const struct mxc__op_def *def, int i, const mxc_ndarray *o,
                          mxc_ndarray *const *inputs, int n_in, int n_aux,
                          mxc_ndarray *const *outputs, const char *const *in_names,
                          const char *const *out_names, int *req) {
    int pair_in, pair_out;
    bool declared =
        def->elementwise || (mxc__inplace_get(def->inplace, &pair_in, &pair_out) && pair_out == i &&
                             pair_in < n_in && same_memory(inputs[pair_in], o));
    *req = MXC__REQ_WRITE;
    for (int j = 0; j < n_in + n_aux; j++) {
        if (!overlap(inputs[j], o))
            continue;
        const char *what = j < n_in ? in_names[j] : def->aux[j - n_in];
        if (j >= n_in || !declared || !same_memory(inputs[j], o))
            return mxc__error(MXC_EINVAL,
                              "%s: output %s shares memory with %s %s, which %s does not "
                              "compute in place; pass another array",
                              def->name, out_names[i], j < n_in ? "input" : "auxiliary state", what,
                              def->name);
        *req = MXC__REQ_INPLACE;
    }
    for (int k = 0; k < i; k++)
        if (outputs[k] && overlap(outputs[k], o))
            return mxc__error(MXC_EINVAL, "%s: outputs %s and %s share memory", def->name,
                              out_names[k], out_names[i]);
    return MXC_OK;
}

static bool same_shape(const mxc_shape *a, const mxc_shape *b) {
    return a->ndim == b->ndim && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

int mxc_imperative_invoke(const char *name, int num_params, const char *const *keys,
                          const char *const *vals, int num_inputs, mxc_ndarray *const *inputs,
                          int num_outputs, mxc_ndarray **outputs, int is_train) {
    const struct mxc__op_def *def;
    _Alignas(16) unsigned char params[MAX_PARAM_BYTES];
    int rc = mxc__op_lookup(name, &def);
    MXC_ASSERT(rc != MXC_OK || def->param_size <= MAX_PARAM_BYTES);
    if (rc == MXC_OK && (num_params < 0 || (num_params > 0 && (keys == NULL || vals == NULL))))
        rc = mxc__error(MXC_EINVAL, "%s: %d parameters, keys %s, vals %s", name, num_params,
                        keys ? "given" : "NULL", vals ? "given" : "NULL");
    if (rc == MXC_OK)
        rc = mxc__op_parse_params(def, num_params, keys, vals, params);
    if (rc == MXC_OK)
        rc = mxc__nd_invoke(def, params, num_inputs, inputs, num_outputs, outputs, is_train != 0);
    return mxc__in_call(__func__, rc);
}

int mxc__nd_invoke(const struct mxc__op_def *def, const void *params, int num_inputs,
                   mxc_ndarray *const *inputs, int num_outputs, mxc_ndarray **outputs,
                   bool is_train) {
    int rc = MXC_OK;
    const char *name = def->name;
    _Alignas(16) unsigned char buf[sizeof(struct invoke_params) + MAX_PARAM_BYTES];
    struct invoke_params *p = (struct invoke_params *)buf;
    mxc_ndarray *all_out[2 * MXC__MAX_OP_ARGS] = {NULL};
    bool created[MXC__MAX_OP_ARGS] = {false};
    int n_out = 0;

    if (def->param_size)
        memcpy(p->params, params, def->param_size);
    const char *in_names[MXC__MAX_OP_ARGS];
    int n_in = mxc__op_num_inputs(def, p->params, in_names);
    int n_aux = mxc__op_num_aux(def);
    const char *out_names[MXC__MAX_OP_ARGS];
    n_out = mxc__op_num_outputs(def, p->params, out_names);
    int n_visible = mxc__op_num_visible_outputs(def, p->params);
    /* the parameter tables bound variadic counts by MXC__MAX_OP_ARGS (the name lists above
     * hold that many); a table that did not would be the library's bug */
    MXC_CHECK(n_in <= MXC__MAX_OP_ARGS && n_aux <= MXC__MAX_OP_ARGS && n_out <= MXC__MAX_OP_ARGS,
              MXC_EINTERNAL,
              "%s: %d inputs, %d auxiliary states and %d outputs, at most %d supported", name, n_in,
              n_aux, n_out, MXC__MAX_OP_ARGS);
    MXC_CHECK(num_inputs == n_in + n_aux, MXC_EINVAL,
              "%s: takes %d inputs (%d arguments and %d auxiliary states), %d given", name,
              n_in + n_aux, n_in, n_aux, num_inputs);
    MXC_CHECK(inputs != NULL || num_inputs == 0, MXC_EINVAL, "%s: inputs is NULL", name);
    MXC_CHECK(outputs != NULL && num_outputs >= n_visible, MXC_EINVAL,
              "%s: needs room for %d outputs, %d given", name, n_visible, num_outputs);
    for (int i = 0; i < num_inputs; i++)
        MXC_TRY(mxc__nd_check(inputs[i], name, i < n_in ? in_names[i] : def->aux[i - n_in]));
    for (int i = 0; i < n_visible; i++)
        if (outputs[i])
            MXC_TRY(mxc__nd_check(outputs[i], name, out_names[i]));
    /* one kernel runs on one device and reads every operand there */
    for (int i = 1; i < num_inputs + n_visible; i++) {
        const mxc_ndarray *a = i < num_inputs ? inputs[i] : outputs[i - num_inputs];
        if (a == NULL || num_inputs == 0 ||
            mxc__ctx_same_device(a->chunk->ctx, inputs[0]->chunk->ctx))
            continue;
        char b1[32], b2[32];
        const char *what = i < num_inputs ? (i < n_in ? in_names[i] : def->aux[i - n_in])
                                          : out_names[i - num_inputs];
        MXC_CHECK(false, MXC_EINVAL, "%s: %s is on %s but %s on %s: copy one over first", name,
                  what, mxc__ctx_name(a->chunk->ctx, b1, sizeof b1),
                  n_in > 0 ? in_names[0] : def->aux[0],
                  mxc__ctx_name(inputs[0]->chunk->ctx, b2, sizeof b2));
    }

    /* Shapes and dtypes: known inputs and given outputs in, the rest inferred. */
    mxc_shape in_s[MXC__MAX_OP_ARGS], out_s[MXC__MAX_OP_ARGS], aux_s[MXC__MAX_OP_ARGS];
    int in_t[MXC__MAX_OP_ARGS], out_t[MXC__MAX_OP_ARGS], aux_t[MXC__MAX_OP_ARGS];
    for (int i = 0; i < n_in; i++) {
        in_s[i] = inputs[i]->shape;
        in_t[i] = inputs[i]->dtype;
    }
    for (int i = 0; i < n_aux; i++) {
        aux_s[i] = inputs[n_in + i]->shape;
        aux_t[i] = inputs[n_in + i]->dtype;
    }
    for (int i = 0; i < n_out; i++) {
        bool given = i < n_visible && outputs[i];
        out_s[i] = given ? outputs[i]->shape : (mxc_shape){0};
        out_t[i] = given ? outputs[i]->dtype : -1;
    }
    MXC_TRY(def->infer_shape(p->params, in_s, n_in, out_s, n_out, aux_s, n_aux));
    for (int i = 0; i < n_in; i++) {
        char b1[128], b2[128];
        MXC_CHECK(same_shape(&in_s[i], &inputs[i]->shape), MXC_ESHAPE,
                  "%s: input %s has shape %s but %s is expected", name, in_names[i],
                  mxc__shape_str(&inputs[i]->shape, b1, sizeof b1),
                  mxc__shape_str(&in_s[i], b2, sizeof b2));
    }
    if (def->infer_type) {
        MXC_TRY(def->infer_type(p->params, in_t, n_in, out_t, n_out, aux_t, n_aux));
    } else {
        for (int i = 1; i < n_in; i++)
            MXC_TRY(mxc__type_assign(&in_t[i], in_t[0], name, in_names[i]));
        for (int i = 0; i < n_out; i++)
            MXC_TRY(mxc__type_assign(&out_t[i], in_t[0], name, out_names[i]));
        for (int i = 0; i < n_aux; i++)
            MXC_TRY(mxc__type_assign(&aux_t[i], in_t[0], name, def->aux[i]));
    }
    /* an operator without inputs (_zeros) runs where its given output is, else on the CPU */
    mxc_context ctx = num_inputs > 0                ? inputs[0]->chunk->ctx
                      : n_visible > 0 && outputs[0] ? outputs[0]->chunk->ctx
                                                    : mxc_cpu();
    int dtype = n_in > 0 ? in_t[0] : out_t[0];
    MXC_CHECK(mxc_op_supports(name, ctx, dtype), MXC_ENOTSUP, "%s: no kernel for %s on %s(%d)",
              name, mxc_dtype_name(dtype), ctx.dev_type == MXC_GPU ? "gpu" : "cpu", ctx.dev_id);

    /* Outputs: the caller's (checked), new ones for NULL entries and hidden outputs. */
    for (int i = 0; i < n_out; i++) {
        bool given = i < n_visible && outputs[i];
        if (given) {
            char b1[128], b2[128];
            MXC_CHECK(same_shape(&outputs[i]->shape, &out_s[i]), MXC_ESHAPE,
                      "%s: output %s has shape %s but the result is %s", name, out_names[i],
                      mxc__shape_str(&outputs[i]->shape, b1, sizeof b1),
                      mxc__shape_str(&out_s[i], b2, sizeof b2));
            MXC_CHECK(outputs[i]->dtype == out_t[i], MXC_ETYPE,
                      "%s: output %s is %s but the result is %s", name, out_names[i],
                      mxc_dtype_name(outputs[i]->dtype), mxc_dtype_name(out_t[i]));
            all_out[i] = outputs[i];
        } else {
            /* only an operator without inputs leaves it unknown (_zeros of shape (2, 0)) */
            MXC_CHECK(out_s[i].ndim > 0, MXC_ESHAPE,
                      "%s: the shape of output %s is unknown: nothing gives its 0 (unknown) dims",
                      name, out_names[i]);
            MXC_TRY(mxc_nd_create(&out_s[i], out_t[i], ctx, 1, &all_out[i]));
            created[i] = true;
        }
        p->req[i] = MXC__REQ_WRITE;
        if (given)
            MXC_TRY(output_request(def, i, all_out[i], inputs, n_in, n_aux, all_out, in_names,
                                   out_names, &p->req[i]));
    }
    for (int i = 0; i < n_aux; i++)
        all_out[n_out + i] = inputs[n_in + i];
    {
        mxc_ndarray *given[MXC__MAX_OP_ARGS];
        for (int i = 0; i < n_out; i++)
            given[i] = created[i] ? NULL : all_out[i];
        MXC_TRY(mxc__ag_check_write(def, inputs, n_in, given, n_out));
    }

    p->def = def;
    p->is_train = is_train || mxc__ag_is_training();
    p->num_in = n_in;
    p->num_out = n_out;
    p->num_aux = n_aux;
    p->num_visible = n_visible;
    int kinds[2], n_res = 0;
    for (int i = 0; i < 2 && def->forward_resources[i]; i++)
        kinds[n_res++] = def->forward_resources[i] - 1;
    struct mxc__nd_op op = {.name = def->name,
                            .kernel = invoke_kernel,
                            .params = p,
                            .params_size = sizeof *p + def->param_size,
                            .run_ctx = ctx,
                            .resources = kinds,
                            .num_resources = n_res,
                            .num_overwritten = n_out}; /* not the auxiliary states */
    MXC_TRY(mxc__nd_push(&op, (const mxc_ndarray *const *)inputs, n_in, all_out, n_out + n_aux));
    MXC_TRY(mxc__ag_record(def, p->params, inputs, n_in, n_aux, all_out, n_out));

    for (int i = 0; i < n_out; i++) {
        if (i < n_visible)
            outputs[i] = all_out[i];
        else
            mxc_nd_free(all_out[i]); /* hidden outputs: the operation keeps them alive */
    }
    return MXC_OK;
fail:
    for (int i = 0; i < n_out && i < MXC__MAX_OP_ARGS; i++)
        if (created[i])
            mxc_nd_free(all_out[i]);
    return rc;
}

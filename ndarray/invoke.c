/*
 * ndarray/invoke.c — mxc_imperative_invoke: any registered operator run on arrays. Parses
 * the parameters, infers output shapes and dtypes, creates the outputs the caller left
 * NULL, and pushes one engine operation through mxc__nd_push that reads the inputs and
 * writes the outputs and auxiliary states (and the operator's resources).
 */
#include "ndarray/ndarray_impl.h"

#include <string.h>

#define MAX_PARAM_BYTES 1024

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
    return k(&call);
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
    if (rc != MXC_OK)
        return rc;
    MXC_ASSERT(def->param_size <= MAX_PARAM_BYTES);
    if (num_params < 0 || (num_params > 0 && (keys == NULL || vals == NULL)))
        return mxc__error(MXC_EINVAL, "%s: bad parameter arrays", name);
    rc = mxc__op_parse_params(def, num_params, keys, vals, params);
    if (rc != MXC_OK)
        return rc;
    return mxc__nd_invoke(def, params, num_inputs, inputs, num_outputs, outputs, is_train != 0);
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
    MXC_CHECK(num_inputs > 0, MXC_EINVAL,
              "%s: operators without inputs are not supported "
              "imperatively yet",
              name);

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
    mxc_context ctx = inputs[0]->chunk->ctx;
    MXC_CHECK(mxc_op_supports(name, ctx, in_t[0]), MXC_ENOTSUP, "%s: no kernel for %s on %s(%d)",
              name, mxc_dtype_name(in_t[0]), ctx.dev_type == MXC_GPU ? "gpu" : "cpu", ctx.dev_id);

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
            MXC_CHECK(out_s[i].ndim > 0, MXC_EINTERNAL,
                      "%s: could not infer the shape of "
                      "output %s",
                      name, out_names[i]);
            MXC_TRY(mxc_nd_create(&out_s[i], out_t[i], ctx, 1, &all_out[i]));
            created[i] = true;
        }
        p->req[i] = MXC__REQ_WRITE;
        for (int j = 0; j < n_in; j++)
            if (inputs[j]->chunk == all_out[i]->chunk && inputs[j]->offset == all_out[i]->offset)
                p->req[i] = MXC__REQ_INPLACE;
    }
    for (int i = 0; i < n_aux; i++)
        all_out[n_out + i] = inputs[n_in + i];

    p->def = def;
    p->is_train = is_train;
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

/*
 * operator/registry.c — the registry made from operator/op_list.h: lookup by name
 * (binary search over the sorted list, then MXNet's aliases) and the public introspection
 * of mxc/op.h.
 */
#include "operator/op.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MXC__OP(ident) extern const struct mxc__op_def mxc__op_##ident;
#include "operator/op_list.h"
#undef MXC__OP

static const struct mxc__op_def *const all_ops[] = {
#define MXC__OP(ident) &mxc__op_##ident,
#include "operator/op_list.h"
#undef MXC__OP
};

#define NUM_OPS MXC_ARRAY_SIZE(all_ops)

static const struct mxc__op_def *sorted[NUM_OPS];
static const char *sorted_names[NUM_OPS + 1];
static mxc_op_param_info *param_infos[NUM_OPS]; /* built once, kept for the process */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int by_name(const void *a, const void *b) {
    return strcmp((*(const struct mxc__op_def *const *)a)->name,
                  (*(const struct mxc__op_def *const *)b)->name);
}

static void build(void) {
    memcpy(sorted, all_ops, sizeof sorted);
    qsort(sorted, NUM_OPS, sizeof sorted[0], by_name);
    for (size_t i = 0; i < NUM_OPS; i++)
        sorted_names[i] = sorted[i]->name;
}

/* MXNet registers many operators under several names, and programs and JSON files use
 * whichever the front end called (x + y is saved as "elemwise_add", mx.sym.concat as
 * "concat"). Each operator has one definition under one name; its other names resolve
 * here, so every entry point (invoke, symbol JSON, mxc_op_get_info) accepts them. The
 * list is MXNet 1.9.1's aliases of the operators mxc has (grouped by NNGetOpHandle),
 * leaving out the _sparse_, _npi_ and _npx_ front ends' internal names. */
static const char *const aliases[][2] = {
    /* lower-case spellings of layers and shape operators */
    {"add_n", "ElementWiseSum"},
    {"cast", "Cast"},
    {"concat", "Concat"},
    /* Gluon's rnn layers join their weights for RNN with it: MXNet registers it apart, with
     * Concat's parameters and kernels, differing only in inferring zero-size dimensions,
     * which mxc does not have (a 0 is a size) */
    {"_rnn_param_concat", "Concat"},
    {"crop", "slice"},
    {"flatten", "Flatten"},
    {"identity", "_copy"},
    {"reshape", "Reshape"},
    {"reverse", "flip"},
    {"split", "SliceChannel"},
    {"swapaxes", "SwapAxis"},
    /* reductions and broadcasting */
    {"broadcast_minus", "broadcast_sub"},
    {"broadcast_plus", "broadcast_add"},
    {"max_axis", "max"},
    {"sum_axis", "sum"},
    /* element-wise: what MXNet 0.8 ... 1.9 files call them */
    {"elemwise_add", "_plus"},
    {"_add", "_plus"},
    {"_Plus", "_plus"},
    {"elemwise_sub", "_minus"},
    {"_sub", "_minus"},
    {"_Minus", "_minus"},
    {"elemwise_mul", "_mul"},
    {"_Mul", "_mul"},
    {"elemwise_div", "_div"},
    {"_Div", "_div"},
    {"_Maximum", "_maximum"},
    {"_Minimum", "_minimum"},
    {"_Power", "_power"},
    {"_PlusScalar", "_plus_scalar"},
    {"_MinusScalar", "_minus_scalar"},
    {"_RMinusScalar", "_rminus_scalar"},
    {"_MulScalar", "_mul_scalar"},
    {"_DivScalar", "_div_scalar"},
    {"_RDivScalar", "_rdiv_scalar"},
    {"_MaximumScalar", "_maximum_scalar"},
    {"_MinimumScalar", "_minimum_scalar"},
    {"_PowerScalar", "_power_scalar"},
    /* the old name of the softmax loss */
    {"Softmax", "SoftmaxOutput"},
};

/* The registered operator called exactly `name`, or NULL. */
static const struct mxc__op_def *find_exact(const char *name) {
    pthread_once(&once, build);
    size_t lo = 0, hi = NUM_OPS;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(name, sorted[mid]->name);
        if (c == 0)
            return sorted[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const struct mxc__op_def *mxc__op_find(const char *name) {
    const struct mxc__op_def *def = find_exact(name);
    for (size_t i = 0; def == NULL && i < MXC_ARRAY_SIZE(aliases); i++)
        if (strcmp(name, aliases[i][0]) == 0)
            def = find_exact(aliases[i][1]);
    return def;
}

/* Edit distance, for "did you mean" in messages. */
static size_t distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (lb >= 64)
        return 64;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t sub = diag + (a[i - 1] != b[j - 1]);
            size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[lb];
}

int mxc__op_lookup(const char *name, const struct mxc__op_def **out) {
    *out = NULL;
    if (name == NULL)
        return mxc__error(MXC_EINVAL, "operator name is NULL");
    *out = mxc__op_find(name);
    if (*out)
        return MXC_OK;
    const char *close = NULL;
    size_t best = 4; /* suggest only near misses */
    for (size_t i = 0; i < NUM_OPS; i++) {
        size_t d = distance(name, sorted[i]->name);
        if (d < best) {
            best = d;
            close = sorted[i]->name;
        }
    }
    if (close)
        return mxc__error(MXC_EINVAL, "unknown operator '%s' (did you mean '%s'?)", name, close);
    return mxc__error(MXC_EINVAL, "unknown operator '%s'", name);
}

static int count(const char *const *names) {
    int n = 0;
    while (names && names[n])
        n++;
    return n;
}

/* Names from a fixed list or, for variadic operators, from the parameters. */
static int list_names(const char *const *fixed, mxc__list_names_fn fn, const void *params,
                      const char **names) {
    const char *tmp[MXC__MAX_OP_ARGS];
    if (fn)
        return fn(params, names ? names : tmp, MXC__MAX_OP_ARGS);
    int n = count(fixed);
    for (int i = 0; names && i < n; i++)
        names[i] = fixed[i];
    return n;
}

int mxc__op_num_inputs(const struct mxc__op_def *def, const void *params, const char **names) {
    return list_names(def->inputs, def->list_inputs, params, names);
}

int mxc__op_num_outputs(const struct mxc__op_def *def, const void *params, const char **names) {
    return list_names(def->outputs, def->list_outputs, params, names);
}

int mxc__op_num_visible_outputs(const struct mxc__op_def *def, const void *params) {
    if (def->visible_outputs)
        return def->visible_outputs(params);
    return def->num_visible_outputs ? def->num_visible_outputs
                                    : mxc__op_num_outputs(def, params, NULL);
}

int mxc__op_num_aux(const struct mxc__op_def *def) { return count(def->aux); }

int mxc_op_list(size_t *n, const char *const **names) {
    if (n == NULL || names == NULL)
        return mxc__error(MXC_EINVAL, "mxc_op_list: NULL argument");
    pthread_once(&once, build);
    *n = NUM_OPS;
    *names = sorted_names;
    return MXC_OK;
}

static const char *type_name(const struct mxc__param *p) {
    switch (p->type) {
    case MXC__PARAM_INT: return "int";
    case MXC__PARAM_FLOAT: return "float";
    case MXC__PARAM_DOUBLE: return "double";
    case MXC__PARAM_BOOL: return "boolean";
    case MXC__PARAM_TUPLE:
    case MXC__PARAM_LONG_TUPLE: return "tuple of int";
    case MXC__PARAM_OPT_FLOAT: return "float or None";
    case MXC__PARAM_OPT_ENUM: return "enum or None";
    case MXC__PARAM_OPT_INT: return "int or None";
    case MXC__PARAM_OPT_TUPLE: return "tuple of int or None, entries may be None";
    case MXC__PARAM_STRING: return "string";
    default: return "enum";
    }
}

static pthread_mutex_t info_lock = PTHREAD_MUTEX_INITIALIZER;

int mxc_op_get_info(const char *name, mxc_op_info *out) {
    const struct mxc__op_def *def;
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_op_get_info: out is NULL");
    int rc = mxc__op_lookup(name, &def);
    if (rc != MXC_OK)
        return mxc__in_call(__func__, rc);
    size_t idx = 0;
    while (sorted[idx] != def)
        idx++;
    pthread_mutex_lock(&info_lock);
    if (param_infos[idx] == NULL && def->num_params > 0) {
        mxc_op_param_info *infos = mxc__calloc((size_t)def->num_params, sizeof *infos);
        if (infos == NULL) {
            pthread_mutex_unlock(&info_lock);
            return mxc__error(MXC_ENOMEM, "mxc_op_get_info: out of memory");
        }
        for (int i = 0; i < def->num_params; i++) {
            const struct mxc__param *p = &def->params[i];
            infos[i] = (mxc_op_param_info){p->name, type_name(p), p->default_value, p->doc};
        }
        param_infos[idx] = infos;
    }
    pthread_mutex_unlock(&info_lock);
    *out = (mxc_op_info){
        .name = def->name,
        .description = def->description,
        .num_params = def->num_params,
        .params = param_infos[idx],
        .num_inputs = def->list_inputs ? -1 : count(def->inputs),
        .inputs = def->list_inputs ? NULL : def->inputs,
        .num_outputs = def->list_outputs ? -1 : count(def->outputs),
        .num_visible_outputs = def->list_outputs || def->visible_outputs ? -1
                               : def->num_visible_outputs                ? def->num_visible_outputs
                                                                         : count(def->outputs),
        .outputs = def->outputs,
        .num_aux = count(def->aux),
        .aux = def->aux,
        .differentiable = def->backward_deps != 0,
    };
    return MXC_OK;
}

int mxc_op_supports(const char *name, mxc_context ctx, int dtype) {
    const struct mxc__op_def *def = name ? mxc__op_find(name) : NULL;
    if (def == NULL)
        return 0;
    mxc__op_kernel k = ctx.dev_type == MXC_GPU ? def->forward_gpu : def->forward_cpu;
    if (k == NULL || (ctx.dev_type == MXC_GPU && ctx.dev_id >= mxc_gpu_count()))
        return 0;
    return mxc__op_accepts(def, dtype);
}

static bool all_empty(const struct mxc__tensor *t, int n) {
    for (int i = 0; t && i < n; i++)
        if (t[i].size != 0)
            return false;
    return true;
}

int mxc__op_run(mxc__op_kernel kernel, const struct mxc__op_call *call) {
    const struct mxc__tensor *written = call->in_grad ? call->in_grad : call->out_data;
    int num_written = call->in_grad ? call->num_in : call->num_out;
    if (all_empty(written, num_written) && all_empty(call->aux, call->num_aux))
        return MXC_OK;
    return kernel(call);
}

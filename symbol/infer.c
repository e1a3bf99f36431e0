/*
 * symbol/infer.c — shape and type inference over a symbol's indexed graph: known shapes
 * (given by the caller or from variables' __shape__ / __dtype__ hints) are propagated by
 * running each operator's infer function in topological order until nothing changes;
 * operators deduce in both directions (a weight from data, an input from an output), so
 * a few sweeps reach the fixed point. Conflicts are errors naming the node.
 */
#include "symbol/symbol_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mxc__symbol_set_unknown(mxc_symbol *sym, int num, const char *const *names,
                            const char *const **out);

/* "(2, 3)", "[2,3]", "(3,)" -> shape. */
static bool parse_shape(const char *s, mxc_shape *out) {
    mxc_shape t = {0};
    while (*s == ' ')
        s++;
    char close = *s == '(' ? ')' : *s == '[' ? ']' : '\0';
    if (!close)
        return false;
    s++;
    for (;;) {
        while (*s == ' ')
            s++;
        if (*s == close)
            break;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 0 || t.ndim == MXC_MAX_NDIM)
            return false;
        t.dims[t.ndim++] = v;
        s = end;
        while (*s == ' ' || *s == 'L')
            s++;
        if (*s == ',')
            s++;
        else if (*s != close)
            return false;
    }
    s++;
    while (*s == ' ')
        s++;
    if (*s)
        return false;
    *out = t;
    return true;
}

static bool shape_eq(const mxc_shape *a, const mxc_shape *b) {
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

/* Re-records the operator's message with the node named in front, and the operator's
 * name too unless its message starts with it. */
static int node_error(int rc, const struct mxc__graph_node *n) {
    size_t len = strlen(n->op->name);
    if (strncmp(mxc_last_error(), n->op->name, len) == 0 && mxc_last_error()[len] == ':')
        return mxc__error_wrap(rc, "node '%s'", n->name);
    return mxc__error_wrap(rc, "node '%s' (%s)", n->name, n->op->name);
}

static int apply_hints_shape(const struct mxc__graph *g, mxc_shape *shapes) {
    for (int i = 0; i < g->num_nodes; i++) {
        const struct mxc__graph_node *n = &g->nodes[i];
        if (n->op != NULL)
            continue;
        const char *hint = mxc__attrs_get(&n->src->attrs, "__shape__");
        if (hint == NULL)
            continue;
        mxc_shape s;
        if (!parse_shape(hint, &s))
            return mxc__error(MXC_EINVAL,
                              "variable '%s': __shape__ '%s' is not a shape such "
                              "as (2, 3)",
                              n->name, hint);
        bool complete = s.ndim > 0;
        for (int d = 0; d < s.ndim; d++)
            complete = complete && s.dims[d] > 0;
        mxc_shape *have = &shapes[g->entry_ptr[i]];
        if (!complete)
            continue; /* MXNet's 0 = unknown dimension: treated as unknown */
        if (have->ndim == 0) {
            *have = s;
        } else if (!shape_eq(have, &s)) {
            char b1[128], b2[128];
            return mxc__error(MXC_ESHAPE,
                              "variable '%s': given shape %s but its __shape__ "
                              "hint is %s",
                              n->name, mxc__shape_str(have, b1, sizeof b1),
                              mxc__shape_str(&s, b2, sizeof b2));
        }
    }
    return MXC_OK;
}

/* Copies an op's view back into the entry table; true when something became known. */
static int merge_shape(mxc_shape *entry, const mxc_shape *got, const struct mxc__graph_node *n,
                       const char *what, bool *changed) {
    if (got->ndim == 0)
        return MXC_OK;
    char b1[128], b2[128];
    if (entry->ndim == 0) {
        if (mxc_shape_size(got) < 0) /* the table holds valid shapes only */
            return mxc__error(MXC_ESHAPE,
                              "node '%s' (%s): %s would have shape %s: a negative dimension "
                              "or more elements than int64 holds",
                              n->name, n->op->name, what, mxc__shape_str(got, b1, sizeof b1));
        *entry = *got;
        *changed = true;
        return MXC_OK;
    }
    if (shape_eq(entry, got))
        return MXC_OK;
    return mxc__error(MXC_ESHAPE, "node '%s' (%s): %s has shape %s but %s is expected", n->name,
                      n->op->name, what, mxc__shape_str(entry, b1, sizeof b1),
                      mxc__shape_str(got, b2, sizeof b2));
}

static const char *input_name(const struct mxc__graph_node *n, int k, const char **names) {
    return k < n->num_args ? names[k] : n->op->aux[k - n->num_args];
}

/* Every shape in the table is valid (mxc_shape_size >= 0: no negative dim, and the
 * non-zero dims multiply within int64): the given ones and the hints are checked here,
 * what operators infer in merge_shape. So an operator's inference never sees a shape
 * whose dims overflow when multiplied (Deconvolution's (1, 2, 2^63 - 1, 3) did). */
int mxc__graph_infer_shape(const struct mxc__graph *g, mxc_shape *shapes, int *num_unknown) {
    int rc = apply_hints_shape(g, shapes);
    if (rc != MXC_OK)
        return rc;
    for (int i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i].num_outputs; k++) {
            const mxc_shape *s = &shapes[g->entry_ptr[i] + k];
            char b[128];
            if (s->ndim != 0 && mxc_shape_size(s) < 0)
                return mxc__error(MXC_EINVAL,
                                  "'%s' has shape %s: a negative dimension or more elements "
                                  "than int64 holds",
                                  g->nodes[i].name, mxc__shape_str(s, b, sizeof b));
        }
    mxc_shape in[MXC__MAX_OP_ARGS], out[MXC__MAX_OP_ARGS];
    const char *names[MXC__MAX_OP_ARGS], *onames[MXC__MAX_OP_ARGS];
    for (int sweep = 0; sweep <= g->num_nodes + 1; sweep++) {
        bool changed = false;
        for (int i = 0; i < g->num_nodes; i++) {
            const struct mxc__graph_node *n = &g->nodes[i];
            if (n->op == NULL)
                continue;
            int n_aux = n->num_inputs - n->num_args;
            for (int k = 0; k < n->num_inputs; k++)
                in[k] = shapes[mxc__graph_eid(g, n->inputs[k])];
            for (int k = 0; k < n->num_outputs; k++)
                out[k] = shapes[g->entry_ptr[i] + k];
            rc = n->op->infer_shape(n->params, in, n->num_args, out, n->num_outputs,
                                    in + n->num_args, n_aux);
            if (rc != MXC_OK)
                return node_error(rc, n);
            mxc__op_num_inputs(n->op, n->params, names);
            mxc__op_num_outputs(n->op, n->params, onames);
            for (int k = 0; k < n->num_inputs; k++) {
                rc = merge_shape(&shapes[mxc__graph_eid(g, n->inputs[k])], &in[k], n,
                                 input_name(n, k, names), &changed);
                if (rc != MXC_OK)
                    return rc;
            }
            for (int k = 0; k < n->num_outputs; k++) {
                rc = merge_shape(&shapes[g->entry_ptr[i] + k], &out[k], n, onames[k], &changed);
                if (rc != MXC_OK)
                    return rc;
            }
        }
        if (!changed)
            break;
    }
    if (num_unknown) {
        int u = 0;
        for (int e = 0; e < g->num_entries; e++)
            u += shapes[e].ndim == 0;
        *num_unknown = u;
    }
    return MXC_OK;
}

static int dtype_from_name(const char *s) {
    for (int t = 0; t <= MXC_BFLOAT16; t++)
        if (mxc_dtype_name(t) && strcmp(mxc_dtype_name(t), s) == 0)
            return t;
    return -1;
}

/* Every input, output and aux state of `n` has one dtype (the default rule). */
static int same_type(const struct mxc__graph_node *n, int *in, int *out) {
    int t = -1;
    for (int k = 0; k < n->num_inputs && t < 0; k++)
        t = in[k];
    for (int k = 0; k < n->num_outputs && t < 0; k++)
        t = out[k];
    if (t < 0)
        return MXC_OK;
    for (int k = 0; k < n->num_inputs; k++) {
        int rc = mxc__type_assign(&in[k], t, n->op->name, "input");
        if (rc != MXC_OK)
            return rc;
    }
    for (int k = 0; k < n->num_outputs; k++) {
        int rc = mxc__type_assign(&out[k], t, n->op->name, "output");
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

static int merge_type(int *entry, int got, const struct mxc__graph_node *n, bool *changed) {
    if (got < 0 || *entry == got)
        return MXC_OK;
    if (*entry < 0) {
        *entry = got;
        *changed = true;
        return MXC_OK;
    }
    return mxc__error(MXC_ETYPE, "node '%s' (%s): an input or output is %s but %s is expected",
                      n->name, n->op->name, mxc_dtype_name(*entry), mxc_dtype_name(got));
}

int mxc__graph_infer_type(const struct mxc__graph *g, int *dtypes, int *num_unknown) {
    int rc;
    for (int i = 0; i < g->num_nodes; i++) {
        const struct mxc__graph_node *n = &g->nodes[i];
        const char *hint = n->op ? NULL : mxc__attrs_get(&n->src->attrs, "__dtype__");
        if (hint == NULL)
            continue;
        int t = dtype_from_name(hint);
        if (t < 0) { /* MXNet also accepts the type flag as a number */
            char *end;
            long v = strtol(hint, &end, 10);
            t = end != hint && *end == '\0' && v >= 0 && v <= MXC_BFLOAT16 ? (int)v : -1;
        }
        if (t < 0 || mxc_dtype_name(t) == NULL)
            return mxc__error(MXC_EINVAL, "variable '%s': unknown __dtype__ '%s'", n->name, hint);
        int *have = &dtypes[g->entry_ptr[i]];
        if (*have < 0)
            *have = t;
        else if (*have != t)
            return mxc__error(MXC_ETYPE,
                              "variable '%s': given %s but its __dtype__ hint "
                              "is %s",
                              n->name, mxc_dtype_name(*have), mxc_dtype_name(t));
    }
    int in[MXC__MAX_OP_ARGS], out[MXC__MAX_OP_ARGS];
    for (int sweep = 0; sweep <= g->num_nodes + 1; sweep++) {
        bool changed = false;
        for (int i = 0; i < g->num_nodes; i++) {
            const struct mxc__graph_node *n = &g->nodes[i];
            if (n->op == NULL)
                continue;
            for (int k = 0; k < n->num_inputs; k++)
                in[k] = dtypes[mxc__graph_eid(g, n->inputs[k])];
            for (int k = 0; k < n->num_outputs; k++)
                out[k] = dtypes[g->entry_ptr[i] + k];
            if (n->op->infer_type)
                rc = n->op->infer_type(n->params, in, n->num_args, out, n->num_outputs,
                                       in + n->num_args, n->num_inputs - n->num_args);
            else
                rc = same_type(n, in, out);
            if (rc != MXC_OK)
                return node_error(rc, n);
            for (int k = 0; k < n->num_inputs; k++)
                if ((rc = merge_type(&dtypes[mxc__graph_eid(g, n->inputs[k])], in[k], n,
                                     &changed)) != MXC_OK)
                    return rc;
            for (int k = 0; k < n->num_outputs; k++)
                if ((rc = merge_type(&dtypes[g->entry_ptr[i] + k], out[k], n, &changed)) != MXC_OK)
                    return rc;
        }
        if (!changed)
            break;
    }
    if (num_unknown) {
        int u = 0;
        for (int e = 0; e < g->num_entries; e++)
            u += dtypes[e] < 0;
        *num_unknown = u;
    }
    return MXC_OK;
}

/* The variable node called `name` among the arguments and auxiliary states, or -1. */
static int find_var(const struct mxc__graph *g, const char *name) {
    for (int i = 0; i < g->num_args; i++)
        if (strcmp(g->nodes[g->arg_nodes[i]].name, name) == 0)
            return g->arg_nodes[i];
    for (int i = 0; i < g->num_aux; i++)
        if (strcmp(g->nodes[g->aux_nodes[i]].name, name) == 0)
            return g->aux_nodes[i];
    return -1;
}

/* The entry that input i of the caller's list stands for, or an error. */
static int given_entry(const struct mxc__graph *g, int i, const char *const *names, const char *fn,
                       int *eid) {
    int node;
    if (names) {
        if (names[i] == NULL)
            return mxc__error(MXC_EINVAL, "%s: name %d is NULL", fn, i);
        node = find_var(g, names[i]);
        if (node < 0)
            return mxc__error(MXC_EINVAL,
                              "%s: the symbol has no argument or auxiliary state "
                              "called '%s'",
                              fn, names[i]);
    } else {
        if (i >= g->num_args)
            return mxc__error(MXC_EINVAL,
                              "%s: %d shapes given by position but the symbol "
                              "has %d arguments",
                              fn, i + 1, g->num_args);
        node = g->arg_nodes[i];
    }
    *eid = g->entry_ptr[node];
    return MXC_OK;
}

int mxc_symbol_infer_shape(mxc_symbol *sym, int num, const char *const *names,
                           const mxc_shape *shapes, mxc_shape *arg_shapes, mxc_shape *out_shapes,
                           mxc_shape *aux_shapes, int *num_unknown,
                           const char *const **unknown_names) {
    int rc = MXC_OK;
    struct mxc__graph *g = NULL;
    mxc_shape *s = NULL;
    const char **unk = NULL;
    MXC_TRY(mxc__symbol_check(sym, __func__, "symbol"));
    MXC_CHECK(num >= 0 && (num == 0 || shapes), MXC_EINVAL,
              "mxc_symbol_infer_shape: bad shape arrays");
    MXC_TRY(mxc__graph_build(sym, &g));
    s = mxc__calloc((size_t)g->num_entries + 1, sizeof *s);
    unk = mxc__calloc((size_t)(g->num_args + g->num_aux) + 1, sizeof *unk);
    MXC_CHECK(s && unk, MXC_ENOMEM, "out of memory inferring shapes");
    for (int i = 0; i < num; i++) {
        int eid;
        MXC_TRY(given_entry(g, i, names, "mxc_symbol_infer_shape", &eid));
        char b1[128], b2[128];
        MXC_CHECK(shapes[i].ndim >= 0 && shapes[i].ndim <= MXC_MAX_NDIM, MXC_EINVAL,
                  "mxc_symbol_infer_shape: shape %d has ndim %d", i, shapes[i].ndim);
        MXC_CHECK(s[eid].ndim == 0 || shape_eq(&s[eid], &shapes[i]), MXC_ESHAPE,
                  "mxc_symbol_infer_shape: '%s' given twice, as %s and %s",
                  names ? names[i] : "an argument", mxc__shape_str(&s[eid], b1, sizeof b1),
                  mxc__shape_str(&shapes[i], b2, sizeof b2));
        s[eid] = shapes[i];
    }
    MXC_TRY(mxc__graph_infer_shape(g, s, NULL));
    int u = 0;
    for (int i = 0; i < g->num_args; i++) {
        mxc_shape *v = &s[g->entry_ptr[g->arg_nodes[i]]];
        if (arg_shapes)
            arg_shapes[i] = *v;
        if (v->ndim == 0)
            unk[u++] = g->nodes[g->arg_nodes[i]].name;
    }
    for (int i = 0; i < g->num_aux; i++) {
        mxc_shape *v = &s[g->entry_ptr[g->aux_nodes[i]]];
        if (aux_shapes)
            aux_shapes[i] = *v;
        if (v->ndim == 0)
            unk[u++] = g->nodes[g->aux_nodes[i]].name;
    }
    for (int h = 0; out_shapes && h < g->num_heads; h++)
        out_shapes[h] = s[mxc__graph_eid(g, g->heads[h])];
    if (unknown_names)
        MXC_TRY(mxc__symbol_set_unknown(sym, u, unk, unknown_names));
    if (num_unknown)
        *num_unknown = u;
fail:
    mxc__free(unk);
    mxc__free(s);
    mxc__graph_free(g);
    return mxc__in_call(__func__, rc);
}

int mxc_symbol_infer_type(mxc_symbol *sym, int num, const char *const *names, const int *dtypes,
                          int *arg_types, int *out_types, int *aux_types, int *num_unknown) {
    int rc = MXC_OK;
    struct mxc__graph *g = NULL;
    int *t = NULL;
    MXC_TRY(mxc__symbol_check(sym, __func__, "symbol"));
    MXC_CHECK(num >= 0 && (num == 0 || dtypes), MXC_EINVAL,
              "mxc_symbol_infer_type: bad dtype arrays");
    MXC_TRY(mxc__graph_build(sym, &g));
    t = mxc__malloc(sizeof *t * ((size_t)g->num_entries + 1));
    MXC_CHECK(t != NULL, MXC_ENOMEM, "out of memory inferring types");
    for (int e = 0; e < g->num_entries; e++)
        t[e] = -1;
    for (int i = 0; i < num; i++) {
        int eid;
        MXC_TRY(given_entry(g, i, names, "mxc_symbol_infer_type", &eid));
        MXC_CHECK(dtypes[i] == -1 || mxc_dtype_name(dtypes[i]) != NULL, MXC_EINVAL,
                  "mxc_symbol_infer_type: %d is not a dtype", dtypes[i]);
        t[eid] = dtypes[i];
    }
    MXC_TRY(mxc__graph_infer_type(g, t, NULL));
    int u = 0;
    for (int i = 0; i < g->num_args; i++) {
        int v = t[g->entry_ptr[g->arg_nodes[i]]];
        if (arg_types)
            arg_types[i] = v;
        u += v < 0;
    }
    for (int i = 0; i < g->num_aux; i++) {
        int v = t[g->entry_ptr[g->aux_nodes[i]]];
        if (aux_types)
            aux_types[i] = v;
        u += v < 0;
    }
    for (int h = 0; out_types && h < g->num_heads; h++)
        out_types[h] = t[mxc__graph_eid(g, g->heads[h])];
    if (num_unknown)
        *num_unknown = u;
fail:
    mxc__free(t);
    mxc__graph_free(g);
    return mxc__in_call(__func__, rc);
}

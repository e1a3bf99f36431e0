/*
 * symbol/graphviz.c — Graphviz DOT text of a symbol, the C counterpart of MXNet's
 * mx.viz.plot_network: operator boxes labelled with their name, operator and key
 * parameters (coloured by kind as plot_network does), variable ellipses (parameter
 * variables hidden unless asked for), and edges from producer to consumer labelled with
 * the entry's shape when inference knows it. Render with `dot -Tpng net.dot -o net.png`.
 */
#include "symbol/symbol_impl.h"

#include <stdio.h>
#include <string.h>

/* Parameters worth showing on a box, as plot_network shows them. */
static const char *const key_params[] = {
    "kernel",   "stride", "pad",         "num_filter", "num_hidden", "pool_type", "global_pool",
    "act_type", "p",      "num_outputs", "dim",        "axis",       "scalar",    NULL};

static bool is_param_var(const char *name) {
    static const char *const suffixes[] = {"_weight",      "_bias",       "_gamma", "_beta",
                                           "_moving_mean", "_moving_var", NULL};
    size_t len = strlen(name);
    for (int i = 0; suffixes[i]; i++) {
        size_t s = strlen(suffixes[i]);
        if (len > s && strcmp(name + len - s, suffixes[i]) == 0)
            return true;
    }
    return false;
}

static const char *colour(const struct mxc__op_def *op) {
    const char *n = op->name;
    if (strcmp(n, "FullyConnected") == 0 || strcmp(n, "Convolution") == 0 ||
        strcmp(n, "Deconvolution") == 0)
        return "#fb8072";
    if (strcmp(n, "Activation") == 0 || strcmp(n, "LeakyReLU") == 0 || strcmp(n, "relu") == 0 ||
        strcmp(n, "tanh") == 0 || strcmp(n, "sigmoid") == 0)
        return "#ffffb3";
    if (strcmp(n, "BatchNorm") == 0)
        return "#bebada";
    if (strcmp(n, "Pooling") == 0)
        return "#80b1d3";
    if (strcmp(n, "Concat") == 0 || strcmp(n, "Flatten") == 0 || strcmp(n, "Reshape") == 0)
        return "#fdb462";
    if (strstr(n, "Output") != NULL || strcmp(n, "softmax") == 0)
        return "#b3de69";
    return "#fccde5";
}

/* A DOT string literal's contents (quotes and backslashes escaped). */
static void dot_escape(struct mxc__buf *b, const char *s) {
    for (; *s; s++) {
        char c[3] = {*s, 0, 0};
        if (*s == '"' || *s == '\\') {
            c[0] = '\\';
            c[1] = *s;
        }
        mxc__buf_puts(b, c);
    }
}

int mxc_symbol_to_dot(mxc_symbol *sym, int num, const char *const *names, const mxc_shape *shapes,
                      int show_params, const char **dot) {
    int rc = MXC_OK;
    struct mxc__graph *g = NULL;
    mxc_shape *s = NULL;
    struct mxc__buf b = {0};
    MXC_TRY(mxc__symbol_check(sym, __func__, "symbol"));
    MXC_CHECK(dot != NULL, MXC_EINVAL, "mxc_symbol_to_dot: dot is NULL");
    *dot = NULL;
    MXC_CHECK(num >= 0 && (num == 0 || (names && shapes)), MXC_EINVAL,
              "mxc_symbol_to_dot: bad shape arrays");
    MXC_TRY(mxc__graph_build(sym, &g));
    s = mxc__calloc((size_t)g->num_entries + 1, sizeof *s);
    MXC_CHECK(s != NULL, MXC_ENOMEM, "out of memory drawing a symbol");
    if (num > 0) {
        /* Shapes by name, then inference; a failure only drops the edge labels. */
        bool ok = true;
        for (int i = 0; i < num && ok; i++) {
            ok = false;
            for (int n = 0; n < g->num_nodes; n++) {
                if (g->nodes[n].op == NULL && names[i] && strcmp(g->nodes[n].name, names[i]) == 0) {
                    s[g->entry_ptr[n]] = shapes[i];
                    ok = true;
                }
            }
            MXC_CHECK(ok, MXC_EINVAL, "mxc_symbol_to_dot: the symbol has no variable '%s'",
                      names[i] ? names[i] : "(NULL)");
        }
        if (mxc__graph_infer_shape(g, s, NULL) != MXC_OK) {
            memset(s, 0, sizeof *s * (size_t)g->num_entries);
            mxc_clear_error();
        }
    }
    mxc__buf_puts(&b, "digraph plot {\n  node [fontsize=10, style=filled, "
                      "fixedsize=false];\n  edge [fontsize=9];\n");
    for (int i = 0; i < g->num_nodes; i++) {
        const struct mxc__graph_node *n = &g->nodes[i];
        if (n->op == NULL) {
            if (!show_params && is_param_var(n->name))
                continue;
            mxc__buf_printf(&b, "  n%d [label=\"", i);
            dot_escape(&b, n->name);
            mxc__buf_puts(&b, "\", shape=oval, fillcolor=\"#8dd3c7\"];\n");
            continue;
        }
        mxc__buf_printf(&b, "  n%d [label=\"", i);
        dot_escape(&b, n->name);
        mxc__buf_puts(&b, "\\n");
        dot_escape(&b, n->op->name);
        for (int k = 0; key_params[k]; k++) {
            const char *v = mxc__attrs_get(&n->src->attrs, key_params[k]);
            if (v == NULL)
                continue;
            mxc__buf_printf(&b, "\\n%s=", key_params[k]);
            dot_escape(&b, v);
        }
        mxc__buf_printf(&b, "\", shape=box, fillcolor=\"%s\"];\n", colour(n->op));
    }
    for (int i = 0; i < g->num_nodes; i++) {
        const struct mxc__graph_node *n = &g->nodes[i];
        for (int k = 0; k < n->num_inputs; k++) {
            struct mxc__graph_entry e = n->inputs[k];
            if (g->nodes[e.node].op == NULL && !show_params && is_param_var(g->nodes[e.node].name))
                continue;
            mxc__buf_printf(&b, "  n%d -> n%d", e.node, i);
            const mxc_shape *sh = &s[mxc__graph_eid(g, e)];
            if (sh->ndim > 0) {
                mxc__buf_puts(&b, " [label=\"");
                for (int d = 0; d < sh->ndim; d++)
                    mxc__buf_printf(&b, "%s%lld", d ? "x" : "", (long long)sh->dims[d]);
                mxc__buf_puts(&b, "\"]");
            }
            mxc__buf_puts(&b, ";\n");
        }
    }
    mxc__buf_puts(&b, "}\n");
    MXC_TRY(mxc__symbol_take_text(sym, &b, dot));
fail:
    mxc__free(b.data);
    mxc__free(s);
    mxc__graph_free(g);
    return mxc__in_call(__func__, rc);
}

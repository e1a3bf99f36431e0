/*
 * symbol/json.c — symbols to and from MXNet's JSON (FORMATS.md "Symbol JSON"), read with
 * common/json.h's strict parser. Loading accepts every spelling MXNet 0.8 … 1.9 wrote: per-node
 * "attrs", "attr" or "param", two- or three-element inputs, missing node_row_ptr / attrs,
 * an ignored backward_source_id, and upgrades 0.8-era files (no mxnet_version) by adding
 * the auxiliary-state variables they lack. Saving writes what MXNet 1.9.1 writes.
 */
#include "symbol/symbol_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int jexpect(const struct mxc__json *v, int type, const char *what) {
    if (v->type == type)
        return MXC_OK;
    return mxc__error(MXC_EFORMAT, "symbol JSON, line %d, column %d: %s must be %s, not %s",
                      v->line, v->col, what, mxc__json_type_name(type),
                      mxc__json_type_name(v->type));
}

static int jint(const struct mxc__json *v, const char *what, int *out) {
    int rc = jexpect(v, MXC__JSON_NUM, what);
    if (rc != MXC_OK)
        return rc;
    if (v->num != floor(v->num) || v->num < -2147483647.0 || v->num > 2147483647.0)
        return mxc__error(MXC_EFORMAT,
                          "symbol JSON, line %d, column %d: %s must be an "
                          "integer, not %g",
                          v->line, v->col, what, v->num);
    *out = (int)v->num;
    return MXC_OK;
}

/* ---- Loading ----------------------------------------------------------------------- */

/* [node_id, index(, version)] referring to one of the first `limit` nodes. */
static int parse_entry(const struct mxc__json *v, struct mxc__sym_node **nodes, int limit,
                       const char *what, struct mxc__sym_entry *out) {
    int rc = jexpect(v, MXC__JSON_ARR, what);
    if (rc != MXC_OK)
        return rc;
    if (v->n != 2 && v->n != 3)
        return mxc__error(MXC_EFORMAT,
                          "symbol JSON, line %d, column %d: %s must be "
                          "[node_id, output_index(, version)], not %d numbers",
                          v->line, v->col, what, v->n);
    int id = -1, index = -1, version = 0;
    if ((rc = jint(&v->items[0], what, &id)) != MXC_OK ||
        (rc = jint(&v->items[1], what, &index)) != MXC_OK ||
        (v->n == 3 && (rc = jint(&v->items[2], what, &version)) != MXC_OK))
        return rc;
    if (id < 0 || id >= limit)
        return mxc__error(MXC_EFORMAT,
                          "symbol JSON, line %d, column %d: %s refers to node "
                          "%d, which is not an earlier node (dangling id, forward reference "
                          "or cycle; %d nodes precede it)",
                          v->line, v->col, what, id, limit);
    if (index < 0 || index >= nodes[id]->num_outputs)
        return mxc__error(MXC_EFORMAT,
                          "symbol JSON, line %d, column %d: %s refers to output "
                          "%d of node '%s', which has %d",
                          v->line, v->col, what, index, nodes[id]->name, nodes[id]->num_outputs);
    *out = (struct mxc__sym_entry){nodes[id], index, version};
    return MXC_OK;
}

/* Attributes from the old "param" and "attr" and the new "attrs" keys, in that order. */
static int node_attrs(const struct mxc__json *jn, struct mxc__sym_node *n) {
    static const char *const keys[] = {"param", "attr", "attrs"};
    for (int k = 0; k < 3; k++) {
        const struct mxc__json *a = mxc__json_get(jn, keys[k]);
        if (a == NULL)
            continue;
        char what[300];
        snprintf(what, sizeof what, "node '%s': \"%s\"", n->name, keys[k]);
        int rc = jexpect(a, MXC__JSON_OBJ, what);
        if (rc != MXC_OK)
            return rc;
        for (int i = 0; i < a->n; i++) {
            snprintf(what, sizeof what, "node '%s': attribute '%s'", n->name, a->keys[i]);
            if ((rc = jexpect(&a->items[i], MXC__JSON_STR, what)) != MXC_OK)
                return rc;
            if ((rc = mxc__attrs_set(&n->attrs, a->keys[i], a->items[i].str)) != MXC_OK)
                return rc;
        }
    }
    return MXC_OK;
}

static int load_node(const struct mxc__json *jn, int i, struct mxc__sym_node **nodes, bool legacy) {
    char what[300];
    snprintf(what, sizeof what, "node %d", i);
    int rc = jexpect(jn, MXC__JSON_OBJ, what);
    if (rc != MXC_OK)
        return rc;
    const struct mxc__json *op = mxc__json_get(jn, "op"), *name = mxc__json_get(jn, "name"),
                           *inputs = mxc__json_get(jn, "inputs");
    if (op == NULL || name == NULL)
        return mxc__error(MXC_EFORMAT, "symbol JSON, line %d, column %d: node %d lacks \"%s\"",
                          jn->line, jn->col, i, op == NULL ? "op" : "name");
    snprintf(what, sizeof what, "node %d: \"op\"", i);
    if ((rc = jexpect(op, MXC__JSON_STR, what)) != MXC_OK)
        return rc;
    snprintf(what, sizeof what, "node %d: \"name\"", i);
    if ((rc = jexpect(name, MXC__JSON_STR, what)) != MXC_OK)
        return rc;
    if (inputs) {
        snprintf(what, sizeof what, "node '%s': \"inputs\"", name->str);
        if ((rc = jexpect(inputs, MXC__JSON_ARR, what)) != MXC_OK)
            return rc;
    }
    const struct mxc__op_def *def = NULL;
    if (strcmp(op->str, "null") != 0) {
        rc = mxc__op_lookup(op->str, &def);
        if (rc != MXC_OK) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s", mxc_last_error());
            return mxc__error(rc, "symbol JSON: node '%s': %s", name->str, msg);
        }
    }
    struct mxc__sym_node *n;
    if ((rc = mxc__sym_node_new(name->str, def, &n)) != MXC_OK)
        return rc;
    nodes[i] = n;
    if ((rc = node_attrs(jn, n)) != MXC_OK)
        return rc;
    int given = inputs ? inputs->n : 0;
    if (def == NULL) {
        if (given != 0)
            return mxc__error(MXC_EFORMAT,
                              "symbol JSON, line %d, column %d: variable '%s' "
                              "has inputs",
                              jn->line, jn->col, n->name);
        return MXC_OK;
    }
    if ((rc = mxc__sym_node_parse(n)) != MXC_OK)
        return rc;
    int n_aux = mxc__op_num_aux(def), total = n->num_args + n_aux;
    bool upgrade = legacy && n_aux > 0 && given == n->num_args;
    if (given != total && !upgrade)
        return mxc__error(MXC_EFORMAT,
                          "symbol JSON, line %d, column %d: node '%s' (%s) has "
                          "%d inputs but %d are expected (%d arguments, %d auxiliary states)",
                          jn->line, jn->col, n->name, def->name, given, total, n->num_args, n_aux);
    n->inputs = mxc__calloc((size_t)total + 1, sizeof *n->inputs);
    if (n->inputs == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory loading node '%s'", n->name);
    for (int k = 0; k < given; k++) {
        snprintf(what, sizeof what, "node '%s': input %d", n->name, k);
        if ((rc = parse_entry(&inputs->items[k], nodes, i, what, &n->inputs[k])) != MXC_OK)
            return rc;
        mxc__sym_node_retain(n->inputs[k].node);
        n->num_inputs = k + 1;
    }
    for (int k = given; k < total; k++) { /* 0.8-era: add the auxiliary states */
        char vname[512];
        snprintf(vname, sizeof vname, "%s_%s", n->name, def->aux[k - n->num_args]);
        struct mxc__sym_node *v;
        if ((rc = mxc__sym_node_new(vname, NULL, &v)) != MXC_OK)
            return rc;
        n->inputs[k] = (struct mxc__sym_entry){v, 0, 1};
        n->num_inputs = k + 1;
    }
    return MXC_OK;
}

int mxc_symbol_load_json(const char *json, mxc_symbol **out) {
    int rc = MXC_OK;
    struct mxc__json root = {0};
    struct mxc__sym_node **nodes = NULL;
    struct mxc__sym_entry *heads = NULL;
    int num_nodes = 0;
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_load_json: out is NULL");
    *out = NULL;
    MXC_CHECK(json != NULL, MXC_EINVAL, "mxc_symbol_load_json: json is NULL");
    MXC_TRY(mxc__json_parse(json, "symbol JSON", &root));
    MXC_TRY(jexpect(&root, MXC__JSON_OBJ, "the top level"));
    const struct mxc__json *jnodes = mxc__json_get(&root, "nodes"),
                           *jheads = mxc__json_get(&root, "heads");
    MXC_CHECK(jnodes && jheads, MXC_EFORMAT, "symbol JSON: the top-level object lacks \"%s\"",
              jnodes ? "heads" : "nodes");
    MXC_TRY(jexpect(jnodes, MXC__JSON_ARR, "\"nodes\""));
    MXC_TRY(jexpect(jheads, MXC__JSON_ARR, "\"heads\""));
    const struct mxc__json *v;
    if ((v = mxc__json_get(&root, "arg_nodes")) != NULL) {
        MXC_TRY(jexpect(v, MXC__JSON_ARR, "\"arg_nodes\""));
        for (int i = 0; i < v->n; i++) {
            int id = -1;
            MXC_TRY(jint(&v->items[i], "an arg_nodes entry", &id));
            MXC_CHECK(id >= 0 && id < jnodes->n, MXC_EFORMAT,
                      "symbol JSON: arg_nodes names "
                      "node %d of %d",
                      id, jnodes->n);
        }
    }
    if ((v = mxc__json_get(&root, "node_row_ptr")) != NULL)
        MXC_TRY(jexpect(v, MXC__JSON_ARR, "\"node_row_ptr\""));
    bool legacy = true;
    if ((v = mxc__json_get(&root, "attrs")) != NULL) {
        MXC_TRY(jexpect(v, MXC__JSON_OBJ, "the top-level \"attrs\""));
        const struct mxc__json *ver = mxc__json_get(v, "mxnet_version");
        if (ver) {
            int num;
            MXC_TRY(jexpect(ver, MXC__JSON_ARR, "mxnet_version"));
            MXC_CHECK(ver->n == 2, MXC_EFORMAT,
                      "symbol JSON: mxnet_version must be "
                      "[\"int\", version]");
            MXC_TRY(jint(&ver->items[1], "mxnet_version", &num));
            legacy = false;
        }
    }
    MXC_CHECK(jnodes->n > 0, MXC_EFORMAT, "symbol JSON: \"nodes\" is empty");
    MXC_CHECK(jheads->n > 0, MXC_EFORMAT, "symbol JSON: \"heads\" is empty");
    nodes = mxc__calloc((size_t)jnodes->n, sizeof *nodes);
    heads = mxc__calloc((size_t)jheads->n, sizeof *heads);
    MXC_CHECK(nodes && heads, MXC_ENOMEM, "out of memory loading a symbol");
    num_nodes = jnodes->n;
    for (int i = 0; i < jnodes->n; i++)
        MXC_TRY(load_node(&jnodes->items[i], i, nodes, legacy));
    for (int h = 0; h < jheads->n; h++)
        MXC_TRY(parse_entry(&jheads->items[h], nodes, num_nodes, "a heads entry", &heads[h]));
    MXC_TRY(mxc__symbol_new(jheads->n, heads, out));
fail:
    for (int i = 0; nodes && i < num_nodes; i++)
        mxc__sym_node_release(nodes[i]);
    mxc__free(nodes);
    mxc__free(heads);
    mxc__json_free(&root);
    return rc;
}

int mxc_symbol_load(const char *path, mxc_symbol **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_load: out is NULL");
    *out = NULL;
    if (path == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_load: path is NULL");
    char *data = NULL;
    size_t len = 0;
    int rc = mxc__file_read("mxc_symbol_load", path, &data, &len);
    if (rc == MXC_OK) {
        if (memchr(data, '\0', len) != NULL)
            rc = mxc__error(MXC_EFORMAT, "symbol JSON '%s': contains a NUL byte", path);
        else if (len == 0)
            rc = mxc__error(MXC_EFORMAT, "mxc_symbol_load: '%s' is empty", path);
        else if ((rc = mxc_symbol_load_json(data, out)) != MXC_OK) {
            char why[768]; /* the parser's message names no file */
            snprintf(why, sizeof why, "%s", mxc_last_error());
            mxc__error(rc, "mxc_symbol_load: '%s': %s", path, why);
        }
    }
    mxc__free(data);
    return rc;
}

/* ---- Saving ------------------------------------------------------------------------ */

static void write_attrs(struct mxc__buf *b, const struct mxc__attrs *a) {
    if (a->num == 0)
        return;
    mxc__buf_puts(b, "      \"attrs\": {");
    for (int i = 0; i < a->num; i++) {
        mxc__buf_puts(b, i ? ",\n        " : "\n        ");
        mxc__buf_json_str(b, a->keys[i]);
        mxc__buf_puts(b, ": ");
        mxc__buf_json_str(b, a->vals[i]);
    }
    mxc__buf_puts(b, "\n      },\n");
}

int mxc_symbol_save_json(mxc_symbol *sym, const char **json) {
    int rc = MXC_OK;
    struct mxc__graph *g = NULL;
    struct mxc__buf b = {0};
    MXC_TRY(mxc__symbol_check(sym, __func__, "symbol"));
    MXC_CHECK(json != NULL, MXC_EINVAL, "mxc_symbol_save_json: json is NULL");
    *json = NULL;
    MXC_TRY(mxc__graph_build(sym, &g));
    mxc__buf_puts(&b, "{\n  \"nodes\": [");
    for (int i = 0; i < g->num_nodes; i++) {
        const struct mxc__graph_node *n = &g->nodes[i];
        mxc__buf_puts(&b, i ? ",\n    {\n" : "\n    {\n");
        mxc__buf_puts(&b, "      \"op\": ");
        mxc__buf_json_str(&b, n->op ? n->op->name : "null");
        mxc__buf_puts(&b, ",\n      \"name\": ");
        mxc__buf_json_str(&b, n->name);
        mxc__buf_puts(&b, ",\n");
        write_attrs(&b, &n->src->attrs);
        mxc__buf_puts(&b, "      \"inputs\": [");
        for (int k = 0; k < n->num_inputs; k++)
            mxc__buf_printf(&b, "%s[%d, %d, %d]", k ? ", " : "", n->inputs[k].node,
                            n->inputs[k].index, n->src->inputs[k].version);
        mxc__buf_puts(&b, "]\n    }");
    }
    mxc__buf_puts(&b, "\n  ],\n  \"arg_nodes\": [");
    int k = 0;
    for (int i = 0; i < g->num_nodes; i++)
        if (g->nodes[i].op == NULL)
            mxc__buf_printf(&b, "%s%d", k++ ? ", " : "", i);
    mxc__buf_puts(&b, "],\n  \"node_row_ptr\": [");
    for (int i = 0; i <= g->num_nodes; i++)
        mxc__buf_printf(&b, "%s%d", i ? ", " : "", g->entry_ptr[i]);
    mxc__buf_puts(&b, "],\n  \"heads\": [");
    for (int h = 0; h < g->num_heads; h++)
        mxc__buf_printf(&b, "%s[%d, %d, 0]", h ? ", " : "", g->heads[h].node, g->heads[h].index);
    mxc__buf_puts(&b, "],\n  \"attrs\": {\"mxnet_version\": [\"int\", 10901]}\n}\n");
    MXC_TRY(mxc__symbol_take_text(sym, &b, json));
fail:
    mxc__free(b.data);
    mxc__graph_free(g);
    return rc;
}

static int write_text(FILE *f, void *arg) {
    if (fputs((const char *)arg, f) == EOF)
        return mxc__error(MXC_EIO, "writing the symbol failed: %s", strerror(errno));
    return MXC_OK;
}

int mxc__symbol_save_file(mxc_symbol *sym, const char *path, const char *fn) {
    const char *json;
    int rc = mxc_symbol_save_json(sym, &json);
    if (rc != MXC_OK)
        return rc;
    if (path == NULL)
        return mxc__error(MXC_EINVAL, "%s: path is NULL", fn);
    return mxc__file_replace(fn, path, write_text, (void *)json);
}

int mxc_symbol_save(mxc_symbol *sym, const char *path) {
    return mxc__symbol_save_file(sym, path, __func__);
}

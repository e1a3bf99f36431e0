/*
 * symbol/json.c — symbols to and from MXNet's JSON (FORMATS.md "Symbol JSON"), with a
 * small strict JSON parser of its own (RFC 8259; line and column in every error, depth
 * limited, no dependency). Loading accepts every spelling MXNet 0.8 … 1.9 wrote: per-node
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

/* ---- A strict JSON parser ---------------------------------------------------------- */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jval {
    int type;
    int line, col;
    bool b;
    double num;
    char *str;
    int n;              /* items of an array or object */
    struct jval *items; /* array items or object values */
    char **keys;        /* object keys */
};

struct jparser {
    const char *p, *start;
    int line;
    const char *line_start;
    int depth;
};

#define JSON_MAX_DEPTH 64

static void jfree(struct jval *v) {
    if (v == NULL)
        return;
    mxc__free(v->str);
    for (int i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys)
            mxc__free(v->keys[i]);
    }
    mxc__free(v->items);
    mxc__free(v->keys);
    *v = (struct jval){0};
}

static int jerr(struct jparser *ps, const char *what) {
    int col = (int)(ps->p - ps->line_start) + 1;
    if (*ps->p == '\0')
        return mxc__error(MXC_EFORMAT,
                          "symbol JSON, line %d, column %d: %s (the text ends "
                          "there)",
                          ps->line, col, what);
    return mxc__error(MXC_EFORMAT, "symbol JSON, line %d, column %d: %s (found '%c')", ps->line,
                      col, what, *ps->p);
}

static void skip_ws(struct jparser *ps) {
    for (;;) {
        char c = *ps->p;
        if (c == '\n') {
            ps->line++;
            ps->line_start = ps->p + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            return;
        }
        ps->p++;
    }
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static int parse_string(struct jparser *ps, char **out) {
    ps->p++; /* opening quote */
    struct mxc__buf b = {0};
    mxc__buf_puts(&b, "");
    for (;;) {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            break;
        }
        if (c == '\0' || c < 0x20) {
            mxc__free(b.data);
            return jerr(ps, c == '\0' ? "unterminated string"
                                      : "control character in "
                                        "a string");
        }
        if (c != '\\') {
            char s[2] = {(char)c, 0};
            mxc__buf_puts(&b, s);
            ps->p++;
            continue;
        }
        ps->p++;
        char e = *ps->p;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != '\0' && simple) {
            static const char repl[] = "\"\\/\b\f\n\r\t";
            char s[2] = {repl[simple - "\"\\/bfnrt"], 0};
            mxc__buf_puts(&b, s);
            ps->p++;
            continue;
        }
        unsigned cp, lo;
        if (e != 'u' || hex4(ps->p + 1, &cp) != 0) {
            mxc__free(b.data);
            return jerr(ps, "bad escape in a string");
        }
        ps->p += 5;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (ps->p[0] != '\\' || ps->p[1] != 'u' || hex4(ps->p + 2, &lo) != 0 || lo < 0xDC00 ||
                lo > 0xDFFF) {
                mxc__free(b.data);
                return jerr(ps, "unpaired UTF-16 surrogate in a string");
            }
            ps->p += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            mxc__free(b.data);
            return jerr(ps, "unpaired UTF-16 surrogate in a string");
        }
        if (cp == 0) {
            mxc__free(b.data);
            return jerr(ps, "\\u0000 in a string is not supported");
        }
        char u[5] = {0};
        if (cp < 0x80) {
            u[0] = (char)cp;
        } else if (cp < 0x800) {
            u[0] = (char)(0xC0 | (cp >> 6));
            u[1] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            u[0] = (char)(0xE0 | (cp >> 12));
            u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
            u[2] = (char)(0x80 | (cp & 0x3F));
        } else {
            u[0] = (char)(0xF0 | (cp >> 18));
            u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
            u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
            u[3] = (char)(0x80 | (cp & 0x3F));
        }
        mxc__buf_puts(&b, u);
    }
    if (b.failed) {
        mxc__free(b.data);
        return mxc__error(MXC_ENOMEM, "out of memory parsing JSON");
    }
    *out = b.data;
    return MXC_OK;
}

static int parse_number(struct jparser *ps, double *out) {
    const char *s = ps->p;
    if (*s == '-')
        s++;
    if (*s == '0') {
        s++;
    } else if (*s >= '1' && *s <= '9') {
        while (*s >= '0' && *s <= '9')
            s++;
    } else {
        return jerr(ps, "expected a value");
    }
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9'))
            return jerr(ps, "bad number");
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!(*s >= '0' && *s <= '9'))
            return jerr(ps, "bad number");
        while (*s >= '0' && *s <= '9')
            s++;
    }
    *out = strtod(ps->p, NULL);
    ps->p = s;
    return MXC_OK;
}

static int parse_value(struct jparser *ps, struct jval *v);

/* Appends a slot to an array or object value. */
static int grow(struct jval *v, int *cap, bool with_keys) {
    if (v->n < *cap)
        return MXC_OK;
    int c = *cap ? 2 * *cap : 4;
    struct jval *items = mxc__realloc(v->items, sizeof *items * (size_t)c);
    if (items == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory parsing JSON");
    v->items = items;
    if (with_keys) {
        char **keys = mxc__realloc(v->keys, sizeof *keys * (size_t)c);
        if (keys == NULL)
            return mxc__error(MXC_ENOMEM, "out of memory parsing JSON");
        v->keys = keys;
    }
    *cap = c;
    return MXC_OK;
}

static int parse_container(struct jparser *ps, struct jval *v, bool obj) {
    char close = obj ? '}' : ']';
    int cap = 0, rc;
    v->type = obj ? J_OBJ : J_ARR;
    if (++ps->depth > JSON_MAX_DEPTH)
        return jerr(ps, "nested too deeply");
    ps->p++;
    skip_ws(ps);
    if (*ps->p == close) {
        ps->p++;
        ps->depth--;
        return MXC_OK;
    }
    for (;;) {
        skip_ws(ps);
        if ((rc = grow(v, &cap, obj)) != MXC_OK)
            return rc;
        char *key = NULL;
        if (obj) {
            if (*ps->p != '"')
                return jerr(ps, "expected a string key");
            if ((rc = parse_string(ps, &key)) != MXC_OK)
                return rc;
            skip_ws(ps);
            if (*ps->p != ':') {
                mxc__free(key);
                return jerr(ps, "expected ':'");
            }
            ps->p++;
            skip_ws(ps);
            v->keys[v->n] = key;
        }
        v->items[v->n] = (struct jval){0};
        v->n++;
        if ((rc = parse_value(ps, &v->items[v->n - 1])) != MXC_OK)
            return rc;
        skip_ws(ps);
        if (*ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            if (*ps->p == close)
                return jerr(ps, "trailing comma");
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            ps->depth--;
            return MXC_OK;
        }
        return jerr(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse_value(struct jparser *ps, struct jval *v) {
    skip_ws(ps);
    v->line = ps->line;
    v->col = (int)(ps->p - ps->line_start) + 1;
    switch (*ps->p) {
    case '{': return parse_container(ps, v, true);
    case '[': return parse_container(ps, v, false);
    case '"': v->type = J_STR; return parse_string(ps, &v->str);
    case 't':
    case 'f':
    case 'n': {
        const char *word = *ps->p == 't' ? "true" : *ps->p == 'f' ? "false" : "null";
        size_t len = strlen(word);
        if (strncmp(ps->p, word, len) != 0)
            return jerr(ps, "expected a value");
        v->type = *ps->p == 'n' ? J_NULL : J_BOOL;
        v->b = *ps->p == 't';
        ps->p += len;
        return MXC_OK;
    }
    default: v->type = J_NUM; return parse_number(ps, &v->num);
    }
}

static int json_parse(const char *text, struct jval *out) {
    struct jparser ps = {text, text, 1, text, 0};
    *out = (struct jval){0};
    int rc = parse_value(&ps, out);
    if (rc == MXC_OK) {
        skip_ws(&ps);
        if (*ps.p != '\0')
            rc = jerr(&ps, "unexpected text after the JSON value");
    }
    if (rc != MXC_OK)
        jfree(out);
    return rc;
}

static const struct jval *jget(const struct jval *obj, const char *key) {
    for (int i = 0; obj->type == J_OBJ && i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}

static const char *jtype_name(int t) {
    static const char *const names[] = {"null",     "a boolean", "a number",
                                        "a string", "an array",  "an object"};
    return names[t];
}

static int jexpect(const struct jval *v, int type, const char *what) {
    if (v->type == type)
        return MXC_OK;
    return mxc__error(MXC_EFORMAT, "symbol JSON, line %d, column %d: %s must be %s, not %s",
                      v->line, v->col, what, jtype_name(type), jtype_name(v->type));
}

static int jint(const struct jval *v, const char *what, int *out) {
    int rc = jexpect(v, J_NUM, what);
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
static int parse_entry(const struct jval *v, struct mxc__sym_node **nodes, int limit,
                       const char *what, struct mxc__sym_entry *out) {
    int rc = jexpect(v, J_ARR, what);
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
static int node_attrs(const struct jval *jn, struct mxc__sym_node *n) {
    static const char *const keys[] = {"param", "attr", "attrs"};
    for (int k = 0; k < 3; k++) {
        const struct jval *a = jget(jn, keys[k]);
        if (a == NULL)
            continue;
        char what[300];
        snprintf(what, sizeof what, "node '%s': \"%s\"", n->name, keys[k]);
        int rc = jexpect(a, J_OBJ, what);
        if (rc != MXC_OK)
            return rc;
        for (int i = 0; i < a->n; i++) {
            snprintf(what, sizeof what, "node '%s': attribute '%s'", n->name, a->keys[i]);
            if ((rc = jexpect(&a->items[i], J_STR, what)) != MXC_OK)
                return rc;
            if ((rc = mxc__attrs_set(&n->attrs, a->keys[i], a->items[i].str)) != MXC_OK)
                return rc;
        }
    }
    return MXC_OK;
}

static int load_node(const struct jval *jn, int i, struct mxc__sym_node **nodes, bool legacy) {
    char what[300];
    snprintf(what, sizeof what, "node %d", i);
    int rc = jexpect(jn, J_OBJ, what);
    if (rc != MXC_OK)
        return rc;
    const struct jval *op = jget(jn, "op"), *name = jget(jn, "name"), *inputs = jget(jn, "inputs");
    if (op == NULL || name == NULL)
        return mxc__error(MXC_EFORMAT, "symbol JSON, line %d, column %d: node %d lacks \"%s\"",
                          jn->line, jn->col, i, op == NULL ? "op" : "name");
    snprintf(what, sizeof what, "node %d: \"op\"", i);
    if ((rc = jexpect(op, J_STR, what)) != MXC_OK)
        return rc;
    snprintf(what, sizeof what, "node %d: \"name\"", i);
    if ((rc = jexpect(name, J_STR, what)) != MXC_OK)
        return rc;
    if (inputs) {
        snprintf(what, sizeof what, "node '%s': \"inputs\"", name->str);
        if ((rc = jexpect(inputs, J_ARR, what)) != MXC_OK)
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
    struct jval root = {0};
    struct mxc__sym_node **nodes = NULL;
    struct mxc__sym_entry *heads = NULL;
    int num_nodes = 0;
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_load_json: out is NULL");
    *out = NULL;
    MXC_CHECK(json != NULL, MXC_EINVAL, "mxc_symbol_load_json: json is NULL");
    MXC_TRY(json_parse(json, &root));
    MXC_TRY(jexpect(&root, J_OBJ, "the top level"));
    const struct jval *jnodes = jget(&root, "nodes"), *jheads = jget(&root, "heads");
    MXC_CHECK(jnodes && jheads, MXC_EFORMAT, "symbol JSON: the top-level object lacks \"%s\"",
              jnodes ? "heads" : "nodes");
    MXC_TRY(jexpect(jnodes, J_ARR, "\"nodes\""));
    MXC_TRY(jexpect(jheads, J_ARR, "\"heads\""));
    const struct jval *v;
    if ((v = jget(&root, "arg_nodes")) != NULL) {
        MXC_TRY(jexpect(v, J_ARR, "\"arg_nodes\""));
        for (int i = 0; i < v->n; i++) {
            int id = -1;
            MXC_TRY(jint(&v->items[i], "an arg_nodes entry", &id));
            MXC_CHECK(id >= 0 && id < jnodes->n, MXC_EFORMAT,
                      "symbol JSON: arg_nodes names "
                      "node %d of %d",
                      id, jnodes->n);
        }
    }
    if ((v = jget(&root, "node_row_ptr")) != NULL)
        MXC_TRY(jexpect(v, J_ARR, "\"node_row_ptr\""));
    bool legacy = true;
    if ((v = jget(&root, "attrs")) != NULL) {
        MXC_TRY(jexpect(v, J_OBJ, "the top-level \"attrs\""));
        const struct jval *ver = jget(v, "mxnet_version");
        if (ver) {
            int num;
            MXC_TRY(jexpect(ver, J_ARR, "mxnet_version"));
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
    jfree(&root);
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

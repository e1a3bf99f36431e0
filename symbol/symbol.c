/*
 * symbol/symbol.c — symbol nodes and handles: variables, operator application with
 * MXNet's automatic names and auto-created parameter variables, composition, grouping,
 * internals, copies, listing in MXNet's depth-first order, node attributes, and the
 * indexed graph (symbol_impl.h) that inference, JSON, DOT and the executor use.
 */
#include "symbol/symbol_impl.h"

#include "common/handle.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Attribute dictionaries -------------------------------------------------------- */

int mxc__attrs_set(struct mxc__attrs *a, const char *key, const char *val) {
    char *v = mxc__strdup(val);
    if (v == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory setting attribute '%s'", key);
    for (int i = 0; i < a->num; i++) {
        if (strcmp(a->keys[i], key) == 0) {
            mxc__free(a->vals[i]);
            a->vals[i] = v;
            return MXC_OK;
        }
    }
    if (a->num == a->cap) {
        int cap = a->cap ? 2 * a->cap : 4;
        char **k = mxc__realloc(a->keys, sizeof *k * (size_t)cap);
        if (k == NULL)
            goto oom;
        a->keys = k;
        char **vv = mxc__realloc(a->vals, sizeof *vv * (size_t)cap);
        if (vv == NULL)
            goto oom;
        a->vals = vv;
        a->cap = cap;
    }
    a->keys[a->num] = mxc__strdup(key);
    if (a->keys[a->num] == NULL)
        goto oom;
    a->vals[a->num++] = v;
    return MXC_OK;
oom:
    mxc__free(v);
    return mxc__error(MXC_ENOMEM, "out of memory setting attribute '%s'", key);
}

const char *mxc__attrs_get(const struct mxc__attrs *a, const char *key) {
    for (int i = 0; i < a->num; i++)
        if (strcmp(a->keys[i], key) == 0)
            return a->vals[i];
    return NULL;
}

void mxc__attrs_clear(struct mxc__attrs *a) {
    for (int i = 0; i < a->num; i++) {
        mxc__free(a->keys[i]);
        mxc__free(a->vals[i]);
    }
    mxc__free(a->keys);
    mxc__free(a->vals);
    *a = (struct mxc__attrs){0};
}

static int attrs_copy(struct mxc__attrs *dst, const struct mxc__attrs *src) {
    for (int i = 0; i < src->num; i++) {
        int rc = mxc__attrs_set(dst, src->keys[i], src->vals[i]);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

/* ---- Nodes ------------------------------------------------------------------------- */

int mxc__sym_node_new(const char *name, const struct mxc__op_def *op, struct mxc__sym_node **out) {
    *out = NULL;
    struct mxc__sym_node *n = mxc__calloc(1, sizeof *n);
    if (n == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory creating node '%s'", name);
    n->name = mxc__strdup(name);
    if (n->name == NULL) {
        mxc__free(n);
        return mxc__error(MXC_ENOMEM, "out of memory creating node '%s'", name);
    }
    atomic_init(&n->refs, 1);
    n->op = op;
    n->num_outputs = n->num_visible = 1;
    *out = n;
    return MXC_OK;
}

void mxc__sym_node_retain(struct mxc__sym_node *n) {
    atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
}

/* Iterative (an explicit stack), so that releasing a long chain of nodes cannot overflow
 * the C stack. */
void mxc__sym_node_release(struct mxc__sym_node *n) {
    if (n == NULL || atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1)
        return;
    size_t cap = 16, top = 0;
    struct mxc__sym_node *local[16];
    struct mxc__sym_node **stack = local;
    stack[top++] = n;
    while (top > 0) {
        struct mxc__sym_node *d = stack[--top];
        for (int i = 0; i < d->num_inputs; i++) {
            struct mxc__sym_node *in = d->inputs[i].node;
            if (in == NULL || atomic_fetch_sub_explicit(&in->refs, 1, memory_order_acq_rel) != 1)
                continue;
            if (top == cap) {
                struct mxc__sym_node **bigger = mxc__malloc(sizeof *bigger * cap * 2);
                if (bigger == NULL) {
                    /* cannot grow: leak rather than crash (only under memory failure) */
                    continue;
                }
                memcpy(bigger, stack, sizeof *bigger * cap);
                if (stack != local)
                    mxc__free(stack);
                stack = bigger;
                cap *= 2;
            }
            stack[top++] = in;
        }
        mxc__free(d->inputs);
        mxc__aligned_free(d->params);
        mxc__attrs_clear(&d->attrs);
        mxc__free(d->name);
        mxc__free(d);
    }
    if (stack != local)
        mxc__free(stack);
}

int mxc__sym_node_parse(struct mxc__sym_node *n) {
    const struct mxc__op_def *op = n->op;
    void *params = NULL;
    if (op->param_size) {
        size_t size = (op->param_size + 15) / 16 * 16;
        params = mxc__aligned_alloc(16, size);
        if (params == NULL)
            return mxc__error(MXC_ENOMEM, "out of memory parsing node '%s'", n->name);
    }
    int rc = mxc__op_parse_params(op, n->attrs.num, (const char *const *)n->attrs.keys,
                                  (const char *const *)n->attrs.vals, params);
    if (rc != MXC_OK) {
        mxc__aligned_free(params);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mxc_last_error());
        return mxc__error(rc, "node '%s': %s", n->name, msg);
    }
    mxc__aligned_free(n->params);
    n->params = params;
    n->num_args = mxc__op_num_inputs(op, params, NULL);
    n->num_outputs = mxc__op_num_outputs(op, params, NULL);
    n->num_visible = mxc__op_num_visible_outputs(op, params);
    if (n->num_args > MXC__MAX_OP_ARGS || n->num_outputs > MXC__MAX_OP_ARGS)
        return mxc__error(MXC_EINVAL, "node '%s': %s has too many arguments or outputs", n->name,
                          op->name);
    return MXC_OK;
}

char *mxc__sym_entry_name(const struct mxc__sym_entry *e) {
    const struct mxc__sym_node *n = e->node;
    if (n->op == NULL)
        return mxc__strdup(n->name);
    const char *names[MXC__MAX_OP_ARGS];
    int k = mxc__op_num_outputs(n->op, n->params, names);
    char idx[32];
    const char *out = "output";
    if (e->index < k && names[e->index]) {
        out = names[e->index];
    } else if (n->num_outputs != 1) {
        snprintf(idx, sizeof idx, "output%d", e->index);
        out = idx;
    }
    size_t len = strlen(n->name) + strlen(out) + 2;
    char *s = mxc__malloc(len);
    if (s)
        snprintf(s, len, "%s%s%s", n->name, n->name[0] ? "_" : "", out);
    return s;
}

/* ---- Handles ----------------------------------------------------------------------- */

static mxc__handle_kind symbol_kind =
    MXC__HANDLE_KIND(struct mxc_symbol, "a symbol", MXC__SYMBOL_MAGIC, MXC__SYMBOL_DEAD);

int mxc__symbol_check(const mxc_symbol *sym, const char *fn, const char *what) {
    return mxc__handle_check(&symbol_kind, sym, fn, what);
}

int mxc__symbol_new(int n, const struct mxc__sym_entry *entries, mxc_symbol **out) {
    *out = NULL;
    mxc_symbol *s = mxc__handle_alloc(&symbol_kind);
    if (s == NULL)
        return mxc__error(MXC_ENOMEM, "out of memory creating a symbol");
    s->outputs = mxc__malloc(sizeof *s->outputs * (size_t)(n > 0 ? n : 1));
    if (s->outputs == NULL) {
        mxc__handle_free(&symbol_kind, s);
        return mxc__error(MXC_ENOMEM, "out of memory creating a symbol");
    }
    for (int i = 0; i < n; i++) {
        s->outputs[i] = entries[i];
        mxc__sym_node_retain(entries[i].node);
    }
    s->num_outputs = n;
    mxc__handle_publish(&symbol_kind, s);
    *out = s;
    return MXC_OK;
}

static void str_list_clear(struct mxc__str_list *l) {
    for (int i = 0; l->items && i < l->num; i++)
        mxc__free(l->items[i]);
    mxc__free(l->items);
    mxc__free(l->view);
    *l = (struct mxc__str_list){0};
}

/* Resets `l` to `n` entries (items NULL, view NULL). */
static int str_list_reset(struct mxc__str_list *l, int n) {
    str_list_clear(l);
    l->items = mxc__calloc((size_t)n + 1, sizeof *l->items);
    l->view = mxc__calloc((size_t)n + 1, sizeof *l->view);
    if (l->items == NULL || l->view == NULL) {
        str_list_clear(l);
        return mxc__error(MXC_ENOMEM, "out of memory listing a symbol");
    }
    l->num = n;
    return MXC_OK;
}

void mxc_symbol_free(mxc_symbol *sym) {
    if (!mxc__handle_check_free(&symbol_kind, sym, __func__, "symbol"))
        return;
    for (int i = 0; i < sym->num_outputs; i++)
        mxc__sym_node_release(sym->outputs[i].node);
    mxc__free(sym->outputs);
    str_list_clear(&sym->args);
    str_list_clear(&sym->outs);
    str_list_clear(&sym->aux);
    str_list_clear(&sym->attrs);
    str_list_clear(&sym->unknown);
    mxc__free(sym->text);
    mxc__handle_free(&symbol_kind, sym);
}

/* Returns MXC_EMISUSE from public function `fn` unless `s` is a live symbol. */
#define CHECK_SYM_IN(s, fn)                                     \
    do {                                                        \
        int check_rc_ = mxc__symbol_check((s), (fn), "symbol"); \
        if (check_rc_ != MXC_OK)                                \
            return check_rc_;                                   \
    } while (0)
#define CHECK_SYM(s) CHECK_SYM_IN(s, __func__)

int mxc__symbol_take_text(mxc_symbol *sym, struct mxc__buf *b, const char **out) {
    if (b->failed || b->data == NULL) {
        mxc__free(b->data);
        *b = (struct mxc__buf){0};
        return mxc__error(MXC_ENOMEM, "out of memory writing symbol text");
    }
    mxc__free(sym->text);
    sym->text = b->data;
    *b = (struct mxc__buf){0};
    *out = sym->text;
    return MXC_OK;
}

/* ---- Depth-first post-order -------------------------------------------------------- */

/* A pointer -> int map (open addressing), to number nodes without touching them. */
struct ptrmap {
    const void **keys;
    int *vals;
    size_t cap, num;
};

static size_t ptr_hash(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static int *ptrmap_find(const struct ptrmap *m, const void *key) {
    if (m->cap == 0)
        return NULL;
    for (size_t i = ptr_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == NULL)
            return NULL;
        if (m->keys[i] == key)
            return &m->vals[i];
    }
}

static bool ptrmap_put(struct ptrmap *m, const void *key, int val) {
    if ((m->num + 1) * 2 > m->cap) {
        struct ptrmap bigger = {0};
        bigger.cap = m->cap ? m->cap * 2 : 64;
        bigger.keys = mxc__calloc(bigger.cap, sizeof *bigger.keys);
        bigger.vals = mxc__calloc(bigger.cap, sizeof *bigger.vals);
        if (bigger.keys == NULL || bigger.vals == NULL) {
            mxc__free(bigger.keys);
            mxc__free(bigger.vals);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i])
                ptrmap_put(&bigger, m->keys[i], m->vals[i]);
        mxc__free(m->keys);
        mxc__free(m->vals);
        *m = bigger;
    }
    size_t i = ptr_hash(key, m->cap);
    while (m->keys[i] != NULL && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (m->keys[i] == NULL)
        m->num++;
    m->keys[i] = key;
    m->vals[i] = val;
    return true;
}

static void ptrmap_free(struct ptrmap *m) {
    mxc__free(m->keys);
    mxc__free(m->vals);
    *m = (struct ptrmap){0};
}

/* The nodes reachable from `outputs`, in NNVM's post-order DFS (inputs in order, each
 * node once), into a new array `*order` (caller frees) and `map` (node -> position). */
static int topo_order(int num_heads, const struct mxc__sym_entry *heads,
                      struct mxc__sym_node ***order_out, int *num_out, struct ptrmap *map) {
    int rc = MXC_OK;
    struct frame {
        struct mxc__sym_node *node;
        int next;
    } *stack = NULL;
    struct mxc__sym_node **order = NULL;
    size_t stack_cap = 0, top = 0, order_cap = 0, n = 0;
    struct ptrmap seen = {0};
    *order_out = NULL;
    *num_out = 0;
    for (int h = 0; h < num_heads; h++) {
        struct mxc__sym_node *root = heads[h].node;
        if (ptrmap_find(&seen, root))
            continue;
        MXC_CHECK(ptrmap_put(&seen, root, 0), MXC_ENOMEM, "out of memory walking a graph");
        top = 0;
        if (stack_cap == 0) {
            stack_cap = 64;
            stack = mxc__malloc(sizeof *stack * stack_cap);
            MXC_CHECK(stack != NULL, MXC_ENOMEM, "out of memory walking a graph");
        }
        stack[top++] = (struct frame){root, 0};
        while (top > 0) {
            struct frame *f = &stack[top - 1];
            if (f->next == f->node->num_inputs) {
                if (n == order_cap) {
                    order_cap = order_cap ? 2 * order_cap : 64;
                    struct mxc__sym_node **o = mxc__realloc(order, sizeof *o * order_cap);
                    MXC_CHECK(o != NULL, MXC_ENOMEM, "out of memory walking a graph");
                    order = o;
                }
                MXC_CHECK(ptrmap_put(map, f->node, (int)n), MXC_ENOMEM,
                          "out of memory walking a graph");
                order[n++] = f->node;
                top--;
                continue;
            }
            struct mxc__sym_node *in = f->node->inputs[f->next++].node;
            if (ptrmap_find(&seen, in))
                continue;
            MXC_CHECK(ptrmap_put(&seen, in, 0), MXC_ENOMEM, "out of memory walking a graph");
            if (top == stack_cap) {
                stack_cap *= 2;
                struct frame *s = mxc__realloc(stack, sizeof *s * stack_cap);
                MXC_CHECK(s != NULL, MXC_ENOMEM, "out of memory walking a graph");
                stack = s;
            }
            stack[top++] = (struct frame){in, 0};
        }
    }
    *order_out = order;
    *num_out = (int)n;
    order = NULL;
fail:
    mxc__free(order);
    mxc__free(stack);
    ptrmap_free(&seen);
    return rc;
}

/* ---- Indexed graph ----------------------------------------------------------------- */

void mxc__graph_free(struct mxc__graph *g) {
    if (g == NULL)
        return;
    for (int i = 0; g->nodes && i < g->num_nodes; i++) {
        mxc__free(g->nodes[i].inputs);
        if (g->nodes[i].src)
            mxc__sym_node_release(g->nodes[i].src);
    }
    mxc__free(g->nodes);
    mxc__free(g->entry_ptr);
    mxc__free(g->arg_nodes);
    mxc__free(g->aux_nodes);
    mxc__free(g->heads);
    mxc__free(g);
}

int mxc__graph_build(const mxc_symbol *sym, struct mxc__graph **out) {
    int rc = MXC_OK;
    struct ptrmap map = {0};
    struct mxc__sym_node **order = NULL;
    int n = 0;
    *out = NULL;
    struct mxc__graph *g = mxc__calloc(1, sizeof *g);
    MXC_CHECK(g != NULL, MXC_ENOMEM, "out of memory building a graph");
    MXC_TRY(topo_order(sym->num_outputs, sym->outputs, &order, &n, &map));
    g->nodes = mxc__calloc((size_t)n + 1, sizeof *g->nodes);
    g->entry_ptr = mxc__calloc((size_t)n + 1, sizeof *g->entry_ptr);
    g->arg_nodes = mxc__calloc((size_t)n + 1, sizeof *g->arg_nodes);
    g->aux_nodes = mxc__calloc((size_t)n + 1, sizeof *g->aux_nodes);
    g->heads = mxc__calloc((size_t)sym->num_outputs + 1, sizeof *g->heads);
    MXC_CHECK(g->nodes && g->entry_ptr && g->arg_nodes && g->aux_nodes && g->heads, MXC_ENOMEM,
              "out of memory building a graph");
    for (int i = 0; i < n; i++) {
        struct mxc__sym_node *s = order[i];
        struct mxc__graph_node *gn = &g->nodes[i];
        gn->op = s->op;
        gn->name = s->name;
        gn->params = s->params;
        gn->num_inputs = s->num_inputs;
        gn->num_args = s->op ? s->num_args : 0;
        gn->num_outputs = s->num_outputs;
        gn->num_visible = s->num_visible;
        gn->inputs = mxc__calloc((size_t)s->num_inputs + 1, sizeof *gn->inputs);
        MXC_CHECK(gn->inputs != NULL, MXC_ENOMEM, "out of memory building a graph");
        mxc__sym_node_retain(s);
        gn->src = s;
        g->num_nodes = i + 1;
        for (int k = 0; k < s->num_inputs; k++) {
            /* topo_order mapped every node reachable from the outputs, inputs first: a
             * node's inputs exist before it and never change, so graphs have no cycles */
            int *id = ptrmap_find(&map, s->inputs[k].node);
            MXC_ASSERT(id != NULL && *id < i);
            gn->inputs[k] = (struct mxc__graph_entry){*id, s->inputs[k].index};
            if (k >= gn->num_args && g->nodes[*id].op == NULL)
                g->nodes[*id].is_aux = true;
        }
        g->entry_ptr[i + 1] = g->entry_ptr[i] + s->num_outputs;
    }
    g->num_entries = g->entry_ptr[n];
    for (int i = 0; i < n; i++) {
        if (g->nodes[i].op != NULL)
            continue;
        if (g->nodes[i].is_aux)
            g->aux_nodes[g->num_aux++] = i;
        else
            g->arg_nodes[g->num_args++] = i;
    }
    for (int h = 0; h < sym->num_outputs; h++) {
        int *id = ptrmap_find(&map, sym->outputs[h].node); /* a root of the walk */
        MXC_ASSERT(id != NULL);
        g->heads[h] = (struct mxc__graph_entry){*id, sym->outputs[h].index};
    }
    g->num_heads = sym->num_outputs;
    *out = g;
    g = NULL;
fail:
    mxc__graph_free(g);
    mxc__free(order);
    ptrmap_free(&map);
    return rc;
}

/* ---- Automatic names --------------------------------------------------------------- */

/* MXNet's NameManager: "<hint>N" with one counter per hint, per thread (MXNet keeps its
 * name manager per thread too). Hints are operator names, so a small table suffices. */
static _Thread_local struct {
    const struct mxc__op_def *op;
    int next;
} name_counters[256];

static void auto_name(const struct mxc__op_def *op, char *buf, size_t size) {
    int n = 0;
    for (size_t i = 0; i < MXC_ARRAY_SIZE(name_counters); i++) {
        if (name_counters[i].op == op || name_counters[i].op == NULL) {
            name_counters[i].op = op;
            n = name_counters[i].next++;
            break;
        }
    }
    size_t k = 0;
    for (const char *p = op->name; *p && k + 1 < size; p++)
        buf[k++] = (char)tolower((unsigned char)*p);
    buf[k] = '\0';
    snprintf(buf + k, size - k, "%d", n);
}

/* ---- Building ---------------------------------------------------------------------- */

int mxc_symbol_variable(const char *name, mxc_symbol **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_variable: out is NULL");
    *out = NULL;
    if (name == NULL || name[0] == '\0')
        return mxc__error(MXC_EINVAL, "mxc_symbol_variable: a variable needs a name");
    struct mxc__sym_node *n;
    int rc = mxc__sym_node_new(name, NULL, &n);
    if (rc != MXC_OK)
        return mxc__in_call(__func__, rc);
    struct mxc__sym_entry e = {n, 0, 0};
    rc = mxc__symbol_new(1, &e, out);
    mxc__sym_node_release(n);
    return mxc__in_call(__func__, rc);
}

/* A new variable node "<node>_<arg>" for a missing argument, with the operator's
 * attributes as MXNet copies them (and BatchNorm's __init__ for its moving statistics). */
static int auto_variable(const struct mxc__sym_node *op_node, const char *arg,
                         struct mxc__sym_node **out) {
    char name[512];
    snprintf(name, sizeof name, "%s_%s", op_node->name, arg);
    int rc = mxc__sym_node_new(name, NULL, out);
    if (rc != MXC_OK)
        return rc;
    rc = attrs_copy(&(*out)->attrs, &op_node->attrs);
    if (rc == MXC_OK && strcmp(op_node->op->name, "BatchNorm") == 0) {
        if (strcmp(arg, "moving_mean") == 0)
            rc = mxc__attrs_set(&(*out)->attrs, "__init__", "[\"zero\", {}]");
        else if (strcmp(arg, "moving_var") == 0)
            rc = mxc__attrs_set(&(*out)->attrs, "__init__", "[\"one\", {}]");
    }
    if (rc != MXC_OK) {
        mxc__sym_node_release(*out);
        *out = NULL;
    }
    return rc;
}

int mxc_symbol_create(const char *op_name, int num_params, const char *const *keys,
                      const char *const *vals, const char *name, int num_inputs,
                      const char *const *input_names, mxc_symbol *const *inputs, mxc_symbol **out) {
    int rc = MXC_OK;
    struct mxc__sym_node *n = NULL;
    const struct mxc__op_def *op;
    char auto_buf[256];
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_create: out is NULL");
    *out = NULL;
    MXC_TRY(mxc__op_lookup(op_name, &op));
    MXC_CHECK(num_params >= 0 && (num_params == 0 || (keys && vals)), MXC_EINVAL,
              "mxc_symbol_create: bad parameter arrays for %s", op_name);
    MXC_CHECK(num_inputs >= 0 && (num_inputs == 0 || inputs), MXC_EINVAL,
              "mxc_symbol_create: bad input arrays for %s", op_name);
    for (int i = 0; i < num_inputs; i++) {
        CHECK_SYM(inputs[i]);
        MXC_CHECK(inputs[i]->num_outputs == 1, MXC_EINVAL,
                  "mxc_symbol_create: input %d of %s has %d outputs (one expected)", i, op_name,
                  inputs[i]->num_outputs);
    }
    if (name == NULL || name[0] == '\0') {
        auto_name(op, auto_buf, sizeof auto_buf);
        name = auto_buf;
    }
    MXC_TRY(mxc__sym_node_new(name, op, &n));
    for (int i = 0; i < num_params; i++) {
        MXC_CHECK(keys[i] && vals[i], MXC_EINVAL, "node '%s': parameter %d is NULL", name, i);
        MXC_TRY(mxc__attrs_set(&n->attrs, keys[i], vals[i]));
    }
    MXC_TRY(mxc__sym_node_parse(n));

    const char *arg_names[MXC__MAX_OP_ARGS];
    int n_args = mxc__op_num_inputs(op, n->params, arg_names);
    int n_aux = mxc__op_num_aux(op);
    int total = n_args + n_aux;
    for (int k = 0; k < n_aux; k++)
        arg_names[n_args + k] = op->aux[k];
    MXC_CHECK(total <= MXC__MAX_OP_ARGS, MXC_EINVAL, "%s: too many inputs", op->name);
    MXC_CHECK(num_inputs <= total, MXC_EINVAL,
              "node '%s': %s takes %d inputs (%d arguments, %d auxiliary states), %d given", name,
              op->name, total, n_args, n_aux, num_inputs);
    n->inputs = mxc__calloc((size_t)total + 1, sizeof *n->inputs);
    MXC_CHECK(n->inputs != NULL, MXC_ENOMEM, "out of memory creating node '%s'", name);
    n->num_inputs = total;
    for (int i = 0; i < num_inputs; i++) {
        int slot = i;
        if (input_names) {
            MXC_CHECK(input_names[i] != NULL, MXC_EINVAL, "node '%s': input name %d is NULL", name,
                      i);
            for (slot = 0; slot < total; slot++)
                if (strcmp(arg_names[slot], input_names[i]) == 0)
                    break;
            if (slot == total) {
                char valid[512];
                size_t used = 0;
                valid[0] = '\0';
                for (int k = 0; k < total && used < sizeof valid; k++)
                    used += (size_t)snprintf(valid + used, sizeof valid - used, "%s%s",
                                             k ? ", " : "", arg_names[k]);
                MXC_CHECK(false, MXC_EINVAL, "node '%s': %s has no input '%s' (inputs: %s)", name,
                          op->name, input_names[i], valid);
            }
            MXC_CHECK(n->inputs[slot].node == NULL, MXC_EINVAL, "node '%s': input '%s' given twice",
                      name, input_names[i]);
        }
        n->inputs[slot] = inputs[i]->outputs[0];
        n->inputs[slot].version = slot >= n_args ? 1 : 0;
        mxc__sym_node_retain(n->inputs[slot].node);
    }
    for (int k = 0; k < total; k++) {
        if (n->inputs[k].node)
            continue;
        struct mxc__sym_node *v;
        MXC_TRY(auto_variable(n, arg_names[k], &v));
        n->inputs[k] = (struct mxc__sym_entry){v, 0, k >= n_args ? 1 : 0};
    }
    struct mxc__sym_entry heads[MXC__MAX_OP_ARGS];
    for (int k = 0; k < n->num_visible; k++)
        heads[k] = (struct mxc__sym_entry){n, k, 0};
    MXC_TRY(mxc__symbol_new(n->num_visible, heads, out));
fail:
    mxc__sym_node_release(n);
    return mxc__in_call(__func__, rc);
}

/* Rebuilds the graph of `sym`: variables found in `repl_names` (or, positionally, the
 * i-th variable for i < num_repl when repl_names is NULL) become `repl[i]`; with `deep`
 * every node is copied, else only the nodes that depend on a replacement. */
static int rebuild(const mxc_symbol *sym, int num_repl, const char *const *repl_names,
                   mxc_symbol *const *repl, bool deep, mxc_symbol **out) {
    int rc = MXC_OK;
    struct ptrmap map = {0};
    struct mxc__sym_node **order = NULL;
    struct mxc__sym_entry *newe = NULL; /* per node: the replacement entry for output 0 */
    bool *used = NULL;
    int n = 0, var_i = 0;
    MXC_TRY(topo_order(sym->num_outputs, sym->outputs, &order, &n, &map));
    newe = mxc__calloc((size_t)n + 1, sizeof *newe);
    used = mxc__calloc((size_t)num_repl + 1, sizeof *used);
    MXC_CHECK(newe && used, MXC_ENOMEM, "out of memory composing a symbol");
    for (int i = 0; i < n; i++) {
        struct mxc__sym_node *s = order[i];
        if (s->op == NULL) {
            int r = -1;
            if (repl_names == NULL) {
                r = var_i < num_repl ? var_i : -1;
            } else {
                for (int k = 0; k < num_repl && r < 0; k++)
                    if (strcmp(repl_names[k], s->name) == 0)
                        r = k;
            }
            var_i++;
            if (r >= 0) {
                used[r] = true;
                newe[i] = repl[r]->outputs[0];
                mxc__sym_node_retain(newe[i].node);
                continue;
            }
        }
        bool changed = deep;
        for (int k = 0; k < s->num_inputs && !changed; k++) {
            int id = *ptrmap_find(&map, s->inputs[k].node);
            changed = newe[id].node != s->inputs[k].node;
        }
        if (!changed) {
            newe[i] = (struct mxc__sym_entry){s, 0, 0};
            mxc__sym_node_retain(s);
            continue;
        }
        struct mxc__sym_node *c;
        MXC_TRY(mxc__sym_node_new(s->name, s->op, &c));
        newe[i] = (struct mxc__sym_entry){c, 0, 0};
        MXC_TRY(attrs_copy(&c->attrs, &s->attrs));
        if (s->op)
            MXC_TRY(mxc__sym_node_parse(c));
        c->inputs = mxc__calloc((size_t)s->num_inputs + 1, sizeof *c->inputs);
        MXC_CHECK(c->inputs != NULL, MXC_ENOMEM, "out of memory composing a symbol");
        for (int k = 0; k < s->num_inputs; k++) {
            int id = *ptrmap_find(&map, s->inputs[k].node);
            c->inputs[k] = newe[id];
            c->inputs[k].index += s->inputs[k].index;
            c->inputs[k].version = s->inputs[k].version;
            mxc__sym_node_retain(c->inputs[k].node);
            c->num_inputs = k + 1;
        }
    }
    if (repl_names) {
        for (int k = 0; k < num_repl; k++)
            MXC_CHECK(used[k], MXC_EINVAL,
                      "mxc_symbol_compose: the symbol has no free "
                      "variable '%s'",
                      repl_names[k]);
    } else {
        MXC_CHECK(num_repl <= var_i, MXC_EINVAL,
                  "mxc_symbol_compose: %d arguments given "
                  "but the symbol has %d inputs",
                  num_repl, var_i);
    }
    struct mxc__sym_entry *heads = mxc__calloc((size_t)sym->num_outputs + 1, sizeof *heads);
    MXC_CHECK(heads != NULL, MXC_ENOMEM, "out of memory composing a symbol");
    for (int h = 0; h < sym->num_outputs; h++) {
        int id = *ptrmap_find(&map, sym->outputs[h].node);
        heads[h] = newe[id];
        heads[h].index += sym->outputs[h].index;
    }
    rc = mxc__symbol_new(sym->num_outputs, heads, out);
    mxc__free(heads);
fail:
    for (int i = 0; newe && i < n; i++)
        if (newe[i].node)
            mxc__sym_node_release(newe[i].node);
    mxc__free(newe);
    mxc__free(used);
    mxc__free(order);
    ptrmap_free(&map);
    return rc;
}

int mxc_symbol_compose(const mxc_symbol *sym, int num_args, const char *const *names,
                       mxc_symbol *const *args, mxc_symbol **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_compose: out is NULL");
    *out = NULL;
    CHECK_SYM(sym);
    if (num_args < 0 || (num_args > 0 && args == NULL))
        return mxc__error(MXC_EINVAL, "mxc_symbol_compose: bad argument arrays");
    for (int i = 0; i < num_args; i++) {
        CHECK_SYM(args[i]);
        if (args[i]->num_outputs != 1)
            return mxc__error(MXC_EINVAL,
                              "mxc_symbol_compose: argument %d has %d outputs "
                              "(one expected)",
                              i, args[i]->num_outputs);
        if (names && names[i] == NULL)
            return mxc__error(MXC_EINVAL, "mxc_symbol_compose: name %d is NULL", i);
    }
    return mxc__in_call(__func__, rebuild(sym, num_args, names, args, false, out));
}

int mxc_symbol_copy(const mxc_symbol *sym, mxc_symbol **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_copy: out is NULL");
    *out = NULL;
    CHECK_SYM(sym);
    return mxc__in_call(__func__, rebuild(sym, 0, NULL, NULL, true, out));
}

int mxc_symbol_group(int num, mxc_symbol *const *syms, mxc_symbol **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_group: out is NULL");
    *out = NULL;
    if (num < 1 || syms == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_group: needs at least one symbol");
    int total = 0;
    for (int i = 0; i < num; i++) {
        CHECK_SYM(syms[i]);
        total += syms[i]->num_outputs;
    }
    struct mxc__sym_entry *e = mxc__calloc((size_t)total + 1, sizeof *e);
    if (e == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_symbol_group: out of memory");
    int k = 0;
    for (int i = 0; i < num; i++)
        for (int j = 0; j < syms[i]->num_outputs; j++)
            e[k++] = syms[i]->outputs[j];
    int rc = mxc__symbol_new(total, e, out);
    mxc__free(e);
    return mxc__in_call(__func__, rc);
}

int mxc_symbol_get_output(const mxc_symbol *sym, int index, mxc_symbol **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_get_output: out is NULL");
    *out = NULL;
    CHECK_SYM(sym);
    if (index < 0 || index >= sym->num_outputs)
        return mxc__error(MXC_EINVAL, "mxc_symbol_get_output: index %d outside [0, %d)", index,
                          sym->num_outputs);
    return mxc__in_call(__func__, mxc__symbol_new(1, &sym->outputs[index], out));
}

int mxc_symbol_get_internals(const mxc_symbol *sym, mxc_symbol **out) {
    int rc = MXC_OK;
    struct ptrmap map = {0};
    struct mxc__sym_node **order = NULL;
    struct mxc__sym_entry *e = NULL;
    int n = 0, total = 0;
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_get_internals: out is NULL");
    *out = NULL;
    CHECK_SYM(sym);
    MXC_TRY(topo_order(sym->num_outputs, sym->outputs, &order, &n, &map));
    for (int i = 0; i < n; i++)
        total += order[i]->num_visible;
    e = mxc__calloc((size_t)total + 1, sizeof *e);
    MXC_CHECK(e != NULL, MXC_ENOMEM, "out of memory listing internals");
    total = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < order[i]->num_visible; k++)
            e[total++] = (struct mxc__sym_entry){order[i], k, 0};
    rc = mxc__symbol_new(total, e, out);
fail:
    mxc__free(e);
    mxc__free(order);
    ptrmap_free(&map);
    return mxc__in_call(__func__, rc);
}

/* ---- Listing ----------------------------------------------------------------------- */

int mxc_symbol_num_outputs(const mxc_symbol *sym, int *out) {
    CHECK_SYM(sym);
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_num_outputs: out is NULL");
    *out = sym->num_outputs;
    return MXC_OK;
}

int mxc_symbol_get_name(const mxc_symbol *sym, const char **name) {
    CHECK_SYM(sym);
    if (name == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_get_name: name is NULL");
    *name = NULL;
    if (sym->num_outputs != 1)
        return mxc__error(MXC_EINVAL,
                          "mxc_symbol_get_name: the symbol has %d outputs; a "
                          "name belongs to a single-output symbol",
                          sym->num_outputs);
    *name = sym->outputs[0].node->name;
    return MXC_OK;
}

/* Lists the names of the argument (or, with `aux`, auxiliary-state) variables in the
 * symbol's cache (borrowed from the nodes, which the symbol keeps alive); `fn` is the
 * public function, for messages. */
static int list_vars(mxc_symbol *sym, bool aux, int *num, const char *const **names,
                     const char *fn) {
    int rc = mxc__symbol_check(sym, fn, "symbol");
    if (rc != MXC_OK)
        return rc;
    struct mxc__str_list *l = aux ? &sym->aux : &sym->args;
    if (num == NULL || names == NULL)
        return mxc__error(MXC_EINVAL, "%s: NULL out parameter", fn);
    if (l->view != NULL) { /* a symbol's graph never changes: listed once, kept */
        *num = l->num;
        *names = l->view;
        return MXC_OK;
    }
    struct mxc__graph *g;
    rc = mxc__graph_build(sym, &g);
    if (rc != MXC_OK)
        return mxc__in_call(fn, rc);
    int count = aux ? g->num_aux : g->num_args;
    rc = str_list_reset(l, count);
    if (rc == MXC_OK) {
        for (int i = 0; i < count; i++)
            l->view[i] = g->nodes[aux ? g->aux_nodes[i] : g->arg_nodes[i]].name;
        *num = count;
        *names = l->view;
    }
    mxc__graph_free(g);
    return mxc__in_call(fn, rc);
}

int mxc_symbol_list_arguments(mxc_symbol *sym, int *num, const char *const **names) {
    return list_vars(sym, false, num, names, __func__);
}

int mxc_symbol_list_auxiliary_states(mxc_symbol *sym, int *num, const char *const **names) {
    return list_vars(sym, true, num, names, __func__);
}

int mxc_symbol_list_outputs(mxc_symbol *sym, int *num, const char *const **names) {
    CHECK_SYM(sym);
    if (num == NULL || names == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_list_outputs: NULL out parameter");
    if (sym->outs.view != NULL) { /* listed once, kept (as list_vars) */
        *num = sym->outs.num;
        *names = sym->outs.view;
        return MXC_OK;
    }
    int rc = str_list_reset(&sym->outs, sym->num_outputs);
    if (rc != MXC_OK)
        return mxc__in_call(__func__, rc);
    for (int i = 0; i < sym->num_outputs; i++) {
        sym->outs.items[i] = mxc__sym_entry_name(&sym->outputs[i]);
        if (sym->outs.items[i] == NULL) {
            str_list_clear(&sym->outs);
            return mxc__error(MXC_ENOMEM, "mxc_symbol_list_outputs: out of memory");
        }
        sym->outs.view[i] = sym->outs.items[i];
    }
    *num = sym->num_outputs;
    *names = sym->outs.view;
    return MXC_OK;
}

/* ---- Attributes -------------------------------------------------------------------- */

int mxc_symbol_set_attr(mxc_symbol *sym, const char *key, const char *value) {
    CHECK_SYM(sym);
    if (key == NULL || value == NULL || key[0] == '\0')
        return mxc__error(MXC_EINVAL, "mxc_symbol_set_attr: NULL or empty key or value");
    if (sym->num_outputs != 1)
        return mxc__error(MXC_EINVAL,
                          "mxc_symbol_set_attr: the symbol has %d outputs; "
                          "attributes belong to a single-output symbol",
                          sym->num_outputs);
    struct mxc__sym_node *n = sym->outputs[0].node;
    if (n->op == NULL || strncmp(key, "__", 2) == 0)
        return mxc__in_call(__func__, mxc__attrs_set(&n->attrs, key, value));
    /* A parameter: parse the new set first so that a bad value changes nothing. */
    struct mxc__sym_node *probe;
    int rc = mxc__sym_node_new(n->name, n->op, &probe);
    if (rc != MXC_OK)
        return mxc__in_call(__func__, rc);
    rc = attrs_copy(&probe->attrs, &n->attrs);
    if (rc == MXC_OK)
        rc = mxc__attrs_set(&probe->attrs, key, value);
    if (rc == MXC_OK)
        rc = mxc__sym_node_parse(probe);
    if (rc == MXC_OK && (probe->num_args != n->num_args || probe->num_outputs != n->num_outputs))
        rc = mxc__error(MXC_EINVAL,
                        "node '%s': changing %s would change the number of "
                        "inputs or outputs",
                        n->name, key);
    if (rc == MXC_OK) {
        struct mxc__attrs tmp = n->attrs;
        void *p = n->params;
        n->attrs = probe->attrs;
        n->params = probe->params;
        probe->attrs = tmp;
        probe->params = p;
    }
    mxc__sym_node_release(probe);
    return mxc__in_call(__func__, rc);
}

int mxc_symbol_get_attr(const mxc_symbol *sym, const char *key, const char **value) {
    CHECK_SYM(sym);
    if (key == NULL || value == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_get_attr: NULL key or value");
    *value = NULL;
    if (sym->num_outputs != 1)
        return mxc__error(MXC_EINVAL,
                          "mxc_symbol_get_attr: the symbol has %d outputs; "
                          "attributes belong to a single-output symbol",
                          sym->num_outputs);
    *value = mxc__attrs_get(&sym->outputs[0].node->attrs, key);
    return MXC_OK;
}

int mxc_symbol_list_attrs(mxc_symbol *sym, int *num, const char *const **triples) {
    CHECK_SYM(sym);
    if (num == NULL || triples == NULL)
        return mxc__error(MXC_EINVAL, "mxc_symbol_list_attrs: NULL out parameter");
    struct mxc__graph *g;
    int rc = mxc__graph_build(sym, &g);
    if (rc != MXC_OK)
        return mxc__in_call(__func__, rc);
    int count = 0;
    for (int i = 0; i < g->num_nodes; i++)
        count += g->nodes[i].src->attrs.num;
    rc = str_list_reset(&sym->attrs, 3 * count);
    if (rc == MXC_OK) {
        int k = 0;
        for (int i = 0; i < g->num_nodes; i++) {
            const struct mxc__attrs *a = &g->nodes[i].src->attrs;
            for (int j = 0; j < a->num; j++) {
                sym->attrs.view[k++] = g->nodes[i].name;
                sym->attrs.view[k++] = a->keys[j];
                sym->attrs.view[k++] = a->vals[j];
            }
        }
        *num = count;
        *triples = sym->attrs.view;
    }
    mxc__graph_free(g);
    return mxc__in_call(__func__, rc);
}

/* Used by infer.c to hand out the names of unknown arguments. */
int mxc__symbol_set_unknown(mxc_symbol *sym, int num, const char *const *names,
                            const char *const **out) {
    int rc = str_list_reset(&sym->unknown, num);
    if (rc != MXC_OK)
        return rc;
    for (int i = 0; i < num; i++)
        sym->unknown.view[i] = names[i];
    *out = sym->unknown.view;
    return MXC_OK;
}

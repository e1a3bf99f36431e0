/*
 * tests/fuzz/op_params.c — fuzzes operator parameter strings and the operators behind
 * them. The input is text, one item per line:
 *
 *   Convolution              the operator (first line)
 *   kernel=(3, 3)            a parameter, as in symbol JSON
 *   :data=(1, 2, 5, 5)       the shape of an argument or auxiliary state (any digits
 *                            separated by anything, at most 8 dims, each at most
 *                            INT64_MAX: inference sees huge shapes too)
 *   !0.5 -1 2                values the inputs are filled with, cycled (default 0.5)
 *   ~wna                     gradient requests of the arguments in order: write, null,
 *                            add (default write)
 *
 * The operator is applied to variables (mxc_symbol_create parses the parameters); its
 * shapes are inferred from the given ones and, when every tensor has at most
 * FUZZ_MAX_ELEMS elements, it runs imperatively (mxc_imperative_invoke, forward) and bound
 * (forward and backward, fuzz_run_symbol).
 */
#include "tests/fuzz/fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITEMS 16
#define MAX_ARGS  32   /* inputs + auxiliary states, or outputs: MXC__MAX_OP_ARGS each */
#define NODE      "op" /* the node's name: its variables are "op_<argument>" */

struct request {
    const char *op;
    int num_params, num_shapes, num_fill;
    const char *keys[MAX_ITEMS], *vals[MAX_ITEMS];
    char *shape_names[MAX_ITEMS];
    mxc_shape shapes[MAX_ITEMS];
    float fill[MAX_ITEMS];
    const char *reqs;
};

/* Every run of digits in `s` is a dim. */
static mxc_shape parse_dims(const char *s) {
    mxc_shape t = {0};
    while (*s && t.ndim < MXC_MAX_NDIM) {
        if (*s < '0' || *s > '9') {
            s++;
            continue;
        }
        char *end;
        t.dims[t.ndim++] = strtoll(s, &end, 10); /* INT64_MAX past it: inference meets it */
        s = end;
    }
    return t;
}

/* Splits `text` (modified) into the request's lines. */
static void parse_request(char *text, struct request *r) {
    char *save = NULL;
    r->op = strtok_r(text, "\n", &save);
    for (char *line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (line[0] == '~') {
            r->reqs = line + 1;
        } else if (line[0] == '!') {
            for (char *p = line + 1, *end; *p && r->num_fill < MAX_ITEMS; p = end) {
                r->fill[r->num_fill] = strtof(p, &end);
                if (end == p)
                    break;
                r->num_fill++;
            }
        } else if (line[0] == ':' && eq && r->num_shapes < MAX_ITEMS) {
            *eq = '\0';
            size_t n = strlen(NODE) + strlen(line + 1) + 2;
            char *name = malloc(n);
            if (name == NULL)
                abort();
            snprintf(name, n, "%s_%s", NODE, line + 1);
            r->shape_names[r->num_shapes] = name;
            r->shapes[r->num_shapes++] = parse_dims(eq + 1);
        } else if (eq && r->num_params < MAX_ITEMS) {
            *eq = '\0';
            r->keys[r->num_params] = line;
            r->vals[r->num_params++] = eq + 1;
        }
    }
}

/* Runs the operator through mxc_imperative_invoke on inputs of the inferred shapes. */
static void invoke(mxc_symbol *sym, const struct request *r) {
    mxc_shape arg[MAX_ARGS], out[MAX_ARGS], aux[MAX_ARGS];
    mxc_ndarray *inputs[MAX_ARGS] = {NULL}, *outputs[MAX_ARGS] = {NULL};
    const char *const *names;
    int n_arg, n_out, n_aux, unknown = -1;
    if (mxc_symbol_list_arguments(sym, &n_arg, &names) != MXC_OK ||
        mxc_symbol_list_outputs(sym, &n_out, &names) != MXC_OK ||
        mxc_symbol_list_auxiliary_states(sym, &n_aux, &names) != MXC_OK)
        abort();
    if (n_arg + n_aux > MAX_ARGS || n_out > MAX_ARGS)
        abort();
    int rc = mxc_symbol_infer_shape(sym, r->num_shapes, (const char *const *)r->shape_names,
                                    r->shapes, arg, out, aux, &unknown, NULL);
    fuzz_note("infer_shape", rc);
    if (rc != MXC_OK || unknown != 0)
        return;
    for (int i = 0; i < n_out; i++)
        if (!fuzz_small(&out[i]))
            return;
    for (int i = 0; i < n_arg + n_aux; i++) {
        const mxc_shape *s = i < n_arg ? &arg[i] : &aux[i - n_arg];
        if (!fuzz_small(s) || (inputs[i] = fuzz_array(s, r->fill, r->num_fill)) == NULL)
            goto done;
    }
    rc = mxc_imperative_invoke(r->op, r->num_params, r->keys, r->vals, n_arg + n_aux, inputs,
                               MAX_ARGS, outputs, 1);
    for (int i = 0; rc == MXC_OK && i < MAX_ARGS && outputs[i]; i++)
        rc = fuzz_read(outputs[i]);
    fuzz_note("imperative invoke", rc);
done:
    for (int i = 0; i < MAX_ARGS; i++) {
        mxc_nd_free(inputs[i]);
        mxc_nd_free(outputs[i]);
    }
    mxc_nd_wait_all();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    struct request r = {0};
    mxc_symbol *sym = NULL;
    if (text == NULL)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    parse_request(text, &r);
    /* `_sleep` (a scheduler test operator) sleeps as long as its parameter says */
    int rc = r.op && strcmp(r.op, "_sleep") != 0
                 ? mxc_symbol_create(r.op, r.num_params, r.keys, r.vals, NODE, 0, NULL, NULL, &sym)
                 : MXC_EINVAL;
    fuzz_note("create", rc);
    if (rc == MXC_OK) {
        invoke(sym, &r);
        struct fuzz_run run = {
            r.num_shapes, (const char *const *)r.shape_names, r.shapes, r.fill, r.num_fill, r.reqs};
        fuzz_run_symbol(sym, &run);
    }
    mxc_symbol_free(sym);
    for (int i = 0; i < r.num_shapes; i++)
        free(r.shape_names[i]);
    free(text);
    mxc_clear_error();
    return 0;
}

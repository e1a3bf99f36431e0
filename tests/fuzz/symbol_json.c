/*
 * tests/fuzz/symbol_json.c — fuzzes the symbol JSON loader: the input is JSON text. A
 * symbol that loads must save to JSON that loads again and saves to the same text; then
 * its shapes are inferred (from the variables' __shape__ hints, else with the first
 * argument as a small (2, 1, 6, 6) batch) and, when every tensor is small, it is bound
 * and run forward and backward once.
 */
#include "tests/fuzz/fuzz_util.h"

#include <stdlib.h>
#include <string.h>

/* save(load(save(sym))) == save(sym); returns the saved text (owned by the caller). */
static char *check_round_trip(mxc_symbol *sym) {
    const char *json, *again;
    mxc_symbol *reloaded = NULL;
    if (mxc_symbol_save_json(sym, &json) != MXC_OK)
        abort();
    char *text = strdup(json);
    if (text == NULL || mxc_symbol_load_json(text, &reloaded) != MXC_OK ||
        mxc_symbol_save_json(reloaded, &again) != MXC_OK || strcmp(text, again) != 0)
        abort();
    mxc_symbol_free(reloaded);
    return text;
}

/* Binds and runs `sym` with its own shape hints, else with a small first argument. */
static void run(mxc_symbol *sym) {
    static const float fill[] = {0.5f, -1.0f, 2.0f, 0.0f, 1.0f, -0.25f, 3.0f};
    struct fuzz_run r = {.fill = fill, .nfill = 7};
    int n_args;
    const char *const *args;
    if (fuzz_run_symbol(sym, &r) || mxc_symbol_list_arguments(sym, &n_args, &args) != MXC_OK ||
        n_args == 0)
        return;
    /* a copy: the symbol's list may be rebuilt by the next listing */
    const char *first = strdup(args[0]);
    const mxc_shape batch = {.ndim = 4, .dims = {2, 1, 6, 6}};
    if (first == NULL)
        abort();
    r.num = 1;
    r.names = &first;
    r.shapes = &batch;
    fuzz_run_symbol(sym, &r);
    free((char *)first);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *json = malloc(size + 1);
    mxc_symbol *sym = NULL;
    if (json == NULL)
        abort();
    memcpy(json, data, size);
    json[size] = '\0';
    int rc = mxc_symbol_load_json(json, &sym);
    fuzz_note("load", rc);
    if (rc == MXC_OK) {
        char *saved = check_round_trip(sym);
        /* `_sleep` (a scheduler test operator) sleeps as long as its parameter says */
        if (strstr(saved, "\"op\": \"_sleep\"") == NULL)
            run(sym);
        free(saved);
    }
    mxc_symbol_free(sym);
    free(json);
    mxc_clear_error();
    return 0;
}

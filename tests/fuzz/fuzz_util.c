/*
 * tests/fuzz/fuzz_util.c — the helpers of fuzz_util.h, linked into every fuzz target.
 */
#include "tests/fuzz/fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void quiet(void *user, int level, const char *message) {
    (void)user, (void)level, (void)message;
}

static bool verbose;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    setenv("MXC_ENGINE_TYPE", "naive", 0);
    const char *v = getenv("MXC_FUZZ_VERBOSE");
    verbose = v && v[0] && strcmp(v, "0") != 0;
    if (!verbose)
        mxc_set_log(quiet, NULL, MXC_LOG_ERROR);
    return 0;
}

void fuzz_note(const char *what, int rc) {
    if (verbose)
        fprintf(stderr, "fuzz: %s: %s%s%s\n", what, rc == MXC_OK ? "ok" : mxc_err_name(rc),
                rc == MXC_OK ? "" : ": ", rc == MXC_OK ? "" : mxc_last_error());
}

/* The two files of fuzz_two_files. */
static char paths[2][256];

static void remove_files(void) {
    remove(paths[0]);
    remove(paths[1]);
}

/* Writes `size` bytes to paths[i], which it names the first time. */
static const char *write_file(int i, const void *data, size_t size) {
    if (paths[i][0] == '\0') {
        const char *tmp = getenv("TMPDIR");
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp && tmp[0] ? tmp : "/tmp";
        snprintf(paths[i], sizeof paths[i], "%s/mxc-fuzz-%d-%d", dir, (int)getpid(), i);
        if (i == 0)
            atexit(remove_files);
    }
    FILE *f = fopen(paths[i], "wb");
    if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror(paths[i]);
        abort();
    }
    return paths[i];
}

bool fuzz_two_files(const uint8_t *data, size_t size, size_t header, const char **first,
                    const char **second) {
    if (size < header + 2)
        return false;
    size_t len = (size_t)data[header] | (size_t)data[header + 1] << 8;
    data += header + 2;
    size -= header + 2;
    if (len > size)
        len = size;
    *first = write_file(0, data, len);
    *second = write_file(1, data + len, size - len);
    return true;
}

bool fuzz_small(const mxc_shape *shape) {
    int64_t n = mxc_shape_size(shape);
    return shape->ndim > 0 && n >= 0 && n <= FUZZ_MAX_ELEMS;
}

mxc_ndarray *fuzz_array(const mxc_shape *shape, const float *fill, int nfill) {
    static const float half = 0.5f;
    float buf[FUZZ_MAX_ELEMS];
    mxc_ndarray *a = NULL;
    int64_t n = mxc_shape_size(shape);
    if (n < 0 || n > FUZZ_MAX_ELEMS)
        abort(); /* callers check fuzz_small first */
    if (nfill <= 0) {
        fill = &half;
        nfill = 1;
    }
    for (int64_t i = 0; i < n; i++)
        buf[i] = fill[i % nfill];
    if (mxc_nd_create(shape, MXC_FLOAT32, mxc_cpu(), 0, &a) != MXC_OK)
        return NULL;
    if (n > 0 && mxc_nd_sync_copy_from_cpu(a, buf, (size_t)n * sizeof(float)) != MXC_OK) {
        mxc_nd_free(a);
        return NULL;
    }
    return a;
}

int fuzz_read(const mxc_ndarray *array) {
    float buf[FUZZ_MAX_ELEMS];
    mxc_shape s;
    int rc = mxc_nd_get_shape(array, &s);
    if (rc != MXC_OK)
        return rc;
    int64_t n = mxc_shape_size(&s);
    if (n < 0 || n > FUZZ_MAX_ELEMS)
        abort(); /* every array of a run is small */
    size_t nbytes = (size_t)n * mxc_dtype_size(mxc_nd_dtype(array));
    if (nbytes > sizeof buf)
        abort();
    return mxc_nd_sync_copy_to_cpu(array, buf, nbytes);
}

/* The shapes of a symbol's arguments and auxiliary states, in list order. */
struct shapes {
    int n_arg, n_aux;
    mxc_shape *arg, *aux;
};

static void shapes_free(struct shapes *s) {
    free(s->arg);
    free(s->aux);
    *s = (struct shapes){0};
}

/* Infers the shapes of `sym` from the given ones into `keep` (may be NULL); true when
 * every argument, output and auxiliary state is known and small. */
static bool infer_small(mxc_symbol *sym, int num, const char *const *names, const mxc_shape *shapes,
                        struct shapes *keep) {
    const char *const *list;
    int n_arg, n_out, n_aux, unknown = -1;
    if (mxc_symbol_list_arguments(sym, &n_arg, &list) != MXC_OK ||
        mxc_symbol_list_outputs(sym, &n_out, &list) != MXC_OK ||
        mxc_symbol_list_auxiliary_states(sym, &n_aux, &list) != MXC_OK)
        abort(); /* a valid symbol lists what it has */
    struct shapes s = {n_arg, n_aux, calloc((size_t)n_arg + 1, sizeof(mxc_shape)),
                       calloc((size_t)n_aux + 1, sizeof(mxc_shape))};
    mxc_shape *out = calloc((size_t)n_out + 1, sizeof *out);
    if (!s.arg || !s.aux || !out)
        abort();
    int rc = mxc_symbol_infer_shape(sym, num, names, shapes, s.arg, out, s.aux, &unknown, NULL);
    fuzz_note("infer_shape", rc);
    bool ok = rc == MXC_OK && unknown == 0;
    for (int i = 0; ok && i < n_arg; i++)
        ok = fuzz_small(&s.arg[i]);
    for (int i = 0; ok && i < n_out; i++)
        ok = fuzz_small(&out[i]);
    for (int i = 0; ok && i < n_aux; i++)
        ok = fuzz_small(&s.aux[i]);
    if (rc == MXC_OK)
        fuzz_note(unknown ? "shapes stay unknown: skipped"
                  : ok    ? "every tensor is small"
                          : "a tensor is too large: skipped",
                  MXC_OK);
    free(out);
    if (ok && keep)
        *keep = s;
    else
        shapes_free(&s);
    return ok;
}

/* Reads every array of `arrays` (NULL entries skipped); the first failure. */
static int read_all(int num, mxc_ndarray *const *arrays) {
    int rc = MXC_OK;
    for (int i = 0; i < num; i++) {
        int r = arrays[i] ? fuzz_read(arrays[i]) : MXC_OK;
        if (rc == MXC_OK)
            rc = r;
    }
    return rc;
}

/* New arrays of `shapes` holding `fill` cycled; false on an mxc error. */
static bool make_arrays(int num, const mxc_shape *shapes, const float *fill, int nfill,
                        mxc_ndarray **out) {
    for (int i = 0; i < num; i++)
        if ((out[i] = fuzz_array(&shapes[i], fill, nfill)) == NULL)
            return false;
    return true;
}

static void free_arrays(int num, mxc_ndarray **arrays) {
    for (int i = 0; arrays && i < num; i++)
        mxc_nd_free(arrays[i]);
    free(arrays);
}

/* Forward, then backward with ones as head gradients when `grads`, reading everything. */
static void run_exec(mxc_executor *exec, mxc_ndarray *const *grads, int n_grads) {
    static const float one = 1.0f;
    mxc_ndarray *const *outs;
    mxc_ndarray **heads = NULL;
    int n_out = 0;
    int rc = mxc_executor_forward(exec, 1);
    if (rc == MXC_OK)
        rc = mxc_executor_outputs(exec, &n_out, &outs);
    if (rc == MXC_OK)
        rc = read_all(n_out, outs);
    fuzz_note("forward", rc);
    if (rc != MXC_OK || grads == NULL)
        return;
    heads = calloc((size_t)n_out + 1, sizeof *heads);
    if (heads == NULL)
        abort();
    for (int i = 0; i < n_out; i++) {
        mxc_shape s;
        if (mxc_nd_get_shape(outs[i], &s) != MXC_OK || (heads[i] = fuzz_array(&s, &one, 1)) == NULL)
            abort(); /* the outputs are small arrays */
    }
    rc = mxc_executor_backward(exec, n_out, heads);
    if (rc == MXC_OK)
        rc = read_all(n_grads, grads);
    fuzz_note("backward", rc);
    free_arrays(n_out, heads);
}

bool fuzz_run_symbol(mxc_symbol *sym, const struct fuzz_run *run) {
    static const float zero = 0.0f;
    struct shapes s = {0};
    mxc_symbol *internals = NULL;
    mxc_executor *exec = NULL;
    mxc_ndarray **args = NULL, **grads = NULL, **aux = NULL;
    int *reqs = NULL;
    bool bound = false;
    /* the internals' outputs are every node's: no intermediate array may be large either */
    if (mxc_symbol_get_internals(sym, &internals) != MXC_OK)
        abort();
    if (!infer_small(internals, run->num, run->names, run->shapes, NULL) ||
        !infer_small(sym, run->num, run->names, run->shapes, &s))
        goto done;
    args = calloc((size_t)s.n_arg + 1, sizeof *args);
    grads = calloc((size_t)s.n_arg + 1, sizeof *grads);
    aux = calloc((size_t)s.n_aux + 1, sizeof *aux);
    reqs = calloc((size_t)s.n_arg + 1, sizeof *reqs);
    if (!args || !grads || !aux || !reqs)
        abort();
    size_t given = run->reqs ? strlen(run->reqs) : 0;
    for (int i = 0; i < s.n_arg; i++) {
        char c = (size_t)i < given ? run->reqs[i] : 'w';
        reqs[i] = c == 'n' ? MXC_GRAD_NULL : c == 'a' ? MXC_GRAD_ADD : MXC_GRAD_WRITE;
        if (reqs[i] != MXC_GRAD_NULL && (grads[i] = fuzz_array(&s.arg[i], &zero, 1)) == NULL)
            goto done;
    }
    if (!make_arrays(s.n_arg, s.arg, run->fill, run->nfill, args) ||
        !make_arrays(s.n_aux, s.aux, run->fill, run->nfill, aux))
        goto done;
    int rc = mxc_executor_bind(sym, mxc_cpu(), s.n_arg, args, grads, reqs, s.n_aux, aux, &exec);
    fuzz_note("bind with gradients", rc);
    bool with_grads = rc == MXC_OK;
    if (!with_grads) { /* some operator has no backward */
        rc = mxc_executor_bind(sym, mxc_cpu(), s.n_arg, args, NULL, NULL, s.n_aux, aux, &exec);
        fuzz_note("bind without gradients", rc);
    }
    bound = rc == MXC_OK;
    if (bound)
        run_exec(exec, with_grads ? grads : NULL, s.n_arg);
done:
    mxc_executor_free(exec);
    free_arrays(s.n_arg, args);
    free_arrays(s.n_arg, grads);
    free_arrays(s.n_aux, aux);
    free(reqs);
    shapes_free(&s);
    mxc_symbol_free(internals);
    mxc_nd_wait_all(); /* forget this run's errors: the next input starts clean */
    mxc_clear_error();
    return bound;
}

/* Reads up to `max` batches of `it`. */
static void take_batches(mxc_data_iter *it, int max) {
    mxc_shape data_shape, label_shape, s;
    if (mxc_data_iter_provide_data(it, &data_shape) != MXC_OK ||
        mxc_data_iter_provide_label(it, &label_shape) != MXC_OK)
        abort();
    for (int b = 0; b < max && mxc_data_iter_next(it) == 1; b++) {
        mxc_ndarray *x = mxc_data_iter_data(it), *y = mxc_data_iter_label(it);
        if (x == NULL || mxc_nd_get_shape(x, &s) != MXC_OK ||
            mxc_shape_size(&s) != mxc_shape_size(&data_shape))
            abort();
        if (fuzz_small(&s))
            fuzz_read(x);
        if ((y == NULL) != (label_shape.ndim == 0))
            abort();
        if (y == NULL)
            continue;
        if (mxc_nd_get_shape(y, &s) != MXC_OK || mxc_shape_size(&s) != mxc_shape_size(&label_shape))
            abort();
        if (fuzz_small(&s))
            fuzz_read(y);
    }
}

void fuzz_iterate(int created, mxc_data_iter *it) {
    fuzz_note("create", created);
    if (created == MXC_OK) {
        take_batches(it, 16);
        if (mxc_data_iter_reset(it) != MXC_OK)
            abort();
        take_batches(it, 1);
    }
    mxc_data_iter_free(it);
    mxc_clear_error();
}

/*
 * model/fit.c — models (a symbol and its named parameters), MXNet-compatible
 * checkpoints, and the training loop: bind for the iterator's shapes, initialise what is
 * missing, then per batch copy the batch in, forward, backward, update every parameter
 * and feed the metric; per epoch evaluate, checkpoint and report.
 *
 * The batch loop never waits on purpose: copies, passes and updates are pushed and the
 * engine orders them. The one wait per batch is the metric reading the forward output,
 * which overlaps with the backward pass and updates already pushed.
 *
 * On a GPU context the model's parameters stay on the host (checkpoints are host arrays,
 * loadable anywhere): the executor binds its own copies on the GPU, filled from the host
 * at bind and copied back at each epoch's end (before evaluating and checkpointing) and
 * when the fit returns. Batches come from the iterator as host arrays; each is copied into
 * one of two GPU staging buffers (the engine's copy worker, its own stream) and from there
 * into the executor's inputs, so the upload of the next batch overlaps the backward pass
 * and updates of the current one. On the CPU the executor shares the parameters' memory
 * and batches are copied straight in.
 */
#include "mxc/executor.h"
#include "mxc/model.h"

#include "common/common.h"
#include "common/handle.h"
#include "io/io_impl.h"
#include "symbol/symbol_impl.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MODEL_MAGIC 0x4d4f444cu /* "MODL" */
#define MODEL_DEAD  0x4d4f4446u /* "MODF": freed (common/handle.h) */

struct mxc_model {
    _Atomic uint32_t magic;
    mxc_symbol *sym;
    int num_params;
    char **names; /* parameter names, without "arg:" / "aux:" */
    bool *is_aux;
    mxc_ndarray **arrays;
};

static mxc__handle_kind model_kind =
    MXC__HANDLE_KIND(struct mxc_model, "a model", MODEL_MAGIC, MODEL_DEAD);

static int check_model(const mxc_model *m, const char *fn) {
    return mxc__handle_check(&model_kind, m, fn, "model");
}

int mxc_model_create(mxc_symbol *sym, mxc_model **out) {
    if (out == NULL)
        return mxc__error(MXC_EINVAL, "mxc_model_create: out is NULL");
    *out = NULL;
    int rc = mxc__symbol_check(sym, __func__, "symbol");
    if (rc != MXC_OK)
        return rc;
    mxc_model *m = mxc__handle_alloc(&model_kind);
    if (m == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_model_create: out of memory");
    rc = mxc_symbol_copy(sym, &m->sym);
    if (rc != MXC_OK) {
        mxc__handle_free(&model_kind, m);
        return rc;
    }
    mxc__handle_publish(&model_kind, m);
    *out = m;
    return MXC_OK;
}

mxc_symbol *mxc_model_symbol(const mxc_model *m) {
    return check_model(m, __func__) == MXC_OK ? m->sym : NULL;
}

static int find_param(const mxc_model *m, const char *name, bool aux) {
    for (int i = 0; i < m->num_params; i++)
        if (m->is_aux[i] == aux && strcmp(m->names[i], name) == 0)
            return i;
    return -1;
}

mxc_ndarray *mxc_model_param(const mxc_model *m, const char *name) {
    if (check_model(m, __func__) != MXC_OK || name == NULL)
        return NULL;
    int i = find_param(m, name, false);
    if (i < 0)
        i = find_param(m, name, true);
    return i >= 0 ? m->arrays[i] : NULL;
}

/* Adds (taking `a`) or replaces parameter `name`. */
static int set_param(mxc_model *m, const char *name, bool aux, mxc_ndarray *a) {
    int i = find_param(m, name, aux);
    if (i >= 0) {
        mxc_nd_free(m->arrays[i]);
        m->arrays[i] = a;
        return MXC_OK;
    }
    int n = m->num_params + 1;
    char **names = mxc__realloc(m->names, sizeof *names * (size_t)n);
    if (names)
        m->names = names;
    bool *is_aux = mxc__realloc(m->is_aux, sizeof *is_aux * (size_t)n);
    if (is_aux)
        m->is_aux = is_aux;
    mxc_ndarray **arrays = mxc__realloc(m->arrays, sizeof *arrays * (size_t)n);
    if (arrays)
        m->arrays = arrays;
    char *copy = mxc__strdup(name);
    if (!names || !is_aux || !arrays || !copy) {
        mxc__free(copy);
        return mxc__error(MXC_ENOMEM, "model: out of memory");
    }
    names[m->num_params] = copy;
    is_aux[m->num_params] = aux;
    arrays[m->num_params] = a;
    m->num_params = n;
    return MXC_OK;
}

void mxc_model_free(mxc_model *m) {
    if (!mxc__handle_check_free(&model_kind, m, __func__, "model"))
        return;
    for (int i = 0; i < m->num_params; i++) {
        mxc__free(m->names[i]);
        mxc_nd_free(m->arrays[i]);
    }
    mxc__free(m->names);
    mxc__free(m->is_aux);
    mxc__free(m->arrays);
    mxc_symbol_free(m->sym);
    mxc__handle_free(&model_kind, m);
}

/* ---- Checkpoints -------------------------------------------------------------------- *
 * A checkpoint of epoch E is the pair <prefix>-symbol.json + <prefix>-EEEE.params, each
 * written through mxc__file_replace. */

static void checkpoint_paths(const char *prefix, int epoch, char *sym_path, char *params_path,
                             size_t size) {
    snprintf(sym_path, size, "%s-symbol.json", prefix);
    snprintf(params_path, size, "%s-%04d.params", prefix, epoch);
}

/* Opens the folder of `prefix` ("runs/lenet": "runs"; "lenet": ".") and points *base at
 * the file-name part ("lenet"). NULL with errno set when it cannot be opened. */
static DIR *open_prefix_dir(const char *prefix, const char **base) {
    char dir[4096];
    const char *slash = strrchr(prefix, '/');
    *base = slash ? slash + 1 : prefix;
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == prefix ? 1 : (int)(slash - prefix), prefix);
    return opendir(dir);
}

/* Whether the first `len` bytes of `name` are a checkpoint file of `base`: the symbol
 * (*epoch = -1) or the parameters of epoch *epoch (exactly 4 digits, as saved). */
static bool checkpoint_file(const char *name, size_t len, const char *base, int *epoch) {
    size_t b = strlen(base);
    if (len <= b + 1 || strncmp(name, base, b) != 0 || name[b] != '-')
        return false;
    const char *rest = name + b + 1;
    size_t rlen = len - b - 1;
    if (rlen == strlen("symbol.json") && strncmp(rest, "symbol.json", rlen) == 0) {
        *epoch = -1;
        return true;
    }
    if (rlen != strlen("0000.params") || strncmp(rest + 4, ".params", 7) != 0 ||
        strspn(rest, "0123456789") < 4)
        return false;
    *epoch =
        (rest[0] - '0') * 1000 + (rest[1] - '0') * 100 + (rest[2] - '0') * 10 + (rest[3] - '0');
    return true;
}

/* Removes the temporaries of `prefix`'s checkpoint files that saves killed midway left
 * behind (their process is gone), so that they do not pile up run after run. Files of
 * other prefixes, other names and live processes are left alone. Best effort: a folder
 * that cannot be read has nothing to clean. */
static void remove_stale_temps(const char *prefix) {
    const char *base;
    DIR *d = open_prefix_dir(prefix, &base);
    if (d == NULL)
        return;
    int fd = dirfd(d);
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        size_t len;
        int epoch;
        if (!mxc__file_stale_temp(e->d_name, &len) ||
            !checkpoint_file(e->d_name, len, base, &epoch))
            continue;
        if (unlinkat(fd, e->d_name, 0) == 0)
            mxc__log(MXC_LOG_INFO, "mxc_model_save: removed %s, left by a save that was killed",
                     e->d_name);
    }
    closedir(d);
}

int mxc_model_save(const mxc_model *m, const char *prefix, int epoch) {
    int rc = check_model(m, __func__);
    if (rc != MXC_OK)
        return rc;
    if (prefix == NULL || epoch < 0 || epoch > 9999)
        return mxc__error(MXC_EINVAL, "mxc_model_save: bad prefix or epoch %d", epoch);
    if (m->num_params == 0)
        return mxc__error(MXC_EINVAL, "mxc_model_save: the model has no parameters yet");
    char sym_path[4096], params_path[4096];
    checkpoint_paths(prefix, epoch, sym_path, params_path, sizeof sym_path);
    remove_stale_temps(prefix);
    rc = mxc__symbol_save_file(m->sym, sym_path, __func__);
    if (rc != MXC_OK)
        return rc;
    char **names = mxc__calloc((size_t)m->num_params, sizeof *names);
    if (names == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_model_save: out of memory");
    for (int i = 0; i < m->num_params && rc == MXC_OK; i++) {
        size_t len = strlen(m->names[i]) + 5;
        names[i] = mxc__malloc(len);
        if (names[i] == NULL)
            rc = mxc__error(MXC_ENOMEM, "mxc_model_save: out of memory");
        else
            snprintf(names[i], len, "%s:%s", m->is_aux[i] ? "aux" : "arg", m->names[i]);
    }
    if (rc == MXC_OK)
        rc = mxc_nd_save(params_path, (size_t)m->num_params, m->arrays, (const char *const *)names);
    for (int i = 0; i < m->num_params; i++)
        mxc__free(names[i]);
    mxc__free(names);
    return rc;
}

/* Whether `name` is among the `n` names. */
static bool listed(const char *name, int n, const char *const *names) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

int mxc_model_load_params(mxc_model *m, const char *path) {
    int rc = check_model(m, __func__);
    if (rc != MXC_OK)
        return rc;
    if (path == NULL)
        return mxc__error(MXC_EINVAL, "mxc_model_load_params: NULL path");
    int na = 0, nx = 0;
    const char *const *args = NULL, *const *auxs = NULL;
    rc = mxc_symbol_list_arguments(m->sym, &na, &args);
    if (rc == MXC_OK)
        rc = mxc_symbol_list_auxiliary_states(m->sym, &nx, &auxs);
    if (rc != MXC_OK)
        return mxc__in_call(__func__, rc);
    size_t count = 0;
    mxc_ndarray **arrays = NULL;
    char **names = NULL;
    rc = mxc_nd_load(path, mxc_cpu(), &count, &arrays, &names);
    if (rc != MXC_OK)
        return mxc__in_call(__func__, rc);
    if (names == NULL && count > 0)
        rc = mxc__error(MXC_EFORMAT, "%s: parameters have no names", path);
    /* every name is checked before the model changes */
    for (size_t i = 0; rc == MXC_OK && i < count; i++) {
        bool aux = strncmp(names[i], "aux:", 4) == 0;
        if (!aux && strncmp(names[i], "arg:", 4) != 0)
            rc = mxc__error(MXC_EFORMAT, "%s: parameter %s is not named arg:<name> or aux:<name>",
                            path, names[i]);
        else if (aux ? !listed(names[i] + 4, nx, auxs) : !listed(names[i] + 4, na, args))
            rc = mxc__error(MXC_EINVAL, "%s: the model's symbol has no %s %s", path,
                            aux ? "auxiliary state" : "argument", names[i] + 4);
    }
    for (size_t i = 0; rc == MXC_OK && i < count; i++) {
        rc = set_param(m, names[i] + 4, strncmp(names[i], "aux:", 4) == 0, arrays[i]);
        if (rc == MXC_OK)
            arrays[i] = NULL; /* the model has it now */
    }
    mxc_nd_list_free(count, arrays, names);
    return mxc__in_call(__func__, rc);
}

int mxc_model_load(const char *prefix, int epoch, mxc_model **out) {
    if (out == NULL || prefix == NULL)
        return mxc__error(MXC_EINVAL, "mxc_model_load: NULL argument");
    *out = NULL;
    char sym_path[4096], params_path[4096];
    checkpoint_paths(prefix, epoch, sym_path, params_path, sizeof sym_path);
    mxc_symbol *sym = NULL;
    int rc = mxc_symbol_load(sym_path, &sym);
    if (rc != MXC_OK)
        return rc;
    mxc_model *m = NULL;
    rc = mxc_model_create(sym, &m);
    mxc_symbol_free(sym);
    if (rc == MXC_OK)
        rc = mxc_model_load_params(m, params_path);
    if (rc != MXC_OK) {
        mxc_model_free(m);
        return mxc__in_call(__func__, rc);
    }
    *out = m;
    return MXC_OK;
}

int mxc_model_load_latest(const char *prefix, int *epoch, mxc_model **out) {
    if (out != NULL)
        *out = NULL;
    if (epoch != NULL)
        *epoch = 0;
    if (out == NULL || epoch == NULL || prefix == NULL)
        return mxc__error(MXC_EINVAL, "mxc_model_load_latest: %s is NULL",
                          out == NULL     ? "out"
                          : epoch == NULL ? "epoch"
                                          : "prefix");
    bool found[10000] = {false};
    int count = 0;
    const char *base;
    DIR *d = open_prefix_dir(prefix, &base);
    if (d == NULL && errno != ENOENT)
        return mxc__error(MXC_EIO, "mxc_model_load_latest: cannot list the folder of %s: %s",
                          prefix, strerror(errno));
    for (struct dirent *e = d ? readdir(d) : NULL; e != NULL; e = readdir(d)) {
        int k;
        if (checkpoint_file(e->d_name, strlen(e->d_name), base, &k) && k >= 0 && !found[k]) {
            found[k] = true;
            count++;
        }
    }
    if (d != NULL)
        closedir(d);
    int newest = -1, newest_rc = MXC_OK;
    char why[700] = "";
    for (int k = 9999; k >= 0; k--) {
        if (!found[k])
            continue;
        int rc = mxc_model_load(prefix, k, out);
        if (rc == MXC_OK) {
            *epoch = k;
            return MXC_OK;
        }
        if (rc == MXC_ENOMEM) /* not damage: an earlier epoch would silently lose work */
            return rc;
        mxc__log(MXC_LOG_WARN,
                 "mxc_model_load_latest: skipping damaged checkpoint %s-%04d.params: %s", prefix, k,
                 mxc_last_error());
        if (newest < 0) {
            newest = k;
            newest_rc = rc;
            snprintf(why, sizeof why, "%s", mxc_last_error());
        }
    }
    if (count == 0)
        return MXC_OK; /* nothing to resume from */
    return mxc__error(newest_rc,
                      "mxc_model_load_latest: none of the %d checkpoint(s) of %s loads; the "
                      "newest, %s-%04d.params: %s",
                      count, prefix, prefix, newest, why);
}

/* ---- Binding for an iterator -------------------------------------------------------- */

/* What a fit, score or predict binds: the executor and the parameters it updates. */
struct session {
    mxc_executor *exec;
    int num_args, num_aux;
    char **arg_names;            /* copies: the symbol's lists change with its next listing */
    int data_index, label_index; /* arguments fed from the iterator (-1: none) */
    mxc_ndarray *const *args, *const *grads, *const *aux;
    /* With own copies of the parameters (on a GPU, or one of several executors of a
     * fit with a store): the model parameter of each argument, then of each auxiliary
     * state (-1: an input), to copy back; on a GPU the staging buffers [turn][data,
     * label]. */
    bool on_device, own_params;
    int *param_of;
    mxc_ndarray *stage[2][2];
    int turn;
};

static bool is_gpu(mxc_context ctx) { return ctx.dev_type == MXC_GPU; }

/* Resolves `ctx` for public function `fn` (dev_type 0 means the CPU) and checks that it
 * can be used: MXC_ENODEV for a GPU this build or machine lacks, MXC_EINVAL otherwise. */
static int resolve_context(const char *fn, mxc_context ctx, mxc_context *out) {
    *out = ctx.dev_type == 0 ? mxc_cpu() : ctx;
    if (out->dev_type == MXC_CPU && out->dev_id >= 0) /* cpu(n): all the host */
        return MXC_OK;
    if (out->dev_type != MXC_GPU)
        return mxc__error(MXC_EINVAL, "%s: context (%d, %d) is neither a cpu(n) nor a gpu", fn,
                          out->dev_type, out->dev_id);
#ifndef MXC_USE_CUDA
    return mxc__error(MXC_ENODEV, "%s: gpu(%d): mxc was built without CUDA (USE_CUDA=1)", fn,
                      out->dev_id);
#else
    int n = mxc_gpu_count();
    if (out->dev_id < 0 || out->dev_id >= n)
        return mxc__error(MXC_ENODEV, "%s: gpu(%d) does not exist: this machine has %d GPU(s)", fn,
                          out->dev_id, n);
    return MXC_OK;
#endif
}

static void free_session(struct session *s);

static const char *or_default(const char *s, const char *d) { return s ? s : d; }

/* Binds model->sym for the iterator's batch shapes, or for slices of `rows` samples of
 * them when `rows` > 0. Parameters the model lacks are created and initialised with
 * `init` (when NULL, a missing parameter is an error). With `own` (or on a GPU) the
 * executor gets its own copies of the parameters instead of sharing the model's. */
/* Whether an argument is named as a label (MXNet's convention: softmax_label, lro_label). */
static bool is_label(const char *name) { return mxc__ends_with(name, "label"); }

/* Attribute `key` of variable `name` (an "__init__" hint, "__lr_mult__", ...), or NULL. */
static int var_attr(mxc_symbol *sym, const char *name, const char *key, const char **value) {
    int n = 0;
    const char *const *triples = NULL;
    *value = NULL;
    int rc = mxc_symbol_list_attrs(sym, &n, &triples);
    for (int i = 0; rc == MXC_OK && i < n; i++)
        if (strcmp(triples[3 * i], name) == 0 && strcmp(triples[3 * i + 1], key) == 0)
            *value = triples[3 * i + 2];
    return rc;
}

static int bind_session(mxc_model *m, mxc_data_iter *it, mxc_context ctx, const char *data_name,
                        const char *label_name, bool train, const mxc_init_config *init,
                        int64_t rows, bool own, struct session *s) {
    int rc = MXC_OK;
    memset(s, 0, sizeof *s);
    s->data_index = s->label_index = -1;
    s->on_device = is_gpu(ctx);
    s->own_params = s->on_device || own;
    mxc_shape dshape, lshape;
    MXC_TRY(mxc_data_iter_provide_data(it, &dshape));
    MXC_TRY(mxc_data_iter_provide_label(it, &lshape));
    if (rows > 0) {
        dshape.dims[0] = rows;
        if (lshape.ndim > 0)
            lshape.dims[0] = rows;
    }
    int na, nx;
    const char *const *arg_names, *const *aux_names;
    MXC_TRY(mxc_symbol_list_arguments(m->sym, &na, &arg_names));
    MXC_TRY(mxc_symbol_list_auxiliary_states(m->sym, &nx, &aux_names));
    s->arg_names = mxc__calloc((size_t)na + 1, sizeof *s->arg_names);
    MXC_CHECK(s->arg_names != NULL, MXC_ENOMEM, "model: out of memory");
    s->num_args = na;
    s->num_aux = nx;
    s->param_of = mxc__calloc((size_t)(na + nx) + 1, sizeof *s->param_of);
    MXC_CHECK(s->param_of != NULL, MXC_ENOMEM, "model: out of memory");
    for (int i = 0; i < na + nx; i++)
        s->param_of[i] = -1;
    for (int i = 0; i < na; i++)
        MXC_CHECK((s->arg_names[i] = mxc__strdup(arg_names[i])) != NULL, MXC_ENOMEM,
                  "model: out of memory");
    const char *in_names[2] = {data_name, label_name};
    mxc_shape in_shapes[2] = {dshape, lshape};
    int n_in = 0;
    for (int i = 0; i < na; i++) {
        if (strcmp(arg_names[i], data_name) == 0)
            s->data_index = i;
        else if (strcmp(arg_names[i], label_name) == 0 && lshape.ndim > 0)
            s->label_index = i;
    }
    MXC_CHECK(s->data_index >= 0, MXC_EINVAL, "model: the symbol has no argument %s", data_name);
    n_in = s->label_index >= 0 ? 2 : 1;
    mxc_shape *arg_s = mxc__calloc((size_t)(na + nx) + 1, sizeof *arg_s);
    mxc_ndarray **arrays = mxc__calloc((size_t)(2 * na + nx) + 1, sizeof *arrays);
    int *reqs = mxc__calloc((size_t)na + 1, sizeof *reqs);
    if (arg_s == NULL || arrays == NULL || reqs == NULL) {
        rc = mxc__error(MXC_ENOMEM, "model: out of memory");
        goto done;
    }
    int unknown = 0;
    rc = mxc_symbol_infer_shape(m->sym, n_in, in_names, in_shapes, arg_s, NULL, arg_s + na,
                                &unknown, NULL);
    if (rc == MXC_OK && unknown > 0)
        rc = mxc__error(MXC_ESHAPE,
                        "model: %d parameter shapes cannot be inferred from "
                        "the data shape",
                        unknown);
    for (int i = 0; rc == MXC_OK && i < na + nx; i++) {
        bool aux = i >= na;
        const char *name = aux ? aux_names[i - na] : arg_names[i];
        mxc_ndarray **slot = aux ? &arrays[2 * na + (i - na)] : &arrays[i];
        if (i == s->data_index || i == s->label_index) {
            rc = mxc_nd_create(&arg_s[i], MXC_FLOAT32, ctx, 1, slot);
            for (int t = 0; rc == MXC_OK && s->on_device && t < 2; t++)
                rc = mxc_nd_create(&arg_s[i], MXC_FLOAT32, ctx, 1,
                                   &s->stage[t][i == s->data_index ? 0 : 1]);
            continue;
        }
        int p = find_param(m, name, aux);
        /* no labels: the loss reads zeros (in inference, every label a loss head declares:
         * their forward ignores them) */
        if (!aux && (strcmp(name, label_name) == 0 || (!train && p < 0 && is_label(name)))) {
            rc = mxc_nd_zeros(&arg_s[i], MXC_FLOAT32, ctx, slot);
            continue;
        }
        mxc_shape have;
        if (p >= 0 && mxc_nd_get_shape(m->arrays[p], &have) == MXC_OK &&
            (have.ndim != arg_s[i].ndim ||
             memcmp(have.dims, arg_s[i].dims, sizeof(int64_t) * (size_t)have.ndim) != 0)) {
            char b1[128], b2[128];
            rc = mxc__error(MXC_ESHAPE, "model: parameter %s is %s, the data needs %s", name,
                            mxc__shape_str(&have, b1, sizeof b1),
                            mxc__shape_str(&arg_s[i], b2, sizeof b2));
            break;
        }
        if (p < 0) {
            if (init == NULL) {
                rc = mxc__error(MXC_EINVAL, "model: no value for parameter %s", name);
                break;
            }
            mxc_ndarray *a = NULL;
            const char *hint = NULL;
            rc = mxc_nd_create(&arg_s[i], MXC_FLOAT32, mxc_cpu(), 1, &a);
            if (rc == MXC_OK)
                rc = var_attr(m->sym, name, "__init__", &hint);
            if (rc == MXC_OK)
                rc = mxc_init_array_hinted(init, name, hint, a);
            if (rc == MXC_OK)
                rc = set_param(m, name, aux, a);
            else
                mxc_nd_free(a);
            p = m->num_params - 1;
        }
        if (rc == MXC_OK && !s->own_params) {
            rc = mxc_nd_reshape(m->arrays[p], &arg_s[i], slot); /* shares the memory */
        } else if (rc == MXC_OK) { /* a copy of the host parameter (same shape) */
            s->param_of[i] = p;
            rc = mxc_nd_create(&arg_s[i], MXC_FLOAT32, ctx, 1, slot);
            if (rc == MXC_OK)
                rc = mxc_nd_copy_to(m->arrays[p], *slot);
        }
        if (rc == MXC_OK && train && !aux) {
            reqs[i] = MXC_GRAD_WRITE;
            rc = mxc_nd_create(&arg_s[i], MXC_FLOAT32, ctx, 1, &arrays[na + i]);
        }
    }
    if (rc == MXC_OK)
        rc = mxc_executor_bind(m->sym, ctx, na, arrays, train ? arrays + na : NULL,
                               train ? reqs : NULL, nx, arrays + 2 * na, &s->exec);
    if (rc == MXC_OK)
        rc = mxc_executor_arrays(s->exec, NULL, &s->args, &s->grads, NULL, &s->aux);
done:
    for (int i = 0; arrays && i < 2 * na + nx; i++)
        mxc_nd_free(arrays[i]);
    mxc__free(arrays);
    mxc__free(arg_s);
    mxc__free(reqs);
fail:
    if (rc != MXC_OK)
        free_session(s);
    return rc;
}

/* Pushes the copy of the iterator's current batch (rows [begin, end) of it when end >
 * 0) into the executor's inputs: straight in on the CPU; on a GPU through this turn's
 * staging buffers, so that the upload waits for nothing the executor still reads. */
static int feed_rows(struct session *s, mxc_data_iter *it, int64_t begin, int64_t end) {
    mxc_ndarray *src[2] = {mxc_data_iter_data(it), mxc_data_iter_label(it)};
    const int index[2] = {s->data_index, s->label_index};
    int rc = MXC_OK;
    for (int k = 0; rc == MXC_OK && k < 2; k++) {
        if (index[k] < 0)
            continue;
        mxc_ndarray *from = src[k], *view = NULL;
        if (end > 0) {
            rc = mxc_nd_slice(src[k], begin, end, &view);
            from = view;
        }
        mxc_ndarray *stage = s->stage[s->turn][k];
        if (rc == MXC_OK && stage == NULL)
            rc = mxc_nd_copy_to(from, s->args[index[k]]);
        else if (rc == MXC_OK) {
            rc = mxc_nd_copy_to(from, stage);
            if (rc == MXC_OK)
                rc = mxc_nd_copy_to(stage, s->args[index[k]]);
        }
        mxc_nd_free(view); /* the copy pushed keeps the memory */
    }
    s->turn ^= 1;
    return rc;
}

static int feed(struct session *s, mxc_data_iter *it) { return feed_rows(s, it, 0, 0); }

/* With own copies (a GPU, several executors), pushes the copies of the trained parameters
 * (arguments and auxiliary states) back into the model's host arrays and waits for them;
 * otherwise they are the model's arrays already. */
static int sync_to_model(const struct session *s, mxc_model *m) {
    int rc = MXC_OK;
    for (int i = 0; s->own_params && s->exec && i < s->num_args + s->num_aux; i++) {
        int p = s->param_of[i];
        if (p < 0)
            continue;
        int r =
            mxc_nd_copy_to(i < s->num_args ? s->args[i] : s->aux[i - s->num_args], m->arrays[p]);
        if (r == MXC_OK)
            r = mxc_nd_wait_to_read(m->arrays[p]);
        if (rc == MXC_OK)
            rc = r;
    }
    return rc;
}

static mxc_ndarray *first_output(const struct session *s) {
    int n;
    mxc_ndarray *const *outs;
    return mxc_executor_outputs(s->exec, &n, &outs) == MXC_OK && n > 0 ? outs[0] : NULL;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double metric_value(mxc_metric *metric, const char **name) {
    int n;
    const char *const *names;
    const double *values;
    if (mxc_metric_get(metric, &n, &names, &values) != MXC_OK || n < 1)
        return NAN;
    if (name)
        *name = names[0];
    return values[0];
}

/* One pass over `it` in inference mode, feeding `metric` (if any) and `collect`. */
static int evaluate(struct session *s, mxc_data_iter *it, mxc_metric *metric,
                    int (*collect)(void *, const struct session *, int64_t), void *user) {
    int rc = mxc_data_iter_reset(it), more;
    while (rc == MXC_OK && (more = mxc_data_iter_next(it)) == 1) {
        rc = feed(s, it);
        if (rc == MXC_OK)
            rc = mxc_executor_forward(s->exec, 0);
        mxc_ndarray *out = first_output(s), *label = mxc_data_iter_label(it);
        int64_t pad = mxc_data_iter_pad(it);
        if (rc == MXC_OK && metric)
            rc = mxc_metric_update(metric, 1, &label, &out, (int)pad);
        if (rc == MXC_OK && collect)
            rc = collect(user, s, pad);
    }
    if (rc == MXC_OK && more < 0)
        rc = more;
    return rc;
}

/* Waits for what the session's work writes (its arguments, gradients, auxiliary states and
 * outputs) and returns the first failure found there. Only its own arrays: another
 * thread's work on the engine neither holds it up nor has its failures reported here. */
static int wait_session(const struct session *s) {
    int n_args = 0, n_aux = 0, n_out = 0, rc = MXC_OK;
    mxc_ndarray *const *args = NULL, *const *grads = NULL, *const *aux = NULL, *const *outs = NULL;
    if (s->exec == NULL)
        return MXC_OK;
    rc = mxc_executor_arrays(s->exec, &n_args, &args, &grads, &n_aux, &aux);
    if (rc == MXC_OK)
        rc = mxc_executor_outputs(s->exec, &n_out, &outs);
    mxc_ndarray *const *lists[] = {args, grads, aux, outs};
    const int counts[] = {n_args, n_args, n_aux, n_out};
    for (size_t l = 0; l < MXC_ARRAY_SIZE(lists); l++) {
        for (int i = 0; i < counts[l]; i++) {
            int r = lists[l][i] ? mxc_nd_wait_to_read(lists[l][i]) : MXC_OK;
            if (rc == MXC_OK)
                rc = r; /* the first failure, having waited for everything */
        }
    }
    return rc;
}

static void free_session(struct session *s) {
    mxc_executor_free(s->exec);
    for (int i = 0; s->arg_names && i < s->num_args; i++)
        mxc__free(s->arg_names[i]);
    mxc__free(s->arg_names);
    mxc__free(s->param_of);
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 2; k++)
            mxc_nd_free(s->stage[t][k]);
    memset(s, 0, sizeof *s);
}

/* ---- Fit ---------------------------------------------------------------------------- */

void mxc_fit_config_init(mxc_fit_config *c) {
    if (c == NULL)
        return;
    *c = (mxc_fit_config){.num_epochs = 1,
                          .optimizer = {.kind = MXC_OPT_SGD, .lr = 0.01f},
                          .init = {.kind = MXC_INIT_XAVIER, .xavier_magnitude = 3},
                          .metric = "acc",
                          .frequent = 50};
}

static void format_duration(double s, char *buf, size_t size) {
    if (!(s >= 0) || s > 1e7)
        snprintf(buf, size, "?");
    else if (s >= 3600)
        snprintf(buf, size, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60)
        snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, size, "%.1fs", s);
}

void mxc_fit_print_progress(const mxc_fit_progress *p, void *user) {
    (void)user;
    if (p == NULL)
        return; /* nothing to report */
    const char *metric = p->metric_name ? p->metric_name : "metric";
    char left[32], took[32];
    format_duration(p->seconds_left, left, sizeof left);
    format_duration(p->seconds, took, sizeof took);
    if (!p->end_of_epoch) {
        fprintf(stderr,
                "Epoch[%d] Batch [%lld/%lld]\tSpeed: %.1f samples/sec\t%s=%.6f\t"
                "(%s left)\n",
                p->epoch, (long long)p->batch, (long long)p->num_batches, p->samples_per_s, metric,
                p->train_metric, left);
        return;
    }
    fprintf(stderr, "Epoch[%d] Train-%s=%.6f\tSpeed: %.1f samples/sec\n", p->epoch, metric,
            p->train_metric, p->samples_per_s);
    if (!isnan(p->eval_metric))
        fprintf(stderr, "Epoch[%d] Validation-%s=%.6f\n", p->epoch, metric, p->eval_metric);
    fprintf(stderr, "Epoch[%d] Time so far %s, %s left%s%s\n", p->epoch, took, left,
            p->checkpoint ? "; saved " : "", p->checkpoint ? p->checkpoint : "");
}

/* The contexts of a fit: cfg->ctxs when set, else cfg->ctx; resolved into `out` (room for
 * max(1, num_ctxs)). */
static int fit_contexts(const mxc_fit_config *c, mxc_context *out, int *num) {
    *num = c->ctxs && c->num_ctxs > 0 ? c->num_ctxs : 1;
    for (int k = 0; k < *num; k++) {
        int rc = resolve_context("mxc_model_fit", c->ctxs && c->num_ctxs > 0 ? c->ctxs[k] : c->ctx,
                                 &out[k]);
        if (rc != MXC_OK)
            return rc;
    }
    return MXC_OK;
}

#define FIT_MAX_CTXS 64

static int check_fit_args(const mxc_model *m, mxc_data_iter *train, mxc_data_iter *eval,
                          const mxc_fit_config *c) {
    int rc = check_model(m, "mxc_model_fit");
    if (rc != MXC_OK)
        return rc;
    if (train == NULL || c == NULL)
        return mxc__error(MXC_EINVAL, "mxc_model_fit: NULL iterator or config");
    rc = mxc__data_iter_check(train, "mxc_model_fit", "train");
    if (rc == MXC_OK && eval != NULL)
        rc = mxc__data_iter_check(eval, "mxc_model_fit", "eval");
    if (rc != MXC_OK)
        return rc;
    if (c->num_epochs < 1 || c->begin_epoch < 0 || c->frequent < 0)
        return mxc__error(MXC_EINVAL, "mxc_model_fit: %d epochs from %d, report every %d",
                          c->num_epochs, c->begin_epoch, c->frequent);
    if (c->num_ctxs < 0 || c->num_ctxs > FIT_MAX_CTXS || (c->num_ctxs > 0 && c->ctxs == NULL))
        return mxc__error(MXC_EINVAL, "mxc_model_fit: %d contexts (at most %d) at %p", c->num_ctxs,
                          FIT_MAX_CTXS, (const void *)c->ctxs);
    if (c->kvstore && strcmp(c->kvstore, "local") != 0 && strcmp(c->kvstore, "device") != 0 &&
        strcmp(c->kvstore, "dist_sync") != 0)
        return mxc__error(MXC_EINVAL,
                          "mxc_model_fit: kvstore \"%s\" is none of local, device, dist_sync",
                          c->kvstore);
    mxc_context ctxs[FIT_MAX_CTXS];
    int n;
    return fit_contexts(c, ctxs, &n);
}

/* The parts of a fit that outlive one epoch. */
struct fit {
    const mxc_fit_config *cfg;
    mxc_model *model;
    mxc_context ctx; /* the first context: evaluation runs there */
    int num_sess;    /* one executor per context */
    struct session *train;
    int64_t *rows;   /* session k trains on rows [rows[k], rows[k + 1]) of each batch */
    mxc_kvstore *kv; /* NULL: the optimizer updates the one executor's parameters */
    int num_keys, *keys, rank, workers;
    mxc_optimizer *opt;
    mxc_metric *metric;
    mxc_fit_progress prog;
    int64_t batch_size;    /* this process's batch */
    int64_t epoch_batches; /* batches trained per epoch: the iterator's, or fewer (dist_sync) */
    double start;
};

static void report(struct fit *f) {
    if (f->cfg->quiet || f->rank != 0)
        return;
    mxc_fit_callback cb = f->cfg->callback ? f->cfg->callback : mxc_fit_print_progress;
    cb(&f->prog, f->cfg->user);
}

/* Pushes one batch's work: inputs, forward, backward, updates; then the metric. */
static int train_batch(struct fit *f, mxc_data_iter *it) {
    struct session *s = &f->train[0];
    int rc = feed(s, it);
    if (rc == MXC_OK)
        rc = mxc_executor_forward(s->exec, 1);
    if (rc == MXC_OK)
        rc = mxc_executor_backward(s->exec, 0, NULL);
    for (int i = 0; rc == MXC_OK && i < s->num_args; i++)
        if (s->grads[i] != NULL)
            rc = mxc_optimizer_update(f->opt, i, s->arg_names[i], s->args[i], s->grads[i]);
    mxc_ndarray *out = first_output(s), *label = mxc_data_iter_label(it);
    if (rc == MXC_OK)
        rc = mxc_metric_update(f->metric, 1, &label, &out, (int)mxc_data_iter_pad(it));
    return rc;
}

/* Pushes, for every parameter (key i = its argument index) in order, the gradients of all
 * executors to the store with priority -i (MXNet's order: the first layers' weights,
 * needed first by the next forward, come first among those ready) and pulls the
 * updated weights back into every executor. With `init`, only the pull (the store's
 * initial weights, rank 0's for dist_sync). */
static int exchange(struct fit *f, bool init) {
    int K = f->num_sess, rc = MXC_OK;
    int keys[FIT_MAX_CTXS];
    mxc_ndarray *grads[FIT_MAX_CTXS], *args[FIT_MAX_CTXS];
    for (int j = 0; rc == MXC_OK && j < f->num_keys; j++) {
        int key = f->keys[j];
        for (int k = 0; k < K; k++) {
            keys[k] = key;
            grads[k] = f->train[k].grads[key];
            args[k] = f->train[k].args[key];
        }
        rc = init ? mxc_kvstore_pull(f->kv, K, keys, args, -key)
                  : mxc_kvstore_pushpull(f->kv, K, keys, grads, args, -key);
    }
    return rc;
}

/* The batch split across the executors, gradients summed (and the optimizer run) by the
 * store; the metric sees every slice. */
static int train_batch_kv(struct fit *f, mxc_data_iter *it) {
    int rc = MXC_OK;
    for (int k = 0; rc == MXC_OK && k < f->num_sess; k++) {
        struct session *s = &f->train[k];
        rc = feed_rows(s, it, f->rows[k], f->rows[k + 1]);
        if (rc == MXC_OK)
            rc = mxc_executor_forward(s->exec, 1);
        if (rc == MXC_OK)
            rc = mxc_executor_backward(s->exec, 0, NULL);
    }
    if (rc == MXC_OK)
        rc = exchange(f, false);
    int64_t pad = mxc_data_iter_pad(it), b = f->rows[f->num_sess];
    for (int k = 0; rc == MXC_OK && k < f->num_sess; k++) {
        int64_t lo = f->rows[k], hi = f->rows[k + 1];
        int64_t kpad = pad - (b - hi); /* padding is at the batch's end */
        kpad = kpad < 0 ? 0 : kpad > hi - lo ? hi - lo : kpad;
        mxc_ndarray *out = first_output(&f->train[k]), *label = NULL;
        rc = mxc_nd_slice(mxc_data_iter_label(it), lo, hi, &label);
        if (rc == MXC_OK)
            rc = mxc_metric_update(f->metric, 1, &label, &out, (int)kpad);
        mxc_nd_free(label);
    }
    return rc;
}

/* Waits for every executor's work; the first failure. */
static int wait_all(const struct fit *f) {
    int rc = MXC_OK;
    for (int k = 0; k < f->num_sess; k++) {
        int r = wait_session(&f->train[k]);
        if (rc == MXC_OK)
            rc = r;
    }
    return rc;
}

/* With several executors, each keeps its own auxiliary states (BatchNorm's moving
 * statistics of its slice of the batches): at the end of an epoch they are averaged and
 * the average is given back to every executor, as MXNet's Module does (get_params, then
 * set_params). Small arrays, read and written synchronously on the host. */
static int average_aux(const struct fit *f) {
    const struct session *s0 = &f->train[0];
    int rc = MXC_OK;
    for (int i = 0; rc == MXC_OK && f->num_sess > 1 && i < s0->num_aux; i++) {
        size_t n = (size_t)mxc_nd_size(s0->aux[i]), bytes = n * sizeof(float);
        float *sum = mxc__calloc(n + 1, sizeof *sum), *one = mxc__malloc(bytes + 1);
        if (sum == NULL || one == NULL)
            rc = mxc__error(MXC_ENOMEM, "mxc_model_fit: out of memory");
        for (int k = 0; rc == MXC_OK && k < f->num_sess; k++) {
            rc = mxc_nd_sync_copy_to_cpu(f->train[k].aux[i], one, bytes);
            for (size_t j = 0; rc == MXC_OK && j < n; j++)
                sum[j] += one[j];
        }
        for (size_t j = 0; j < n && sum; j++)
            sum[j] /= (float)f->num_sess;
        for (int k = 0; rc == MXC_OK && k < f->num_sess; k++)
            rc = mxc_nd_sync_copy_from_cpu(f->train[k].aux[i], sum, bytes);
        mxc__free(sum);
        mxc__free(one);
    }
    return rc;
}

static void states_path(const char *prefix, int epoch, char *path, size_t size) {
    snprintf(path, size, "%s-%04d.states", prefix, epoch);
}

static int run_epoch(struct fit *f, int e, mxc_data_iter *train, mxc_data_iter *eval,
                     mxc_metric *eval_metric) {
    const mxc_fit_config *c = f->cfg;
    int64_t nb = f->epoch_batches, b = 0;
    int64_t global_batch = f->batch_size * f->workers;
    int rc = mxc_metric_reset(f->metric), more = 0;
    if (rc == MXC_OK)
        rc = mxc_data_iter_reset(train);
    double epoch_start = now_s(), mark = epoch_start;
    int64_t mark_batch = 0;
    f->prog = (mxc_fit_progress){.epoch = c->begin_epoch + e,
                                 .num_batches = nb,
                                 .metric_name = f->prog.metric_name,
                                 .eval_metric = NAN};
    while (rc == MXC_OK && b < nb && (more = mxc_data_iter_next(train)) == 1) {
        rc = f->kv ? train_batch_kv(f, train) : train_batch(f, train);
        b++;
        if (rc == MXC_OK && c->frequent > 0 && b % c->frequent == 0) {
            double t = now_s(), per_batch = (t - f->start) / (double)(e * nb + b);
            f->prog.batch = b;
            f->prog.samples_per_s = (double)((b - mark_batch) * global_batch) / (t - mark);
            f->prog.seconds = t - f->start;
            f->prog.seconds_left = per_batch * (double)((c->num_epochs - e) * nb - b);
            f->prog.train_metric = metric_value(f->metric, &f->prog.metric_name);
            report(f);
            mark = t;
            mark_batch = b;
        }
    }
    if (rc == MXC_OK && more < 0)
        rc = more;
    if (rc == MXC_OK)
        rc = wait_all(f);
    if (rc == MXC_OK)
        rc = average_aux(f);
    if (rc == MXC_OK) /* for evaluation and the checkpoint: every replica holds the same */
        rc = sync_to_model(&f->train[0], f->model);
    if (rc != MXC_OK)
        return rc;
    double t = now_s();
    f->prog.batch = b;
    f->prog.end_of_epoch = 1;
    f->prog.samples_per_s = (double)(b * global_batch) / (t - epoch_start);
    f->prog.train_metric = metric_value(f->metric, &f->prog.metric_name);
    if (eval && f->rank == 0) { /* dist_sync: rank 0 alone, on the whole eval set */
        struct session es;
        rc = mxc_metric_reset(eval_metric);
        if (rc == MXC_OK)
            rc = bind_session(f->model, eval, f->ctx, or_default(c->data_name, "data"),
                              or_default(c->label_name, "softmax_label"), false, NULL, 0, false,
                              &es);
        if (rc == MXC_OK) {
            rc = evaluate(&es, eval, eval_metric, NULL, NULL);
            free_session(&es);
        }
        f->prog.eval_metric = metric_value(eval_metric, NULL);
    }
    char path[4096];
    int epoch = c->begin_epoch + e + 1;
    if (rc == MXC_OK && c->checkpoint_prefix && f->rank == 0) {
        rc = mxc_model_save(f->model, c->checkpoint_prefix, epoch);
        if (rc == MXC_OK && c->optimizer_states) {
            states_path(c->checkpoint_prefix, epoch, path, sizeof path);
            rc = mxc__in_call("mxc_model_fit", mxc_optimizer_save_states(f->opt, path));
        }
        snprintf(path, sizeof path, "%s-%04d.params", c->checkpoint_prefix, epoch);
        f->prog.checkpoint = path;
    }
    t = now_s();
    f->prog.seconds = t - f->start;
    f->prog.seconds_left = (t - f->start) / (e + 1) * (c->num_epochs - e - 1);
    if (rc == MXC_OK)
        report(f);
    f->prog.checkpoint = NULL;
    return rc;
}

/* Multiplier attribute `key` of parameter `name` into `*mult` (kept when absent). */
static int attr_mult(mxc_symbol *sym, const char *name, const char *key, float *mult) {
    const char *v = NULL;
    int rc = var_attr(sym, name, key, &v);
    if (rc != MXC_OK || v == NULL)
        return rc;
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end != '\0' || errno != 0 || !(d >= 0) || d > 1e30)
        return mxc__error(MXC_EINVAL, "mxc_model_fit: %s's %s \"%s\" is not a number >= 0", name,
                          key, v);
    *mult = (float)d;
    return MXC_OK;
}

/* Each trained parameter's multipliers as MXNet's Module gives them: weight decay only
 * for names ending in _weight or _gamma, then the variables' __lr_mult__ and __wd_mult__
 * attributes. The optimizer knows a parameter by its argument name, or through a store by
 * its key in decimal (mxc_kvstore_set_optimizer). */
static int set_param_mults(struct fit *f) {
    const struct session *s = &f->train[0];
    int rc = MXC_OK;
    for (int i = 0; i < s->num_args; i++) {
        if (s->grads[i] == NULL)
            continue;
        const char *name = s->arg_names[i];
        float lr_mult = 1,
              wd_mult = mxc__ends_with(name, "_weight") || mxc__ends_with(name, "_gamma");
        MXC_TRY(attr_mult(f->model->sym, name, "__lr_mult__", &lr_mult));
        MXC_TRY(attr_mult(f->model->sym, name, "__wd_mult__", &wd_mult));
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        MXC_TRY(mxc_optimizer_set_mult(f->opt, f->kv ? key : name, lr_mult, wd_mult));
    }
fail:
    return rc;
}

/* With cfg->optimizer_states, a resumed fit (begin_epoch > 0) loads the optimizer state
 * saved beside its checkpoint; a missing file is a warning (fresh states). */
static int load_states(struct fit *f) {
    const mxc_fit_config *c = f->cfg;
    if (!c->optimizer_states || c->begin_epoch == 0 || c->checkpoint_prefix == NULL)
        return MXC_OK;
    char path[4096];
    states_path(c->checkpoint_prefix, c->begin_epoch, path, sizeof path);
    if (access(path, F_OK) != 0) {
        mxc__log(MXC_LOG_WARN, "mxc_model_fit: no optimizer state %s: starting with fresh states",
                 path);
        return MXC_OK;
    }
    return mxc__in_call("mxc_model_fit", mxc_optimizer_load_states(f->opt, path));
}

/* dist_sync: every rank must run as many batches per epoch (each batch is an exchange
 * with every other rank). The ranks learn each other's counts through the store, on key
 * `key` (one past the parameters'): each pushes a vector with its count at its rank's
 * place. All then train on the smallest count per epoch; a rank whose shard has more
 * batches leaves the rest of each epoch out, saying so. */
static int agree_batches(struct fit *f, mxc_data_iter *train, int key) {
    int64_t mine = mxc_data_iter_num_batches(train);
    mxc_shape shape = {1, {f->workers}};
    float *counts = mxc__calloc((size_t)f->workers, sizeof *counts);
    mxc_ndarray *a = NULL;
    int rc = counts ? mxc_nd_zeros(&shape, MXC_FLOAT32, mxc_cpu(), &a)
                    : mxc__error(MXC_ENOMEM, "mxc_model_fit: out of memory");
    if (rc == MXC_OK)
        rc = mxc__in_call("mxc_model_fit", mxc_kvstore_init(f->kv, 1, &key, &a));
    if (rc == MXC_OK && mine >= (1 << 24))
        rc = mxc__error(MXC_EINVAL,
                        "mxc_model_fit: %lld batches per epoch is too many for "
                        "dist_sync (at most 2^24)",
                        (long long)mine);
    if (rc == MXC_OK) {
        counts[f->rank] = (float)mine;
        rc = mxc_nd_sync_copy_from_cpu(a, counts, sizeof(float) * (size_t)f->workers);
    }
    if (rc == MXC_OK)
        rc = mxc__in_call("mxc_model_fit", mxc_kvstore_pushpull(f->kv, 1, &key, &a, &a, 0));
    if (rc == MXC_OK)
        rc = mxc_nd_sync_copy_to_cpu(a, counts, sizeof(float) * (size_t)f->workers);
    int least = 0;
    for (int r = 1; rc == MXC_OK && r < f->workers; r++)
        least = counts[r] < counts[least] ? r : least;
    if (rc == MXC_OK) {
        f->epoch_batches = (int64_t)counts[least];
        if (mine > f->epoch_batches)
            mxc__log(MXC_LOG_WARN,
                     "mxc_model_fit: rank %d trains on %lld of its %lld batches per epoch, as "
                     "many as rank %d's shard has (give the ranks equal shards to use them all)",
                     f->rank, (long long)f->epoch_batches, (long long)mine, least);
    }
    mxc_nd_free(a);
    mxc__free(counts);
    return rc;
}

/* Binds one executor per context on its slice of the batch (B over K: B / K rows each,
 * the first B % K one more), creates the store, initialises a key per trained parameter
 * from the model (rank 0's for dist_sync) and pulls it into every executor. */
static int setup_kv(struct fit *f, mxc_data_iter *train, const mxc_context *ctxs,
                    const char *type) {
    const mxc_fit_config *c = f->cfg;
    int K = f->num_sess, rc = MXC_OK;
    if (f->batch_size < K)
        return mxc__error(MXC_EINVAL,
                          "mxc_model_fit: a batch of %lld cannot be split across %d contexts",
                          (long long)f->batch_size, K);
    f->rows = mxc__calloc((size_t)K + 1, sizeof *f->rows);
    if (f->rows == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_model_fit: out of memory");
    for (int k = 0; k < K; k++)
        f->rows[k + 1] = f->rows[k] + f->batch_size / K + (k < f->batch_size % K ? 1 : 0);
    for (int k = 0; rc == MXC_OK && k < K; k++)
        rc = bind_session(f->model, train, ctxs[k], or_default(c->data_name, "data"),
                          or_default(c->label_name, "softmax_label"), true, &c->init,
                          f->rows[k + 1] - f->rows[k], true, &f->train[k]);
    if (rc == MXC_OK)
        rc = mxc__in_call("mxc_model_fit", mxc_kvstore_create(type, &f->kv));
    if (rc == MXC_OK)
        rc = mxc_kvstore_rank(f->kv, &f->rank);
    if (rc == MXC_OK)
        rc = mxc_kvstore_num_workers(f->kv, &f->workers);
    struct session *s = &f->train[0];
    f->keys = rc == MXC_OK ? mxc__calloc((size_t)s->num_args + 1, sizeof *f->keys) : NULL;
    mxc_ndarray **values =
        rc == MXC_OK ? mxc__calloc((size_t)s->num_args + 1, sizeof *values) : NULL;
    if (rc == MXC_OK && (f->keys == NULL || values == NULL))
        rc = mxc__error(MXC_ENOMEM, "mxc_model_fit: out of memory");
    for (int i = 0; rc == MXC_OK && i < s->num_args; i++) {
        if (s->grads[i] == NULL || s->param_of[i] < 0)
            continue;
        f->keys[f->num_keys] = i;
        values[f->num_keys++] = f->model->arrays[s->param_of[i]];
    }
    if (rc == MXC_OK)
        rc = mxc__in_call("mxc_model_fit", mxc_kvstore_init(f->kv, f->num_keys, f->keys, values));
    mxc__free(values);
    if (rc == MXC_OK)
        rc = exchange(f, true);
    if (rc == MXC_OK && f->workers > 1)
        rc = agree_batches(f, train, s->num_args);
    return rc;
}

int mxc_model_fit(mxc_model *m, mxc_data_iter *train, mxc_data_iter *eval, const mxc_fit_config *c,
                  mxc_fit_result *result) {
    int rc = check_fit_args(m, train, eval, c);
    if (rc != MXC_OK)
        return rc;
    struct fit f = {.cfg = c, .model = m, .start = now_s(), .workers = 1};
    mxc_metric *eval_metric = NULL;
    mxc_shape dshape;
    mxc_context ctxs[FIT_MAX_CTXS];
    const char *metric = or_default(c->metric, "acc");
    MXC_TRY(fit_contexts(c, ctxs, &f.num_sess));
    f.ctx = ctxs[0];
    /* a store when asked for, or for several contexts */
    const char *kv_type = c->kvstore ? c->kvstore : f.num_sess > 1 ? "local" : NULL;
    MXC_TRY(mxc_data_iter_provide_data(train, &dshape));
    f.batch_size = dshape.dims[0];
    f.epoch_batches = mxc_data_iter_num_batches(train);
    MXC_TRY(mxc_metric_create(metric, c->top_k, &f.metric));
    MXC_TRY(mxc_metric_create(metric, c->top_k, &eval_metric));
    f.prog.metric_name = metric;
    MXC_TRY(mxc_random_seed(c->seed));
    f.train = mxc__calloc((size_t)f.num_sess, sizeof *f.train);
    MXC_CHECK(f.train != NULL, MXC_ENOMEM, "mxc_model_fit: out of memory");
    if (kv_type)
        MXC_TRY(setup_kv(&f, train, ctxs, kv_type));
    else
        MXC_TRY(bind_session(m, train, f.ctx, or_default(c->data_name, "data"),
                             or_default(c->label_name, "softmax_label"), true, &c->init, 0, false,
                             &f.train[0]));
    mxc_optimizer_config oc = c->optimizer;
    if (oc.rescale_grad == 0) /* the loss gradients are sums over the (global) batch */
        oc.rescale_grad = 1.0f / (float)(f.batch_size * f.workers);
    MXC_TRY(mxc_optimizer_create(&oc, &f.opt));
    MXC_TRY(set_param_mults(&f));
    MXC_TRY(load_states(&f));
    if (f.kv)
        MXC_TRY(mxc__in_call("mxc_model_fit", mxc_kvstore_set_optimizer(f.kv, f.opt)));
    for (int e = 0; e < c->num_epochs; e++)
        MXC_TRY(run_epoch(&f, e, train, eval, eval_metric));
    if (result) {
        double t = now_s() - f.start;
        int64_t samples = f.epoch_batches * f.batch_size * f.workers * c->num_epochs;
        *result = (mxc_fit_result){f.prog.train_metric, f.prog.eval_metric, (double)samples / t, t,
                                   c->num_epochs};
    }
fail:
    if (f.train) {
        wait_all(&f);           /* return with this fit's work done, whatever failed */
        mxc_kvstore_free(f.kv); /* after its pending pushes, which use the optimizer */
        for (int k = 0; k < f.num_sess; k++)
            free_session(&f.train[k]);
    }
    mxc__free(f.train);
    mxc__free(f.rows);
    mxc__free(f.keys);
    mxc_optimizer_free(f.opt);
    mxc_metric_free(f.metric);
    mxc_metric_free(eval_metric);
    return rc;
}

/* ---- Score and predict -------------------------------------------------------------- */

/* mxc_model_score_on for public function `fn`. */
static int score(const char *fn, mxc_model *m, mxc_context ctx, mxc_data_iter *it,
                 const char *metric_name, double *value) {
    int rc = check_model(m, fn);
    if (rc != MXC_OK)
        return rc;
    if (it == NULL || value == NULL)
        return mxc__error(MXC_EINVAL, "%s: NULL argument", fn);
    *value = NAN;
    rc = mxc__data_iter_check(it, fn, "iterator");
    if (rc == MXC_OK)
        rc = resolve_context(fn, ctx, &ctx);
    if (rc != MXC_OK)
        return rc;
    mxc_metric *metric = NULL;
    struct session s;
    rc = mxc_metric_create(or_default(metric_name, "acc"), 1, &metric);
    if (rc == MXC_OK)
        rc = bind_session(m, it, ctx, "data", "softmax_label", false, NULL, 0, false, &s);
    if (rc == MXC_OK) {
        rc = evaluate(&s, it, metric, NULL, NULL);
        free_session(&s);
    }
    *value = rc == MXC_OK ? metric_value(metric, NULL) : NAN;
    mxc_metric_free(metric);
    return rc;
}

int mxc_model_score(mxc_model *m, mxc_data_iter *it, const char *metric_name, double *value) {
    return score(__func__, m, mxc_cpu(), it, metric_name, value);
}

int mxc_model_score_on(mxc_model *m, mxc_context ctx, mxc_data_iter *it, const char *metric_name,
                       double *value) {
    return score(__func__, m, ctx, it, metric_name, value);
}

/* Rows of one output's predictions, grown batch by batch on the host. */
struct rows {
    float *data;
    int64_t num_rows, row_size, cap_rows;
    mxc_shape row_shape;
};

/* Every output's rows: `want` outputs (1: the first, else all). */
struct predictions {
    int want, num;
    struct rows *outs;
};

static int collect_rows(struct rows *r, mxc_ndarray *out, int64_t pad) {
    mxc_shape s;
    int rc = mxc_nd_get_shape(out, &s);
    if (rc != MXC_OK)
        return rc;
    int64_t n = s.dims[0], size = mxc_nd_size(out), keep = n - pad;
    if (r->row_size == 0) {
        r->row_size = n ? size / n : 0;
        r->row_shape = s;
    }
    float *batch = mxc__malloc(sizeof(float) * (size_t)(size + 1));
    if (batch == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_model_predict: out of memory");
    rc = mxc_nd_sync_copy_to_cpu(out, batch, sizeof(float) * (size_t)size);
    if (rc == MXC_OK && r->num_rows + keep > r->cap_rows) {
        int64_t cap = 2 * (r->num_rows + keep);
        float *d = mxc__realloc(r->data, sizeof(float) * (size_t)(cap * r->row_size + 1));
        if (d == NULL)
            rc = mxc__error(MXC_ENOMEM, "mxc_model_predict: out of memory");
        else {
            r->data = d;
            r->cap_rows = cap;
        }
    }
    if (rc == MXC_OK) {
        memcpy(r->data + r->num_rows * r->row_size, batch,
               sizeof(float) * (size_t)(keep * r->row_size));
        r->num_rows += keep;
    }
    mxc__free(batch);
    return rc;
}

static int collect_outputs(void *user, const struct session *s, int64_t pad) {
    struct predictions *p = user;
    int n = 0;
    mxc_ndarray *const *outs = NULL;
    int rc = mxc_executor_outputs(s->exec, &n, &outs);
    if (rc == MXC_OK && p->outs == NULL) {
        p->num = p->want == 1 && n > 0 ? 1 : n;
        p->outs = mxc__calloc((size_t)p->num + 1, sizeof *p->outs);
        if (p->outs == NULL)
            return mxc__error(MXC_ENOMEM, "mxc_model_predict: out of memory");
    }
    for (int k = 0; rc == MXC_OK && k < p->num; k++)
        rc = collect_rows(&p->outs[k], outs[k], pad);
    return rc;
}

/* mxc_model_predict_on (want 1) and mxc_model_predict_outputs (want 0: all) for public
 * function `fn`. */
static int predict(const char *fn, mxc_model *m, mxc_context ctx, mxc_data_iter *it, int want,
                   int *num, mxc_ndarray **out) {
    int rc = check_model(m, fn);
    if (rc != MXC_OK)
        return rc;
    if (it == NULL || out == NULL || num == NULL)
        return mxc__error(MXC_EINVAL, "%s: NULL argument", fn);
    *num = 0;
    rc = mxc__data_iter_check(it, fn, "iterator");
    if (rc == MXC_OK)
        rc = resolve_context(fn, ctx, &ctx);
    if (rc != MXC_OK)
        return rc;
    struct session s;
    struct predictions p = {want, 0, NULL};
    rc = bind_session(m, it, ctx, "data", "softmax_label", false, NULL, 0, false, &s);
    if (rc == MXC_OK) {
        rc = evaluate(&s, it, NULL, collect_outputs, &p);
        free_session(&s);
    }
    int made = 0;
    for (; rc == MXC_OK && made < p.num; made++) {
        const struct rows *r = &p.outs[made];
        mxc_shape shape = r->row_shape;
        shape.dims[0] = r->num_rows;
        rc = mxc_nd_create(&shape, MXC_FLOAT32, mxc_cpu(), 0, &out[made]);
        if (rc == MXC_OK && r->num_rows > 0)
            rc = mxc_nd_sync_copy_from_cpu(out[made], r->data,
                                           sizeof(float) * (size_t)(r->num_rows * r->row_size));
        if (rc != MXC_OK)
            made++; /* freed below with the others */
    }
    if (rc == MXC_OK)
        *num = p.num;
    for (int k = 0; rc != MXC_OK && k < made; k++) {
        mxc_nd_free(out[k]);
        out[k] = NULL;
    }
    for (int k = 0; k < p.num; k++)
        mxc__free(p.outs[k].data);
    mxc__free(p.outs);
    return rc;
}

int mxc_model_predict(mxc_model *m, mxc_data_iter *it, mxc_ndarray **out) {
    return mxc_model_predict_on(m, mxc_cpu(), it, out);
}

int mxc_model_predict_on(mxc_model *m, mxc_context ctx, mxc_data_iter *it, mxc_ndarray **out) {
    int num = 0;
    if (out)
        *out = NULL;
    return predict(__func__, m, ctx, it, 1, &num, out);
}

int mxc_model_predict_outputs(mxc_model *m, mxc_context ctx, mxc_data_iter *it, int *num,
                              mxc_ndarray ***outs) {
    if (num)
        *num = 0;
    if (outs == NULL || num == NULL)
        return mxc__error(MXC_EINVAL, "mxc_model_predict_outputs: NULL argument");
    *outs = NULL;
    int n = 0, rc = check_model(m, __func__);
    const char *const *names = NULL;
    if (rc == MXC_OK)
        rc = mxc__in_call(__func__, mxc_symbol_list_outputs(m->sym, &n, &names));
    if (rc != MXC_OK)
        return rc;
    mxc_ndarray **arrays = mxc__calloc((size_t)n + 1, sizeof *arrays);
    if (arrays == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_model_predict_outputs: out of memory");
    rc = predict(__func__, m, ctx, it, 0, num, arrays);
    if (rc != MXC_OK)
        mxc__free(arrays);
    else
        *outs = arrays;
    return rc;
}

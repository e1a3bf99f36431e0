/*
 * model/metric.c — evaluation metrics (mxc/model.h): accuracy, top-k accuracy,
 * cross-entropy and mean squared error accumulated over batches on the host, and a
 * composite that updates a list of them together.
 */
#include "mxc/model.h"

#include "common/common.h"
#include "common/handle.h"
#include "ndarray/ndarray_impl.h"

#include <math.h>
#include <string.h>

#define METRIC_MAGIC 0x4d545243u /* "MTRC" */
#define METRIC_DEAD  0x4d545246u /* "MTRF": freed (common/handle.h) */

enum kind { ACC, TOP_K, CE, MSE, COMPOSITE };

static const char *const kind_names[] = {"acc", "top_k_accuracy", "ce", "mse", "composite"};
static const char *const value_names[] = {"accuracy", "top_k_accuracy", "cross-entropy", "mse",
                                          "composite"};

struct mxc_metric {
    _Atomic uint32_t magic;
    int kind, top_k;
    double sum, count;
    mxc_metric **children;
    int num_children;
    const char **names; /* what mxc_metric_get reports */
    double *values;
};

static mxc__handle_kind metric_kind =
    MXC__HANDLE_KIND(struct mxc_metric, "a metric", METRIC_MAGIC, METRIC_DEAD);

/* Frees `m` (live or never published) with the children it took over. */
static void metric_destroy(mxc_metric *m) {
    for (int c = 0; c < m->num_children; c++)
        mxc_metric_free(m->children[c]);
    mxc__free(m->children);
    mxc__free(m->names);
    mxc__free(m->values);
    mxc__handle_free(&metric_kind, m);
}

int mxc_metric_create(const char *name, int top_k, mxc_metric **out) {
    if (out == NULL || name == NULL)
        return mxc__error(MXC_EINVAL, "mxc_metric_create: NULL argument");
    *out = NULL;
    int kind = -1;
    for (int k = 0; k <= COMPOSITE; k++)
        if (strcmp(name, kind_names[k]) == 0 || strcmp(name, value_names[k]) == 0)
            kind = k;
    if (kind < 0)
        return mxc__error(MXC_EINVAL,
                          "mxc_metric_create: unknown metric %s (acc, "
                          "top_k_accuracy, ce, mse, composite)",
                          name);
    if (kind == TOP_K && top_k < 1)
        return mxc__error(MXC_EINVAL, "mxc_metric_create: top_k = %d", top_k);
    mxc_metric *m = mxc__handle_alloc(&metric_kind);
    if (m)
        m->names = mxc__calloc(1, sizeof *m->names);
    if (m)
        m->values = mxc__calloc(1, sizeof *m->values);
    if (m == NULL || m->names == NULL || m->values == NULL) {
        if (m)
            metric_destroy(m);
        return mxc__error(MXC_ENOMEM, "mxc_metric_create: out of memory");
    }
    m->kind = kind;
    m->top_k = kind == TOP_K ? top_k : 1;
    mxc__handle_publish(&metric_kind, m);
    *out = m;
    return MXC_OK;
}

static int check_metric(const mxc_metric *m, const char *fn) {
    return mxc__handle_check(&metric_kind, m, fn, "metric");
}

int mxc_metric_add(mxc_metric *c, mxc_metric *child) {
    int rc = check_metric(c, __func__);
    if (rc == MXC_OK)
        rc = check_metric(child, __func__);
    if (rc != MXC_OK)
        return rc;
    if (c->kind != COMPOSITE || child == c)
        return mxc__error(MXC_EINVAL, "mxc_metric_add: not a composite metric");
    int n = c->num_children + 1;
    mxc_metric **kids = mxc__realloc(c->children, sizeof *kids * (size_t)n);
    if (kids == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_metric_add: out of memory");
    c->children = kids;
    const char **names = mxc__realloc(c->names, sizeof *names * (size_t)n);
    if (names == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_metric_add: out of memory");
    c->names = names;
    double *values = mxc__realloc(c->values, sizeof *values * (size_t)n);
    if (values == NULL)
        return mxc__error(MXC_ENOMEM, "mxc_metric_add: out of memory");
    c->values = values;
    kids[c->num_children++] = child;
    return MXC_OK;
}

/* One batch of `rows` samples of `cols` scores against labels, on the host. */
/* Whether class c's score ranks above the label y's, as MXNet's argmax (numpy's) ranks
 * them: higher first, ties to the lower class, and NaN above everything (a NaN output, a
 * diverged network, is never right by accident: its first NaN is the prediction). */
static bool scores_above(float pc, int64_t c, float py, int64_t y) {
    if (isnan(pc))
        return !isnan(py) || c < y;
    return !isnan(py) && (pc > py || (pc == py && c < y));
}

static int accumulate(mxc_metric *m, const float *label, const float *pred, int64_t rows,
                      int64_t cols, int64_t label_size) {
    if (m->kind == MSE) {
        if (label_size != rows * cols)
            return mxc__error(MXC_ESHAPE, "mse: %lld labels for %lld predictions",
                              (long long)label_size, (long long)(rows * cols));
        for (int64_t i = 0; i < rows * cols; i++)
            m->sum += ((double)label[i] - pred[i]) * ((double)label[i] - pred[i]);
        m->count += (double)(rows * cols);
        return MXC_OK;
    }
    if (label_size != rows)
        return mxc__error(MXC_ESHAPE, "%s: %lld labels for %lld samples", kind_names[m->kind],
                          (long long)label_size, (long long)rows);
    for (int64_t r = 0; r < rows; r++) {
        const float *p = pred + r * cols;
        double l = label[r];
        if (!(l >= 0 && l < (double)cols) || l != floor(l))
            return mxc__error(MXC_EINVAL,
                              "%s: label %g of sample %lld is not a class in "
                              "[0, %lld)",
                              kind_names[m->kind], l, (long long)r, (long long)cols);
        int64_t y = (int64_t)l;
        if (m->kind == CE) {
            m->sum += -log((double)p[y] + 1e-12);
        } else { /* the label's rank: how many scores beat it (ties count for it) */
            int64_t above = 0;
            for (int64_t c = 0; c < cols; c++)
                above += scores_above(p[c], c, p[y], y);
            m->sum += above < m->top_k;
        }
    }
    m->count += (double)rows;
    return MXC_OK;
}

static int update_one(mxc_metric *m, mxc_ndarray *label, mxc_ndarray *pred, int pad) {
    mxc_shape ps, ls;
    int rc = mxc__nd_check(pred, "mxc_metric_update", "prediction");
    if (rc == MXC_OK)
        rc = mxc__nd_check(label, "mxc_metric_update", "label");
    if (rc == MXC_OK)
        rc = mxc_nd_get_shape(pred, &ps);
    if (rc == MXC_OK)
        rc = mxc_nd_get_shape(label, &ls);
    if (rc != MXC_OK)
        return rc;
    if (mxc_nd_dtype(pred) != MXC_FLOAT32 || mxc_nd_dtype(label) != MXC_FLOAT32)
        return mxc__error(MXC_ENOTSUP, "mxc_metric_update: arrays must be float32");
    int64_t n = ps.ndim ? ps.dims[0] : 0, size = mxc_nd_size(pred);
    int64_t cols = n ? size / n : 0, lsize = mxc_nd_size(label);
    int64_t lcols = n && ls.ndim ? lsize / ls.dims[0] : 0;
    if (ls.ndim == 0 || ls.dims[0] != n)
        return mxc__error(MXC_ESHAPE, "mxc_metric_update: %lld predictions, %lld labels",
                          (long long)n, (long long)(ls.ndim ? ls.dims[0] : 0));
    if (pad < 0 || pad > n)
        return mxc__error(MXC_EINVAL, "mxc_metric_update: pad %d for a batch of %lld", pad,
                          (long long)n);
    float *p = mxc__malloc(sizeof(float) * (size_t)(size + 1));
    float *l = mxc__malloc(sizeof(float) * (size_t)(lsize + 1));
    if (p == NULL || l == NULL)
        rc = mxc__error(MXC_ENOMEM, "mxc_metric_update: out of memory");
    if (rc == MXC_OK)
        rc = mxc_nd_sync_copy_to_cpu(pred, p, sizeof(float) * (size_t)size);
    if (rc == MXC_OK)
        rc = mxc_nd_sync_copy_to_cpu(label, l, sizeof(float) * (size_t)lsize);
    if (rc == MXC_OK)
        rc = accumulate(m, l, p, n - pad, cols, (n - pad) * lcols);
    mxc__free(p);
    mxc__free(l);
    return rc;
}

int mxc_metric_update(mxc_metric *m, int num, mxc_ndarray *const *labels, mxc_ndarray *const *preds,
                      int pad) {
    int rc = check_metric(m, __func__);
    if (rc != MXC_OK)
        return rc;
    if (num < 0 || (num > 0 && (labels == NULL || preds == NULL)))
        return mxc__error(MXC_EINVAL, "mxc_metric_update: bad array lists");
    for (int i = 0; i < num && rc == MXC_OK; i++) {
        if (m->kind != COMPOSITE) {
            rc = update_one(m, labels[i], preds[i], pad);
            continue;
        }
        for (int c = 0; c < m->num_children && rc == MXC_OK; c++)
            rc = mxc_metric_update(m->children[c], 1, &labels[i], &preds[i], pad);
    }
    return rc;
}

int mxc_metric_get(mxc_metric *m, int *num, const char *const **names, const double **values) {
    int rc = check_metric(m, __func__);
    if (rc != MXC_OK)
        return rc;
    if (num == NULL || names == NULL || values == NULL)
        return mxc__error(MXC_EINVAL, "mxc_metric_get: NULL argument");
    if (m->kind != COMPOSITE) {
        m->names[0] = value_names[m->kind];
        m->values[0] = m->count > 0 ? m->sum / m->count : NAN;
        *num = 1;
    } else {
        for (int c = 0; c < m->num_children; c++) {
            mxc_metric *k = m->children[c];
            int n1 = 0;
            const char *const *n = NULL;
            const double *v = NULL;
            rc = mxc_metric_get(k, &n1, &n, &v);
            if (rc != MXC_OK)
                return rc;
            m->names[c] = n[0];
            m->values[c] = v[0];
        }
        *num = m->num_children;
    }
    *names = m->names;
    *values = m->values;
    return MXC_OK;
}

int mxc_metric_reset(mxc_metric *m) {
    int rc = check_metric(m, __func__);
    if (rc != MXC_OK)
        return rc;
    m->sum = m->count = 0;
    for (int c = 0; c < m->num_children; c++)
        mxc_metric_reset(m->children[c]);
    return MXC_OK;
}

void mxc_metric_free(mxc_metric *m) {
    if (mxc__handle_check_free(&metric_kind, m, __func__, "metric"))
        metric_destroy(m);
}

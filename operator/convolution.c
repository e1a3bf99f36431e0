/*
 * operator/convolution.c — Convolution and Deconvolution (1-D and 2-D, NCW / NCHW,
 * grouped, strided, dilated, padded) through im2col + cblas_sgemm.
 *
 * Both operators relate an "image side" (the convolution's input, the deconvolution's
 * output) to a "column side" (the convolution's output, the deconvolution's input) with a
 * weight of one layout, (col channels, image channels / groups, KH, KW):
 *
 *   columns  = W · im2col(image)         convolution forward, deconvolution data grad
 *   image   += col2im(Wᵀ · columns)      convolution data grad, deconvolution forward
 *   dW      += columns · im2col(image)ᵀ  weight grad of both
 *
 * so the three helpers below serve both operators. Several images are batched into one
 * product when they fit the temp space budget (small feature maps make small products);
 * the temp space comes from the operator's MXC__RES_TEMP resource. float32, row-major.
 *
 * Threads (common/parallel.h): with a budget of T > 1 the images are split among T
 * slots, each with its own buffers in the temp space and its own single-threaded
 * products; the weight gradient is summed from per-slot partials. With T = 1, or one
 * image, the products themselves are split (mxc__sgemm).
 *
 * With a 3x3 kernel at stride 1 and enough channels, either operator computes all three
 * products by Winograd's F(2x2, 3x3) instead (conv_winograd.c, when mxc__winograd_fits).
 *
 * The GPU kernels (cuDNN, or the same products with cuBLAS) are in convolution_gpu.c;
 * the parameters and geometry both use are in convolution.h.
 */
#include "operator/convolution.h"

#include "common/gemm.h"
#include "operator/gpu.h"
#include "common/parallel.h"
#include "operator/row_sums.h"

#include <stdint.h>
#include <string.h>

static const char *const tune_choices[] = {"off", "limited_workspace", "fastest", NULL};
static const char *const layout_choices[] = {"NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC", NULL};

#define CP struct conv_param
static const struct mxc__param conv_params[] = {
    MXC__P_TUPLE(CP, kernel, NULL, "kernel size: (w,) or (h, w)"),
    MXC__P_TUPLE(CP, stride, "()", "stride per spatial axis (default 1)"),
    MXC__P_TUPLE(CP, dilate, "()", "dilation per spatial axis (default 1)"),
    MXC__P_TUPLE(CP, pad, "()", "zero padding per spatial axis (default 0)"),
    MXC__P_INT(CP, num_filter, NULL, 1, 100000, "number of output channels"),
    MXC__P_INT(CP, num_group, "1", 1, 100000, "number of channel groups"),
    MXC__P_INT(CP, workspace, "1024", 0, 1048576, "temp space limit in MB (a hint)"),
    MXC__P_BOOL(CP, no_bias, "False", "disable the bias"),
    MXC__P_OPT_ENUM(CP, cudnn_tune, tune_choices, "cuDNN algorithm choice (ignored on CPU)"),
    MXC__P_BOOL(CP, cudnn_off, "False", "do not use cuDNN (ignored on CPU)"),
    MXC__P_OPT_ENUM(CP, layout, layout_choices, "data layout; NCW / NCHW (None) supported"),
};

static const struct mxc__param deconv_params[] = {
    MXC__P_TUPLE(CP, kernel, NULL, "kernel size: (w,) or (h, w)"),
    MXC__P_TUPLE(CP, stride, "()", "stride per spatial axis (default 1)"),
    MXC__P_TUPLE(CP, dilate, "()", "dilation per spatial axis (default 1)"),
    MXC__P_TUPLE(CP, pad, "()", "padding removed from the output per axis (default 0)"),
    MXC__P_TUPLE(CP, adj, "()", "extra rows / columns at the output's end (default 0)"),
    MXC__P_TUPLE(CP, target_shape, "()", "output spatial shape; sets pad and adj"),
    MXC__P_INT(CP, num_filter, NULL, 1, 100000, "number of output channels"),
    MXC__P_INT(CP, num_group, "1", 1, 100000, "number of channel groups"),
    MXC__P_INT(CP, workspace, "512", 0, 1048576, "temp space limit in MB (a hint)"),
    MXC__P_BOOL(CP, no_bias, "True", "disable the bias"),
    MXC__P_OPT_ENUM(CP, cudnn_tune, tune_choices, "cuDNN algorithm choice (ignored on CPU)"),
    MXC__P_BOOL(CP, cudnn_off, "False", "do not use cuDNN (ignored on CPU)"),
    MXC__P_OPT_ENUM(CP, layout, layout_choices, "data layout; NCW / NCHW (None) supported"),
};
#undef CP

static const char *const conv_outputs[] = {"output", NULL};

static int conv_list_inputs(const void *params, const char **names, int max) {
    const struct conv_param *p = params;
    static const char *const all[] = {"data", "weight", "bias"};
    int n = p->no_bias ? 2 : 3;
    for (int i = 0; i < n && i < max; i++)
        names[i] = all[i];
    return n;
}

/* ---- Geometry ---------------------------------------------------------------------- */

/* Tuple `t` at spatial axis `i` (of `nsp`) as a (h, w) pair entry; `dflt` when empty. */
static int64_t axis(const mxc_shape *t, int nsp, int hw, int64_t dflt, int64_t one_d) {
    if (nsp == 1 && hw == 0)
        return one_d; /* the height of a 1-D problem */
    int i = nsp == 1 ? 0 : hw;
    return t->ndim ? t->dims[i] : dflt;
}

/* Checks the parameters alone (tuple lengths, values, layout). */
static int check_params(const struct conv_param *p, bool deconv, const char *op) {
    int nsp = p->kernel.ndim;
    if (nsp == 3)
        return mxc__error(MXC_ENOTSUP, "%s: 3-D kernels are not supported (1-D and 2-D are)", op);
    if (nsp != 1 && nsp != 2)
        return mxc__error(MXC_EINVAL, "%s: kernel must have 1 or 2 axes, not %d", op, nsp);
    const mxc_shape *tuples[] = {&p->stride, &p->dilate, &p->pad, &p->adj, &p->target_shape};
    static const char *const names[] = {"stride", "dilate", "pad", "adj", "target_shape"};
    for (int t = 0; t < 5; t++) {
        if (tuples[t]->ndim != 0 && tuples[t]->ndim != nsp)
            return mxc__error(MXC_EINVAL, "%s: %s has %d axes but kernel has %d", op, names[t],
                              tuples[t]->ndim, nsp);
        for (int i = 0; i < tuples[t]->ndim; i++) {
            int64_t v = tuples[t]->dims[i];
            bool positive = t < 2;
            if (positive ? v < 1 : v < 0)
                return mxc__error(MXC_EINVAL, "%s: %s[%d] = %lld must be %s", op, names[t], i,
                                  (long long)v, positive ? "positive" : "non-negative");
        }
    }
    for (int i = 0; i < nsp; i++)
        if (p->kernel.dims[i] < 1)
            return mxc__error(MXC_EINVAL, "%s: kernel[%d] = %lld must be positive", op, i,
                              (long long)p->kernel.dims[i]);
    if (deconv && p->target_shape.ndim == 0)
        for (int i = 0; i < p->adj.ndim; i++)
            if (p->adj.dims[i] >= (p->stride.ndim ? p->stride.dims[i] : 1))
                return mxc__error(MXC_EINVAL,
                                  "%s: adj[%d] = %lld must be smaller than the "
                                  "stride",
                                  op, i, (long long)p->adj.dims[i]);
    int want = nsp == 1 ? LAYOUT_NCW : LAYOUT_NCHW;
    if (p->layout >= 0 && p->layout != want)
        return mxc__error(MXC_ENOTSUP,
                          "%s: layout %s is not supported (only %s, channels "
                          "first)",
                          op, layout_choices[p->layout], layout_choices[want]);
    return MXC_OK;
}

/* The geometry of `data` (N, C, [H,] W) under `p`; MXC_ESHAPE / MXC_EINVAL on shapes the
 * parameters cannot apply to, or whose geometry overflows int64. Parameters must have
 * passed check_params. */
int mxc__conv_geom(const struct conv_param *p, bool deconv, const mxc_shape *data,
                   struct conv_geom *g) {
    const char *op = deconv ? "Deconvolution" : "Convolution";
    int nsp = p->kernel.ndim;
    char buf[128];
    if (data->ndim != nsp + 2)
        return mxc__error(MXC_ESHAPE,
                          "%s: data has shape %s but a %d-D kernel needs %d "
                          "axes (N, C, %s)",
                          op, mxc__shape_str(data, buf, sizeof buf), nsp, nsp + 2,
                          nsp == 1 ? "W" : "H, W");
    struct conv_geom q = {0};
    q.batch = data->dims[0];
    q.groups = p->num_group;
    int64_t c = data->dims[1];
    int64_t h = nsp == 1 ? 1 : data->dims[2], w = data->dims[nsp + 1];
    q.kh = axis(&p->kernel, nsp, 0, 1, 1);
    q.kw = axis(&p->kernel, nsp, 1, 1, 1);
    q.sh = axis(&p->stride, nsp, 0, 1, 1);
    q.sw = axis(&p->stride, nsp, 1, 1, 1);
    q.dh = axis(&p->dilate, nsp, 0, 1, 1);
    q.dw = axis(&p->dilate, nsp, 1, 1, 1);
    q.ph = axis(&p->pad, nsp, 0, 0, 0);
    q.pw = axis(&p->pad, nsp, 1, 0, 0);
    int64_t ekh = 0, ekw = 0; /* the dilated kernel */
    bool fits = mxc__mul_add(1, q.dh, q.kh - 1, &ekh) && mxc__mul_add(1, q.dw, q.kw - 1, &ekw);
    if (fits && !deconv) {
        q.ic = c, q.ih = h, q.iw = w;
        q.oc = p->num_filter;
        int64_t hp = 0, wp = 0; /* the padded input */
        fits = mxc__mul_add(h, 2, q.ph, &hp) && mxc__mul_add(w, 2, q.pw, &wp);
        if (fits && (hp < ekh || wp < ekw))
            return mxc__error(MXC_ESHAPE,
                              "%s: the dilated kernel (%lld, %lld) is larger "
                              "than the padded input (%lld, %lld)",
                              op, (long long)ekh, (long long)ekw, (long long)hp, (long long)wp);
        q.oh = fits ? (hp - ekh) / q.sh + 1 : 0;
        q.ow = fits ? (wp - ekw) / q.sw + 1 : 0;
    } else if (fits) {
        q.oc = c, q.oh = h, q.ow = w;
        q.ic = p->num_filter;
        int64_t full_h = 0, full_w = 0;
        fits = mxc__mul_add(ekh, q.sh, h - 1, &full_h) && mxc__mul_add(ekw, q.sw, w - 1, &full_w);
        bool target = false;
        for (int i = 0; i < p->target_shape.ndim; i++)
            target |= p->target_shape.dims[i] != 0;
        if (fits && target) { /* MXNet: pad = ceil(excess / 2), adj = excess % 2 */
            int64_t th = axis(&p->target_shape, nsp, 0, 1, 1);
            int64_t tw = axis(&p->target_shape, nsp, 1, 1, 1);
            if (th > full_h || tw > full_w)
                return mxc__error(MXC_EINVAL,
                                  "%s: target_shape is larger than the full "
                                  "output (%lld, %lld)",
                                  op, (long long)full_h, (long long)full_w);
            q.ph = (full_h - th) / 2 + (full_h - th) % 2;
            q.pw = (full_w - tw) / 2 + (full_w - tw) % 2;
            q.ih = th, q.iw = tw;
        } else if (fits) {
            fits = mxc__mul_add(full_h, -2, q.ph, &q.ih) && mxc__mul_add(full_w, -2, q.pw, &q.iw) &&
                   mxc__mul_add(q.ih, 1, axis(&p->adj, nsp, 0, 0, 0), &q.ih) &&
                   mxc__mul_add(q.iw, 1, axis(&p->adj, nsp, 1, 0, 0), &q.iw);
        }
        if (fits && (q.ih < 1 || q.iw < 1))
            return mxc__error(MXC_ESHAPE, "%s: the padding leaves an empty output", op);
    }
    if (q.ic % q.groups || q.oc % q.groups)
        return mxc__error(MXC_EINVAL,
                          "%s: num_group %lld must divide the input channels "
                          "(%lld) and num_filter (%d)",
                          op, (long long)q.groups, (long long)c, p->num_filter);
    q.icg = q.ic / q.groups;
    q.ocg = q.oc / q.groups;
    fits = fits && mxc__mul_add(0, q.icg, q.kh, &q.krows) &&
           mxc__mul_add(0, q.krows, q.kw, &q.krows) && mxc__mul_add(0, q.oh, q.ow, &q.pix);
    if (!fits)
        return mxc__error(MXC_ESHAPE,
                          "%s: data %s under kernel, stride, dilate and pad as given has "
                          "sizes beyond int64",
                          op, mxc__shape_str(data, buf, sizeof buf));
    *g = q;
    return MXC_OK;
}

/* data gives weight, bias and output; conv: out (N, F, OH, OW), weight (F, C/g, KH, KW);
 * deconv: out (N, F, OH, OW), weight (C, F/g, KH, KW); bias (F). */
static int conv_shape_common(const struct conv_param *p, bool deconv, mxc_shape *in,
                             mxc_shape *out) {
    const char *op = deconv ? "Deconvolution" : "Convolution";
    int rc = check_params(p, deconv, op);
    if (rc != MXC_OK)
        return rc;
    int64_t nf = p->num_filter;
    if (!p->no_bias) {
        mxc_shape b = mxc_shape_make(1, &nf);
        MXC_TRY(mxc__shape_assign(&in[2], &b, op, "bias"));
    }
    if (in[0].ndim == 0)
        return MXC_OK;
    struct conv_geom g;
    MXC_TRY(mxc__conv_geom(p, deconv, &in[0], &g));
    int nsp = p->kernel.ndim;
    int64_t wd[4] = {g.oc, g.icg, g.kh, g.kw};
    if (nsp == 1)
        wd[2] = g.kw;
    mxc_shape w = mxc_shape_make(nsp + 2, wd);
    MXC_TRY(mxc__shape_assign(&in[1], &w, op, "weight"));
    int64_t od[4] = {g.batch, deconv ? g.ic : g.oc, deconv ? g.ih : g.oh, deconv ? g.iw : g.ow};
    if (nsp == 1)
        od[2] = od[3];
    mxc_shape o = mxc_shape_make(nsp + 2, od);
    MXC_TRY(mxc__shape_assign(&out[0], &o, op, "output"));
fail:
    return rc;
}

static int conv_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                      mxc_shape *aux, int num_aux) {
    return conv_shape_common(params, false, in, out);
}

static int deconv_shape(const void *params, mxc_shape *in, int num_in, mxc_shape *out, int num_out,
                        mxc_shape *aux, int num_aux) {
    return conv_shape_common(params, true, in, out);
}

/* ---- im2col / col2im --------------------------------------------------------------- */

/* The output columns x in [x0, x1) whose input column x*s + off lies in [0, n). */
static void valid_range(int64_t off, int64_t s, int64_t n, int64_t out, int64_t *x0, int64_t *x1) {
    int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t hi = n - off <= 0 ? 0 : (n - off + s - 1) / s;
    *x0 = lo < out ? lo : out;
    *x1 = hi < out ? hi : out;
    if (*x1 < *x0)
        *x1 = *x0;
}

/* img: (icg, ih, iw) of one image and group; col: rows (c, ki, kj) of icg*kh*kw, each
 * holding this image's oh*ow values at column offset 0 of a row of length `ld`. */
static void im2col(const struct conv_geom *g, const float *img, float *col, int64_t ld) {
    for (int64_t c = 0; c < g->icg; c++) {
        for (int64_t ki = 0; ki < g->kh; ki++) {
            for (int64_t kj = 0; kj < g->kw; kj++) {
                float *dst = col + ((c * g->kh + ki) * g->kw + kj) * ld;
                int64_t offw = kj * g->dw - g->pw, x0, x1;
                valid_range(offw, g->sw, g->iw, g->ow, &x0, &x1);
                for (int64_t y = 0; y < g->oh; y++) {
                    float *d = dst + y * g->ow;
                    int64_t iy = y * g->sh - g->ph + ki * g->dh;
                    if (iy < 0 || iy >= g->ih) {
                        memset(d, 0, (size_t)g->ow * sizeof(float));
                        continue;
                    }
                    const float *src = img + (c * g->ih + iy) * g->iw;
                    for (int64_t x = 0; x < x0; x++)
                        d[x] = 0.0f;
                    if (g->sw == 1)
                        memcpy(d + x0, src + x0 + offw, (size_t)(x1 - x0) * sizeof(float));
                    else
                        for (int64_t x = x0; x < x1; x++)
                            d[x] = src[x * g->sw + offw];
                    for (int64_t x = x1; x < g->ow; x++)
                        d[x] = 0.0f;
                }
            }
        }
    }
}

/* The adjoint of im2col: img (icg, ih, iw) += the columns scattered back. */
static void col2im(const struct conv_geom *g, const float *col, int64_t ld, float *img) {
    for (int64_t c = 0; c < g->icg; c++) {
        for (int64_t ki = 0; ki < g->kh; ki++) {
            for (int64_t kj = 0; kj < g->kw; kj++) {
                const float *srcrow = col + ((c * g->kh + ki) * g->kw + kj) * ld;
                int64_t offw = kj * g->dw - g->pw, x0, x1;
                valid_range(offw, g->sw, g->iw, g->ow, &x0, &x1);
                for (int64_t y = 0; y < g->oh; y++) {
                    int64_t iy = y * g->sh - g->ph + ki * g->dh;
                    if (iy < 0 || iy >= g->ih || x1 <= x0)
                        continue;
                    const float *s = srcrow + y * g->ow;
                    float *d = img + (c * g->ih + iy) * g->iw + (x0 * g->sw + offw);
                    if (g->sw == 1)
                        for (int64_t x = 0; x < x1 - x0; x++)
                            d[x] += s[x0 + x];
                    else
                        for (int64_t x = 0; x < x1 - x0; x++)
                            d[x * g->sw] += s[x0 + x];
                }
            }
        }
    }
}

/* ---- Batched products, one slot per thread ----------------------------------------- */

/* How the work is split and the temp space that takes. The images are divided among
 * `slots` threads (contiguous ranges); each slot has its own buffers in the temp space
 * and cuts its images into chunks of up to `chunk` images per product. */
struct plan {
    int64_t chunk;    /* images per product */
    int slots;        /* threads working on disjoint images */
    size_t slot_size; /* floats per slot, a multiple of 16 (no shared cache lines) */
    size_t ncol;      /* offset of cols in a slot */
    size_t ndw;       /* offset of the weight-gradient partial in a slot */
    float *space;
};

/* One slot's buffers: col (krows, chunk * pix), cols (ocg, chunk * pix): the column side
 * of a chunk gathered, dw (oc, krows): its share of the weight gradient (slots > 0). */
struct slot {
    float *col, *cols, *dw;
    int64_t n0, n1; /* its images */
};

static struct slot slot_of(const struct conv_geom *g, const struct plan *pl, int s) {
    float *base = pl->space + (size_t)s * pl->slot_size;
    int64_t q = g->batch / pl->slots, r = g->batch % pl->slots;
    int64_t n0 = s * q + (s < r ? s : r);
    return (struct slot){base, base + pl->ncol, base + pl->ndw, n0, n0 + q + (s < r)};
}

/* Splits over min(T, batch) threads (mxc__op_threads) when the batch can be divided;
 * a batch of one image leaves the threads to the products themselves (mxc__sgemm). */
static int make_plan(const struct mxc__op_call *c, const struct conv_geom *g,
                     const struct conv_param *p, bool weight_grad, struct plan *pl) {
    int slots = mxc__in_parallel() ? 1 : mxc__op_threads();
    if (slots > g->batch)
        slots = g->batch > 0 ? (int)g->batch : 1;
    int64_t per_slot = (g->batch + slots - 1) / slots;
    /* one image's columns, (krows + ocg) * pix floats: a huge kernel over a huge output
     * (pads near INT64_MAX parse) can overflow before any memory is asked for */
    int64_t rows = 0, per_image_floats = 0;
    if (!mxc__mul_add(g->krows, 1, g->ocg, &rows) ||
        !mxc__mul_add(0, rows, g->pix, &per_image_floats) ||
        per_image_floats > (int64_t)(SIZE_MAX / sizeof(float) / 4))
        return mxc__error(MXC_ENOMEM,
                          "Convolution: one image's columns (%lld x %lld) need more memory than "
                          "can be addressed",
                          (long long)rows, (long long)g->pix);
    size_t per_image = (size_t)per_image_floats * sizeof(float);
    size_t budget = (size_t)2 << 20; /* chunks that stay in a core's cache */
    if ((size_t)p->workspace << 20 < budget * (size_t)slots)
        budget = ((size_t)p->workspace << 20) / (size_t)slots;
    int64_t chunk = per_image ? (int64_t)(budget / per_image) : 1;
    if (chunk < 1)
        chunk = 1;
    /* an empty batch needs no buffers: sizing them for one image would ask, with a large
     * pad, for terabytes of temp space to compute nothing */
    if (chunk > per_slot)
        chunk = per_slot;
    pl->chunk = chunk;
    pl->slots = slots;
    pl->ncol = (size_t)(g->krows * chunk * g->pix);
    size_t ncols = chunk > 1 ? (size_t)(g->ocg * chunk * g->pix) : 0;
    pl->ndw = pl->ncol + ncols;
    size_t ndw = weight_grad && slots > 1 ? (size_t)(g->oc * g->krows) : 0;
    pl->slot_size = (pl->ndw + ndw + 15) / 16 * 16;
    if (c->num_resources < 1)
        return mxc__error(MXC_EINTERNAL, "%s: no temp space resource", "Convolution");
    void *space = NULL;
    int rc = mxc__resource_temp(c->resources[0],
                                (pl->slot_size * (size_t)slots + 16) * sizeof(float), &space);
    if (rc != MXC_OK)
        return rc;
    /* a 64-byte boundary, so that slots never share a cache line */
    pl->space = (float *)(((uintptr_t)space + 63) & ~(uintptr_t)63);
    return MXC_OK;
}

/* The column side of images [n0, n0 + nb), group gi, as a (ocg, nb * pix) matrix: the
 * tensor itself for one image, else gathered into the slot's cols. */
static const float *gather_cols(const struct conv_geom *g, const struct slot *sl, const float *x,
                                int64_t n0, int64_t nb, int64_t gi) {
    const float *base = x + (n0 * g->oc + gi * g->ocg) * g->pix;
    if (nb == 1)
        return base;
    for (int64_t f = 0; f < g->ocg; f++)
        for (int64_t b = 0; b < nb; b++)
            memcpy(sl->cols + (f * nb + b) * g->pix, base + (b * g->oc + f) * g->pix,
                   (size_t)g->pix * sizeof(float));
    return sl->cols;
}

/* im2col of images [n0, n0 + nb), group gi, of `img` into the slot's col (krows,
 * nb * pix). */
static void chunk_im2col(const struct conv_geom *g, const struct slot *sl, const float *img,
                         int64_t n0, int64_t nb, int64_t gi) {
    for (int64_t b = 0; b < nb; b++)
        im2col(g, img + ((n0 + b) * g->ic + gi * g->icg) * g->ih * g->iw, sl->col + b * g->pix,
               nb * g->pix);
}

/* What one slot computes; the three products of the file's header comment. */
enum conv_work { TO_COLUMNS, TO_IMAGE, WEIGHT_GRAD };

struct conv_job {
    const struct conv_geom *g;
    struct plan pl;    /* filled in by run_product */
    int work;          /* a conv_work */
    const float *img;  /* image side (TO_COLUMNS, WEIGHT_GRAD) */
    const float *cols; /* column side (TO_IMAGE, WEIGHT_GRAD) */
    const float *w, *bias;
    float *out; /* columns, image or dw */
    int req;
};

/* columns (req) = W · im2col(image) + bias for the slot's images; columns (N, oc, pix),
 * image (N, ic, ih, iw), w (oc, icg * kh * kw), bias (oc) or NULL. The bias goes in with
 * the product: the output is filled with it before a beta = 1 product (one image) or
 * added while scattering the chunk's (ocg, nb * pix) result to (nb, ocg, pix). */
static void image_to_columns(const struct conv_job *j, const struct slot *sl) {
    const struct conv_geom *g = j->g;
    bool add = j->req == MXC__REQ_ADD;
    for (int64_t n0 = sl->n0; n0 < sl->n1; n0 += j->pl.chunk) {
        int64_t nb = sl->n1 - n0 < j->pl.chunk ? sl->n1 - n0 : j->pl.chunk;
        int64_t npix = nb * g->pix;
        for (int64_t gi = 0; gi < g->groups; gi++) {
            chunk_im2col(g, sl, j->img, n0, nb, gi);
            const float *wg = j->w + gi * g->ocg * g->krows;
            const float *bg = j->bias ? j->bias + gi * g->ocg : NULL;
            float *dst = j->out + (n0 * g->oc + gi * g->ocg) * g->pix;
            if (nb == 1) {
                for (int64_t f = 0; bg && f < g->ocg; f++) {
                    float *d = dst + f * g->pix, v = bg[f];
                    for (int64_t i = 0; i < g->pix; i++)
                        d[i] = add ? d[i] + v : v;
                }
                mxc__sgemm(false, false, g->ocg, npix, g->krows, 1.0f, wg, g->krows, sl->col, npix,
                           bg || add ? 1.0f : 0.0f, dst, npix);
                continue;
            }
            mxc__sgemm(false, false, g->ocg, npix, g->krows, 1.0f, wg, g->krows, sl->col, npix,
                       0.0f, sl->cols, npix);
            for (int64_t f = 0; f < g->ocg; f++) {
                float v = bg ? bg[f] : 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    const float *s = sl->cols + (f * nb + b) * g->pix;
                    float *d = dst + (b * g->oc + f) * g->pix;
                    if (add)
                        for (int64_t i = 0; i < g->pix; i++)
                            d[i] += s[i] + v;
                    else
                        for (int64_t i = 0; i < g->pix; i++)
                            d[i] = s[i] + v;
                }
            }
        }
    }
}

/* image (req) = col2im(Wᵀ · columns) for the slot's images. */
static void columns_to_image(const struct conv_job *j, const struct slot *sl) {
    const struct conv_geom *g = j->g;
    int64_t isize = g->ic * g->ih * g->iw;
    if (j->req != MXC__REQ_ADD)
        memset(j->out + sl->n0 * isize, 0, (size_t)((sl->n1 - sl->n0) * isize) * sizeof(float));
    for (int64_t n0 = sl->n0; n0 < sl->n1; n0 += j->pl.chunk) {
        int64_t nb = sl->n1 - n0 < j->pl.chunk ? sl->n1 - n0 : j->pl.chunk;
        int64_t npix = nb * g->pix;
        for (int64_t gi = 0; gi < g->groups; gi++) {
            const float *src = gather_cols(g, sl, j->cols, n0, nb, gi);
            const float *wg = j->w + gi * g->ocg * g->krows;
            mxc__sgemm(true, false, g->krows, npix, g->ocg, 1.0f, wg, g->krows, src, npix, 0.0f,
                       sl->col, npix);
            for (int64_t b = 0; b < nb; b++)
                col2im(g, sl->col + b * g->pix, npix,
                       j->out + (n0 + b) * isize + gi * g->icg * g->ih * g->iw);
        }
    }
}

/* dw += sum over the slot's images of columns · im2col(image)ᵀ; dw (oc, icg * kh * kw)
 * is the output itself for slot 0 (already cleared or added to) and the slot's private
 * partial for the others, summed afterwards (sum_partials). */
static void weight_grad(const struct conv_job *j, const struct slot *sl, float *dw) {
    const struct conv_geom *g = j->g;
    for (int64_t n0 = sl->n0; n0 < sl->n1; n0 += j->pl.chunk) {
        int64_t nb = sl->n1 - n0 < j->pl.chunk ? sl->n1 - n0 : j->pl.chunk;
        int64_t npix = nb * g->pix;
        for (int64_t gi = 0; gi < g->groups; gi++) {
            chunk_im2col(g, sl, j->img, n0, nb, gi);
            const float *src = gather_cols(g, sl, j->cols, n0, nb, gi);
            mxc__sgemm(false, true, g->ocg, g->krows, npix, 1.0f, src, npix, sl->col, npix, 1.0f,
                       dw + gi * g->ocg * g->krows, g->krows);
        }
    }
}

static void run_slots(void *arg, int64_t s0, int64_t s1) {
    const struct conv_job *j = arg;
    for (int64_t s = s0; s < s1; s++) {
        struct slot sl = slot_of(j->g, &j->pl, (int)s);
        if (j->work == TO_COLUMNS) {
            image_to_columns(j, &sl);
        } else if (j->work == TO_IMAGE) {
            columns_to_image(j, &sl);
        } else {
            size_t n = (size_t)(j->g->oc * j->g->krows);
            if (s > 0)
                memset(sl.dw, 0, n * sizeof(float));
            weight_grad(j, &sl, s > 0 ? sl.dw : j->out);
        }
    }
}

/* dw (n floats) += the partials of slots 1 .. slots-1, split by elements. */
static void sum_partials(void *arg, int64_t i0, int64_t i1) {
    const struct conv_job *j = arg;
    for (int s = 1; s < j->pl.slots; s++) {
        const float *p = slot_of(j->g, &j->pl, s).dw;
        for (int64_t i = i0; i < i1; i++)
            j->out[i] += p[i];
    }
}

/* Runs `work` over all images, each slot on its own thread. */
static void run_job(struct conv_job *j) {
    const struct conv_geom *g = j->g;
    if (j->work == WEIGHT_GRAD && j->req != MXC__REQ_ADD)
        memset(j->out, 0, (size_t)(g->oc * g->krows) * sizeof(float));
    mxc__parallel_for(j->pl.slots, 1, run_slots, j);
    if (j->work == WEIGHT_GRAD && j->pl.slots > 1)
        mxc__parallel_for(g->oc * g->krows, 4096, sum_partials, j);
}

/* x (n, c, pix) += b (c) */
static void add_bias(float *x, const float *b, int64_t n, int64_t c, int64_t pix) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < c; j++) {
            float *d = x + (i * c + j) * pix, v = b[j];
            for (int64_t k = 0; k < pix; k++)
                d[k] += v;
        }
}

/* db (c) (req) = sum over n and pix of dy (n, c, pix), split over the operator's threads
 * by channel (conv1 of LeNet sums 1.15 M values: serial, it left the second core idle). */
struct bias_grad_job {
    const float *dy;
    float *db;
    int64_t n, c, pix;
    int req;
};

static void bias_grad_channels(void *arg, int64_t j0, int64_t j1) {
    const struct bias_grad_job *b = arg;
    for (int64_t j = j0; j < j1; j++) {
        double s = 0;
        for (int64_t i = 0; i < b->n; i++)
            s += mxc__row_sum(b->dy + (i * b->c + j) * b->pix, b->pix);
        b->db[j] = (float)(b->req == MXC__REQ_ADD ? b->db[j] + s : s);
    }
}

static void bias_grad(const float *dy, float *db, int64_t n, int64_t c, int64_t pix, int req) {
    struct bias_grad_job b = {dy, db, n, c, pix, req};
    mxc__parallel_for(c, mxc__channel_grain(n * pix), bias_grad_channels, &b);
}

/* ---- Kernels ----------------------------------------------------------------------- */

/* Runs job j's product over the whole batch: by Winograd's F(2x2, 3x3) when it fits the
 * geometry, else by im2col with a plan of its own (the temp space holds nothing from one
 * product to the next). */
static int run_product(const struct mxc__op_call *c, struct conv_job *j) {
    if (mxc__winograd_fits(c, j->g)) {
        if (j->work == TO_COLUMNS)
            return mxc__winograd_forward(c, j->g, j->img, j->w, j->bias, j->out, j->req);
        if (j->work == TO_IMAGE)
            return mxc__winograd_backward_data(c, j->g, j->cols, j->w, j->out, j->req);
        return mxc__winograd_backward_weight(c, j->g, j->img, j->cols, j->out, j->req);
    }
    int rc = make_plan(c, j->g, c->params, j->work == WEIGHT_GRAD, &j->pl);
    if (rc != MXC_OK)
        return rc;
    run_job(j);
    return MXC_OK;
}

/* Convolution: data (N, C, H, W) -> out (N, F, OH, OW); Deconvolution, its adjoint, the
 * other way. */
static int forward(const struct mxc__op_call *c, bool deconv) {
    const struct conv_param *p = c->params;
    struct conv_geom g;
    if (c->req[0] == MXC__REQ_NULL)
        return MXC_OK;
    int rc = mxc__conv_geom(p, deconv, &c->in_data[0].shape, &g);
    if (rc != MXC_OK)
        return rc;
    const float *x = c->in_data[0].data, *bias = p->no_bias ? NULL : c->in_data[2].data;
    float *out = c->out_data[0].data;
    struct conv_job j = {.g = &g,
                         .work = deconv ? TO_IMAGE : TO_COLUMNS,
                         .img = x,
                         .cols = x,
                         .w = c->in_data[1].data,
                         .bias = deconv ? NULL : bias,
                         .out = out,
                         .req = c->req[0]};
    rc = run_product(c, &j);
    if (rc == MXC_OK && deconv && bias)
        add_bias(out, bias, g.batch, g.ic, g.ih * g.iw);
    return rc;
}

/* The data gradient is the other operator's forward of the output gradient; the weight
 * gradient pairs the image side (the convolution's data, the deconvolution's output
 * gradient) with the column side. */
static int backward(const struct mxc__op_call *c, bool deconv) {
    const struct conv_param *p = c->params;
    struct conv_geom g;
    int rc = mxc__conv_geom(p, deconv, &c->in_data[0].shape, &g);
    if (rc != MXC_OK)
        return rc;
    const float *x = c->in_data[0].data, *dy = c->out_grad[0].data;
    if (c->req[0] != MXC__REQ_NULL) {
        struct conv_job j = {.g = &g,
                             .work = deconv ? TO_COLUMNS : TO_IMAGE,
                             .img = dy,
                             .cols = dy,
                             .w = c->in_data[1].data,
                             .out = c->in_grad[0].data,
                             .req = c->req[0]};
        rc = run_product(c, &j);
    }
    if (rc == MXC_OK && c->req[1] != MXC__REQ_NULL) {
        struct conv_job j = {.g = &g,
                             .work = WEIGHT_GRAD,
                             .img = deconv ? dy : x,
                             .cols = deconv ? x : dy,
                             .out = c->in_grad[1].data,
                             .req = c->req[1]};
        rc = run_product(c, &j);
    }
    if (rc == MXC_OK && !p->no_bias && c->req[2] != MXC__REQ_NULL)
        bias_grad(dy, c->in_grad[2].data, g.batch, deconv ? g.ic : g.oc,
                  deconv ? g.ih * g.iw : g.pix, c->req[2]);
    return rc;
}

static int conv_forward(const struct mxc__op_call *c) { return forward(c, false); }
static int conv_backward(const struct mxc__op_call *c) { return backward(c, false); }
static int deconv_forward(const struct mxc__op_call *c) { return forward(c, true); }
static int deconv_backward(const struct mxc__op_call *c) { return backward(c, true); }

const struct mxc__op_def mxc__op_Convolution = {
    .name = "Convolution",
    .description = "1-D / 2-D convolution (NCW / NCHW) with groups, stride, dilation, pad",
    .param_size = sizeof(struct conv_param),
    .params = conv_params,
    .num_params = (int)MXC_ARRAY_SIZE(conv_params),
    .list_inputs = conv_list_inputs,
    .outputs = conv_outputs,
    .infer_shape = conv_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .forward_resources = {MXC__RES_TEMP + 1},
    .backward_resources = {MXC__RES_TEMP + 1},
    .forward_cpu = conv_forward,
    .backward_cpu = conv_backward,
    .forward_gpu = MXC__GPU(mxc__conv_forward_gpu),
    .backward_gpu = MXC__GPU(mxc__conv_backward_gpu),
};

const struct mxc__op_def mxc__op_Deconvolution = {
    .name = "Deconvolution",
    .description = "transposed 1-D / 2-D convolution (the adjoint of Convolution)",
    .param_size = sizeof(struct conv_param),
    .params = deconv_params,
    .num_params = (int)MXC_ARRAY_SIZE(deconv_params),
    .list_inputs = conv_list_inputs,
    .outputs = conv_outputs,
    .infer_shape = deconv_shape,
    .backward_deps = MXC__DEP_OUT_GRAD | MXC__DEP_IN_DATA,
    .forward_resources = {MXC__RES_TEMP + 1},
    .backward_resources = {MXC__RES_TEMP + 1},
    .forward_cpu = deconv_forward,
    .backward_cpu = deconv_backward,
    .forward_gpu = MXC__GPU(mxc__deconv_forward_gpu),
    .backward_gpu = MXC__GPU(mxc__deconv_backward_gpu),
};

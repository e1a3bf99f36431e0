/*
 * operator/conv_winograd.c — the CPU fast path of Convolution (and of Deconvolution, its
 * adjoint) for 3x3 kernels at stride 1: Winograd's minimal filtering F(2x2, 3x3) (Lavin
 * and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015).
 *
 * Each 2x2 block of outputs ("tile") comes from the 4x4 patch of input under it. With
 * the patch d transformed to V = Bᵀ d B and the kernel g to U = G g Gᵀ, the block is
 * Aᵀ (U ⊙ V) A: 16 multiplications where the direct sum takes 36. Over channels the
 * element-wise products become 16 matrix products, one per position ξ of the 4x4:
 *
 *   M[ξ] (out channels, tiles) = U[ξ] (out channels, in channels) · V[ξ] (in channels, tiles)
 *
 * which is where the time goes (2.25 times fewer multiply-adds than im2col's product).
 * The data gradient of such a convolution is one too: the output gradient convolved with
 * the kernel turned by 180° and its channel axes swapped, padded by 2 - pad. The weight
 * gradient is the adjoint of the kernel's path: with each tile's 2x2 block of output
 * gradient transformed to A dy Aᵀ (4x4), the kernel's gradient is Gᵀ X G of
 *
 *   X[ξ] (out channels, in channels) = Σ over tiles of (A dy Aᵀ)[ξ] · V[ξ]ᵀ
 *
 * 16 products whose shared dimension is the tiles.
 *
 * Tiles are numbered over the whole batch (image, tile row, tile column) and cut into
 * runs; each slot (one per operator thread) transforms its runs' patches, multiplies and
 * transforms the products back into its images' outputs — or, for the weight gradient,
 * sums its runs' products into its own X, the slots' Xs added up at the end — with its
 * own buffers in the temp space. Sums of products are rounded differently from im2col's
 * (the transforms add and halve), within a few ulp of the values' magnitude.
 */
#include "operator/convolution.h"

#include "common/gemm.h"
#include "common/parallel.h"

#include <string.h>

/* One problem as the fast path sees it: a stride-1 3x3 correlation of `in` (n, cin, h,
 * w), zero-padded by ph, pw, with a weight, into `out` (n, cout, oh, ow); or the weight
 * gradient of one. */
struct wino {
    int64_t n, cin, h, w, cout, oh, ow, ph, pw;
    int64_t th, tw, tiles;          /* tile rows, tile columns per image; tiles of the batch */
    int64_t run;                    /* tiles per product */
    int64_t kplane, vplane, mplane; /* floats from one plane of u (or sums), v, m to the next */
    int slots;
    size_t slot_size;    /* floats per slot, a multiple of 16 */
    size_t sum_size;     /* floats of a slot's weight-gradient sums (0 when convolving) */
    float *u;            /* convolving: the transformed kernels (16, cout, cin) */
    float *space;        /* the slots' buffers */
    const float *weight; /* convolving: (cout, cin, 3, 3), or (cin, cout, 3, 3) if adjoint */
    bool adjoint;        /* convolving by the weight turned by 180°, its axes swapped */
    const float *in;     /* (n, cin, h, w) */
    const float *bias;   /* convolving: (cout) or NULL */
    const float *dy;     /* summing the weight gradient: the output gradient (n, cout, oh, ow) */
    float *out;          /* convolving: (n, cout, oh, ow); else the weight gradient */
    int req;
};

/* Where tile t lies: image b, tile row ty, tile column tx. */
struct tile {
    int64_t b, ty, tx;
};

static struct tile tile_at(const struct wino *p, int64_t t) {
    int64_t per_image = p->th * p->tw;
    return (struct tile){t / per_image, t % per_image / p->tw, t % p->tw};
}

/* The tiles of a run, as segments of tile rows: `seg` tiles from `at` (the caller moves
 * on with segment_next). */
static int64_t segment_len(const struct wino *p, struct tile at, int64_t left) {
    return p->tw - at.tx < left ? p->tw - at.tx : left;
}

static void segment_next(const struct wino *p, struct tile *at, int64_t seg) {
    at->tx += seg;
    if (at->tx < p->tw)
        return;
    at->tx = 0;
    if (++at->ty < p->th)
        return;
    at->ty = 0;
    at->b++;
}

/* Transformed kernels of out channels [o0, o1): u[ξ] (cout, cin) = G g Gᵀ of the 3x3
 * kernel of (o, i), where g is w[o][i] as it is, or (p->adjoint, for the data gradient)
 * w[i][o] turned by 180°. */
static void transform_kernels(void *arg, int64_t o0, int64_t o1) {
    const struct wino *p = arg;
    const int64_t cout = p->cout, cin = p->cin, plane = p->kplane;
    for (int64_t o = o0; o < o1; o++)
        for (int64_t i = 0; i < cin; i++) {
            float g[3][3];
            const float *k =
                p->adjoint ? p->weight + (i * cout + o) * 9 : p->weight + (o * cin + i) * 9;
            for (int r = 0; r < 3; r++)
                for (int s = 0; s < 3; s++)
                    g[r][s] = p->adjoint ? k[(2 - r) * 3 + (2 - s)] : k[r * 3 + s];
            float t[4][3]; /* G g */
            for (int s = 0; s < 3; s++) {
                t[0][s] = g[0][s];
                t[1][s] = 0.5f * (g[0][s] + g[1][s] + g[2][s]);
                t[2][s] = 0.5f * (g[0][s] - g[1][s] + g[2][s]);
                t[3][s] = g[2][s];
            }
            float *dst = p->u + o * cin + i;
            for (int r = 0; r < 4; r++) { /* (G g) Gᵀ */
                dst[(r * 4 + 0) * plane] = t[r][0];
                dst[(r * 4 + 1) * plane] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
                dst[(r * 4 + 2) * plane] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
                dst[(r * 4 + 3) * plane] = t[r][2];
            }
        }
}

/* The four input rows under a segment of `seg` tiles from column tx of tile row ty:
 * raw (4, 2 seg + 2), zeros outside the image. */
static void patch_rows(const struct wino *p, const float *img, int64_t ty, int64_t tx, int64_t seg,
                       float *restrict raw) {
    const int64_t width = 2 * seg + 2, x0 = 2 * tx - p->pw;
    const int64_t lo = x0 < 0 ? -x0 : 0, hi = x0 + width > p->w ? p->w - x0 : width;
    for (int r = 0; r < 4; r++) {
        float *row = raw + r * width;
        int64_t y = 2 * ty - p->ph + r;
        if (y < 0 || y >= p->h || hi <= lo) {
            memset(row, 0, (size_t)width * sizeof(float));
            continue;
        }
        memset(row, 0, (size_t)lo * sizeof(float));
        memcpy(row + lo, img + y * p->w + x0 + lo, (size_t)(hi - lo) * sizeof(float));
        memset(row + hi, 0, (size_t)(width - hi) * sizeof(float));
    }
}

/* (Bᵀ d) B of the segment's patches from their rows (patch_rows; e holds Bᵀ d, as
 * many floats), each to its column of the 16 planes at dst (`plane` floats apart). */
static MXC__SIMD_KERNEL void patch_columns(const float *restrict raw, int64_t seg,
                                           float *restrict e, float *restrict dst, int64_t plane) {
    const int64_t width = 2 * seg + 2;
    const float *d0 = raw, *d1 = raw + width, *d2 = raw + 2 * width, *d3 = raw + 3 * width;
    for (int64_t x = 0; x < width; x++) {
        e[x] = d0[x] - d2[x];
        e[width + x] = d1[x] + d2[x];
        e[2 * width + x] = d2[x] - d1[x];
        e[3 * width + x] = d1[x] - d3[x];
    }
    for (int r = 0; r < 4; r++) {
        const float *er = e + r * width;
        float *restrict v0 = dst + (r * 4) * plane, *restrict v1 = v0 + plane;
        float *restrict v2 = v1 + plane, *restrict v3 = v2 + plane;
        for (int64_t k = 0; k < seg; k++) {
            float a = er[2 * k], b = er[2 * k + 1], c = er[2 * k + 2], d = er[2 * k + 3];
            v0[k] = a - c;
            v1[k] = b + c;
            v2[k] = c - b;
            v3[k] = b - d;
        }
    }
}

/* What a transform does to the `seg` tiles of one tile row from `at`, columns [q, q +
 * seg) of the run, in channel c: planes are the run's 16 transformed planes (v or m),
 * rows a segment's scratch. */
typedef void segment_fn(const struct wino *p, int64_t c, struct tile at, int64_t q, int64_t seg,
                        float *planes, float *rows);

/* fn on each channel's segments of tiles [t0, t0 + count), a channel at a time: its 16
 * rows of the planes are then visited in order (a segment's columns of every channel at
 * once are a thousand places at a time). */
static void each_segment(const struct wino *p, int64_t channels, int64_t t0, int64_t count,
                         segment_fn *fn, float *planes, float *rows) {
    const struct tile first = tile_at(p, t0);
    for (int64_t c = 0; c < channels; c++) {
        struct tile at = first;
        for (int64_t q = 0, seg; q < count; q += seg, segment_next(p, &at, seg)) {
            seg = segment_len(p, at, count - q);
            fn(p, c, at, q, seg, planes, rows);
        }
    }
}

/* v[ξ] (cin, run): Bᵀ d B of each patch. */
static void patch_segment(const struct wino *p, int64_t c, struct tile at, int64_t q, int64_t seg,
                          float *v, float *rows) {
    patch_rows(p, p->in + (at.b * p->cin + c) * p->h * p->w, at.ty, at.tx, seg, rows);
    patch_columns(rows, seg, rows + 4 * (2 * p->tw + 2), v + c * p->run + q, p->vplane);
}

/* Aᵀ m A plus the bias for a segment of `seg` tiles whose 16 products lie at src
 * (`plane` floats apart): the two output rows y (2, 2 seg). */
static MXC__SIMD_KERNEL void product_rows(const float *restrict src, int64_t plane, int64_t seg,
                                          float bias, float *restrict y) {
    float *restrict y0 = y, *restrict y1 = y + 2 * seg;
    const float *restrict m[16];
    for (int i = 0; i < 16; i++)
        m[i] = src + i * plane;
    for (int64_t k = 0; k < seg; k++) {
        /* Aᵀ m: rows 0 and 1 of the 2x4 */
        float a0 = m[0][k] + m[4][k] + m[8][k], b0 = m[4][k] - m[8][k] - m[12][k];
        float a1 = m[1][k] + m[5][k] + m[9][k], b1 = m[5][k] - m[9][k] - m[13][k];
        float a2 = m[2][k] + m[6][k] + m[10][k], b2 = m[6][k] - m[10][k] - m[14][k];
        float a3 = m[3][k] + m[7][k] + m[11][k], b3 = m[7][k] - m[11][k] - m[15][k];
        y0[2 * k] = a0 + a1 + a2 + bias; /* (Aᵀ m) A */
        y0[2 * k + 1] = a1 - a2 - a3 + bias;
        y1[2 * k] = b0 + b1 + b2 + bias;
        y1[2 * k + 1] = b1 - b2 - b3 + bias;
    }
}

/* The outputs of channel o from m[ξ] (cout, run), stored as p->req says (the tiles of an
 * odd edge are cut). */
static void product_segment(const struct wino *p, int64_t o, struct tile at, int64_t q, int64_t seg,
                            float *m, float *rows) {
    const int64_t x0 = 2 * at.tx, n = 2 * seg < p->ow - x0 ? 2 * seg : p->ow - x0;
    product_rows(m + o * p->run + q, p->mplane, seg, p->bias ? p->bias[o] : 0.0f, rows);
    float *img = p->out + (at.b * p->cout + o) * p->oh * p->ow;
    for (int64_t r = 0; r < 2 && 2 * at.ty + r < p->oh; r++) {
        float *dst = img + (2 * at.ty + r) * p->ow + x0;
        const float *y = rows + r * 2 * seg;
        if (p->req == MXC__REQ_ADD)
            for (int64_t i = 0; i < n; i++)
                dst[i] += y[i];
        else
            memcpy(dst, y, (size_t)n * sizeof(float));
    }
}

/* The two rows of a tile row's output gradient under a segment of `seg` tiles from
 * column tx (a row at the image's edge, or past it, padded with zeros): rows (2, 2 seg);
 * then A dy Aᵀ of each tile's 2x2 block to its column of the 16 planes at dst. */
static MXC__SIMD_KERNEL void gradient_columns(const float *restrict rows, int64_t seg,
                                              float *restrict dst, int64_t plane) {
    const float *restrict y0 = rows, *restrict y1 = rows + 2 * seg;
    /* A dy, row r: y0 · ka[r] + y1 · kc[r] */
    static const float ka[4] = {1, 1, 1, 0}, kc[4] = {0, 1, -1, -1};
    for (int r = 0; r < 4; r++) {
        float *restrict m0 = dst + (r * 4) * plane, *restrict m1 = m0 + plane;
        float *restrict m2 = m1 + plane, *restrict m3 = m2 + plane;
        const float a = ka[r], c = kc[r];
        for (int64_t k = 0; k < seg; k++) {
            float e = a * y0[2 * k] + c * y1[2 * k], f = a * y0[2 * k + 1] + c * y1[2 * k + 1];
            m0[k] = e; /* (e, f) Aᵀ */
            m1[k] = e + f;
            m2[k] = e - f;
            m3[k] = -f;
        }
    }
}

/* m[ξ] (cout, run) of channel o: A dy Aᵀ of each tile's block of the output gradient,
 * the adjoint of product_segment. */
static void gradient_segment(const struct wino *p, int64_t o, struct tile at, int64_t q,
                             int64_t seg, float *m, float *rows) {
    const int64_t x0 = 2 * at.tx, n = 2 * seg < p->ow - x0 ? 2 * seg : p->ow - x0;
    const float *img = p->dy + (at.b * p->cout + o) * p->oh * p->ow;
    for (int64_t r = 0; r < 2; r++) {
        float *row = rows + r * 2 * seg;
        int64_t y = 2 * at.ty + r, have = y < p->oh ? n : 0;
        if (have)
            memcpy(row, img + y * p->ow + x0, (size_t)have * sizeof(float));
        memset(row + have, 0, (size_t)(2 * seg - have) * sizeof(float));
    }
    gradient_columns(rows, seg, m + o * p->run + q, p->mplane);
}

/* Slot s's buffers: the weight-gradient sums (sum_size floats), v (16, cin, run), m (16,
 * cout, run) and the rows of one segment. */
struct slot_space {
    float *sums, *v, *m, *rows;
};

static struct slot_space slot_space(const struct wino *p, int64_t s) {
    float *base = p->space + (size_t)s * p->slot_size;
    float *v = base + p->sum_size, *m = v + 16 * p->vplane;
    return (struct slot_space){base, v, m, m + 16 * p->mplane};
}

/* Convolving, the outputs of the slot's tiles; summing the weight gradient, the slot's
 * sums[ξ] (cout, cin) = Σ over its tiles of m[ξ] · v[ξ]ᵀ. */
static void run_slots(void *arg, int64_t s0, int64_t s1) {
    const struct wino *p = arg;
    for (int64_t s = s0; s < s1; s++) {
        struct slot_space b = slot_space(p, s);
        int64_t q = p->tiles / p->slots, r = p->tiles % p->slots;
        int64_t first = s * q + (s < r ? s : r), last = first + q + (s < r);
        for (int64_t t0 = first; t0 < last; t0 += p->run) {
            int64_t count = last - t0 < p->run ? last - t0 : p->run;
            each_segment(p, p->cin, t0, count, patch_segment, b.v, b.rows);
            if (p->dy) { /* summing the weight gradient */
                each_segment(p, p->cout, t0, count, gradient_segment, b.m, b.rows);
                for (int xi = 0; xi < 16; xi++)
                    mxc__sgemm(false, true, p->cout, p->cin, count, 1.0f, b.m + xi * p->mplane,
                               p->run, b.v + xi * p->vplane, p->run, t0 == first ? 0.0f : 1.0f,
                               b.sums + xi * p->kplane, p->cin);
                continue;
            }
            for (int xi = 0; xi < 16; xi++)
                mxc__sgemm(false, false, p->cout, count, p->cin, 1.0f, p->u + xi * p->kplane,
                           p->cin, b.v + xi * p->vplane, p->run, 0.0f, b.m + xi * p->mplane,
                           p->run);
            each_segment(p, p->cout, t0, count, product_segment, b.m, b.rows);
        }
    }
}

/* The weight gradient of out channels [o0, o1) from the slots' sums: Gᵀ x G of each
 * (o, i)'s 4x4 x, the adjoint of transform_kernels, stored as p->req says. */
static void kernel_gradients(void *arg, int64_t o0, int64_t o1) {
    const struct wino *p = arg;
    const int64_t plane = p->kplane;
    for (int64_t o = o0; o < o1; o++)
        for (int64_t i = 0; i < p->cin; i++) {
            float x[16];
            for (int xi = 0; xi < 16; xi++) {
                const float *sums = p->space + xi * plane + o * p->cin + i; /* slot 0's */
                x[xi] = 0.0f;
                for (int s = 0; s < p->slots; s++)
                    x[xi] += sums[(size_t)s * p->slot_size];
            }
            float t[3][4]; /* Gᵀ x */
            for (int s = 0; s < 4; s++) {
                t[0][s] = x[s] + 0.5f * (x[4 + s] + x[8 + s]);
                t[1][s] = 0.5f * (x[4 + s] - x[8 + s]);
                t[2][s] = 0.5f * (x[4 + s] + x[8 + s]) + x[12 + s];
            }
            float *dw = p->out + (o * p->cin + i) * 9;
            for (int r = 0; r < 3; r++) { /* (Gᵀ x) G */
                float k[3] = {t[r][0] + 0.5f * (t[r][1] + t[r][2]), 0.5f * (t[r][1] - t[r][2]),
                              0.5f * (t[r][1] + t[r][2]) + t[r][3]};
                for (int s = 0; s < 3; s++)
                    dw[r * 3 + s] = p->req == MXC__REQ_ADD ? dw[r * 3 + s] + k[s] : k[s];
            }
        }
}

/* A slot's run: the tiles of its 16 products (their columns forward, their shared
 * dimension for the weight gradient). Below 256 tiles the products are thin: each call
 * packs the (cout, cin) operand for too few tiles (ResNet's 512-channel layer on 4x4
 * maps: forward 81 ms at 32 tiles, 64 ms at 256; MXC_OP_NTHREADS=1 bench_ops --case
 * resnet_3x3_512). Narrow layers take more tiles, up to SLOT_BUDGET bytes of transformed
 * patches and products: beyond a core's cache, yet on 64 channels at 56x56 runs of 256
 * KiB - 1 MiB were slower and 4 MiB no faster (--case resnet_3x3). */
enum { RUN_TILES = 256, SLOT_BUDGET = 2 << 20, MIN_RUN = 16 };

/* Floats from one of 16 planes of a by b floats to the next: a * b rounded up to 16, and
 * one cache line more. Planes a power of two apart (64 channels by 256 tiles, 512
 * channels by 512) fall in the same cache sets, and the transforms touch all 16 at once. */
static bool plane_stride(int64_t a, int64_t b, int64_t *stride) {
    int64_t n;
    if (__builtin_mul_overflow(a, b, &n) || __builtin_add_overflow(n, 15 + 16, &n))
        return false;
    *stride = n / 16 * 16;
    return true;
}

/* Where things lie in the temp space, in floats: `slots` slots of `run` tiles (16 planes
 * of v and of m each, and 8 rows of 2 tw + 2 floats) and 16 planes of kernels, shared
 * when convolving (kernels) and each slot's own weight-gradient sums otherwise (sums);
 * every part a multiple of 16. */
struct layout {
    int64_t kplane, vplane, mplane, kernels, sums, slot, total;
};

/* False when a size overflows. */
static bool layout_of(int64_t cin, int64_t cout, int64_t tw, int64_t run, int64_t slots,
                      bool weight_grad, struct layout *l) {
    int64_t u, v, rows, slot, all;
    if (!plane_stride(cout, cin, &l->kplane) || !plane_stride(cin, run, &l->vplane) ||
        !plane_stride(cout, run, &l->mplane) || __builtin_mul_overflow(l->kplane, 16, &u) ||
        __builtin_add_overflow(l->vplane, l->mplane, &v) || __builtin_mul_overflow(v, 16, &v) ||
        __builtin_mul_overflow(tw, 16, &rows) || __builtin_add_overflow(rows, 16 + 15, &rows) ||
        __builtin_add_overflow(v, rows / 16 * 16, &slot) ||
        __builtin_add_overflow(slot, weight_grad ? u : 0, &slot) ||
        __builtin_mul_overflow(slot, slots, &all) ||
        __builtin_add_overflow(all, (weight_grad ? 0 : u) + 16, &all))
        return false;
    l->kernels = weight_grad ? 0 : u;
    l->sums = weight_grad ? u : 0;
    l->slot = slot;
    l->total = all;
    return true;
}

/* The workspace parameter, in floats. */
static int64_t workspace_floats(const struct mxc__op_call *c) {
    return (int64_t)((const struct conv_param *)c->params)->workspace << 20 >> 2;
}

bool mxc__winograd_fits(const struct mxc__op_call *c, const struct conv_geom *g) {
    /* narrow layers (the 3-channel stem) make products too thin to gain from it */
    if (!(g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
          g->groups == 1 && g->ph <= 2 && g->pw <= 2 && g->ic >= 16 && g->oc >= 16 && g->oh > 0 &&
          g->ow > 0 && g->batch > 0))
        return false;
    /* one slot of the smallest run, forward (ow) and for the data gradient (iw); for the
     * weight gradient that slot's sums take the kernels' place, the same total */
    struct layout l;
    int64_t tw = ((g->ow > g->iw ? g->ow : g->iw) + 1) / 2;
    return layout_of(g->ic, g->oc, tw, MIN_RUN, 1, false, &l) && l.total <= workspace_floats(c);
}

static int run(const struct mxc__op_call *c, struct wino *p) {
    const bool weight_grad = p->dy != NULL;
    p->th = (p->oh + 1) / 2;
    p->tw = (p->ow + 1) / 2;
    p->tiles = p->n * p->th * p->tw;
    p->slots = mxc__in_parallel() ? 1 : mxc__op_threads();
    if (p->slots > p->tiles)
        p->slots = (int)p->tiles;
    p->run = SLOT_BUDGET / (16 * (p->cin + p->cout) * (int64_t)sizeof(float));
    if (p->run < RUN_TILES)
        p->run = RUN_TILES;
    int64_t per_slot = (p->tiles + p->slots - 1) / p->slots;
    if (p->run > per_slot)
        p->run = per_slot;
    /* within the workspace parameter (mxc__winograd_fits made sure one slot of MIN_RUN
     * tiles is): fewer slots first, then shorter runs */
    struct layout l;
    while (!layout_of(p->cin, p->cout, p->tw, p->run, p->slots, weight_grad, &l) ||
           l.total > workspace_floats(c)) {
        if (p->slots > 1)
            p->slots--;
        else if (p->run > MIN_RUN)
            p->run = p->run / 2 > MIN_RUN ? p->run / 2 : MIN_RUN;
        else
            return mxc__error(MXC_EINTERNAL, "Winograd convolution: temp space beyond workspace");
    }
    p->kplane = l.kplane, p->vplane = l.vplane, p->mplane = l.mplane;
    p->slot_size = (size_t)l.slot;
    p->sum_size = (size_t)l.sums;
    void *space = NULL;
    int rc = mxc__resource_temp(c->resources[0], (size_t)l.total * sizeof(float), &space);
    if (rc != MXC_OK)
        return rc;
    p->u = (float *)(((uintptr_t)space + 63) & ~(uintptr_t)63);
    p->space = p->u + l.kernels;
    const int64_t grain = 1 + 1024 / p->cin; /* chunks of 1024 kernels or more */
    if (!weight_grad)
        mxc__parallel_for(p->cout, grain, transform_kernels, p);
    mxc__parallel_for(p->slots, 1, run_slots, p);
    if (weight_grad)
        mxc__parallel_for(p->cout, grain, kernel_gradients, p);
    return MXC_OK;
}

/* The forward's problem of geometry g, its arrays not yet given. */
static struct wino forward_problem(const struct conv_geom *g) {
    return (struct wino){.n = g->batch,
                         .cin = g->ic,
                         .h = g->ih,
                         .w = g->iw,
                         .cout = g->oc,
                         .oh = g->oh,
                         .ow = g->ow,
                         .ph = g->ph,
                         .pw = g->pw};
}

int mxc__winograd_forward(const struct mxc__op_call *c, const struct conv_geom *g, const float *x,
                          const float *w, const float *bias, float *y, int req) {
    struct wino p = forward_problem(g);
    p.weight = w, p.in = x, p.bias = bias, p.out = y, p.req = req;
    return run(c, &p);
}

int mxc__winograd_backward_data(const struct mxc__op_call *c, const struct conv_geom *g,
                                const float *dy, const float *w, float *dx, int req) {
    struct wino p = {.n = g->batch,
                     .cin = g->oc,
                     .h = g->oh,
                     .w = g->ow,
                     .cout = g->ic,
                     .oh = g->ih,
                     .ow = g->iw,
                     .ph = 2 - g->ph,
                     .pw = 2 - g->pw,
                     .weight = w,
                     .adjoint = true,
                     .in = dy,
                     .out = dx,
                     .req = req};
    return run(c, &p);
}

int mxc__winograd_backward_weight(const struct mxc__op_call *c, const struct conv_geom *g,
                                  const float *x, const float *dy, float *dw, int req) {
    struct wino p = forward_problem(g);
    p.in = x, p.dy = dy, p.out = dw, p.req = req;
    return run(c, &p);
}

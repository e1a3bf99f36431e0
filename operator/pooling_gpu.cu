/*
 * operator/pooling_gpu.cu — Pooling on a GPU: the window arithmetic is the CPU's
 * (operator/pooling_math.h); forward is one thread per output, backward one thread per
 * input summing, in the CPU's order, the gradients of the windows that hold it (no
 * atomics, so every request is honoured with one store).
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/pooling_math.h"
}

extern "C" int mxc__pool_forward_gpu(const struct pgeom *g, int type, bool incl, const float *x,
                                     float *y, int req, void *stream) {
    const struct pgeom q = *g;
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(q.planes * q.oh * q.ow, stream, "Pooling", [=] __device__(int64_t i) {
        int64_t o = i % (q.oh * q.ow), plane = i / (q.oh * q.ow);
        struct pool_window w = pool_window_at(&q, incl, o / q.ow, o % q.ow);
        mxc__put(req, y, i, pool_value(x + plane * q.ih * q.iw, q.iw, w, type));
    });
}

/* The outputs along one axis whose windows may hold input position p: [*o0, *o1). */
static __device__ void candidates(int64_t p, int64_t s, int64_t k, int64_t pad, int64_t out,
                                  int64_t *o0, int64_t *o1) {
    int64_t first = p + pad - k + 1; /* the window starting at o * s - pad reaches p */
    *o0 = first > 0 ? (first - 1) / s + 1 : 0;
    int64_t last = (p + pad) / s + 1;
    *o1 = last < out ? last : out;
}

extern "C" int mxc__pool_backward_gpu(const struct pgeom *g, int type, bool incl, const float *x,
                                      const float *y, const float *dy, float *dx, int req,
                                      void *stream) {
    const struct pgeom q = *g;
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(
        q.planes * q.ih * q.iw, stream, "Pooling backward", [=] __device__(int64_t i) {
            int64_t e = i % (q.ih * q.iw), plane = i / (q.ih * q.iw);
            int64_t iy = e / q.iw, ix = e % q.iw;
            const float *xp = x + plane * q.ih * q.iw;
            const float *yp = y + plane * q.oh * q.ow, *dyp = dy + plane * q.oh * q.ow;
            int64_t oy0, oy1, ox0, ox1;
            candidates(iy, q.sh, q.kh, q.ph, q.oh, &oy0, &oy1);
            candidates(ix, q.sw, q.kw, q.pw, q.ow, &ox0, &ox1);
            float s = 0.0f;
            for (int64_t oy = oy0; oy < oy1; oy++)
                for (int64_t ox = ox0; ox < ox1; ox++) {
                    struct pool_window w = pool_window_at(&q, incl, oy, ox);
                    if (iy < w.h0 || iy >= w.h1 || ix < w.w0 || ix >= w.w1)
                        continue;
                    int64_t o = oy * q.ow + ox;
                    if (type == POOL_MAX)
                        s += pool_first_max(xp, q.iw, w, yp[o]) == e ? dyp[o] : 0.0f;
                    else
                        s += type == POOL_AVG ? dyp[o] / w.divisor : dyp[o];
                }
            mxc__put(req, dx, i, s);
        });
}

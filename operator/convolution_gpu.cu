/*
 * operator/convolution_gpu.cu — the device work of Convolution's own GPU path (used
 * without cuDNN, with cudnn_off, and for problems cuDNN does not take): im2col, col2im
 * (a gather, so no atomics and every request honoured), the bias and its gradient. The
 * products are cuBLAS calls in operator/convolution_gpu.c.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/convolution.h"
}

extern "C" int mxc__conv_im2col_gpu(const struct conv_geom *g, const float *img, float *col,
                                    void *stream) {
    const struct conv_geom q = *g;
    int64_t n = q.ic * q.kh * q.kw * q.pix;
    return mxc__launch(n, stream, "Convolution: im2col", [=] __device__(int64_t i) {
        int64_t r = i / q.pix, p = i % q.pix;
        int64_t c = r / (q.kh * q.kw), ki = r / q.kw % q.kh, kj = r % q.kw;
        int64_t iy = p / q.ow * q.sh - q.ph + ki * q.dh;
        int64_t ix = p % q.ow * q.sw - q.pw + kj * q.dw;
        bool inside = iy >= 0 && iy < q.ih && ix >= 0 && ix < q.iw;
        col[i] = inside ? img[(c * q.ih + iy) * q.iw + ix] : 0.0f;
    });
}

extern "C" int mxc__conv_col2im_gpu(const struct conv_geom *g, const float *col, float *img,
                                    int req, void *stream) {
    const struct conv_geom q = *g;
    int64_t n = q.ic * q.ih * q.iw;
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(n, stream, "Convolution: col2im", [=] __device__(int64_t i) {
        int64_t c = i / (q.ih * q.iw), iy = i / q.iw % q.ih, ix = i % q.iw;
        float s = 0.0f;
        for (int64_t ki = 0; ki < q.kh; ki++) {
            int64_t ty = iy + q.ph - ki * q.dh;
            if (ty < 0 || ty % q.sh != 0 || ty / q.sh >= q.oh)
                continue;
            for (int64_t kj = 0; kj < q.kw; kj++) {
                int64_t tx = ix + q.pw - kj * q.dw;
                if (tx < 0 || tx % q.sw != 0 || tx / q.sw >= q.ow)
                    continue;
                s += col[((c * q.kh + ki) * q.kw + kj) * q.pix + ty / q.sh * q.ow + tx / q.sw];
            }
        }
        mxc__put(req, img, i, s);
    });
}

extern "C" int mxc__conv_add_bias_gpu(float *x, const float *b, int64_t n, int64_t c, int64_t pix,
                                      void *stream) {
    return mxc__launch(n * c * pix, stream, "Convolution: bias",
                       [=] __device__(int64_t i) { x[i] += b[i / pix % c]; });
}

/* One block per channel: the block's threads sum strided shares of the channel's n * pix
 * values in double, then a shared-memory tree adds the shares. */
static __global__ void bias_grad_kernel(const float *dy, float *db, int64_t n, int64_t c,
                                        int64_t pix, int req) {
    __shared__ double part[MXC__CUDA_THREADS];
    for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
        double s = 0;
        for (int64_t j = threadIdx.x; j < n * pix; j += blockDim.x)
            s += dy[(j / pix * c + ch) * pix + j % pix];
        part[threadIdx.x] = s;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {
            if ((int)threadIdx.x < half)
                part[threadIdx.x] += part[threadIdx.x + half];
            __syncthreads();
        }
        if (threadIdx.x == 0)
            mxc__put(req, db, ch, (float)part[0]);
        __syncthreads(); /* part is reused by the next channel */
    }
}

extern "C" int mxc__conv_bias_grad_gpu(const float *dy, float *db, int64_t n, int64_t c,
                                       int64_t pix, int req, void *stream) {
    if (c == 0 || req == MXC__REQ_NULL)
        return MXC_OK;
    unsigned blocks = (unsigned)(c < 65535 ? c : 65535);
    bias_grad_kernel<<<blocks, MXC__CUDA_THREADS, 0, (cudaStream_t)stream>>>(dy, db, n, c, pix,
                                                                             req);
    return mxc__gpu_status("Convolution: bias gradient");
}

/*
 * operator/softmax_gpu.cu — softmax, log_softmax and SoftmaxOutput on a GPU (launchers of
 * operator/softmax.h). A (outer, n, inner) tensor with inner == 1 runs one block per row,
 * the maximum and sum reduced in shared memory; with inner > 1 one thread walks each
 * column (o, i) along n, neighbouring threads reading neighbouring elements. Every thread
 * reads an element before storing it and the reductions finish before any store, so y may
 * be x (dx may be g) as the CPU kernels allow.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/softmax.h"
}

namespace {

/* The block's reduction (sum, or maximum) of v, returned to every thread. blockDim.x is a
 * multiple of 32, at most 1024. */
__device__ float block_reduce(float v, bool is_max) {
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_down_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); /* the previous call's readers are done with part */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? part[lane] : (is_max ? -INFINITY : 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            float w = __shfl_down_sync(0xffffffffu, v, o);
            v = is_max ? fmaxf(v, w) : v + w;
        }
        if (lane == 0)
            part[0] = v;
    }
    __syncthreads();
    return part[0];
}

/* Rows of n contiguous elements (inner == 1), a block per row, grid-stride over rows. */
__global__ void softmax_rows(const float *x, float *y, int64_t rows, int64_t n, float t,
                             bool log_out, int req) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float mx = -INFINITY;
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
            mx = fmaxf(mx, xr[c]);
        mx = block_reduce(mx, true);
        float sum = 0.0f;
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
            sum += mxc__softmax_exp(xr[c], mx, t);
        sum = block_reduce(sum, false);
        const float log_sum = logf(sum), inv = 1.0f / sum;
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
            float v = log_out ? mxc__log_softmax_of(xr[c], mx, t, log_sum)
                              : mxc__softmax_exp(xr[c], mx, t) * inv;
            mxc__put(req, yr, c, v);
        }
    }
}

__global__ void softmax_grad_rows(const float *y, const float *g, float *dx, int64_t rows,
                                  int64_t n, float t, bool log_out, int req) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *yr = y + r * n, *gr = g + r * n;
        float s = 0.0f;
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
            s += mxc__softmax_grad_term(yr[c], gr[c], log_out);
        s = block_reduce(s, false);
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
            mxc__put(req, dx + r * n, c, mxc__softmax_grad(yr[c], gr[c], s, t, log_out));
    }
}

unsigned row_blocks(int64_t rows) { return (unsigned)(rows < 65535 ? rows : 65535); }

int launched(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "%s: kernel launch: %s", what, cudaGetErrorString(e));
    return MXC_OK;
}

/* Counts the labels (m) whose class is not `ignore` and stores grad_scale over that
 * count: one block. */
__global__ void valid_scale_kernel(const float *label, int64_t m, int64_t ignore, float grad_scale,
                                   float *out) {
    __shared__ long long count[MXC__CUDA_THREADS];
    long long k = 0;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x)
        k += mxc__label_class(label[i]) != ignore;
    count[threadIdx.x] = k;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long total = 0;
        for (unsigned i = 0; i < blockDim.x; i++)
            total += count[i];
        *out = mxc__so_scale(grad_scale, (double)total);
    }
}

} // namespace

extern "C" int mxc__softmax_gpu(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
                                float t, bool log_out, int req, void *stream) {
    if (req == MXC__REQ_NULL || outer * n * inner == 0)
        return MXC_OK;
    if (inner == 1) {
        softmax_rows<<<row_blocks(outer), MXC__CUDA_THREADS, 0, (cudaStream_t)stream>>>(
            x, y, outer, n, t, log_out, req);
        return launched(log_out ? "log_softmax" : "softmax");
    }
    return mxc__launch(outer * inner, stream, "softmax", [=] __device__(int64_t col) {
        const int64_t o = col / inner, i = col - o * inner;
        const float *xc = x + o * n * inner + i;
        float *yc = y + o * n * inner + i;
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t c = 0; c < n; c++)
            mx = fmaxf(mx, xc[c * inner]);
        for (int64_t c = 0; c < n; c++)
            sum += mxc__softmax_exp(xc[c * inner], mx, t);
        const float log_sum = logf(sum), inv = 1.0f / sum;
        for (int64_t c = 0; c < n; c++) {
            float v = log_out ? mxc__log_softmax_of(xc[c * inner], mx, t, log_sum)
                              : mxc__softmax_exp(xc[c * inner], mx, t) * inv;
            mxc__put(req, yc, c * inner, v);
        }
    });
}

extern "C" int mxc__softmax_grad_gpu(const float *y, const float *g, float *dx, int64_t outer,
                                     int64_t n, int64_t inner, float t, bool log_out, int req,
                                     void *stream) {
    if (req == MXC__REQ_NULL || outer * n * inner == 0)
        return MXC_OK;
    if (inner == 1) {
        softmax_grad_rows<<<row_blocks(outer), MXC__CUDA_THREADS, 0, (cudaStream_t)stream>>>(
            y, g, dx, outer, n, t, log_out, req);
        return launched(log_out ? "log_softmax backward" : "softmax backward");
    }
    return mxc__launch(outer * inner, stream, "softmax backward", [=] __device__(int64_t col) {
        const int64_t o = col / inner, i = col - o * inner, base = o * n * inner + i;
        float s = 0.0f;
        for (int64_t c = 0; c < n; c++)
            s += mxc__softmax_grad_term(y[base + c * inner], g[base + c * inner], log_out);
        for (int64_t c = 0; c < n; c++) {
            const int64_t k = base + c * inner;
            mxc__put(req, dx, k, mxc__softmax_grad(y[k], g[k], s, t, log_out));
        }
    });
}

extern "C" int mxc__so_grad_gpu(const float *y, const float *label, int64_t label_size, float *dx,
                                int64_t outer, int64_t n, int64_t inner, int64_t ignore,
                                bool use_ignore, float on, float off, float scale,
                                float *valid_scale, int req, void *stream) {
    if (req == MXC__REQ_NULL || outer * n * inner == 0)
        return MXC_OK;
    if (valid_scale != NULL) {
        valid_scale_kernel<<<1, MXC__CUDA_THREADS, 0, (cudaStream_t)stream>>>(
            label, label_size, ignore, scale, valid_scale);
        int rc = launched("SoftmaxOutput backward (valid labels)");
        if (rc != MXC_OK)
            return rc;
    }
    const float *vs = valid_scale;
    return mxc__launch(outer * n * inner, stream, "SoftmaxOutput backward",
                       [=] __device__(int64_t k) {
                           const int64_t i = k % inner, ch = (k / inner) % n;
                           const int64_t o = k / (inner * n);
                           const int64_t cls = mxc__label_class(label[o * inner + i]);
                           const bool skip = use_ignore && cls == ignore;
                           const float s = vs != NULL ? *vs : scale;
                           mxc__put(req, dx, k, mxc__so_grad(y[k], ch, cls, skip, on, off, s));
                       });
}

extern "C" int mxc__so_prob_grad_gpu(const float *y, const float *label, float *dx, int64_t n,
                                     float grad_scale, int req, void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__launch(n, stream, "SoftmaxOutput backward", [=] __device__(int64_t k) {
        mxc__put(req, dx, k, mxc__so_prob_grad(y[k], label[k], grad_scale));
    });
}

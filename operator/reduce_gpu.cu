/*
 * operator/reduce_gpu.cu — the reductions of operator/reduce.h on a GPU: sum (sum, mean,
 * broadcast's backward) and the other folds (max, min, prod, nansum, nanprod, norms) over
 * the reduced runs of a view, and their gradients.
 *   forward: one block per output element (grid-stride over the outputs), its threads
 *            striding over the reduced elements, partial results combined in shared memory;
 *            short reductions use one thread per output instead. Folds accumulate in double
 *            with the CPU's arithmetic (mxc__red_fold).
 *   backward: a map over the input, each element finding its output through the view.
 * float32, row-major, device pointers.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/reduce.h"
}

#include <math.h>

namespace {

/* Two partial folds of K made one. */
template <int K> __device__ __forceinline__ double combine(double a, double b) {
    switch (K) {
    case MXC__R_MAX:
    case MXC__R_MIN: return mxc__red_fold(K, a, b);
    case MXC__R_PROD:
    case MXC__R_NANPROD: return a * b;
    default: return a + b; /* sums, the nan-sum, the norms' sums of |x| or x^2 */
    }
}

/* The view as its kept runs (in output order) and its reduced runs, each with its input
 * stride: output o starts at kept_offset(o) in the input, and the reduced element r of it
 * is a further reduced_offset(r) away. */
struct plan {
    int nk, nr;
    int64_t kdims[MXC_MAX_NDIM], kstride[MXC_MAX_NDIM];
    int64_t rdims[MXC_MAX_NDIM], rstride[MXC_MAX_NDIM];
    int64_t out_size, count; /* outputs; reduced elements per output */
};

/* Only for out_size > 0: every kept run then has a nonzero output stride. */
plan plan_make(const struct mxc__reduce_view *v) {
    plan p;
    memset(&p, 0, sizeof p);
    int64_t stride = 1, in_stride[MXC_MAX_NDIM];
    for (int d = v->ndim - 1; d >= 0; d--) {
        in_stride[d] = stride;
        stride *= v->dims[d];
    }
    p.count = 1;
    for (int d = 0; d < v->ndim; d++) {
        if (v->out_stride[d] == 0) {
            p.rdims[p.nr] = v->dims[d];
            p.rstride[p.nr++] = in_stride[d];
            p.count *= v->dims[d];
        } else {
            p.kdims[p.nk] = v->dims[d];
            p.kstride[p.nk++] = in_stride[d];
        }
    }
    p.out_size = v->out_size;
    return p;
}

/* The offset of index `i` of a row-major array with `n` dims `dims`, in strides `stride`. */
__device__ __forceinline__ int64_t offset_of(int64_t i, int n, const int64_t *dims,
                                             const int64_t *stride) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (i % dims[d]) * stride[d];
        i /= dims[d];
    }
    return off;
}

/* One block per output element, blockDim.x a power of two, blockDim.x doubles of shared
 * memory. out[o] (req) = scale * the finished fold K of its reduced elements. Partial folds
 * combine by the fold itself: sums add, maxima compare, products multiply, and the nan- and
 * norm folds' partial results are sums or products (norms square only the elements). */
template <int K>
__global__ void reduce_blocks(plan p, const float *in, float *out, float scale, int req) {
    extern __shared__ double part[];
    const unsigned t = threadIdx.x;
    for (int64_t o = blockIdx.x; o < p.out_size; o += gridDim.x) {
        const float *base = in + offset_of(o, p.nk, p.kdims, p.kstride);
        double acc = mxc__red_start(K);
        for (int64_t r = t; r < p.count; r += blockDim.x)
            acc = mxc__red_fold(K, acc, base[offset_of(r, p.nr, p.rdims, p.rstride)]);
        part[t] = acc;
        __syncthreads();
        for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
            if (t < s)
                part[t] = combine<K>(part[t], part[t + s]);
            __syncthreads();
        }
        if (t == 0)
            mxc__put(req, out, o, (float)(scale * mxc__red_finish(K, part[0])));
        __syncthreads(); /* part is reused for the next output */
    }
}

template <int K>
int reduce(const struct mxc__reduce_view *v, const float *in, float *out, float scale, int req,
           void *stream, const char *what) {
    if (req == MXC__REQ_NULL || v->out_size == 0)
        return MXC_OK;
    const plan p = plan_make(v);
    if (p.count == 0)
        scale = 1.0f;    /* the mean of nothing: 0, as on the CPU, not 0 * (1 / 0) */
    if (p.count <= 32) { /* short: one thread per output, in order */
        return mxc__launch(p.out_size, stream, what, [=] __device__(int64_t o) {
            const float *base = in + offset_of(o, p.nk, p.kdims, p.kstride);
            double acc = mxc__red_start(K);
            for (int64_t r = 0; r < p.count; r++)
                acc = mxc__red_fold(K, acc, base[offset_of(r, p.nr, p.rdims, p.rstride)]);
            mxc__put(req, out, o, (float)(scale * mxc__red_finish(K, acc)));
        });
    }
    unsigned threads = 64;
    while (threads < 1024 && (int64_t)threads < p.count)
        threads *= 2;
    const unsigned blocks = (unsigned)(p.out_size < 65535 ? p.out_size : 65535);
    reduce_blocks<K><<<blocks, threads, threads * sizeof(double), (cudaStream_t)stream>>>(
        p, in, out, scale, req);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return mxc__error(MXC_EDEVICE, "%s of %lld outputs: %s", what, (long long)p.out_size,
                          cudaGetErrorString(e));
    return MXC_OK;
}

/* The output element of input element i under view v. */
struct out_index {
    int n;
    int64_t dims[MXC_MAX_NDIM], stride[MXC_MAX_NDIM];
    __device__ int64_t operator()(int64_t i) const { return offset_of(i, n, dims, stride); }
};

out_index out_index_make(const struct mxc__reduce_view *v) {
    out_index f;
    memset(&f, 0, sizeof f);
    f.n = v->ndim;
    for (int d = 0; d < v->ndim; d++) {
        f.dims[d] = v->dims[d];
        f.stride[d] = v->out_stride[d];
    }
    return f;
}

} // namespace

extern "C" int mxc__reduce_sum_gpu(const struct mxc__reduce_view *v, const float *in, float *out,
                                   float scale, int req, void *stream) {
    return reduce<MXC__R_SUM>(v, in, out, scale, req, stream, "sum (GPU)");
}

extern "C" int mxc__reduce_fold_gpu(int kind, const struct mxc__reduce_view *v, const float *in,
                                    float *out, int req, void *stream) {
    switch (kind) {
    case MXC__R_MAX: return reduce<MXC__R_MAX>(v, in, out, 1.0f, req, stream, "max (GPU)");
    case MXC__R_MIN: return reduce<MXC__R_MIN>(v, in, out, 1.0f, req, stream, "min (GPU)");
    case MXC__R_PROD: return reduce<MXC__R_PROD>(v, in, out, 1.0f, req, stream, "prod (GPU)");
    case MXC__R_NANSUM: return reduce<MXC__R_NANSUM>(v, in, out, 1.0f, req, stream, "nansum (GPU)");
    case MXC__R_NANPROD:
        return reduce<MXC__R_NANPROD>(v, in, out, 1.0f, req, stream, "nanprod (GPU)");
    case MXC__R_NORM1: return reduce<MXC__R_NORM1>(v, in, out, 1.0f, req, stream, "norm (GPU)");
    case MXC__R_NORM2: return reduce<MXC__R_NORM2>(v, in, out, 1.0f, req, stream, "norm (GPU)");
    default: return reduce<MXC__R_SUM>(v, in, out, 1.0f, req, stream, "sum (GPU)");
    }
}

extern "C" int mxc__reduce_back_gpu(const struct mxc__reduce_view *v, const float *g, float *gi,
                                    float scale, int req, void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const out_index at = out_index_make(v);
    return mxc__launch(v->in_size, stream, "sum backward (GPU)",
                       [=] __device__(int64_t i) { mxc__put(req, gi, i, scale * g[at(i)]); });
}

extern "C" int mxc__reduce_grad_gpu(int kind, const struct mxc__reduce_view *v, const float *x,
                                    const float *y, const float *g, float *gi, int req,
                                    void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const out_index at = out_index_make(v);
    return mxc__launch(v->in_size, stream, "reduction backward (GPU)", [=] __device__(int64_t i) {
        const int64_t o = at(i);
        mxc__put(req, gi, i, mxc__red_grad(kind, g[o], x[i], y ? y[o] : 0.0f));
    });
}

/*
 * operator/copy_gpu.cu — the data-moving kernels behind operator/copy_gpu.h: plain copies
 * go to cudaMemcpyAsync, everything else (adding, strided rows, sums) is one
 * element-wise map whose store is mxc__put.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/copy_gpu.h"
}

extern "C" int mxc__copy_rows_gpu(float *dst, int64_t dpitch, const float *src, int64_t spitch,
                                  int64_t rows, int64_t width, int req, void *stream) {
    if (req == MXC__REQ_NULL || rows <= 0 || width <= 0)
        return MXC_OK;
    if (req != MXC__REQ_ADD && dst == src && dpitch == spitch)
        return MXC_OK; /* in place */
    if (req != MXC__REQ_ADD && (rows == 1 || (dpitch == width && spitch == width))) {
        cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)(rows * width) * sizeof(float),
                                        cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
        if (e != cudaSuccess)
            return mxc__error(MXC_EDEVICE, "copy: cudaMemcpyAsync of %lld floats: %s",
                              (long long)(rows * width), cudaGetErrorString(e));
        return MXC_OK;
    }
    return mxc__launch(rows * width, stream, "copy", [=] __device__(int64_t j) {
        int64_t r = j / width, k = j - r * width;
        mxc__put(req, dst + r * dpitch, k, src[r * spitch + k]);
    });
}

extern "C" int mxc__copy_req_gpu(float *dst, const float *src, int64_t n, int req, void *stream) {
    return mxc__copy_rows_gpu(dst, n, src, n, 1, n, req, stream);
}

namespace {
struct inputs {
    const float *p[MXC__MAX_OP_ARGS];
};
} // namespace

extern "C" int mxc__sum_gpu(float *out, const float *const *in, int num, int64_t n, int req,
                            void *stream) {
    if (req == MXC__REQ_NULL || num < 1 || num > MXC__MAX_OP_ARGS)
        return MXC_OK;
    inputs a;
    for (int k = 0; k < num; k++)
        a.p[k] = in[k];
    return mxc__launch(n, stream, "ElementWiseSum", [=] __device__(int64_t i) {
        float acc = a.p[0][i];
        for (int k = 1; k < num; k++)
            acc += a.p[k][i];
        mxc__put(req, out, i, acc);
    });
}

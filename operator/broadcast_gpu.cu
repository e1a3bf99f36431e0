/*
 * operator/broadcast_gpu.cu — the broadcast walk on a GPU: a grid-stride map over the
 * output (the view's size, row-major) that finds each operand's element through the view's
 * strides (0 along broadcast runs) and applies the MXC__HD arithmetic of
 * operator/broadcast.h, as the CPU walk does. An operand that is not broadcast is read at
 * element i only, so out may be that operand (in place). float32, device pointers.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/broadcast.h" /* declares mxc__bcast_walk_gpu */
}

namespace {

struct add_op {
    static __device__ float f(float x, float y) { return mxc__b_add(x, y); }
};
struct sub_op {
    static __device__ float f(float x, float y) { return mxc__b_sub(x, y); }
};
struct mul_op {
    static __device__ float f(float x, float y) { return mxc__b_mul(x, y); }
};
struct div_op {
    static __device__ float f(float x, float y) { return mxc__b_div(x, y); }
};

template <typename Op>
int walk(const struct mxc__bview w, const float *a, const float *b, float *out, int req,
         void *stream) {
    return mxc__launch(w.size, stream, "broadcast (GPU)", [=] __device__(int64_t i) {
        int64_t r = i, oa = 0, ob = 0;
        for (int d = w.ndim - 1; d >= 0; d--) {
            const int64_t k = r % w.dims[d];
            r /= w.dims[d];
            oa += k * w.sa[d];
            ob += k * w.sb[d];
        }
        mxc__put(req, out, i, Op::f(a[oa], b[ob]));
    });
}

} // namespace

extern "C" int mxc__bcast_walk_gpu(int op, const struct mxc__bview *v, const float *a,
                                   const float *b, float *out, int req, void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    switch (op) {
    case MXC__B_ADD: return walk<add_op>(*v, a, b, out, req, stream);
    case MXC__B_SUB: return walk<sub_op>(*v, a, b, out, req, stream);
    case MXC__B_MUL: return walk<mul_op>(*v, a, b, out, req, stream);
    default: return walk<div_op>(*v, a, b, out, req, stream);
    }
}

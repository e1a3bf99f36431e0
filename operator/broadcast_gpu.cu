/*
 * operator/broadcast_gpu.cu — the broadcast walks on a GPU: grid-stride maps over the
 * output (the view's size, row-major) that find each operand's element through the view's
 * strides (0 along broadcast runs) and apply the MXC__HD arithmetic of the operator's
 * element-wise row (operator/broadcast.h's table), as the CPU walks do: the forward, and
 * an operand's gradient at a head gradient. An operand that is not broadcast is read at
 * element i only, so out may be that operand (in place). float32, device pointers.
 */
#include "operator/op_gpu.cuh"

#include "operator/elemwise_ops.h" /* static inline functions only: no linkage to declare */

extern "C" {
#include "operator/broadcast.h" /* declares the launchers */
}

namespace {

/* Per operator of the table, a type naming its element-wise row's functions. */
#define BCAST_OP_TYPE(ident, ew, desc)                                                     \
    struct ident##_op {                                                                    \
        static __device__ float fwd(float a, float b) { return mxc__ew_##ew##_fwd(a, b); } \
        static __device__ float grad(int j, float g, float a, float b) {                   \
            return j ? mxc__ew_##ew##_grad_b(g, a, b) : mxc__ew_##ew##_grad_a(g, a, b);    \
        }                                                                                  \
    };
MXC__BCAST_OPS(BCAST_OP_TYPE)

/* The offsets in a and b of output element i. */
__device__ __forceinline__ void operands_of(const struct mxc__bview &w, int64_t i, int64_t *oa,
                                            int64_t *ob) {
    int64_t r = i, pa = 0, pb = 0;
    for (int d = w.ndim - 1; d >= 0; d--) {
        const int64_t k = r % w.dims[d];
        r /= w.dims[d];
        pa += k * w.sa[d];
        pb += k * w.sb[d];
    }
    *oa = pa;
    *ob = pb;
}

template <typename Op>
int walk(const struct mxc__bview w, const float *a, const float *b, float *out, int req,
         void *stream) {
    return mxc__launch(w.size, stream, "broadcast (GPU)", [=] __device__(int64_t i) {
        int64_t oa, ob;
        operands_of(w, i, &oa, &ob);
        mxc__put(req, out, i, Op::fwd(a[oa], b[ob]));
    });
}

template <typename Op>
int grad(int j, const struct mxc__bview w, const float *g, const float *a, const float *b,
         float *out, int req, void *stream) {
    return mxc__launch(w.size, stream, "broadcast backward (GPU)", [=] __device__(int64_t i) {
        int64_t oa, ob;
        operands_of(w, i, &oa, &ob);
        mxc__put(req, out, i, Op::grad(j, g[i], a[oa], b[ob]));
    });
}

} // namespace

extern "C" int mxc__bcast_walk_gpu(int kind, const struct mxc__bview *v, const float *a,
                                   const float *b, float *out, int req, void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    switch (kind) {
#define BCAST_WALK_CASE(ident, ew, desc) \
    case MXC__B_##ident: return walk<ident##_op>(*v, a, b, out, req, stream);
        MXC__BCAST_OPS(BCAST_WALK_CASE)
    }
    return mxc__error(MXC_EINVAL, "broadcast (GPU): no operator of kind %d", kind);
}

extern "C" int mxc__bcast_grad_gpu(int kind, int j, const struct mxc__bview *v, const float *g,
                                   const float *a, const float *b, float *out, int req,
                                   void *stream) {
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    switch (kind) {
#define BCAST_GRAD_CASE(ident, ew, desc) \
    case MXC__B_##ident: return grad<ident##_op>(j, *v, g, a, b, out, req, stream);
        MXC__BCAST_OPS(BCAST_GRAD_CASE)
    }
    return mxc__error(MXC_EINVAL, "broadcast backward (GPU): no operator of kind %d", kind);
}

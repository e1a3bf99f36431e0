/*
 * operator/elemwise_gpu.cu — the element-wise family on a GPU: the table of
 * operator/elemwise_ops.h expanded into forward and backward kernels, each a grid-stride
 * map (common/launch.cuh) calling the operator's MXC__HD functions, the CPU kernels'
 * arithmetic. Tensors (n) float32, device memory; outputs may share an input's memory
 * (each element is loaded before it is stored).
 */
#include "operator/op_gpu.cuh"

#include "operator/elemwise_ops.h" /* static inline functions only: no linkage to declare */

namespace {

const float *tensor(const struct mxc__tensor *arr, int k) {
    return arr ? (const float *)arr[k].data : NULL;
}

/* out (n) = Op::fwd(x, s, t) */
template <typename Op> int unary_forward(const struct mxc__op_call *c, const char *what) {
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const float *xs = (const float *)c->in_data[0].data;
    float *o = (float *)c->out_data[0].data;
    float s, t;
    mxc__ew_params(c->params, Op::kind, &s, &t);
    return mxc__launch(c->out_data[0].size, c->rctx->stream, what,
                       [=] __device__(int64_t i) { mxc__put(req, o, i, Op::fwd(xs[i], s, t)); });
}

/* d_data (n) = Op::grad(g, x, y, s, t), x and y read only where the gradient needs them */
template <typename Op> int unary_backward(const struct mxc__op_call *c, const char *what) {
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const float *gs = (const float *)c->out_grad[0].data;
    const float *xs = (Op::deps & MXC__DEP_IN_DATA) ? tensor(c->in_data, 0) : NULL;
    const float *ys = (Op::deps & MXC__DEP_OUT_DATA) ? tensor(c->out_data, 0) : NULL;
    float *o = (float *)c->in_grad[0].data;
    float s, t;
    mxc__ew_params(c->params, Op::kind, &s, &t);
    return mxc__launch(c->in_grad[0].size, c->rctx->stream, what, [=] __device__(int64_t i) {
        const float g = gs[i];
        const float x = (Op::deps & MXC__DEP_IN_DATA) ? xs[i] : 0.0f;
        const float y = (Op::deps & MXC__DEP_OUT_DATA) ? ys[i] : 0.0f;
        mxc__put(req, o, i, Op::grad(g, x, y, s, t));
    });
}

/* out (n) = Op::fwd(lhs, rhs) */
template <typename Op> int binary_forward(const struct mxc__op_call *c, const char *what) {
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    const float *as = (const float *)c->in_data[0].data, *bs = (const float *)c->in_data[1].data;
    float *o = (float *)c->out_data[0].data;
    return mxc__launch(c->out_data[0].size, c->rctx->stream, what,
                       [=] __device__(int64_t i) { mxc__put(req, o, i, Op::fwd(as[i], bs[i])); });
}

/* d_lhs, d_rhs (n): both gradients of element i are computed before either is stored,
 * since d_lhs may be out_grad (in place) */
template <typename Op> int binary_backward(const struct mxc__op_call *c, const char *what) {
    const int ra = c->req[0], rb = c->req[1];
    if (ra == MXC__REQ_NULL && rb == MXC__REQ_NULL)
        return MXC_OK;
    const float *gs = (const float *)c->out_grad[0].data;
    const float *as = (Op::deps & MXC__DEP_IN_DATA) ? tensor(c->in_data, 0) : NULL;
    const float *bs = (Op::deps & MXC__DEP_IN_DATA) ? tensor(c->in_data, 1) : NULL;
    float *da = (float *)c->in_grad[0].data, *db = (float *)c->in_grad[1].data;
    return mxc__launch(c->out_grad[0].size, c->rctx->stream, what, [=] __device__(int64_t i) {
        const float g = gs[i];
        const float a = (Op::deps & MXC__DEP_IN_DATA) ? as[i] : 0.0f;
        const float b = (Op::deps & MXC__DEP_IN_DATA) ? bs[i] : 0.0f;
        const float va = Op::grad_a(g, a, b), vb = Op::grad_b(g, a, b);
        mxc__put(ra, da, i, va);
        mxc__put(rb, db, i, vb);
    });
}

} // namespace

/* Per operator of the table: a type naming its MXC__HD functions, and the two entry points
 * operator/elemwise.c declares. */
#define UNARY_GPU(ident, opname, desc, fwd_, grad_, deps_, kind_)                   \
    namespace {                                                                     \
    struct ident##_op {                                                             \
        static const unsigned deps = (deps_);                                       \
        static const int kind = (kind_);                                            \
        static __device__ float fwd(float x, float s, float t) {                    \
            return mxc__ew_##ident##_fwd(x, s, t);                                  \
        }                                                                           \
        static __device__ float grad(float g, float x, float y, float s, float t) { \
            return mxc__ew_##ident##_grad(g, x, y, s, t);                           \
        }                                                                           \
    };                                                                              \
    }                                                                               \
    extern "C" int mxc__ew_##ident##_forward_gpu(const struct mxc__op_call *c) {    \
        return unary_forward<ident##_op>(c, opname " forward");                     \
    }                                                                               \
    extern "C" int mxc__ew_##ident##_backward_gpu(const struct mxc__op_call *c) {   \
        return unary_backward<ident##_op>(c, opname " backward");                   \
    }

#define BINARY_GPU(ident, opname, desc, fwd_, grad_a_, grad_b_, deps_)                        \
    namespace {                                                                               \
    struct ident##_op {                                                                       \
        static const unsigned deps = (deps_);                                                 \
        static __device__ float fwd(float a, float b) { return mxc__ew_##ident##_fwd(a, b); } \
        static __device__ float grad_a(float g, float a, float b) {                           \
            return mxc__ew_##ident##_grad_a(g, a, b);                                         \
        }                                                                                     \
        static __device__ float grad_b(float g, float a, float b) {                           \
            return mxc__ew_##ident##_grad_b(g, a, b);                                         \
        }                                                                                     \
    };                                                                                        \
    }                                                                                         \
    extern "C" int mxc__ew_##ident##_forward_gpu(const struct mxc__op_call *c) {              \
        return binary_forward<ident##_op>(c, opname " forward");                              \
    }                                                                                         \
    extern "C" int mxc__ew_##ident##_backward_gpu(const struct mxc__op_call *c) {             \
        return binary_backward<ident##_op>(c, opname " backward");                            \
    }

#define UNARY_GPU_PLAIN(...)      UNARY_GPU(__VA_ARGS__, MXC__EW_NO_PARAMS)
#define UNARY_GPU_SCALAR(...)     UNARY_GPU(__VA_ARGS__, MXC__EW_SCALAR)
#define UNARY_GPU_ALPHA_BETA(...) UNARY_GPU(__VA_ARGS__, MXC__EW_ALPHA_BETA)

MXC__EW_UNARY(UNARY_GPU_PLAIN)
MXC__EW_UNARY_SCALAR(UNARY_GPU_SCALAR)
MXC__EW_UNARY_ALPHA_BETA(UNARY_GPU_ALPHA_BETA)
MXC__EW_BINARY(BINARY_GPU)

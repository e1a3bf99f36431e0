/*
 * operator/cudnn_desc.h — cuDNN descriptors of Activation, softmax, Pooling, BatchNorm and
 * LRN, cached by problem, never built per call (a build with USE_CUDNN only).
 *
 * A kernel fills a struct mxc__dnn_key (zeroed first: keys are compared bytewise) with
 * what shapes its problem and asks mxc__dnn_get for the descriptors. Each engine worker
 * thread keeps its own small table of entries (handles are per worker thread already, so
 * no lock is needed), least recently used out first; a thread's entries are destroyed when
 * it ends. A problem cuDNN's descriptors reject is remembered too, and the kernel takes its
 * own path for it.
 */
#ifndef MXC_OPERATOR_CUDNN_DESC_H
#define MXC_OPERATOR_CUDNN_DESC_H

#ifdef MXC_USE_CUDNN

#include "operator/op.h"

#include <cudnn.h>
#include <stdbool.h>
#include <stdint.h>

/* Not a status code: what a cuDNN path returns, with no message recorded, when it does not
 * take a problem; the caller then runs mxc's own kernel. */
#define MXC__DNN_OWN 1

/* Which descriptors an entry holds besides the data tensor x (N, C, H, W), float32 NCHW. */
enum mxc__dnn_kind {
    MXC__DNN_TENSOR, /* x only (softmax) */
    MXC__DNN_ACT,    /* act: p[0] a cudnnActivationMode_t */
    MXC__DNN_POOL,   /* pool and y: p[0] a cudnnPoolingMode_t, p[1..6] kh, kw, ph, pw, sh,
                        sw; y[] the output's (N, C, OH, OW), which cuDNN's output size for
                        these parameters must equal */
    MXC__DNN_BN,     /* y: the per-channel (1, C, 1, 1) tensor of spatial BatchNorm */
    MXC__DNN_LRN,    /* lrn: p[0] the window; f[0..2] alpha, beta, k */
};

struct mxc__dnn_key {
    int kind;
    int x[4], y[4];
    int p[8];
    double f[3];
};

struct mxc__dnn {
    cudnnTensorDescriptor_t x, y;
    cudnnActivationDescriptor_t act;
    cudnnPoolingDescriptor_t pool;
    cudnnLRNDescriptor_t lrn;
};

/* dst[i] = src[i] for n sizes: false when one is not in [1, INT_MAX] (cuDNN's descriptors
 * take positive ints; an empty tensor takes the own path). */
bool mxc__dnn_dims(int *dst, const int64_t *src, int n);

/* The descriptors of `k`, from this thread's table or made now, and the worker's cuDNN
 * handle bound to rctx's stream (none when rctx is NULL): MXC_OK with *d valid until this
 * thread's next mxc__dnn_get; MXC__DNN_OWN when cuDNN does not describe the problem (or no
 * memory was left for the table); MXC_EDEVICE when the handle cannot be made. */
int mxc__dnn_get(const mxc_run_ctx *rctx, const struct mxc__dnn_key *k, const struct mxc__dnn **d,
                 void **handle);

/* MXC_EDEVICE with "op: call: cuDNN's message" recorded. */
int mxc__dnn_error(cudnnStatus_t s, const char *op, const char *call);

/* A cuDNN call's status as a kernel returns it: MXC_OK; MXC__DNN_OWN for
 * CUDNN_STATUS_NOT_SUPPORTED (refused before any work was queued: the own kernel takes the
 * problem); else mxc__dnn_error. */
static inline int mxc__dnn_status(cudnnStatus_t s, const char *op, const char *call) {
    return s == CUDNN_STATUS_SUCCESS         ? MXC_OK
           : s == CUDNN_STATUS_NOT_SUPPORTED ? MXC__DNN_OWN
                                             : mxc__dnn_error(s, op, call);
}

/* cuDNN's beta for a write request: 1 adds to the output, 0 overwrites it. */
static inline float mxc__dnn_beta(int req) { return req == MXC__REQ_ADD ? 1.0f : 0.0f; }

#endif /* MXC_USE_CUDNN */

/* Defines GPU kernel `name` (static, an mxc__op_kernel of call c): `dnn`, an expression
 * of c giving a cuDNN path's status, unless that is MXC__DNN_OWN, then own(c); in a build
 * without USE_CUDNN own(c) alone (`dnn` is not compiled there). */
#ifdef MXC_USE_CUDNN
#define MXC__DNN_KERNEL(name, dnn, own)             \
    static int name(const struct mxc__op_call *c) { \
        int rc_ = (dnn);                            \
        return rc_ != MXC__DNN_OWN ? rc_ : own(c);  \
    }
#else
#define MXC__DNN_KERNEL(name, dnn, own) \
    static int name(const struct mxc__op_call *c) { return own(c); }
#endif

#endif /* MXC_OPERATOR_CUDNN_DESC_H */

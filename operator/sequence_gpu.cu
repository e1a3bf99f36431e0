/*
 * operator/sequence_gpu.cu — SequenceMask, SequenceLast and SequenceReverse on a GPU: one
 * thread per output (forward) or data-gradient (backward) element, each a gather with the
 * indexing of operator/sequence_math.h that the CPU kernels (operator/sequence.c) use.
 */
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/sequence_math.h"
}

/* y[e] (req) = the kind's gather of x, e < n: the forward, or (backward) the data gradient
 * from the head gradient x. */
extern "C" int mxc__seq_gpu(enum mxc__seq_kind kind, bool backward, const struct mxc__seq_view *vp,
                            const float *x, float *y, int64_t n, float value, int req,
                            void *stream) {
    const struct mxc__seq_view v = *vp;
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    if (kind == MXC__SEQ_MASK)
        return mxc__launch(n, stream, "SequenceMask", [=] __device__(int64_t e) {
            mxc__put(req, y, e, mxc__seq_mask(&v, x, e, value));
        });
    if (kind == MXC__SEQ_LAST && !backward)
        return mxc__launch(n, stream, "SequenceLast", [=] __device__(int64_t e) {
            mxc__put(req, y, e, mxc__seq_last(&v, x, e));
        });
    if (kind == MXC__SEQ_LAST)
        return mxc__launch(n, stream, "SequenceLast backward", [=] __device__(int64_t e) {
            mxc__put(req, y, e, mxc__seq_last_grad(&v, x, e));
        });
    return mxc__launch(n, stream, "SequenceReverse", [=] __device__(int64_t e) {
        mxc__put(req, y, e, mxc__seq_reverse(&v, x, e));
    });
}

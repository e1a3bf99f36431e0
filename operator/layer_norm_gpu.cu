/*
 * operator/layer_norm_gpu.cu — LayerNorm, InstanceNorm, GroupNorm and L2Normalization on a
 * GPU: one thread block per row (operator/channel_sum.cuh's launcher and block sum) for the
 * statistics, the output and dx, one block per channel for d_gamma and d_beta, with the
 * row view and arithmetic of operator/norm_math.h that the CPU kernels (operator/layer_norm.c) use.
 */
#include "operator/channel_sum.cuh"
#include "operator/op_gpu.cuh"

extern "C" {
#include "operator/norm_math.h"
}

extern "C" int mxc__norm_forward_gpu(const struct mxc__op_call *c, const struct mxc__norm_rows *dp,
                                     double eps) {
    const struct mxc__norm_rows d = *dp;
    const float *x = (const float *)c->in_data[0].data;
    const float *gamma = (const float *)c->in_data[1].data;
    const float *beta = (const float *)c->in_data[2].data;
    float *y = (float *)c->out_data[0].data, *mean_out = (float *)c->out_data[1].data;
    float *std_out = (float *)c->out_data[2].data;
    const int req = c->req[0], mreq = c->req[1], sreq = c->req[2];
    return mxc__per_channel(d.rows, c->rctx->stream, "norm", [=] __device__(int64_t r) {
        double s = 0, ss = 0;
        for (int64_t j = threadIdx.x; j < d.m; j += blockDim.x)
            s += x[mxc__norm_at(&d, r, j)];
        s = mxc__block_sum(s);
        const double mu = d.m ? s / (double)d.m : 0.0;
        for (int64_t j = threadIdx.x; j < d.m; j += blockDim.x) {
            const double e = (double)x[mxc__norm_at(&d, r, j)] - mu;
            ss += e * e;
        }
        ss = mxc__block_sum(ss);
        const float meanf = (float)mu, sd = mxc__norm_std(ss, d.m, eps), rstd = 1.0f / sd;
        if (threadIdx.x == 0) {
            mxc__put(mreq, mean_out, r, meanf);
            mxc__put(sreq, std_out, r, sd);
        }
        for (int64_t j = threadIdx.x; j < d.m && req != MXC__REQ_NULL; j += blockDim.x) {
            const int64_t e = mxc__norm_at(&d, r, j), g = mxc__norm_gamma_at(&d, r, j);
            mxc__put(req, y, e, mxc__norm_out(x[e], meanf, rstd, gamma[g], beta[g]));
        }
    });
}

/* d_gamma and d_beta first, then dx (which may be written over dy), as on the CPU. */
extern "C" int mxc__norm_backward_gpu(const struct mxc__op_call *c,
                                      const struct mxc__norm_rows *dp) {
    const struct mxc__norm_rows d = *dp;
    const float *x = (const float *)c->in_data[0].data;
    const float *gamma = (const float *)c->in_data[1].data;
    const float *mean = (const float *)c->out_data[1].data;
    const float *sd = (const float *)c->out_data[2].data;
    const float *dy = (const float *)c->out_grad[0].data;
    float *dx = (float *)c->in_grad[0].data, *dgamma = (float *)c->in_grad[1].data;
    float *dbeta = (float *)c->in_grad[2].data;
    const int req = c->req[0], greq = c->req[1], breq = c->req[2];
    const int64_t count = mxc__norm_channel_count(&d);
    int rc = mxc__per_channel(d.channels, c->rctx->stream, "norm backward (gamma, beta)",
                              [=] __device__(int64_t k) {
                                  double sg = 0, sgx = 0;
                                  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
                                      int64_t r, j;
                                      mxc__norm_channel_elem(&d, k, t, &r, &j);
                                      const int64_t e = mxc__norm_at(&d, r, j);
                                      sg += dy[e];
                                      sgx += (double)dy[e] * ((x[e] - mean[r]) / sd[r]);
                                  }
                                  sg = mxc__block_sum(sg);
                                  sgx = mxc__block_sum(sgx);
                                  if (threadIdx.x == 0) {
                                      mxc__put(greq, dgamma, k, (float)sgx);
                                      mxc__put(breq, dbeta, k, (float)sg);
                                  }
                              });
    if (rc != MXC_OK || req == MXC__REQ_NULL)
        return rc;
    return mxc__per_channel(d.rows, c->rctx->stream, "norm backward", [=] __device__(int64_t r) {
        const float mu = mean[r], rstd = 1.0f / sd[r];
        double sg = 0, sgx = 0;
        for (int64_t j = threadIdx.x; j < d.m; j += blockDim.x) {
            const int64_t e = mxc__norm_at(&d, r, j);
            const double g = (double)dy[e] * gamma[mxc__norm_gamma_at(&d, r, j)];
            sg += g;
            sgx += g * ((x[e] - mu) * rstd);
        }
        sg = mxc__block_sum(sg);
        sgx = mxc__block_sum(sgx);
        const float gmean = (float)(sg / (double)d.m), gxmean = (float)(sgx / (double)d.m);
        for (int64_t j = threadIdx.x; j < d.m; j += blockDim.x) {
            const int64_t e = mxc__norm_at(&d, r, j);
            const float g = dy[e] * gamma[mxc__norm_gamma_at(&d, r, j)];
            mxc__put(req, dx, e, mxc__norm_dx(g, (x[e] - mu) * rstd, gmean, gxmean, rstd));
        }
    });
}

/* L2Normalization: one block per row, as the CPU walks them. */
extern "C" int mxc__l2_forward_gpu(const struct mxc__op_call *c, const struct mxc__norm_rows *dp,
                                   double eps) {
    const struct mxc__norm_rows d = *dp;
    const float *x = (const float *)c->in_data[0].data;
    float *y = (float *)c->out_data[0].data, *norm = (float *)c->out_data[1].data;
    const int req = c->req[0], nreq = c->req[1];
    return mxc__per_channel(d.rows, c->rctx->stream, "L2Normalization", [=] __device__(int64_t r) {
        double ss = 0;
        for (int64_t j = threadIdx.x; j < d.m; j += blockDim.x) {
            const double e = x[mxc__norm_at(&d, r, j)];
            ss += e * e;
        }
        const float n = mxc__l2_norm(mxc__block_sum(ss), eps);
        if (threadIdx.x == 0)
            mxc__put(nreq, norm, r, n);
        for (int64_t j = threadIdx.x; j < d.m && req != MXC__REQ_NULL; j += blockDim.x) {
            const int64_t e = mxc__norm_at(&d, r, j);
            mxc__put(req, y, e, x[e] / n);
        }
    });
}

extern "C" int mxc__l2_backward_gpu(const struct mxc__op_call *c, const struct mxc__norm_rows *dp) {
    const struct mxc__norm_rows d = *dp;
    const float *y = (const float *)c->out_data[0].data;
    const float *norm = (const float *)c->out_data[1].data;
    const float *dy = (const float *)c->out_grad[0].data;
    float *dx = (float *)c->in_grad[0].data;
    const int req = c->req[0];
    if (req == MXC__REQ_NULL)
        return MXC_OK;
    return mxc__per_channel(d.rows, c->rctx->stream, "L2Normalization backward",
                            [=] __device__(int64_t r) {
                                double s = 0;
                                for (int64_t j = threadIdx.x; j < d.m; j += blockDim.x) {
                                    const int64_t e = mxc__norm_at(&d, r, j);
                                    s += (double)dy[e] * y[e];
                                }
                                const float sf = (float)mxc__block_sum(s);
                                for (int64_t j = threadIdx.x; j < d.m; j += blockDim.x) {
                                    const int64_t e = mxc__norm_at(&d, r, j);
                                    mxc__put(req, dx, e, mxc__l2_dx(dy[e], y[e], sf, norm[r]));
                                }
                            });
}

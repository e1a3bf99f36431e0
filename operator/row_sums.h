/*
 * operator/row_sums.h — sums over a row of float32 that vectorise, for the CPU kernels'
 * per-channel statistics (BatchNorm, the convolution's bias gradient). A single running
 * sum is a chain of dependent adds, bound by the add's latency and never vectorised (float
 * addition is not reassociated); these keep ROW_LANES running float sums, each over
 * n / ROW_LANES values, and add them up in double.
 */
#ifndef MXC_OPERATOR_ROW_SUMS_H
#define MXC_OPERATOR_ROW_SUMS_H

#include <stdint.h>

enum { ROW_LANES = 16 };

/* Σ x[i] */
static inline double mxc__row_sum(const float *x, int64_t n) {
    float part[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int l = 0; l < ROW_LANES; l++)
            part[l] += x[i + l];
    for (; i < n; i++)
        part[i % ROW_LANES] += x[i];
    double s = 0;
    for (int l = 0; l < ROW_LANES; l++)
        s += part[l];
    return s;
}

/* Σ (x[i] - mu)² */
static inline double mxc__row_sum_sq_dev(const float *x, int64_t n, float mu) {
    float part[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int l = 0; l < ROW_LANES; l++) {
            float d = x[i + l] - mu;
            part[l] += d * d;
        }
    for (; i < n; i++) {
        float d = x[i] - mu;
        part[i % ROW_LANES] += d * d;
    }
    double s = 0;
    for (int l = 0; l < ROW_LANES; l++)
        s += part[l];
    return s;
}

/* Σ g[i] (x[i] - mu), with Σ g[i] added to *sum_g */
static inline double mxc__row_dot_dev(const float *g, const float *x, int64_t n, float mu,
                                      double *sum_g) {
    float part[ROW_LANES] = {0}, gpart[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int l = 0; l < ROW_LANES; l++) {
            gpart[l] += g[i + l];
            part[l] += g[i + l] * (x[i + l] - mu);
        }
    for (; i < n; i++) {
        gpart[i % ROW_LANES] += g[i];
        part[i % ROW_LANES] += g[i] * (x[i] - mu);
    }
    double s = 0, sg = 0;
    for (int l = 0; l < ROW_LANES; l++) {
        s += part[l];
        sg += gpart[l];
    }
    *sum_g += sg;
    return s;
}

/* The grain for splitting channels of `per_channel` values each among the operator's
 * threads (mxc__parallel_for): a few thousand values make a split worth its wake-up. */
static inline int64_t mxc__channel_grain(int64_t per_channel) {
    return per_channel >= 4096 || per_channel == 0 ? 1 : 4096 / per_channel + 1;
}

#endif /* MXC_OPERATOR_ROW_SUMS_H */

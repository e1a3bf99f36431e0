/*
 * operator/cast.h — one element of any of the seven dtypes mxc's kernels convert between
 * (float32, float64, float16, uint8, int32, int8, int64), read and written with MXNet
 * 1.9.1's conversion rules (a C++ static_cast as x86 executes it), shared by the CPU loops
 * and the CUDA kernels (MXC__HD): Cast (operator/cast.c), the add-to request of the
 * operators that only move bytes, and the float16 weights of mp_sgd_update.
 *
 * A value read from an element is kept exactly: integers as int64, floats as double.
 * Writing it to
 *   - a float type: C's conversion (round to nearest); float16 through float32 first, as
 *     mshadow's half_t(double) does (common/half.h), so float64 -> float16 rounds twice;
 *   - int64: a float truncated toward zero; NaN or out of int64's range gives INT64_MIN
 *     (x86's cvttsd2si; C leaves it undefined);
 *   - int32, int8, uint8: a float truncated to int32 the same way (INT32_MIN when NaN or
 *     out of range), then, like an integer, wrapped modulo 2^bits (300.7 -> uint8 44,
 *     -1 -> 255, 1e10 -> 0), which is what MXNet's CPU kernels give.
 */
#ifndef MXC_OPERATOR_CAST_H
#define MXC_OPERATOR_CAST_H

#include "common/half.h"
#include "mxc/base.h"

#include <stdbool.h>
#include <stdint.h>

/* The dtypes Cast converts between, as a bit set (bit 1 << dtype, see mxc__op_def.dtypes). */
#define MXC__DTYPES_ALL                                                                    \
    ((1u << MXC_FLOAT32) | (1u << MXC_FLOAT64) | (1u << MXC_FLOAT16) | (1u << MXC_UINT8) | \
     (1u << MXC_INT32) | (1u << MXC_INT8) | (1u << MXC_INT64))

/* One element read from an array: exactly, as an integer or as a floating-point number. */
struct mxc__elem {
    bool is_int;
    int64_t i;
    double d;
};

/* x86's truncation of a double to int64 / int32: NaN or out of range gives the minimum. */
static inline MXC__HD int64_t mxc__trunc_i64(double d) {
    return d >= -9223372036854775808.0 && d < 9223372036854775808.0 ? (int64_t)d : INT64_MIN;
}
static inline MXC__HD int32_t mxc__trunc_i32(double d) {
    return d > -2147483649.0 && d < 2147483648.0 ? (int32_t)d : INT32_MIN;
}

/* Element k of `p`, an array of `dtype` (one of MXC__DTYPES_ALL). */
static inline MXC__HD struct mxc__elem mxc__elem_load(const void *p, int dtype, int64_t k) {
    struct mxc__elem e = {false, 0, 0.0};
    switch (dtype) {
    case MXC_FLOAT64: e.d = ((const double *)p)[k]; break;
    case MXC_FLOAT16: e.d = mxc__half_to_float(((const uint16_t *)p)[k]); break;
    case MXC_UINT8: e.is_int = true, e.i = ((const uint8_t *)p)[k]; break;
    case MXC_INT32: e.is_int = true, e.i = ((const int32_t *)p)[k]; break;
    case MXC_INT8: e.is_int = true, e.i = ((const int8_t *)p)[k]; break;
    case MXC_INT64: e.is_int = true, e.i = ((const int64_t *)p)[k]; break;
    default: e.d = ((const float *)p)[k]; break;
    }
    return e;
}

static inline MXC__HD float mxc__elem_float(struct mxc__elem e) {
    return e.is_int ? (float)e.i : (float)e.d;
}

/* e as an integer of `bits` (<= 32) bits, before wrapping: see the top of the file. */
static inline MXC__HD int64_t mxc__elem_int(struct mxc__elem e, int bits) {
    if (e.is_int)
        return e.i;
    return bits > 32 ? mxc__trunc_i64(e.d) : mxc__trunc_i32(e.d);
}

/* Stores e, converted to `dtype`, as element k of `p`; with `add`, adds it to what is
 * there in the dtype's own arithmetic (float16: in float32, rounded once; integers wrap). */
static inline MXC__HD void mxc__elem_store(void *p, int dtype, int64_t k, struct mxc__elem e,
                                           bool add) {
    switch (dtype) {
    case MXC_FLOAT64: {
        double v = e.is_int ? (double)e.i : e.d;
        ((double *)p)[k] = add ? ((double *)p)[k] + v : v;
        break;
    }
    case MXC_FLOAT16: {
        uint16_t *h = (uint16_t *)p;
        float v = mxc__half_to_float(mxc__float_to_half(mxc__elem_float(e)));
        h[k] = mxc__float_to_half(add ? mxc__half_to_float(h[k]) + v : v);
        break;
    }
    case MXC_UINT8: {
        uint8_t v = (uint8_t)mxc__elem_int(e, 8);
        ((uint8_t *)p)[k] = (uint8_t)(add ? ((uint8_t *)p)[k] + v : v);
        break;
    }
    case MXC_INT8: {
        uint8_t v = (uint8_t)mxc__elem_int(e, 8);
        ((int8_t *)p)[k] = (int8_t)(add ? (uint8_t)((uint8_t)((int8_t *)p)[k] + v) : v);
        break;
    }
    case MXC_INT32: {
        uint32_t v = (uint32_t)mxc__elem_int(e, 32);
        ((int32_t *)p)[k] = (int32_t)(add ? (uint32_t)((int32_t *)p)[k] + v : v);
        break;
    }
    case MXC_INT64: {
        uint64_t v = (uint64_t)mxc__elem_int(e, 64);
        ((int64_t *)p)[k] = (int64_t)(add ? (uint64_t)((int64_t *)p)[k] + v : v);
        break;
    }
    default: {
        float v = mxc__elem_float(e);
        ((float *)p)[k] = add ? ((float *)p)[k] + v : v;
        break;
    }
    }
}

/* A float value as an element (the float32 results of mp_sgd_update's arithmetic). */
static inline MXC__HD struct mxc__elem mxc__elem_of_float(float v) {
    struct mxc__elem e = {false, 0, (double)v};
    return e;
}

#ifdef __cplusplus
extern "C" {
#endif

/* dst (n elements of `dtype`) = or += src (n) as `req` (an mxc__req) says; writing in place
 * (dst == src) does nothing: mxc__copy_req for any dtype of MXC__DTYPES_ALL, the copy of
 * the operators that only move bytes. operator/cast.c, and on a GPU operator/cast_gpu.cu
 * (device pointers, queued on `stream`; MXC_OK or MXC_EDEVICE). */
void mxc__copy_req_typed(void *dst, const void *src, int64_t n, int dtype, int req);
int mxc__copy_req_typed_gpu(void *dst, const void *src, int64_t n, int dtype, int req,
                            void *stream);

/* dst (n of dtype dt) = or += src (n of dtype st) converted: Cast's kernel on a GPU. */
int mxc__cast_gpu(void *dst, int dt, const void *src, int st, int64_t n, int req, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* MXC_OPERATOR_CAST_H */

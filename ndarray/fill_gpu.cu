/*
 * ndarray/fill_gpu.cu — mxc_nd_full on a GPU: every element gets the same bit pattern,
 * computed on the host (ndarray/ops.c) so both devices convert the value identically.
 */
#include "common/launch.cuh"

namespace {

template <typename T> int fill(void *data, int64_t n, uint64_t bits, void *stream) {
    T *out = (T *)data;
    const T value = (T)bits;
    return mxc__launch(n, stream, "fill", [=] __device__(int64_t i) { out[i] = value; });
}

} // namespace

extern "C" int mxc__fill_gpu(void *data, int64_t n, int size, uint64_t bits, void *stream) {
    switch (size) {
    case 1: return fill<uint8_t>(data, n, bits, stream);
    case 2: return fill<uint16_t>(data, n, bits, stream);
    case 4: return fill<uint32_t>(data, n, bits, stream);
    default: return fill<uint64_t>(data, n, bits, stream);
    }
}

/*
 * resource/philox.h — the counter-based random generator behind mxc's random resources:
 * Philox-4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2,
 * 3", SC 2011; the constants of the Random123 library). Every value is a pure function of
 * (seed, stream, position), so a GPU kernel can produce the same stream as the CPU code
 * here, element by element, without any shared state. Internal.
 *
 * The stream, exactly (a GPU implementation must follow this to the bit):
 *
 *   key          = { seed & 0xffffffff, seed >> 32 }
 *   word i       (i = 0, 1, 2, ... a 64-bit position) of stream s:
 *                  c       = i / 4                           (the counter block)
 *                  counter = { c & 0xffffffff, c >> 32, s & 0xffffffff, s >> 32 }
 *                  word i  = philox4x32_10(counter, key)[i % 4]
 *   uniform at i:  u = (word_i >> 8) * 2^-24                  (exact, in [0, 1))
 *                  w = hi - lo                                 (float, rounded)
 *                  x = (float)((double)lo + (double)w * u)     (in double the product of
 *                  two 24-bit values is exact, so the sum is rounded once with or without
 *                  a fused multiply-add, then once more to float: any compiler and any
 *                  device get the same bits)
 *                  x lies in [lo, hi]; it equals hi only when rounding carries it there.
 *   normal at i:   p = i / 2 names the pair of words a = word_{2p}, b = word_{2p+1};
 *                  in double: u1 = (a + 1) * 2^-32 in (0, 1],  u2 = b * 2^-32 in [0, 1),
 *                  r = sqrt(-2 ln u1), t = 2 pi u2,
 *                  z = r cos t for even i, r sin t for odd i   (Box-Muller),
 *                  x = (float)(mean + std * z)                 (one rounding to float)
 *                  Bitwise equality across devices then needs log/cos/sin that agree
 *                  to double precision; expect equality up to the last float bit.
 *
 * A generator keeps the position of its next word (`offset`); every fill of n values
 * uses positions offset .. offset+n-1 and advances offset by n, whatever the
 * distribution, so two fills of n values equal one fill of 2n. One caveat of that rule:
 * a normal fill that starts at an odd offset shares its first pair's words with the
 * value before it; callers that mix distributions and want them independent can
 * mxc__philox_skip to an even (or block) boundary first.
 *
 * Thread-safety: a generator is plain data with no lock; one thread at a time may use
 * it (the resource layer guards each generator with an engine variable).
 */
#ifndef MXC_PHILOX_H
#define MXC_PHILOX_H

#include <stdbool.h>
#include <stdint.h>

/* Philox-4x32 multipliers and Weyl-sequence key increments (Random123). */
#define MXC__PHILOX_M0 0xD2511F53u
#define MXC__PHILOX_M1 0xCD9E8D57u
#define MXC__PHILOX_W0 0x9E3779B9u
#define MXC__PHILOX_W1 0xBB67AE85u

/* A generator: the key from the seed, a stream id (counter words 2 and 3, so copies that
 * share a seed draw independent streams), and the position of the next word. */
struct mxc__philox {
    uint32_t key[2];
    uint64_t stream;
    uint64_t offset;
};

/* The Philox-4x32-10 bijection: encrypts `ctr` under `key` into `out` (which may alias
 * ctr). Pure; thread-safe. */
void mxc__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Starts generator `g` at position 0 of stream `stream` under `seed`. */
void mxc__philox_init(struct mxc__philox *g, uint64_t seed, uint64_t stream);

/* Moves the position forward by n words (it wraps modulo 2^64). */
void mxc__philox_skip(struct mxc__philox *g, uint64_t n);

/* Fills out[0..n) with the stream's raw 32-bit words and advances the position by n.
 * Returns MXC_OK, or MXC_EINVAL (nothing written or advanced) if g is NULL, n < 0, or
 * out is NULL with n > 0. */
int mxc__philox_u32(struct mxc__philox *g, uint32_t *out, int64_t n);

/* Fills out[0..n) with uniform values in [lo, hi) (hi only through rounding, see the
 * mapping above) and advances the position by n. Returns MXC_OK, or MXC_EINVAL (nothing
 * written or advanced) for a NULL g, n < 0, NULL out with n > 0, or a bad range: lo and hi
 * must be finite, with lo <= hi and hi - lo finite. lo == hi fills with lo. */
int mxc__philox_uniform(struct mxc__philox *g, float *out, int64_t n, float lo, float hi);

/* Fills out[0..n) with normal values of mean `mean` and standard deviation `std` (see the
 * mapping above) and advances the position by n. Returns MXC_OK, or MXC_EINVAL (nothing
 * written or advanced) for a NULL g, n < 0, NULL out with n > 0, a non-finite mean, or a
 * std that is negative or not finite. */
int mxc__philox_normal(struct mxc__philox *g, float *out, int64_t n, float mean, float std);

#ifdef MXC_USE_CUDA
/* The uniform (normal = false: a = lo, b = hi) or normal (a = mean, b = std) fill of n
 * values into GPU memory `out`, queued on CUDA stream `stream` (the values are there once
 * the stream is synchronised): the same values as the CPU fills, under the same rules and
 * errors, plus MXC_EDEVICE if the launch fails. Advances the position by n. */
int mxc__philox_fill_gpu(struct mxc__philox *g, float *out, int64_t n, bool normal, float a,
                         float b, void *stream);

/* The kernel launch behind mxc__philox_fill_gpu (resource/philox_gpu.cu): no checks, does
 * not advance the position. */
int mxc__philox_launch_gpu(const struct mxc__philox *g, float *out, int64_t n, bool normal, float a,
                           float b, void *stream);
#endif

#endif /* MXC_PHILOX_H */

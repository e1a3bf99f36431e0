/*
 * tests/util/seeded.h — parameter and input values computed from a name, the same bit for
 * bit as scripts/zoo_seeded.py, so model fixtures (tests/data/zoo/) store MXNet's outputs
 * but not the weights that made them. The formula is in scripts/zoo_seeded.py:
 *
 *   h = FNV-1a 64 (name);  u_i = top 24 bits of mix64(h + (i + 1) * golden) / 2^24;
 *   t_i = 2 u_i - 1;  value = offset + t_i * scale  (float32)
 *
 * with (offset, scale) by the name's suffix: *_weight (0, sqrt(6 / fan_in)); *_gamma,
 * *_running_var, *_moving_var (1, 0.25); *_bias, *_beta, *_running_mean, *_moving_mean
 * (0, 0.125); anything else (inputs) (0, 1). Word ids for a language model use the same
 * 24 bits k_i as an integer: token_i = (k_i * vocab) >> 24.
 */
#ifndef MXC_TEST_SEEDED_H
#define MXC_TEST_SEEDED_H

#include "mxc/executor.h"
#include "mxc/ndarray.h"
#include "mxc/symbol.h"

#include <stdint.h>

/* FNV-1a 64 of `name`'s bytes: the seed of its values. */
uint64_t mxct_seeded_hash(const char *name);

/* u_index for seed `hash`: a float32 in [0, 1), a multiple of 2^-24. */
float mxct_seeded_unit(uint64_t hash, int64_t index);

/* The seeded values of a float32 array called `name` with `shape` into out[0 .. size). */
void mxct_seeded_values(const char *name, const mxc_shape *shape, float *out);

/* Seeded word ids in [0, vocab) of an input called `name`, as float32, into out[0 .. count). */
void mxct_seeded_tokens(const char *name, int64_t count, int64_t vocab, float *out);

/* Fills the float32 CPU array `array` with the seeded values of `name` (its own shape). */
int mxct_seeded_fill(mxc_ndarray *array, const char *name);

/* Fills every argument and auxiliary state of `exec` (bound from `sym`) with the seeded
 * values of its name, asserting success. */
void mxct_seeded_fill_executor(mxc_executor *exec, mxc_symbol *sym);

/* Asserts that a model's output `got` has `want`'s shape and max |got - want| <=
 * 1e-4 * max(1, max |want|) (float32 CPU arrays), naming `what` and the worst element. */
void mxct_seeded_expect_output(const char *what, mxc_ndarray *got, mxc_ndarray *want);

#endif /* MXC_TEST_SEEDED_H */

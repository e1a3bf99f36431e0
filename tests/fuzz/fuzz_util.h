/*
 * tests/fuzz/fuzz_util.h — what the libFuzzer targets of tests/fuzz/ share: the one-time
 * set-up (naive engine, quiet log), input files in /dev/shm for readers that only take
 * paths, and the run of a symbol through inference, bind, one forward and one backward
 * with every tensor kept small. docs/testing.md says how to build, run and extend them.
 *
 * A target's LLVMFuzzerTestOneInput must return normally for every input: mxc reporting an
 * error is a correct outcome. Crashes, sanitizer reports, leaks, hangs and the abort()s
 * below on a broken invariant are what the fuzzer finds.
 */
#ifndef MXC_FUZZ_UTIL_H
#define MXC_FUZZ_UTIL_H

#include "mxc/mxc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most elements any tensor of a run may have: inputs whose inferred shapes exceed it
 * are skipped, not run, so the fuzzer measures robustness and not memory or time. */
#define FUZZ_MAX_ELEMS 4096

/* What each target defines: runs one input, returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libFuzzer calls this (defined once, in fuzz_util.c) before the first input: it selects
 * the naive engine (operations run inline at push: fast and deterministic) unless
 * MXC_ENGINE_TYPE is set, and silences mxc's log unless MXC_FUZZ_VERBOSE is set (to see
 * why an input stops where it does: run the target on it with MXC_FUZZ_VERBOSE=1). */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* With MXC_FUZZ_VERBOSE, prints how step `what` of the current input ended: `rc` and,
 * for an error, mxc's message. */
void fuzz_note(const char *what, int rc);

/* Splits an input of the `idx` and `csv` targets: `header` bytes of options, a 16-bit
 * little-endian length n, then n bytes of a first file (cut to what is there) and the rest
 * as a second. Writes both to files of this process in /dev/shm ($TMPDIR or /tmp when
 * there is no /dev/shm; removed at exit) and returns their paths through `first` and
 * `second` (static storage, reused by the next call); false when the input is shorter
 * than the header and length. Aborts if a file cannot be written. */
bool fuzz_two_files(const uint8_t *data, size_t size, size_t header, const char **first,
                    const char **second);

/* Whether `shape` is known (ndim > 0) and has at most FUZZ_MAX_ELEMS elements. */
bool fuzz_small(const mxc_shape *shape);

/* How fuzz_run_symbol runs a symbol. */
struct fuzz_run {
    int num;                  /* known shapes: `shapes[i]` for the argument or auxiliary */
    const char *const *names; /* state `names[i]`, as mxc_symbol_infer_shape takes them */
    const mxc_shape *shapes;
    const float *fill; /* every argument and auxiliary state holds these values, cycled */
    int nfill;         /* (0: 0.5) */
    const char *reqs;  /* the gradient request of argument i is reqs[i]: 'n' MXC_GRAD_NULL,
                          'a' MXC_GRAD_ADD, else (and past its end, or NULL) MXC_GRAD_WRITE */
};

/* Runs `sym` on the CPU: infers every shape from the known ones and stops unless every
 * argument, auxiliary state and node output is known and small (fuzz_small); then binds
 * it with gradients as `run->reqs` asks (or, when some operator has none, without), runs
 * forward(is_train = 1) and backward with ones as head gradients, and reads every output
 * and gradient. Errors from mxc are expected results and end the run; returns whether
 * the symbol was bound. */
bool fuzz_run_symbol(mxc_symbol *sym, const struct fuzz_run *run);

/* A new array of `shape` (float32, CPU) holding `fill` cycled; NULL on an mxc error. */
mxc_ndarray *fuzz_array(const mxc_shape *shape, const float *fill, int nfill);

/* Waits for `array` and reads it back (the read is what makes pending work run and
 * surface its errors); returns the status. */
int fuzz_read(const mxc_ndarray *array);

/* Takes a data iterator just created (`created`: the status of its creation, `it` the
 * result): when created, runs it for up to 16 batches, resets it and takes one more batch,
 * reading each batch's data (when small) and label, then frees it. Aborts when a batch's
 * shapes differ from what the iterator announced or a reset fails. */
void fuzz_iterate(int created, mxc_data_iter *it);

#endif /* MXC_FUZZ_UTIL_H */

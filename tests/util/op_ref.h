/*
 * tests/util/op_ref.h — what an operator family's suite (tests/check_op_*.c) does around
 * the harness of tests/util/op_check.h: cases checked against MXNet's numbers, parameters
 * given as one NULL-terminated list of keys and values, reference arrays loaded by name
 * pattern, direct runs of an operator's shape inference and parameter parser (shape and
 * error checks: tests/util/test_util.h). Every suite uses these; none keeps a copy.
 */
#ifndef MXC_TEST_OP_REF_H
#define MXC_TEST_OP_REF_H

#include "tests/util/op_check.h"
#include "tests/util/test_util.h"

struct mxc__op_def;

/* `kv` (key, value, ..., NULL; at most `max` pairs) as harness parameters, the pointers
 * stored in keys[] and vals[]. */
struct mxct_params mxct_kv_split(const char *const *kv, const char **keys, const char **vals,
                                 int max);

/* A new tensor holding a copy of float32 array `a` (waiting for it; asserting success):
 * what mxc_imperative_invoke gave, for mxct_expect_close. The inverse of mxct_array_of. */
struct mxct_tensor mxct_tensor_of(mxc_ndarray *a);

/* Loads the arrays `prefix`0 .. `prefix`{n-1} of tests/data/`file` into new tensors. */
void mxct_ref_load_all(const char *file, const char *prefix, int n, struct mxct_tensor *t);

/* Loads the arrays `prefix`0 .. `prefix`{n-1} of a generator script's case: the file
 * tests/data/ops/`group`/`name`.params. */
void mxct_ref_load_case(const char *group, const char *name, const char *prefix, int n,
                        struct mxct_tensor *t);

/* One case of an operator against MXNet 1.9.1's numbers: the arrays of
 * tests/data/ops/`group`/`file`.params, written by the family's generator script
 * (scripts/gen_op_refs_*.py): inputs in0.., visible outputs out0.., head gradients og0..
 * and input gradients grad<i> (named by the input's index). */
struct mxct_ref_case {
    const char *group, *file, *op;
    struct mxct_params params;
    int num_in, num_out; /* inputs; visible outputs compared */
    unsigned grad_zero;  /* a bit per input whose gradient must be 0 (no grad<i> stored) */
    unsigned grad_skip;  /* a bit per input whose gradient is not compared */
};

/* A case of `group` with parameters `kv` (key, value, ..., NULL) and no gradient zero or
 * skipped. */
struct mxct_ref_case mxct_ref_case_of(const char *group, const char *file, const char *op,
                                      const char *const *kv, int num_in, int num_out);

/* Runs the case's forward (training mode as `is_train` says) and asserts that each
 * output has MXNet's shape and values within rtol/atol (mxct_expect_close). */
void mxct_ref_expect_forward(const struct mxct_ref_case *c, bool is_train, double rtol,
                             double atol);

/* Runs the case's forward in training mode then its backward (mxct_op_backward) with the
 * head gradients og*, or none for an operator that ignores them (a loss), and asserts that
 * each input's gradient equals MXNet's within rtol/atol, or zero (grad_zero). */
void mxct_ref_expect_backward(const struct mxct_ref_case *c, double rtol, double atol);

/* Runs the case through mxc_imperative_invoke (an engine push, outputs allocated from the
 * inferred shapes), calling the operator `name` (NULL: the case's op; an alias otherwise),
 * and asserts that each output has MXNet's shape and values within rtol/atol. */
void mxct_ref_expect_invoke(const struct mxct_ref_case *c, const char *name, bool is_train,
                            double rtol, double atol);

/* Runs the case through mxc_imperative_invoke with input `bad` replaced by zeros of shape
 * `shape`, and asserts that the call fails with `code`, a message holding every needle
 * (mxct_expect_error), and no output made: bad input is an error, not a crash. */
void mxct_ref_expect_invoke_error(const struct mxct_ref_case *c, int bad, mxc_shape shape, int code,
                                  const char *const *needles);

/* Every array of a reference file, any dtype, by name: mxct_refs_load reads
 * tests/data/`file` (or $MXC_TEST_DATA/`file`), asserting success; mxct_refs_get asserts
 * the array `name` exists; mxct_refs_free frees them all. */
struct mxct_refs {
    size_t n;
    mxc_ndarray **a;
    char **names;
};
struct mxct_refs mxct_refs_load(const char *file);
mxc_ndarray *mxct_refs_get(const struct mxct_refs *r, const char *name);
void mxct_refs_free(struct mxct_refs *r);

/* Parses `kv` for operator `op` (asserting it is registered) and returns the parser's
 * status: the bad-parameter checks. */
int mxct_op_parse(const char *op, struct mxct_params kv);

/* Parses `kv` for operator `op`, asserts it has num_in inputs and num_out outputs, and
 * runs its shape inference on in and out (updated in place). Returns the status of the
 * parse or the inference. */
int mxct_op_infer(const char *op, struct mxct_params kv, mxc_shape *in, int num_in, mxc_shape *out,
                  int num_out);

/* The same for an operator with auxiliary states: asserts it has num_aux of them too, and
 * infers their shapes in aux. */
int mxct_op_infer_aux(const char *op, struct mxct_params kv, mxc_shape *in, int num_in,
                      mxc_shape *out, int num_out, mxc_shape *aux, int num_aux);

/* The definition of operator `name` (or of the operator an alias names), asserting it is
 * registered. */
const struct mxc__op_def *mxct_op_def(const char *name);

/* Parses `kv` for operator `op` (asserting success) and asserts that parameter `key` prints
 * back as `want`, MXNet's spelling; numbers compare as values within 1e-7 relative (they
 * print to round-trip: 0.334f as 0.333999991). */
void mxct_expect_param(const char *op, struct mxct_params kv, const char *key, const char *want);

/* Asserts that operator `op` has parameter `key` with the default `want`, as MXNet spells
 * it (mxc_op_get_info's default_value). */
void mxct_expect_default(const char *op, const char *key, const char *want);

/* Needles for mxct_expect_error (tests/util/test_util.h): MXCT_NEEDLES("a", "b"). */
#define MXCT_NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

#endif /* MXC_TEST_OP_REF_H */

/*
 * tests/util/op_ref.h — what an operator family's suite (tests/check_op_*.c) does around
 * the harness of tests/util/op_check.h: parameters given as one NULL-terminated list of
 * keys and values, reference arrays loaded by name pattern and direct runs of an
 * operator's shape inference (shape and error checks: tests/util/test_util.h). Written
 * for tests/check_op_index.c; the older suites keep their own copies for now.
 */
#ifndef MXC_TEST_OP_REF_H
#define MXC_TEST_OP_REF_H

#include "tests/util/op_check.h"
#include "tests/util/test_util.h"

/* `kv` (key, value, ..., NULL; at most `max` pairs) as harness parameters, the pointers
 * stored in keys[] and vals[]. */
struct mxct_params mxct_kv_split(const char *const *kv, const char **keys, const char **vals,
                                 int max);

/* Loads the arrays `prefix`0 .. `prefix`{n-1} of tests/data/`file` into new tensors. */
void mxct_ref_load_all(const char *file, const char *prefix, int n, struct mxct_tensor *t);

/* Parses `kv` for operator `op`, asserts it has num_in inputs and num_out outputs, and
 * runs its shape inference on in and out (updated in place). Returns the status of the
 * parse or the inference. */
int mxct_op_infer(const char *op, struct mxct_params kv, mxc_shape *in, int num_in, mxc_shape *out,
                  int num_out);

/* Asserts that operator `op` has parameter `key` with the default `want`, as MXNet spells
 * it (mxc_op_get_info's default_value). */
void mxct_expect_default(const char *op, const char *key, const char *want);

/* Needles for mxct_expect_error (tests/util/test_util.h): MXCT_NEEDLES("a", "b"). */
#define MXCT_NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

#endif /* MXC_TEST_OP_REF_H */

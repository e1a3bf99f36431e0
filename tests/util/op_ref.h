/*
 * tests/util/op_ref.h — what an operator family's suite (tests/check_op_*.c) does around
 * the harness of tests/util/op_check.h: parameters given as one NULL-terminated list of
 * keys and values, reference arrays loaded by name pattern, direct runs of an operator's
 * shape inference and parameter parser (shape and error checks: tests/util/test_util.h).
 * Every suite uses these; none keeps a copy.
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

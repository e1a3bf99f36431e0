/*
 * tests/util/op_check.h — the operator test harness: runs an operator's kernels directly
 * on host buffers (no engine, no arrays), checks forward values against references with
 * stated tolerances reporting the worst element, and checks backward against central
 * finite differences of forward (float64 accumulation), with write and add-to requests,
 * passing the backward only the data it declared it needs; runs forward + backward with
 * given head gradients for comparison with reference gradients (loss operators); and runs
 * every call again under each in-place option the operator declares, with its buffers
 * aliased as the executor's planner would alias them, against the out-of-place result.
 */
#ifndef MXC_TEST_OP_CHECK_H
#define MXC_TEST_OP_CHECK_H

#include "mxc/base.h"
#include "mxc/ndarray.h"

#include <check.h>
#include <stdbool.h>

/* A host tensor: float32, row-major. The harness allocates outputs it fills (free them
 * with mxct_tensors_free). */
struct mxct_tensor {
    mxc_shape shape;
    float *data;
};

/* String parameters, as in a symbol's JSON. */
struct mxct_params {
    int num;
    const char *const *keys;
    const char *const *vals;
};

#define MXCT_NO_PARAMS ((struct mxct_params){0, NULL, NULL})

/* MXCT_KV("num_hidden", "10", "no_bias", "True"): keys and values alternate. The result
 * stays valid for the next 31 calls (a ring of static slots, so nothing leaks). */
#define MXCT_KV(...) mxct_params_from_pairs((const char *const[]){__VA_ARGS__, NULL})
struct mxct_params mxct_params_from_pairs(const char *const *kv);

/* A tensor of `shape` filled with uniform values in [lo, hi) from `seed` (deterministic). */
struct mxct_tensor mxct_tensor_random(mxc_shape shape, float lo, float hi, unsigned seed);

/* A tensor of `shape` holding a copy of `values` (or zeros if NULL). */
struct mxct_tensor mxct_tensor_from(mxc_shape shape, const float *values);

void mxct_tensors_free(struct mxct_tensor *t, int n);

/* A new float32 CPU array holding a copy of `t` (asserting success); the caller frees it. */
mxc_ndarray *mxct_array_of(const struct mxct_tensor *t);

/* Runs operator `name` forward on `in` (its inputs) and `aux` (its auxiliary states,
 * updated in place; may be NULL when it has none). Fills `out` (room for every output,
 * hidden ones included) with new tensors of the inferred shapes. Returns the status of
 * parsing, inference or the kernel. */
int mxct_op_forward(const char *name, struct mxct_params params, bool is_train,
                    const struct mxct_tensor *in, int num_in, struct mxct_tensor *aux,
                    struct mxct_tensor *out);

/* Asserts got ≈ want element-wise: |got - want| <= atol + rtol * |want| everywhere (NaN
 * matches NaN only, an infinity itself only), and reports the worst element (index, both
 * values) otherwise. `what` names the check. */
void mxct_expect_close(const struct mxct_tensor *got, const float *want, double rtol, double atol,
                       const char *what);

/* Asserts that `got` has want's shape (mxct_expect_shape), then its values within
 * rtol/atol (mxct_expect_close). */
void mxct_expect_tensor(const struct mxct_tensor *got, const struct mxct_tensor *want, double rtol,
                        double atol, const char *what);

/* Checks operator `name`'s backward against finite differences of its forward, for the
 * scalar loss sum_k w_k * visible_output_k with random weights w (so out_grad = w):
 * every input element x gets (loss(x + eps) - loss(x - eps)) / (2 eps), compared with
 * the kernel's in_grad within rtol/atol (worst element reported). Then repeats the
 * backward with add-to requests onto in_grad preset to 1 and expects 1 + gradient.
 * Inputs listed in `skip` (a bit per input, e.g. labels) are not differentiated.
 * Auxiliary states are restored before each forward. */
void mxct_op_gradcheck(const char *name, struct mxct_params params, bool is_train,
                       const struct mxct_tensor *in, int num_in, const struct mxct_tensor *aux,
                       unsigned skip, double eps, double rtol, double atol);

/* Runs operator `name` forward (training mode as `is_train` says) then its backward with
 * head gradients `out_grad` (one per visible output; hidden outputs get zeros), passing
 * the backward only the data it declared it needs, as mxct_op_gradcheck does. Loss
 * operators, which ignore head gradients, take out_grad = NULL. Fills `in_grad_out` (one
 * per input) with new tensors of the input shapes holding the gradients written with
 * write requests; they start as NaN, so an element the kernel leaves unwritten shows.
 * `aux` is updated by the forward as in mxct_op_forward. Returns the status of parsing,
 * inference or the forward kernel; a failing backward kernel fails the test. */
int mxct_op_backward(const char *name, struct mxct_params params, bool is_train,
                     const struct mxct_tensor *in, int num_in, struct mxct_tensor *aux,
                     const struct mxct_tensor *out_grad, struct mxct_tensor *in_grad_out);

/* Checks operator `name`'s in-place options the way the executor applies them, from the
 * forward inputs `in` (and auxiliary states `aux`, not modified; NULL when it has none):
 * the forward with out_data[o] sharing in_data[i]'s memory (and with each other input of
 * that shape passed as the same array), the backward with in_grad[i] sharing out_grad[o]'s
 * memory (the other gradients written, then added), each under the write and the
 * write-in-place requests, against the same call on separate buffers: equal element for
 * element, the worst element reported. Fails when the operator declares no in-place
 * option, or one the executor would never apply. mxct_op_forward, mxct_op_gradcheck and
 * mxct_op_backward run the same checks on their own inputs after their own. */
void mxct_op_check_inplace(const char *name, struct mxct_params params, bool is_train,
                           const struct mxct_tensor *in, int num_in, const struct mxct_tensor *aux);
/* Runs operator `name` through the executor: binds it to arrays holding `in` (its
 * inputs) and `aux` (its auxiliary states) with gradient request `reqs[i]` (mxc_grad_req)
 * for input i, runs forward (training) and backward with `head` as the head gradient of
 * its first output (NULL for loss operators), and fills `grads` (one per input) with new
 * tensors holding the gradients; an input bound with MXC_GRAD_NULL gets an empty tensor
 * (ndim 0, no data). Asserts that every step succeeds. */
void mxct_op_bound_grads(const char *name, struct mxct_params params, const struct mxct_tensor *in,
                         int num_in, const struct mxct_tensor *aux, int num_aux, const int *reqs,
                         const struct mxct_tensor *head, struct mxct_tensor *grads);

/* The GPU comparison. When a GPU is present (decided once per process) and operator
 * `name` has a GPU kernel, mxct_op_forward, mxct_op_gradcheck and mxct_op_backward also run
 * their case on gpu(0) (the forward through mxc_imperative_invoke, the backward through an
 * executor with write and with add-to requests) and assert that every output, auxiliary
 * state and gradient equals the CPU kernel's within the operator's tolerance (the worst
 * element reported). Operators without a GPU kernel are listed once at exit ("GPU kernels
 * missing: ..."); cases drawing random numbers are compared in inference mode. Without a
 * GPU nothing of it runs ("GPU comparison: skipped (no GPU)" once at exit).
 * MXC_TEST_COMPARE_ON_CPU=1 makes the CPU stand in for gpu(0), to test the tests. */

/* True under MXC_TEST_COMPARE_ON_CPU (set to anything but "" or "0"). */
bool mxct_gpu_stand_in(void);

/* The device of GPU tests: gpu(0), or the CPU standing in for it. */
mxc_context mxct_gpu_device(void);

/* True when GPU tests run: a GPU is present, or the CPU stands in for it. */
bool mxct_gpu_tests_run(void);

/* Reference data: `file` (relative to tests/data, or $MXC_TEST_DATA) is an NDArray list
 * saved by a generator script (mx.nd.save with named arrays). Loads the float32 array
 * named `name` into a new tensor (asserting it exists). */
struct mxct_tensor mxct_ref_load(const char *file, const char *name);

#endif /* MXC_TEST_OP_CHECK_H */

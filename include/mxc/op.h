/*
 * mxc/op.h — the registered operators: what exists, what each takes, and running any of
 * them on arrays.
 *
 * Operators use MXNet's names and parameter spellings (FORMATS.md): parameters are
 * given as strings ("(3, 3)", "True", "relu", "0.5") exactly as in a symbol's JSON.
 *
 * Thread-safety: every function here may be called from any thread.
 */
#ifndef MXC_OP_H
#define MXC_OP_H

#include "mxc/base.h"
#include "mxc/ndarray.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A parameter of an operator, for tools and documentation. */
typedef struct mxc_op_param_info {
    const char *name;
    const char *type;          /**< "int", "float", "boolean", "tuple", "enum {a, b}", ... */
    const char *default_value; /**< as MXNet spells it; NULL for a required parameter */
    const char *doc;
} mxc_op_param_info;

/** What an operator is. Every string is static. */
typedef struct mxc_op_info {
    const char *name;
    const char *description;
    int num_params;
    const mxc_op_param_info *params;
    int num_inputs;             /**< -1 when it depends on the parameters (Concat, ...) */
    const char *const *inputs;  /**< NULL-terminated; NULL for variadic operators */
    int num_outputs;            /**< all outputs, -1 when they depend on the parameters
                                    (SliceChannel); num_visible_outputs are returned to users */
    int num_visible_outputs;    /**< -1 with num_outputs, or when the parameters decide
                                    (LayerNorm's output_mean_var) */
    const char *const *outputs; /**< NULL-terminated; NULL for variadic outputs */
    int num_aux;                /**< auxiliary states (BatchNorm's moving statistics) */
    const char *const *aux;
    int differentiable; /**< non-zero if the operator has a backward */
} mxc_op_info;

/** The names of every registered operator, sorted; `*names` is static. Returns MXC_OK or
 * MXC_EINVAL (NULL argument). */
MXC_API int mxc_op_list(size_t *count, const char *const **names);

/** Describes operator `name` into `*out` (static data). Returns MXC_OK, MXC_EINVAL
 * (unknown operator, with the closest name in the message, or NULL argument). */
MXC_API int mxc_op_get_info(const char *name, mxc_op_info *out);

/** Non-zero if operator `name` has a kernel for `ctx` that takes its first input in
 * `dtype` (most operators: float32 only; Cast and the copies: float32, float64, float16,
 * uint8, int32, int8, int64; docs/operators.md, Dtypes); 0 for an unknown or NULL name or
 * a value that is not a dtype. */
MXC_API int mxc_op_supports(const char *name, mxc_context ctx, int dtype);

/** Runs operator `name` with string parameters on `inputs` (the operator's inputs, then
 * its auxiliary states, which it may update), pushed to the engine like every array
 * operation, on the inputs' device; an operator without inputs (_zeros, _full) runs on its
 * given output's device, else on the CPU (its `ctx` parameter is ignored). `outputs` has
 * room for `num_outputs` handles (at least the operator's visible outputs): a NULL entry
 * receives a new array of the inferred shape (the caller frees it), a non-NULL entry must
 * have that shape and dtype and is overwritten. A given
 * output may be an input (or share its memory) only where the operator computes in
 * place: any input of an element-wise operator (mxc_nd_add(a, b, &b)), otherwise the
 * input the operator declares in place (docs/operators.md, "In place"); any other
 * sharing, and two outputs sharing memory, is MXC_EINVAL (transpose(a, out = a) would
 * read what it had already overwritten). `is_train` selects training behaviour (Dropout
 * drops, BatchNorm uses batch statistics); the thread's autograd training mode
 * (mxc_autograd_set_training) turns it on too. While the thread records (mxc/autograd.h)
 * and an argument is on the tape, the call is recorded for backward; writes that would make
 * a recorded gradient wrong are MXC_EINVAL (autograd.h lists them), as is writing any array
 * a recorded operation keeps for its backward.
 * Returns MXC_OK, MXC_EINVAL (unknown operator or parameter, wrong input count, an output
 * sharing memory it must not), MXC_EMISUSE
 * (bad handle), MXC_ESHAPE / MXC_ETYPE (inference failed, the message names the
 * argument and both shapes), MXC_ENOTSUP (no kernel for the context or dtype),
 * MXC_ENOMEM. On failure the entries it created are freed and reset to NULL. */
MXC_API int mxc_imperative_invoke(const char *name, int num_params, const char *const *keys,
                                  const char *const *vals, int num_inputs,
                                  mxc_ndarray *const *inputs, int num_outputs,
                                  mxc_ndarray **outputs, int is_train);

#ifdef __cplusplus
}
#endif

#endif /* MXC_OP_H */

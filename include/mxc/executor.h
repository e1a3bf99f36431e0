/*
 * mxc/executor.h — running a symbol: bind it to arrays, then forward and backward.
 *
 * Binding builds the full graph (the symbol's forward nodes plus, when gradients are
 * wanted, a backward node per operator on the way), plans the memory of every
 * intermediate array (in place where an operator allows it and nothing reads the input
 * later, freed blocks reused for later arrays), and creates one cached engine operation
 * per node. forward() and backward() push those operations in topological order and
 * return at once; the engine runs independent branches in parallel (given more than one
 * CPU worker, MXC_CPU_WORKER_NTHREADS), and waits happen only when you read a result
 * (mxc_nd_wait_to_read, mxc_nd_sync_copy_to_cpu). After each block's last reader in a
 * pass, an operation gives its memory back to the storage pool; the next pass takes it
 * again, so the memory in use never exceeds the plan.
 *
 * Arguments are the symbol's list_arguments (data, weights, labels), in that order;
 * auxiliary states are its list_auxiliary_states (BatchNorm's moving statistics), which
 * forward(is_train = 1) updates.
 *
 * Every function returns MXC_EMISUSE for an executor, symbol or array handle that is
 * NULL, freed (stale) or of another type (base.h).
 *
 * Thread-safety: one executor is used by one thread at a time. Several executors may run
 * at once (they share the engine).
 */
#ifndef MXC_EXECUTOR_H
#define MXC_EXECUTOR_H

#include "mxc/base.h"
#include "mxc/ndarray.h"
#include "mxc/symbol.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxc_executor mxc_executor;

/** What to do with an argument's gradient (MXNet's grad_req values). */
enum mxc_grad_req {
    MXC_GRAD_NULL = 0,  /**< not computed */
    MXC_GRAD_WRITE = 1, /**< overwritten by each backward */
    MXC_GRAD_ADD = 3,   /**< added to by each backward (accumulation across passes) */
};

/** Binds `sym` on `ctx` (the CPU for now).
 * args: num_args arrays, one per list_arguments entry, with their shapes and dtypes;
 * arg_grads: NULL (no gradients) or num_args arrays (NULL entries where grad_reqs says
 * MXC_GRAD_NULL) of the arguments' shapes; grad_reqs: NULL (all MXC_GRAD_WRITE when
 * arg_grads is given) or one mxc_grad_req per argument; aux: num_aux arrays, one per
 * list_auxiliary_states entry. The executor keeps references to every array (the caller
 * may free its handles; the arrays stay alive until mxc_executor_free).
 * Dtypes: each argument and auxiliary state must have the dtype the symbol declares (its
 * __dtype__ hint, or what type inference deduces from the hints, else float32), and each
 * gradient its argument's.
 * Memory: bind adds up what the executor needs (its arrays and the memory plan) and fails
 * with MXC_ENOMEM when that exceeds this machine's memory plus swap, i.e. cannot exist.
 * (Reserving it instead would prove nothing under Linux's overcommit, which grants
 * untouched pages far beyond RAM and kills the process when a pass touches them.) Memory
 * that exists but is in use elsewhere fails at the first wait, with MXC_ENOMEM.
 * NULL: `sym` NULL is MXC_EMISUSE; `out` NULL, and `args` / `aux` NULL with a non-zero
 * count, are MXC_EINVAL; NULL entries of `args` or `aux`, or of `arg_grads` where a
 * gradient is wanted, are MXC_EMISUSE.
 * Returns MXC_OK; MXC_EINVAL (wrong counts, a gradient through an operator without a
 * backward, NULL arguments), MXC_EMISUSE (bad handle), MXC_ESHAPE (an array disagrees
 * with inference), MXC_ETYPE (a dtype differs from the declared one), MXC_ENOTSUP (an
 * operator has no kernel for ctx or the declared dtype), MXC_ENOMEM. Every message starts
 * with "mxc_executor_bind: " and names the node, operator, argument and the values
 * involved ("mxc_executor_bind: node fc1: FullyConnected: weight has shape (5, 7) but
 * (5, 6) is expected"). */
MXC_API int mxc_executor_bind(mxc_symbol *sym, mxc_context ctx, int num_args,
                              mxc_ndarray *const *args, mxc_ndarray *const *arg_grads,
                              const int *grad_reqs, int num_aux, mxc_ndarray *const *aux,
                              mxc_executor **out);

/** Binds `sym` from input shapes alone: `names[i]` (an argument, e.g. "data") has shape
 * `shapes[i]`; every other argument's shape is inferred. The executor creates the
 * arguments (zero), their gradients and the auxiliary states (zero), in the dtypes the
 * symbol declares (see mxc_executor_bind); read them with mxc_executor_arrays to
 * initialise weights. The arguments named in `names` (the inputs) get no gradient; the
 * others get `grad_req`. NULL: `sym` NULL is MXC_EMISUSE; `out` NULL, `names` or `shapes`
 * NULL with num > 0, or a NULL name, are MXC_EINVAL. Returns the codes of
 * mxc_executor_bind (messages start with "mxc_executor_simple_bind: "), and MXC_ESHAPE
 * when some argument's shape stays unknown (the message names it). */
MXC_API int mxc_executor_simple_bind(mxc_symbol *sym, mxc_context ctx, int num,
                                     const char *const *names, const mxc_shape *shapes,
                                     int grad_req, mxc_executor **out);

/** A new executor for new input shapes (same convention as simple_bind's), sharing the
 * arguments whose shapes did not change (weights), with a new memory plan. The old
 * executor stays valid. Returns the codes of mxc_executor_simple_bind. */
MXC_API int mxc_executor_reshape(mxc_executor *exec, int num, const char *const *names,
                                 const mxc_shape *shapes, mxc_executor **out);

/** Pushes the forward pass; `is_train` selects training behaviour (Dropout, BatchNorm's
 * batch statistics and moving-average updates). Returns without waiting: MXC_OK, or
 * MXC_EMISUSE (bad handle); failures while running surface when the outputs are read. */
MXC_API int mxc_executor_forward(mxc_executor *exec, int is_train);

/** Pushes the backward pass of the last forward(is_train = 1), which must come after the
 * bind, the previous backward and any forward(is_train = 0): the backward nodes read what
 * that forward wrote, and their pass gives that memory back to the pool. `head_grads`
 * holds one array per output whose operator takes a head gradient (NULL entries, or a
 * NULL array, for loss outputs such as SoftmaxOutput, which start the chain themselves);
 * the arrays are copied, so the caller may change them afterwards. Returns without
 * waiting: MXC_OK, MXC_EINVAL (no gradients were bound, or a needed head gradient is
 * missing or has the wrong shape), MXC_EMISUSE (bad handle, or no forward(is_train = 1)
 * as said above). */
MXC_API int mxc_executor_backward(mxc_executor *exec, int num_head_grads,
                                  mxc_ndarray *const *head_grads);

/** The outputs (list_outputs order), owned by the executor, valid until it is freed and
 * rewritten by every forward. */
MXC_API int mxc_executor_outputs(mxc_executor *exec, int *num, mxc_ndarray *const **outputs);

/** The arguments, their gradients (NULL entries without one) and the auxiliary states,
 * in list order; owned by the executor. Any pointer may be NULL if not wanted. */
MXC_API int mxc_executor_arrays(mxc_executor *exec, int *num_args, mxc_ndarray *const **args,
                                mxc_ndarray *const **grads, int *num_aux, mxc_ndarray *const **aux);

/** The memory plan, for tools and tests. */
typedef struct mxc_exec_plan_info {
    size_t planned_bytes; /**< memory of all planned blocks */
    size_t naive_bytes;   /**< memory if every intermediate array had its own block */
    int num_blocks;
    int num_entries; /**< arrays in the full graph (arguments and outputs too) */
    int num_nodes;   /**< operations per forward + backward pass */
    int num_forward_nodes;
} mxc_exec_plan_info;

MXC_API int mxc_executor_plan_info(const mxc_executor *exec, mxc_exec_plan_info *out);

/** The block of entry `entry` (0 .. num_entries-1), or -1 when it has its own memory
 * (arguments, gradients, auxiliary states, outputs), when `entry` is out of range, or
 * for a bad handle (MXC_EMISUSE recorded as the last error). */
MXC_API int mxc_executor_entry_block(const mxc_executor *exec, int entry);

/** Called with each node output's name ("fc1_output", "fc1_backward_data" ...) and array
 * after the node ran, on the thread that called forward/backward. */
typedef void (*mxc_executor_monitor)(const char *name, mxc_ndarray *array, void *user);

/** Installs (or, with `fn` NULL, removes) a monitor, called with `user` (may be NULL).
 * With a monitor, forward and backward wait for each node before calling it (slow; for
 * debugging numerics). Returns MXC_OK or MXC_EMISUSE. */
MXC_API int mxc_executor_set_monitor(mxc_executor *exec, mxc_executor_monitor fn, void *user);

/** A human-readable description of the plan and schedule (one line per node: kind,
 * operator, name, entries read and written with their blocks and shapes; then the blocks
 * and totals). `*text` is owned by the executor, valid until the next call or free. */
MXC_API int mxc_executor_print(mxc_executor *exec, const char **text);

/** Waits for the executor's own pending operations (not for other work on the engine, and
 * without taking memory), then frees it (NULL is fine; a freed or foreign handle is logged
 * at MXC_LOG_ERROR and frees nothing). Failures recorded on arrays stay where they are. */
MXC_API void mxc_executor_free(mxc_executor *exec);

#ifdef __cplusplus
}
#endif

#endif /* MXC_EXECUTOR_H */

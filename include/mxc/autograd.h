/*
 * mxc/autograd.h — gradients of imperative code (MXNet's autograd).
 *
 * While a thread records, every operator it runs on arrays (mxc_imperative_invoke, the
 * mxc_nd_* arithmetic, mxc_nd_reshape) whose arguments include a recorded array or a
 * marked variable is appended to a tape: the operator, its parameters and references to
 * exactly the inputs and outputs its backward needs. Each result remembers the tape node
 * that made it, so later operations link to it. mxc_autograd_backward then runs the
 * operators' backward kernels in reverse order on the engine, through the same gradient
 * pass as a bound executor (the same backward nodes, the same summation where gradients
 * meet, the same write / add requests), and writes or adds the gradients of the marked
 * variables into their gradient arrays.
 *
 * A typical training step:
 *
 *     mxc_autograd_mark_variables(n, weights, grads, reqs);    once
 *     mxc_autograd_set_recording(1, NULL);
 *     ... forward with mxc_imperative_invoke ...
 *     mxc_autograd_set_recording(0, NULL);
 *     mxc_autograd_backward(1, &loss, NULL, 0);
 *     ... optimizer update operators on weights and grads ...
 *
 * Rules that keep gradients right (each broken rule is an error code with a message,
 * never a wrong gradient):
 *  - an array a recorded operation keeps for its backward may not be written by any
 *    operation (in place or as a given output) until that tape node is released — by a
 *    backward without retain_graph or by freeing every array that leads to it;
 *  - while recording, a marked variable may not be written, an operation may not write
 *    over an input its own backward needs, and an output written in place must not share
 *    its memory with another array handle (a view);
 *  - mxc_nd_reshape of a recorded array while recording is recorded (as Reshape);
 *    mxc_nd_slice and mxc_nd_at of one are refused (use them outside recording).
 *
 * Thread-safety: the recording and training flags are per thread, as in MXNet. Recording
 * on several threads at once is safe when the threads' graphs share no array; backward on
 * one graph must not run while another thread records onto or runs backward on it.
 */
#ifndef MXC_AUTOGRAD_H
#define MXC_AUTOGRAD_H

#include "mxc/base.h"
#include "mxc/executor.h" /* enum mxc_grad_req */
#include "mxc/ndarray.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Turns recording on (`on` non-zero) or off for the calling thread; the previous state
 * (0 or 1) through `prev` when not NULL. Returns MXC_OK. */
MXC_API int mxc_autograd_set_recording(int on, int *prev);

/** Turns training mode on or off for the calling thread; the previous state through
 * `prev` when not NULL. In training mode every operator the thread runs imperatively runs
 * as with is_train = 1 (Dropout drops, BatchNorm uses batch statistics) whatever its
 * caller passed. Returns MXC_OK. */
MXC_API int mxc_autograd_set_training(int on, int *prev);

/** 1 if the calling thread records, else 0. */
MXC_API int mxc_autograd_is_recording(void);

/** 1 if the calling thread is in training mode, else 0. */
MXC_API int mxc_autograd_is_training(void);

/** Marks `n` arrays as variables whose gradients backward computes: gradient i goes to
 * `grad_arrays[i]` (same shape, dtype and device as `arrays[i]`) as `reqs[i]` says
 * (MXC_GRAD_WRITE overwrites, MXC_GRAD_ADD adds to what the array holds, MXC_GRAD_NULL
 * computes nothing); `reqs` NULL means all MXC_GRAD_WRITE. An array already recorded or
 * marked starts afresh (its history is cut). The library keeps its own references to the
 * gradient arrays: the caller may free its handles. Returns MXC_OK, MXC_EINVAL (n < 0, a
 * NULL list, a bad request), MXC_EMISUSE (a bad handle), MXC_ESHAPE / MXC_ETYPE (a
 * gradient array unlike its variable), MXC_ENOMEM; on failure no array is marked. */
MXC_API int mxc_autograd_mark_variables(int n, mxc_ndarray *const *arrays,
                                        mxc_ndarray *const *grad_arrays, const int *reqs);

/** Computes the gradients of the `n` recorded arrays `heads` with respect to every
 * marked variable they depend on, into the variables' gradient arrays. `head_grads`:
 * NULL, or n arrays (NULL entries allowed) shaped like the heads; a missing head gradient
 * is ones. A head made by a loss operator (SoftmaxOutput, the regression outputs) starts
 * its own gradient and ignores its head gradient, as in a bound executor. The work is
 * pushed to the engine; read a gradient (mxc_nd_wait_to_read, a copy) to wait for it and
 * see a kernel's failure. Without `retain_graph` the tape nodes reached are released
 * (their saved arrays freed) and a second backward through them is MXC_EINVAL.
 * Returns MXC_OK, MXC_EINVAL (n < 1, a NULL list, a head that was not recorded, a graph
 * already released, no marked variable reached, a head gradient of the wrong shape, an
 * operator without a backward on the path), MXC_EMISUSE (a bad handle, or called while
 * the thread records), MXC_ENOMEM. */
MXC_API int mxc_autograd_backward(int n, mxc_ndarray *const *heads, mxc_ndarray *const *head_grads,
                                  int retain_graph);

/** Like mxc_autograd_backward, but computes the gradients of the heads with respect to
 * the `num_vars` marked variables `vars` only, into new arrays `grads[i]` (the caller
 * frees them), leaving every marked variable's gradient array untouched. Returns as
 * mxc_autograd_backward, and MXC_EINVAL for a variable that is not marked or that the
 * heads do not depend on; on failure every grads[i] is NULL. */
MXC_API int mxc_autograd_grad(int n, mxc_ndarray *const *heads, mxc_ndarray *const *head_grads,
                              int num_vars, mxc_ndarray *const *vars, int retain_graph,
                              mxc_ndarray **grads);

#ifdef __cplusplus
}
#endif

#endif /* MXC_AUTOGRAD_H */

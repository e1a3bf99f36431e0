/*
 * ndarray/autograd_impl.h — the hooks through which the array layer feeds the autograd
 * tape (ndarray/autograd.c, include/mxc/autograd.h): the invoke path records operators,
 * mxc_nd_reshape records views, mxc_nd_free drops an array's tape reference.
 */
#ifndef MXC_NDARRAY_AUTOGRAD_IMPL_H
#define MXC_NDARRAY_AUTOGRAD_IMPL_H

#include "ndarray/ndarray_impl.h"

#include <stdbool.h>

/* Whether the calling thread records / runs operators in training mode. */
bool mxc__ag_is_recording(void);
bool mxc__ag_is_training(void);

/* Before operator `def` writes `outputs` (all n_out of them, NULL where it creates a new
 * array) from `inputs` (n_in arguments, n_aux auxiliary states) while the thread records:
 * MXC_EINVAL when the write would make a recorded gradient wrong — a marked variable
 * written, an input the operator's backward needs overwritten by its output, an output
 * written in place that another handle views. MXC_OK when not recording. */
int mxc__ag_check_write(const struct mxc__op_def *def, mxc_ndarray *const *inputs, int n_in,
                        mxc_ndarray *const *outputs, int n_out);

/* Records operator `def` (with parsed `params`) that was just pushed reading `inputs` and
 * writing `outputs` (n_out, every output, hidden ones included), when the thread records
 * and an argument is on the tape; otherwise only cuts the outputs' history. MXC_ENOMEM. */
int mxc__ag_record(const struct mxc__op_def *def, const void *params, mxc_ndarray *const *inputs,
                   int n_in, int n_aux, mxc_ndarray *const *outputs, int n_out);

/* mxc_nd_reshape (`fn`) made `view` of `a`: recorded as the Reshape operator while the
 * thread records and `a` is on the tape. mxc_nd_slice / mxc_nd_at call it first with
 * `view` NULL: MXC_EINVAL in that case (slices are not recorded), else MXC_OK. */
int mxc__ag_record_view(const mxc_ndarray *a, mxc_ndarray *view, const char *fn);

/* Drops `a`'s reference on its tape node (mxc_nd_free). */
void mxc__ag_forget(mxc_ndarray *a);

#endif /* MXC_NDARRAY_AUTOGRAD_IMPL_H */

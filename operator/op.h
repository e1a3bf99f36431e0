/*
 * operator/op.h — how an operator is defined: one static const struct mxc__op_def with
 * its parameter table, shape and type inference, backward dependencies, in-place
 * options, resource requests and kernels, plus one line in operator/op_list.h.
 *
 * Kernels see tensors (contiguous, row-major) and a write request per output:
 *   MXC__REQ_NULL     do not write (the output is not needed: it may have no memory, its
 *                     data NULL, so compute no address into it either)
 *   MXC__REQ_WRITE    overwrite
 *   MXC__REQ_INPLACE  overwrite; the output shares memory with an input
 *   MXC__REQ_ADD      add to what is there (gradient accumulation)
 * An output may share an input's memory under WRITE too (see "In place" below): a kernel
 * treats WRITE and INPLACE alike and never uses the request to detect sharing.
 * A tensor without elements (a dimension is 0) has a valid data pointer that must not be
 * dereferenced, so `data + 0` and memcpy / memset of 0 bytes need no test.
 * Internal to the library; the public view is include/mxc/op.h.
 */
#ifndef MXC_OPERATOR_OP_H
#define MXC_OPERATOR_OP_H

#include "mxc/engine.h"
#include "mxc/op.h"

#include "common/common.h"
#include "resource/resource.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* ---- Tensors ----------------------------------------------------------------------- */

/* What a kernel sees of an array while it runs. */
struct mxc__tensor {
    void *data; /* never NULL for an array: an empty one (size 0) points at a placeholder */
    mxc_shape shape;
    int dtype;
    mxc_context ctx;
    int64_t size; /* elements */
};

enum mxc__req { MXC__REQ_NULL = 0, MXC__REQ_WRITE, MXC__REQ_INPLACE, MXC__REQ_ADD };

/* ---- Parameters -------------------------------------------------------------------- */

enum mxc__param_type {
    MXC__PARAM_INT,        /* int */
    MXC__PARAM_FLOAT,      /* float */
    MXC__PARAM_DOUBLE,     /* double */
    MXC__PARAM_BOOL,       /* bool: True/False (also true/false/1/0) */
    MXC__PARAM_ENUM,       /* int: index into `choices` */
    MXC__PARAM_TUPLE,      /* mxc_shape: "(3, 3)", "3", "()" */
    MXC__PARAM_OPT_FLOAT,  /* struct mxc__opt_float: a number or None */
    MXC__PARAM_OPT_ENUM,   /* int: index into `choices`, or -1 for None */
    MXC__PARAM_OPT_INT,    /* struct mxc__opt_int: an integer or None */
    MXC__PARAM_OPT_TUPLE,  /* struct mxc__opt_tuple: None, or a tuple whose entries may be
                              None: "(1, None, -2)" (slice's begin and end) */
    MXC__PARAM_LONG_TUPLE, /* struct mxc__long_tuple: a tuple longer than a shape (Pad's) */
    MXC__PARAM_STRING,     /* char[MXC__PARAM_STRING_MAX]: free text (the fill operators' ctx) */
};

/* Room for a string parameter, its terminating NUL included. */
#define MXC__PARAM_STRING_MAX 64

/* A tuple of up to 16 integers: two per axis of a 5-D array and more (Pad's pad_width). */
#define MXC__LONG_TUPLE_MAX 16
struct mxc__long_tuple {
    int ndim;
    int64_t dims[MXC__LONG_TUPLE_MAX];
};

struct mxc__opt_float {
    bool has_value;
    float value;
};

struct mxc__opt_int {
    bool has_value;
    int value;
};

struct mxc__opt_tuple {
    bool has_value;  /* false: the whole value is None */
    mxc_shape tuple; /* entries that are None hold 0 */
    unsigned none;   /* bit i: entry i is None */
};

/* One row of an operator's parameter table. */
struct mxc__param {
    const char *name;
    int type;                   /* an mxc__param_type */
    size_t offset;              /* in the operator's param struct */
    const char *default_value;  /* as MXNet spells it; NULL: required */
    double min, max;            /* bounds for numbers (min > max: unbounded) */
    const char *const *choices; /* enums: NULL-terminated names */
    const char *doc;
};

/* Table rows, for readability: MXC__P_INT(struct, field, default, min, max, doc). */
#define MXC__P(type_, st, field, def, lo, hi, ch, doc_) \
    { #field, type_, offsetof(st, field), def, lo, hi, ch, doc_ }
#define MXC__P_INT(st, f, def, lo, hi, doc) MXC__P(MXC__PARAM_INT, st, f, def, lo, hi, NULL, doc)
#define MXC__P_FLOAT(st, f, def, lo, hi, doc) \
    MXC__P(MXC__PARAM_FLOAT, st, f, def, lo, hi, NULL, doc)
#define MXC__P_DOUBLE(st, f, def, doc)   MXC__P(MXC__PARAM_DOUBLE, st, f, def, 1, 0, NULL, doc)
#define MXC__P_BOOL(st, f, def, doc)     MXC__P(MXC__PARAM_BOOL, st, f, def, 1, 0, NULL, doc)
#define MXC__P_ENUM(st, f, def, ch, doc) MXC__P(MXC__PARAM_ENUM, st, f, def, 1, 0, ch, doc)
#define MXC__P_TUPLE(st, f, def, doc)    MXC__P(MXC__PARAM_TUPLE, st, f, def, 1, 0, NULL, doc)
#define MXC__P_OPT_FLOAT(st, f, doc)     MXC__P(MXC__PARAM_OPT_FLOAT, st, f, "None", 1, 0, NULL, doc)
#define MXC__P_OPT_ENUM(st, f, ch, doc)  MXC__P(MXC__PARAM_OPT_ENUM, st, f, "None", 1, 0, ch, doc)
#define MXC__P_OPT_INT(st, f, def, lo, hi, doc) \
    MXC__P(MXC__PARAM_OPT_INT, st, f, def, lo, hi, NULL, doc)
#define MXC__P_OPT_TUPLE(st, f, def, doc) MXC__P(MXC__PARAM_OPT_TUPLE, st, f, def, 1, 0, NULL, doc)
#define MXC__P_LONG_TUPLE(st, f, def, doc) \
    MXC__P(MXC__PARAM_LONG_TUPLE, st, f, def, 1, 0, NULL, doc)
#define MXC__P_STRING(st, f, def, doc) MXC__P(MXC__PARAM_STRING, st, f, def, 1, 0, NULL, doc)

/* The parameters of the `_<op>_scalar` operators and smooth_l1. */
struct mxc__scalar_param {
    float scalar;
};

/* ---- Kernels ----------------------------------------------------------------------- */

/* Everything a forward or backward kernel receives. Forward reads in_data (and aux),
 * writes out_data as req says. Backward reads out_grad and whichever of in_data and
 * out_data the operator declared it needs, writes in_grad as req says. */
struct mxc__op_call {
    const mxc_run_ctx *rctx;
    bool is_train;
    const void *params;
    const struct mxc__tensor *in_data;
    int num_in;
    const struct mxc__tensor *out_data;
    int num_out;
    const struct mxc__tensor *aux; /* mutable auxiliary states (BatchNorm's moving stats) */
    int num_aux;
    const struct mxc__tensor *out_grad; /* backward only */
    const struct mxc__tensor *in_grad;  /* backward only */
    const int *req;                     /* per out_data (forward) or in_grad (backward) */
    struct mxc__resource *const *resources;
    int num_resources;
};

typedef int (*mxc__op_kernel)(const struct mxc__op_call *call);

/* Runs `kernel` on `call` unless the call writes no element: every tensor it writes
 * (out_data forward, in_grad backward, and aux) is empty. Such a call changes nothing,
 * and a kernel looping over the outer dimensions of an empty tensor would spin through
 * them all: shape (2^63 - 1, 0) is empty (the op_params fuzzer found BatchNorm so). */
int mxc__op_run(mxc__op_kernel kernel, const struct mxc__op_call *call);

/* Marks a hot element-wise kernel to be compiled twice, for x86-64-v3 (AVX2 and FMA) and
 * for the baseline x86-64, the better picked when the library loads (GCC function
 * multi-versioning); the loops inside vectorise 8 floats wide where the CPU has AVX2, and
 * the Makefile's -ffp-contract=fast lets their multiply-adds fuse. */
/* Not under ThreadSanitizer: the clones' resolver runs while the program is being loaded,
 * before TSan's runtime is up, and its instrumentation crashes there. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define MXC__SIMD_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define MXC__SIMD_KERNEL
#endif

/* dst (n floats) = or += src as `req` says; writing in place (dst == src) does nothing.
 * The copy every data-moving kernel (Reshape, Concat, ...) ends in. */
static inline void mxc__copy_req(float *dst, const float *src, int64_t n, int req) {
    if (req == MXC__REQ_NULL)
        return;
    if (req == MXC__REQ_ADD) {
        for (int64_t i = 0; i < n; i++)
            dst[i] += src[i];
    } else if (dst != src) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    }
}

/* What a backward pass needs besides out_grad. */
enum mxc__backward_dep {
    MXC__DEP_OUT_GRAD = 1,
    MXC__DEP_IN_DATA = 2,
    MXC__DEP_OUT_DATA = 4,
};

#define MXC__MAX_OP_ARGS 16 /* inputs or outputs of one operator */

/* An in-place option, written MXC__INPLACE(in, out). Indices are stored plus one so
 * that a field an operator leaves out (zero) means "never in place", the safe default.
 *
 * In place: the rule for kernels. Declaring an option lets the executor's planner give
 * the output the input's memory (mxc_imperative_invoke's caller may pass an input array as
 * the output too):
 *   .inplace = MXC__INPLACE(i, o):          out_data[o] may be in_data[i], and then also
 *                                           every other input passed the same array
 *                                           (h * h, ElementWiseSum(h, g, h));
 *   .backward_inplace = MXC__INPLACE(i, o): in_grad[i] may be out_grad[o] (applied only
 *                                           when the backward reads out_grad, o visible).
 * The executor shares nothing else with a written tensor. A shared output starts at the
 * input's first element; its request is WRITE (the executor) or INPLACE (imperative), never
 * ADD (the other outputs keep theirs: ADD onto a gradient bound with add-to is common).
 * So a kernel that declares an option must treat element k of a shared input as gone once
 * it stores element k of the shared output: every use of input element k (for this output,
 * for other elements, for the other outputs or gradients) comes before that store.
 * Element-wise loops that load element k, compute, then store k meet this; a kernel that
 * writes one whole output and then reads out_grad or an input again for a second one does
 * not (the bug the binary element-wise backward had), nor does one that copies arg0 into
 * the output and then adds the other inputs, one of which may be that output. Kernels
 * mixing elements (softmax along a row) take what they need first (maxima, sums, temp
 * space). tests/util/op_check.c runs every declared option against separate buffers, and
 * check_operator's test_inplace_every_operator requires a case for every operator that
 * declares one. */
struct mxc__inplace {
    unsigned char in1, out1;
};
#define MXC__INPLACE(in, out) \
    { (in) + 1, (out) + 1 }

/* Whether `p` is set; its indices through `in` and `out`. */
static inline bool mxc__inplace_get(struct mxc__inplace p, int *in, int *out) {
    *in = p.in1 - 1;
    *out = p.out1 - 1;
    return p.in1 != 0;
}

/* Shape inference: fills the unknown (ndim 0) shapes it can deduce from the known ones,
 * in place; checks the known ones. Errors name the operator, the argument and both
 * shapes (MXC_ESHAPE) and are recorded with mxc__error. */
typedef int (*mxc__infer_shape_fn)(const void *params, mxc_shape *in, int num_in, mxc_shape *out,
                                   int num_out, mxc_shape *aux, int num_aux);

/* Type inference, the same way; NULL means every input, output and aux has one dtype. */
typedef int (*mxc__infer_type_fn)(const void *params, int *in, int num_in, int *out, int num_out,
                                  int *aux, int num_aux);

/* Argument names that depend on the parameters (variadic operators such as Concat):
 * writes up to `max` names and returns how many there are. */
typedef int (*mxc__list_names_fn)(const void *params, const char **names, int max);

struct mxc__op_def {
    const char *name;
    const char *description;
    /* parameters */
    size_t param_size;
    const struct mxc__param *params;
    int num_params;
    /* arguments: fixed lists, or a function of the parameters */
    const char *const *inputs; /* NULL-terminated; NULL if list_inputs is set */
    mxc__list_names_fn list_inputs;
    const char *const *outputs;      /* NULL-terminated; NULL if list_outputs is set */
    mxc__list_names_fn list_outputs; /* variadic outputs (SliceChannel), all visible */
    int num_visible_outputs;         /* 0: all outputs are visible */
    /* visible outputs as a function of the parameters (LayerNorm's output_mean_var shows
     * its mean and std); NULL: num_visible_outputs says */
    int (*visible_outputs)(const void *params);
    const char *const *aux; /* NULL-terminated, or NULL */
    mxc__infer_shape_fn infer_shape;
    mxc__infer_type_fn infer_type;
    /* backward */
    unsigned backward_deps;               /* mxc__backward_dep flags; 0: not differentiable */
    struct mxc__inplace inplace;          /* forward: out_data[out] may share in_data[in] */
    struct mxc__inplace backward_inplace; /* in_grad[in] may share out_grad[out] */
    /* Each output element depends only on the same element of the inputs (all of one
     * shape): an output may then be written over any input passed as the same memory
     * (mxc_nd_add(a, b, &b)); other operators only over their `inplace` pair. */
    bool elementwise;
    /* resources (mxc__resource_kind values + 1; 0 ends the list) */
    unsigned char forward_resources[2];
    unsigned char backward_resources[2];
    /* The dtypes of input 0 the kernels (forward and backward, every device) accept, as
     * bits 1 << dtype; 0: float32 only, the default. The other arguments' dtypes follow
     * from input 0's by type inference (all the same unless infer_type says otherwise:
     * Cast's output is its parameter, mp_sgd_update's master weight float32), so input
     * 0's decides for the node: mxc_op_supports, the executor's bind and
     * mxc_imperative_invoke read it through mxc__op_accepts. */
    unsigned dtypes;
    /* kernels per device (NULL: not supported there) */
    mxc__op_kernel forward_cpu, backward_cpu;
    mxc__op_kernel forward_gpu, backward_gpu;
};

/* Whether `def`'s kernels take input 0 of `dtype` (see mxc__op_def.dtypes). */
static inline bool mxc__op_accepts(const struct mxc__op_def *def, int dtype) {
    unsigned set = def->dtypes ? def->dtypes : 1u << MXC_FLOAT32;
    return dtype >= 0 && dtype < 32 && (set >> dtype & 1u);
}

/* ---- Registry ---------------------------------------------------------------------- */

/* The operator named `name`, or called so by one of MXNet's aliases of it ("add_n" is
 * ElementWiseSum, "elemwise_add" _plus: operator/registry.c lists them), or NULL. */
const struct mxc__op_def *mxc__op_find(const char *name);

/* The operator as mxc__op_find finds it, or MXC_EINVAL "unknown operator" (with a close
 * name if there is one). */
int mxc__op_lookup(const char *name, const struct mxc__op_def **out);

/* Number of inputs / outputs / aux states of `def` with `params`; names through the
 * out parameter when not NULL (up to MXC__MAX_OP_ARGS). */
int mxc__op_num_inputs(const struct mxc__op_def *def, const void *params, const char **names);
int mxc__op_num_outputs(const struct mxc__op_def *def, const void *params, const char **names);
/* How many of the outputs callers see (the rest are hidden, e.g. BatchNorm's mean). */
int mxc__op_num_visible_outputs(const struct mxc__op_def *def, const void *params);
int mxc__op_num_aux(const struct mxc__op_def *def);

/* ---- Parameters -------------------------------------------------------------------- */

/* Fills `params` (def->param_size bytes) from string key/values: defaults first, then
 * the given keys. Unknown keys, missing required keys, unparsable values and values out of
 * bounds are MXC_EINVAL naming the operator, the key and (for unknown keys) every valid
 * key. Keys starting with "__" (symbol hints such as __shape__) are ignored. */
int mxc__op_parse_params(const struct mxc__op_def *def, int num, const char *const *keys,
                         const char *const *vals, void *params);

/* Writes parameter `p` of `params` as MXNet spells it ("(3, 3)", "True", "relu",
 * "None", "0.5"). Returns the length (like snprintf). */
int mxc__op_format_param(const struct mxc__param *p, const void *params, char *buf, size_t size);

/* ---- Shape helpers for infer_shape ------------------------------------------------- */

/* Unifies `*have` with `want`: an unknown side takes the other; two known shapes must be
 * equal, else MXC_ESHAPE naming the operator and argument. */
int mxc__shape_assign(mxc_shape *have, const mxc_shape *want, const char *op, const char *arg);

/* Same for dtypes (-1: unknown): MXC_ETYPE on conflict. */
int mxc__type_assign(int *have, int want, const char *op, const char *arg);

/* *out = a + b * c; false when that (or b * c) overflows int64. For geometry whose terms
 * are dims and parameters, any of which may be near INT64_MAX (a pad of 2^63 - 1 parses). */
static inline bool mxc__mul_add(int64_t a, int64_t b, int64_t c, int64_t *out) {
    int64_t t;
    return !__builtin_mul_overflow(b, c, &t) && !__builtin_add_overflow(a, t, out);
}

#endif /* MXC_OPERATOR_OP_H */

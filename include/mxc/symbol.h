/*
 * mxc/symbol.h — symbolic graphs: variables, operator applications, composition,
 * grouping, listing in MXNet's order, shape and type inference, JSON in MXNet's format
 * (FORMATS.md) and Graphviz export. docs/symbol.md is the user guide.
 *
 * A symbol (mxc_symbol) is a list of outputs of a graph. Graph nodes are shared between
 * symbols and reference counted: building a symbol from others never consumes them, and
 * each handle is freed with mxc_symbol_free independently of the others.
 *
 * Strings returned by the listing, attribute, JSON and DOT functions are owned by the
 * symbol. The argument, output and auxiliary-state lists are made once per symbol (its
 * graph never changes) and stay valid until the symbol is freed, whatever else is called
 * on it (binding lists them too); the attribute, JSON and DOT strings stay valid until the
 * next call of the same function on the same symbol, or until the symbol is freed.
 *
 * Thread-safety: a symbol handle may be used by one thread at a time (the listing calls
 * fill caches inside it). Different handles may be used from different threads, even when
 * they share nodes, except for mxc_symbol_set_attr, which changes a shared node.
 *
 * Return codes common to every function: MXC_EMISUSE for a NULL, freed (stale) or
 * foreign handle (base.h; mxc_symbol_free logs it and frees nothing),
 * MXC_EINVAL for a NULL or out-of-range argument, MXC_ENOMEM. mxc_last_error() says more.
 */
#ifndef MXC_SYMBOL_H
#define MXC_SYMBOL_H

#include "mxc/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A list of outputs of a graph. */
typedef struct mxc_symbol mxc_symbol;

/* ---- Building ---------------------------------------------------------------------- */

/** A new variable named `name` (copied, non-empty) with no attributes. Set hints
 * (__shape__ "(2, 3)", __dtype__ "float32", __init__, __lr_mult__, __wd_mult__) with
 * mxc_symbol_set_attr. Returns MXC_OK, MXC_EINVAL, MXC_ENOMEM; `*out` is NULL on failure. */
MXC_API int mxc_symbol_variable(const char *name, mxc_symbol **out);

/** Applies operator `op` (MXNet's name) with string parameters (`keys[i]` = `vals[i]`,
 * spelled as in JSON: "(3, 3)", "True", "relu") to inputs, in one call.
 *
 * - `name`: the node's name; NULL or "" picks MXNet's automatic name: the operator name
 *   in lower case followed by a per-thread counter ("fullyconnected0", "convolution1").
 * - `inputs[i]` (each a single-output symbol) feed the operator's arguments: by position
 *   when `input_names` is NULL, else the argument called `input_names[i]` (an argument or
 *   an auxiliary-state name of the operator, e.g. "data", "weight", "moving_mean").
 * - Arguments and auxiliary states not given become new variables named
 *   "<name>_<argument>" (fc1_weight, bn1_moving_mean, softmax_label), carrying the node's
 *   parameters as attributes like MXNet's (and BatchNorm's __init__ hints).
 * - Keys starting with "__" are stored as node attributes, not parsed as parameters.
 *
 * The inputs are not consumed. Returns MXC_OK; MXC_EINVAL for an unknown operator (the
 * message suggests a close name), an unknown, missing or malformed parameter (the param
 * parser's message, prefixed with the node name), too many inputs, an unknown or repeated
 * input name, or an input with more than one output; MXC_EMISUSE for a bad input handle;
 * MXC_ENOMEM. `*out` is NULL on failure. */
MXC_API int mxc_symbol_create(const char *op, int num_params, const char *const *keys,
                              const char *const *vals, const char *name, int num_inputs,
                              const char *const *input_names, mxc_symbol *const *inputs,
                              mxc_symbol **out);

/** Composition: a new symbol equal to `sym` with its free variables replaced. With
 * `names` NULL, `args[i]` replaces the i-th input (list_inputs order: arguments and
 * auxiliary states in depth-first order); else the variable called `names[i]`. Each
 * `args[i]` must have one output. The nodes of `sym` that depend on a replaced variable
 * are copied; `sym` itself is unchanged. Returns MXC_OK, MXC_EINVAL (no variable of that
 * name, more args than inputs, multi-output arg), MXC_EMISUSE, MXC_ENOMEM. */
MXC_API int mxc_symbol_compose(const mxc_symbol *sym, int num_args, const char *const *names,
                               mxc_symbol *const *args, mxc_symbol **out);

/** A symbol whose outputs are those of `syms[0]`, then `syms[1]`, ... (num ≥ 1).
 * Returns MXC_OK, MXC_EINVAL, MXC_EMISUSE, MXC_ENOMEM. */
MXC_API int mxc_symbol_group(int num, mxc_symbol *const *syms, mxc_symbol **out);

/** A symbol made of output `index` of `sym` (0 ≤ index < num_outputs). Returns MXC_OK,
 * MXC_EINVAL (index out of range), MXC_EMISUSE, MXC_ENOMEM. */
MXC_API int mxc_symbol_get_output(const mxc_symbol *sym, int index, mxc_symbol **out);

/** A symbol whose outputs are every output of every node of `sym` in depth-first order:
 * variables and the visible outputs of operators, named as MXNet names them
 * ("data", "fc1_weight", "fc1_output"); pick one with mxc_symbol_get_output. Returns
 * MXC_OK, MXC_EMISUSE, MXC_ENOMEM. */
MXC_API int mxc_symbol_get_internals(const mxc_symbol *sym, mxc_symbol **out);

/** A deep copy: new nodes (same names, attributes and structure), so attributes set on
 * the copy do not affect `sym`. Returns MXC_OK, MXC_EMISUSE, MXC_ENOMEM. */
MXC_API int mxc_symbol_copy(const mxc_symbol *sym, mxc_symbol **out);

/** Frees the handle (the nodes when no other symbol uses them). Accepts NULL. */
MXC_API void mxc_symbol_free(mxc_symbol *sym);

/* ---- Listing (MXNet's order) ------------------------------------------------------- */

/** Number of outputs. Returns MXC_OK, MXC_EMISUSE, MXC_EINVAL (NULL out). */
MXC_API int mxc_symbol_num_outputs(const mxc_symbol *sym, int *out);

/** The name of the node of a single-output symbol ("fc1", "data"). Returns MXC_OK,
 * MXC_EINVAL (several outputs), MXC_EMISUSE. The string lives as long as the node. */
MXC_API int mxc_symbol_get_name(const mxc_symbol *sym, const char **name);

/** The arguments (variables that are not auxiliary states) in depth-first post-order
 * of the graph, as MXNet's list_arguments. `*names` is owned by the symbol (see top).
 * Returns MXC_OK, MXC_EMISUSE, MXC_EINVAL, MXC_ENOMEM. */
MXC_API int mxc_symbol_list_arguments(mxc_symbol *sym, int *num, const char *const **names);

/** The outputs' names as MXNet's list_outputs: "<node>_output", "<node>_<outname>" for
 * operators with named outputs ("sl_output0"), a variable's own name. */
MXC_API int mxc_symbol_list_outputs(mxc_symbol *sym, int *num, const char *const **names);

/** The auxiliary states (BatchNorm's moving_mean, moving_var), depth-first order. */
MXC_API int mxc_symbol_list_auxiliary_states(mxc_symbol *sym, int *num, const char *const **names);

/* ---- Attributes -------------------------------------------------------------------- */

/** Sets attribute `key` = `value` on the node of a single-output symbol (every symbol
 * sharing the node sees it). On a variable any key is allowed; on an operator node keys
 * starting with "__" are free attributes and a parameter name changes the parameter (the
 * new value is parsed and checked first). Returns MXC_OK, MXC_EINVAL (several outputs,
 * bad parameter value), MXC_EMISUSE, MXC_ENOMEM. Not thread-safe (see top). */
MXC_API int mxc_symbol_set_attr(mxc_symbol *sym, const char *key, const char *value);

/** The value of attribute `key` of the node of a single-output symbol: `*value` is the
 * string (owned by the node, valid until the attribute changes or the node dies) or NULL
 * when not set. Returns MXC_OK, MXC_EINVAL, MXC_EMISUSE. */
MXC_API int mxc_symbol_get_attr(const mxc_symbol *sym, const char *key, const char **value);

/** Every attribute of every node as flat triples "node", "key", "value" (3 × *num
 * strings, owned by the symbol). Returns MXC_OK, MXC_EMISUSE, MXC_EINVAL, MXC_ENOMEM. */
MXC_API int mxc_symbol_list_attrs(mxc_symbol *sym, int *num, const char *const **triples);

/* ---- Inference --------------------------------------------------------------------- */

/** Shape inference from a partial set of known shapes.
 *
 * Known shapes: `shapes[i]` for the argument called `names[i]` (an argument or auxiliary
 * state), or, when `names` is NULL, for the i-th argument (list_arguments order); plus
 * every variable's __shape__ hint. Every operator's inference runs in topological order
 * until nothing changes, so shapes are deduced in both directions (a weight from data).
 *
 * Results (each array may be NULL; else it has room for the list's count):
 * `arg_shapes` (list_arguments order), `out_shapes` (list_outputs order), `aux_shapes`
 * (list_auxiliary_states order); an unknown shape has ndim 0. `*num_unknown` (may be NULL)
 * receives how many arguments and auxiliary states stay unknown (0: inference complete;
 * not an error); `*unknown_names` (may be NULL) their names, owned by the symbol.
 *
 * Returns MXC_OK; MXC_ESHAPE on a conflict, the message naming the node, its operator,
 * the argument and both shapes; MXC_EINVAL (unknown name, bad hint); MXC_EMISUSE;
 * MXC_ENOMEM. */
MXC_API int mxc_symbol_infer_shape(mxc_symbol *sym, int num, const char *const *names,
                                   const mxc_shape *shapes, mxc_shape *arg_shapes,
                                   mxc_shape *out_shapes, mxc_shape *aux_shapes, int *num_unknown,
                                   const char *const **unknown_names);

/** Type inference, like mxc_symbol_infer_shape with mxc_dtype values (-1 unknown) and
 * __dtype__ hints ("float32"). MXC_ETYPE on a conflict. */
MXC_API int mxc_symbol_infer_type(mxc_symbol *sym, int num, const char *const *names,
                                  const int *dtypes, int *arg_types, int *out_types, int *aux_types,
                                  int *num_unknown);

/* ---- JSON and Graphviz ------------------------------------------------------------- */

/** Loads a symbol from MXNet's JSON (any version 0.8 … 1.9, FORMATS.md; 0.8-era files get
 * their missing auxiliary-state variables). Returns MXC_OK; MXC_EFORMAT for malformed
 * JSON or structure (the message gives line and column or the node), MXC_EINVAL for an
 * unknown operator or a bad parameter (naming the node), MXC_ENOMEM. */
MXC_API int mxc_symbol_load_json(const char *json, mxc_symbol **out);

/** mxc_symbol_load_json on the contents of file `path`; MXC_EIO if it cannot be read. */
MXC_API int mxc_symbol_load(const char *path, mxc_symbol **out);

/** The symbol as JSON MXNet 1.9 loads: nodes in topological order with the attributes
 * the user set (as given), arg_nodes, node_row_ptr, heads, mxnet_version 10901.
 * `*json` is owned by the symbol (see top). Returns MXC_OK, MXC_EMISUSE, MXC_EINVAL,
 * MXC_ENOMEM. */
MXC_API int mxc_symbol_save_json(mxc_symbol *sym, const char **json);

/** Writes mxc_symbol_save_json's text to `path` as checkpoints are written: to a
 * temporary `<path>.tmp.<pid>`, synced to disk and renamed into place, then the folder is
 * synced, so a crash leaves either the old file or the new one. Returns MXC_OK, MXC_EIO
 * (naming the path and the system's reason), MXC_EMISUSE, MXC_EINVAL, MXC_ENOMEM. */
MXC_API int mxc_symbol_save(mxc_symbol *sym, const char *path);

/** Graphviz DOT text of the graph (the C counterpart of mx.viz.plot_network): one box per
 * operator labelled with its name and key parameters, one ellipse per variable
 * (parameter variables such as fc1_weight are hidden unless `show_params`), edges from
 * producer to consumer labelled with the shape when inference (from `num` named shapes,
 * as mxc_symbol_infer_shape; 0 for none) knows it. A failed inference only drops the
 * labels. `*dot` is owned by the symbol. Returns MXC_OK, MXC_EMISUSE, MXC_EINVAL,
 * MXC_ENOMEM. */
MXC_API int mxc_symbol_to_dot(mxc_symbol *sym, int num, const char *const *names,
                              const mxc_shape *shapes, int show_params, const char **dot);

#ifdef __cplusplus
}
#endif

#endif /* MXC_SYMBOL_H */

/*
 * mxc/model.h — training: initializers, optimizers, metrics and the fit loop.
 *
 * The pieces follow MXNet's Python API: an initializer fills each parameter by the
 * pattern of its name (weights by the chosen scheme, biases and betas 0, gammas 1,
 * moving means 0, moving variances 1); an optimizer updates a weight from its gradient
 * through the update operators (sgd_update, adam_update, rmsprop_update, ...), with per-
 * parameter learning-rate and weight-decay multipliers and a learning-rate schedule; a
 * metric accumulates a figure over batches; mxc_model_fit runs epochs of forward,
 * backward and update over a data iterator, reports progress, evaluates and checkpoints.
 *
 * Every function returns MXC_EMISUSE for a handle (optimizer, metric, model, and the
 * arrays, symbols and iterators given to them) that is NULL, freed (stale) or of another
 * type; the getters without a status return NULL or NAN and record it; the destructors
 * log it at MXC_LOG_ERROR and free nothing (base.h).
 *
 * Thread-safety: every object here is used by one thread at a time.
 */
#ifndef MXC_MODEL_H
#define MXC_MODEL_H

#include "mxc/base.h"
#include "mxc/io.h"
#include "mxc/kvstore.h"
#include "mxc/ndarray.h"
#include "mxc/symbol.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Initializers ---------------------------------------------------------------- */

/** How weights are drawn. */
enum mxc_init_kind {
    MXC_INIT_UNIFORM = 0,  /**< uniform in [-scale, scale] */
    MXC_INIT_NORMAL = 1,   /**< normal with mean 0 and standard deviation `scale` */
    MXC_INIT_XAVIER = 2,   /**< Xavier/Glorot: see xavier_* below */
    MXC_INIT_CONSTANT = 3, /**< every weight equals `scale` */
};

enum mxc_xavier_factor { MXC_XAVIER_AVG = 0, MXC_XAVIER_IN = 1, MXC_XAVIER_OUT = 2 };

typedef struct mxc_init_config {
    int kind;               /**< an mxc_init_kind */
    float scale;            /**< UNIFORM / NORMAL / CONSTANT (MXNet's defaults: 0.07, 0.01) */
    int xavier_gaussian;    /**< XAVIER: 0 uniform in [-s, s], 1 normal with sigma s */
    int xavier_factor;      /**< XAVIER: an mxc_xavier_factor (fan average, in or out) */
    float xavier_magnitude; /**< XAVIER: s = sqrt(magnitude / factor); MXNet's default 3 */
} mxc_init_config;

/** Fills `array` as parameter `name` under `cfg`, by the name's suffix as MXNet's
 * Initializer does: names ending in "weight" get the scheme (Xavier fans: in = shape[1] *
 * receptive field, out = shape[0] * receptive field); "bias", "beta", "moving_mean",
 * "moving_inv_var", "moving_avg", "min" and Gluon's "running_mean" get 0; "gamma",
 * "moving_var", "max" and "running_var" get 1. Draws use the random resource, so
 * mxc_random_seed makes them reproducible. Returns MXC_OK, MXC_EINVAL (unknown name
 * pattern, bad config, NULL cfg or name), MXC_EMISUSE (bad array handle), MXC_ENOTSUP (not
 * float32). */
MXC_API int mxc_init_array(const mxc_init_config *cfg, const char *name, mxc_ndarray *array);

/** mxc_init_array, unless `hint` — the variable's "__init__" attribute as MXNet and Gluon
 * write it: a name ("zeros", "ones") or a JSON list ["name", {arguments}] — names an
 * initializer, which then fills the array whatever its name, as MXNet's does: zero(s),
 * one(s), constant {value}, uniform {scale = 0.07}, normal {sigma = 0.01}, xavier
 * {rnd_type uniform|gaussian, factor_type avg|in|out, magnitude = 3}, msraprelu
 * {factor_type, slope = 0.25}. NULL or "" is no hint. The fit loop passes each variable's
 * hint. Returns as mxc_init_array, and MXC_EFORMAT (hint not JSON), MXC_EINVAL (bad hint
 * shape or argument), MXC_ENOTSUP (an initializer mxc does not have, named). */
MXC_API int mxc_init_array_hinted(const mxc_init_config *cfg, const char *name, const char *hint,
                                  mxc_ndarray *array);

/* ---- Optimizers ------------------------------------------------------------------ */

/** The optimizers, each with MXNet 1.9.1's formulas (docs/operators.md has each update
 * operator's): which operator a step runs and which states a parameter keeps. */
enum mxc_optimizer_kind {
    MXC_OPT_SGD = 0,      /**< sgd_update; with momentum sgd_mom_update (state "mom") */
    MXC_OPT_ADAM = 1,     /**< adam_update with bias correction in lr ("mean", "var") */
    MXC_OPT_NAG = 2,      /**< nag_mom_update ("mom"); without momentum sgd_update */
    MXC_OPT_RMSPROP = 3,  /**< rmsprop_update ("n"); centered: rmspropalex_update ("n",
                               "g", "delta") */
    MXC_OPT_ADAGRAD = 4,  /**< MXNet's AdaGrad in array arithmetic ("history") */
    MXC_OPT_ADADELTA = 5, /**< MXNet's AdaDelta in array arithmetic ("acc_g", "acc_delta");
                               lr is not used */
    MXC_OPT_FTRL = 6,     /**< ftrl_update ("z", "n") */
    MXC_OPT_SIGNUM = 7,   /**< signum_update ("mom"); without momentum signsgd_update */
    MXC_OPT_ADAMW = 8,    /**< _adamw_update as GluonNLP's BERTAdam drives it: lr 1, the
                               bias-corrected rate as eta ("mean", "var") */
    MXC_OPT_LAMB = 9,     /**< lamb_update_phase1, the norms of the weight and of its g,
                               lamb_update_phase2 ("mean", "var") */
};

/** Learning-rate schedules over the update count n (the highest count of any parameter),
 * MXNet's lr_scheduler classes with base_lr = `lr`:
 * FACTOR: lr * factor^k, k the number of `step`s passed, never below `stop_factor_lr`;
 * MULTI_FACTOR: lr * factor^k, k the number of update counts in `steps` passed;
 * COSINE: final_lr + (lr - final_lr) * (1 + cos(pi * (n - warmup_steps) / (max_update -
 * warmup_steps))) / 2 up to max_update, then final_lr;
 * POLY: final_lr + (lr - final_lr) * (1 - (n - warmup_steps) / (max_update -
 * warmup_steps))^pwr up to max_update, then final_lr.
 * Every schedule first warms up for n < warmup_steps: from warmup_begin_lr to lr in equal
 * increments (MXC_WARMUP_LINEAR: warmup_begin_lr + (lr - warmup_begin_lr) * n /
 * warmup_steps) or at warmup_begin_lr (MXC_WARMUP_CONSTANT). */
enum mxc_lr_schedule {
    MXC_LR_CONSTANT = 0,
    MXC_LR_FACTOR = 1,
    MXC_LR_MULTI_FACTOR = 2,
    MXC_LR_COSINE = 3,
    MXC_LR_POLY = 4,
};

enum mxc_warmup_mode { MXC_WARMUP_LINEAR = 0, MXC_WARMUP_CONSTANT = 1 };

#define MXC_LR_MAX_STEPS 16

/** An optimizer's settings. Zero-initialise it and set what you need: a 0 in a field
 * marked "(0: x)" means MXNet's default x. Fields after `steps` were added later; each
 * names the optimizers that read it. */
typedef struct mxc_optimizer_config {
    int kind;                    /**< an mxc_optimizer_kind */
    float lr;                    /**< learning rate (the schedules' base_lr) */
    float momentum;              /**< SGD, NAG, Signum momentum (0: none; MXNet's Signum
                                      defaults to 0.9, so set it) */
    float wd;                    /**< weight decay */
    float rescale_grad;          /**< gradients are multiplied by this first (0 means 1); fit
                              sets 1 / batch_size when it is 0 */
    float clip_gradient;         /**< clip (after rescaling) to [-c, c]; <= 0: no clipping */
    float beta1, beta2, epsilon; /**< Adam, AdamW, LAMB (0: 0.9, 0.999); epsilon (0: 1e-8;
                                      AdaGrad 1e-7, AdaDelta 1e-5, LAMB 1e-6) */
    int lr_schedule;             /**< an mxc_lr_schedule */
    int step;                    /**< FACTOR: updates between decays */
    float factor;                /**< FACTOR / MULTI_FACTOR: multiplier per decay */
    float stop_factor_lr;        /**< FACTOR: the lowest learning rate */
    int num_steps;               /**< MULTI_FACTOR: the update counts where lr decays */
    int steps[MXC_LR_MAX_STEPS];
    float gamma1;           /**< RMSProp: decay of n (0: 0.9) */
    float gamma2;           /**< RMSProp centered: decay of delta (0: 0.9) */
    int centered;           /**< RMSProp: 1 for Graves's centered version */
    float clip_weights;     /**< RMSProp: clip weights to [-c, c]; <= 0: no clipping */
    float rho;              /**< AdaDelta: decay of both accumulators (0: 0.9) */
    float lamda1;           /**< FTRL: L1 strength, as given (MXNet's default 0.01) */
    float ftrl_beta;        /**< FTRL: beta (0: 1) */
    float wd_lh;            /**< Signum: decoupled weight decay */
    int no_bias_correction; /**< LAMB: 1 for bias_correction=False */
    float lower_bound;      /**< LAMB: least trust-ratio norm; <= 0: none */
    float upper_bound;      /**< LAMB: greatest trust-ratio norm; <= 0: none */
    int max_update;         /**< COSINE / POLY: the update count where lr reaches
                                      final_lr (>= 1, > warmup_steps) */
    float final_lr;         /**< COSINE / POLY: the last rate */
    float pwr;              /**< POLY: the power (0: 2) */
    int warmup_steps;       /**< every schedule: warm-up updates (0: none) */
    float warmup_begin_lr;  /**< the warm-up's first rate (<= lr) */
    int warmup_mode;        /**< an mxc_warmup_mode */
    /** Non-zero: a float16 weight is updated through a float32 master copy (state
     * "weight32", made from the weight at its first update), as MXNet's
     * multi_precision=True: SGD runs mp_sgd_update / mp_sgd_mom_update, every other kind
     * its float32 step on the master copy with the gradient cast to float32, then the
     * master is cast back into the weight. Weights of other dtypes update as usual. */
    int multi_precision;
} mxc_optimizer_config;

typedef struct mxc_optimizer mxc_optimizer;

/** Creates an optimizer. Returns MXC_OK, MXC_EINVAL (bad kind or values), MXC_ENOMEM. */
MXC_API int mxc_optimizer_create(const mxc_optimizer_config *cfg, mxc_optimizer **out);

/** Multipliers of parameter `name` (default 1 and 1, as an MXNet Optimizer made without
 * names; mxc_model_fit sets Module's: see there). Returns MXC_OK, MXC_EINVAL, MXC_ENOMEM. */
MXC_API int mxc_optimizer_set_mult(mxc_optimizer *opt, const char *name, float lr_mult,
                                   float wd_mult);

/** Updates parameter `index` (any stable small integer per parameter; state such as
 * momentum is kept per index) named `name` in place from `grad`, pushed on the engine
 * (returns without waiting). Counts one update per call for the schedule. Returns MXC_OK,
 * MXC_EINVAL, MXC_EMISUSE, MXC_ESHAPE (weight and grad differ), MXC_ENOMEM. */
MXC_API int mxc_optimizer_update(mxc_optimizer *opt, int index, const char *name,
                                 mxc_ndarray *weight, mxc_ndarray *grad);

/** The schedule's learning rate at the current update count n (MXNet's
 * optimizer.learning_rate): the rate the latest update of a parameter with lr_mult 1 used
 * (before any update: lr, or warmup_begin_lr with a warm-up). NAN for a bad handle. */
MXC_API float mxc_optimizer_current_lr(const mxc_optimizer *opt);

/** Frees the optimizer and its states (NULL is fine). */
MXC_API void mxc_optimizer_free(mxc_optimizer *opt);

/** Saves the optimizer's state to `path` for a checkpoint, in MXNet's NDArray list format
 * (mxc_nd_save: written to a temporary file renamed over `path`): per parameter index i
 * its update count "i_count" (int64, (1)) and its states "i_<state>" (float32) named by
 * the kind (docs/formats.md: "mom"; "mean", "var"; "n", "g", "delta"; "history"; "acc_g",
 * "acc_delta"; "z", "n"; with multi_precision, a float16 weight's master copy
 * "weight32"), and the schedule as "__schedule__" (float64: highest update
 * count, the schedule's step count, its next step, its current rate). Waits for the
 * states' pending updates. Returns MXC_OK, MXC_EMISUSE, MXC_EINVAL (NULL path), MXC_EIO,
 * MXC_ENOMEM, or a failure of an update. */
MXC_API int mxc_optimizer_save_states(const mxc_optimizer *opt, const char *path);

/** Replaces the optimizer's state by one saved with mxc_optimizer_save_states by an
 * optimizer of the same kind and states (with or without momentum; RMSProp centered or
 * not, alike): later updates
 * continue bit for bit as the saved optimizer's would have. The states are loaded on the
 * CPU and move to each weight's device at its next update. On failure the optimizer is
 * left as it was. Returns MXC_OK, MXC_EMISUSE, MXC_EINVAL (NULL path; a file of another
 * kind of optimizer or missing a state, naming the entry), MXC_EIO, MXC_EFORMAT,
 * MXC_ENOMEM. */
MXC_API int mxc_optimizer_load_states(mxc_optimizer *opt, const char *path);

/** Makes `opt` the updater of store `kv` (mxc_kvstore_set_updater): a push of key k
 * calls mxc_optimizer_update(opt, k, name, stored, merged) with name the key in decimal
 * ("3"), so mxc_optimizer_set_mult(opt, "3", ...) sets key 3's multipliers. The optimizer
 * must outlive the store's pushes; mxc_kvstore_set_updater(kv, NULL, NULL) removes it.
 * Returns MXC_OK, MXC_EMISUSE (bad store or optimizer). */
MXC_API int mxc_kvstore_set_optimizer(mxc_kvstore *kv, mxc_optimizer *opt);

/* ---- Metrics --------------------------------------------------------------------- */

typedef struct mxc_metric mxc_metric;

/** Creates a metric by MXNet's name: "acc" (accuracy of the arg-max), "top_k_accuracy"
 * (label among the `top_k` highest scores; scores rank as MXNet's argmax ranks them: ties
 * to the lower class, NaN above every number), "ce" (cross-entropy: mean of -log p[label]),
 * "mse" (mean squared error), or "composite" (a list of metrics, see mxc_metric_add).
 * Returns MXC_OK, MXC_EINVAL (unknown name, top_k < 1), MXC_ENOMEM. */
MXC_API int mxc_metric_create(const char *name, int top_k, mxc_metric **out);

/** Adds `child` to a composite metric, which takes it over (freeing the child yourself
 * too is a double free, reported when the composite is freed). Returns MXC_OK,
 * MXC_EINVAL (not a composite), MXC_EMISUSE, MXC_ENOMEM. */
MXC_API int mxc_metric_add(mxc_metric *composite, mxc_metric *child);

/** Accumulates one batch: `preds[i]` (N, C) scores (or (N,) / (N, k) for mse) against
 * `labels[i]` (N,) class indices (or values for mse), for i < num. Waits for the arrays.
 * The last `pad` samples of each batch are padding and are not counted. Returns MXC_OK,
 * MXC_EINVAL / MXC_ESHAPE (shapes disagree, a label out of range), MXC_EMISUSE. */
MXC_API int mxc_metric_update(mxc_metric *m, int num, mxc_ndarray *const *labels,
                              mxc_ndarray *const *preds, int pad);

/** The current value(s): `*num` of them (1, or the children's count for a composite),
 * names ("accuracy", "top_k_accuracy", "cross-entropy", "mse") and values, owned by the
 * metric. A metric that has seen no sample reports NAN. */
MXC_API int mxc_metric_get(mxc_metric *m, int *num, const char *const **names,
                           const double **values);

/** Starts over (a new epoch). */
MXC_API int mxc_metric_reset(mxc_metric *m);

MXC_API void mxc_metric_free(mxc_metric *m);

/* ---- Models: a symbol with its parameters ---------------------------------------- */

/** A network and its parameters (arguments other than the inputs, and auxiliary
 * states), as MXNet's checkpoints hold them. */
typedef struct mxc_model mxc_model;

/** A model of `sym` (copied) with no parameters yet: fit initialises them. Returns
 * MXC_OK, MXC_EMISUSE, MXC_ENOMEM. */
MXC_API int mxc_model_create(mxc_symbol *sym, mxc_model **out);

/** Loads `prefix`-symbol.json and `prefix`-EEEE.params (EEEE = epoch, 4 digits) as saved
 * by MXNet or mxc (parameters named "arg:<name>" and "aux:<name>"). Returns MXC_OK,
 * MXC_EIO (a file cannot be read, with its path), MXC_EFORMAT (a damaged file: an empty
 * or malformed symbol file, a truncated parameter file; the message names the file),
 * MXC_EINVAL, MXC_ENOMEM. */
MXC_API int mxc_model_load(const char *prefix, int epoch, mxc_model **out);

/** Loads the parameters of an NDArray list file (MXNet's `arg:<name>` / `aux:<name>`
 * naming, as mxc_model_save, MXNet's checkpoints and Gluon's HybridBlock.export write
 * them) into `model`, replacing the values it has of the same names: to fine-tune from
 * trained weights, fit then initialises only what the file lacks. Every name must be an
 * argument or auxiliary state of the model's symbol; all names are checked before the
 * model changes. Returns MXC_OK, MXC_EMISUSE (bad model), MXC_EINVAL (NULL path, a name the
 * symbol lacks, naming it), MXC_EIO, MXC_EFORMAT (unnamed or wrongly named entries),
 * MXC_ENOMEM (then some parameters may already be replaced). */
MXC_API int mxc_model_load_params(mxc_model *model, const char *path);

/** Loads the newest checkpoint of `prefix` that is complete and loads, for resuming: the
 * highest epoch E with a `prefix`-EEEE.params file whose pair (that file and
 * `prefix`-symbol.json) loads with mxc_model_load. A damaged newer checkpoint (truncated
 * parameters, an empty symbol file) is skipped with a warning in the log (MXC_LOG_WARN,
 * naming the file and the reason) and the next older one is tried.
 * Params: prefix: the checkpoint prefix ("build/lenet"); epoch: receives the epoch loaded
 *         (0 when none); out: receives the model (the caller frees it), NULL when none.
 * Returns: MXC_OK with the model, or MXC_OK with *out NULL and *epoch 0 when `prefix` has
 *         no checkpoint at all (its folder has no `prefix`-EEEE.params, or does not exist);
 *         when checkpoints exist but none loads, the code of the newest one's failure
 *         (MXC_EFORMAT, MXC_EIO, MXC_EINVAL) with a message naming it and the reason;
 *         MXC_ENOMEM as soon as a load runs out of memory (no fallback: that is not
 *         damage); MXC_EINVAL for a NULL argument; MXC_EIO when the folder cannot be read.
 * Thread-safety: as mxc_model_load; the warning goes through the log hook. */
MXC_API int mxc_model_load_latest(const char *prefix, int *epoch, mxc_model **out);

/** Saves the model as the checkpoint `prefix`-symbol.json + `prefix`-EEEE.params. Each file
 * is written to a temporary `<file>.tmp.<pid>` in the same folder, flushed, fsynced and
 * renamed over the old one, then the folder is fsynced, so an interrupted save (even a
 * crash or power loss) never damages an earlier checkpoint. First removes the temporaries
 * of this prefix's checkpoint files (`prefix`-symbol.json.tmp.<pid>,
 * `prefix`-EEEE.params.tmp.<pid>) whose process no longer exists: what saves killed midway
 * left behind; other files and live processes' temporaries are never touched. Waits for
 * pending writes to the parameters. Returns MXC_OK, MXC_EIO (with the path), MXC_EINVAL
 * (no parameters yet, epoch outside 0..9999), MXC_EMISUSE, MXC_ENOMEM. */
MXC_API int mxc_model_save(const mxc_model *model, const char *prefix, int epoch);

/** The model's symbol (owned by the model); NULL for a bad handle. */
MXC_API mxc_symbol *mxc_model_symbol(const mxc_model *model);

/** The parameter named `name` ("fc1_weight", "bn1_moving_mean"), owned by the model, or
 * NULL (none of that name, or a bad handle). */
MXC_API mxc_ndarray *mxc_model_param(const mxc_model *model, const char *name);

MXC_API void mxc_model_free(mxc_model *model);

/* ---- Fitting ------------------------------------------------------------------------ */

/** What a progress callback sees. */
typedef struct mxc_fit_progress {
    int epoch;            /**< counting from the fit's begin_epoch */
    int64_t batch;        /**< batches done in this epoch */
    int64_t num_batches;  /**< batches per epoch */
    int end_of_epoch;     /**< non-zero once per epoch, after evaluation and checkpoint */
    double samples_per_s; /**< over the last reporting interval (the epoch at its end) */
    double seconds;       /**< since the fit started */
    double seconds_left;  /**< estimate for the whole fit */
    const char *metric_name;
    double train_metric;    /**< running value this epoch */
    double eval_metric;     /**< at the end of an epoch with an eval iterator, else NAN */
    const char *checkpoint; /**< params file written at this epoch's end, or NULL */
} mxc_fit_progress;

typedef void (*mxc_fit_callback)(const mxc_fit_progress *progress, void *user);

/** Prints MXNet Speedometer-style lines to stderr ("Epoch[0] Batch [100/600] Speed:
 * 5123.4 samples/sec accuracy=0.812 (1m02s left)", and per epoch the train and
 * validation metrics and the time taken). The default callback. `user` is not used (may
 * be NULL); `progress` NULL prints nothing. */
MXC_API void mxc_fit_print_progress(const mxc_fit_progress *progress, void *user);

typedef struct mxc_fit_config {
    int num_epochs;  /**< epochs to run (> 0) */
    int begin_epoch; /**< numbering of the first epoch (resume: the epoch of the
                                    checkpoint the model was loaded from) */
    mxc_optimizer_config optimizer;
    mxc_init_config init; /**< for parameters the model does not have yet */
    const char *metric;   /**< "acc" (default), "ce", "mse", "top_k_accuracy" */
    int top_k;
    uint64_t seed;                 /**< mxc_random_seed(seed) before initialising */
    const char *checkpoint_prefix; /**< save after each epoch when not NULL */
    int frequent;                  /**< batches between progress reports (default 50) */
    mxc_fit_callback callback;     /**< NULL: mxc_fit_print_progress; set quiet to silence */
    void *user;
    int quiet;              /**< no progress at all */
    const char *data_name;  /**< default "data" */
    const char *label_name; /**< default "softmax_label" */
    /** Where the passes and updates run: mxc_cpu() or mxc_gpu(n); zero (dev_type 0, as
     * mxc_fit_config_init leaves it) means the CPU. On a GPU the model's parameters stay
     * on the host: the fit works on device copies, copied back at each epoch's end (before
     * evaluating and checkpointing), so checkpoints load anywhere. A GPU this build or
     * machine lacks is MXC_ENODEV. Every cpu(n) is the host. */
    mxc_context ctx;
    /** Data parallelism in one process: when num_ctxs > 0, the `num_ctxs` contexts of
     * `ctxs` (at most 64; e.g. cpu(0), cpu(1), or several GPUs) override `ctx`. Each batch
     * of B samples is split across one executor per context (B / K rows each, the first
     * B % K executors one more; the iterator still yields B), each with its own copies of
     * the parameters; the gradients are summed by the store (below), which runs the
     * optimizer, and every executor pulls the same new weights before its next forward.
     * The metric sees every slice's outputs. The array is read during the call only. */
    const mxc_context *ctxs;
    int num_ctxs;
    /** The key-value store type: "local", "device" or "dist_sync" (mxc/kvstore.h). NULL:
     * "local" with several contexts, none with one (the optimizer then updates the one
     * executor's parameters directly, the fastest path). With "dist_sync" (a job started by
     * mpirun; give each rank its own shard of the data, e.g. the iterator's num_parts /
     * part_index) every process trains on its batches, the store sums the gradients of all
     * ranks (the global batch is B x ranks, so rescale_grad 0 means 1 / (B x ranks)) and
     * starts every rank from rank 0's parameters; only rank 0 reports progress, evaluates
     * `eval` (alone, on the whole set: the other ranks' results have eval_metric NAN) and
     * writes checkpoints; the others wait for it at the next epoch's first exchange, so
     * evaluating must take less than MXC_KV_TIMEOUT_S (docs/kvstore_mpi.md). */
    const char *kvstore;
    /** Non-zero: beside each checkpoint also save the optimizer's state
     * (mxc_optimizer_save_states) as `checkpoint_prefix`-EEEE.states, and when begin_epoch
     * > 0 load `checkpoint_prefix`-<begin_epoch>.states before training (a missing file is
     * a warning in the log and fresh states), so a resumed fit continues as the first
     * would have. With dist_sync every rank loads the same file (a shared folder). */
    int optimizer_states;
} mxc_fit_config;

/** Defaults: 1 epoch, SGD lr 0.01, Xavier (uniform, avg, magnitude 3), "acc", seed 0,
 * report every 50 batches, on the CPU. */
MXC_API void mxc_fit_config_init(mxc_fit_config *cfg);

/** The outcome of a fit. */
typedef struct mxc_fit_result {
    double train_metric;  /**< last epoch */
    double eval_metric;   /**< last epoch, NAN without an eval iterator */
    double samples_per_s; /**< training samples per second over the whole fit */
    double seconds;
    int epochs;
} mxc_fit_result;

/** Trains `model` on `train` (batches of data and labels) for cfg->num_epochs epochs:
 * binds the symbol for the iterator's shapes, initialises missing parameters, then per
 * batch runs forward, backward and the optimizer on every parameter; per epoch computes
 * the training metric, scores `eval` (may be NULL), reports progress and checkpoints.
 * Multipliers as MXNet's Module sets them: weight decay only for parameters named
 * *_weight or *_gamma, then each variable's "__lr_mult__" and "__wd_mult__" attributes.
 * `result` may be NULL. NULL: `model` is MXC_EMISUSE; `train` or `cfg` is MXC_EINVAL.
 * Runs on cfg->ctx, or split across cfg->ctxs through a store (cfg->kvstore, see there;
 * docs/kvstore.md "Data-parallel training"); when a GPU or several-context fit fails
 * midway, the model holds the parameters of the last epoch completed (or those it
 * started with).
 * Returns MXC_OK, MXC_EINVAL (bad config: an unknown kvstore type, num_ctxs < 0 or > 64
 * or without a list, a batch smaller than the number of contexts, a multiplier attribute
 * that is not a number >= 0; a context neither CPU nor GPU), MXC_ENODEV (a GPU
 * context this build or machine lacks), MXC_ENOTSUP (an operator of the network without a
 * kernel on that device, named), MXC_EDEVICE / MXC_ENOTSUP (a dist_sync store that cannot
 * start: outside mpirun, a build without MPI), MXC_ESHAPE (the
 * iterator's shapes do not fit the symbol), MXC_EIO (a checkpoint cannot be written), or
 * the failure of a batch (the message names the operation). It waits for its own arrays
 * only: other work on the engine, and failures recorded on other arrays, are left alone. */
MXC_API int mxc_model_fit(mxc_model *model, mxc_data_iter *train, mxc_data_iter *eval,
                          const mxc_fit_config *cfg, mxc_fit_result *result);

/** The metric `metric` ("acc", ...; NULL: "acc") of the model over one epoch of `it`
 * (from its start; the iterator is reset first). NULL: `model` is MXC_EMISUSE; `it` or
 * `value` is MXC_EINVAL. Returns MXC_OK or as mxc_model_fit. */
MXC_API int mxc_model_score(mxc_model *model, mxc_data_iter *it, const char *metric, double *value);

/** mxc_model_score run on `ctx` (mxc_cpu(), mxc_gpu(n); zero means the CPU): the network
 * is bound there with device copies of the parameters, which stay on the host; outputs
 * are copied to the host for the metric. Returns as mxc_model_score, and MXC_ENODEV (a GPU
 * this build or machine lacks), MXC_EINVAL (a context neither CPU nor GPU), MXC_ENOTSUP (an
 * operator without a kernel there). */
MXC_API int mxc_model_score_on(mxc_model *model, mxc_context ctx, mxc_data_iter *it,
                               const char *metric, double *value);

/** The model's first output for every sample of one epoch of `it` (padding rows left
 * out), stacked into a new array `*out` of shape (samples, ...). NULL as for
 * mxc_model_score. Returns as mxc_model_score. */
MXC_API int mxc_model_predict(mxc_model *model, mxc_data_iter *it, mxc_ndarray **out);

/** mxc_model_predict run on `ctx` as mxc_model_score_on; `*out` is a host array. Returns
 * as mxc_model_score_on. */
MXC_API int mxc_model_predict_on(mxc_model *model, mxc_context ctx, mxc_data_iter *it,
                                 mxc_ndarray **out);

/** Every output of the model (mxc_symbol_list_outputs order and names) for every sample of
 * one epoch of `it`, run on `ctx` as mxc_model_predict_on: `*outs` is a new list of `*num`
 * host arrays of shape (samples, ...), to be freed with mxc_nd_list_free(*num, *outs,
 * NULL). Arguments named like labels (ending in "label") that the iterator does not feed
 * read zeros, as the loss heads' forward ignores them; any other argument without a value
 * is an error. On failure `*outs` is NULL and `*num` 0. Returns as mxc_model_score_on. */
MXC_API int mxc_model_predict_outputs(mxc_model *model, mxc_context ctx, mxc_data_iter *it,
                                      int *num, mxc_ndarray ***outs);

#ifdef __cplusplus
}
#endif

#endif /* MXC_MODEL_H */

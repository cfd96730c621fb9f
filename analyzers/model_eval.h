/* analyzers/model_eval.h: model passes for the analyzers that drive the model themselves
 * (gradients, pruning), over the evaluation set of an sp_analysis with a model, and host copies of
 * the weights.
 *
 * Batch b holds sequences [b * batch, min((b + 1) * batch, n_seqs)), so the last batch may be
 * shorter. Losses are token-weighted: the mean over every counted target (>= 0) of the batches.
 * The model runs at most model_batch sequences at a time (sp_analysis), so a batch may take several
 * passes; what is computed per batch does not change. */
#ifndef SP_MODEL_EVAL_H
#define SP_MODEL_EVAL_H

#include "analyzers/analyzer.h"

/* ceil(n_seqs / batch). */
int sp_eval_n_batches(const sp_analysis *a);
/* weight x the gradient of batch b's mean loss, into the model's parameter gradients (added to them
 * when accumulate is set, else replacing them); *loss gets the batch's mean loss. */
sp_status sp_eval_batch_gradient(const sp_analysis *a, int b, double weight, int accumulate, double *loss);
/* One forward pass of sp_eval_passes, just run: its rows' host targets, mean loss and counted
 * targets, and its place among this rank's passes. */
typedef struct {
    const int32_t *targets;
    double loss, count;
    int index, n_passes;
} sp_eval_pass;
typedef sp_status (*sp_eval_visit)(const sp_analysis *a, const sp_eval_pass *pass, void *ctx);
/* The forward passes (with targets) over the first n_seqs sequences, at most model_batch sequences
 * each, `visit` after each while its activations stand; a pass without a counted target is not
 * run. Over MPI ranks each runs its share of the passes (analyzers/ranks.h): the callers sum what
 * they gather (sp_analysis_sum, a collective), so a token-weighted mean over the sequences is the
 * sum of loss * count over the passes divided by the sum of count. */
sp_status sp_eval_passes(const sp_analysis *a, int n_seqs, sp_eval_visit visit, void *ctx);

/* The most copies (1..want) of a seq_len-token sequence whose forward + backward activations fit
 * in half of the --max-memory-gib budget (sp_model_activation_bytes); 0 when not even one does.
 * The other half holds the weights, gradients and accumulators (docs/analyze.md, "Memory"). */
int sp_eval_fit_copies(const sp_analysis *a, int want, int seq_len);
/* The activation budget in bytes: half of --max-memory-gib. */
double sp_eval_activation_budget(const sp_analysis *a);

/* A malloc'd float64 host copy of parameter i (NULL + SP_ERR_NOMEM recorded on failure). */
double *sp_eval_param_f64(const sp_model *m, int i);

#endif

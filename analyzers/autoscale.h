/* analyzers/autoscale.h: the analysis defaults that scale with the model (docs/analyze.md, "Defaults
 * that scale with the model").
 *
 * The options whose cost grows with the model's size (n_tokens, power_iters, jac_seq, prune_seqs)
 * default to SP_ANALYZE_AUTO, "not given". sp_analyze_options_resolve replaces each of them with
 * its fixed default (sp_analyze_options_defaults) when that fits the stage's FLOP budget, or with a
 * smaller value that does. The rule reads only the model's config and the other options, never the
 * clock, so a run is reproducible anywhere, and the resolved values are what the report records.
 * Options given explicitly are never changed. */
#ifndef SP_AUTOSCALE_H
#define SP_AUTOSCALE_H

#include "analyzers/analyzer.h"
#include "core/config.h"

#define SP_ANALYZE_AUTO (-1)

/* FLOP budgets of the stages (multiply-add = 2 FLOPs). */
#define SP_BUDGET_STREAM 1.6e12  /* the streaming pass: forward passes and the per-token analyzers */
#define SP_BUDGET_JACOBIAN 8.2e12 /* the Jacobian's power iterations, at the power_iters cap */
#define SP_BUDGET_PRUNING 2.0e12 /* the pruning losses' forward passes */

/* The cost model, FLOPs. T is the tokens of a sequence. */
double sp_cost_forward(const sp_config *cfg, int T);   /* per token, a forward pass, the LM head included */
double sp_cost_stream(const sp_config *cfg, int T);    /* per token, the forward pass + cka, spectra */
double sp_cost_jacobian_iter(const sp_config *cfg, int jac_seq, int topk); /* one power step of every iteration run */
double sp_cost_pruning_seq(const sp_config *cfg, int T); /* one sequence of every pruning loss */

/* Options as sp_analyze_options_defaults, with the scaling ones SP_ANALYZE_AUTO. */
void sp_analyze_options_auto(sp_analyze_options *o);

/* Resolves every SP_ANALYZE_AUTO option of o for a checkpoint with config cfg evaluated on
 * sequences of seq_len tokens; cfg NULL (an activation dump) takes the fixed defaults. */
void sp_analyze_options_resolve(sp_analyze_options *o, const sp_config *cfg, int seq_len);

#endif

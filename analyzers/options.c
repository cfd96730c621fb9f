/* analyzers/options.c: the options of `spanprobe analyze` as a field table (core/fields.h): every
 * field is a CLI option (--n-tokens 4096) and a key of a JSON config file, and the resolved options
 * are recorded in every report's provenance. */
#include "analyzers/analyzer.h"
#include "analyzers/autoscale.h"

#include <stddef.h>

#define F(field, type, help) {#field, type, offsetof(sp_analyze_options, field), NULL, help}
static const sp_field analyze_fields[] = {
    F(metrics, SP_FIELD_STRING, "comma-separated analyzers to run (empty: all but the opt-in ones)"),
    F(n_tokens, SP_FIELD_INT64, "evaluation tokens (a checkpoint runs on ceil(n_tokens / seq_len) sequences; "
                                "a dump's first sequences)"),
    F(seq_len, SP_FIELD_INT, "tokens per evaluation sequence (0: min(max_seq_len, 256); a dump has its own)"),
    F(batch, SP_FIELD_INT, "sequences per forward pass or dump read"),
    F(seed, SP_FIELD_INT64, "seed of the evaluation windows and the random probes"),
    F(topk, SP_FIELD_INT, "Jacobian: top-k singular values"),
    F(power_iters, SP_FIELD_INT, "Jacobian: iteration cap (products J V per Lanczos run)"),
    F(power_tol, SP_FIELD_DOUBLE, "Jacobian (Lanczos), curvature (power iteration): stop at this relative change"),
    F(jac_tokens, SP_FIELD_INT, "Jacobian: tokens sampled for the token-local Jacobians"),
    F(jac_seq, SP_FIELD_INT, "Jacobian: tokens of the analyzed sequence (0 or more than seq_len: the whole sequence)"),
    F(center, SP_FIELD_BOOL, "similarity: subtract each layer's mean vector before the cosines (two passes)"),
    F(last_token, SP_FIELD_BOOL, "similarity: the last token of each sequence only"),
    F(cka_debiased, SP_FIELD_BOOL, "cka: also the debiased HSIC estimator"),
    F(cka_pairs_per_pass, SP_FIELD_INT, "cka: layer pairs accumulated per pass over the evaluation set (0: as many "
                                        "as fit in a quarter of max_memory_gib, d^2 8 bytes each); more take more "
                                        "passes, with the same result"),
    F(grad_batches, SP_FIELD_INT, "grad_norms: evaluation batches whose gradients are summed"),
    F(prune_batches, SP_FIELD_INT, "pruning: evaluation batches per loss"),
    F(prune_seqs, SP_FIELD_INT, "pruning: evaluation sequences per loss instead (0: prune_batches whole batches)"),
    F(singular_values, SP_FIELD_BOOL, "weights: also store the full singular values of every matrix"),
    F(embed_uncentered, SP_FIELD_BOOL, "embed_spectrum: eigenvalues of E^T E / V instead of the covariance"),
    F(skip_positions, SP_FIELD_INT, "leave the first N positions of every sequence out of every statistic that "
                                    "pools tokens and out of the losses (attention sinks)"),
    F(curv_seqs, SP_FIELD_INT, "curvature: evaluation sequences of the loss whose Hessian is taken"),
    F(curv_iters, SP_FIELD_INT, "curvature: power-iteration cap of each block's top eigenvalue"),
    F(hutchinson_samples, SP_FIELD_INT, "curvature: Rademacher probes of each block's Hessian trace"),
    F(max_memory_gib, SP_FIELD_DOUBLE, "backend (GPU) memory budget, GiB: the sequences per pass are cut so the "
                                       "model's activations take at most half of it"),
};
#undef F
const sp_field_table sp_analyze_option_table = {analyze_fields, (int)SP_ARRAY_LEN(analyze_fields)};

void sp_analyze_options_defaults(sp_analyze_options *o)
{
    *o = (sp_analyze_options){
        .metrics = "",
        .n_tokens = 16384,
        .seq_len = 0,
        .batch = 8,
        .seed = 1,
        .topk = 8,
        .power_iters = 100,
        .power_tol = 1e-4,
        .jac_tokens = 4,
        .jac_seq = 64,
        .center = 0,
        .last_token = 0,
        .cka_debiased = 0,
        .cka_pairs_per_pass = 0,
        .grad_batches = 1,
        .prune_batches = 2,
        .prune_seqs = 0,
        .singular_values = 0,
        .embed_uncentered = 0,
        .max_memory_gib = 8,
        .skip_positions = 0,
        .curv_seqs = 2,
        .curv_iters = 100,
        .hutchinson_samples = 16,
    };
}

sp_status sp_analyze_options_validate(const sp_analyze_options *o, const char *where)
{
    /* SP_ANALYZE_AUTO (-1) stands for an option not given: the model's size resolves it */
    static const char auto_note[] = ", or -1: scaled to the model";
    const sp_int_range ranges[] = {
        {"n_tokens", o->n_tokens, o->n_tokens == SP_ANALYZE_AUTO ? -1 : 1, INT64_C(1) << 40, auto_note},
        {"seq_len", o->seq_len, 0, 1 << 20, NULL},
        {"batch", o->batch, 1, 1 << 20, NULL},
        {"topk", o->topk, 1, 1 << 16, NULL},
        {"power_iters", o->power_iters, o->power_iters == SP_ANALYZE_AUTO ? -1 : 1, 1 << 24, auto_note},
        {"jac_tokens", o->jac_tokens, 1, 1 << 20, NULL},
        {"jac_seq", o->jac_seq, -1, 1 << 20, auto_note},
        {"cka_pairs_per_pass", o->cka_pairs_per_pass, 0, 1 << 24, NULL},
        {"grad_batches", o->grad_batches, 1, 1 << 20, NULL},
        {"prune_batches", o->prune_batches, 1, 1 << 20, NULL},
        {"prune_seqs", o->prune_seqs, -1, 1 << 20, auto_note},
        {"skip_positions", o->skip_positions, 0, 1 << 20, NULL},
        {"curv_seqs", o->curv_seqs, 1, 1 << 20, NULL},
        {"curv_iters", o->curv_iters, 1, 1 << 24, NULL},
        {"hutchinson_samples", o->hutchinson_samples, 1, 1 << 20, NULL},
    };
    SP_TRY(sp_check_int_ranges(ranges, SP_ARRAY_LEN(ranges), SP_ERR_USAGE, where));
    if (!(o->max_memory_gib > 0 && o->max_memory_gib <= 1 << 20))
        return sp_error(SP_ERR_USAGE, "%s: max_memory_gib = %g (expected a number of GiB in (0, 1048576])", where,
                        o->max_memory_gib);
    if (!(o->power_tol > 0 && o->power_tol < 1))
        return sp_error(SP_ERR_USAGE, "%s: power_tol = %g (expected a number in (0, 1))", where, o->power_tol);
    return SP_OK;
}

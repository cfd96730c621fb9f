/* analyzers/agreement.c: the cross-backend tolerance table and the agreement rule
 * (analyzers/agreement.h). The values hold for fp32 CUDA against fp32 CPU and for either against the
 * fp64 CPU build; docs/cuda.md ("Agreement with the CPU") explains each. */
#include "analyzers/agreement.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"

/* Shorthands for the table: the kind, compared or not, absolute or relative to max |a|. */
#define ARR(an, pat, atol, rtol, why) {an, pat, SP_AGREE_ARRAY, 1, 0, atol, rtol, why}
#define ARR_ABS(an, pat, atol, rtol, why) {an, pat, SP_AGREE_ARRAY, 1, 1, atol, rtol, why}
#define ARR_NOT(an, pat, why) {an, pat, SP_AGREE_ARRAY, 0, 0, 0, 0, why}
#define KEY(an, pat, atol, rtol, why) {an, pat, SP_AGREE_SCALAR, 1, 0, atol, rtol, why}
#define KEY_ABS(an, pat, atol, rtol, why) {an, pat, SP_AGREE_SCALAR, 1, 1, atol, rtol, why}
#define KEY_NOT(an, pat, why) {an, pat, SP_AGREE_SCALAR, 0, 0, 0, 0, why}

/* Reasons shared by several entries. */
#define WHY_EXACT "a size, count, index or flag that does not depend on rounding: must be equal"
#define WHY_ITERS "iteration counts: the stop rule's step can move by one under rounding; the values it " \
                  "produces are compared"
#define WHY_ARGEXT "the index of an extreme: it may flip between near-equal entries; the array it indexes " \
                   "is compared"
#define WHY_SPLIT "how the evaluation set was cut into passes (--batch), not a measurement; the results " \
                  "over those passes are compared"
#define WHY_ACT "statistics of fp32 activations: forward-pass rounding is ~1e-6 relative (up to ~1e-5 on " \
                "12 blocks of d_model 768), 10x margin"
#define WHY_COS "cosines and angles / pi of fp32 activations: rounding of unit rows gives ~1e-6 absolute, up " \
                "to ~1e-5 on deep models; absolute because block influence and small angles sit near 0"
#define WHY_EIG "fp32 moment sums (8192 rows per partial sum) perturb the covariance by ~1e-6 of its norm: " \
                "every eigenvalue is judged against the top one, so round-off eigenvalues of a " \
                "rank-deficient covariance pass"
#define WHY_ENTROPY "entropy of the normalized spectrum: round-off eigenvalues (~1e-7 of the top) each add " \
                    "-p ln p ~ 2e-6 nats in fp32 and nothing in fp64; up to ~5e-4 nats over thousands"
#define WHY_HARD "trace^2 / sum of squares: dominated by the top eigenvalues, so as precise as the moments"
#define WHY_POWER "Lanczos / power iteration stopped at a relative change of 1e-4 (power_tol): the two runs " \
                  "start from the same vectors, follow the same path and may stop one step apart; small " \
                  "singular values of the top-k are judged against the top"
#define WHY_CHAIN "end-to-end chains: fp32 JVPs through L blocks, and post-norm chains have singular values " \
                  "clustered near 1, where Lanczos gains ~1e-4 a step and fp32 and fp64 runs part ways; " \
                  "measured 2.4e-3 to 2.7e-3 apart on the 4-layer test models (CPU fp32 and CUDA alike)"
#define WHY_TOKEN "token-local Jacobians built column by column from fp32 JVPs (~1e-6 relative), their SVD " \
                  "in fp64"
#define WHY_WEIGHT_SVD "fp64 singular values of the same fp32 weights on both sides: ~1e-12 agreement; kappa " \
                       "amplifies by itself (error ~1e-16 kappa), so 1e-6 holds up to kappa 1e10"
#define WHY_WEIGHT_PROD "norms of weight products (W_2 W_1, W_O W_V'): a product in fp32 is ~1e-6 relative"
#define WHY_GRAD "fp32 backward pass: each tensor's gradient is ~1e-6 relative to itself (gradient tests: " \
                 "<= 1e-4 of the whole norm); tensors with tiny gradients are judged against the largest"
#define WHY_LOSS "a mean cross-entropy from fp32 logits, summed in double: within 1e-5 relative, the model " \
                 "tests' rule"
#define WHY_PRUNE "losses and differences of two losses, each within 1e-5 relative of at most ~10 nats: " \
                  "2e-4 nats absolute, far below the 1e-2 a block that matters moves"
#define WHY_RESIDUAL "a ratio of two Frobenius norms of fp32 activations, the centered one formed on the backend in " \
                     "two passes: ~1e-6 relative; absolute 1e-5 because a collapsed layer sits at 0"
#define WHY_KL "KL of log-softmaxes of fp32 logits, reduced in fp64: ~1e-6 of the logits' size; absolute near the " \
               "last layers, where it goes to 0"
#define WHY_ARGMAX "shares of tokens whose argmax matches: a token whose two largest logits lie within rounding " \
                   "(~1e-6 relative) of each other may flip; 1e-3 allows one in a thousand"
#define WHY_ATTN "attention probabilities from fp32 scores (q.k of fp32 activations: ~1e-6 relative, ~2e-5 of a " \
                 "score of 20), reduced in double: entropies (nats), probabilities and cosines move by about " \
                 "as much (4e-7 at most on SmolLM2-135M, fp32 against fp64); absolute, as they sit near 0 or 1"
#define WHY_OVER_MEDIAN "divides by the median or smallest eigenvalue, which is round-off when the embedding " \
                        "is rank-deficient (vocab - 1 below d_model or d_model / 2, e.g. bytes at d_model " \
                        "768): fp32 and fp64 then disagree arbitrarily; the eigenvalues themselves are compared"

const sp_tolerance sp_tolerances[] = {
    /* similarity */
    KEY("similarity", "tokens", 0, 0, WHY_EXACT),
    KEY_NOT("similarity", "block_influence_min_block", WHY_ARGEXT),
    ARR_ABS("similarity", "*", 1e-4, 0, WHY_COS),
    KEY_ABS("similarity", "*", 1e-4, 0, WHY_COS),
    /* cka */
    KEY("cka", "tokens", 0, 0, WHY_EXACT),
    KEY_NOT("cka", "passes", "how many passes the layer pairs took (--max-memory-gib, --cka-pairs-per-pass), not a "
                             "measurement: the values are the same"),
    ARR("cka", "hsic*", 1e-4, 1e-4, "HSIC from fp32 cross-product moments (~1e-6 of the largest), in activation^4"),
    ARR_ABS("cka", "cka*", 1e-4, 0, "CKA in [0, 1] from the same moments: absolute, as for cosines"),
    KEY_ABS("cka", "*", 1e-4, 0, "CKA in [0, 1] from the same moments: absolute, as for cosines"),
    /* growth */
    KEY_NOT("growth", "*_layer", WHY_ARGEXT),
    KEY_NOT("growth", "token_norm_max_position", WHY_ARGEXT),
    ARR_NOT("growth", "token_norm_max_position", WHY_ARGEXT),
    ARR("growth", "top1_over_median", 0, 2e-4, "a ratio of two activation statistics: twice their error"),
    ARR("growth", "token_norm_max_over_median", 0, 2e-4, "a ratio of two activation statistics: twice their error"),
    KEY("growth", "*_over_*", 0, 2e-4, "a ratio of two activation statistics: twice their error"),
    ARR("growth", "*", 0, 1e-4, WHY_ACT),
    KEY("growth", "*", 0, 1e-4, WHY_ACT),
    /* token_uniformity */
    KEY("token_uniformity", "sequences", 0, 0, WHY_EXACT),
    KEY_NOT("token_uniformity", "*_layer", WHY_ARGEXT),
    ARR_ABS("token_uniformity", "mean_pairwise_cosine", 1e-4, 0, WHY_COS),
    KEY_ABS("token_uniformity", "cosine_*", 1e-4, 0, WHY_COS),
    ARR_ABS("token_uniformity", "relative_residual", 1e-5, 1e-4, WHY_RESIDUAL),
    KEY_ABS("token_uniformity", "residual_*", 1e-5, 1e-4, WHY_RESIDUAL),
    /* presums */
    ARR("presums", "*", 0, 1e-4, WHY_ACT),
    KEY("presums", "*", 0, 1e-4, WHY_ACT),
    /* hidden_spectra and ffn_spectra */
    ARR("*_spectra", "n_tokens", 0, 0, WHY_EXACT),
    ARR("*_spectra", "dim", 0, 0, WHY_EXACT),
    ARR("*_spectra", "eigenvalues", 1e-4, 0, WHY_EIG),
    ARR_ABS("*_spectra", "entropy", 1e-3, 0, WHY_ENTROPY),
    ARR("*_spectra", "soft_rank", 0, 1e-3, WHY_ENTROPY " (soft rank = exp(entropy) / D: relative = absolute)"),
    ARR("*_spectra", "hard_rank", 0, 1e-4, WHY_HARD),
    ARR("*_spectra", "*", 0, 1e-4, "sums of the eigenvalues or of their squares: as precise as the moments"),
    KEY("*_spectra", "n_tokens", 0, 0, WHY_EXACT),
    KEY("*_spectra", "dim", 0, 0, WHY_EXACT),
    KEY("*_spectra", "n_below_10d", 0, 0, WHY_EXACT),
    KEY("*_spectra", "hard_rank_*", 0, 1e-4, WHY_HARD),
    KEY("*_spectra", "*", 0, 1e-3, WHY_ENTROPY " (soft ranks, and edr = 100 mean hard / soft)"),
    /* logit_lens */
    KEY("logit_lens", "tokens", 0, 0, WHY_EXACT),
    KEY("logit_lens", "targets", 0, 0, WHY_EXACT),
    KEY_NOT("logit_lens", "*_layer", WHY_ARGEXT),
    ARR("logit_lens", "loss", 0, 1e-5, WHY_LOSS),
    KEY("logit_lens", "loss_final", 0, 1e-5, WHY_LOSS),
    KEY_ABS("logit_lens", "loss_*", 2e-4, 0, WHY_PRUNE),
    ARR_ABS("logit_lens", "kl", 1e-5, 1e-3, WHY_KL),
    KEY_ABS("logit_lens", "kl_*", 1e-5, 1e-3, WHY_KL),
    ARR_ABS("logit_lens", "*", 1e-3, 0, WHY_ARGMAX),
    KEY_ABS("logit_lens", "*", 1e-3, 0, WHY_ARGMAX),
    /* attention */
    KEY("attention", "queries", 0, 0, WHY_EXACT),
    KEY_NOT("attention", "*_block", WHY_ARGEXT),
    KEY_NOT("attention", "*_head", WHY_ARGEXT),
    ARR("attention", "distance", 1e-4, 1e-4, WHY_ATTN " (positions: judged against the largest)"),
    KEY("attention", "distance_mean", 0, 1e-4, WHY_ATTN),
    ARR("attention", "max_logit", 1e-4, 1e-4, "the largest fp32 score: as precise as the activations"),
    KEY("attention", "max_logit", 0, 1e-4, "the largest fp32 score: as precise as the activations"),
    ARR_ABS("attention", "*", 1e-4, 0, WHY_ATTN),
    KEY_ABS("attention", "*", 1e-4, 0, WHY_ATTN),
    /* grad_norms */
    ARR("grad_norms", "tensor_layer", 0, 0, WHY_EXACT),
    ARR("grad_norms", "tensor_role", 0, 0, WHY_EXACT),
    ARR("grad_norms", "*", 1e-4, 1e-3, WHY_GRAD),
    KEY_NOT("grad_norms", "n_batches", WHY_SPLIT),
    KEY("grad_norms", "loss", 0, 1e-5, WHY_LOSS),
    KEY("grad_norms", "*", 0, 1e-3, WHY_GRAD " (ratios of two norms: their errors add)"),
    /* jacobian */
    ARR_NOT("jacobian", "*_iters", WHY_ITERS),
    ARR("jacobian", "token_positions", 0, 0, WHY_EXACT),
    ARR("jacobian", "sigma_max", 0, 1e-3, WHY_POWER),
    ARR("jacobian", "e2e_sigma_max", 0, 5e-3, WHY_CHAIN),
    ARR("jacobian", "topk", 1e-3, 1e-3, WHY_POWER),
    ARR("jacobian", "token_*", 1e-4, 1e-4, WHY_TOKEN),
    ARR("jacobian", "*_norm", 0, 1e-4, WHY_WEIGHT_PROD),
    ARR("jacobian", "*", 0, 1e-4, "sigma_a, sigma_z: fp32 activation statistics; the bound combines them with "
                                  "the weight-product norms"),
    KEY_NOT("jacobian", "not_converged", WHY_ITERS),
    KEY("jacobian", "seq_len", 0, 0, WHY_EXACT),
    KEY("jacobian", "n_token_positions", 0, 0, WHY_EXACT),
    KEY("jacobian", "sigma_max_*", 0, 1e-3, WHY_POWER),
    KEY("jacobian", "e2e_*", 0, 5e-3, WHY_CHAIN),
    KEY("jacobian", "bound_over_sigma_max_mean", 0, 1e-3, WHY_POWER " (the bound is divided by sigma_max)"),
    KEY("jacobian", "*", 0, 1e-4, WHY_TOKEN "; sigma_a, sigma_z: fp32 activation statistics"),
    /* weights */
    ARR("weights", "kappa_inf", 0, 0, WHY_EXACT),
    ARR("weights", "*", 1e-9, 1e-6, WHY_WEIGHT_SVD),
    KEY("weights", "n_kappa_inf", 0, 0, WHY_EXACT),
    KEY("weights", "*", 0, 1e-6, WHY_WEIGHT_SVD),
    /* embed_spectrum */
    ARR("embed_spectrum", "normalized_rank", 0, 0, WHY_EXACT),
    ARR_NOT("embed_spectrum", "*_over_median", WHY_OVER_MEDIAN),
    ARR("embed_spectrum", "*", 1e-4, 0, WHY_EIG),
    KEY("embed_spectrum", "tied", 0, 0, WHY_EXACT),
    KEY("embed_spectrum", "centered", 0, 0, WHY_EXACT),
    KEY("embed_spectrum", "*_soft_rank", 0, 1e-3, WHY_ENTROPY),
    KEY("embed_spectrum", "*_hard_rank", 0, 1e-4, WHY_HARD),
    KEY_NOT("embed_spectrum", "*", WHY_OVER_MEDIAN),
    /* pruning */
    ARR_ABS("pruning", "*", 2e-4, 0, WHY_PRUNE),
    KEY_NOT("pruning", "n_batches", WHY_SPLIT),
    KEY_NOT("pruning", "delta_max_block", WHY_ARGEXT),
    KEY_ABS("pruning", "*", 2e-4, 0, WHY_PRUNE),
    /* summary groups of the run */
    KEY("run", "n_seqs", 0, 0, WHY_EXACT),
    KEY("run", "seq_len", 0, 0, WHY_EXACT),
    KEY("run", "n_tokens", 0, 0, WHY_EXACT),
    KEY_NOT("run", "*", "stage timings, memory peaks and the batch size: how and where the run went, not what it "
                         "measured"),
    KEY("train", "*", 0, 0, "the checkpoint's training state, read from the file: must be equal"),
    /* catch-alls, last: a metric no entry above names (a new analyzer's); sp_tolerance_is_fallback */
    ARR("*", "*", 1e-4, 1e-3, "no entry for this array: a generic fp32 allowance (add one to the table)"),
    KEY("*", "*", 0, 1e-3, "no entry for this key: a generic fp32 allowance (add one to the table)"),
};
const int sp_n_tolerances = (int)SP_ARRAY_LEN(sp_tolerances);

int sp_tolerance_is_fallback(const sp_tolerance *t) { return strcmp(t->analyzer, "*") == 0; }

const sp_tolerance *sp_tolerance_find(sp_agree_kind kind, const char *analyzer, const char *name)
{
    /* the Y stream of a siamese report has the X stream's tolerances */
    char base[256];
    size_t n = strlen(name);
    snprintf(base, sizeof base, "%.*s", (int)(n > 2 && strcmp(name + n - 2, "_y") == 0 ? n - 2 : n), name);
    for (int i = 0; i < sp_n_tolerances; i++) {
        const sp_tolerance *t = &sp_tolerances[i];
        if (t->kind == kind && fnmatch(t->analyzer, analyzer, 0) == 0 && fnmatch(t->pattern, base, 0) == 0)
            return t;
    }
    return NULL; /* unreachable: the catch-alls match everything */
}

/* Same value, or NaN with NaN, or Inf of the same sign (x or y non-finite). */
static int nonfinite_match(double x, double y) { return isnan(x) ? isnan(y) : x == y; }

void sp_agreement_check(const double *a, const double *b, size_t n, double atol, double rtol, int absolute,
                        sp_agreement *out)
{
    *out = (sp_agreement){.worst = n > 0 ? 0 : -1};
    double scale = 0;
    for (size_t i = 0; !absolute && i < n; i++)
        if (isfinite(a[i]))
            scale = fmax(scale, fabs(a[i]));
    out->abs_term = atol * (absolute ? 1 : scale);
    double worst_excess = -1;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) {
            if (!nonfinite_match(a[i], b[i]) && out->n_nonfinite++ == 0)
                out->worst = (int64_t)i;
            continue;
        }
        double diff = fabs(b[i] - a[i]), allowed = out->abs_term + rtol * fabs(a[i]);
        out->max_abs_diff = fmax(out->max_abs_diff, diff);
        out->max_rel_diff = fmax(out->max_rel_diff, a[i] != 0 ? diff / fabs(a[i]) : diff > 0 ? INFINITY : 0);
        out->n_outside += diff > allowed;
        double excess = allowed > 0 ? diff / allowed : diff > 0 ? INFINITY : 0;
        if (out->n_nonfinite == 0 && excess > worst_excess) {
            worst_excess = excess;
            out->worst = (int64_t)i;
        }
    }
}

int sp_agreement_pass(const sp_agreement *g) { return g->n_outside == 0 && g->n_nonfinite == 0; }

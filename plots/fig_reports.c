/* plots/fig_reports.c: the figures of per-layer report arrays drawn with the `panels` template:
 * cos-distance, spectral-util, embed-eigs, cond, jac, growth, token-uniformity, logit-lens, prune,
 * drift. */
#include <math.h>
#include <stdio.h>

#include "plots/figure.h"

#define MAX_PANELS 3
/* more runs than the palette holds get no bar charts: their bars and labels could not be told apart */
#define MAX_BAR_RUNS SP_PLOT_PALETTE

typedef struct {
    sp_plot_span span[MAX_PANELS];
} spans;

static void spans_init(spans *s)
{
    for (int p = 0; p < MAX_PANELS; p++)
        sp_plot_span_init(&s->span[p]);
}

static double positive_or_nan(double v) { return v > 0 ? v : NAN; }

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- cos-distance: S(k) with its std band (paper Fig. 6) ---- */

static sp_status cos_distance_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    (void)acc;
    const int64_t n = min64(a[0].shape[0], a[1].shape[0]);
    sp_plot_block(c, "%s: distance k, S(k) = mean over i of cos(h_i, h_i+k), its population std over i", s->title);
    for (int64_t k = 0; k < n; k++)
        sp_plot_row(c, 3, (double[]){(double)(k + 1), a[0].data[k], a[1].data[k]});
    return SP_OK;
}

sp_status sp_fig_cos_distance(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"cosine_by_distance", 1}, {"cosine_by_distance_std", 1}};
    SP_TRY(sp_plot_each_report(c, "similarity", 2, m, cos_distance_run, NULL));
    const sp_plot_panel p = {"", "layer distance k", "mean cosine similarity S(k)", 0, 2, 0, 0, 3, 0};
    sp_plot_var_panels(c, "cosine similarity by layer distance (band: std over layer pairs)", 1, 0, 1, &p);
    return SP_OK;
}

/* ---- spectral-util: hard rank, soft rank and EDR of the FFN latents (paper Fig. 8) ---- */

typedef struct {
    double mean[MAX_PANELS][MAX_BAR_RUNS]; /* per run */
    spans sp;
} util_acc;

static sp_status spectral_util_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    util_acc *u = acc;
    const int64_t n = min64(a[0].shape[0], a[1].shape[0]);
    const int run = c->n_runs - 1;
    double sum[MAX_PANELS] = {0};
    sp_plot_block(c, "%s: block, hard rank, soft rank (normalized by d_ff), EDR = 100 hard / soft", s->title);
    for (int64_t l = 0; l < n; l++) {
        double v[4] = {(double)l, a[0].data[l], a[1].data[l], 100.0 * a[0].data[l] / a[1].data[l]};
        sp_plot_row(c, 4, v);
        for (int p = 0; p < MAX_PANELS; p++) {
            sum[p] += v[p + 1];
            sp_plot_span_add(&u->sp.span[p], 1, &v[p + 1]);
        }
    }
    for (int p = 0; p < MAX_PANELS && run < MAX_BAR_RUNS; p++)
        u->mean[p][run] = sum[p] / (double)n;
    return SP_OK;
}

/* The bar block of the `panels` template: run number, then one value per panel. */
static void write_bars(sp_plot_ctx *c, const char *what, int n_panels, double (*mean)[MAX_BAR_RUNS])
{
    sp_plot_block(c, "bars: run number, then %s", what);
    for (int r = 0; r < c->n_runs; r++) {
        double v[1 + MAX_PANELS] = {r + 1};
        for (int p = 0; p < n_panels; p++)
            v[p + 1] = mean[p][r];
        sp_plot_row(c, 1 + n_panels, v);
    }
}

sp_status sp_fig_spectral_util(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"hard_rank", 1}, {"soft_rank", 1}};
    util_acc u;
    spans_init(&u.sp);
    SP_TRY(sp_plot_each_report(c, "ffn_spectra", 2, m, spectral_util_run, &u));
    if (c->skip[0])
        return SP_OK;
    const int bars = c->n_runs <= MAX_BAR_RUNS;
    if (bars)
        write_bars(c, "the mean over blocks of hard rank, soft rank, EDR", 3, u.mean);
    const sp_plot_panel p[3] = {
        {"hard spectral rank", "", "hard rank / d_ff", 0, 2, 0, 0, 0, sp_plot_span_decades(&u.sp.span[0])},
        {"soft spectral rank", "", "soft rank / d_ff", 0, 3, 0, 0, 0, sp_plot_span_decades(&u.sp.span[1])},
        {"effective dimension ratio", "block", "EDR", 0, 4, 0, 0, 0, sp_plot_span_decades(&u.sp.span[2])},
    };
    sp_plot_var_panels(c, "spectral utilization of the FFN latents", 1, bars, 3, p);
    return SP_OK;
}

/* ---- embed-eigs: token-embedding eigenvalues over their median (paper Fig. 9) ---- */

static sp_status embed_eigs_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    (void)acc;
    const int64_t n = min64(a[0].shape[0], a[1].shape[0]);
    sp_plot_block(c, "%s: normalized rank i/d, eigenvalue / median (non-positive: missing)", s->title);
    for (int64_t i = 0; i < n; i++)
        sp_plot_row(c, 2, (double[]){a[0].data[i], positive_or_nan(a[1].data[i])});
    return SP_OK;
}

sp_status sp_fig_embed_eigs(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"normalized_rank", 1}, {"tok_eigvals_over_median", 1}};
    SP_TRY(sp_plot_each_report(c, "embed_spectrum", 2, m, embed_eigs_run, NULL));
    const sp_plot_panel p = {"", "normalized rank i / d_model", "eigenvalue / median", 0, 2, 0, 0, 0, 1};
    sp_plot_var_panels(c, "eigenvalues of the token-embedding covariance, over their median", 1, 0, 1, &p);
    return SP_OK;
}

/* ---- cond: condition numbers of W_1 and W_2 by block, and their means (paper Fig. 10) ---- */

enum { KAPPA_W1_COL = 4, KAPPA_W2_COL = 5, KAPPA_N_MATRICES = 7 }; /* analyzers/weights.c columns */

typedef struct {
    double mean[MAX_PANELS][MAX_BAR_RUNS];
    int n_inf;
    int any_mean;
} cond_acc;

static sp_status cond_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    cond_acc *k = acc;
    if (a[0].shape[1] != KAPPA_N_MATRICES)
        return sp_error(SP_ERR_INPUT, "%s: /metrics/weights/kappa: %lld columns, expected %d (wq..w3)", s->path,
                        (long long)a[0].shape[1], KAPPA_N_MATRICES);
    const int run = c->n_runs - 1;
    const int cols[2] = {KAPPA_W1_COL, KAPPA_W2_COL};
    double sum[2] = {0};
    int n[2] = {0};
    sp_plot_block(c, "%s: block, kappa(W_1), kappa(W_2) (missing: +inf, sigma_min <= 1e-12 sigma_max)", s->title);
    for (int64_t l = 0; l < a[0].shape[0]; l++) {
        double v[3] = {(double)l};
        for (int m = 0; m < 2; m++) {
            const double kappa = a[0].data[l * KAPPA_N_MATRICES + cols[m]];
            v[m + 1] = positive_or_nan(kappa);
            k->n_inf += isinf(kappa) != 0;
            if (isfinite(kappa)) {
                sum[m] += kappa;
                n[m]++;
            }
        }
        sp_plot_row(c, 3, v);
    }
    for (int m = 0; m < 2 && run < MAX_BAR_RUNS; m++) {
        k->mean[m][run] = n[m] ? sum[m] / n[m] : NAN;
        k->any_mean |= n[m] > 0;
    }
    return SP_OK;
}

sp_status sp_fig_cond(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"kappa", 2}};
    cond_acc k = {.n_inf = 0};
    SP_TRY(sp_plot_each_report(c, "weights", 1, m, cond_run, &k));
    if (c->skip[0])
        return SP_OK;
    const int bars = k.any_mean && c->n_runs <= MAX_BAR_RUNS;
    if (bars)
        write_bars(c, "the mean over blocks (finite values) of kappa(W_1), kappa(W_2)", 2, k.mean);
    char title[128];
    snprintf(title, sizeof title, "condition numbers of the FFN weights%s",
             k.n_inf ? " (+inf values, sigma_min ~ 0, not drawn)" : "");
    const sp_plot_panel p[2] = {
        {"W_1 (up projection)", "", "condition number", 0, 2, 0, 0, 0, 1},
        {"W_2 (down projection)", "block", "condition number", 0, 3, 0, 0, 0, 1},
    };
    sp_plot_var_panels(c, title, 1, bars, 2, p);
    return SP_OK;
}

/* ---- jac: block Jacobian spectral norm and the SpanNorm bound (paper appendix A) ---- */

static sp_status jac_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    const int64_t n = min64(a[0].shape[0], a[1].shape[0]);
    sp_plot_block(c, "%s: block, sigma_max(dx_{l+1}/dx_l), the bound (missing: no pre-normalization sums)", s->title);
    for (int64_t l = 0; l < n; l++) {
        double v[3] = {(double)l, a[0].data[l], a[1].data[l]};
        sp_plot_row(c, 3, v);
        sp_plot_span_add(acc, 2, v + 1);
    }
    return SP_OK;
}

sp_status sp_fig_jac(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"sigma_max", 1}, {"bound", 1}};
    sp_plot_span span;
    sp_plot_span_init(&span);
    SP_TRY(sp_plot_each_report(c, "jacobian", 2, m, jac_run, &span));
    const sp_plot_panel p = {"", "block", "spectral norm", 0, 2, 0, 3, 0, sp_plot_span_decades(&span)};
    sp_plot_var_panels(c, "block Jacobian spectral norm (solid) and the SpanNorm bound (dashed)", 1, 0, 1, &p);
    return SP_OK;
}

/* ---- grad-blocks: the loss gradient's FFN norm by block, from a report (grad_norms) ---- */

static sp_status grad_blocks_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    sp_plot_block(c, "%s: block, FFN gradient norm sqrt(||dW_1||^2 + ||dW_2||^2 (+ ||dW_3||^2)) on evaluation batches",
                  s->title);
    for (int64_t l = 0; l < a[0].shape[0]; l++) {
        double v[2] = {(double)l, a[0].data[l]};
        sp_plot_row(c, 2, v);
        sp_plot_span_add(acc, 1, v + 1);
    }
    return SP_OK;
}

sp_status sp_fig_grad_blocks(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"ffn", 1}};
    sp_plot_span span;
    sp_plot_span_init(&span);
    SP_TRY(sp_plot_each_report(c, "grad_norms", 1, m, grad_blocks_run, &span));
    const sp_plot_panel p = {"", "block", "FFN gradient norm", 0, 2, 0, 0, 0, sp_plot_span_decades(&span)};
    sp_plot_var_panels(c, "FFN gradient norm of the loss by block (a checkpoint's report)", 1, 0, 1, &p);
    return SP_OK;
}

/* ---- growth: hidden-state RMS and massive activations by layer (Peri-LN, SiameseNorm) ---- */

static sp_status growth_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    spans *sp = acc;
    const int64_t n = min64(a[0].shape[0], a[1].shape[0]);
    sp_plot_block(c, "%s: layer (h_0 = block-0 input), RMS of h_l, top-1 |h| / median |h|", s->title);
    for (int64_t l = 0; l < n; l++) {
        double v[3] = {(double)l, a[0].data[l], a[1].data[l]};
        sp_plot_row(c, 3, v);
        sp_plot_span_add(&sp->span[0], 1, v + 1);
        sp_plot_span_add(&sp->span[1], 1, v + 2);
    }
    return SP_OK;
}

sp_status sp_fig_growth(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"rms", 1}, {"top1_over_median", 1}};
    spans sp;
    spans_init(&sp);
    SP_TRY(sp_plot_each_report(c, "growth", 2, m, growth_run, &sp));
    const sp_plot_panel p[2] = {
        {"RMS of the hidden state", "layer", "RMS (activation units)", 0, 2, 0, 0, 0, sp_plot_span_decades(&sp.span[0])},
        {"largest |h| over the median |h|", "layer", "top-1 / median", 0, 3, 0, 0, 0, sp_plot_span_decades(&sp.span[1])},
    };
    sp_plot_var_panels(c, "hidden-state growth by layer", 1, 0, 2, p);
    return SP_OK;
}

/* ---- token-uniformity: rank collapse across the tokens of a sequence (Dong et al. 2021) ---- */

static sp_status token_uniformity_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    spans *sp = acc;
    const int64_t n = min64(a[0].shape[0], a[1].shape[0]);
    sp_plot_block(c, "%s: layer (h_0 = block-0 input), mean pairwise cosine of a sequence's tokens, "
                     "||H - 1 mean(H)^T|| / ||H||", s->title);
    for (int64_t l = 0; l < n; l++) {
        const double v[3] = {(double)l, a[0].data[l], a[1].data[l]}, residual = positive_or_nan(v[2]);
        sp_plot_row(c, 3, v);
        sp_plot_span_add(&sp->span[1], 1, &residual); /* a collapsed layer's 0 does not decide the axis */
    }
    return SP_OK;
}

sp_status sp_fig_token_uniformity(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"mean_pairwise_cosine", 1}, {"relative_residual", 1}};
    spans sp;
    spans_init(&sp);
    SP_TRY(sp_plot_each_report(c, "token_uniformity", 2, m, token_uniformity_run, &sp));
    const sp_plot_panel p[2] = {
        {"mean pairwise cosine of the tokens", "layer", "mean pairwise cosine", 0, 2, 0, 0, 0, 0},
        {"relative residual (0: rank collapse)", "layer", "||H - 1 mean(H)^T|| / ||H||", 0,
         3, 0, 0, 0, sp_plot_span_decades(&sp.span[1])},
    };
    sp_plot_var_panels(c, "token uniformity by layer", 1, 0, 2, p);
    return SP_OK;
}

/* ---- logit-lens: every layer output decoded through the final norm and head ---- */

static sp_status logit_lens_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    spans *sp = acc;
    const int64_t n = min64(min64(a[0].shape[0], a[1].shape[0]), min64(a[2].shape[0], a[3].shape[0]));
    sp_plot_block(c, "%s: layer (h_0 = block-0 input), loss (nats), top-1 accuracy, argmax agreement with the "
                     "output, KL(p_L || p_l) (nats)", s->title);
    for (int64_t l = 0; l < n; l++) {
        const double v[5] = {(double)l, a[0].data[l], a[1].data[l], a[2].data[l], a[3].data[l]};
        const double kl = positive_or_nan(v[4]); /* the last layer's 0 is left off a log axis */
        sp_plot_row(c, 5, v);
        sp_plot_span_add(&sp->span[2], 1, &kl);
    }
    return SP_OK;
}

sp_status sp_fig_logit_lens(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"loss", 1}, {"accuracy", 1}, {"agreement", 1}, {"kl", 1}};
    spans sp;
    spans_init(&sp);
    SP_TRY(sp_plot_each_report(c, "logit_lens", 4, m, logit_lens_run, &sp));
    const sp_plot_panel p[3] = {
        {"next-token loss", "layer", "loss (nats/token)", 0, 2, 0, 0, 0, 0},
        {"top-1 accuracy (dashed: agreement)", "layer", "share of tokens", 0, 3, 0, 4, 0, 0},
        {"KL(p_L || p_l)", "layer", "KL (nats)", 0, 5, 0, 0, 0,
         sp_plot_span_decades(&sp.span[2])},
    };
    sp_plot_var_panels(c, "logit lens: each layer decoded through the final norm and head", 1, 0, 3, p);
    return SP_OK;
}

/* ---- prune: loss increase when block l, or the last k blocks, become the identity ---- */

static sp_status prune_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    (void)acc;
    sp_plot_block(c, "%s: block l skipped, evaluation loss increase (nats/token)", s->title);
    for (int64_t l = 0; l < a[0].shape[0]; l++)
        sp_plot_row(c, 2, (double[]){(double)l, a[0].data[l]});
    sp_plot_block(c, "%s: last k blocks skipped, evaluation loss increase (nats/token)", s->title);
    for (int64_t k = 0; k < a[1].shape[0]; k++)
        sp_plot_row(c, 2, (double[]){(double)(k + 1), a[1].data[k]});
    return SP_OK;
}

sp_status sp_fig_prune(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"delta_skip_block", 1}, {"delta_drop_last", 1}};
    SP_TRY(sp_plot_each_report(c, "pruning", 2, m, prune_run, NULL));
    const sp_plot_panel p[2] = {
        {"removing block l", "block l", "loss increase (nats/token)", 0, 2, 0, 0, 0, 0},
        {"removing the last k blocks", "k", "loss increase (nats/token)", 1, 2, 0, 0, 0, 0},
    };
    sp_plot_var_panels(c, "layer-pruning sensitivity", 2, 0, 2, p);
    return SP_OK;
}

/* ---- drift: how a model departs from its reference by layer (spanprobe drift) ---- */

static sp_status drift_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    spans *sp = acc;
    const int64_t n = min64(min64(a[0].shape[0], a[1].shape[0]), a[2].shape[0]);
    sp_plot_block(c, "%s: layer (h_0 = block-0 input), ||h - h_ref|| / ||h_ref||, 1 - cosine, 1 - CKA", s->title);
    for (int64_t l = 0; l < n; l++) {
        const double v[4] = {(double)l, a[0].data[l], 1 - a[1].data[l], 1 - a[2].data[l]};
        for (int p = 0; p < 3; p++) { /* zero drift (an untouched embedding) does not decide the axis */
            const double pos = positive_or_nan(v[1 + p]);
            sp_plot_span_add(&sp->span[p], 1, &pos);
        }
        sp_plot_row(c, 4, v);
    }
    return SP_OK;
}

sp_status sp_fig_drift(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"rel_error", 1}, {"cosine", 1}, {"cka", 1}};
    spans sp;
    spans_init(&sp);
    SP_TRY(sp_plot_each_report(c, "drift", 3, m, drift_run, &sp));
    const sp_plot_panel p[3] = {
        {"relative error of the hidden state", "layer", "||h - h_ref|| / ||h_ref||", 0, 2, 0, 0, 0,
         sp_plot_span_decades(&sp.span[0])},
        {"1 - mean cosine to the reference", "layer", "1 - cos(h, h_ref)", 0, 3, 0, 0, 0,
         sp_plot_span_decades(&sp.span[1])},
        {"1 - linear CKA to the reference", "layer", "1 - CKA(H, H_ref)", 0, 4, 0, 0, 0,
         sp_plot_span_decades(&sp.span[2])},
    };
    sp_plot_var_panels(c, "drift from the reference model by layer", 1, 0, 3, p);
    return SP_OK;
}

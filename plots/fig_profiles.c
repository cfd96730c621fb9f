/* plots/fig_profiles.c: figures of one or two arrays of one analyzer against the layer or block,
 * one panel per array, one line per run, drawn with the `panels` template from a table:
 * hidden-spectra, presums, block-influence, curvature. A panel's y axis is logarithmic where its values span
 * decades. */
#include <math.h>

#include "plots/figure.h"

#define MAX_ARRAYS 2

typedef struct {
    const char *analyzer;
    int n;                                  /* arrays, one panel each */
    sp_plot_metric metrics[MAX_ARRAYS];
    const char *index;                      /* "layer" or "block" */
    const char *columns;                    /* what the data block's columns after the index hold */
    const char *title;
    const char *panel_titles[MAX_ARRAYS];
    const char *ylabels[MAX_ARRAYS];
} profile;

typedef struct {
    const profile *p;
    sp_plot_span span[MAX_ARRAYS];
} profile_acc;

static sp_status profile_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc_ptr)
{
    profile_acc *acc = acc_ptr;
    const profile *p = acc->p;
    int64_t n = a[0].shape[0];
    for (int k = 1; k < p->n; k++)
        n = a[k].shape[0] < n ? a[k].shape[0] : n;
    sp_plot_block(c, "%s: %s, %s", s->title, p->index, p->columns);
    for (int64_t i = 0; i < n; i++) {
        double v[1 + MAX_ARRAYS] = {(double)i};
        for (int k = 0; k < p->n; k++) {
            v[1 + k] = a[k].data[i];
            sp_plot_span_add(&acc->span[k], 1, &v[1 + k]);
        }
        sp_plot_row(c, 1 + p->n, v);
    }
    return SP_OK;
}

static sp_status draw_profile(sp_plot_ctx *c, const profile *p)
{
    profile_acc acc = {.p = p};
    for (int k = 0; k < p->n; k++)
        sp_plot_span_init(&acc.span[k]);
    SP_TRY(sp_plot_each_report(c, p->analyzer, p->n, p->metrics, profile_run, &acc));
    sp_plot_panel panels[MAX_ARRAYS];
    for (int k = 0; k < p->n; k++)
        panels[k] = (sp_plot_panel){p->panel_titles[k], p->index, p->ylabels[k], 0, 2 + k, 0, 0, 0,
                                    sp_plot_span_decades(&acc.span[k])};
    sp_plot_var_panels(c, p->title, 1, 0, p->n, panels);
    return SP_OK;
}

sp_status sp_fig_hidden_spectra(sp_plot_ctx *c)
{
    static const profile p = {
        "hidden_spectra", 2, {{"soft_rank", 1}, {"hard_rank", 1}}, "layer",
        "soft rank exp(H) / d, hard rank (participation ratio) / d of the hidden-state covariance",
        "how much of its width each layer's hidden state uses",
        {"soft rank (Shannon effective rank / d)", "hard rank (participation ratio / d)"},
        {"soft rank / d", "hard rank / d"}};
    return draw_profile(c, &p);
}

sp_status sp_fig_presums(sp_plot_ctx *c)
{
    static const profile p = {
        "presums", 2, {{"sigma_a", 1}, {"sigma_z", 1}}, "block",
        "sigma of the sum before the attention norm, sigma of the sum before the FFN norm",
        "the scale each norm divides the residual sum by (pre-normalization sums)",
        {"before the attention norm", "before the FFN norm"},
        {"sigma (activation units)", "sigma (activation units)"}};
    return draw_profile(c, &p);
}

sp_status sp_fig_block_influence(sp_plot_ctx *c)
{
    static const profile p = {"similarity", 1, {{"block_influence", 1}}, "block",
                              "block influence 1 - cos(h_l, h_l+1)",
                              "how much each block changes the hidden state (1 - cosine of its input and output)",
                              {""}, {"1 - cos(h_l, h_l+1)"}};
    return draw_profile(c, &p);
}

sp_status sp_fig_curvature(sp_plot_ctx *c)
{
    static const profile p = {
        "curvature", 2, {{"lambda_max", 1}, {"trace_per_param", 1}}, "block",
        "dominant eigenvalue of H_ll, Hutchinson trace of H_ll / parameters",
        "loss curvature of each block's parameters (exact Hessian-vector products)",
        {"top eigenvalue of the block Hessian", "trace / parameters (mean eigenvalue)"},
        {"lambda_max", "tr(H_ll) / n_l"}};
    return draw_profile(c, &p);
}

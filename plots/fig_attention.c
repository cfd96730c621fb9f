/* plots/fig_attention.c: the attention figure: per block, how the heads attend (analyzer
 * "attention", docs/metrics.md): the entropy over the uniform one (entropy collapse), the mass on
 * the first position (attention sinks), the largest score, and head redundancy. The [block, head]
 * arrays are drawn as the mean over heads (solid) and the most extreme head (dashed), so a single
 * collapsed or sink head shows without hiding the rest. */
#include <math.h>

#include "plots/figure.h"

/* Mean, smallest and largest of the finite values of row[n] (NaN when none is finite). */
static void row_range(const double *row, int64_t n, double *mean, double *lo, double *hi)
{
    double sum = 0;
    int count = 0;
    *lo = *hi = NAN;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(row[i]))
            continue;
        sum += row[i];
        *lo = count == 0 || row[i] < *lo ? row[i] : *lo;
        *hi = count == 0 || row[i] > *hi ? row[i] : *hi;
        count++;
    }
    *mean = count ? sum / count : NAN;
}

static sp_status attention_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    sp_plot_span *logit_span = acc;
    int64_t n = a[3].shape[0];
    for (int k = 0; k < 3; k++)
        n = a[k].shape[0] < n ? a[k].shape[0] : n;
    sp_plot_block(c, "%s: block, entropy / ln(visible keys) mean over heads and lowest head, sink mass mean over "
                     "heads and highest head, largest score over heads, head redundancy", s->title);
    for (int64_t l = 0; l < n; l++) {
        double v[7] = {(double)l}, unused;
        row_range(a[0].data + l * a[0].shape[1], a[0].shape[1], &v[1], &v[2], &unused);
        row_range(a[1].data + l * a[1].shape[1], a[1].shape[1], &v[3], &unused, &v[4]);
        row_range(a[2].data + l * a[2].shape[1], a[2].shape[1], &unused, &unused, &v[5]);
        v[6] = a[3].data[l];
        const double logit = v[5] > 0 ? v[5] : NAN; /* a log axis only for positive scores */
        sp_plot_span_add(logit_span, 1, &logit);
        sp_plot_row(c, 7, v);
    }
    return SP_OK;
}

sp_status sp_fig_attention(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"entropy_normalized", 2}, {"sink_mass", 2}, {"max_logit", 2}, {"redundancy", 1}};
    sp_plot_span logit_span;
    sp_plot_span_init(&logit_span);
    SP_TRY(sp_plot_each_report(c, "attention", 4, m, attention_run, &logit_span));
    const sp_plot_panel p[4] = {
        {"normalized entropy", "block", "H / ln(visible keys); dashed: lowest head", 0, 2, 0, 3, 0, 0},
        {"sink mass", "block", "P on position 0; dashed: highest head", 0, 4, 0, 5, 0, 0},
        {"largest score", "block", "max attention logit", 0, 6, 0, 0, 0, sp_plot_span_decades(&logit_span)},
        {"head redundancy", "block", "mean cosine of heads' maps", 0, 7, 0, 0, 0, 0},
    };
    sp_plot_var_panels(c, "attention by block: entropy collapse, sinks, score growth, redundant heads", 1, 0, 4, p);
    return SP_OK;
}

/* plots/fig_heatmaps.c: layer-by-layer matrices drawn with the `heatmap` template: cos-heatmap
 * (paper Fig. 5) and cka. */
#include <stdio.h>
#include <stdlib.h>

#include "plots/figure.h"

typedef struct {
    const char *what;
    double min;
    double *side; /* per run */
} heat_acc;

static sp_status heat_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    heat_acc *h = acc;
    const int64_t n = a[0].shape[0];
    if (a[0].shape[1] != n)
        return sp_error(SP_ERR_INPUT, "%s: %s: shape [%lld, %lld], expected a square [layer, layer] matrix", s->path,
                        h->what, (long long)n, (long long)a[0].shape[1]);
    h->side[c->n_runs - 1] = (double)n;
    sp_plot_block(c, "%s: %s; row i is layer i, column j layer j (h_0 = block-0 input)", s->title, h->what);
    for (int64_t i = 0; i < n; i++) {
        sp_plot_row(c, (int)n, a[0].data + i * n);
        for (int64_t j = 0; j < n; j++)
            h->min = a[0].data[i * n + j] < h->min ? a[0].data[i * n + j] : h->min;
    }
    return SP_OK;
}

/* A heatmap of /metrics/<analyzer>/<name>; colour range [0, 1], or [-1, 1] when signed values
 * below -0.01 occur and the quantity can be negative. */
static sp_status heatmap(sp_plot_ctx *c, const char *analyzer, const char *name, const char *title, const char *label,
                         int can_be_negative)
{
    const sp_plot_metric m[] = {{name, 2}};
    heat_acc h = {.what = name, .min = 0, .side = calloc((size_t)(c->in->n ? c->in->n : 1), sizeof(double))};
    if (!h.side)
        return sp_error(SP_ERR_NOMEM, "plot %s: out of memory", c->id);
    sp_status st = sp_plot_each_report(c, analyzer, 1, m, heat_run, &h);
    if (st == SP_OK && !c->skip[0]) {
        sp_plot_var_str(c, "heat_title", title);
        sp_plot_var_str(c, "heat_label", label);
        sp_plot_var_num(c, "cb_min", can_be_negative && h.min < -0.01 ? -1 : 0);
        sp_plot_var_num(c, "cb_max", 1);
        sp_plot_var_nums(c, "heat_side", c->n_runs, h.side);
        sp_plot_var_grid(c, c->n_runs);
    }
    free(h.side);
    return st;
}

sp_status sp_fig_cos_heatmap(sp_plot_ctx *c)
{
    return heatmap(c, "similarity", "cosine", "cosine similarity between layer outputs (mean over tokens)",
                   "cosine similarity", 1);
}

sp_status sp_fig_cka(sp_plot_ctx *c)
{
    return heatmap(c, "cka", "cka", "linear CKA between layer outputs", "CKA", 0);
}

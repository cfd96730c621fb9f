/* plots/fig_alpha.c: the `alpha` figure: the power-law exponent alpha of every block matrix by
 * block (report array weights/alpha, docs/metrics.md "weights"), a panel per matrix kind that any
 * report fitted, a line per run, over WeightWatcher's band 2 to 6 (plots/alpha.gp). */
#include <math.h>

#include "plots/figure.h"

#define N_KINDS 7 /* the columns of weights/alpha */
#define ALPHA_LOW 2.0  /* WeightWatcher's well-trained range (constants.py OVER_TRAINED_THRESH, */
#define ALPHA_HIGH 6.0 /* UNDER_TRAINED_THRESH) */

static const char *const kind_titles[N_KINDS] = {"W_Q", "W_K", "W_V", "W_O", "W_1", "W_2", "W_3"};

typedef struct {
    int fitted[N_KINDS]; /* some run has a finite alpha in this column */
    int64_t n_blocks;    /* the most blocks of any run */
} alpha_acc;

static sp_status alpha_run(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc)
{
    alpha_acc *k = acc;
    const int64_t cols = a[0].shape[1];
    sp_plot_block(c, "%s: block, then alpha of wq, wk, wv, wo, w1, w2, w3 (missing: absent or not fitted)", s->title);
    for (int64_t l = 0; l < a[0].shape[0]; l++) {
        double row[1 + N_KINDS] = {(double)l};
        for (int m = 0; m < N_KINDS; m++) {
            row[1 + m] = m < cols ? a[0].data[l * cols + m] : NAN;
            k->fitted[m] |= isfinite(row[1 + m]);
        }
        sp_plot_row(c, 1 + N_KINDS, row);
    }
    if (a[0].shape[0] > k->n_blocks)
        k->n_blocks = a[0].shape[0];
    return SP_OK;
}

sp_status sp_fig_alpha(sp_plot_ctx *c)
{
    static const sp_plot_metric m[] = {{"alpha", 2}};
    alpha_acc k = {.n_blocks = 0};
    SP_TRY(sp_plot_each_report(c, "weights", 1, m, alpha_run, &k));
    if (c->skip[0])
        return SP_OK;
    const char *titles[N_KINDS];
    double cols[N_KINDS];
    int n = 0;
    for (int kind = 0; kind < N_KINDS; kind++)
        if (k.fitted[kind]) {
            titles[n] = kind_titles[kind];
            cols[n++] = 2 + kind;
        }
    if (n == 0)
        return sp_plot_skip(c, "no report has a fitted alpha (weights/alpha is NaN throughout)");
    sp_plot_var_num(c, "n_kinds", n);
    sp_plot_var_strs(c, "kind_title", n, titles);
    sp_plot_var_nums(c, "kind_col", n, cols);
    sp_plot_var_num(c, "n_blocks", (double)k.n_blocks);
    sp_plot_var_num(c, "alpha_low", ALPHA_LOW);
    sp_plot_var_num(c, "alpha_high", ALPHA_HIGH);
    sp_plot_var_kind_grid(c, n);
    return SP_OK;
}

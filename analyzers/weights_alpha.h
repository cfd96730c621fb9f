/* analyzers/weights_alpha.h: the power-law exponents of the weights analyzer. For every block
 * matrix, WeightWatcher's default fit (analyzers/powerlaw.h) of the empirical spectral density of
 * W^T W, the eigenvalues lambda_i = sigma_i^2 of the whole matrix, not normalized; the table per
 * block and matrix kind, and its summaries (docs/metrics.md, "weights"). */
#ifndef SP_WEIGHTS_ALPHA_H
#define SP_WEIGHTS_ALPHA_H

#include "io/report.h"

#define SP_WEIGHTS_ALPHA_FIELDS 4 /* alpha, xmin, D, n_tail */

typedef struct {
    int n_blocks, n_kinds;
    double *cells; /* [field][block, kind], fields alpha, xmin, D, n_tail; NaN where not fitted */
} sp_weights_alpha;

/* Every cell NaN. SP_ERR_NOMEM only. */
sp_status sp_weights_alpha_init(sp_weights_alpha *t, int n_blocks, int n_kinds);
/* The cell of one field (0..SP_WEIGHTS_ALPHA_FIELDS - 1) of one matrix. */
double *sp_weights_alpha_cell(const sp_weights_alpha *t, int field, int block, int kind);
/* Fits the matrix of `kind` in `block`, rows x cols, from its min(rows, cols) singular values sv
 * (any order), unless WeightWatcher leaves such a matrix out (min(rows, cols) < 8 or > 15000, or
 * max(rows, cols) > 50000): its cells stay NaN then. */
sp_status sp_weights_alpha_fit(sp_weights_alpha *t, int block, int kind, int rows, int cols, const double *sv);
/* Writes the arrays alpha, alpha_xmin, alpha_ks_d, alpha_n_tail [block, matrix] into the report
 * group, with kind_names[kind] as the columns, and the summary keys alpha_mean, alpha_<kind>_mean,
 * alpha_outside_2_6_fraction and n_alpha_fits. */
sp_status sp_weights_alpha_write(const sp_weights_alpha *t, sp_report *r, const char *group,
                                 const char *const *kind_names);
void sp_weights_alpha_free(sp_weights_alpha *t);

#endif

/* analyzers/rowops.h: row-wise statistics and edits of backend activations [rows, dim].
 *
 * The backend table has no row reductions, but its normalization ops compute exactly those, per
 * row and in double: RMSNorm's rstd = 1/sqrt(mean(x^2) + eps) and LayerNorm's mean and
 * rstd = 1/sqrt(var + eps). With eps = 0 they give row norms and variances; only those per-row
 * values cross to the host. Each analyzer owns one sp_rowops sized for its largest batch. */
#ifndef SP_ROWOPS_H
#define SP_ROWOPS_H

#include "kernels/backend.h"

/* Rows whose mean square is below this count as zero vectors (their normalization is left at 0). */
#define SP_ROWOPS_TINY 1e-30

typedef struct {
    const sp_backend *be;
    int max_rows, max_dim;
    sp_real *ones;        /* backend [max_rows], every entry 1 */
    sp_real *gain;        /* backend [max_dim], every entry gain_value */
    double gain_value;
    sp_real *zeros;       /* backend [max_dim] */
    sp_real *y;           /* backend [max_rows * max_dim], scratch output of the norm ops */
    sp_real *mean, *rstd; /* backend [max_rows] */
    sp_real *host;        /* host [max_rows] */
} sp_rowops;

sp_status sp_rowops_init(sp_rowops *ro, const sp_backend *be, int max_rows, int max_dim);
void sp_rowops_free(sp_rowops *ro); /* safe on a zeroed struct */

/* sq[r] = ||x_r||^2 (host). */
sp_status sp_rowops_sqnorms(sp_rowops *ro, int rows, int dim, const sp_real *x, double *sq);
/* out_r = x_r / ||x_r|| (backend; zero rows stay zero); sq (host, may be NULL) gets ||x_r||^2. */
sp_status sp_rowops_unit(sp_rowops *ro, int rows, int dim, const sp_real *x, sp_real *out, double *sq);
/* Per row the mean (mean may be NULL) and the (biased) variance of its dim entries (host). */
sp_status sp_rowops_moments(sp_rowops *ro, int rows, int dim, const sp_real *x, double *mean, double *var);
/* out = x - 1 vec^T: vec [dim] subtracted from every row (out may be x). */
void sp_rowops_sub_vec(sp_rowops *ro, int rows, int dim, const sp_real *x, const sp_real *vec, sp_real *out);

#endif

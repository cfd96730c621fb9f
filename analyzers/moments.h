/* analyzers/moments.h: first and second moments of activation columns, streamed batch by batch on
 * the backend, so memory does not grow with the number of evaluation tokens.
 *
 * sp_mom_cols follows one array (a layer's hidden states or FFN latents, [rows, dim] per batch):
 * its column sums. sp_mom_cross accumulates the cross-products A^T B of two such arrays (or A^T A)
 * through be->gemm. At the end, covariances and centered cross-products come out in fp64.
 *
 * Precision: every column is first shifted by the mean of its first batch (covariances do not
 * change under a shift, and sums of nearly centered values lose little to cancellation). Sums and
 * cross-products then accumulate on the backend in sp_real (float32 in the tool) over at most
 * SP_MOMENTS_FLUSH_ROWS rows, and those partial sums are added into fp64 totals on the host. */
#ifndef SP_MOMENTS_H
#define SP_MOMENTS_H

#include "analyzers/rowops.h"

#define SP_MOMENTS_FLUSH_ROWS 8192

typedef struct {
    sp_rowops *ro;        /* borrowed: its ones vector and scratch */
    int dim;
    int64_t n;            /* rows accumulated */
    sp_real *shift;       /* backend [dim]: the first batch's column mean */
    double *shift_host;   /* [dim], the same values */
    sp_real *part;        /* backend [dim]: partial column sums of shifted rows */
    int part_rows;
    double *sum;          /* host [dim]: column sums of shifted rows (after a flush) */
} sp_mom_cols;

typedef struct {
    const sp_backend *be;
    int dim_a, dim_b;
    sp_real *part;        /* backend [dim_a, dim_b] */
    int part_rows;
    double *total;        /* host [dim_a, dim_b]: sum over rows of a_t b_t^T (shifted rows) */
} sp_mom_cross;

sp_status sp_mom_cols_init(sp_mom_cols *c, sp_rowops *ro, int dim);
/* Writes the shifted rows x - shift into out [rows, dim] (backend; out may not be x) and adds them
 * to the column sums. The first call with rows > 0 sets the shift to the mean of its rows. */
sp_status sp_mom_cols_add(sp_mom_cols *c, const sp_real *x, int rows, sp_real *out);
/* Moves the backend partial sums into the fp64 totals (call before reading sum). */
sp_status sp_mom_cols_flush(sp_mom_cols *c);
/* Column means of the original rows (after a flush), into mean [dim]. */
void sp_mom_cols_mean(const sp_mom_cols *c, double *mean);
void sp_mom_cols_free(sp_mom_cols *c);

sp_status sp_mom_cross_init(sp_mom_cross *x, const sp_backend *be, int dim_a, int dim_b);
/* Adds a^T b over rows: a [rows, dim_a] and b [rows, dim_b], shifted rows from sp_mom_cols_add. */
sp_status sp_mom_cross_add(sp_mom_cross *x, const sp_real *a, const sp_real *b, int rows);
sp_status sp_mom_cross_flush(sp_mom_cross *x);
void sp_mom_cross_free(sp_mom_cross *x);

/* The centered cross-product sum_t (a_t - mean_a)(b_t - mean_b)^T into out [dim_a, dim_b], from
 * flushed accumulators: total - sum_a sum_b^T / n. Divide by n - 1 for the covariance. */
void sp_mom_centered(const sp_mom_cross *x, const sp_mom_cols *a, const sp_mom_cols *b, double *out);

#endif

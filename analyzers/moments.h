/* analyzers/moments.h: first and second moments of activation columns, streamed batch by batch on
 * the backend, so memory does not grow with the number of evaluation tokens.
 *
 * sp_mom_cols follows one array (a layer's hidden states or FFN latents, [rows, dim] per batch):
 * its column sums. sp_mom_cross accumulates the cross-products A^T B of two such arrays (or A^T A)
 * through be->gemm. At the end, covariances and centered cross-products come out in fp64.
 *
 * Precision: every column is first shifted by the mean of its first batch (covariances do not
 * change under a shift, and sums of nearly centered values lose little to cancellation). Column sums
 * accumulate on the backend in sp_real (float32 in the tool) over at most SP_MOMENTS_FLUSH_ROWS rows,
 * then into fp64 totals on the host. A cross-product is one be->gemm per batch in sp_real into a
 * scratch matrix the caller lends (one per analyzer, shared by all its accumulators), added at once
 * into fp64 totals that stay in BACKEND memory (be->to_f64, nothing crosses to the host): an
 * accumulator costs its 8-byte totals and nothing else, which is what bounds the memory of analyses
 * with many of them (cka: a pair of layers each; ffn_spectra: a d_ff x d_ff matrix a block).
 * Centering (total - sum_a sum_b^T / n, optionally scaled) runs on the backend as one fp64 gemm of
 * rank 1.
 *
 * sp_mom_batch holds `count` square accumulators of one side whose totals are ONE backend
 * allocation [count, dim, dim], so that one be->sym_eigvals call decomposes all their covariances
 * (batched or concurrent on the GPU); only eigenvalues come back. Since sym_eigvals reads the upper
 * triangle only, a batch's accumulators compute only the tiles of A^T A on and above the diagonal
 * (SP_MOMENTS_BAND columns a gemm, about (1 + band / dim) / 2 of the full product's work: 0.56 at
 * d_ff 1024); their totals hold the upper triangle and, below the diagonal bands, the centering's
 * rank-1 term alone. */
#ifndef SP_MOMENTS_H
#define SP_MOMENTS_H

#include "analyzers/rowops.h"

#define SP_MOMENTS_FLUSH_ROWS 8192
/* Rows of A^T A one gemm computes in an upper-triangle accumulator (a band from its diagonal on). */
#define SP_MOMENTS_BAND 128

typedef struct {
    sp_rowops *ro;        /* borrowed: its ones vector and scratch */
    int dim;
    int64_t n;            /* rows accumulated */
    sp_real *shift;       /* backend [dim]: the first batch's column mean */
    double *shift_host;   /* [dim], the same values */
    sp_real *part;        /* backend [dim]: partial column sums of shifted rows */
    int part_rows;
    double *sum;          /* host [dim]: column sums of shifted rows (after a flush) */
    int shared_shift;     /* over MPI ranks (analyzers/ranks.h): the first add takes rank 0's shift, broadcast
                             (a collective), so that every rank's sums share it and add up */
    int joined;           /* sums already added up over the ranks */
} sp_mom_cols;

typedef struct {
    const sp_backend *be;
    int dim_a, dim_b;
    sp_real *scratch;     /* borrowed backend [dim_a, dim_b]: one batch's a^T b */
    int centered;         /* totals centered: no more rows */
    double *total;        /* backend [dim_a, dim_b], fp64: sum over rows of a_t b_t^T (shifted rows) */
    int owns_total;       /* 0 when total lies in an sp_mom_batch's allocation */
    int upper_only;       /* A^T A on and above the diagonal only (an sp_mom_batch's: a == b) */
} sp_mom_cross;

typedef struct {
    const sp_backend *be;
    int count, dim;
    double *totals;       /* backend [count, dim, dim], fp64: the totals of every accumulator */
    sp_real *scratch;     /* backend [dim, dim]: the accumulators' shared scratch */
    sp_mom_cross *cross;  /* [count], cross[i].total = totals + i dim^2 */
} sp_mom_batch;

sp_status sp_mom_cols_init(sp_mom_cols *c, sp_rowops *ro, int dim);
/* Writes the shifted rows x - shift into out [rows, dim] (backend; out may not be x) and adds them
 * to the column sums. The first call with rows > 0 sets the shift to the mean of its rows. */
sp_status sp_mom_cols_add(sp_mom_cols *c, const sp_real *x, int rows, sp_real *out);
/* Writes the shifted rows x - shift into out as sp_mom_cols_add does, bit for bit, without adding
 * them to the sums (a second pass over rows already counted); the shift must be set. */
void sp_mom_cols_shift(const sp_mom_cols *c, const sp_real *x, int rows, sp_real *out);
/* Moves the backend partial sums into the fp64 totals (call before reading sum). */
sp_status sp_mom_cols_flush(sp_mom_cols *c);
/* Column means of the original rows (after a flush), into mean [dim]. */
void sp_mom_cols_mean(const sp_mom_cols *c, double *mean);
void sp_mom_cols_free(sp_mom_cols *c);

/* An accumulator with its own (zeroed) backend fp64 totals; scratch: backend [dim_a, dim_b], lent
 * for the accumulator's life (accumulators added one after another may share one). */
sp_status sp_mom_cross_init(sp_mom_cross *x, const sp_backend *be, int dim_a, int dim_b, sp_real *scratch);
/* Adds a^T b over rows: a [rows, dim_a] and b [rows, dim_b], shifted rows from sp_mom_cols_add. */
sp_status sp_mom_cross_add(sp_mom_cross *x, const sp_real *a, const sp_real *b, int rows);
/* Copies the fp64 totals [dim_a, dim_b] to the host: dim_a dim_b 8 bytes cross the bus (4.7 MB for
 * d = 768), so callers read one accumulator at a time. */
void sp_mom_cross_download(const sp_mom_cross *x, double *host);
/* Flushes the column sums, then turns the totals, in place on the backend, into
 *   scale * (total - sum_a sum_b^T / n)
 * (scale 1: the centered cross-product; 1 / (n - 1): the covariance), one rank-1 gemm_f64 with the
 * host column sums uploaded in double. The accumulator then holds that matrix and takes no more
 * rows. */
sp_status sp_mom_cross_center(sp_mom_cross *x, sp_mom_cols *a, sp_mom_cols *b, double scale);
void sp_mom_cross_free(sp_mom_cross *x); /* safe on a zeroed struct */

/* The centered cross-product from host copies: out = total - sum_a sum_b^T / n, total and out
 * [a->dim, b->dim] host fp64 (out may be total); the column sums flushed. */
void sp_mom_centered_host(const double *total, const sp_mom_cols *a, const sp_mom_cols *b, double *out);
/* The biased linear-kernel HSIC of two column sets (the cka analyzer's, Kornblith et al. 2019) from
 * their cross-product total (host [a->dim, b->dim]): ||total - sum_a sum_b^T / n||_F^2 / (n - 1)^2;
 * cov [a->dim * b->dim] is scratch (it gets the centered cross-product). */
double sp_mom_hsic(const double *total, const sp_mom_cols *a, const sp_mom_cols *b, double *cov);

/* count accumulators of dim x dim with contiguous zeroed totals, each taking a^T a (a == b) and
 * computing its upper triangle only (above). */
sp_status sp_mom_batch_init(sp_mom_batch *b, const sp_backend *be, int count, int dim);
/* The covariance total / (n - 1), centered with cols[i], of every accumulator i in place
 * (sp_mom_cross_center). SP_ERR_INPUT naming `what` when a column set holds fewer than 2 rows. */
sp_status sp_mom_batch_covariances(sp_mom_batch *b, sp_mom_cols *cols, const char *what);
/* Eigenvalues, descending, of every (symmetric) matrix of the batch into w [count, dim] (host): one
 * be->sym_eigvals over the whole allocation, which it destroys. */
sp_status sp_mom_batch_eigvals(sp_mom_batch *b, double *w);
/* Frees the accumulators and their totals (safe on a zeroed struct). */
void sp_mom_batch_free(sp_mom_batch *b);

#endif

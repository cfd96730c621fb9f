/* analyzers/linop.h: a square linear map known only through its products (J x and J^T y), and its
 * top singular values by subspace iteration on J^T J, orthonormalized in float64 on the host.
 *
 * With k = 1 this is the power iteration of docs/metrics.md: v random unit; repeat u = J v,
 * sigma = ||u||, w = J^T u, v = w / ||w||; stop when sigma changes by less than tol relative, or
 * after max_iters products. With k > 1: V (n x k) orthonormal; U = J V; the estimates are the square
 * roots of the eigenvalues of U^T U (Rayleigh-Ritz on J^T J over span V); V = orth(J^T U); stop when
 * every estimate above 1e-12 sigma_1 changes by less than tol relative. */
#ifndef SP_LINOP_H
#define SP_LINOP_H

#include "core/common.h"

typedef struct {
    int64_t n;  /* input and output length */
    int max_k;  /* most vectors one call carries */
    void *ctx;
    /* k vectors at once, host float64, vector j at x + j * n: y_j = J x_j, resp. x_j = J^T y_j */
    sp_status (*apply)(void *ctx, int k, const double *x, double *y);
    sp_status (*apply_t)(void *ctx, int k, const double *y, double *x);
} sp_linop;

typedef struct {
    int iters;     /* products J V taken */
    int converged; /* the relative change fell below tol before max_iters */
} sp_linop_stats;

/* sigma[k], descending. 1 <= k <= min(max_k, n); seed draws the start vectors. */
sp_status sp_linop_top_singvals(const sp_linop *op, int k, int max_iters, double tol, uint64_t seed, double *sigma,
                                sp_linop_stats *stats);
/* The same from the k start vectors v[k * n] (any basis; a warm start), which on return hold the
 * final orthonormal V, the estimate of the top right singular vectors. seed draws only replacements
 * for start vectors that are linearly dependent. */
sp_status sp_linop_refine_singvals(const sp_linop *op, int k, int max_iters, double tol, uint64_t seed, double *v,
                                   double *sigma, sp_linop_stats *stats);

#endif

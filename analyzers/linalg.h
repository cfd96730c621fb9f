/* analyzers/linalg.h: the dense fp64 linear algebra the analyzers share (LAPACKE), on the host.
 * Eigen and singular values are always computed in double, whatever sp_real is. */
#ifndef SP_LINALG_H
#define SP_LINALG_H

#include "core/common.h"
#include "kernels/backend.h"

/* Eigenvalues of the symmetric n x n matrix a (row-major, destroyed), descending, into w[n]. */
sp_status sp_linalg_sym_eigvals(int n, double *a, double *w);
/* Singular values of the m x n matrix a (row-major, destroyed), descending, into s[min(m, n)]. */
sp_status sp_linalg_singvals(int m, int n, double *a, double *s);

/* The backend's decompositions with the values brought to the host: eigenvalues (descending) of
 * `count` symmetric n x n matrices, resp. singular values of `count` m x n matrices, in backend
 * memory a (destroyed), into host w [count, n] resp. s [count, min(m, n)]. The backend array the
 * values land in is allocated and freed here. */
sp_status sp_linalg_backend_eigvals(const sp_backend *be, int n, int count, double *a, double *w);
sp_status sp_linalg_backend_singvals(const sp_backend *be, int m, int n, int count, double *a, double *s);

/* c[m, n] = a[m, k] b[k, n], row-major (cblas_dgemm). */
void sp_linalg_matmul(int m, int n, int k, const double *a, const double *b, double *c);
/* c[n, n] += a[m, n]^T a[m, n] (row-major), upper triangle only (cblas_dsyrk): what
 * sp_linalg_spd_solve reads. */
void sp_linalg_gram_add(int m, int n, const double *a, double *c);
/* Solves a x = b for the symmetric positive definite n x n matrix a (row-major, its upper triangle
 * read, destroyed; LAPACK dposv), x into b[n]; SP_ERR_NUMERIC when a is not positive definite. */
sp_status sp_linalg_spd_solve(int n, double *a, double *b);
/* Spectral norm ||a||_2 of the m x n matrix a (row-major, destroyed): its largest singular value. */
sp_status sp_linalg_spectral_norm(int m, int n, double *a, double *norm);

/* Rank measures of a spectrum of non-negative eigenvalues lambda[n] (negatives from round-off are
 * clipped to 0), normalized by dim (the matrix side D):
 *   soft rank = exp(-sum p_i ln p_i) / D, p = lambda / sum lambda (Shannon effective rank)
 *   hard rank = (sum lambda)^2 / sum lambda^2 / D (participation ratio) */
typedef struct {
    double trace;      /* sum lambda */
    double sum_sq;     /* sum lambda^2 */
    double entropy;    /* -sum p ln p, nats */
    double soft_rank;  /* normalized */
    double hard_rank;  /* normalized */
} sp_rank_measures;

sp_rank_measures sp_linalg_rank_measures(int n, const double *lambda, int dim);

/* Median of x[n] (copied, not modified). */
double sp_linalg_median(int n, const double *x);
/* log softmax of one row of logits z[n], in double: log p_v = z_v - shift; returns shift (the max
 * plus the log-sum-exp of z - max), *arg the argmax (the first on ties). */
double sp_linalg_log_softmax_shift(int n, const sp_real *z, int *arg);
/* The quantiles q[k] (each in [0, 1]) of x[n] (copied, not modified; n >= 1) into out[k], by linear
 * interpolation between order statistics (numpy.percentile's default): with x sorted and
 * h = q (n - 1), x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]). */
sp_status sp_linalg_quantiles(int64_t n, const double *x, int k, const double *q, double *out);

#endif

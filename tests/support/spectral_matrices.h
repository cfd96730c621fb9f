/* tests/support/spectral_matrices.h: host double matrices (row-major, malloc'd; the helpers abort
 * on allocation failure: tests only) whose eigen or singular values are known exactly, for the
 * tests of the backends' sym_eigvals and singvals. */
#ifndef SP_TEST_SPECTRAL_MATRICES_H
#define SP_TEST_SPECTRAL_MATRICES_H

#include <stddef.h>

#include "core/rng.h"

/* n x n orthogonal: the product of n Householder reflections I - 2 v v^T / v^T v, v ~ N(0, I). */
double *spm_random_orthogonal(sp_rng *rng, int n);
/* Q diag(eig) Q^T with Q random orthogonal: symmetric n x n with eigenvalues eig. */
double *spm_symmetric_with_eigvals(sp_rng *rng, int n, const double *eig);
/* U diag(s) V^T, m x n, U and V the first min(m, n) columns of random orthogonal matrices. */
double *spm_with_singvals(sp_rng *rng, int m, int n, const double *s);
/* The n x n tridiagonal Toeplitz matrix with 2 on the diagonal and -1 beside it, and its eigenvalues
 * 2 - 2 cos(j pi / (n + 1)), j = n..1 (descending). */
double *spm_toeplitz_2_1(int n);
double *spm_toeplitz_2_1_eigvals(int n);
/* max_i |x_i| */
double spm_max_abs(size_t n, const double *x);
/* max_i |a_i - b_i| (INFINITY when one is not finite) */
double spm_max_abs_diff(size_t n, const double *a, const double *b);
/* true when x[0] >= x[1] >= ... >= x[n-1] */
int spm_is_descending(size_t n, const double *x);

#endif

#include "analyzers/linalg.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void reverse(int n, double *x)
{
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        double t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}

sp_status sp_linalg_sym_eigvals(int n, double *a, double *w)
{
    lapack_int info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'N', 'U', n, a, n, w);
    if (info != 0)
        return sp_error(SP_ERR_NUMERIC, "symmetric eigenvalues of a %d x %d matrix failed (LAPACK dsyevd info %d)", n, n,
                        (int)info);
    reverse(n, w); /* LAPACK returns ascending order */
    return SP_OK;
}

sp_status sp_linalg_singvals(int m, int n, double *a, double *s)
{
    /* no vectors are computed, but LAPACKE's row-major path checks ldvt >= n all the same */
    lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', m, n, a, n, s, NULL, m, NULL, n);
    if (info != 0)
        return sp_error(SP_ERR_NUMERIC, "singular values of a %d x %d matrix failed (LAPACK dgesdd info %d)", m, n,
                        (int)info);
    return SP_OK; /* already descending */
}

void sp_linalg_matmul(int m, int n, int k, const double *a, const double *b, double *c)
{
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, k, b, n, 0.0, c, n);
}

sp_status sp_linalg_spectral_norm(int m, int n, double *a, double *norm)
{
    int k = m < n ? m : n;
    double *s = malloc((size_t)(k > 0 ? k : 1) * sizeof *s);
    if (!s)
        return sp_error(SP_ERR_NOMEM, "out of memory for the %d singular values of a %d x %d matrix", k, m, n);
    sp_status st = sp_linalg_singvals(m, n, a, s);
    *norm = k > 0 ? s[0] : 0;
    free(s);
    return st;
}

sp_rank_measures sp_linalg_rank_measures(int n, const double *lambda, int dim)
{
    sp_rank_measures r = {0};
    for (int i = 0; i < n; i++) {
        double l = lambda[i] > 0 ? lambda[i] : 0;
        r.trace += l;
        r.sum_sq += l * l;
    }
    if (r.trace <= 0) /* an all-zero spectrum has no direction in use */
        return r;
    for (int i = 0; i < n; i++) {
        double p = lambda[i] > 0 ? lambda[i] / r.trace : 0;
        if (p > 0)
            r.entropy -= p * log(p);
    }
    r.soft_rank = exp(r.entropy) / dim;
    r.hard_rank = r.trace * r.trace / r.sum_sq / dim;
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sp_linalg_median(int n, const double *x)
{
    if (n <= 0)
        return NAN;
    double *c = malloc((size_t)n * sizeof *c);
    if (!c)
        return NAN;
    memcpy(c, x, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double med = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return med;
}

#include "analyzers/linalg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include "kernels/backend.h"

/* Eigen and singular values of host matrices go through the CPU backend's LAPACK ops (its memory is
 * host memory); the Gram update and the linear solve, which no backend offers, call BLAS and LAPACK
 * themselves. */
sp_status sp_linalg_sym_eigvals(int n, double *a, double *w) { return sp_backend_cpu()->sym_eigvals(n, 1, a, w); }

sp_status sp_linalg_singvals(int m, int n, double *a, double *s) { return sp_backend_cpu()->singvals(m, n, 1, a, s); }

/* The values a decomposition left in the backend array out [len] (when it succeeded) into host,
 * then out freed. */
static sp_status values_to_host(const sp_backend *be, sp_status st, double *out, double *host, size_t len)
{
    if (st == SP_OK)
        be->download(host, out, len * sizeof *host);
    be->free(out);
    return st;
}

sp_status sp_linalg_backend_eigvals(const sp_backend *be, int n, int count, double *a, double *w)
{
    const size_t len = (size_t)count * (size_t)n;
    double *out = be->alloc((len ? len : 1) * sizeof *out, "eigenvalues");
    return out ? values_to_host(be, be->sym_eigvals(n, count, a, out), out, w, len) : SP_ERR_NOMEM;
}

sp_status sp_linalg_backend_singvals(const sp_backend *be, int m, int n, int count, double *a, double *s)
{
    const size_t len = (size_t)count * (size_t)(m < n ? m : n);
    double *out = be->alloc((len ? len : 1) * sizeof *out, "singular values");
    return out ? values_to_host(be, be->singvals(m, n, count, a, out), out, s, len) : SP_ERR_NOMEM;
}

void sp_linalg_matmul(int m, int n, int k, const double *a, const double *b, double *c)
{
    sp_backend_cpu()->gemm_f64(0, 0, m, n, k, 1.0, a, k, b, n, 0.0, c, n);
}

void sp_linalg_gram_add(int m, int n, const double *a, double *c)
{
    if (m > 0 && n > 0)
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, n, m, 1.0, a, n, 1.0, c, n);
}

sp_status sp_linalg_spd_solve(int n, double *a, double *b)
{
    lapack_int info = LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', n, 1, a, n, b, 1);
    if (info != 0)
        return sp_error(SP_ERR_NUMERIC, "a %d x %d system is not positive definite (LAPACK dposv info %d)", n, n,
                        (int)info);
    return SP_OK;
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

sp_status sp_linalg_quantiles(int64_t n, const double *x, int k, const double *q, double *out)
{
    double *c = sp_malloc((size_t)n * sizeof *c, "quantiles");
    if (!c)
        return SP_ERR_NOMEM;
    memcpy(c, x, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    for (int i = 0; i < k; i++) {
        const double h = q[i] * (double)(n - 1), lo = floor(h);
        const int64_t at = (int64_t)lo;
        out[i] = at + 1 < n ? c[at] + (h - lo) * (c[at + 1] - c[at]) : c[n - 1];
    }
    free(c);
    return SP_OK;
}

double sp_linalg_log_softmax_shift(int n, const sp_real *z, int *arg)
{
    int best = 0;
    for (int v = 1; v < n; v++)
        if (z[v] > z[best])
            best = v;
    const double m = z[best];
    double sum = 0;
    for (int v = 0; v < n; v++)
        sum += exp((double)z[v] - m);
    *arg = best;
    return m + log(sum);
}

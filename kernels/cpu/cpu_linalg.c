/* kernels/cpu/cpu_linalg.c: the backend's fp64 ops on the host: widening, dgemm (OpenBLAS), and
 * eigen / singular values through LAPACK (dsyevd and dgesdd, values only). The matrices of one call
 * are independent, so they are decomposed in parallel, one LAPACK call per thread; LAPACK itself
 * runs on one thread (OpenBLAS is set single-threaded by cpu_blas.c). */
#include <cblas.h>
#include <lapacke.h>

#include "kernels/cpu/cpu_ops.h"

void sp_cpu_to_f64(size_t n, const sp_real *x, double *y, int accumulate)
{
#pragma omp parallel for schedule(static) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        y[i] = accumulate ? y[i] + (double)x[i] : (double)x[i];
}

void sp_cpu_gemm_f64(int trans_a, int trans_b, int m, int n, int k, double alpha, const double *a, int lda,
                     const double *b, int ldb, double beta, double *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                alpha, a, lda, b, ldb, beta, c, ldc);
}

static void reverse(int n, double *x)
{
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        double t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}

typedef struct {
    int m, n;
    double *a, *out;
} batch_args;

typedef lapack_int (*decompose_fn)(const batch_args *b, int i);

static lapack_int eig_one(const batch_args *b, int i)
{
    const size_t nn = (size_t)b->n * (size_t)b->n;
    return LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'N', 'U', b->n, b->a + i * nn, b->n, b->out + (size_t)i * b->n);
}

static lapack_int sv_one(const batch_args *b, int i)
{
    const size_t mn = (size_t)b->m * (size_t)b->n, k = (size_t)(b->m < b->n ? b->m : b->n);
    /* no vectors are computed, but LAPACKE's row-major path checks ldvt >= n all the same */
    return LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', b->m, b->n, b->a + i * mn, b->n, b->out + i * k, NULL, b->m, NULL,
                          b->n);
}

/* fn(b, i) for every i < count, in parallel; returns the lowest failing i (-1: none) and its info. */
static int for_each_matrix(int count, decompose_fn fn, const batch_args *b, lapack_int *failed_info)
{
    int failed = -1;
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < count; i++) {
        lapack_int info = fn(b, i);
        if (info != 0) {
#pragma omp critical(sp_cpu_linalg)
            if (failed < 0 || i < failed) {
                failed = i;
                *failed_info = info;
            }
        }
    }
    return failed;
}

sp_status sp_cpu_sym_eigvals(int n, int count, double *a, double *w)
{
    lapack_int info = 0;
    int failed = for_each_matrix(count, eig_one, &(batch_args){n, n, a, w}, &info);
    if (failed >= 0)
        return sp_error(SP_ERR_NUMERIC,
                        "symmetric eigenvalues of %d x %d matrix %d of %d failed (LAPACK dsyevd info %d)", n, n,
                        failed, count, (int)info);
    for (int i = 0; i < count; i++)
        reverse(n, w + (size_t)i * n); /* LAPACK returns ascending order */
    return SP_OK;
}

sp_status sp_cpu_singvals(int m, int n, int count, double *a, double *s)
{
    lapack_int info = 0;
    int failed = for_each_matrix(count, sv_one, &(batch_args){m, n, a, s}, &info);
    if (failed >= 0)
        return sp_error(SP_ERR_NUMERIC, "singular values of %d x %d matrix %d of %d failed (LAPACK dgesdd info %d)", m,
                        n, failed, count, (int)info);
    return SP_OK; /* already descending */
}

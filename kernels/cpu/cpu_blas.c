/* kernels/cpu/cpu_blas.c: gemm through OpenBLAS (cblas, row-major), vector updates and reductions.
 *
 * Reductions split the vector into a fixed number of blocks whose bounds depend only on n, sum each
 * block in double (in parallel), then add the block sums in order: the result is the same bits
 * whatever the number of threads. */
#include <math.h>

#include <cblas.h>

#include "kernels/cpu/cpu_ops.h"

#ifdef SP_DOUBLE
#define SP_CBLAS_GEMM cblas_dgemm
#else
#define SP_CBLAS_GEMM cblas_sgemm
#endif

#define REDUCE_BLOCKS 64

void sp_cpu_gemm(int trans_a, int trans_b, int m, int n, int k, sp_real alpha, const sp_real *a, int lda,
                 const sp_real *b, int ldb, sp_real beta, sp_real *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) { /* an empty product: C = beta * C, with beta = 0 overwriting whatever C held */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                c[(size_t)i * ldc + j] = beta == 0 ? 0 : beta * c[(size_t)i * ldc + j];
        return;
    }
    SP_CBLAS_GEMM(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                  alpha, a, lda, b, ldb, beta, c, ldc);
}

void sp_cpu_axpby(size_t n, sp_real a, const sp_real *x, sp_real b, sp_real *y)
{
    if (b == 0) {
#pragma omp parallel for schedule(static) if (n >= SP_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            y[i] = a * x[i];
    } else {
#pragma omp parallel for schedule(static) if (n >= SP_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            y[i] = a * x[i] + b * y[i];
    }
}

void sp_cpu_scale(size_t n, sp_real a, sp_real *x)
{
#pragma omp parallel for schedule(static) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}

/* The sum of one block [lo, hi) of a reduction, in double. */
typedef double (*block_sum_fn)(const sp_real *x, const sp_real *y, size_t lo, size_t hi);

static double reduce_blocks(size_t n, const sp_real *x, const sp_real *y, block_sum_fn block_sum)
{
    double partial[REDUCE_BLOCKS];
    size_t block = (n + REDUCE_BLOCKS - 1) / REDUCE_BLOCKS;
#pragma omp parallel for schedule(static) if (n >= SP_CPU_PAR_MIN)
    for (int i = 0; i < REDUCE_BLOCKS; i++) {
        size_t lo = (size_t)i * block, hi = lo + block;
        if (lo > n)
            lo = n;
        if (hi > n)
            hi = n;
        partial[i] = block_sum(x, y, lo, hi);
    }
    double total = 0;
    for (int i = 0; i < REDUCE_BLOCKS; i++)
        total += partial[i];
    return total;
}

static double block_sumsq(const sp_real *x, const sp_real *y, size_t lo, size_t hi)
{
    (void)y;
    double s = 0;
    for (size_t i = lo; i < hi; i++)
        s += (double)x[i] * x[i];
    return s;
}

static double block_dot(const sp_real *x, const sp_real *y, size_t lo, size_t hi)
{
    double s = 0;
    for (size_t i = lo; i < hi; i++)
        s += (double)x[i] * y[i];
    return s;
}

static double block_nonfinite(const sp_real *x, const sp_real *y, size_t lo, size_t hi)
{
    (void)y;
    double count = 0; /* exact: block sizes stay far below 2^53 */
    for (size_t i = lo; i < hi; i++)
        count += !isfinite(x[i]);
    return count;
}

double sp_cpu_sumsq(size_t n, const sp_real *x) { return reduce_blocks(n, x, NULL, block_sumsq); }

double sp_cpu_dot(size_t n, const sp_real *x, const sp_real *y) { return reduce_blocks(n, x, y, block_dot); }

size_t sp_cpu_count_nonfinite(size_t n, const sp_real *x)
{
    return (size_t)reduce_blocks(n, x, NULL, block_nonfinite);
}

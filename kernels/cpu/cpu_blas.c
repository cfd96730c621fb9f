/* kernels/cpu/cpu_blas.c: gemm through OpenBLAS (cblas, row-major), vector updates and reductions.
 *
 * OpenBLAS runs on one thread (set once, at the first gemm); sp_cpu_gemm threads a large product
 * itself with OpenMP, over up to GEMM_SPLIT blocks of rows of C (or columns, when C is wider than
 * tall), one single-threaded cblas call per block. The other ops are OpenMP loops too, so a single
 * pool of threads does all the work: OpenBLAS's own pthreads pool, yielding in a spin while the
 * OpenMP workers waited for their turn, cost more than a fifth of the model's time on two cores.
 * Block bounds depend only on the shape, so a product gives the same bits whatever the number of
 * threads. Ops that run inside their own parallel region (attention) call sp_cpu_gemm_serial.
 *
 * Reductions split the vector into a fixed number of blocks whose bounds depend only on n, sum each
 * block in double (in parallel), then add the block sums in order: the result is the same bits
 * whatever the number of threads. */
#include <math.h>
#include <pthread.h>

#include <cblas.h>

#include "kernels/cpu/cpu_ops.h"

#ifdef SP_DOUBLE
#define SP_CBLAS_GEMM cblas_dgemm
#else
#define SP_CBLAS_GEMM cblas_sgemm
#endif

#define REDUCE_BLOCKS 64
/* A threaded product is cut into at most GEMM_SPLIT blocks (enough to balance 2, 4 or 8 threads) of
 * at least GEMM_MIN_BLOCK rows or columns of C, so that repacking the shared operand for each block
 * stays a small part of its multiply-adds (blocks of 256 rows run 5% faster than blocks of 128). */
#define GEMM_SPLIT 8
#define GEMM_MIN_BLOCK 128

static pthread_once_t blas_threads_once = PTHREAD_ONCE_INIT;

static void blas_single_thread(void) { openblas_set_num_threads(1); }

void sp_cpu_gemm_serial(int trans_a, int trans_b, int m, int n, int k, sp_real alpha, const sp_real *a, int lda,
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
    pthread_once(&blas_threads_once, blas_single_thread);
    SP_CBLAS_GEMM(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                  alpha, a, lda, b, ldb, beta, c, ldc);
}

void sp_cpu_gemm(int trans_a, int trans_b, int m, int n, int k, sp_real alpha, const sp_real *a, int lda,
                 const sp_real *b, int ldb, sp_real beta, sp_real *c, int ldc)
{
    const int by_rows = m >= n, extent = by_rows ? m : n;
    int block = (extent + GEMM_SPLIT - 1) / GEMM_SPLIT;
    block = block < GEMM_MIN_BLOCK ? GEMM_MIN_BLOCK : (block + 15) / 16 * 16;
    const int blocks = extent > 0 ? (extent + block - 1) / block : 0;
    const int parallel = blocks > 1 && (double)m * n * (k > 0 ? k : 1) >= (double)SP_CPU_PAR_MIN * GEMM_MIN_BLOCK;
#pragma omp parallel for schedule(dynamic) if (parallel)
    for (int i = 0; i < blocks; i++) {
        const size_t lo = (size_t)i * block;
        const int len = extent - (int)lo < block ? extent - (int)lo : block;
        if (by_rows) /* rows lo.. of op(A) and of C */
            sp_cpu_gemm_serial(trans_a, trans_b, len, n, k, alpha, a + (trans_a ? lo : lo * lda), lda, b, ldb, beta,
                               c + lo * ldc, ldc);
        else /* columns lo.. of op(B) and of C */
            sp_cpu_gemm_serial(trans_a, trans_b, m, len, k, alpha, a, lda, b + (trans_b ? lo * ldb : lo), ldb, beta,
                               c + lo, ldc);
    }
}

void sp_cpu_axpby(size_t n, sp_real a, const sp_real *x, sp_real b, sp_real *y)
{
    if (b == 0) {
#pragma omp parallel for schedule(dynamic, SP_CPU_CHUNK) if (n >= SP_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            y[i] = a * x[i];
    } else {
#pragma omp parallel for schedule(dynamic, SP_CPU_CHUNK) if (n >= SP_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            y[i] = a * x[i] + b * y[i];
    }
}

void sp_cpu_scale(size_t n, sp_real a, sp_real *x)
{
#pragma omp parallel for schedule(dynamic, SP_CPU_CHUNK) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}

/* The sum of one block [lo, hi) of a reduction, in double. */
typedef double (*block_sum_fn)(const sp_real *x, const sp_real *y, size_t lo, size_t hi);

static double reduce_blocks(size_t n, const sp_real *x, const sp_real *y, block_sum_fn block_sum)
{
    double partial[REDUCE_BLOCKS];
    size_t block = (n + REDUCE_BLOCKS - 1) / REDUCE_BLOCKS;
#pragma omp parallel for schedule(dynamic) if (n >= SP_CPU_PAR_MIN)
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

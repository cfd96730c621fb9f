/* kernels/cuda/cuda_linalg.cu: the backend's fp64 ops on the GPU: widening, and eigen / singular
 * values through cuSOLVER (values only), the matrices of a batch decomposed concurrently on the
 * solver pool (cuda_solver_pool.cu).
 *
 * Why the pool and not cusolverDnXsyevBatched: syevBatched is documented with a size limit of
 * n * lda * batch <= INT32_MAX and is aimed at many small matrices, while the analyzers decompose a
 * few large ones (d_model 768 to d_ff 3072, a dozen at a time), which is what syevd is built for.
 *
 * Singular values go through the Gram matrix (docs/cuda.md, "Singular values"): one batched dgemm
 * and the batched eigensolver, then sqrt. The Gram route squares the condition number, so a matrix
 * whose smallest Gram eigenvalue is at most GRAM_RATIO_MIN times its largest (sigma_min/sigma_max
 * at most 1e-3) is redone with cusolverDnXgesvd, which is backward stable. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_ops.h"

/* sigma_min / sigma_max <= 1e-3: below it the Gram route could miss the analyzers' 1e-6 agreement
 * with LAPACK (docs/cuda.md); above it its error is below (k eps / 2) 1e6, 2e-7 at k = 3072 */
#define GRAM_RATIO_MIN 1e-6

static __global__ void to_f64_kernel(size_t n, const float *x, double *y, int accumulate)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        y[i] = accumulate ? y[i] + (double)x[i] : (double)x[i];
    }
}

void sp_cuda_to_f64(size_t n, const float *x, double *y, int accumulate)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(to_f64_kernel, n, x, y, accumulate);
}

/* Pair p swaps elements j and len-1-j of vector p / (len/2), j = p % (len/2). */
static __global__ void reverse_kernel(size_t n_pairs, int len, double *w)
{
    const size_t half = (size_t)len / 2;
    SP_CUDA_GRID_STRIDE(p, n_pairs)
    {
        double *v = w + (p / half) * (size_t)len;
        const size_t j = p % half, opposite = (size_t)len - 1 - j;
        const double t = v[j];
        v[j] = v[opposite];
        v[opposite] = t;
    }
}

/* cuSOLVER's ascending eigenvalues to the backend's descending order, for count vectors of len. */
static bool reverse_each(int len, int count, double *w)
{
    const size_t n_pairs = (size_t)count * (size_t)(len / 2);
    if (n_pairs == 0)
        return true;
    reverse_kernel<<<sp_cuda_blocks(n_pairs), SP_CUDA_THREADS>>>(n_pairs, len, w);
    return SP_CUDA_CHECK_LAUNCH("reverse_kernel");
}

/* Gram eigenvalues (descending, so sqrt keeps the order) to singular values; rounding may leave
 * eigenvalues of a rank-deficient Gram matrix slightly negative. NaN stays NaN (review fix: fmax
 * turned it into a silent 0). */
static __global__ void sqrt_clamped_kernel(size_t n, double *x)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        x[i] = x[i] < 0.0 ? 0.0 : sqrt(x[i]);
    }
}

/* The info flags of n_items decompositions (device), read after everything queued before: the
 * synchronous download on the legacy default stream waits for the solver streams. Returns the first
 * item with a non-zero info (-1: none; -2: the download failed, sp_error recorded). */
static int first_failed_item(int n_items, const int *info_dev, int *info)
{
    int *host = (int *)malloc((size_t)n_items * sizeof *host);
    if (!host) {
        sp_error(SP_ERR_NOMEM, "out of memory reading %d cuSOLVER info flags", n_items);
        return -2;
    }
    int failed = -1;
    if (!SP_CUDA_CHECK(cudaMemcpy(host, info_dev, (size_t)n_items * sizeof *host, cudaMemcpyDeviceToHost)))
        failed = -2;
    for (int i = 0; failed == -1 && i < n_items; i++)
        if (host[i] != 0) {
            failed = i;
            *info = host[i];
        }
    free(host);
    return failed;
}

/* A malloc'd host copy of n device doubles (NULL + sp_error on failure); values only come back. */
static double *host_copy(const double *dev, size_t n, const char *what)
{
    double *host = (double *)malloc((n ? n : 1) * sizeof *host);
    if (!host) {
        sp_error(SP_ERR_NOMEM, "out of memory reading %zu %s", n, what);
        return NULL;
    }
    if (!SP_CUDA_CHECK(cudaMemcpy(host, dev, n * sizeof *host, cudaMemcpyDeviceToHost))) {
        free(host);
        return NULL;
    }
    return host;
}

/* LAPACK refuses a matrix holding NaN or Inf (SP_ERR_NUMERIC on the CPU) while cuSOLVER returns
 * NaN values and info 0: the values of count matrices (count x n doubles, small next to the
 * matrices) are read back and scanned, so both backends fail the same way. */
static sp_status first_nonfinite_matrix(int n, int count, const double *w_dev, const char *what)
{
    const size_t len = (size_t)count * (size_t)n;
    double *w = host_copy(w_dev, len, "eigenvalues");
    if (!w)
        return sp_error_code();
    sp_status st = SP_OK;
    for (size_t i = 0; i < len && st == SP_OK; i++)
        if (!isfinite(w[i]))
            st = sp_error(SP_ERR_NUMERIC, "symmetric eigenvalues of %d x %d %s %zu of %d failed: non-finite values "
                                          "(the matrix holds NaN or Inf)",
                          n, n, what, i / (size_t)n, count);
    free(w);
    return st;
}

/* ---- symmetric eigenvalues ---- */
typedef struct {
    int n;
    double *a, *w;
    int *info;
} eig_batch;

static cusolverStatus_t syevd_one(sp_cuda_solver_slot *slot, int i, void *ctx)
{
    const eig_batch *b = (const eig_batch *)ctx;
    const size_t nn = (size_t)b->n * (size_t)b->n;
    /* row-major symmetric = column-major symmetric: no transpose */
    return cusolverDnXsyevd(slot->handle, slot->params, CUSOLVER_EIG_MODE_NOVECTOR, CUBLAS_FILL_MODE_LOWER, b->n,
                            CUDA_R_64F, b->a + i * nn, b->n, CUDA_R_64F, b->w + (size_t)i * b->n, CUDA_R_64F,
                            slot->work, slot->work_bytes, slot->host_work, slot->host_work_bytes, b->info + i);
}

/* Eigenvalues, descending, of count symmetric n x n matrices; `what` names them in errors ("matrix"
 * for the table's op, the Gram matrices for singvals). */
static sp_status eigvals_batch(int n, int count, double *a, double *w, const char *what)
{
    if (n <= 0 || count <= 0)
        return SP_OK;
    sp_cuda_solver_slot *slots = sp_cuda_solver_slots();
    if (!slots)
        return SP_ERR_INTERNAL;
    const int n_slots = count < SP_CUDA_SOLVER_STREAMS ? count : SP_CUDA_SOLVER_STREAMS;
    for (int s = 0; s < n_slots; s++) {
        size_t device_bytes = 0, host_bytes = 0;
        if (!SP_CUSOLVER_CHECK(cusolverDnXsyevd_bufferSize(slots[s].handle, slots[s].params,
                                                           CUSOLVER_EIG_MODE_NOVECTOR, CUBLAS_FILL_MODE_LOWER, n,
                                                           CUDA_R_64F, a, n, CUDA_R_64F, w, CUDA_R_64F, &device_bytes,
                                                           &host_bytes)))
            return SP_ERR_INTERNAL;
        if (!sp_cuda_solver_reserve(&slots[s], device_bytes, host_bytes))
            return SP_ERR_NOMEM;
    }
    int *info_dev = (int *)sp_cuda_alloc((size_t)count * sizeof(int), "cuSOLVER info flags");
    if (!info_dev)
        return SP_ERR_NOMEM;
    eig_batch batch = {n, a, w, info_dev};
    char label[96];
    snprintf(label, sizeof label, "cusolverDnXsyevd of %d x %d %s", n, n, what);
    sp_status st = SP_ERR_INTERNAL;
    int info = 0;
    if (sp_cuda_solver_run(count, syevd_one, &batch, label)) {
        int failed = first_failed_item(count, info_dev, &info);
        if (failed >= 0)
            st = sp_error(SP_ERR_NUMERIC, "symmetric eigenvalues of %d x %d %s %d of %d failed (cuSOLVER Xsyevd info %d)",
                          n, n, what, failed, count, info);
        else if (failed == -1 && reverse_each(n, count, w))
            st = first_nonfinite_matrix(n, count, w, what);
    }
    sp_cuda_free(info_dev);
    return st;
}

sp_status sp_cuda_sym_eigvals(int n, int count, double *a, double *w)
{
    return eigvals_batch(n, count, a, w, "matrix");
}

/* ---- singular values ---- */
typedef struct {
    int rows, cols; /* column-major, rows >= cols */
    double **a, **s;
    int *info;
} svd_batch;

static cusolverStatus_t gesvd_one(sp_cuda_solver_slot *slot, int item, void *ctx)
{
    const svd_batch *b = (const svd_batch *)ctx;
    /* values only: U and VT are not referenced, their leading dimensions are the smallest valid ones */
    return cusolverDnXgesvd(slot->handle, slot->params, 'N', 'N', b->rows, b->cols, CUDA_R_64F, b->a[item], b->rows,
                            CUDA_R_64F, b->s[item], CUDA_R_64F, NULL, b->rows, CUDA_R_64F, NULL, b->cols, CUDA_R_64F,
                            slot->work, slot->work_bytes, slot->host_work, slot->host_work_bytes, b->info + item);
}

/* cusolverDnXgesvd on the row-major m x n matrices `matrix[0..n_items)` of a (destroyed), each into
 * s + matrix * min(m, n). gesvd wants rows >= cols (column-major): the row-major m x n matrix is the
 * column-major n x m one, used in place when n >= m and transposed into a temporary otherwise. */
static sp_status gesvd_items(int m, int n, const int *matrix, int n_items, double *a, double *s)
{
    sp_cuda_solver_slot *slots = sp_cuda_solver_slots();
    if (!slots)
        return SP_ERR_INTERNAL;
    const size_t mn = (size_t)m * (size_t)n, k = (size_t)(m < n ? m : n);
    const bool transpose = n < m;
    double **a_items = (double **)malloc(2 * (size_t)n_items * sizeof(double *));
    double *transposed = transpose ? (double *)sp_cuda_alloc((size_t)n_items * mn * sizeof(double),
                                                               "transposed matrices for cuSOLVER gesvd")
                                   : NULL;
    int *info_dev = (int *)sp_cuda_alloc((size_t)n_items * sizeof(int), "cuSOLVER info flags");
    sp_status st = SP_ERR_NOMEM;
    if (!a_items)
        sp_error(SP_ERR_NOMEM, "out of memory listing %d matrices for cuSOLVER gesvd", n_items);
    if (!a_items || (transpose && !transposed) || !info_dev)
        goto done;
    {
        double **s_items = a_items + n_items;
        st = SP_ERR_INTERNAL;
        for (int j = 0; j < n_items; j++) {
            double *src = a + (size_t)matrix[j] * mn;
            a_items[j] = transpose ? transposed + (size_t)j * mn : src;
            s_items[j] = s + (size_t)matrix[j] * k;
            if (transpose && !sp_cuda_transpose_f64(m, n, src, a_items[j]))
                goto done;
        }
        svd_batch batch = {transpose ? m : n, transpose ? n : m, a_items, s_items, info_dev};
        const int n_slots = n_items < SP_CUDA_SOLVER_STREAMS ? n_items : SP_CUDA_SOLVER_STREAMS;
        for (int t = 0; t < n_slots; t++) {
            size_t device_bytes = 0, host_bytes = 0;
            if (!SP_CUSOLVER_CHECK(cusolverDnXgesvd_bufferSize(
                    slots[t].handle, slots[t].params, 'N', 'N', batch.rows, batch.cols, CUDA_R_64F, a_items[0],
                    batch.rows, CUDA_R_64F, s_items[0], CUDA_R_64F, NULL, batch.rows, CUDA_R_64F, NULL, batch.cols,
                    CUDA_R_64F, &device_bytes, &host_bytes)))
                goto done;
            if (!sp_cuda_solver_reserve(&slots[t], device_bytes, host_bytes)) {
                st = SP_ERR_NOMEM;
                goto done;
            }
        }
        char label[96];
        snprintf(label, sizeof label, "cusolverDnXgesvd of %d x %d matrices", m, n);
        if (!sp_cuda_solver_run(n_items, gesvd_one, &batch, label))
            goto done;
        int info = 0, failed = first_failed_item(n_items, info_dev, &info);
        if (failed >= 0)
            st = sp_error(SP_ERR_NUMERIC, "singular values of %d x %d matrix %d failed (cuSOLVER Xgesvd info %d)", m, n,
                          matrix[failed], info);
        else if (failed == -1)
            st = SP_OK;
    }
done:
    free(a_items);
    sp_cuda_free(transposed);
    sp_cuda_free(info_dev);
    return st;
}

/* The matrices whose Gram eigenvalues (descending, k per matrix, on the device) have
 * lambda_min <= GRAM_RATIO_MIN * lambda_max, into matrix[] (host, count entries) and *n_found.
 * A NaN at either end also sends the matrix to gesvd (review fix: the comparison was false for NaN,
 * so a NaN spectrum kept the Gram route). */
static sp_status ill_conditioned(int k, int count, const double *lambda_dev, int *matrix, int *n_found)
{
    double *lambda = host_copy(lambda_dev, (size_t)count * (size_t)k, "Gram eigenvalues");
    if (!lambda)
        return sp_error_code();
    *n_found = 0;
    for (int i = 0; i < count; i++) {
        const double *l = lambda + (size_t)i * k;
        if (!(l[k - 1] > GRAM_RATIO_MIN * l[0]))
            matrix[(*n_found)++] = i;
    }
    free(lambda);
    return SP_OK;
}

sp_status sp_cuda_singvals(int m, int n, int count, double *a, double *s)
{
    if (m <= 0 || n <= 0 || count <= 0)
        return SP_OK;
    const int k = m < n ? m : n;
    const long long mn = (long long)m * n, kk = (long long)k * k;
    double *gram = (double *)sp_cuda_alloc((size_t)count * (size_t)kk * sizeof(double), "Gram matrices for singvals");
    if (!gram)
        return SP_ERR_NOMEM;
    /* G = A A^T (m <= n) or A^T A, k x k, for every matrix in one strided-batched dgemm */
    bool gemm_ok = m <= n ? sp_cuda_gemm_f64_strided(0, 1, m, m, n, 1.0, a, n, mn, a, n, mn, 0.0, gram, m, kk, count)
                          : sp_cuda_gemm_f64_strided(1, 0, n, n, m, 1.0, a, n, mn, a, n, mn, 0.0, gram, n, kk, count);
    sp_status st = gemm_ok ? eigvals_batch(k, count, gram, s, "Gram matrix (singvals)") : SP_ERR_INTERNAL;
    sp_cuda_free(gram);
    if (st != SP_OK)
        return st;

    int *matrix = (int *)malloc((size_t)count * sizeof *matrix);
    if (!matrix)
        return sp_error(SP_ERR_NOMEM, "out of memory listing %d matrices for singvals", count);
    int n_redo = 0;
    st = ill_conditioned(k, count, s, matrix, &n_redo);
    if (st == SP_OK) {
        const size_t n_values = (size_t)count * (size_t)k;
        sqrt_clamped_kernel<<<sp_cuda_blocks(n_values), SP_CUDA_THREADS>>>(n_values, s);
        if (!SP_CUDA_CHECK_LAUNCH("sqrt_clamped_kernel"))
            st = SP_ERR_INTERNAL;
        else if (n_redo > 0) /* A is still intact: the Gram route only read it */
            st = gesvd_items(m, n, matrix, n_redo, a, s);
    }
    free(matrix);
    return st;
}

/* kernels/cuda/cuda_blas.cu: gemm through cuBLAS (row-major on a column-major library) in float and
 * double, an fp64 transpose, and the two vector updates axpby and scale.
 *
 * Precision: plain fp32 (CUBLAS_DEFAULT_MATH, no tensor-core rounding). With SPANPROBE_TF32=1 in the
 * environment when the backend starts, cuBLAS may round the operands to TF32 on the tensor cores:
 * several times faster on Hopper, about 1e-3 relative error instead of 1e-6 (docs/cuda.md). The TF32
 * math mode only concerns single-precision routines: cublasDgemm and cublasDgeam stay full fp64. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_ops.h"

static cublasHandle_t blas_handle;

/* Silent on failure: sp_backend_cuda() then reports no usable GPU without touching the error state. */
bool sp_cuda_blas_init(void)
{
    if (cublasCreate(&blas_handle) != CUBLAS_STATUS_SUCCESS)
        return false;
    const char *tf32 = getenv("SPANPROBE_TF32");
    cublasMath_t mode = tf32 && strcmp(tf32, "1") == 0 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
    if (cublasSetMathMode(blas_handle, mode) != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(blas_handle);
        return false;
    }
    return true;
}

static cublasStatus_t gemm_strided_batched(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
                                           const float *alpha, const float *a, int lda, long long stride_a,
                                           const float *b, int ldb, long long stride_b, const float *beta, float *c,
                                           int ldc, long long stride_c, int batch)
{
    return cublasSgemmStridedBatched(blas_handle, op_a, op_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
                                     beta, c, ldc, stride_c, batch);
}

static cublasStatus_t gemm_strided_batched(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
                                           const double *alpha, const double *a, int lda, long long stride_a,
                                           const double *b, int ldb, long long stride_b, const double *beta,
                                           double *c, int ldc, long long stride_c, int batch)
{
    return cublasDgemmStridedBatched(blas_handle, op_a, op_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
                                     beta, c, ldc, stride_c, batch);
}

/* A row-major matrix is its column-major transpose, so the row-major C = op(A) op(B) is computed as
 * the column-major C^T = op(B)^T op(A)^T: operands swapped, m and n swapped, the flags unchanged.
 * With beta = 0 cuBLAS does not read C, so NaN there is overwritten; k = 0 gives C = beta C. */
template <typename T>
static bool gemm_row_major(int trans_a, int trans_b, int m, int n, int k, T alpha, const T *a, int lda,
                           long long stride_a, const T *b, int ldb, long long stride_b, T beta, T *c, int ldc,
                           long long stride_c, int batch)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return true;
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    return SP_CUBLAS_CHECK(gemm_strided_batched(op_b, op_a, n, m, k, &alpha, b, ldb, stride_b, a, lda, stride_a, &beta, c,
                                         ldc, stride_c, batch));
}

void sp_cuda_gemm_strided(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                          long long stride_a, const float *b, int ldb, long long stride_b, float beta, float *c,
                          int ldc, long long stride_c, int batch)
{
    gemm_row_major(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                   batch);
}

void sp_cuda_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc)
{
    gemm_row_major(trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

bool sp_cuda_gemm_f64_strided(int trans_a, int trans_b, int m, int n, int k, double alpha, const double *a, int lda,
                              long long stride_a, const double *b, int ldb, long long stride_b, double beta, double *c,
                              int ldc, long long stride_c, int batch)
{
    return gemm_row_major(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                   batch);
}

void sp_cuda_gemm_f64(int trans_a, int trans_b, int m, int n, int k, double alpha, const double *a, int lda,
                      const double *b, int ldb, double beta, double *c, int ldc)
{
    gemm_row_major(trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

/* Row-major src [rows x cols] is the column-major [cols x rows] matrix with ld cols; geam writes its
 * transpose as column-major [rows x cols] (ld rows), which is row-major [cols x rows]. With beta = 0
 * B is not read; passing dst as B with ldb = ldc is geam's documented in-place form. */
bool sp_cuda_transpose_f64(int rows, int cols, const double *src, double *dst)
{
    if (rows <= 0 || cols <= 0)
        return true;
    const double one = 1.0, zero = 0.0;
    return SP_CUBLAS_CHECK(cublasDgeam(blas_handle, CUBLAS_OP_T, CUBLAS_OP_N, rows, cols, &one, src, cols, &zero, dst, rows,
                                dst, rows));
}

static __global__ void axpby_kernel(size_t n, float a, const float *x, float b, float *y)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        y[i] = b == 0.0f ? a * x[i] : a * x[i] + b * y[i]; /* b = 0 never reads y (it may hold NaN) */
    }
}

void sp_cuda_axpby(size_t n, float a, const float *x, float b, float *y)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(axpby_kernel, n, a, x, b, y);
}

static __global__ void scale_kernel(size_t n, float a, float *x)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        x[i] *= a;
    }
}

void sp_cuda_scale(size_t n, float a, float *x)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(scale_kernel, n, a, x);
}

/* kernels/cuda/cuda_reduce.cu: sumsq, dot and count_nonfinite, accumulated in double.
 *
 * Two passes with a fixed shape: a grid whose size depends only on n writes one partial per block
 * (each thread sums a fixed strided subset, then a fixed tree), and one block adds the partials in
 * order. No atomics, so the result is the same bits on every run and on every GPU model. */
#include <math.h>

#include "kernels/cuda/cuda_ops.h"

#define REDUCE_MAX_BLOCKS 1024

struct sumsq_term {
    const float *x;
    __device__ double operator()(size_t i) const { return (double)x[i] * x[i]; }
};

struct dot_term {
    const float *x, *y;
    __device__ double operator()(size_t i) const { return (double)x[i] * y[i]; }
};

/* Counts are exact in double up to 2^53 elements. */
struct nonfinite_term {
    const float *x;
    __device__ double operator()(size_t i) const { return isfinite(x[i]) ? 0.0 : 1.0; }
};

template <typename Term> static __global__ void partial_sums_kernel(size_t n, Term term, double *partials)
{
    double acc = 0;
    SP_CUDA_GRID_STRIDE(i, n)
    {
        acc += term(i);
    }
    acc = sp_cuda_block_reduce(acc, sp_cuda_add());
    if (threadIdx.x == 0)
        partials[blockIdx.x] = acc;
}

static __global__ void finish_sum_kernel(unsigned n_partials, const double *partials, double *total)
{
    double acc = 0;
    for (unsigned i = threadIdx.x; i < n_partials; i += blockDim.x)
        acc += partials[i];
    acc = sp_cuda_block_reduce(acc, sp_cuda_add());
    if (threadIdx.x == 0)
        *total = acc;
}

/* The sum of term(i) over i < n, or NaN when a CUDA call failed (the error is recorded). */
template <typename Term> static double reduce_sum(size_t n, Term term)
{
    if (n == 0)
        return 0;
    unsigned blocks = sp_cuda_blocks(n);
    if (blocks > REDUCE_MAX_BLOCKS)
        blocks = REDUCE_MAX_BLOCKS;
    double *partials = (double *)sp_cuda_scratch((blocks + 1) * sizeof(double), "reduction partials");
    if (!partials)
        return NAN;
    double *total = partials + blocks, result = NAN;
    partial_sums_kernel<<<blocks, SP_CUDA_THREADS>>>(n, term, partials);
    if (!SP_CUDA_CHECK_LAUNCH("partial_sums_kernel"))
        return NAN;
    finish_sum_kernel<<<1, SP_CUDA_THREADS>>>(blocks, partials, total);
    if (!SP_CUDA_CHECK_LAUNCH("finish_sum_kernel"))
        return NAN;
    if (!SP_CUDA_CHECK(cudaMemcpy(&result, total, sizeof result, cudaMemcpyDeviceToHost)))
        return NAN;
    return result;
}

double sp_cuda_sumsq(size_t n, const float *x) { return reduce_sum(n, sumsq_term{x}); }

double sp_cuda_dot(size_t n, const float *x, const float *y) { return reduce_sum(n, dot_term{x, y}); }

size_t sp_cuda_count_nonfinite(size_t n, const float *x)
{
    double count = reduce_sum(n, nonfinite_term{x});
    /* a failed CUDA call counts every element as non-finite, so callers never trust the data */
    return isnan(count) ? n : (size_t)count;
}

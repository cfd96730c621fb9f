/* kernels/cuda/cuda_xent.cu: softmax cross-entropy over logits [rows, vocab], one block per row, with a
 * max-shifted log-sum-exp in double. Rows whose target is < 0 are ignored (loss 0, no gradient). */
#include "kernels/cuda/cuda_ops.h"

/* max_j z_j and log sum_j exp(z_j - max) of one row; called by the whole block. */
static __device__ void row_logsumexp(int vocab, const float *z, double *max_out, double *lse_shifted)
{
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x)
        mx = fmaxf(mx, z[j]);
    mx = sp_cuda_block_reduce(mx, sp_cuda_max());
    double sum = 0;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x)
        sum += exp((double)z[j] - mx);
    *max_out = mx;
    *lse_shifted = log(sp_cuda_block_reduce(sum, sp_cuda_add()));
}

static __global__ void xent_fwd_kernel(int vocab, const float *logits, const int32_t *targets, float *losses)
{
    const int row = blockIdx.x, t = targets[row];
    if (t < 0) { /* uniform over the block: every thread leaves */
        if (threadIdx.x == 0)
            losses[row] = 0;
        return;
    }
    const float *z = logits + (size_t)row * vocab;
    double mx, lse;
    row_logsumexp(vocab, z, &mx, &lse);
    if (threadIdx.x == 0)
        losses[row] = (float)(lse - ((double)z[t] - mx));
}

static __global__ void xent_bwd_kernel(int vocab, const float *logits, const int32_t *targets, float scale,
                                       float *dlogits)
{
    const int row = blockIdx.x, t = targets[row];
    if (t < 0)
        return;
    const float *z = logits + (size_t)row * vocab;
    float *dz = dlogits + (size_t)row * vocab;
    double mx, lse;
    row_logsumexp(vocab, z, &mx, &lse);
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
        double prob = exp((double)z[j] - mx - lse);
        dz[j] += (float)(scale * (prob - (j == t ? 1.0 : 0.0)));
    }
}

void sp_cuda_xent_fwd(int rows, int vocab, const float *logits, const int32_t *targets, float *losses)
{
    if (rows <= 0)
        return;
    xent_fwd_kernel<<<rows, SP_CUDA_THREADS>>>(vocab, logits, targets, losses);
    SP_CUDA_CHECK_LAUNCH("xent_fwd_kernel");
}

void sp_cuda_xent_bwd(int rows, int vocab, const float *logits, const int32_t *targets, float scale,
                      float *dlogits)
{
    if (rows <= 0)
        return;
    xent_bwd_kernel<<<rows, SP_CUDA_THREADS>>>(vocab, logits, targets, scale, dlogits);
    SP_CUDA_CHECK_LAUNCH("xent_bwd_kernel");
}

/* The tangent of xent_bwd: tdz += scale P (tz - rowsum(P tz)). */
static __global__ void xent_bwd_jvp_kernel(int vocab, const float *logits, const int32_t *targets, float scale,
                                           const float *tlogits, float *tdlogits)
{
    const int row = blockIdx.x;
    if (targets[row] < 0)
        return;
    const float *z = logits + (size_t)row * vocab, *tz = tlogits + (size_t)row * vocab;
    double mx, lse, mean_t = 0;
    row_logsumexp(vocab, z, &mx, &lse);
    for (int j = threadIdx.x; j < vocab; j += blockDim.x)
        mean_t += exp((double)z[j] - mx - lse) * tz[j];
    mean_t = sp_cuda_block_reduce(mean_t, sp_cuda_add());
    for (int j = threadIdx.x; j < vocab; j += blockDim.x)
        tdlogits[(size_t)row * vocab + j] += (float)(scale * exp((double)z[j] - mx - lse) * (tz[j] - mean_t));
}

void sp_cuda_xent_bwd_jvp(int rows, int vocab, const float *logits, const int32_t *targets, float scale,
                          const float *tlogits, float *tdlogits)
{
    if (rows <= 0)
        return;
    xent_bwd_jvp_kernel<<<rows, SP_CUDA_THREADS>>>(vocab, logits, targets, scale, tlogits, tdlogits);
    SP_CUDA_CHECK_LAUNCH("xent_bwd_jvp_kernel");
}

/* kernels/cpu/cpu_xent.c: softmax cross-entropy over logits [rows, vocab], one row per thread
 * item, with a max-shifted log-sum-exp in double. Rows whose target is < 0 are ignored. */
#include <assert.h>
#include <math.h>

#include "kernels/cpu/cpu_ops.h"

/* max_j z_j and log sum_j exp(z_j - max) of one row. */
static void row_logsumexp(int vocab, const sp_real *z, double *max_out, double *lse_shifted)
{
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < vocab; j++)
        if (z[j] > mx)
            mx = z[j];
    for (int j = 0; j < vocab; j++)
        sum += exp((double)z[j] - mx);
    *max_out = mx;
    *lse_shifted = log(sum);
}

void sp_cpu_xent_fwd(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real *losses)
{
#pragma omp parallel for schedule(dynamic, sp_cpu_row_chunk(vocab)) if ((size_t)rows * vocab >= SP_CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        int32_t t = targets[r];
        assert(t < vocab); /* the data loader validates token ids */
        if (t < 0) {
            losses[r] = 0;
            continue;
        }
        const sp_real *z = logits + (size_t)r * vocab;
        double mx, lse;
        row_logsumexp(vocab, z, &mx, &lse);
        losses[r] = (sp_real)(lse - ((double)z[t] - mx));
    }
}

void sp_cpu_xent_bwd(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real scale,
                     sp_real *dlogits)
{
#pragma omp parallel for schedule(dynamic, sp_cpu_row_chunk(vocab)) if ((size_t)rows * vocab >= SP_CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        int32_t t = targets[r];
        assert(t < vocab);
        if (t < 0)
            continue;
        const sp_real *z = logits + (size_t)r * vocab;
        sp_real *dz = dlogits + (size_t)r * vocab;
        double mx, lse;
        row_logsumexp(vocab, z, &mx, &lse);
        for (int j = 0; j < vocab; j++) {
            double prob = exp((double)z[j] - mx - lse);
            dz[j] += (sp_real)(scale * (prob - (j == t ? 1.0 : 0.0)));
        }
    }
}

/* The tangent of xent_bwd: the gradient scale (softmax - onehot) moves by the softmax JVP. */
void sp_cpu_xent_bwd_jvp(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real scale,
                         const sp_real *tlogits, sp_real *tdlogits)
{
#pragma omp parallel for schedule(dynamic, sp_cpu_row_chunk(vocab)) if ((size_t)rows * vocab >= SP_CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        if (targets[r] < 0)
            continue;
        const size_t off = (size_t)r * vocab;
        double mx, lse, mean_t = 0;
        row_logsumexp(vocab, logits + off, &mx, &lse);
        for (int j = 0; j < vocab; j++)
            mean_t += exp((double)logits[off + j] - mx - lse) * tlogits[off + j];
        for (int j = 0; j < vocab; j++) {
            const double prob = exp((double)logits[off + j] - mx - lse);
            tdlogits[off + j] += (sp_real)(scale * prob * ((double)tlogits[off + j] - mean_t));
        }
    }
}

/* kernels/cuda/cuda_attention_hvp.cu: the tangent of the attention backward pass (attn_bwd_jvp), the
 * formulas of kernels/cpu/cpu_attention_hvp.c:
 *   dP = dout v^T, r = rowsum(P dP), dS = P (dP - r), dZ = S' dS;
 *   tZ = scale (tq k^T + q tk^T), tP = P (S' tZ - rowsum(P S' tZ)), tdP = tdout v^T + dout tv^T,
 *   tdS = tP (dP - r) + P (tdP - rowsum(tP dP + P tdP)), tdZ = S' tdS - 2 (S / c^2) S' tZ dS;
 *   tdq += scale (tdZ k + dZ tk), tdk += scale (tdZ^T q + dZ^T tq), tdv += tP^T dout + P^T tdout.
 * Two plain kernels in double, deterministic without atomics: one block per query row writes that
 * row's dZ, tdZ and tP into scratch (three arrays of the size of `saved`, zeros where masked) and its
 * tdq; then one thread per (sequence, kv head, key, column) sums its tdk and tdv entries over the
 * group's heads and the queries in order. The analyzers call it a few hundred times per block. */
#include "kernels/cuda/cuda_ops.h"

typedef struct {
    int batch, seq_len, n_heads, group, head_dim, ldq, ldkv, window;
    double scale, softcap;
} hvp_dims;

static __device__ double dot_dev(int n, const float *a, const float *b)
{
    double s = 0;
    for (int t = 0; t < n; t++)
        s += (double)a[t] * b[t];
    return s;
}

/* One block per (sequence b, head h, query i). */
static __global__ void rows_kernel(hvp_dims s, const float *q, const float *k, const float *v, const float *p,
                                   const float *tq, const float *tk, const float *tv, const float *dout,
                                   const float *tdout, float *tdq, double *dz, double *tdz, double *tp)
{
    const int n = s.seq_len, i = blockIdx.x % n, h = (blockIdx.x / n) % s.n_heads, b = blockIdx.x / (n * s.n_heads);
    const int hd = s.head_dim, lo = s.window > 0 && i >= s.window ? i - s.window + 1 : 0;
    const size_t qi = ((size_t)b * n + i) * s.ldq + (size_t)h * hd, kv0 = (size_t)b * n * s.ldkv + (size_t)(h / s.group) * hd;
    const size_t row = (((size_t)b * s.n_heads + h) * n + i) * n;
    const float *pr = p + row;
    double r = 0, mean_ts = 0;
    for (int j = lo + threadIdx.x; j <= i; j += blockDim.x) { /* dP, tdP and S' tZ into the scratch rows */
        const size_t kj = kv0 + (size_t)j * s.ldkv;
        const double th = s.softcap > 0 ? tanh(s.scale * dot_dev(hd, q + qi, k + kj) / s.softcap) : 0.0;
        const double tz = s.scale * (dot_dev(hd, tq + qi, k + kj) + dot_dev(hd, q + qi, tk + kj));
        dz[row + j] = dot_dev(hd, dout + qi, v + kj);
        tdz[row + j] = dot_dev(hd, tdout + qi, v + kj) + dot_dev(hd, dout + qi, tv + kj);
        tp[row + j] = (1.0 - th * th) * tz;
        r += pr[j] * dz[row + j];
        mean_ts += pr[j] * tp[row + j];
    }
    r = sp_cuda_block_reduce(r, sp_cuda_add());
    mean_ts = sp_cuda_block_reduce(mean_ts, sp_cuda_add());
    double tr = 0;
    for (int j = lo + threadIdx.x; j <= i; j += blockDim.x) {
        tp[row + j] = pr[j] * (tp[row + j] - mean_ts);
        tr += tp[row + j] * dz[row + j] + pr[j] * tdz[row + j];
    }
    tr = sp_cuda_block_reduce(tr, sp_cuda_add());
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        if (j < lo || j > i) {
            dz[row + j] = tdz[row + j] = tp[row + j] = 0;
            continue;
        }
        const size_t kj = kv0 + (size_t)j * s.ldkv;
        const double th = s.softcap > 0 ? tanh(s.scale * dot_dev(hd, q + qi, k + kj) / s.softcap) : 0.0;
        const double slope = 1.0 - th * th, dp = dz[row + j], tdp = tdz[row + j];
        const double ds = pr[j] * (dp - r), tds = tp[row + j] * (dp - r) + pr[j] * (tdp - tr);
        double t = slope * tds;
        if (s.softcap > 0)
            t -= 2.0 * th / s.softcap * slope * s.scale * (dot_dev(hd, tq + qi, k + kj) + dot_dev(hd, q + qi, tk + kj)) * ds;
        dz[row + j] = slope * ds;
        tdz[row + j] = t;
    }
    __syncthreads();
    for (int c = threadIdx.x; c < hd; c += blockDim.x) {
        double acc = 0;
        for (int j = lo; j <= i; j++) {
            const size_t kj = kv0 + (size_t)j * s.ldkv + c;
            acc += tdz[row + j] * k[kj] + dz[row + j] * tk[kj];
        }
        tdq[qi + c] += (float)(s.scale * acc);
    }
}

/* One thread per (sequence, kv head, key j, column c). */
static __global__ void keys_kernel(hvp_dims s, const float *q, const float *p, const float *tq, const float *dout,
                                   const float *tdout, const double *dz, const double *tdz, const double *tp,
                                   float *tdk, float *tdv)
{
    const int n = s.seq_len, hd = s.head_dim, n_kv = s.n_heads / s.group;
    const size_t total = (size_t)s.batch * n_kv * n * hd;
    SP_CUDA_GRID_STRIDE(e, total)
    {
        const int c = (int)(e % hd), j = (int)(e / hd % n), g = (int)(e / ((size_t)hd * n) % n_kv);
        const int b = (int)(e / ((size_t)hd * n * n_kv));
        double acc_k = 0, acc_v = 0;
        for (int h = g * s.group; h < (g + 1) * s.group; h++)
            for (int i = j; i < n; i++) {
                const size_t at = (((size_t)b * s.n_heads + h) * n + i) * n + j;
                const size_t qi = ((size_t)b * n + i) * s.ldq + (size_t)h * hd + c;
                acc_k += tdz[at] * q[qi] + dz[at] * tq[qi];
                acc_v += tp[at] * dout[qi] + p[at] * tdout[qi];
            }
        const size_t kj = ((size_t)b * n + j) * s.ldkv + (size_t)g * hd + c;
        tdk[kj] += (float)(s.scale * acc_k);
        tdv[kj] += (float)acc_v;
    }
}

void sp_cuda_attn_bwd_jvp(const sp_attn_shape *shape, const float *q, const float *k, const float *v,
                          const float *saved, const float *tq, const float *tk, const float *tv, const float *dout,
                          const float *tdout, float *tdq, float *tdk, float *tdv)
{
    const hvp_dims s = {shape->batch, shape->seq_len, shape->n_heads, shape->n_heads / shape->n_kv_heads,
                        shape->head_dim, shape->n_heads * shape->head_dim, shape->n_kv_heads * shape->head_dim,
                        shape->window, shape->scale, shape->softcap};
    const size_t n_p = (size_t)s.batch * s.n_heads * s.seq_len * s.seq_len;
    if (n_p == 0)
        return;
    double *dz = (double *)sp_cuda_scratch(3 * n_p * sizeof(double), "attention tangent scratch");
    if (!dz)
        return;
    double *tdz = dz + n_p, *tp = dz + 2 * n_p;
    const unsigned rows = (unsigned)(s.batch * s.n_heads * s.seq_len);
    rows_kernel<<<rows, SP_CUDA_THREADS>>>(s, q, k, v, saved, tq, tk, tv, dout, tdout, tdq, dz, tdz, tp);
    if (!SP_CUDA_CHECK_LAUNCH("attn_bwd_jvp rows_kernel"))
        return;
    const size_t n_kv_elems = (size_t)s.batch * shape->n_kv_heads * s.seq_len * s.head_dim;
    keys_kernel<<<sp_cuda_blocks(n_kv_elems), SP_CUDA_THREADS>>>(s, q, saved, tq, dout, tdout, dz, tdz, tp, tdk, tdv);
    SP_CUDA_CHECK_LAUNCH("attn_bwd_jvp keys_kernel");
}

/* kernels/cuda/cuda_attention_at.cu: the attention JVP at one query position t for tangents that
 * live at t alone (backend.h, attn_jvp_at), the twin of kernels/cpu/cpu_attention_at.c.
 *
 * One block per (tangent j, query head h): its threads take the visible keys s of row t in turn
 * for tS_s = S'_s scale (tq_j . k_s + [s = t] q_t . tk_j), kept in a scratch row; a block sum gives
 * sum_s P_s tS_s; then its threads take the head's features i for
 * tout_j[i] = P_t tv_j[i] + sum_s P_s (tS_s - that sum) v_s[i]. Sums in double. */
#include "kernels/cuda/cuda_ops.h"

__global__ void attn_jvp_at_kernel(int n_heads, int group, int hd, int seq_len, int t, int lo, double scale,
                                   double cap, const float *q, const float *k, const float *v, const float *saved,
                                   const float *tq, const float *tk, const float *tv, double *ts, float *tout)
{
    const int j = blockIdx.x / n_heads, h = blockIdx.x % n_heads, g = h / group;
    const int ldq = n_heads * hd, ldkv = n_heads / group * hd, keys = t - lo + 1;
    const float *p = saved + ((size_t)h * seq_len + t) * seq_len; /* sequence 0, row t */
    const float *qt = q + (size_t)t * ldq + (size_t)h * hd, *tqj = tq + (size_t)j * ldq + (size_t)h * hd;
    const float *tkj = tk + (size_t)j * ldkv + (size_t)g * hd, *tvj = tv + (size_t)j * ldkv + (size_t)g * hd;
    double *row = ts + (size_t)blockIdx.x * keys;
    double part = 0;
    for (int s = lo + threadIdx.x; s <= t; s += blockDim.x) {
        const float *ks = k + (size_t)s * ldkv + (size_t)g * hd;
        double a = 0, z = 0;
        for (int i = 0; i < hd; i++) {
            a += (double)tqj[i] * ks[i];
            z += (double)qt[i] * ks[i];
        }
        if (s == t)
            for (int i = 0; i < hd; i++)
                a += (double)qt[i] * tkj[i];
        a *= scale;
        if (cap > 0) {
            const double th = tanh(scale * z / cap);
            a *= 1 - th * th;
        }
        row[s - lo] = a;
        part += (double)p[s] * a;
    }
    const double mean = sp_cuda_block_reduce(part, sp_cuda_add());
    __syncthreads(); /* every thread's row entries are written */
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        double acc = (double)p[t] * tvj[i];
        for (int s = lo; s <= t; s++)
            acc += (double)p[s] * (row[s - lo] - mean) * v[(size_t)s * ldkv + (size_t)g * hd + i];
        tout[(size_t)j * ldq + (size_t)h * hd + i] = (float)acc;
    }
}

void sp_cuda_attn_jvp_at(const sp_attn_shape *shape, const float *q, const float *k, const float *v,
                         const float *saved, int t, int n, const float *tq, const float *tk, const float *tv,
                         float *tout)
{
    if (n <= 0 || shape->n_heads <= 0 || shape->head_dim <= 0)
        return;
    const int lo = sp_cuda_attn_first_key(t, shape->window), blocks = n * shape->n_heads;
    double *ts = (double *)sp_cuda_scratch((size_t)blocks * (size_t)(t - lo + 1) * sizeof(double),
                                           "attention tangents at one position");
    if (!ts)
        return;
    attn_jvp_at_kernel<<<blocks, SP_CUDA_THREADS>>>(shape->n_heads, shape->n_heads / shape->n_kv_heads,
                                                    shape->head_dim, shape->seq_len, t, lo, shape->scale,
                                                    shape->softcap, q, k, v, saved, tq, tk, tv, ts, tout);
    SP_CUDA_CHECK_LAUNCH("attn_jvp_at_kernel");
}

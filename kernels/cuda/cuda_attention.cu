/* kernels/cuda/cuda_attention.cu: causal multi-head attention with grouped-query heads.
 *
 * For query head h of sequence b, kv head g = h / (n_heads / n_kv_heads), S = q k^T / sqrt(head_dim)
 * masked to keys j <= i: P = softmax(S) row-wise, out = P v. `saved` holds P as
 * [batch, n_heads, seq_len, seq_len] (zeros above the diagonal), like the CPU backend.
 *   Backward, with dP = dout v^T: dS = P * (dP - rowsum(P * dP)), dq += dS k / sqrt(hd),
 *     dk += dS^T q / sqrt(hd), dv += P^T dout.
 *   JVP, with tS = (tq k^T + q tk^T) / sqrt(hd): tout = P tv + (P * (tS - rowsum(P * tS))) v.
 * The softmax Jacobian is symmetric, so dS and the tangent of P come from one kernel.
 *
 * The products are cuBLAS strided-batched gemms, one call per query head batched over the sequences:
 * for a fixed head every operand (q/k/v columns, its P block) sits at a constant stride from one
 * sequence to the next, whatever the kv grouping. Heads that share a kv head add into dk/dv in head
 * order, one call after the other on the stream, so the sums have a fixed order. The backward pass
 * and the JVP need one scratch buffer of the size of `saved` for dS / tS. */
#include "kernels/cuda/cuda_ops.h"

/* Where each operand of one head lives: the head's column offset, the row stride (leading
 * dimension) and the stride between sequences, for the query side, the kv side and P. */
typedef struct {
    int batch, seq_len, n_heads, group, head_dim;
    int ld_q, ld_kv, ld_p;                /* row strides: n_heads*hd, n_kv_heads*hd, seq_len */
    long long seq_q, seq_kv, seq_p;       /* strides between sequences */
    size_t head_p;                        /* offset of head h's P block within a sequence: h * seq^2 */
    float scale;                          /* 1/sqrt(head_dim) */
} attn_layout;

static attn_layout make_layout(int batch, int seq_len, int n_heads, int n_kv_heads, int head_dim)
{
    attn_layout l;
    l.batch = batch;
    l.seq_len = seq_len;
    l.n_heads = n_heads;
    l.group = n_heads / n_kv_heads;
    l.head_dim = head_dim;
    l.ld_q = n_heads * head_dim;
    l.ld_kv = n_kv_heads * head_dim;
    l.ld_p = seq_len;
    l.seq_q = (long long)seq_len * l.ld_q;
    l.seq_kv = (long long)seq_len * l.ld_kv;
    l.head_p = (size_t)seq_len * seq_len;
    l.seq_p = (long long)n_heads * l.head_p;
    l.scale = (float)(1.0 / sqrt((double)head_dim));
    return l;
}

/* Column offset of head h on the query side and of its kv head on the kv side. */
static size_t q_col(const attn_layout *l, int h) { return (size_t)h * l->head_dim; }
static size_t kv_col(const attn_layout *l, int h) { return (size_t)(h / l->group) * l->head_dim; }

/* One gemm per operand pattern, batched over the sequences, for head h:
 * P-shaped result [seq, seq] = alpha * X_q(h) Y_kv(h)^T + beta * P-shaped. */
static void scores_gemm(const attn_layout *l, int h, float alpha, const float *xq, const float *ykv, float beta,
                        float *p)
{
    sp_cuda_gemm_strided(0, 1, l->seq_len, l->seq_len, l->head_dim, alpha, xq + q_col(l, h), l->ld_q, l->seq_q,
                         ykv + kv_col(l, h), l->ld_kv, l->seq_kv, beta, p + h * l->head_p, l->ld_p, l->seq_p,
                         l->batch);
}

/* Query-side result [seq, hd] = alpha * P(h) Y_kv(h) + beta * result. */
static void p_times_kv_gemm(const attn_layout *l, int h, float alpha, const float *p, const float *ykv, float beta,
                            float *out_q)
{
    sp_cuda_gemm_strided(0, 0, l->seq_len, l->head_dim, l->seq_len, alpha, p + h * l->head_p, l->ld_p, l->seq_p,
                         ykv + kv_col(l, h), l->ld_kv, l->seq_kv, beta, out_q + q_col(l, h), l->ld_q, l->seq_q,
                         l->batch);
}

/* kv-side result [seq, hd] += alpha * P(h)^T Y_q(h). */
static void pt_times_q_gemm(const attn_layout *l, int h, float alpha, const float *p, const float *yq, float *out_kv)
{
    sp_cuda_gemm_strided(1, 0, l->seq_len, l->head_dim, l->seq_len, alpha, p + h * l->head_p, l->ld_p, l->seq_p,
                         yq + q_col(l, h), l->ld_q, l->seq_q, 1.0f, out_kv + kv_col(l, h), l->ld_kv, l->seq_kv,
                         l->batch);
}

/* In place on the scores, one warp per row of every (sequence, head): causal softmax, in double. */
static __global__ void causal_softmax_kernel(int n_rows, int seq_len, float *s)
{
    const int row = blockIdx.x * SP_CUDA_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= n_rows)
        return;
    const int i = row % seq_len; /* the query position: keys 0..i are visible */
    float *sr = s + (size_t)row * seq_len;
    float mx = -INFINITY;
    for (int j = lane; j <= i; j += 32)
        mx = fmaxf(mx, sr[j]);
    mx = sp_cuda_warp_reduce(mx, sp_cuda_max());
    double denom = 0;
    for (int j = lane; j <= i; j += 32)
        denom += exp((double)sr[j] - mx);
    denom = sp_cuda_warp_reduce(denom, sp_cuda_add());
    for (int j = lane; j < seq_len; j += 32)
        sr[j] = j <= i ? (float)(exp((double)sr[j] - mx) / denom) : 0.0f;
}

/* In place on x: x <- P * (x - rowsum(P * x)) over the visible keys, 0 above the diagonal: the
 * softmax Jacobian applied to score gradients (backward) or score tangents (JVP). */
static __global__ void softmax_jacobian_kernel(int n_rows, int seq_len, const float *p, float *x)
{
    const int row = blockIdx.x * SP_CUDA_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= n_rows)
        return;
    const int i = row % seq_len;
    const float *pr = p + (size_t)row * seq_len;
    float *xr = x + (size_t)row * seq_len;
    double row_sum = 0;
    for (int j = lane; j <= i; j += 32)
        row_sum += (double)pr[j] * xr[j];
    row_sum = sp_cuda_warp_reduce(row_sum, sp_cuda_add());
    for (int j = lane; j < seq_len; j += 32)
        xr[j] = j <= i ? (float)(pr[j] * (xr[j] - row_sum)) : 0.0f;
}

static bool apply_softmax_jacobian(const attn_layout *l, const float *p, float *x)
{
    const int n_rows = l->batch * l->n_heads * l->seq_len;
    softmax_jacobian_kernel<<<sp_cuda_row_blocks(n_rows), SP_CUDA_THREADS>>>(n_rows, l->seq_len, p, x);
    return SP_CUDA_CHECK_LAUNCH("softmax_jacobian_kernel");
}

size_t sp_cuda_attn_saved_elems(int batch, int seq_len, int n_heads)
{
    return (size_t)batch * n_heads * seq_len * seq_len;
}

static bool attn_empty(int batch, int seq_len, int n_heads, int n_kv_heads, int head_dim)
{
    return batch <= 0 || seq_len <= 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0;
}

void sp_cuda_attn_fwd(int batch, int seq_len, int n_heads, int n_kv_heads, int head_dim, const float *q,
                      const float *k, const float *v, float *saved, float *out)
{
    if (attn_empty(batch, seq_len, n_heads, n_kv_heads, head_dim))
        return;
    const attn_layout l = make_layout(batch, seq_len, n_heads, n_kv_heads, head_dim);
    for (int h = 0; h < n_heads; h++)
        scores_gemm(&l, h, l.scale, q, k, 0.0f, saved);
    const int n_rows = batch * n_heads * seq_len;
    causal_softmax_kernel<<<sp_cuda_row_blocks(n_rows), SP_CUDA_THREADS>>>(n_rows, seq_len, saved);
    if (!SP_CUDA_CHECK_LAUNCH("causal_softmax_kernel"))
        return;
    for (int h = 0; h < n_heads; h++)
        p_times_kv_gemm(&l, h, 1.0f, saved, v, 0.0f, out);
}

void sp_cuda_attn_bwd(int batch, int seq_len, int n_heads, int n_kv_heads, int head_dim, const float *q,
                      const float *k, const float *v, const float *saved, const float *dout, float *dq, float *dk,
                      float *dv)
{
    if (attn_empty(batch, seq_len, n_heads, n_kv_heads, head_dim))
        return;
    const attn_layout l = make_layout(batch, seq_len, n_heads, n_kv_heads, head_dim);
    const size_t n_saved = sp_cuda_attn_saved_elems(batch, seq_len, n_heads);
    float *ds = (float *)sp_cuda_scratch(n_saved * sizeof(float), "attention score gradients");
    if (!ds)
        return;
    for (int h = 0; h < n_heads; h++) /* dP = dout v^T */
        scores_gemm(&l, h, 1.0f, dout, v, 0.0f, ds);
    if (!apply_softmax_jacobian(&l, saved, ds)) /* dS */
        return;
    for (int h = 0; h < n_heads; h++) {
        pt_times_q_gemm(&l, h, 1.0f, saved, dout, dv);
        p_times_kv_gemm(&l, h, l.scale, ds, k, 1.0f, dq);
        pt_times_q_gemm(&l, h, l.scale, ds, q, dk);
    }
}

void sp_cuda_attn_jvp(int batch, int seq_len, int n_heads, int n_kv_heads, int head_dim, const float *q,
                      const float *k, const float *v, const float *saved, const float *tq, const float *tk,
                      const float *tv, float *tout)
{
    if (attn_empty(batch, seq_len, n_heads, n_kv_heads, head_dim))
        return;
    const attn_layout l = make_layout(batch, seq_len, n_heads, n_kv_heads, head_dim);
    const size_t n_saved = sp_cuda_attn_saved_elems(batch, seq_len, n_heads);
    float *ts = (float *)sp_cuda_scratch(n_saved * sizeof(float), "attention score tangents");
    if (!ts)
        return;
    for (int h = 0; h < n_heads; h++) { /* tS = (tq k^T + q tk^T) / sqrt(hd) */
        scores_gemm(&l, h, l.scale, tq, k, 0.0f, ts);
        scores_gemm(&l, h, l.scale, q, tk, 1.0f, ts);
    }
    if (!apply_softmax_jacobian(&l, saved, ts)) /* the tangent of P */
        return;
    for (int h = 0; h < n_heads; h++) {
        p_times_kv_gemm(&l, h, 1.0f, ts, v, 0.0f, tout);
        p_times_kv_gemm(&l, h, 1.0f, saved, tv, 1.0f, tout);
    }
}

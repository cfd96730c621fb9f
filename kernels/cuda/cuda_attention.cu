/* kernels/cuda/cuda_attention.cu: causal multi-head attention with grouped-query heads, an optional
 * score soft-cap and an optional sliding window.
 *
 * For query head h of sequence b, kv head g = h / (n_heads / n_kv_heads), scores Z = scale q k^T,
 * S = c tanh(Z / c) with a soft-cap c (else S = Z), masked to the visible keys of query i (j <= i,
 * and i - j < window with a window): P = softmax(S) row-wise, out = P v. `saved` holds P as
 * [batch, n_heads, seq_len, seq_len] (zeros where masked), like the CPU backend.
 *   Backward, with dP = dout v^T: dS = P * (dP - rowsum(P * dP)), dZ = S' * dS with the soft-cap's
 *     slope S' = 1 - tanh^2(Z / c) (1 without), dq += scale dZ k, dk += scale dZ^T q, dv += P^T dout.
 *   JVP, with tS = S' * scale (tq k^T + q tk^T): tout = P tv + (P * (tS - rowsum(P * tS))) v.
 * The softmax Jacobian is symmetric, so dS and the tangent of P come from one kernel.
 *
 * The products are cuBLAS strided-batched gemms, one call per query head batched over the sequences:
 * for a fixed head every operand (q/k/v columns, its P block) sits at a constant stride from one
 * sequence to the next, whatever the kv grouping. Heads that share a kv head add into dk/dv in head
 * order, one call after the other on the stream, so the sums have a fixed order. The backward pass
 * and the JVP need one scratch buffer of the size of `saved` for dS / tS, and with a soft-cap a
 * second one for Z, recomputed from q and k. */
#include "kernels/cuda/cuda_ops.h"

/* Where each operand of one head lives: the head's column offset, the row stride (leading
 * dimension) and the stride between sequences, for the query side, the kv side and P. */
typedef struct {
    int batch, seq_len, n_heads, group, head_dim;
    int ld_q, ld_kv, ld_p;                /* row strides: n_heads*hd, n_kv_heads*hd, seq_len */
    long long seq_q, seq_kv, seq_p;       /* strides between sequences */
    size_t head_p;                        /* offset of head h's P block within a sequence: h * seq^2 */
    float scale;                          /* of the scores */
    double softcap;                       /* 0: off */
    int window;                           /* 0: causal only */
} attn_layout;

static attn_layout make_layout(const sp_attn_shape *shape)
{
    attn_layout l;
    l.batch = shape->batch;
    l.seq_len = shape->seq_len;
    l.n_heads = shape->n_heads;
    l.group = shape->n_heads / shape->n_kv_heads;
    l.head_dim = shape->head_dim;
    l.ld_q = shape->n_heads * shape->head_dim;
    l.ld_kv = shape->n_kv_heads * shape->head_dim;
    l.ld_p = shape->seq_len;
    l.seq_q = (long long)shape->seq_len * l.ld_q;
    l.seq_kv = (long long)shape->seq_len * l.ld_kv;
    l.head_p = (size_t)shape->seq_len * shape->seq_len;
    l.seq_p = (long long)shape->n_heads * l.head_p;
    l.scale = (float)shape->scale;
    l.softcap = shape->softcap;
    l.window = shape->window;
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

/* In place on the scores, one warp per row of every (sequence, head): soft-cap, masked softmax, in
 * double; 0 outside the visible keys. */
static __global__ void masked_softmax_kernel(int n_rows, int seq_len, double softcap, int window, float *s)
{
    const int row = blockIdx.x * SP_CUDA_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= n_rows)
        return;
    const int i = row % seq_len, lo = sp_cuda_attn_first_key(i, window); /* keys lo..i are visible */
    float *sr = s + (size_t)row * seq_len;
    if (softcap > 0)
        for (int j = lo + lane; j <= i; j += 32)
            sr[j] = (float)(softcap * tanh(sr[j] / softcap));
    __syncwarp();
    float mx = -INFINITY;
    for (int j = lo + lane; j <= i; j += 32)
        mx = fmaxf(mx, sr[j]);
    mx = sp_cuda_warp_reduce(mx, sp_cuda_max());
    double denom = 0;
    for (int j = lo + lane; j <= i; j += 32)
        denom += exp((double)sr[j] - mx);
    denom = sp_cuda_warp_reduce(denom, sp_cuda_add());
    for (int j = lane; j < seq_len; j += 32)
        sr[j] = j >= lo && j <= i ? (float)(exp((double)sr[j] - mx) / denom) : 0.0f;
}

/* In place on x: x <- P * (x - rowsum(P * x)) over the visible keys, 0 elsewhere: the softmax
 * Jacobian applied to score gradients (backward) or score tangents (JVP). */
static __global__ void softmax_jacobian_kernel(int n_rows, int seq_len, int window, const float *p, float *x)
{
    const int row = blockIdx.x * SP_CUDA_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= n_rows)
        return;
    const int i = row % seq_len, lo = sp_cuda_attn_first_key(i, window);
    const float *pr = p + (size_t)row * seq_len;
    float *xr = x + (size_t)row * seq_len;
    double row_sum = 0;
    for (int j = lo + lane; j <= i; j += 32)
        row_sum += (double)pr[j] * xr[j];
    row_sum = sp_cuda_warp_reduce(row_sum, sp_cuda_add());
    for (int j = lane; j < seq_len; j += 32)
        xr[j] = j >= lo && j <= i ? (float)(pr[j] * (xr[j] - row_sum)) : 0.0f;
}

static bool apply_softmax_jacobian(const attn_layout *l, const float *p, float *x)
{
    const int n_rows = l->batch * l->n_heads * l->seq_len;
    softmax_jacobian_kernel<<<sp_cuda_row_blocks(n_rows), SP_CUDA_THREADS>>>(n_rows, l->seq_len, l->window, p, x);
    return SP_CUDA_CHECK_LAUNCH("softmax_jacobian_kernel");
}

/* x *= 1 - tanh^2(z / cap) elementwise: the soft-cap's slope at the scores z. */
static __global__ void softcap_slope_kernel(size_t n, double cap, const float *z, float *x)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        const double t = tanh(z[i] / cap);
        x[i] = (float)(x[i] * (1.0 - t * t));
    }
}

/* With a soft-cap, x (score gradients or tangents, every head) times its slope at Z = scale q k^T,
 * recomputed into z. */
static bool times_softcap_slope(const attn_layout *l, const float *q, const float *k, float *z, float *x)
{
    if (l->softcap <= 0)
        return true;
    for (int h = 0; h < l->n_heads; h++)
        scores_gemm(l, h, l->scale, q, k, 0.0f, z);
    const size_t n = (size_t)l->batch * l->seq_p;
    softcap_slope_kernel<<<sp_cuda_blocks(n), SP_CUDA_THREADS>>>(n, l->softcap, z, x);
    return SP_CUDA_CHECK_LAUNCH("softcap_slope_kernel");
}

/* Scratch for dS or tS, and (soft-cap) Z after it: NULL + sp_error on failure. */
static float *score_scratch(const attn_layout *l, size_t n_saved, const char *what)
{
    return (float *)sp_cuda_scratch((l->softcap > 0 ? 2 : 1) * n_saved * sizeof(float), what);
}

size_t sp_cuda_attn_saved_elems(const sp_attn_shape *shape)
{
    return (size_t)shape->batch * shape->n_heads * shape->seq_len * shape->seq_len;
}

static bool attn_empty(const sp_attn_shape *s)
{
    return s->batch <= 0 || s->seq_len <= 0 || s->n_heads <= 0 || s->n_kv_heads <= 0 || s->head_dim <= 0;
}

void sp_cuda_attn_fwd(const sp_attn_shape *shape, const float *q, const float *k, const float *v, float *saved,
                      float *out)
{
    if (attn_empty(shape))
        return;
    const attn_layout l = make_layout(shape);
    for (int h = 0; h < l.n_heads; h++)
        scores_gemm(&l, h, l.scale, q, k, 0.0f, saved);
    const int n_rows = l.batch * l.n_heads * l.seq_len;
    masked_softmax_kernel<<<sp_cuda_row_blocks(n_rows), SP_CUDA_THREADS>>>(n_rows, l.seq_len, l.softcap, l.window,
                                                                           saved);
    if (!SP_CUDA_CHECK_LAUNCH("masked_softmax_kernel"))
        return;
    for (int h = 0; h < l.n_heads; h++)
        p_times_kv_gemm(&l, h, 1.0f, saved, v, 0.0f, out);
}

void sp_cuda_attn_bwd(const sp_attn_shape *shape, const float *q, const float *k, const float *v, const float *saved,
                      const float *dout, float *dq, float *dk, float *dv)
{
    if (attn_empty(shape))
        return;
    const attn_layout l = make_layout(shape);
    const size_t n_saved = sp_cuda_attn_saved_elems(shape);
    float *ds = score_scratch(&l, n_saved, "attention score gradients");
    if (!ds)
        return;
    for (int h = 0; h < l.n_heads; h++) /* dP = dout v^T */
        scores_gemm(&l, h, 1.0f, dout, v, 0.0f, ds);
    if (!apply_softmax_jacobian(&l, saved, ds) || !times_softcap_slope(&l, q, k, ds + n_saved, ds)) /* dZ */
        return;
    for (int h = 0; h < l.n_heads; h++) {
        pt_times_q_gemm(&l, h, 1.0f, saved, dout, dv);
        p_times_kv_gemm(&l, h, l.scale, ds, k, 1.0f, dq);
        pt_times_q_gemm(&l, h, l.scale, ds, q, dk);
    }
}

void sp_cuda_attn_jvp(const sp_attn_shape *shape, const float *q, const float *k, const float *v, const float *saved,
                      const float *tq, const float *tk, const float *tv, float *tout)
{
    if (attn_empty(shape))
        return;
    const attn_layout l = make_layout(shape);
    const size_t n_saved = sp_cuda_attn_saved_elems(shape);
    float *ts = score_scratch(&l, n_saved, "attention score tangents");
    if (!ts)
        return;
    for (int h = 0; h < l.n_heads; h++) { /* scale (tq k^T + q tk^T) */
        scores_gemm(&l, h, l.scale, tq, k, 0.0f, ts);
        scores_gemm(&l, h, l.scale, q, tk, 1.0f, ts);
    }
    if (!times_softcap_slope(&l, q, k, ts + n_saved, ts) || !apply_softmax_jacobian(&l, saved, ts)) /* tangent of P */
        return;
    for (int h = 0; h < l.n_heads; h++) {
        p_times_kv_gemm(&l, h, 1.0f, ts, v, 0.0f, tout);
        p_times_kv_gemm(&l, h, 1.0f, saved, tv, 1.0f, tout);
    }
}

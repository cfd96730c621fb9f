/* kernels/cpu/cpu_attention.c: causal multi-head attention with grouped-query heads.
 *
 * For query head h of sequence b, with S = q k^T / sqrt(head_dim) masked to keys j <= i:
 *   P = softmax(S) row-wise, out = P v.
 * `saved` holds P as [batch, n_heads, seq_len, seq_len] (zeros above the diagonal).
 * Backward, with dP = dout v^T:  dS = P * (dP - rowsum(P * dP)),  dq += dS k / sqrt(hd),
 *   dk += dS^T q / sqrt(hd),  dv += P^T dout.
 * JVP, with tS = (tq k^T + q tk^T) / sqrt(hd):  tout = P tv + (P * (tS - rowsum(P * tS))) v.
 * Dot products and softmax sums run in double; products accumulate into the outputs in key order.
 * The forward pass and the JVP split work over (sequence, query head); the backward pass over
 * (sequence, kv head), so each thread owns the dk/dv rows it adds into and the result does not
 * depend on the thread count. The row sums of the backward pass and the JVP are taken in a first
 * sweep over the keys and the dot products recomputed in a second, which needs no scratch memory. */
#include <math.h>

#include "kernels/cpu/cpu_ops.h"

/* The sizes every index below needs. */
typedef struct {
    int seq_len, n_heads, n_kv_heads, head_dim;
    double scale; /* 1/sqrt(head_dim) */
} attn_shape;

static attn_shape make_shape(int seq_len, int n_heads, int n_kv_heads, int head_dim)
{
    attn_shape s = {seq_len, n_heads, n_kv_heads, head_dim, 1.0 / sqrt((double)head_dim)};
    return s;
}

/* Query-side vector (q, out, dq, ...) of position i, sequence b, head h. */
static size_t q_at(const attn_shape *s, int b, int i, int h)
{
    return ((size_t)b * s->seq_len + i) * ((size_t)s->n_heads * s->head_dim) + (size_t)h * s->head_dim;
}

/* Key-side vector (k, v, dk, ...) of position j, sequence b, kv head g. */
static size_t kv_at(const attn_shape *s, int b, int j, int g)
{
    return ((size_t)b * s->seq_len + j) * ((size_t)s->n_kv_heads * s->head_dim) + (size_t)g * s->head_dim;
}

/* Row i of the saved probabilities of (b, h). */
static size_t p_at(const attn_shape *s, int b, int h, int i)
{
    return (((size_t)b * s->n_heads + h) * s->seq_len + i) * (size_t)s->seq_len;
}

static double dot(int n, const sp_real *x, const sp_real *y)
{
    double d = 0;
    for (int t = 0; t < n; t++)
        d += (double)x[t] * y[t];
    return d;
}

/* y += a * x */
static void add_scaled(int n, double a, const sp_real *x, sp_real *y)
{
    for (int t = 0; t < n; t++)
        y[t] += (sp_real)(a * x[t]);
}

/* tS_ij = (tq_i . k_j + q_i . tk_j) / sqrt(hd), for the key vectors at offset kj. */
static double score_tangent(const attn_shape *s, const sp_real *qi, const sp_real *tqi, const sp_real *k,
                            const sp_real *tk, size_t kj)
{
    return (dot(s->head_dim, tqi, k + kj) + dot(s->head_dim, qi, tk + kj)) * s->scale;
}

static int parallel_worth(int batch, int seq_len, int n_heads, int head_dim)
{
    return (size_t)batch * n_heads * seq_len * seq_len * head_dim >= SP_CPU_PAR_MIN;
}

size_t sp_cpu_attn_saved_elems(int batch, int seq_len, int n_heads)
{
    return (size_t)batch * n_heads * seq_len * seq_len;
}

void sp_cpu_attn_fwd(int batch, int seq_len, int n_heads, int n_kv_heads, int head_dim, const sp_real *q,
                     const sp_real *k, const sp_real *v, sp_real *saved, sp_real *out)
{
    attn_shape s = make_shape(seq_len, n_heads, n_kv_heads, head_dim);
    int group = n_heads / n_kv_heads;
#pragma omp parallel for collapse(2) schedule(static) if (parallel_worth(batch, seq_len, n_heads, head_dim))
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < n_heads; h++) {
            int g = h / group;
            for (int i = 0; i < seq_len; i++) {
                const sp_real *qi = q + q_at(&s, b, i, h);
                sp_real *p = saved + p_at(&s, b, h, i), *oi = out + q_at(&s, b, i, h);
                double max_score = -INFINITY, denom = 0;
                for (int j = 0; j <= i; j++) {
                    double score = dot(head_dim, qi, k + kv_at(&s, b, j, g)) * s.scale;
                    p[j] = (sp_real)score;
                    if (score > max_score)
                        max_score = score;
                }
                for (int j = 0; j <= i; j++) {
                    double e = exp((double)p[j] - max_score);
                    p[j] = (sp_real)e;
                    denom += e;
                }
                for (int j = 0; j <= i; j++)
                    p[j] = (sp_real)(p[j] / denom);
                for (int j = i + 1; j < seq_len; j++)
                    p[j] = 0;
                for (int t = 0; t < head_dim; t++)
                    oi[t] = 0;
                for (int j = 0; j <= i; j++)
                    add_scaled(head_dim, p[j], v + kv_at(&s, b, j, g), oi);
            }
        }
}

void sp_cpu_attn_bwd(int batch, int seq_len, int n_heads, int n_kv_heads, int head_dim, const sp_real *q,
                     const sp_real *k, const sp_real *v, const sp_real *saved, const sp_real *dout, sp_real *dq,
                     sp_real *dk, sp_real *dv)
{
    attn_shape s = make_shape(seq_len, n_heads, n_kv_heads, head_dim);
    int group = n_heads / n_kv_heads;
#pragma omp parallel for collapse(2) schedule(static) if (parallel_worth(batch, seq_len, n_heads, head_dim))
    for (int b = 0; b < batch; b++)
        for (int g = 0; g < n_kv_heads; g++)
            for (int h = g * group; h < (g + 1) * group; h++)
                for (int i = 0; i < seq_len; i++) {
                    const sp_real *p = saved + p_at(&s, b, h, i);
                    const sp_real *qi = q + q_at(&s, b, i, h), *doi = dout + q_at(&s, b, i, h);
                    sp_real *dqi = dq + q_at(&s, b, i, h);
                    double row_sum = 0; /* sum_j P_ij dP_ij */
                    for (int j = 0; j <= i; j++)
                        row_sum += p[j] * dot(head_dim, doi, v + kv_at(&s, b, j, g));
                    for (int j = 0; j <= i; j++) {
                        size_t kj = kv_at(&s, b, j, g);
                        double dp = dot(head_dim, doi, v + kj);
                        double ds = p[j] * (dp - row_sum) * s.scale;
                        add_scaled(head_dim, ds, k + kj, dqi);
                        add_scaled(head_dim, ds, qi, dk + kj);
                        add_scaled(head_dim, p[j], doi, dv + kj);
                    }
                }
}

void sp_cpu_attn_jvp(int batch, int seq_len, int n_heads, int n_kv_heads, int head_dim, const sp_real *q,
                     const sp_real *k, const sp_real *v, const sp_real *saved, const sp_real *tq,
                     const sp_real *tk, const sp_real *tv, sp_real *tout)
{
    attn_shape s = make_shape(seq_len, n_heads, n_kv_heads, head_dim);
    int group = n_heads / n_kv_heads;
#pragma omp parallel for collapse(2) schedule(static) if (parallel_worth(batch, seq_len, n_heads, head_dim))
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < n_heads; h++) {
            int g = h / group;
            for (int i = 0; i < seq_len; i++) {
                const sp_real *p = saved + p_at(&s, b, h, i);
                const sp_real *qi = q + q_at(&s, b, i, h), *tqi = tq + q_at(&s, b, i, h);
                sp_real *toi = tout + q_at(&s, b, i, h);
                double row_sum = 0; /* sum_j P_ij tS_ij */
                for (int j = 0; j <= i; j++)
                    row_sum += p[j] * score_tangent(&s, qi, tqi, k, tk, kv_at(&s, b, j, g));
                for (int t = 0; t < head_dim; t++)
                    toi[t] = 0;
                for (int j = 0; j <= i; j++) {
                    size_t kj = kv_at(&s, b, j, g);
                    double ts = score_tangent(&s, qi, tqi, k, tk, kj);
                    add_scaled(head_dim, p[j], tv + kj, toi);
                    add_scaled(head_dim, p[j] * (ts - row_sum), v + kj, toi);
                }
            }
        }
}

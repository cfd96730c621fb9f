/* kernels/cpu/cpu_attn_stats.c: attention diagnostics (attn_stats, kernels/backend.h): per query row
 * and head the entropy, sink mass, mean distance and largest score of the attention probabilities,
 * and the cosines between heads' probability rows, summed over rows.
 *
 * The probabilities are recomputed from q and k as cpu_attention.c's forward pass computes them
 * (sp_real scores from a gemm, soft-cap and softmax in double), STATS_ROWS query rows of one sequence
 * at a time for every head, into a per-thread scratch laid out [row][head][key]: one row's heads are
 * then a [n_heads, keys] matrix whose Gram matrix is one gemm. With the shift m = max_j s_ij,
 * e_j = exp(s_ij - m) and Z = sum_j e_j:
 *   entropy = ln Z - sum_j e_j (s_ij - m) / Z,  sink = e_0 / Z,  distance = sum_j e_j (i - j) / Z.
 * Each block of rows adds its cosines into a partial sum of its own; the partials are added in block
 * order at the end, so the result does not depend on the thread count. */
#include <math.h>
#include <omp.h>

#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/cpu_ops.h"

#define STATS_ROWS 16

typedef struct {
    int seq_len, n_heads, group, head_dim, window;
    int ldq, ldkv; /* row strides of q and k */
    sp_real scale;
    double softcap;
} stats_dims;

static int min_int(int a, int b) { return a < b ? a : b; }

/* Row i's scores sit in row[0..n_cols), column c holding key k0 + c. Writes its SP_ATTN_N_STATS
 * values into out; with keep_p the row becomes its probabilities, 0 outside the visible keys. */
SP_CPU_CLONES static void row_stats(const stats_dims *s, int i, int k0, int n_cols, sp_real *row, double *out,
                                    int keep_p)
{
    const int lo = sp_cpu_attn_first_key(s->window, i) - k0, keys = i - k0 - lo + 1;
    sp_real *pr = row + lo;
    if (s->softcap > 0)
        for (int j = 0; j < keys; j++)
            pr[j] = (sp_real)(s->softcap * tanh(pr[j] / s->softcap));
    double max_score = -INFINITY;
    for (int j = 0; j < keys; j++)
        max_score = pr[j] > max_score ? pr[j] : max_score;
    double z = 0, shifted = 0, distance = 0;
    const double first = sp_cpu_exp((double)pr[0] - max_score);
    for (int j = 0; j < keys; j++) {
        const double d = (double)pr[j] - max_score, e = sp_cpu_exp(d);
        z += e;
        shifted += e * d;
        distance += e * (double)(keys - 1 - j); /* i - (k0 + lo + j) */
        if (keep_p)
            pr[j] = (sp_real)e;
    }
    out[SP_ATTN_ENTROPY] = log(z) - shifted / z;
    out[SP_ATTN_SINK] = k0 + lo == 0 ? first / z : 0;
    out[SP_ATTN_DISTANCE] = distance / z;
    out[SP_ATTN_MAX_LOGIT] = max_score;
    if (!keep_p)
        return;
    for (int c = 0; c < lo; c++)
        row[c] = 0;
    for (int j = 0; j < keys; j++)
        pr[j] = (sp_real)(pr[j] / z);
    for (int c = lo + keys; c < n_cols; c++)
        row[c] = 0;
}

/* sum[h, h'] += cos(P_h,i, P_h',i) for the block's rows i0.. that count (p: [rows][n_heads][seq_len],
 * probabilities in columns 0..n_cols; gram: [n_heads, n_heads] scratch). */
static void add_head_cosines(const stats_dims *s, int i0, int rows, int n_cols, int first_pos,
                             const sp_real *p, sp_real *gram, double *sum)
{
    const int H = s->n_heads;
    for (int r = 0; r < rows; r++) {
        const int i = i0 + r;
        if (i < first_pos || i == sp_cpu_attn_first_key(s->window, i)) /* one visible key: every row is one-hot */
            continue;
        const sp_real *heads = p + (size_t)r * H * s->seq_len;
        sp_cpu_gemm_serial(0, 1, H, H, n_cols, 1, heads, s->seq_len, heads, s->seq_len, 0, gram, H);
        for (int h = 0; h < H; h++)
            for (int g = 0; g < H; g++)
                sum[h * H + g] += gram[h * H + g] / sqrt((double)gram[h * H + h] * gram[g * H + g]);
    }
}

sp_status sp_cpu_attn_stats(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, int first_pos,
                            double *stats, double *head_cos)
{
    const stats_dims s = {shape->seq_len,
                          shape->n_heads,
                          shape->n_heads / shape->n_kv_heads,
                          shape->head_dim,
                          shape->window,
                          shape->n_heads * shape->head_dim,
                          shape->n_kv_heads * shape->head_dim,
                          (sp_real)shape->scale,
                          shape->softcap};
    const int T = s.seq_len, H = s.n_heads, blocks_per_seq = (T + STATS_ROWS - 1) / STATS_ROWS;
    const int n_blocks = shape->batch * blocks_per_seq;
    if (n_blocks <= 0 || H <= 0)
        return SP_OK;
    const size_t hh = (size_t)H * H, per_thread = (size_t)STATS_ROWS * H * T + (head_cos ? hh : 0);
    const int n_threads = omp_get_max_threads();
    sp_real *scratch = sp_cpu_alloc((size_t)n_threads * per_thread * sizeof *scratch, "attention statistics scratch");
    double *partial = head_cos ? sp_cpu_alloc((size_t)n_blocks * hh * sizeof *partial, "attention head cosines") : NULL;
    if (!scratch || (head_cos && !partial)) {
        sp_cpu_free(scratch);
        sp_cpu_free(partial);
        return SP_ERR_NOMEM;
    }
    const int parallel = (size_t)shape->batch * H * T * T * s.head_dim >= SP_CPU_PAR_MIN;
#pragma omp parallel for schedule(dynamic) if (parallel)
    for (int blk = 0; blk < n_blocks; blk++) {
        const int b = blk / blocks_per_seq, i0 = blk % blocks_per_seq * STATS_ROWS, rows = min_int(STATS_ROWS, T - i0);
        const int k0 = sp_cpu_attn_first_key(s.window, i0), n_cols = i0 + rows - k0;
        sp_real *p = scratch + (size_t)omp_get_thread_num() * per_thread;
        const size_t q_row = (size_t)b * T + (size_t)i0;
        for (int h = 0; h < H; h++) {
            sp_cpu_gemm_serial(0, 1, rows, n_cols, s.head_dim, s.scale, q + q_row * s.ldq + (size_t)h * s.head_dim,
                               s.ldq, k + ((size_t)b * T + (size_t)k0) * s.ldkv + (size_t)(h / s.group) * s.head_dim,
                               s.ldkv, 0, p + (size_t)h * T, H * T);
            for (int r = 0; r < rows; r++)
                row_stats(&s, i0 + r, k0, n_cols, p + ((size_t)r * H + h) * T,
                          stats + ((q_row + r) * H + h) * SP_ATTN_N_STATS, head_cos != NULL);
        }
        if (head_cos)
            add_head_cosines(&s, i0, rows, n_cols, first_pos, p, p + (size_t)STATS_ROWS * H * T,
                             partial + blk * hh);
    }
    for (int blk = 0; head_cos && blk < n_blocks; blk++)
        for (size_t e = 0; e < hh; e++)
            head_cos[e] += partial[blk * hh + e];
    sp_cpu_free(scratch);
    sp_cpu_free(partial);
    return SP_OK;
}

/* kernels/cuda/cuda_attn_stats.cu: attention diagnostics (attn_stats, kernels/backend.h): per query
 * row and head the entropy, sink mass, mean distance and largest score of the attention
 * probabilities, and the cosines between heads' probability rows, summed over rows.
 *
 * The scores are recomputed from q and k as cuda_attention.cu's forward pass computes them (one
 * cuBLAS strided-batched gemm per head over the sequences; soft-cap and softmax in double), a chunk
 * of query rows of every sequence and head at a time, into scratch laid out [sequence][row][head][key]:
 * every (sequence, row) is then a [n_heads, keys] matrix, and the Gram matrices of all of them are one
 * strided-batched gemm. The chunk is as many rows as keep the scores within SCORE_CAP floats, so the
 * scratch stays bounded whatever seq_len (2k positions, 32 heads, 8 sequences: 32 rows per chunk).
 * One warp per row reduces in double (the shift m = max_j s_ij, e_j = exp(s_ij - m), Z = sum_j e_j):
 *   entropy = ln Z - sum_j e_j (s_ij - m) / Z,  sink = e_0 / Z,  distance = sum_j e_j (i - j) / Z.
 * The cosines of a chunk are added by one thread per head pair, over the chunk's rows in order: no
 * atomics, so the result is the same bits run to run. */
#include "kernels/cuda/cuda_ops.h"

#define SCORE_CAP (1 << 24)

/* The sizes every index below needs, for the chunk of query rows i0 .. i0 + rows - 1. */
typedef struct {
    int batch, seq_len, n_heads, group, head_dim, window;
    int ld_q, ld_kv;
    float scale;
    double softcap;
    int chunk;         /* rows per chunk: the scratch's row dimension */
    int i0, rows, k0;  /* this chunk; column c of a score row holds key k0 + c */
    int n_cols;        /* i0 + rows - k0 */
} stats_layout;

/* The score row of (sequence b, chunk row r, head h) in the scratch. */
static __device__ float *score_row(const stats_layout &l, float *s, int b, int r, int h)
{
    return s + (((size_t)b * l.chunk + r) * l.n_heads + h) * l.seq_len;
}

/* One warp per (sequence, chunk row, head): soft-cap, statistics, and with keep_p the probabilities
 * in place (0 outside the visible keys). */
static __global__ void row_stats_kernel(stats_layout l, float *s, int keep_p, double *stats)
{
    const int n_rows = l.batch * l.rows * l.n_heads;
    const int row = blockIdx.x * SP_CUDA_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= n_rows)
        return;
    const int h = row % l.n_heads, r = row / l.n_heads % l.rows, b = row / (l.n_heads * l.rows);
    const int i = l.i0 + r, lo = sp_cuda_attn_first_key(i, l.window) - l.k0, hi = i - l.k0; /* visible lo..hi */
    float *sr = score_row(l, s, b, r, h);
    if (l.softcap > 0)
        for (int c = lo + lane; c <= hi; c += 32)
            sr[c] = (float)(l.softcap * tanh(sr[c] / l.softcap));
    __syncwarp();
    float mx = -INFINITY;
    for (int c = lo + lane; c <= hi; c += 32)
        mx = fmaxf(mx, sr[c]);
    mx = sp_cuda_warp_reduce(mx, sp_cuda_max());
    double z = 0, shifted = 0, distance = 0;
    for (int c = lo + lane; c <= hi; c += 32) {
        const double d = (double)sr[c] - mx, e = exp(d);
        z += e;
        shifted += e * d;
        distance += e * (double)(hi - c); /* i - (k0 + c) */
    }
    z = sp_cuda_warp_reduce(z, sp_cuda_add());
    shifted = sp_cuda_warp_reduce(shifted, sp_cuda_add());
    distance = sp_cuda_warp_reduce(distance, sp_cuda_add());
    if (lane == 0) {
        double *out = stats + (((size_t)b * l.seq_len + i) * l.n_heads + h) * SP_ATTN_N_STATS;
        out[SP_ATTN_ENTROPY] = log(z) - shifted / z;
        out[SP_ATTN_SINK] = l.k0 + lo == 0 ? exp((double)sr[lo] - mx) / z : 0;
        out[SP_ATTN_DISTANCE] = distance / z;
        out[SP_ATTN_MAX_LOGIT] = mx;
    }
    __syncwarp(); /* lane 0 reads sr[lo] before it is overwritten */
    if (keep_p)
        for (int c = lane; c < l.n_cols; c += 32)
            sr[c] = c >= lo && c <= hi ? (float)(exp((double)sr[c] - mx) / z) : 0.0f;
}

/* One thread per head pair (h, g): head_cos[h, g] += the cosines of the chunk's counted rows, from
 * their Gram matrices gram [sequence][chunk row][n_heads][n_heads]. */
static __global__ void add_cosines_kernel(stats_layout l, int first_pos, const float *gram, double *head_cos)
{
    const int H = l.n_heads, pair = blockIdx.x * blockDim.x + threadIdx.x;
    if (pair >= H * H)
        return;
    const int h = pair / H, g = pair % H;
    double sum = 0;
    for (int b = 0; b < l.batch; b++)
        for (int r = 0; r < l.rows; r++) {
            const int i = l.i0 + r;
            if (i < first_pos || i == sp_cuda_attn_first_key(i, l.window)) /* one visible key: one-hot rows */
                continue;
            const float *gr = gram + ((size_t)b * l.chunk + r) * H * H;
            sum += gr[pair] / sqrt((double)gr[h * H + h] * gr[g * H + g]);
        }
    head_cos[pair] += sum;
}

/* Scores of the chunk, every head: [b][r][h][c] = scale q_(b, i0+r, h) . k_(b, k0+c, kv head of h). */
static void chunk_scores(const stats_layout &l, const float *q, const float *k, float *s)
{
    const long long seq_q = (long long)l.seq_len * l.ld_q, seq_kv = (long long)l.seq_len * l.ld_kv;
    const long long seq_s = (long long)l.chunk * l.n_heads * l.seq_len;
    for (int h = 0; h < l.n_heads; h++)
        sp_cuda_gemm_strided(0, 1, l.rows, l.n_cols, l.head_dim, l.scale,
                             q + (size_t)l.i0 * l.ld_q + (size_t)h * l.head_dim, l.ld_q, seq_q,
                             k + (size_t)l.k0 * l.ld_kv + (size_t)(h / l.group) * l.head_dim, l.ld_kv, seq_kv, 0.0f,
                             s + (size_t)h * l.seq_len, l.n_heads * l.seq_len, seq_s, l.batch);
}

sp_status sp_cuda_attn_stats(const sp_attn_shape *shape, const float *q, const float *k, int first_pos, double *stats,
                             double *head_cos)
{
    if (shape->batch <= 0 || shape->seq_len <= 0 || shape->n_heads <= 0 || shape->n_kv_heads <= 0)
        return SP_OK;
    stats_layout l = {};
    l.batch = shape->batch;
    l.seq_len = shape->seq_len;
    l.n_heads = shape->n_heads;
    l.group = shape->n_heads / shape->n_kv_heads;
    l.head_dim = shape->head_dim;
    l.window = shape->window;
    l.ld_q = shape->n_heads * shape->head_dim;
    l.ld_kv = shape->n_kv_heads * shape->head_dim;
    l.scale = (float)shape->scale;
    l.softcap = shape->softcap;
    const size_t row_floats = (size_t)l.batch * l.n_heads * l.seq_len; /* one chunk row of every sequence */
    l.chunk = row_floats >= SCORE_CAP ? 1 : (int)(SCORE_CAP / row_floats);
    l.chunk = l.chunk < l.seq_len ? l.chunk : l.seq_len;
    const size_t n_scores = row_floats * l.chunk, n_gram = (size_t)l.batch * l.chunk * l.n_heads * l.n_heads;
    float *s = (float *)sp_cuda_scratch((n_scores + (head_cos ? n_gram : 0)) * sizeof(float),
                                        "attention statistics scores");
    if (!s)
        return SP_ERR_NOMEM;
    float *gram = s + n_scores;
    const int H = l.n_heads;
    for (l.i0 = 0; l.i0 < l.seq_len; l.i0 += l.chunk) {
        l.rows = l.seq_len - l.i0 < l.chunk ? l.seq_len - l.i0 : l.chunk;
        l.k0 = sp_cuda_attn_first_key(l.i0, l.window);
        l.n_cols = l.i0 + l.rows - l.k0;
        chunk_scores(l, q, k, s);
        const int n_rows = l.batch * l.rows * H;
        row_stats_kernel<<<sp_cuda_row_blocks(n_rows), SP_CUDA_THREADS>>>(l, s, head_cos != NULL, stats);
        if (!SP_CUDA_CHECK_LAUNCH("row_stats_kernel"))
            return sp_error_code();
        if (!head_cos)
            continue;
        /* every (sequence, row) of the chunk, the rows past l.rows of a short last chunk included (unused) */
        sp_cuda_gemm_strided(0, 1, H, H, l.n_cols, 1.0f, s, l.seq_len, (long long)H * l.seq_len, s, l.seq_len,
                             (long long)H * l.seq_len, 0.0f, gram, H, (long long)H * H, l.batch * l.chunk);
        add_cosines_kernel<<<sp_cuda_blocks((size_t)H * H), SP_CUDA_THREADS>>>(l, first_pos, gram, head_cos);
        if (!SP_CUDA_CHECK_LAUNCH("add_cosines_kernel"))
            return sp_error_code();
    }
    return SP_OK;
}

/* kernels/cpu/cpu_attention.c: causal multi-head attention with grouped-query heads, an optional
 * score soft-cap and an optional sliding window.
 *
 * For query head h of sequence b, with scores Z = scale q k^T, S = c tanh(Z / c) (soft-cap c) or
 * S = Z, masked to the visible keys of query i (j <= i, and i - j < window with a window):
 *   P = softmax(S) row-wise, out = P v.
 * `saved` holds P as [batch, n_heads, seq_len, seq_len] (zeros where masked).
 * Backward, with dP = dout v^T:  dS = P * (dP - rowsum(P * dP)),  dZ = S' * dS with the soft-cap's
 *   slope S' = 1 - tanh^2(Z / c) (1 without),  dq += scale dZ k,  dk += scale dZ^T q,  dv += P^T dout.
 * JVP, with tS = S' * scale (tq k^T + q tk^T):  tout = P tv + (P * (tS - rowsum(P * tS))) v.
 *
 * Every product is a single-threaded gemm on blocks of TILE query rows: a block of rows i0..i1-1
 * only meets keys j < i1 (and, with a window, j > i0 - window), so the masked parts outside that
 * band are never computed. Score tiles of the backward pass and the JVP (TILE x TILE) live on the
 * stack, and their row sums come without a second sweep: rowsum(P * (a b^T)) = rowwise dot of a
 * with P b. The soft-cap's slope breaks that product form for the JVP's tS, whose row sums then
 * take a first sweep over the tiles; its Z tiles are recomputed from q and k where needed (the
 * forward pass keeps only P). Softmax sums and the row sums run in double.
 * The forward pass and the JVP split work over (sequence, query head); the backward pass over
 * (sequence, kv head), so each thread owns the dk/dv rows it adds into, in a fixed order, and the
 * result does not depend on the thread count. */
#include <math.h>

#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/cpu_ops.h"

#define TILE 64

/* The sizes every index below needs. */
typedef struct {
    int seq_len, n_heads, n_kv_heads, head_dim, group, window;
    int ldq, ldkv;  /* row strides of the query-side and key-side arrays */
    sp_real scale;  /* of the scores */
    double softcap; /* 0: off */
} attn_dims;

static attn_dims make_dims(const sp_attn_shape *shape)
{
    attn_dims s = {shape->seq_len,
                   shape->n_heads,
                   shape->n_kv_heads,
                   shape->head_dim,
                   shape->n_heads / shape->n_kv_heads,
                   shape->window,
                   shape->n_heads * shape->head_dim,
                   shape->n_kv_heads * shape->head_dim,
                   (sp_real)shape->scale,
                   shape->softcap};
    return s;
}

/* Query-side matrix (q, out, dq, ...) of sequence b, head h: seq_len rows, stride ldq. */
static size_t q_at(const attn_dims *s, int b, int h)
{
    return (size_t)b * s->seq_len * s->ldq + (size_t)h * s->head_dim;
}

/* Key-side matrix (k, v, dk, ...) of sequence b, kv head g: seq_len rows, stride ldkv. */
static size_t kv_at(const attn_dims *s, int b, int g)
{
    return (size_t)b * s->seq_len * s->ldkv + (size_t)g * s->head_dim;
}

/* The saved probabilities of (b, h): seq_len x seq_len. */
static size_t p_at(const attn_dims *s, int b, int h)
{
    return ((size_t)b * s->n_heads + h) * s->seq_len * (size_t)s->seq_len;
}

static int min_int(int a, int b) { return a < b ? a : b; }

static int first_key(const attn_dims *s, int i) { return sp_cpu_attn_first_key(s->window, i); }

static int parallel_worth(const sp_attn_shape *shape)
{
    return (size_t)shape->batch * shape->n_heads * shape->seq_len * shape->seq_len * shape->head_dim >= SP_CPU_PAR_MIN;
}

/* Row i0 + r of a query block holds scores for keys k0..i0+r (k0 = first_key(i0)); turns the
 * visible ones into probabilities in place (soft-capped first) and zeroes the rest of the
 * seq_len-long row. */
SP_CPU_CLONES static void softmax_rows(const attn_dims *s, int i0, int rows, sp_real *p)
{
    for (int r = 0; r < rows; r++) {
        const int lo = first_key(s, i0 + r), keys = i0 + r + 1 - lo;
        sp_real *row = p + (size_t)r * s->seq_len, *pr = row + lo;
        for (int j = 0; j < lo; j++)
            row[j] = 0;
        if (s->softcap > 0)
            for (int j = 0; j < keys; j++)
                pr[j] = (sp_real)(s->softcap * tanh(pr[j] / s->softcap));
        double max_score = -INFINITY, denom = 0;
#pragma omp simd reduction(max : max_score)
        for (int j = 0; j < keys; j++)
            max_score = pr[j] > max_score ? pr[j] : max_score;
#pragma omp simd reduction(+ : denom)
        for (int j = 0; j < keys; j++) {
            double e = sp_cpu_exp((double)pr[j] - max_score);
            pr[j] = (sp_real)e;
            denom += e;
        }
        const double inv = 1.0 / denom;
#pragma omp simd
        for (int j = 0; j < keys; j++)
            pr[j] = (sp_real)(pr[j] * inv);
        for (int j = i0 + r + 1; j < s->seq_len; j++)
            row[j] = 0;
    }
}

/* sums[r] += rowwise dot of a (rows x head_dim, stride lda) with p b (p: rows x keys, stride
 * seq_len; b: keys x head_dim, stride ldkv), i.e. sum_j p_rj (a_r . b_j), a product of TILE-wide
 * column strips through the stack. */
static void add_row_dots(const attn_dims *s, int rows, int keys, const sp_real *p, const sp_real *b,
                         const sp_real *a, int lda, double *sums)
{
    sp_real strip[TILE * TILE];
    for (int t0 = 0; t0 < s->head_dim; t0 += TILE) {
        const int width = min_int(TILE, s->head_dim - t0);
        sp_cpu_gemm_serial(0, 0, rows, width, keys, 1, p, s->seq_len, b + t0, s->ldkv, 0, strip, TILE);
        for (int r = 0; r < rows; r++) {
            const sp_real *ar = a + (size_t)r * lda + t0, *sr = strip + (size_t)r * TILE;
            double d = 0;
            for (int t = 0; t < width; t++)
                d += (double)ar[t] * sr[t];
            sums[r] += d;
        }
    }
}

/* tile = p * (tile - sums[r]) row by row (tile stride TILE, p stride seq_len): dS from dP, or the
 * centered score tangent, scaled by p. */
static void center_and_weight(const attn_dims *s, int rows, int cols, const double *sums, const sp_real *p,
                              sp_real *tile)
{
    for (int r = 0; r < rows; r++) {
        const sp_real *pr = p + (size_t)r * s->seq_len;
        sp_real *tr = tile + (size_t)r * TILE;
        for (int c = 0; c < cols; c++)
            tr[c] = (sp_real)(pr[c] * ((double)tr[c] - sums[r]));
    }
}

/* tile *= 1 - tanh^2(Z / c), the soft-cap's slope at the scores Z = scale q k^T of the tile's rows
 * (q_rows, stride ldq) and columns (k_rows, stride ldkv), recomputed into z. */
static void times_softcap_slope(const attn_dims *s, int rows, int cols, const sp_real *q_rows, const sp_real *k_rows,
                                sp_real *z, sp_real *tile)
{
    sp_cpu_gemm_serial(0, 1, rows, cols, s->head_dim, s->scale, q_rows, s->ldq, k_rows, s->ldkv, 0, z, TILE);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const double t = tanh(z[(size_t)r * TILE + c] / s->softcap);
            tile[(size_t)r * TILE + c] = (sp_real)(tile[(size_t)r * TILE + c] * (1.0 - t * t));
        }
}

size_t sp_cpu_attn_saved_elems(const sp_attn_shape *shape)
{
    return (size_t)shape->batch * shape->n_heads * shape->seq_len * shape->seq_len;
}

void sp_cpu_attn_fwd(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v, sp_real *saved,
                     sp_real *out)
{
    const attn_dims s = make_dims(shape);
    const int seq_len = s.seq_len, head_dim = s.head_dim;
#pragma omp parallel for collapse(2) schedule(dynamic) if (parallel_worth(shape))
    for (int b = 0; b < shape->batch; b++)
        for (int h = 0; h < s.n_heads; h++) {
            const size_t kvh = kv_at(&s, b, h / s.group);
            const sp_real *qh = q + q_at(&s, b, h), *kg = k + kvh, *vg = v + kvh;
            sp_real *p = saved + p_at(&s, b, h), *oh = out + q_at(&s, b, h);
            for (int i0 = 0; i0 < seq_len; i0 += TILE) {
                const int rows = min_int(TILE, seq_len - i0), k0 = first_key(&s, i0), keys = i0 + rows - k0;
                sp_real *pi = p + (size_t)i0 * seq_len;
                const sp_real *k_band = kg + (size_t)k0 * s.ldkv, *v_band = vg + (size_t)k0 * s.ldkv;
                sp_cpu_gemm_serial(0, 1, rows, keys, head_dim, s.scale, qh + (size_t)i0 * s.ldq, s.ldq, k_band, s.ldkv,
                                   0, pi + k0, seq_len);
                softmax_rows(&s, i0, rows, pi);
                sp_cpu_gemm_serial(0, 0, rows, head_dim, keys, 1, pi + k0, seq_len, v_band, s.ldkv, 0,
                                   oh + (size_t)i0 * s.ldq, s.ldq);
            }
        }
}

void sp_cpu_attn_bwd(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                     const sp_real *saved, const sp_real *dout, sp_real *dq, sp_real *dk, sp_real *dv)
{
    const attn_dims s = make_dims(shape);
    const int seq_len = s.seq_len, head_dim = s.head_dim;
#pragma omp parallel for collapse(2) schedule(dynamic) if (parallel_worth(shape))
    for (int b = 0; b < shape->batch; b++)
        for (int g = 0; g < s.n_kv_heads; g++) {
            const sp_real *kg = k + kv_at(&s, b, g), *vg = v + kv_at(&s, b, g);
            sp_real *dkg = dk + kv_at(&s, b, g), *dvg = dv + kv_at(&s, b, g);
            sp_real ds[TILE * TILE], z[TILE * TILE];
            for (int h = g * s.group; h < (g + 1) * s.group; h++)
                for (int i0 = 0; i0 < seq_len; i0 += TILE) {
                    const int rows = min_int(TILE, seq_len - i0), k0 = first_key(&s, i0), keys = i0 + rows;
                    const size_t qi = q_at(&s, b, h) + (size_t)i0 * s.ldq, k0_at = (size_t)k0 * s.ldkv;
                    const sp_real *pi = saved + p_at(&s, b, h) + (size_t)i0 * seq_len;
                    double row_sums[TILE] = {0}; /* sum_j P_ij dP_ij = dout_i . (P v)_i */
                    add_row_dots(&s, rows, keys - k0, pi + k0, vg + k0_at, dout + qi, s.ldq, row_sums);
                    for (int j0 = k0; j0 < keys; j0 += TILE) {
                        const int cols = min_int(TILE, keys - j0);
                        const size_t kj = (size_t)j0 * s.ldkv;
                        sp_cpu_gemm_serial(0, 1, rows, cols, head_dim, 1, dout + qi, s.ldq, vg + kj, s.ldkv, 0, ds,
                                           TILE);
                        center_and_weight(&s, rows, cols, row_sums, pi + j0, ds);
                        if (s.softcap > 0)
                            times_softcap_slope(&s, rows, cols, q + qi, kg + kj, z, ds);
                        sp_cpu_gemm_serial(0, 0, rows, head_dim, cols, s.scale, ds, TILE, kg + kj, s.ldkv, 1, dq + qi,
                                           s.ldq);
                        sp_cpu_gemm_serial(1, 0, cols, head_dim, rows, s.scale, ds, TILE, q + qi, s.ldq, 1, dkg + kj,
                                           s.ldkv);
                    }
                    sp_cpu_gemm_serial(1, 0, keys - k0, head_dim, rows, 1, pi + k0, seq_len, dout + qi, s.ldq, 1,
                                       dvg + k0_at, s.ldkv);
                }
        }
}

/* The score tangent tile tS of rows qi.. and keys j0..j0+cols: scale (tq k^T + q tk^T), times the
 * soft-cap's slope when there is one (z: scratch). */
static void score_tangent(const attn_dims *s, int rows, int cols, size_t qi, size_t kj, const sp_real *q,
                          const sp_real *kg, const sp_real *tq, const sp_real *tkg, sp_real *z, sp_real *ts)
{
    sp_cpu_gemm_serial(0, 1, rows, cols, s->head_dim, s->scale, tq + qi, s->ldq, kg + kj, s->ldkv, 0, ts, TILE);
    sp_cpu_gemm_serial(0, 1, rows, cols, s->head_dim, s->scale, q + qi, s->ldq, tkg + kj, s->ldkv, 1, ts, TILE);
    if (s->softcap > 0)
        times_softcap_slope(s, rows, cols, q + qi, kg + kj, z, ts);
}

void sp_cpu_attn_jvp(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                     const sp_real *saved, const sp_real *tq, const sp_real *tk, const sp_real *tv, sp_real *tout)
{
    const attn_dims s = make_dims(shape);
    const int seq_len = s.seq_len, head_dim = s.head_dim;
#pragma omp parallel for collapse(2) schedule(dynamic) if (parallel_worth(shape))
    for (int b = 0; b < shape->batch; b++)
        for (int h = 0; h < s.n_heads; h++) {
            const size_t kvh = kv_at(&s, b, h / s.group);
            const sp_real *kg = k + kvh, *vg = v + kvh, *tkg = tk + kvh, *tvg = tv + kvh;
            sp_real ts[TILE * TILE], z[TILE * TILE];
            for (int i0 = 0; i0 < seq_len; i0 += TILE) {
                const int rows = min_int(TILE, seq_len - i0), k0 = first_key(&s, i0), keys = i0 + rows;
                const size_t qi = q_at(&s, b, h) + (size_t)i0 * s.ldq, k0_at = (size_t)k0 * s.ldkv;
                const sp_real *pi = saved + p_at(&s, b, h) + (size_t)i0 * seq_len;
                double row_sums[TILE] = {0}; /* sum_j P_ij tS_ij */
                if (s.softcap > 0) { /* a first sweep over the tiles */
                    for (int j0 = k0; j0 < keys; j0 += TILE) {
                        const int cols = min_int(TILE, keys - j0);
                        score_tangent(&s, rows, cols, qi, (size_t)j0 * s.ldkv, q, kg, tq, tkg, z, ts);
                        for (int r = 0; r < rows; r++)
                            for (int c = 0; c < cols; c++)
                                row_sums[r] += (double)pi[(size_t)r * seq_len + j0 + c] * ts[(size_t)r * TILE + c];
                    }
                } else { /* = (tq_i . (P k)_i + q_i . (P tk)_i) scale */
                    add_row_dots(&s, rows, keys - k0, pi + k0, kg + k0_at, tq + qi, s.ldq, row_sums);
                    add_row_dots(&s, rows, keys - k0, pi + k0, tkg + k0_at, q + qi, s.ldq, row_sums);
                    for (int r = 0; r < rows; r++)
                        row_sums[r] *= s.scale;
                }
                sp_cpu_gemm_serial(0, 0, rows, head_dim, keys - k0, 1, pi + k0, seq_len, tvg + k0_at, s.ldkv, 0,
                                   tout + qi, s.ldq);
                for (int j0 = k0; j0 < keys; j0 += TILE) {
                    const int cols = min_int(TILE, keys - j0);
                    const size_t kj = (size_t)j0 * s.ldkv;
                    score_tangent(&s, rows, cols, qi, kj, q, kg, tq, tkg, z, ts);
                    center_and_weight(&s, rows, cols, row_sums, pi + j0, ts);
                    sp_cpu_gemm_serial(0, 0, rows, head_dim, cols, 1, ts, TILE, vg + kj, s.ldkv, 1, tout + qi, s.ldq);
                }
            }
        }
}

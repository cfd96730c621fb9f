/* kernels/cpu/cpu_attention_hvp.c: the tangent of the attention backward pass (kernels/backend.h,
 * attn_bwd_jvp), for exact Hessian-vector products.
 *
 * Per query row i of head h, over its visible keys j (cpu_attention.c's notation: Z = scale q k^T,
 * S = c tanh(Z / c) or Z, P = softmax(S), S' = 1 - (S / c)^2 or 1):
 *   dP = dout v^T, r = rowsum(P dP), dS = P (dP - r), dZ = S' dS;
 *   tZ = scale (tq k^T + q tk^T), tP = P (S' tZ - rowsum(P S' tZ)), tdP = tdout v^T + dout tv^T,
 *   tdS = tP (dP - r) + P (tdP - rowsum(tP dP + P tdP)),
 *   tdZ = S' tdS - 2 (S / c^2) S' tZ dS   (the soft-cap's slope moves too);
 *   tdq += scale (tdZ k + dZ tk), tdk += scale (tdZ^T q + dZ^T tq), tdv += tP^T dout + P^T tdout.
 * As in cpu_attention.c, every product is a single-threaded gemm on a block of TILE query rows and
 * the band of keys they see; the row sums and the elementwise terms run in double. Parallel over
 * (sequence, kv head), so each thread owns the tdk/tdv rows it adds into, in a fixed order. */
#include <math.h>

#include <omp.h>

#include "kernels/cpu/cpu_ops.h"

#define TILE 64

/* The operands of one (sequence, kv head), at their column, row 0; query-side pointers at head h. */
typedef struct {
    const sp_attn_shape *shape;
    int ldq, ldkv;
    const sp_real *q, *tq, *dout, *tdout, *p; /* head h */
    const sp_real *k, *v, *tk, *tv;           /* its kv head */
    sp_real *tdq, *tdk, *tdv;
} head_view;

/* Per query block: [rows][band] score-shaped arrays (stride seq_len) the gemms fill, then the
 * elementwise pass turns into dZ, tdZ and tP (zero where masked). */
typedef struct {
    sp_real *dp, *tdp, *tz, *z;
} tiles;

static int first_key(const sp_attn_shape *s, int i) { return s->window > 0 && i >= s->window ? i - s->window + 1 : 0; }

/* The elementwise pass over query rows i0.., keys k0..k0+band-1. */
static void second_order_terms(const head_view *hv, int i0, int rows, int k0, int band, const tiles *t)
{
    const sp_attn_shape *s = hv->shape;
    const int n = s->seq_len;
    for (int r = 0; r < rows; r++) {
        const int i = i0 + r, lo = first_key(s, i) - k0, hi = i - k0; /* visible columns lo..hi */
        const sp_real *pr = hv->p + (size_t)i * n + k0;
        sp_real *dp = t->dp + (size_t)r * n, *tdp = t->tdp + (size_t)r * n, *tz = t->tz + (size_t)r * n;
        const sp_real *z = s->softcap > 0 ? t->z + (size_t)r * n : NULL;
        double rsum = 0, mean_ts = 0, tr = 0;
        for (int c = lo; c <= hi; c++) {
            const double th = z ? tanh(z[c] / s->softcap) : 0.0;
            rsum += (double)pr[c] * dp[c];
            mean_ts += (double)pr[c] * (1.0 - th * th) * tz[c];
        }
        for (int c = lo; c <= hi; c++) {
            const double th = z ? tanh(z[c] / s->softcap) : 0.0;
            const double tp = pr[c] * ((1.0 - th * th) * tz[c] - mean_ts);
            tr += tp * dp[c] + (double)pr[c] * tdp[c];
        }
        for (int c = 0; c < band; c++) {
            if (c < lo || c > hi) {
                dp[c] = tdp[c] = tz[c] = 0;
                continue;
            }
            const double th = z ? tanh(z[c] / s->softcap) : 0.0, slope = 1.0 - th * th;
            const double ds = pr[c] * (dp[c] - rsum), tp = pr[c] * (slope * tz[c] - mean_ts);
            double tdz = slope * (tp * (dp[c] - rsum) + pr[c] * (tdp[c] - tr));
            if (z)
                tdz -= 2.0 * th / s->softcap * slope * tz[c] * ds;
            dp[c] = (sp_real)(slope * ds);
            tdp[c] = (sp_real)tdz;
            tz[c] = (sp_real)tp;
        }
    }
}

static void query_block(const head_view *hv, int i0, const tiles *t)
{
    const sp_attn_shape *s = hv->shape;
    const int n = s->seq_len, hd = s->head_dim, rows = n - i0 < TILE ? n - i0 : TILE;
    const int k0 = first_key(s, i0), band = i0 + rows - k0;
    const sp_real scale = (sp_real)s->scale;
    const size_t qi = (size_t)i0 * hv->ldq, kj = (size_t)k0 * hv->ldkv;
    const sp_real *q = hv->q + qi, *tq = hv->tq + qi, *dout = hv->dout + qi, *tdout = hv->tdout + qi;
    const sp_real *k = hv->k + kj, *v = hv->v + kj, *tk = hv->tk + kj, *tv = hv->tv + kj;
    sp_cpu_gemm_serial(0, 1, rows, band, hd, 1, dout, hv->ldq, v, hv->ldkv, 0, t->dp, n);
    sp_cpu_gemm_serial(0, 1, rows, band, hd, 1, tdout, hv->ldq, v, hv->ldkv, 0, t->tdp, n);
    sp_cpu_gemm_serial(0, 1, rows, band, hd, 1, dout, hv->ldq, tv, hv->ldkv, 1, t->tdp, n);
    sp_cpu_gemm_serial(0, 1, rows, band, hd, scale, tq, hv->ldq, k, hv->ldkv, 0, t->tz, n);
    sp_cpu_gemm_serial(0, 1, rows, band, hd, scale, q, hv->ldq, tk, hv->ldkv, 1, t->tz, n);
    if (s->softcap > 0)
        sp_cpu_gemm_serial(0, 1, rows, band, hd, scale, q, hv->ldq, k, hv->ldkv, 0, t->z, n);
    second_order_terms(hv, i0, rows, k0, band, t);
    /* t->dp holds dZ, t->tdp tdZ, t->tz tP */
    sp_cpu_gemm_serial(0, 0, rows, hd, band, scale, t->tdp, n, k, hv->ldkv, 1, hv->tdq + qi, hv->ldq);
    sp_cpu_gemm_serial(0, 0, rows, hd, band, scale, t->dp, n, tk, hv->ldkv, 1, hv->tdq + qi, hv->ldq);
    sp_cpu_gemm_serial(1, 0, band, hd, rows, scale, t->tdp, n, q, hv->ldq, 1, hv->tdk + kj, hv->ldkv);
    sp_cpu_gemm_serial(1, 0, band, hd, rows, scale, t->dp, n, tq, hv->ldq, 1, hv->tdk + kj, hv->ldkv);
    sp_cpu_gemm_serial(1, 0, band, hd, rows, 1, t->tz, n, dout, hv->ldq, 1, hv->tdv + kj, hv->ldkv);
    sp_cpu_gemm_serial(1, 0, band, hd, rows, 1, hv->p + (size_t)i0 * n + k0, n, tdout, hv->ldq, 1, hv->tdv + kj,
                       hv->ldkv);
}

void sp_cpu_attn_bwd_jvp(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                         const sp_real *saved, const sp_real *tq, const sp_real *tk, const sp_real *tv,
                         const sp_real *dout, const sp_real *tdout, sp_real *tdq, sp_real *tdk, sp_real *tdv)
{
    const int n = shape->seq_len, hd = shape->head_dim, group = shape->n_heads / shape->n_kv_heads;
    const int ldq = shape->n_heads * hd, ldkv = shape->n_kv_heads * hd;
    const int parallel = (size_t)shape->batch * shape->n_heads * n * n * hd >= SP_CPU_PAR_MIN;
    const int n_threads = parallel ? omp_get_max_threads() : 1;
    const size_t tile_elems = (size_t)TILE * n;
    sp_real *bufs = sp_cpu_alloc((size_t)n_threads * 4 * tile_elems * sizeof *bufs, "attention tangent tiles");
    if (!bufs)
        return;
#pragma omp parallel for collapse(2) schedule(dynamic) num_threads(n_threads)
    for (int b = 0; b < shape->batch; b++)
        for (int g = 0; g < shape->n_kv_heads; g++) {
            sp_real *own = bufs + (size_t)omp_get_thread_num() * 4 * tile_elems;
            const tiles t = {own, own + tile_elems, own + 2 * tile_elems, own + 3 * tile_elems};
            const size_t kv_off = (size_t)b * n * ldkv + (size_t)g * hd;
            for (int h = g * group; h < (g + 1) * group; h++) {
                const size_t q_off = (size_t)b * n * ldq + (size_t)h * hd;
                const head_view hv = {shape, ldq, ldkv, q + q_off, tq + q_off, dout + q_off, tdout + q_off,
                                      saved + ((size_t)b * shape->n_heads + h) * n * n, k + kv_off, v + kv_off,
                                      tk + kv_off, tv + kv_off, tdq + q_off, tdk + kv_off, tdv + kv_off};
                for (int i0 = 0; i0 < n; i0 += TILE)
                    query_block(&hv, i0, &t);
            }
        }
    sp_cpu_free(bufs);
}

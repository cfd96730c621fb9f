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
 * A plain loop over rows (the analyzers call it a few hundred times per block, not per step), in
 * double, parallel over (sequence, kv head) so each thread owns the tdk/tdv rows it adds into. */
#include <math.h>

#include "kernels/cpu/cpu_ops.h"

static double dot(int n, const sp_real *a, const sp_real *b)
{
    double s = 0;
    for (int t = 0; t < n; t++)
        s += (double)a[t] * b[t];
    return s;
}

static void add_scaled(int n, double alpha, const sp_real *x, sp_real *y)
{
    for (int t = 0; t < n; t++)
        y[t] += (sp_real)(alpha * x[t]);
}

/* The pointers of one (sequence, head) and the row being worked on. */
typedef struct {
    const sp_attn_shape *shape;
    int ldq, ldkv;
    const sp_real *q, *k, *v, *p, *tq, *tk, *tv, *dout, *tdout; /* at the head's column, row 0 */
    sp_real *tdq, *tdk, *tdv;
} head_view;

/* Row i: per visible key j in lo..i the buffers hold tanh(Z / c), S', tZ, dP, tP, tdP. */
static void query_row(const head_view *hv, int i, double *buf)
{
    const sp_attn_shape *sh = hv->shape;
    const int hd = sh->head_dim, n = sh->seq_len, lo = sh->window > 0 && i >= sh->window ? i - sh->window + 1 : 0;
    const int keys = i + 1 - lo;
    double *th = buf, *slope = buf + n, *tz = buf + 2 * n, *dp = buf + 3 * n, *tp = buf + 4 * n, *tdp = buf + 5 * n;
    const sp_real *qi = hv->q + (size_t)i * hv->ldq, *tqi = hv->tq + (size_t)i * hv->ldq;
    const sp_real *doi = hv->dout + (size_t)i * hv->ldq, *tdoi = hv->tdout + (size_t)i * hv->ldq;
    const sp_real *pi = hv->p + (size_t)i * n + lo;
    double r = 0, mean_ts = 0;
    for (int c = 0; c < keys; c++) {
        const sp_real *kj = hv->k + (size_t)(lo + c) * hv->ldkv, *vj = hv->v + (size_t)(lo + c) * hv->ldkv;
        const sp_real *tkj = hv->tk + (size_t)(lo + c) * hv->ldkv, *tvj = hv->tv + (size_t)(lo + c) * hv->ldkv;
        th[c] = sh->softcap > 0 ? tanh(sh->scale * dot(hd, qi, kj) / sh->softcap) : 0.0;
        slope[c] = 1.0 - th[c] * th[c];
        tz[c] = sh->scale * (dot(hd, tqi, kj) + dot(hd, qi, tkj));
        dp[c] = dot(hd, doi, vj);
        tdp[c] = dot(hd, tdoi, vj) + dot(hd, doi, tvj);
        r += pi[c] * dp[c];
        mean_ts += pi[c] * slope[c] * tz[c];
    }
    double tr = 0;
    for (int c = 0; c < keys; c++) {
        tp[c] = pi[c] * (slope[c] * tz[c] - mean_ts);
        tr += tp[c] * dp[c] + pi[c] * tdp[c];
    }
    sp_real *tdqi = hv->tdq + (size_t)i * hv->ldq;
    for (int c = 0; c < keys; c++) {
        const size_t kv_row = (size_t)(lo + c) * hv->ldkv;
        const double dsc = pi[c] * (dp[c] - r);
        const double tds = tp[c] * (dp[c] - r) + pi[c] * (tdp[c] - tr);
        double tdz = slope[c] * tds;
        if (sh->softcap > 0)
            tdz -= 2.0 * th[c] / sh->softcap * slope[c] * tz[c] * dsc;
        const double dz = slope[c] * dsc;
        add_scaled(hd, sh->scale * tdz, hv->k + kv_row, tdqi);
        add_scaled(hd, sh->scale * dz, hv->tk + kv_row, tdqi);
        add_scaled(hd, sh->scale * tdz, qi, hv->tdk + kv_row);
        add_scaled(hd, sh->scale * dz, tqi, hv->tdk + kv_row);
        add_scaled(hd, tp[c], doi, hv->tdv + kv_row);
        add_scaled(hd, pi[c], tdoi, hv->tdv + kv_row);
    }
}

void sp_cpu_attn_bwd_jvp(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                         const sp_real *saved, const sp_real *tq, const sp_real *tk, const sp_real *tv,
                         const sp_real *dout, const sp_real *tdout, sp_real *tdq, sp_real *tdk, sp_real *tdv)
{
    const int n = shape->seq_len, hd = shape->head_dim, group = shape->n_heads / shape->n_kv_heads;
    const int ldq = shape->n_heads * hd, ldkv = shape->n_kv_heads * hd;
    const int parallel = (size_t)shape->batch * shape->n_heads * n * n * hd >= SP_CPU_PAR_MIN;
    const size_t buf_elems = (size_t)6 * n;
    double *bufs = sp_cpu_alloc((size_t)shape->batch * shape->n_kv_heads * buf_elems * sizeof *bufs,
                                "attention tangent rows");
    if (!bufs)
        return;
#pragma omp parallel for collapse(2) schedule(dynamic) if (parallel)
    for (int b = 0; b < shape->batch; b++)
        for (int g = 0; g < shape->n_kv_heads; g++) {
            double *buf = bufs + ((size_t)b * shape->n_kv_heads + g) * buf_elems;
            const size_t kv_off = (size_t)b * n * ldkv + (size_t)g * hd;
            for (int h = g * group; h < (g + 1) * group; h++) {
                const size_t q_off = (size_t)b * n * ldq + (size_t)h * hd;
                const head_view hv = {shape, ldq, ldkv, q + q_off, k + kv_off, v + kv_off,
                                      saved + ((size_t)b * shape->n_heads + h) * n * n, tq + q_off, tk + kv_off,
                                      tv + kv_off, dout + q_off, tdout + q_off, tdq + q_off, tdk + kv_off,
                                      tdv + kv_off};
                for (int i = 0; i < n; i++)
                    query_row(&hv, i, buf);
            }
        }
    sp_cpu_free(bufs);
}

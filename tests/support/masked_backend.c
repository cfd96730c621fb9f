#include "tests/support/masked_backend.h"

#include <stdint.h>

/* Flips bit 63 of a pointer: masks a CPU pointer, unmasks a masked one (the same map); NULL stays NULL. */
static void *flip_mask(const void *p)
{
    return p ? (void *)((uintptr_t)p ^ ((uintptr_t)1 << 63)) : NULL;
}

/* Each op calls CPU(op) with every backend pointer unmasked, U(p); host arguments (upload's source,
 * download's destination, mem_stats' outputs) pass through unchanged. */
#define CPU(op) sp_backend_cpu()->op
#define U(p) flip_mask(p)

static void *m_alloc(size_t bytes, const char *what) { return flip_mask(CPU(alloc)(bytes, what)); }
static void m_free(void *p) { CPU(free)(U(p)); }
static void m_upload(void *dst, const void *host_src, size_t bytes) { CPU(upload)(U(dst), host_src, bytes); }
static void m_download(void *host_dst, const void *src, size_t bytes) { CPU(download)(host_dst, U(src), bytes); }
static void m_copy(void *dst, const void *src, size_t bytes) { CPU(copy)(U(dst), U(src), bytes); }
static void m_zero(void *dst, size_t bytes) { CPU(zero)(U(dst), bytes); }
static void m_sync(void) { CPU(sync)(); }
static void m_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t row_bytes, size_t rows)
{
    CPU(copy_rows)(U(dst), dst_pitch, U(src), src_pitch, row_bytes, rows);
}
static void m_mem_stats(size_t *in_use, size_t *peak) { CPU(mem_stats)(in_use, peak); }
static void m_mem_reset_peak(void) { CPU(mem_reset_peak)(); }

static void m_gemm(int trans_a, int trans_b, int m, int n, int k, sp_real alpha, const sp_real *a, int lda,
                   const sp_real *b, int ldb, sp_real beta, sp_real *c, int ldc)
{
    CPU(gemm)(trans_a, trans_b, m, n, k, alpha, U(a), lda, U(b), ldb, beta, U(c), ldc);
}
static void m_axpby(size_t n, sp_real a, const sp_real *x, sp_real b, sp_real *y) { CPU(axpby)(n, a, U(x), b, U(y)); }
static void m_scale(size_t n, sp_real a, sp_real *x) { CPU(scale)(n, a, U(x)); }
static double m_sumsq(size_t n, const sp_real *x) { return CPU(sumsq)(n, U(x)); }
static double m_dot(size_t n, const sp_real *x, const sp_real *y) { return CPU(dot)(n, U(x), U(y)); }
static size_t m_count_nonfinite(size_t n, const sp_real *x) { return CPU(count_nonfinite)(n, U(x)); }

static void m_norm_fwd(sp_norm_kind kind, int rows, int dim, sp_real eps, const sp_real *x, const sp_real *gain,
                       const sp_real *bias, sp_real *y, sp_real *mean, sp_real *rstd)
{
    CPU(norm_fwd)(kind, rows, dim, eps, U(x), U(gain), U(bias), U(y), U(mean), U(rstd));
}
static void m_norm_bwd(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                       const sp_real *mean, const sp_real *rstd, const sp_real *dy, sp_real *dx, sp_real *dgain,
                       sp_real *dbias)
{
    CPU(norm_bwd)(kind, rows, dim, U(x), U(gain), U(mean), U(rstd), U(dy), U(dx), U(dgain), U(dbias));
}
static void m_norm_jvp(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                       const sp_real *mean, const sp_real *rstd, const sp_real *tx, sp_real *ty)
{
    CPU(norm_jvp)(kind, rows, dim, U(x), U(gain), U(mean), U(rstd), U(tx), U(ty));
}

static void m_act_fwd(sp_act_kind kind, size_t n, const sp_real *x, sp_real *y) { CPU(act_fwd)(kind, n, U(x), U(y)); }
static void m_act_bwd(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *dy, sp_real *dx)
{
    CPU(act_bwd)(kind, n, U(x), U(dy), U(dx));
}
static void m_act_jvp(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *tx, sp_real *ty)
{
    CPU(act_jvp)(kind, n, U(x), U(tx), U(ty));
}
static void m_glu_fwd(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, sp_real *h)
{
    CPU(glu_fwd)(kind, n, U(g), U(u), U(h));
}
static void m_glu_bwd(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *dh, sp_real *dg,
                      sp_real *du)
{
    CPU(glu_bwd)(kind, n, U(g), U(u), U(dh), U(dg), U(du));
}
static void m_glu_jvp(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *tg,
                      const sp_real *tu, sp_real *th)
{
    CPU(glu_jvp)(kind, n, U(g), U(u), U(tg), U(tu), U(th));
}
static void m_softcap_fwd(size_t n, double cap, const sp_real *x, sp_real *y) { CPU(softcap_fwd)(n, cap, U(x), U(y)); }
static void m_softcap_jvp(size_t n, double cap, const sp_real *y, const sp_real *t, sp_real *out)
{
    CPU(softcap_jvp)(n, cap, U(y), U(t), U(out));
}

static void m_rope(int rows, int seq_len, int n_heads, int head_dim, int rot_dims, const double *inv_freq,
                   int direction, sp_real *x)
{
    CPU(rope)(rows, seq_len, n_heads, head_dim, rot_dims, U(inv_freq), direction, U(x));
}

static size_t m_attn_saved_elems(const sp_attn_shape *shape) { return CPU(attn_saved_elems)(shape); }
static void m_attn_fwd(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                       sp_real *saved, sp_real *out)
{
    CPU(attn_fwd)(shape, U(q), U(k), U(v), U(saved), U(out));
}
static void m_attn_bwd(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                       const sp_real *saved, const sp_real *dout, sp_real *dq, sp_real *dk, sp_real *dv)
{
    CPU(attn_bwd)(shape, U(q), U(k), U(v), U(saved), U(dout), U(dq), U(dk), U(dv));
}
static void m_attn_jvp(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                       const sp_real *saved, const sp_real *tq, const sp_real *tk, const sp_real *tv, sp_real *tout)
{
    CPU(attn_jvp)(shape, U(q), U(k), U(v), U(saved), U(tq), U(tk), U(tv), U(tout));
}
static void m_attn_jvp_at(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                          const sp_real *saved, int t, int n, const sp_real *tq, const sp_real *tk, const sp_real *tv,
                          sp_real *tout)
{
    CPU(attn_jvp_at)(shape, U(q), U(k), U(v), U(saved), t, n, U(tq), U(tk), U(tv), U(tout));
}
static sp_status m_attn_stats(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, int first_pos,
                              double *stats, double *head_cos)
{
    return CPU(attn_stats)(shape, U(q), U(k), first_pos, U(stats), U(head_cos));
}

static void m_embed_fwd(int rows, int seq_len, int dim, sp_real scale, const int32_t *ids, const sp_real *tok,
                        const sp_real *pos, sp_real *out)
{
    CPU(embed_fwd)(rows, seq_len, dim, scale, U(ids), U(tok), U(pos), U(out));
}
static void m_embed_bwd(int rows, int seq_len, int dim, sp_real scale, const int32_t *ids, const sp_real *dout,
                        sp_real *dtok, sp_real *dpos)
{
    CPU(embed_bwd)(rows, seq_len, dim, scale, U(ids), U(dout), U(dtok), U(dpos));
}

static void m_xent_fwd(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real *losses)
{
    CPU(xent_fwd)(rows, vocab, U(logits), U(targets), U(losses));
}
static void m_xent_bwd(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real scale,
                       sp_real *dlogits)
{
    CPU(xent_bwd)(rows, vocab, U(logits), U(targets), scale, U(dlogits));
}

static void m_norm_bwd_jvp(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                           const sp_real *mean, const sp_real *rstd, const sp_real *tx, const sp_real *tgain,
                           const sp_real *dy, const sp_real *tdy, sp_real *tdx, sp_real *tdgain, sp_real *tdbias)
{
    CPU(norm_bwd_jvp)(kind, rows, dim, U(x), U(gain), U(mean), U(rstd), U(tx), U(tgain), U(dy), U(tdy), U(tdx),
                      U(tdgain), U(tdbias));
}
static void m_act_bwd_jvp(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *tx, const sp_real *dy,
                          const sp_real *tdy, sp_real *tdx)
{
    CPU(act_bwd_jvp)(kind, n, U(x), U(tx), U(dy), U(tdy), U(tdx));
}
static void m_glu_bwd_jvp(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *tg,
                          const sp_real *tu, const sp_real *dh, const sp_real *tdh, sp_real *tdg, sp_real *tdu)
{
    CPU(glu_bwd_jvp)(kind, n, U(g), U(u), U(tg), U(tu), U(dh), U(tdh), U(tdg), U(tdu));
}
static void m_softcap_bwd_jvp(size_t n, double cap, const sp_real *y, const sp_real *ty, const sp_real *dy,
                              const sp_real *tdy, sp_real *out)
{
    CPU(softcap_bwd_jvp)(n, cap, U(y), U(ty), U(dy), U(tdy), U(out));
}
static void m_xent_bwd_jvp(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real scale,
                           const sp_real *tlogits, sp_real *tdlogits)
{
    CPU(xent_bwd_jvp)(rows, vocab, U(logits), U(targets), scale, U(tlogits), U(tdlogits));
}
static void m_attn_bwd_jvp(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                           const sp_real *saved, const sp_real *tq, const sp_real *tk, const sp_real *tv,
                           const sp_real *dout, const sp_real *tdout, sp_real *tdq, sp_real *tdk, sp_real *tdv)
{
    CPU(attn_bwd_jvp)(shape, U(q), U(k), U(v), U(saved), U(tq), U(tk), U(tv), U(dout), U(tdout), U(tdq), U(tdk),
                      U(tdv));
}

static void m_to_f64(size_t n, const sp_real *x, double *y, int accumulate) { CPU(to_f64)(n, U(x), U(y), accumulate); }
static void m_gemm_f64(int trans_a, int trans_b, int m, int n, int k, double alpha, const double *a, int lda,
                       const double *b, int ldb, double beta, double *c, int ldc)
{
    CPU(gemm_f64)(trans_a, trans_b, m, n, k, alpha, U(a), lda, U(b), ldb, beta, U(c), ldc);
}
static sp_status m_sym_eigvals(int n, int count, double *a, double *w)
{
    return CPU(sym_eigvals)(n, count, U(a), U(w));
}
static sp_status m_singvals(int m, int n, int count, double *a, double *s)
{
    return CPU(singvals)(m, n, count, U(a), U(s));
}

static sp_status m_sum_over_ranks(sp_real *x, size_t n) { return CPU(sum_over_ranks)(U(x), n); }

static void m_adamw(size_t n, sp_real *param, const sp_real *grad, sp_real *m, sp_real *v, double lr, double beta1,
                    double beta2, double eps, double weight_decay, long step)
{
    CPU(adamw)(n, U(param), U(grad), U(m), U(v), lr, beta1, beta2, eps, weight_decay, step);
}

/* The name and every op of kernels/backend.h, all pointer-sized: an op added there changes the
 * size, and this build stops until it is wrapped below. */
#define MASKED_N_FIELDS 51
_Static_assert(sizeof(sp_backend) == MASKED_N_FIELDS * sizeof(void (*)(void)),
               "kernels/backend.h changed: wrap the new op in tests/support/masked_backend.c");

static const sp_backend masked = {
    .name = "masked",
    .alloc = m_alloc,
    .free = m_free,
    .upload = m_upload,
    .download = m_download,
    .copy = m_copy,
    .zero = m_zero,
    .sync = m_sync,
    .copy_rows = m_copy_rows,
    .mem_stats = m_mem_stats,
    .mem_reset_peak = m_mem_reset_peak,
    .gemm = m_gemm,
    .axpby = m_axpby,
    .scale = m_scale,
    .sumsq = m_sumsq,
    .dot = m_dot,
    .count_nonfinite = m_count_nonfinite,
    .norm_fwd = m_norm_fwd,
    .norm_bwd = m_norm_bwd,
    .norm_jvp = m_norm_jvp,
    .act_fwd = m_act_fwd,
    .act_bwd = m_act_bwd,
    .act_jvp = m_act_jvp,
    .glu_fwd = m_glu_fwd,
    .glu_bwd = m_glu_bwd,
    .glu_jvp = m_glu_jvp,
    .softcap_fwd = m_softcap_fwd,
    .softcap_jvp = m_softcap_jvp,
    .rope = m_rope,
    .attn_saved_elems = m_attn_saved_elems,
    .attn_fwd = m_attn_fwd,
    .attn_bwd = m_attn_bwd,
    .attn_jvp = m_attn_jvp,
    .attn_jvp_at = m_attn_jvp_at,
    .attn_stats = m_attn_stats,
    .embed_fwd = m_embed_fwd,
    .embed_bwd = m_embed_bwd,
    .xent_fwd = m_xent_fwd,
    .xent_bwd = m_xent_bwd,
    .norm_bwd_jvp = m_norm_bwd_jvp,
    .act_bwd_jvp = m_act_bwd_jvp,
    .glu_bwd_jvp = m_glu_bwd_jvp,
    .softcap_bwd_jvp = m_softcap_bwd_jvp,
    .xent_bwd_jvp = m_xent_bwd_jvp,
    .attn_bwd_jvp = m_attn_bwd_jvp,
    .to_f64 = m_to_f64,
    .gemm_f64 = m_gemm_f64,
    .sym_eigvals = m_sym_eigvals,
    .singvals = m_singvals,
    .sum_over_ranks = m_sum_over_ranks,
    .adamw = m_adamw,
};

const sp_backend *masked_backend(void) { return &masked; }

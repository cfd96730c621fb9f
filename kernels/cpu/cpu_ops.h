/* kernels/cpu/cpu_ops.h: the CPU backend's ops, one file per concern, gathered into the table by
 * cpu_backend.c. Semantics (layouts, overwrite vs accumulate) are those of kernels/backend.h.
 *
 * Threading: OpenMP loops over independent outputs (rows, heads, elements, blocks of columns), so
 * every output element is computed by one thread in a fixed order and results do not depend on the
 * thread count. The schedules are dynamic: a thread that is done takes the next chunk, so a thread
 * the OS deschedules on a busy machine does not leave the others waiting at the barrier with half
 * the work undone. Loops over elements hand out SP_CPU_CHUNK at a time, loops over rows the rows
 * that hold about as many (sp_cpu_row_chunk), loops over blocks one block. Sums over many terms
 * (reductions, dgain, softmax denominators) run in double.
 */
#ifndef SP_CPU_OPS_H
#define SP_CPU_OPS_H

#include "kernels/backend.h"

/* Below this many elements an elementwise loop runs on one thread (the fork costs more). */
#define SP_CPU_PAR_MIN 16384
/* Elements per chunk of a dynamically scheduled loop: small enough to balance, large enough that
 * taking a chunk (one atomic add) costs nothing next to it. */
#define SP_CPU_CHUNK 4096

/* Rows of `dim` elements per chunk. */
static inline int sp_cpu_row_chunk(int dim) { return dim >= SP_CPU_CHUNK ? 1 : SP_CPU_CHUNK / (dim > 0 ? dim : 1); }

/* cpu_backend.c: memory */
void *sp_cpu_alloc(size_t bytes, const char *what);
void sp_cpu_free(void *p);
void sp_cpu_upload(void *dst, const void *host_src, size_t bytes);
void sp_cpu_download(void *host_dst, const void *src, size_t bytes);
void sp_cpu_copy(void *dst, const void *src, size_t bytes);
void sp_cpu_zero(void *dst, size_t bytes);
void sp_cpu_sync(void);

/* cpu_blas.c */
void sp_cpu_gemm(int trans_a, int trans_b, int m, int n, int k, sp_real alpha, const sp_real *a, int lda,
                 const sp_real *b, int ldb, sp_real beta, sp_real *c, int ldc);
/* The same product on the calling thread only (for ops that run their own parallel loop). */
void sp_cpu_gemm_serial(int trans_a, int trans_b, int m, int n, int k, sp_real alpha, const sp_real *a, int lda,
                        const sp_real *b, int ldb, sp_real beta, sp_real *c, int ldc);
void sp_cpu_axpby(size_t n, sp_real a, const sp_real *x, sp_real b, sp_real *y);
void sp_cpu_scale(size_t n, sp_real a, sp_real *x);
double sp_cpu_sumsq(size_t n, const sp_real *x);
double sp_cpu_dot(size_t n, const sp_real *x, const sp_real *y);
size_t sp_cpu_count_nonfinite(size_t n, const sp_real *x);

/* cpu_norm.c */
void sp_cpu_norm_fwd(sp_norm_kind kind, int rows, int dim, sp_real eps, const sp_real *x, const sp_real *gain,
                     const sp_real *bias, sp_real *y, sp_real *mean, sp_real *rstd);
void sp_cpu_norm_bwd(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                     const sp_real *mean, const sp_real *rstd, const sp_real *dy, sp_real *dx, sp_real *dgain,
                     sp_real *dbias);
void sp_cpu_norm_jvp(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                     const sp_real *mean, const sp_real *rstd, const sp_real *tx, sp_real *ty);
void sp_cpu_norm_bwd_jvp(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                         const sp_real *mean, const sp_real *rstd, const sp_real *tx, const sp_real *tgain,
                         const sp_real *dy, const sp_real *tdy, sp_real *tdx, sp_real *tdgain, sp_real *tdbias);

/* cpu_activation.c */
void sp_cpu_act_fwd(sp_act_kind kind, size_t n, const sp_real *x, sp_real *y);
void sp_cpu_act_bwd(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *dy, sp_real *dx);
void sp_cpu_act_jvp(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *tx, sp_real *ty);
void sp_cpu_act_bwd_jvp(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *tx, const sp_real *dy,
                        const sp_real *tdy, sp_real *tdx);
void sp_cpu_glu_fwd(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, sp_real *h);
void sp_cpu_glu_bwd(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *dh, sp_real *dg,
                    sp_real *du);
void sp_cpu_glu_jvp(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *tg,
                    const sp_real *tu, sp_real *th);
void sp_cpu_glu_bwd_jvp(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *tg,
                        const sp_real *tu, const sp_real *dh, const sp_real *tdh, sp_real *tdg, sp_real *tdu);
void sp_cpu_softcap_fwd(size_t n, double cap, const sp_real *x, sp_real *y);
void sp_cpu_softcap_jvp(size_t n, double cap, const sp_real *y, const sp_real *t, sp_real *out);
void sp_cpu_softcap_bwd_jvp(size_t n, double cap, const sp_real *y, const sp_real *ty, const sp_real *dy,
                            const sp_real *tdy, sp_real *out);

/* cpu_rope.c */
void sp_cpu_rope(int rows, int seq_len, int n_heads, int head_dim, int rot_dims, const double *inv_freq,
                 int direction, sp_real *x);

/* cpu_attention.c */
size_t sp_cpu_attn_saved_elems(const sp_attn_shape *shape);
void sp_cpu_attn_fwd(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v, sp_real *saved,
                     sp_real *out);
void sp_cpu_attn_bwd(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                     const sp_real *saved, const sp_real *dout, sp_real *dq, sp_real *dk, sp_real *dv);
void sp_cpu_attn_jvp(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                     const sp_real *saved, const sp_real *tq, const sp_real *tk, const sp_real *tv, sp_real *tout);
void sp_cpu_attn_jvp_at(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                        const sp_real *saved, int t, int n, const sp_real *tq, const sp_real *tk, const sp_real *tv,
                        sp_real *tout);
/* The first key query i sees with a sliding window (0: causal only): keys first..i are visible. */
static inline int sp_cpu_attn_first_key(int window, int i) { return window > 0 && i >= window ? i - window + 1 : 0; }

/* cpu_attn_stats.c */
sp_status sp_cpu_attn_stats(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, int first_pos,
                            double *stats, double *head_cos);

/* cpu_attention_hvp.c */
void sp_cpu_attn_bwd_jvp(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                         const sp_real *saved, const sp_real *tq, const sp_real *tk, const sp_real *tv,
                         const sp_real *dout, const sp_real *tdout, sp_real *tdq, sp_real *tdk, sp_real *tdv);

/* cpu_embed.c */
void sp_cpu_embed_fwd(int rows, int seq_len, int dim, sp_real scale, const int32_t *ids, const sp_real *tok,
                      const sp_real *pos, sp_real *out);
void sp_cpu_embed_bwd(int rows, int seq_len, int dim, sp_real scale, const int32_t *ids, const sp_real *dout,
                      sp_real *dtok, sp_real *dpos);

/* cpu_xent.c */
void sp_cpu_xent_fwd(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real *losses);
void sp_cpu_xent_bwd(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real scale,
                     sp_real *dlogits);
void sp_cpu_xent_bwd_jvp(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real scale,
                         const sp_real *tlogits, sp_real *tdlogits);

/* cpu_adamw.c */
void sp_cpu_adamw(size_t n, sp_real *param, const sp_real *grad, sp_real *m, sp_real *v, double lr, double beta1,
                  double beta2, double eps, double weight_decay, long step);

/* cpu_linalg.c: the fp64 ops (LAPACK dsyevd / dgesdd, values only) */
void sp_cpu_to_f64(size_t n, const sp_real *x, double *y, int accumulate);
void sp_cpu_gemm_f64(int trans_a, int trans_b, int m, int n, int k, double alpha, const double *a, int lda,
                     const double *b, int ldb, double beta, double *c, int ldc);
sp_status sp_cpu_sym_eigvals(int n, int count, double *a, double *w);
sp_status sp_cpu_singvals(int m, int n, int count, double *a, double *s);

#endif

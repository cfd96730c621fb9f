/* tests/support/ref_ops.h: naive reference versions of the backend ops, written from their
 * definitions with plain loops in double (explicit score matrices, explicit softmax, explicit
 * transposes), for tests to compare a backend against. Host memory, sp_real in and out. */
#ifndef SP_TEST_REF_OPS_H
#define SP_TEST_REF_OPS_H

#include "kernels/backend.h"

/* C = alpha op(A) op(B) + beta C, row-major, op = transpose when trans_* = 1. */
void ref_gemm(int trans_a, int trans_b, int m, int n, int k, double alpha, const sp_real *a, int lda,
              const sp_real *b, int ldb, double beta, sp_real *c, int ldc);
/* LayerNorm (bias may be NULL) or RMSNorm (bias ignored) of each row; mean/rstd may be NULL. */
void ref_norm(sp_norm_kind kind, int rows, int dim, double eps, const sp_real *x, const sp_real *gain,
              const sp_real *bias, sp_real *y, sp_real *mean, sp_real *rstd);
/* act(x): GELU (tanh approximation or erf) or SiLU, from their textbook formulas. */
double ref_act(sp_act_kind kind, double x);
/* cap tanh(x / cap) */
double ref_softcap(double cap, double x);
/* Rotates x [rows, n_heads*head_dim] in place, pair (2i, 2i+1) < rot_dims of each head by
 * (row % seq_len) inv_freq[i] radians (host table). */
void ref_rope(int rows, int seq_len, int n_heads, int head_dim, int rot_dims, const double *inv_freq, sp_real *x);
/* Causal GQA attention with the shape's scale, soft-cap and window (masked scores as -inf before
 * the softmax); probs [batch, n_heads, seq_len, seq_len] may be NULL. */
void ref_attention(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v, sp_real *out,
                   sp_real *probs);
/* out[r] = scale (tok[ids[r]] + (pos ? pos[r % seq_len] : 0)) */
void ref_embed(int rows, int seq_len, int dim, double scale, const int32_t *ids, const sp_real *tok,
               const sp_real *pos, sp_real *out);
/* losses[r] = -log_softmax(logits[r])[targets[r]], 0 where targets[r] < 0. */
void ref_xent(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real *losses);

#endif

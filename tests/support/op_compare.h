/* tests/support/op_compare.h: one backend op against its naive reference (ref_ops.h) on seeded
 * random inputs. Each function builds host inputs, runs the reference on the host and the op on
 * the backend (through alloc/upload/download, so any backend fits), and returns the normwise
 * relative error (vec_rel_err) of the op's outputs, the largest over its outputs. */
#ifndef SP_TEST_OP_COMPARE_H
#define SP_TEST_OP_COMPARE_H

#include "kernels/backend.h"

/* C [7 x 5] = 1.3 op(A) op(B) + beta C over k = 9, every leading dimension padded by 3 (the
 * padding must stay untouched). */
double opcmp_gemm(const sp_backend *be, int trans_a, int trans_b, double beta, uint64_t seed);
/* The same at C [m x n], inner size k (large ones take the backend's threaded paths). */
double opcmp_gemm_sized(const sp_backend *be, int trans_a, int trans_b, int m, int n, int k, double beta,
                        uint64_t seed);
/* y, and the saved mean (LayerNorm) and rstd, of inputs offset by 0.8 so centering matters. */
double opcmp_norm_fwd(const sp_backend *be, sp_norm_kind kind, int rows, int dim, uint64_t seed);
/* Elementwise activations on N(0, x_scale^2) inputs: act(x), act(g) * u, cap tanh(x / cap). */
double opcmp_act_fwd(const sp_backend *be, sp_act_kind kind, size_t n, double x_scale, uint64_t seed);
double opcmp_glu_fwd(const sp_backend *be, sp_act_kind kind, size_t n, double g_scale, uint64_t seed);
double opcmp_softcap_fwd(const sp_backend *be, size_t n, double cap, double x_scale, uint64_t seed);
/* The largest error of all of them: every activation kind alone and gated, and a soft-cap of 2, on
 * inputs of scale 3. */
double opcmp_elementwise_all(const sp_backend *be, size_t n, uint64_t seed);
/* RoPE with the table inv_freq[i] = theta^(-2i/rot_dims) (a uploaded copy), direction +1. */
double opcmp_rope(const sp_backend *be, int batch, int seq_len, int n_heads, int head_dim, int rot_dims,
                  double theta, uint64_t seed);
/* out and the saved probabilities (the CPU backend's `saved` layout). */
double opcmp_attention_fwd(const sp_backend *be, const sp_attn_shape *shape, uint64_t seed);
double opcmp_embed_fwd(const sp_backend *be, int batch, int seq_len, int dim, int vocab, int with_pos, double scale,
                       uint64_t seed);
/* Every third target is ignored (-1); logits are N(0, logit_scale^2). */
double opcmp_xent_fwd(const sp_backend *be, int rows, int vocab, double logit_scale, uint64_t seed);

#endif

/* model/model.h: a decoder-only Transformer built from a config, run on any backend.
 *
 * The model owns its parameters, their gradients, and the activations of the last forward pass
 * (every recipe slot of every block, plus what each op saved), all in backend memory. Forward,
 * backward (VJP) and forward-mode (JVP) are interpreters of the block recipes (model/recipe.h).
 *
 * Typical use:
 *   sp_model_create(&cfg, backend, &m);  sp_model_init(m, seed);        (or load via io/checkpoint.h)
 *   sp_model_forward(m, tokens, targets, batch, seq_len, &loss);        (targets NULL: no loss)
 *   sp_model_backward(m);                                               (grads of the mean loss)
 */
#ifndef SP_MODEL_H
#define SP_MODEL_H

#include "core/config.h"
#include "kernels/backend.h"
#include "model/params.h"
#include "model/recipe.h"

typedef struct sp_model sp_model;

/* cfg must be resolved and valid (sp_config_resolve, sp_config_validate). Parameters start at 0. */
sp_status sp_model_create(const sp_config *cfg, const sp_backend *be, sp_model **out);
void sp_model_free(sp_model *m);
const sp_config *sp_model_config(const sp_model *m);
const sp_backend *sp_model_backend(const sp_model *m);

/* ---- parameters (in sp_param_layout order) ---- */
int sp_model_n_params(const sp_model *m);
const sp_param_spec *sp_model_param_spec(const sp_model *m, int i);
int sp_model_find_param(const sp_model *m, const char *name); /* -1 when absent */
sp_real *sp_model_param(sp_model *m, int i);                  /* backend memory */
sp_real *sp_model_grad(sp_model *m, int i);                   /* backend memory */
size_t sp_model_n_weights(const sp_model *m);                 /* total element count */
/* Draws every parameter from its spec (N(0, std^2) or constant) with a seeded generator. */
sp_status sp_model_init(sp_model *m, uint64_t seed);
/* Host copies in and out (count = numel of the spec). */
void sp_model_set_param(sp_model *m, int i, const sp_real *host);
void sp_model_get_param(const sp_model *m, int i, sp_real *host);

/* ---- passes ----
 * tokens/targets are host int32 arrays [batch * seq_len]; seq_len <= max_seq_len; targets may be NULL
 * (no loss) and entries < 0 are ignored. loss (may be NULL) gets the mean over counted targets.
 * The activations stay until the next forward pass. */
sp_status sp_model_forward(sp_model *m, const int32_t *tokens, const int32_t *targets, int batch, int seq_len,
                           double *loss);
/* Zeroes every gradient, then back-propagates the mean loss of the last forward pass (which must
 * have had targets) into the parameter gradients and the embedding output gradient. */
sp_status sp_model_backward(sp_model *m);
/* The same with the mean loss scaled by weight, its parameter gradients added to the ones already
 * there when accumulate is set (else they replace them): a batch's gradient summed over passes of
 * fewer sequences, or several batches', without a second gradient buffer. The embedding output
 * gradient is always this pass's alone. */
sp_status sp_model_backward_weighted(sp_model *m, double weight, int accumulate);
/* Backend bytes the activations of a batch x seq_len forward + backward pass take (the workspace,
 * plus the attention scratch a backend may allocate per layer); the model's current activations
 * are left as they are. How the analyzers fit a memory budget. */
size_t sp_model_activation_bytes(sp_model *m, int batch, int seq_len);
/* Frees the activations of the last pass (they only grow, to the largest pass so far): the next
 * pass allocates what it needs. Between stages that pass different numbers of sequences, so that a
 * stage of fewer holds no more (analyzers/driver.c). */
void sp_model_release_activations(sp_model *m);
/* Waits for the backend and returns the first failure its ops recorded with sp_error since the last
 * forward pass began (SP_OK on the CPU, whose ops cannot fail). Device ops are void, so this is how
 * a GPU failure (a failed launch, a cuBLAS error) becomes a status: every pass above ends with it,
 * and callers that run backend ops of their own on model memory (an optimizer step, an upload)
 * check it after them. sp_model_forward on a device first clears errors recorded before it, which
 * callers have already handled, so they cannot hide the pass's own. */
sp_status sp_model_sync(const sp_model *m);
/* Logits of the last forward pass, backend memory [batch * seq_len, vocab]. */
const sp_real *sp_model_logits(const sp_model *m);
int sp_model_rows(const sp_model *m); /* batch * seq_len of the last forward pass */

/* ---- capture points, valid after a forward pass ----
 * Backend memory [rows, dim]; NULL when the model has no such point. Layer outputs: h_0 is the
 * block-0 input (embedding, or its norm with embed_norm), h_l the output of block l-1, l = 0..L.
 * stream 1 is siamese's Y stream (h_0 of both streams is the same embedding). */
const sp_real *sp_model_hidden(const sp_model *m, int l, int stream);
/* The input of W_2 in block l (after the nonlinearity), [rows, d_ff]. */
const sp_real *sp_model_ffn_latent(const sp_model *m, int l);
/* A recipe slot of block l by name ("sum_a", "sum_z", "u", ...), [rows, d_model]. */
const sp_real *sp_model_slot(const sp_model *m, int l, const char *slot_name);
/* The gradient w.r.t. the embedding output (h_0 before embed_norm), after backward, [rows, d_model]. */
const sp_real *sp_model_embed_grad(const sp_model *m);
/* The inputs of block l's attention (model/capture.c): q [rows, n_heads * head_dim] and k [rows,
 * n_kv_heads * head_dim], backend memory, as the backend's attention took them (after the q/k norms
 * and RoPE), and that call's shape (sizes, scale, soft-cap, window): what be->attn_stats reads.
 * SP_ERR_USAGE unless a forward pass has run, 0 <= l < n_layers and block l is not skipped. */
sp_status sp_model_attention_qk(const sp_model *m, int l, const sp_real **q, const sp_real **k, sp_attn_shape *shape);

/* ---- one block as a function, for Jacobian analyzers (after a forward pass) ----
 * Block l maps its input streams (each [rows, d_model]) to its output streams, around the point of
 * the last forward pass. jvp: t_out = J t_in. vjp: g_in = J^T g_out (overwritten; parameter
 * gradients untouched). Arrays hold n_streams pointers to backend memory. */
sp_status sp_model_block_jvp(sp_model *m, int l, const sp_real *const *t_in, sp_real *const *t_out);
sp_status sp_model_block_vjp(sp_model *m, int l, const sp_real *const *g_out, sp_real *const *g_in);
/* The JVP of block l for k tangents that are zero at every position but t (0 <= t < seq_len) of
 * sequence 0 of the last forward pass: t_in and t_out hold n_streams pointers to [k, d_model], row
 * j tangent j at t and the JVP's output at t. Causal attention keeps the positions before t at
 * zero, so this is the diagonal block (t, t) of J applied to k vectors at k rows of work (and
 * attention's core over k copies of the sequence) instead of k sequences (model/jvp_at.c). */
sp_status sp_model_block_jvp_at(sp_model *m, int l, int t, int k, const sp_real *const *t_in,
                                sp_real *const *t_out);
/* Evaluates block l on arbitrary inputs of the last forward pass's shape, leaving the saved
 * activations untouched (finite-difference references, what-if probes). */
sp_status sp_model_block_apply(sp_model *m, int l, const sp_real *const *x_in, sp_real *const *x_out);
/* The mean loss (over the counted targets, host `targets` of the pass's rows) the last forward pass
 * would have had if block l's input streams had been x_in: blocks l..L-1 (a skipped one the
 * identity) on the probe state, each writing `scratch` (n_streams backend [rows, d_model]; it may
 * not be x_in), then the output path and the cross-entropy; l = n_layers decodes x_in itself. The
 * blocks' saved activations stay, so a model's layer outputs can start one probe after another
 * (layer pruning: blocks before the change are not run again); the pass's logits and loss become
 * this call's, and no backward or HVP pass may follow until the next forward pass. */
sp_status sp_model_loss_from(sp_model *m, int l, const sp_real *const *x_in, sp_real *const *scratch,
                             const int32_t *targets, double *loss);

/* ---- the output path on any hidden state, for the logit lens (model/decode.c) ----
 * A decoder applies to streams h (n_streams pointers to [rows, d_model], backend memory; rows <=
 * max_rows) exactly what the forward pass applies to the last block's outputs: the final norms (none
 * where the config has none), the LM head and the logit soft-cap. It owns its buffers, so the
 * model's activations are left as they are; the returned logits [rows, vocab] (backend memory) stay
 * valid until the next call. */
typedef struct sp_decoder sp_decoder;
sp_status sp_decoder_create(sp_model *m, int max_rows, sp_decoder **out);
sp_status sp_decoder_run(sp_decoder *dec, int rows, const sp_real *const *h, const sp_real **logits);
void sp_decoder_free(sp_decoder *dec);

/* ---- curvature (model/hvp.c) ----
 * Block l's parameters are elements offset .. offset + count - 1 of the parameter vector (layout
 * order: every tensor of blocks/<l>/, contiguous). sp_model_hvp: hv = H_ll v, the Hessian of the
 * mean loss of the last forward pass (which must have had targets) with respect to block l's
 * parameters, times v; v and hv are backend [count]. Exact (forward mode over the backward pass, not
 * differences of gradients); about the cost of two forward and one backward pass over blocks l and
 * up. Parameter gradients are left as they are; no block may be skipped. */
void sp_model_block_param_range(const sp_model *m, int l, size_t *offset, size_t *count);
sp_status sp_model_hvp(sp_model *m, int l, const sp_real *v, sp_real *hv);

/* ---- block skipping, for pruning probes (model/skip.c) ----
 * A skipped block is the identity on every stream: the forward pass copies its inputs to its
 * outputs, the backward pass passes gradients straight through (its parameters get none), its
 * jvp/vjp/apply are the identity, and its FFN latent and named slots read as NULL. Takes effect
 * from the next forward pass; every block starts unskipped. */
sp_status sp_model_set_block_skip(sp_model *m, int l, int skip);
int sp_model_block_skipped(const sp_model *m, int l);

#endif

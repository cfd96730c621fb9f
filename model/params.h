/* model/params.h: the parameter layout of a model, a pure function of its config.
 *
 * This is the contract between the model, the initializer, the checkpoint reader/writer and the
 * importers: every tensor's stable hierarchical name (an HDF5 path below /params), shape
 * ([out, in] for matrices, like a PyTorch Linear weight), role, whether weight decay applies, and
 * how it is initialized. Order: embeddings, blocks 0..L-1 (norms in recipe order, attention,
 * FFN), final norms, untied head.
 *
 *   embed/tok [V, d]            embed/pos [max_seq_len, d] (learned positions)
 *   embed/norm/{gain,bias}      (peri with embed_norm)
 *   blocks/<l>/<norm>/{gain,bias}   norm names from the block's recipe; bias for LayerNorm only
 *   blocks/<l>/attn/{wq [q_dim, d], bq [q_dim], wk [kv_dim, d], bk [kv_dim], wv [kv_dim, d], bv [kv_dim],
 *                    wo [d, q_dim], bo [d]}   (q_dim = n_heads head_dim, kv_dim = n_kv_heads head_dim;
 *                                              bq, bk, bv with qkv_bias, bo with attn_out_bias)
 *   blocks/<l>/attn/{q_norm,k_norm,v_norm}/{gain,bias}   (hybrid: q, k, v over head_dim; qk_norm head:
 *                                              q, k over head_dim; olmo2, qk_norm full: q over q_dim,
 *                                              k over kv_dim)
 *   blocks/<l>/ffn/{w1 [d_ff, d], b1 [d_ff], w3 [d_ff, d], b3 [d_ff], w2 [d, d_ff], b2 [d]}
 *                               (w3, b3 for gated FFNs: SwiGLU, GEGLU up; b1, b3, b2 with ffn_bias)
 *   final_norm/{gain,bias}      (when the final norm is on)
 *   final_norm_x, final_norm_y, final_norm  (siamese: h = N_fin(N_x(X) + N_y(Y)))
 *   head/w [V, d]               (untied head)
 */
#ifndef SP_PARAMS_H
#define SP_PARAMS_H

#include "core/config.h"

typedef enum {
    SP_ROLE_TOK_EMBED,
    SP_ROLE_POS_EMBED,
    SP_ROLE_WQ,
    SP_ROLE_WK,
    SP_ROLE_WV,
    SP_ROLE_WO,
    SP_ROLE_W1,
    SP_ROLE_W2,
    SP_ROLE_W3,
    SP_ROLE_NORM_GAIN,
    SP_ROLE_NORM_BIAS,
    SP_ROLE_HEAD,
    SP_ROLE_LINEAR_BIAS, /* biases of W_Q, W_K, W_V, W_O, W_1, W_3, W_2: no weight decay, init 0 */
    SP_N_ROLES
} sp_param_role;

extern const char *const sp_role_names[]; /* "tok_embed", "wq", ... */

#define SP_PARAM_NAME_MAX 64

typedef struct {
    char name[SP_PARAM_NAME_MAX];
    int layer;          /* block index, -1 outside the blocks */
    sp_param_role role;
    int rank;           /* 1 or 2 */
    int64_t shape[2];   /* [out, in] or [dim, 1] */
    int decay;          /* AdamW weight decay applies (matrices, not norms or biases) */
    double init_std;    /* > 0: N(0, init_std^2); 0: constant init_value */
    double init_value;
} sp_param_spec;

/* Allocates *specs (free with free()). The config must be resolved and valid. */
sp_status sp_param_layout(const sp_config *cfg, sp_param_spec **specs, int *n_params);
size_t sp_param_numel(const sp_param_spec *spec);

#endif

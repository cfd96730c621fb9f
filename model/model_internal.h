/* model/model_internal.h: the private layout of sp_model, shared by the model's own files only.
 *
 * Parameters live in one backend buffer (and gradients in another) in sp_param_layout order, so the
 * whole parameter vector is contiguous; each block keeps the indices of its tensors.
 *
 * Activations: every block keeps a sp_block_state, every recipe slot one [rows, d_model] buffer
 * (SSA: a slot is written once per forward pass) plus what each step saved. The input slots of
 * block l are not copies: they point at h_0 (block 0) or at the output slots of block l-1. All
 * activation and scratch buffers are carved from one backend allocation (the arena), sized for the
 * rows of the forward call and kept while later calls fit in it.
 */
#ifndef SP_MODEL_INTERNAL_H
#define SP_MODEL_INTERNAL_H

#include "model/model.h"

/* A norm's parameter indices; bias is -1 for RMSNorm, gain -1 when the norm is absent. */
typedef struct {
    int gain, bias;
} sp_norm_params;

typedef struct {
    const sp_recipe *recipe;
    sp_attn_norm attn_norm;                    /* the recipe's, else the config's qk_norm */
    sp_norm_params norms[SP_RECIPE_MAX_NORMS]; /* recipe norm instances */
    int wq, wk, wv, wo;
    int bq, bk, bv, bo;         /* linear biases, -1 when absent */
    sp_norm_params qkv_norm[3]; /* q, k, v projection norms (hybrid: q, k, v; qk norms: q, k) */
    int w1, w3, w2;             /* w3 is -1 for GELU */
    int b1, b3, b2;
} sp_block_params;

/* What a norm saved: [rows] each (mean NULL for RMSNorm). */
typedef struct {
    sp_real *mean, *rstd;
} sp_norm_state;

/* What the attention sub-layer saved. */
typedef struct {
    sp_real *q_pre, *k_pre, *v_pre; /* projections before their norms (NULL when not normalized) */
    sp_real *q, *k, *v;             /* core attention inputs (after norm and RoPE) */
    sp_norm_state qkv_norm[3];
    sp_real *saved;                 /* backend statistics, attn_saved_elems */
    sp_real *a;                     /* core attention output, input of W_O */
} sp_attn_state;

/* What the FFN sub-layer saved. */
typedef struct {
    sp_real *g; /* x W1^T (GELU pre-activation, or the gate of a gated FFN) [rows, d_ff] */
    sp_real *u; /* x W3^T (gated FFN's up; NULL for GELU) */
    sp_real *h; /* latent: input of W2 */
} sp_ffn_state;

typedef struct {
    sp_real *slot[SP_RECIPE_MAX_SLOTS];
    sp_norm_state norm[SP_RECIPE_MAX_STEPS]; /* per NORM step */
    sp_attn_state attn;                      /* each recipe has one ATTN step */
    sp_ffn_state ffn;                        /* and one FFN step */
} sp_block_state;

/* Scratch for the backward and forward-mode passes, shared by all blocks. */
typedef struct {
    sp_real *slot[SP_RECIPE_MAX_SLOTS]; /* slot gradients or tangents [rows, d] */
    sp_real *stream[2][2];              /* ping-pong stream gradients between blocks [rows, d] */
    sp_real *dq, *dk, *dv;              /* attention input gradients/tangents */
    sp_real *dq_pre, *dk_pre, *dv_pre;  /* before the projection norms */
    sp_real *da;                        /* W_O input gradient/tangent [rows, q_dim] */
    sp_real *dg, *du, *dh;              /* FFN [rows, d_ff] */
} sp_scratch;

/* Everything outside the blocks. */
typedef struct {
    int32_t *ids, *targets;       /* backend [rows] */
    sp_real *ones;                /* [rows] of 1, for bias sums (NULL without linear biases) */
    sp_real *e;                   /* embedding output [rows, d] */
    sp_real *h0;                  /* block-0 input: e, or Ne(e) */
    sp_norm_state embed_norm;
    sp_real *fin_x, *fin_y, *fin_sum; /* siamese N_x(X), N_y(Y), their sum */
    sp_norm_state fin_x_norm, fin_y_norm, fin_norm;
    sp_real *hf;                  /* head input */
    sp_real *logits, *losses;     /* [rows, V] (soft-capped with final_softcap), [rows] */
    sp_real *dlogits, *dhf, *dfin_sum, *dh0, *de; /* gradients */
} sp_top_state;

struct sp_model {
    sp_config cfg;
    const sp_backend *be;
    sp_param_spec *specs;
    int n_params;
    size_t n_weights;
    size_t *offsets;   /* element offset of each parameter */
    sp_real *params;   /* backend, n_weights */
    sp_real *grads;    /* backend, n_weights */
    sp_block_params *blocks;
    sp_norm_params embed_norm, fin_x_norm, fin_y_norm, fin_norm;
    int tok, pos, head; /* pos -1 without learned positions; head = tok when tied */
    int has_bias;       /* some block has a linear bias */
    double *rope_freq[2]; /* backend, rope_dims / 2 inverse frequencies: global and local layers (NULL: none) */
    int max_slots;      /* largest n_slots over the blocks */

    /* shape of the last forward pass (rows 0 before any) */
    int batch, seq_len, rows;
    int has_loss;      /* the last forward pass had targets */
    int has_grads;     /* a backward pass ran after the last forward pass */
    double loss_count; /* counted targets of the last forward pass */

    /* activations, carved from one backend allocation */
    void *arena;
    int cap_rows;
    size_t cap_attn_saved;
    sp_block_state *state; /* [n_layers] */
    sp_top_state top;
    sp_scratch scratch;

    unsigned char *skipped; /* [n_layers], allocated by the first sp_model_set_block_skip; NULL: none */

    /* block_apply scratch (separate, so saved activations stay) */
    void *probe_arena;
    sp_block_state probe;
};

/* model/workspace.c: (re)allocates activations for the shape when it does not fit. */
sp_status sp_model_reserve(sp_model *m, int batch, int seq_len);
/* block_apply's scratch state for block l. */
sp_status sp_model_probe_state(sp_model *m, int l, sp_block_state **out);

/* ---- convenience ---- */
static inline sp_real *sp_model_param_or_null(sp_model *m, int i) { return i < 0 ? NULL : m->params + m->offsets[i]; }
static inline sp_real *sp_model_grad_or_null(sp_model *m, int i) { return i < 0 ? NULL : m->grads + m->offsets[i]; }

/* ---- linear maps with [out, in] weights and optional [out] biases (model/linear.c) ----
 * fwd: y = x W^T (+ b) (overwrites; b NULL: none, as for tangents). bwd: dx = dy W (accumulate 0) or
 * dx += dy W (accumulate 1), dW += dy^T x when dW is not NULL, db += column sums of dy when db is
 * not NULL. */
void sp_linear_fwd(const sp_model *m, int rows, int in_dim, int out_dim, const sp_real *x, const sp_real *w,
                   const sp_real *b, sp_real *y);
void sp_linear_bwd(const sp_model *m, int rows, int in_dim, int out_dim, const sp_real *x, const sp_real *w,
                   const sp_real *dy, sp_real *dx, int accumulate, sp_real *dw, sp_real *db);

/* ---- sub-layers (model/norm_op.c, model/attention.c, model/ffn.c) ----
 * fwd reads x [rows, d] and writes out [rows, d] plus its saved state; bwd ADDs into dx and (when
 * with_params) the parameter gradients, using scratch; jvp overwrites tout from tx, around the point
 * the state was saved at (attention and FFN need no x: their saved state carries the point). */
void sp_norm_op_fwd(sp_model *m, sp_norm_params np, int rows, int dim, const sp_real *x, sp_real *y,
                    const sp_norm_state *st);
void sp_norm_op_bwd(sp_model *m, sp_norm_params np, int rows, int dim, const sp_real *x, const sp_norm_state *st,
                    const sp_real *dy, sp_real *dx, int with_params);
void sp_norm_op_jvp(sp_model *m, sp_norm_params np, int rows, int dim, const sp_real *x, const sp_norm_state *st,
                    const sp_real *tx, sp_real *ty);

/* The backend attention call of block l for a batch x seq_len pass: sizes, scale, soft-cap, window. */
sp_attn_shape sp_attn_shape_of(const sp_model *m, int l, int batch, int seq_len);
void sp_attn_fwd(sp_model *m, int l, const sp_real *x, sp_attn_state *st, sp_real *out);
void sp_attn_bwd(sp_model *m, int l, const sp_real *x, const sp_attn_state *st, const sp_real *dout, sp_real *dx,
                 int with_params);
void sp_attn_jvp(sp_model *m, int l, const sp_attn_state *st, const sp_real *tx, sp_real *tout);

void sp_ffn_fwd(sp_model *m, int l, const sp_real *x, sp_ffn_state *st, sp_real *out);
void sp_ffn_bwd(sp_model *m, int l, const sp_real *x, const sp_ffn_state *st, const sp_real *dout, sp_real *dx,
                int with_params);
void sp_ffn_jvp(sp_model *m, int l, const sp_ffn_state *st, const sp_real *tx, sp_real *tout);

/* ---- the output path (model/forward.c): the forward pass's last step, and the logit lens's
 * decoder (model/decode.c) on any layer output ---- */
typedef struct {
    sp_real *fin_x, *fin_y, *fin_sum; /* siamese N_x(X), N_y(Y), their sum (unused otherwise) */
    sp_real *hf;                      /* the final norm's output (unused without one) */
    sp_norm_state fin_x_norm, fin_y_norm, fin_norm;
} sp_out_bufs;
/* logits [rows, vocab] of the streams x (x[1]: siamese's Y): final norms, head, logit soft-cap. */
void sp_output_fwd(sp_model *m, int rows, const sp_real *const *x, const sp_out_bufs *b, sp_real *logits);

/* ---- block interpreters (model/forward.c, model/backward.c, model/jvp.c) ---- */
/* SP_ERR_USAGE naming `who` unless a forward pass has run and 0 <= l < n_layers. */
sp_status sp_model_check_block(const sp_model *m, int l, const char *who);
void sp_block_forward(sp_model *m, int l, sp_block_state *st);
/* g_out: stream output gradients (scaled in place, consumed); g_in: ADDed into. */
void sp_block_backward(sp_model *m, int l, const sp_block_state *st, sp_real *const *g_out, sp_real *const *g_in,
                       int with_params);
/* model/skip.c: the identity of a skipped block, stream by stream: out = in, or out += in with
 * accumulate (the backward pass's contract). */
void sp_block_identity(const sp_model *m, int l, const sp_real *const *in, sp_real *const *out, int accumulate);

#endif

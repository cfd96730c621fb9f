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

/* The forward tangents of k tangents at one position t of sequence 0 (model/jvp_at.c): the
 * row-wise steps run on k rows holding position t's state, attention's core (attn_jvp_at) on the
 * forward pass's attention state `prefix`. */
typedef struct {
    const sp_attn_state *prefix;
    sp_real *rope_pad; /* [k, seq_len, widest projection]: RoPE turns rows by their position */
    int t, seq_len;
} sp_row_jvp;

/* What sp_model_block_jvp_at carves (model/workspace.c): block states of k rows for the primal
 * at t and the tangents, and the RoPE pad. */
typedef struct {
    sp_block_state at_t, tangents;
    sp_real *rope_pad;
} sp_row_bufs;

/* A tangent of block l's parameters for the forward-mode and second-order passes (model/hvp.c):
 * v and hv hold one element per parameter element of the block, in layout order from the block's
 * first element `base`; v NULL: the parameters do not move. */
typedef struct {
    const sp_real *v; /* the parameter tangent */
    sp_real *hv;      /* the tangent of the parameter gradient, ADDed into */
    int first, last;  /* the block's parameter indices, first..last */
    size_t base;      /* offsets[first] */
} sp_param_tangent;

/* The second-order pass through one block: the forward tangents of its slots and internals
 * (t, the layout of the saved state; t.slot[s] for the input streams points at their tangents),
 * the tangents of the backward pass's gradients (tg, the layout of the scratch; g_out, g_in the
 * stream gradients' tangents as in sp_block_backward), and the parameter tangent. */
typedef struct {
    sp_block_state *t;
    sp_scratch *tg;
    sp_real *const *g_out, *const *g_in;
    const sp_param_tangent *p;
    sp_real *norm_tmp, *norm_mean, *norm_rstd; /* scratch of a norm's parameter tangent */
    const sp_row_jvp *row;                     /* not NULL: the tangents of one position (sp_attn_jvp_at) */
} sp_tangent;

/* What a Hessian-vector product keeps (model/workspace.c carves it, model/hvp.c uses it). */
typedef struct {
    sp_block_state t;
    sp_scratch tg;
    sp_real *zero;                          /* zero tangent of block l's inputs [rows, d] */
    sp_real **t_out;                        /* [n_layers * 2]: tangents of each block's output streams */
    sp_real *tlogits, *dcapped, *tdlogits;  /* [rows, vocab] */
    sp_real *thf, *tdhf, *tfin_x, *tfin_y, *tfin_sum, *tdfin_sum; /* [rows, d] */
    sp_real *norm_tmp, *norm_mean, *norm_rstd; /* [rows, widest projection], [rows * n_heads] x 2 */
} sp_hvp_state;

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

    /* Hessian-vector product buffers (allocated by the first sp_model_hvp) */
    void *hvp_arena;
    sp_hvp_state hvp;

    /* the buffers of sp_model_block_jvp_at, in an allocation of row_arena_bytes */
    void *row_arena;
    size_t row_arena_bytes;
    sp_row_bufs row_bufs;
};

/* model/workspace.c: (re)allocates activations for the shape when it does not fit. */
sp_status sp_model_reserve(sp_model *m, int batch, int seq_len);
/* block_apply's scratch state for block l. */
sp_status sp_model_probe_state(sp_model *m, int l, sp_block_state **out);
/* sp_model_block_jvp_at's buffers for block l, k tangents and the forward pass's seq_len, in one
 * allocation kept while later calls fit. */
sp_status sp_model_row_bufs(sp_model *m, int l, int k, sp_row_bufs **out);
/* The Hessian-vector product's buffers, carved for the current shape at the first call after a
 * reserve; t is left carved for block l. */
sp_status sp_model_hvp_state(sp_model *m, int l, sp_hvp_state **out);
/* Carves the tangent state of block l into the HVP buffers (the blocks' layouts differ). */
void sp_model_hvp_block(sp_model *m, int l);

/* The parameter tangent's element of parameter i (NULL when i < 0, pt or pt->v is NULL, or i is
 * outside the block), and its gradient tangent's. */
static inline const sp_real *sp_tangent_param(const sp_model *m, const sp_param_tangent *pt, int i)
{
    return !pt || !pt->v || i < pt->first || i > pt->last ? NULL : pt->v + (m->offsets[i] - pt->base);
}
static inline sp_real *sp_tangent_grad(const sp_model *m, const sp_param_tangent *pt, int i)
{
    return !pt || !pt->hv || i < pt->first || i > pt->last ? NULL : pt->hv + (m->offsets[i] - pt->base);
}

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
/* Tangents (tw, tb NULL: the weights do not move): ty = tx W^T + x tW^T + tb (overwrites), and the
 * tangent of the VJP: tdx += tdy W + dy tW, tdw += tdy^T x + dy^T tx, tdb += column sums of tdy
 * (tdw, tdb NULL: not wanted; tdw is required with tw). */
void sp_linear_jvp(const sp_model *m, int rows, int in_dim, int out_dim, const sp_real *x, const sp_real *w,
                   const sp_real *tx, const sp_real *tw, const sp_real *tb, sp_real *ty);
void sp_linear_bwd_jvp(const sp_model *m, int rows, int in_dim, int out_dim, const sp_real *x, const sp_real *w,
                       const sp_real *tx, const sp_real *tw, const sp_real *dy, const sp_real *tdy, sp_real *tdx,
                       sp_real *tdw, sp_real *tdb);

/* ---- sub-layers (model/norm_op.c, model/attention.c, model/ffn.c) ----
 * fwd reads x [rows, d] and writes out [rows, d] plus its saved state; bwd ADDs into dx and (when
 * with_params) the parameter gradients, using scratch; jvp overwrites tout from tx (and the
 * parameter tangent tan->p, when given), around the point the state was saved at, keeping the
 * tangents of its internals in tan->t; bwd_jvp, run right after bwd (whose gradients it reads from
 * the scratch), ADDs the tangent of dx into tdx and of the parameter gradients into tan->p->hv. */
void sp_norm_op_fwd(sp_model *m, sp_norm_params np, int rows, int dim, const sp_real *x, sp_real *y,
                    const sp_norm_state *st);
void sp_norm_op_bwd(sp_model *m, sp_norm_params np, int rows, int dim, const sp_real *x, const sp_norm_state *st,
                    const sp_real *dy, sp_real *dx, int with_params);
void sp_norm_op_jvp(sp_model *m, sp_norm_params np, int rows, int dim, const sp_real *x, const sp_norm_state *st,
                    const sp_real *tx, sp_real *ty, const sp_tangent *tan);
void sp_norm_op_bwd_jvp(sp_model *m, sp_norm_params np, int rows, int dim, const sp_real *x, const sp_norm_state *st,
                        const sp_real *tx, const sp_real *dy, const sp_real *tdy, sp_real *tdx, const sp_tangent *tan);

/* The backend attention call of block l for a batch x seq_len pass: sizes, scale, soft-cap, window. */
sp_attn_shape sp_attn_shape_of(const sp_model *m, int l, int batch, int seq_len);
void sp_attn_fwd(sp_model *m, int l, const sp_real *x, sp_attn_state *st, sp_real *out);
void sp_attn_bwd(sp_model *m, int l, const sp_real *x, const sp_attn_state *st, const sp_real *dout, sp_real *dx,
                 int with_params);
void sp_attn_jvp(sp_model *m, int l, const sp_real *x, const sp_attn_state *st, const sp_real *tx, sp_real *tout,
                 const sp_tangent *tan);
/* sp_attn_jvp at position tan->row->t: x, st, tx and tout hold m->rows rows of that position, one
 * per tangent; the core (attn_jvp_at) reads tan->row->prefix. */
void sp_attn_jvp_at(sp_model *m, int l, const sp_real *x, const sp_attn_state *st, const sp_real *tx, sp_real *tout,
                    const sp_tangent *tan);
void sp_attn_bwd_jvp(sp_model *m, int l, const sp_real *x, const sp_attn_state *st, const sp_real *tx,
                     const sp_real *dout, const sp_real *tdout, sp_real *tdx, const sp_tangent *tan);

void sp_ffn_fwd(sp_model *m, int l, const sp_real *x, sp_ffn_state *st, sp_real *out);
void sp_ffn_bwd(sp_model *m, int l, const sp_real *x, const sp_ffn_state *st, const sp_real *dout, sp_real *dx,
                int with_params);
void sp_ffn_jvp(sp_model *m, int l, const sp_real *x, const sp_ffn_state *st, const sp_real *tx, sp_real *tout,
                const sp_tangent *tan);
void sp_ffn_bwd_jvp(sp_model *m, int l, const sp_real *x, const sp_ffn_state *st, const sp_real *tx,
                    const sp_real *dout, const sp_real *tdout, sp_real *tdx, const sp_tangent *tan);

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
/* The block-as-a-function entry points: the inputs copied into block_apply's probe state, run on it,
 * its output slots copied out (a skipped block: the identity). */
sp_status sp_model_probe_run(sp_model *m, int l, const char *who, void (*run)(sp_model *m, int l, sp_block_state *st),
                             const sp_real *const *in, sp_real *const *out);
void sp_block_forward(sp_model *m, int l, sp_block_state *st);
/* g_out: stream output gradients (scaled in place, consumed); g_in: ADDed into. With tan, each
 * step's tangent follows it (tan->g_out, tan->g_in likewise; tan->t holds the block's forward
 * tangents, from sp_block_jvp). */
void sp_block_backward(sp_model *m, int l, const sp_block_state *st, sp_real *const *g_out, sp_real *const *g_in,
                       int with_params, const sp_tangent *tan);
/* model/jvp.c: the forward tangents of block l's slots and internals into tan->t, from the input
 * streams' tangents tan->t->slot[s] and the parameter tangent tan->p, around the block state st
 * (the forward pass's, or with tan->row one position's). */
void sp_block_jvp(sp_model *m, int l, const sp_block_state *st, const sp_tangent *tan);
/* model/backward.c: from the mean loss (times weight) to the last block's output stream gradients
 * m->scratch.stream[0] through the head and the final norms (their parameter gradients with
 * with_params), keeping dlogits, dhf and dfin_sum. */
void sp_output_bwd(sp_model *m, double weight, int with_params);
/* model/skip.c: the identity of a skipped block, stream by stream: out = in, or out += in with
 * accumulate (the backward pass's contract). */
void sp_block_identity(const sp_model *m, int l, const sp_real *const *in, sp_real *const *out, int accumulate);

#endif

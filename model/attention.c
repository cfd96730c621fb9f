/* model/attention.c: the attention sub-layer of block l, out = attn(q, k, v) W_O^T (+ b_O) with
 * q = x W_Q^T (+ b_Q), k = x W_K^T (+ b_K), v = x W_V^T (+ b_V) (one gemm each over all rows),
 * optionally normalized (hybrid: q, k, v per head over head_dim; qk_norm head: q, k per head; olmo2
 * and qk_norm full: q over q_dim, k over kv_dim), then RoPE on q and k with the layer's frequency
 * table (global or local), then the backend's attention with the layer's scale, soft-cap and window. */
#include <math.h>

#include "model/model_internal.h"
#include "model/rope_freq.h"

/* One of the three projections and where its values, saved state and scratch live. */
typedef struct {
    int w, b;                /* weight and bias indices (bias -1: none) */
    int dim;                 /* projected width */
    int norm_rows;           /* rows of the norm's view (rows * heads for per-head norms) */
    int norm_dim;
    sp_norm_params np;       /* gain -1: not normalized */
    const sp_norm_state *ns;
    sp_real *pre, *post;     /* saved: projection, and the attention input (post == pre's target when no norm) */
    sp_real *d_pre, *d_post; /* scratch gradients or tangents */
    int rope_heads;          /* 0: no RoPE on this projection */
} projection;

/* The projections over the values of st and the gradients (or their tangents) of sc. */
static void projections(sp_model *m, int l, const sp_attn_state *st, const sp_scratch *sc, projection p[3])
{
    const sp_config *cfg = &m->cfg;
    const sp_block_params *b = &m->blocks[l];
    const int rows = m->rows, qd = sp_config_q_dim(cfg), kv = sp_config_kv_dim(cfg), hd = sp_config_head_dim(cfg);
    const int per_head = sp_attn_norm_per_head(b->attn_norm);
    const int rope = cfg->pos == SP_POS_ROPE;
    const int heads[3] = {cfg->n_heads, cfg->n_kv_heads, cfg->n_kv_heads};
    const int w[3] = {b->wq, b->wk, b->wv}, bias[3] = {b->bq, b->bk, b->bv}, dims[3] = {qd, kv, kv};
    sp_real *const pre[3] = {st->q_pre, st->k_pre, st->v_pre}, *const post[3] = {st->q, st->k, st->v};
    sp_real *const d_pre[3] = {sc->dq_pre, sc->dk_pre, sc->dv_pre}, *const d_post[3] = {sc->dq, sc->dk, sc->dv};
    for (int i = 0; i < 3; i++) {
        p[i] = (projection){
            .w = w[i],
            .b = bias[i],
            .dim = dims[i],
            .norm_rows = per_head ? rows * heads[i] : rows,
            .norm_dim = per_head ? hd : dims[i],
            .np = b->qkv_norm[i],
            .ns = &st->qkv_norm[i],
            .pre = pre[i],
            .post = post[i],
            .d_pre = d_pre[i],
            .d_post = d_post[i],
            .rope_heads = rope && i < 2 ? heads[i] : 0,
        };
    }
}

static void rope(const sp_model *m, int l, const projection *p, int direction, sp_real *x)
{
    if (p->rope_heads)
        m->be->rope(m->rows, m->seq_len, p->rope_heads, sp_config_head_dim(&m->cfg), sp_config_rope_dims(&m->cfg),
                    m->rope_freq[sp_rope_layer_local(&m->cfg, l)], direction, x);
}

sp_attn_shape sp_attn_shape_of(const sp_model *m, int l, int batch, int seq_len)
{
    const sp_config *cfg = &m->cfg;
    const int hd = sp_config_head_dim(cfg);
    return (sp_attn_shape){.batch = batch,
                           .seq_len = seq_len,
                           .n_heads = cfg->n_heads,
                           .n_kv_heads = cfg->n_kv_heads,
                           .head_dim = hd,
                           .scale = cfg->attn_scale > 0 ? cfg->attn_scale : 1.0 / sqrt((double)hd),
                           .softcap = cfg->attn_softcap,
                           .window = sp_config_layer_windowed(cfg, l) ? cfg->sliding_window : 0};
}

void sp_attn_fwd(sp_model *m, int l, const sp_real *x, sp_attn_state *st, sp_real *out)
{
    const sp_block_params *b = &m->blocks[l];
    const int rows = m->rows, d = m->cfg.d_model, qd = sp_config_q_dim(&m->cfg);
    projection p[3];
    projections(m, l, st, &m->scratch, p);
    for (int i = 0; i < 3; i++) {
        const int normed = p[i].np.gain >= 0;
        sp_linear_fwd(m, rows, d, p[i].dim, x, sp_model_param(m, p[i].w), sp_model_param_or_null(m, p[i].b),
                      normed ? p[i].pre : p[i].post);
        if (normed)
            sp_norm_op_fwd(m, p[i].np, p[i].norm_rows, p[i].norm_dim, p[i].pre, p[i].post, p[i].ns);
        rope(m, l, &p[i], +1, p[i].post);
    }
    const sp_attn_shape shape = sp_attn_shape_of(m, l, m->batch, m->seq_len);
    m->be->attn_fwd(&shape, st->q, st->k, st->v, st->saved, st->a);
    sp_linear_fwd(m, rows, qd, d, st->a, sp_model_param(m, b->wo), sp_model_param_or_null(m, b->bo), out);
}

void sp_attn_bwd(sp_model *m, int l, const sp_real *x, const sp_attn_state *st, const sp_real *dout, sp_real *dx,
                 int with_params)
{
    const sp_backend *be = m->be;
    const sp_block_params *b = &m->blocks[l];
    const int rows = m->rows, d = m->cfg.d_model, qd = sp_config_q_dim(&m->cfg);
    const sp_scratch *sc = &m->scratch;
    sp_linear_bwd(m, rows, qd, d, st->a, sp_model_param(m, b->wo), dout, sc->da, 0,
                  with_params ? sp_model_grad(m, b->wo) : NULL, with_params ? sp_model_grad_or_null(m, b->bo) : NULL);

    projection p[3];
    projections(m, l, st, sc, p);
    for (int i = 0; i < 3; i++)
        be->zero(p[i].d_post, (size_t)rows * (size_t)p[i].dim * sizeof(sp_real));
    const sp_attn_shape shape = sp_attn_shape_of(m, l, m->batch, m->seq_len);
    be->attn_bwd(&shape, st->q, st->k, st->v, st->saved, sc->da, sc->dq, sc->dk, sc->dv);
    for (int i = 0; i < 3; i++) {
        rope(m, l, &p[i], -1, p[i].d_post);
        const sp_real *dproj = p[i].d_post;
        if (p[i].np.gain >= 0) {
            be->zero(p[i].d_pre, (size_t)rows * (size_t)p[i].dim * sizeof(sp_real));
            sp_norm_op_bwd(m, p[i].np, p[i].norm_rows, p[i].norm_dim, p[i].pre, p[i].ns, p[i].d_post, p[i].d_pre,
                           with_params);
            dproj = p[i].d_pre;
        }
        sp_linear_bwd(m, rows, d, p[i].dim, x, sp_model_param(m, p[i].w), dproj, dx, 1,
                      with_params ? sp_model_grad(m, p[i].w) : NULL,
                      with_params ? sp_model_grad_or_null(m, p[i].b) : NULL);
    }
}

void sp_attn_jvp(sp_model *m, int l, const sp_real *x, const sp_attn_state *st, const sp_real *tx, sp_real *tout,
                 const sp_tangent *tan)
{
    const sp_block_params *b = &m->blocks[l];
    const int rows = m->rows, d = m->cfg.d_model, qd = sp_config_q_dim(&m->cfg);
    sp_attn_state *ts = &tan->t->attn;
    projection p[3], t[3];
    projections(m, l, st, &m->scratch, p);
    projections(m, l, ts, &m->scratch, t); /* only the tangents' values: no gradient is read */
    for (int i = 0; i < 3; i++) {
        const int normed = p[i].np.gain >= 0;
        sp_linear_jvp(m, rows, d, p[i].dim, x, sp_model_param(m, p[i].w), tx, sp_tangent_param(m, tan->p, p[i].w),
                      sp_tangent_param(m, tan->p, p[i].b), normed ? t[i].pre : t[i].post);
        if (normed)
            sp_norm_op_jvp(m, p[i].np, p[i].norm_rows, p[i].norm_dim, p[i].pre, p[i].ns, t[i].pre, t[i].post, tan);
        rope(m, l, &p[i], +1, t[i].post);
    }
    const sp_attn_shape shape = sp_attn_shape_of(m, l, m->batch, m->seq_len);
    m->be->attn_jvp(&shape, st->q, st->k, st->v, st->saved, ts->q, ts->k, ts->v, ts->a);
    sp_linear_jvp(m, rows, qd, d, st->a, sp_model_param(m, b->wo), ts->a, sp_tangent_param(m, tan->p, b->wo),
                  sp_tangent_param(m, tan->p, b->bo), tout);
}

void sp_attn_jvp_at(sp_model *m, int l, const sp_real *x, const sp_attn_state *st, const sp_real *tx, sp_real *tout,
                    const sp_tangent *tan)
{
    const sp_backend *be = m->be;
    const sp_block_params *b = &m->blocks[l];
    const sp_row_jvp *at = tan->row;
    const int k = m->rows, d = m->cfg.d_model, qd = sp_config_q_dim(&m->cfg), hd = sp_config_head_dim(&m->cfg);
    const size_t E = sizeof(sp_real), pad_rows = (size_t)k * (size_t)at->seq_len;
    sp_attn_state *ts = &tan->t->attn;
    projection p[3], t[3];
    projections(m, l, st, &m->scratch, p); /* only the saved values and norms are read */
    projections(m, l, ts, &m->scratch, t);
    for (int i = 0; i < 3; i++) {
        const int normed = p[i].np.gain >= 0;
        sp_linear_jvp(m, k, d, p[i].dim, x, sp_model_param(m, p[i].w), tx, NULL, NULL, normed ? t[i].pre : t[i].post);
        if (normed)
            sp_norm_op_jvp(m, p[i].np, p[i].norm_rows, p[i].norm_dim, p[i].pre, p[i].ns, t[i].pre, t[i].post, tan);
        if (p[i].rope_heads) { /* turned by t: each row at position t of its own padded sequence */
            const size_t row = (size_t)p[i].dim * E, seq = (size_t)at->seq_len * row;
            sp_real *at_t = at->rope_pad + (size_t)at->t * p[i].dim;
            be->zero(at->rope_pad, pad_rows * row);
            be->copy_rows(at_t, seq, t[i].post, row, row, (size_t)k);
            be->rope((int)pad_rows, at->seq_len, p[i].rope_heads, hd, sp_config_rope_dims(&m->cfg),
                     m->rope_freq[sp_rope_layer_local(&m->cfg, l)], +1, at->rope_pad);
            be->copy_rows(t[i].post, row, at_t, seq, row, (size_t)k);
        }
    }
    const sp_attn_shape shape = sp_attn_shape_of(m, l, 1, at->seq_len);
    be->attn_jvp_at(&shape, at->prefix->q, at->prefix->k, at->prefix->v, at->prefix->saved, at->t, k, ts->q, ts->k,
                    ts->v, ts->a);
    sp_linear_jvp(m, k, qd, d, st->a, sp_model_param(m, b->wo), ts->a, NULL, NULL, tout);
}

/* Mirrors sp_attn_bwd, whose gradients are still in the model's scratch: p[i].d_post holds the
 * gradient of the normed projection (RoPE already undone), p[i].d_pre that of the raw one. */
void sp_attn_bwd_jvp(sp_model *m, int l, const sp_real *x, const sp_attn_state *st, const sp_real *tx,
                     const sp_real *dout, const sp_real *tdout, sp_real *tdx, const sp_tangent *tan)
{
    const sp_backend *be = m->be;
    const sp_block_params *b = &m->blocks[l];
    const int rows = m->rows, d = m->cfg.d_model, qd = sp_config_q_dim(&m->cfg);
    const sp_attn_state *ts = &tan->t->attn;
    const sp_scratch *sc = &m->scratch, *tg = tan->tg;
    const sp_param_tangent *pt = tan->p;
    be->zero(tg->da, (size_t)rows * (size_t)qd * sizeof(sp_real));
    sp_linear_bwd_jvp(m, rows, qd, d, st->a, sp_model_param(m, b->wo), ts->a, sp_tangent_param(m, pt, b->wo), dout,
                      tdout, tg->da, sp_tangent_grad(m, pt, b->wo), sp_tangent_grad(m, pt, b->bo));

    projection p[3], t[3];
    projections(m, l, st, sc, p);
    projections(m, l, ts, tg, t);
    for (int i = 0; i < 3; i++)
        be->zero(t[i].d_post, (size_t)rows * (size_t)p[i].dim * sizeof(sp_real));
    const sp_attn_shape shape = sp_attn_shape_of(m, l, m->batch, m->seq_len);
    be->attn_bwd_jvp(&shape, st->q, st->k, st->v, st->saved, ts->q, ts->k, ts->v, sc->da, tg->da, tg->dq, tg->dk,
                     tg->dv);
    for (int i = 0; i < 3; i++) {
        rope(m, l, &p[i], -1, t[i].d_post);
        const sp_real *dproj = p[i].d_post, *tdproj = t[i].d_post;
        if (p[i].np.gain >= 0) {
            be->zero(t[i].d_pre, (size_t)rows * (size_t)p[i].dim * sizeof(sp_real));
            sp_norm_op_bwd_jvp(m, p[i].np, p[i].norm_rows, p[i].norm_dim, p[i].pre, p[i].ns, t[i].pre, p[i].d_post,
                               t[i].d_post, t[i].d_pre, tan);
            dproj = p[i].d_pre;
            tdproj = t[i].d_pre;
        }
        sp_linear_bwd_jvp(m, rows, d, p[i].dim, x, sp_model_param(m, p[i].w), tx, sp_tangent_param(m, pt, p[i].w),
                          dproj, tdproj, tdx, sp_tangent_grad(m, pt, p[i].w), sp_tangent_grad(m, pt, p[i].b));
    }
}

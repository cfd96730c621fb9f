/* model/ffn.c: the FFN sub-layer of block l. GELU: h = gelu(x W1^T + b1); gated (SwiGLU, GEGLU):
 * h = act(x W1^T + b1) * (x W3^T + b3) with act = silu or gelu; out = h W2^T + b2 (biases with
 * ffn_bias). GELU is the tanh approximation or the exact erf form (cfg->gelu). h is the "FFN
 * latent" capture point. */
#include "model/model_internal.h"

/* The activation of W1's output. */
static sp_act_kind ffn_act(const sp_config *cfg)
{
    if (cfg->ffn == SP_FFN_SWIGLU)
        return SP_ACT_SILU;
    return cfg->gelu == SP_GELU_ERF ? SP_ACT_GELU_ERF : SP_ACT_GELU_TANH;
}

void sp_ffn_fwd(sp_model *m, int l, const sp_real *x, sp_ffn_state *st, sp_real *out)
{
    const sp_block_params *b = &m->blocks[l];
    const int rows = m->rows, d = m->cfg.d_model, dff = m->cfg.d_ff;
    const size_t n = (size_t)rows * (size_t)dff;
    const sp_act_kind act = ffn_act(&m->cfg);
    sp_linear_fwd(m, rows, d, dff, x, sp_model_param(m, b->w1), sp_model_param_or_null(m, b->b1), st->g);
    if (st->u) {
        sp_linear_fwd(m, rows, d, dff, x, sp_model_param(m, b->w3), sp_model_param_or_null(m, b->b3), st->u);
        m->be->glu_fwd(act, n, st->g, st->u, st->h);
    } else {
        m->be->act_fwd(act, n, st->g, st->h);
    }
    sp_linear_fwd(m, rows, dff, d, st->h, sp_model_param(m, b->w2), sp_model_param_or_null(m, b->b2), out);
}

void sp_ffn_bwd(sp_model *m, int l, const sp_real *x, const sp_ffn_state *st, const sp_real *dout, sp_real *dx,
                int with_params)
{
    const sp_block_params *b = &m->blocks[l];
    const sp_backend *be = m->be;
    const sp_scratch *sc = &m->scratch;
    const int rows = m->rows, d = m->cfg.d_model, dff = m->cfg.d_ff;
    const size_t n = (size_t)rows * (size_t)dff;
    const sp_act_kind act = ffn_act(&m->cfg);
#define GRAD(i) (with_params ? sp_model_grad_or_null(m, i) : NULL)
    sp_linear_bwd(m, rows, dff, d, st->h, sp_model_param(m, b->w2), dout, sc->dh, 0, GRAD(b->w2), GRAD(b->b2));
    be->zero(sc->dg, n * sizeof(sp_real));
    if (st->u) {
        be->zero(sc->du, n * sizeof(sp_real));
        be->glu_bwd(act, n, st->g, st->u, sc->dh, sc->dg, sc->du);
        sp_linear_bwd(m, rows, d, dff, x, sp_model_param(m, b->w3), sc->du, dx, 1, GRAD(b->w3), GRAD(b->b3));
    } else {
        be->act_bwd(act, n, st->g, sc->dh, sc->dg);
    }
    sp_linear_bwd(m, rows, d, dff, x, sp_model_param(m, b->w1), sc->dg, dx, 1, GRAD(b->w1), GRAD(b->b1));
#undef GRAD
}

void sp_ffn_jvp(sp_model *m, int l, const sp_real *x, const sp_ffn_state *st, const sp_real *tx, sp_real *tout,
                const sp_tangent *tan)
{
    const sp_block_params *b = &m->blocks[l];
    const sp_param_tangent *pt = tan->p;
    const sp_ffn_state *ts = &tan->t->ffn;
    const int rows = m->rows, d = m->cfg.d_model, dff = m->cfg.d_ff;
    const size_t n = (size_t)rows * (size_t)dff;
    const sp_act_kind act = ffn_act(&m->cfg);
#define TPARAM(i) sp_tangent_param(m, pt, i)
    sp_linear_jvp(m, rows, d, dff, x, sp_model_param(m, b->w1), tx, TPARAM(b->w1), TPARAM(b->b1), ts->g);
    if (st->u) {
        sp_linear_jvp(m, rows, d, dff, x, sp_model_param(m, b->w3), tx, TPARAM(b->w3), TPARAM(b->b3), ts->u);
        m->be->glu_jvp(act, n, st->g, st->u, ts->g, ts->u, ts->h);
    } else {
        m->be->act_jvp(act, n, st->g, ts->g, ts->h);
    }
    sp_linear_jvp(m, rows, dff, d, st->h, sp_model_param(m, b->w2), ts->h, TPARAM(b->w2), TPARAM(b->b2), tout);
}

/* Mirrors sp_ffn_bwd, whose gradients dh, dg, du are still in the model's scratch. */
void sp_ffn_bwd_jvp(sp_model *m, int l, const sp_real *x, const sp_ffn_state *st, const sp_real *tx,
                    const sp_real *dout, const sp_real *tdout, sp_real *tdx, const sp_tangent *tan)
{
    const sp_block_params *b = &m->blocks[l];
    const sp_backend *be = m->be;
    const sp_param_tangent *pt = tan->p;
    const sp_ffn_state *ts = &tan->t->ffn;
    const sp_scratch *sc = &m->scratch, *tg = tan->tg;
    const int rows = m->rows, d = m->cfg.d_model, dff = m->cfg.d_ff;
    const size_t n = (size_t)rows * (size_t)dff;
    const sp_act_kind act = ffn_act(&m->cfg);
#define TGRAD(i) sp_tangent_grad(m, pt, i)
    be->zero(tg->dh, n * sizeof(sp_real));
    sp_linear_bwd_jvp(m, rows, dff, d, st->h, sp_model_param(m, b->w2), ts->h, TPARAM(b->w2), dout, tdout, tg->dh,
                      TGRAD(b->w2), TGRAD(b->b2));
    be->zero(tg->dg, n * sizeof(sp_real));
    if (st->u) {
        be->zero(tg->du, n * sizeof(sp_real));
        be->glu_bwd_jvp(act, n, st->g, st->u, ts->g, ts->u, sc->dh, tg->dh, tg->dg, tg->du);
        sp_linear_bwd_jvp(m, rows, d, dff, x, sp_model_param(m, b->w3), tx, TPARAM(b->w3), sc->du, tg->du, tdx,
                          TGRAD(b->w3), TGRAD(b->b3));
    } else {
        be->act_bwd_jvp(act, n, st->g, ts->g, sc->dh, tg->dh, tg->dg);
    }
    sp_linear_bwd_jvp(m, rows, d, dff, x, sp_model_param(m, b->w1), tx, TPARAM(b->w1), sc->dg, tg->dg, tdx,
                      TGRAD(b->w1), TGRAD(b->b1));
#undef TGRAD
#undef TPARAM
}

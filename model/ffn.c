/* model/ffn.c: the FFN sub-layer of block l. GELU: h = gelu(x W1^T); SwiGLU: h = silu(x W1^T) * (x W3^T);
 * out = h W2^T. h is the "FFN latent" capture point. */
#include "model/model_internal.h"

void sp_ffn_fwd(sp_model *m, int l, const sp_real *x, sp_ffn_state *st, sp_real *out)
{
    const sp_block_params *b = &m->blocks[l];
    const int rows = m->rows, d = m->cfg.d_model, dff = m->cfg.d_ff;
    const size_t n = (size_t)rows * (size_t)dff;
    sp_linear_fwd(m, rows, d, dff, x, sp_model_param(m, b->w1), st->g);
    if (st->u) {
        sp_linear_fwd(m, rows, d, dff, x, sp_model_param(m, b->w3), st->u);
        m->be->swiglu_fwd(n, st->g, st->u, st->h);
    } else {
        m->be->gelu_fwd(n, st->g, st->h);
    }
    sp_linear_fwd(m, rows, dff, d, st->h, sp_model_param(m, b->w2), out);
}

void sp_ffn_bwd(sp_model *m, int l, const sp_real *x, const sp_ffn_state *st, const sp_real *dout, sp_real *dx,
                int with_params)
{
    const sp_block_params *b = &m->blocks[l];
    const sp_backend *be = m->be;
    const sp_scratch *sc = &m->scratch;
    const int rows = m->rows, d = m->cfg.d_model, dff = m->cfg.d_ff;
    const size_t n = (size_t)rows * (size_t)dff;
    sp_linear_bwd(m, rows, dff, d, st->h, sp_model_param(m, b->w2), dout, sc->dh, 0,
                  with_params ? sp_model_grad(m, b->w2) : NULL);
    be->zero(sc->dg, n * sizeof(sp_real));
    if (st->u) {
        be->zero(sc->du, n * sizeof(sp_real));
        be->swiglu_bwd(n, st->g, st->u, sc->dh, sc->dg, sc->du);
        sp_linear_bwd(m, rows, d, dff, x, sp_model_param(m, b->w3), sc->du, dx, 1,
                      with_params ? sp_model_grad(m, b->w3) : NULL);
    } else {
        be->gelu_bwd(n, st->g, sc->dh, sc->dg);
    }
    sp_linear_bwd(m, rows, d, dff, x, sp_model_param(m, b->w1), sc->dg, dx, 1,
                  with_params ? sp_model_grad(m, b->w1) : NULL);
}

void sp_ffn_jvp(sp_model *m, int l, const sp_ffn_state *st, const sp_real *tx, sp_real *tout)
{
    const sp_block_params *b = &m->blocks[l];
    const sp_scratch *sc = &m->scratch;
    const int rows = m->rows, d = m->cfg.d_model, dff = m->cfg.d_ff;
    const size_t n = (size_t)rows * (size_t)dff;
    sp_linear_fwd(m, rows, d, dff, tx, sp_model_param(m, b->w1), sc->dg);
    if (st->u) {
        sp_linear_fwd(m, rows, d, dff, tx, sp_model_param(m, b->w3), sc->du);
        m->be->swiglu_jvp(n, st->g, st->u, sc->dg, sc->du, sc->dh);
    } else {
        m->be->gelu_jvp(n, st->g, sc->dg, sc->dh);
    }
    sp_linear_fwd(m, rows, dff, d, sc->dh, sp_model_param(m, b->w2), tout);
}

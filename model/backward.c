/* model/backward.c: the VJP interpreter of the block recipes (steps in reverse, slot gradients
 * accumulating), and the model's backward pass from the mean loss to every parameter. */
#include "model/model_internal.h"

/* The gradient pointers of every slot: the streams' from g_in and g_out, the rest from the scratch,
 * zeroed. */
static void slot_grads(sp_model *m, const sp_recipe *r, const sp_scratch *sc, sp_real *const *g_out,
                       sp_real *const *g_in, sp_real **g)
{
    const size_t bytes = (size_t)m->rows * (size_t)m->cfg.d_model * sizeof(sp_real);
    for (int s = 0; s < r->n_streams; s++) {
        g[s] = g_in[s];
        g[r->out_slots[s]] = g_out[s];
    }
    for (int i = r->n_streams; i < r->n_slots; i++)
        if (!g[i]) {
            g[i] = sc->slot[i];
            m->be->zero(g[i], bytes);
        }
}

/* The tangent of backward step s of block l (model/hvp.c), right after the step itself. */
static void step_tangent(sp_model *m, int l, const sp_block_state *st, int s, sp_real *const *g, sp_real *const *tg,
                         const sp_tangent *tan)
{
    const sp_step *step = &m->blocks[l].recipe->steps[s];
    const sp_backend *be = m->be;
    const int rows = m->rows, d = m->cfg.d_model;
    const size_t n = (size_t)rows * (size_t)d;
    sp_real *tgd = tg[step->dst], *tga = tg[step->a];
    const sp_real *a = st->slot[step->a], *ta = tan->t->slot[step->a];
    const sp_real ca = (sp_real)sp_recipe_coef(&m->cfg, l, step->coef_a);
    switch (step->kind) {
    case SP_STEP_NORM:
        if (ca != 1)
            be->scale(n, ca, tgd);
        sp_norm_op_bwd_jvp(m, m->blocks[l].norms[step->norm], rows, d, a, &st->norm[s], ta, g[step->dst], tgd, tga,
                           tan);
        break;
    case SP_STEP_ATTN: sp_attn_bwd_jvp(m, l, a, &st->attn, ta, g[step->dst], tgd, tga, tan); break;
    case SP_STEP_FFN: sp_ffn_bwd_jvp(m, l, a, &st->ffn, ta, g[step->dst], tgd, tga, tan); break;
    case SP_STEP_ADD:
        be->axpby(n, ca, tgd, 1, tga);
        be->axpby(n, (sp_real)sp_recipe_coef(&m->cfg, l, step->coef_b), tgd, 1, tg[step->b]);
        break;
    }
}

void sp_block_backward(sp_model *m, int l, const sp_block_state *st, sp_real *const *g_out, sp_real *const *g_in,
                       int with_params, const sp_tangent *tan)
{
    const sp_recipe *r = m->blocks[l].recipe;
    const sp_backend *be = m->be;
    const int rows = m->rows, d = m->cfg.d_model;
    const size_t n = (size_t)rows * (size_t)d;
    sp_real *g[SP_RECIPE_MAX_SLOTS] = {0}, *tg[SP_RECIPE_MAX_SLOTS] = {0};
    slot_grads(m, r, &m->scratch, g_out, g_in, g);
    if (tan)
        slot_grads(m, r, tan->tg, tan->g_out, tan->g_in, tg);

    for (int s = r->n_steps - 1; s >= 0; s--) {
        const sp_step *step = &r->steps[s];
        sp_real *gd = g[step->dst], *ga = g[step->a];
        const sp_real *a = st->slot[step->a];
        const sp_real ca = (sp_real)sp_recipe_coef(&m->cfg, l, step->coef_a);
        switch (step->kind) {
        case SP_STEP_NORM:
            if (ca != 1) /* the slot's gradient is complete here and read by no other step */
                be->scale(n, ca, gd);
            sp_norm_op_bwd(m, m->blocks[l].norms[step->norm], rows, d, a, &st->norm[s], gd, ga, with_params);
            break;
        case SP_STEP_ATTN: sp_attn_bwd(m, l, a, &st->attn, gd, ga, with_params); break;
        case SP_STEP_FFN: sp_ffn_bwd(m, l, a, &st->ffn, gd, ga, with_params); break;
        case SP_STEP_ADD:
            be->axpby(n, ca, gd, 1, ga);
            be->axpby(n, (sp_real)sp_recipe_coef(&m->cfg, l, step->coef_b), gd, 1, g[step->b]);
            break;
        }
        if (tan)
            step_tangent(m, l, st, s, g, tg, tan);
    }
}

/* From the head input gradient through the final norm(s) to the last block's output streams g_x
 * (and g_y), zeroed here. */
static void final_norms_bwd(sp_model *m, const sp_real *dhf, sp_real *const *g, int with_params)
{
    const sp_backend *be = m->be;
    const int rows = m->rows, d = m->cfg.d_model, last = m->cfg.n_layers - 1;
    const size_t bytes = (size_t)rows * (size_t)d * sizeof(sp_real);
    const sp_block_state *st = &m->state[last];
    const int *out = m->blocks[last].recipe->out_slots;
    sp_top_state *t = &m->top;
    be->zero(g[0], bytes);
    if (m->fin_x_norm.gain >= 0) {
        be->zero(t->dfin_sum, bytes);
        be->zero(g[1], bytes);
        sp_norm_op_bwd(m, m->fin_norm, rows, d, t->fin_sum, &t->fin_norm, dhf, t->dfin_sum, with_params);
        sp_norm_op_bwd(m, m->fin_x_norm, rows, d, st->slot[out[0]], &t->fin_x_norm, t->dfin_sum, g[0], with_params);
        sp_norm_op_bwd(m, m->fin_y_norm, rows, d, st->slot[out[1]], &t->fin_y_norm, t->dfin_sum, g[1], with_params);
    } else {
        sp_norm_op_bwd(m, m->fin_norm, rows, d, st->slot[out[0]], &t->fin_norm, dhf, g[0], with_params);
    }
}

void sp_output_bwd(sp_model *m, double weight, int with_params)
{
    const sp_backend *be = m->be;
    const sp_config *cfg = &m->cfg;
    const int rows = m->rows, d = cfg->d_model, vocab = cfg->vocab_size;
    sp_top_state *t = &m->top;
    sp_scratch *sc = &m->scratch;
    be->zero(t->dlogits, (size_t)rows * (size_t)vocab * sizeof(sp_real));
    /* every parameter-gradient op adds into its gradient, so only the loss's seed carries the weight */
    be->xent_bwd(rows, vocab, t->logits, t->targets, (sp_real)(weight / m->loss_count), t->dlogits);
    if (cfg->final_softcap > 0) /* the soft-cap's Jacobian is diagonal: its JVP is its VJP, in place */
        be->softcap_jvp((size_t)rows * (size_t)vocab, cfg->final_softcap, t->logits, t->dlogits, t->dlogits);
    /* without a final norm the head input is the last block's output: its gradient is the stream's */
    sp_real *dhf = t->dhf ? t->dhf : sc->stream[0][0];
    sp_linear_bwd(m, rows, d, vocab, t->hf, sp_model_param(m, m->head), t->dlogits, dhf, 0,
                  with_params ? sp_model_grad(m, m->head) : NULL, NULL);
    if (t->dhf)
        final_norms_bwd(m, dhf, sc->stream[0], with_params);
}

sp_status sp_model_backward(sp_model *m) { return sp_model_backward_weighted(m, 1.0, 0); }

sp_status sp_model_backward_weighted(sp_model *m, double weight, int accumulate)
{
    if (!m->has_loss)
        return sp_error(SP_ERR_USAGE, "sp_model_backward: no loss to differentiate (the last forward pass had "
                                      "no targets, or sp_model_loss_from has run since)");
    const sp_backend *be = m->be;
    const sp_config *cfg = &m->cfg;
    const int rows = m->rows, d = cfg->d_model;
    const size_t bytes = (size_t)rows * (size_t)d * sizeof(sp_real);
    sp_top_state *t = &m->top;
    sp_scratch *sc = &m->scratch;

    if (!accumulate)
        be->zero(m->grads, m->n_weights * sizeof(sp_real));
    sp_output_bwd(m, weight, 1);

    int cur = 0;
    for (int l = cfg->n_layers - 1; l >= 0; l--) {
        /* block 0's inputs (both streams for siamese) are h_0 itself */
        sp_real *const h0_in[2] = {t->dh0, t->dh0};
        sp_real *const *g_in = l == 0 ? h0_in : sc->stream[1 - cur];
        for (int s = 0; s < sp_config_n_streams(cfg); s++)
            be->zero(g_in[s], bytes);
        if (sp_model_block_skipped(m, l)) /* accumulating: siamese block 0's two g_in are one buffer */
            sp_block_identity(m, l, (const sp_real *const *)sc->stream[cur], g_in, 1);
        else
            sp_block_backward(m, l, &m->state[l], sc->stream[cur], g_in, 1, NULL);
        cur = 1 - cur;
    }
    if (m->embed_norm.gain >= 0) {
        be->zero(t->de, bytes);
        sp_norm_op_bwd(m, m->embed_norm, rows, d, t->e, &t->embed_norm, t->dh0, t->de, 1);
    }
    be->embed_bwd(rows, m->seq_len, d, (sp_real)cfg->embed_scale, t->ids, t->de, sp_model_grad(m, m->tok),
                  sp_model_grad_or_null(m, m->pos));
    SP_TRY(sp_model_sync(m));
    m->has_grads = 1;
    return SP_OK;
}

sp_status sp_model_block_vjp(sp_model *m, int l, const sp_real *const *g_out, sp_real *const *g_in)
{
    SP_TRY(sp_model_check_block(m, l, "sp_model_block_vjp"));
    if (sp_model_block_skipped(m, l)) {
        sp_block_identity(m, l, g_out, g_in, 0);
        return sp_model_sync(m);
    }
    const sp_recipe *r = m->blocks[l].recipe;
    const size_t bytes = (size_t)m->rows * (size_t)m->cfg.d_model * sizeof(sp_real);
    sp_real *const *g = m->scratch.stream[0]; /* the interpreter scales output gradients in place */
    for (int s = 0; s < r->n_streams; s++) {
        m->be->copy(g[s], g_out[s], bytes);
        m->be->zero(g_in[s], bytes);
    }
    sp_block_backward(m, l, &m->state[l], g, g_in, 0, NULL);
    return sp_model_sync(m);
}

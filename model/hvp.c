/* model/hvp.c: exact Hessian-vector products of the mean loss restricted to one block's parameters,
 * by forward mode over the backward pass (Pearlmutter's R-operator).
 *
 * The parameter tangent v of block l moves nothing below block l, so the pass starts there: the
 * forward tangents of blocks l..L-1 (block l with its parameters moving, the others through their
 * inputs only) and of the output path, then the backward pass from the loss down to block l with
 * every step followed by its tangent (sp_block_backward with a tangent), whose parameter-gradient
 * tangents for block l are H_ll v. Only the tangents of each block's output streams are kept
 * between the two sweeps; a block's internal tangents are recomputed before its backward step, so
 * the extra memory is one block's state, one scratch and L stream tangents. */
#include "model/model_internal.h"

void sp_model_block_param_range(const sp_model *m, int l, size_t *offset, size_t *count)
{
    int first = -1, last = -1;
    for (int i = 0; i < m->n_params; i++)
        if (m->specs[i].layer == l) {
            first = first < 0 ? i : first;
            last = i;
        }
    *offset = first < 0 ? 0 : m->offsets[first];
    *count = first < 0 ? 0 : m->offsets[last] + sp_param_numel(&m->specs[last]) - *offset;
}

/* The tangent context of block k (parameters moving only when pt is given). */
static sp_tangent block_tangent(sp_hvp_state *h, const sp_param_tangent *pt, sp_real *const *g_out,
                                sp_real *const *g_in)
{
    return (sp_tangent){.t = &h->t, .tg = &h->tg, .g_out = g_out, .g_in = g_in, .p = pt, .norm_tmp = h->norm_tmp,
                        .norm_mean = h->norm_mean, .norm_rstd = h->norm_rstd};
}

/* Forward tangents of block k's slots and internals into h->t, from the output tangents of block
 * k - 1 (zero for k = l, whose parameters move instead). */
static void block_forward(sp_model *m, int k, int l, sp_hvp_state *h, const sp_tangent *tan)
{
    sp_model_hvp_block(m, k);
    for (int s = 0; s < m->blocks[k].recipe->n_streams; s++)
        h->t.slot[s] = k == l ? h->zero : h->t_out[2 * (k - 1) + s];
    sp_block_jvp(m, k, &m->state[k], tan);
}

/* The output path's tangents: final norms, head, soft-cap (forward), then the loss gradient's
 * tangent back to the last block's output streams tg (the primal gradients from sp_output_bwd). */
static void output_tangents(sp_model *m, sp_hvp_state *h, sp_real *const *tg)
{
    const sp_backend *be = m->be;
    const sp_config *cfg = &m->cfg;
    const int rows = m->rows, d = cfg->d_model, vocab = cfg->vocab_size, last = cfg->n_layers - 1;
    const size_t n_logits = (size_t)rows * (size_t)vocab, bytes = (size_t)rows * (size_t)d * sizeof(sp_real);
    const int *out = m->blocks[last].recipe->out_slots;
    const sp_real *x0 = m->state[last].slot[out[0]], *x1 = out[1] >= 0 ? m->state[last].slot[out[1]] : NULL;
    const sp_real *tx0 = h->t_out[2 * last], *tx1 = h->t_out[2 * last + 1];
    sp_top_state *t = &m->top;
    const sp_tangent fixed = block_tangent(h, NULL, NULL, NULL);

    const sp_real *thf = tx0;
    if (m->fin_x_norm.gain >= 0) {
        sp_norm_op_jvp(m, m->fin_x_norm, rows, d, x0, &t->fin_x_norm, tx0, h->tfin_x, NULL);
        sp_norm_op_jvp(m, m->fin_y_norm, rows, d, x1, &t->fin_y_norm, tx1, h->tfin_y, NULL);
        be->copy(h->tfin_sum, h->tfin_x, bytes);
        be->axpby((size_t)rows * (size_t)d, 1, h->tfin_y, 1, h->tfin_sum);
        thf = h->tfin_sum;
    }
    if (m->fin_norm.gain >= 0) {
        sp_norm_op_jvp(m, m->fin_norm, rows, d, m->fin_x_norm.gain >= 0 ? t->fin_sum : x0, &t->fin_norm, thf, h->thf,
                       NULL);
        thf = h->thf;
    }
    sp_linear_fwd(m, rows, d, vocab, thf, sp_model_param(m, m->head), NULL, h->tlogits);
    if (cfg->final_softcap > 0)
        be->softcap_jvp(n_logits, cfg->final_softcap, t->logits, h->tlogits, h->tlogits);

    sp_output_bwd(m, 1.0, 0);
    const sp_real scale = (sp_real)(1.0 / m->loss_count);
    be->zero(h->tdlogits, n_logits * sizeof(sp_real));
    be->xent_bwd_jvp(rows, vocab, t->logits, t->targets, scale, h->tlogits, h->tdlogits);
    if (cfg->final_softcap > 0) { /* the gradient of the capped logits, which the backward pass scaled in place */
        be->zero(h->dcapped, n_logits * sizeof(sp_real));
        be->xent_bwd(rows, vocab, t->logits, t->targets, scale, h->dcapped);
        be->softcap_bwd_jvp(n_logits, cfg->final_softcap, t->logits, h->tlogits, h->dcapped, h->tdlogits, h->tdlogits);
    }
    sp_real *tdhf = t->dhf ? h->tdhf : tg[0];
    sp_linear_bwd(m, rows, d, vocab, t->hf, sp_model_param(m, m->head), h->tdlogits, tdhf, 0, NULL, NULL);
    if (!t->dhf)
        return;
    for (int s = 0; s < sp_config_n_streams(cfg); s++)
        be->zero(tg[s], bytes);
    if (m->fin_x_norm.gain >= 0) {
        be->zero(h->tdfin_sum, bytes);
        sp_norm_op_bwd_jvp(m, m->fin_norm, rows, d, t->fin_sum, &t->fin_norm, h->tfin_sum, t->dhf, tdhf, h->tdfin_sum,
                           &fixed);
        sp_norm_op_bwd_jvp(m, m->fin_x_norm, rows, d, x0, &t->fin_x_norm, tx0, t->dfin_sum, h->tdfin_sum, tg[0],
                           &fixed);
        sp_norm_op_bwd_jvp(m, m->fin_y_norm, rows, d, x1, &t->fin_y_norm, tx1, t->dfin_sum, h->tdfin_sum, tg[1],
                           &fixed);
    } else {
        sp_norm_op_bwd_jvp(m, m->fin_norm, rows, d, x0, &t->fin_norm, tx0, t->dhf, tdhf, tg[0], &fixed);
    }
}

sp_status sp_model_hvp(sp_model *m, int l, const sp_real *v, sp_real *hv)
{
    SP_TRY(sp_model_check_block(m, l, "sp_model_hvp"));
    if (!m->has_loss)
        return sp_error(SP_ERR_USAGE, "sp_model_hvp: no loss to differentiate (the last forward pass had "
                                      "no targets, or sp_model_loss_from has run since)");
    for (int k = 0; k < m->cfg.n_layers; k++)
        if (sp_model_block_skipped(m, k))
            return sp_error(SP_ERR_USAGE, "sp_model_hvp: block %d is skipped (the Hessian is of the full model)", k);
    sp_hvp_state *h = NULL;
    SP_TRY(sp_model_hvp_state(m, l, &h));
    const sp_backend *be = m->be;
    const sp_config *cfg = &m->cfg;
    const int n_streams = sp_config_n_streams(cfg);
    const size_t bytes = (size_t)m->rows * (size_t)cfg->d_model * sizeof(sp_real);
    sp_param_tangent pt = {.v = v, .hv = hv, .first = -1};
    for (int i = 0; i < m->n_params; i++)
        if (m->specs[i].layer == l) {
            pt.first = pt.first < 0 ? i : pt.first;
            pt.last = i;
        }
    size_t count = 0;
    sp_model_block_param_range(m, l, &pt.base, &count);
    be->zero(hv, count * sizeof(sp_real));
    be->zero(h->zero, bytes);

    for (int k = l; k < cfg->n_layers; k++) {
        const sp_tangent tan = block_tangent(h, k == l ? &pt : NULL, NULL, NULL);
        block_forward(m, k, l, h, &tan);
        for (int s = 0; s < n_streams; s++)
            be->copy(h->t_out[2 * k + s], h->t.slot[m->blocks[k].recipe->out_slots[s]], bytes);
    }
    sp_scratch *sc = &m->scratch;
    output_tangents(m, h, h->tg.stream[0]);

    int cur = 0;
    for (int k = cfg->n_layers - 1; k >= l; k--) {
        for (int s = 0; s < n_streams; s++) {
            be->zero(sc->stream[1 - cur][s], bytes);
            be->zero(h->tg.stream[1 - cur][s], bytes);
        }
        const sp_tangent tan = block_tangent(h, k == l ? &pt : NULL, h->tg.stream[cur], h->tg.stream[1 - cur]);
        block_forward(m, k, l, h, &tan);
        sp_block_backward(m, k, &m->state[k], sc->stream[cur], sc->stream[1 - cur], 0, &tan);
        cur = 1 - cur;
    }
    return sp_model_sync(m);
}

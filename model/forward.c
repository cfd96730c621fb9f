/* model/forward.c: the forward interpreter of the block recipes, and the model's forward pass
 * (embedding, blocks, the output path of final norms, head and logit soft-cap, cross-entropy). */
#include <limits.h>
#include <stdlib.h>

#include "model/model_internal.h"

void sp_block_forward(sp_model *m, int l, sp_block_state *st)
{
    const sp_recipe *r = m->blocks[l].recipe;
    const int rows = m->rows, d = m->cfg.d_model;
    const size_t n = (size_t)rows * (size_t)d;
    for (int s = 0; s < r->n_steps; s++) {
        const sp_step *step = &r->steps[s];
        sp_real *dst = st->slot[step->dst];
        const sp_real *a = st->slot[step->a];
        const sp_real ca = (sp_real)sp_recipe_coef(&m->cfg, l, step->coef_a);
        switch (step->kind) {
        case SP_STEP_NORM:
            sp_norm_op_fwd(m, m->blocks[l].norms[step->norm], rows, d, a, dst, &st->norm[s]);
            if (ca != 1)
                m->be->scale(n, ca, dst);
            break;
        case SP_STEP_ATTN: sp_attn_fwd(m, l, a, &st->attn, dst); break;
        case SP_STEP_FFN: sp_ffn_fwd(m, l, a, &st->ffn, dst); break;
        case SP_STEP_ADD:
            m->be->axpby(n, ca, a, 0, dst);
            m->be->axpby(n, (sp_real)sp_recipe_coef(&m->cfg, l, step->coef_b), st->slot[step->b], 1, dst);
            break;
        }
    }
}

/* Block l on its saved state, or, when it is skipped, its inputs copied to its output slots. */
static void run_block(sp_model *m, int l)
{
    sp_block_state *st = &m->state[l];
    if (!sp_model_block_skipped(m, l)) {
        sp_block_forward(m, l, st);
        return;
    }
    const int *out = m->blocks[l].recipe->out_slots;
    sp_real *const outs[2] = {st->slot[out[0]], out[1] >= 0 ? st->slot[out[1]] : NULL};
    sp_block_identity(m, l, (const sp_real *const *)st->slot, outs, 0);
}

/* Shape and token checks, with one line naming the offending value. */
static sp_status check_input(const sp_model *m, const int32_t *tokens, const int32_t *targets, int batch, int seq_len)
{
    const sp_config *cfg = &m->cfg;
    if (batch < 1)
        return sp_error(SP_ERR_USAGE, "sp_model_forward: batch = %d (expected >= 1)", batch);
    if (seq_len < 1 || seq_len > cfg->max_seq_len)
        return sp_error(SP_ERR_USAGE, "sp_model_forward: seq_len = %d is outside 1..max_seq_len = %d", seq_len,
                        cfg->max_seq_len);
    if (batch > INT_MAX / seq_len)
        return sp_error(SP_ERR_USAGE, "sp_model_forward: batch %d x seq_len %d rows overflow an int", batch, seq_len);
    for (int r = 0; r < batch * seq_len; r++) {
        if (tokens[r] < 0 || tokens[r] >= cfg->vocab_size)
            return sp_error(SP_ERR_INPUT,
                            "sp_model_forward: token id %d at sequence %d, position %d is outside [0, %d)", tokens[r],
                            r / seq_len, r % seq_len, cfg->vocab_size);
        if (targets && targets[r] >= cfg->vocab_size)
            return sp_error(SP_ERR_INPUT,
                            "sp_model_forward: target id %d at sequence %d, position %d is outside [0, %d) "
                            "(negative ids are ignored)",
                            targets[r], r / seq_len, r % seq_len, cfg->vocab_size);
    }
    return SP_OK;
}

/* Head input h = N_fin(N_x(X) + N_y(Y)) (siamese), N_f(x) or x itself (without a final norm the
 * forward pass's hf is the last block's output slot, aliased at layout); then the head and the
 * logit soft-cap. */
void sp_output_fwd(sp_model *m, int rows, const sp_real *const *x, const sp_out_bufs *b, sp_real *logits)
{
    const int d = m->cfg.d_model;
    const sp_real *h = x[0];
    if (m->fin_x_norm.gain >= 0) {
        sp_norm_op_fwd(m, m->fin_x_norm, rows, d, x[0], b->fin_x, &b->fin_x_norm);
        sp_norm_op_fwd(m, m->fin_y_norm, rows, d, x[1], b->fin_y, &b->fin_y_norm);
        m->be->copy(b->fin_sum, b->fin_x, (size_t)rows * (size_t)d * sizeof(sp_real));
        m->be->axpby((size_t)rows * (size_t)d, 1, b->fin_y, 1, b->fin_sum);
        h = b->fin_sum;
    }
    if (m->fin_norm.gain >= 0) {
        sp_norm_op_fwd(m, m->fin_norm, rows, d, h, b->hf, &b->fin_norm);
        h = b->hf;
    }
    sp_linear_fwd(m, rows, d, m->cfg.vocab_size, h, sp_model_param(m, m->head), NULL, logits);
    if (m->cfg.final_softcap > 0)
        m->be->softcap_fwd((size_t)rows * (size_t)m->cfg.vocab_size, m->cfg.final_softcap, logits, logits);
}

/* The forward pass's own buffers of the output path. */
static sp_out_bufs top_out_bufs(const sp_top_state *t)
{
    return (sp_out_bufs){t->fin_x, t->fin_y, t->fin_sum, t->hf, t->fin_x_norm, t->fin_y_norm, t->fin_norm};
}

/* Mean cross-entropy over the counted targets. */
static sp_status loss_fwd(sp_model *m, const int32_t *targets, double *loss)
{
    const int rows = m->rows;
    sp_top_state *t = &m->top;
    m->be->upload(t->targets, targets, (size_t)rows * sizeof(int32_t));
    m->be->xent_fwd(rows, m->cfg.vocab_size, t->logits, t->targets, t->losses);
    sp_real *host = sp_malloc((size_t)rows * sizeof *host, "per-row losses");
    if (!host)
        return SP_ERR_NOMEM;
    m->be->download(host, t->losses, (size_t)rows * sizeof *host);
    double sum = 0, count = 0;
    for (int r = 0; r < rows; r++)
        if (targets[r] >= 0) {
            sum += host[r];
            count += 1;
        }
    free(host);
    if (count == 0)
        return sp_error(SP_ERR_INPUT, "sp_model_forward: every target is negative (ignored); the mean loss is undefined");
    m->loss_count = count;
    m->has_loss = 1;
    if (loss)
        *loss = sum / count;
    return SP_OK;
}

sp_status sp_model_forward(sp_model *m, const int32_t *tokens, const int32_t *targets, int batch, int seq_len,
                           double *loss)
{
    if (m->be != sp_backend_cpu())
        sp_error_clear(); /* see sp_model_sync */
    m->has_loss = 0;
    m->has_grads = 0;
    SP_TRY(check_input(m, tokens, targets, batch, seq_len));
    m->rows = 0;
    SP_TRY(sp_model_reserve(m, batch, seq_len));
    m->batch = batch;
    m->seq_len = seq_len;
    m->rows = batch * seq_len;

    const sp_config *cfg = &m->cfg;
    sp_top_state *t = &m->top;
    m->be->upload(t->ids, tokens, (size_t)m->rows * sizeof(int32_t));
    m->be->embed_fwd(m->rows, seq_len, cfg->d_model, (sp_real)cfg->embed_scale, t->ids, sp_model_param(m, m->tok),
                     sp_model_param_or_null(m, m->pos), t->e);
    if (m->embed_norm.gain >= 0)
        sp_norm_op_fwd(m, m->embed_norm, m->rows, cfg->d_model, t->e, t->h0, &t->embed_norm);
    for (int l = 0; l < cfg->n_layers; l++)
        run_block(m, l);
    const int last = cfg->n_layers - 1, *out = m->blocks[last].recipe->out_slots;
    const sp_real *const x[2] = {m->state[last].slot[out[0]], out[1] >= 0 ? m->state[last].slot[out[1]] : NULL};
    const sp_out_bufs bufs = top_out_bufs(t);
    sp_output_fwd(m, m->rows, x, &bufs, t->logits);
    if (targets)
        SP_TRY(loss_fwd(m, targets, loss));
    return sp_model_sync(m);
}

/* Checks shared by the block-as-a-function entry points. */
sp_status sp_model_check_block(const sp_model *m, int l, const char *who)
{
    if (m->rows == 0)
        return sp_error(SP_ERR_USAGE, "%s: no forward pass has run (the block is taken around its activations)", who);
    if (l < 0 || l >= m->cfg.n_layers)
        return sp_error(SP_ERR_USAGE, "%s: block %d is outside 0..%d", who, l, m->cfg.n_layers - 1);
    return SP_OK;
}

sp_status sp_model_probe_run(sp_model *m, int l, const char *who, void (*run)(sp_model *m, int l, sp_block_state *st),
                             const sp_real *const *in, sp_real *const *out)
{
    SP_TRY(sp_model_check_block(m, l, who));
    if (sp_model_block_skipped(m, l)) {
        sp_block_identity(m, l, in, out, 0);
        return sp_model_sync(m);
    }
    sp_block_state *probe = NULL;
    SP_TRY(sp_model_probe_state(m, l, &probe));
    const sp_recipe *r = m->blocks[l].recipe;
    const size_t bytes = (size_t)m->rows * (size_t)m->cfg.d_model * sizeof(sp_real);
    for (int s = 0; s < r->n_streams; s++)
        m->be->copy(probe->slot[s], in[s], bytes);
    run(m, l, probe);
    for (int s = 0; s < r->n_streams; s++)
        m->be->copy(out[s], probe->slot[r->out_slots[s]], bytes);
    return sp_model_sync(m);
}

sp_status sp_model_block_apply(sp_model *m, int l, const sp_real *const *x_in, sp_real *const *x_out)
{
    return sp_model_probe_run(m, l, "sp_model_block_apply", sp_block_forward, x_in, x_out);
}

sp_status sp_model_loss_from(sp_model *m, int l, const sp_real *const *x_in, sp_real *const *scratch,
                             const int32_t *targets, double *loss)
{
    if (m->rows == 0)
        return sp_error(SP_ERR_USAGE, "sp_model_loss_from: no forward pass has run");
    if (l < 0 || l > m->cfg.n_layers)
        return sp_error(SP_ERR_USAGE, "sp_model_loss_from: block %d is outside 0..%d", l, m->cfg.n_layers);
    const sp_real *const *x = x_in;
    for (int j = l; j < m->cfg.n_layers; j++) { /* the probe copies its inputs in first: scratch in place */
        SP_TRY(sp_model_probe_run(m, j, "sp_model_loss_from", sp_block_forward, x, scratch));
        x = (const sp_real *const *)scratch;
    }
    sp_top_state *t = &m->top;
    const sp_out_bufs bufs = top_out_bufs(t);
    sp_output_fwd(m, m->rows, x, &bufs, t->logits);
    const sp_status st = loss_fwd(m, targets, loss);
    m->has_loss = 0; /* logits and loss no longer those of the pass's activations */
    SP_TRY(st);
    return sp_model_sync(m);
}

/* model/jvp_at.c: the JVP of one block for tangents that live at one position t of a sequence
 * (sp_model_block_jvp_at), the token-local Jacobians' product.
 *
 * With the tangent zero at every other position, every row-wise step (norms, projections, FFN,
 * residual sums) leaves the other positions at zero, and causal attention carries position t's
 * tangent only to positions >= t. So the output at t needs the row-wise steps at t alone: they run
 * on a block state of k rows, each a copy of position t's state in the forward pass, one row per
 * tangent; attention's core is the backend's attn_jvp_at on the forward pass's attention state,
 * k (t + 1) key positions of work. */
#include "model/model_internal.h"

/* dst [copies, elems] = src [elems] repeated: one copy, then doubling copies of what is there. */
static void repeat(const sp_backend *be, const sp_real *src, size_t elems, int copies, sp_real *dst)
{
    if (!src || !dst)
        return;
    const size_t bytes = elems * sizeof(sp_real);
    be->copy(dst, src, bytes);
    for (size_t have = 1; have < (size_t)copies; have *= 2) {
        const size_t more = have < (size_t)copies - have ? have : (size_t)copies - have;
        be->copy(dst + have * elems, dst, more * bytes);
    }
}

/* Row t of a [seq_len, width] array, k times. */
static void repeat_row(const sp_model *m, int t, int k, size_t width, const sp_real *src, sp_real *dst)
{
    repeat(m->be, src ? src + (size_t)t * width : NULL, width, k, dst);
}

static void repeat_norm(const sp_model *m, int t, int k, size_t width, const sp_norm_state *src, sp_norm_state *dst)
{
    repeat_row(m, t, k, width, src->mean, dst->mean);
    repeat_row(m, t, k, width, src->rstd, dst->rstd);
}

/* What the row-wise JVP steps of block l read from the forward pass, at position t of sequence 0:
 * the slots, the norms' statistics, the projections before their norms, the FFN's pre-activations
 * (not the FFN latent h: only parameter tangents read it, and the parameters stay fixed). */
static void state_at(const sp_model *m, int l, int t, int k, const sp_block_state *src, sp_block_state *dst)
{
    const sp_config *cfg = &m->cfg;
    const sp_recipe *r = m->blocks[l].recipe;
    const size_t d = (size_t)cfg->d_model, dff = (size_t)cfg->d_ff;
    for (int i = 0; i < r->n_slots; i++)
        repeat_row(m, t, k, d, src->slot[i], dst->slot[i]);
    for (int s = 0; s < r->n_steps; s++)
        if (r->steps[s].kind == SP_STEP_NORM)
            repeat_norm(m, t, k, 1, &src->norm[s], &dst->norm[s]);
    const sp_attn_norm attn_norm = m->blocks[l].attn_norm;
    const size_t dims[3] = {(size_t)sp_config_q_dim(cfg), (size_t)sp_config_kv_dim(cfg), (size_t)sp_config_kv_dim(cfg)};
    const size_t heads[3] = {(size_t)cfg->n_heads, (size_t)cfg->n_kv_heads, (size_t)cfg->n_kv_heads};
    const sp_real *const pre_src[3] = {src->attn.q_pre, src->attn.k_pre, src->attn.v_pre};
    sp_real *const pre_dst[3] = {dst->attn.q_pre, dst->attn.k_pre, dst->attn.v_pre};
    for (int i = 0; i < sp_attn_norm_count(attn_norm); i++) {
        repeat_row(m, t, k, dims[i], pre_src[i], pre_dst[i]);
        /* per-head norms keep [rows * heads] statistics: a row's heads are adjacent */
        repeat_norm(m, t, k, sp_attn_norm_per_head(attn_norm) ? heads[i] : 1, &src->attn.qkv_norm[i],
                    &dst->attn.qkv_norm[i]);
    }
    repeat_row(m, t, k, dff, src->ffn.g, dst->ffn.g);
    repeat_row(m, t, k, dff, src->ffn.u, dst->ffn.u);
}

sp_status sp_model_block_jvp_at(sp_model *m, int l, int t, int k, const sp_real *const *t_in, sp_real *const *t_out)
{
    SP_TRY(sp_model_check_block(m, l, "sp_model_block_jvp_at"));
    if (t < 0 || t >= m->seq_len || k < 1)
        return sp_error(SP_ERR_USAGE, "sp_model_block_jvp_at: %d tangents at position %d, where the forward pass had %d "
                                      "positions", k, t, m->seq_len);
    const sp_recipe *r = m->blocks[l].recipe;
    const size_t bytes = (size_t)k * (size_t)m->cfg.d_model * sizeof(sp_real);
    if (sp_model_block_skipped(m, l)) {
        for (int s = 0; s < r->n_streams; s++)
            m->be->copy(t_out[s], t_in[s], bytes);
        return sp_model_sync(m);
    }
    sp_row_bufs *b = NULL;
    SP_TRY(sp_model_row_bufs(m, l, k, &b));
    state_at(m, l, t, k, &m->state[l], &b->at_t);
    for (int s = 0; s < r->n_streams; s++)
        m->be->copy(b->tangents.slot[s], t_in[s], bytes);
    const sp_row_jvp row = {.prefix = &m->state[l].attn, .rope_pad = b->rope_pad, .t = t, .seq_len = m->seq_len};
    const sp_tangent tan = {.t = &b->tangents, .row = &row};
    /* the row-wise steps see k rows */
    const int rows = m->rows, batch = m->batch, seq_len = m->seq_len;
    m->rows = m->batch = k;
    m->seq_len = 1;
    sp_block_jvp(m, l, &b->at_t, &tan);
    m->rows = rows;
    m->batch = batch;
    m->seq_len = seq_len;
    for (int s = 0; s < r->n_streams; s++)
        m->be->copy(t_out[s], b->tangents.slot[r->out_slots[s]], bytes);
    return sp_model_sync(m);
}

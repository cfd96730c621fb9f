/* model/capture.c: read access to what the last forward (and backward) pass left: logits, layer
 * outputs, FFN latents, named recipe slots, the embedding gradient (NULL where there is none), and
 * the attention inputs q, k of a block. */
#include "model/model_internal.h"

const sp_real *sp_model_logits(const sp_model *m) { return m->rows ? m->top.logits : NULL; }
int sp_model_rows(const sp_model *m) { return m->rows; }

const sp_real *sp_model_hidden(const sp_model *m, int l, int stream)
{
    if (!m->rows || l < 0 || l > m->cfg.n_layers || stream < 0 || stream >= sp_config_n_streams(&m->cfg))
        return NULL;
    if (l == 0)
        return m->top.h0;
    return m->state[l - 1].slot[m->blocks[l - 1].recipe->out_slots[stream]];
}

const sp_real *sp_model_ffn_latent(const sp_model *m, int l)
{
    if (!m->rows || l < 0 || l >= m->cfg.n_layers || sp_model_block_skipped(m, l))
        return NULL;
    return m->state[l].ffn.h;
}

const sp_real *sp_model_slot(const sp_model *m, int l, const char *slot_name)
{
    if (!m->rows || l < 0 || l >= m->cfg.n_layers || sp_model_block_skipped(m, l))
        return NULL;
    int i = sp_recipe_slot(m->blocks[l].recipe, slot_name);
    return i < 0 ? NULL : m->state[l].slot[i];
}

const sp_real *sp_model_embed_grad(const sp_model *m) { return m->has_grads ? m->top.de : NULL; }

sp_status sp_model_attention_qk(const sp_model *m, int l, const sp_real **q, const sp_real **k, sp_attn_shape *shape)
{
    SP_TRY(sp_model_check_block(m, l, "attention inputs"));
    if (sp_model_block_skipped(m, l))
        return sp_error(SP_ERR_USAGE, "attention inputs: block %d is skipped (its attention did not run)", l);
    *q = m->state[l].attn.q;
    *k = m->state[l].attn.k;
    *shape = sp_attn_shape_of(m, l, m->batch, m->seq_len);
    return SP_OK;
}

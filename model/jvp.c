/* model/jvp.c: the forward-mode interpreter of a block recipe: tangent slots pushed through the
 * steps in order, linearized at the saved activations of the last forward pass. */
#include "model/model_internal.h"

sp_status sp_model_block_jvp(sp_model *m, int l, const sp_real *const *t_in, sp_real *const *t_out)
{
    SP_TRY(sp_model_check_block(m, l, "sp_model_block_jvp"));
    if (sp_model_block_skipped(m, l)) {
        sp_block_identity(m, l, t_in, t_out, 0);
        return sp_model_sync(m);
    }
    const sp_recipe *r = m->blocks[l].recipe;
    const sp_block_state *st = &m->state[l];
    const sp_backend *be = m->be;
    const int rows = m->rows, d = m->cfg.d_model;
    const size_t n = (size_t)rows * (size_t)d;
    sp_real *out[SP_RECIPE_MAX_SLOTS] = {0}; /* where each written slot's tangent goes */
    const sp_real *t[SP_RECIPE_MAX_SLOTS] = {0};
    for (int i = r->n_streams; i < r->n_slots; i++)
        out[i] = m->scratch.slot[i];
    for (int s = 0; s < r->n_streams; s++) {
        t[s] = t_in[s];
        out[r->out_slots[s]] = t_out[s];
    }

    for (int s = 0; s < r->n_steps; s++) {
        const sp_step *step = &r->steps[s];
        sp_real *td = out[step->dst];
        const sp_real *ta = t[step->a];
        const sp_real ca = (sp_real)sp_recipe_coef(&m->cfg, l, step->coef_a);
        switch (step->kind) {
        case SP_STEP_NORM:
            sp_norm_op_jvp(m, m->blocks[l].norms[step->norm], rows, d, st->slot[step->a], &st->norm[s], ta, td);
            if (ca != 1)
                be->scale(n, ca, td);
            break;
        case SP_STEP_ATTN: sp_attn_jvp(m, l, &st->attn, ta, td); break;
        case SP_STEP_FFN: sp_ffn_jvp(m, l, &st->ffn, ta, td); break;
        case SP_STEP_ADD:
            be->axpby(n, ca, ta, 0, td);
            be->axpby(n, (sp_real)sp_recipe_coef(&m->cfg, l, step->coef_b), t[step->b], 1, td);
            break;
        }
        t[step->dst] = td;
    }
    return sp_model_sync(m);
}

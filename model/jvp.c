/* model/jvp.c: the forward-mode interpreter of a block recipe: tangent slots pushed through the
 * steps in order, linearized at the saved activations of the last forward pass, with the block's
 * parameters fixed (sp_model_block_jvp) or moving along a tangent (Hessian-vector products). */
#include "model/model_internal.h"

void sp_block_jvp(sp_model *m, int l, const sp_block_state *st, const sp_tangent *tan)
{
    const sp_recipe *r = m->blocks[l].recipe;
    sp_real *const *t = tan->t->slot;
    const sp_backend *be = m->be;
    const int rows = m->rows, d = m->cfg.d_model;
    const size_t n = (size_t)rows * (size_t)d;
    for (int s = 0; s < r->n_steps; s++) {
        const sp_step *step = &r->steps[s];
        sp_real *td = t[step->dst];
        const sp_real *a = st->slot[step->a], *ta = t[step->a];
        const sp_real ca = (sp_real)sp_recipe_coef(&m->cfg, l, step->coef_a);
        switch (step->kind) {
        case SP_STEP_NORM:
            sp_norm_op_jvp(m, m->blocks[l].norms[step->norm], rows, d, a, &st->norm[s], ta, td, tan);
            if (ca != 1)
                be->scale(n, ca, td);
            break;
        case SP_STEP_ATTN:
            if (tan->row)
                sp_attn_jvp_at(m, l, a, &st->attn, ta, td, tan);
            else
                sp_attn_jvp(m, l, a, &st->attn, ta, td, tan);
            break;
        case SP_STEP_FFN: sp_ffn_jvp(m, l, a, &st->ffn, ta, td, tan); break;
        case SP_STEP_ADD:
            be->axpby(n, ca, ta, 0, td);
            be->axpby(n, (sp_real)sp_recipe_coef(&m->cfg, l, step->coef_b), t[step->b], 1, td);
            break;
        }
    }
}

/* The JVP with the parameters fixed, on a state whose slots hold tangents (block_apply's probe). */
static void fixed_params_jvp(sp_model *m, int l, sp_block_state *t)
{
    const sp_tangent tan = {.t = t};
    sp_block_jvp(m, l, &m->state[l], &tan);
}

sp_status sp_model_block_jvp(sp_model *m, int l, const sp_real *const *t_in, sp_real *const *t_out)
{
    return sp_model_probe_run(m, l, "sp_model_block_jvp", fixed_params_jvp, t_in, t_out);
}

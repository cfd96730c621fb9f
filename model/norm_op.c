/* model/norm_op.c: a norm instance of the model (its gain and bias by parameter index) over the
 * backend's norm ops. */
#include "model/model_internal.h"

void sp_norm_op_fwd(sp_model *m, sp_norm_params np, int rows, int dim, const sp_real *x, sp_real *y,
                    const sp_norm_state *st)
{
    m->be->norm_fwd((sp_norm_kind)m->cfg.norm, rows, dim, (sp_real)m->cfg.norm_eps, x, sp_model_param_or_null(m, np.gain),
                    sp_model_param_or_null(m, np.bias), y, st->mean, st->rstd);
}

void sp_norm_op_bwd(sp_model *m, sp_norm_params np, int rows, int dim, const sp_real *x, const sp_norm_state *st,
                    const sp_real *dy, sp_real *dx, int with_params)
{
    m->be->norm_bwd((sp_norm_kind)m->cfg.norm, rows, dim, x, sp_model_param_or_null(m, np.gain), st->mean, st->rstd,
                    dy, dx, with_params ? sp_model_grad_or_null(m, np.gain) : NULL,
                    with_params ? sp_model_grad_or_null(m, np.bias) : NULL);
}

void sp_norm_op_jvp(sp_model *m, sp_norm_params np, int rows, int dim, const sp_real *x, const sp_norm_state *st,
                    const sp_real *tx, sp_real *ty, const sp_tangent *tan)
{
    m->be->norm_jvp((sp_norm_kind)m->cfg.norm, rows, dim, x, sp_model_param_or_null(m, np.gain), st->mean, st->rstd,
                    tx, ty);
    const sp_real *tgain = tan ? sp_tangent_param(m, tan->p, np.gain) : NULL;
    if (!tgain)
        return;
    /* + xhat tgain + tbias: the forward op itself with the tangents as gain and bias */
    const size_t n = (size_t)rows * (size_t)dim;
    m->be->norm_fwd((sp_norm_kind)m->cfg.norm, rows, dim, (sp_real)m->cfg.norm_eps, x, tgain,
                    sp_tangent_param(m, tan->p, np.bias), tan->norm_tmp, tan->norm_mean, tan->norm_rstd);
    m->be->axpby(n, 1, tan->norm_tmp, 1, ty);
}

void sp_norm_op_bwd_jvp(sp_model *m, sp_norm_params np, int rows, int dim, const sp_real *x, const sp_norm_state *st,
                        const sp_real *tx, const sp_real *dy, const sp_real *tdy, sp_real *tdx, const sp_tangent *tan)
{
    m->be->norm_bwd_jvp((sp_norm_kind)m->cfg.norm, rows, dim, x, sp_model_param_or_null(m, np.gain), st->mean,
                        st->rstd, tx, sp_tangent_param(m, tan->p, np.gain), dy, tdy, tdx,
                        sp_tangent_grad(m, tan->p, np.gain), sp_tangent_grad(m, tan->p, np.bias));
}

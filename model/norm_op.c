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
                    const sp_real *tx, sp_real *ty)
{
    m->be->norm_jvp((sp_norm_kind)m->cfg.norm, rows, dim, x, sp_model_param_or_null(m, np.gain), st->mean, st->rstd,
                    tx, ty);
}

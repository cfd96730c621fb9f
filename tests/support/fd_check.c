#include "tests/support/fd_check.h"

#include <math.h>
#include <stdlib.h>

#include "tests/support/vec_util.h"

static double rel_diff(double a, double b)
{
    double scale = fmax(fabs(a), fabs(b));
    return scale > 0 ? fabs(a - b) / scale : 0.0;
}

/* Zeroed gradient buffers shaped like the inputs. */
static void alloc_like_inputs(const fd_map *f, sp_real **bufs)
{
    for (int i = 0; i < f->n_in; i++)
        bufs[i] = vec_zeros(f->in_len[i]);
}

static void free_bufs(int n, sp_real **bufs)
{
    for (int i = 0; i < n; i++)
        free(bufs[i]);
}

/* x += step * d for the first n inputs */
static void shift_inputs(const fd_map *f, int n, sp_real *const *in, sp_real *const *d, double step)
{
    for (int i = 0; i < n; i++)
        for (size_t e = 0; e < f->in_len[i]; e++)
            in[i][e] = (sp_real)(in[i][e] + step * d[i][e]);
}

/* out = (f(x + h d) - f(x - h d)) / 2h over the first n inputs; the inputs are restored from a copy,
 * so the shifts leave no rounding behind. */
static void central_difference(const fd_map *f, int n, sp_real *const *in, sp_real *const *d, double h,
                               sp_real *out)
{
    sp_real *saved[FD_MAX_IN], *minus = vec_zeros(f->out_len);
    for (int i = 0; i < n; i++)
        saved[i] = vec_dup(f->in_len[i], in[i]);
    shift_inputs(f, n, in, d, h);
    f->apply(f->ctx, in, out);
    for (int i = 0; i < n; i++)
        for (size_t e = 0; e < f->in_len[i]; e++)
            in[i][e] = saved[i][e];
    shift_inputs(f, n, in, d, -h);
    f->apply(f->ctx, in, minus);
    for (int i = 0; i < n; i++)
        for (size_t e = 0; e < f->in_len[i]; e++)
            in[i][e] = saved[i][e];
    for (size_t e = 0; e < f->out_len; e++)
        out[e] = (sp_real)(((double)out[e] - minus[e]) / (2 * h));
    free_bufs(n, saved);
    free(minus);
}

/* d/dx_e <dy, f(x)> by a central difference in input i, element e alone. */
static double partial_of_dot(const fd_map *f, sp_real *const *in, const sp_real *dy, int i, size_t e, double h,
                             sp_real *scratch)
{
    sp_real keep = in[i][e];
    in[i][e] = (sp_real)(keep + h);
    f->apply(f->ctx, in, scratch);
    double plus = vec_dot(f->out_len, dy, scratch);
    in[i][e] = (sp_real)(keep - h);
    f->apply(f->ctx, in, scratch);
    double minus = vec_dot(f->out_len, dy, scratch);
    in[i][e] = keep;
    return (plus - minus) / (2 * h);
}

double fd_vjp_elementwise_err(const fd_map *f, sp_real *const *in, const sp_real *dy, double h)
{
    sp_real *grad[FD_MAX_IN], *scratch = vec_zeros(f->out_len);
    alloc_like_inputs(f, grad);
    f->vjp(f->ctx, in, dy, grad);
    double worst = 0;
    for (int i = 0; i < f->n_in; i++) {
        sp_real *numeric = vec_zeros(f->in_len[i]);
        for (size_t e = 0; e < f->in_len[i]; e++)
            numeric[e] = (sp_real)partial_of_dot(f, in, dy, i, e, h, scratch);
        worst = fmax(worst, vec_rel_err(f->in_len[i], grad[i], numeric));
        free(numeric);
    }
    free_bufs(f->n_in, grad);
    free(scratch);
    return worst;
}

double fd_vjp_directional_err(const fd_map *f, sp_real *const *in, const sp_real *dy, sp_real *const *dir,
                              double h)
{
    sp_real *grad[FD_MAX_IN], *deriv = vec_zeros(f->out_len);
    alloc_like_inputs(f, grad);
    f->vjp(f->ctx, in, dy, grad);
    double analytic = 0;
    for (int i = 0; i < f->n_in; i++)
        analytic += vec_dot(f->in_len[i], grad[i], dir[i]);
    central_difference(f, f->n_in, in, dir, h, deriv);
    double numeric = vec_dot(f->out_len, dy, deriv);
    free_bufs(f->n_in, grad);
    free(deriv);
    return rel_diff(analytic, numeric);
}

double fd_jvp_err(const fd_map *f, sp_real *const *in, sp_real *const *tangent, double h)
{
    sp_real *analytic = vec_zeros(f->out_len), *numeric = vec_zeros(f->out_len);
    f->jvp(f->ctx, in, tangent, analytic);
    central_difference(f, f->n_jvp_in, in, tangent, h, numeric);
    double err = vec_rel_err(f->out_len, analytic, numeric);
    free(analytic);
    free(numeric);
    return err;
}

double fd_adjoint_err(const fd_map *f, sp_real *const *in, const sp_real *u, sp_real *const *tangent)
{
    sp_real *grad[FD_MAX_IN], *jt = vec_zeros(f->out_len);
    alloc_like_inputs(f, grad);
    f->jvp(f->ctx, in, tangent, jt);
    f->vjp(f->ctx, in, u, grad);
    double forward = vec_dot(f->out_len, u, jt), backward = 0;
    for (int i = 0; i < f->n_jvp_in; i++)
        backward += vec_dot(f->in_len[i], grad[i], tangent[i]);
    free_bufs(f->n_in, grad);
    free(jt);
    return rel_diff(forward, backward);
}

/* Prior gradient contents the accumulate check expects to survive: 1, -2, 3, -4, 5, 1, ... */
static double prior_value(size_t e) { return (e % 2 ? -1.0 : 1.0) * (double)(1 + e % 5); }

double fd_vjp_accumulate_err(const fd_map *f, sp_real *const *in, const sp_real *dy)
{
    sp_real *once[FD_MAX_IN], *twice[FD_MAX_IN];
    alloc_like_inputs(f, once);
    alloc_like_inputs(f, twice);
    for (int i = 0; i < f->n_in; i++)
        for (size_t e = 0; e < f->in_len[i]; e++)
            twice[i][e] = (sp_real)prior_value(e);
    f->vjp(f->ctx, in, dy, once);
    f->vjp(f->ctx, in, dy, twice);
    f->vjp(f->ctx, in, dy, twice);
    double worst = 0;
    for (int i = 0; i < f->n_in; i++) {
        /* compare what the two calls added with twice one call's gradient */
        for (size_t e = 0; e < f->in_len[i]; e++) {
            twice[i][e] = (sp_real)(twice[i][e] - prior_value(e));
            once[i][e] = (sp_real)(2.0 * once[i][e]);
        }
        worst = fmax(worst, vec_rel_err(f->in_len[i], twice[i], once[i]));
    }
    free_bufs(f->n_in, once);
    free_bufs(f->n_in, twice);
    return worst;
}

/* tests/support/fd_check.h: finite-difference checks of a differentiable map's VJP and JVP.
 *
 * A map takes n_in host input arrays to one output array. Central differences with step h:
 *   (f(x + h d) - f(x - h d)) / (2h)
 * are compared with the map's own derivative code. Each check returns a normwise relative error
 * (see vec_rel_err) so a test can assert it below a stated tolerance. Meant for the float64 build,
 * where h ~ 1e-6 leaves errors around 1e-9. */
#ifndef SP_TEST_FD_CHECK_H
#define SP_TEST_FD_CHECK_H

#include "core/common.h"

#define FD_MAX_IN 4

typedef struct {
    int n_in;
    int n_jvp_in;              /* the JVP takes tangents of the first n_jvp_in inputs only */
    size_t in_len[FD_MAX_IN];
    size_t out_len;
    void *ctx;
    /* out = f(in) (overwrites out) */
    void (*apply)(void *ctx, sp_real *const *in, sp_real *out);
    /* grad[i] += (df/din[i])^T dy, for every input */
    void (*vjp)(void *ctx, sp_real *const *in, const sp_real *dy, sp_real *const *grad);
    /* ty = sum_{i < n_jvp_in} (df/din[i]) tangent[i] (overwrites ty); NULL when the map has none */
    void (*jvp)(void *ctx, sp_real *const *in, sp_real *const *tangent, sp_real *ty);
} fd_map;

/* Every element of every input gradient of <dy, f> against its own central difference; returns
 * the largest normwise error over the inputs. */
double fd_vjp_elementwise_err(const fd_map *f, sp_real *const *in, const sp_real *dy, double h);
/* <dy, (f(x + h d) - f(x - h d)) / 2h> against sum_i <vjp_i(dy), d_i>, relative. */
double fd_vjp_directional_err(const fd_map *f, sp_real *const *in, const sp_real *dy, sp_real *const *dir,
                              double h);
/* jvp(tangent) against the central difference along tangent (first n_jvp_in inputs). */
double fd_jvp_err(const fd_map *f, sp_real *const *in, sp_real *const *tangent, double h);
/* <u, J t> (jvp) against <J^T u, t> (vjp, first n_jvp_in inputs), relative. */
double fd_adjoint_err(const fd_map *f, sp_real *const *in, const sp_real *u, sp_real *const *tangent);
/* The accumulate contract: vjp called twice into buffers holding prior values p must leave
 * p + 2 g, where g is one call's gradient from zeroed buffers. */
double fd_vjp_accumulate_err(const fd_map *f, sp_real *const *in, const sp_real *dy);

#endif

/* model/linear.c: y = x W^T (+ b) for activations x [rows, in], a weight W [out, in] and a bias b
 * [out], and its VJP. The bias is a rank-one product with the model's ones vector: y += 1 b^T
 * forward, db += dy^T 1 backward, so it runs on the backend's gemm like the rest. */
#include "model/model_internal.h"

void sp_linear_fwd(const sp_model *m, int rows, int in_dim, int out_dim, const sp_real *x, const sp_real *w,
                   const sp_real *b, sp_real *y)
{
    m->be->gemm(0, 1, rows, out_dim, in_dim, 1, x, in_dim, w, in_dim, 0, y, out_dim);
    if (b)
        m->be->gemm(0, 0, rows, out_dim, 1, 1, m->top.ones, 1, b, out_dim, 1, y, out_dim);
}

void sp_linear_bwd(const sp_model *m, int rows, int in_dim, int out_dim, const sp_real *x, const sp_real *w,
                   const sp_real *dy, sp_real *dx, int accumulate, sp_real *dw, sp_real *db)
{
    m->be->gemm(0, 0, rows, in_dim, out_dim, 1, dy, out_dim, w, in_dim, accumulate ? 1 : 0, dx, in_dim);
    if (dw)
        m->be->gemm(1, 0, out_dim, in_dim, rows, 1, dy, out_dim, x, in_dim, 1, dw, in_dim);
    if (db)
        m->be->gemm(1, 0, out_dim, 1, rows, 1, dy, out_dim, m->top.ones, 1, 1, db, 1);
}

void sp_linear_jvp(const sp_model *m, int rows, int in_dim, int out_dim, const sp_real *x, const sp_real *w,
                   const sp_real *tx, const sp_real *tw, const sp_real *tb, sp_real *ty)
{
    sp_linear_fwd(m, rows, in_dim, out_dim, tx, w, tb, ty);
    if (tw)
        m->be->gemm(0, 1, rows, out_dim, in_dim, 1, x, in_dim, tw, in_dim, 1, ty, out_dim);
}

void sp_linear_bwd_jvp(const sp_model *m, int rows, int in_dim, int out_dim, const sp_real *x, const sp_real *w,
                       const sp_real *tx, const sp_real *tw, const sp_real *dy, const sp_real *tdy, sp_real *tdx,
                       sp_real *tdw, sp_real *tdb)
{
    sp_linear_bwd(m, rows, in_dim, out_dim, x, w, tdy, tdx, 1, tdw, tdb);
    if (tw) /* the product rule's other half: the VJP at the moved weights, of the unmoved gradient */
        sp_linear_bwd(m, rows, in_dim, out_dim, tx, tw, dy, tdx, 1, tdw, NULL);
}

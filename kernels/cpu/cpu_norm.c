/* kernels/cpu/cpu_norm.c: LayerNorm and RMSNorm over the last dim, forward, backward and JVP.
 *
 * With xhat = (x - mean) * rstd (RMSNorm: mean = 0), y = xhat * gain + bias. Both the VJP of xhat
 * (applied to w = dy * gain) and its JVP (applied to w = tx) are the same map:
 *   rstd * (w - mean(w) - xhat * mean(xhat * w)),   RMSNorm without the mean(w) term,
 * since the derivative of xhat is symmetric. Per-row sums run in double; dgain/dbias are summed
 * over rows by a loop parallel over blocks of columns, so every column is added in row order. */
#include <math.h>

#include "kernels/cpu/cpu_ops.h"

/* Columns per block of the dgain/dbias sums (a block's partial sums stay in registers/L1). */
#define NORM_COL_BLOCK 64

static double row_mean(sp_norm_kind kind, const sp_real *mean, int r)
{
    return kind == SP_NORM_LAYERNORM ? (double)mean[r] : 0.0;
}

void sp_cpu_norm_fwd(sp_norm_kind kind, int rows, int dim, sp_real eps, const sp_real *x, const sp_real *gain,
                     const sp_real *bias, sp_real *y, sp_real *mean, sp_real *rstd)
{
#pragma omp parallel for schedule(dynamic, sp_cpu_row_chunk(dim)) if ((size_t)rows * dim >= SP_CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const sp_real *xr = x + (size_t)r * dim;
        sp_real *yr = y + (size_t)r * dim;
        double mu = 0;
        if (kind == SP_NORM_LAYERNORM) {
            for (int j = 0; j < dim; j++)
                mu += xr[j];
            mu /= dim;
        }
        double ss = 0;
        for (int j = 0; j < dim; j++)
            ss += (xr[j] - mu) * (xr[j] - mu);
        sp_real rs = (sp_real)(1.0 / sqrt(ss / dim + eps));
        rstd[r] = rs;
        if (kind == SP_NORM_LAYERNORM)
            mean[r] = (sp_real)mu;
        /* use the stored (rounded) mean and rstd so bwd and jvp differentiate exactly this y */
        double m = row_mean(kind, mean, r);
        for (int j = 0; j < dim; j++) {
            double v = (xr[j] - m) * rs * gain[j];
            yr[j] = (sp_real)(bias ? v + bias[j] : v);
        }
    }
}

/* dgain[j0 + j] += sg[j], dbias[j0 + j] += sb[j] for the columns of one block (either may be NULL). */
static void add_column_sums(int j0, int width, const double *sg, const double *sb, sp_real *dgain, sp_real *dbias)
{
    for (int j = 0; j < width; j++) {
        if (dgain)
            dgain[j0 + j] += (sp_real)sg[j];
        if (dbias)
            dbias[j0 + j] += (sp_real)sb[j];
    }
}

/* mean(w) and mean(xhat * w) of one row, where w = w_raw * w_scale (w_scale NULL: 1). */
static void row_moments(sp_norm_kind kind, int dim, const sp_real *xr, double mu, double rs, const sp_real *w_raw,
                        const sp_real *w_scale, double *mean_w, double *mean_xw)
{
    double sw = 0, sxw = 0;
    for (int j = 0; j < dim; j++) {
        double w = w_scale ? (double)w_raw[j] * w_scale[j] : (double)w_raw[j];
        sw += w;
        sxw += (xr[j] - mu) * rs * w;
    }
    *mean_w = kind == SP_NORM_LAYERNORM ? sw / dim : 0.0;
    *mean_xw = sxw / dim;
}

void sp_cpu_norm_bwd(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                     const sp_real *mean, const sp_real *rstd, const sp_real *dy, sp_real *dx, sp_real *dgain,
                     sp_real *dbias)
{
    int parallel = (size_t)rows * dim >= SP_CPU_PAR_MIN;
#pragma omp parallel for schedule(dynamic, sp_cpu_row_chunk(dim)) if (parallel)
    for (int r = 0; r < rows; r++) {
        const sp_real *xr = x + (size_t)r * dim, *dyr = dy + (size_t)r * dim;
        sp_real *dxr = dx + (size_t)r * dim;
        double mu = row_mean(kind, mean, r), rs = rstd[r], mean_w, mean_xw;
        row_moments(kind, dim, xr, mu, rs, dyr, gain, &mean_w, &mean_xw);
        for (int j = 0; j < dim; j++) {
            double xhat = (xr[j] - mu) * rs;
            dxr[j] += (sp_real)(rs * ((double)dyr[j] * gain[j] - mean_w - xhat * mean_xw));
        }
    }
    if (!dgain && !dbias)
        return;
    /* column blocks, each summing its columns over the rows in row order, a row segment at a time */
    const int n_blocks = (dim + NORM_COL_BLOCK - 1) / NORM_COL_BLOCK;
#pragma omp parallel for schedule(dynamic) if (parallel)
    for (int blk = 0; blk < n_blocks; blk++) {
        const int j0 = blk * NORM_COL_BLOCK, width = dim - j0 < NORM_COL_BLOCK ? dim - j0 : NORM_COL_BLOCK;
        double sg[NORM_COL_BLOCK] = {0}, sb[NORM_COL_BLOCK] = {0};
        for (int r = 0; r < rows; r++) {
            const sp_real *xr = x + (size_t)r * dim + j0, *dyr = dy + (size_t)r * dim + j0;
            const double mu = row_mean(kind, mean, r), rs = rstd[r];
            for (int j = 0; j < width; j++) {
                double d = dyr[j];
                sg[j] += d * (xr[j] - mu) * rs;
                sb[j] += d;
            }
        }
        add_column_sums(j0, width, sg, sb, dgain, dbias);
    }
}

void sp_cpu_norm_jvp(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                     const sp_real *mean, const sp_real *rstd, const sp_real *tx, sp_real *ty)
{
#pragma omp parallel for schedule(dynamic, sp_cpu_row_chunk(dim)) if ((size_t)rows * dim >= SP_CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const sp_real *xr = x + (size_t)r * dim, *txr = tx + (size_t)r * dim;
        sp_real *tyr = ty + (size_t)r * dim;
        double mu = row_mean(kind, mean, r), rs = rstd[r], mean_w, mean_xw;
        row_moments(kind, dim, xr, mu, rs, txr, NULL, &mean_w, &mean_xw);
        for (int j = 0; j < dim; j++) {
            double xhat = (xr[j] - mu) * rs;
            tyr[j] = (sp_real)(gain[j] * rs * (txr[j] - mean_w - xhat * mean_xw));
        }
    }
}

/* The tangent of norm_bwd. With A = w - mean(w) - xhat mean(xhat w), w = dy * gain, dx = rstd A, and
 * the point's tangents txhat = rstd (tx - mean(tx) - xhat a), trstd = -rstd^2 a, a = mean(xhat tx):
 *   tdx = trstd A + rstd (tw - mean(tw) - txhat mean(xhat w) - xhat mean(txhat w + xhat tw)),
 * tw = tdy * gain + dy * tgain; tdgain = sum over rows of tdy xhat + dy txhat, tdbias of tdy
 * (RMSNorm without the mean terms). */
void sp_cpu_norm_bwd_jvp(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                         const sp_real *mean, const sp_real *rstd, const sp_real *tx, const sp_real *tgain,
                         const sp_real *dy, const sp_real *tdy, sp_real *tdx, sp_real *tdgain, sp_real *tdbias)
{
    const int parallel = (size_t)rows * dim >= SP_CPU_PAR_MIN, layer = kind == SP_NORM_LAYERNORM;
    double *tangent_moments = sp_cpu_alloc((size_t)rows * 2 * sizeof(double), "norm tangent moments");
    if (!tangent_moments)
        return;
#pragma omp parallel for schedule(dynamic, sp_cpu_row_chunk(dim)) if (parallel)
    for (int r = 0; r < rows; r++) {
        const size_t off = (size_t)r * dim;
        const sp_real *xr = x + off, *txr = tx + off, *dyr = dy + off, *tdyr = tdy + off;
        const double mu = row_mean(kind, mean, r), rs = rstd[r];
        double mean_t, a, mean_w, m;
        row_moments(kind, dim, xr, mu, rs, txr, NULL, &mean_t, &a);
        row_moments(kind, dim, xr, mu, rs, dyr, gain, &mean_w, &m);
        tangent_moments[2 * r] = mean_t;
        tangent_moments[2 * r + 1] = a;
        double s_tw = 0, s_tm = 0;
        for (int j = 0; j < dim; j++) {
            const double xhat = (xr[j] - mu) * rs, txhat = rs * (txr[j] - mean_t - xhat * a);
            const double tw = (double)tdyr[j] * gain[j] + (tgain ? (double)dyr[j] * tgain[j] : 0.0);
            s_tw += tw;
            s_tm += txhat * dyr[j] * gain[j] + xhat * tw;
        }
        const double mean_tw = layer ? s_tw / dim : 0.0, tm = s_tm / dim, trs = -rs * rs * a;
        for (int j = 0; j < dim; j++) {
            const double xhat = (xr[j] - mu) * rs, txhat = rs * (txr[j] - mean_t - xhat * a);
            const double w = (double)dyr[j] * gain[j];
            const double tw = (double)tdyr[j] * gain[j] + (tgain ? (double)dyr[j] * tgain[j] : 0.0);
            tdx[off + j] += (sp_real)(trs * (w - mean_w - xhat * m) + rs * (tw - mean_tw - txhat * m - xhat * tm));
        }
    }
    if (tdgain || tdbias) {
        const int n_blocks = (dim + NORM_COL_BLOCK - 1) / NORM_COL_BLOCK;
#pragma omp parallel for schedule(dynamic) if (parallel)
        for (int blk = 0; blk < n_blocks; blk++) {
            const int j0 = blk * NORM_COL_BLOCK, width = dim - j0 < NORM_COL_BLOCK ? dim - j0 : NORM_COL_BLOCK;
            double sg[NORM_COL_BLOCK] = {0}, sb[NORM_COL_BLOCK] = {0};
            for (int r = 0; r < rows; r++) {
                const size_t off = (size_t)r * dim + j0;
                const double mu = row_mean(kind, mean, r), rs = rstd[r];
                const double mean_t = tangent_moments[2 * r], a = tangent_moments[2 * r + 1];
                for (int j = 0; j < width; j++) {
                    const double xhat = (x[off + j] - mu) * rs, txhat = rs * (tx[off + j] - mean_t - xhat * a);
                    sg[j] += (double)tdy[off + j] * xhat + (double)dy[off + j] * txhat;
                    sb[j] += tdy[off + j];
                }
            }
            add_column_sums(j0, width, sg, sb, tdgain, tdbias);
        }
    }
    sp_cpu_free(tangent_moments);
}

/* kernels/cpu/cpu_norm.c: LayerNorm and RMSNorm over the last dim, forward, backward and JVP.
 *
 * With xhat = (x - mean) * rstd (RMSNorm: mean = 0), y = xhat * gain + bias. Both the VJP of xhat
 * (applied to w = dy * gain) and its JVP (applied to w = tx) are the same map:
 *   rstd * (w - mean(w) - xhat * mean(xhat * w)),   RMSNorm without the mean(w) term,
 * since the derivative of xhat is symmetric. Per-row sums run in double; dgain/dbias are summed
 * over rows by a column-parallel loop so every column is added in row order. */
#include <math.h>

#include "kernels/cpu/cpu_ops.h"

static double row_mean(sp_norm_kind kind, const sp_real *mean, int r)
{
    return kind == SP_NORM_LAYERNORM ? (double)mean[r] : 0.0;
}

void sp_cpu_norm_fwd(sp_norm_kind kind, int rows, int dim, sp_real eps, const sp_real *x, const sp_real *gain,
                     const sp_real *bias, sp_real *y, sp_real *mean, sp_real *rstd)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * dim >= SP_CPU_PAR_MIN)
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
#pragma omp parallel for schedule(static) if (parallel)
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
#pragma omp parallel for schedule(static) if (parallel)
    for (int j = 0; j < dim; j++) {
        double sg = 0, sb = 0;
        for (int r = 0; r < rows; r++) {
            double d = dy[(size_t)r * dim + j];
            sg += d * (x[(size_t)r * dim + j] - row_mean(kind, mean, r)) * rstd[r];
            sb += d;
        }
        if (dgain)
            dgain[j] += (sp_real)sg;
        if (dbias)
            dbias[j] += (sp_real)sb;
    }
}

void sp_cpu_norm_jvp(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                     const sp_real *mean, const sp_real *rstd, const sp_real *tx, sp_real *ty)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * dim >= SP_CPU_PAR_MIN)
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

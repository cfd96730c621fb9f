#include "analyzers/rowops.h"

#include <math.h>
#include <stdlib.h>

#include "analyzers/dev_bufs.h"

/* A backend vector of n copies of value. */
static sp_status fill_backend(const sp_backend *be, sp_real *dst, size_t n, double value)
{
    sp_real *host = sp_malloc(n * sizeof *host, "row statistics constants");
    if (!host)
        return SP_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        host[i] = (sp_real)value;
    be->upload(dst, host, n * sizeof *host);
    free(host);
    return SP_OK;
}

sp_status sp_rowops_init(sp_rowops *ro, const sp_backend *be, int max_rows, int max_dim)
{
    *ro = (sp_rowops){.be = be, .max_rows = max_rows, .max_dim = max_dim, .gain_value = 1};
    size_t rows = (size_t)max_rows, dim = (size_t)max_dim, cells;
    sp_status st = sp_size_mul3(rows, dim, sizeof(sp_real), &cells, "row statistics scratch");
    if (st != SP_OK)
        return st;
    ro->ones = be->alloc(rows * sizeof(sp_real), "row statistics ones");
    ro->gain = be->alloc(dim * sizeof(sp_real), "row statistics gain");
    ro->zeros = be->alloc(dim * sizeof(sp_real), "row statistics bias");
    ro->y = be->alloc(cells, "row statistics scratch");
    ro->mean = be->alloc(rows * sizeof(sp_real), "row statistics means");
    ro->rstd = be->alloc(rows * sizeof(sp_real), "row statistics rstd");
    ro->host = sp_malloc(rows * sizeof(sp_real), "row statistics staging");
    if (!ro->ones || !ro->gain || !ro->zeros || !ro->y || !ro->mean || !ro->rstd || !ro->host) {
        sp_rowops_free(ro);
        return SP_ERR_NOMEM;
    }
    st = fill_backend(be, ro->ones, rows, 1.0);
    if (st == SP_OK)
        st = fill_backend(be, ro->gain, dim, 1.0);
    if (st != SP_OK)
        sp_rowops_free(ro);
    return st;
}

void sp_rowops_free(sp_rowops *ro)
{
    if (ro->be) {
        sp_real *bufs[] = {ro->ones, ro->gain, ro->zeros, ro->y, ro->mean, ro->rstd};
        sp_dev_bufs_release(ro->be, bufs, (int)SP_ARRAY_LEN(bufs));
    }
    free(ro->host);
    *ro = (sp_rowops){0};
}

static sp_status check_size(const sp_rowops *ro, int rows, int dim)
{
    if (rows < 0 || rows > ro->max_rows || dim < 1 || dim > ro->max_dim)
        return sp_error(SP_ERR_INTERNAL, "row statistics: %d x %d rows exceed the scratch of %d x %d", rows, dim,
                        ro->max_rows, ro->max_dim);
    return SP_OK;
}

static sp_status set_gain(sp_rowops *ro, double value)
{
    if (ro->gain_value == value)
        return SP_OK;
    SP_TRY(fill_backend(ro->be, ro->gain, (size_t)ro->max_dim, value));
    ro->gain_value = value;
    return SP_OK;
}

/* rstd of every row under RMSNorm with eps, downloaded into ro->host. */
static sp_status rms_rstd(sp_rowops *ro, int rows, int dim, const sp_real *x, sp_real *out, double eps)
{
    ro->be->norm_fwd(SP_NORM_RMSNORM, rows, dim, (sp_real)eps, x, ro->gain, NULL, out ? out : ro->y, NULL, ro->rstd);
    ro->be->download(ro->host, ro->rstd, (size_t)rows * sizeof *ro->host);
    return SP_OK;
}

/* mean(x^2) of a row from its rstd = 1/sqrt(mean(x^2) + eps); an infinite rstd is a zero row, and
 * so is a mean square lost in the rounding of eps. A row holding NaN stays NaN (and one holding Inf,
 * Inf), so that no statistic built on it can pass for finite. */
static double mean_square(sp_real rstd, double eps)
{
    double r = (double)rstd, ms = 1.0 / (r * r) - eps;
    return ms > 100 * eps || isnan(ms) ? ms : 0;
}

sp_status sp_rowops_sqnorms(sp_rowops *ro, int rows, int dim, const sp_real *x, double *sq)
{
    SP_TRY(check_size(ro, rows, dim));
    SP_TRY(set_gain(ro, 1.0));
    SP_TRY(rms_rstd(ro, rows, dim, x, NULL, 0.0));
    for (int r = 0; r < rows; r++)
        sq[r] = dim * mean_square(ro->host[r], 0.0);
    return SP_OK;
}

sp_status sp_rowops_unit(sp_rowops *ro, int rows, int dim, const sp_real *x, sp_real *out, double *sq)
{
    SP_TRY(check_size(ro, rows, dim));
    /* x * rstd / sqrt(dim) = x / ||x||; the tiny eps keeps a zero row at 0 instead of 0 * inf */
    SP_TRY(set_gain(ro, 1.0 / sqrt((double)dim)));
    SP_TRY(rms_rstd(ro, rows, dim, x, out, SP_ROWOPS_TINY));
    if (sq)
        for (int r = 0; r < rows; r++)
            sq[r] = dim * mean_square(ro->host[r], SP_ROWOPS_TINY);
    return SP_OK;
}

sp_status sp_rowops_moments(sp_rowops *ro, int rows, int dim, const sp_real *x, double *mean, double *var)
{
    SP_TRY(check_size(ro, rows, dim));
    SP_TRY(set_gain(ro, 1.0));
    const sp_backend *be = ro->be;
    be->norm_fwd(SP_NORM_LAYERNORM, rows, dim, 0, x, ro->gain, ro->zeros, ro->y, ro->mean, ro->rstd);
    be->download(ro->host, ro->rstd, (size_t)rows * sizeof *ro->host);
    for (int r = 0; r < rows; r++)
        var[r] = mean_square(ro->host[r], 0.0);
    if (!mean)
        return SP_OK;
    be->download(ro->host, ro->mean, (size_t)rows * sizeof *ro->host);
    for (int r = 0; r < rows; r++)
        mean[r] = ro->host[r];
    return SP_OK;
}

void sp_rowops_sub_vec(sp_rowops *ro, int rows, int dim, const sp_real *x, const sp_real *vec, sp_real *out)
{
    const sp_backend *be = ro->be;
    if (out != x)
        be->copy(out, x, (size_t)rows * (size_t)dim * sizeof *out);
    /* out[rows, dim] -= ones[rows, 1] vec[1, dim] */
    be->gemm(0, 0, rows, dim, 1, (sp_real)-1, ro->ones, 1, vec, dim, (sp_real)1, out, dim);
}

#include "analyzers/moments.h"

#include <stdlib.h>
#include <string.h>

#include "analyzers/dev_bufs.h"

/* Elements downloaded at a time when partial sums move to the host. */
#define FLUSH_CHUNK 65536

/* total[i] += part[i] for n elements of backend memory. Accumulators restart with beta 0 after a
 * drain, so part need not be cleared. */
static sp_status drain(const sp_backend *be, sp_real *part, size_t n, double *total)
{
    size_t chunk = n < FLUSH_CHUNK ? n : FLUSH_CHUNK;
    sp_real *host = sp_malloc((chunk ? chunk : 1) * sizeof *host, "moment staging");
    if (!host)
        return SP_ERR_NOMEM;
    for (size_t at = 0; at < n; at += chunk) {
        size_t k = n - at < chunk ? n - at : chunk;
        be->download(host, part + at, k * sizeof *host);
        for (size_t i = 0; i < k; i++)
            total[at + i] += host[i];
    }
    free(host);
    return SP_OK;
}

sp_status sp_mom_cols_init(sp_mom_cols *c, sp_rowops *ro, int dim)
{
    *c = (sp_mom_cols){.ro = ro, .dim = dim};
    const sp_backend *be = ro->be;
    c->shift = be->alloc((size_t)dim * sizeof(sp_real), "column shift");
    c->part = be->alloc((size_t)dim * sizeof(sp_real), "column sums");
    c->shift_host = sp_calloc((size_t)dim, sizeof(double), "column shift");
    c->sum = sp_calloc((size_t)dim, sizeof(double), "column sums");
    if (!c->shift || !c->part || !c->shift_host || !c->sum) {
        sp_mom_cols_free(c);
        return SP_ERR_NOMEM;
    }
    return SP_OK;
}

void sp_mom_cols_free(sp_mom_cols *c)
{
    if (c->ro)
        sp_dev_bufs_release(c->ro->be, (sp_real *[]){c->shift, c->part}, 2);
    free(c->shift_host);
    free(c->sum);
    *c = (sp_mom_cols){0};
}

/* part (+)= x^T ones over rows: the column sums of x [rows, dim], added when part holds some. */
static void add_column_sums(const sp_mom_cols *c, const sp_real *x, int rows)
{
    c->ro->be->gemm(1, 0, c->dim, 1, rows, (sp_real)1, x, c->dim, c->ro->ones, 1, (sp_real)(c->part_rows ? 1 : 0),
                    c->part, 1);
}

/* The shift: the column mean of the first batch, rounded to sp_real, kept in both places. */
static sp_status set_shift(sp_mom_cols *c, const sp_real *x, int rows)
{
    const sp_backend *be = c->ro->be;
    add_column_sums(c, x, rows); /* part_rows is 0 here: part is scratch */
    sp_real *host = sp_malloc((size_t)c->dim * sizeof *host, "column shift");
    if (!host)
        return SP_ERR_NOMEM;
    be->download(host, c->part, (size_t)c->dim * sizeof *host);
    for (int i = 0; i < c->dim; i++) {
        host[i] = (sp_real)(host[i] / rows);
        c->shift_host[i] = host[i];
    }
    be->upload(c->shift, host, (size_t)c->dim * sizeof *host);
    free(host);
    return SP_OK;
}

sp_status sp_mom_cols_add(sp_mom_cols *c, const sp_real *x, int rows, sp_real *out)
{
    if (rows <= 0)
        return SP_OK;
    if (rows > c->ro->max_rows)
        return sp_error(SP_ERR_INTERNAL, "column moments: %d rows exceed the %d the scratch holds", rows,
                        c->ro->max_rows);
    if (c->n == 0)
        SP_TRY(set_shift(c, x, rows));
    if (c->part_rows + rows > SP_MOMENTS_FLUSH_ROWS)
        SP_TRY(sp_mom_cols_flush(c));
    sp_rowops_sub_vec(c->ro, rows, c->dim, x, c->shift, out);
    add_column_sums(c, out, rows);
    c->part_rows += rows;
    c->n += rows;
    return SP_OK;
}

sp_status sp_mom_cols_flush(sp_mom_cols *c)
{
    if (c->part_rows == 0)
        return SP_OK;
    SP_TRY(drain(c->ro->be, c->part, (size_t)c->dim, c->sum));
    c->part_rows = 0;
    return SP_OK;
}

void sp_mom_cols_mean(const sp_mom_cols *c, double *mean)
{
    for (int i = 0; i < c->dim; i++)
        mean[i] = c->shift_host[i] + (c->n ? c->sum[i] / (double)c->n : 0.0);
}

sp_status sp_mom_cross_init(sp_mom_cross *x, const sp_backend *be, int dim_a, int dim_b)
{
    *x = (sp_mom_cross){.be = be, .dim_a = dim_a, .dim_b = dim_b};
    size_t n;
    SP_TRY(sp_size_mul((size_t)dim_a, (size_t)dim_b, &n, "cross-product accumulator"));
    x->part = be->alloc(n * sizeof(sp_real), "cross-product accumulator");
    x->total = sp_calloc(n, sizeof(double), "cross-product totals");
    if (!x->part || !x->total) {
        sp_mom_cross_free(x);
        return SP_ERR_NOMEM;
    }
    return SP_OK;
}

void sp_mom_cross_free(sp_mom_cross *x)
{
    if (x->be && x->part)
        x->be->free(x->part);
    free(x->total);
    *x = (sp_mom_cross){0};
}

sp_status sp_mom_cross_add(sp_mom_cross *x, const sp_real *a, const sp_real *b, int rows)
{
    if (rows <= 0)
        return SP_OK;
    if (x->part_rows + rows > SP_MOMENTS_FLUSH_ROWS)
        SP_TRY(sp_mom_cross_flush(x));
    /* part[dim_a, dim_b] += a^T b */
    x->be->gemm(1, 0, x->dim_a, x->dim_b, rows, (sp_real)1, a, x->dim_a, b, x->dim_b, (sp_real)(x->part_rows ? 1 : 0),
                x->part, x->dim_b);
    x->part_rows += rows;
    return SP_OK;
}

sp_status sp_mom_cross_flush(sp_mom_cross *x)
{
    if (x->part_rows == 0)
        return SP_OK;
    SP_TRY(drain(x->be, x->part, (size_t)x->dim_a * (size_t)x->dim_b, x->total));
    x->part_rows = 0;
    return SP_OK;
}

void sp_mom_centered(const sp_mom_cross *x, const sp_mom_cols *a, const sp_mom_cols *b, double *out)
{
    double inv_n = a->n ? 1.0 / (double)a->n : 0.0;
    for (int i = 0; i < x->dim_a; i++)
        for (int j = 0; j < x->dim_b; j++)
            out[(size_t)i * x->dim_b + j] = x->total[(size_t)i * x->dim_b + j] - a->sum[i] * b->sum[j] * inv_n;
}

#include "analyzers/moments.h"

#include <stdlib.h>
#include <string.h>

#include "analyzers/dev_bufs.h"
#include "analyzers/linalg.h"
#include "core/mpi.h"

/* total[i] += part[i] for the n column sums in backend memory. Accumulators restart with beta 0
 * after a drain, so part need not be cleared. */
static sp_status drain(const sp_backend *be, const sp_real *part, size_t n, double *total)
{
    sp_real *host = sp_malloc((n ? n : 1) * sizeof *host, "column sums staging");
    if (!host)
        return SP_ERR_NOMEM;
    be->download(host, part, n * sizeof *host);
    for (size_t i = 0; i < n; i++)
        total[i] += host[i];
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
    sp_status st = c->shared_shift ? sp_mpi_bcast_f64(c->shift_host, (size_t)c->dim, 0) : SP_OK;
    for (int i = 0; i < c->dim; i++)
        host[i] = (sp_real)c->shift_host[i]; /* exact: rank 0's shift is an sp_real */
    be->upload(c->shift, host, (size_t)c->dim * sizeof *host);
    free(host);
    return st;
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

void sp_mom_cols_shift(const sp_mom_cols *c, const sp_real *x, int rows, sp_real *out)
{
    sp_rowops_sub_vec(c->ro, rows, c->dim, x, c->shift, out);
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

/* The accumulator over caller-provided (or NULL: its own) zeroed fp64 totals. */
static sp_status cross_init(sp_mom_cross *x, const sp_backend *be, int dim_a, int dim_b, sp_real *scratch,
                            double *total)
{
    *x = (sp_mom_cross){.be = be, .dim_a = dim_a, .dim_b = dim_b, .scratch = scratch, .total = total,
                        .owns_total = !total};
    size_t n;
    SP_TRY(sp_size_mul((size_t)dim_a, (size_t)dim_b, &n, "cross-product accumulator"));
    if (x->owns_total && !(x->total = be->alloc(n * sizeof(double), "cross-product fp64 totals")))
        return SP_ERR_NOMEM;
    return SP_OK;
}

sp_status sp_mom_cross_init(sp_mom_cross *x, const sp_backend *be, int dim_a, int dim_b, sp_real *scratch)
{
    return cross_init(x, be, dim_a, dim_b, scratch, NULL);
}

void sp_mom_cross_free(sp_mom_cross *x)
{
    if (x->be && x->owns_total && x->total)
        x->be->free(x->total);
    *x = (sp_mom_cross){0};
}

sp_status sp_mom_cross_add(sp_mom_cross *x, const sp_real *a, const sp_real *b, int rows)
{
    if (rows <= 0)
        return SP_OK;
    if (x->centered)
        return sp_error(SP_ERR_INTERNAL, "cross-product moments: rows added after the totals were centered");
    /* scratch[dim_a, dim_b] = a^T b, then into the fp64 totals */
    if (!x->upper_only) {
        x->be->gemm(1, 0, x->dim_a, x->dim_b, rows, (sp_real)1, a, x->dim_a, b, x->dim_b, (sp_real)0, x->scratch,
                    x->dim_b);
    } else if (a != b || x->dim_a != x->dim_b) {
        return sp_error(SP_ERR_INTERNAL, "cross-product moments: an upper-triangle accumulator takes a^T a only");
    } else {
        /* band [i0, i0 + m) of rows, from column i0 on; the scratch below the bands stays zero */
        const int d = x->dim_a;
        for (int i0 = 0; i0 < d; i0 += SP_MOMENTS_BAND) {
            const int m = d - i0 < SP_MOMENTS_BAND ? d - i0 : SP_MOMENTS_BAND;
            x->be->gemm(1, 0, m, d - i0, rows, (sp_real)1, a + i0, d, a + i0, d, (sp_real)0,
                        x->scratch + (size_t)i0 * d + i0, d);
        }
    }
    x->be->to_f64((size_t)x->dim_a * (size_t)x->dim_b, x->scratch, x->total, 1);
    return SP_OK;
}

void sp_mom_cross_download(const sp_mom_cross *x, double *host)
{
    x->be->download(host, x->total, (size_t)x->dim_a * (size_t)x->dim_b * sizeof *host);
}

sp_status sp_mom_cross_center(sp_mom_cross *x, sp_mom_cols *a, sp_mom_cols *b, double scale)
{
    SP_TRY(sp_mom_cols_flush(a));
    SP_TRY(sp_mom_cols_flush(b));
    const sp_backend *be = x->be;
    const size_t na = (size_t)x->dim_a, nb = (size_t)x->dim_b;
    double *sums = be->alloc((na + nb) * sizeof *sums, "column sums fp64");
    if (!sums)
        return SP_ERR_NOMEM;
    be->upload(sums, a->sum, na * sizeof *sums);
    be->upload(sums + na, b->sum, nb * sizeof *sums);
    const double inv_n = a->n ? 1.0 / (double)a->n : 0.0;
    /* total = scale * total - (scale / n) sum_a sum_b^T: [dim_a, 1] times [1, dim_b] */
    be->gemm_f64(0, 0, x->dim_a, x->dim_b, 1, -scale * inv_n, sums, 1, sums + na, x->dim_b, scale, x->total,
                 x->dim_b);
    be->free(sums);
    x->centered = 1;
    return SP_OK;
}

void sp_mom_centered_host(const double *total, const sp_mom_cols *a, const sp_mom_cols *b, double *out)
{
    const double inv_n = a->n ? 1.0 / (double)a->n : 0.0;
    for (int i = 0; i < a->dim; i++)
        for (int j = 0; j < b->dim; j++)
            out[(size_t)i * b->dim + j] = total[(size_t)i * b->dim + j] - a->sum[i] * b->sum[j] * inv_n;
}

double sp_mom_hsic(const double *total, const sp_mom_cols *a, const sp_mom_cols *b, double *cov)
{
    sp_mom_centered_host(total, a, b, cov);
    const size_t n_cells = (size_t)a->dim * (size_t)b->dim;
    double sum = 0;
    for (size_t i = 0; i < n_cells; i++)
        sum += cov[i] * cov[i];
    const double n = (double)a->n;
    return sum / ((n - 1) * (n - 1));
}

sp_status sp_mom_batch_init(sp_mom_batch *b, const sp_backend *be, int count, int dim)
{
    *b = (sp_mom_batch){.be = be, .count = count, .dim = dim};
    size_t n;
    SP_TRY(sp_size_mul3((size_t)count, (size_t)dim, (size_t)dim, &n, "batched fp64 totals"));
    b->totals = be->alloc(n * sizeof(double), "batched fp64 totals");
    b->scratch = be->alloc((size_t)dim * (size_t)dim * sizeof(sp_real), "batched cross-product scratch");
    b->cross = sp_calloc((size_t)(count > 0 ? count : 1), sizeof *b->cross, "batched accumulators");
    if (!b->totals || !b->scratch || !b->cross) {
        sp_mom_batch_free(b);
        return SP_ERR_NOMEM;
    }
    for (int i = 0; i < count; i++) { /* (alloc zeroes: the scratch below the bands stays 0) */
        sp_status st = cross_init(&b->cross[i], be, dim, dim, b->scratch, b->totals + (size_t)i * dim * dim);
        if (st != SP_OK) {
            sp_mom_batch_free(b);
            return st;
        }
        b->cross[i].upper_only = 1;
    }
    return SP_OK;
}

sp_status sp_mom_batch_covariances(sp_mom_batch *b, sp_mom_cols *cols, const char *what)
{
    for (int i = 0; i < b->count; i++) {
        const int64_t n = cols[i].n;
        if (n < 2)
            return sp_error(SP_ERR_INPUT, "%s: %lld token(s) (expected at least 2 for a covariance)", what,
                            (long long)n);
        SP_TRY(sp_mom_cross_center(&b->cross[i], &cols[i], &cols[i], 1.0 / (double)(n - 1)));
    }
    return SP_OK;
}

sp_status sp_mom_batch_eigvals(sp_mom_batch *b, double *w)
{
    return sp_linalg_backend_eigvals(b->be, b->dim, b->count, b->totals, w);
}

void sp_mom_batch_free(sp_mom_batch *b)
{
    for (int i = 0; b->cross && i < b->count; i++)
        sp_mom_cross_free(&b->cross[i]);
    free(b->cross);
    if (b->be && b->totals)
        b->be->free(b->totals);
    if (b->be && b->scratch)
        b->be->free(b->scratch);
    *b = (sp_mom_batch){0};
}

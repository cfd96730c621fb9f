#include "analyzers/ranks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mpi.h"

int sp_analysis_n_ranks(const sp_analysis *a) { return a->n_ranks > 1 ? a->n_ranks : 1; }

void sp_analysis_share(const sp_analysis *a, int n, int *begin, int *end)
{
    const int64_t ranks = sp_analysis_n_ranks(a), rank = ranks > 1 ? a->rank : 0;
    *begin = (int)((int64_t)n * rank / ranks);
    *end = (int)((int64_t)n * (rank + 1) / ranks);
}

int sp_analysis_owns(const sp_analysis *a, int i)
{
    return sp_analysis_n_ranks(a) == 1 || i % a->n_ranks == a->rank;
}

sp_status sp_analysis_sum(const sp_analysis *a, double *x, size_t n)
{
    return sp_analysis_n_ranks(a) > 1 ? sp_mpi_sum_f64(x, n) : SP_OK;
}

sp_status sp_analysis_sum_count(const sp_analysis *a, int64_t *n)
{
    double v = (double)*n; /* exact below 2^53 */
    SP_TRY(sp_analysis_sum(a, &v, 1));
    *n = (int64_t)v;
    return SP_OK;
}

sp_status sp_analysis_sum_backend(const sp_analysis *a, double *x, size_t n)
{
    if (sp_analysis_n_ranks(a) == 1 || n == 0)
        return SP_OK;
    double *host = sp_malloc(n * sizeof *host, "sum over MPI ranks");
    if (!host)
        return SP_ERR_NOMEM;
    a->be->download(host, x, n * sizeof *host);
    sp_status st = sp_mpi_sum_f64(host, n);
    if (st == SP_OK)
        a->be->upload(x, host, n * sizeof *host);
    free(host);
    return st;
}

sp_status sp_analysis_sum_real_backend(const sp_analysis *a, sp_real *x, size_t n)
{
    if (sp_analysis_n_ranks(a) == 1 || n == 0)
        return SP_OK;
    sp_real *host = sp_malloc(n * sizeof *host, "sum over MPI ranks");
    double *wide = host ? sp_malloc(n * sizeof *wide, "sum over MPI ranks") : NULL;
    sp_status st = wide ? SP_OK : SP_ERR_NOMEM;
    if (st == SP_OK) {
        a->be->download(host, x, n * sizeof *host);
        for (size_t i = 0; i < n; i++)
            wide[i] = host[i];
        st = sp_mpi_sum_f64(wide, n); /* in float64, rounded once */
    }
    if (st == SP_OK) {
        for (size_t i = 0; i < n; i++)
            host[i] = (sp_real)wide[i];
        a->be->upload(x, host, n * sizeof *host);
    }
    free(host);
    free(wide);
    return st;
}

sp_status sp_analysis_max(const sp_analysis *a, double *x, size_t n)
{
    const int ranks = sp_analysis_n_ranks(a);
    if (ranks == 1 || n == 0)
        return SP_OK;
    double *all = sp_malloc((size_t)ranks * n * sizeof *all, "maximum over MPI ranks");
    if (!all)
        return SP_ERR_NOMEM;
    sp_status st = sp_mpi_gather_f64(x, n, all, (size_t)ranks * n);
    for (size_t i = 0; st == SP_OK && i < n; i++)
        for (int r = 0; r < ranks; r++) {
            const double v = all[(size_t)r * n + i];
            if (isnan(v) || (!isnan(x[i]) && v > x[i]))
                x[i] = v;
        }
    free(all);
    return st;
}

sp_status sp_analysis_bcast(const sp_analysis *a, double *x, size_t n, int owner)
{
    return sp_analysis_n_ranks(a) > 1 ? sp_mpi_bcast_f64(x, n, owner) : SP_OK;
}

sp_status sp_analysis_gather(const sp_analysis *a, const double *x, size_t n_local, double *all, size_t total)
{
    if (sp_analysis_n_ranks(a) == 1) {
        memcpy(all, x, n_local * sizeof *x);
        return SP_OK;
    }
    return sp_mpi_gather_f64(x, n_local, all, total);
}

void sp_analysis_share_shift(const sp_analysis *a, sp_mom_cols *cols, int n_cols)
{
    for (int i = 0; i < n_cols; i++)
        cols[i].shared_shift = sp_analysis_n_ranks(a) > 1;
}

sp_status sp_analysis_join_cols(const sp_analysis *a, sp_mom_cols *cols, int n_cols)
{
    if (sp_analysis_n_ranks(a) == 1)
        return SP_OK;
    for (int i = 0; i < n_cols; i++) {
        sp_mom_cols *c = &cols[i];
        if (c->joined || !c->shared_shift)
            return sp_error(SP_ERR_INTERNAL, "column moments joined over the MPI ranks %s",
                            c->joined ? "twice" : "without a shared shift");
        SP_TRY(sp_mom_cols_flush(c));
        SP_TRY(sp_mpi_sum_f64(c->sum, (size_t)c->dim));
        SP_TRY(sp_analysis_sum_count(a, &c->n));
        c->joined = 1;
    }
    return SP_OK;
}

sp_status sp_analysis_join_cross(const sp_analysis *a, sp_mom_cross *x)
{
    return sp_analysis_sum_backend(a, x->total, (size_t)x->dim_a * (size_t)x->dim_b);
}

/* analyzers/embed_spectrum.c: "embed_spectrum", the eigenvalue spectrum of the token embedding
 * rows (nGPT's flatness measure), and of an untied output head the same way.
 *
 * For E [V, d]: the covariance of its rows C = (E - 1 m^T)^T (E - 1 m^T) / (V - 1), m the mean row
 * (--embed-uncentered: the second moment E^T E / V). Eigenvalues in fp64, descending, each divided
 * by their median, against the normalized rank i / d (i = 1..d); lambda_max / lambda_min (+inf when
 * lambda_min <= 1e-12 lambda_max).
 *
 * Rows are taken in chunks of CHUNK_ROWS: the mean and each chunk's centered cross-product come from
 * be->gemm in sp_real. The mean (d values per chunk) is summed in double on the host; the chunks'
 * cross-products are widened and summed into an fp64 matrix in backend memory (be->to_f64), whose
 * eigenvalues come from be->sym_eigvals; only the d eigenvalues cross to the host, where they are
 * divided by V - 1 (or V). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyzers/analyzer.h"
#include "analyzers/dev_bufs.h"
#include "analyzers/linalg.h"

#define NAME "embed_spectrum"
#define CHUNK_ROWS 1024
#define RATIO_FLOOR 1e-12

typedef struct {
    const sp_backend *be;
    sp_real *ones, *mean, *chunk, *part; /* backend [CHUNK_ROWS], [d], [CHUNK_ROWS, d], [d, d] */
    sp_real *stage;                      /* host [d] */
} cov_scratch;

static void scratch_free(cov_scratch *s)
{
    sp_real *bufs[] = {s->ones, s->mean, s->chunk, s->part};
    sp_dev_bufs_release(s->be, bufs, (int)SP_ARRAY_LEN(bufs));
    free(s->stage);
}

static sp_status scratch_init(cov_scratch *s, const sp_backend *be, int d)
{
    *s = (cov_scratch){.be = be};
    const size_t dd = (size_t)d * (size_t)d;
    s->ones = be->alloc(CHUNK_ROWS * sizeof(sp_real), "embedding ones");
    s->mean = be->alloc((size_t)d * sizeof(sp_real), "embedding mean");
    s->chunk = be->alloc((size_t)CHUNK_ROWS * (size_t)d * sizeof(sp_real), "embedding chunk");
    s->part = be->alloc(dd * sizeof(sp_real), "embedding cross-product");
    s->stage = sp_malloc((size_t)d * sizeof(sp_real), "embedding staging");
    if (!s->ones || !s->mean || !s->chunk || !s->part || !s->stage) {
        scratch_free(s);
        return SP_ERR_NOMEM;
    }
    sp_real *ones = sp_malloc(CHUNK_ROWS * sizeof *ones, "embedding ones");
    if (!ones) {
        scratch_free(s);
        return SP_ERR_NOMEM;
    }
    for (int i = 0; i < CHUNK_ROWS; i++)
        ones[i] = 1;
    be->upload(s->ones, ones, CHUNK_ROWS * sizeof *ones);
    free(ones);
    return SP_OK;
}

/* cov [d, d] (backend, fp64, zeroed by the caller) += the cross-products of the rows of e [V, d]
 * (backend), centered by their mean when asked: the covariance times V - 1 (or the second moment
 * times V). */
static sp_status row_cross_products(cov_scratch *s, const sp_real *e, int V, int d, int centered, double *cov)
{
    const sp_backend *be = s->be;
    const size_t dd = (size_t)d * (size_t)d;
    double *mean = sp_calloc((size_t)d, sizeof *mean, "embedding mean");
    if (!mean)
        return SP_ERR_NOMEM;
    for (int r0 = 0; centered && r0 < V; r0 += CHUNK_ROWS) {
        const int rows = V - r0 < CHUNK_ROWS ? V - r0 : CHUNK_ROWS;
        be->gemm(0, 0, 1, d, rows, 1, s->ones, rows, e + (size_t)r0 * d, d, 0, s->part, d);
        be->download(s->stage, s->part, (size_t)d * sizeof(sp_real));
        for (int j = 0; j < d; j++)
            mean[j] += s->stage[j] / V;
    }
    for (int j = 0; j < d; j++)
        s->stage[j] = (sp_real)mean[j];
    be->upload(s->mean, s->stage, (size_t)d * sizeof(sp_real));
    free(mean);

    for (int r0 = 0; r0 < V; r0 += CHUNK_ROWS) {
        const int rows = V - r0 < CHUNK_ROWS ? V - r0 : CHUNK_ROWS;
        be->copy(s->chunk, e + (size_t)r0 * d, (size_t)rows * (size_t)d * sizeof(sp_real));
        be->gemm(0, 0, rows, d, 1, -1, s->ones, 1, s->mean, d, 1, s->chunk, d); /* chunk -= 1 m^T */
        be->gemm(1, 0, d, d, rows, 1, s->chunk, d, s->chunk, d, 0, s->part, d);
        be->to_f64(dd, s->part, cov, 1);
    }
    return SP_OK;
}

/* Eigenvalues, descending, of the covariance (or second moment) of the rows of e into w [d] (host):
 * the fp64 matrix lives on the backend only while it is decomposed. */
static sp_status row_spectrum(cov_scratch *s, const sp_real *e, int V, int d, int centered, double *w)
{
    const sp_backend *be = s->be;
    double *cov = be->alloc((size_t)d * (size_t)d * sizeof *cov, "embedding covariance fp64");
    sp_status st = cov ? row_cross_products(s, e, V, d, centered, cov) : SP_ERR_NOMEM;
    if (st == SP_OK)
        st = sp_linalg_backend_eigvals(be, d, 1, cov, w);
    if (cov)
        be->free(cov);
    /* dividing the eigenvalues is dividing the matrix */
    const double divisor = centered ? (V > 1 ? V - 1 : 1) : V;
    for (int i = 0; st == SP_OK && i < d; i++)
        w[i] /= divisor;
    return st;
}

/* The spectrum of one matrix into the report, arrays and scalars prefixed by `prefix`. */
static sp_status spectrum(const sp_analysis *a, cov_scratch *s, const sp_real *e, int V, const char *prefix)
{
    const int d = a->d_model, centered = !a->opts->embed_uncentered;
    double *w = sp_malloc(2 * (size_t)d * sizeof *w, "embedding eigenvalues");
    if (!w)
        return SP_ERR_NOMEM;
    double *ratio = w + d;
    sp_status st = row_spectrum(s, e, V, d, centered, w);
    const double median = sp_linalg_median(d, w);
    for (int i = 0; i < d; i++)
        ratio[i] = w[i] / median;
    const int64_t shape = d;
    char name[64], desc[256];
    const char *what = centered ? "covariance" : "second moment (uncentered)";
    snprintf(name, sizeof name, "%s_eigvals", prefix);
    snprintf(desc, sizeof desc, "eigenvalues of the %s of the %s rows, descending", what, prefix);
    if (st == SP_OK)
        st = sp_report_write_array(a->report, NAME, name, 1, &shape, w,
                                   &(sp_report_array_attrs){"squared embedding units", "[rank]", desc});
    snprintf(name, sizeof name, "%s_eigvals_over_median", prefix);
    snprintf(desc, sizeof desc, "%s eigenvalues divided by their median, against normalized_rank", prefix);
    if (st == SP_OK)
        st = sp_report_write_array(a->report, NAME, name, 1, &shape, ratio, &(sp_report_array_attrs){"1", "[rank]", desc});
    sp_rank_measures rm = sp_linalg_rank_measures(d, w, d);
    const double lmax = w[0], lmin = w[d - 1];
    const struct {
        const char *key;
        double value;
    } scalars[] = {
        {"max_over_min", lmin <= RATIO_FLOOR * lmax ? INFINITY : lmax / lmin},
        {"max_over_median", lmax / median},
        {"min_over_median", lmin / median},
        {"median", median},
        {"soft_rank", rm.soft_rank},
        {"hard_rank", rm.hard_rank},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(scalars) && st == SP_OK; i++) {
        snprintf(name, sizeof name, "%s_%s", prefix, scalars[i].key);
        st = sp_report_set_scalar(a->report, NAME, name, scalars[i].value);
    }
    free(w);
    return st;
}

static sp_status embed_spectrum_finish(const sp_analysis *a, void *state)
{
    (void)state;
    sp_model *m = a->model;
    const sp_config *cfg = sp_model_config(m);
    const int d = cfg->d_model;
    double *rank = sp_malloc((size_t)d * sizeof *rank, "normalized ranks");
    if (!rank)
        return SP_ERR_NOMEM;
    for (int i = 0; i < d; i++)
        rank[i] = (double)(i + 1) / d;
    const int64_t shape = d;
    sp_status st = sp_report_write_array(a->report, NAME, "normalized_rank", 1, &shape, rank,
                                         &(sp_report_array_attrs){"1", "[rank]", "i / d_model, i = 1..d_model"});
    free(rank);
    SP_TRY(st);
    cov_scratch s;
    SP_TRY(scratch_init(&s, a->be, d));
    st = spectrum(a, &s, sp_model_param(m, sp_model_find_param(m, "embed/tok")), cfg->vocab_size, "tok");
    const int head = sp_model_find_param(m, "head/w");
    if (st == SP_OK && head >= 0)
        st = spectrum(a, &s, sp_model_param(m, head), cfg->vocab_size, "head");
    if (st == SP_OK)
        st = sp_report_set_scalar(a->report, NAME, "tied", head < 0);
    if (st == SP_OK)
        st = sp_report_set_scalar(a->report, NAME, "centered", !a->opts->embed_uncentered);
    scratch_free(&s);
    return st;
}

const sp_analyzer sp_analyzer_embed_spectrum = {
    .name = NAME,
    .description = "eigenvalue spectrum of the token embedding rows (and an untied head), normalized by its median",
    .needs = SP_NEEDS_MODEL,
    .finish = embed_spectrum_finish,
};

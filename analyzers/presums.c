/* analyzers/presums.c: "presums", the scale of the pre-normalization sums (docs/metrics.md).
 *
 * Per block l = 0..L-1 and per sum (sum_a = A_l, attention + residual before N1; sum_z = Z_l,
 * FFN + residual before N2; SpanNorm's sigma_A and sigma_Z), over the evaluation tokens:
 *   sigma  mean over tokens of the token's standard deviation across its d features (biased, the
 *          divisor of a LayerNorm with eps 0)
 *   rms    sqrt(mean over tokens and features of the sum's square)
 * NaN for blocks whose recipe has no such sum (mixln's pre blocks, pre). Sums of squares run on the
 * backend (be->sumsq), the per-token variances come from the row statistics (analyzers/rowops.h). */
#include <math.h>
#include <stdlib.h>

#include "analyzers/output.h"
#include "analyzers/ranks.h"
#include "analyzers/rowops.h"

#define NAME "presums"

static const char *const sum_names[2] = {"sum_a", "sum_z"};

/* One sum of one block. */
typedef struct {
    double sumsq, std_sum;
    int64_t n_tokens; /* 0: the block has no such sum */
} sum_stats;

typedef struct {
    int n_layers, d;
    sp_rowops ro;
    sum_stats *stats; /* [2 * n_layers], index which * n_layers + l */
    double *mean, *var; /* [max_rows] */
} presums_state;

static void presums_free(void *state)
{
    presums_state *s = state;
    if (!s)
        return;
    sp_rowops_free(&s->ro);
    free(s->stats);
    free(s->mean);
    free(s->var);
    free(s);
}

static sp_status presums_begin(const sp_analysis *a, void **state)
{
    presums_state *s = sp_calloc(1, sizeof *s, "presums state");
    if (!s)
        return SP_ERR_NOMEM;
    *state = s;
    s->n_layers = a->n_layers;
    s->d = a->d_model;
    const int max_rows = a->batch * a->seq_len;
    SP_TRY(sp_rowops_init(&s->ro, a->be, max_rows, s->d));
    s->stats = sp_calloc(2 * (size_t)s->n_layers, sizeof *s->stats, "presums statistics");
    s->mean = sp_malloc((size_t)max_rows * sizeof *s->mean, "presums row statistics");
    s->var = sp_malloc((size_t)max_rows * sizeof *s->var, "presums row statistics");
    if (!s->stats || !s->mean || !s->var)
        return SP_ERR_NOMEM;
    return SP_OK;
}

static sp_status presums_consume(const sp_analysis *a, void *state, const sp_act_batch *b)
{
    presums_state *s = state;
    const int rows = sp_batch_rows(b), d = s->d;
    for (int which = 0; which < 2; which++)
        for (int l = 0; l < s->n_layers; l++) {
            const sp_real *x = sp_batch_presum(b, l, sum_names[which]);
            if (!x)
                continue;
            sum_stats *st = &s->stats[which * s->n_layers + l];
            st->sumsq += a->be->sumsq((size_t)rows * d, x);
            SP_TRY(sp_rowops_moments(&s->ro, rows, d, x, s->mean, s->var));
            for (int r = 0; r < rows; r++)
                st->std_sum += sqrt(s->var[r]);
            st->n_tokens += rows;
        }
    return SP_OK;
}

/* sigma, rms [n_layers] of one sum and the mean sigma over the blocks that have it (NaN if none). */
static double sum_results(const presums_state *s, int which, double *sigma, double *rms)
{
    double sigma_total = 0;
    int n_present = 0;
    for (int l = 0; l < s->n_layers; l++) {
        const sum_stats *st = &s->stats[which * s->n_layers + l];
        if (!st->n_tokens) {
            sigma[l] = rms[l] = NAN;
            continue;
        }
        sigma[l] = st->std_sum / (double)st->n_tokens;
        rms[l] = sqrt(st->sumsq / ((double)st->n_tokens * s->d));
        sigma_total += sigma[l];
        n_present++;
    }
    return n_present ? sigma_total / n_present : NAN;
}

static sp_status write_results(const sp_analysis *a, const presums_state *s, double *buf)
{
    const int L = s->n_layers;
    const int64_t per_layer[1] = {L};
    double *sigma = buf, *rms = buf + L;
    const double sigma_a_mean = sum_results(s, 0, sigma, rms);
    SP_TRY(sp_out_array(a, NAME, "sigma_a", 0, 1, per_layer, sigma, "activation", "[block]",
                        "mean over tokens of the std of sum_a (attention + residual before N1) across features "
                        "(biased); NaN: no sum_a"));
    SP_TRY(sp_out_array(a, NAME, "rms_a", 0, 1, per_layer, rms, "activation", "[block]",
                        "sqrt(mean over tokens and features of sum_a^2); NaN: no sum_a"));
    const double sigma_z_mean = sum_results(s, 1, sigma, rms);
    SP_TRY(sp_out_array(a, NAME, "sigma_z", 0, 1, per_layer, sigma, "activation", "[block]",
                        "mean over tokens of the std of sum_z (FFN + residual before N2) across features "
                        "(biased); NaN: no sum_z"));
    SP_TRY(sp_out_array(a, NAME, "rms_z", 0, 1, per_layer, rms, "activation", "[block]",
                        "sqrt(mean over tokens and features of sum_z^2); NaN: no sum_z"));
    SP_TRY(sp_out_scalar(a, NAME, "sigma_a_mean", 0, sigma_a_mean));
    return sp_out_scalar(a, NAME, "sigma_z_mean", 0, sigma_z_mean);
}

/* Over MPI ranks: every rank's sums and counts added up. */
static sp_status join_ranks(const sp_analysis *a, presums_state *s)
{
    for (int i = 0; i < 2 * s->n_layers; i++) {
        double sums[2] = {s->stats[i].sumsq, s->stats[i].std_sum};
        SP_TRY(sp_analysis_sum(a, sums, 2));
        s->stats[i].sumsq = sums[0];
        s->stats[i].std_sum = sums[1];
        SP_TRY(sp_analysis_sum_count(a, &s->stats[i].n_tokens));
    }
    return SP_OK;
}

static sp_status presums_finish(const sp_analysis *a, void *state)
{
    presums_state *s = state;
    double *buf = sp_malloc(2 * (size_t)s->n_layers * sizeof *buf, "presums results");
    sp_status st = buf ? join_ranks(a, s) : SP_ERR_NOMEM;
    if (st == SP_OK)
        st = write_results(a, s, buf);
    free(buf);
    presums_free(s);
    return st;
}

const sp_analyzer sp_analyzer_presums = {
    .name = NAME,
    .description = "scale of the pre-normalization sums sum_a, sum_z per block: mean token std and RMS",
    .needs = SP_NEEDS_ACTIVATIONS | SP_NEEDS_PRESUMS,
    .begin = presums_begin,
    .consume = presums_consume,
    .finish = presums_finish,
    .discard = presums_free,
};

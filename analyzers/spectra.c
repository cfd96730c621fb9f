/* analyzers/spectra.c: "ffn_spectra" and "hidden_spectra", eigenvalue spectra of activation
 * covariances and their rank measures (docs/metrics.md, "Spectra").
 *
 * For each array A (N x D: the FFN latent of block l, the input of W_2 after the nonlinearity, D =
 * d_ff; or the layer output h_l, D = d_model) the centered covariance C = A_c^T A_c / (N - 1) is
 * streamed batch by batch through analyzers/moments.h (shifted columns, gemm partial sums in
 * sp_real over at most 8192 rows, fp64 totals in backend memory). The totals of one stream's layers
 * are one backend allocation [n_layers, D, D] (sp_mom_batch): at the end each is centered in place
 * into its covariance, and ONE be->sym_eigvals call (fp64; LAPACK dsyevd on the CPU, cuSOLVER on
 * the GPU) decomposes the whole stream; only the eigenvalues come back, summarized by
 * analyzers/linalg.h:
 *   soft rank = exp(entropy of p) / D, hard rank = (sum lambda)^2 / sum lambda^2 / D, p = lambda/sum.
 * ffn_spectra also reports the effective dimension ratio EDR = 100 * mean over blocks of
 * (hard rank / soft rank), the default the metrics doc chose; the raw eigenvalues, traces, sums of
 * squares, N and D stay in the report so other definitions can be recomputed. With N < 10 D the
 * covariance has rank at most N - 1 and the estimates are capped: a warning is printed and the
 * summary flags it (n_below_10d). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyzers/linalg.h"
#include "analyzers/moments.h"
#include "analyzers/output.h"
#include "analyzers/ranks.h"

typedef enum { SPEC_FFN, SPEC_HIDDEN } spec_kind;

typedef struct {
    spec_kind kind;
    const char *name;
    int n_layers, n_streams, dim, max_rows; /* n_layers: arrays per stream */
    sp_rowops ro;
    sp_real *shifted;     /* backend [max_rows, dim] */
    sp_mom_cols *cols;    /* [n_streams * n_layers] */
    sp_mom_batch *batch;  /* [n_streams]: the layers' cross-products, freed as each stream finishes */
} spec_state;

static void spec_free(void *state)
{
    spec_state *s = state;
    if (!s)
        return;
    for (int i = 0; s->cols && i < s->n_streams * s->n_layers; i++)
        sp_mom_cols_free(&s->cols[i]);
    for (int k = 0; s->batch && k < s->n_streams; k++)
        sp_mom_batch_free(&s->batch[k]);
    if (s->shifted)
        s->ro.be->free(s->shifted);
    sp_rowops_free(&s->ro);
    free(s->cols);
    free(s->batch);
    free(s);
}

static sp_status spec_begin(const sp_analysis *a, void **state, spec_kind kind)
{
    spec_state *s = sp_calloc(1, sizeof *s, "spectra state");
    if (!s)
        return SP_ERR_NOMEM;
    *state = s;
    s->kind = kind;
    s->name = kind == SPEC_FFN ? "ffn_spectra" : "hidden_spectra";
    s->n_layers = kind == SPEC_FFN ? a->n_layers : a->n_layers + 1;
    s->n_streams = kind == SPEC_FFN ? 1 : a->n_streams;
    s->dim = kind == SPEC_FFN ? a->d_ff : a->d_model;
    s->max_rows = a->batch * a->seq_len;
    SP_TRY(sp_rowops_init(&s->ro, a->be, s->max_rows, s->dim));
    int n = s->n_streams * s->n_layers;
    s->shifted = a->be->alloc((size_t)s->max_rows * s->dim * sizeof(sp_real), "spectra shifted rows");
    s->cols = sp_calloc((size_t)n, sizeof *s->cols, "spectra sums");
    s->batch = sp_calloc((size_t)s->n_streams, sizeof *s->batch, "spectra cross-products");
    if (!s->shifted || !s->cols || !s->batch)
        return SP_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        SP_TRY(sp_mom_cols_init(&s->cols[i], &s->ro, s->dim));
    sp_analysis_share_shift(a, s->cols, n);
    for (int k = 0; k < s->n_streams; k++)
        SP_TRY(sp_mom_batch_init(&s->batch[k], a->be, s->n_layers, s->dim));
    return SP_OK;
}

static sp_status ffn_begin(const sp_analysis *a, void **state) { return spec_begin(a, state, SPEC_FFN); }
static sp_status hidden_begin(const sp_analysis *a, void **state) { return spec_begin(a, state, SPEC_HIDDEN); }

static sp_status spec_consume(const sp_analysis *a, void *state, const sp_act_batch *b)
{
    (void)a;
    spec_state *s = state;
    const int rows = sp_batch_rows(b);
    for (int k = 0; k < s->n_streams; k++)
        for (int l = 0; l < s->n_layers; l++) {
            const sp_real *x = s->kind == SPEC_FFN ? sp_batch_latent(b, l) : sp_batch_hidden(b, l, k);
            if (!x)
                return sp_error(SP_ERR_INTERNAL, "%s: the batch has no array for layer %d, stream %d", s->name, l, k);
            SP_TRY(sp_mom_cols_add(&s->cols[k * s->n_layers + l], x, rows, s->shifted));
            SP_TRY(sp_mom_cross_add(&s->batch[k].cross[l], s->shifted, s->shifted, rows));
        }
    return SP_OK;
}

/* Per-layer results of one stream. */
typedef struct {
    double *eig;                              /* [n_layers * dim], descending */
    double *trace, *sum_sq, *entropy, *soft, *hard; /* [n_layers] */
} spec_results;

/* Every layer's covariance of stream k, all eigenvalues in one batched call; the stream's
 * accumulators are freed as soon as the eigenvalues are back. */
static sp_status compute_stream(const sp_analysis *a, spec_state *s, int k, spec_results *res, int64_t *n_tokens)
{
    const int D = s->dim;
    sp_mom_cols *cols = s->cols + (size_t)k * s->n_layers;
    /* over MPI ranks: every rank's sums added up first (all the layers' totals are one allocation) */
    sp_status st = sp_analysis_join_cols(a, cols, s->n_layers);
    if (st == SP_OK)
        st = sp_analysis_sum_backend(a, s->batch[k].totals, (size_t)s->n_layers * D * D);
    if (st == SP_OK)
        st = sp_mom_batch_covariances(&s->batch[k], cols, s->name);
    if (st == SP_OK)
        st = sp_mom_batch_eigvals(&s->batch[k], res->eig);
    sp_mom_batch_free(&s->batch[k]);
    SP_TRY(st);
    *n_tokens = cols[0].n;
    for (int l = 0; l < s->n_layers; l++) {
        sp_rank_measures r = sp_linalg_rank_measures(D, res->eig + (size_t)l * D, D);
        res->trace[l] = r.trace;
        res->sum_sq[l] = r.sum_sq;
        res->entropy[l] = r.entropy;
        res->soft[l] = r.soft_rank;
        res->hard[l] = r.hard_rank;
    }
    return SP_OK;
}

static double mean_of(int n, const double *x)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    return sum / n;
}

static sp_status write_stream(const sp_analysis *a, const spec_state *s, int k, const spec_results *res,
                              int64_t n_tokens)
{
    const int L = s->n_layers, D = s->dim;
    const char *what = s->kind == SPEC_FFN ? "FFN latent (input of W_2) of block l" : "layer output h_l";
    const char *desc = s->kind == SPEC_FFN ? "[block]" : "[layer]";
    const char *desc2 = s->kind == SPEC_FFN ? "[block, eigenvalue]" : "[layer, eigenvalue]";
    char text[256];
    const int64_t per_layer[1] = {L}, eig_shape[2] = {L, D}, one[1] = {1};
    snprintf(text, sizeof text, "eigenvalues of the centered covariance of the %s, descending (fp64)", what);
    SP_TRY(sp_out_array(a, s->name, "eigenvalues", k, 2, eig_shape, res->eig, "activation^2", desc2, text));
    SP_TRY(sp_out_array(a, s->name, "trace", k, 1, per_layer, res->trace, "activation^2", desc,
                        "sum of the eigenvalues (negatives from round-off clipped to 0)"));
    SP_TRY(sp_out_array(a, s->name, "sum_sq", k, 1, per_layer, res->sum_sq, "activation^4", desc,
                        "sum of the squared eigenvalues"));
    SP_TRY(sp_out_array(a, s->name, "entropy", k, 1, per_layer, res->entropy, "nats", desc,
                        "-sum p ln p, p = eigenvalue / trace"));
    SP_TRY(sp_out_array(a, s->name, "soft_rank", k, 1, per_layer, res->soft, "1", desc,
                        "exp(entropy) / D (Shannon effective rank, normalized)"));
    SP_TRY(sp_out_array(a, s->name, "hard_rank", k, 1, per_layer, res->hard, "1", desc,
                        "trace^2 / sum_sq / D (participation ratio, normalized)"));
    double n_d[2] = {(double)n_tokens, D};
    SP_TRY(sp_out_array(a, s->name, "n_tokens", k, 1, one, &n_d[0], "tokens", "[1]", "N, the tokens in the covariance"));
    SP_TRY(sp_out_array(a, s->name, "dim", k, 1, one, &n_d[1], "1", "[1]", "D, the side of the covariance"));
    const int below = n_tokens < 10 * (int64_t)D;
    if (below && n_tokens - 1 < (int64_t)D)
        fprintf(stderr, "analyze: warning: %s: N = %lld tokens: the covariance has rank at most N - 1 < D = %lld, so "
                        "the normalized ranks cannot exceed (N - 1) / D = %.3g\n",
                s->name, (long long)n_tokens, (long long)D, (double)(n_tokens - 1) / D);
    else if (below) /* a sample covariance spreads its eigenvalues (Marchenko-Pastur): not a cap, a bias */
        fprintf(stderr, "analyze: warning: %s: N = %lld tokens is below 10 D = %lld: with few samples per dimension "
                        "the eigenvalues spread and the rank estimates are biased low\n",
                s->name, (long long)n_tokens, 10 * (long long)D);
    SP_TRY(sp_out_scalar(a, s->name, "soft_rank_mean", k, mean_of(L, res->soft)));
    SP_TRY(sp_out_scalar(a, s->name, "hard_rank_mean", k, mean_of(L, res->hard)));
    SP_TRY(sp_out_scalar(a, s->name, "soft_rank_last", k, res->soft[L - 1]));
    SP_TRY(sp_out_scalar(a, s->name, "hard_rank_last", k, res->hard[L - 1]));
    SP_TRY(sp_out_scalar(a, s->name, "n_tokens", k, (double)n_tokens));
    SP_TRY(sp_out_scalar(a, s->name, "dim", k, D));
    SP_TRY(sp_out_scalar(a, s->name, "n_below_10d", k, below));
    if (s->kind != SPEC_FFN)
        return SP_OK;
    double ratio = 0;
    for (int l = 0; l < L; l++)
        ratio += res->hard[l] / res->soft[l];
    return sp_out_scalar(a, s->name, "edr", k, 100 * ratio / L);
}

static sp_status spec_finish(const sp_analysis *a, void *state)
{
    spec_state *s = state;
    const size_t L = (size_t)s->n_layers, D = (size_t)s->dim;
    double *buf = sp_malloc((L * D + 5 * L) * sizeof *buf, "spectra results");
    sp_status st = buf ? SP_OK : SP_ERR_NOMEM;
    if (st == SP_OK && L == 0)
        st = sp_error(SP_ERR_INPUT, "%s: the input has no layers", s->name);
    spec_results res = {0};
    if (st == SP_OK)
        res = (spec_results){.eig = buf, .trace = buf + L * D, .sum_sq = buf + L * D + L,
                             .entropy = buf + L * D + 2 * L, .soft = buf + L * D + 3 * L, .hard = buf + L * D + 4 * L};
    for (int k = 0; k < s->n_streams && st == SP_OK; k++) {
        int64_t n_tokens = 0;
        st = compute_stream(a, s, k, &res, &n_tokens);
        if (st == SP_OK)
            st = write_stream(a, s, k, &res, n_tokens);
    }
    free(buf);
    spec_free(s);
    return st;
}

const sp_analyzer sp_analyzer_ffn_spectra = {
    .name = "ffn_spectra",
    .description = "FFN-latent covariance spectra: soft and hard rank per block, effective dimension ratio",
    .needs = SP_NEEDS_LATENTS,
    .begin = ffn_begin,
    .consume = spec_consume,
    .finish = spec_finish,
    .discard = spec_free,
};

const sp_analyzer sp_analyzer_hidden_spectra = {
    .name = "hidden_spectra",
    .description = "layer-output covariance spectra: soft and hard rank per layer",
    .needs = SP_NEEDS_ACTIVATIONS,
    .begin = hidden_begin,
    .consume = spec_consume,
    .finish = spec_finish,
    .discard = spec_free,
};

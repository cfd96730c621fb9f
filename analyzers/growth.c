/* analyzers/growth.c: "growth", the size of the hidden states layer by layer (docs/metrics.md).
 *
 * Per layer output h_l (l = 0..L) over the evaluation tokens:
 *   rms              sqrt(mean over tokens and features of h^2)
 *   mean_token_norm  mean over tokens of ||h[t]||_2
 *   feature_variance mean over tokens of the variance of h[t]'s d entries (biased, as LayerNorm)
 *   top_abs          the three largest |h| entries (massive activations, Sun et al. 2024)
 *   median_abs       the median |h| entry, and top1 / median
 *   token_norm_max_over_median  the largest token norm ||h[t]|| over the median token norm, and the
 *                    position in its sequence of that token: one token far above the rest (a sink
 *                    at position 0 with a massive activation) dominates every statistic pooled over
 *                    tokens, so the summary counts the layers where it is over DOMINANT_RATIO
 * Sums of squares run on the backend (be->sumsq, in double), per-token means and variances come
 * from the backend's LayerNorm statistics (analyzers/rowops.h). The top |h| entries need every entry:
 * each batch's layer is downloaded and scanned once. The median is exact over a deterministic
 * sample of at most GROWTH_SAMPLE entries per layer: every s-th entry in row-major order, with s
 * the smallest stride that keeps the sample within the cap and shares no factor with d (so every
 * feature column is visited); it is the exact median whenever the layer has no more entries. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/linalg.h"
#include "analyzers/output.h"
#include "analyzers/ranks.h"
#include "analyzers/rowops.h"

#define NAME "growth"
#define GROWTH_SAMPLE 65536
#define N_TOP 3
/* A token whose norm is this many times the median token's dominates sums over tokens. */
#define DOMINANT_RATIO 10.0

typedef struct {
    double sumsq, norm_sum, var_sum;
    double top[N_TOP];   /* descending */
    double *sample;      /* [GROWTH_SAMPLE] */
    int n_sample;
    double *token_norms; /* [evaluation tokens] ||h[t]||, for their median */
    double max_norm;
    int max_position;    /* position in its sequence of the token of max_norm */
} layer_stats;

typedef struct {
    int n_h, n_streams, d, max_rows;
    int64_t stride, n_tokens;
    sp_rowops ro;
    layer_stats *layers;  /* [n_streams * n_h] */
    sp_real *host;        /* [max_rows * d] */
    double *mean, *var;   /* [max_rows] */
} growth_state;

static void growth_free(void *state)
{
    growth_state *s = state;
    if (!s)
        return;
    for (int i = 0; s->layers && i < s->n_streams * s->n_h; i++) {
        free(s->layers[i].sample);
        free(s->layers[i].token_norms);
    }
    sp_rowops_free(&s->ro);
    free(s->layers);
    free(s->host);
    free(s->mean);
    free(s->var);
    free(s);
}

static int64_t gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static sp_status growth_begin(const sp_analysis *a, void **state)
{
    growth_state *s = sp_calloc(1, sizeof *s, "growth state");
    if (!s)
        return SP_ERR_NOMEM;
    *state = s;
    s->n_h = a->n_layers + 1;
    s->n_streams = a->n_streams;
    s->d = a->d_model;
    s->max_rows = a->batch * a->seq_len;
    int64_t entries = (int64_t)a->n_seqs * (a->seq_len - a->skip_positions) * a->d_model;
    s->stride = (entries + GROWTH_SAMPLE - 1) / GROWTH_SAMPLE;
    while (s->stride > 1 && gcd(s->stride, s->d) != 1)
        s->stride++;
    SP_TRY(sp_rowops_init(&s->ro, a->be, s->max_rows, s->d));
    s->layers = sp_calloc((size_t)s->n_streams * s->n_h, sizeof *s->layers, "growth statistics");
    s->host = sp_malloc((size_t)s->max_rows * s->d * sizeof *s->host, "growth staging");
    s->mean = sp_malloc((size_t)s->max_rows * sizeof *s->mean, "growth row statistics");
    s->var = sp_malloc((size_t)s->max_rows * sizeof *s->var, "growth row statistics");
    if (!s->layers || !s->host || !s->mean || !s->var)
        return SP_ERR_NOMEM;
    for (int i = 0; i < s->n_streams * s->n_h; i++) {
        if (!(s->layers[i].sample = sp_malloc(GROWTH_SAMPLE * sizeof(double), "growth median sample")) ||
            !(s->layers[i].token_norms = sp_malloc((size_t)a->n_seqs * a->seq_len * sizeof(double), "token norms")))
            return SP_ERR_NOMEM;
        for (int k = 0; k < N_TOP; k++)
            s->layers[i].top[k] = -1;
    }
    return SP_OK;
}

static void insert_top(double *top, double v)
{
    if (v <= top[N_TOP - 1])
        return;
    int k = N_TOP - 1;
    while (k > 0 && top[k - 1] < v) {
        top[k] = top[k - 1];
        k--;
    }
    top[k] = v;
}

/* The host scan of one batch of one layer: top |h| and the median sample. */
static void scan_entries(const growth_state *s, layer_stats *ls, size_t n, int64_t first_entry)
{
    double top[N_TOP];
    for (int k = 0; k < N_TOP; k++)
        top[k] = ls->top[k];
    for (size_t e = 0; e < n; e++) {
        double v = fabs((double)s->host[e]);
        if (v > top[N_TOP - 1])
            insert_top(top, v);
    }
    for (int k = 0; k < N_TOP; k++)
        ls->top[k] = top[k];
    int64_t skip = (s->stride - first_entry % s->stride) % s->stride;
    for (size_t e = (size_t)skip; e < n && ls->n_sample < GROWTH_SAMPLE; e += (size_t)s->stride)
        ls->sample[ls->n_sample++] = fabs((double)s->host[e]);
}

static sp_status growth_consume(const sp_analysis *a, void *state, const sp_act_batch *b)
{
    growth_state *s = state;
    const int rows = sp_batch_rows(b), d = s->d;
    const size_t n = (size_t)rows * d;
    const int64_t first_entry = (int64_t)sp_batch_first_seq(b) * sp_batch_seq_len(b) * d;
    for (int k = 0; k < s->n_streams; k++)
        for (int l = 0; l < s->n_h; l++) {
            const sp_real *x = sp_batch_hidden(b, l, k);
            layer_stats *ls = &s->layers[k * s->n_h + l];
            ls->sumsq += a->be->sumsq(n, x);
            SP_TRY(sp_rowops_moments(&s->ro, rows, d, x, s->mean, s->var));
            for (int r = 0; r < rows; r++) {
                const double token_norm = sqrt(d * (s->var[r] + s->mean[r] * s->mean[r]));
                ls->var_sum += s->var[r];
                ls->norm_sum += token_norm;
                ls->token_norms[s->n_tokens + r] = token_norm;
                if (token_norm > ls->max_norm) {
                    ls->max_norm = token_norm;
                    /* batches hold whole sequences, from position skip_positions on */
                    ls->max_position = r % sp_batch_seq_len(b) + a->skip_positions;
                }
            }
            a->be->download(s->host, x, n * sizeof *s->host);
            scan_entries(s, ls, n, first_entry);
        }
    s->n_tokens += rows;
    return SP_OK;
}

static sp_status write_stream(const sp_analysis *a, growth_state *s, int k, double *buf)
{
    const int n_h = s->n_h;
    double *rms = buf, *norm = rms + n_h, *var = norm + n_h, *top = var + n_h, *median = top + N_TOP * n_h;
    double *ratio = median + n_h, *token_ratio = ratio + n_h, *token_position = token_ratio + n_h;
    const double n_tok = (double)s->n_tokens;
    double ratio_max = -INFINITY, token_ratio_max = -INFINITY;
    int ratio_max_layer = 0, token_ratio_max_layer = 0, n_dominated = 0;
    for (int l = 0; l < n_h; l++) {
        layer_stats *ls = &s->layers[k * n_h + l];
        rms[l] = sqrt(ls->sumsq / (n_tok * s->d));
        norm[l] = ls->norm_sum / n_tok;
        var[l] = ls->var_sum / n_tok;
        for (int q = 0; q < N_TOP; q++)
            top[l * N_TOP + q] = ls->top[q] >= 0 ? ls->top[q] : NAN;
        median[l] = sp_linalg_median(ls->n_sample, ls->sample);
        ratio[l] = top[l * N_TOP] / median[l];
        if (ratio[l] > ratio_max) {
            ratio_max = ratio[l];
            ratio_max_layer = l;
        }
        token_ratio[l] = ls->max_norm / sp_linalg_median((int)s->n_tokens, ls->token_norms);
        token_position[l] = ls->max_position;
        n_dominated += token_ratio[l] > DOMINANT_RATIO;
        if (token_ratio[l] > token_ratio_max) {
            token_ratio_max = token_ratio[l];
            token_ratio_max_layer = l;
        }
    }
    const int64_t per_layer[1] = {n_h}, tops[2] = {n_h, N_TOP};
    SP_TRY(sp_out_array(a, NAME, "rms", k, 1, per_layer, rms, "activation", "[layer]",
                        "sqrt(mean over tokens and features of h_l^2), layers 0..L"));
    SP_TRY(sp_out_array(a, NAME, "mean_token_norm", k, 1, per_layer, norm, "activation", "[layer]",
                        "mean over tokens of the L2 norm of h_l[t]"));
    SP_TRY(sp_out_array(a, NAME, "feature_variance", k, 1, per_layer, var, "activation^2", "[layer]",
                        "mean over tokens of the variance of h_l[t] across its d features (biased)"));
    SP_TRY(sp_out_array(a, NAME, "top_abs", k, 2, tops, top, "activation", "[layer, rank]",
                        "the three largest |h_l| entries over all tokens and features, descending"));
    SP_TRY(sp_out_array(a, NAME, "median_abs", k, 1, per_layer, median, "activation", "[layer]",
                        "median |h_l| entry (exact over a strided sample of at most 65536 entries per layer)"));
    SP_TRY(sp_out_array(a, NAME, "top1_over_median", k, 1, per_layer, ratio, "1", "[layer]",
                        "largest |h_l| entry over the median |h_l| entry (massive activations)"));
    SP_TRY(sp_out_array(a, NAME, "token_norm_max_over_median", k, 1, per_layer, token_ratio, "1", "[layer]",
                        "largest token norm ||h_l[t]|| over the median token norm (one token dominating)"));
    SP_TRY(sp_out_array(a, NAME, "token_norm_max_position", k, 1, per_layer, token_position, "position",
                        "[layer]", "position in its sequence (0 = first) of the token of the largest norm"));
    SP_TRY(sp_out_scalar(a, NAME, "rms_first", k, rms[0]));
    SP_TRY(sp_out_scalar(a, NAME, "rms_last", k, rms[n_h - 1]));
    SP_TRY(sp_out_scalar(a, NAME, "rms_last_over_first", k, rms[n_h - 1] / rms[0]));
    SP_TRY(sp_out_scalar(a, NAME, "mean_token_norm_last", k, norm[n_h - 1]));
    SP_TRY(sp_out_scalar(a, NAME, "top1_over_median_max", k, ratio_max));
    SP_TRY(sp_out_scalar(a, NAME, "top1_over_median_max_layer", k, ratio_max_layer));
    SP_TRY(sp_out_scalar(a, NAME, "token_norm_max_over_median_max", k, token_ratio_max));
    SP_TRY(sp_out_scalar(a, NAME, "token_norm_max_position", k, token_position[token_ratio_max_layer]));
    /* the layers where one token's norm is over DOMINANT_RATIO times the median token's */
    return sp_out_scalar(a, NAME, "dominant_token_layers", k, n_dominated);
}

/* v[0..n) of every rank, concatenated in rank order, in place of *v (a buffer of sp_malloc). */
static sp_status gather_into(const sp_analysis *a, double **v, int64_t n, int64_t total)
{
    double *all = sp_malloc((size_t)(total > 0 ? total : 1) * sizeof *all, "growth gathered values");
    if (!all)
        return SP_ERR_NOMEM;
    sp_status st = sp_analysis_gather(a, *v, (size_t)n, all, (size_t)total);
    free(*v);
    *v = all;
    return st;
}

/* Over MPI ranks: one layer's statistics of every rank's share, as one process would hold them
 * (the shares are consecutive, rank 0's first: samples and token norms concatenate in order, and
 * the first largest token norm is the first rank's that holds it). */
static sp_status join_layer(const sp_analysis *a, layer_stats *ls, int64_t n_tokens, int64_t all_tokens)
{
    const int ranks = sp_analysis_n_ranks(a);
    double sums[3] = {ls->sumsq, ls->norm_sum, ls->var_sum};
    SP_TRY(sp_analysis_sum(a, sums, 3));
    ls->sumsq = sums[0];
    ls->norm_sum = sums[1];
    ls->var_sum = sums[2];
    double mine[N_TOP + 2], *every = sp_malloc((size_t)ranks * (N_TOP + 2) * sizeof *every, "growth maxima");
    if (!every)
        return SP_ERR_NOMEM;
    memcpy(mine, ls->top, sizeof ls->top);
    mine[N_TOP] = ls->max_norm;
    mine[N_TOP + 1] = ls->max_position;
    sp_status st = sp_analysis_gather(a, mine, N_TOP + 2, every, (size_t)ranks * (N_TOP + 2));
    for (int q = 0; q < N_TOP; q++) /* as begin() leaves them, then every rank's in order */
        ls->top[q] = -1;
    ls->max_norm = 0;
    ls->max_position = 0;
    for (int r = 0; r < ranks && st == SP_OK; r++) {
        const double *theirs = every + (size_t)r * (N_TOP + 2);
        for (int q = 0; q < N_TOP; q++)
            insert_top(ls->top, theirs[q]);
        if (theirs[N_TOP] > ls->max_norm) {
            ls->max_norm = theirs[N_TOP];
            ls->max_position = (int)theirs[N_TOP + 1];
        }
    }
    free(every);
    SP_TRY(st);
    int64_t n_sample = ls->n_sample;
    SP_TRY(sp_analysis_sum_count(a, &n_sample));
    SP_TRY(gather_into(a, &ls->sample, ls->n_sample, n_sample));
    ls->n_sample = (int)n_sample;
    return gather_into(a, &ls->token_norms, n_tokens, all_tokens);
}

static sp_status growth_finish(const sp_analysis *a, void *state)
{
    growth_state *s = state;
    double *buf = sp_malloc((size_t)(7 + N_TOP) * s->n_h * sizeof *buf, "growth results");
    sp_status st = buf ? SP_OK : SP_ERR_NOMEM;
    if (st == SP_OK && sp_analysis_n_ranks(a) > 1) {
        int64_t all_tokens = s->n_tokens;
        st = sp_analysis_sum_count(a, &all_tokens);
        for (int i = 0; i < s->n_streams * s->n_h && st == SP_OK; i++)
            st = join_layer(a, &s->layers[i], s->n_tokens, all_tokens);
        s->n_tokens = all_tokens;
    }
    for (int k = 0; k < s->n_streams && st == SP_OK; k++)
        st = write_stream(a, s, k, buf);
    free(buf);
    growth_free(s);
    return st;
}

const sp_analyzer sp_analyzer_growth = {
    .name = NAME,
    .description = "hidden-state growth: RMS, token norm, feature variance, massive activations per layer",
    .needs = SP_NEEDS_ACTIVATIONS,
    .begin = growth_begin,
    .consume = growth_consume,
    .finish = growth_finish,
    .discard = growth_free,
};

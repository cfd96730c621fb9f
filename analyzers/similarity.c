/* analyzers/similarity.c: "similarity", cosine similarity between layer outputs (docs/metrics.md).
 *
 * For every token t and pair of layers i, j in 0..L the rows are normalized to unit length u, and
 *   cos = 1 - ||u_i - u_j||^2 / 2,   angle / pi = 2 asin(||u_i - u_j|| / 2) / pi
 * (the difference form keeps small angles accurate, where arccos(cos) is ill-conditioned). Row
 * norms come from the backend's normalization op (analyzers/rowops.h), so only one number per token
 * and pair reaches the host. Sums over tokens stream batch by batch; a zero row has cosine 0 (angle
 * 1/2) with anything.
 *
 * Options: last_token keeps the last token of each sequence only; center subtracts each layer's
 * mean vector (over the same tokens) first. The mean is only known after a whole pass, and a
 * per-token cosine is not a function of streamed sums, so centering takes two passes: the shared
 * pass accumulates the means, and finish() replays the evaluation set for the cosines. */
#include <math.h>
#include <stdlib.h>

#include "analyzers/dev_bufs.h"
#include "analyzers/moments.h"
#include "analyzers/output.h"
#include "analyzers/ranks.h"

#define NAME "similarity"
#define PI 3.14159265358979323846

typedef struct {
    int n_h, n_streams, d, max_rows;  /* n_h = L + 1 layer outputs */
    int center, last_token;
    sp_rowops ro;
    sp_real **unit;       /* [n_h] backend [max_rows, d]: unit rows of the current stream */
    sp_real *diff;        /* backend [max_rows, d] */
    sp_real *picked;      /* backend [max_rows, d]: selected and/or centered rows */
    double *sq;           /* host [n_h * max_rows]: ||row||^2 before normalization */
    double *dsq;          /* host [max_rows] */
    double *cos_sum, *ang_sum; /* [n_streams][n_h][n_h], sums over tokens (upper triangle) */
    double *nonzero;      /* [n_streams][n_h]: tokens whose row is not zero */
    int64_t n_tokens;
    sp_mom_cols *cols;    /* center: [n_streams * n_h] column sums of the first pass */
    sp_real **mean;       /* center: [n_streams * n_h] backend mean vectors for the second pass */
} sim_state;

static void sim_free(void *state)
{
    sim_state *s = state;
    if (!s)
        return;
    const sp_backend *be = s->ro.be;
    for (int i = 0; s->cols && i < s->n_streams * s->n_h; i++)
        sp_mom_cols_free(&s->cols[i]);
    sp_dev_bufs_free(be, s->unit, s->n_h);
    sp_dev_bufs_free(be, s->mean, s->n_streams * s->n_h);
    sp_dev_bufs_release(be, (sp_real *[]){s->diff, s->picked}, 2);
    sp_rowops_free(&s->ro);
    free(s->cols);
    free(s->sq);
    free(s->dsq);
    free(s->cos_sum);
    free(s->ang_sum);
    free(s->nonzero);
    free(s);
}

static sp_status sim_begin(const sp_analysis *a, void **state)
{
    sim_state *s = sp_calloc(1, sizeof *s, "similarity state");
    if (!s)
        return SP_ERR_NOMEM;
    *state = s;
    s->n_h = a->n_layers + 1;
    s->n_streams = a->n_streams;
    s->d = a->d_model;
    s->center = a->opts->center;
    s->last_token = a->opts->last_token;
    s->max_rows = s->last_token ? a->batch : a->batch * a->seq_len;
    const size_t cells = (size_t)s->max_rows * (size_t)s->d * sizeof(sp_real);
    const size_t n_pairs = (size_t)s->n_streams * s->n_h * s->n_h;
    SP_TRY(sp_rowops_init(&s->ro, a->be, s->max_rows, s->d));
    s->unit = sp_dev_bufs_alloc(a->be, s->n_h, cells, "similarity unit rows");
    s->sq = sp_malloc((size_t)s->n_h * s->max_rows * sizeof *s->sq, "similarity norms");
    s->dsq = sp_malloc((size_t)s->max_rows * sizeof *s->dsq, "similarity norms");
    s->cos_sum = sp_calloc(n_pairs, sizeof *s->cos_sum, "similarity sums");
    s->ang_sum = sp_calloc(n_pairs, sizeof *s->ang_sum, "similarity sums");
    s->nonzero = sp_calloc((size_t)s->n_streams * s->n_h, sizeof *s->nonzero, "similarity sums");
    s->diff = a->be->alloc(cells, "similarity differences");
    s->picked = a->be->alloc(cells, "similarity rows");
    if (!s->unit || !s->sq || !s->dsq || !s->cos_sum || !s->ang_sum || !s->nonzero || !s->diff || !s->picked)
        return SP_ERR_NOMEM;
    if (s->center) {
        int n = s->n_streams * s->n_h;
        s->cols = sp_calloc((size_t)n, sizeof *s->cols, "similarity means");
        s->mean = sp_dev_bufs_alloc(a->be, n, (size_t)s->d * sizeof(sp_real), "similarity means");
        if (!s->cols || !s->mean)
            return SP_ERR_NOMEM;
        for (int i = 0; i < n; i++)
            SP_TRY(sp_mom_cols_init(&s->cols[i], &s->ro, s->d));
        sp_analysis_share_shift(a, s->cols, n);
    }
    return SP_OK;
}

/* The rows of layer l, stream k that the statistics use: all, or the last token of each sequence
 * (copied into s->picked). *rows gets their count. */
static const sp_real *pick_rows(sim_state *s, const sp_analysis *a, const sp_act_batch *b, int l, int k, int *rows)
{
    const sp_real *x = sp_batch_hidden(b, l, k);
    if (!s->last_token) {
        *rows = sp_batch_rows(b);
        return x;
    }
    const int T = sp_batch_seq_len(b), n_seq = sp_batch_rows(b) / T;
    for (int q = 0; q < n_seq; q++)
        a->be->copy(s->picked + (size_t)q * s->d, x + ((size_t)q * T + T - 1) * s->d, (size_t)s->d * sizeof *x);
    *rows = n_seq;
    return s->picked;
}

/* Adds the per-token cosines and angles of every pair of layers of stream k. */
static sp_status add_pairs(sim_state *s, const sp_backend *be, int k, int rows)
{
    const size_t n = (size_t)rows * s->d;
    double *cos_sum = s->cos_sum + (size_t)k * s->n_h * s->n_h, *ang_sum = s->ang_sum + (size_t)k * s->n_h * s->n_h;
    for (int i = 0; i < s->n_h; i++) {
        const double *sq_i = s->sq + (size_t)i * s->max_rows;
        for (int t = 0; t < rows; t++)
            s->nonzero[k * s->n_h + i] += sq_i[t] > 0;
        for (int j = i + 1; j < s->n_h; j++) {
            const double *sq_j = s->sq + (size_t)j * s->max_rows;
            be->copy(s->diff, s->unit[i], n * sizeof *s->diff);
            be->axpby(n, (sp_real)-1, s->unit[j], (sp_real)1, s->diff);
            SP_TRY(sp_rowops_sqnorms(&s->ro, rows, s->d, s->diff, s->dsq));
            double c_sum = 0, a_sum = 0;
            for (int t = 0; t < rows; t++) {
                if (sq_i[t] == 0 || sq_j[t] == 0) {
                    a_sum += 0.5;
                    continue;
                }
                double dist = sqrt(s->dsq[t]);
                c_sum += 1 - s->dsq[t] / 2;
                a_sum += 2 * asin(dist < 2 ? dist / 2 : 1) / PI;
            }
            cos_sum[i * s->n_h + j] += c_sum;
            ang_sum[i * s->n_h + j] += a_sum;
        }
    }
    return SP_OK;
}

/* The cosine statistics of one batch; center: subtract the mean vectors first. */
static sp_status add_cosines(const sp_analysis *a, void *state, const sp_act_batch *b)
{
    sim_state *s = state;
    int rows = 0;
    for (int k = 0; k < s->n_streams; k++) {
        for (int l = 0; l < s->n_h; l++) {
            const sp_real *x = pick_rows(s, a, b, l, k, &rows);
            if (s->center) {
                sp_rowops_sub_vec(&s->ro, rows, s->d, x, s->mean[k * s->n_h + l], s->picked);
                x = s->picked;
            }
            SP_TRY(sp_rowops_unit(&s->ro, rows, s->d, x, s->unit[l], s->sq + (size_t)l * s->max_rows));
        }
        SP_TRY(add_pairs(s, a->be, k, rows));
    }
    s->n_tokens += rows;
    return SP_OK;
}

static sp_status sim_consume(const sp_analysis *a, void *state, const sp_act_batch *b)
{
    sim_state *s = state;
    if (!s->center)
        return add_cosines(a, state, b);
    for (int k = 0; k < s->n_streams; k++)
        for (int l = 0; l < s->n_h; l++) {
            int rows = 0;
            const sp_real *x = pick_rows(s, a, b, l, k, &rows);
            /* the shifted rows are not needed: s->diff is scratch here */
            SP_TRY(sp_mom_cols_add(&s->cols[k * s->n_h + l], x, rows, s->diff));
        }
    return SP_OK;
}

/* center: the mean vectors from the first pass, onto the backend, then the second pass. */
static sp_status second_pass(const sp_analysis *a, sim_state *s)
{
    double *mean = sp_malloc((size_t)s->d * sizeof *mean, "similarity means");
    sp_real *host = sp_malloc((size_t)s->d * sizeof *host, "similarity means");
    sp_status st = mean && host ? SP_OK : SP_ERR_NOMEM;
    if (st == SP_OK)
        st = sp_analysis_join_cols(a, s->cols, s->n_streams * s->n_h);
    for (int i = 0; i < s->n_streams * s->n_h && st == SP_OK; i++) {
        if ((st = sp_mom_cols_flush(&s->cols[i])) != SP_OK)
            break;
        sp_mom_cols_mean(&s->cols[i], mean);
        for (int j = 0; j < s->d; j++)
            host[j] = (sp_real)mean[j];
        a->be->upload(s->mean[i], host, (size_t)s->d * sizeof *host);
    }
    free(mean);
    free(host);
    SP_TRY(st);
    return sp_analysis_replay(a, add_cosines, s);
}

/* Mean and population standard deviation over i of m[i][i + k], k = 1..n-1, of an n x n matrix. */
static void by_distance(int n, const double *m, double *mean, double *std)
{
    for (int k = 1; k < n; k++) {
        double sum = 0, sum_sq = 0;
        for (int i = 0; i + k < n; i++) {
            double v = m[i * n + i + k];
            sum += v;
            sum_sq += v * v;
        }
        int count = n - k;
        mean[k - 1] = sum / count;
        double var = sum_sq / count - mean[k - 1] * mean[k - 1];
        if (std)
            std[k - 1] = var > 0 ? sqrt(var) : 0;
    }
}

/* Full symmetric matrices of stream k from the sums. */
static void matrices(const sim_state *s, int k, double *cosine, double *angle)
{
    const int n = s->n_h;
    const double inv = s->n_tokens ? 1.0 / (double)s->n_tokens : NAN;
    for (int i = 0; i < n; i++) {
        cosine[i * n + i] = s->nonzero[k * n + i] * inv;
        angle[i * n + i] = 0;
        for (int j = i + 1; j < n; j++) {
            size_t at = (size_t)k * n * n + (size_t)i * n + j;
            cosine[i * n + j] = cosine[j * n + i] = s->cos_sum[at] * inv;
            angle[i * n + j] = angle[j * n + i] = s->ang_sum[at] * inv;
        }
    }
}

static sp_status write_stream(const sp_analysis *a, const sim_state *s, int k, double *buf)
{
    const int n = s->n_h, L = n - 1;
    double *cosine = buf, *angle = buf + n * n, *s_mean = angle + n * n, *s_std = s_mean + L, *a_mean = s_std + L;
    double *bi = a_mean + L;
    matrices(s, k, cosine, angle);
    by_distance(n, cosine, s_mean, s_std);
    by_distance(n, angle, a_mean, NULL);
    for (int l = 0; l < L; l++)
        bi[l] = 1 - cosine[l * n + l + 1];

    const int64_t sq[2] = {n, n}, per_block[1] = {L};
    SP_TRY(sp_out_array(a, NAME, "cosine", k, 2, sq, cosine, "cosine", "[layer, layer]",
                        "M_ij = mean over tokens of cos(h_i, h_j), layers 0..L (h_0 the block-0 input)"));
    SP_TRY(sp_out_array(a, NAME, "angular_distance", k, 2, sq, angle, "1 (radians / pi)", "[layer, layer]",
                        "A_ij = mean over tokens of arccos(cos(h_i, h_j)) / pi; A[l, l + n] is the distance of "
                        "layer l to layer l + n"));
    SP_TRY(sp_out_array(a, NAME, "cosine_by_distance", k, 1, per_block, s_mean, "cosine", "[distance]",
                        "S(k) = mean over i of M[i, i + k]; entry k - 1 is distance k = 1..L"));
    SP_TRY(sp_out_array(a, NAME, "cosine_by_distance_std", k, 1, per_block, s_std, "cosine", "[distance]",
                        "population standard deviation over i of M[i, i + k]; entry k - 1 is distance k"));
    SP_TRY(sp_out_array(a, NAME, "angular_by_distance", k, 1, per_block, a_mean, "1 (radians / pi)", "[distance]",
                        "mean over i of A[i, i + k]; entry k - 1 is distance k = 1..L"));
    SP_TRY(sp_out_array(a, NAME, "block_influence", k, 1, per_block, bi, "1", "[block]",
                        "BI_l = 1 - mean over tokens of cos(h_l, h_{l+1}), block l = 0..L-1 (ShortGPT)"));

    /* the deeper half of the blocks: l = L - max(1, L/2) .. L-1 */
    const int half = L / 2 > 0 ? L / 2 : 1;
    double deep = 0, all = 0, ang_adj = 0, bi_min = INFINITY;
    int bi_min_layer = 0;
    for (int l = 0; l < L; l++) {
        all += cosine[l * n + l + 1];
        ang_adj += angle[l * n + l + 1];
        if (l >= L - half)
            deep += cosine[l * n + l + 1];
        if (bi[l] < bi_min) {
            bi_min = bi[l];
            bi_min_layer = l;
        }
    }
    SP_TRY(sp_out_scalar(a, NAME, "tokens", k, (double)s->n_tokens));
    SP_TRY(sp_out_scalar(a, NAME, "adjacent_cosine_mean", k, all / L));
    SP_TRY(sp_out_scalar(a, NAME, "adjacent_cosine_deep_half", k, deep / half));
    SP_TRY(sp_out_scalar(a, NAME, "angular_adjacent_mean", k, ang_adj / L));
    SP_TRY(sp_out_scalar(a, NAME, "s1", k, s_mean[0]));
    SP_TRY(sp_out_scalar(a, NAME, "s_half", k, s_mean[half - 1]));
    SP_TRY(sp_out_scalar(a, NAME, "block_influence_min", k, bi_min));
    return sp_out_scalar(a, NAME, "block_influence_min_block", k, bi_min_layer);
}

static sp_status sim_finish(const sp_analysis *a, void *state)
{
    sim_state *s = state;
    const int n = s->n_h;
    double *buf = NULL;
    sp_status st = s->center ? second_pass(a, s) : SP_OK;
    const size_t n_pairs = (size_t)s->n_streams * n * n, n_layers = (size_t)s->n_streams * n;
    if (st == SP_OK && (st = sp_analysis_sum(a, s->cos_sum, n_pairs)) == SP_OK &&
        (st = sp_analysis_sum(a, s->ang_sum, n_pairs)) == SP_OK && (st = sp_analysis_sum(a, s->nonzero, n_layers)) == SP_OK)
        st = sp_analysis_sum_count(a, &s->n_tokens);
    if (st == SP_OK && n < 2)
        st = sp_error(SP_ERR_INPUT, "similarity: the input has %d layer output(s) (expected at least 2)", n);
    if (st == SP_OK && !(buf = sp_malloc((2 * (size_t)n * n + 4 * (size_t)n) * sizeof *buf, "similarity results")))
        st = SP_ERR_NOMEM;
    for (int k = 0; k < s->n_streams && st == SP_OK; k++)
        st = write_stream(a, s, k, buf);
    free(buf);
    sim_free(s);
    return st;
}

const sp_analyzer sp_analyzer_similarity = {
    .name = NAME,
    .description = "cosine similarity between layer outputs: matrix, by distance, block influence, angular distance",
    .needs = SP_NEEDS_ACTIVATIONS,
    .begin = sim_begin,
    .consume = sim_consume,
    .finish = sim_finish,
    .discard = sim_free,
};

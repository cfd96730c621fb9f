/* analyzers/attention.c: "attention", what every head's attention probabilities look like over the
 * evaluation set (docs/metrics.md): entropy collapse (Zhai et al. 2023), attention sinks (Xiao et
 * al. 2023), how far back heads look, how large their scores grow, and how alike a block's heads
 * attend.
 *
 * Per block l and query head h, over the evaluation queries i (positions from --skip-positions on),
 * with P_i the query's probabilities over its visible keys (n_i of them: i + 1, or the window):
 *   entropy             mean_i of -sum_j P_ij ln P_ij (nats)
 *   entropy_normalized  mean_i of that over ln n_i, the entropy of uniform attention over the same
 *                       keys, over the queries with n_i >= 2 (ln 1 = 0: position 0 sees one key)
 *   sink_mass           mean_i of P_i0, the probability on the sequence's first position
 *   distance            mean_i of sum_j P_ij (i - j) (positions)
 *   max_logit           max_i,j of the score s_ij as the softmax sees it (scaled, soft-capped)
 *   head_cosine [h, h'] mean_i of cos(P_h,i, P_h',i), over the queries with n_i >= 2
 *   redundancy          per block, the mean of head_cosine over the pairs h < h'
 * The summary's entropy_normalized_block_min, the smallest over blocks of the mean over heads of
 * entropy_normalized, is what the check rule collapse.attention_entropy reads: a single head near 0
 * is common in healthy models (a head that parks on the sink), a whole block near 0 is collapse.
 * A streaming analyzer: each batch's forward pass leaves q and k of every block, and the backend's
 * attn_stats recomputes P from them a few query rows at a time (model/attn_summary.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/output.h"
#include "analyzers/ranks.h"
#include "model/attn_summary.h"

#define NAME "attention"

typedef struct {
    int n_layers, n_heads;
    sp_attn_summary *summary;
    sp_attn_head_sums *sums; /* [n_layers * n_heads] */
    double *cos_sum;         /* [n_layers * n_heads * n_heads] */
} attn_state;

static void attn_free(void *state)
{
    attn_state *s = state;
    if (!s)
        return;
    sp_attn_summary_free(s->summary);
    free(s->sums);
    free(s->cos_sum);
    free(s);
}

static sp_status attn_begin(const sp_analysis *a, void **state)
{
    attn_state *s = sp_calloc(1, sizeof *s, "attention state");
    if (!s)
        return SP_ERR_NOMEM;
    *state = s;
    s->n_layers = a->n_layers;
    s->n_heads = sp_model_config(a->model)->n_heads;
    const size_t n = (size_t)s->n_layers * (size_t)s->n_heads;
    s->sums = sp_malloc(n * sizeof *s->sums, "attention sums");
    s->cos_sum = sp_calloc(n * (size_t)s->n_heads, sizeof *s->cos_sum, "attention head cosines");
    if (!s->sums || !s->cos_sum)
        return SP_ERR_NOMEM;
    sp_attn_head_sums_init(s->sums, (int)n);
    return sp_attn_summary_create(a->model, a->batch * a->seq_len, &s->summary);
}

static sp_status attn_consume(const sp_analysis *a, void *state, const sp_act_batch *b)
{
    (void)b; /* the batch's forward pass is the model's last one */
    attn_state *s = state;
    const size_t hh = (size_t)s->n_heads * (size_t)s->n_heads;
    for (int l = 0; l < s->n_layers; l++)
        SP_TRY(sp_attn_summary_add(s->summary, l, a->skip_positions, s->sums + (size_t)l * s->n_heads,
                                   s->cos_sum + l * hh));
    return SP_OK;
}

/* The per-head means ([L, H] each), head_cosine [L, H, H], and per block redundancy and the mean
 * over heads of entropy_normalized ([L] each). */
typedef struct {
    double *entropy, *normalized, *sink, *distance, *max_logit, *head_cos, *redundancy, *block_normalized;
} attn_results;

/* Index of the smallest (sign -1: largest) finite value of v[n], -1 when none is finite. */
static int arg_extreme(const double *v, int n, int sign)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]) && (best < 0 || sign * v[i] < sign * v[best]))
            best = i;
    return best;
}

static double mean_finite(const double *v, int n)
{
    double sum = 0;
    int count = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) {
            sum += v[i];
            count++;
        }
    return count ? sum / count : NAN;
}

static void compute(const attn_state *s, attn_results *r)
{
    const int L = s->n_layers, H = s->n_heads;
    for (int l = 0; l < L; l++) {
        double pair_sum = 0;
        for (int h = 0; h < H; h++) {
            const sp_attn_head_sums *sum = &s->sums[l * H + h];
            const double n = (double)sum->queries, n_multi = (double)sum->multi_key;
            const int e = l * H + h;
            r->entropy[e] = sum->entropy / n;
            r->normalized[e] = sum->entropy_normalized / n_multi;
            r->sink[e] = sum->sink / n;
            r->distance[e] = sum->distance / n;
            r->max_logit[e] = sum->max_logit;
            for (int g = 0; g < H; g++) {
                const size_t at = ((size_t)l * H + h) * H + g;
                r->head_cos[at] = s->cos_sum[at] / n_multi;
                pair_sum += g > h ? r->head_cos[at] : 0;
            }
        }
        r->redundancy[l] = H > 1 ? pair_sum / (H * (H - 1) / 2.0) : NAN;
        r->block_normalized[l] = mean_finite(r->normalized + l * H, H);
    }
}

static sp_status write_results(const sp_analysis *a, const attn_state *s, const attn_results *r)
{
    const int L = s->n_layers, H = s->n_heads, n = L * H;
    const struct {
        const char *name;
        int rank;
        const double *data;
        const char *units, *desc;
    } arrays[] = {
        {"entropy", 2, r->entropy, "nats", "mean over queries of the attention entropy -sum_j P_ij ln P_ij"},
        {"entropy_normalized", 2, r->normalized, "1",
         "mean over the queries that see at least two keys of the entropy over ln(visible keys), the entropy of "
         "uniform attention (1: uniform, 0: one key)"},
        {"sink_mass", 2, r->sink, "1",
         "mean over queries of the probability on the sequence's first position (attention sink)"},
        {"distance", 2, r->distance, "positions", "mean over queries of the mean attention distance sum_j P_ij (i - j)"},
        {"max_logit", 2, r->max_logit, "logit",
         "largest attention score over every query and key: scale q.k, soft-capped where the model caps, as the "
         "softmax sees it"},
        {"head_cosine", 3, r->head_cos, "cosine",
         "mean over the queries that see at least two keys of the cosine between two heads' attention rows"},
        {"redundancy", 1, r->redundancy, "cosine",
         "head redundancy: mean over the pairs of distinct heads of head_cosine (NaN with one head)"},
    };
    static const char *const shape_desc[] = {"", "[block]", "[block, head]", "[block, head, head]"};
    const int64_t shape[3] = {L, H, H};
    for (size_t i = 0; i < SP_ARRAY_LEN(arrays); i++)
        SP_TRY(sp_out_array(a, NAME, arrays[i].name, 0, arrays[i].rank, shape, arrays[i].data, arrays[i].units,
                            shape_desc[arrays[i].rank], arrays[i].desc));
    const int e_min = arg_extreme(r->entropy, n, 1), n_min = arg_extreme(r->normalized, n, 1);
    const int sink_max = arg_extreme(r->sink, n, -1), logit_max = arg_extreme(r->max_logit, n, -1);
    const int red_max = arg_extreme(r->redundancy, L, -1), block_min = arg_extreme(r->block_normalized, L, 1);
    const struct {
        const char *key;
        double value;
    } scalars[] = {
        {"queries", (double)s->sums[0].queries},
        {"entropy_min", e_min >= 0 ? r->entropy[e_min] : NAN},
        {"entropy_min_block", e_min >= 0 ? e_min / H : -1},
        {"entropy_min_head", e_min >= 0 ? e_min % H : -1},
        {"entropy_mean", mean_finite(r->entropy, n)},
        {"entropy_normalized_min", n_min >= 0 ? r->normalized[n_min] : NAN},
        {"entropy_normalized_mean", mean_finite(r->normalized, n)},
        {"entropy_normalized_block_min", block_min >= 0 ? r->block_normalized[block_min] : NAN},
        {"entropy_normalized_block_min_block", block_min},
        {"sink_mass_max", sink_max >= 0 ? r->sink[sink_max] : NAN},
        {"sink_mass_max_block", sink_max >= 0 ? sink_max / H : -1},
        {"sink_mass_mean", mean_finite(r->sink, n)},
        {"distance_mean", mean_finite(r->distance, n)},
        {"max_logit", logit_max >= 0 ? r->max_logit[logit_max] : NAN},
        {"max_logit_block", logit_max >= 0 ? logit_max / H : -1},
        {"redundancy_max", red_max >= 0 ? r->redundancy[red_max] : NAN},
        {"redundancy_max_block", red_max},
        {"redundancy_mean", mean_finite(r->redundancy, L)},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(scalars); i++)
        SP_TRY(sp_out_scalar(a, NAME, scalars[i].key, 0, scalars[i].value));
    return SP_OK;
}

/* Over MPI ranks: every rank's head sums (counts and sums added up, the largest score the largest,
 * in buf [7 n] as scratch) and head cosines. */
static sp_status join_ranks(const sp_analysis *a, attn_state *s, double *buf)
{
    const size_t n = (size_t)s->n_layers * (size_t)s->n_heads;
    if (sp_analysis_n_ranks(a) == 1)
        return SP_OK;
    for (size_t i = 0; i < n; i++) {
        const sp_attn_head_sums *h = &s->sums[i];
        const double v[6] = {(double)h->queries, (double)h->multi_key, h->entropy, h->entropy_normalized, h->sink,
                             h->distance};
        memcpy(buf + 6 * i, v, sizeof v);
        buf[6 * n + i] = h->max_logit;
    }
    SP_TRY(sp_analysis_sum(a, buf, 6 * n));
    SP_TRY(sp_analysis_max(a, buf + 6 * n, n));
    for (size_t i = 0; i < n; i++) {
        const double *v = buf + 6 * i;
        s->sums[i] = (sp_attn_head_sums){.queries = (int64_t)v[0], .multi_key = (int64_t)v[1], .entropy = v[2],
                                         .entropy_normalized = v[3], .sink = v[4], .distance = v[5],
                                         .max_logit = buf[6 * n + i]};
    }
    return sp_analysis_sum(a, s->cos_sum, n * (size_t)s->n_heads);
}

static sp_status attn_finish(const sp_analysis *a, void *state)
{
    attn_state *s = state;
    const size_t n = (size_t)s->n_layers * (size_t)s->n_heads;
    const size_t n_cos = n * (size_t)s->n_heads, L = (size_t)s->n_layers;
    double *buf = sp_malloc((7 * n + n_cos + 2 * L) * sizeof *buf, "attention results");
    sp_status st = buf ? join_ranks(a, s, buf) : SP_ERR_NOMEM;
    if (st == SP_OK) {
        double *cos = buf + 5 * n, *per_block = cos + n_cos;
        attn_results r = {buf, buf + n, buf + 2 * n, buf + 3 * n, buf + 4 * n, cos, per_block, per_block + L};
        compute(s, &r);
        st = write_results(a, s, &r);
    }
    free(buf);
    attn_free(s);
    return st;
}

const sp_analyzer sp_analyzer_attention = {
    .name = NAME,
    .description = "attention per block and head: entropy (collapse), sink mass on position 0, mean distance, "
                   "largest score, and head redundancy",
    .needs = SP_NEEDS_MODEL,
    .begin = attn_begin,
    .consume = attn_consume,
    .finish = attn_finish,
    .discard = attn_free,
};

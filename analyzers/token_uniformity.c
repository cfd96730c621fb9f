/* analyzers/token_uniformity.c: "token_uniformity", rank collapse across tokens (Dong et al. 2021,
 * "Attention is not all you need"; docs/metrics.md).
 *
 * Per layer output h_l (l = 0..L, per stream) and evaluation sequence, over the sequence's T token
 * vectors H (T x d), averaged over the sequences:
 *   relative residual    ||H - 1 mean(H)^T||_F / ||H||_F  (0 when every token is the same vector)
 *   mean pairwise cosine over the T (T - 1) ordered pairs of distinct tokens, in O(T d): with the
 *                        unit rows U (a zero row stays 0: cosine 0 with anything, as in similarity)
 *                        and n of them nonzero, sum_{i != j} u_i . u_j = ||sum_i u_i||^2 - n and
 *                        ||sum_i u_i||^2 = T (n - ||U - 1 mean(U)^T||_F^2), so
 *                        cos = n / T - ||U - 1 mean(U)^T||_F^2 / (T - 1).
 * Both come from one centered Frobenius norm, formed on the backend rather than as
 * sum ||x||^2 - T ||mean||^2: near collapse, where the residual and 1 - cos are small, that
 * difference would cancel to the rounding of the sums. The means of all sequences of a batch are
 * one gemm with a block-averaging matrix, and are subtracted twice (the second pass removes the
 * rounding of the first, the corrected two-pass algorithm), so identical tokens give exactly 0.
 * Only one number per sequence and per token (the row norms) reaches the host. */
#include <math.h>
#include <stdlib.h>

#include "analyzers/dev_bufs.h"
#include "analyzers/output.h"
#include "analyzers/ranks.h"
#include "analyzers/rowops.h"

#define NAME "token_uniformity"

typedef struct {
    int n_h, n_streams, d, seq_len, max_seqs, max_rows;
    sp_rowops ro;
    sp_real *avg;     /* backend [max_seqs, max_rows]: 1/T where row r is in sequence q, else 0 */
    sp_real *member;  /* backend [max_rows, max_seqs]: 1 where row r is in sequence q, else 0 */
    sp_real *means;   /* backend [max_seqs, d] */
    sp_real *unit;    /* backend [max_rows, d] */
    sp_real *centered; /* backend [max_rows, d] */
    double *sq;       /* host [max_rows]: squared row norms */
    double *h_sq, *c_sq; /* host [max_seqs]: ||H||_F^2 and the centered norm of each sequence */
    double *cos_sum, *res_sum; /* [n_streams * n_h], sums over sequences */
    int64_t n_seqs;
} tu_state;

static void tu_free(void *state)
{
    tu_state *s = state;
    if (!s)
        return;
    sp_real *bufs[] = {s->avg, s->member, s->means, s->unit, s->centered};
    if (s->ro.be)
        sp_dev_bufs_release(s->ro.be, bufs, (int)SP_ARRAY_LEN(bufs));
    sp_rowops_free(&s->ro);
    free(s->sq);
    free(s->h_sq);
    free(s->c_sq);
    free(s->cos_sum);
    free(s->res_sum);
    free(s);
}

/* The block matrices avg and member, uploaded once. */
static sp_status fill_blocks(tu_state *s, const sp_backend *be)
{
    const size_t cells = (size_t)s->max_seqs * (size_t)s->max_rows;
    sp_real *avg = sp_calloc(cells, sizeof *avg, "token uniformity block means");
    sp_real *member = sp_calloc(cells, sizeof *member, "token uniformity block means");
    sp_status st = avg && member ? SP_OK : SP_ERR_NOMEM;
    for (int r = 0; r < s->max_rows && st == SP_OK; r++) {
        const int q = r / s->seq_len;
        avg[(size_t)q * s->max_rows + r] = (sp_real)(1.0 / s->seq_len);
        member[(size_t)r * s->max_seqs + q] = 1;
    }
    if (st == SP_OK) {
        be->upload(s->avg, avg, cells * sizeof *avg);
        be->upload(s->member, member, cells * sizeof *member);
    }
    free(avg);
    free(member);
    return st;
}

static sp_status tu_begin(const sp_analysis *a, void **state)
{
    tu_state *s = sp_calloc(1, sizeof *s, "token uniformity state");
    if (!s)
        return SP_ERR_NOMEM;
    *state = s;
    s->n_h = a->n_layers + 1;
    s->n_streams = a->n_streams;
    s->d = a->d_model;
    s->seq_len = a->seq_len - a->skip_positions; /* the rows of a sequence in a batch */
    s->max_seqs = a->batch;
    s->max_rows = a->batch * s->seq_len;
    const size_t rows = (size_t)s->max_rows, d = (size_t)s->d, seqs = (size_t)s->max_seqs;
    SP_TRY(sp_rowops_init(&s->ro, a->be, s->max_rows, s->d));
    s->avg = a->be->alloc(seqs * rows * sizeof(sp_real), "token uniformity block means");
    s->member = a->be->alloc(seqs * rows * sizeof(sp_real), "token uniformity block means");
    s->means = a->be->alloc(seqs * d * sizeof(sp_real), "token uniformity means");
    s->unit = a->be->alloc(rows * d * sizeof(sp_real), "token uniformity unit rows");
    s->centered = a->be->alloc(rows * d * sizeof(sp_real), "token uniformity centered rows");
    s->sq = sp_malloc(rows * sizeof *s->sq, "token uniformity norms");
    s->h_sq = sp_malloc(seqs * sizeof *s->h_sq, "token uniformity norms");
    s->c_sq = sp_malloc(seqs * sizeof *s->c_sq, "token uniformity norms");
    s->cos_sum = sp_calloc((size_t)s->n_streams * s->n_h, sizeof *s->cos_sum, "token uniformity sums");
    s->res_sum = sp_calloc((size_t)s->n_streams * s->n_h, sizeof *s->res_sum, "token uniformity sums");
    if (!s->avg || !s->member || !s->means || !s->unit || !s->centered || !s->sq || !s->h_sq || !s->c_sq ||
        !s->cos_sum || !s->res_sum)
        return SP_ERR_NOMEM;
    return fill_blocks(s, a->be);
}

/* out[q] = ||X_q - 1 mean(X_q)^T||_F^2 for the n_seq sequences of x [n_seq T, d]. */
static void centered_sqnorms(tu_state *s, const sp_backend *be, int n_seq, const sp_real *x, double *out)
{
    const int rows = n_seq * s->seq_len, d = s->d;
    const size_t seq_cells = (size_t)s->seq_len * (size_t)d;
    be->copy(s->centered, x, (size_t)rows * (size_t)d * sizeof *x);
    for (int pass = 0; pass < 2; pass++) {
        /* means [n_seq, d] = avg x; centered -= member means */
        be->gemm(0, 0, n_seq, d, rows, 1, s->avg, s->max_rows, s->centered, d, 0, s->means, d);
        be->gemm(0, 0, rows, d, n_seq, -1, s->member, s->max_seqs, s->means, d, 1, s->centered, d);
    }
    for (int q = 0; q < n_seq; q++)
        out[q] = be->sumsq(seq_cells, s->centered + q * seq_cells);
}

static sp_status tu_consume(const sp_analysis *a, void *state, const sp_act_batch *b)
{
    tu_state *s = state;
    const sp_backend *be = a->be;
    const int rows = sp_batch_rows(b), T = s->seq_len, n_seq = rows / T;
    const size_t seq_cells = (size_t)T * (size_t)s->d;
    for (int k = 0; k < s->n_streams; k++)
        for (int l = 0; l < s->n_h; l++) {
            const sp_real *x = sp_batch_hidden(b, l, k);
            double *cos_sum = &s->cos_sum[k * s->n_h + l], *res_sum = &s->res_sum[k * s->n_h + l];
            centered_sqnorms(s, be, n_seq, x, s->c_sq);
            for (int q = 0; q < n_seq; q++) {
                s->h_sq[q] = be->sumsq(seq_cells, x + q * seq_cells);
                *res_sum += s->h_sq[q] > 0 ? sqrt(s->c_sq[q] / s->h_sq[q]) : 0;
            }
            SP_TRY(sp_rowops_unit(&s->ro, rows, s->d, x, s->unit, s->sq));
            centered_sqnorms(s, be, n_seq, s->unit, s->c_sq);
            for (int q = 0; q < n_seq; q++) {
                int nonzero = 0;
                for (int t = 0; t < T; t++)
                    nonzero += s->sq[q * T + t] > 0;
                *cos_sum += (double)nonzero / T - s->c_sq[q] / (T - 1);
            }
        }
    s->n_seqs += n_seq;
    return SP_OK;
}

static sp_status write_stream(const sp_analysis *a, const tu_state *s, int k, double *buf)
{
    const int n_h = s->n_h;
    double *cosine = buf, *residual = buf + n_h;
    /* one token has no pair and nothing to be uniform with */
    const double inv = s->seq_len > 1 && s->n_seqs > 0 ? 1.0 / (double)s->n_seqs : NAN;
    int res_min_layer = 0, cos_max_layer = 0;
    for (int l = 0; l < n_h; l++) {
        cosine[l] = s->cos_sum[k * n_h + l] * inv;
        residual[l] = s->res_sum[k * n_h + l] * inv;
        if (residual[l] < residual[res_min_layer])
            res_min_layer = l;
        if (cosine[l] > cosine[cos_max_layer])
            cos_max_layer = l;
    }
    const int64_t per_layer[1] = {n_h};
    SP_TRY(sp_out_array(a, NAME, "mean_pairwise_cosine", k, 1, per_layer, cosine, "cosine", "[layer]",
                        "mean over sequences of the mean cos(h_l[i], h_l[j]) over the ordered pairs of distinct "
                        "tokens i != j of the sequence; layers 0..L"));
    SP_TRY(sp_out_array(a, NAME, "relative_residual", k, 1, per_layer, residual, "1", "[layer]",
                        "mean over sequences of ||H - 1 mean(H)^T||_F / ||H||_F, H the sequence's T x d token "
                        "vectors of h_l (0: every token the same vector, rank collapse)"));
    const struct {
        const char *key;
        double value;
    } scalars[] = {
        {"sequences", (double)s->n_seqs},
        {"cosine_last", cosine[n_h - 1]},
        {"residual_last", residual[n_h - 1]},
        {"cosine_max", cosine[cos_max_layer]},
        {"cosine_max_layer", cos_max_layer},
        {"residual_min", residual[res_min_layer]},
        {"residual_min_layer", res_min_layer},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(scalars); i++)
        SP_TRY(sp_out_scalar(a, NAME, scalars[i].key, k, scalars[i].value));
    return SP_OK;
}

static sp_status tu_finish(const sp_analysis *a, void *state)
{
    tu_state *s = state;
    double *buf = sp_malloc(2 * (size_t)s->n_h * sizeof *buf, "token uniformity results");
    sp_status st = buf ? SP_OK : SP_ERR_NOMEM;
    const size_t n = (size_t)s->n_streams * s->n_h; /* over MPI ranks: every rank's sums */
    if (st == SP_OK && (st = sp_analysis_sum(a, s->cos_sum, n)) == SP_OK && (st = sp_analysis_sum(a, s->res_sum, n)) == SP_OK)
        st = sp_analysis_sum_count(a, &s->n_seqs);
    for (int k = 0; k < s->n_streams && st == SP_OK; k++)
        st = write_stream(a, s, k, buf);
    free(buf);
    tu_free(s);
    return st;
}

const sp_analyzer sp_analyzer_token_uniformity = {
    .name = NAME,
    .description = "rank collapse across tokens: mean pairwise cosine and relative residual from the sequence "
                   "mean, per layer",
    .needs = SP_NEEDS_ACTIVATIONS,
    .begin = tu_begin,
    .consume = tu_consume,
    .finish = tu_finish,
    .discard = tu_free,
};

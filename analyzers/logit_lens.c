/* analyzers/logit_lens.c: "logit_lens", every layer output decoded as if it were the last
 * (nostalgebraist 2020; docs/metrics.md).
 *
 * Each h_l (l = 0..L; both streams for siamese) goes through the model's own output path
 * (sp_decoder, model/model.h: the final norms where the model has them, the LM head, the logit
 * soft-cap), giving p_l, and per layer, over the evaluation tokens:
 *   loss       mean -log p_l(target) over the tokens with a target (nats)
 *   accuracy   share of those tokens whose argmax of p_l is the target
 *   kl         mean over every token of KL(p_L || p_l) = sum_v p_L,v (log p_L,v - log p_l,v) (nats)
 *   agreement  share of every token whose argmax of p_l is that of p_L
 * The backend has no softmax over a row, so, as in drift (analyzers/drift_logits.c), the logits come
 * to the host a tile of rows at a time and are reduced there in fp64 with the max-shifted
 * log-sum-exp; the argmax is the first index of the largest logit. Per tile the final layer comes
 * first (its log-probabilities and probabilities are kept for the KL), then every layer in turn, so
 * no more than one tile of one layer's logits exists at once, on the backend or the host, whatever
 * the vocabulary. The final layer goes through the same reduction as the others: its KL is exactly 0
 * and its agreement exactly 1. With a large vocabulary only the first sequences are read (LENS_FLOPS). */
#include <math.h>
#include <stdlib.h>

#include "analyzers/linalg.h"
#include "analyzers/output.h"
#include "analyzers/ranks.h"

#define NAME "logit_lens"
/* Head products at most, 2 d V per token and layer: a large vocabulary makes the lens the costliest
 * part of the pass ((L + 1) heads instead of one), so it reads the first sequences of the evaluation
 * set that fit (at least one; every token of a byte-vocabulary model: 2.7e9 FLOPs for 16384 tokens at
 * 4 blocks of d_model 64; 2 sequences of 256 tokens for SmolLM2-135M, 1.75e9 FLOPs per token). */
#define LENS_FLOPS 1e12
/* Logits per tile: 8 MiB of float32 on the backend, and 8 bytes more per cell twice on the host
 * (the final layer's log-probabilities and probabilities). 41 rows at a vocabulary of 50257. */
#define TILE_CELLS (1 << 21)

typedef struct {
    double loss, correct, kl, agree;
} layer_sums;

typedef struct {
    int n_h, n_streams, d, vocab, tile_rows;
    sp_decoder *dec;
    sp_real *z;               /* host [tile_rows, vocab]: one layer's logits */
    double *lp_ref, *p_ref;   /* host [tile_rows, vocab]: log p_L and p_L */
    int *arg_ref;             /* host [tile_rows]: argmax of p_L */
    double *row_kl, *row_shift; /* host [tile_rows]: one layer's KL and log-sum-exp per row */
    int *row_arg;             /* host [tile_rows]: one layer's argmax per row */
    layer_sums *sums;         /* [n_h] */
    int64_t n_tokens, n_targets;
    int64_t max_tokens; /* whole sequences within LENS_FLOPS */
} lens_state;

static void lens_free(void *state)
{
    lens_state *s = state;
    if (!s)
        return;
    sp_decoder_free(s->dec);
    free(s->z);
    free(s->lp_ref);
    free(s->p_ref);
    free(s->arg_ref);
    free(s->row_kl);
    free(s->row_shift);
    free(s->row_arg);
    free(s->sums);
    free(s);
}

static sp_status lens_begin(const sp_analysis *a, void **state)
{
    lens_state *s = sp_calloc(1, sizeof *s, "logit lens state");
    if (!s)
        return SP_ERR_NOMEM;
    *state = s;
    s->n_h = a->n_layers + 1;
    s->n_streams = a->n_streams;
    s->d = a->d_model;
    s->vocab = a->vocab_size;
    const double flops_per_token = (double)s->n_h * 2.0 * s->d * s->vocab;
    const int64_t seqs = (int64_t)(LENS_FLOPS / flops_per_token / a->seq_len);
    s->max_tokens = (seqs > 1 ? seqs : 1) * (int64_t)a->seq_len;
    const int batch_rows = a->batch * a->seq_len, fit = TILE_CELLS / s->vocab;
    s->tile_rows = fit < 1 ? 1 : fit < batch_rows ? fit : batch_rows;
    const size_t cells = (size_t)s->tile_rows * (size_t)s->vocab;
    SP_TRY(sp_decoder_create(a->model, s->tile_rows, &s->dec));
    s->z = sp_malloc(cells * sizeof *s->z, "logit lens logits");
    s->lp_ref = sp_malloc(cells * sizeof *s->lp_ref, "logit lens final log-probabilities");
    s->p_ref = sp_malloc(cells * sizeof *s->p_ref, "logit lens final probabilities");
    s->arg_ref = sp_malloc((size_t)s->tile_rows * sizeof *s->arg_ref, "logit lens final argmax");
    s->row_kl = sp_malloc((size_t)s->tile_rows * sizeof *s->row_kl, "logit lens row sums");
    s->row_shift = sp_malloc((size_t)s->tile_rows * sizeof *s->row_shift, "logit lens row sums");
    s->row_arg = sp_malloc((size_t)s->tile_rows * sizeof *s->row_arg, "logit lens row sums");
    s->sums = sp_calloc((size_t)s->n_h, sizeof *s->sums, "logit lens sums");
    return s->z && s->lp_ref && s->p_ref && s->arg_ref && s->row_kl && s->row_shift && s->row_arg && s->sums
               ? SP_OK
               : SP_ERR_NOMEM;
}

/* Rows [r0, r0 + rows) of layer l decoded into s->z (host). */
static sp_status decode(lens_state *s, const sp_analysis *a, const sp_act_batch *b, int l, int r0, int rows)
{
    const sp_real *h[2] = {NULL, NULL};
    for (int k = 0; k < s->n_streams; k++)
        h[k] = sp_batch_hidden(b, l, k) + (size_t)r0 * (size_t)s->d;
    const sp_real *logits = NULL;
    SP_TRY(sp_decoder_run(s->dec, rows, h, &logits));
    a->be->download(s->z, logits, (size_t)rows * (size_t)s->vocab * sizeof *s->z);
    return SP_OK;
}

/* A tile's rows are reduced in parallel (their exponentials are most of the analyzer's own time on
 * the CPU: 1.08 -> 0.82 s on 2 cores at 16,384 tokens, 13 layers, vocabulary 256), each row's
 * results kept apart and summed in row order: the same sums as one thread's. */
#define PARALLEL_CELLS 65536

/* s->z holds the final layer's rows: keep log p_L, p_L and the argmax of each. */
static void keep_reference(lens_state *s, int rows)
{
    const size_t V = (size_t)s->vocab;
#pragma omp parallel for schedule(static) if ((size_t)rows * V >= PARALLEL_CELLS)
    for (int r = 0; r < rows; r++) {
        const sp_real *z = s->z + r * V;
        const double shift = sp_linalg_log_softmax_shift(s->vocab, z, &s->arg_ref[r]);
        double *lp = s->lp_ref + r * V, *p = s->p_ref + r * V;
        for (size_t v = 0; v < V; v++) {
            lp[v] = (double)z[v] - shift;
            p[v] = exp(lp[v]);
        }
    }
}

/* Adds the rows of layer l in s->z (targets: theirs, -1 where none). */
static void accumulate(lens_state *s, int l, int rows, const int32_t *targets)
{
    const size_t V = (size_t)s->vocab;
#pragma omp parallel for schedule(static) if ((size_t)rows * V >= PARALLEL_CELLS)
    for (int r = 0; r < rows; r++) {
        const sp_real *z = s->z + r * V;
        const double shift = sp_linalg_log_softmax_shift(s->vocab, z, &s->row_arg[r]);
        const double *lp_ref = s->lp_ref + r * V, *p_ref = s->p_ref + r * V;
        double kl = 0;
        for (size_t v = 0; v < V; v++)
            kl += p_ref[v] * (lp_ref[v] - ((double)z[v] - shift));
        s->row_kl[r] = kl;
        s->row_shift[r] = shift;
    }
    layer_sums *sum = &s->sums[l];
    for (int r = 0; r < rows; r++) {
        const int arg = s->row_arg[r];
        sum->kl += s->row_kl[r];
        sum->agree += arg == s->arg_ref[r];
        if (targets[r] >= 0) {
            sum->loss += s->row_shift[r] - (double)s->z[(size_t)r * V + (size_t)targets[r]];
            sum->correct += arg == targets[r];
        }
    }
}

static sp_status lens_consume(const sp_analysis *a, void *state, const sp_act_batch *b)
{
    lens_state *s = state;
    /* the cap counts from the evaluation set's first token, whichever MPI rank holds the batch */
    const int64_t left = s->max_tokens - (int64_t)sp_batch_first_seq(b) * sp_batch_seq_len(b);
    const int rows = left <= 0 ? 0 : sp_batch_rows(b) < left ? sp_batch_rows(b) : (int)left, last = s->n_h - 1;
    const int32_t *targets = sp_batch_targets(b);
    for (int r0 = 0; r0 < rows; r0 += s->tile_rows) {
        const int n = rows - r0 < s->tile_rows ? rows - r0 : s->tile_rows;
        SP_TRY(decode(s, a, b, last, r0, n));
        keep_reference(s, n);
        accumulate(s, last, n, targets + r0);
        for (int l = 0; l < last; l++) {
            SP_TRY(decode(s, a, b, l, r0, n));
            accumulate(s, l, n, targets + r0);
        }
        for (int r = 0; r < n; r++)
            s->n_targets += targets[r0 + r] >= 0;
    }
    s->n_tokens += rows;
    return SP_OK;
}

static sp_status write_results(const sp_analysis *a, const lens_state *s, double *buf)
{
    const int n_h = s->n_h, L = n_h - 1;
    if (s->n_targets == 0)
        return sp_error(SP_ERR_INPUT, "logit_lens: no evaluation token has a next-token target");
    double *loss = buf, *accuracy = loss + n_h, *kl = accuracy + n_h, *agreement = kl + n_h;
    const double n_tok = (double)s->n_tokens, n_tgt = (double)s->n_targets;
    int loss_min_layer = 0, agreement_half_layer = -1; /* agreement[L] is 1: some layer reaches 1/2 */
    for (int l = 0; l < n_h; l++) {
        loss[l] = s->sums[l].loss / n_tgt;
        accuracy[l] = s->sums[l].correct / n_tgt;
        kl[l] = s->sums[l].kl / n_tok;
        agreement[l] = s->sums[l].agree / n_tok;
        if (loss[l] < loss[loss_min_layer])
            loss_min_layer = l;
        if (agreement_half_layer < 0 && agreement[l] >= 0.5)
            agreement_half_layer = l;
    }
    const int64_t per_layer[1] = {n_h};
    SP_TRY(sp_out_array(a, NAME, "loss", 0, 1, per_layer, loss, "nats", "[layer]",
                        "mean next-token cross-entropy of h_l decoded through the model's final norm, head and "
                        "soft-cap, over the tokens with a target; layers 0..L (L: the model's own loss)"));
    SP_TRY(sp_out_array(a, NAME, "accuracy", 0, 1, per_layer, accuracy, "1", "[layer]",
                        "share of the tokens with a target whose argmax of the decoded h_l is the target"));
    SP_TRY(sp_out_array(a, NAME, "kl", 0, 1, per_layer, kl, "nats", "[layer]",
                        "mean over tokens of KL(p_L || p_l), p_l the next-token distribution decoded from h_l "
                        "(0 at l = L)"));
    SP_TRY(sp_out_array(a, NAME, "agreement", 0, 1, per_layer, agreement, "1", "[layer]",
                        "share of tokens whose argmax of the decoded h_l is the argmax of the model's output "
                        "(1 at l = L)"));
    const int prev = L > 0 ? L - 1 : 0;
    const struct {
        const char *key;
        double value;
    } scalars[] = {
        {"tokens", n_tok},
        {"targets", n_tgt},
        {"loss_final", loss[L]},
        {"accuracy_final", accuracy[L]},
        {"loss_prev_minus_final", loss[prev] - loss[L]},
        {"kl_prev", kl[prev]},
        {"loss_min_layer", loss_min_layer},
        {"loss_min_minus_final", loss[loss_min_layer] - loss[L]},
        {"agreement_half_layer", agreement_half_layer},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(scalars); i++)
        SP_TRY(sp_out_scalar(a, NAME, scalars[i].key, 0, scalars[i].value));
    return SP_OK;
}

static sp_status lens_finish(const sp_analysis *a, void *state)
{
    lens_state *s = state;
    double *buf = sp_malloc(4 * (size_t)s->n_h * sizeof *buf, "logit lens results");
    sp_status st = buf ? SP_OK : SP_ERR_NOMEM;
    _Static_assert(sizeof(layer_sums) == 4 * sizeof(double), "layer_sums: four doubles, summed as an array");
    if (st == SP_OK && (st = sp_analysis_sum(a, (double *)s->sums, 4 * (size_t)s->n_h)) == SP_OK &&
        (st = sp_analysis_sum_count(a, &s->n_tokens)) == SP_OK)
        st = sp_analysis_sum_count(a, &s->n_targets);
    if (st == SP_OK)
        st = write_results(a, s, buf);
    free(buf);
    lens_free(s);
    return st;
}

const sp_analyzer sp_analyzer_logit_lens = {
    .name = NAME,
    .description = "logit lens: every layer output decoded through the final norm and head: loss, top-1 "
                   "accuracy, KL to the output and argmax agreement per layer",
    .needs = SP_NEEDS_ACTIVATIONS | SP_NEEDS_MODEL,
    .begin = lens_begin,
    .consume = lens_consume,
    .finish = lens_finish,
    .discard = lens_free,
};

/* analyzers/pruning.c: "pruning", layer-pruning sensitivity: the change of the evaluation loss when
 * block l is replaced by the identity (every stream: sp_model_set_block_skip), for each l, and when
 * the last k blocks are removed together, k = 1..floor(L/2). Losses are token-weighted means over
 * the first prune_seqs evaluation sequences, or (prune_seqs 0) the first prune_batches batches
 * (analyzers/model_eval.h); delta = loss - base loss. */
#include <math.h>
#include <stdlib.h>

#include "analyzers/model_eval.h"
#include "analyzers/progress.h"

#define NAME "pruning"

typedef struct {
    int L, K, n_seqs;
    double base;
    double *loss_block, *delta_block; /* [L] */
    double *loss_last, *delta_last;   /* [K], entry k - 1 removes the last k blocks */
} prune_result;

static sp_status clear_skips(sp_model *m, int L)
{
    for (int l = 0; l < L; l++)
        SP_TRY(sp_model_set_block_skip(m, l, 0));
    return SP_OK;
}

static sp_status measure(const sp_analysis *a, prune_result *p)
{
    sp_model *m = a->model;
    sp_progress progress;
    sp_progress_start(&progress, NAME, a->quiet);
    const int total = 1 + p->L + p->K;
    sp_status st = sp_eval_mean_loss(a, p->n_seqs, &p->base);
    for (int l = 0; l < p->L && st == SP_OK; l++) {
        sp_progress_update(&progress, 1 + l, total);
        st = sp_model_set_block_skip(m, l, 1);
        if (st == SP_OK)
            st = sp_eval_mean_loss(a, p->n_seqs, &p->loss_block[l]);
        if (st == SP_OK)
            st = sp_model_set_block_skip(m, l, 0);
        p->delta_block[l] = p->loss_block[l] - p->base;
    }
    for (int k = 1; k <= p->K && st == SP_OK; k++) { /* blocks L-1 .. L-k skipped together */
        sp_progress_update(&progress, p->L + k, total);
        st = sp_model_set_block_skip(m, p->L - k, 1);
        if (st == SP_OK)
            st = sp_eval_mean_loss(a, p->n_seqs, &p->loss_last[k - 1]);
        p->delta_last[k - 1] = p->loss_last[k - 1] - p->base;
    }
    sp_progress_end(&progress);
    sp_status cleared = clear_skips(m, p->L);
    return st != SP_OK ? st : cleared;
}

static sp_status write_result(const sp_analysis *a, const prune_result *p)
{
    sp_report *r = a->report;
    const int64_t L = p->L, K = p->K;
    SP_TRY(sp_report_write_array(r, NAME, "loss_skip_block", 1, &L, p->loss_block,
                                 &(sp_report_array_attrs){"nats", "[block]", "evaluation loss with block l the identity"}));
    SP_TRY(sp_report_write_array(r, NAME, "delta_skip_block", 1, &L, p->delta_block,
                                 &(sp_report_array_attrs){"nats", "[block]",
                                                          "loss with block l the identity minus the base loss"}));
    SP_TRY(sp_report_write_array(r, NAME, "loss_drop_last", 1, &K, p->loss_last,
                                 &(sp_report_array_attrs){"nats", "[k - 1]",
                                                          "evaluation loss without the last k blocks, k = 1..L/2"}));
    SP_TRY(sp_report_write_array(r, NAME, "delta_drop_last", 1, &K, p->delta_last,
                                 &(sp_report_array_attrs){"nats", "[k - 1]",
                                                          "loss without the last k blocks minus the base loss"}));
    double sum = 0, max = -INFINITY, min = INFINITY;
    int argmax = 0;
    for (int l = 0; l < p->L; l++) {
        sum += p->delta_block[l];
        min = p->delta_block[l] < min ? p->delta_block[l] : min;
        if (p->delta_block[l] > max) {
            max = p->delta_block[l];
            argmax = l;
        }
    }
    const struct {
        const char *key;
        double value;
    } scalars[] = {
        {"base_loss", p->base},
        {"delta_mean", sum / p->L},
        {"delta_max", max},
        {"delta_max_block", argmax},
        {"delta_min", min},
        {"delta_drop_last_1", p->K ? p->delta_last[0] : NAN},
        {"delta_drop_half", p->K ? p->delta_last[p->K - 1] : NAN},
        {"n_batches", (p->n_seqs + a->batch - 1) / a->batch},
        {"n_seqs", p->n_seqs},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(scalars); i++)
        SP_TRY(sp_report_set_scalar(r, NAME, scalars[i].key, scalars[i].value));
    return SP_OK;
}

static sp_status pruning_finish(const sp_analysis *a, void *state)
{
    (void)state;
    prune_result p = {.L = a->n_layers, .K = a->n_layers / 2};
    const int64_t want = a->opts->prune_seqs ? a->opts->prune_seqs : (int64_t)a->opts->prune_batches * a->batch;
    p.n_seqs = want < a->n_seqs ? (int)want : a->n_seqs;
    double *buf = sp_malloc(2 * ((size_t)p.L + (size_t)p.K) * sizeof *buf, "pruning results");
    if (!buf)
        return SP_ERR_NOMEM;
    p.loss_block = buf;
    p.delta_block = buf + p.L;
    p.loss_last = buf + 2 * p.L;
    p.delta_last = p.loss_last + p.K;
    sp_status st = measure(a, &p);
    if (st == SP_OK)
        st = write_result(a, &p);
    free(buf);
    return st;
}

const sp_analyzer sp_analyzer_pruning = {
    .name = NAME,
    .description = "change of the evaluation loss when a block, or the last k blocks, become the identity",
    .needs = SP_NEEDS_MODEL | SP_NEEDS_EVAL_PASSES,
    .finish = pruning_finish,
};

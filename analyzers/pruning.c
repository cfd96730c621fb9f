/* analyzers/pruning.c: "pruning", layer-pruning sensitivity: the change of the evaluation loss when
 * block l is replaced by the identity (every stream), for each l, and when the last k blocks are
 * removed together, k = 1..floor(L/2). Losses are token-weighted means over the first prune_seqs
 * evaluation sequences, or (prune_seqs 0) the first prune_batches batches (analyzers/model_eval.h);
 * delta = loss - base loss.
 *
 * One forward pass per batch: the blocks before a change compute what they computed in it, so each
 * variant starts from the pass's own layer outputs (sp_model_loss_from): block l skipped is blocks
 * l+1..L-1 on h_l, the last k removed is h_{L-k} decoded. L (L - 1) / 2 block evaluations a batch
 * beside the pass's L, where a pass per variant took about (L + K) L (2.5x the work at L = 12). */
#include <math.h>
#include <stdlib.h>

#include "analyzers/dev_bufs.h"
#include "analyzers/model_eval.h"
#include "analyzers/progress.h"
#include "analyzers/ranks.h"

#define NAME "pruning"

typedef struct {
    int L, K, n_seqs;
    double base;
    double *loss_block, *delta_block; /* [L] */
    double *loss_last, *delta_last;   /* [K], entry k - 1 removes the last k blocks */
} prune_result;

/* What the passes gather: sums[0] and sums[1] the base loss times the counted targets and the
 * counted targets, sums[2 + v] variant v's loss times the counted targets (v < L: block v skipped;
 * v = L + k - 1: the last k removed). */
typedef struct {
    int L, K;
    double *sums;       /* [2 + L + K] */
    sp_real **scratch;   /* [n_streams] backend [scratch_rows, d_model] */
    int scratch_rows;
    sp_progress progress;
} prune_passes;

/* The scratch streams for rows (the first pass is the widest; grown should one not be). */
static sp_status ensure_scratch(const sp_analysis *a, prune_passes *pp, int rows)
{
    if (rows <= pp->scratch_rows)
        return SP_OK;
    sp_dev_bufs_free(a->be, pp->scratch, a->n_streams);
    pp->scratch_rows = 0;
    pp->scratch = sp_dev_bufs_alloc(a->be, a->n_streams, (size_t)rows * (size_t)a->d_model * sizeof(sp_real),
                                    "pruning scratch");
    if (!pp->scratch)
        return SP_ERR_NOMEM;
    pp->scratch_rows = rows;
    return SP_OK;
}

static sp_status visit_pass(const sp_analysis *a, const sp_eval_pass *pass, void *ctx)
{
    prune_passes *pp = ctx;
    sp_model *m = a->model;
    const int L = pp->L, n_variants = pp->L + pp->K;
    SP_TRY(ensure_scratch(a, pp, sp_model_rows(m)));
    pp->sums[0] += pass->loss * pass->count;
    pp->sums[1] += pass->count;
    for (int v = 0; v < n_variants; v++) {
        sp_progress_update(&pp->progress, (int64_t)pass->index * n_variants + v, (int64_t)pass->n_passes * n_variants);
        const int from = v < L ? v : L - (v - L + 1); /* the layer output the variant starts from */
        const sp_real *h[2] = {NULL, NULL};
        for (int k = 0; k < a->n_streams; k++)
            h[k] = sp_model_hidden(m, from, k);
        double loss;
        SP_TRY(sp_model_loss_from(m, v < L ? v + 1 : L, h, pp->scratch, pass->targets, &loss));
        pp->sums[2 + v] += loss * pass->count;
    }
    return SP_OK;
}

static sp_status measure(const sp_analysis *a, prune_result *p)
{
    prune_passes pp = {.L = p->L, .K = p->K};
    pp.sums = sp_calloc(2 + (size_t)p->L + (size_t)p->K, sizeof *pp.sums, "pruning sums");
    if (!pp.sums)
        return SP_ERR_NOMEM;
    sp_progress_start(&pp.progress, NAME, a->quiet);
    sp_status st = sp_eval_passes(a, p->n_seqs, visit_pass, &pp);
    sp_progress_end(&pp.progress);
    sp_dev_bufs_free(a->be, pp.scratch, a->n_streams);
    if (st == SP_OK)
        st = sp_analysis_sum(a, pp.sums, 2 + (size_t)p->L + (size_t)p->K);
    if (st == SP_OK) {
        const double count = pp.sums[1];
        p->base = pp.sums[0] / count;
        for (int l = 0; l < p->L; l++) {
            p->loss_block[l] = pp.sums[2 + l] / count;
            p->delta_block[l] = p->loss_block[l] - p->base;
        }
        for (int k = 0; k < p->K; k++) {
            p->loss_last[k] = pp.sums[2 + p->L + k] / count;
            p->delta_last[k] = p->loss_last[k] - p->base;
        }
    }
    free(pp.sums);
    return st;
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

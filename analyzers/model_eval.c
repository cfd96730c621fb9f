#include "analyzers/model_eval.h"

#include <stdlib.h>

#include "analyzers/ranks.h"

int sp_eval_n_batches(const sp_analysis *a) { return (a->n_seqs + a->batch - 1) / a->batch; }

/* Sequences per model pass. */
static int pass_seqs(const sp_analysis *a)
{
    return a->model_batch > 0 && a->model_batch < a->batch ? a->model_batch : a->batch;
}

/* Counted targets (>= 0) of the n sequences from `first`. */
static double count_targets(const sp_analysis *a, int first, int n)
{
    const size_t offset = (size_t)first * (size_t)a->seq_len, rows = (size_t)n * (size_t)a->seq_len;
    double count = 0;
    for (size_t r = 0; r < rows; r++)
        count += a->targets[offset + r] >= 0;
    return count;
}

/* Forward pass over the n sequences from `first` with their targets. */
static sp_status forward_seqs(const sp_analysis *a, int first, int n, double *loss)
{
    if (!a->targets)
        return sp_error(SP_ERR_INTERNAL, "model_eval: the evaluation set has no targets");
    const size_t offset = (size_t)first * (size_t)a->seq_len;
    return sp_model_forward(a->model, a->tokens + offset, a->targets + offset, n, a->seq_len, loss);
}

sp_status sp_eval_batch_gradient(const sp_analysis *a, int b, double weight, int accumulate, double *loss)
{
    const int first = b * a->batch, end = first + a->batch < a->n_seqs ? first + a->batch : a->n_seqs;
    if (!a->targets)
        return sp_error(SP_ERR_INTERNAL, "model_eval: the evaluation set has no targets");
    const double total = count_targets(a, first, end - first);
    if (total == 0)
        return sp_error(SP_ERR_INTERNAL, "model_eval: evaluation batch %d has no targets", b);
    double sum = 0;
    /* The batch's mean loss is the passes' mean losses weighted by their share of its targets. */
    for (int s = first, step = pass_seqs(a); s < end; s += step) {
        const int n = end - s < step ? end - s : step;
        const double count = count_targets(a, s, n);
        if (count == 0) /* no loss to differentiate */
            continue;
        double pass_loss;
        SP_TRY(forward_seqs(a, s, n, &pass_loss));
        SP_TRY(sp_model_backward_weighted(a->model, weight * count / total, accumulate));
        accumulate = 1;
        sum += pass_loss * count;
    }
    *loss = sum / total;
    return SP_OK;
}

sp_status sp_eval_passes(const sp_analysis *a, int n_seqs, sp_eval_visit visit, void *ctx)
{
    const int step = pass_seqs(a);
    int pass, end; /* this MPI rank's passes (analyzers/ranks.h): all of them alone */
    sp_analysis_share(a, (n_seqs + step - 1) / step, &pass, &end);
    for (sp_eval_pass p = {.n_passes = end - pass}; pass < end; pass++, p.index++) {
        const int first = pass * step, n = n_seqs - first < step ? n_seqs - first : step;
        p.count = count_targets(a, first, n);
        if (p.count == 0)
            continue;
        SP_TRY(forward_seqs(a, first, n, &p.loss));
        p.targets = a->targets + (size_t)first * (size_t)a->seq_len;
        SP_TRY(visit(a, &p, ctx));
    }
    return SP_OK;
}

double *sp_eval_param_f64(const sp_model *m, int i)
{
    const size_t n = sp_param_numel(sp_model_param_spec(m, i));
    sp_real *host = sp_malloc(n * sizeof *host, "parameter host copy");
    double *out = host ? sp_malloc(n * sizeof *out, "parameter float64 copy") : NULL;
    if (out) {
        sp_model_get_param(m, i, host);
        for (size_t j = 0; j < n; j++)
            out[j] = host[j];
    }
    free(host);
    return out;
}

double sp_eval_activation_budget(const sp_analysis *a) { return a->opts->max_memory_gib * 1073741824.0 / 2; }

int sp_eval_fit_copies(const sp_analysis *a, int want, int seq_len)
{
    const double budget = sp_eval_activation_budget(a);
    if ((double)sp_model_activation_bytes(a->model, 1, seq_len) > budget)
        return 0;
    int lo = 1, hi = want; /* activation bytes grow with the copies: the largest that fits */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if ((double)sp_model_activation_bytes(a->model, mid, seq_len) <= budget)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

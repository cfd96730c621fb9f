#include "analyzers/model_eval.h"

#include <stdlib.h>

int sp_eval_n_batches(const sp_analysis *a) { return (a->n_seqs + a->batch - 1) / a->batch; }

/* Forward pass over the n sequences from `first` with their targets. */
static sp_status forward_seqs(const sp_analysis *a, int first, int n, double *loss, double *n_targets)
{
    if (!a->targets)
        return sp_error(SP_ERR_INTERNAL, "model_eval: the evaluation set has no targets");
    const size_t offset = (size_t)first * (size_t)a->seq_len, rows = (size_t)n * (size_t)a->seq_len;
    SP_TRY(sp_model_forward(a->model, a->tokens + offset, a->targets + offset, n, a->seq_len, loss));
    if (n_targets) {
        double count = 0;
        for (size_t r = 0; r < rows; r++)
            count += a->targets[offset + r] >= 0;
        *n_targets = count;
    }
    return SP_OK;
}

sp_status sp_eval_forward_batch(const sp_analysis *a, int b, double *loss, double *n_targets)
{
    const int first = b * a->batch;
    return forward_seqs(a, first, a->n_seqs - first < a->batch ? a->n_seqs - first : a->batch, loss, n_targets);
}

sp_status sp_eval_mean_loss(const sp_analysis *a, int n_seqs, double *loss)
{
    double sum = 0, count = 0;
    for (int first = 0; first < n_seqs; first += a->batch) {
        double batch_loss, batch_count;
        SP_TRY(forward_seqs(a, first, n_seqs - first < a->batch ? n_seqs - first : a->batch, &batch_loss,
                            &batch_count));
        sum += batch_loss * batch_count;
        count += batch_count;
    }
    *loss = sum / count;
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

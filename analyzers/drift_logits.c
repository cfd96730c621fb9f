/* analyzers/drift_logits.c: the output part of a drift run (analyzers/drift.h): per evaluation
 * token, KL(p_ref || p) of the two models' next-token distributions and whether their argmax agrees.
 *
 * The backend has no softmax over a row of logits, so the logits come to the host in chunks of rows
 * (at most CHUNK_CELLS values per model) and are reduced there in fp64, with log-softmax by the
 * max-shifted log-sum-exp:
 *   KL_t = sum_v p_ref,v (log p_ref,v - log p_v),  log p = z - max z - log sum exp(z - max z).
 * Identical logits give exactly 0. The argmax is the first index of the largest logit. */
#include <math.h>
#include <stdlib.h>

#include "analyzers/drift.h"
#include "analyzers/drift_parts.h"
#include "analyzers/linalg.h"

#define CHUNK_CELLS (1 << 22)

sp_status sp_drift_logits_init(sp_drift_logits *s, const sp_backend *be, int vocab, int64_t n_tokens)
{
    *s = (sp_drift_logits){.be = be, .vocab = vocab, .cap = n_tokens};
    s->chunk_rows = vocab >= CHUNK_CELLS ? 1 : CHUNK_CELLS / vocab;
    const size_t cells = (size_t)s->chunk_rows * (size_t)vocab;
    s->ref_host = sp_malloc(cells * sizeof(sp_real), "drift logits");
    s->host = sp_malloc(cells * sizeof(sp_real), "drift logits");
    s->kl = sp_malloc((size_t)(n_tokens > 0 ? n_tokens : 1) * sizeof(double), "drift per-token KL");
    s->top1 = sp_malloc((size_t)(n_tokens > 0 ? n_tokens : 1) * sizeof(double), "drift per-token argmax");
    return s->ref_host && s->host && s->kl && s->top1 ? SP_OK : SP_ERR_NOMEM;
}

void sp_drift_logits_free(sp_drift_logits *s)
{
    free(s->ref_host);
    free(s->host);
    free(s->kl);
    free(s->top1);
    *s = (sp_drift_logits){0};
}

static void add_row(sp_drift_logits *s, const sp_real *z_ref, const sp_real *z)
{
    int arg_ref, arg;
    const double shift_ref = sp_linalg_log_softmax_shift(s->vocab, z_ref, &arg_ref);
    const double shift = sp_linalg_log_softmax_shift(s->vocab, z, &arg);
    double kl = 0;
    for (int v = 0; v < s->vocab; v++) {
        const double lp_ref = (double)z_ref[v] - shift_ref, lp = (double)z[v] - shift;
        kl += exp(lp_ref) * (lp_ref - lp);
    }
    s->kl[s->n] = kl;
    s->top1[s->n] = arg == arg_ref;
    s->n++;
}

sp_status sp_drift_logits_add(sp_drift_logits *s, const sp_model *ref, const sp_model *model, int rows)
{
    if (s->n + rows > s->cap)
        return sp_error(SP_ERR_INTERNAL, "drift: %lld tokens exceed the %lld planned", (long long)(s->n + rows),
                        (long long)s->cap);
    const sp_real *z_ref = sp_model_logits(ref), *z = sp_model_logits(model);
    const size_t V = (size_t)s->vocab;
    for (int r0 = 0; r0 < rows; r0 += s->chunk_rows) {
        const int n = rows - r0 < s->chunk_rows ? rows - r0 : s->chunk_rows;
        s->be->download(s->ref_host, z_ref + (size_t)r0 * V, (size_t)n * V * sizeof(sp_real));
        s->be->download(s->host, z + (size_t)r0 * V, (size_t)n * V * sizeof(sp_real));
        for (int r = 0; r < n; r++)
            add_row(s, s->ref_host + (size_t)r * V, s->host + (size_t)r * V);
    }
    return SP_OK;
}

sp_status sp_drift_logits_write(const sp_drift_logits *s, sp_report *r)
{
    if (s->n == 0)
        return sp_error(SP_ERR_INPUT, "drift: no evaluation tokens");
    const int64_t shape[1] = {s->n};
    SP_TRY(sp_report_write_array(r, SP_DRIFT_GROUP, "kl", 1, shape, s->kl,
                                 &(sp_report_array_attrs){"nats", "[token]",
                                                          "KL(p_ref || p) of the next-token distributions of each "
                                                          "evaluation token, sequences in order"}));
    SP_TRY(sp_report_write_array(r, SP_DRIFT_GROUP, "top1_match", 1, shape, s->top1,
                                 &(sp_report_array_attrs){"1", "[token]",
                                                          "1 where the argmax of the two models' logits agrees"}));
    double kl_sum = 0, kl_max = -INFINITY, agree = 0;
    for (int64_t t = 0; t < s->n; t++) {
        kl_sum += s->kl[t];
        kl_max = fmax(kl_max, s->kl[t]);
        agree += s->top1[t];
    }
    double q[2];
    SP_TRY(sp_linalg_quantiles(s->n, s->kl, 2, (const double[]){0.5, 0.99}, q));
    const struct {
        const char *key;
        double value;
    } scalars[] = {{"kl_mean", kl_sum / (double)s->n}, {"kl_p50", q[0]},
                   {"kl_p99", q[1]},                   {"kl_max", kl_max},
                   {"top1_agreement", agree / (double)s->n}, {"tokens", (double)s->n}};
    for (size_t i = 0; i < SP_ARRAY_LEN(scalars); i++)
        SP_TRY(sp_report_set_scalar(r, SP_DRIFT_GROUP, scalars[i].key, scalars[i].value));
    return SP_OK;
}

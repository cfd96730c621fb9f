/* model/attn_summary.c: per-head sums of the attention statistics of a forward pass (attn_summary.h).
 * The per-query values ([rows, n_heads, SP_ATTN_N_STATS] doubles, 32 bytes per row and head) come to
 * the host and are summed there in row order, so the sums are the same bits on every run. */
#include "model/attn_summary.h"

#include <math.h>
#include <stdlib.h>

struct sp_attn_summary {
    sp_model *m;
    const sp_backend *be;
    int n_heads, cap_rows;
    double *dev_stats, *host_stats; /* [cap_rows, n_heads, SP_ATTN_N_STATS] */
    double *dev_cos, *host_cos;     /* [n_heads, n_heads] */
};

void sp_attn_head_sums_init(sp_attn_head_sums *sums, int n)
{
    for (int h = 0; h < n; h++)
        sums[h] = (sp_attn_head_sums){.max_logit = -INFINITY};
}

static size_t stats_bytes(const sp_attn_summary *s, int rows)
{
    return (size_t)rows * (size_t)s->n_heads * SP_ATTN_N_STATS * sizeof(double);
}

/* (Re)allocates the per-query buffers for rows rows. */
static sp_status reserve_rows(sp_attn_summary *s, int rows)
{
    if (rows <= s->cap_rows)
        return SP_OK;
    if (s->dev_stats)
        s->be->free(s->dev_stats);
    free(s->host_stats);
    s->cap_rows = 0;
    s->dev_stats = s->be->alloc(stats_bytes(s, rows), "attention statistics");
    s->host_stats = sp_malloc(stats_bytes(s, rows), "attention statistics");
    if (!s->dev_stats || !s->host_stats)
        return SP_ERR_NOMEM;
    s->cap_rows = rows;
    return SP_OK;
}

sp_status sp_attn_summary_create(sp_model *m, int max_rows, sp_attn_summary **out)
{
    sp_attn_summary *s = sp_calloc(1, sizeof *s, "attention summary");
    *out = s;
    if (!s)
        return SP_ERR_NOMEM;
    s->m = m;
    s->be = sp_model_backend(m);
    s->n_heads = sp_model_config(m)->n_heads;
    const size_t bytes = (size_t)s->n_heads * (size_t)s->n_heads * sizeof(double);
    s->dev_cos = s->be->alloc(bytes, "attention head cosines");
    s->host_cos = sp_malloc(bytes, "attention head cosines");
    if (!s->dev_cos || !s->host_cos)
        return SP_ERR_NOMEM;
    return reserve_rows(s, max_rows);
}

void sp_attn_summary_free(sp_attn_summary *s)
{
    if (!s)
        return;
    if (s->dev_stats)
        s->be->free(s->dev_stats);
    if (s->dev_cos)
        s->be->free(s->dev_cos);
    free(s->host_stats);
    free(s->host_cos);
    free(s);
}

sp_status sp_attn_summary_add(sp_attn_summary *s, int l, int first_pos, sp_attn_head_sums *sums, double *head_cos)
{
    const sp_real *q, *k;
    sp_attn_shape shape;
    SP_TRY(sp_model_attention_qk(s->m, l, &q, &k, &shape));
    const int T = shape.seq_len, H = s->n_heads, rows = shape.batch * T;
    SP_TRY(reserve_rows(s, rows));
    if (head_cos)
        s->be->zero(s->dev_cos, (size_t)H * (size_t)H * sizeof(double));
    SP_TRY(s->be->attn_stats(&shape, q, k, first_pos, s->dev_stats, head_cos ? s->dev_cos : NULL));
    SP_TRY(sp_model_sync(s->m));
    s->be->download(s->host_stats, s->dev_stats, stats_bytes(s, rows));
    for (int r = 0; r < rows; r++) {
        const int i = r % T;
        if (i < first_pos)
            continue;
        const int keys = shape.window > 0 && shape.window < i + 1 ? shape.window : i + 1;
        for (int h = 0; h < H; h++) {
            const double *v = s->host_stats + ((size_t)r * H + h) * SP_ATTN_N_STATS;
            sp_attn_head_sums *sum = &sums[h];
            sum->queries++;
            sum->entropy += v[SP_ATTN_ENTROPY];
            sum->sink += v[SP_ATTN_SINK];
            sum->distance += v[SP_ATTN_DISTANCE];
            if (isnan(v[SP_ATTN_MAX_LOGIT]) || v[SP_ATTN_MAX_LOGIT] > sum->max_logit) /* a NaN stays */
                sum->max_logit = v[SP_ATTN_MAX_LOGIT];
            if (keys > 1) {
                sum->multi_key++;
                sum->entropy_normalized += v[SP_ATTN_ENTROPY] / log((double)keys);
            }
        }
    }
    if (!head_cos)
        return SP_OK;
    s->be->download(s->host_cos, s->dev_cos, (size_t)H * (size_t)H * sizeof(double));
    for (int e = 0; e < H * H; e++)
        head_cos[e] += s->host_cos[e];
    return SP_OK;
}

/* model/attn_summary.h: the attention statistics of the last forward pass, per block and head, on
 * the host: be->attn_stats (kernels/backend.h) on the block's q and k (sp_model_attention_qk), its
 * per-query values brought back and summed per head over the queries at positions >= first_pos.
 * What the attention analyzer (analyzers/attention.c) and the training log (train/train.c) read. */
#ifndef SP_ATTN_SUMMARY_H
#define SP_ATTN_SUMMARY_H

#include "model/model.h"

/* One head's sums over the queries counted. */
typedef struct {
    int64_t queries;           /* queries counted */
    int64_t multi_key;         /* of them, those that see at least two keys */
    double entropy;            /* sum of -sum_j P_ij ln P_ij (nats) */
    double entropy_normalized; /* sum over the multi_key queries of that entropy / ln(visible keys) */
    double sink;               /* sum of P_i0 */
    double distance;           /* sum of sum_j P_ij (i - j) (positions) */
    double max_logit;          /* the largest score as the softmax sees it (-inf before any query) */
} sp_attn_head_sums;

/* n empty sums. */
void sp_attn_head_sums_init(sp_attn_head_sums *sums, int n);

typedef struct sp_attn_summary sp_attn_summary;

/* Buffers for passes of up to max_rows rows (more are taken by growing them). */
sp_status sp_attn_summary_create(sp_model *m, int max_rows, sp_attn_summary **out);
/* Adds block l of the last forward pass into sums [n_heads], and with head_cos (NULL: not
 * computed, which saves a gemm per query row) the cosines between the heads' rows P_h,i, summed
 * over the multi_key queries counted, into head_cos [n_heads, n_heads]. */
sp_status sp_attn_summary_add(sp_attn_summary *s, int l, int first_pos, sp_attn_head_sums *sums, double *head_cos);
void sp_attn_summary_free(sp_attn_summary *s);

#endif

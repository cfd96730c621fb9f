/* tests/support/attn_ref.h: what the "attention" analyzer (analyzers/attention.c) reports, from the
 * definitions of docs/metrics.md, naive and in double: one forward pass of the model over the whole
 * evaluation set, every block's q and k brought to the host (sp_model_attention_qk), and for every
 * sequence, query and head the scores, soft-cap, window mask and softmax written out, O(T^2) per
 * head, without the backend's attn_stats. Aborts when the setup fails (tests only). */
#ifndef SP_TEST_ATTN_REF_H
#define SP_TEST_ATTN_REF_H

#include "tests/support/an_run.h"

/* The analyzer through the analyze driver (an_run_execute) on ATTN_REF_SEQS random sequences of
 * seq_len tokens in batches of ATTN_REF_BATCH (the last one shorter), the first `skip` positions
 * of each left out (--skip-positions), into the report <scratch>/<file>; r is then open on it. */
#define ATTN_REF_SEQS 5
#define ATTN_REF_BATCH 2
void attn_ref_run(an_run *r, sp_model *m, int seq_len, int skip, uint64_t seed, const char *file);
/* attn_ref_run without skipped positions and, when skip > 0, again with `skip`; each time every
 * array of the report and every summary key against the reference: values within tol, relative to
 * max(|value|, 1) (so probabilities, cosines and normalized entropies absolutely), the query count
 * and the blocks and heads of the extremes equal. */
void attn_ref_check(sp_model *m, int seq_len, int skip, uint64_t seed, double tol, const char *name);

#endif

/* tests/support/act_dump.h: synthetic activation dumps for analyzer tests. The caller gives the
 * hidden states (and optionally FFN latents and pre-normalization sums) as host arrays; they are
 * written with io/dump.h so the analyze driver reads them like any dump. Tokens are all 0. Aborts
 * on failure (tests only). */
#ifndef SP_TEST_ACT_DUMP_H
#define SP_TEST_ACT_DUMP_H

#include "analyzers/analyzer.h"

typedef struct {
    int n_layers, d_model, n_streams, d_ff, batch, seq_len;
    /* [(n_layers + 1) * n_streams] arrays of [batch * seq_len, d_model], index layer * n_streams + stream */
    sp_real *const *hidden;
    /* NULL (no latents in the dump) or [n_layers] arrays of [batch * seq_len, d_ff] */
    sp_real *const *latent;
    /* NULL (no such sum in the dump) or [n_layers] arrays of [batch * seq_len, d_model], with NULL
     * entries for the blocks that have no such sum (recorded as absent layers) */
    sp_real *const *sum_a, *const *sum_z;
} act_dump_spec;

void act_dump_write(const char *path, const act_dump_spec *spec);
/* Runs `analyze` (analyzers/driver.h) on the dump with opts on the CPU, quietly, into report_path;
 * aborts unless it succeeds. */
void act_dump_analyze(const char *dump_path, const char *report_path, const sp_analyze_options *opts);

#endif

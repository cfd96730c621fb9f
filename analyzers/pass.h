/* analyzers/pass.h: the streaming pass of the analyze driver (private to analyzers/driver.c and
 * analyzers/pass.c). A pass walks the evaluation set batch by batch: for a checkpoint one forward
 * pass per batch (no targets) whose capture points become the batch, for a dump the reads of the
 * arrays the analyzers need into backend buffers. */
#ifndef SP_PASS_H
#define SP_PASS_H

#include "analyzers/analyzer.h"

struct sp_act_batch {
    int rows, first_seq, seq_len, n_layers, n_streams;
    const int32_t *targets;          /* [rows], host; NULL for a dump */
    const sp_real **hidden;          /* [(L + 1) * n_streams], layer-major */
    const sp_real **latent;          /* [L] */
    const sp_real **sum_a, **sum_z;  /* [L] */
};

struct sp_pass {
    sp_act_batch batch;
    unsigned load;        /* SP_NEEDS_* arrays read from a dump */
    const sp_backend *be;
    sp_real **bufs;       /* dump: backend buffers, one per array and layer */
    int n_bufs;
    sp_real *staging;     /* dump: host rows of one array */
    sp_real *kept;        /* with skip_positions: backend, the kept rows of one sequence of one array */
    int32_t *kept_targets; /* with skip_positions: host, the batch's kept targets */
    int quiet;
    double seconds_input; /* forward passes or dump reads, over every pass so far */
};

/* load: the union of the needs of the analyzers that consume batches. */
sp_status sp_pass_init(struct sp_pass *p, const sp_analysis *a, unsigned load, int quiet);
void sp_pass_free(struct sp_pass *p);
/* One walk over the evaluation set of a (a->pass must be set), calling fn on every batch;
 * `label` names the walk in progress lines. */
sp_status sp_pass_run(const sp_analysis *a, const char *label, sp_batch_fn fn, void *ctx);

#endif

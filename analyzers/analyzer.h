/* analyzers/analyzer.h: the one interface every diagnostic implements, and what it runs against.
 *
 * `spanprobe analyze` builds an sp_analysis (the input: a model on an evaluation set, or an
 * activation dump; the options; the report being written), then runs the selected analyzers:
 *   1. begin() of every selected analyzer (allocate its accumulators),
 *   2. ONE streaming pass over the evaluation set: for each batch the driver runs the model forward
 *      (or reads the dump) and hands the same sp_act_batch to every consume(),
 *   3. finish() of every analyzer: finalize, write its arrays and summary scalars into the report.
 * Analyzers that need no pass (weights) or drive the model themselves (gradients, Jacobians,
 * pruning) have begin/consume NULL and do their work in finish(). An analyzer whose needs the input
 * cannot meet is recorded in the report's /skipped group with the reason, never silently dropped.
 *
 * Analyzers compute through the backend table (a->be) and download only small results, so the same
 * code runs on the CPU and on the GPU. Covariances are totalled in fp64 on the backend, and every
 * eigen and singular value is computed there in fp64 (be->sym_eigvals / be->singvals: LAPACK on the
 * CPU, cuSOLVER on CUDA), batched over the matrices of one shape; only the values come back.
 */
#ifndef SP_ANALYZER_H
#define SP_ANALYZER_H

#include "core/fields.h"
#include "io/dump.h"
#include "io/report.h"
#include "kernels/backend.h"
#include "model/model.h"

typedef struct {
    char metrics[SP_FIELD_STRING_MAX]; /* comma-separated analyzer names; "" = all */
    int64_t n_tokens;   /* evaluation tokens (checkpoint input) */
    int seq_len;        /* evaluation sequence length (0 = min(max_seq_len, 256)) */
    int batch;          /* sequences per forward pass */
    int64_t seed;       /* evaluation windows and random probes */
    int topk;           /* Jacobian top-k singular values */
    int power_iters;    /* power-iteration cap */
    double power_tol;   /* power-iteration relative-change stop */
    int jac_tokens;     /* tokens sampled for token-local Jacobians */
    int jac_seq;        /* Jacobian sequence length cap (0 = the evaluation seq_len) */
    int center;         /* cosine: subtract each layer's mean vector */
    int last_token;     /* cosine: last token of each sequence only */
    int cka_debiased;   /* CKA: debiased HSIC estimator */
    int cka_pairs_per_pass; /* CKA: layer pairs accumulated per pass (0: as many as a quarter of
                               max_memory_gib holds); more pairs take more passes */
    int grad_batches;   /* batches for gradient norms */
    int prune_batches;  /* batches for pruning sensitivity */
    int prune_seqs;     /* sequences for pruning sensitivity instead (0: prune_batches batches) */
    int singular_values; /* weights: also store every matrix's full singular values */
    int embed_uncentered; /* embed_spectrum: second moment of the rows instead of their covariance */
    double max_memory_gib; /* backend memory budget: the batch is cut so activations take at most half */
    int skip_positions;   /* the first positions of every sequence left out of what pools tokens */
    int curv_seqs;        /* curvature: evaluation sequences of the loss whose Hessian is taken */
    int curv_iters;       /* curvature: power-iteration cap */
    int hutchinson_samples; /* curvature: Rademacher probes of each block's trace */
} sp_analyze_options;

extern const sp_field_table sp_analyze_option_table;
void sp_analyze_options_defaults(sp_analyze_options *o);
/* Checks every range (SP_ERR_USAGE naming the option; `where` prefixes the message). */
sp_status sp_analyze_options_validate(const sp_analyze_options *o, const char *where);

/* What an analyzer needs from the input. */
enum {
    SP_NEEDS_ACTIVATIONS = 1u << 0, /* hidden states (a model or a dump) */
    SP_NEEDS_LATENTS = 1u << 1,     /* FFN latents */
    SP_NEEDS_PRESUMS = 1u << 2,     /* pre-normalization sums */
    SP_NEEDS_MODEL = 1u << 3,       /* weights and the ability to run passes (a checkpoint) */
    SP_NEEDS_EVAL_PASSES = 1u << 4  /* with MODEL: runs passes over the evaluation set itself, model_batch
                                       sequences at a time (analyzers/model_eval.h) */
};

typedef struct sp_act_batch sp_act_batch;

typedef struct {
    const sp_backend *be;
    sp_model *model;        /* NULL when the input is a dump */
    sp_dump *dump;          /* NULL when the input is a checkpoint */
    int n_layers, n_streams, d_model, d_ff, vocab_size;
    int has_latents, has_presums;
    /* The evaluation set: n_seqs sequences of seq_len tokens, host memory, in batches of `batch`. */
    const int32_t *tokens;
    const int32_t *targets; /* next-token targets [n_seqs * seq_len], -1 where none (the first
                               skip_positions of each sequence too); NULL for dumps */
    int n_seqs, seq_len, batch;
    /* Sequences per forward (+ backward) pass of the analyzers that drive the model themselves
     * (gradients, pruning; analyzers/model_eval.h): batch, or fewer where the parameter gradients
     * would otherwise push those passes past the memory of one pass of batch (driver.c). 0: batch.
     * Results do not depend on it beyond rounding: losses and gradients stay per `batch`. */
    int model_batch;
    /* --skip-positions: the streaming pass's batches hold positions skip_positions..seq_len-1 of each
     * sequence only (seq_len - skip_positions rows per sequence: sp_batch_seq_len), so every
     * analyzer that pools tokens leaves the first ones out (attention sinks, which can dominate such
     * statistics: docs/metrics.md, growth); the losses leave out their targets. */
    int skip_positions;
    const sp_analyze_options *opts;
    sp_report *report;
    int quiet;              /* no progress lines from analyzers whose finish() takes long (analyzers/progress.h) */
    struct sp_pass *pass;   /* the driver's streaming pass (private to analyzers/driver.c; NULL outside it) */
    int rank, n_ranks;      /* this process among the MPI ranks sharing the analysis (analyzers/ranks.h);
                               n_ranks 0 or 1: alone */
    double t_start;         /* sp_clock_seconds() when the command began (0: when execute began): the stage
                               table's total then counts loading, hashing and checking the input */
} sp_analysis;

/* One batch of the streaming pass; backend memory, valid only during consume(). rows = sequences
 * in this batch x seq_len. Accessors return NULL where the input has no such array. */
int sp_batch_rows(const sp_act_batch *b);
int sp_batch_first_seq(const sp_act_batch *b); /* index of the batch's first sequence */
int sp_batch_seq_len(const sp_act_batch *b);   /* rows per sequence: seq_len - skip_positions */
/* The next-token targets of the batch's rows (host, [rows], -1 where none); NULL for a dump. */
const int32_t *sp_batch_targets(const sp_act_batch *b);
const sp_real *sp_batch_hidden(const sp_act_batch *b, int layer, int stream); /* [rows, d_model], l = 0..L */
const sp_real *sp_batch_latent(const sp_act_batch *b, int layer);             /* [rows, d_ff], l = 0..L-1 */
const sp_real *sp_batch_presum(const sp_act_batch *b, int layer, const char *name); /* "sum_a"/"sum_z" */

/* Runs the streaming pass again over the whole evaluation set, calling fn on every batch, for an
 * analyzer that needs a statistic of the whole set before its own pass (e.g. centering by the mean).
 * Valid only inside finish() of an analysis run by the driver (SP_ERR_INTERNAL otherwise). */
typedef sp_status (*sp_batch_fn)(const sp_analysis *a, void *ctx, const sp_act_batch *b);
sp_status sp_analysis_replay(const sp_analysis *a, sp_batch_fn fn, void *ctx);

typedef struct {
    const char *name;        /* report group and --metrics name */
    const char *description;
    unsigned needs;
    int opt_in;              /* runs only when --metrics names it (expensive), not in the default set */
    sp_status (*begin)(const sp_analysis *a, void **state);
    sp_status (*consume)(const sp_analysis *a, void *state, const sp_act_batch *b);
    /* Writes results into a->report; frees state whatever the outcome. */
    sp_status (*finish)(const sp_analysis *a, void *state);
    /* Frees state when the run fails before finish() (NULL when begin is NULL). */
    void (*discard)(void *state);
} sp_analyzer;

/* The registry, in report order (analyzers/registry.c). */
extern const sp_analyzer *const sp_analyzers[];
extern const int sp_n_analyzers;

#endif

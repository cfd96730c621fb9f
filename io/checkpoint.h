/* io/checkpoint.h: spanprobe checkpoints (HDF5), format "spanprobe-checkpoint", version 1.1 (1.1
 * added the "hf-json" tokenizer; 1.0 files read unchanged).
 * The layout is specified in docs/formats.md and in the header comment of io/checkpoint.c.
 *
 * A checkpoint holds the full model config (/config attributes, every field of core/config.h),
 * every parameter under /params/<name> as float32 [out, in] (names from model/params.h),
 * optionally the tokenizer (/tokenizer), the AdamW state (/optim/m/<name>, /optim/v/<name>) and
 * the training state (/train), plus provenance attributes on the root (tool version, creation time,
 * source). Writers are atomic (temp file in the same directory, fsync, rename): a failure leaves
 * no partial file. Readers validate everything: format name, major version, every dataset's
 * presence, rank, shape, dtype class and finiteness, and the config's consistency.
 */
#ifndef SP_CHECKPOINT_H
#define SP_CHECKPOINT_H

#include "core/config.h"
#include "io/atomic.h"
#include "io/tokenizer.h"
#include "model/model.h"

#define SP_CKPT_FORMAT "spanprobe-checkpoint"
#define SP_CKPT_VERSION_MAJOR 1
#define SP_CKPT_VERSION_MINOR 1

typedef struct {
    int present;             /* 0: no /train group */
    int64_t step;            /* optimizer steps done */
    int64_t tokens_seen;
    uint64_t rng_state[4];   /* core/rng.h state */
    int64_t data_position;   /* next read offset into the training data */
    double lr;               /* learning rate of the last step */
    char status[16];         /* "running", "done" or "diverged" */
    int64_t diverged_step;   /* -1 unless diverged */
    char *options_json;      /* the resolved training options (owned, may be NULL) */
} sp_train_state;

typedef struct {
    sp_config cfg;
    int has_tokenizer;
    sp_tokenizer tokenizer;
    char source[512];        /* provenance: how the weights came to be ("init --seed 1", "import llama2c ...") */
    char created[32];        /* ISO 8601 UTC, set by the writer */
    char tool_version[32];   /* set by the writer */
    sp_train_state train;
} sp_ckpt_meta;

void sp_ckpt_meta_init(sp_ckpt_meta *meta);
void sp_ckpt_meta_free(sp_ckpt_meta *meta);

/* Writes the model's parameters (and, when adam_m/adam_v are non-NULL, one backend buffer per
 * parameter each) with meta. Atomic. */
sp_status sp_ckpt_write(const char *path, const sp_model *m, const sp_ckpt_meta *meta, sp_real *const *adam_m,
                        sp_real *const *adam_v);
/* The same into the temporary file of af, left uncommitted (several files committed together:
 * io/output_set.h). */
sp_status sp_ckpt_write_into(sp_atomic_file *af, const sp_model *m, const sp_ckpt_meta *meta, sp_real *const *adam_m,
                             sp_real *const *adam_v);
/* Reads and validates meta only (config, tokenizer, provenance, training state). */
sp_status sp_ckpt_read_meta(const char *path, sp_ckpt_meta *meta);
/* Reads meta, creates the model on `be` and loads every parameter, rejecting NaN/Inf. */
sp_status sp_ckpt_load(const char *path, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta);
/* Loads the AdamW state into one backend buffer per parameter (error when the file has none). */
sp_status sp_ckpt_load_optim(const char *path, const sp_model *m, sp_real *const *adam_m, sp_real *const *adam_v);

#endif

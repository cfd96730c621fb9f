/* train/options.h: the options of a training run, as a field table (core/fields.h).
 *
 * Every field is a CLI option (--batch-size 16) and a key of a JSON config file; the resolved options
 * (with the model config) are stored as JSON in every checkpoint, so a run can be resumed and
 * reproduced from its checkpoint alone. sp_train_options_resolve() turns "derived" values into
 * concrete ones (seq_len 0 -> the model's max_seq_len, a token budget -> a step count).
 */
#ifndef SP_TRAIN_OPTIONS_H
#define SP_TRAIN_OPTIONS_H

#include "core/config.h"
#include "core/fields.h"

/* The default corpus, fetched by `make data` (tools/fetch_data.sh). */
#define SP_TRAIN_DEFAULT_DATA "data/mobydick.txt"

typedef struct {
    char data[SP_FIELD_STRING_MAX]; /* training text, byte-level tokens */
    double val_fraction;            /* the last part of the text held out for validation */
    int batch_size;                 /* sequences per micro-batch */
    int seq_len;                    /* tokens per sequence; 0: the model's max_seq_len */
    int grad_accum;                 /* micro-batches per optimizer step */
    int64_t steps;                  /* optimizer steps */
    int64_t tokens;                 /* token budget; > 0 sets steps (then resolved back to 0) */
    double lr;                      /* peak learning rate */
    double min_lr;                  /* end of the cosine decay */
    int64_t warmup_steps;           /* linear warm-up from lr/warmup_steps to lr */
    double beta1, beta2, adam_eps;
    double weight_decay;            /* decoupled, on tensors whose sp_param_spec.decay is set */
    double grad_clip;               /* global gradient norm limit; 0: off */
    int64_t seed;                   /* model init and data order */
    int64_t log_every;              /* steps between log rows */
    int64_t eval_every;             /* steps between validation losses */
    int eval_windows;               /* fixed validation windows evaluated each time */
    int64_t ckpt_every;             /* steps between checkpoints (one is always written at the end) */
    int keep;                       /* checkpoints kept in the output directory */
    int device;                     /* sp_train_device */
} sp_train_options;

typedef enum { SP_DEVICE_AUTO, SP_DEVICE_CPU, SP_DEVICE_CUDA } sp_train_device;
extern const char *const sp_device_names[]; /* "auto", "cpu", "cuda" */

extern const sp_field_table sp_train_options_table;

void sp_train_options_defaults(sp_train_options *opt);
/* Fills derived values for the model cfg (which must be resolved) and checks every range; errors
 * are SP_ERR_USAGE naming the option ("where: batch_size = 0 ..."). */
sp_status sp_train_options_resolve(sp_train_options *opt, const sp_config *cfg, const char *where);
/* Tokens consumed by one optimizer step. */
int64_t sp_train_tokens_per_step(const sp_train_options *opt);

/* The model config and the options as one flat JSON object (the --config file format); free(). */
char *sp_train_options_to_json(const sp_config *cfg, const sp_train_options *opt);
/* Applies the keys of such a JSON object (text) onto cfg and opt; `where` names its origin. */
sp_status sp_train_options_from_json(const char *text, const char *where, sp_config *cfg, sp_train_options *opt);
/* The first field of the table (model config first, then options) whose value differs between a
 * and b, skipping the fields named in `allowed` (NULL-terminated); NULL when none differs.
 * Writes both values (formatted) into va/vb. */
const sp_field *sp_train_options_diff(const sp_config *cfg_a, const sp_train_options *a, const sp_config *cfg_b,
                                      const sp_train_options *b, const char *const *allowed, char *va, char *vb,
                                      size_t len);

#endif

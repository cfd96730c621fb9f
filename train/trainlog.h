/* train/trainlog.h: the training log, HDF5 format "spanprobe-trainlog" 1.1, plus a CSV for quick looks.
 *
 * One row per logged step. The HDF5 file (docs/formats.md, docs/training.md) holds one dataset per
 * column, so h5py reads it as f["train_loss"][:]:
 *
 *   /                  attrs format, format_version "1.0", tool_version, created, source;
 *                      status ("running" | "done" | "diverged"), diverged_step (int64, -1),
 *                      unigram_entropy (float64, nats: of the training split's tokens),
 *                      final_val_loss (float64, nats; NaN until the run ends), options_json (string)
 *   /step, /tokens_seen                      int64 [rows]
 *   /train_loss, /val_loss, /lr, /grad_norm, /tokens_per_s   float64 [rows] (val_loss NaN when not
 *                                             evaluated at that row)
 *   /attn_entropy_min, /attn_max_logit        float64 [rows] (since 1.1; a 1.0 log reads as NaN)
 *   /tensor_grad_norm, /update_ratio          float64 [rows, n_tensors]
 *   /tensor_names                             fixed-length strings [n_tensors] (model/params.h names)
 *   /hidden_rms                               float64 [rows, n_layers + 1]
 *
 * The training loop keeps the log in memory, appends each row to the CSV as it goes, and writes the
 * HDF5 file atomically before each checkpoint; a resumed run reads it back, drops the rows after its
 * checkpoint and rewrites the CSV from it, so a kill at any moment leaves both consistent.
 */
#ifndef SP_TRAINLOG_H
#define SP_TRAINLOG_H

#include <stdio.h>

#include "core/common.h"
#include "io/atomic.h"
#include "model/params.h"

#define SP_TRAINLOG_FORMAT "spanprobe-trainlog"
#define SP_TRAINLOG_VERSION_MAJOR 1
#define SP_TRAINLOG_VERSION_MINOR 1

/* The scalar columns, in file and CSV order. */
typedef enum {
    SP_LOG_STEP,         /* optimizer steps done */
    SP_LOG_TOKENS_SEEN,  /* training tokens consumed */
    SP_LOG_TRAIN_LOSS,   /* nats/token: mean cross-entropy of this step's batch */
    SP_LOG_VAL_LOSS,     /* nats/token on the fixed validation windows; NaN when not evaluated */
    SP_LOG_LR,           /* learning rate of this step */
    SP_LOG_GRAD_NORM,    /* global L2 norm of the gradient, before clipping */
    SP_LOG_TOKENS_PER_S, /* training throughput since the previous row */
    /* Of this step's (last micro-)batch, over every block and head (model/attn_summary.h): entropy
     * collapse shows first here (Zhai et al. 2023). */
    SP_LOG_ATTN_ENTROPY_MIN, /* nats: the least mean attention entropy of a head */
    SP_LOG_ATTN_MAX_LOGIT,   /* the largest attention score, as the softmax sees it */
    SP_LOG_N_SCALARS
} sp_log_column;

extern const char *const sp_log_column_names[]; /* "step", "tokens_seen", ... */

typedef struct {
    int n_tensors;
    char (*tensor_names)[SP_PARAM_NAME_MAX];
    int n_hidden;                        /* n_layers + 1 */
    int64_t n_rows, cap;
    double *col[SP_LOG_N_SCALARS];       /* [cap] each */
    double *tensor_grad_norm;            /* [cap, n_tensors] */
    double *update_ratio;                /* [cap, n_tensors] ||delta W|| / ||W|| of this step */
    double *hidden_rms;                  /* [cap, n_hidden] RMS of h_0 .. h_L */
    char status[16];
    int64_t diverged_step;
    double unigram_entropy, final_val_loss;
    char *options_json;                  /* owned */
} sp_trainlog;

/* An empty log for tensors named names[n_tensors] (NULL: empty names) and n_hidden hidden states. */
sp_status sp_trainlog_init(sp_trainlog *log, int n_tensors, const char *const *names, int n_hidden);
void sp_trainlog_free(sp_trainlog *log);
/* Appends a row: scalars [SP_LOG_N_SCALARS], per-tensor arrays [n_tensors], hidden_rms [n_hidden]. */
sp_status sp_trainlog_append(sp_trainlog *log, const double *scalars, const double *tensor_grad_norm,
                             const double *update_ratio, const double *hidden_rms);
/* Drops the rows whose step is after max_step. */
void sp_trainlog_truncate(sp_trainlog *log, int64_t max_step);

/* HDF5, atomic. */
sp_status sp_trainlog_write(const sp_trainlog *log, const char *path);
/* The same into the temporary file of af, left uncommitted (io/output_set.h). */
sp_status sp_trainlog_write_into(const sp_trainlog *log, sp_atomic_file *af);
/* Reads and validates a log (format, version, every dataset's shape). */
sp_status sp_trainlog_read(const char *path, sp_trainlog *log);

/* CSV: the scalar columns then hidden_rms_0 .. hidden_rms_L; NaN as an empty field. */
void sp_trainlog_csv_header(const sp_trainlog *log, FILE *f);
void sp_trainlog_csv_row(const sp_trainlog *log, int64_t row, FILE *f);
/* Rewrites the whole CSV atomically from the log. */
sp_status sp_trainlog_write_csv(const sp_trainlog *log, const char *path);

#endif

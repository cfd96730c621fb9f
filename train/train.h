/* train/train.h: the reference training loop (docs/training.md).
 *
 * A run lives in one output directory:
 *   ckpt_<step, 8 digits>.h5   checkpoints (io/checkpoint.h): weights, AdamW state, and the training
 *                              state (step, tokens seen, data position, the data order generator's
 *                              state, lr, status, the resolved options as JSON); the newest `keep`
 *   trainlog.h5, trainlog.csv  the training log (train/trainlog.h)
 *   train_options.json         the run's resolved options, the same JSON as a checkpoint's, written
 *                              atomically before the first step of a start without a checkpoint
 *
 * Exact resume: the data order is a function of (seed, position), the learning rate of the step, and
 * the rest is in the checkpoint, so a run killed at any moment and resumed from its newest checkpoint
 * computes bit-identical losses and weights on the same backend.
 *
 * Resume from any moment: before its first checkpoint a run is resumed from train_options.json,
 * from step 0, which computes what the killed run would have: the model is initialized from the
 * seed and every later draw is a function of saved state. A run killed before even that file was
 * written left nothing of itself (at most the lock file and temporary files, in a directory that
 * exists): it is restarted from the options on the command line. (Treating any "no checkpoint" as
 * a fresh start from the command line would make `--resume DIR` without options train the defaults
 * instead of the killed run, and `--resume` of a directory of other files start a run there; a
 * directory that does not exist is refused as a likely typo.)
 *
 * Failure: a run that fails (an error; a divergence is a result) takes back what no checkpoint
 * vouches for: the CSV rows after the newest checkpoint are cut, and in a directory without any
 * checkpoint the logs are removed, and train_options.json when this run created it. The HDF5 log
 * and each checkpoint are committed together (io/output_set.h), so a full disk never leaves one
 * without the other. Checkpoints already committed are results and stay, as does the lock file.
 *
 * Divergence (a non-finite loss, gradient or weight) is a result: the run stops, writes a checkpoint
 * of the last finite weights with status "diverged", records it in the log, and returns
 * SP_ERR_DIVERGED.
 */
#ifndef SP_TRAIN_H
#define SP_TRAIN_H

#include "io/checkpoint.h"
#include "train/options.h"

#define SP_TRAIN_LOG_NAME "trainlog.h5"
#define SP_TRAIN_CSV_NAME "trainlog.csv"
#define SP_TRAIN_OPTIONS_NAME "train_options.json"

/* Path of the newest checkpoint in dir whose metadata reads and validates, and that metadata
 * (sp_ckpt_meta_free it). SP_ERR_INPUT naming dir when there is none. */
sp_status sp_train_latest_checkpoint(const char *dir, char *path, size_t len, sp_ckpt_meta *meta);

/* What `--resume dir` continues from: *ckpt gets the newest valid checkpoint ("" before the first),
 * *options_json the run's resolved options (free()): the checkpoint's, else train_options.json's,
 * else NULL when dir holds nothing but a lock file and temporary files (a run stopped before it
 * wrote anything); *step the
 * checkpoint's step (0 without one). SP_ERR_INPUT naming dir when it holds no run. */
sp_status sp_train_find_resume(const char *dir, char *ckpt, size_t len, char **options_json, int64_t *step);

/* Trains the model cfg with opt (both resolved) into out_dir, created when missing; resume_from is
 * the checkpoint to continue from (NULL: from step 0, and out_dir must hold no checkpoint).
 * Progress goes to stderr, the final summary to stdout. */
sp_status sp_train_run(const sp_config *cfg, const sp_train_options *opt, const char *out_dir,
                       const char *resume_from);
/* The same run shared by every MPI rank of this job (core/mpi.h; one rank: sp_train_run): each step's
 * grad_accum micro-batches dealt round-robin over the ranks (grad_accum a multiple of their number),
 * their gradients and losses summed on the host, the same AdamW step on every rank; rank 0 alone
 * writes the directory. The same data order and mean gradient as one process with that grad_accum,
 * so a run may be resumed on any number of ranks that divides it. The CPU backend only. */
sp_status sp_train_run_mpi(const sp_config *cfg, const sp_train_options *opt, const char *out_dir,
                           const char *resume_from);

#endif

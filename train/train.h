/* train/train.h: the reference training loop (docs/training.md).
 *
 * A run lives in one output directory:
 *   ckpt_<step, 8 digits>.h5   checkpoints (io/checkpoint.h): weights, AdamW state, and the training
 *                              state (step, tokens seen, data position, the data order generator's
 *                              state, lr, status, the resolved options as JSON); the newest `keep`
 *   trainlog.h5, trainlog.csv  the training log (train/trainlog.h)
 *
 * Exact resume: the data order is a function of (seed, position), the learning rate of the step, and
 * the rest is in the checkpoint, so a run killed at any moment and resumed from its newest checkpoint
 * computes bit-identical losses and weights on the same backend.
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

/* Path of the newest checkpoint in dir whose metadata reads and validates, and that metadata
 * (sp_ckpt_meta_free it). SP_ERR_INPUT naming dir when there is none. */
sp_status sp_train_latest_checkpoint(const char *dir, char *path, size_t len, sp_ckpt_meta *meta);

/* Trains the model cfg with opt (both resolved) into out_dir, created when missing; resume_from is
 * the checkpoint to continue from (NULL: a fresh run, and out_dir must hold no checkpoint).
 * Progress goes to stderr, the final summary to stdout. */
sp_status sp_train_run(const sp_config *cfg, const sp_train_options *opt, const char *out_dir,
                       const char *resume_from);

#endif

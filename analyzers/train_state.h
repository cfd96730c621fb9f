/* analyzers/train_state.h: the training state of an analyzed checkpoint, carried into its report.
 *
 * A checkpoint written by `spanprobe train` holds /train (io/checkpoint.h): its status ("running",
 * "done" or "diverged") and step. `analyze` copies it into the summary group "train", so that
 * `spanprobe check` can fail a report of a diverged run without the checkpoint at hand:
 *   metrics.train.step, tokens_seen   the optimizer steps and training tokens behind the weights
 *   metrics.train.diverged            1 when the run diverged (the weights are the last finite ones)
 *   metrics.train.diverged_step       the step that produced a non-finite value; -1 unless diverged
 *   metrics.train.done                1 when the run finished its steps
 * Nothing is recorded for a checkpoint without /train (e.g. `init`, `import`) or for a dump.
 */
#ifndef SP_AN_TRAIN_STATE_H
#define SP_AN_TRAIN_STATE_H

#include "io/checkpoint.h"
#include "io/report.h"

#define SP_TRAIN_STATE_GROUP "train"

sp_status sp_analyze_record_train_state(sp_report *r, const sp_train_state *ts);

#endif

/* study/summary.h: the summary table of a study: per run its status, final losses and headline
 * metrics of its report, and per model and learning rate the spread over seeds with the best
 * learning rate marked, as OUT/summary.md (printed too) and OUT/summary.csv. */
#ifndef SP_STUDY_SUMMARY_H
#define SP_STUDY_SUMMARY_H

#include "study/presets.h"

/* The final validation loss of the run in dir (its training log), SP_ERR_INPUT when it has none. */
sp_status sp_study_final_val_loss(const char *dir, double *loss);

sp_status sp_study_write_summary(const char *out, const char *preset, int n_runs, const sp_study_run_spec *runs,
                                 const char *const *dirs, const int *diverged);

#endif

/* study/summary.h: the summary table of a study: per run its status, final losses and headline
 * metrics of its report, as OUT/summary.md (printed too) and OUT/summary.csv. */
#ifndef SP_STUDY_SUMMARY_H
#define SP_STUDY_SUMMARY_H

#include "study/presets.h"

sp_status sp_study_write_summary(const char *out, const char *preset, int n_runs, const sp_study_run_spec *runs,
                                 const char *const *dirs, const int *diverged);

#endif

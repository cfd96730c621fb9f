/* study/bound_table.h: the SpanNorm Jacobian bound (paper appendix A) against the measured block
 * Jacobian norm, from each analyzed run's `jacobian` report: per block in CSV, per run in markdown
 * (where the bound holds, where it is loose, where it fails). */
#ifndef SP_STUDY_BOUND_TABLE_H
#define SP_STUDY_BOUND_TABLE_H

#include "plots/text_buf.h"
#include "study/presets.h"

/* A bound more than this many times the measured norm is called loose. */
#define SP_BOUND_LOOSE_RATIO 10.0

/* Appends the markdown section to md and the per-block rows to csv (with its header) for every run
 * whose report holds a finite bound; runs without one are left out. */
void sp_study_bound_table(sp_text *md, sp_text *csv, int n_runs, const sp_study_run_spec *runs,
                          const char *const *dirs, const int *diverged);

#endif

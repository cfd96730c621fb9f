/* study/study.h: `spanprobe study` as a library call: a preset set of runs trained, each analyzed,
 * every figure drawn and a summary table written, resuming where it stopped.
 *
 *   OUT/runs/<run>/   the run (train/train.h: checkpoints, trainlog.h5, trainlog.csv) and its
 *                     report.h5 + report.json (analyzers/driver.h) of the final checkpoint
 *   OUT/figures/      every figure (plots/plot.h) over all runs
 *   OUT/summary.md    the summary table (also printed), and OUT/summary.csv
 *
 * Before it starts it prints every planned run and an estimate of the time left (from each run's
 * training FLOPs at an assumed throughput), and after each run the time left at the throughput
 * measured so far.
 *
 * Resume: a run whose newest checkpoint says "done" or "diverged" is not trained again, one with
 * checkpoints continues from the newest (exactly, train/train.h), a run with a report is not analyzed
 * again; figures and summary are always redrawn. A run directory holding a run with other options
 * is an error naming the option, so two presets can share OUT only where their runs agree. */
#ifndef SP_STUDY_H
#define SP_STUDY_H

#include "core/common.h"

typedef struct {
    const char *preset;   /* NULL: "quick" */
    const char *out;      /* the study directory */
    const char *data;     /* training and evaluation text; NULL: data/mobydick.txt */
    const char *device;   /* "auto", "cpu" or "cuda"; NULL: auto */
    unsigned formats;     /* figure formats (plots/plot.h SP_PLOT_*); 0: PNG */
    const char *lrs;      /* comma-separated learning rates replacing the preset's; NULL: the preset's */
    const char *seeds;    /* comma-separated seeds replacing the preset's; NULL: the preset's */
    int scale;            /* 0 or 1: the preset's sizes; N: width, depth and steps times N */
    int jobs;             /* runs trained at a time, each in a worker process; 0: one per OpenMP thread
                             on the CPU (a group's runs spread over the cores), 1 where a GPU may be used */
} sp_study_options;

int sp_study_preset_count(void);
const char *sp_study_preset_name(int i);
const char *sp_study_preset_description(int i);

sp_status sp_study_run(const sp_study_options *opt);

#endif

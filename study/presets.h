/* study/presets.h: the presets of `spanprobe study` and the runs they expand to (private to study/). */
#ifndef SP_STUDY_PRESETS_H
#define SP_STUDY_PRESETS_H

#include "analyzers/analyzer.h"
#include "core/config.h"
#include "train/options.h"

typedef struct {
    const char *name, *description;
    /* comma-separated lists; the runs are their product, variant outermost, lr innermost */
    const char *variants, *inits, *depths, *lrs;
    const char *train_json;   /* model and training keys every run shares (the --config format) */
    const char *analyze_json; /* analysis options (spanprobe analyze --config format) */
} sp_study_preset;

typedef struct {
    char name[160];           /* its directory below OUT/runs: "span-L8-scaled-lr0.003" */
    sp_config cfg;            /* resolved */
    sp_train_options opt;     /* resolved */
} sp_study_run_spec;

extern const sp_study_preset sp_study_presets[];
extern const int sp_study_n_presets;

/* NULL when there is none. */
const sp_study_preset *sp_study_find_preset(const char *name);
/* The runs of preset p, with the data file and device applied (free() *runs). */
sp_status sp_study_expand(const sp_study_preset *p, const char *data, const char *device, sp_study_run_spec **runs,
                          int *n_runs);
/* The preset's analysis options. */
sp_status sp_study_analyze_options(const sp_study_preset *p, sp_analyze_options *o);

#endif

/* study/presets.h: the presets of `spanprobe study` and the runs they expand to (private to study/).
 *
 * A preset is up to SP_STUDY_MAX_GROUPS groups of runs sharing its model, training and analysis
 * settings; each group is the product of its lists (variant outermost, seed innermost). A group
 * whose lrs is "best" trains each variant at the learning rate of the lowest mean final validation
 * loss among the earlier sweeping groups' runs of that variant, whatever their init (a sweep first,
 * then the runs a verdict rests on): it is expanded once the earlier groups have finished. A run
 * that an earlier group already made (same name) is not made again. */
#ifndef SP_STUDY_PRESETS_H
#define SP_STUDY_PRESETS_H

#include "analyzers/analyzer.h"
#include "core/config.h"
#include "train/options.h"

#define SP_STUDY_MAX_GROUPS 4
#define SP_STUDY_BEST_LR "best"

typedef struct {
    /* comma-separated lists; seeds NULL: the training default seed (1), and no "-s" in run names */
    const char *variants, *inits, *depths, *lrs, *seeds;
    const char *name; /* presets of several groups: the figures of the group's runs go to figures/<name>/ */
} sp_study_group;

typedef struct {
    const char *name, *description;
    sp_study_group groups[SP_STUDY_MAX_GROUPS]; /* in order; the first with variants NULL ends them */
    const char *train_json;   /* model and training keys every run shares (the --config format) */
    const char *analyze_json; /* analysis options (spanprobe analyze --config format) */
} sp_study_preset;

/* What the command line changes in a preset's runs. */
typedef struct {
    const char *data, *device; /* NULL: the training defaults */
    const char *lrs;           /* replaces the lr list of every group that has one (not "best") */
    const char *seeds;         /* replaces the seed list of every group */
    int scale;                 /* > 1: d_model, d_ff, n_heads, n_kv_heads, every depth and the steps
                                  multiplied by it (the head size and the learning rates stay) */
} sp_study_overrides;

typedef struct {
    char name[208];           /* its directory below OUT/runs: "span-L8-scaled-lr0.003", "...-s2" */
    char variant[32], init[32], lr[32];
    int group;                /* the preset group it belongs to */
    sp_config cfg;            /* resolved */
    sp_train_options opt;     /* resolved */
} sp_study_run_spec;

/* The learning rate (its text, as in the preset's lists) that won for variant among the finished
 * sweep runs, written into lr; SP_ERR_INPUT naming the variant when no such run finished. */
typedef sp_status (*sp_study_best_lr_fn)(void *ctx, const char *variant, const char *init, char *lr, size_t len);

extern const sp_study_preset sp_study_presets[];
extern const int sp_study_n_presets;

/* NULL when there is none. */
const sp_study_preset *sp_study_find_preset(const char *name);
int sp_study_n_groups(const sp_study_preset *p);
/* The runs of group g (free() *runs). best resolves "best" learning rates; best NULL (planning):
 * such runs take lr 1e-3 and "best" as their lr text and name (their cost does not depend on it). */
sp_status sp_study_expand_group(const sp_study_preset *p, int g, const sp_study_overrides *ov,
                                sp_study_best_lr_fn best, void *ctx, sp_study_run_spec **runs, int *n_runs);
/* The preset's analysis options. */
sp_status sp_study_analyze_options(const sp_study_preset *p, sp_analyze_options *o);

#endif

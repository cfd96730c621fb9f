/* study/study.c: `spanprobe study`: train, analyze, draw, summarize; every stage skips what an
 * earlier (interrupted) invocation finished. */
#include "study/study.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyzers/driver.h"
#include "io/dirs.h"
#include "plots/plot.h"
#include "study/presets.h"
#include "study/summary.h"
#include "train/train.h"

#define REPORT_NAME "report.h5"

int sp_study_preset_count(void) { return sp_study_n_presets; }
const char *sp_study_preset_name(int i) { return sp_study_presets[i].name; }
const char *sp_study_preset_description(int i) { return sp_study_presets[i].description; }

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Options a run directory's checkpoints must share with the preset's run (where it computes may differ). */
static const char *const may_differ[] = {"device", NULL};

static sp_status check_same_run(const sp_study_run_spec *run, const char *dir, const char *ckpt, const char *json)
{
    sp_config cfg;
    sp_train_options opt;
    sp_config_defaults(&cfg);
    sp_train_options_defaults(&opt);
    char where[4300], was[SP_FIELD_STRING_MAX], now[SP_FIELD_STRING_MAX];
    snprintf(where, sizeof where, "%s: /train/options_json", ckpt);
    SP_TRY(sp_train_options_from_json(json, where, &cfg, &opt));
    const sp_field *f = sp_train_options_diff(&cfg, &opt, &run->cfg, &run->opt, may_differ, was, now, sizeof was);
    if (f)
        return sp_error(SP_ERR_USAGE, "%s: holds a run with %s = %s where this study's run has %s (another study's "
                        "run: choose another --out)", dir, f->name, was, now);
    return SP_OK;
}

/* Trains the run in dir unless an earlier invocation finished it; *diverged says how it ended. */
static sp_status train_run(const sp_study_run_spec *run, const char *dir, const char *tag, int *diverged)
{
    *diverged = 0;
    char ckpt[4200];
    sp_ckpt_meta meta;
    const char *resume = NULL;
    if (sp_train_latest_checkpoint(dir, ckpt, sizeof ckpt, &meta) == SP_OK) {
        sp_status st = check_same_run(run, dir, ckpt, meta.train.options_json);
        const int done = strcmp(meta.train.status, "done") == 0 && meta.train.step >= run->opt.steps;
        *diverged = strcmp(meta.train.status, "diverged") == 0;
        const long long step = (long long)(*diverged ? meta.train.diverged_step : meta.train.step);
        sp_ckpt_meta_free(&meta);
        SP_TRY(st);
        if (done || *diverged) {
            printf("study: %s: trained earlier (%s at step %lld)\n", tag, *diverged ? "diverged" : "done", step);
            return SP_OK;
        }
        printf("study: %s: resuming training from step %lld\n", tag, step);
        resume = ckpt;
    } else {
        sp_error_clear(); /* no checkpoint yet: a fresh run */
        printf("study: %s: training %lld steps\n", tag, (long long)run->opt.steps);
    }
    fflush(stdout);
    sp_status st = sp_train_run(&run->cfg, &run->opt, dir, resume);
    if (st == SP_ERR_DIVERGED) {
        printf("study: %s: %s (a result: recorded, not analyzed)\n", tag, sp_error_message());
        sp_error_clear();
        *diverged = 1;
        return SP_OK;
    }
    return st;
}

/* Analyzes the run's final checkpoint into dir/report.h5 unless that exists. */
static sp_status analyze_run(const sp_study_run_spec *run, const sp_analyze_options *aopt, const char *dir,
                             const char *tag)
{
    char report[4200], ckpt[4200];
    snprintf(report, sizeof report, "%s/%s", dir, REPORT_NAME);
    if (file_exists(report)) {
        printf("study: %s: analyzed earlier (%s)\n", tag, report);
        return SP_OK;
    }
    sp_ckpt_meta meta;
    SP_TRY(sp_train_latest_checkpoint(dir, ckpt, sizeof ckpt, &meta));
    sp_ckpt_meta_free(&meta);
    printf("study: %s: analyzing %s\n", tag, ckpt);
    fflush(stdout);
    sp_analyze_job job = {.input = ckpt, .out = report, .data = run->opt.data,
                          .device = sp_device_names[run->opt.device], .quiet = 1, .opts = *aopt};
    return sp_analyze_run(&job);
}

static sp_status draw(const sp_study_options *o, int n_runs, const char *const *dirs)
{
    char figures[4200];
    snprintf(figures, sizeof figures, "%s/figures", o->out);
    sp_plot_options popt;
    sp_plot_options_defaults(&popt);
    popt.out_dir = figures;
    popt.formats = o->formats ? o->formats : SP_PLOT_PNG;
    popt.quiet = 1;
    sp_plot_result res;
    SP_TRY(sp_plot_run(n_runs, dirs, &popt, &res));
    printf("study: %d figures in %s (%d skipped)\n", res.drawn, figures, res.skipped);
    return SP_OK;
}

static sp_status run_all(const sp_study_options *o, const sp_study_preset *p, const sp_study_run_spec *runs, int n,
                         char **dirs, int *diverged)
{
    sp_analyze_options aopt;
    SP_TRY(sp_study_analyze_options(p, &aopt));
    char path[4200];
    snprintf(path, sizeof path, "%s/runs", o->out);
    SP_TRY(sp_make_dirs(o->out));
    SP_TRY(sp_make_dirs(path));
    printf("study %s: %d runs into %s (interrupted? run the same command again to continue)\n", p->name, n, o->out);
    for (int k = 0; k < n; k++) {
        char tag[224];
        snprintf(tag, sizeof tag, "run %d/%d %s", k + 1, n, runs[k].name);
        snprintf(path, sizeof path, "%s/runs/%s", o->out, runs[k].name);
        if (!(dirs[k] = strdup(path)))
            return sp_error(SP_ERR_NOMEM, "study: out of memory");
        SP_TRY(train_run(&runs[k], dirs[k], tag, &diverged[k]));
        if (!diverged[k])
            SP_TRY(analyze_run(&runs[k], &aopt, dirs[k], tag));
    }
    SP_TRY(draw(o, n, (const char *const *)dirs));
    return sp_study_write_summary(o->out, p->name, n, runs, (const char *const *)dirs, diverged);
}

sp_status sp_study_run(const sp_study_options *o)
{
    const char *name = o->preset ? o->preset : "quick";
    const sp_study_preset *p = sp_study_find_preset(name);
    if (!p) {
        char names[256] = "";
        for (int i = 0; i < sp_study_n_presets; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", sp_study_presets[i].name);
        return sp_error(SP_ERR_USAGE, "--preset: unknown preset '%s' (expected one of: %s)", name, names);
    }
    if (!o->out || !*o->out)
        return sp_error(SP_ERR_USAGE, "expected --out DIR");
    sp_study_run_spec *runs;
    int n;
    SP_TRY(sp_study_expand(p, o->data, o->device, &runs, &n));
    if (!file_exists(runs[0].opt.data)) {
        sp_status st = sp_error(SP_ERR_IO, "%s: no such file (the default corpus: `make data`; or give --data FILE)",
                                runs[0].opt.data);
        free(runs);
        return st;
    }
    char **dirs = calloc((size_t)n, sizeof *dirs);
    int *diverged = calloc((size_t)n, sizeof *diverged);
    sp_status st = dirs && diverged ? run_all(o, p, runs, n, dirs, diverged) : sp_error(SP_ERR_NOMEM, "study: out of memory");
    for (int k = 0; dirs && k < n; k++)
        free(dirs[k]);
    free(dirs);
    free(diverged);
    free(runs);
    return st;
}

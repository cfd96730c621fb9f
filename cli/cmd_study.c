/* cli/cmd_study.c: `spanprobe study [--preset NAME] --out DIR [--data FILE] [--device D] [--format LIST]
 * [--lrs LIST] [--seeds LIST] [--scale N]`
 * (study/study.h; docs/figures/README.md). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "plots/plot.h"
#include "study/study.h"

static void print_help(void)
{
    printf("usage: spanprobe study [--preset NAME] --out DIR [--data FILE] [--device cpu|cuda|auto] [--format LIST]\n"
           "                       [--lrs LIST] [--seeds LIST] [--scale N] [--jobs N]\n\n"
           "Trains the preset's runs, analyzes each final checkpoint, draws every figure over all runs and\n"
           "writes a summary table (final losses, diverged runs, headline metrics, the spread over seeds and\n"
           "the best learning rate of each model). It prints the planned runs and an estimated time first,\n"
           "and the time left after each run. Interrupted, the same command continues where it stopped:\n"
           "finished runs and reports are not redone.\n\n"
           "options:\n"
           "  --preset NAME   the set of runs [quick]\n"
           "  --out DIR       the study directory: runs/<run>/ (checkpoints, trainlog, report), figures/,\n"
           "                  summary.md, summary.csv\n"
           "  --data FILE     training and evaluation text [data/mobydick.txt, `make data`]\n"
           "  --device NAME   cpu, cuda or auto [auto]\n"
           "  --format LIST   figure formats, comma-separated: png, pdf, svg [png]\n"
           "  --lrs LIST      learning rates, comma-separated, for every run group of the preset that has\n"
           "                  its own (groups at lr 'best' take their variant's best rate of the earlier groups)\n"
           "  --seeds LIST    seeds, comma-separated, for every run group (run names end in -s<seed>)\n"
           "  --scale N       width (d_model, d_ff, heads), every depth and the steps times N, for a GPU [1]\n"
           "  --jobs N        runs trained at a time, each in its own process with its share of the threads\n"
           "                  [one per OpenMP thread on the CPU; 1 where a GPU may be used]\n"
           "\npresets:\n");
    for (int i = 0; i < sp_study_preset_count(); i++)
        printf("  %-10s %s\n", sp_study_preset_name(i), sp_study_preset_description(i));
    printf("\nexit codes: 0 ok (diverged runs are results), 2 usage, 3 bad input, 5 I/O, 8 out of memory (docs/cli.md)\n");
}

static sp_status parse_args(int argc, char **argv, sp_study_options *o)
{
    *o = (sp_study_options){0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *value = NULL, *scale = NULL, *jobs = NULL;
        const char **target = strcmp(a, "--preset") == 0   ? &o->preset
                              : strcmp(a, "--out") == 0    ? &o->out
                              : strcmp(a, "--data") == 0   ? &o->data
                              : strcmp(a, "--device") == 0 ? &o->device
                              : strcmp(a, "--format") == 0 ? &value
                              : strcmp(a, "--lrs") == 0    ? &o->lrs
                              : strcmp(a, "--seeds") == 0  ? &o->seeds
                              : strcmp(a, "--scale") == 0  ? &scale
                              : strcmp(a, "--jobs") == 0   ? &jobs
                                                           : NULL;
        if (!target)
            return sp_error(SP_ERR_USAGE, strncmp(a, "--", 2) == 0 ? "unknown option '%s'" : "unexpected argument '%s'", a);
        SP_TRY(sp_cli_option_value(argc, argv, &i, target));
        if (value)
            SP_TRY(sp_plot_parse_formats(value, &o->formats));
        long n;
        if (scale) {
            SP_TRY(sp_cli_parse_long("--scale", scale, 1, 64, &n));
            o->scale = (int)n;
        }
        if (jobs) {
            SP_TRY(sp_cli_parse_long("--jobs", jobs, 1, 256, &n));
            o->jobs = (int)n;
        }
    }
    if (!o->out)
        return sp_error(SP_ERR_USAGE, "expected --out DIR");
    return SP_OK;
}

int sp_cmd_study(int argc, char **argv)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    sp_error_clear();
    sp_study_options o;
    sp_status st = parse_args(argc, argv, &o);
    if (st == SP_OK)
        st = sp_study_run(&o);
    if (st == SP_ERR_USAGE)
        return sp_cli_usage_error("study", "%s", sp_error_message());
    return sp_cli_report("study", st);
}

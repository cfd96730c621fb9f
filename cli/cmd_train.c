/* cli/cmd_train.c: `spanprobe train [options] --out DIR` and `spanprobe train --resume DIR`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "train/train.h"

static void print_help(void)
{
    printf("usage: spanprobe train [model options] [training options] [--config FILE.json] --out DIR\n"
           "       spanprobe train --resume DIR [--steps N]\n\n"
           "Trains a model on a text file (byte tokens, vocab 256) with AdamW, a linear warm-up and a cosine\n"
           "decay, writing checkpoints and a training log into DIR (docs/training.md).\n\n"
           "run options:\n"
           "  --out DIR          output directory (created when missing; must hold no checkpoint)\n"
           "  --resume DIR       continue the run in DIR from its newest valid checkpoint (before the first one:\n"
           "                     from step 0); its options come from the checkpoint (or DIR/train_options.json),\n"
           "                     and only --steps/--tokens (to extend it) and --device may differ\n"
           "  --config FILE      JSON object of model and training keys (the names below, with '_');\n"
           "                     options on the command line override it\n\n");
    sp_train_options def;
    sp_train_options_defaults(&def);
    sp_cli_print_fields_help("training options [default]:", &sp_train_options_table, &def);
    printf("\n");
    sp_cli_print_config_help();
    printf("\noutput in DIR: ckpt_<step>.h5 (the newest --keep), trainlog.h5 (format spanprobe-trainlog),\n"
           "trainlog.csv, train_options.json (the options, for a resume before the first checkpoint);\n"
           "progress on stderr; the final validation loss next to the unigram entropy on stdout.\n"
           "exit codes: 0 done, 2 bad option, 3 bad input, 5 I/O error, 6 training diverged (recorded in the\n"
           "log and the last checkpoint), 8 out of memory (docs/cli.md)\n");
}

/* Fields a resumed run may change: the length of the run and where it computes. */
static const char *const resume_may_change[] = {"steps", "tokens", "device", NULL};

/* Loads the options of the run being resumed into cfg and opt (train.h, "Resume from any moment"):
 * from its newest checkpoint (*ckpt, *step), else from its train_options.json (*ckpt "", step 0);
 * *stored = 0 when it was stopped before it wrote anything: then the defaults, which the command
 * line completes as for a fresh run. */
static sp_status load_resumed_options(const char *dir, char *ckpt, size_t len, sp_config *cfg,
                                      sp_train_options *opt, int64_t *step, int *stored)
{
    char *json;
    SP_TRY(sp_train_find_resume(dir, ckpt, len, &json, step));
    sp_config_defaults(cfg);
    sp_train_options_defaults(opt);
    *stored = json != NULL;
    if (!json) {
        fprintf(stderr, "spanprobe train: %s: the run stopped before it wrote anything: starting it at step 0 with the "
                "options on this command line\n", dir);
        return SP_OK;
    }
    char where[4200];
    if (ckpt[0])
        snprintf(where, sizeof where, "%s: /train/options_json", ckpt);
    else
        snprintf(where, sizeof where, "%s/%s", dir, SP_TRAIN_OPTIONS_NAME);
    sp_status st = sp_train_options_from_json(json, where, cfg, opt);
    free(json);
    if (st == SP_OK && !ckpt[0])
        fprintf(stderr, "spanprobe train: %s: no checkpoint yet: starting the run again at step 0 with its options (%s)\n",
                dir, SP_TRAIN_OPTIONS_NAME);
    return st;
}

/* Applies --config files and --<field> options of both tables on top of cfg and opt, and resolves. */
static sp_status parse_options(int argc, char **argv, unsigned char *consumed, sp_config *cfg, sp_train_options *opt)
{
    const sp_field_table *tables[] = {&sp_config_table, &sp_train_options_table};
    void *objs[] = {cfg, opt};
    SP_TRY(sp_cli_load_config_files(argc, argv, consumed, 2, tables, objs));
    SP_TRY(sp_cli_parse_fields(argc, argv, consumed, &sp_config_table, cfg));
    SP_TRY(sp_cli_parse_fields(argc, argv, consumed, &sp_train_options_table, opt));
    for (int i = 1; i < argc; i++)
        if (!consumed[i])
            return sp_error(SP_ERR_USAGE, "unknown option '%s' (see spanprobe train --help)", argv[i]);
    SP_TRY(sp_config_resolve(cfg));
    sp_status st = sp_config_validate(cfg, "model options");
    SP_TRY(st == SP_ERR_INPUT ? SP_ERR_USAGE : st);
    return sp_train_options_resolve(opt, cfg, "training options");
}

/* A resumed run must not change what it computes: every option equal to the stored one except
 * resume_may_change, and the step count not below the checkpoint's. */
static sp_status check_resume(const sp_config *cfg0, const sp_train_options *opt0, const sp_config *cfg,
                              const sp_train_options *opt, int64_t step)
{
    char was[SP_FIELD_STRING_MAX], now[SP_FIELD_STRING_MAX];
    const sp_field *f = sp_train_options_diff(cfg0, opt0, cfg, opt, resume_may_change, was, now, sizeof was);
    if (f)
        return sp_error(SP_ERR_USAGE, "--%s %s differs from the resumed run's %s (a resumed run keeps its options; "
                        "only --steps, --tokens and --device may change)", f->name, now, was);
    if (opt->steps < step)
        return sp_error(SP_ERR_USAGE, "--steps %lld is below the checkpoint's step %lld", (long long)opt->steps,
                        (long long)step);
    return SP_OK;
}

static sp_status run(int argc, char **argv, unsigned char *consumed)
{
    const char *out = NULL, *resume = NULL;
    for (int i = 1; i < argc; i++) {
        const char **target = strcmp(argv[i], "--out") == 0 ? &out : strcmp(argv[i], "--resume") == 0 ? &resume : NULL;
        if (!target)
            continue;
        if (i + 1 >= argc)
            return sp_error(SP_ERR_USAGE, "%s needs a directory", argv[i]);
        *target = argv[i + 1];
        consumed[i] = consumed[i + 1] = 1;
        i++;
    }
    if (!out && !resume)
        return sp_error(SP_ERR_USAGE, "--out DIR is required (see spanprobe train --help)");
    if (out && resume && strcmp(out, resume) != 0)
        return sp_error(SP_ERR_USAGE, "--out %s and --resume %s name different directories", out, resume);
    sp_config cfg0, cfg;
    sp_train_options opt0, opt;
    char ckpt[4096];
    int64_t step = 0;
    int stored = 0; /* the resumed run's options are on disk: the command line must agree with them */
    if (resume) {
        SP_TRY(load_resumed_options(resume, ckpt, sizeof ckpt, &cfg0, &opt0, &step, &stored));
        cfg = cfg0;
        opt = opt0;
    } else {
        sp_config_defaults(&cfg);
        sp_train_options_defaults(&opt);
    }
    SP_TRY(parse_options(argc, argv, consumed, &cfg, &opt));
    if (stored)
        SP_TRY(check_resume(&cfg0, &opt0, &cfg, &opt, step));
    return sp_train_run_mpi(&cfg, &opt, resume ? resume : out, resume && ckpt[0] ? ckpt : NULL);
}

int sp_cmd_train(int argc, char **argv)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    unsigned char *consumed = calloc((size_t)argc, 1);
    if (!consumed)
        return sp_cli_report("train", sp_error(SP_ERR_NOMEM, "out of memory parsing options"));
    sp_status st = run(argc, argv, consumed);
    free(consumed);
    return sp_cli_report("train", st);
}

/* cli/cmd_analyze.c: `spanprobe analyze INPUT --out REPORT [options]`: every diagnostic of
 * docs/metrics.md on a checkpoint (run on an evaluation set) or an activation dump, into a report
 * (analyzers/driver.h; docs/analyze.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/autoscale.h"
#include "analyzers/driver.h"
#include "cli/cli.h"
#include "core/input_file.h"
#include "core/mpi.h"

static void print_help(void)
{
    printf("usage: spanprobe analyze INPUT --out REPORT.h5 [--metrics LIST] [--data FILE | --tokens FILE]\n"
           "                         [--n-tokens N] [--seq T] [--seed S] [--device cpu|cuda|auto] [--csv DIR]\n"
           "                         [--config FILE.json] [analysis options]\n\n"
           "Runs the diagnostics of docs/metrics.md on INPUT and writes an HDF5 report (every raw per-layer\n"
           "array, with units and shapes) and a JSON summary beside it (stable keys; docs/analyze.md).\n"
           "INPUT is a checkpoint, run on an evaluation set, or an activation dump (`spanprobe dump`, or any\n"
           "framework's, docs/formats.md): then only the metrics that need no weights run, and the report\n"
           "records which were skipped and why. The report appears only when every analyzer finished.\n\n"
           "run options:\n"
           "  --out REPORT.h5  the report; the summary is REPORT.json\n"
           "  --data FILE      evaluation text for a checkpoint: its validation split (last 10%%), tokenized\n"
           "                   with the checkpoint's tokenizer [%s]\n"
           "  --tokens FILE    evaluation token ids instead (whitespace-separated integers; all of them)\n"
           "  --seq T          the same as --seq-len T\n"
           "  --device NAME    cpu, cuda or auto (cuda when a GPU is visible) [auto]\n"
           "  --csv DIR        also write every report array as DIR/<analyzer>.<array>.csv\n"
           "  --quiet          no progress lines and no stage table\n"
           "  --config FILE    JSON object of analysis options (the names below, with '_')\n\n",
           SP_ANALYZE_DEFAULT_DATA);
    sp_analyze_options def;
    sp_analyze_options_defaults(&def);
    sp_cli_print_fields_help("analysis options [default]:", &sp_analyze_option_table, &def);
    printf("  n_tokens, power_iters, jac_seq and prune_seqs, when not given (or -1), are scaled down for a large\n"
           "  model from its FLOPs, never from a clock; the report records the values used (docs/analyze.md)\n");
    printf("\nanalyzers (--metrics, comma-separated; default all but the opt-in ones):\n");
    for (int i = 0; i < sp_n_analyzers; i++)
        printf("  %-16s %s%s\n", sp_analyzers[i]->name, sp_analyzers[i]->description,
               sp_analyzers[i]->opt_in ? " (opt-in)" : "");
    printf("\n`mpirun -np N spanprobe analyze ...` shares the analysis among N ranks (their evaluation batches\n"
           "and per-block work; rank 0 writes the report; docs/scaling.md).\n"
           "progress goes to stderr; the stage times and the peak memory to stdout.\n"
           "exit codes: 0 ok, 2 usage, 3 bad input, 4 NaN/Inf, 5 I/O, 8 out of memory (docs/cli.md)\n");
}

/* The options that are not analysis fields; consumed[] marks what they take. */
static sp_status parse_run_options(int argc, char **argv, unsigned char *consumed, sp_analyze_job *job,
                                   const char **seq)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quiet") == 0) {
            job->quiet = consumed[i] = 1;
            continue;
        }
        const char **target = strcmp(a, "--out") == 0      ? &job->out
                              : strcmp(a, "--data") == 0   ? &job->data
                              : strcmp(a, "--tokens") == 0 ? &job->tokens
                              : strcmp(a, "--device") == 0 ? &job->device
                              : strcmp(a, "--csv") == 0    ? &job->csv_dir
                              : strcmp(a, "--seq") == 0    ? seq
                                                           : NULL;
        if (!target)
            continue;
        SP_TRY(sp_cli_option_value(argc, argv, &i, target));
        consumed[i - 1] = consumed[i] = 1;
    }
    return SP_OK;
}

static sp_status parse_args(int argc, char **argv, unsigned char *consumed, sp_analyze_job *job)
{
    *job = (sp_analyze_job){.device = "auto"};
    sp_analyze_options_auto(&job->opts);
    const char *seq = NULL;
    SP_TRY(parse_run_options(argc, argv, consumed, job, &seq));
    const sp_field_table *tables[] = {&sp_analyze_option_table};
    void *objs[] = {&job->opts};
    SP_TRY(sp_cli_load_config_files(argc, argv, consumed, 1, tables, objs));
    SP_TRY(sp_cli_parse_fields(argc, argv, consumed, &sp_analyze_option_table, &job->opts));
    if (seq)
        SP_TRY(sp_fields_set(&sp_analyze_option_table, &job->opts, "seq_len", seq, "--seq"));
    for (int i = 1; i < argc; i++) {
        if (consumed[i])
            continue;
        if (strncmp(argv[i], "--", 2) == 0)
            return sp_error(SP_ERR_USAGE, "unknown option '%s'", argv[i]);
        SP_TRY(sp_cli_take_argument(argv[i], &job->input, "input"));
    }
    if (!job->input)
        return sp_error(SP_ERR_USAGE, "expected an input: a checkpoint or an activation dump");
    if (!job->out)
        return sp_error(SP_ERR_USAGE, "expected --out REPORT.h5");
    if (job->data && job->tokens)
        return sp_error(SP_ERR_USAGE, "expected at most one of --data FILE and --tokens FILE");
    SP_TRY(sp_analyze_options_validate(&job->opts, "analysis options"));
    sp_read_budget_set((uint64_t)(job->opts.max_memory_gib * 1073741824.0));
    return SP_OK;
}

int sp_cmd_analyze(int argc, char **argv)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    sp_error_clear();
    unsigned char *consumed = calloc((size_t)argc, 1);
    if (!consumed)
        return sp_cli_report("analyze", sp_error(SP_ERR_NOMEM, "out of memory parsing options"));
    sp_analyze_job job;
    sp_status st = parse_args(argc, argv, consumed, &job);
    free(consumed);
    if (st == SP_ERR_USAGE)
        return sp_cli_usage_error("analyze", "%s", sp_error_message());
    if (st != SP_OK)
        return sp_cli_report("analyze", st);
    job.rank = sp_mpi_rank(); /* under mpirun the ranks share the one analysis */
    job.n_ranks = sp_mpi_size();
    return sp_cli_report("analyze", sp_analyze_run(&job));
}

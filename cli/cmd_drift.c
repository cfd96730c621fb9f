/* cli/cmd_drift.c: `spanprobe drift REF MODEL --out REPORT.h5 [options]`: where, layer by layer, a
 * model (a quantized copy, say) departs from a reference of the same shape (analyzers/drift.h;
 * docs/cli.md, docs/metrics.md "drift"). */
#include <stdio.h>
#include <string.h>

#include "analyzers/driver.h"
#include "analyzers/drift.h"
#include "cli/cli.h"
#include "core/input_file.h"

static void print_help(void)
{
    sp_drift_job def;
    sp_drift_job_defaults(&def);
    printf("usage: spanprobe drift REF MODEL --out REPORT.h5 [--data FILE | --tokens FILE] [--n-tokens N]\n"
           "                       [--seq T] [--batch B] [--seed S] [--device cpu|cuda|auto] [--max-memory-gib G]\n"
           "                       [--quiet]\n\n"
           "Runs REF and MODEL (checkpoints, Hugging Face directories or GGUF files of one shape: the same layers,\n"
           "widths and vocabulary) on the same evaluation tokens and writes a report of how MODEL departs from\n"
           "REF (docs/metrics.md, \"drift\"): per layer output the relative error ||h - h_ref|| / ||h_ref||, the\n"
           "mean cosine and the linear CKA of the hidden states; per block the relative error of every weight\n"
           "matrix in the Frobenius and the spectral norm (also the embeddings and the head); at the output the\n"
           "per-token KL(p_ref || p) of the next-token distributions (mean, p50, p99, max) and the top-1\n"
           "agreement. `spanprobe plot REPORT.h5` draws the `drift` figure; `spanprobe check` rules can gate on\n"
           "drift/<array> and summary:drift.<key> (docs/check.md).\n\n"
           "options:\n"
           "  --out REPORT.h5     the report; the summary is REPORT.json (neither may replace an input)\n"
           "  --data FILE         evaluation text, tokenized with REF's tokenizer: its validation split (last\n"
           "                      10%%), as analyze takes it [%s]\n"
           "  --tokens FILE       evaluation token ids instead (whitespace-separated integers; all of them)\n"
           "  --n-tokens N        evaluation tokens [%lld]\n"
           "  --seq T             tokens per sequence (0: min(max_seq_len, 256)) [0]\n"
           "  --batch B           sequences per forward pass [%d]\n"
           "  --seed S            seed of the evaluation windows [%lld]\n"
           "  --device NAME       cpu, cuda or auto (cuda when a GPU is visible) [auto]\n"
           "  --max-memory-gib G  backend memory budget: the activations of both models take at most half [%g]\n"
           "  --quiet             no progress lines on stderr and no summary on stdout\n\n"
           "exit codes: 0 ok, 2 usage (or an output that would replace an input), 3 bad input (models of\n"
           "different shapes, ids outside the vocabulary), 5 I/O, 8 out of memory (docs/cli.md)\n",
           SP_ANALYZE_DEFAULT_DATA, (long long)def.n_tokens, def.batch, (long long)def.seed, def.max_memory_gib);
}

/* A numeric option into its slot of the job. */
static sp_status parse_number(const char *opt, const char *value, sp_drift_job *job)
{
    long v = 0;
    if (strcmp(opt, "--n-tokens") == 0) {
        SP_TRY(sp_cli_parse_long(opt, value, 1, 1L << 40, &v));
        job->n_tokens = v;
    } else if (strcmp(opt, "--seq") == 0) {
        SP_TRY(sp_cli_parse_long(opt, value, 0, 1L << 20, &v));
        job->seq_len = (int)v;
    } else if (strcmp(opt, "--batch") == 0) {
        SP_TRY(sp_cli_parse_long(opt, value, 1, 1L << 20, &v));
        job->batch = (int)v;
    } else if (strcmp(opt, "--seed") == 0) {
        SP_TRY(sp_cli_parse_long(opt, value, 0, INT64_MAX, &v));
        job->seed = v;
    } else {
        return sp_cli_parse_double(opt, value, 1e-6, 1 << 20, &job->max_memory_gib);
    }
    return SP_OK;
}

static sp_status parse_args(int argc, char **argv, sp_drift_job *job)
{
    sp_drift_job_defaults(job);
    static const char *const numbers[] = {"--n-tokens", "--seq", "--batch", "--seed", "--max-memory-gib"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *value = NULL;
        const char **target = strcmp(a, "--out") == 0      ? &job->out
                              : strcmp(a, "--data") == 0   ? &job->data
                              : strcmp(a, "--tokens") == 0 ? &job->tokens
                              : strcmp(a, "--device") == 0 ? &job->device
                                                           : NULL;
        int is_number = 0;
        for (size_t k = 0; k < SP_ARRAY_LEN(numbers); k++)
            is_number |= strcmp(a, numbers[k]) == 0;
        if (strcmp(a, "--quiet") == 0) {
            job->quiet = 1;
        } else if (target) {
            SP_TRY(sp_cli_option_value(argc, argv, &i, target));
        } else if (is_number) {
            SP_TRY(sp_cli_option_value(argc, argv, &i, &value));
            SP_TRY(parse_number(a, value, job));
        } else if (strncmp(a, "--", 2) == 0) {
            return sp_error(SP_ERR_USAGE, "unknown option '%s'", a);
        } else if (!job->ref) {
            job->ref = a;
        } else {
            SP_TRY(sp_cli_take_argument(a, &job->model, "model after REF"));
        }
    }
    if (!job->model)
        return sp_error(SP_ERR_USAGE, "expected two models: spanprobe drift REF MODEL --out REPORT.h5");
    if (!job->out)
        return sp_error(SP_ERR_USAGE, "expected --out REPORT.h5");
    if (job->data && job->tokens)
        return sp_error(SP_ERR_USAGE, "expected at most one of --data FILE and --tokens FILE");
    sp_read_budget_set((uint64_t)(job->max_memory_gib * 1073741824.0));
    return SP_OK;
}

int sp_cmd_drift(int argc, char **argv)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    sp_error_clear();
    sp_drift_job job;
    sp_status st = parse_args(argc, argv, &job);
    if (st == SP_ERR_USAGE)
        return sp_cli_usage_error("drift", "%s", sp_error_message());
    if (st != SP_OK)
        return sp_cli_report("drift", st);
    return sp_cli_report("drift", sp_drift_run(&job));
}

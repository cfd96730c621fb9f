/* spanprobe: probes whether a Transformer's depth is working. See README.md and docs/cli.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/mpi.h"

static const sp_command commands[] = {
    {"init", "create a freshly initialized checkpoint from model options", sp_cmd_init},
    {"inspect", "describe a checkpoint, activation dump or report: format, config, tensor table", sp_cmd_inspect},
    {"train", "train a model on a text file: checkpoints, training log, exact resume", sp_cmd_train},
    {"import", "convert a llama2.c, Hugging Face, GGUF or nanoGPT model into a spanprobe checkpoint", sp_cmd_import},
    {"tokenize", "print the token ids of a text under a model's tokenizer", sp_cmd_tokenize},
    {"generate", "print text from a checkpoint (greedy or sampled)", sp_cmd_generate},
    {"dump", "run a checkpoint on text or token ids and write every layer's activations", sp_cmd_dump},
    {"analyze", "layer-wise diagnostics of a checkpoint or a dump into a report (HDF5 + JSON)", sp_cmd_analyze},
    {"plot", "paper-style figures (gnuplot) from reports and training logs of one or several runs", sp_cmd_plot},
    {"study", "train a preset set of runs, analyze them and draw every figure (resumable)", sp_cmd_study},
    {"check", "gate a report on rules (thresholds, baseline tolerances): exit 7 when one fails", sp_cmd_check},
    {"compare", "metric-by-metric agreement of two reports of one run (device, precision): exit 7 if not",
     sp_cmd_compare},
    {"drift", "how a model (a quantized copy) departs from a reference, layer by layer: report (HDF5 + JSON)",
     sp_cmd_drift},
};

static void print_help(void)
{
    printf("spanprobe %s: layer-wise diagnostics of Transformer depth\n\n"
           "usage: spanprobe <command> [options]      spanprobe <command> --help\n\ncommands:\n",
           SP_VERSION);
    for (size_t i = 0; i < SP_ARRAY_LEN(commands); i++)
        printf("  %-10s %s\n", commands[i].name, commands[i].summary);
    printf("\noptions:\n  --help     this text\n  --version  print the version\n"
           "\nexit codes: 0 ok, 1 internal error, 2 usage, 3 bad input, 4 numerical failure, 5 I/O,\n"
           "            6 training diverged, 7 check or compare failed, 8 out of memory (docs/cli.md)\n");
}

/* A command that succeeded but whose standard output could not be written (a full disk under
 * `> FILE`) has failed: exit 5 with one line. A failure it already reported keeps its code. */
static int check_stdout(const char *command, int status)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return status;
    if (status != SP_OK)
        return status;
    fprintf(stderr, "spanprobe %s: stdout: write failed: %s\n", command,
            strerror(errno ? errno : EIO));
    return SP_ERR_IO;
}

/* OpenMP threads that wait for work sleep instead of spinning (OMP_WAIT_POLICY=passive) unless the
 * user chose a policy: two spinning processes on shared cores starve each other (an analyze beside a
 * training run took 61 s against 9.5 s passive and 7.8 s alone; docs/kernels.md). libgomp reads the
 * policy when it loads, before main, so a command that computes in parallel starts itself again with
 * it set (about 0.1 s, which the quick commands are spared). */
static void wait_passively(int argc, char **argv)
{
    static const char *const parallel[] = {"train", "analyze", "study", "dump", "drift", "generate"};
    int computes = 0;
    for (size_t i = 0; argc > 1 && i < SP_ARRAY_LEN(parallel); i++)
        computes |= strcmp(argv[1], parallel[i]) == 0;
    if (!computes || getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    /* no /proc: run on with libgomp's default policy (the variable, set, reaches any worker forked later) */
}

/* The command's exit status, MPI ended first where it was started. */
static int finish(int status)
{
    sp_mpi_stop(status);
    return status;
}

int main(int argc, char **argv)
{
    wait_passively(argc, argv);
    if (sp_mpi_start(&argc, &argv) != SP_OK) {
        fprintf(stderr, "spanprobe: %s\n", sp_error_message());
        return SP_ERR_INTERNAL;
    }
    if (argc < 2) {
        fprintf(stderr, "spanprobe: expected a command: spanprobe <command> [options] (see spanprobe --help)\n");
        return finish(SP_ERR_USAGE);
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_help();
        return finish(SP_OK);
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("spanprobe %s (%s)\nMPI: %s\n", SP_VERSION, SP_REAL_NAME, sp_mpi_library());
        return finish(SP_OK);
    }
    for (size_t i = 0; i < SP_ARRAY_LEN(commands); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return finish(check_stdout(commands[i].name, commands[i].run(argc - 1, argv + 1)));
    char name[256];
    sp_escape_controls(argv[1], name, sizeof name);
    fprintf(stderr, "spanprobe: unknown command '%s' (see spanprobe --help)\n", name);
    return finish(SP_ERR_USAGE);
}

/* spanprobe over 2 MPI ranks (docs/scaling.md): `study` spreads a preset's runs over the ranks, each
 * whole on one, with the same summary, bit for bit, as one process running them all, and a second
 * invocation reuses every run; `train` shares each step's micro-batches and sums the gradients;
 * `analyze` shares the evaluation batches and sums every accumulator. Skipped, with one line, where the build has
 * no MPI (make MPI=0, the sanitizer build) or mpirun is missing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/backend.h"
#include "support/scratch.h"
#include "support/shell.h"
#include "support/tree.h"

static void expect_same_file(const char *a_dir, const char *b_dir, const char *name)
{
    char a[4400], b[4400];
    snprintf(a, sizeof a, "%s/%s", a_dir, name);
    snprintf(b, sizeof b, "%s/%s", b_dir, name);
    char *ta = scratch_read_file(a, NULL), *tb = scratch_read_file(b, NULL);
    assert_non_null(ta);
    assert_non_null(tb);
    if (strcmp(ta, tb) != 0)
        fail_msg("%s differs between 1 process and 2 ranks:\n%s\n---\n%s", name, ta, tb);
    free(ta);
    free(tb);
}

/* 1 when this build has MPI and mpirun can start 2 ranks of it here, else says why (one line). */
static int mpi_usable(const char *bin)
{
    char *version = NULL, cmd[16384];
    snprintf(cmd, sizeof cmd, "%s --version", bin);
    assert_int_equal(shell_run(cmd, &version), 0);
    const int has_mpi = version && !strstr(version, "MPI: no");
    free(version);
    if (!has_mpi || system("command -v mpirun >/dev/null 2>&1") != 0) {
        print_message("skipped: %s\n", has_mpi ? "no mpirun on the PATH (Debian: openmpi-bin)"
                                               : "this build has no MPI (make MPI=0, or the sanitizer build)");
        return 0;
    }
    /* a machine where mpirun cannot start two ranks (a container without what Open MPI needs) has no
     * usable MPI either: said in one line, not failed */
    snprintf(cmd, sizeof cmd, "mpirun --allow-run-as-root --oversubscribe -np 2 %s --version >/dev/null 2>&1", bin);
    if (system(cmd) != 0) {
        print_message("skipped: mpirun cannot start 2 ranks of %s here\n", bin);
        return 0;
    }
    return 1;
}

/* The program under test where it can run over 2 MPI ranks here; else the test is skipped. */
static const char *usable_bin(void)
{
    const char *bin = getenv("SPANPROBE_BIN");
    if (!bin || !mpi_usable(bin))
        skip();
    return bin;
}

/* A text of n lines for the runs. */
static void write_text(char *path, size_t len)
{
    scratch_path(path, len, "mpi_text.txt");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 400; i++)
        fprintf(f, "Call me Ishmael. Some years ago, never mind how long precisely, line %d.\n", i);
    fclose(f);
}

static void test_study_over_two_ranks(void **state)
{
    (void)state;
    const char *bin = usable_bin();
    if (!shell_has_program("gnuplot")) {
        print_message("skipped: gnuplot is not installed (a study draws its figures)\n");
        skip();
    }
    char cmd[16384];
    char one[4200], two[4200], text[4200];
    scratch_path(one, sizeof one, "mpi_study_1");
    scratch_path(two, sizeof two, "mpi_study_2");
    write_text(text, sizeof text);
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s study --preset test-sweep --out %s --data %s --jobs 1", bin, one,
             text);
    assert_int_equal(shell_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd,
             "mpirun --allow-run-as-root --oversubscribe -np 2 %s study --preset test-sweep --out %s --data %s", bin,
             two, text);
    char *out = NULL;
    assert_int_equal(shell_run(cmd, &out), 0);
    assert_non_null(strstr(out, "on each MPI rank"));
    free(out);
    expect_same_file(one, two, "summary.csv");
    expect_same_file(one, two, "summary_lr.csv");
    /* again: every run is found finished, by whichever rank it falls to now */
    assert_int_equal(shell_run(cmd, &out), 0);
    assert_null(strstr(out, "training 12 steps"));
    free(out);
    expect_same_file(one, two, "summary.csv");
    assert_int_equal(tree_remove(one), 0);
    assert_int_equal(tree_remove(two), 0);
    remove(text);
}

#define TRAIN_RUN                                                                                                 \
    "--n-layers 2 --d-model 16 --n-heads 2 --n-kv-heads 2 --d-ff 32 --max-seq-len 32 --seq-len 32 --batch-size 4 " \
    "--steps 50 --lr 3e-3 --warmup-steps 5 --log-every 1 --eval-every 25 --ckpt-every 25 --keep 2"
#define TRAIN_ARGS TRAIN_RUN " --device cpu"

/* Column `name` of a training log's CSV, row by row (n values). */
static double *csv_column(const char *path, const char *name, int *n)
{
    char *text = scratch_read_file(path, NULL);
    assert_non_null(text);
    char *line = strtok(text, "\n");
    int col = -1, c = 0;
    for (char *p = line; p && col < 0; c++) {
        char *comma = strchr(p, ',');
        if ((size_t)(comma ? comma - p : (ptrdiff_t)strlen(p)) == strlen(name) && strncmp(p, name, strlen(name)) == 0)
            col = c;
        p = comma ? comma + 1 : NULL;
    }
    assert_true(col >= 0);
    double *v = calloc(4096, sizeof *v);
    assert_non_null(v);
    *n = 0;
    while ((line = strtok(NULL, "\n")) && *n < 4096) {
        char *p = line;
        for (int k = 0; k < col && p; k++)
            p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
        assert_non_null(p);
        v[(*n)++] = strtod(p, NULL);
    }
    free(text);
    return v;
}

/* The text, and in `<name>_reference` the run of one process that N ranks must match (--grad-accum
 * 2 on `device`); `<name>_run` is where the ranks go. Paths of 4200 bytes. */
static void train_reference(const char *bin, const char *device, const char *name, char *text, char *reference,
                            char *run)
{
    char cmd[16384], leaf[256];
    write_text(text, 4200);
    snprintf(leaf, sizeof leaf, "%s_reference", name);
    scratch_path(reference, 4200, leaf);
    snprintf(leaf, sizeof leaf, "%s_run", name);
    scratch_path(run, 4200, leaf);
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s train " TRAIN_RUN " --device %s --grad-accum 2 --data %s --out %s",
             bin, device, text, reference);
    assert_int_equal(shell_run(cmd, NULL), 0);
}

static void remove_runs(const char *text, const char *reference, const char *run)
{
    assert_int_equal(tree_remove(reference), 0);
    assert_int_equal(tree_remove(run), 0);
    remove(text);
}

static void expect_same_losses(const char *a_dir, const char *b_dir)
{
    char a[4400], b[4400];
    snprintf(a, sizeof a, "%s/trainlog.csv", a_dir);
    snprintf(b, sizeof b, "%s/trainlog.csv", b_dir);
    int na, nb;
    double *la = csv_column(a, "train_loss", &na), *lb = csv_column(b, "train_loss", &nb);
    assert_int_equal(na, 50);
    assert_int_equal(nb, 50);
    double worst = 0;
    for (int i = 0; i < na; i++)
        worst = fmax(worst, fabs(la[i] - lb[i]) / fabs(la[i]));
    print_message("train loss, 2 ranks against --grad-accum 2 in one process: within %.3g relative\n", worst);
    assert_true(worst <= 1e-5);
    free(la);
    free(lb);
}

/* `mpirun -np 2 spanprobe train --grad-accum 2`: each rank one micro-batch of a step, gradients
 * summed: the loss curve of one process with --grad-accum 2 (within 1e-5 relative; here the same
 * bits); a run of one process resumed by two ranks ends as the uninterrupted run; a --grad-accum the
 * ranks cannot share is one line. */
static void test_train_over_two_ranks(void **state)
{
    (void)state;
    const char *bin = usable_bin();
    char text[4200], one[4200], two[4200], resumed[4200], cmd[32768];
    train_reference(bin, "cpu", "mpi_train", text, one, two);
    scratch_path(resumed, sizeof resumed, "mpi_train_resumed");
    const char *mpirun = "mpirun --allow-run-as-root --oversubscribe -np 2";
    snprintf(cmd, sizeof cmd, "%s %s train " TRAIN_ARGS " --grad-accum 2 --data %s --out %s", mpirun, bin, text, two);
    assert_int_equal(shell_run(cmd, NULL), 0);
    expect_same_losses(one, two);

    /* one process stopped after its step-25 checkpoint, continued by two ranks */
    snprintf(cmd, sizeof cmd, "cp -r %s %s && rm %s/ckpt_00000050.h5 && %s %s train --resume %s", one, resumed, resumed,
             mpirun, bin, resumed);
    assert_int_equal(shell_run(cmd, NULL), 0);
    expect_same_losses(one, resumed);

    char *out = NULL;
    snprintf(cmd, sizeof cmd, "%s %s train " TRAIN_ARGS " --data %s --out %s/odd", mpirun, bin, text, two);
    assert_true(shell_run(cmd, &out) != 0);
    assert_non_null(strstr(out, "must be a multiple of 2"));
    free(out);
    assert_int_equal(tree_remove(resumed), 0);
    remove_runs(text, one, two);
}

/* The same on the GPU, where one is visible: the gradients summed through NCCL where every rank has
 * a GPU of its own, else through host copies (the CUDA backend's sum_over_ranks). */
static void test_train_over_two_ranks_cuda(void **state)
{
    (void)state;
    if (!sp_backend_cuda()) {
        print_message("skipped: no CUDA GPU is visible\n");
        skip();
    }
    const char *bin = usable_bin();
    char text[4200], one[4200], two[4200], cmd[32768];
    train_reference(bin, "cuda", "mpi_cuda", text, one, two);
    snprintf(cmd, sizeof cmd,
             "mpirun --allow-run-as-root --oversubscribe -np 2 %s train " TRAIN_RUN " --device cuda --grad-accum 2 "
             "--data %s --out %s", bin, text, two);
    assert_int_equal(shell_run(cmd, NULL), 0);
    expect_same_losses(one, two);
    remove_runs(text, one, two);
}

/* A SIGKILL of rank 1 of `mpirun -np 2 spanprobe train` in the middle of the run (past its step-25
 * checkpoint): mpirun ends the job; the run then continued by one process (another rank count)
 * ends as the uninterrupted run. */
static void test_train_rank_killed(void **state)
{
    (void)state;
    const char *bin = usable_bin();
    char text[4200], one[4200], killed[4200], cmd[32768];
    train_reference(bin, "cpu", "mpi_kill", text, one, killed);
    /* rank 1 is the process whose environment says so; the log has a line a step */
    snprintf(cmd, sizeof cmd,
             "mpirun --allow-run-as-root --oversubscribe -np 2 %s train " TRAIN_ARGS " --grad-accum 2 --data %s --out %s "
             ">/dev/null 2>&1 & M=$!; "
             "while [ \"$(cat %s/trainlog.csv 2>/dev/null | wc -l)\" -lt 30 ]; do sleep 0.02; done; "
             "for p in $(pgrep -f 'train.*mpi_kill_run'); do "
             "tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && kill -9 $p; done; "
             "wait $M; echo \"mpirun: $?\"",
             bin, text, killed, killed);
    char *out = NULL;
    assert_int_equal(shell_run(cmd, &out), 0);
    assert_null(strstr(out, "mpirun: 0")); /* the kill landed before the run ended */
    free(out);
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s train --resume %s", bin, killed);
    assert_int_equal(shell_run(cmd, NULL), 0);
    expect_same_losses(one, killed);
    remove_runs(text, one, killed);
}

/* A rank that fails alone ends the job: rank 0 of `mpirun -np 2 spanprobe train` finds the output
 * directory locked by another run and stops, while rank 1 has gone on to its first gradient sum;
 * mpirun ends both with the failure's status (before sp_mpi_stop aborted, rank 0 waited in
 * MPI_Finalize for rank 1, which waited in the sum for rank 0: forever). */
static void test_rank_failing_alone_ends_the_job(void **state)
{
    (void)state;
    const char *bin = usable_bin();
    char text[4200], dir[4200], cmd[32768];
    write_text(text, sizeof text);
    scratch_path(dir, sizeof dir, "mpi_locked");
    const char *model = "--n-layers 2 --d-model 16 --n-heads 2 --n-kv-heads 2 --d-ff 32 --max-seq-len 32 --seq-len 32 "
                        "--batch-size 4 --lr 3e-3 --device cpu --grad-accum 2";
    snprintf(cmd, sizeof cmd,
             "OMP_NUM_THREADS=1 %s train %s --steps 1000000 --data %s --out %s >/dev/null 2>&1 & H=$!; "
             "while [ ! -e %s/.spanprobe.lock ]; do sleep 0.05; done; "
             "timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 %s train %s --steps 50 --data %s --out %s; "
             "echo \"mpirun: $?\"; kill $H; wait $H",
             bin, model, text, dir, dir, bin, model, text, dir);
    char *out = NULL;
    shell_run(cmd, &out);
    assert_non_null(out);
    assert_non_null(strstr(out, "mpirun: "));
    assert_null(strstr(out, "mpirun: 0"));
    assert_null(strstr(out, "mpirun: 124")); /* the timeout: a hang */
    assert_non_null(strstr(out, "in use by another spanprobe process"));
    free(out);
    assert_int_equal(tree_remove(dir), 0);
    remove(text);
}

#define ANALYZE_METRICS                                                                                         \
    "similarity,cka,growth,token_uniformity,presums,hidden_spectra,ffn_spectra,logit_lens,attention,grad_norms," \
    "jacobian,weights,embed_spectrum,pruning,curvature"
/* Centered similarity (a second pass) and debiased CKA in two passes of pairs: every way an analyzer
 * sums over the ranks. 32 sequences in 8 batches: 4 and 4 on 2 ranks, 2, 3 and 3 on 3. */
#define ANALYZE_ARGS                                                                                         \
    "--metrics " ANALYZE_METRICS " --n-tokens 1024 --seq-len 32 --batch 4 --center true --cka-debiased true "          \
    "--cka-pairs-per-pass 4 --grad-batches 3 --prune-batches 2 --jac-tokens 3 --topk 2 --curv-seqs 2 --quiet"

/* `mpirun -np N spanprobe analyze`: the evaluation batches shared, every accumulator summed: the
 * report of one process within `compare`'s tolerances at 2 and 3 ranks, the same bits twice at 2
 * ranks, one report and nothing else written; more ranks than batches is one line. */
static void test_analyze_over_ranks(void **state)
{
    (void)state;
    const char *bin = usable_bin();
    char text[4200], model[4200], dir[4200], cmd[32768];
    write_text(text, sizeof text);
    scratch_path(model, sizeof model, "mpi_analyze_model");
    scratch_path(dir, sizeof dir, "mpi_analyze_reports");
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s train " TRAIN_ARGS " --data %s --out %s && mkdir %s", bin, text,
             model, dir);
    assert_int_equal(shell_run(cmd, NULL), 0);
    const char *launchers[][2] = {{"OMP_NUM_THREADS=1", "one"},
                                  {"mpirun --allow-run-as-root --oversubscribe -np 2", "two"},
                                  {"mpirun --allow-run-as-root --oversubscribe -np 2", "two_again"},
                                  {"mpirun --allow-run-as-root --oversubscribe -np 3", "three"}};
    for (size_t i = 0; i < sizeof launchers / sizeof *launchers; i++) {
        snprintf(cmd, sizeof cmd, "%s %s analyze %s/ckpt_00000050.h5 --data %s --out %s/%s.h5 " ANALYZE_ARGS,
                 launchers[i][0], bin, model, text, dir, launchers[i][1]);
        assert_int_equal(shell_run(cmd, NULL), 0);
    }
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "%s compare %s/one.h5 %s/two.h5 --quiet && %s compare %s/one.h5 %s/three.h5 --quiet", bin,
             dir, dir, bin, dir, dir);
    assert_int_equal(shell_run(cmd, &out), 0);
    print_message("%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s compare %s/two.h5 %s/two_again.h5 --rtol 0 --atol 0 --quiet", bin, dir, dir);
    assert_int_equal(shell_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "LC_ALL=C ls %s | tr '\\n' ' '", dir); /* byte order, whatever the locale */
    assert_int_equal(shell_run(cmd, &out), 0);
    assert_string_equal(out, "one.h5 one.json three.h5 three.json two.h5 two.json two_again.h5 two_again.json ");
    free(out);

    snprintf(cmd, sizeof cmd, "%s %s analyze %s/ckpt_00000050.h5 --data %s --out %s/many.h5 --n-tokens 64 --seq-len 32 "
             "--batch 1 --metrics similarity", launchers[3][0], bin, model, text, dir);
    assert_true(shell_run(cmd, &out) != 0);
    assert_non_null(strstr(out, "3 MPI ranks share a streaming pass of 2 batch(es)"));
    free(out);
    assert_int_equal(tree_remove(model), 0);
    assert_int_equal(tree_remove(dir), 0);
    remove(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_study_over_two_ranks),
        cmocka_unit_test(test_train_over_two_ranks),
        cmocka_unit_test(test_train_over_two_ranks_cuda),
        cmocka_unit_test(test_train_rank_killed),
        cmocka_unit_test(test_rank_failing_alone_ends_the_job),
        cmocka_unit_test(test_analyze_over_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

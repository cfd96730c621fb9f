/* `mpirun -np 2 spanprobe study` (docs/scaling.md): the runs of a preset spread over the ranks, each
 * whole on one, with the same summary, bit for bit, as one process running them all; and a second
 * invocation over the finished study reuses every run. Skipped, with one line, where the build has
 * no MPI (make MPI=0, the sanitizer build) or mpirun is missing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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

static void test_study_over_two_ranks(void **state)
{
    (void)state;
    const char *bin = getenv("SPANPROBE_BIN");
    if (!bin)
        skip();
    char *version = NULL, cmd[16384];
    snprintf(cmd, sizeof cmd, "%s --version", bin);
    assert_int_equal(shell_run(cmd, &version), 0);
    const int has_mpi = version && !strstr(version, "MPI: no");
    free(version);
    if (!has_mpi || system("command -v mpirun >/dev/null 2>&1") != 0) {
        print_message("skipped: %s\n", has_mpi ? "no mpirun on the PATH (Debian: openmpi-bin)"
                                               : "this build has no MPI (make MPI=0, or the sanitizer build)");
        skip();
    }
    /* a machine where mpirun cannot start two ranks (a container without shared memory, ...) has no
     * usable MPI either: said in one line, not failed */
    snprintf(cmd, sizeof cmd, "mpirun --allow-run-as-root --oversubscribe -np 2 %s --version >/dev/null 2>&1", bin);
    if (system(cmd) != 0) {
        print_message("skipped: mpirun cannot start 2 ranks of %s here\n", bin);
        skip();
    }
    char one[4200], two[4200], text[4200];
    scratch_path(one, sizeof one, "mpi_study_1");
    scratch_path(two, sizeof two, "mpi_study_2");
    scratch_path(text, sizeof text, "mpi_text.txt");
    FILE *f = fopen(text, "w");
    assert_non_null(f);
    for (int i = 0; i < 400; i++)
        fprintf(f, "Call me Ishmael. Some years ago, never mind how long precisely, line %d.\n", i);
    fclose(f);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_study_over_two_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* `spanprobe study`: the tiny `test` preset (two runs that train, two at lr 1e30 that diverge)
 * trained, analyzed and drawn end to end; killed after its first run finished and started again,
 * it does not redo that run (training, checkpoints, report untouched) and completes the rest, the
 * diverged runs recorded in the summary and marked in the depth figure; a run directory holding
 * another run's options is refused; an unknown preset is a usage error; every preset expands into
 * valid runs. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "study/presets.h"
#include "study/study.h"
#include "support/png_info.h"
#include "support/scratch.h"
#include "support/tree.h"

#define RUN1 "pre-L2-scaled-lr0.003"
#define RUN2 "pre-L2-scaled-lr1e30"
#define RUN3 "span-L2-scaled-lr0.003"
#define RUN4 "span-L2-scaled-lr1e30"

/* A 48 KB text of words drawn from a small vocabulary, so a byte model has something to learn. */
static void write_corpus(char *path, size_t len)
{
    static const char *const words[] = {"the", "whale", "sea", "ship", "captain", "white", "and", "of", "a",
                                        "harpoon", "deep", "water", "sailed", "into", "night", "storm"};
    scratch_path(path, len, "corpus.txt");
    char *text = malloc(48 * 1024 + 64);
    assert_non_null(text);
    size_t n = 0;
    uint64_t x = 12345;
    while (n < 48 * 1024) {
        x = x * 6364136223846793005ull + 1442695040888963407ull; /* an LCG is plenty here */
        const char *w = words[(x >> 33) % (sizeof words / sizeof words[0])];
        n += (size_t)sprintf(text + n, "%s%s", w, (x >> 20) % 9 == 0 ? ".\n" : " ");
    }
    assert_int_equal(scratch_write_file(path, text, n), 0);
    free(text);
}

typedef struct {
    struct stat report, log, ckpt;
} run_files;

static void stat_run(const char *study, const char *run, run_files *f)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/runs/%s/report.h5", study, run);
    assert_int_equal(stat(path, &f->report), 0);
    snprintf(path, sizeof path, "%s/runs/%s/trainlog.h5", study, run);
    assert_int_equal(stat(path, &f->log), 0);
    snprintf(path, sizeof path, "%s/runs/%s/ckpt_00000012.h5", study, run);
    assert_int_equal(stat(path, &f->ckpt), 0);
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Starts `spanprobe study --preset test` in the background (output discarded); -1 without the CLI. */
static pid_t start_study(const char *out, const char *corpus)
{
    const char *bin = getenv("SPANPROBE_BIN");
    if (!bin || !*bin)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(126);
        execl(bin, bin, "study", "--preset", "test", "--out", out, "--data", corpus, "--device", "cpu", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void test_resume_after_kill(void **state)
{
    (void)state;
    char corpus[4200], out[4200], report1[4400], summary[4400];
    write_corpus(corpus, sizeof corpus);
    scratch_path(out, sizeof out, "study-resume");
    tree_remove(out);
    snprintf(report1, sizeof report1, "%s/runs/%s/report.h5", out, RUN1);
    snprintf(summary, sizeof summary, "%s/summary.md", out);

    /* the first invocation is killed as soon as its first run is analyzed */
    pid_t pid = start_study(out, corpus);
    if (pid < 0)
        skip();
    int status = 0, exited = 0;
    for (int waited_ms = 0; !scratch_file_exists(report1) && waited_ms < 120000; waited_ms++) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            exited = 1;
            break;
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    if (!exited) {
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, &status, 0), pid);
    }
    if (exited)
        fail_msg("the study exited (status %d) before its first run was analyzed", status);
    assert_true(scratch_file_exists(report1));
    run_files before, after;
    stat_run(out, RUN1, &before);

    /* the second invocation finishes the study without touching the first run */
    char *o = NULL, *e = NULL;
    const char *args[] = {"study", "--preset", "test", "--out", out, "--data", corpus, "--device", "cpu", NULL};
    assert_int_equal(scratch_run_cli(args, &o, &e), 0);
    assert_non_null(strstr(o, "run 1/4 " RUN1 ": trained earlier (done at step 12)"));
    assert_non_null(strstr(o, "run 1/4 " RUN1 ": analyzed earlier"));
    stat_run(out, RUN1, &after);
    assert_true(same_file(&before.report, &after.report));
    assert_true(same_file(&before.log, &after.log));
    assert_true(same_file(&before.ckpt, &after.ckpt));
    stat_run(out, RUN3, &after); /* the other run that trains is complete */
    /* figures over every run, the diverged ones marked; the summary names each run's outcome */
    char path[4400];
    int w, h;
    const char *figures[] = {"cos-heatmap", "grad-steps", "depth"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/figures/%s.png", out, figures[i]);
        assert_int_equal(png_size(path, &w, &h), 0);
    }
    snprintf(path, sizeof path, "%s/figures/depth.gp", out);
    char *script = scratch_read_file(path, NULL);
    assert_non_null(script);
    assert_non_null(strstr(script, "has_diverged = 1"));
    free(script);
    char *md = scratch_read_file(summary, NULL);
    assert_non_null(md);
    assert_non_null(strstr(md, "| " RUN1 " | done |"));
    assert_non_null(strstr(md, "| " RUN2 " | diverged at step "));
    assert_non_null(strstr(md, "| " RUN3 " | done |"));
    assert_non_null(strstr(md, "| " RUN4 " | diverged at step "));
    free(md);
    free(o);
    free(e);

    /* a third invocation redoes nothing */
    o = e = NULL;
    assert_int_equal(scratch_run_cli(args, &o, &e), 0);
    assert_non_null(strstr(o, "run 3/4 " RUN3 ": trained earlier (done at step 12)"));
    assert_non_null(strstr(o, "run 4/4 " RUN4 ": trained earlier (diverged at step "));
    assert_null(strstr(o, "analyzing"));
    free(o);
    free(e);
    unlink(corpus);
    tree_remove(out);
}

static void test_refuses_other_runs(void **state)
{
    (void)state;
    char corpus[4200], other[4200], out[4200];
    write_corpus(corpus, sizeof corpus);
    scratch_path(other, sizeof other, "corpus-copy.txt");
    size_t len;
    char *text = scratch_read_file(corpus, &len);
    assert_non_null(text);
    assert_int_equal(scratch_write_file(other, text, len), 0);
    free(text);
    scratch_path(out, sizeof out, "study-other");
    tree_remove(out);
    const char *args[] = {"study", "--preset", "test", "--out", out, "--data", corpus, "--device", "cpu", NULL};
    char *e = NULL;
    int rc = scratch_run_cli(args, NULL, &e);
    if (rc == -1)
        skip();
    assert_int_equal(rc, 0);
    free(e);
    /* the same study dir with another training text: its runs are other runs */
    const char *again[] = {"study", "--preset", "test", "--out", out, "--data", other, "--device", "cpu", NULL};
    e = NULL;
    assert_int_equal(scratch_run_cli(again, NULL, &e), 2);
    assert_int_equal(scratch_count_lines(e), 1);
    assert_non_null(strstr(e, "holds a run with data = "));
    assert_non_null(strstr(e, RUN1));
    free(e);
    const char *bad[] = {"study", "--preset", "nosuch", "--out", out, NULL};
    e = NULL;
    assert_int_equal(scratch_run_cli(bad, NULL, &e), 2);
    assert_int_equal(scratch_count_lines(e), 1);
    assert_non_null(strstr(e, "unknown preset 'nosuch'"));
    free(e);
    unlink(corpus);
    unlink(other);
    tree_remove(out);
}

/* Every preset expands into distinct runs whose model and training options resolve and validate,
 * with valid analysis options; quick is the README's pre/post/span comparison. */
static void test_presets_expand(void **state)
{
    (void)state;
    assert_int_equal(sp_study_preset_count(), sp_study_n_presets);
    for (int i = 0; i < sp_study_n_presets; i++) {
        const sp_study_preset *p = sp_study_find_preset(sp_study_preset_name(i));
        assert_non_null(p);
        sp_study_run_spec *runs = NULL;
        int n = 0;
        sp_error_clear();
        if (sp_study_expand(p, NULL, "cpu", &runs, &n) != SP_OK)
            fail_msg("preset %s: %s", p->name, sp_error_message());
        assert_true(n >= 2);
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                assert_string_not_equal(runs[a].name, runs[b].name);
        sp_analyze_options o;
        if (sp_study_analyze_options(p, &o) != SP_OK)
            fail_msg("preset %s: %s", p->name, sp_error_message());
        if (strcmp(p->name, "quick") == 0) {
            assert_int_equal(n, 3);
            for (int k = 0; k < n; k++) {
                assert_int_equal(runs[k].cfg.n_layers, 8);
                assert_int_equal(runs[k].cfg.init, SP_INIT_SCALED);
            }
            assert_int_equal(runs[0].cfg.variant, SP_VARIANT_PRE);
            assert_int_equal(runs[1].cfg.variant, SP_VARIANT_POST);
            assert_int_equal(runs[2].cfg.variant, SP_VARIANT_SPAN);
        }
        free(runs);
    }
    assert_null(sp_study_find_preset("nosuch"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_expand),
        cmocka_unit_test(test_resume_after_kill),
        cmocka_unit_test(test_refuses_other_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

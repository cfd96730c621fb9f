/* `spanprobe study`: the tiny `test` preset (two runs that train, two at lr 1e30 that diverge)
 * trained, analyzed and drawn end to end; killed (SIGKILL, its two workers going with it) after its
 * first run finished and started again, it does not redo that run (training, checkpoints, report untouched) and completes the rest, the
 * diverged runs recorded in the summary and marked in the depth figure; a run directory holding
 * another run's options is refused; an unknown preset is a usage error; every preset expands into
 * valid runs. */
#include <math.h>
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

#include "io/report.h"
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

/* jacobian_bound.csv holds, for the span run (the only one with both pre-normalization sums), one
 * row per block whose values are the report's arrays and whose ratio is bound / sigma_max; the
 * summary counts its blocks; pre has no bound and no row. */
static void expect_bound_table(const char *study, const char *md)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/runs/%s/report.h5", study, RUN3);
    sp_report_reader *r = NULL;
    assert_int_equal(sp_report_open(path, &r), SP_OK);
    sp_report_array sigma, bound;
    assert_int_equal(sp_report_read_array(r, "jacobian", "sigma_max", &sigma), SP_OK);
    assert_int_equal(sp_report_read_array(r, "jacobian", "bound", &bound), SP_OK);
    sp_report_close(r);
    snprintf(path, sizeof path, "%s/jacobian_bound.csv", study);
    char *csv = scratch_read_file(path, NULL);
    assert_non_null(csv);
    assert_null(strstr(csv, RUN1 ","));
    int holds = 0;
    for (int l = 0; l < (int)sigma.shape[0]; l++) {
        char prefix[128];
        snprintf(prefix, sizeof prefix, "\n%s,%d,", RUN3, l);
        const char *row = strstr(csv, prefix);
        assert_non_null(row);
        char *end;
        const double s_csv = strtod(row + strlen(prefix), &end), b_csv = strtod(end + 1, &end),
                     q_csv = strtod(end + 1, NULL);
        assert_true(fabs(s_csv - sigma.data[l]) <= 1e-5 * fabs(sigma.data[l]));
        assert_true(fabs(b_csv - bound.data[l]) <= 1e-5 * fabs(bound.data[l]));
        const double q = bound.data[l] / sigma.data[l];
        assert_true(fabs(q_csv - q) <= 1e-5 * q);
        holds += q >= 1;
    }
    char row[128];
    snprintf(row, sizeof row, "| %s | %d | %d |", RUN3, (int)sigma.shape[0], holds);
    assert_non_null(strstr(md, "## The Jacobian bound"));
    assert_non_null(strstr(md, row));
    sp_report_array_free(&sigma);
    sp_report_array_free(&bound);
    free(csv);
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
        execl(bin, bin, "study", "--preset", "test", "--out", out, "--data", corpus, "--device", "cpu", "--jobs", "2",
              (char *)NULL);
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
    expect_bound_table(out, md);
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

/* Every preset's groups expand into distinct runs whose model and training options resolve and
 * validate (runs at lr "best" as planned), with valid analysis options; quick is the README's
 * pre/post/span comparison; paper sweeps before its verdict groups; --lrs, --seeds and --scale. */
static void test_presets_expand(void **state)
{
    (void)state;
    assert_int_equal(sp_study_preset_count(), sp_study_n_presets);
    for (int i = 0; i < sp_study_n_presets; i++) {
        const sp_study_preset *p = sp_study_find_preset(sp_study_preset_name(i));
        assert_non_null(p);
        const sp_study_overrides ov = {.device = "cpu"};
        char names[64][208];
        int n = 0;
        for (int g = 0; g < sp_study_n_groups(p); g++) {
            sp_study_run_spec *runs = NULL;
            int ng = 0;
            sp_error_clear();
            if (sp_study_expand_group(p, g, &ov, NULL, NULL, &runs, &ng) != SP_OK)
                fail_msg("preset %s group %d: %s", p->name, g + 1, sp_error_message());
            /* a verdict group takes its lr from an earlier sweep; groups of a preset of several are
             * named (their figures' directories), each differently */
            assert_true(strcmp(p->groups[g].lrs, SP_STUDY_BEST_LR) != 0 || g > 0);
            if (sp_study_n_groups(p) > 1) {
                assert_non_null(p->groups[g].name);
                for (int h = 0; h < g; h++)
                    assert_string_not_equal(p->groups[h].name, p->groups[g].name);
            }
            for (int k = 0; k < ng; k++) {
                assert_true(n < 64);
                assert_int_equal(runs[k].group, g);
                snprintf(names[n++], sizeof names[0], "%s", runs[k].name);
            }
            if (strcmp(p->name, "quick") == 0) {
                assert_int_equal(ng, 3);
                for (int k = 0; k < ng; k++) {
                    assert_int_equal(runs[k].cfg.n_layers, 8);
                    assert_int_equal(runs[k].cfg.init, SP_INIT_SCALED);
                }
                assert_int_equal(runs[0].cfg.variant, SP_VARIANT_PRE);
                assert_int_equal(runs[1].cfg.variant, SP_VARIANT_POST);
                assert_int_equal(runs[2].cfg.variant, SP_VARIANT_SPAN);
            }
            free(runs);
        }
        assert_true(n >= 2);
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                assert_string_not_equal(names[a], names[b]);
        sp_analyze_options o;
        if (sp_study_analyze_options(p, &o) != SP_OK)
            fail_msg("preset %s: %s", p->name, sp_error_message());
    }
    assert_null(sp_study_find_preset("nosuch"));

    /* paper: the sweep spans more than 10x in lr; --lrs, --seeds and --scale change every run as documented */
    const sp_study_preset *paper = sp_study_find_preset("paper");
    assert_non_null(paper);
    assert_string_equal(paper->groups[0].lrs, "0.0003,0.001,0.003,0.01");
    const sp_study_overrides ov = {.device = "cpu", .lrs = "0.002,0.02", .seeds = "7,8,9", .scale = 2};
    sp_study_run_spec *runs = NULL;
    int n = 0;
    assert_int_equal(sp_study_expand_group(paper, 0, &ov, NULL, NULL, &runs, &n), SP_OK);
    assert_int_equal(n, 5 * 2 * 3);
    assert_string_equal(runs[0].name, "pre-L16-scaled-lr0.002-s7");
    assert_string_equal(runs[5].name, "pre-L16-scaled-lr0.02-s9");
    assert_int_equal(runs[0].cfg.d_model, 128);
    assert_int_equal(runs[0].cfg.n_heads, 8);
    assert_int_equal(runs[0].cfg.d_ff, 512);
    assert_int_equal(runs[0].opt.steps, 1200);
    assert_int_equal(runs[0].opt.seed, 7);
    assert_true(runs[5].opt.lr == 0.02);
    free(runs);
    /* a verdict group keeps "best" whatever --lrs says */
    assert_int_equal(sp_study_expand_group(paper, 1, &ov, NULL, NULL, &runs, &n), SP_OK);
    assert_int_equal(n, 3 * 4 * 3);
    assert_string_equal(runs[0].lr, SP_STUDY_BEST_LR);
    free(runs);
}

/* The val_loss_mean of the row of summary_lr.csv that starts with prefix. */
static double lr_row_mean(const char *csv, const char *prefix)
{
    const char *row = strstr(csv, prefix);
    assert_non_null(row);
    /* variant,n_layers,init,lr,seeds,diverged,val_loss_mean,... */
    const char *p = row;
    for (int comma = 0; comma < 6; comma++)
        p = strchr(p, ',') + 1;
    return strtod(p, NULL);
}

/* test-sweep with two worker processes: the sweep's two learning rates per variant, then each
 * variant at its best one, at 2 and 3 layers with seeds 1 and 2: the plan and its estimate come first, the best lr is the one
 * whose sweep run ended lower, the sweep run the verdict group repeats is reused, the summary marks
 * the best lr with the spread over seeds, and a rerun plans every run as done. A sweep whose every
 * run diverges leaves no best lr: one line, exit 3. */
static void test_sweep_then_best_lr(void **state)
{
    (void)state;
    char corpus[4200], out[4200], path[4400];
    write_corpus(corpus, sizeof corpus);
    scratch_path(out, sizeof out, "study-sweep");
    tree_remove(out);
    const char *args[] = {"study", "--preset", "test-sweep", "--out", out, "--data", corpus, "--device", "cpu",
                          "--jobs", "2", NULL};
    char *o = NULL, *e = NULL;
    int rc = scratch_run_cli(args, &o, &e);
    if (rc == -1)
        skip();
    if (rc != 0)
        fail_msg("study test-sweep: exit %d: %s", rc, e);
    assert_non_null(strstr(o, "study test-sweep: 12 runs into"));
    assert_non_null(strstr(o, " 5. pre-L2-scaled-lrbest-s1 "));
    /* planned at no cost: the sweep makes it (at whichever rate wins) */
    assert_non_null(strstr(o, " 5. pre-L2-scaled-lrbest-s1            group 2,   2 layers, d_model 16, 12 steps: an "
                              "earlier group's run at the best lr\n"));
    assert_null(strstr(o, " 6. pre-L2-scaled-lrbest-s2            group 2,   2 layers, d_model 16, 12 steps: an "));
    assert_non_null(strstr(o, "study test-sweep: estimated time left: "));
    assert_non_null(strstr(o, ": done; 1 of 12 runs done; time left: "));
    /* each run's line says when it ended (a saved log then shows every run's duration) */
    const char *done_line = strstr(o, ": done; 1 of 12 runs done; time left: ");
    const char *eol = strchr(done_line, '\n');
    assert_non_null(eol);
    assert_true(eol - done_line > 6 && strncmp(eol - 5, " UTC)", 5) == 0);

    snprintf(path, sizeof path, "%s/summary_lr.csv", out);
    char *csv = scratch_read_file(path, NULL);
    assert_non_null(csv);
    const char *variants[] = {"pre", "span"};
    for (int v = 0; v < 2; v++) {
        char row[64], best[64], reused[128];
        snprintf(row, sizeof row, "\n%s,2,scaled,0.003,", variants[v]);
        const double low = lr_row_mean(csv, row);
        snprintf(row, sizeof row, "\n%s,2,scaled,0.01,", variants[v]);
        const double high = lr_row_mean(csv, row);
        const char *won = low < high ? "0.003" : "0.01";
        /* the verdict runs train at the winner; its sweep run (seed 1, 2 layers) is not trained again */
        snprintf(best, sizeof best, "%s-L3-scaled-lr%s-s2: training 12 steps", variants[v], won);
        assert_non_null(strstr(o, best));
        snprintf(reused, sizeof reused, "%s-L2-scaled-lr%s-s1: the same run as an earlier group's (reused)",
                 variants[v], won);
        assert_non_null(strstr(o, reused));
        /* the winner has both seeds and is marked best */
        snprintf(row, sizeof row, "\n%s,2,scaled,%s,2,0,", variants[v], won);
        const char *r = strstr(csv, row);
        assert_non_null(r);
        assert_true(strncmp(strchr(r + 1, '\n') - 2, ",1", 2) == 0);
    }
    free(csv);
    /* figures over every run, and over each group's runs (the reused sweep runs in both groups) */
    int w, h;
    const char *figure_dirs[] = {"figures", "figures/sweep", "figures/best"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s/loss.png", out, figure_dirs[i]);
        assert_int_equal(png_size(path, &w, &h), 0);
    }
    snprintf(path, sizeof path, "%s/figures/best/loss.gp", out);
    char *script = scratch_read_file(path, NULL);
    assert_non_null(script);
    assert_non_null(strstr(script, "pre, L=2, scaled init"));
    assert_non_null(strstr(script, ", seed 2"));
    assert_null(strstr(script, "lr 0.003, seed 1") && strstr(script, "lr 0.01, seed 1") ? "both lrs in best" : NULL);
    free(script);
    snprintf(path, sizeof path, "%s/summary.md", out);
    char *md = scratch_read_file(path, NULL);
    assert_non_null(md);
    assert_non_null(strstr(md, "## Learning rates and seeds"));
    assert_non_null(strstr(md, " | best |\n"));
    free(md);
    free(o);
    free(e);

    /* the rerun plans every run as done, the verdict runs under their resolved names */
    o = e = NULL;
    assert_int_equal(scratch_run_cli(args, &o, &e), 0);
    assert_null(strstr(o, "lrbest"));
    assert_null(strstr(o, ": training "));
    assert_non_null(strstr(o, "estimated time left: under a minute"));
    free(o);
    free(e);
    tree_remove(out);

    /* every sweep run diverges: no best learning rate */
    const char *diverging[] = {"study", "--preset", "test-sweep", "--out", out, "--data", corpus,
                               "--device", "cpu", "--lrs", "1e30", NULL};
    o = e = NULL;
    assert_int_equal(scratch_run_cli(diverging, &o, &e), 3);
    assert_int_equal(scratch_count_lines(e), 1);
    assert_non_null(strstr(e, "no earlier run of pre finished without diverging"));
    free(o);
    free(e);
    tree_remove(out);
    unlink(corpus);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_expand),
        cmocka_unit_test(test_resume_after_kill),
        cmocka_unit_test(test_refuses_other_runs),
        cmocka_unit_test(test_sweep_then_best_lr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* `spanprobe check` end to end, on reports made by `spanprobe analyze`:
 * - a real trained model (stories260K, imported) passes the built-in rules, and so does a dump of
 *   its activations, while the same dump with its deepest half of layers replaced by copies fails
 *   the collapse rule (needs ../shared/data; skips without it);
 * - a synthetic dump whose deep layers are copies fails the collapse rule, one whose layers keep
 *   moving passes it;
 * - a run that diverged (spanprobe train at an absurd learning rate, exit 6) fails the divergence
 *   rule through the training state analyze records; a run that finished passes it;
 * - a baseline comparison catches metrics that moved beyond their tolerance, and passes against
 *   itself; a metric the baseline lacks is an error (exit 3);
 * - usage errors, bad rules, unknown metrics, missing files: the exit codes of docs/cli.md, one
 *   line on stderr; --junit, --print-rules, --help. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "check/rules.h"
#include "core/rng.h"
#include "io/dump.h"
#include "io/report.h"
#include "support/act_dump.h"
#include "support/cli_expect.h"
#include "support/scratch.h"
#include "support/stories260k.h"
#include "support/tree.h"

typedef struct {
    char text[4200];     /* evaluation and training text */
    char moving[4200];   /* report of a synthetic dump whose layers keep moving */
    char copied[4200];   /* the same dump with its deep layers copies of h_{L/2} */
    char shallow[4200];  /* report of the moving dump with only `similarity` */
} fixture;

/* scratch_path into one of four rotating buffers: short-lived paths for argument lists. */
static char *scratch_file(const char *name)
{
    static char buf[4][4200];
    static int next;
    char *p = buf[next++ % 4];
    scratch_path(p, sizeof buf[0], name);
    return p;
}

/* A line of the check's output that starts with the outcome and names the rule. */
static int has_line(const char *out, const char *outcome, const char *rule)
{
    for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        size_t len = strcspn(line, "\n");
        char buf[2048];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1), line);
        char name[300];
        snprintf(name, sizeof name, " %s ", rule);
        if (strncmp(buf, outcome, strlen(outcome)) == 0 && strstr(buf, name))
            return 1;
    }
    return 0;
}

static void expect_line(const char *out, const char *outcome, const char *rule)
{
    if (!has_line(out, outcome, rule))
        fail_msg("no %s line for rule %s in:\n%s", outcome, rule, out);
}

/* ---- synthetic dumps ---- */

enum { SYN_L = 8, SYN_D = 16, SYN_BATCH = 4, SYN_SEQ = 16, SYN_ROWS = SYN_BATCH * SYN_SEQ };

/* h_0 random; h_{l+1} = h_l + an independent step of the same scale (adjacent cosines about
 * sqrt(l / (l + 1))), except that with copy_from >= 0 every layer above it equals h_copy_from. */
static void write_synthetic_dump(const char *path, int copy_from)
{
    sp_real *hidden[SYN_L + 1];
    sp_rng rng;
    sp_rng_seed(&rng, 7);
    for (int l = 0; l <= SYN_L; l++) {
        hidden[l] = malloc(SYN_ROWS * SYN_D * sizeof(sp_real));
        assert_non_null(hidden[l]);
        for (int i = 0; i < SYN_ROWS * SYN_D; i++) {
            double step = sp_rng_normal(&rng);
            hidden[l][i] = (sp_real)(l == 0 ? step : copy_from >= 0 && l > copy_from ? hidden[l - 1][i]
                                                                                      : hidden[l - 1][i] + step);
        }
    }
    act_dump_write(path, &(act_dump_spec){.n_layers = SYN_L, .d_model = SYN_D, .n_streams = 1, .batch = SYN_BATCH,
                                          .seq_len = SYN_SEQ, .hidden = hidden});
    for (int l = 0; l <= SYN_L; l++)
        free(hidden[l]);
}

/* Analyzes a dump through the CLI (every analyzer, or `metrics`); 0 on success. */
static int analyze_dump(const char *dump, const char *report, const char *metrics)
{
    const char *const args[] = {"analyze", dump, "--out", report, "--device", "cpu", "--quiet", "--metrics", metrics,
                                NULL};
    return scratch_run_cli(args, NULL, NULL);
}

static int setup(void **state)
{
    *state = NULL;
    if (!getenv("SPANPROBE_BIN"))
        return 0; /* every test skips */
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    char text[12000];
    sp_rng rng;
    sp_rng_seed(&rng, 3);
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (char)(i % 57 == 56 ? '\n' : i % 7 == 6 ? ' ' : 'a' + sp_rng_below(&rng, 26));
    scratch_path(f->text, sizeof f->text, "text.txt");
    char moving_dump[4200], copied_dump[4200];
    scratch_path(moving_dump, sizeof moving_dump, "moving_dump.h5");
    scratch_path(copied_dump, sizeof copied_dump, "copied_dump.h5");
    scratch_path(f->moving, sizeof f->moving, "moving.h5");
    scratch_path(f->shallow, sizeof f->shallow, "moving_similarity.h5");
    scratch_path(f->copied, sizeof f->copied, "copied.h5");
    write_synthetic_dump(moving_dump, -1);
    write_synthetic_dump(copied_dump, SYN_L / 2);
    if (scratch_write_file(f->text, text, sizeof text) != 0 || analyze_dump(moving_dump, f->moving, "") != 0 ||
        analyze_dump(moving_dump, f->shallow, "similarity") != 0 || analyze_dump(copied_dump, f->copied, "") != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static fixture *need_fixture(void **state) { return cli_group_state(state, "SPANPROBE_BIN is not set"); }

static void test_synthetic_collapse(void **state)
{
    fixture *f = need_fixture(state);
    char *out = NULL, *err = NULL;
    cli_expect_exit(SP_ERR_CHECK, (const char *[]){"check", f->copied, NULL}, &out, &err);
    expect_line(out, "FAIL", "collapse.adjacent_cosine");
    assert_non_null(strstr(out, "summary:similarity.adjacent_cosine_deep_half = 1 "));
    /* a dump has no gradients: those rules are skipped with the analyzer's reason */
    expect_line(out, "SKIP", "vanishing_gradients.ffn_ratio");
    assert_non_null(strstr(out, "skipped grad_norms: needs the model's weights"));
    /* the tokens of each layer stay apart (random steps): no rank collapse across tokens */
    expect_line(out, "PASS", "collapse.token_uniformity");
    assert_non_null(strstr(out, "check: 1 passed, 1 failed"));
    cli_expect_one_line(err, (const char *[]){"spanprobe check: 1 of ", "collapse.adjacent_cosine", NULL});
    free(out);
    free(err);
    cli_expect_exit(SP_OK, (const char *[]){"check", f->moving, NULL}, &out, &err);
    expect_line(out, "PASS", "collapse.adjacent_cosine");
    assert_non_null(strstr(out, "check: 2 passed, 0 failed"));
    assert_string_equal(err, "");
    free(out);
    free(err);
}

/* The one checkpoint a run directory holds. */
static void find_checkpoint(const char *dir, char *path, size_t len)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    path[0] = '\0';
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "ckpt_", 5) == 0)
            snprintf(path, len, "%s/%s", dir, e->d_name);
    closedir(d);
    assert_true(path[0] != '\0');
}

/* Trains fixtures/tiny.json for `steps` at `lr`, analyzes the checkpoint and checks it with the
 * built-in rules; returns check's output (free()) and exit code. */
static int train_analyze_check(const fixture *f, const char *name, const char *lr, int train_exit, char **out)
{
    char dir[4200], ckpt[8400], report[4300];
    scratch_path(dir, sizeof dir, name);
    snprintf(report, sizeof report, "%s.report.h5", dir);
    cli_expect_exit(train_exit,
               (const char *[]){"train", "--config", "fixtures/tiny.json", "--data", f->text, "--steps", "4",
                                "--batch-size", "2", "--seq-len", "16", "--lr", lr, "--warmup-steps", "0",
                                "--grad-clip", "0", "--eval-every", "0", "--eval-windows", "2", "--device", "cpu",
                                "--out", dir, NULL},
               NULL, NULL);
    find_checkpoint(dir, ckpt, sizeof ckpt);
    cli_expect_exit(SP_OK,
               (const char *[]){"analyze", ckpt, "--out", report, "--data", f->text, "--metrics",
                                "similarity,grad_norms", "--n-tokens", "64", "--seq", "16", "--device", "cpu",
                                "--quiet", NULL},
               NULL, NULL);
    assert_int_equal(tree_remove(dir), 0);
    char *err = NULL;
    int rc = scratch_run_cli((const char *[]){"check", report, NULL}, out, &err);
    free(err);
    char *summary = sp_report_summary_path(report);
    unlink(report);
    unlink(summary);
    free(summary);
    return rc;
}

static void test_divergence(void **state)
{
    fixture *f = need_fixture(state);
    char *out = NULL;
    int rc = train_analyze_check(f, "diverged_run", "1e30", SP_ERR_DIVERGED, &out);
    assert_int_equal(rc, SP_ERR_CHECK);
    expect_line(out, "FAIL", "divergence.training");
    assert_non_null(strstr(out, "summary:train.diverged = 1 (limit: == 0)"));
    free(out);
    rc = train_analyze_check(f, "finished_run", "0.003", SP_OK, &out);
    expect_line(out, "PASS", "divergence.training");
    expect_line(out, "PASS", "divergence.eval_loss");
    assert_true(rc == SP_OK || rc == SP_ERR_CHECK); /* 4 steps: the collapse rule may fire */
    free(out);
}

static void test_baseline(void **state)
{
    fixture *f = need_fixture(state);
    char *rules = scratch_file("baseline_rules.json");
    const char *text =
        "{\"rules\": [\n"
        "  {\"name\": \"deep block influence\", \"metric\": \"similarity/block_influence\", \"reduce\": \"mean\",\n"
        "   \"layers\": \"deepest_half\", \"tolerance\": {\"absolute\": 0.05, \"fail_on\": \"decrease\"}},\n"
        "  {\"name\": \"deep cosine\", \"metric\": \"summary:similarity.adjacent_cosine_deep_half\",\n"
        "   \"tolerance\": {\"relative\": 0.02}},\n"
        "  {\"name\": \"rms\", \"metric\": \"growth/rms\", \"reduce\": \"max\", \"layers\": [0, 4],\n"
        "   \"tolerance\": {\"relative\": 0.001}}\n"
        "]}\n";
    assert_int_equal(scratch_write_file(rules, text, strlen(text)), 0);
    char *out = NULL, *err = NULL;
    /* deep layers that became copies: block influence fell to 0, the cosine rose to 1; the shallow
     * layers are the same in both dumps */
    char *junit = scratch_file("baseline.xml");
    cli_expect_exit(SP_ERR_CHECK,
               (const char *[]){"check", f->copied, "--rules", rules, "--baseline", f->moving, "--junit", junit, NULL},
               &out, &err);
    expect_line(out, "FAIL", "deep block influence");
    expect_line(out, "FAIL", "deep cosine");
    expect_line(out, "PASS", "rms");
    assert_non_null(strstr(out, "= 0, baseline "));
    assert_non_null(strstr(err, "2 of 3 rules failed"));
    char *xml = scratch_read_file(junit, NULL);
    assert_non_null(xml);
    assert_non_null(strstr(xml, "tests=\"3\" failures=\"2\" errors=\"0\" skipped=\"0\""));
    assert_non_null(strstr(xml, "type=\"tolerance\""));
    free(xml);
    free(out);
    free(err);
    cli_expect_exit(SP_OK, (const char *[]){"check", f->moving, "--rules", rules, "--baseline", f->moving, NULL}, &out,
               NULL);
    assert_non_null(strstr(out, "check: 3 passed, 0 failed, 0 skipped, 0 errors (3 rules)"));
    free(out);
    /* the baseline ran without growth: an error in the gate, not a pass */
    cli_expect_exit(SP_ERR_INPUT, (const char *[]){"check", f->moving, "--rules", rules, "--baseline", f->shallow, NULL},
               &out, &err);
    expect_line(out, "ERROR", "rms");
    assert_non_null(strstr(out, "moving_similarity.h5 has no growth results"));
    assert_non_null(strstr(err, "could not be evaluated"));
    free(out);
    free(err);
}

static void expect_cli_error(int code, const char *const *args, const char *needle)
{
    cli_expect_error(code, args, (const char *[]){"spanprobe check: ", needle, NULL});
}

static void test_usage_and_inputs(void **state)
{
    fixture *f = need_fixture(state);
    expect_cli_error(SP_ERR_USAGE, (const char *[]){"check", NULL}, "expected a report");
    expect_cli_error(SP_ERR_USAGE, (const char *[]){"check", f->moving, "--rule", "x", NULL}, "unknown option '--rule'");
    expect_cli_error(SP_ERR_USAGE, (const char *[]){"check", f->moving, f->copied, NULL}, "one report expected");
    expect_cli_error(SP_ERR_USAGE, (const char *[]){"check", f->moving, "--rules", NULL}, "--rules");
    expect_cli_error(SP_ERR_USAGE, (const char *[]){"check", f->moving, "--baseline", f->copied, NULL},
                     "no rule has a \"tolerance\"");
    char *rules = scratch_file("usage_rules.json");
    const char *tolerance = "{\"rules\": [{\"metric\": \"summary:similarity.s1\", \"tolerance\": {\"absolute\": 0}}]}";
    assert_int_equal(scratch_write_file(rules, tolerance, strlen(tolerance)), 0);
    expect_cli_error(SP_ERR_USAGE, (const char *[]){"check", f->moving, "--rules", rules, NULL}, "give --baseline");
    const char *unknown = "{\"rules\": [{\"metric\": \"similarity/adjacent_cos\", \"reduce\": \"mean\", \"op\": \"<\","
                          " \"limit\": 0.9}]}";
    assert_int_equal(scratch_write_file(rules, unknown, strlen(unknown)), 0);
    char *out = NULL;
    expect_cli_error(SP_ERR_INPUT, (const char *[]){"check", f->moving, "--rules", rules, NULL},
                     "has no array /metrics/similarity/adjacent_cos");
    cli_expect_exit(SP_ERR_INPUT, (const char *[]){"check", f->moving, "--rules", rules, NULL}, &out, NULL);
    expect_line(out, "ERROR", "similarity/adjacent_cos");
    free(out);
    const char *bad_analyzer = "{\"rules\": [{\"metric\": \"summary:simlarity.s1\", \"op\": \"<\", \"limit\": 1}]}";
    assert_int_equal(scratch_write_file(rules, bad_analyzer, strlen(bad_analyzer)), 0);
    expect_cli_error(SP_ERR_INPUT, (const char *[]){"check", f->moving, "--rules", rules, NULL},
                     "rule 1: \"metric\": unknown analyzer 'simlarity'");
    expect_cli_error(SP_ERR_IO, (const char *[]){"check", scratch_file("absent.h5"), NULL}, "absent.h5");
    expect_cli_error(SP_ERR_INPUT, (const char *[]){"check", f->text, NULL}, "text.txt");
    expect_cli_error(SP_ERR_IO, (const char *[]){"check", f->moving, "--junit", "/nonexistent-dir/c.xml", NULL},
                     "/nonexistent-dir");
}

static void test_print_rules_and_help(void **state)
{
    fixture *f = need_fixture(state);
    (void)f;
    char *out = NULL;
    cli_expect_exit(SP_OK, (const char *[]){"check", "--print-rules", NULL}, &out, NULL);
    sp_check_rules printed, builtin;
    assert_int_equal(sp_check_rules_parse(out, "--print-rules", &printed), SP_OK);
    assert_int_equal(sp_check_rules_defaults(&builtin), SP_OK);
    assert_int_equal(printed.n, builtin.n);
    for (int i = 0; i < builtin.n; i++) {
        assert_string_equal(printed.rules[i].name, builtin.rules[i].name);
        assert_true(printed.rules[i].limit == builtin.rules[i].limit);
    }
    sp_check_rules_free(&printed);
    sp_check_rules_free(&builtin);
    free(out);
    cli_expect_exit(SP_OK, (const char *[]){"check", "--help", NULL}, &out, NULL);
    assert_non_null(strstr(out, "--junit FILE"));
    assert_non_null(strstr(out, "exit codes"));
    free(out);
    cli_expect_exit(SP_OK, (const char *[]){"--help", NULL}, &out, NULL);
    assert_non_null(strstr(out, "  check "));
    free(out);
}

/* Writes a copy of the dump at src whose hidden layers above keep are copies of layer keep. */
static void copy_deep_layers(const char *src, const char *dst, int keep)
{
    sp_dump *d = NULL;
    assert_int_equal(sp_dump_open(src, &d), SP_OK);
    sp_dump_info info = *sp_dump_get_info(d);
    info.has_ffn_latent = info.has_sum_a = info.has_sum_z = info.has_logits = 0;
    snprintf(info.source, sizeof info.source, "test: hidden layers above %d replaced by copies of layer %d", keep, keep);
    int64_t rows = sp_dump_rows(d);
    int32_t *tokens = malloc((size_t)rows * sizeof *tokens);
    sp_real *h = malloc((size_t)rows * (size_t)info.d_model * sizeof *h);
    assert_true(tokens && h);
    assert_int_equal(sp_dump_read_tokens(d, tokens), SP_OK);
    sp_dump_writer *w = NULL;
    assert_int_equal(sp_dump_create(dst, &info, tokens, &w), SP_OK);
    for (int l = 0; l <= info.n_layers; l++) {
        assert_int_equal(sp_dump_read(d, SP_DUMP_HIDDEN, 0, l <= keep ? l : keep, 0, rows, h), SP_OK);
        assert_int_equal(sp_dump_write(w, SP_DUMP_HIDDEN, 0, l, 0, rows, h), SP_OK);
    }
    assert_int_equal(sp_dump_commit(w), SP_OK);
    sp_dump_close(d);
    free(tokens);
    free(h);
}

static void test_trained_model(void **state)
{
    fixture *f = need_fixture(state);
    char ckpt[4200];
    stories260k_import("stories.h5", ckpt, sizeof ckpt, NULL);
    char report[4200], dump[4200], copied_dump[4200], dump_report[4200], copied_report[4200];
    scratch_path(report, sizeof report, "stories_report.h5");
    scratch_path(dump, sizeof dump, "stories_dump.h5");
    scratch_path(copied_dump, sizeof copied_dump, "stories_copied_dump.h5");
    scratch_path(dump_report, sizeof dump_report, "stories_dump_report.h5");
    scratch_path(copied_report, sizeof copied_report, "stories_copied_report.h5");
    cli_expect_exit(SP_OK,
               (const char *[]){"analyze", ckpt, "--out", report, "--data", f->text, "--metrics",
                                "similarity,grad_norms", "--n-tokens", "512", "--seq", "64", "--device", "cpu",
                                "--quiet", NULL},
               NULL, NULL);
    char *out = NULL;
    cli_expect_exit(SP_OK, (const char *[]){"check", report, NULL}, &out, NULL);
    expect_line(out, "PASS", "collapse.adjacent_cosine");
    expect_line(out, "PASS", "vanishing_gradients.ffn_ratio");
    expect_line(out, "SKIP", "divergence.training"); /* an imported model has no training state */
    free(out);
    /* its real activations, then the same with the deepest half (5 layers: blocks 3, 4) as copies */
    cli_expect_exit(SP_OK, (const char *[]){"dump", ckpt, "--text", f->text, "--out", dump, "--seq", "64", "--device",
                                       "cpu", NULL},
               NULL, NULL);
    copy_deep_layers(dump, copied_dump, 3);
    cli_expect_exit(SP_OK, (const char *[]){"analyze", dump, "--out", dump_report, "--metrics", "similarity", "--n-tokens",
                                       "512", "--device", "cpu", "--quiet", NULL},
               NULL, NULL);
    cli_expect_exit(SP_OK, (const char *[]){"analyze", copied_dump, "--out", copied_report, "--metrics", "similarity",
                                       "--n-tokens", "512", "--device", "cpu", "--quiet", NULL},
               NULL, NULL);
    cli_expect_exit(SP_OK, (const char *[]){"check", dump_report, NULL}, &out, NULL);
    expect_line(out, "PASS", "collapse.adjacent_cosine");
    free(out);
    cli_expect_exit(SP_ERR_CHECK, (const char *[]){"check", copied_report, NULL}, &out, NULL);
    expect_line(out, "FAIL", "collapse.adjacent_cosine");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic_collapse),
        cmocka_unit_test(test_divergence),
        cmocka_unit_test(test_baseline),
        cmocka_unit_test(test_usage_and_inputs),
        cmocka_unit_test(test_print_rules_and_help),
        cmocka_unit_test(test_trained_model),
    };
    return cmocka_run_group_tests(tests, setup, cli_group_free);
}

/* `spanprobe drift` on the command line ($SPANPROBE_BIN; skipped without it):
 * - --help, usage errors (one model, --data with --tokens, an unknown option): exit 2, one line;
 * - a missing model: exit 5 (cannot open), one line; models of different shapes (vocabulary,
 *   d_model): exit 3, one line naming both; an output that would replace an input (the model
 *   directory's weights, a checkpoint file): exit 2; nothing written in each case;
 * - a run on a text (tokenized with REF's tokenizer) writes the report and its summary and prints the summary lines;
 * - `check` gates a drift report: rules on summary:drift.kl_mean, summary:drift.top1_agreement and
 *   drift/rel_error (max over layers) pass on the smallest perturbation and fail (exit 7) on the
 *   largest; `plot` draws the drift figure from drift reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/cli_expect.h"
#include "support/scratch.h"

#define REF "fixtures/hf/llama-f32"
#define SMALL "fixtures/drift/llama-f32-noise0.003"
#define LARGE "fixtures/drift/llama-f32-noise0.3"
#define TOKENS "fixtures/drift/tokens.txt"

static int setup(void **state)
{
    *state = getenv("SPANPROBE_BIN") ? calloc(1, 1) : NULL;
    return 0;
}

/* drift REF model on the committed tokens into scratch <name>, exit 0 expected. */
static void run_drift(const char *model, const char *name, char *report, size_t len)
{
    scratch_path(report, len, name);
    cli_expect_exit(0, (const char *const[]){"drift", REF, model, "--out", report, "--tokens", TOKENS, "--seq", "32",
                                             "--quiet", NULL},
                    NULL, NULL);
}

static void test_help_and_usage(void **state)
{
    cli_group_state(state, "SPANPROBE_BIN is not set");
    char *out = NULL;
    cli_expect_exit(0, (const char *const[]){"drift", "--help", NULL}, &out, NULL);
    assert_non_null(strstr(out, "usage: spanprobe drift REF MODEL --out REPORT.h5"));
    assert_non_null(strstr(out, "--tokens FILE"));
    free(out);
    cli_expect_error(2, (const char *const[]){"drift", REF, "--out", "x.h5", NULL},
                     (const char *const[]){"expected two models", NULL});
    cli_expect_error(2, (const char *const[]){"drift", REF, SMALL, NULL}, (const char *const[]){"--out", NULL});
    cli_expect_error(2, (const char *const[]){"drift", REF, SMALL, "--out", "x.h5", "--data", "a", "--tokens", "b", NULL},
                     (const char *const[]){"at most one of --data FILE and --tokens FILE", NULL});
    cli_expect_error(2, (const char *const[]){"drift", REF, SMALL, "--out", "x.h5", "--bogus", NULL},
                     (const char *const[]){"unknown option '--bogus'", NULL});
    cli_expect_error(2, (const char *const[]){"drift", REF, SMALL, "--out", "x.h5", "--batch", "0", NULL},
                     (const char *const[]){"--batch", NULL});
}

static void test_bad_inputs(void **state)
{
    cli_group_state(state, "SPANPROBE_BIN is not set");
    char out[4200];
    scratch_path(out, sizeof out, "bad.h5");
    cli_expect_error(5, (const char *const[]){"drift", REF, "fixtures/drift/absent", "--out", out, NULL},
                     (const char *const[]){"fixtures/drift/absent", NULL});
    cli_expect_error(3, (const char *const[]){"drift", REF, "fixtures/hf/llama-mqa-tied-f32", "--out", out, NULL},
                     (const char *const[]){"vocab_size 320", "has 128", "one shape", NULL});
    cli_expect_error(3, (const char *const[]){"drift", REF, "fixtures/hf/gpt2-f32", "--out", out, NULL},
                     (const char *const[]){"d_model 32", "has 48", NULL});
    cli_expect_error(2, (const char *const[]){"drift", REF, SMALL, "--out", SMALL "/model.safetensors", NULL},
                     (const char *const[]){"model.safetensors", "an input", NULL});
    assert_int_equal(scratch_count_entries("bad*"), 0);
    /* a checkpoint file as the output */
    char ckpt[4200];
    scratch_path(ckpt, sizeof ckpt, "tiny.h5");
    cli_expect_exit(0, (const char *const[]){"init", "--out", ckpt, "--n-layers", "2", "--d-model", "16", "--n-heads",
                                             "4", "--d-ff", "32", "--vocab-size", "32", "--max-seq-len", "16", NULL},
                    NULL, NULL);
    size_t before = 0, after = 0;
    free(scratch_read_file(ckpt, &before));
    cli_expect_error(2, (const char *const[]){"drift", ckpt, ckpt, "--out", ckpt, NULL}, (const char *const[]){NULL});
    free(scratch_read_file(ckpt, &after));
    assert_int_equal(before, after);
}

static void test_text_run(void **state)
{
    cli_group_state(state, "SPANPROBE_BIN is not set");
    char text[4200], report[4200], summary[4200];
    scratch_path(text, sizeof text, "text.txt");
    static const char sentence[] = "Call me Ishmael. Some years ago, never mind how long precisely, I went to sea. ";
    FILE *f = fopen(text, "w");
    assert_non_null(f);
    for (int i = 0; i < 400; i++) /* a validation split (the last 10%) of a few hundred tokens */
        fputs(sentence, f);
    assert_int_equal(fclose(f), 0);
    scratch_path(report, sizeof report, "text.h5");
    scratch_path(summary, sizeof summary, "text.json");
    char *out = NULL;
    cli_expect_exit(0, (const char *const[]){"drift", REF, SMALL, "--out", report, "--data", text, "--seq", "16",
                                             "--n-tokens", "64", "--quiet", NULL},
                    &out, NULL);
    assert_string_equal(out, ""); /* --quiet */
    free(out);
    assert_true(scratch_file_exists(report) && scratch_file_exists(summary));
    char *err = NULL;
    cli_expect_exit(0, (const char *const[]){"drift", REF, SMALL, "--out", report, "--data", text, "--seq", "16",
                                             "--n-tokens", "64", NULL},
                    &out, &err);
    assert_non_null(strstr(out, "kl_mean"));
    assert_non_null(strstr(out, "top1_agreement"));
    assert_non_null(strstr(out, "wrote "));
    assert_non_null(strstr(err, "drift: loading " REF));
    free(out);
    free(err);
}

static void test_check_gate(void **state)
{
    cli_group_state(state, "SPANPROBE_BIN is not set");
    char small[4200], large[4200], rules[4200];
    run_drift(SMALL, "small.h5", small, sizeof small);
    run_drift(LARGE, "large.h5", large, sizeof large);
    static const char text[] =
        "{\"rules\": [\n"
        " {\"name\": \"kl\", \"metric\": \"summary:drift.kl_mean\", \"op\": \"<=\", \"limit\": 0.001},\n"
        " {\"name\": \"top1\", \"metric\": \"summary:drift.top1_agreement\", \"op\": \">=\", \"limit\": 0.9},\n"
        " {\"name\": \"layers\", \"metric\": \"drift/rel_error\", \"reduce\": \"max\", \"op\": \"<=\", \"limit\": 0.05}\n"
        "]}\n";
    scratch_path(rules, sizeof rules, "drift_rules.json");
    assert_int_equal(scratch_write_file(rules, text, strlen(text)), 0);
    char *out = NULL;
    cli_expect_exit(0, (const char *const[]){"check", small, "--rules", rules, NULL}, &out, NULL);
    assert_non_null(strstr(out, "3 passed, 0 failed"));
    free(out);
    cli_expect_exit(7, (const char *const[]){"check", large, "--rules", rules, NULL}, &out, NULL);
    assert_non_null(strstr(out, "0 passed, 3 failed"));
    free(out);
}

static void test_plot(void **state)
{
    cli_group_state(state, "SPANPROBE_BIN is not set");
    char small[4200], large[4200], dir[4200], png[4300];
    run_drift(SMALL, "p_small.h5", small, sizeof small);
    run_drift(LARGE, "p_large.h5", large, sizeof large);
    scratch_path(dir, sizeof dir, "drift_plot");
    char *err = NULL;
    int rc = scratch_run_cli((const char *const[]){"plot", small, large, "--out", dir, "--only", "drift", NULL}, NULL,
                             &err);
    if (rc == 5 && err && strstr(err, "gnuplot")) { /* no gnuplot here */
        free(err);
        skip();
    }
    free(err);
    assert_int_equal(rc, 0);
    snprintf(png, sizeof png, "%s/drift.png", dir);
    assert_true(scratch_file_exists(png));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_usage), cmocka_unit_test(test_bad_inputs), cmocka_unit_test(test_text_run),
        cmocka_unit_test(test_check_gate),     cmocka_unit_test(test_plot),
    };
    return cmocka_run_group_tests_name("test_drift_cli", tests, setup, cli_group_free);
}

/* The h5py recipe (spanprobe.capture, python/spanprobe/dump.py; docs/formats.md, "Writing a dump from any
 * framework"): its committed output fixtures/dump_recipe/llama.h5 opens with the dump reader with
 * the structure its README describes and finite values, is not taken for a final norm's output, and
 * `inspect` and `analyze` read it without a warning; each excerpt of the recipe in docs/formats.md
 * is verbatim in the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzers/final_norm_check.h"
#include "io/dump.h"
#include "support/cli_expect.h"
#include "support/scratch.h"

#define FIXTURE "fixtures/dump_recipe/llama.h5"
#define RECIPE "python/spanprobe/dump.py"
#define EXCERPT_START "```python\n# " RECIPE " (excerpt)\n"

enum { L = 2, D = 8, DFF = 16, ROWS = 2 * 24 };

static void test_structure(void **state)
{
    (void)state;
    sp_dump *d = NULL;
    sp_error_clear();
    assert_int_equal(sp_dump_open(FIXTURE, &d), SP_OK);
    const sp_dump_info *info = sp_dump_get_info(d);
    assert_int_equal(info->n_layers, L);
    assert_int_equal(info->d_model, D);
    assert_int_equal(info->n_streams, 1);
    assert_int_equal(info->d_ff, DFF);
    assert_int_equal(info->vocab_size, 64);
    assert_int_equal(info->batch, 2);
    assert_int_equal(info->seq_len, 24);
    assert_true(info->has_ffn_latent && info->float16);
    assert_false(info->has_sum_a || info->has_sum_z || info->has_logits); /* a pre-norm model: no /presum */
    assert_non_null(strstr(info->source, "spanprobe.capture"));

    int32_t tokens[ROWS];
    sp_real rows[ROWS * DFF];
    assert_int_equal(sp_dump_read_tokens(d, tokens), SP_OK);
    for (int l = 0; l <= L; l++) /* every value finite (the reader rejects NaN/Inf) */
        assert_int_equal(sp_dump_read(d, SP_DUMP_HIDDEN, 0, l, 0, ROWS, rows), SP_OK);
    for (int l = 0; l < L; l++)
        assert_int_equal(sp_dump_read(d, SP_DUMP_FFN_LATENT, 0, l, 0, ROWS, rows), SP_OK);

    sp_final_norm_check check;
    assert_int_equal(sp_dump_check_final_norm(d, &check), SP_OK);
    assert_true(check.checked && !check.looks_normalized && check.rho_last >= SP_FINAL_NORM_RAW);
    sp_dump_close(d);
}

static void test_cli_reads_it(void **state)
{
    (void)state;
    char *out = NULL, *err = NULL, report[4200];
    cli_expect_exit(0, (const char *const[]){"inspect", FIXTURE, NULL}, &out, &err);
    assert_non_null(strstr(out, "/ffn_latent"));
    if (*err)
        fail_msg("inspect " FIXTURE ": expected nothing on stderr, found: %s", err);
    free(out);
    free(err);
    scratch_path(report, sizeof report, "recipe-report.h5");
    cli_expect_exit(0, (const char *const[]){"analyze", FIXTURE, "--out", report, "--device", "cpu", NULL}, NULL, NULL);
}

static void test_docs_excerpts(void **state)
{
    (void)state;
    char *docs = scratch_read_file("docs/formats.md", NULL), *recipe = scratch_read_file(RECIPE, NULL);
    assert_non_null(docs);
    assert_non_null(recipe);
    int excerpts = 0;
    for (char *p = strstr(docs, EXCERPT_START); p; p = strstr(p, EXCERPT_START)) {
        p += strlen(EXCERPT_START);
        char *end = strstr(p, "```\n");
        assert_non_null(end);
        *end = '\0';
        if (!strstr(recipe, p))
            fail_msg("docs/formats.md: this excerpt is not in " RECIPE ":\n%s", p);
        excerpts++;
        p = end + 1;
    }
    assert_true(excerpts >= 2); /* the hooks and where /presum's "present" goes */
    free(docs);
    free(recipe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_structure),
        cmocka_unit_test(test_cli_reads_it),
        cmocka_unit_test(test_docs_excerpts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* `spanprobe compare` and the agreement rule (analyzers/agreement.h), on the CPU:
 * - the rule itself: scale = max |a|, absolute entries, NaN/Inf positions and signs, the worst entry;
 * - the table names every array and summary key of full reports (span with RMSNorm, SwiGLU, RoPE and
 *   presums; siamese with its Y stream): nothing falls to the catch-all;
 * - end to end on reports of one small checkpoint and one token set: a report against itself, against
 *   one made with another --batch (other accumulation order) and against spanprobe-f64's (the fp64
 *   reference the GPU benchmark compares with) all pass with the default table;
 * - copies with one planted change beyond tolerance (an array, a summary scalar), a NaN in one only,
 *   a missing array fail with exit 7 and a line naming the metric; --metrics and --rtol/--atol change
 *   the verdict as documented; arrays of different shapes, non-reports and usage errors give exit
 *   3, 5 and 2 with one line; spanprobe-f64 --device cuda is a one-line usage error. */
#include <cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzers/agreement.h"
#include "io/report.h"
#include "support/analyze_cli.h"
#include "support/cli_expect.h"
#include "support/h5_edit.h"
#include "support/report_view.h"
#include "support/scratch.h"

/* Small models: every analyzer runs in well under a second. (Not one kv head: the weights analyzer
 * leaves heads_wk and heads_wv unwritten then, so they hold whatever memory held.) */
#define MODEL_ARGS "--n-layers", "4", "--d-model", "16", "--n-heads", "4", "--n-kv-heads", "2", "--d-ff", "32", \
                   "--max-seq-len", "16", "--vocab-size", "32"
/* 8 sequences of 16 tokens; the gradient and pruning batches cover all 8 at --batch 8 and at 4 */
#define ANALYZE_ARGS "--n-tokens", "128", "--seq-len", "16", "--grad-batches", "2", "--prune-batches", "2"

typedef struct {
    char span_ckpt[4200]; /* span (RMSNorm, SwiGLU, RoPE) */
    char tokens[4200];    /* its evaluation tokens (also: a file that is not a report) */
    char span[4200];      /* the span report, --batch 8 */
    char span_b4[4200];   /* the same with --batch 4 */
    char span_f64[4200];  /* the same by spanprobe-f64 */
    char siamese[4200];   /* a siamese model's report, --batch 8 */
} fixture;

static const char *const batch8[] = {ANALYZE_ARGS, "--batch", "8", NULL};

static int setup(void **state)
{
    *state = NULL;
    if (!getenv("SPANPROBE_BIN"))
        return 0; /* the CLI tests skip */
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    *state = f;
    return 0;
}

/* The fp32 reports, made on first use (cmocka's skip and fail work inside tests only). */
static fixture *need_reports(void **state)
{
    fixture *f = cli_group_state(state, "SPANPROBE_BIN is not set");
    if (f->span[0])
        return f;
    char siamese[4200];
    analyze_cli_init("span.h5", (const char *const[]){"--variant", "span", "--norm", "rmsnorm", "--ffn", "swiglu",
                                                      "--pos", "rope", MODEL_ARGS, "--seed", "3", NULL},
                     f->span_ckpt, sizeof f->span_ckpt);
    analyze_cli_init("siamese.h5", (const char *const[]){"--variant", "siamese", MODEL_ARGS, "--seed", "4", NULL},
                     siamese, sizeof siamese);
    analyze_cli_tokens("tokens.txt", 400, 32, 7, f->tokens, sizeof f->tokens);
    const char *const batch4[] = {ANALYZE_ARGS, "--batch", "4", NULL};
    analyze_cli_run(NULL, f->span_ckpt, f->tokens, "cpu", batch4, "r_span_b4.h5", f->span_b4, sizeof f->span_b4);
    analyze_cli_run(NULL, siamese, f->tokens, "cpu", batch8, "r_siamese.h5", f->siamese, sizeof f->siamese);
    analyze_cli_run(NULL, f->span_ckpt, f->tokens, "cpu", batch8, "r_span.h5", f->span, sizeof f->span);
    return f;
}

/* The fp64 report too; skips when spanprobe-f64 is not built. */
static fixture *need_f64_report(void **state)
{
    fixture *f = need_reports(state);
    if (!f->span_f64[0])
        analyze_cli_run(analyze_cli_f64_bin(), f->span_ckpt, f->tokens, "cpu", batch8, "r_span_f64.h5", f->span_f64,
                        sizeof f->span_f64);
    return f;
}

/* A line of out that starts with `outcome` and holds `needle`. */
static void expect_line(const char *out, const char *outcome, const char *needle)
{
    for (const char *line = out; line && *line;) {
        size_t len = strcspn(line, "\n");
        if (strncmp(line, outcome, strlen(outcome)) == 0) {
            char buf[2048];
            snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
            if (strstr(buf, needle))
                return;
        }
        line += len + (line[len] == '\n');
    }
    fail_msg("no %s line naming %s in:\n%s", outcome, needle, out);
}

/* compare a b [extra...] must exit with code; its stdout (free()). */
static char *compare(int code, const char *a, const char *b, const char *extra1, const char *extra2)
{
    const char *args[] = {"compare", a, b, extra1, extra2, NULL};
    char *out = NULL;
    cli_expect_exit(code, args, &out, NULL);
    return out;
}

/* ---- the rule ---- */

static void test_rule_scale_and_absolute(void **state)
{
    (void)state;
    /* powers of two: every difference is exactly 2^-11 */
    const double d = 0x1p-11, a[] = {128, 1, 0x1p-20, 0}, b[] = {128 + d, 1 + d, 0x1p-20 + d, d};
    sp_agreement g;
    /* atol 2^-17 of the top (128) is 2^-10 for every entry: all pass */
    sp_agreement_check(a, b, 4, 0x1p-17, 0, 0, &g);
    assert_true(sp_agreement_pass(&g));
    assert_true(g.abs_term == 0x1p-10);
    assert_true(g.max_abs_diff == d);
    assert_true(isinf(g.max_rel_diff)); /* a = 0 != b */
    /* the same atol in the metric's own units is 2^-17: all fail */
    sp_agreement_check(a, b, 4, 0x1p-17, 0, 1, &g);
    assert_int_equal(g.n_outside, 4);
    /* relative only, 2^-9 |a|: the two small entries fail, a = 0 (no allowance) the worst */
    sp_agreement_check(a, b, 4, 0, 0x1p-9, 0, &g);
    assert_int_equal(g.n_outside, 2);
    assert_int_equal(g.worst, 3);
}

static void test_rule_nonfinite(void **state)
{
    (void)state;
    const double a[] = {NAN, INFINITY, 1, -INFINITY}, same[] = {NAN, INFINITY, 1, -INFINITY};
    sp_agreement g;
    sp_agreement_check(a, same, 4, 0, 0, 0, &g);
    assert_true(sp_agreement_pass(&g));
    const double flipped[] = {NAN, -INFINITY, 1, -INFINITY}, finite[] = {NAN, INFINITY, 1, 5};
    const double nan_b[] = {NAN, INFINITY, NAN, -INFINITY};
    sp_agreement_check(a, flipped, 4, 1, 1, 0, &g);
    assert_int_equal(g.n_nonfinite, 1);
    assert_int_equal(g.worst, 1);
    sp_agreement_check(a, finite, 4, 1, 1, 0, &g);
    assert_int_equal(g.n_nonfinite, 1);
    assert_int_equal(g.worst, 3);
    sp_agreement_check(a, nan_b, 4, 1e300, 1e300, 0, &g); /* no tolerance covers a NaN */
    assert_false(sp_agreement_pass(&g));
    assert_int_equal(g.worst, 2);
}

static void test_table_lookup(void **state)
{
    (void)state;
    /* the Y stream takes the X stream's entry; first match wins; iteration counts are not compared */
    assert_ptr_equal(sp_tolerance_find(SP_AGREE_ARRAY, "similarity", "cosine_y"),
                     sp_tolerance_find(SP_AGREE_ARRAY, "similarity", "cosine"));
    assert_false(sp_tolerance_find(SP_AGREE_ARRAY, "jacobian", "sigma_max_iters")->compared);
    assert_true(sp_tolerance_find(SP_AGREE_ARRAY, "jacobian", "sigma_max")->rtol >= 1e-3);
    const sp_tolerance *eig = sp_tolerance_find(SP_AGREE_ARRAY, "ffn_spectra", "eigenvalues");
    assert_false(eig->absolute);
    assert_true(eig->atol > 0);
    assert_true(sp_tolerance_is_fallback(sp_tolerance_find(SP_AGREE_ARRAY, "no_such_analyzer", "x")));
    assert_true(sp_tolerance_is_fallback(sp_tolerance_find(SP_AGREE_SCALAR, "no_such_analyzer", "x")));
    for (int i = 0; i < sp_n_tolerances; i++) /* every entry says why */
        assert_true(strlen(sp_tolerances[i].reason) > 20);
}

/* Every array and summary key of the report has its own entry (not the catch-all). */
static void expect_table_covers(const char *path)
{
    report_view v;
    report_view_open(&v, path);
    char **analyzers = NULL;
    int n_analyzers = 0;
    assert_int_equal(sp_report_list(v.reader, NULL, &analyzers, &n_analyzers), SP_OK);
    assert_true(n_analyzers >= 10);
    for (int i = 0; i < n_analyzers; i++) {
        char **arrays = NULL;
        int n_arrays = 0;
        assert_int_equal(sp_report_list(v.reader, analyzers[i], &arrays, &n_arrays), SP_OK);
        assert_true(n_arrays > 0);
        for (int j = 0; j < n_arrays; j++)
            if (sp_tolerance_is_fallback(sp_tolerance_find(SP_AGREE_ARRAY, analyzers[i], arrays[j])))
                fail_msg("%s: /metrics/%s/%s has no entry in the tolerance table", path, analyzers[i], arrays[j]);
        sp_report_names_free(arrays, n_arrays);
    }
    sp_report_names_free(analyzers, n_analyzers);
    const cJSON *metrics = cJSON_GetObjectItemCaseSensitive(v.summary, "metrics");
    for (const cJSON *group = metrics->child; group; group = group->next)
        for (const cJSON *key = group->child; key; key = key->next)
            if (sp_tolerance_is_fallback(sp_tolerance_find(SP_AGREE_SCALAR, group->string, key->string)))
                fail_msg("%s: summary key %s.%s has no entry in the tolerance table", path, group->string,
                         key->string);
    report_view_close(&v);
}

static void test_table_covers_full_reports(void **state)
{
    fixture *f = need_reports(state);
    expect_table_covers(f->span);
    expect_table_covers(f->siamese);
}

/* ---- reports that agree ---- */

static void test_self(void **state)
{
    fixture *f = need_reports(state);
    char *out = compare(0, f->siamese, f->siamese, NULL, NULL);
    expect_line(out, "PASS", "similarity/cosine_y [5, 5]: max |diff| 0,");
    expect_line(out, "PASS", "summary:grad_norms.loss: max |diff| 0,");
    expect_line(out, "SKIP", "jacobian/sigma_max_iters: not compared");
    assert_null(strstr(out, "FAIL"));
    assert_non_null(strstr(out, " 0 failed, 0 missing,"));
    free(out);
}

static void test_other_batch(void **state)
{
    fixture *f = need_reports(state);
    char *out = compare(0, f->span, f->span_b4, NULL, NULL);
    /* a real difference: the moments were summed in another order */
    assert_null(strstr(out, "PASS    hidden_spectra/eigenvalues [5, 16]: max |diff| 0,"));
    expect_line(out, "PASS", "presums/sigma_a [4]");
    free(out);
}

static void test_fp64_reference(void **state)
{
    fixture *f = need_f64_report(state);
    /* both ways round: the fp64 report as the reference (the benchmark's use), and as the other */
    char *out = compare(0, f->span_f64, f->span, NULL, NULL);
    expect_line(out, "PASS", "jacobian/topk [4, 8]");
    assert_null(strstr(out, "PASS    jacobian/topk [4, 8]: max |diff| 0,"));
    free(out);
    free(compare(0, f->span, f->span_f64, "--quiet", NULL));
}

/* ---- reports that differ ---- */

static void test_planted_array_change(void **state)
{
    fixture *f = need_reports(state);
    char copy[4200];
    analyze_cli_copy_report(f->span, "planted.h5", copy, sizeof copy);
    report_view v;
    report_view_open(&v, f->span);
    double *rms = report_view_array(&v, "growth", "rms", NULL, NULL);
    report_view_close(&v);
    h5_edit_poison(copy, "/metrics/growth/rms", 1, rms[0] * 1.01); /* 100x the table's rtol */
    char *out = compare(SP_ERR_CHECK, f->span, copy, NULL, NULL);
    expect_line(out, "FAIL", "growth/rms [5]: 1 of 5 beyond tolerance, worst [0]");
    assert_non_null(strstr(out, " 1 failed, 0 missing,"));
    free(out);
    /* --metrics leaves growth out; --rtol above the change lets it pass */
    free(compare(0, f->span, copy, "--metrics", "similarity,presums,run"));
    free(compare(0, f->span, copy, "--rtol", "0.02"));
    out = compare(SP_ERR_CHECK, f->span, copy, "--rtol", "0.001");
    expect_line(out, "FAIL", "growth/rms");
    free(out);
    free(rms);
}

static void test_planted_summary_change(void **state)
{
    fixture *f = need_reports(state);
    char copy[4200];
    analyze_cli_copy_report(f->span, "planted_summary.h5", copy, sizeof copy);
    char *json_path = sp_report_summary_path(copy);
    char *text = scratch_read_file(json_path, NULL);
    cJSON *doc = cJSON_Parse(text);
    cJSON *item = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
                                                       cJSON_GetObjectItemCaseSensitive(doc, "metrics"), "pruning"),
                                                   "base_loss");
    assert_non_null(item);
    cJSON_SetNumberValue(item, item->valuedouble + 1e-3); /* 5x the table's 2e-4 nats */
    char *edited = cJSON_Print(doc);
    assert_int_equal(scratch_write_file(json_path, edited, strlen(edited)), 0);
    char *out = compare(SP_ERR_CHECK, f->span, copy, "--quiet", NULL);
    expect_line(out, "FAIL", "summary:pruning.base_loss: 1 of 1 beyond tolerance");
    assert_int_equal(scratch_count_lines(out), 3); /* header, the failure, the summary */
    free(out);
    free(edited);
    cJSON_Delete(doc);
    free(text);
    free(json_path);
}

static void test_nan_in_one(void **state)
{
    fixture *f = need_reports(state);
    char copy[4200];
    analyze_cli_copy_report(f->span, "nan.h5", copy, sizeof copy);
    h5_edit_poison(copy, "/metrics/similarity/cosine", 1, NAN);
    char *out = compare(SP_ERR_CHECK, f->span, copy, NULL, NULL);
    expect_line(out, "FAIL", "similarity/cosine [5, 5]: NaN/Inf differ at 1 entry, first [0, 0]");
    free(out);
    /* whichever side has it */
    out = compare(SP_ERR_CHECK, copy, f->span, NULL, NULL);
    expect_line(out, "FAIL", "similarity/cosine [5, 5]: NaN/Inf differ");
    free(out);
}

static void test_missing_array(void **state)
{
    fixture *f = need_reports(state);
    char copy[4200];
    analyze_cli_copy_report(f->span, "missing.h5", copy, sizeof copy);
    h5_edit_delete(copy, "/metrics/cka/hsic");
    char *out = compare(SP_ERR_CHECK, f->span, copy, NULL, NULL);
    char needle[4400];
    snprintf(needle, sizeof needle, "cka/hsic: only in %s", f->span);
    expect_line(out, "MISSING", needle);
    assert_non_null(strstr(out, " 0 failed, 1 missing,"));
    free(out);
    /* the siamese report has _y arrays the span one lacks, and no presums */
    out = compare(SP_ERR_CHECK, f->span, f->siamese, "--metrics", "similarity,presums");
    expect_line(out, "MISSING", "similarity/cosine_y: only in");
    expect_line(out, "MISSING", "presums/sigma_a: only in");
    free(out);
    /* an analyzer in neither: nothing compared is a failure */
    out = compare(SP_ERR_CHECK, f->siamese, f->siamese, "--metrics", "presums");
    assert_non_null(strstr(out, "nothing to compare"));
    free(out);
}

static void test_different_shapes(void **state)
{
    fixture *f = need_reports(state);
    char copy[4200];
    analyze_cli_copy_report(f->span, "shape.h5", copy, sizeof copy);
    h5_edit_replace(copy, "/metrics/growth/rms", H5T_IEEE_F64LE, 1, (const int64_t[]){7});
    for (int i = 0; i < 3; i++)
        h5_edit_set_str(copy, "/metrics/growth/rms", (const char *[]){"units", "shape_desc", "description"}[i], "x");
    char *out = NULL, *err = NULL;
    cli_expect_exit(SP_ERR_INPUT, (const char *[]){"compare", f->span, copy, NULL}, &out, &err);
    cli_expect_one_line(err, (const char *const[]){"growth/rms", "shape [7], expected [5]", NULL});
    assert_true(!out || !strstr(out, "PASS")); /* an input error prints no table */
    free(out);
    free(err);
}

static void test_input_errors(void **state)
{
    fixture *f = need_reports(state);
    cli_expect_error(SP_ERR_IO, (const char *[]){"compare", f->span, "/nonexistent/r.h5", NULL},
                     (const char *const[]){"/nonexistent/r.h5", NULL});
    cli_expect_error(SP_ERR_INPUT, (const char *[]){"compare", f->tokens, f->span, NULL},
                     (const char *const[]){f->tokens, "HDF5", NULL});
    /* a report whose summary is another report's */
    char copy[4200];
    analyze_cli_copy_report(f->span, "mixed.h5", copy, sizeof copy);
    char *siamese_json = sp_report_summary_path(f->siamese), *copy_json = sp_report_summary_path(copy);
    size_t size = 0;
    char *bytes = scratch_read_file(siamese_json, &size);
    assert_int_equal(scratch_write_file(copy_json, bytes, size), 0);
    cli_expect_error(SP_ERR_INPUT, (const char *[]){"compare", f->span, copy, NULL},
                     (const char *const[]){"input.sha256", "the summary of another report", NULL});
    free(bytes);
    free(siamese_json);
    free(copy_json);
}

static void test_usage(void **state)
{
    (void)state;
    const char *const *bad[] = {
        (const char *[]){"compare", "a.h5", NULL},
        (const char *[]){"compare", "a.h5", "b.h5", "c.h5", NULL},
        (const char *[]){"compare", "a.h5", "b.h5", "--rtol", "-1", NULL},
        (const char *[]){"compare", "a.h5", "b.h5", "--atol", "x", NULL},
        (const char *[]){"compare", "a.h5", "b.h5", "--rtol", NULL},
        (const char *[]){"compare", "a.h5", "b.h5", "--metrics", "similarity,nosuch", NULL},
        (const char *[]){"compare", "a.h5", "b.h5", "--bogus", NULL},
    };
    const char *needles[] = {"two reports", "unexpected argument 'c.h5'", "--rtol", "--atol", "--rtol needs a value",
                             "unknown analyzer 'nosuch'", "unknown option '--bogus'"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cli_expect_error(SP_ERR_USAGE, bad[i], (const char *const[]){"spanprobe compare:", needles[i], NULL});
    char *out = NULL;
    cli_expect_exit(0, (const char *[]){"compare", "--help", NULL}, &out, NULL);
    assert_non_null(strstr(out, "usage: spanprobe compare A.h5 B.h5"));
    free(out);
}

static void test_f64_cli_has_no_cuda(void **state)
{
    fixture *f = need_reports(state);
    const char *bin = analyze_cli_f64_bin();
    char *err = NULL, out_path[4200];
    scratch_path(out_path, sizeof out_path, "cuda_f64.h5");
    const char *args[] = {"analyze", f->span_ckpt, "--tokens", f->tokens, "--device", "cuda", "--out", out_path, NULL};
    assert_int_equal(scratch_run_program(bin, args, NULL, &err), SP_ERR_USAGE);
    cli_expect_one_line(err, (const char *const[]){"--device cuda", "float64", "--device cpu", NULL});
    assert_false(scratch_file_exists(out_path));
    free(err);
    char *out = NULL;
    assert_int_equal(scratch_run_program(bin, (const char *[]){"--version", NULL}, &out, NULL), 0);
    assert_non_null(strstr(out, "(float64)"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_scale_and_absolute),
        cmocka_unit_test(test_rule_nonfinite),
        cmocka_unit_test(test_table_lookup),
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_table_covers_full_reports),
        cmocka_unit_test(test_self),
        cmocka_unit_test(test_other_batch),
        cmocka_unit_test(test_planted_array_change),
        cmocka_unit_test(test_planted_summary_change),
        cmocka_unit_test(test_nan_in_one),
        cmocka_unit_test(test_missing_array),
        cmocka_unit_test(test_different_shapes),
        cmocka_unit_test(test_input_errors),
        cmocka_unit_test(test_fp64_reference),
        cmocka_unit_test(test_f64_cli_has_no_cuda),
    };
    return cmocka_run_group_tests(tests, setup, cli_group_free);
}

/* `spanprobe check` as a library: rules files (every malformed rule is an error naming the rule and
 * the field), layer ranges, reductions and comparisons, the built-in rules, evaluation of thresholds
 * and baseline tolerances on reports written here with the report writer (PASS, FAIL on a limit or
 * on NaN/Inf, SKIP, ERROR on an unknown array or key or a missing baseline metric), the verdict's
 * exit codes, a summary that belongs to another report, and the JUnit XML (parsed back by a small
 * well-formedness reader, with names full of markup, control bytes and broken UTF-8). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "check/evaluate.h"
#include "check/junit.h"
#include "io/report.h"
#include "support/scratch.h"

/* ---- rules ---- */

static void expect_rules_error(const char *text, const char *needle)
{
    sp_check_rules rules;
    sp_error_clear();
    sp_status st = sp_check_rules_parse(text, "r.json", &rules);
    if (st != SP_ERR_INPUT || !strstr(sp_error_message(), needle) || !strstr(sp_error_message(), "r.json"))
        fail_msg("rules %s: status %d, message '%s' (expected '%s')", text, st, sp_error_message(), needle);
    assert_int_equal(rules.n, 0);
    assert_null(rules.rules);
}

#define RULE(body) "{\"rules\": [" body "]}"
#define COS "\"metric\": \"summary:similarity.adjacent_cosine_deep_half\""

static void test_rules_malformed(void **state)
{
    (void)state;
    expect_rules_error("{\"rules\": [\n  {\"metric\": }\n]}", "not valid JSON at line 2");
    expect_rules_error("[1, 2]", "expected an object {\"rules\": [...]}, found [1,2]");
    expect_rules_error("{\"rules\": [], \"extra\": 1}", "unknown key \"extra\"");
    expect_rules_error("{\"rules\": []}", "at least one rule");
    expect_rules_error("{\"rule\": []}", "unknown key \"rule\"");
    expect_rules_error("{\"rules\": {}}", "\"rules\": expected an array");
    expect_rules_error(RULE("3"), "rule 1: expected a rule object, found 3");
    expect_rules_error(RULE("{" COS ", \"op\": \"<\", \"limit\": 1, \"limt\": 2}"), "unknown key \"limt\"");
    expect_rules_error(RULE("{\"op\": \"<\", \"limit\": 1}"), "\"metric\": expected a string");
    expect_rules_error(RULE("{\"metric\": \"similarity\", \"op\": \"<\", \"limit\": 1}"), "found \"similarity\"");
    expect_rules_error(RULE("{\"metric\": \"summary:similarity\", \"op\": \"<\", \"limit\": 1}"), "summary:<analyzer>");
    expect_rules_error(RULE("{\"metric\": \"similarity/a b\", \"reduce\": \"mean\", \"op\": \"<\", \"limit\": 1}"),
                       "[A-Za-z0-9_.-]");
    expect_rules_error(RULE("{\"metric\": \"simlarity/cosine\", \"reduce\": \"mean\", \"op\": \"<\", \"limit\": 1}"),
                       "unknown analyzer 'simlarity'");
    expect_rules_error(RULE("{\"metric\": \"run/seconds\", \"reduce\": \"mean\", \"op\": \"<\", \"limit\": 1}"),
                       "unknown analyzer 'run'"); /* "run" is a summary group, it has no arrays */
    expect_rules_error(RULE("{\"metric\": \"similarity/cosine\", \"op\": \"<\", \"limit\": 1}"),
                       "\"reduce\": expected 'mean', 'max' or 'min', found nothing");
    expect_rules_error(RULE("{\"metric\": \"similarity/cosine\", \"reduce\": \"median\", \"op\": \"<\", \"limit\": 1}"),
                       "found \"median\"");
    expect_rules_error(RULE("{" COS ", \"reduce\": \"mean\", \"op\": \"<\", \"limit\": 1}"),
                       "\"reduce\" applies to arrays");
    expect_rules_error(RULE("{" COS ", \"layers\": \"all\", \"op\": \"<\", \"limit\": 1}"), "\"layers\" applies");
    const char *bad_layers[] = {"\"deep\"", "[3, 1]", "[-1, -2]", "[1.5, 2]", "[1, 2, 3]", "[1]", "7"};
    for (size_t i = 0; i < SP_ARRAY_LEN(bad_layers); i++) {
        char text[512];
        snprintf(text, sizeof text,
                 RULE("{\"metric\": \"growth/rms\", \"reduce\": \"max\", \"layers\": %s, \"op\": \"<\", \"limit\": 1}"),
                 bad_layers[i]);
        expect_rules_error(text, "\"layers\": expected");
    }
    expect_rules_error(RULE("{" COS "}"), "found neither");
    expect_rules_error(RULE("{" COS ", \"limit\": 1}"), "\"op\": expected '<', '<=', '>', '>=', '==', '!=' or 'finite', found nothing");
    expect_rules_error(RULE("{" COS ", \"op\": \"=<\", \"limit\": 1}"), "\"op\": expected '<', '<='");
    expect_rules_error(RULE("{" COS ", \"op\": \"<\"}"), "\"limit\": expected a number, found nothing");
    expect_rules_error(RULE("{" COS ", \"op\": \"<\", \"limit\": \"1\"}"), "\"limit\": expected a number, found \"1\"");
    expect_rules_error(RULE("{" COS ", \"op\": \"finite\", \"limit\": 1}"), "takes no \"limit\"");
    expect_rules_error(RULE("{" COS ", \"op\": \"<\", \"limit\": 1, \"tolerance\": {\"absolute\": 1}}"), "found both");
    expect_rules_error(RULE("{" COS ", \"tolerance\": {}}"), "found neither");
    expect_rules_error(RULE("{" COS ", \"tolerance\": 0.1}"), "\"tolerance\": expected an object");
    expect_rules_error(RULE("{" COS ", \"tolerance\": {\"absolute\": -0.1}}"), "expected a number >= 0");
    expect_rules_error(RULE("{" COS ", \"tolerance\": {\"relative\": 0.1, \"fail_on\": \"up\"}}"),
                       "\"fail_on\": expected 'any', 'increase' or 'decrease'");
    expect_rules_error(RULE("{" COS ", \"tolerance\": {\"relative\": 0.1, \"abs\": 1}}"), "unknown key \"abs\"");
    expect_rules_error(RULE("{" COS ", \"op\": \"<\", \"limit\": 1, \"optional\": 1}"), "\"optional\": expected true");
    expect_rules_error(RULE("{" COS ", \"op\": \"<\", \"limit\": 1, \"name\": \"\"}"), "\"name\": expected a non-empty");
    expect_rules_error(RULE("{" COS ", \"op\": \"<\", \"limit\": 1}, {" COS ", \"op\": \">\", \"limit\": 0}"),
                       "rules 1 and 2 are both named");
    expect_rules_error("{\"rules\": [{" COS ", \"op\": \"<\", \"limit\": 1}], \"include_defaults\": 1}",
                       "\"include_defaults\": expected true or false");
    /* the rule is named in the message once its name is known */
    expect_rules_error(RULE("{" COS ", \"op\": \"<\", \"limit\": 1}, {\"name\": \"second\", \"metric\": 5}"),
                       "rule 2 (\"second\"): \"metric\"");
}

static void test_rules_parsed(void **state)
{
    (void)state;
    const char *text = RULE("{\"name\": \"deep bi\", \"description\": \"why\", \"metric\": \"similarity/block_influence\","
                            " \"reduce\": \"min\", \"layers\": [2, -1], \"op\": \">=\", \"limit\": 0.05},"
                            "{\"metric\": \"growth/rms\", \"reduce\": \"mean\", \"layers\": \"shallowest_half\","
                            " \"tolerance\": {\"relative\": 0.1, \"fail_on\": \"increase\"}, \"optional\": true},"
                            "{" COS ", \"op\": \"finite\"}");
    sp_check_rules rules;
    assert_int_equal(sp_check_rules_parse(text, "r.json", &rules), SP_OK);
    assert_int_equal(rules.n, 3);
    const sp_check_rule *a = &rules.rules[0], *b = &rules.rules[1], *c = &rules.rules[2];
    assert_string_equal(a->name, "deep bi");
    assert_string_equal(a->description, "why");
    assert_false(a->is_summary);
    assert_string_equal(a->analyzer, "similarity");
    assert_string_equal(a->item, "block_influence");
    assert_int_equal(a->reduce, SP_REDUCE_MIN);
    assert_int_equal(a->layers.kind, SP_LAYERS_RANGE);
    assert_int_equal(a->layers.first, 2);
    assert_int_equal(a->layers.last, -1);
    assert_int_equal(a->op, SP_OP_GE);
    assert_true(a->limit == 0.05 && !a->against_baseline && !a->optional);
    assert_string_equal(b->name, "growth/rms"); /* the metric names an unnamed rule */
    assert_int_equal(b->layers.kind, SP_LAYERS_SHALLOWEST_HALF);
    assert_true(b->against_baseline && b->optional && b->abs_tol == 0 && b->rel_tol == 0.1);
    assert_int_equal(b->fail_on, SP_FAIL_ON_INCREASE);
    assert_true(c->is_summary);
    assert_string_equal(c->analyzer, "similarity");
    assert_string_equal(c->item, "adjacent_cosine_deep_half");
    assert_int_equal(c->op, SP_OP_FINITE);
    assert_int_equal(c->layers.kind, SP_LAYERS_ALL);
    sp_check_rules_free(&rules);
}

static void test_rules_defaults(void **state)
{
    (void)state;
    sp_check_rules defaults, merged;
    assert_int_equal(sp_check_rules_defaults(&defaults), SP_OK);
    assert_true(defaults.n >= 3);
    int collapse = 0, vanishing = 0, divergence = 0;
    for (int i = 0; i < defaults.n; i++) {
        const sp_check_rule *r = &defaults.rules[i];
        assert_true(r->optional); /* a dump's report lacks the gradients: skipped, not an error */
        assert_false(r->against_baseline);
        assert_true(r->description[0] != '\0');
        collapse += strncmp(r->name, "collapse.", 9) == 0;
        vanishing += strncmp(r->name, "vanishing_gradients.", 20) == 0;
        divergence += strncmp(r->name, "divergence.", 11) == 0;
    }
    assert_true(collapse >= 1 && vanishing >= 1 && divergence >= 1);
    assert_int_equal(sp_check_rules_parse("{\"rules\": [{\"name\": \"mine\", " COS ", \"op\": \"<\", \"limit\": 1}], "
                                          "\"include_defaults\": true}",
                                          "r.json", &merged),
                     SP_OK);
    assert_int_equal(merged.n, defaults.n + 1);
    assert_string_equal(merged.rules[0].name, "mine");
    assert_string_equal(merged.rules[1].name, defaults.rules[0].name);
    sp_check_rules_free(&merged);
    /* a user rule named like a built-in one clashes */
    char text[512];
    snprintf(text, sizeof text, "{\"rules\": [{\"name\": \"%s\", " COS ", \"op\": \"<\", \"limit\": 1}], "
             "\"include_defaults\": true}", defaults.rules[0].name);
    expect_rules_error(text, "both named");
    sp_check_rules_free(&defaults);
}

static void test_rules_file(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "missing_rules.json");
    sp_check_rules rules;
    sp_error_clear();
    assert_int_equal(sp_check_rules_load(path, &rules), SP_ERR_IO);
    assert_non_null(strstr(sp_error_message(), path));
    scratch_path(path, sizeof path, "rules.json");
    const char *text = "{\n  \"rules\": [\n    {\"metric\": \"growth/rms\", \"reduce\": \"max\",\n"
                       "     \"op\": \"<\", \"limit\": 1e3}\n  ]\n}\n";
    assert_int_equal(scratch_write_file(path, text, strlen(text)), 0);
    assert_int_equal(sp_check_rules_load(path, &rules), SP_OK);
    assert_int_equal(rules.n, 1);
    assert_true(rules.rules[0].limit == 1e3);
    sp_check_rules_free(&rules);
    const char with_nul[] = "{\"rules\": []}\0{}";
    assert_int_equal(scratch_write_file(path, with_nul, sizeof with_nul - 1), 0);
    sp_error_clear();
    assert_int_equal(sp_check_rules_load(path, &rules), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "NUL byte"));
}

/* ---- layer ranges, reductions, comparisons ---- */

static void expect_range(sp_check_layers layers, int64_t n, int64_t first, int64_t last)
{
    int64_t a = -7, b = -7;
    assert_true(sp_check_layers_resolve(&layers, n, &a, &b));
    if (a != first || b != last)
        fail_msg("layers kind %d on %lld entries: [%lld, %lld], expected [%lld, %lld]", layers.kind, (long long)n,
                 (long long)a, (long long)b, (long long)first, (long long)last);
}

static void test_layer_ranges(void **state)
{
    (void)state;
    const sp_check_layers all = {SP_LAYERS_ALL, 0, 0}, deep = {SP_LAYERS_DEEPEST_HALF, 0, 0},
                          shallow = {SP_LAYERS_SHALLOWEST_HALF, 0, 0};
    expect_range(all, 9, 0, 8);
    expect_range(deep, 9, 5, 8);    /* [layer] of L = 8: the last 4 of h_0..h_8 */
    expect_range(deep, 8, 4, 7);    /* [block] of L = 8: blocks 4..7, as adjacent_cosine_deep_half */
    expect_range(shallow, 9, 0, 3);
    expect_range(deep, 1, 0, 0);    /* max(1, n / 2) */
    expect_range(shallow, 1, 0, 0);
    expect_range(deep, 3, 2, 2);
    expect_range((sp_check_layers){SP_LAYERS_RANGE, 2, -1}, 9, 2, 8);
    expect_range((sp_check_layers){SP_LAYERS_RANGE, -3, -1}, 9, 6, 8);
    expect_range((sp_check_layers){SP_LAYERS_RANGE, 4, 4}, 9, 4, 4);
    expect_range((sp_check_layers){SP_LAYERS_RANGE, -9, 0}, 9, 0, 0);
    int64_t a, b;
    assert_false(sp_check_layers_resolve(&(sp_check_layers){SP_LAYERS_RANGE, 0, 9}, 9, &a, &b));
    assert_false(sp_check_layers_resolve(&(sp_check_layers){SP_LAYERS_RANGE, -10, 2}, 9, &a, &b));
    assert_false(sp_check_layers_resolve(&(sp_check_layers){SP_LAYERS_RANGE, 5, -6}, 9, &a, &b)); /* 5 > 3 */
    assert_false(sp_check_layers_resolve(&all, 0, &a, &b));
    char text[64];
    sp_check_layers_format(&(sp_check_layers){SP_LAYERS_RANGE, 2, -1}, text, sizeof text);
    assert_string_equal(text, "[2, -1]");
    sp_check_layers_format(&deep, text, sizeof text);
    assert_string_equal(text, "deepest_half");
}

static void test_reductions(void **state)
{
    (void)state;
    const double x[] = {0.5, -2, 4, 1.5};
    int64_t bad = -1;
    assert_true(sp_check_reduce_values(SP_REDUCE_MEAN, x, 4, &bad) == 1.0 && bad == 0);
    assert_true(sp_check_reduce_values(SP_REDUCE_MAX, x, 4, &bad) == 4.0 && bad == 0);
    assert_true(sp_check_reduce_values(SP_REDUCE_MIN, x, 4, &bad) == -2.0 && bad == 0);
    assert_true(sp_check_reduce_values(SP_REDUCE_MAX, x + 1, 1, &bad) == -2.0);
    const double poisoned[] = {1, NAN, 2, INFINITY, -INFINITY};
    for (int how = SP_REDUCE_MEAN; how <= SP_REDUCE_MIN; how++) {
        assert_true(isnan(sp_check_reduce_values((sp_check_reduce)how, poisoned, 5, &bad)));
        assert_int_equal(bad, 3);
    }
    /* an infinity alone is not finite either: max would otherwise report +inf as a value */
    assert_true(isnan(sp_check_reduce_values(SP_REDUCE_MIN, poisoned + 3, 1, &bad)) && bad == 1);
}

static void test_compare(void **state)
{
    (void)state;
    const struct {
        sp_check_op op;
        double value, limit;
        int pass;
    } cases[] = {
        {SP_OP_LT, 1, 2, 1},  {SP_OP_LT, 2, 2, 0},  {SP_OP_LE, 2, 2, 1},        {SP_OP_LE, 2.5, 2, 0},
        {SP_OP_GT, 3, 2, 1},  {SP_OP_GT, 2, 2, 0},  {SP_OP_GE, 2, 2, 1},        {SP_OP_GE, 1, 2, 0},
        {SP_OP_EQ, 0, 0, 1},  {SP_OP_EQ, 1, 0, 0},  {SP_OP_NE, 1, 0, 1},        {SP_OP_NE, 0, 0, 0},
        {SP_OP_FINITE, -5, 0, 1}, {SP_OP_FINITE, INFINITY, 0, 0}, {SP_OP_NE, NAN, 0, 0}, {SP_OP_LT, -INFINITY, 0, 0},
        {SP_OP_GT, INFINITY, 0, 0},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(cases); i++)
        if (sp_check_compare(cases[i].op, cases[i].value, cases[i].limit) != cases[i].pass)
            fail_msg("case %zu: %g %s %g should %s", i, cases[i].value, sp_check_op_names[cases[i].op], cases[i].limit,
                     cases[i].pass ? "pass" : "fail");
}

/* ---- evaluation on reports written here ---- */

enum { L = 8 };

/* A report as `analyze` would write one, with values moved by `shift`: block_influence[l] =
 * 0.1 (l + 1) + shift over L blocks, growth/rms [L + 1] with a NaN at layer nan_layer (-1: none),
 * growth/top_abs [L + 1, 3] = l + k, summary scalars (one null), ffn_spectra skipped. */
static void write_report(const char *name, double shift, int nan_layer, char *path, size_t len)
{
    char input[4200];
    scratch_path(input, sizeof input, name);
    strncat(input, ".input", sizeof input - strlen(input) - 1);
    char content[64];
    snprintf(content, sizeof content, "input of %s", name);
    assert_int_equal(scratch_write_file(input, content, strlen(content)), 0);
    scratch_path(path, len, name);
    sp_report *r = NULL;
    sp_error_clear();
    assert_int_equal(sp_report_create(path, &(sp_report_provenance){input, NULL, "test", NULL}, &r), SP_OK);
    double bi[L], rms[L + 1], top[(L + 1) * 3];
    for (int l = 0; l < L; l++)
        bi[l] = 0.1 * (l + 1) + shift;
    for (int l = 0; l <= L; l++) {
        rms[l] = l == nan_layer ? NAN : 1 + l;
        for (int k = 0; k < 3; k++)
            top[l * 3 + k] = l + k;
    }
    assert_int_equal(sp_report_write_array(r, "similarity", "block_influence", 1, (int64_t[]){L}, bi,
                                           &(sp_report_array_attrs){"1", "[block]", "BI"}),
                     SP_OK);
    assert_int_equal(sp_report_write_array(r, "growth", "rms", 1, (int64_t[]){L + 1}, rms,
                                           &(sp_report_array_attrs){"activation", "[layer]", "rms"}),
                     SP_OK);
    assert_int_equal(sp_report_write_array(r, "growth", "top_abs", 2, (int64_t[]){L + 1, 3}, top,
                                           &(sp_report_array_attrs){"activation", "[layer, rank]", "top"}),
                     SP_OK);
    assert_int_equal(sp_report_set_scalar(r, "similarity", "adjacent_cosine_deep_half", 0.9 + shift), SP_OK);
    assert_int_equal(sp_report_set_scalar(r, "grad_norms", "ffn_ratio", INFINITY), SP_OK); /* null */
    assert_int_equal(sp_report_set_scalar(r, "train", "diverged", 0), SP_OK);
    assert_int_equal(sp_report_skip(r, "ffn_spectra", "no FFN latents"), SP_OK);
    assert_int_equal(sp_report_commit(r), SP_OK);
}

typedef struct {
    const char *rule;  /* the body of one rule object */
    sp_check_outcome outcome;
    double value;      /* expected value (NaN: not checked) */
    const char *detail; /* a substring of the detail line */
} eval_case;

static void run_cases(const eval_case *cases, size_t n, const char *report_path, const char *baseline_path)
{
    sp_check_source *report = NULL, *baseline = NULL;
    sp_error_clear();
    assert_int_equal(sp_check_source_open(report_path, &report), SP_OK);
    if (baseline_path)
        assert_int_equal(sp_check_source_open(baseline_path, &baseline), SP_OK);
    for (size_t i = 0; i < n; i++) {
        char text[1024];
        snprintf(text, sizeof text, "{\"rules\": [{%s}]}", cases[i].rule);
        sp_check_rules rules;
        sp_check_results res;
        if (sp_check_rules_parse(text, "case", &rules) != SP_OK)
            fail_msg("case %zu: %s", i, sp_error_message());
        assert_int_equal(sp_check_evaluate(&rules, report, baseline, &res), SP_OK);
        const sp_check_result *r = &res.results[0];
        if (r->outcome != cases[i].outcome || !strstr(r->detail, cases[i].detail) ||
            (!isnan(cases[i].value) && fabs(r->value - cases[i].value) > 1e-12))
            fail_msg("case %zu {%s}: %s %g '%s' (expected %s %g '%s')", i, cases[i].rule,
                     sp_check_outcome_names[r->outcome], r->value, r->detail, sp_check_outcome_names[cases[i].outcome],
                     cases[i].value, cases[i].detail);
        assert_int_equal(res.count[r->outcome], 1);
        sp_check_results_free(&res);
        sp_check_rules_free(&rules);
    }
    sp_check_source_close(report);
    sp_check_source_close(baseline);
}

static void test_evaluate_thresholds(void **state)
{
    (void)state;
    char path[4200];
    write_report("thresholds.h5", 0, 2, path, sizeof path);
    const eval_case cases[] = {
        /* block_influence = 0.1 .. 0.8: deepest half = blocks 4..7 = 0.5 .. 0.8 */
        {"\"metric\": \"similarity/block_influence\", \"reduce\": \"mean\", \"layers\": \"deepest_half\", "
         "\"op\": \">=\", \"limit\": 0.6",
         SP_CHECK_PASS, 0.65, "entries 4..7 of 8 [block]"},
        {"\"metric\": \"similarity/block_influence\", \"reduce\": \"min\", \"layers\": \"deepest_half\", "
         "\"op\": \">=\", \"limit\": 0.6",
         SP_CHECK_FAIL, 0.5, "(limit: >= 0.6)"},
        {"\"metric\": \"similarity/block_influence\", \"reduce\": \"max\", \"layers\": \"shallowest_half\", "
         "\"op\": \"<\", \"limit\": 0.41",
         SP_CHECK_PASS, 0.4, "entries 0..3"},
        {"\"metric\": \"similarity/block_influence\", \"reduce\": \"max\", \"layers\": [-4, -4], \"op\": \"<=\", "
         "\"limit\": 0.5",
         SP_CHECK_PASS, 0.5, "entries 4..4"},
        {"\"metric\": \"similarity/block_influence\", \"reduce\": \"mean\", \"op\": \"finite\"", SP_CHECK_PASS, 0.45,
         "limit: finite"},
        /* growth/rms has a NaN at layer 2: any range holding it fails, whatever the limit */
        {"\"metric\": \"growth/rms\", \"reduce\": \"max\", \"op\": \"<\", \"limit\": 1e9", SP_CHECK_FAIL, NAN,
         "1 of 9 values not finite"},
        {"\"metric\": \"growth/rms\", \"reduce\": \"min\", \"layers\": [3, 8], \"op\": \">=\", \"limit\": 4",
         SP_CHECK_PASS, 4, "entries 3..8 of 9"},
        {"\"metric\": \"growth/rms\", \"reduce\": \"mean\", \"layers\": [0, 2], \"op\": \"finite\"", SP_CHECK_FAIL,
         NAN, "not finite"},
        /* a 2-D array reduces every entry of the selected rows: rows 7, 8 of l + k = 7..10 */
        {"\"metric\": \"growth/top_abs\", \"reduce\": \"mean\", \"layers\": [7, 8], \"op\": \"==\", \"limit\": 8.5",
         SP_CHECK_PASS, 8.5, "entries 7..8 of 9 [layer, rank]"},
        {"\"metric\": \"summary:similarity.adjacent_cosine_deep_half\", \"op\": \"<=\", \"limit\": 0.95",
         SP_CHECK_PASS, 0.9, "= 0.9 (limit: <= 0.95)"},
        {"\"metric\": \"summary:similarity.adjacent_cosine_deep_half\", \"op\": \"<=\", \"limit\": 0.85",
         SP_CHECK_FAIL, 0.9, "summary:similarity.adjacent_cosine_deep_half = 0.9"},
        {"\"metric\": \"summary:grad_norms.ffn_ratio\", \"op\": \">\", \"limit\": 0", SP_CHECK_FAIL, NAN,
         "null (not finite)"},
        {"\"metric\": \"summary:train.diverged\", \"op\": \"==\", \"limit\": 0", SP_CHECK_PASS, 0, "= 0"},
        /* the analyzer ran but has no such array or key: an error in the rule, optional or not */
        {"\"metric\": \"similarity/adjacent_cos\", \"reduce\": \"mean\", \"op\": \"<\", \"limit\": 1, "
         "\"optional\": true",
         SP_CHECK_ERROR, NAN, "has no array /metrics/similarity/adjacent_cos (its similarity arrays: block_influence)"},
        {"\"metric\": \"summary:similarity.adjacent_cos\", \"op\": \"<\", \"limit\": 1", SP_CHECK_ERROR, NAN,
         "no metrics.similarity.adjacent_cos (its similarity keys: adjacent_cosine_deep_half)"},
        {"\"metric\": \"similarity/block_influence\", \"reduce\": \"mean\", \"layers\": [0, 8], \"op\": \"<\", "
         "\"limit\": 1",
         SP_CHECK_ERROR, NAN, "layers [0, 8] select none of its 8 entries"},
        /* the analyzer is absent: skipped with its reason when optional, an error otherwise */
        {"\"metric\": \"ffn_spectra/soft_rank\", \"reduce\": \"mean\", \"op\": \">\", \"limit\": 0, "
         "\"optional\": true",
         SP_CHECK_SKIP, NAN, "skipped ffn_spectra: no FFN latents"},
        {"\"metric\": \"summary:ffn_spectra.edr\", \"op\": \">\", \"limit\": 0", SP_CHECK_ERROR, NAN,
         "not \"optional\""},
        {"\"metric\": \"summary:cka.adjacent_mean\", \"op\": \">\", \"limit\": 0, \"optional\": true", SP_CHECK_SKIP,
         NAN, "no cka results"},
        {"\"metric\": \"summary:grad_norms.loss\", \"op\": \"finite\"", SP_CHECK_ERROR, NAN, "no metrics.grad_norms.loss"},
    };
    run_cases(cases, SP_ARRAY_LEN(cases), path, NULL);
}

static void test_evaluate_baseline(void **state)
{
    (void)state;
    char path[4200], base[4200], same[4200];
    write_report("moved.h5", -0.05, -1, path, sizeof path);
    write_report("base.h5", 0, -1, base, sizeof base);
    write_report("base_nan.h5", 0, 8, same, sizeof same);
    const eval_case cases[] = {
        /* deepest-half mean of block_influence: 0.6 here, 0.65 in the baseline */
        {"\"metric\": \"similarity/block_influence\", \"reduce\": \"mean\", \"layers\": \"deepest_half\", "
         "\"tolerance\": {\"absolute\": 0.06}",
         SP_CHECK_PASS, 0.6, "change -0.05, allowed 0.06"},
        {"\"metric\": \"similarity/block_influence\", \"reduce\": \"mean\", \"layers\": \"deepest_half\", "
         "\"tolerance\": {\"absolute\": 0.04}",
         SP_CHECK_FAIL, 0.6, "baseline 0.65: change -0.05, allowed 0.04"},
        /* relative: 0.05 x 0.65 = 0.0325, plus absolute 0.02 = 0.0525 */
        {"\"metric\": \"similarity/block_influence\", \"reduce\": \"mean\", \"layers\": \"deepest_half\", "
         "\"tolerance\": {\"absolute\": 0.02, \"relative\": 0.05}",
         SP_CHECK_PASS, 0.6, "allowed 0.0525"},
        {"\"metric\": \"similarity/block_influence\", \"reduce\": \"mean\", \"layers\": \"deepest_half\", "
         "\"tolerance\": {\"relative\": 0.05}",
         SP_CHECK_FAIL, 0.6, "allowed 0.0325"},
        /* direction: a drop fails only when decreases fail */
        {"\"metric\": \"summary:similarity.adjacent_cosine_deep_half\", \"tolerance\": {\"absolute\": 0.01, "
         "\"fail_on\": \"increase\"}",
         SP_CHECK_PASS, 0.85, "fails on increase"},
        {"\"metric\": \"summary:similarity.adjacent_cosine_deep_half\", \"tolerance\": {\"absolute\": 0.01, "
         "\"fail_on\": \"decrease\"}",
         SP_CHECK_FAIL, 0.85, "change -0.05"},
        {"\"metric\": \"growth/rms\", \"reduce\": \"max\", \"tolerance\": {\"absolute\": 0}", SP_CHECK_PASS, 9,
         "change +0"},
        /* a metric the baseline's analyzer lacks, or that the baseline lacks altogether */
        {"\"metric\": \"summary:train.step\", \"tolerance\": {\"absolute\": 0}", SP_CHECK_ERROR, NAN,
         "no metrics.train.step"},
        {"\"metric\": \"ffn_spectra/soft_rank\", \"reduce\": \"mean\", \"tolerance\": {\"absolute\": 0}, "
         "\"optional\": true",
         SP_CHECK_SKIP, NAN, "skipped ffn_spectra"},
        /* a non-finite value on either side fails */
        {"\"metric\": \"summary:grad_norms.ffn_ratio\", \"tolerance\": {\"absolute\": 1e9}", SP_CHECK_FAIL, NAN,
         "null (not finite), baseline null (not finite)"},
    };
    run_cases(cases, SP_ARRAY_LEN(cases), path, base);
    const eval_case nan_baseline[] = {
        {"\"metric\": \"growth/rms\", \"reduce\": \"max\", \"tolerance\": {\"absolute\": 1e9}", SP_CHECK_FAIL, 9,
         "baseline nan (1 of 9 values not finite)"},
    };
    run_cases(nan_baseline, 1, path, same);
}

static void test_baseline_usage(void **state)
{
    (void)state;
    sp_check_rules thresholds, tolerances;
    assert_int_equal(sp_check_rules_parse(RULE("{" COS ", \"op\": \"<\", \"limit\": 1}"), "t", &thresholds), SP_OK);
    assert_int_equal(sp_check_rules_parse(RULE("{" COS ", \"tolerance\": {\"absolute\": 1}}"), "b", &tolerances), SP_OK);
    sp_error_clear();
    assert_int_equal(sp_check_baseline_usage(&thresholds, NULL), SP_OK);
    assert_int_equal(sp_check_baseline_usage(&tolerances, "base.h5"), SP_OK);
    assert_int_equal(sp_check_baseline_usage(&tolerances, NULL), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "--baseline"));
    sp_error_clear();
    assert_int_equal(sp_check_baseline_usage(&thresholds, "base.h5"), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "no rule has a \"tolerance\""));
    /* evaluation refuses the same */
    char path[4200];
    write_report("usage.h5", 0, -1, path, sizeof path);
    sp_check_source *report = NULL;
    assert_int_equal(sp_check_source_open(path, &report), SP_OK);
    sp_check_results res;
    sp_error_clear();
    assert_int_equal(sp_check_evaluate(&tolerances, report, NULL, &res), SP_ERR_USAGE);
    assert_null(res.results);
    sp_check_source_close(report);
    sp_check_rules_free(&thresholds);
    sp_check_rules_free(&tolerances);
}

static sp_status verdict_of(const int *outcomes, int n)
{
    sp_check_rule rule = {.name = "r"};
    sp_check_result results[8] = {0};
    sp_check_results r = {.n = n, .results = results};
    for (int i = 0; i < n; i++) {
        results[i] = (sp_check_result){.rule = &rule, .outcome = (sp_check_outcome)outcomes[i]};
        snprintf(results[i].detail, sizeof results[i].detail, "detail %d", i);
        r.count[outcomes[i]]++;
    }
    sp_error_clear();
    return sp_check_verdict(&r);
}

static void test_verdict(void **state)
{
    (void)state;
    assert_int_equal(verdict_of((int[]){SP_CHECK_PASS, SP_CHECK_SKIP}, 2), SP_OK);
    assert_int_equal(verdict_of((int[]){SP_CHECK_PASS, SP_CHECK_FAIL, SP_CHECK_FAIL}, 3), SP_ERR_CHECK);
    assert_non_null(strstr(sp_error_message(), "2 of 3 rules failed; first, rule \"r\": detail 1"));
    assert_int_equal(verdict_of((int[]){SP_CHECK_FAIL, SP_CHECK_ERROR}, 2), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "could not be evaluated"));
    assert_int_equal(verdict_of((int[]){SP_CHECK_SKIP, SP_CHECK_SKIP}, 2), SP_ERR_CHECK);
    assert_non_null(strstr(sp_error_message(), "nothing was checked"));
}

static void test_summary_of_another_report(void **state)
{
    (void)state;
    char a[4200], b[4200];
    write_report("a.h5", 0, -1, a, sizeof a);
    write_report("b.h5", 0, -1, b, sizeof b);
    char *a_json = sp_report_summary_path(a), *b_json = sp_report_summary_path(b);
    size_t len = 0;
    char *text = scratch_read_file(b_json, &len);
    assert_non_null(text);
    assert_int_equal(scratch_write_file(a_json, text, len), 0);
    sp_check_source *s = NULL;
    sp_error_clear();
    assert_int_equal(sp_check_source_open(a, &s), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "the summary of another report"));
    assert_null(s);
    assert_int_equal(scratch_write_file(a_json, "{\"format\": \"spanprobe-report\"", 29), 0);
    sp_error_clear();
    assert_int_equal(sp_check_source_open(a, &s), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "not valid JSON"));
    remove(a_json);
    sp_error_clear();
    assert_int_equal(sp_check_source_open(a, &s), SP_ERR_IO);
    assert_non_null(strstr(sp_error_message(), a_json));
    free(text);
    free(a_json);
    free(b_json);
}

/* ---- JUnit XML ---- */

/* A small XML well-formedness reader: the prolog, then nested elements with quoted attributes;
 * text and attribute values hold no raw '<', and '&' only in the five entities or a numeric
 * reference; every byte is valid UTF-8 and no control character but tab, CR and LF appears.
 * Counts the elements by name. */
typedef struct {
    const char *p;
    int testcase, failure, error, skipped, system_out;
    const char *problem;
} xml_reader;

static int xml_name(xml_reader *x, char *name, size_t len)
{
    size_t n = 0;
    while (*x->p && (strchr("-_.:", *x->p) || (*x->p >= 'a' && *x->p <= 'z') || (*x->p >= 'A' && *x->p <= 'Z') ||
                     (*x->p >= '0' && *x->p <= '9')) && n + 1 < len)
        name[n++] = *x->p++;
    name[n] = '\0';
    return n > 0;
}

/* Character data up to `stop` ('<' or '"'). */
static int xml_chars(xml_reader *x, char stop)
{
    static const char *const entities[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    while (*x->p && *x->p != stop) {
        unsigned char c = (unsigned char)*x->p;
        if (c == '<' || (c < 0x20 && c != '\t' && c != '\n' && c != '\r'))
            return (x->problem = "raw '<' or a control character"), 0;
        if (c == '&') {
            size_t k = 0;
            while (k < SP_ARRAY_LEN(entities) && strncmp(x->p, entities[k], strlen(entities[k])) != 0)
                k++;
            if (k < SP_ARRAY_LEN(entities)) {
                x->p += strlen(entities[k]);
            } else if (x->p[1] == '#' && strspn(x->p + 2, "0123456789") > 0 && x->p[2 + strspn(x->p + 2, "0123456789")] == ';') {
                x->p += 3 + strspn(x->p + 2, "0123456789");
            } else {
                return (x->problem = "a bare '&'"), 0;
            }
            continue;
        }
        int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        for (int i = 1; i < n; i++)
            if (((unsigned char)x->p[i] & 0xC0) != 0x80)
                n = 0;
        if (n == 0)
            return (x->problem = "invalid UTF-8"), 0;
        x->p += n;
    }
    return *x->p == stop || (x->problem = "unterminated text", 0);
}

static int xml_element(xml_reader *x)
{
    char name[64], attr[64];
    if (*x->p++ != '<' || !xml_name(x, name, sizeof name))
        return (x->problem = "expected an element"), 0;
    x->testcase += strcmp(name, "testcase") == 0;
    x->failure += strcmp(name, "failure") == 0;
    x->error += strcmp(name, "error") == 0;
    x->skipped += strcmp(name, "skipped") == 0;
    x->system_out += strcmp(name, "system-out") == 0;
    for (;;) {
        x->p += strspn(x->p, " \n");
        if (strncmp(x->p, "/>", 2) == 0) {
            x->p += 2;
            return 1;
        }
        if (*x->p == '>')
            break;
        if (!xml_name(x, attr, sizeof attr) || strncmp(x->p, "=\"", 2) != 0)
            return (x->problem = "expected name=\"value\""), 0;
        x->p += 2;
        if (!xml_chars(x, '"'))
            return 0;
        x->p++;
    }
    x->p++;
    for (;;) {
        if (!xml_chars(x, '<'))
            return 0;
        if (strncmp(x->p, "</", 2) == 0)
            break;
        if (!xml_element(x))
            return 0;
    }
    x->p += 2;
    size_t n = strlen(name);
    if (strncmp(x->p, name, n) != 0 || x->p[n] != '>')
        return (x->problem = "mismatched end tag"), 0;
    x->p += n + 1;
    return 1;
}

static void xml_read(xml_reader *x, const char *text)
{
    *x = (xml_reader){.p = text};
    const char *prolog = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    assert_true(strncmp(text, prolog, strlen(prolog)) == 0);
    x->p += strlen(prolog);
    if (!xml_element(x))
        fail_msg("XML: %s at offset %ld: %.40s", x->problem, (long)(x->p - text), x->p);
    x->p += strspn(x->p, "\n");
    assert_int_equal(*x->p, '\0');
}

static void test_xml_reader_rejects(void **state)
{
    (void)state;
    /* the reader itself must catch what the writer guards against */
    const char *bad[] = {"<a>x < y</a>", "<a b=\"&\"/>", "<a>\x01</a>", "<a><b></a></b>", "<a>\xC3(</a>", "<a b=c/>"};
    for (size_t i = 0; i < SP_ARRAY_LEN(bad); i++) {
        xml_reader x = {.p = bad[i]};
        assert_false(xml_element(&x));
    }
    xml_reader ok = {.p = "<a b=\"&lt;&#10;\"><c/>t&amp;\xC3\xA9</a>"};
    assert_true(xml_element(&ok));
}

static void test_junit(void **state)
{
    (void)state;
    char path[4200], xml_path[4200];
    write_report("junit.h5", 0, 2, path, sizeof path);
    scratch_path(xml_path, sizeof xml_path, "check.xml");
    const char *text =
        "{\"rules\": ["
        "{\"name\": \"pass <&>\", \"description\": \"it's \\\"quoted\\\"\\nand\\ttabbed\", " COS ", \"op\": \"<\", "
        "\"limit\": 1},"
        "{\"name\": \"fail \\u0001 \\u00e9\", \"metric\": \"growth/rms\", \"reduce\": \"max\", \"op\": \"<\", "
        "\"limit\": 1},"
        "{\"name\": \"skip\", \"metric\": \"summary:cka.first_last\", \"op\": \"<\", \"limit\": 1, \"optional\": true},"
        "{\"name\": \"error\", \"metric\": \"summary:cka.first_last\", \"op\": \"<\", \"limit\": 1}]}";
    sp_check_rules rules;
    assert_int_equal(sp_check_rules_parse(text, "junit", &rules), SP_OK);
    /* a byte that is not UTF-8 in a name, as a path or a hand-written file could hold */
    rules.rules[2].name[0] = (char)0xFF;
    sp_check_source *report = NULL;
    assert_int_equal(sp_check_source_open(path, &report), SP_OK);
    sp_check_results res;
    assert_int_equal(sp_check_evaluate(&rules, report, NULL, &res), SP_OK);
    assert_int_equal(sp_check_write_junit(xml_path, "a&b<c>.h5", &res, 0.25), SP_OK);
    char *xml = scratch_read_file(xml_path, NULL);
    assert_non_null(xml);
    xml_reader x;
    xml_read(&x, xml);
    assert_int_equal(x.testcase, 4);
    assert_int_equal(x.failure, 1);
    assert_int_equal(x.error, 1);
    assert_int_equal(x.skipped, 1);
    assert_int_equal(x.system_out, 1);
    assert_non_null(strstr(xml, "<testsuites name=\"spanprobe check\" tests=\"4\" failures=\"1\" errors=\"1\" "
                                "skipped=\"1\" time=\"0.250\">"));
    assert_non_null(strstr(xml, "name=\"spanprobe check a&amp;b&lt;c&gt;.h5\""));
    assert_non_null(strstr(xml, "name=\"pass &lt;&amp;&gt;\""));
    assert_non_null(strstr(xml, "it&apos;s &quot;quoted&quot;&#10;and&#9;tabbed"));
    assert_non_null(strstr(xml, "name=\"fail ? \xC3\xA9\"")); /* the control byte replaced, UTF-8 kept */
    assert_non_null(strstr(xml, "name=\"?kip\""));
    assert_non_null(strstr(xml, "<failure message=\"max of growth/rms over all = nan"));
    assert_non_null(strstr(xml, "type=\"threshold\""));
    /* one line per rule and a summary on the text output */
    char out_path[4200];
    scratch_path(out_path, sizeof out_path, "check.txt");
    FILE *f = fopen(out_path, "w");
    assert_non_null(f);
    sp_check_results_print(&res, f);
    fclose(f);
    char *out = scratch_read_file(out_path, NULL);
    assert_non_null(out);
    assert_int_equal(scratch_count_lines(out), 5);
    assert_non_null(strstr(out, "check: 1 passed, 1 failed, 1 skipped, 1 errors (4 rules)"));
    assert_true(strncmp(out, "PASS ", 5) == 0);
    free(out);
    /* an unwritable destination fails before anything appears */
    sp_error_clear();
    assert_int_equal(sp_check_write_junit("/nonexistent-dir/check.xml", path, &res, 0), SP_ERR_IO);
    free(xml);
    sp_check_results_free(&res);
    sp_check_source_close(report);
    sp_check_rules_free(&rules);
}

/* ---- rules files of 200k rules: every step linear or n log n ---- */

enum { MANY_RULES = 200000 };
#define SCALE_SECONDS 30.0 /* the new code takes about 1 s (several under ASan); the pairwise name check took minutes */

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* {"rules": [...MANY_RULES...], "include_defaults": ...}: rule i named "r<i>" (or last_name for the
 * last), cycling through an array metric, a summary scalar, a missing array and a missing key. */
static char *many_rules(const char *last_name, int include_defaults)
{
    static const char *const bodies[] = {
        "\"metric\":\"similarity/block_influence\",\"reduce\":\"mean\",\"op\":\"finite\"",
        "\"metric\":\"summary:train.diverged\",\"op\":\"==\",\"limit\":0",
        "\"metric\":\"growth/nope\",\"reduce\":\"max\",\"op\":\"<\",\"limit\":1",
        "\"metric\":\"summary:similarity.nope\",\"op\":\"<\",\"limit\":1",
    };
    size_t cap = (size_t)MANY_RULES * 100 + 64, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    len += (size_t)snprintf(text + len, cap - len, "{\"include_defaults\":%s,\"rules\":[",
                            include_defaults ? "true" : "false");
    for (int i = 0; i < MANY_RULES; i++) {
        char name[32];
        snprintf(name, sizeof name, "r%d", i);
        len += (size_t)snprintf(text + len, cap - len, "%s{\"name\":\"%s\",%s}", i ? "," : "",
                                i == MANY_RULES - 1 && last_name ? last_name : name, bodies[i % 4]);
    }
    snprintf(text + len, cap - len, "]}");
    return text;
}

static void expect_fast(double t0, const char *what)
{
    double seconds = now_seconds() - t0;
    if (seconds > SCALE_SECONDS)
        fail_msg("%s took %.1f s (expected well under %.0f s)", what, seconds, SCALE_SECONDS);
}

static void expect_duplicate(const char *last_name, int include_defaults, const char *needle)
{
    char *text = many_rules(last_name, include_defaults);
    sp_check_rules rules;
    sp_error_clear();
    double t0 = now_seconds();
    assert_int_equal(sp_check_rules_parse(text, "many.json", &rules), SP_ERR_INPUT);
    expect_fast(t0, needle);
    if (!strstr(sp_error_message(), needle))
        fail_msg("'%s' (expected '%s')", sp_error_message(), needle);
    free(text);
}

static void test_many_rules(void **state)
{
    (void)state;
    char path[4200];
    write_report("many.h5", 0, -1, path, sizeof path);
    char *text = many_rules(NULL, 0);
    sp_check_rules rules;
    sp_check_results res;
    sp_check_source *report = NULL;
    sp_error_clear();
    double t0 = now_seconds();
    assert_int_equal(sp_check_rules_parse(text, "many.json", &rules), SP_OK);
    assert_int_equal(rules.n, MANY_RULES);
    assert_int_equal(sp_check_source_open(path, &report), SP_OK);
    assert_int_equal(sp_check_evaluate(&rules, report, NULL, &res), SP_OK);
    expect_fast(t0, "parsing and evaluating 200k rules");
    assert_int_equal(res.count[SP_CHECK_PASS], MANY_RULES / 2);
    assert_int_equal(res.count[SP_CHECK_ERROR], MANY_RULES / 2);
    assert_non_null(strstr(res.results[2].detail, "its growth arrays: rms, top_abs"));
    assert_non_null(strstr(res.results[MANY_RULES - 1].detail, "its similarity keys: adjacent_cosine_deep_half"));
    sp_check_results_free(&res);
    sp_check_source_close(report);
    sp_check_rules_free(&rules);
    free(text);
    /* a name repeated only at the very end, and one that conflicts with a built-in rule */
    expect_duplicate("r0", 0, "many.json: rules 1 and 200000 are both named \"r0\"");
    sp_check_rules defaults;
    assert_int_equal(sp_check_rules_defaults(&defaults), SP_OK);
    char needle[128]; /* the built-in rules follow the file's 200000, divergence.eval_gradient last */
    snprintf(needle, sizeof needle, "rules 200000 and %d are both named \"divergence.eval_gradient\"",
             200000 + defaults.n);
    sp_check_rules_free(&defaults);
    expect_duplicate("divergence.eval_gradient", 1, needle);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_malformed),
        cmocka_unit_test(test_rules_parsed),
        cmocka_unit_test(test_rules_defaults),
        cmocka_unit_test(test_rules_file),
        cmocka_unit_test(test_layer_ranges),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_evaluate_thresholds),
        cmocka_unit_test(test_evaluate_baseline),
        cmocka_unit_test(test_baseline_usage),
        cmocka_unit_test(test_verdict),
        cmocka_unit_test(test_summary_of_another_report),
        cmocka_unit_test(test_xml_reader_rejects),
        cmocka_unit_test(test_junit),
        cmocka_unit_test(test_many_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

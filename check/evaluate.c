/* check/evaluate.c: rule outcomes and the check's verdict (check/evaluate.h). */
#include "check/evaluate.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const sp_check_outcome_names[] = {"PASS", "FAIL", "SKIP", "ERROR"};

sp_status sp_check_baseline_usage(const sp_check_rules *rules, const char *baseline_path)
{
    int need = 0;
    for (int i = 0; i < rules->n; i++)
        need |= rules->rules[i].against_baseline;
    if (need && !baseline_path)
        return sp_error(SP_ERR_USAGE, "a rule has a \"tolerance\" against a baseline: give --baseline REPORT.h5");
    if (!need && baseline_path)
        return sp_error(SP_ERR_USAGE, "--baseline %s given, but no rule has a \"tolerance\" against it",
                        baseline_path);
    return SP_OK;
}

static void describe_metric(const sp_check_rule *rule, char *buf, size_t len)
{
    if (rule->is_summary) {
        snprintf(buf, len, "%s", rule->metric);
        return;
    }
    char range[64];
    sp_check_layers_format(&rule->layers, range, sizeof range);
    snprintf(buf, len, "%s of %s over %s", sp_check_reduce_names[rule->reduce], rule->metric, range);
}

static void set_outcome(sp_check_result *r, sp_check_outcome outcome, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_outcome(sp_check_result *r, sp_check_outcome outcome, const char *fmt, ...)
{
    r->outcome = outcome;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
}

/* "0.93" or, when some value is not finite, "nan (2 of 8 values not finite)". */
static void format_value(const sp_check_rule *rule, const sp_metric_value *v, char *buf, size_t len)
{
    if (v->n_nonfinite == 0)
        snprintf(buf, len, "%.6g", v->value);
    else if (rule->is_summary)
        snprintf(buf, len, "null (not finite)");
    else
        snprintf(buf, len, "nan (%lld of %lld values not finite)", (long long)v->n_nonfinite,
                 (long long)v->n_values);
}

/* A metric that is absent or unreadable decides the outcome alone; returns 1 when it did. The
 * reason names the file, so a baseline's problem reads as such. */
static int settle_missing(sp_check_result *r, const sp_metric_value *v)
{
    if (v->state == SP_METRIC_OK)
        return 0;
    if (v->state == SP_METRIC_ABSENT && r->rule->optional)
        set_outcome(r, SP_CHECK_SKIP, "%s: %s", r->metric, v->reason);
    else if (v->state == SP_METRIC_ABSENT)
        set_outcome(r, SP_CHECK_ERROR, "%s: %s (the rule is not \"optional\")", r->metric, v->reason);
    else
        set_outcome(r, SP_CHECK_ERROR, "%s: %s", r->metric, v->reason);
    return 1;
}

static void judge_threshold(sp_check_result *r, const sp_metric_value *v)
{
    const sp_check_rule *rule = r->rule;
    char value[160], limit[64];
    format_value(rule, v, value, sizeof value);
    if (rule->op == SP_OP_FINITE)
        snprintf(limit, sizeof limit, "finite");
    else
        snprintf(limit, sizeof limit, "%s %.6g", sp_check_op_names[rule->op], rule->limit);
    int pass = v->n_nonfinite == 0 && sp_check_compare(rule->op, v->value, rule->limit);
    set_outcome(r, pass ? SP_CHECK_PASS : SP_CHECK_FAIL, "%s = %s (limit: %s)%s%s", r->metric, value, limit,
                v->selection[0] ? "; " : "", v->selection);
}

static void judge_tolerance(sp_check_result *r, const sp_metric_value *v, const sp_metric_value *b)
{
    const sp_check_rule *rule = r->rule;
    char value[160], base[160];
    format_value(rule, v, value, sizeof value);
    format_value(rule, b, base, sizeof base);
    if (v->n_nonfinite || b->n_nonfinite) {
        set_outcome(r, SP_CHECK_FAIL, "%s = %s, baseline %s", r->metric, value, base);
        return;
    }
    double change = v->value - b->value;
    double allowed = rule->abs_tol + rule->rel_tol * fabs(b->value);
    double bad_move = rule->fail_on == SP_FAIL_ON_INCREASE   ? change
                      : rule->fail_on == SP_FAIL_ON_DECREASE ? -change
                                                             : fabs(change);
    set_outcome(r, bad_move <= allowed ? SP_CHECK_PASS : SP_CHECK_FAIL,
                "%s = %s, baseline %s: change %+.6g, allowed %.6g (absolute %g + relative %g x |baseline|; fails on "
                "%s)",
                r->metric, value, base, change, allowed, rule->abs_tol, rule->rel_tol,
                rule->fail_on == SP_FAIL_ON_ANY ? "any move" : sp_check_fail_on_names[rule->fail_on]);
}

static sp_status evaluate_rule(sp_check_result *r, sp_check_source *report, sp_check_source *baseline)
{
    r->value = r->baseline = NAN;
    describe_metric(r->rule, r->metric, sizeof r->metric);
    sp_metric_value v, b;
    SP_TRY(sp_check_source_read(report, r->rule, &v));
    if (settle_missing(r, &v))
        return SP_OK;
    r->value = v.value;
    if (!r->rule->against_baseline) {
        judge_threshold(r, &v);
        return SP_OK;
    }
    SP_TRY(sp_check_source_read(baseline, r->rule, &b));
    if (settle_missing(r, &b))
        return SP_OK;
    r->baseline = b.value;
    judge_tolerance(r, &v, &b);
    return SP_OK;
}

sp_status sp_check_evaluate(const sp_check_rules *rules, sp_check_source *report, sp_check_source *baseline,
                            sp_check_results *out)
{
    *out = (sp_check_results){0};
    SP_TRY(sp_check_baseline_usage(rules, baseline ? sp_check_source_path(baseline) : NULL));
    out->results = sp_calloc((size_t)rules->n + 1, sizeof *out->results, "check results");
    if (!out->results)
        return SP_ERR_NOMEM;
    for (int i = 0; i < rules->n; i++) {
        sp_check_result *r = &out->results[i];
        r->rule = &rules->rules[i];
        out->n = i + 1;
        sp_status st = evaluate_rule(r, report, baseline);
        if (st != SP_OK) {
            sp_check_results_free(out);
            return st;
        }
        out->count[r->outcome]++;
    }
    return SP_OK;
}

void sp_check_results_free(sp_check_results *r)
{
    free(r->results);
    *r = (sp_check_results){0};
}

void sp_check_results_print(const sp_check_results *r, FILE *f)
{
    int width = 4;
    for (int i = 0; i < r->n; i++) {
        int n = (int)strlen(r->results[i].rule->name);
        width = n > width ? n : width;
    }
    width = width > 40 ? 40 : width;
    for (int i = 0; i < r->n; i++)
        fprintf(f, "%-5s  %-*s  %s\n", sp_check_outcome_names[r->results[i].outcome], width, r->results[i].rule->name,
                r->results[i].detail);
    fprintf(f, "check: %d passed, %d failed, %d skipped, %d errors (%d rules)\n", r->count[SP_CHECK_PASS],
            r->count[SP_CHECK_FAIL], r->count[SP_CHECK_SKIP], r->count[SP_CHECK_ERROR], r->n);
}

/* The first result with the outcome. */
static const sp_check_result *first_with(const sp_check_results *r, sp_check_outcome outcome)
{
    for (int i = 0; i < r->n; i++)
        if (r->results[i].outcome == outcome)
            return &r->results[i];
    return NULL;
}

sp_status sp_check_verdict(const sp_check_results *r)
{
    const sp_check_result *first;
    if ((first = first_with(r, SP_CHECK_ERROR)) != NULL)
        return sp_error(SP_ERR_INPUT, "%d of %d rules could not be evaluated; first, rule \"%s\": %s",
                        r->count[SP_CHECK_ERROR], r->n, first->rule->name, first->detail);
    if ((first = first_with(r, SP_CHECK_FAIL)) != NULL)
        return sp_error(SP_ERR_CHECK, "%d of %d rules failed; first, rule \"%s\": %s", r->count[SP_CHECK_FAIL], r->n,
                        first->rule->name, first->detail);
    if (r->count[SP_CHECK_PASS] == 0)
        return sp_error(SP_ERR_CHECK, "no rule applied: all %d were skipped, so nothing was checked", r->n);
    return SP_OK;
}

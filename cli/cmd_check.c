/* cli/cmd_check.c: `spanprobe check REPORT [--rules RULES.json] [--baseline REPORT] [--junit FILE]`:
 * a regression gate on a report of `spanprobe analyze` (check/evaluate.h; docs/check.md). */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "analyzers/progress.h"
#include "check/evaluate.h"
#include "check/junit.h"
#include "cli/cli.h"
#include "io/model_source.h"
#include "io/report.h"

static void print_help(void)
{
    printf("usage: spanprobe check REPORT.h5 [--rules RULES.json] [--baseline BASE.h5] [--junit FILE.xml]\n"
           "       spanprobe check --print-rules\n\n"
           "Checks a report of `spanprobe analyze` (the HDF5 file; its JSON summary lies beside it) against\n"
           "rules: a threshold on any metric (a summary scalar, or a per-layer array reduced by mean, max\n"
           "or min over a range of layers), or a tolerance against the same metric of a baseline report.\n"
           "Prints one line per rule (PASS, FAIL, SKIP or ERROR, the value and the limit) and a summary.\n"
           "Without --rules the built-in rules run: representation collapse, vanishing gradients and\n"
           "divergence (docs/check.md says how their limits were chosen).\n\n"
           "options:\n"
           "  --rules FILE     JSON rules file (docs/check.md); \"include_defaults\": true adds the built-in ones\n"
           "  --baseline FILE  the report that rules with a \"tolerance\" compare against\n"
           "  --junit FILE     also write the outcomes as JUnit XML, for CI test reports\n"
           "  --print-rules    print the built-in rules as a rules file and exit\n\n"
           "A metric a non-optional rule names but the report lacks, an unknown array or key, and a\n"
           "malformed rule are errors, never passes; NaN or Inf in a metric fails its rule.\n"
           "exit codes: 0 every rule passed (or was skipped), 7 a rule failed or none applied,\n"
           "            2 usage, 3 bad rules or report, or a rule that could not be evaluated, 5 I/O\n");
}

typedef struct {
    const char *report, *rules, *baseline, *junit;
    int print_rules;
} check_args;

static sp_status parse_args(int argc, char **argv, check_args *a)
{
    *a = (check_args){0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char **target = strcmp(arg, "--rules") == 0      ? &a->rules
                              : strcmp(arg, "--baseline") == 0 ? &a->baseline
                              : strcmp(arg, "--junit") == 0    ? &a->junit
                                                               : NULL;
        if (target) {
            SP_TRY(sp_cli_option_value(argc, argv, &i, target));
        } else if (strcmp(arg, "--print-rules") == 0) {
            a->print_rules = 1;
        } else if (strncmp(arg, "--", 2) == 0) {
            return sp_error(SP_ERR_USAGE, "unknown option '%s'", arg);
        } else {
            SP_TRY(sp_cli_take_argument(arg, &a->report, "report"));
        }
    }
    if (!a->print_rules && !a->report)
        return sp_error(SP_ERR_USAGE, "expected a report: spanprobe check REPORT.h5");
    return SP_OK;
}

/* The JUnit file may replace none of the inputs, a report's summary included. */
static sp_status check_junit_path(const check_args *args)
{
    if (!args->junit || !args->report)
        return SP_OK;
    char *summary = sp_report_summary_path(args->report);
    char *base_summary = args->baseline ? sp_report_summary_path(args->baseline) : NULL;
    const char *inputs[] = {args->report, summary, args->baseline, base_summary, args->rules};
    sp_status st = summary && (base_summary || !args->baseline) ? sp_check_outputs(&args->junit, 1, inputs, 5)
                                                                 : SP_ERR_NOMEM;
    free(summary);
    free(base_summary);
    return st;
}

static sp_status run_check(const check_args *args, const sp_check_rules *rules)
{
    double t0 = sp_clock_seconds();
    SP_TRY(sp_check_baseline_usage(rules, args->baseline));
    sp_check_source *report = NULL, *baseline = NULL;
    sp_check_results results = {0};
    sp_status st = sp_check_source_open(args->report, &report);
    if (st == SP_OK && args->baseline)
        st = sp_check_source_open(args->baseline, &baseline);
    if (st == SP_OK)
        st = sp_check_evaluate(rules, report, baseline, &results);
    if (st == SP_OK) {
        printf("check %s%s%s\n", args->report, baseline ? " against " : "", baseline ? args->baseline : "");
        sp_check_results_print(&results, stdout);
        fflush(stdout);
        if (args->junit)
            st = sp_check_write_junit(args->junit, args->report, &results, sp_clock_seconds() - t0);
        if (st == SP_OK)
            st = sp_check_verdict(&results);
    }
    sp_check_results_free(&results);
    sp_check_source_close(report);
    sp_check_source_close(baseline);
    return st;
}

int sp_cmd_check(int argc, char **argv)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    sp_error_clear();
    check_args args;
    sp_status st = parse_args(argc, argv, &args);
    if (st == SP_OK)
        st = check_junit_path(&args);
    if (st != SP_OK)
        return st == SP_ERR_USAGE ? sp_cli_usage_error("check", "%s", sp_error_message()) : sp_cli_report("check", st);
    if (args.print_rules) {
        fputs(sp_check_default_rules_json, stdout);
        return SP_OK;
    }
    sp_check_rules rules;
    st = args.rules ? sp_check_rules_load(args.rules, &rules) : sp_check_rules_defaults(&rules);
    if (st != SP_OK)
        return sp_cli_report("check", st);
    st = run_check(&args, &rules);
    sp_check_rules_free(&rules);
    if (st == SP_ERR_USAGE)
        return sp_cli_usage_error("check", "%s", sp_error_message());
    return sp_cli_report("check", st);
}

/* check/evaluate.h: rules against a report (and a baseline), the per-rule verdicts, and the exit code.
 *
 * Each rule ends in one outcome:
 *   PASS   the value satisfies the threshold, or moved less than the tolerance from the baseline's;
 *   FAIL   it does not, or a value it depends on is not finite (NaN/Inf never pass);
 *   SKIP   an "optional" rule whose analyzer the report (or the baseline) lacks;
 *   ERROR  the rule cannot be evaluated: its analyzer is missing and it is not optional, or the
 *          analyzer ran but has no such array or key, or the layer range does not fit.
 * The verdict: SP_ERR_INPUT when any rule is an ERROR (the gate itself is broken), else
 * SP_ERR_CHECK when any rule failed or none applied (every rule skipped), else SP_OK.
 */
#ifndef SP_CHECK_EVALUATE_H
#define SP_CHECK_EVALUATE_H

#include <stdio.h>

#include "check/source.h"

typedef enum { SP_CHECK_PASS, SP_CHECK_FAIL, SP_CHECK_SKIP, SP_CHECK_ERROR, SP_N_OUTCOMES } sp_check_outcome;

extern const char *const sp_check_outcome_names[]; /* "PASS", "FAIL", "SKIP", "ERROR" */

typedef struct {
    const sp_check_rule *rule;
    sp_check_outcome outcome;
    double value;      /* the report's value (NaN when not read or not finite) */
    double baseline;   /* the baseline's (NaN unless the rule has a tolerance) */
    char metric[320];  /* "mean of similarity/block_influence over deepest_half" */
    char detail[1024]; /* one line: the comparison, or why there was none */
} sp_check_result;

typedef struct {
    int n;
    sp_check_result *results; /* one per rule, in rule order */
    int count[SP_N_OUTCOMES];
} sp_check_results;

/* Evaluates every rule; baseline is NULL exactly when no rule has a tolerance (else SP_ERR_USAGE).
 * Returns non-OK only when a file cannot be read or memory runs out. */
sp_status sp_check_evaluate(const sp_check_rules *rules, sp_check_source *report, sp_check_source *baseline,
                            sp_check_results *out);
void sp_check_results_free(sp_check_results *r);

/* One line per rule ("PASS  name  detail"), then the summary line. */
void sp_check_results_print(const sp_check_results *r, FILE *f);
/* The exit status of the whole check (the module comment), with sp_error's one line when non-OK. */
sp_status sp_check_verdict(const sp_check_results *r);

/* SP_ERR_USAGE when a rule has a tolerance but there is no baseline, or a baseline but no rule
 * with a tolerance (a baseline nothing reads is a mistake, not a pass). */
sp_status sp_check_baseline_usage(const sp_check_rules *rules, const char *baseline_path);

#endif

/* check/rules.h: the rules of `spanprobe check` (docs/check.md), parsed and validated.
 *
 * A rules file is a JSON object {"rules": [RULE, ...], "include_defaults": false}. A RULE names one
 * metric of a report and either a threshold or a tolerance against a baseline report:
 *   {"name": "collapse", "description": "why",                 name: default the metric text
 *    "metric": "similarity/block_influence",                   an array /metrics/<analyzer>/<array>,
 *    "reduce": "mean", "layers": "deepest_half",               reduced over a range of its first axis
 *    "op": ">=", "limit": 0.01}                                 <, <=, >, >=, ==, != a limit; or "finite"
 *   {"metric": "summary:similarity.adjacent_cosine_deep_half",  a scalar metrics.<group>.<key> of the
 *    "tolerance": {"absolute": 0.01, "relative": 0.05,          JSON summary, within abs + rel |baseline|
 *                  "fail_on": "increase"}}                      of the baseline's ("any" move, default)
 * "optional": true turns a rule whose analyzer the report lacks (skipped, or not selected) into a
 * skip instead of an error. Everything else is checked here: unknown keys, wrong types, an analyzer
 * that no spanprobe analyzer has, a reduction on a scalar or none on an array, both or neither of a
 * threshold and a tolerance, duplicate names. Errors are SP_ERR_INPUT naming the file and the rule.
 */
#ifndef SP_CHECK_RULES_H
#define SP_CHECK_RULES_H

#include <stdint.h>

#include "core/common.h"

#define SP_CHECK_NAME_MAX 128 /* analyzer, array and key names ([A-Za-z0-9_.-], io/report.h) */

typedef enum { SP_OP_LT, SP_OP_LE, SP_OP_GT, SP_OP_GE, SP_OP_EQ, SP_OP_NE, SP_OP_FINITE, SP_N_OPS } sp_check_op;
typedef enum { SP_REDUCE_NONE, SP_REDUCE_MEAN, SP_REDUCE_MAX, SP_REDUCE_MIN, SP_N_REDUCE } sp_check_reduce;
typedef enum { SP_LAYERS_ALL, SP_LAYERS_DEEPEST_HALF, SP_LAYERS_SHALLOWEST_HALF, SP_LAYERS_RANGE } sp_check_layers_kind;
typedef enum { SP_FAIL_ON_ANY, SP_FAIL_ON_INCREASE, SP_FAIL_ON_DECREASE, SP_N_FAIL_ON } sp_check_fail_on;

extern const char *const sp_check_op_names[];     /* "<", "<=", ..., "finite"; NULL-terminated */
extern const char *const sp_check_reduce_names[]; /* "", "mean", "max", "min"; NULL-terminated */
extern const char *const sp_check_fail_on_names[]; /* "any", "increase", "decrease"; NULL-terminated */

/* Entries of an array's first axis (layers, blocks, ...). A range is inclusive; negative ends count
 * from the end (-1 the last entry). The halves hold max(1, n / 2) entries, as the similarity
 * analyzer's adjacent_cosine_deep_half does. */
typedef struct {
    sp_check_layers_kind kind;
    int64_t first, last; /* SP_LAYERS_RANGE */
} sp_check_layers;

typedef struct {
    char *name;        /* unique within the rules */
    char *description; /* "" when none */
    char *metric;      /* as written */
    int is_summary;    /* summary:<group>.<key> rather than <analyzer>/<array> */
    char analyzer[SP_CHECK_NAME_MAX]; /* the analyzer, or the summary group */
    char item[SP_CHECK_NAME_MAX];     /* the array, or the summary key */
    sp_check_reduce reduce;           /* SP_REDUCE_NONE for a summary scalar */
    sp_check_layers layers;
    int against_baseline; /* 0: op and limit; 1: tolerance against the baseline's same metric */
    sp_check_op op;
    double limit;
    double abs_tol, rel_tol;
    sp_check_fail_on fail_on;
    int optional;
} sp_check_rule;

typedef struct {
    int n;
    sp_check_rule *rules;
} sp_check_rules;

/* The built-in rules (check/defaults.c), as a rules file's JSON text. */
extern const char sp_check_default_rules_json[];

/* Parses a rules document; `where` names it in errors. include_defaults appends the built-in rules. */
sp_status sp_check_rules_parse(const char *text, const char *where, sp_check_rules *out);
/* Reads and parses a rules file. */
sp_status sp_check_rules_load(const char *path, sp_check_rules *out);
/* The built-in rules. */
sp_status sp_check_rules_defaults(sp_check_rules *out);
void sp_check_rules_free(sp_check_rules *r);

/* Resolves layers on an axis of n entries to [first, last]; 0 when the axis is empty or a range
 * falls outside it. */
int sp_check_layers_resolve(const sp_check_layers *layers, int64_t n, int64_t *first, int64_t *last);
/* "deepest_half", "all", "[2, -1]" into buf. */
void sp_check_layers_format(const sp_check_layers *layers, char *buf, size_t len);
/* 1 when value passes `op limit` (a non-finite value never does). */
int sp_check_compare(sp_check_op op, double value, double limit);

#endif

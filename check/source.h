/* check/source.h: the metrics of one report as `spanprobe check` reads them.
 *
 * A source is a report (io/report.h) open for reading, its HDF5 arrays validated by sp_report_open,
 * and its JSON summary beside it, checked to belong to it (same input SHA-256). A rule's metric is
 * then either a summary scalar (null there: not finite) or an array reduced over a range of its
 * first axis. Three outcomes besides a value: the report lacks the whole analyzer (skipped, or not
 * selected), or the rule names something the report's analyzer does not have (an unknown array or
 * key, a range outside the array): the latter is always an error in the rule, never a pass.
 */
#ifndef SP_CHECK_SOURCE_H
#define SP_CHECK_SOURCE_H

#include "check/rules.h"

typedef struct sp_check_source sp_check_source;

typedef enum {
    SP_METRIC_OK,
    SP_METRIC_ABSENT,  /* the report has no results of the rule's analyzer (reason says why) */
    SP_METRIC_INVALID  /* the analyzer ran but the metric cannot be read as the rule asks */
} sp_metric_state;

typedef struct {
    sp_metric_state state;
    double value;        /* the scalar or the reduction; NaN when any selected value is not finite */
    int64_t n_values;    /* values reduced (1 for a scalar) */
    int64_t n_nonfinite; /* of those, NaN or +-Inf (a summary null counts as one) */
    char selection[160]; /* "entries 4..7 of 9 [block]", "" for a scalar */
    char reason[512];    /* SP_METRIC_ABSENT / SP_METRIC_INVALID: one line */
} sp_metric_value;

/* Opens the report at path and its summary; SP_ERR_INPUT / SP_ERR_IO naming the file. */
sp_status sp_check_source_open(const char *path, sp_check_source **out);
void sp_check_source_close(sp_check_source *s);
const char *sp_check_source_path(const sp_check_source *s);

/* The rule's metric. Returns non-OK only when the file cannot be read (I/O, memory); a missing or
 * mismatched metric is a state of out. */
sp_status sp_check_source_read(sp_check_source *s, const sp_check_rule *rule, sp_metric_value *out);

/* The reduction of x[n]; *n_nonfinite counts NaN/Inf entries, and the result is NaN when there are any. */
double sp_check_reduce_values(sp_check_reduce how, const double *x, size_t n, int64_t *n_nonfinite);

#endif

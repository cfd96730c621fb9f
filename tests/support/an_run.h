/* tests/support/an_run.h: runs one model-driven analyzer (begin/consume NULL: finish() does all the
 * work), or any analyzers through the analyze driver, on a model and a random evaluation set, into
 * a report committed in the scratch directory, and reads the results back. Aborts when the setup
 * itself fails (tests only). */
#ifndef SP_TEST_AN_RUN_H
#define SP_TEST_AN_RUN_H

#include "analyzers/analyzer.h"
#include "tests/support/report_view.h"

typedef struct {
    sp_analyze_options opts;
    sp_analysis a;
    int32_t *tokens, *targets; /* [n_seqs * seq_len] */
    char path[512];
    report_view view;          /* the report, open after a successful an_run_finish */
} an_run;

/* The analyze defaults (sp_analyze_options_defaults) and an evaluation set of n_seqs sequences of
 * seq_len uniform random tokens, targets uniform random too (none ignored), `batch` sequences per
 * pass. The caller may change r->opts, r->tokens and r->targets before an_run_finish. */
void an_run_setup(an_run *r, sp_model *m, int n_seqs, int seq_len, int batch, uint64_t seed);
/* Runs an->finish into the report <scratch>/<file>; returns finish's status (the report is then
 * aborted unless it is SP_OK, in which case it is committed and opened). */
sp_status an_run_finish(an_run *r, const sp_analyzer *an, const char *file);
/* The same for the analyzers a --metrics list names, run by the analyze driver (sp_analyze_execute:
 * begin, the streaming pass of forward passes over the evaluation set, finish), quietly. */
sp_status an_run_execute(an_run *r, const char *metrics, const char *file);
/* /metrics/<analyzer>/<name> with its attributes (aborts when it cannot be read); free with
 * sp_report_array_free. */
sp_report_array an_run_array(an_run *r, const char *analyzer, const char *name);
/* metrics.<analyzer>.<key> of the summary (report_view_scalar). */
double an_run_scalar(const an_run *r, const char *analyzer, const char *key);
/* 1 when the summary has metrics.<analyzer>.<key>. */
int an_run_has_scalar(const an_run *r, const char *analyzer, const char *key);
void an_run_free(an_run *r);

#endif

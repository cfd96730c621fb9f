/* tests/support/report_view.h: a committed report and its JSON summary, open for assertions.
 * Aborts when the files cannot be read (tests only). */
#ifndef SP_TEST_REPORT_VIEW_H
#define SP_TEST_REPORT_VIEW_H

#include <cJSON.h>

#include "io/report.h"

typedef struct {
    sp_report_reader *reader;
    cJSON *summary;
} report_view;

void report_view_open(report_view *v, const char *report_path);
void report_view_close(report_view *v);
/* /metrics/<analyzer>/<name>: the data (malloc'd, free()); rank and shape (either may be NULL). */
/* shape (NULL: not wanted) holds as many values as sp_report_array.shape */
double *report_view_array(const report_view *v, const char *analyzer, const char *name, int *rank, int64_t *shape);
/* metrics.<analyzer>.<key>: its number, NaN for null; aborts when absent. */
double report_view_scalar(const report_view *v, const char *analyzer, const char *key);
/* The summary's skipped.<analyzer> reason, or NULL when it ran. */
const char *report_view_skipped(const report_view *v, const char *analyzer);
/* input.<key> of the summary as a string (NULL when absent or not a string). */
const char *report_view_input(const report_view *v, const char *key);

#endif

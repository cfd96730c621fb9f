/* analyzers/report_csv.h: every array of a report as a CSV table, for quick plotting.
 *
 * /metrics/<analyzer>/<array> becomes DIR/<analyzer>.<array>.csv: a header line, then one line per
 * row. The leading columns are the indices of every dimension but the last, named from the array's
 * shape_desc ("[layer, layer]" -> "layer"); the remaining columns are the values along the last
 * dimension, named <last>_<j>. A 1-D array [n] is two columns: its index and the values, named
 * after the array. Numbers have 17 significant digits; non-finite values are nan, inf, -inf. */
#ifndef SP_REPORT_CSV_H
#define SP_REPORT_CSV_H

#include "core/common.h"
#include "io/output_set.h"

/* Writes every array of the report at report_path as a file of dir, added to set: nothing appears
 * before the caller commits set (io/output_set.h). *n_files gets the count. */
sp_status sp_report_export_csv(const char *report_path, const char *dir, sp_output_set *set, int *n_files);

#endif

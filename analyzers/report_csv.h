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

/* Creates dir when missing (one level); SP_ERR_IO when it cannot be made or is not a directory. */
sp_status sp_csv_prepare_dir(const char *dir);
/* Writes every array of the report at report_path into dir (each file atomically); *n_files gets
 * the count. */
sp_status sp_report_export_csv(const char *report_path, const char *dir, int *n_files);

#endif

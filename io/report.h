/* io/report.h: analysis reports, format "spanprobe-report" version 1.0, and their JSON summary.
 *
 * A report is an HDF5 file holding every raw array an analyzer computed, with units, so any derived
 * value can be recomputed from it, and a JSON summary beside it with the scalars a person or a
 * `check` rule reads (same path, ".h5" replaced by ".json", or ".json" appended).
 *
 *   /                 attrs format, format_version "1.0", tool_version, created, source
 *   /provenance       attrs input_file, input_sha256 (hex), input_bytes (int64), tool_version,
 *                     options_json, eval_set (strings unless stated)
 *   /metrics/<analyzer>/<array>  float64 or float32 datasets, attrs units, shape_desc ("[layer]",
 *                     "[layer, layer]", ...), description
 *   /skipped/<analyzer>  empty group, attr reason: the analyzer did not apply (e.g. "no FFN latents
 *                     in the dump")
 * JSON summary, keys always present and in this order:
 *   {"format": "spanprobe-report", "format_version": "1.0", "tool_version": "...",
 *    "input": {"file", "sha256", "bytes", "eval_set", "options": <the options JSON, parsed>},
 *    "metrics": {"<analyzer>": {"<key>": number or null (non-finite), ...}, ...},
 *    "skipped": {"<analyzer>": "<reason>", ...}}
 * Analyzer, array and key names are [A-Za-z0-9_.-]+ (they become HDF5 link names and JSON keys).
 */
#ifndef SP_REPORT_H
#define SP_REPORT_H

#include "core/common.h"
#include "io/output_set.h"

#define SP_REPORT_FORMAT "spanprobe-report"
#define SP_REPORT_VERSION_MAJOR 1
#define SP_REPORT_VERSION_MINOR 1 /* 1.1: provenance "model" */

typedef struct {
    const char *input_path;   /* the analyzed file (its sha256 and size are recorded); may be NULL */
    const char *options_json; /* the analyzer options as a JSON object text; may be NULL ("{}") */
    const char *eval_set;     /* description of the evaluation set ("moby dick, 64 x 256 tokens") */
    const char *model;        /* what was analyzed, for figure legends: the model's name or the dump's
                                 source (format 1.1); may be NULL ("") */
} sp_report_provenance;

typedef struct {
    const char *units;        /* "1", "nats", "cosine", ... */
    const char *shape_desc;   /* "[layer]", "[layer, layer]", ... */
    const char *description;
} sp_report_array_attrs;

typedef struct sp_report sp_report;               /* a report being written */
typedef struct sp_report_reader sp_report_reader; /* a report open for reading */

/* ---- writer ---- */
/* The writing calls below take a NULL report as a sink that keeps nothing: the MPI ranks other than
 * 0 of one analysis compute what rank 0 writes (analyzers/ranks.h). */
/* Hashes the input file, then creates both temporary files (nothing appears before commit). */
sp_status sp_report_create(const char *path, const sp_report_provenance *prov, sp_report **out);
/* Writes /metrics/<analyzer>/<name> [shape] stored as float64 (double) or float32 (float). */
sp_status sp_report_write_array(sp_report *r, const char *analyzer, const char *name, int rank, const int64_t *shape,
                                const double *data, const sp_report_array_attrs *attrs);
sp_status sp_report_write_array_f32(sp_report *r, const char *analyzer, const char *name, int rank,
                                    const int64_t *shape, const float *data, const sp_report_array_attrs *attrs);
/* A scalar of the JSON summary, metrics.<analyzer>.<key> (set again: replaced). */
sp_status sp_report_set_scalar(sp_report *r, const char *analyzer, const char *key, double value);
/* Records that an analyzer did not run, and why. */
sp_status sp_report_skip(sp_report *r, const char *analyzer, const char *reason);
/* Writes the summary and renames both files into place; frees r whatever the outcome. */
sp_status sp_report_commit(sp_report *r);
/* Writes both files under their temporary names and adds them to set, to appear with the other
 * files of set (io/output_set.h); frees r whatever the outcome. *h5_tmp_path (may be NULL) gets the
 * report's temporary path, readable until set is committed or aborted. */
sp_status sp_report_finish(sp_report *r, sp_output_set *set, const char **h5_tmp_path);
/* Removes the temporary files and frees r (NULL is fine). */
void sp_report_abort(sp_report *r);
/* The summary path of a report path (caller frees). */
char *sp_report_summary_path(const char *path);

/* ---- reader ---- */
typedef struct {
    int rank;
    int64_t shape[4];
    double *data;             /* [numel] */
    char units[64], shape_desc[64], description[256];
} sp_report_array;

/* Opens and validates the structure: format, version, /provenance, every /metrics array having a
 * float type, rank 1..4 and the three attributes, every /skipped group a reason. */
sp_status sp_report_open(const char *path, sp_report_reader **out);
/* Reads /metrics/<analyzer>/<name> (NaN/Inf are kept: a report may record +inf condition numbers). */
sp_status sp_report_read_array(sp_report_reader *r, const char *analyzer, const char *name, sp_report_array *out);
void sp_report_array_free(sp_report_array *a);
/* The provenance attribute `key` of an open report ("input_sha256", ...) into buf. */
sp_status sp_report_get_provenance(sp_report_reader *r, const char *key, char *buf, size_t len);
/* The analyzers that have a /metrics group (analyzer NULL), or the arrays of /metrics/<analyzer>
 * (none when the report has no such group), in HDF5 name order; free with sp_report_names_free. */
sp_status sp_report_list(sp_report_reader *r, const char *analyzer, char ***names, int *n);
void sp_report_names_free(char **names, int n);
/* The JSON summary beside the open report, parsed and checked: "format", the major version, the
 * objects "metrics" and "skipped", and "input.sha256" equal to /provenance input_sha256 (so it is
 * this report's summary). The caller frees it with cJSON_Delete. */
struct cJSON;
sp_status sp_report_read_summary(sp_report_reader *r, struct cJSON **out);
void sp_report_close(sp_report_reader *r);

#endif

/* analyzers/driver.h: `spanprobe analyze` as a library call.
 *
 * sp_analyze_run reads the input (a checkpoint, run on an evaluation set, or an activation dump),
 * runs the selected analyzers (analyzers/analyzer.h) and writes the report atomically: nothing
 * appears at the output path unless every analyzer finished. Stages:
 *   1. options checked, --metrics resolved, the input opened and its evaluation set built;
 *   2. the report created (provenance: input hash, tool version, every option, the evaluation set);
 *   3. sp_analyze_execute: analyzers whose needs the input cannot meet are recorded as skipped with
 *      the reason; begin() of the others; ONE streaming pass (a forward pass per batch, or dump
 *      reads into backend buffers) handed to every consume(); finish() of each;
 *   4. stage times and peak memory recorded (summary group "run") and printed; commit; CSV export.
 */
#ifndef SP_DRIVER_H
#define SP_DRIVER_H

#include "analyzers/analyzer.h"

#define SP_ANALYZE_DEFAULT_DATA "data/mobydick.txt"

typedef struct {
    const char *input;    /* checkpoint or activation dump */
    const char *out;      /* the report (.h5); the JSON summary goes beside it */
    const char *data;     /* evaluation text for a checkpoint (NULL: SP_ANALYZE_DEFAULT_DATA) */
    const char *tokens;   /* a token id file instead of the text (NULL: none) */
    const char *device;   /* "cpu", "cuda" or "auto" (NULL: auto) */
    const sp_backend *backend; /* run on this table instead of selecting by device (tests); NULL: device */
    const char *csv_dir;  /* also write every report array as a CSV table there (NULL: none) */
    int quiet;            /* no progress lines, no stage table */
    int rank, n_ranks;    /* the MPI ranks sharing this one analysis (`mpirun -np N spanprobe analyze`,
                             analyzers/ranks.h): rank 0 reports and writes; n_ranks 0 or 1: alone */
    sp_analyze_options opts;
} sp_analyze_job;

sp_status sp_analyze_run(const sp_analyze_job *job);

/* Resolves a --metrics list ("" = every analyzer but the opt-in ones) into selected[sp_n_analyzers]
 * (1 = run). */
sp_status sp_analyze_select(const char *metrics, unsigned char *selected);

/* Stage 3 on an analysis whose input fields are filled (be, model or dump, sizes, evaluation set,
 * opts, report). Records the "run" summary scalars (times, peak memory) in the report; prints the
 * stage table on stdout unless quiet. */
sp_status sp_analyze_execute(sp_analysis *a, const unsigned char *selected, int quiet);

/* Peak resident memory of the process so far, MiB. */
double sp_analyze_peak_rss_mib(void);

#endif

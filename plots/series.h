/* plots/series.h: the inputs of `spanprobe plot`, each one series of a figure.
 *
 * An input is a report (io/report.h), a training log (train/trainlog.h) or a run directory, which
 * stands for its trainlog.h5 and every report in it. Each series gets the run it belongs to
 * (variant, depth, init, lr), from the training log's options, or for a report from the checkpoint
 * it analyzed (its provenance input_file) or else a training log in the same directory; a series
 * whose run cannot be found is named by its file. Titles name the run in legends; short names keep
 * only what tells the runs apart (for bar-chart tics).
 *
 * Colours: one per run, in input order, while the runs fit the palette (SP_PLOT_PALETTE colours,
 * plots/common.gp). Past that, and where the runs span several variants, the figures that draw a
 * line per run draw a panel per variant instead (a facet; plots/panels.gp, plots/alpha.gp), and a
 * run's colour is its rank among its variant's runs: a study's 48 runs in one panel repeated
 * colours and could not be read. */
#ifndef SP_PLOT_SERIES_H
#define SP_PLOT_SERIES_H

#include "core/config.h"
#include "io/report.h"
#include "train/trainlog.h"

typedef enum { SP_SERIES_REPORT, SP_SERIES_TRAINLOG } sp_series_kind;

typedef struct {
    sp_series_kind kind;
    char path[4096];
    int run_known;        /* cfg and lr below were found */
    sp_config cfg;        /* the run's model */
    double lr;            /* peak learning rate; NaN when unknown */
    int64_t seed;         /* the run's seed (model init and data order) */
    int64_t step;         /* a report: the analyzed checkpoint's step; -1 when unknown */
    char title[192];      /* "span, L=8, scaled init, lr 0.003" (", seed 2" where the seeds differ) */
    char short_name[96];  /* "span" (or "span L=8" when depths differ, ...) */
    int color;            /* 1-based, one per run: the training log and reports of a run share it */
    int facet;            /* 1-based: the run's variant (a facet) when the inputs are faceted, else 1 */
    sp_trainlog log;                /* SP_SERIES_TRAINLOG */
    sp_report_reader *report;       /* SP_SERIES_REPORT */
} sp_plot_series;

/* Colours in plots/common.gp before they repeat (with hollow markers, up to twice as many). */
#define SP_PLOT_PALETTE 12

typedef struct {
    int n;
    sp_plot_series *items;
    int n_facets;                 /* 1: every run in one panel */
    const char *facet_titles[SP_N_VARIANTS + 1]; /* [facet - 1]: a variant's name, or "other runs" */
} sp_plot_inputs;

/* Opens every input (SP_ERR_INPUT naming the file for anything that is neither a report, a training
 * log nor a directory holding one). */
sp_status sp_plot_inputs_load(int n_paths, const char *const *paths, sp_plot_inputs *in);
void sp_plot_inputs_free(sp_plot_inputs *in);

#endif

/* plots/figure.h: what a figure of `spanprobe plot` is, and the context its preparer fills.
 *
 * A figure's prepare() reads the series it needs (plots/series.h), writes its data file through
 * sp_plot_block/sp_plot_row and the variables its gnuplot template reads through sp_plot_var_* (or
 * the layout helpers below), then returns SP_OK. When no series has its data it calls
 * sp_plot_skip (one line: what is missing); series without the data are left out with
 * sp_plot_leave_out (reported on one line too). plots/plot.c then writes <id>.dat and <id>.gp
 * (variables + plots/common.gp + the template) and runs gnuplot (plots/gnuplot.h).
 *
 * Templates (plots/<name>.gp, compiled in as strings): `panels` (lines by layer, one per run, one
 * panel per quantity, optionally a bar chart of averages beside each panel), `heatmap` (a matrix
 * per run, side by side), `grad-steps` (a panel per run, a line per layer coloured by depth),
 * `depth` (final loss against depth, diverged runs marked) and `alpha` (a panel per weight-matrix
 * kind over a shaded reference band). */
#ifndef SP_PLOT_FIGURE_H
#define SP_PLOT_FIGURE_H

#include "plots/series.h"
#include "plots/text_buf.h"

typedef struct {
    const sp_plot_inputs *in;
    const char *id;
    sp_text vars;    /* gnuplot statements that set the template's variables */
    sp_text data;    /* the data file */
    int n_blocks;
    int block_rows;  /* rows in the current block */
    int *runs;       /* series indices of the runs drawn, in order [n_runs] */
    int n_runs;
    char skip[512];  /* non-empty: not drawn, and why */
    char left_out[1024];
    int n_left_out;            /* runs left out; left_out names the first few */
    int min_width, min_height; /* the canvas a grid of panels needs (pixels; 0: any) */
    int n_panels, has_bars;    /* the `panels` template's layout (sp_plot_var_panels; 0 panels: another template) */
    int kind_panels;           /* > 0: a grid of this many panels, each drawing every run (alpha.gp) */
    int n_facets;              /* panels per quantity, one per variant among the runs (plots/series.h) */
    int facet_most_runs;       /* the most runs one facet holds */
} sp_plot_ctx;

typedef struct {
    const char *id;
    const char *description;
    const char *template_name; /* plots/<name>.gp */
    sp_status (*prepare)(sp_plot_ctx *c);
} sp_plot_figure;

extern const sp_plot_figure sp_plot_figures[];
extern const int sp_plot_n_figures;

/* ---- what a preparer calls ---- */

/* An array a report figure reads: /metrics/<analyzer>/<name> of the given rank. */
typedef struct {
    const char *name;
    int rank;
} sp_plot_metric;

/* Writes the blocks of one report series whose arrays a[k] (in the order asked) were read. */
typedef sp_status (*sp_plot_report_fn)(sp_plot_ctx *c, const sp_plot_series *s, const sp_report_array *a, void *acc);

/* For every report series holding all k arrays of analyzer: adds it as a run and calls fn; a report
 * lacking one is left out naming it. Skips the figure when no report has them. k <= 4. */
sp_status sp_plot_each_report(sp_plot_ctx *c, const char *analyzer, int k, const sp_plot_metric *metrics,
                              sp_plot_report_fn fn, void *acc);

/* The figure is not drawn; reason is one line ("no report with similarity/cosine"). Returns SP_OK. */
sp_status sp_plot_skip(sp_plot_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Series s is not in the figure, for the reason given (collected into one note). */
void sp_plot_leave_out(sp_plot_ctx *c, const sp_plot_series *s, const char *why);
/* The one-line note on the runs left out (the first few named, the rest counted), in buf. */
const char *sp_plot_left_out_note(const sp_plot_ctx *c, char *buf, size_t len);
/* Appends series index i to the figure's runs (its legend entry and colour). */
sp_status sp_plot_add_run(sp_plot_ctx *c, int i);
/* Writes n_runs, run_title[], run_short[] and run_color[] (the run's colour, the same in every
 * figure) for the runs added; and their facets: n_facets, facet_title[], run_facet[] (1-based) and
 * run_key[] (the title less the variant a facet names), laying out a facet per variant where the
 * inputs are faceted and the figure's template draws a line per run. */
void sp_plot_write_runs(sp_plot_ctx *c);

/* Starts data block number c->n_blocks (gnuplot `index`), with a comment line. A block left without
 * rows gets one row of missing values: gnuplot does not count an empty block, which would shift
 * the index of every later one. */
void sp_plot_block(sp_plot_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A comment line in the data file. */
void sp_plot_comment(sp_plot_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One data row; non-finite values are written as "?" (missing). */
void sp_plot_row(sp_plot_ctx *c, int n, const double *values);
/* The same, ending with a quoted string column (for gnuplot's `with labels`). */
void sp_plot_row_labelled(sp_plot_ctx *c, int n, const double *values, const char *label);
/* Closes the last block (plots/plot.c, before the data file is written). */
void sp_plot_end_data(sp_plot_ctx *c);

void sp_plot_var_num(sp_plot_ctx *c, const char *name, double value);
void sp_plot_var_str(sp_plot_ctx *c, const char *name, const char *value);
void sp_plot_var_nums(sp_plot_ctx *c, const char *name, int n, const double *values);
void sp_plot_var_strs(sp_plot_ctx *c, const char *name, int n, const char *const *values);
/* n_rows and n_cols of a grid of n panels, wider than tall; the canvas grows so that each panel
 * keeps at least SP_PLOT_MIN_PANEL_WIDTH x SP_PLOT_MIN_PANEL_HEIGHT pixels. */
#define SP_PLOT_MIN_PANEL_WIDTH 300
#define SP_PLOT_MIN_PANEL_HEIGHT 250
void sp_plot_var_grid(sp_plot_ctx *c, int n);
/* The same for a grid of n panels that each draw every run (a line each): with facets, a row of
 * the n panels per facet. */
void sp_plot_var_kind_grid(sp_plot_ctx *c, int n);
/* Pixels a key entry takes: its sample and a title of title_len characters at the key's font. */
double sp_plot_key_entry_px(size_t title_len);
/* The longest key entry among the figure's runs (characters; after sp_plot_write_runs). */
size_t sp_plot_longest_key(const sp_plot_ctx *c);
/* Rows of panels above the key of a `panels` figure (a row per quantity where they are stacked:
 * bar charts or facets); 0 for the other templates, whose keys lie inside their panels. */
int sp_plot_key_panel_rows(const sp_plot_ctx *c);

/* One panel of the `panels` template. Columns are 1-based data-file columns; x is column 1.
 * Blocks are offsets within a run's blocks_per_run. */
typedef struct {
    const char *title, *xlabel, *ylabel;
    int block, col;             /* the solid line */
    int dash_block, dash_col;   /* a dashed companion in the run's colour; dash_col 0: none */
    int band_col;               /* a band of +- this column around the line; 0: none */
    int log;                    /* log y axis */
} sp_plot_panel;

/* The variables of the `panels` template. With has_bars the data file ends with one more block
 * (after every run's blocks): one row per run, the run number (1-based), then one value per panel. */
void sp_plot_var_panels(sp_plot_ctx *c, const char *title, int blocks_per_run, int has_bars, int n,
                        const sp_plot_panel *panels);

/* The positive range of values, for log axes "where values span decades". */
typedef struct {
    double min_pos, max;
    int nonpositive; /* a finite value <= 0 was seen */
} sp_plot_span;
void sp_plot_span_init(sp_plot_span *s);
void sp_plot_span_add(sp_plot_span *s, int n, const double *values);
/* 1 when every finite value seen was positive and max / min >= 100. */
int sp_plot_span_decades(const sp_plot_span *s);

/* The preparers (plots/fig_*.c), listed in plots/registry.c. */
sp_status sp_fig_grad_steps(sp_plot_ctx *c);
sp_status sp_fig_grad_layers(sp_plot_ctx *c);
sp_status sp_fig_attn_steps(sp_plot_ctx *c);
sp_status sp_fig_cos_heatmap(sp_plot_ctx *c);
sp_status sp_fig_cos_distance(sp_plot_ctx *c);
sp_status sp_fig_spectral_util(sp_plot_ctx *c);
sp_status sp_fig_embed_eigs(sp_plot_ctx *c);
sp_status sp_fig_cond(sp_plot_ctx *c);
sp_status sp_fig_alpha(sp_plot_ctx *c);
sp_status sp_fig_depth(sp_plot_ctx *c);
sp_status sp_fig_loss(sp_plot_ctx *c);
sp_status sp_fig_jac(sp_plot_ctx *c);
sp_status sp_fig_grad_blocks(sp_plot_ctx *c);
sp_status sp_fig_growth(sp_plot_ctx *c);
sp_status sp_fig_hidden_spectra(sp_plot_ctx *c);
sp_status sp_fig_presums(sp_plot_ctx *c);
sp_status sp_fig_curvature(sp_plot_ctx *c);
sp_status sp_fig_block_influence(sp_plot_ctx *c);
sp_status sp_fig_token_uniformity(sp_plot_ctx *c);
sp_status sp_fig_logit_lens(sp_plot_ctx *c);
sp_status sp_fig_attention(sp_plot_ctx *c);
sp_status sp_fig_prune(sp_plot_ctx *c);
sp_status sp_fig_cka(sp_plot_ctx *c);
sp_status sp_fig_drift(sp_plot_ctx *c);

#endif

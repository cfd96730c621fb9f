/* plots/plot.h: `spanprobe plot` as a library call.
 *
 * Draws the figures of docs/figures/README.md from reports and training logs (plots/series.h says
 * what an input may be). For each figure the tool writes, in the output directory, <id>.dat (the
 * data, commented), <id>.gp (a self-contained gnuplot script: the figure's variables, the shared
 * styles and its template) and the images <id>.<fmt>, drawn by running gnuplot on that script, so
 * `gnuplot -e 'fmt="pdf"' <id>.gp` redraws it. A figure whose data no input holds is skipped with
 * a one-line note on stderr. Every file is drawn into a staging directory inside the output
 * directory and moved into place once all figures are drawn (io/staging_dir.h): a failure (a full
 * disk) leaves the output directory as it was. */
#ifndef SP_PLOT_H
#define SP_PLOT_H

#include "core/common.h"

enum { SP_PLOT_PNG = 1u << 0, SP_PLOT_PDF = 1u << 1, SP_PLOT_SVG = 1u << 2 };

typedef struct {
    const char *out_dir;  /* created (with its parents) when missing */
    unsigned formats;     /* SP_PLOT_* bits */
    const char *only;     /* comma-separated figure ids; NULL or "": every figure */
    int width, height;    /* pixels (PNG, SVG; a PDF has the same proportions at 72 dpi) */
    int fixed_size;       /* 0: a figure of many panels grows beyond width x height so that each
                             keeps SP_PLOT_MIN_PANEL_WIDTH x _HEIGHT (plots/figure.h); 1: as given */
    int quiet;            /* no "wrote" lines on stdout (notes still go to stderr) */
} sp_plot_options;

#define SP_PLOT_DEFAULT_WIDTH 800
#define SP_PLOT_DEFAULT_HEIGHT 500

/* Defaults: PNG, every figure, 800 x 500. */
void sp_plot_options_defaults(sp_plot_options *opt);
/* "png,pdf,svg" (any non-empty subset) into SP_PLOT_* bits; SP_ERR_USAGE naming the bad entry. */
sp_status sp_plot_parse_formats(const char *list, unsigned *formats);

/* Figure ids and one-line descriptions, in drawing order. */
int sp_plot_figure_count(void);
const char *sp_plot_figure_id(int i);
const char *sp_plot_figure_description(int i);

typedef struct {
    int drawn, skipped;
} sp_plot_result;

/* Draws every selected figure from the inputs. Usage errors (bad --only id, size) are
 * SP_ERR_USAGE; an unreadable input is SP_ERR_INPUT or SP_ERR_IO naming it; gnuplot missing is
 * SP_ERR_IO; gnuplot failing on a script is SP_ERR_INTERNAL naming the figure and gnuplot's error.
 * result may be NULL. */
sp_status sp_plot_run(int n_inputs, const char *const *inputs, const sp_plot_options *opt, sp_plot_result *result);

#endif

/* plots/figure_ctx.c: the context a figure's preparer fills (plots/figure.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plots/figure.h"

sp_status sp_plot_skip(sp_plot_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->skip, sizeof c->skip, fmt, ap);
    va_end(ap);
    return SP_OK;
}

/* Runs a left-out note names; the rest are counted. */
#define LEFT_OUT_NAMED 3

void sp_plot_leave_out(sp_plot_ctx *c, const sp_plot_series *s, const char *why)
{
    if (c->n_left_out++ >= LEFT_OUT_NAMED)
        return;
    size_t used = strlen(c->left_out);
    snprintf(c->left_out + used, sizeof c->left_out - used, "%s%s (%s)", used ? "; " : "", s->title, why);
}

const char *sp_plot_left_out_note(const sp_plot_ctx *c, char *buf, size_t len)
{
    if (c->n_left_out > LEFT_OUT_NAMED)
        snprintf(buf, len, "%d runs: %s; and %d more", c->n_left_out, c->left_out, c->n_left_out - LEFT_OUT_NAMED);
    else
        snprintf(buf, len, "%s", c->left_out);
    return buf;
}

sp_status sp_plot_add_run(sp_plot_ctx *c, int i)
{
    int *grown = realloc(c->runs, (size_t)(c->n_runs + 1) * sizeof *grown);
    if (!grown)
        return sp_error(SP_ERR_NOMEM, "plot %s: out of memory", c->id);
    c->runs = grown;
    c->runs[c->n_runs++] = i;
    return SP_OK;
}

/* The key entry of series s: its title, less "<variant>, " where a facet names the variant. */
static const char *run_key(const sp_plot_ctx *c, const sp_plot_series *s)
{
    const char *variant = sp_variant_names[s->cfg.variant];
    const size_t n = strlen(variant);
    if (c->n_facets > 1 && s->run_known && strncmp(s->title, variant, n) == 0 && strncmp(s->title + n, ", ", 2) == 0)
        return s->title + n + 2;
    return s->title;
}

/* The facets of the figure's runs (those of its inputs that it draws, renumbered in order) into
 * run_facet[] and titles[]; sets c->n_facets and c->facet_most_runs. Figures whose template draws no
 * line per run keep one facet. */
static void find_facets(sp_plot_ctx *c, double *run_facet, const char **titles)
{
    int figure_facet[SP_N_VARIANTS + 2] = {0}, count[SP_N_VARIANTS + 2] = {0}, n = 0;
    const int facetable = c->n_panels > 0 || c->kind_panels > 0;
    for (int k = 0; k < c->n_runs; k++) {
        const int f = facetable ? c->in->items[c->runs[k]].facet : 1;
        if (!figure_facet[f]) {
            figure_facet[f] = ++n;
            titles[n - 1] = c->in->facet_titles[f - 1];
        }
        run_facet[k] = figure_facet[f];
        count[figure_facet[f]]++;
    }
    c->n_facets = n > 0 ? n : 1;
    c->facet_most_runs = 0;
    for (int f = 1; f <= n; f++)
        c->facet_most_runs = count[f] > c->facet_most_runs ? count[f] : c->facet_most_runs;
}

/* With facets, the grid the template draws: a panel per quantity and facet. */
static void lay_out_facets(sp_plot_ctx *c)
{
    if (c->n_facets < 2)
        return;
    if (c->kind_panels > 0) { /* alpha.gp: a row per facet, its key in a last column */
        sp_plot_var_num(c, "n_rows", c->n_facets);
        sp_plot_var_num(c, "n_cols", c->kind_panels + 1);
        c->min_width = (c->kind_panels + 1) * SP_PLOT_MIN_PANEL_WIDTH;
        c->min_height = c->n_facets * SP_PLOT_MIN_PANEL_HEIGHT + 40;
        return;
    }
    /* panels.gp: a row per quantity, a column per facet, each as wide as its key below it */
    const double column = fmax(SP_PLOT_MIN_PANEL_WIDTH, sp_plot_key_entry_px(sp_plot_longest_key(c)));
    c->min_width = (int)(c->n_facets * column / (c->has_bars ? 0.7 : 1.0));
}

size_t sp_plot_longest_key(const sp_plot_ctx *c)
{
    size_t longest = 1;
    for (int k = 0; k < c->n_runs; k++) {
        const size_t len = strlen(run_key(c, &c->in->items[c->runs[k]]));
        longest = len > longest ? len : longest;
    }
    return longest;
}

int sp_plot_key_panel_rows(const sp_plot_ctx *c)
{
    return c->n_panels == 0 ? 0 : c->has_bars || c->n_facets > 1 ? c->n_panels : 1;
}

void sp_plot_write_runs(sp_plot_ctx *c)
{
    const int n = c->n_runs;
    sp_plot_var_num(c, "n_runs", n);
    if (n == 0)
        return;
    const char **titles = calloc((size_t)n, sizeof *titles), **shorts = calloc((size_t)n, sizeof *shorts);
    const char **keys = calloc((size_t)n, sizeof *keys), *facet_titles[SP_N_VARIANTS + 1];
    double *colors = calloc((size_t)n, sizeof *colors), *facets = calloc((size_t)n, sizeof *facets);
    if (!titles || !shorts || !keys || !colors || !facets) {
        c->vars.failed = 1;
    } else {
        find_facets(c, facets, facet_titles);
        for (int k = 0; k < n; k++) {
            const sp_plot_series *s = &c->in->items[c->runs[k]];
            titles[k] = s->title;
            shorts[k] = s->short_name;
            keys[k] = run_key(c, s);
            colors[k] = s->color;
        }
        sp_plot_var_strs(c, "run_title", n, titles);
        sp_plot_var_strs(c, "run_short", n, shorts);
        sp_plot_var_strs(c, "run_key", n, keys);
        sp_plot_var_nums(c, "run_color", n, colors);
        sp_plot_var_num(c, "n_facets", c->n_facets);
        sp_plot_var_strs(c, "facet_title", c->n_facets, facet_titles);
        sp_plot_var_nums(c, "run_facet", n, facets);
        lay_out_facets(c);
    }
    free(titles);
    free(shorts);
    free(keys);
    free(colors);
    free(facets);
}

/* ---- the data file ---- */

void sp_plot_block(sp_plot_ctx *c, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    sp_plot_end_data(c);
    /* two blank lines end a block for gnuplot's `index` */
    sp_text_printf(&c->data, "%s# block %d: %s\n", c->n_blocks ? "\n\n" : "", c->n_blocks, line);
    c->n_blocks++;
    c->block_rows = 0;
}

void sp_plot_end_data(sp_plot_ctx *c)
{
    if (c->n_blocks > 0 && c->block_rows == 0)
        sp_plot_row(c, 2, (const double[]){NAN, NAN});
}

void sp_plot_comment(sp_plot_ctx *c, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    sp_text_printf(&c->data, "# %s\n", line);
}

static void write_values(sp_plot_ctx *c, int n, const double *values)
{
    for (int i = 0; i < n; i++) {
        if (isfinite(values[i]))
            sp_text_printf(&c->data, "%s%.9g", i ? " " : "", values[i]);
        else
            sp_text_printf(&c->data, "%s?", i ? " " : "");
    }
}

void sp_plot_row(sp_plot_ctx *c, int n, const double *values)
{
    write_values(c, n, values);
    sp_text_printf(&c->data, "\n");
    c->block_rows++;
}

void sp_plot_row_labelled(sp_plot_ctx *c, int n, const double *values, const char *label)
{
    write_values(c, n, values);
    sp_text_printf(&c->data, " ");
    sp_text_quoted(&c->data, label);
    sp_text_printf(&c->data, "\n");
    c->block_rows++;
}

/* ---- variables ---- */

void sp_plot_var_num(sp_plot_ctx *c, const char *name, double value)
{
    sp_text_printf(&c->vars, "%s = %.9g\n", name, value);
}

void sp_plot_var_str(sp_plot_ctx *c, const char *name, const char *value)
{
    sp_text_printf(&c->vars, "%s = ", name);
    sp_text_quoted(&c->vars, value);
    sp_text_printf(&c->vars, "\n");
}

void sp_plot_var_nums(sp_plot_ctx *c, const char *name, int n, const double *values)
{
    sp_text_printf(&c->vars, "array %s[%d] = [", name, n);
    for (int i = 0; i < n; i++)
        sp_text_printf(&c->vars, "%s%.9g", i ? ", " : "", values[i]);
    sp_text_printf(&c->vars, "]\n");
}

void sp_plot_var_strs(sp_plot_ctx *c, const char *name, int n, const char *const *values)
{
    sp_text_printf(&c->vars, "array %s[%d] = [", name, n);
    for (int i = 0; i < n; i++) {
        sp_text_printf(&c->vars, "%s", i ? ", " : "");
        sp_text_quoted(&c->vars, values[i]);
    }
    sp_text_printf(&c->vars, "]\n");
}

void sp_plot_var_grid(sp_plot_ctx *c, int n)
{
    int cols = 1;
    while (cols * cols < n)
        cols++;
    /* a wide canvas: prefer one more column than rows (3 -> 1 x 3, 4 -> 2 x 2, 6 -> 2 x 3) */
    if (n <= 3)
        cols = n;
    const int rows = (n + cols - 1) / cols;
    sp_plot_var_num(c, "n_rows", rows);
    sp_plot_var_num(c, "n_cols", cols);
    c->min_width = cols * SP_PLOT_MIN_PANEL_WIDTH;
    c->min_height = rows * SP_PLOT_MIN_PANEL_HEIGHT + 40; /* and the figure's title */
}

void sp_plot_var_kind_grid(sp_plot_ctx *c, int n)
{
    c->kind_panels = n;
    sp_plot_var_grid(c, n);
}

double sp_plot_key_entry_px(size_t title_len) { return 6.5 * (double)title_len + 60; }

void sp_plot_var_panels(sp_plot_ctx *c, const char *title, int blocks_per_run, int has_bars, int n,
                        const sp_plot_panel *panels)
{
    c->n_panels = n;
    c->has_bars = has_bars;
    sp_plot_var_str(c, "figure_title", title);
    sp_plot_var_num(c, "blocks_per_run", blocks_per_run);
    sp_plot_var_num(c, "has_bars", has_bars);
    sp_plot_var_num(c, "n_panels", n);
    enum { MAX_PANELS = 8 };
    if (n < 1 || n > MAX_PANELS)
        abort(); /* a figure of plots/fig_*.c asks for an impossible layout: a bug */
    const char *strs[3][MAX_PANELS];
    double nums[6][MAX_PANELS];
    for (int p = 0; p < n; p++) {
        strs[0][p] = panels[p].title;
        strs[1][p] = panels[p].xlabel;
        strs[2][p] = panels[p].ylabel;
        nums[0][p] = panels[p].block;
        nums[1][p] = panels[p].col;
        nums[2][p] = panels[p].dash_block;
        nums[3][p] = panels[p].dash_col;
        nums[4][p] = panels[p].band_col;
        nums[5][p] = panels[p].log;
    }
    static const char *const str_names[3] = {"panel_title", "panel_xlabel", "panel_ylabel"};
    static const char *const num_names[6] = {"panel_block", "panel_col", "panel_dash_block", "panel_dash_col",
                                             "panel_band_col", "panel_log"};
    for (int k = 0; k < 3; k++)
        sp_plot_var_strs(c, str_names[k], n, strs[k]);
    for (int k = 0; k < 6; k++)
        sp_plot_var_nums(c, num_names[k], n, nums[k]);
}

/* ---- log axes ---- */

void sp_plot_span_init(sp_plot_span *s) { *s = (sp_plot_span){.min_pos = INFINITY, .max = -INFINITY}; }

void sp_plot_span_add(sp_plot_span *s, int n, const double *values)
{
    for (int i = 0; i < n; i++) {
        const double v = values[i];
        if (!isfinite(v))
            continue;
        if (v <= 0) {
            s->nonpositive = 1;
            continue;
        }
        s->min_pos = v < s->min_pos ? v : s->min_pos;
        s->max = v > s->max ? v : s->max;
    }
}

int sp_plot_span_decades(const sp_plot_span *s)
{
    return !s->nonpositive && isfinite(s->min_pos) && s->max >= 100 * s->min_pos;
}

/* ---- report series ---- */

/* Reads the k arrays into a; 1 when all exist with their ranks (else c notes why s is left out). */
static int read_metrics(sp_plot_ctx *c, const sp_plot_series *s, const char *analyzer, int k,
                        const sp_plot_metric *metrics, sp_report_array *a)
{
    char why[256];
    for (int j = 0; j < k; j++) {
        if (sp_report_read_array(s->report, analyzer, metrics[j].name, &a[j]) != SP_OK) {
            sp_error_clear();
            snprintf(why, sizeof why, "no %s/%s", analyzer, metrics[j].name);
        } else if (a[j].rank != metrics[j].rank || a[j].shape[0] < 1) {
            snprintf(why, sizeof why, "%s/%s has rank %d, expected %d", analyzer, metrics[j].name, a[j].rank,
                     metrics[j].rank);
            sp_report_array_free(&a[j]);
        } else {
            continue;
        }
        for (int i = 0; i < j; i++)
            sp_report_array_free(&a[i]);
        sp_plot_leave_out(c, s, why);
        return 0;
    }
    return 1;
}

sp_status sp_plot_each_report(sp_plot_ctx *c, const char *analyzer, int k, const sp_plot_metric *metrics,
                              sp_plot_report_fn fn, void *acc)
{
    int n_reports = 0;
    for (int i = 0; i < c->in->n; i++) {
        const sp_plot_series *s = &c->in->items[i];
        if (s->kind != SP_SERIES_REPORT)
            continue;
        n_reports++;
        sp_report_array a[4];
        if (k > 4)
            return sp_error(SP_ERR_INTERNAL, "plot %s: %d arrays asked, at most 4", c->id, k);
        if (!read_metrics(c, s, analyzer, k, metrics, a))
            continue;
        sp_status st = sp_plot_add_run(c, i);
        if (st == SP_OK)
            st = fn(c, s, a, acc);
        for (int j = 0; j < k; j++)
            sp_report_array_free(&a[j]);
        SP_TRY(st);
    }
    if (c->n_runs == 0) {
        char names[256] = "";
        for (int j = 0; j < k; j++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", j ? ", " : "", metrics[j].name);
        c->left_out[0] = '\0'; /* the skip line says it all */
        c->n_left_out = 0;
        return sp_plot_skip(c, "%s (it needs %s/{%s})", n_reports ? "no report among the inputs holds its data"
                                                                  : "no report among the inputs",
                            analyzer, names);
    }
    return SP_OK;
}

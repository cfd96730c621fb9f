/* plots/plot.c: `spanprobe plot`: inputs loaded once, then each selected figure prepared, written
 * (<id>.dat, <id>.gp) and drawn by gnuplot in every format asked for. */
#include "plots/plot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/dirs.h"
#include "io/staging_dir.h"
#include "plots/figure.h"
#include "plots/gnuplot.h"
#include "plots/templates.h"

static const char *const format_names[] = {"png", "pdf", "svg"};
#define N_FORMATS 3

void sp_plot_options_defaults(sp_plot_options *opt)
{
    *opt = (sp_plot_options){.formats = SP_PLOT_PNG, .width = SP_PLOT_DEFAULT_WIDTH, .height = SP_PLOT_DEFAULT_HEIGHT};
}

sp_status sp_plot_parse_formats(const char *list, unsigned *formats)
{
    *formats = 0;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        int found = -1;
        for (int f = 0; f < N_FORMATS; f++)
            if (strlen(format_names[f]) == n && strncmp(p, format_names[f], n) == 0)
                found = f;
        if (found < 0)
            return sp_error(SP_ERR_USAGE, "--format: unknown format '%.*s' (expected png, pdf or svg, comma-separated)",
                            (int)n, p);
        *formats |= 1u << found;
        p += n + (p[n] == ',');
    }
    if (!*formats)
        return sp_error(SP_ERR_USAGE, "--format: expected at least one of png, pdf, svg");
    return SP_OK;
}

int sp_plot_figure_count(void) { return sp_plot_n_figures; }
const char *sp_plot_figure_id(int i) { return sp_plot_figures[i].id; }
const char *sp_plot_figure_description(int i) { return sp_plot_figures[i].description; }

/* --only into selected[sp_plot_n_figures]. */
static sp_status select_figures(const char *only, unsigned char *selected)
{
    const int all = !only || !*only;
    for (int i = 0; i < sp_plot_n_figures; i++)
        selected[i] = (unsigned char)all;
    for (const char *p = all ? "" : only; *p;) {
        size_t n = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < sp_plot_n_figures; i++)
            if (strlen(sp_plot_figures[i].id) == n && strncmp(p, sp_plot_figures[i].id, n) == 0)
                found = i;
        if (found < 0) {
            char ids[512] = "";
            for (int i = 0; i < sp_plot_n_figures; i++)
                snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%s", i ? ", " : "", sp_plot_figures[i].id);
            return sp_error(SP_ERR_USAGE, "--only: unknown figure '%.*s' (expected some of: %s)", (int)n, p, ids);
        }
        selected[found] = 1;
        p += n + (p[n] == ',');
    }
    return SP_OK;
}

/* The key under a panels figure (plots/panels.gp): an entry per run, as wide as the longest title
 * and its sample, as many to a row as fit the width, each row KEY_ROW_PX high, below the title
 * strip KEY_TOP_PX. With facets, a column of entries under each facet. */
#define KEY_ROW_PX 15
#define KEY_TOP_PX 34
static void key_layout(const sp_plot_ctx *c, int width, int *cols, int *rows)
{
    if (c->n_facets > 1) {
        *cols = 1;
        *rows = c->facet_most_runs;
        return;
    }
    const int n = c->n_runs > 0 ? c->n_runs : 1;
    *cols = (int)(0.95 * width / sp_plot_key_entry_px(sp_plot_longest_key(c)));
    *cols = *cols < 1 ? 1 : *cols > n ? n : *cols;
    *rows = (n + *cols - 1) / *cols;
}

/* The figure's script: how to redraw it, its variables, the shared styles, its template. */
static sp_status compose_script(const sp_plot_figure *fig, const sp_plot_ctx *c, const sp_plot_options *opt,
                                sp_text *script)
{
    const char *common = sp_plot_template_text("common"), *body = sp_plot_template_text(fig->template_name);
    if (!common || !body)
        return sp_error(SP_ERR_INTERNAL, "plot %s: no compiled-in template '%s'", fig->id, body ? "common" : fig->template_name);
    sp_text_printf(script, "# %s: %s\n# drawn by spanprobe %s from %s.dat; redraw in this directory with\n"
                           "#   gnuplot %s.gp                    (PNG; or -e 'fmt=\"pdf\"', -e 'fmt=\"svg\"')\n",
                   fig->id, fig->description, SP_VERSION, fig->id, fig->id);
    sp_text_printf(script, "\n# ---- this figure's data and labels ----\n");
    const int grow = !opt->fixed_size;
    const int width = grow && c->min_width > opt->width ? c->min_width : opt->width;
    int height = grow && c->min_height > opt->height ? c->min_height : opt->height;
    const int panel_rows = sp_plot_key_panel_rows(c);
    if (panel_rows > 0) {
        int key_cols, key_rows;
        key_layout(c, width, &key_cols, &key_rows);
        sp_text_printf(script, "key_cols = %d\nkey_rows = %d\n", key_cols, key_rows);
        /* the panels keep their least height above the key, however many runs it names */
        const int need = panel_rows * SP_PLOT_MIN_PANEL_HEIGHT + KEY_TOP_PX + KEY_ROW_PX * key_rows + 8;
        height = grow && need > height ? need : height;
    }
    sp_text_printf(script, "width = %d\nheight = %d\nout_base = \"%s\"\ndatafile = \"%s.dat\"\n", width, height,
                   fig->id, fig->id);
    sp_text_printf(script, "%s\n%s\n%s", sp_text_str(&c->vars), common, body);
    return sp_text_status(script, fig->id);
}

/* Writes the figure's data and script into dir and draws it there. */
static sp_status write_and_draw(const sp_plot_figure *fig, const sp_plot_ctx *c, const sp_plot_options *opt,
                                const char *dir)
{
    char path[4200], script_name[256];
    sp_text script = {0};
    sp_status st = compose_script(fig, c, opt, &script);
    snprintf(path, sizeof path, "%s/%s.dat", dir, fig->id);
    if (st == SP_OK)
        st = sp_text_write_file(&c->data, path);
    snprintf(path, sizeof path, "%s/%s.gp", dir, fig->id);
    if (st == SP_OK)
        st = sp_text_write_file(&script, path);
    sp_text_free(&script);
    snprintf(script_name, sizeof script_name, "%s.gp", fig->id);
    for (int f = 0; f < N_FORMATS && st == SP_OK; f++)
        if (opt->formats & (1u << f))
            st = sp_gnuplot_render(dir, script_name, fig->id, format_names[f]);
    return st;
}

static void ctx_free(sp_plot_ctx *c)
{
    sp_text_free(&c->vars);
    sp_text_free(&c->data);
    free(c->runs);
}

/* Draws the figure into stage, the staging directory of opt->out_dir. */
static sp_status draw_figure(const sp_plot_figure *fig, const sp_plot_inputs *in, const sp_plot_options *opt,
                             const char *stage, sp_plot_result *res)
{
    sp_plot_ctx c = {.in = in, .id = fig->id};
    sp_plot_comment(&c, "%s: %s (spanprobe %s; drawn by %s.gp)", fig->id, fig->description, SP_VERSION, fig->id);
    sp_status st = fig->prepare(&c);
    if (st == SP_OK && c.skip[0]) {
        fprintf(stderr, "plot: %s: skipped: %s\n", fig->id, c.skip);
        res->skipped++;
    } else if (st == SP_OK) {
        char note[1200];
        if (c.left_out[0])
            fprintf(stderr, "plot: %s: left out %s\n", fig->id, sp_plot_left_out_note(&c, note, sizeof note));
        sp_plot_write_runs(&c);
        sp_plot_end_data(&c);
        st = sp_text_status(&c.data, fig->id);
        if (st == SP_OK)
            st = sp_text_status(&c.vars, fig->id);
        if (st == SP_OK)
            st = write_and_draw(fig, &c, opt, stage);
        if (st == SP_OK) {
            res->drawn++;
            if (!opt->quiet) {
                printf("plot: %s/%s.{", opt->out_dir, fig->id);
                for (int f = 0, k = 0; f < N_FORMATS; f++)
                    if (opt->formats & (1u << f))
                        printf("%s%s", k++ ? "," : "", format_names[f]);
                printf(",gp,dat}\n");
            }
        }
    }
    ctx_free(&c);
    return st;
}

sp_status sp_plot_run(int n_inputs, const char *const *inputs, const sp_plot_options *opt, sp_plot_result *result)
{
    sp_plot_result res = {0};
    if (result)
        *result = res;
    if (!opt->out_dir || !*opt->out_dir)
        return sp_error(SP_ERR_USAGE, "expected --out DIR");
    if (n_inputs < 1)
        return sp_error(SP_ERR_USAGE, "expected at least one input: a report, a training log or a run directory");
    if (opt->width < 64 || opt->width > 8192 || opt->height < 64 || opt->height > 8192)
        return sp_error(SP_ERR_USAGE, "--size: %dx%d is outside 64x64 .. 8192x8192", opt->width, opt->height);
    if (!opt->formats || opt->formats >= 1u << N_FORMATS)
        return sp_error(SP_ERR_USAGE, "--format: expected png, pdf or svg");
    unsigned char selected[64];
    if (sp_plot_n_figures > (int)sizeof selected)
        return sp_error(SP_ERR_INTERNAL, "plot: %d figures exceed the selection table", sp_plot_n_figures);
    SP_TRY(select_figures(opt->only, selected));
    sp_plot_inputs in;
    SP_TRY(sp_plot_inputs_load(n_inputs, inputs, &in));
    /* every figure is drawn into a staging directory and the files move into place together once all
     * are drawn: a failure (a full disk) leaves the directory as it was */
    char stage[4200] = "";
    int made;
    sp_status st = sp_make_output_dir(opt->out_dir, &made);
    if (st == SP_OK)
        st = sp_staging_dir_begin(opt->out_dir, stage, sizeof stage);
    for (int i = 0; i < sp_plot_n_figures && st == SP_OK; i++)
        if (selected[i])
            st = draw_figure(&sp_plot_figures[i], &in, opt, stage, &res);
    if (st == SP_OK)
        st = sp_staging_dir_commit(stage, opt->out_dir);
    else if (stage[0])
        sp_staging_dir_remove(stage);
    if (st != SP_OK && made)
        rmdir(opt->out_dir);
    sp_plot_inputs_free(&in);
    if (st == SP_OK && !opt->quiet)
        printf("plot: %d figure%s drawn in %s, %d skipped\n", res.drawn, res.drawn == 1 ? "" : "s", opt->out_dir,
               res.skipped);
    if (result)
        *result = res;
    return st;
}

/* cli/cmd_plot.c: `spanprobe plot INPUT... --out DIR [--format png,pdf,svg] [--only IDS] [--size WxH]`
 * (plots/plot.h; docs/figures/README.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "plots/plot.h"

static void print_help(void)
{
    sp_plot_options def;
    sp_plot_options_defaults(&def);
    printf("usage: spanprobe plot INPUT... --out DIR [--format png,pdf,svg] [--only ID,...] [--size WxH] [--quiet]\n\n"
           "Draws the paper-style figures of docs/figures/README.md with gnuplot from reports (spanprobe analyze)\n"
           "and training logs (trainlog.h5 of spanprobe train) of one or several runs; runs given together are\n"
           "overlaid or set side by side. INPUT is a report, a training log, or a run directory (its trainlog.h5\n"
           "and every report in it). For each figure DIR gets <id>.dat (the data), <id>.gp (the gnuplot script\n"
           "that draws it: redraw with `gnuplot <id>.gp` in DIR) and the images. A figure whose data no input\n"
           "holds is skipped with a one-line note on stderr.\n\n"
           "options:\n"
           "  --out DIR        output directory (created when missing)\n"
           "  --format LIST    image formats, comma-separated: png, pdf, svg [png]\n"
           "  --only IDS       comma-separated figure ids [all]\n"
           "  --size WxH       image size in pixels (PDF: the same proportions at 72 dpi); without it a\n"
           "                   figure of many panels grows so that each keeps 300x250 [%dx%d]\n"
           "  --quiet          no line per figure on stdout\n\nfigures:\n",
           def.width, def.height);
    for (int i = 0; i < sp_plot_figure_count(); i++)
        printf("  %-14s %s\n", sp_plot_figure_id(i), sp_plot_figure_description(i));
    printf("\nneeds gnuplot (Debian: gnuplot-nox). exit codes: 0 ok (figures may be skipped), 2 usage, 3 bad input,\n"
           "5 I/O (gnuplot missing, unwritable DIR), 1 gnuplot failed on a script (a bug) (docs/cli.md)\n");
}

static sp_status parse_size(const char *value, int *width, int *height)
{
    char *end = NULL;
    long w = strtol(value, &end, 10);
    long h = end && (*end == 'x' || *end == 'X') ? strtol(end + 1, &end, 10) : -1;
    if (!end || *end || w < 64 || w > 8192 || h < 64 || h > 8192)
        return sp_error(SP_ERR_USAGE, "--size: expected WIDTHxHEIGHT in pixels, each 64..8192, found '%s'", value);
    *width = (int)w;
    *height = (int)h;
    return SP_OK;
}

static sp_status parse_args(int argc, char **argv, sp_plot_options *opt, const char **inputs, int *n_inputs)
{
    sp_plot_options_defaults(opt);
    *n_inputs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *value = NULL;
        if (strcmp(a, "--quiet") == 0) {
            opt->quiet = 1;
        } else if (strcmp(a, "--out") == 0 || strcmp(a, "--format") == 0 || strcmp(a, "--only") == 0 ||
                   strcmp(a, "--size") == 0) {
            SP_TRY(sp_cli_option_value(argc, argv, &i, &value));
            if (strcmp(a, "--out") == 0)
                opt->out_dir = value;
            else if (strcmp(a, "--format") == 0)
                SP_TRY(sp_plot_parse_formats(value, &opt->formats));
            else if (strcmp(a, "--only") == 0)
                opt->only = value;
            else {
                SP_TRY(parse_size(value, &opt->width, &opt->height));
                opt->fixed_size = 1;
            }
        } else if (strncmp(a, "--", 2) == 0) {
            return sp_error(SP_ERR_USAGE, "unknown option '%s'", a);
        } else {
            inputs[(*n_inputs)++] = a;
        }
    }
    if (!opt->out_dir)
        return sp_error(SP_ERR_USAGE, "expected --out DIR");
    if (*n_inputs == 0)
        return sp_error(SP_ERR_USAGE, "expected at least one input: a report, a training log or a run directory");
    return SP_OK;
}

int sp_cmd_plot(int argc, char **argv)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    sp_error_clear();
    const char **inputs = calloc((size_t)argc, sizeof *inputs);
    if (!inputs)
        return sp_cli_report("plot", sp_error(SP_ERR_NOMEM, "out of memory parsing options"));
    sp_plot_options opt;
    int n_inputs;
    sp_status st = parse_args(argc, argv, &opt, inputs, &n_inputs);
    if (st == SP_ERR_USAGE) {
        free(inputs);
        return sp_cli_usage_error("plot", "%s", sp_error_message());
    }
    if (st == SP_OK)
        st = sp_plot_run(n_inputs, inputs, &opt, NULL);
    free(inputs);
    if (st == SP_ERR_USAGE)
        return sp_cli_usage_error("plot", "%s", sp_error_message());
    return sp_cli_report("plot", st);
}

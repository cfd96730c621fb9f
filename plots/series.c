#include "plots/series.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/checkpoint.h"
#include "io/h5.h"
#include "train/options.h"
#include "train/train.h"

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The directory part of path into buf ("." when none). */
static void dir_part(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, len, ".");
    else
        snprintf(buf, len, "%.*s", (int)(slash == path ? 1 : slash - path), path);
}

/* Copies src into dst[len], cut to fit. */
static void copy_text(char *dst, size_t len, const char *src)
{
    size_t n = strnlen(src, len - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static const char *base_part(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The format attribute of an HDF5 file. */
static sp_status file_format(const char *path, char *format, size_t len)
{
    hid_t file;
    SP_TRY(sp_h5_open(path, &file));
    int major, minor;
    sp_status st = sp_h5_read_format(file, format, len, &major, &minor);
    H5Fclose(file);
    return st;
}

/* Model and lr from a training options JSON (the trainlog's and the checkpoint's options_json). */
static int run_from_options(const char *json, const char *where, sp_plot_series *s)
{
    sp_config cfg;
    sp_train_options opt;
    sp_config_defaults(&cfg);
    sp_train_options_defaults(&opt);
    if (!json || sp_train_options_from_json(json, where, &cfg, &opt) != SP_OK) {
        sp_error_clear();
        return 0;
    }
    s->cfg = cfg;
    s->lr = opt.lr;
    s->seed = opt.seed;
    s->run_known = 1;
    return 1;
}

/* The checkpoint a report analyzed: its provenance path as recorded, else that file name beside
 * the report. The model comes from its config, the lr and step from its training state. */
static int run_from_checkpoint(sp_plot_series *s)
{
    char input[4096], dir[4096], path[8200];
    if (sp_report_get_provenance(s->report, "input_file", input, sizeof input) != SP_OK || !*input) {
        sp_error_clear();
        return 0;
    }
    dir_part(s->path, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s", dir, base_part(input));
    const char *candidates[2] = {input, path};
    for (int i = 0; i < 2; i++) {
        if (!is_file(candidates[i]))
            continue;
        sp_ckpt_meta meta;
        sp_ckpt_meta_init(&meta);
        if (sp_ckpt_read_meta(candidates[i], &meta) == SP_OK) {
            s->cfg = meta.cfg;
            s->run_known = 1;
            if (meta.train.present) {
                s->step = meta.train.step;
                run_from_options(meta.train.options_json, candidates[i], s);
            }
            sp_ckpt_meta_free(&meta);
            return 1;
        }
        sp_ckpt_meta_free(&meta);
        sp_error_clear();
    }
    return 0;
}

static void run_from_sibling_log(sp_plot_series *s)
{
    char dir[4096], path[8200];
    dir_part(s->path, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s", dir, SP_TRAIN_LOG_NAME);
    if (!is_file(path))
        return;
    sp_trainlog log;
    if (sp_trainlog_read(path, &log) == SP_OK) {
        run_from_options(log.options_json, path, s);
        sp_trainlog_free(&log);
    }
    sp_error_clear();
}

static sp_status add_series(sp_plot_inputs *in, const char *path, const char *format)
{
    sp_plot_series *grown = realloc(in->items, (size_t)(in->n + 1) * sizeof *grown);
    if (!grown)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory", path);
    in->items = grown;
    sp_plot_series *s = &in->items[in->n];
    *s = (sp_plot_series){.lr = NAN, .step = -1};
    copy_text(s->path, sizeof s->path, path);
    if (strcmp(format, SP_REPORT_FORMAT) == 0) {
        s->kind = SP_SERIES_REPORT;
        SP_TRY(sp_report_open(path, &s->report));
        in->n++;
        if (!run_from_checkpoint(s))
            run_from_sibling_log(s);
        return SP_OK;
    }
    s->kind = SP_SERIES_TRAINLOG;
    SP_TRY(sp_trainlog_read(path, &s->log));
    in->n++;
    run_from_options(s->log.options_json, path, s);
    return SP_OK;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A run directory: its training log, then its reports in name order (other files are ignored). */
static sp_status add_directory(sp_plot_inputs *in, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return sp_error(SP_ERR_IO, "%s: cannot list the directory: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0;
    sp_status st = SP_OK;
    for (struct dirent *e; st == SP_OK && (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".h5") != 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(names, (size_t)cap * sizeof *grown);
            if (!grown) {
                st = sp_error(SP_ERR_NOMEM, "%s: out of memory listing files", dir);
                break;
            }
            names = grown;
        }
        if (!(names[n] = strdup(e->d_name)))
            st = sp_error(SP_ERR_NOMEM, "%s: out of memory listing files", dir);
        else
            n++;
    }
    closedir(d);
    if (n > 1)
        qsort(names, (size_t)n, sizeof *names, cmp_names);
    int before = in->n;
    char path[8200], format[64];
    /* the training log first, so a run's series come in a stable order */
    for (int pass = 0; pass < 2 && st == SP_OK; pass++)
        for (int i = 0; i < n && st == SP_OK; i++) {
            if ((strcmp(names[i], SP_TRAIN_LOG_NAME) == 0) != (pass == 0))
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            if (file_format(path, format, sizeof format) != SP_OK) {
                sp_error_clear(); /* a temporary or foreign file */
                continue;
            }
            if (strcmp(format, SP_REPORT_FORMAT) == 0 || strcmp(format, SP_TRAINLOG_FORMAT) == 0)
                st = add_series(in, path, format);
        }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (st == SP_OK && in->n == before)
        st = sp_error(SP_ERR_INPUT, "%s: holds no training log (%s) and no report (expected a run directory)", dir,
                      SP_TRAIN_LOG_NAME);
    return st;
}

static sp_status add_input(sp_plot_inputs *in, const char *path)
{
    if (is_dir(path))
        return add_directory(in, path);
    char format[64];
    SP_TRY(file_format(path, format, sizeof format));
    if (strcmp(format, SP_REPORT_FORMAT) != 0 && strcmp(format, SP_TRAINLOG_FORMAT) != 0)
        return sp_error(SP_ERR_INPUT, "%s: format '%s' (expected a report, %s, or a training log, %s)", path, format,
                        SP_REPORT_FORMAT, SP_TRAINLOG_FORMAT);
    return add_series(in, path, format);
}

/* ---- names ---- */

static void format_lr(double lr, char *buf, size_t len) { snprintf(buf, len, "%g", lr); }

/* Which run fields differ among the named series: bit 0 variant, 1 depth, 2 init, 3 lr, 4 seed. */
static unsigned differing_fields(const sp_plot_inputs *in)
{
    unsigned diff = 0;
    const sp_plot_series *first = NULL;
    for (int i = 0; i < in->n; i++) {
        const sp_plot_series *s = &in->items[i];
        if (!s->run_known)
            continue;
        if (!first) {
            first = s;
            continue;
        }
        diff |= (s->cfg.variant != first->cfg.variant) << 0 | (s->cfg.n_layers != first->cfg.n_layers) << 1 |
                (s->cfg.init != first->cfg.init) << 2 | (s->lr != first->lr && !(isnan(s->lr) && isnan(first->lr))) << 3 |
                (s->seed != first->seed) << 4;
    }
    return diff;
}

static void name_series(sp_plot_series *s, unsigned diff)
{
    if (!s->run_known) { /* the model (or the dump's source) the report names, else the report's file */
        char model[512] = "";
        if (sp_report_get_provenance(s->report, "model", model, sizeof model) != SP_OK)
            sp_error_clear(); /* a report of format 1.0 */
        const char *name = *model ? model : base_part(s->path);
        copy_text(s->title, sizeof s->title, name);
        copy_text(s->short_name, sizeof s->short_name, name);
        return;
    }
    char lr[32] = "?";
    if (isfinite(s->lr))
        format_lr(s->lr, lr, sizeof lr);
    const char *variant = sp_variant_names[s->cfg.variant], *init = sp_init_names[s->cfg.init];
    char seed[40] = "";
    if (diff & 16u)
        snprintf(seed, sizeof seed, ", seed %lld", (long long)s->seed);
    snprintf(s->title, sizeof s->title, "%s, L=%d, %s init, lr %s%s", variant, s->cfg.n_layers, init, lr, seed);
    size_t used = (size_t)snprintf(s->short_name, sizeof s->short_name, "%s", variant);
    if (diff & 2u && used < sizeof s->short_name)
        used += (size_t)snprintf(s->short_name + used, sizeof s->short_name - used, " L=%d", s->cfg.n_layers);
    if (diff & 4u && used < sizeof s->short_name)
        used += (size_t)snprintf(s->short_name + used, sizeof s->short_name - used, " %s", init);
    if (diff & 8u && used < sizeof s->short_name)
        used += (size_t)snprintf(s->short_name + used, sizeof s->short_name - used, " lr %s", lr);
    if (diff & 16u && used < sizeof s->short_name)
        snprintf(s->short_name + used, sizeof s->short_name - used, " s%lld", (long long)s->seed);
}

/* Series of one run (same title before disambiguation) share a colour, numbered in input order
 * among the series of their facet; returns the colours used. */
static int assign_colors(sp_plot_inputs *in)
{
    int n_colors[SP_N_VARIANTS + 1] = {0}, used = 0;
    for (int i = 0; i < in->n; i++) {
        sp_plot_series *s = &in->items[i];
        s->color = 0;
        for (int j = 0; j < i && !s->color; j++)
            if (strcmp(in->items[j].title, s->title) == 0)
                s->color = in->items[j].color;
        if (!s->color)
            s->color = ++n_colors[s->facet - 1];
        used = s->color > used ? s->color : used;
    }
    return used;
}

/* A facet per variant (and one for runs whose variant is unknown) where the runs would repeat the
 * palette's colours in one panel and span more than one variant (plots/series.h). */
static void assign_facets(sp_plot_inputs *in)
{
    for (int i = 0; i < in->n; i++)
        in->items[i].facet = 1;
    in->n_facets = 1;
    in->facet_titles[0] = "";
    if (assign_colors(in) <= SP_PLOT_PALETTE)
        return;
    int facet_of[SP_N_VARIANTS + 1] = {0}, n = 0;
    for (int i = 0; i < in->n; i++) {
        sp_plot_series *s = &in->items[i];
        const int key = s->run_known ? (int)s->cfg.variant : SP_N_VARIANTS;
        if (!facet_of[key]) {
            facet_of[key] = ++n;
            in->facet_titles[n - 1] = key < SP_N_VARIANTS ? sp_variant_names[key] : "other runs";
        }
        s->facet = facet_of[key];
    }
    if (n < 2) { /* one variant: one panel, colours as they were */
        for (int i = 0; i < in->n; i++)
            in->items[i].facet = 1;
        in->facet_titles[0] = "";
        return;
    }
    in->n_facets = n;
    assign_colors(in);
}

/* Two series of one kind with the same title (reports of one run at several steps, or runs alike
 * in every named field) get the step, else their directory, appended. */
static void disambiguate(sp_plot_inputs *in)
{
    for (int i = 0; i < in->n; i++) {
        sp_plot_series *s = &in->items[i];
        int clash = 0;
        for (int j = 0; j < in->n && !clash; j++)
            clash = j != i && in->items[j].kind == s->kind && strcmp(in->items[j].title, s->title) == 0;
        if (!clash)
            continue;
        char dir[4096], extra[64];
        dir_part(s->path, dir, sizeof dir);
        if (s->step >= 0)
            snprintf(extra, sizeof extra, "step %lld", (long long)s->step);
        else
            copy_text(extra, sizeof extra, base_part(dir));
        size_t t = strlen(s->title), n = strlen(s->short_name);
        snprintf(s->title + t, sizeof s->title - t, " (%s)", extra);
        snprintf(s->short_name + n, sizeof s->short_name - n, " (%s)", extra);
    }
}

sp_status sp_plot_inputs_load(int n_paths, const char *const *paths, sp_plot_inputs *in)
{
    *in = (sp_plot_inputs){0};
    sp_status st = SP_OK;
    for (int i = 0; i < n_paths && st == SP_OK; i++)
        st = add_input(in, paths[i]);
    if (st != SP_OK) {
        sp_plot_inputs_free(in);
        return st;
    }
    const unsigned diff = differing_fields(in);
    for (int i = 0; i < in->n; i++)
        name_series(&in->items[i], diff);
    assign_facets(in);
    disambiguate(in);
    return SP_OK;
}

void sp_plot_inputs_free(sp_plot_inputs *in)
{
    for (int i = 0; i < in->n; i++) {
        if (in->items[i].kind == SP_SERIES_TRAINLOG)
            sp_trainlog_free(&in->items[i].log);
        else
            sp_report_close(in->items[i].report);
    }
    free(in->items);
    *in = (sp_plot_inputs){0};
}

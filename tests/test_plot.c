/* `spanprobe plot`: every figure id drawn from small synthetic reports and training logs written
 * through the writer APIs, each a valid PNG of the asked size beside its data and script; PDF and
 * SVG; drawing from another working directory; figures without data skipped with one line each;
 * runs lacking an array left out with a note; bad inputs and options as one-line errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/report.h"
#include "plots/figure.h"
#include "plots/plot.h"
#include "support/png_info.h"
#include "support/scratch.h"
#include "support/tree.h"
#include "train/options.h"
#include "train/trainlog.h"

#define N_ROWS 24
#define D_EMBED 16

/* "drift" draws reports of `spanprobe drift` (tests/test_drift_cli.c draws it), none of the runs here */
static const char *const report_figures[] = {"cos-heatmap", "cos-distance", "cka", "spectral-util", "embed-eigs",
                                             "cond", "alpha", "jac", "grad-blocks", "growth", "hidden-spectra",
                                             "presums", "block-influence", "token-uniformity",
                                             "logit-lens", "attention", "prune", "curvature", "drift"};
static const char *const log_figures[] = {"loss", "grad-steps", "grad-layers", "attn-steps", "depth"};
#define N_REPORT_FIGURES ((int)(sizeof report_figures / sizeof report_figures[0]))
#define N_LOG_FIGURES ((int)(sizeof log_figures / sizeof log_figures[0]))

/* A training log of a `variant` model with n_layers blocks: losses falling from 5 nats, FFN
 * gradient norms that shrink toward the input by `decay` per block. */
static void write_log(const char *dir, const char *variant, int n_layers, double decay, const char *status)
{
    sp_config cfg;
    sp_train_options opt;
    sp_config_defaults(&cfg);
    sp_train_options_defaults(&opt);
    assert_int_equal(sp_config_set(&cfg, "variant", variant, "test"), SP_OK);
    cfg.n_layers = n_layers;
    assert_int_equal(sp_config_resolve(&cfg), SP_OK);
    opt.lr = 0.003;
    const int n_tensors = 1 + 3 * n_layers;
    char names[64][SP_PARAM_NAME_MAX];
    const char *ptrs[64];
    assert_true(n_tensors <= 64);
    snprintf(names[0], sizeof names[0], "embed/tok");
    for (int l = 0; l < n_layers; l++) {
        snprintf(names[1 + 3 * l], sizeof names[0], "blocks/%d/attn/wq", l);
        snprintf(names[2 + 3 * l], sizeof names[0], "blocks/%d/ffn/w1", l);
        snprintf(names[3 + 3 * l], sizeof names[0], "blocks/%d/ffn/w2", l);
    }
    for (int t = 0; t < n_tensors; t++)
        ptrs[t] = names[t];
    sp_trainlog log;
    assert_int_equal(sp_trainlog_init(&log, n_tensors, ptrs, n_layers + 1), SP_OK);
    const int rows = strcmp(status, "diverged") == 0 ? N_ROWS / 2 : N_ROWS;
    for (int r = 0; r < rows; r++) {
        double step = 10.0 * (r + 1);
        double scalars[SP_LOG_N_SCALARS] = {step, step * 2048, 1.5 + 3.5 * exp(-r / 6.0),
                                            r % 6 == 5 ? 1.6 + 3.5 * exp(-r / 6.0) : NAN, 0.003, 1.0, 1e4,
                                            2.0 * exp(-r / 30.0), 1.0 + 0.2 * r};
        double norms[64], ratio[64], rms[65];
        for (int t = 0; t < n_tensors; t++) {
            const int l = t == 0 ? 0 : (t - 1) / 3;
            norms[t] = 0.1 * pow(decay, n_layers - 1 - l) * exp(-r / 20.0);
            ratio[t] = 1e-3;
        }
        for (int l = 0; l <= n_layers; l++)
            rms[l] = 1.0 + l;
        assert_int_equal(sp_trainlog_append(&log, scalars, norms, ratio, rms), SP_OK);
    }
    snprintf(log.status, sizeof log.status, "%s", status);
    log.diverged_step = strcmp(status, "diverged") == 0 ? rows * 10 + 1 : -1;
    log.final_val_loss = strcmp(status, "done") == 0 ? 1.7 + 0.05 * n_layers : NAN;
    log.unigram_entropy = 3.3;
    log.options_json = sp_train_options_to_json(&cfg, &opt);
    assert_non_null(log.options_json);
    char path[4200];
    snprintf(path, sizeof path, "%s/trainlog.h5", dir);
    assert_int_equal(sp_trainlog_write(&log, path), SP_OK);
    sp_trainlog_free(&log);
}

static void put(sp_report *r, const char *analyzer, const char *name, int rank, int64_t d0, int64_t d1,
                const double *data)
{
    const int64_t shape[2] = {d0, d1};
    const sp_report_array_attrs attrs = {"1", rank == 1 ? "[layer]" : "[layer, layer]", "synthetic"};
    assert_int_equal(sp_report_write_array(r, analyzer, name, rank, shape, data, &attrs), SP_OK);
}

/* A report holding every array the figures read, for n_layers blocks; `shift` varies the values
 * between runs; with_pruning 0 leaves the pruning analyzer out. */
static void write_report(const char *dir, int n_layers, double shift, int with_pruning)
{
    const int L = n_layers, H = L + 1;
    double m[32 * 32], v[64], w[64], k[32 * 7];
    char path[4200];
    snprintf(path, sizeof path, "%s/report.h5", dir);
    sp_report *r = NULL;
    sp_report_provenance prov = {NULL, "{}", "synthetic", "synthetic model"};
    assert_int_equal(sp_report_create(path, &prov, &r), SP_OK);
    for (int i = 0; i < H; i++)
        for (int j = 0; j < H; j++)
            m[i * H + j] = exp(-shift * fabs((double)(i - j)));
    put(r, "similarity", "cosine", 2, H, H, m);
    put(r, "cka", "cka", 2, H, H, m);
    for (int i = 0; i < L; i++) {
        v[i] = exp(-shift * (i + 1));
        w[i] = 0.05 * (i + 1);
    }
    put(r, "similarity", "cosine_by_distance", 1, L, 0, v);
    put(r, "similarity", "cosine_by_distance_std", 1, L, 0, w);
    for (int i = 0; i < H; i++) {
        v[i] = 1 + shift * i;
        w[i] = 8 - i;
    }
    put(r, "growth", "rms", 1, H, 0, v);
    put(r, "hidden_spectra", "soft_rank", 1, H, 0, v);
    put(r, "hidden_spectra", "hard_rank", 1, H, 0, w);
    put(r, "growth", "top1_over_median", 1, H, 0, w);
    put(r, "token_uniformity", "relative_residual", 1, H, 0, w);
    put(r, "logit_lens", "loss", 1, H, 0, w);
    for (int i = 0; i < H; i++) {
        v[i] = 0.1 * i * shift;
        w[i] = (double)i / L;
    }
    put(r, "token_uniformity", "mean_pairwise_cosine", 1, H, 0, v);
    put(r, "logit_lens", "kl", 1, H, 0, v);
    put(r, "logit_lens", "accuracy", 1, H, 0, w);
    put(r, "logit_lens", "agreement", 1, H, 0, w);
    for (int i = 0; i < L; i++) {
        v[i] = 0.1 + 0.02 * i * shift;
        w[i] = 0.4 + 0.01 * i;
    }
    put(r, "ffn_spectra", "hard_rank", 1, L, 0, v);
    put(r, "ffn_spectra", "soft_rank", 1, L, 0, w);
    put(r, "presums", "sigma_a", 1, L, 0, v);
    put(r, "presums", "sigma_z", 1, L, 0, w);
    put(r, "similarity", "block_influence", 1, L, 0, v);
    for (int i = 0; i < D_EMBED; i++) {
        v[i] = (i + 1.0) / D_EMBED;
        w[i] = 20 * exp(-shift * i);
    }
    put(r, "embed_spectrum", "normalized_rank", 1, D_EMBED, 0, v);
    put(r, "embed_spectrum", "tok_eigvals_over_median", 1, D_EMBED, 0, w);
    for (int i = 0; i < L * 7; i++)
        k[i] = 2 + shift * i;
    k[4] = INFINITY; /* W_1 of block 0: sigma_min ~ 0 */
    put(r, "weights", "kappa", 2, L, 7, k);
    for (int i = 0; i < L * 7; i++)
        k[i] = i % 7 == 6 ? NAN : 1.5 + 0.3 * i * shift; /* W_3 absent (GELU): no panel */
    put(r, "weights", "alpha", 2, L, 7, k);
    for (int i = 0; i < L; i++) {
        v[i] = 1 + 0.1 * i * shift;
        w[i] = i == 0 ? NAN : 2 + 0.1 * i;
    }
    put(r, "jacobian", "sigma_max", 1, L, 0, v);
    put(r, "jacobian", "bound", 1, L, 0, w);
    put(r, "grad_norms", "ffn", 1, L, 0, v);
    put(r, "attention", "redundancy", 1, L, 0, v);
    for (int i = 0; i < L * 2; i++) { /* [block, head], two heads */
        k[i] = 0.9 - 0.1 * i * shift;
        k[L * 2 + i] = 0.05 * i;
        k[L * 4 + i] = 3 + i * shift;
    }
    put(r, "attention", "entropy_normalized", 2, L, 2, k);
    put(r, "attention", "sink_mass", 2, L, 2, k + L * 2);
    put(r, "attention", "max_logit", 2, L, 2, k + L * 4);
    put(r, "curvature", "lambda_max", 1, L, 0, v);
    put(r, "curvature", "trace_per_param", 1, L, 0, w);
    if (with_pruning) {
        put(r, "pruning", "delta_skip_block", 1, L, 0, v);
        put(r, "pruning", "delta_drop_last", 1, L - 1, 0, w + 1);
    }
    assert_int_equal(sp_report_commit(r), SP_OK);
}

static void make_dir(char *buf, size_t len, const char *name)
{
    scratch_path(buf, len, name);
    tree_remove(buf);
    assert_int_equal(mkdir(buf, 0777), 0);
}

/* Three runs: pre (log + report), span (log + report without pruning), post at 6 layers (a
 * diverged log only). */
typedef struct {
    char pre[4200], span[4200], post[4200];
} runs;

static void make_runs(runs *r)
{
    make_dir(r->pre, sizeof r->pre, "run-pre");
    make_dir(r->span, sizeof r->span, "run-span");
    make_dir(r->post, sizeof r->post, "run-post");
    write_log(r->pre, "pre", 3, 1.0, "done");
    write_report(r->pre, 3, 0.2, 1);
    write_log(r->span, "span", 3, 0.01, "done");
    write_report(r->span, 3, 0.6, 0);
    write_log(r->post, "post", 6, 0.1, "diverged");
}

static void remove_runs(const runs *r)
{
    tree_remove(r->pre);
    tree_remove(r->span);
    tree_remove(r->post);
}

static void assert_figure(const char *dir, const char *id, int width, int height)
{
    char path[4300];
    int w = 0, h = 0;
    snprintf(path, sizeof path, "%s/%s.png", dir, id);
    assert_int_equal(png_size(path, &w, &h), 0);
    assert_int_equal(w, width);
    assert_int_equal(h, height);
    snprintf(path, sizeof path, "%s/%s.gp", dir, id);
    assert_true(scratch_file_exists(path));
    snprintf(path, sizeof path, "%s/%s.dat", dir, id);
    assert_true(scratch_file_exists(path));
}

static void assert_no_figure(const char *dir, const char *id)
{
    const char *ext[] = {"png", "gp", "dat"};
    char path[4300];
    for (int e = 0; e < 3; e++) {
        snprintf(path, sizeof path, "%s/%s.%s", dir, id, ext[e]);
        assert_false(scratch_file_exists(path));
    }
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static char *read_text(const char *dir, const char *name)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = scratch_read_file(path, NULL);
    assert_non_null(text);
    return text;
}

static void test_every_figure(void **state)
{
    (void)state;
    runs r;
    make_runs(&r);
    char out[4200];
    scratch_path(out, sizeof out, "figures-all");
    tree_remove(out);
    const char *args[] = {"plot", r.pre, r.span, r.post, "--out", out, "--size", "640x400", NULL};
    char *o = NULL, *e = NULL;
    int rc = scratch_run_cli(args, &o, &e);
    if (rc == -1)
        skip();
    assert_int_equal(rc, 0);
    for (int i = 0; i < sp_plot_figure_count(); i++)
        if (strcmp(sp_plot_figure_id(i), "drift") == 0)
            assert_no_figure(out, "drift");
        else
            assert_figure(out, sp_plot_figure_id(i), 640, 400);
    assert_int_equal(sp_plot_figure_count(), N_REPORT_FIGURES + N_LOG_FIGURES);
    /* the span report has no pruning arrays: one note, the figure drawn from pre alone; no drift report */
    assert_int_equal(scratch_count_lines(e), 2);
    assert_non_null(strstr(e, "plot: drift: skipped: no report among the inputs holds its data"));
    assert_non_null(strstr(e, "plot: prune: left out span, L=3, scaled init, lr 0.003 (no pruning/delta_skip_block)"));
    assert_non_null(strstr(o, "23 figures drawn"));
    /* the legend names each run; the data keep one block per run (two for the loss curves) */
    char *script = read_text(out, "loss.gp"), *data = read_text(out, "loss.dat");
    assert_non_null(strstr(script, "\"pre, L=3, scaled init, lr 0.003\""));
    assert_non_null(strstr(script, "\"post, L=6, scaled init, lr 0.003\""));
    assert_int_equal(count_lines_with(data, "# block "), 6);
    free(script);
    free(data);
    /* depth: pre and span at 3 layers, post's divergence at 6 layers marked */
    script = read_text(out, "depth.gp");
    data = read_text(out, "depth.dat");
    assert_non_null(strstr(script, "has_diverged = 1"));
    assert_non_null(strstr(data, "diverged runs"));
    char diverged_row[128]; /* post: 6 layers, the loss of its last logged row, the third colour, its name */
    snprintf(diverged_row, sizeof diverged_row, "6 %.9g 3 \"post L=6\"", 1.5 + 3.5 * exp(-(N_ROWS / 2 - 1) / 6.0));
    assert_non_null(strstr(data, diverged_row));
    free(script);
    free(data);
    /* grad norms drawn on log axes, heatmaps with a colour bar in [0, 1] */
    script = read_text(out, "grad-layers.gp");
    assert_non_null(strstr(script, "array panel_log[3] = [1, 1, 1]"));
    free(script);
    /* attention: per block the mean over heads and the extreme head; pre's block 1 (shift 0.2):
     * entropy 0.86, 0.84 (mean 0.85, lowest 0.84), sink 0.1, 0.15 (mean 0.125, highest 0.15) */
    data = read_text(out, "attention.dat");
    assert_non_null(strstr(data, "\n1 0.85 0.84 0.125 0.15 "));
    free(data);
    script = read_text(out, "cos-heatmap.gp");
    assert_non_null(strstr(script, "cb_min = 0"));
    assert_non_null(strstr(script, "set cblabel heat_label"));
    free(script);
    tree_remove(out);
    remove_runs(&r);
    free(o);
    free(e);
}

/* Drawn from another working directory, in every format, through the library. */
static void test_formats_any_cwd(void **state)
{
    (void)state;
    runs r;
    make_runs(&r);
    char out[4200], cwd[4200];
    scratch_path(out, sizeof out, "figures-formats");
    tree_remove(out);
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir("/"), 0);
    sp_plot_options opt;
    sp_plot_options_defaults(&opt);
    opt.out_dir = out;
    opt.only = "loss,cos-heatmap";
    opt.quiet = 1;
    assert_int_equal(sp_plot_parse_formats("png,pdf,svg", &opt.formats), SP_OK);
    const char *inputs[] = {r.pre, r.span};
    sp_plot_result res;
    sp_status st = sp_plot_run(2, inputs, &opt, &res);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(st, SP_OK);
    assert_int_equal(res.drawn, 2);
    assert_int_equal(res.skipped, 0);
    assert_figure(out, "loss", SP_PLOT_DEFAULT_WIDTH, SP_PLOT_DEFAULT_HEIGHT);
    assert_figure(out, "cos-heatmap", SP_PLOT_DEFAULT_WIDTH, SP_PLOT_DEFAULT_HEIGHT);
    char *pdf = read_text(out, "loss.pdf"), *svg = read_text(out, "cos-heatmap.svg");
    assert_memory_equal(pdf, "%PDF-", 5);
    assert_non_null(strstr(svg, "<svg"));
    free(pdf);
    free(svg);
    /* exactly the two figures' files: 3 images, script and data each; no temporary left */
    assert_int_equal(tree_count_files(out, ""), 10);
    tree_remove(out);
    remove_runs(&r);
}

/* A report with no training run beside it (a pretrained model's) is named in the legend by the model
 * its provenance names, not by its file name. */
static void test_legend_names_the_model(void **state)
{
    (void)state;
    char dir[4200], out[4200];
    make_dir(dir, sizeof dir, "pretrained");
    write_report(dir, 3, 0.2, 1);
    scratch_path(out, sizeof out, "figures-pretrained");
    tree_remove(out);
    sp_plot_options opt;
    sp_plot_options_defaults(&opt);
    opt.out_dir = out;
    opt.only = "growth";
    opt.quiet = 1;
    char report[4300];
    snprintf(report, sizeof report, "%s/report.h5", dir);
    const char *inputs[] = {report};
    sp_plot_result res;
    assert_int_equal(sp_plot_run(1, inputs, &opt, &res), SP_OK);
    char *script = read_text(out, "growth.gp");
    assert_non_null(strstr(script, "\"synthetic model\""));
    assert_null(strstr(script, "\"report.h5\""));
    free(script);
    tree_remove(out);
    tree_remove(dir);
}

static void test_missing_data_skipped(void **state)
{
    (void)state;
    runs r;
    make_runs(&r);
    char out[4200], log[4300];
    scratch_path(out, sizeof out, "figures-logonly");
    tree_remove(out);
    snprintf(log, sizeof log, "%s/trainlog.h5", r.post);
    const char *args[] = {"plot", log, "--out", out, NULL};
    char *o = NULL, *e = NULL;
    int rc = scratch_run_cli(args, &o, &e);
    if (rc == -1)
        skip();
    assert_int_equal(rc, 0);
    /* one line per figure that needs a report, nothing written for it */
    assert_int_equal(scratch_count_lines(e), N_REPORT_FIGURES);
    for (int i = 0; i < N_REPORT_FIGURES; i++) {
        char line[128];
        snprintf(line, sizeof line, "plot: %s: skipped: no report among the inputs", report_figures[i]);
        assert_non_null(strstr(e, line));
        assert_no_figure(out, report_figures[i]);
    }
    for (int i = 0; i < N_LOG_FIGURES; i++)
        assert_figure(out, log_figures[i], SP_PLOT_DEFAULT_WIDTH, SP_PLOT_DEFAULT_HEIGHT);
    assert_non_null(strstr(o, "5 figures drawn"));
    assert_non_null(strstr(o, "19 skipped"));
    tree_remove(out);
    remove_runs(&r);
    free(o);
    free(e);
}

/* Runs the CLI expecting exit code rc and one line on stderr holding `needle`; no output made. */
static void expect_error(const char *const *args, int rc_expected, const char *needle, const char *out)
{
    char *e = NULL;
    int rc = scratch_run_cli(args, NULL, &e);
    if (rc == -1)
        skip();
    assert_int_equal(rc, rc_expected);
    assert_int_equal(scratch_count_lines(e), 1);
    if (!strstr(e, needle))
        fail_msg("expected '%s' in: %s", needle, e);
    assert_false(scratch_file_exists(out));
    free(e);
}

static void test_bad_input(void **state)
{
    (void)state;
    runs r;
    make_runs(&r);
    char out[4200], text[4200], empty[4200], missing[4200];
    scratch_path(out, sizeof out, "figures-bad");
    tree_remove(out);
    scratch_path(text, sizeof text, "notes.txt");
    assert_int_equal(scratch_write_file(text, "not a report\n", 13), 0);
    make_dir(empty, sizeof empty, "run-empty");
    scratch_path(missing, sizeof missing, "no-such-report.h5");
    const char *a1[] = {"plot", r.pre, text, "--out", out, NULL};
    expect_error(a1, SP_ERR_INPUT, text, out);
    const char *a2[] = {"plot", empty, "--out", out, NULL};
    expect_error(a2, SP_ERR_INPUT, "holds no training log", out);
    const char *a3[] = {"plot", missing, "--out", out, NULL};
    expect_error(a3, SP_ERR_IO, missing, out);
    const char *a4[] = {"plot", r.pre, "--out", out, "--only", "loss,nosuch", NULL};
    expect_error(a4, SP_ERR_USAGE, "unknown figure 'nosuch'", out);
    const char *a5[] = {"plot", r.pre, "--out", out, "--format", "png,gif", NULL};
    expect_error(a5, SP_ERR_USAGE, "unknown format 'gif'", out);
    const char *a6[] = {"plot", r.pre, NULL};
    expect_error(a6, SP_ERR_USAGE, "--out", out);
    const char *a7[] = {"plot", r.pre, "--out", out, "--size", "800", NULL};
    expect_error(a7, SP_ERR_USAGE, "--size", out);
    unlink(text);
    tree_remove(empty);
    remove_runs(&r);
}

/* A grid of panels (one per run: heatmaps, per-run profiles) asks for a canvas that keeps each panel
 * 300 x 250: 10 runs lie 3 x 4 on 1200 x 790; 2 runs fit the default canvas. */
static void test_grid_canvas_grows(void **state)
{
    (void)state;
    sp_plot_ctx c = {0};
    sp_plot_var_grid(&c, 10);
    assert_int_equal(c.min_width, 4 * SP_PLOT_MIN_PANEL_WIDTH);
    assert_int_equal(c.min_height, 3 * SP_PLOT_MIN_PANEL_HEIGHT + 40);
    assert_non_null(strstr(sp_text_str(&c.vars), "n_rows = 3"));
    assert_non_null(strstr(sp_text_str(&c.vars), "n_cols = 4"));
    sp_text_free(&c.vars);
    sp_plot_ctx two = {0};
    sp_plot_var_grid(&two, 2);
    assert_true(two.min_width <= SP_PLOT_DEFAULT_WIDTH && two.min_height <= SP_PLOT_DEFAULT_HEIGHT);
    sp_text_free(&two.vars);
}

/* Runs the plot command on dirs (n of them) with --only figures into out; 0 when it ran, -1 when the
 * binary cannot be run (the caller skips). */
static int plot_dirs(int n, char (*dirs)[4200], const char *out, const char *figures, char **err)
{
    const char *args[64];
    int n_args = 0;
    args[n_args++] = "plot";
    assert_true(n + 6 <= 64);
    for (int i = 0; i < n; i++)
        args[n_args++] = dirs[i];
    const char *tail[] = {"--out", out, "--only", figures, NULL};
    for (size_t i = 0; i < SP_ARRAY_LEN(tail); i++) /* the options and the closing NULL */
        args[n_args++] = tail[i];
    tree_remove(out);
    char *o = NULL;
    const int rc = scratch_run_cli(args, &o, err);
    free(o);
    if (rc == -1)
        return -1;
    assert_int_equal(rc, 0);
    return 0;
}

/* Forty runs of two variants, twenty distinct (pairs alike in every field): past the palette, so
 * the loss figure draws a panel per variant with a key column under each (20 rows), and the canvas
 * grows so that the panels keep their least height above it; a figure that leaves out many runs
 * names three and counts the rest, on one line. */
static void test_many_runs(void **state)
{
    (void)state;
    enum { N = 40 };
    char dirs[N][4200], out[4200];
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "run-many-%d", i);
        make_dir(dirs[i], sizeof dirs[i], name);
        write_log(dirs[i], i % 2 ? "pre" : "span", 2 + i % 20, 1.0, "done"); /* at most 21 layers */
        if (i < 6)
            write_report(dirs[i], 2 + i, 0.2, i == 0);
    }
    scratch_path(out, sizeof out, "plot-many");
    char *e = NULL;
    if (plot_dirs(N, dirs, out, "loss,prune", &e) == -1)
        skip();
    char *script = read_text(out, "loss.gp");
    assert_non_null(strstr(script, "key_cols = 1\nkey_rows = 20\n"));
    assert_non_null(strstr(script, "n_facets = 2\narray facet_title[2] = [\"span\", \"pre\"]"));
    /* the runs' colours count within their variant; a run's two directories share one */
    assert_non_null(strstr(script, "array run_color[40] = [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, "
                                   "10, 1, 1, 2, 2,"));
    /* 250 px of panel, the title strip (34), 20 key rows of 15 and 8 below; two facets side by side */
    char path[4300];
    int w = 0, h = 0;
    snprintf(path, sizeof path, "%s/loss.png", out);
    assert_int_equal(png_size(path, &w, &h), 0);
    assert_int_equal(h, SP_PLOT_MIN_PANEL_HEIGHT + 34 + 20 * 15 + 8);
    assert_true(w >= SP_PLOT_DEFAULT_WIDTH);
    assert_int_equal(scratch_count_lines(e), 1);
    assert_non_null(strstr(e, "plot: prune: left out 5 runs: pre, L=3, scaled init, lr 0.003 (no pruning/"));
    assert_non_null(strstr(e, "; and 2 more\n"));
    free(script);
    free(e);
    for (int i = 0; i < N; i++)
        tree_remove(dirs[i]);
    tree_remove(out);
}

/* Panels per variant begin only past the palette's twelve colours: twelve runs of two variants
 * share one panel, coloured 1 to 12; fourteen (seven pre, seven span) get a panel each, in the
 * line figures (jac: a row, the key under each) and in alpha's grid (a row of matrix kinds per
 * variant, its key in a last column), coloured 1 to 7 within each; fourteen of one variant stay in
 * one panel, the last two in hollow markers (linetypes 13 and 14). */
static void test_facets_past_the_palette(void **state)
{
    (void)state;
    enum { N = 14 };
    char dirs[N][4200], out[4200];
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "run-facet-%d", i);
        make_dir(dirs[i], sizeof dirs[i], name);
        write_log(dirs[i], i < 7 ? "pre" : "span", 2 + i % 7, 1.0, "done");
        write_report(dirs[i], 2 + i % 7, 0.05 * i, 1);
    }
    scratch_path(out, sizeof out, "plot-facets");
    char *e = NULL;
    if (plot_dirs(N, dirs, out, "jac,alpha", &e) == -1)
        skip();
    free(e);
    char *script = read_text(out, "jac.gp");
    assert_non_null(strstr(script, "n_facets = 2\narray facet_title[2] = [\"pre\", \"span\"]"));
    assert_non_null(strstr(script, "array run_facet[14] = [1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2]"));
    assert_non_null(strstr(script, "array run_color[14] = [1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6, 7]"));
    /* the key names each run without the variant its panel names */
    assert_non_null(strstr(script, "array run_key[14] = [\"L=2, scaled init, lr 0.003\""));
    assert_non_null(strstr(script, "key_cols = 1\nkey_rows = 7\n"));
    free(script);
    script = read_text(out, "alpha.gp");
    const char *kinds = strstr(script, "n_kinds = ");
    assert_non_null(kinds);
    char grid[64];
    snprintf(grid, sizeof grid, "n_rows = 2\nn_cols = %d\n", atoi(kinds + strlen("n_kinds = ")) + 1);
    assert_non_null(strstr(script, grid));
    free(script);
    char path[4300];
    int w = 0, h = 0;
    snprintf(path, sizeof path, "%s/alpha.png", out);
    assert_int_equal(png_size(path, &w, &h), 0);
    assert_int_equal(h, 2 * SP_PLOT_MIN_PANEL_HEIGHT + 40);

    /* twelve: the first six of each variant */
    char twelve[12][4200];
    for (int i = 0; i < 12; i++)
        memcpy(twelve[i], dirs[i < 6 ? i : i + 1], sizeof twelve[i]);
    assert_int_equal(plot_dirs(12, twelve, out, "jac", &e), 0);
    free(e);
    script = read_text(out, "jac.gp");
    assert_non_null(strstr(script, "n_facets = 1\n"));
    assert_non_null(strstr(script, "array run_color[12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]"));
    free(script);

    /* fourteen of one variant: the span runs again, seven more at 9 to 15 layers */
    for (int i = 0; i < 7; i++) {
        tree_remove(dirs[i]);
        assert_int_equal(mkdir(dirs[i], 0777), 0);
        write_log(dirs[i], "span", 9 + i, 1.0, "done");
        write_report(dirs[i], 9 + i, 0.05 * i, 1);
    }
    assert_int_equal(plot_dirs(N, dirs, out, "jac", &e), 0);
    free(e);
    script = read_text(out, "jac.gp");
    assert_non_null(strstr(script, "n_facets = 1\n"));
    assert_non_null(strstr(script, "13, 14]"));
    assert_non_null(strstr(script, "set linetype 13 lc rgb \"#1f77b4\" lw 1.0 pt 6"));
    free(script);
    for (int i = 0; i < N; i++)
        tree_remove(dirs[i]);
    tree_remove(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_figure),
        cmocka_unit_test(test_formats_any_cwd),
        cmocka_unit_test(test_legend_names_the_model),
        cmocka_unit_test(test_missing_data_skipped),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_grid_canvas_grows),
        cmocka_unit_test(test_many_runs),
        cmocka_unit_test(test_facets_past_the_palette),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

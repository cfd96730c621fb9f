/* plots/fig_training.c: the figures of training logs: grad-steps (paper Fig. 3, 14), grad-layers
 * (Fig. 7), loss (Fig. 2, 4), attn-steps (attention entropy and logits over training) and depth
 * (Fig. 11). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plots/figure.h"

#define N_CHOSEN_STEPS 3
#define FINAL_ROWS 5 /* the final training loss is the mean of the last rows logged */

static double positive_or_nan(double v) { return v > 0 ? v : NAN; }

/* ---- FFN gradient norms from the per-tensor columns ---- */

/* layer_of[t] = l for the FFN matrices blocks/<l>/ffn/w{1,2,3}, else -1; returns the number of
 * blocks that have one (0: none). */
static int ffn_layer_map(const sp_trainlog *log, int *layer_of)
{
    int n_layers = 0;
    for (int t = 0; t < log->n_tensors; t++) {
        int l, end = 0;
        char leaf[8] = "";
        layer_of[t] = -1;
        if (sscanf(log->tensor_names[t], "blocks/%d/ffn/%7[a-z0-9]%n", &l, leaf, &end) == 2 &&
            log->tensor_names[t][end] == '\0' && l >= 0 &&
            (strcmp(leaf, "w1") == 0 || strcmp(leaf, "w2") == 0 || strcmp(leaf, "w3") == 0)) {
            layer_of[t] = l;
            n_layers = l + 1 > n_layers ? l + 1 : n_layers;
        }
    }
    return n_layers;
}

/* out[l] = sqrt(sum of the squared gradient norms of block l's FFN matrices) at `row`; NaN where
 * the block has none or the norm is 0 (these figures use log axes). */
static void ffn_norms(const sp_trainlog *log, const int *layer_of, int n_layers, int64_t row, double *out)
{
    for (int l = 0; l < n_layers; l++)
        out[l] = 0;
    const double *g = log->tensor_grad_norm + row * log->n_tensors;
    for (int t = 0; t < log->n_tensors; t++)
        if (layer_of[t] >= 0)
            out[layer_of[t]] += g[t] * g[t];
    for (int l = 0; l < n_layers; l++)
        out[l] = positive_or_nan(sqrt(out[l]));
}

/* The FFN gradient norms of a log, [n_rows, *n_layers] (free()); NULL with the reason in why when
 * the log has none to draw. */
static double *ffn_table(const sp_trainlog *log, int *n_layers, const char **why)
{
    *why = NULL;
    if (log->n_rows == 0) {
        *why = "the training log has no rows";
        return NULL;
    }
    int *layer_of = malloc((size_t)(log->n_tensors ? log->n_tensors : 1) * sizeof *layer_of);
    if (!layer_of) {
        *why = "out of memory";
        return NULL;
    }
    *n_layers = ffn_layer_map(log, layer_of);
    double *table = NULL;
    if (*n_layers == 0)
        *why = "no FFN tensor among its per-tensor gradient norms";
    else if (!(table = malloc((size_t)log->n_rows * (size_t)*n_layers * sizeof *table)))
        *why = "out of memory";
    int any = 0;
    for (int64_t r = 0; table && r < log->n_rows; r++) {
        ffn_norms(log, layer_of, *n_layers, r, table + r * *n_layers);
        for (int l = 0; l < *n_layers; l++)
            any |= !isnan(table[r * *n_layers + l]);
    }
    free(layer_of);
    if (table && !any) {
        free(table);
        table = NULL;
        *why = "every FFN gradient norm is 0 or missing";
    }
    return table;
}

static int n_logs(const sp_plot_inputs *in)
{
    int n = 0;
    for (int i = 0; i < in->n; i++)
        n += in->items[i].kind == SP_SERIES_TRAINLOG;
    return n;
}

static sp_status skip_without_logs(sp_plot_ctx *c, const char *needs)
{
    c->left_out[0] = '\0';
    c->n_left_out = 0;
    return sp_plot_skip(c, "%s (it needs %s)", n_logs(c->in) ? "no training log among the inputs holds its data"
                                                             : "no training log among the inputs", needs);
}

/* ---- grad-steps ---- */

sp_status sp_fig_grad_steps(sp_plot_ctx *c)
{
    double *layers = calloc((size_t)(c->in->n ? c->in->n : 1), sizeof *layers);
    if (!layers)
        return sp_error(SP_ERR_NOMEM, "plot %s: out of memory", c->id);
    sp_status st = SP_OK;
    for (int i = 0; i < c->in->n && st == SP_OK; i++) {
        const sp_plot_series *s = &c->in->items[i];
        if (s->kind != SP_SERIES_TRAINLOG)
            continue;
        int L = 0;
        const char *why;
        double *table = ffn_table(&s->log, &L, &why);
        if (!table) {
            sp_plot_leave_out(c, s, why);
            continue;
        }
        double *row = malloc((size_t)(L + 1) * sizeof *row);
        st = row ? sp_plot_add_run(c, i) : sp_error(SP_ERR_NOMEM, "plot %s: out of memory", c->id);
        if (st == SP_OK) {
            layers[c->n_runs - 1] = L;
            sp_plot_block(c, "%s: step, then the FFN gradient norm of blocks 0 .. %d (before clipping)", s->title, L - 1);
            for (int64_t r = 0; r < s->log.n_rows; r++) {
                row[0] = s->log.col[SP_LOG_STEP][r];
                memcpy(row + 1, table + r * L, (size_t)L * sizeof *row);
                sp_plot_row(c, L + 1, row);
            }
        }
        free(row);
        free(table);
    }
    if (st == SP_OK && c->n_runs == 0)
        st = skip_without_logs(c, "per-tensor gradient norms");
    if (st == SP_OK && !c->skip[0]) {
        sp_plot_var_nums(c, "ffn_layers", c->n_runs, layers);
        sp_plot_var_grid(c, c->n_runs);
    }
    free(layers);
    return st;
}

/* ---- grad-layers ---- */

/* Rows of the start, middle and end of a log with n rows. */
static void chosen_rows(int64_t n, int64_t rows[N_CHOSEN_STEPS])
{
    rows[0] = 0;
    rows[1] = (n - 1) / 2;
    rows[2] = n - 1;
}

sp_status sp_fig_grad_layers(sp_plot_ctx *c)
{
    double steps[N_CHOSEN_STEPS] = {NAN, NAN, NAN};
    int same_steps = 1;
    sp_status st = SP_OK;
    for (int i = 0; i < c->in->n && st == SP_OK; i++) {
        const sp_plot_series *s = &c->in->items[i];
        if (s->kind != SP_SERIES_TRAINLOG)
            continue;
        int L = 0;
        const char *why;
        double *table = ffn_table(&s->log, &L, &why);
        if (!table) {
            sp_plot_leave_out(c, s, why);
            continue;
        }
        int64_t rows[N_CHOSEN_STEPS];
        chosen_rows(s->log.n_rows, rows);
        st = sp_plot_add_run(c, i);
        sp_plot_block(c, "%s: block, FFN gradient norm at steps %.0f, %.0f, %.0f", s->title,
                      s->log.col[SP_LOG_STEP][rows[0]], s->log.col[SP_LOG_STEP][rows[1]], s->log.col[SP_LOG_STEP][rows[2]]);
        for (int k = 0; k < N_CHOSEN_STEPS; k++) {
            const double step = s->log.col[SP_LOG_STEP][rows[k]];
            same_steps &= isnan(steps[k]) || steps[k] == step;
            steps[k] = step;
        }
        for (int l = 0; l < L; l++) {
            double v[1 + N_CHOSEN_STEPS] = {l};
            for (int k = 0; k < N_CHOSEN_STEPS; k++)
                v[k + 1] = table[rows[k] * L + l];
            sp_plot_row(c, 1 + N_CHOSEN_STEPS, v);
        }
        free(table);
    }
    if (st == SP_OK && c->n_runs == 0)
        return skip_without_logs(c, "per-tensor gradient norms");
    static const char *const when[N_CHOSEN_STEPS] = {"start of training", "middle of training", "end of training"};
    char titles[N_CHOSEN_STEPS][64];
    sp_plot_panel p[N_CHOSEN_STEPS];
    for (int k = 0; k < N_CHOSEN_STEPS && st == SP_OK; k++) {
        if (same_steps)
            snprintf(titles[k], sizeof titles[k], "step %.0f", steps[k]);
        else
            snprintf(titles[k], sizeof titles[k], "%s", when[k]);
        p[k] = (sp_plot_panel){titles[k], "block", k == 0 ? "FFN gradient norm" : "", 0, k + 2, 0, 0, 0, 1};
    }
    if (st == SP_OK)
        sp_plot_var_panels(c, "FFN gradient norm by block", 1, 0, N_CHOSEN_STEPS, p);
    return st;
}

/* ---- loss ---- */

static double tokens_per_step(const sp_trainlog *log)
{
    const int64_t last = log->n_rows - 1;
    return log->col[SP_LOG_STEP][last] > 0 ? log->col[SP_LOG_TOKENS_SEEN][last] / log->col[SP_LOG_STEP][last] : 0;
}

/* The x axis of figures over training: steps, unless the runs consume different numbers of tokens
 * per step (then tokens seen). */
static int x_column(const sp_plot_ctx *c)
{
    double per_step = NAN;
    int by_tokens = 0;
    for (int i = 0; i < c->in->n; i++) {
        const sp_plot_series *s = &c->in->items[i];
        if (s->kind != SP_SERIES_TRAINLOG || s->log.n_rows == 0)
            continue;
        const double t = tokens_per_step(&s->log);
        by_tokens |= !isnan(per_step) && t != per_step;
        per_step = t;
    }
    return by_tokens ? SP_LOG_TOKENS_SEEN : SP_LOG_STEP;
}

static const char *x_label(int x_col) { return x_col == SP_LOG_TOKENS_SEEN ? "tokens seen" : "step"; }

sp_status sp_fig_loss(sp_plot_ctx *c)
{
    const int x_col = x_column(c);
    sp_plot_span span;
    sp_plot_span_init(&span);
    sp_status st = SP_OK;
    for (int i = 0; i < c->in->n && st == SP_OK; i++) {
        const sp_plot_series *s = &c->in->items[i];
        if (s->kind != SP_SERIES_TRAINLOG)
            continue;
        if (s->log.n_rows == 0) {
            sp_plot_leave_out(c, s, "the training log has no rows");
            continue;
        }
        st = sp_plot_add_run(c, i);
        const double *x = s->log.col[x_col], *train = s->log.col[SP_LOG_TRAIN_LOSS], *val = s->log.col[SP_LOG_VAL_LOSS];
        sp_plot_block(c, "%s: %s, training loss (nats/token, this step's batch)", s->title, sp_log_column_names[x_col]);
        for (int64_t r = 0; r < s->log.n_rows; r++)
            sp_plot_row(c, 2, (double[]){x[r], train[r]});
        sp_plot_span_add(&span, (int)s->log.n_rows, train);
        sp_plot_block(c, "%s: %s, validation loss (nats/token)", s->title, sp_log_column_names[x_col]);
        for (int64_t r = 0; r < s->log.n_rows; r++)
            if (isfinite(val[r]))
                sp_plot_row(c, 2, (double[]){x[r], val[r]});
        sp_plot_span_add(&span, (int)s->log.n_rows, val);
    }
    if (st == SP_OK && c->n_runs == 0)
        return skip_without_logs(c, "logged losses");
    const sp_plot_panel p = {"", x_label(x_col), "loss (nats/token)", 0, 2, 1, 2, 0, sp_plot_span_decades(&span)};
    if (st == SP_OK)
        sp_plot_var_panels(c, "training loss (solid) and validation loss (dashed)", 2, 0, 1, &p);
    return st;
}

/* ---- attn-steps: the attention columns over training ---- */

sp_status sp_fig_attn_steps(sp_plot_ctx *c)
{
    const int x_col = x_column(c);
    sp_status st = SP_OK;
    for (int i = 0; i < c->in->n && st == SP_OK; i++) {
        const sp_plot_series *s = &c->in->items[i];
        if (s->kind != SP_SERIES_TRAINLOG)
            continue;
        const double *x = s->log.col[x_col], *entropy = s->log.col[SP_LOG_ATTN_ENTROPY_MIN];
        const double *logit = s->log.col[SP_LOG_ATTN_MAX_LOGIT];
        int64_t any = 0;
        for (int64_t r = 0; r < s->log.n_rows; r++)
            any += isfinite(entropy[r]) || isfinite(logit[r]);
        if (!any) {
            sp_plot_leave_out(c, s, s->log.n_rows ? "the training log has no attention columns (written before "
                                                    "format 1.1)" : "the training log has no rows");
            continue;
        }
        st = sp_plot_add_run(c, i);
        sp_plot_block(c, "%s: %s, least mean attention entropy of a head (nats), largest attention score", s->title,
                      sp_log_column_names[x_col]);
        for (int64_t r = 0; r < s->log.n_rows; r++)
            sp_plot_row(c, 3, (double[]){x[r], entropy[r], logit[r]});
    }
    if (st == SP_OK && c->n_runs == 0)
        return skip_without_logs(c, "the attention columns attn_entropy_min and attn_max_logit");
    const sp_plot_panel p[2] = {
        {"least mean attention entropy of a head", x_label(x_col), "entropy (nats)", 0, 2, 0, 0, 0, 0},
        {"largest attention score", x_label(x_col), "score (logit)", 0, 3, 0, 0, 0, 0},
    };
    if (st == SP_OK)
        sp_plot_var_panels(c, "attention over training: entropy collapse and logit growth", 1, 0, 2, p);
    return st;
}

/* ---- depth ---- */

typedef struct {
    int variant, init, d_model;
    double lr;
    int first; /* series index of its first run */
} depth_group; /* group g is drawn in colour g + 1 (its runs' colours may repeat across facets) */

static int group_of(depth_group *groups, int *n_groups, const sp_plot_series *s, int index)
{
    for (int g = 0; g < *n_groups; g++)
        if (groups[g].variant == s->cfg.variant && groups[g].init == s->cfg.init &&
            groups[g].d_model == s->cfg.d_model && (groups[g].lr == s->lr || (isnan(groups[g].lr) && isnan(s->lr))))
            return g;
    groups[*n_groups] = (depth_group){s->cfg.variant, s->cfg.init, s->cfg.d_model, s->lr, index};
    return (*n_groups)++;
}

/* The last finite training loss of a log; the unigram entropy (the loss of a model that learned
 * only byte frequencies) when there is none. */
static double last_finite_loss(const sp_trainlog *log)
{
    for (int64_t r = log->n_rows - 1; r >= 0; r--)
        if (isfinite(log->col[SP_LOG_TRAIN_LOSS][r]))
            return log->col[SP_LOG_TRAIN_LOSS][r];
    return log->unigram_entropy;
}

static double final_train_loss(const sp_trainlog *log)
{
    double sum = 0;
    int n = 0;
    for (int64_t r = log->n_rows - 1; r >= 0 && n < FINAL_ROWS; r--)
        if (isfinite(log->col[SP_LOG_TRAIN_LOSS][r])) {
            sum += log->col[SP_LOG_TRAIN_LOSS][r];
            n++;
        }
    return n ? sum / n : NAN;
}

static int cmp_by_layers(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

typedef struct {
    depth_group *groups;
    int n_groups;
    int *group;       /* per series: its group, -1 when not drawn */
    int *diverged;    /* per series */
    double *points;   /* per series: layers, loss */
} depth_plan;

/* Sorts the runs of the inputs into groups; *by_val says whether every finished run has a
 * validation loss (then that is the final loss, else the training loss of the last rows). */
static void plan_depth(sp_plot_ctx *c, depth_plan *d, int *by_val)
{
    *by_val = 1;
    for (int i = 0; i < c->in->n; i++) {
        const sp_plot_series *s = &c->in->items[i];
        d->group[i] = -1;
        if (s->kind != SP_SERIES_TRAINLOG)
            continue;
        if (!s->run_known) {
            sp_plot_leave_out(c, s, "its options could not be read");
            continue;
        }
        d->diverged[i] = strcmp(s->log.status, "diverged") == 0;
        if (!d->diverged[i] && strcmp(s->log.status, "done") != 0) {
            sp_plot_leave_out(c, s, "not finished");
            continue;
        }
        if (!d->diverged[i])
            *by_val &= isfinite(s->log.final_val_loss);
        d->group[i] = group_of(d->groups, &d->n_groups, s, i);
    }
}

static void write_depth(sp_plot_ctx *c, depth_plan *d, int by_val, int *n_diverged)
{
    *n_diverged = 0;
    for (int g = 0; g < d->n_groups; g++) {
        int n = 0;
        for (int i = 0; i < c->in->n; i++) {
            const sp_plot_series *s = &c->in->items[i];
            if (d->group[i] != g || d->diverged[i])
                continue;
            d->points[2 * n] = s->cfg.n_layers;
            d->points[2 * n + 1] = by_val ? s->log.final_val_loss : final_train_loss(&s->log);
            n++;
        }
        qsort(d->points, (size_t)n, 2 * sizeof *d->points, cmp_by_layers);
        const sp_plot_series *first = &c->in->items[d->groups[g].first];
        sp_plot_block(c, "%s, d=%d, %s init, lr %g: layers, final loss (nats/token)", sp_variant_names[first->cfg.variant],
                      first->cfg.d_model, sp_init_names[first->cfg.init], first->lr);
        for (int k = 0; k < n; k++)
            sp_plot_row(c, 2, d->points + 2 * k);
    }
    for (int i = 0; i < c->in->n; i++)
        *n_diverged += d->group[i] >= 0 && d->diverged[i];
    if (!*n_diverged)
        return;
    sp_plot_block(c, "diverged runs: layers, last finite training loss (nats/token; the unigram entropy when none was "
                     "logged), colour of the group, the run's short name");
    for (int i = 0; i < c->in->n; i++)
        if (d->group[i] >= 0 && d->diverged[i]) {
            const sp_plot_series *s = &c->in->items[i];
            const double row[3] = {s->cfg.n_layers, last_finite_loss(&s->log), d->group[i] + 1};
            sp_plot_row_labelled(c, 3, row, s->short_name);
        }
}

/* Pixels of the depth figure's plot, left of its key. */
#define DEPTH_PLOT_PX 500

static void write_depth_vars(sp_plot_ctx *c, const depth_plan *d, int by_val, int n_diverged)
{
    const int n = d->n_groups;
    size_t longest = 1;
    char (*titles)[128] = calloc((size_t)n, sizeof *titles);
    const char **ptrs = calloc((size_t)n, sizeof *ptrs);
    double *colors = calloc((size_t)n, sizeof *colors);
    if (!titles || !ptrs || !colors) {
        c->vars.failed = 1;
    } else {
        for (int g = 0; g < n; g++) {
            const depth_group *gr = &d->groups[g];
            snprintf(titles[g], sizeof titles[g], "%s, d=%d, %s init, lr %g", sp_variant_names[gr->variant], gr->d_model,
                     sp_init_names[gr->init], gr->lr);
            ptrs[g] = titles[g];
            colors[g] = g + 1;
            longest = strlen(titles[g]) > longest ? strlen(titles[g]) : longest;
        }
        /* the key sits right of the plot (plots/depth.gp): the canvas widens to keep the plot's width */
        c->min_width = DEPTH_PLOT_PX + (int)sp_plot_key_entry_px(longest);
        sp_plot_var_num(c, "n_groups", n);
        sp_plot_var_strs(c, "group_title", n, ptrs);
        sp_plot_var_nums(c, "group_color", n, colors);
        sp_plot_var_num(c, "has_diverged", n_diverged > 0);
        sp_plot_var_str(c, "y_label", by_val ? "final validation loss (nats/token)"
                                             : "final training loss (nats/token, mean of the last 5 rows)");
    }
    free(titles);
    free(ptrs);
    free(colors);
}

sp_status sp_fig_depth(sp_plot_ctx *c)
{
    const size_t n = (size_t)(c->in->n ? c->in->n : 1);
    depth_plan d = {.groups = calloc(n, sizeof *d.groups), .group = calloc(n, sizeof *d.group),
                    .diverged = calloc(n, sizeof *d.diverged), .points = calloc(2 * n, sizeof *d.points)};
    sp_status st = SP_OK;
    if (!d.groups || !d.group || !d.diverged || !d.points) {
        st = sp_error(SP_ERR_NOMEM, "plot %s: out of memory", c->id);
    } else {
        int by_val, n_diverged;
        plan_depth(c, &d, &by_val);
        if (d.n_groups == 0) {
            st = skip_without_logs(c, "finished or diverged runs of known depth");
        } else {
            write_depth(c, &d, by_val, &n_diverged);
            write_depth_vars(c, &d, by_val, n_diverged);
        }
    }
    free(d.groups);
    free(d.group);
    free(d.diverged);
    free(d.points);
    return st;
}

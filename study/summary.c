/* study/summary.c: the summary table (study/summary.h). */
#include "study/summary.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file_read.h"
#include "io/report.h"
#include "plots/text_buf.h"
#include "study/bound_table.h"
#include "train/train.h"
#include "train/trainlog.h"

/* The headline metrics: summary keys of the report (docs/formats.md "Report contents"). */
static const struct {
    const char *analyzer, *key, *header;
} headline[] = {
    {"grad_norms", "ffn_ratio", "FFN grad first/last"},
    {"similarity", "adjacent_cosine_deep_half", "adjacent cos, deep half"},
    {"similarity", "s_half", "S(L/2)"},
    {"ffn_spectra", "hard_rank_mean", "FFN hard rank"},
    {"ffn_spectra", "edr", "EDR"},
    {"weights", "kappa_w1_mean", "kappa W1"},
    {"jacobian", "sigma_max_mean", "Jacobian sigma_max"},
};
#define N_HEADLINE ((int)SP_ARRAY_LEN(headline))
#define SUMMARY_MAX_BYTES (16u << 20)

/* The JSON summary of dir/report.h5, NULL when there is none (cJSON_Delete it). */
static cJSON *read_report_summary(const char *dir)
{
    char report[4200];
    snprintf(report, sizeof report, "%s/report.h5", dir);
    char *path = sp_report_summary_path(report);
    unsigned char *text = NULL;
    size_t len;
    cJSON *json = NULL;
    if (path && sp_file_read_all(path, SUMMARY_MAX_BYTES, &text, &len) == SP_OK)
        json = cJSON_Parse((const char *)text);
    sp_error_clear();
    free(path);
    free(text);
    return json;
}

static double metric(const cJSON *summary, const char *analyzer, const char *key)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(summary, "metrics");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(m, analyzer);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void cell(sp_text *md, sp_text *csv, double v)
{
    if (isfinite(v)) {
        sp_text_printf(md, " %.4g |", v);
        sp_text_printf(csv, ",%.6g", v);
    } else {
        sp_text_printf(md, " - |");
        sp_text_printf(csv, ",");
    }
}

static void run_row(sp_text *md, sp_text *csv, const sp_study_run_spec *run, const char *dir, int diverged)
{
    char path[4200], status[64] = "no log";
    double val = NAN, train = NAN;
    snprintf(path, sizeof path, "%s/%s", dir, SP_TRAIN_LOG_NAME);
    sp_trainlog log;
    if (sp_trainlog_read(path, &log) == SP_OK) {
        if (diverged)
            snprintf(status, sizeof status, "diverged at step %lld", (long long)log.diverged_step);
        else
            snprintf(status, sizeof status, "%s", log.status);
        val = log.final_val_loss;
        if (log.n_rows)
            train = log.col[SP_LOG_TRAIN_LOSS][log.n_rows - 1];
        sp_trainlog_free(&log);
    }
    sp_error_clear();
    sp_text_printf(md, "| %s | %s |", run->name, status);
    sp_text_printf(csv, "%s,%s", run->name, status);
    cell(md, csv, val);
    cell(md, csv, train);
    cJSON *summary = read_report_summary(dir);
    for (int k = 0; k < N_HEADLINE; k++)
        cell(md, csv, summary ? metric(summary, headline[k].analyzer, headline[k].key) : NAN);
    cJSON_Delete(summary);
    sp_text_printf(md, "\n");
    sp_text_printf(csv, "\n");
}

sp_status sp_study_final_val_loss(const char *dir, double *loss)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, SP_TRAIN_LOG_NAME);
    sp_trainlog log;
    SP_TRY(sp_trainlog_read(path, &log));
    *loss = log.final_val_loss;
    sp_trainlog_free(&log);
    return isfinite(*loss) ? SP_OK : sp_error(SP_ERR_INPUT, "%s: the run has no final validation loss", path);
}

/* Runs a and b train the same model (variant, depth, init) at the same learning rate. */
static int same_model(const sp_study_run_spec *a, const sp_study_run_spec *b)
{
    return strcmp(a->variant, b->variant) == 0 && strcmp(a->init, b->init) == 0 && a->cfg.n_layers == b->cfg.n_layers;
}

typedef struct {
    double mean, min, max;
    int n_seeds, n_done;
} lr_stats;

/* Over the runs of run i's model and learning rate: the final validation losses (val[], NaN for a run
 * that diverged or has none) of those that ran to the end. */
static lr_stats stats_of(int n_runs, const sp_study_run_spec *runs, const double *val, int i)
{
    lr_stats st = {0, INFINITY, -INFINITY, 0, 0};
    for (int j = 0; j < n_runs; j++) {
        if (!same_model(&runs[i], &runs[j]) || strcmp(runs[i].lr, runs[j].lr) != 0)
            continue;
        st.n_seeds++;
        if (isfinite(val[j])) {
            st.mean += val[j];
            st.min = fmin(st.min, val[j]);
            st.max = fmax(st.max, val[j]);
            st.n_done++;
        }
    }
    st.mean = st.n_done ? st.mean / st.n_done : NAN;
    return st;
}

/* The learning-rate table: one row per model and learning rate (its first run stands for its seeds). */
static void lr_table(sp_text *md, sp_text *csv, int n_runs, const sp_study_run_spec *runs, const double *val)
{
    sp_text_printf(md, "\n## Learning rates and seeds\n\nFinal validation loss (nats/token) of each model at each "
                       "learning rate over its seeds: mean, min and max of the runs that did not diverge. `best`: the "
                       "model's learning rate of lowest mean, where it was trained at more than one.\n\n"
                       "| model | lr | seeds | diverged | val loss mean | min | max | best |\n"
                       "|---|---|---|---|---|---|---|---|\n");
    sp_text_printf(csv, "variant,n_layers,init,lr,seeds,diverged,val_loss_mean,val_loss_min,val_loss_max,best\n");
    for (int i = 0; i < n_runs; i++) {
        int first = 1, n_lrs = 0, best = 1;
        const lr_stats st = stats_of(n_runs, runs, val, i);
        for (int j = 0; j < n_runs; j++) {
            if (!same_model(&runs[i], &runs[j]))
                continue;
            const int same_lr = strcmp(runs[i].lr, runs[j].lr) == 0;
            first &= !(same_lr && j < i);
            int earlier_lr = 0; /* j is the first run of its lr */
            for (int k = 0; k < j; k++)
                earlier_lr |= same_model(&runs[k], &runs[j]) && strcmp(runs[k].lr, runs[j].lr) == 0;
            if (earlier_lr)
                continue;
            n_lrs++;
            const lr_stats other = stats_of(n_runs, runs, val, j);
            if (!same_lr && isfinite(other.mean) && !(st.mean < other.mean))
                best = 0;
        }
        if (!first)
            continue;
        best &= n_lrs > 1 && isfinite(st.mean);
        sp_text_printf(md, "| %s-L%d-%s | %s | %d | %d |", runs[i].variant, runs[i].cfg.n_layers, runs[i].init,
                       runs[i].lr, st.n_seeds, st.n_seeds - st.n_done);
        sp_text_printf(csv, "%s,%d,%s,%s,%d,%d", runs[i].variant, runs[i].cfg.n_layers, runs[i].init, runs[i].lr,
                       st.n_seeds, st.n_seeds - st.n_done);
        cell(md, csv, st.mean);
        cell(md, csv, st.n_done ? st.min : NAN);
        cell(md, csv, st.n_done ? st.max : NAN);
        sp_text_printf(md, " %s |\n", best ? "best" : "");
        sp_text_printf(csv, ",%d\n", best);
    }
}

sp_status sp_study_write_summary(const char *out, const char *preset, int n_runs, const sp_study_run_spec *runs,
                                 const char *const *dirs, const int *diverged)
{
    sp_text md = {0}, csv = {0}, lr_csv = {0}, bound_csv = {0};
    sp_text_printf(&md, "# study %s\n\nRuns in `%s/runs/`, figures in `%s/figures/`. Losses in nats/token (final "
                        "validation loss; training loss of the last logged step). Metrics from each run's "
                        "`report.json` (docs/formats.md): %s.ffn_ratio", preset, out, out, headline[0].analyzer);
    for (int k = 1; k < N_HEADLINE; k++)
        sp_text_printf(&md, ", %s.%s", headline[k].analyzer, headline[k].key);
    sp_text_printf(&md, "; `-`: not available (a diverged run is not analyzed).\n\n| run | status | val loss | train loss |");
    sp_text_printf(&csv, "run,status,val_loss,train_loss");
    for (int k = 0; k < N_HEADLINE; k++) {
        sp_text_printf(&md, " %s |", headline[k].header);
        sp_text_printf(&csv, ",%s.%s", headline[k].analyzer, headline[k].key);
    }
    sp_text_printf(&md, "\n|---|---|---|---|");
    for (int k = 0; k < N_HEADLINE; k++)
        sp_text_printf(&md, "---|");
    sp_text_printf(&md, "\n");
    sp_text_printf(&csv, "\n");
    for (int i = 0; i < n_runs; i++)
        run_row(&md, &csv, &runs[i], dirs[i], diverged[i]);
    double *val = malloc((n_runs > 0 ? (size_t)n_runs : 1) * sizeof *val); /* each run's log read once */
    for (int i = 0; val && i < n_runs; i++)
        if (diverged[i] || sp_study_final_val_loss(dirs[i], &val[i]) != SP_OK)
            val[i] = NAN;
    sp_error_clear();
    if (val)
        lr_table(&md, &lr_csv, n_runs, runs, val);
    free(val);
    sp_study_bound_table(&md, &bound_csv, n_runs, runs, dirs, diverged);
    char path[4200];
    snprintf(path, sizeof path, "%s/summary.md", out);
    sp_status st = sp_text_write_file(&md, path);
    snprintf(path, sizeof path, "%s/summary.csv", out);
    if (st == SP_OK)
        st = sp_text_write_file(&csv, path);
    snprintf(path, sizeof path, "%s/summary_lr.csv", out);
    if (st == SP_OK)
        st = sp_text_write_file(&lr_csv, path);
    snprintf(path, sizeof path, "%s/jacobian_bound.csv", out);
    if (st == SP_OK)
        st = sp_text_write_file(&bound_csv, path);
    if (st == SP_OK)
        printf("\n%s\nstudy: summary in %s/summary.md; tables in %s/summary.csv, summary_lr.csv and "
               "jacobian_bound.csv\n", sp_text_str(&md), out, out);
    sp_text_free(&md);
    sp_text_free(&csv);
    sp_text_free(&lr_csv);
    sp_text_free(&bound_csv);
    return st;
}

/* study/study.c: `spanprobe study`: train, analyze, draw, summarize; every stage skips what an
 * earlier (interrupted) invocation finished. */
#include "study/study.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <omp.h>

#include "analyzers/driver.h"
#include "analyzers/progress.h"
#include "core/mpi.h"
#include "io/dirs.h"
#include "plots/plot.h"
#include "study/presets.h"
#include "study/summary.h"
#include "study/workers.h"
#include "train/train.h"

#define REPORT_NAME "report.h5"

int sp_study_preset_count(void) { return sp_study_n_presets; }
const char *sp_study_preset_name(int i) { return sp_study_presets[i].name; }
const char *sp_study_preset_description(int i) { return sp_study_presets[i].description; }

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Options a run directory's checkpoints must share with the preset's run (where it computes may differ). */
static const char *const may_differ[] = {"device", NULL};

static sp_status check_same_run(const sp_study_run_spec *run, const char *dir, const char *ckpt, const char *json)
{
    sp_config cfg;
    sp_train_options opt;
    sp_config_defaults(&cfg);
    sp_train_options_defaults(&opt);
    char where[4300], was[SP_FIELD_STRING_MAX], now[SP_FIELD_STRING_MAX];
    snprintf(where, sizeof where, "%s: /train/options_json", ckpt);
    SP_TRY(sp_train_options_from_json(json, where, &cfg, &opt));
    const sp_field *f = sp_train_options_diff(&cfg, &opt, &run->cfg, &run->opt, may_differ, was, now, sizeof was);
    if (f)
        return sp_error(SP_ERR_USAGE, "%s: holds a run with %s = %s where this study's run has %s (another study's "
                        "run: choose another --out)", dir, f->name, was, now);
    return SP_OK;
}

/* Trains the run in dir unless an earlier invocation finished it; *diverged says how it ended. */
static sp_status train_run(const sp_study_run_spec *run, const char *dir, const char *tag, int *diverged)
{
    *diverged = 0;
    char ckpt[4200];
    sp_ckpt_meta meta;
    const char *resume = NULL;
    if (sp_train_latest_checkpoint(dir, ckpt, sizeof ckpt, &meta) == SP_OK) {
        sp_status st = check_same_run(run, dir, ckpt, meta.train.options_json);
        const int done = strcmp(meta.train.status, "done") == 0 && meta.train.step >= run->opt.steps;
        *diverged = strcmp(meta.train.status, "diverged") == 0;
        const long long step = (long long)(*diverged ? meta.train.diverged_step : meta.train.step);
        sp_ckpt_meta_free(&meta);
        SP_TRY(st);
        if (done || *diverged) {
            printf("study: %s: trained earlier (%s at step %lld)\n", tag, *diverged ? "diverged" : "done", step);
            return SP_OK;
        }
        printf("study: %s: resuming training from step %lld\n", tag, step);
        resume = ckpt;
    } else {
        sp_error_clear(); /* no checkpoint yet: a fresh run */
        printf("study: %s: training %lld steps\n", tag, (long long)run->opt.steps);
    }
    fflush(stdout);
    sp_status st = sp_train_run(&run->cfg, &run->opt, dir, resume);
    if (st == SP_ERR_DIVERGED) {
        printf("study: %s: %s (a result: recorded, not analyzed)\n", tag, sp_error_message());
        sp_error_clear();
        *diverged = 1;
        return SP_OK;
    }
    return st;
}

/* Analyzes the run's final checkpoint into dir/report.h5 unless that exists. */
static sp_status analyze_run(const sp_study_run_spec *run, const sp_analyze_options *aopt, const char *dir,
                             const char *tag)
{
    char report[4200], ckpt[4200];
    snprintf(report, sizeof report, "%s/%s", dir, REPORT_NAME);
    if (file_exists(report)) {
        printf("study: %s: analyzed earlier (%s)\n", tag, report);
        return SP_OK;
    }
    sp_ckpt_meta meta;
    SP_TRY(sp_train_latest_checkpoint(dir, ckpt, sizeof ckpt, &meta));
    sp_ckpt_meta_free(&meta);
    printf("study: %s: analyzing %s\n", tag, ckpt);
    fflush(stdout);
    sp_analyze_job job = {.input = ckpt, .out = report, .data = run->opt.data,
                          .device = sp_device_names[run->opt.device], .quiet = 1, .opts = *aopt};
    return sp_analyze_run(&job);
}

/* Every figure over the runs in dirs into OUT/figures (OUT/figures/<sub> when sub is not NULL). */
static sp_status draw(const sp_study_options *o, const char *sub, int n_runs, const char *const *dirs)
{
    char figures[4400];
    snprintf(figures, sizeof figures, "%s/figures%s%s", o->out, sub ? "/" : "", sub ? sub : "");
    sp_plot_options popt;
    sp_plot_options_defaults(&popt);
    popt.out_dir = figures;
    popt.formats = o->formats ? o->formats : SP_PLOT_PNG;
    popt.quiet = 1;
    sp_plot_result res;
    SP_TRY(sp_plot_run(n_runs, dirs, &popt, &res));
    printf("study: %d figures in %s (%d skipped)\n", res.drawn, figures, res.skipped);
    return SP_OK;
}

/* ---- the plan and its estimated time ---- */

/* Analysis passes cost about this many training tokens per evaluation token (measured on the
 * quick preset: gradients, Jacobian power iterations, pruning). */
#define ANALYSIS_TOKEN_COST 6.0
/* Throughput assumed until this invocation has finished a run: FLOP/s per CPU thread, and on a GPU. */
#define ASSUMED_CPU_FLOPS_PER_THREAD 14e9
#define ASSUMED_GPU_FLOPS 2e12
/* Seconds between the lines that say which runs the workers are on. */
#define TICK_SECONDS 60.0

/* Training FLOPs per token of a run's model: 6 x the matrix parameters a token meets (attention,
 * FFN, the head) plus the attention scores over seq_len positions. */
static double flops_per_token(const sp_config *c, int seq_len)
{
    const double d = c->d_model, L = c->n_layers, kv = (double)c->n_kv_heads / c->n_heads;
    const double ffn_mats = c->ffn == SP_FFN_SWIGLU ? 3 : 2;
    return 6 * (L * ((2 + 2 * kv) * d * d + ffn_mats * d * c->d_ff) + c->vocab_size * d) + 6 * L * seq_len * d;
}

static double run_cost(const sp_study_run_spec *r, const sp_analyze_options *a)
{
    const double train_tokens = (double)r->opt.steps * r->opt.batch_size * r->opt.seq_len * r->opt.grad_accum;
    return flops_per_token(&r->cfg, r->opt.seq_len) * (train_tokens + ANALYSIS_TOKEN_COST * (double)a->n_tokens);
}

/* The share of a run an earlier invocation left to do: 0 analyzed or diverged (*diverged, may be
 * NULL), else the steps left (the analysis counted as a tenth). */
static double share_left(const char *dir, const sp_study_run_spec *r, int *diverged)
{
    char path[4400], ckpt[4200];
    snprintf(path, sizeof path, "%s/%s", dir, REPORT_NAME);
    sp_ckpt_meta meta;
    if (sp_train_latest_checkpoint(dir, ckpt, sizeof ckpt, &meta) != SP_OK) {
        sp_error_clear();
        return 1;
    }
    const int div = strcmp(meta.train.status, "diverged") == 0;
    double left = div || file_exists(path)
                      ? 0
                      : 0.1 + 0.9 * (1 - (double)meta.train.step / (double)(r->opt.steps > 0 ? r->opt.steps : 1));
    sp_ckpt_meta_free(&meta);
    if (diverged)
        *diverged = div;
    return left < 0 ? 0 : left;
}

/* The time of day in UTC ("22:01:13 UTC"), so that a saved log shows when each run ended. */
static const char *clock_utc(char *buf, size_t len)
{
    const time_t t = time(NULL);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, len, "%H:%M:%S UTC", &tm))
        snprintf(buf, len, "time unknown");
    return buf;
}

static void format_duration(double s, char *buf, size_t len)
{
    const long long m = (long long)(s / 60 + 0.5);
    if (m < 1)
        snprintf(buf, len, "under a minute");
    else if (m < 60)
        snprintf(buf, len, "%lld min", m);
    else
        snprintf(buf, len, "%lld h %02lld min", m / 60, m % 60);
}

typedef struct {
    const sp_study_options *o;
    const sp_study_preset *p;
    sp_study_overrides ov;
    sp_analyze_options aopt;
    int n_planned;              /* runs as planned (a run reused by a later group counts twice) */
    sp_study_run_spec *runs;    /* the distinct runs so far, with their directories and outcomes */
    char **dirs;
    int *diverged;
    int n, cap;
    double cost_left;           /* FLOPs left of the plan */
    double assumed_rate;        /* FLOP/s until measured */
    double work_cost, work_s;   /* FLOPs done in this invocation and the seconds their runs took */
    char **tags;                /* [cap] "run k/N name" of each distinct run */
    double *cost;               /* [cap] FLOPs each distinct run had left when this invocation began it */
    int n_done;
    int jobs, threads_per_job;  /* runs at a time (workers when > 1) and OpenMP threads each */
} study_state;

/* FLOP/s of the whole study: each run's measured rate, times the runs at a time. */
static double rate_of(const study_state *s)
{
    return s->work_s > 0 ? s->work_cost / s->work_s * s->jobs : s->assumed_rate;
}

/* A run of a group that sweeps learning rates (not one at lr "best"). */
static int in_sweep(const study_state *s, int i) { return strcmp(s->p->groups[s->runs[i].group].lrs, SP_STUDY_BEST_LR) != 0; }

/* sp_study_best_lr_fn over the runs finished so far: the lr of the variant's lowest mean final
 * validation loss over seeds (and depths), among the sweeping groups' runs that did not diverge. */
static sp_status best_lr(void *ctx, const char *variant, const char *init, char *lr, size_t len)
{
    (void)init; /* a sweep at one init stands for the variant (the init claims compare at its best lr) */
    const study_state *s = ctx;
    double best = INFINITY, *val = malloc((s->n > 0 ? (size_t)s->n : 1) * sizeof *val);
    if (!val)
        return sp_error(SP_ERR_NOMEM, "study: out of memory");
    for (int i = 0; i < s->n; i++) /* each candidate's log read once: NaN for every other run */
        if (strcmp(s->runs[i].variant, variant) != 0 || s->diverged[i] || !in_sweep(s, i) ||
            sp_study_final_val_loss(s->dirs[i], &val[i]) != SP_OK)
            val[i] = NAN;
    for (int i = 0; i < s->n; i++) {
        if (!isfinite(val[i]))
            continue;
        double sum = 0;
        int count = 0;
        for (int j = 0; j < s->n; j++)
            if (isfinite(val[j]) && strcmp(s->runs[j].lr, s->runs[i].lr) == 0) {
                sum += val[j];
                count++;
            }
        if (sum / count < best) {
            best = sum / count;
            snprintf(lr, len, "%s", s->runs[i].lr);
        }
    }
    free(val);
    sp_error_clear();
    if (!isfinite(best))
        return sp_error(SP_ERR_INPUT, "study preset %s: no earlier run of %s finished without diverging, so it has no "
                        "best learning rate", s->p->name, variant);
    return SP_OK;
}

static int find_run(const study_state *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->runs[i].name, name) == 0)
            return i;
    return -1;
}

static sp_status add_run(study_state *s, const sp_study_run_spec *r)
{
    if (s->n == s->cap) {
        const int cap = s->cap ? 2 * s->cap : 16;
        void *grown; /* each array grown to cap; one that cannot be keeps its old size and contents */
#define GROW(array) ((grown = realloc((array), (size_t)cap * sizeof *(array))) != NULL && ((array) = grown, 1))
        if (!(GROW(s->runs) && GROW(s->dirs) && GROW(s->diverged) && GROW(s->tags) && GROW(s->cost)))
            return sp_error(SP_ERR_NOMEM, "study: out of memory");
#undef GROW
        s->cap = cap;
    }
    char path[4400];
    snprintf(path, sizeof path, "%s/runs/%s", s->o->out, r->name);
    if (!(s->dirs[s->n] = strdup(path)))
        return sp_error(SP_ERR_NOMEM, "study: out of memory");
    s->runs[s->n] = *r;
    s->tags[s->n] = NULL;
    s->cost[s->n] = 0;
    s->diverged[s->n++] = 0;
    return SP_OK;
}

/* Run k of the plan: *index its place among the distinct runs, *fresh 0 when an earlier group made
 * it (reused), else 1 (added). */
static sp_status begin_run(study_state *s, const sp_study_run_spec *r, int k, int *index, int *fresh)
{
    *fresh = 0;
    char tag[256];
    snprintf(tag, sizeof tag, "run %d/%d %s", k + 1, s->n_planned, r->name);
    if ((*index = find_run(s, r->name)) >= 0) {
        printf("study: %s: the same run as an earlier group's (reused)\n", tag);
        s->n_done++;
        return SP_OK;
    }
    SP_TRY(add_run(s, r));
    *index = s->n - 1;
    *fresh = 1;
    s->tags[*index] = strdup(tag);
    s->cost[*index] = share_left(s->dirs[*index], r, NULL) * run_cost(r, &s->aopt);
    return s->tags[*index] ? SP_OK : sp_error(SP_ERR_NOMEM, "study: out of memory");
}

/* Trains and analyzes distinct run i (in this process or a worker's). */
static sp_status work_run(void *ctx, int i)
{
    study_state *s = ctx;
    SP_TRY(train_run(&s->runs[i], s->dirs[i], s->tags[i], &s->diverged[i]));
    return s->diverged[i] ? SP_OK : analyze_run(&s->runs[i], &s->aopt, s->dirs[i], s->tags[i]);
}

/* After distinct run i ended, `seconds` after it began: the progress and the time left at the
 * throughput measured so far. */
static void run_done(void *ctx, int i, sp_status st, double seconds)
{
    study_state *s = ctx;
    if (st != SP_OK)
        return;
    share_left(s->dirs[i], &s->runs[i], &s->diverged[i]); /* a worker's outcome */
    s->n_done++;
    if (s->cost[i] > 0) {
        s->work_cost += s->cost[i];
        s->work_s += seconds;
    }
    s->cost_left -= s->cost[i];
    char t[32], now[32];
    format_duration((s->cost_left > 0 ? s->cost_left : 0) / rate_of(s), t, sizeof t);
    printf("study: %s: done; %d of %d runs done; time left: %s (at %.1f GFLOP/s%s; %s)\n", s->tags[i], s->n_done,
           s->n_planned, t, rate_of(s) / 1e9, s->work_s > 0 ? ", measured" : ", assumed", clock_utc(now, sizeof now));
    fflush(stdout);
}

/* While workers run: which runs, for how long, and the time left counting their progress at the
 * measured rate. */
static void runs_tick(void *ctx, int n, const int *task, const double *seconds)
{
    study_state *s = ctx;
    const double per_run = rate_of(s) / s->jobs; /* FLOP/s of one worker */
    double left = s->cost_left;
    char list[1024] = "", t[32];
    size_t used = 0;
    for (int k = 0; k < n; k++) {
        const double done = seconds[k] * per_run;
        left -= done < s->cost[task[k]] ? done : s->cost[task[k]];
        format_duration(seconds[k], t, sizeof t);
        used += (size_t)snprintf(list + used, used < sizeof list ? sizeof list - used : 0, "%s%s (%s)", k ? ", " : "",
                                 strchr(s->tags[task[k]], ' ') ? strchr(s->tags[task[k]], ' ') + 1 : s->tags[task[k]], t);
        if (used >= sizeof list)
            used = sizeof list - 1;
    }
    format_duration(left > 0 ? left / rate_of(s) : 0, t, sizeof t);
    char now[32];
    printf("study: running %s; time left: about %s (%s)\n", list, t, clock_utc(now, sizeof now));
    fflush(stdout);
}

/* Run i's cost as planned, and as left (what its directory does not hold yet). */
static double planned_cost(const study_state *s, int i) { return run_cost(&s->runs[i], &s->aopt); }
static double cost_left(const study_state *s, int i) { return s->cost[i]; }

/* The runs first[0..n) into order[0..n), largest cost first (an insertion sort: runs of equal cost
 * keep their order). */
static void order_by_cost(const study_state *s, const int *first, int n, double (*cost)(const study_state *, int),
                          int *order)
{
    for (int j = 0; j < n; j++) {
        const double c = cost(s, first[j]);
        int k = j;
        while (k > 0 && cost(s, order[k - 1]) < c) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = first[j];
    }
}

/* Under MPI, this rank's share of the distinct runs first[0..n): ordered by their planned cost,
 * largest first, dealt round-robin over the ranks (a plan-only order, the same on every rank
 * whatever each one has seen on disk), into mine[0..*n_mine). */
static void my_share(const study_state *s, const int *first, int n, int *mine, int *n_mine)
{
    const int ranks = sp_mpi_size(), rank = sp_mpi_rank();
    int *order = mine; /* sorted in place, then compacted: position j goes to rank j % ranks */
    order_by_cost(s, first, n, planned_cost, order);
    *n_mine = 0;
    for (int j = 0; j < n; j++)
        if (j % ranks == rank)
            mine[(*n_mine)++] = order[j];
}

/* The distinct runs first[0..n) of a group: in this process one after another, or by s->jobs
 * workers at a time, the costliest first; under MPI only this rank's share of them. */
static sp_status work_group(study_state *s, const int *first, int n)
{
    sp_status st = SP_OK;
    int *mine = NULL;
    if (sp_mpi_size() > 1) {
        if (!(mine = malloc((size_t)(n ? n : 1) * sizeof *mine)))
            return sp_error(SP_ERR_NOMEM, "study: out of memory");
        my_share(s, first, n, mine, &n);
        first = mine;
    }
    if (s->jobs <= 1) {
        for (int j = 0; j < n && st == SP_OK; j++) {
            const double t0 = sp_clock_seconds();
            st = work_run(s, first[j]);
            run_done(s, first[j], st, sp_clock_seconds() - t0);
        }
        free(mine);
        return st;
    }
    int *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!order) {
        free(mine);
        return sp_error(SP_ERR_NOMEM, "study: out of memory");
    }
    order_by_cost(s, first, n, cost_left, order);
    st = sp_workers_run(n, order, s->jobs, s->threads_per_job, work_run, run_done, runs_tick, TICK_SECONDS, s);
    free(order);
    free(mine);
    return st;
}

/* Under MPI every rank reaches this once per group, whatever happened to it: the group's status
 * agreed (the worst), so that no rank waits for one that stopped; a rank whose own work went well
 * names the failure as another's. Then every run of the group is read back from its directory: the
 * other ranks' outcomes (diverged or not), which the summary and the later groups need. */
static sp_status agree(study_state *s, sp_status st, const int *fresh, int n_fresh)
{
    if (sp_mpi_size() <= 1)
        return st;
    const int worst = sp_mpi_max_int((int)st);
    if (worst != SP_OK && st == SP_OK)
        st = sp_error((sp_status)worst, "study: another rank failed (its error is on its standard error); run the "
                                        "same command again to continue");
    for (int j = 0; j < n_fresh && st == SP_OK; j++)
        share_left(s->dirs[fresh[j]], &s->runs[fresh[j]], &s->diverged[fresh[j]]);
    return st;
}

/* Every run of the plan, in order (free() *planned): "best" learning rates resolved from the runs
 * earlier invocations finished where they can be, "best" left in the name where not yet. */
static sp_status expand_plan(study_state *s, sp_study_run_spec **planned, int *n_planned)
{
    *planned = NULL;
    *n_planned = 0;
    sp_status st = SP_OK;
    for (int g = 0; g < sp_study_n_groups(s->p) && st == SP_OK; g++) {
        sp_study_run_spec *runs = NULL;
        int n = 0;
        st = sp_study_expand_group(s->p, g, &s->ov, best_lr, s, &runs, &n);
        if (st == SP_ERR_INPUT) { /* no finished sweep yet */
            sp_error_clear();
            st = sp_study_expand_group(s->p, g, &s->ov, NULL, NULL, &runs, &n);
        }
        sp_study_run_spec *all = st == SP_OK ? realloc(*planned, (size_t)(*n_planned + n) * sizeof *all) : NULL;
        if (st == SP_OK && !all)
            st = sp_error(SP_ERR_NOMEM, "study: out of memory");
        for (int j = 0; j < n && st == SP_OK; j++) {
            all[*n_planned + j] = runs[j];
            if (find_run(s, runs[j].name) < 0 && strcmp(runs[j].lr, SP_STUDY_BEST_LR) != 0 &&
                (st = add_run(s, &runs[j])) == SP_OK) { /* known to best_lr for the later groups */
                int diverged = 0;
                share_left(s->dirs[s->n - 1], &runs[j], &diverged);
                s->diverged[s->n - 1] = diverged;
            }
        }
        if (all) {
            *planned = all;
            *n_planned += n;
        }
        free(runs);
    }
    return st;
}

/* A planned run at lr "best" that an earlier group sweeping the same variant, init, depth and seed
 * already makes (its best rate is one of that group's): it costs nothing more. */
static int repeats_earlier(const sp_study_run_spec *planned, int k)
{
    const sp_study_run_spec *r = &planned[k];
    if (strcmp(r->lr, SP_STUDY_BEST_LR) != 0)
        return 0;
    for (int i = 0; i < k; i++) {
        const sp_study_run_spec *e = &planned[i];
        if (e->group != r->group && strcmp(e->lr, SP_STUDY_BEST_LR) != 0 && strcmp(e->variant, r->variant) == 0 &&
            strcmp(e->init, r->init) == 0 && e->cfg.n_layers == r->cfg.n_layers && e->opt.seed == r->opt.seed)
            return 1;
    }
    return 0;
}

/* The plan's cost and the rate assumed until measured; printed by rank 0 (the only one under MPI).
 * A run's time is at one worker's share of the rate; the total counts each distinct run once. */
static void print_plan(study_state *s, const sp_study_run_spec *planned)
{
    const int say = sp_mpi_rank() == 0;
    const int cuda = planned[0].opt.device == SP_DEVICE_CUDA;
    s->assumed_rate = cuda ? ASSUMED_GPU_FLOPS : ASSUMED_CPU_FLOPS_PER_THREAD * s->jobs * s->threads_per_job;
    if (say)
        printf("study %s: %d runs into %s, %d at a time with %d thread%s each%s (interrupted? run the same command "
               "again to continue)\n", s->p->name, s->n_planned, s->o->out, s->jobs, s->threads_per_job,
               s->threads_per_job > 1 ? "s" : "", sp_mpi_size() > 1 ? " on each MPI rank" : "");
    double total = 0;
    for (int k = 0; k < s->n_planned; k++) {
        const sp_study_run_spec *r = &planned[k];
        char dir[4400], t[32];
        snprintf(dir, sizeof dir, "%s/runs/%s", s->o->out, r->name);
        const int repeat = repeats_earlier(planned, k);
        const double left = repeat ? 0 : strcmp(r->lr, SP_STUDY_BEST_LR) == 0 ? 1 : share_left(dir, r, NULL);
        const double cost = run_cost(r, &s->aopt);
        total += left * cost;
        format_duration(cost / (s->assumed_rate / s->jobs), t, sizeof t);
        if (say)
            printf("  %2d. %-34s group %d, %3d layers, d_model %d, %lld steps: %s%s\n", k + 1, r->name, r->group + 1,
                   r->cfg.n_layers, r->cfg.d_model, (long long)r->opt.steps,
                   repeat ? "an earlier group's run at the best lr" : left == 0 ? "done earlier" : t,
                   left > 0 && left < 1 ? " (partly done)" : "");
    }
    s->cost_left = total;
    char t[32];
    format_duration(total / s->assumed_rate, t, sizeof t);
    if (say)
        printf("study %s: estimated time left: %s (at an assumed %.0f GFLOP/s%s; refined as runs finish)%s\n",
               s->p->name, t, s->assumed_rate / 1e9, cuda ? " on the GPU" : " on the CPU threads",
               sp_study_n_groups(s->p) > 1 ? "; runs at lr 'best' take their variant's best learning rate from the "
                                             "earlier groups" : "");
    fflush(stdout);
}

static sp_status run_all(study_state *s)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/runs", s->o->out);
    SP_TRY(sp_make_dirs(s->o->out));
    SP_TRY(sp_make_dirs(path));
    const int n_groups = sp_study_n_groups(s->p);
    const char **members[SP_STUDY_MAX_GROUPS] = {NULL}; /* each group's run directories, reused ones included */
    int n_members[SP_STUDY_MAX_GROUPS] = {0}, k = 0;
    sp_status st = SP_OK;
    for (int g = 0; g < n_groups && st == SP_OK; g++) {
        sp_study_run_spec *runs;
        int n;
        if ((st = sp_study_expand_group(s->p, g, &s->ov, best_lr, s, &runs, &n)) != SP_OK)
            break;
        int *fresh = malloc((size_t)(n ? n : 1) * sizeof *fresh), n_fresh = 0;
        members[g] = malloc((size_t)(n ? n : 1) * sizeof *members[g]);
        if (!fresh || !members[g])
            st = sp_error(SP_ERR_NOMEM, "study: out of memory");
        for (int j = 0; j < n && st == SP_OK; j++) {
            int index, is_fresh;
            st = begin_run(s, &runs[j], k++, &index, &is_fresh);
            if (st == SP_OK && is_fresh)
                fresh[n_fresh++] = index;
            if (st == SP_OK)
                members[g][n_members[g]++] = s->dirs[index];
        }
        if (st == SP_OK)
            st = work_group(s, fresh, n_fresh);
        st = agree(s, st, fresh, n_fresh);
        free(fresh);
        free(runs);
    }
    if (st == SP_OK && sp_mpi_rank() > 0) { /* rank 0 draws and sums up, once every rank is done */
        for (int g = 0; g < n_groups; g++)
            free(members[g]);
        return SP_OK;
    }
    if (st == SP_OK)
        st = draw(s->o, NULL, s->n, (const char *const *)s->dirs);
    for (int g = 0; g < n_groups && n_groups > 1 && st == SP_OK; g++)
        st = draw(s->o, s->p->groups[g].name, n_members[g], members[g]);
    for (int g = 0; g < n_groups; g++)
        free(members[g]);
    SP_TRY(st);
    return sp_study_write_summary(s->o->out, s->p->name, s->n, s->runs, (const char *const *)s->dirs, s->diverged);
}

/* A GPU this build could use: CUDA compiled in and NVIDIA's driver loaded (asked without starting
 * CUDA, which a worker forked afterwards could not use). */
static int gpu_possible(void)
{
#ifdef SP_HAVE_CUDA
    return access("/proc/driver/nvidia/version", F_OK) == 0;
#else
    return 0;
#endif
}

/* --jobs 0: on the CPU one run per OpenMP thread (small models use one core better than two), one
 * run at a time where a GPU may be used; the threads shared out among the jobs. */
static void choose_jobs(const sp_study_options *o, int *jobs, int *threads)
{
    const int max_threads = omp_get_max_threads();
    const int on_gpu = o->device ? strcmp(o->device, "cuda") == 0 || (strcmp(o->device, "auto") == 0 && gpu_possible())
                                 : gpu_possible();
    *jobs = o->jobs > 0 ? o->jobs : on_gpu ? 1 : max_threads;
    *threads = max_threads / *jobs > 1 ? max_threads / *jobs : 1;
}

sp_status sp_study_run(const sp_study_options *o)
{
    const char *name = o->preset ? o->preset : "quick";
    const sp_study_preset *p = sp_study_find_preset(name);
    if (!p) {
        char names[256] = "";
        for (int i = 0; i < sp_study_n_presets; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", sp_study_presets[i].name);
        return sp_error(SP_ERR_USAGE, "--preset: unknown preset '%s' (expected one of: %s)", name, names);
    }
    if (!o->out || !*o->out)
        return sp_error(SP_ERR_USAGE, "expected --out DIR");
    if (o->scale < 0 || o->scale > 64)
        return sp_error(SP_ERR_USAGE, "--scale: %d is out of range (expected 1 to 64)", o->scale);
    study_state s = {.o = o, .p = p, .ov = {o->data, o->device, o->lrs, o->seeds, o->scale}};
    choose_jobs(o, &s.jobs, &s.threads_per_job);
    SP_TRY(sp_study_analyze_options(p, &s.aopt));
    sp_study_run_spec *planned;
    sp_status st = expand_plan(&s, &planned, &s.n_planned);
    for (int k = 0; k < s.n; k++) { /* the plan's runs; run_all adds them again as it makes them */
        free(s.dirs[k]);
        free(s.tags[k]);
    }
    s.n = 0;
    if (st == SP_OK && !file_exists(planned[0].opt.data))
        st = sp_error(SP_ERR_IO, "%s: no such file (the default corpus: `make data`; or give --data FILE)",
                      planned[0].opt.data);
    if (st == SP_OK) {
        print_plan(&s, planned);
        st = run_all(&s);
    }
    free(planned);
    for (int k = 0; k < s.n; k++) {
        free(s.dirs[k]);
        free(s.tags[k]);
    }
    free(s.dirs);
    free(s.tags);
    free(s.cost);
    free(s.diverged);
    free(s.runs);
    return st;
}

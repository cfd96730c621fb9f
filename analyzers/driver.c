#include "analyzers/driver.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "analyzers/autoscale.h"
#include "analyzers/evalset.h"
#include "analyzers/model_eval.h"
#include "analyzers/pass.h"
#include "analyzers/progress.h"
#include "analyzers/ranks.h"
#include "analyzers/report_csv.h"
#include "analyzers/train_state.h"
#include "core/mpi.h"
#include "io/checkpoint.h"
#include "io/config_file.h"
#include "io/dirs.h"
#include "io/h5.h"
#include "io/model_source.h"

double sp_analyze_peak_rss_mib(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_maxrss / 1024.0; /* Linux reports KiB */
}

sp_status sp_analyze_select(const char *metrics, unsigned char *selected)
{
    for (int i = 0; i < sp_n_analyzers; i++)
        selected[i] = !metrics[0] && !sp_analyzers[i]->opt_in;
    const char *p = metrics;
    while (*p) {
        size_t len = strcspn(p, ",");
        int found = 0;
        for (int i = 0; i < sp_n_analyzers; i++)
            if (strlen(sp_analyzers[i]->name) == len && strncmp(sp_analyzers[i]->name, p, len) == 0)
                selected[i] = found = 1;
        if (!found) {
            char names[1024] = "";
            for (int i = 0; i < sp_n_analyzers; i++) {
                strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
                strncat(names, sp_analyzers[i]->name, sizeof names - strlen(names) - 1);
            }
            return sp_error(SP_ERR_USAGE, "--metrics: unknown analyzer '%.*s' (expected a comma-separated list of %s)",
                            (int)len, p, names);
        }
        p += len + (p[len] == ',');
    }
    return SP_OK;
}

/* Why the input cannot serve the analyzer, or NULL when it can. */
static const char *unmet_need(const sp_analysis *a, const sp_analyzer *an)
{
    if ((an->needs & SP_NEEDS_MODEL) && !a->model)
        return "needs the model's weights and its own forward/backward passes; the input is an activation dump";
    if ((an->needs & SP_NEEDS_LATENTS) && !a->has_latents)
        return "the input has no FFN latents (the dump has no /ffn_latent)";
    if ((an->needs & SP_NEEDS_PRESUMS) && !a->has_presums)
        return "the input has no pre-normalization sums (sum_a, sum_z)";
    return NULL;
}

/* ---- stage 3: begin, one pass, finish ---- */

typedef struct {
    int n;
    const sp_analyzer *const *list; /* sp_analyzers */
    void **state;                    /* [n]; active analyzers with state */
    unsigned char *active;           /* [n] */
    double *seconds_pass, *seconds_finish; /* [n] */
    double *peak_finish_mib;               /* [n]: backend memory peak during each finish() */
    double peak_pass_mib, peak_mib;        /* during the pass (begin() included); of the whole run */
    int stream_batch;                      /* sequences per batch of the streaming pass (stream_batch()) */
} run_state;

/* The backend's memory peak since the last call, MiB, folded into the run's; then a new window. */
static double take_peak_mib(const sp_backend *be, run_state *rs)
{
    size_t in_use, peak;
    be->mem_stats(&in_use, &peak);
    be->mem_reset_peak();
    const double mib = (double)peak / 1048576.0;
    if (mib > rs->peak_mib)
        rs->peak_mib = mib;
    return mib;
}

static sp_status consume_all(const sp_analysis *a, void *ctx, const sp_act_batch *b)
{
    run_state *rs = ctx;
    for (int i = 0; i < rs->n; i++) {
        if (!rs->active[i] || !rs->list[i]->consume)
            continue;
        double t0 = sp_clock_seconds();
        SP_TRY(rs->list[i]->consume(a, rs->state[i], b));
        a->be->sync();
        rs->seconds_pass[i] += sp_clock_seconds() - t0;
    }
    return SP_OK;
}

/* Why the backend's peak can exceed the process's: a note for the stage table, "" when it does not. */
static const char *backend_vs_rss(const sp_backend *be, double backend_mib, double rss_mib)
{
    if (be != sp_backend_cpu())
        return "; the backend's memory is the device's, not part of it";
    if (backend_mib > rss_mib)
        return "; below the backend's peak: pages allocated but never written (zeroed workspaces, unused "
               "capacity) are not resident";
    return "";
}

/* The summary group "run": sizes, stage times, peak memory; and the stage table on stdout. */
static sp_status record_run(const sp_analysis *a, const run_state *rs, double seconds_load, double seconds_input,
                            double seconds_total, int quiet)
{
    sp_report *r = a->report;
    const double peak_rss = sp_analyze_peak_rss_mib();
    const struct {
        const char *key;
        double value;
    } sizes[] = {
        {"n_seqs", a->n_seqs},
        {"seq_len", a->seq_len},
        {"n_tokens", (double)a->n_seqs * a->seq_len},
        {"batch", a->batch},
        {"stream_batch", rs->stream_batch},
        {"model_batch", a->model_batch},
        {"seconds_load", seconds_load},
        {"seconds_input", seconds_input},
        {"peak_backend_mib_pass", rs->peak_pass_mib},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(sizes); i++)
        SP_TRY(sp_report_set_scalar(r, "run", sizes[i].key, sizes[i].value));
    if (!quiet)
        printf("%-34s %8s %10s\n%-34s %8.3f\n%-34s %8.3f %10.1f\n", "stage", "seconds", "peak MiB",
               "input: load, hash, check", seconds_load, a->model ? "forward passes (and begin)" : "dump reads (and begin)",
               seconds_input, rs->peak_pass_mib);
    for (int i = 0; i < rs->n; i++) {
        if (!rs->active[i])
            continue;
        const char *name = rs->list[i]->name;
        char key[160];
        if (rs->list[i]->consume) { /* streaming analyzers: their share of the pass */
            snprintf(key, sizeof key, "seconds_pass_%s", name);
            SP_TRY(sp_report_set_scalar(r, "run", key, rs->seconds_pass[i]));
            if (!quiet)
                printf("%-20s %-13s %8.3f\n", name, "(pass)", rs->seconds_pass[i]);
        }
        snprintf(key, sizeof key, "seconds_finish_%s", name);
        SP_TRY(sp_report_set_scalar(r, "run", key, rs->seconds_finish[i]));
        snprintf(key, sizeof key, "peak_backend_mib_finish_%s", name);
        SP_TRY(sp_report_set_scalar(r, "run", key, rs->peak_finish_mib[i]));
        if (!quiet)
            printf("%-20s %-13s %8.3f %10.1f\n", name, "(finish)", rs->seconds_finish[i], rs->peak_finish_mib[i]);
    }
    if (sp_analysis_n_ranks(a) > 1) { /* what the sums over the ranks moved (docs/scaling.md) */
        SP_TRY(sp_report_set_scalar(r, "run", "mpi_ranks", sp_analysis_n_ranks(a)));
        SP_TRY(sp_report_set_scalar(r, "run", "mpi_mib_moved", sp_mpi_bytes_moved() / 1048576.0));
        if (!quiet)
            printf("MPI: %d ranks, each a share of the evaluation batches; rank 0 moved %.1f MiB through the sums "
                   "and gathers over the ranks (its values in, the results out)\n",
                   sp_analysis_n_ranks(a), sp_mpi_bytes_moved() / 1048576.0);
    }
    SP_TRY(sp_report_set_scalar(r, "run", "seconds_total", seconds_total));
    SP_TRY(sp_report_set_scalar(r, "run", "peak_backend_mib", rs->peak_mib));
    SP_TRY(sp_report_set_scalar(r, "run", "peak_rss_mib", peak_rss));
    if (!quiet)
        printf("%-34s %8.3f\npeak %s memory: %.1f MiB (allocated through the backend: weights, activations, "
               "accumulators, solver workspaces)\npeak memory: %.1f MiB (maximum resident set size of the process)%s\n",
               "total", seconds_total, a->be->name, rs->peak_mib, peak_rss, backend_vs_rss(a->be, rs->peak_mib, peak_rss));
    if (a->model) { /* the two parts of the peak that the model's size sets */
        const double weights = (double)sp_model_n_weights(a->model) * sizeof(sp_real) / 1048576.0;
        const double acts = (double)sp_model_activation_bytes(a->model, a->batch, a->seq_len) / 1048576.0;
        SP_TRY(sp_report_set_scalar(r, "run", "weights_mib", weights));
        SP_TRY(sp_report_set_scalar(r, "run", "activations_mib", acts));
        if (!quiet)
            printf("model: %.1f MiB of weights, %.1f MiB of activations for a pass of %d x %d tokens\n", weights, acts,
                   a->batch, a->seq_len);
    }
    if (rs->peak_mib > a->opts->max_memory_gib * 1024)
        fprintf(stderr, "analyze: warning: the peak backend memory %.1f MiB exceeded --max-memory-gib %g\n", rs->peak_mib,
                a->opts->max_memory_gib);
    return SP_OK;
}

/* Records the selected analyzers the input cannot serve as skipped and deactivates them. */
static sp_status skip_unmet(const sp_analysis *a, run_state *rs, int quiet)
{
    for (int i = 0; i < rs->n; i++) {
        const char *reason = rs->active[i] ? unmet_need(a, rs->list[i]) : NULL;
        if (!reason)
            continue;
        rs->active[i] = 0;
        SP_TRY(sp_report_skip(a->report, rs->list[i]->name, reason));
        if (!quiet)
            fprintf(stderr, "analyze: skipped %s: %s\n", rs->list[i]->name, reason);
    }
    return SP_OK;
}

static size_t backend_in_use(const sp_backend *be)
{
    size_t in_use, peak;
    be->mem_stats(&in_use, &peak);
    return in_use;
}

/* begin() of every active analyzer; *load gets the streaming analyzers' needs, *accumulators the
 * backend bytes their states hold. */
static sp_status begin_all(const sp_analysis *a, run_state *rs, unsigned *load, int *n_consumers,
                           size_t *accumulators)
{
    const size_t before = backend_in_use(a->be);
    *load = 0;
    *n_consumers = 0;
    for (int i = 0; i < rs->n; i++) {
        const sp_analyzer *an = rs->list[i];
        if (!rs->active[i])
            continue;
        if (an->begin)
            SP_TRY(an->begin(a, &rs->state[i]));
        if (an->consume) {
            *load |= an->needs;
            (*n_consumers)++;
        }
    }
    *accumulators = backend_in_use(a->be) - before;
    return SP_OK;
}

static void discard_all(run_state *rs)
{
    for (int i = 0; i < rs->n; i++)
        if (rs->state[i] && rs->list[i]->discard)
            rs->list[i]->discard(rs->state[i]);
    memset(rs->state, 0, (size_t)rs->n * sizeof *rs->state);
}

/* The streaming pass holds every streaming analyzer's accumulators (a d_ff x d_ff covariance per
 * block, a d x d cross-product per pair of layers, ...) on top of its forward pass. Its batch is the
 * largest, up to the chosen one, with which both together stay within what one training step of the
 * chosen batch holds besides the weights: the parameter gradients and the activations of a forward +
 * backward pass, which the gradient analyzers take anyway. So the analysis needs no more memory than
 * a training step (docs/analyze.md, "Memory"). Results do not depend on it: every token is still
 * accumulated once. */
static int stream_batch(sp_analysis *a, size_t accumulators)
{
    const size_t budget = sp_model_activation_bytes(a->model, a->batch, a->seq_len) +
                          sp_model_n_weights(a->model) * sizeof(sp_real);
    int b = a->batch;
    while (b > 1 && sp_model_activation_bytes(a->model, b, a->seq_len) + accumulators > budget)
        b--;
    return b;
}

/* The analyzers that drive the model themselves (gradients, pruning) hold the parameter gradients
 * beside their passes' activations. Their passes take the largest number of sequences, up to the
 * chosen batch, at which both together stay within the activations of one pass of the chosen batch,
 * so that no stage of the analysis needs more than the weights and one such pass (docs/analyze.md,
 * "Memory"). Losses and gradients are still those of each batch (analyzers/model_eval.h). */
static int model_batch(sp_analysis *a)
{
    const size_t budget = sp_model_activation_bytes(a->model, a->batch, a->seq_len);
    const size_t gradients = sp_model_n_weights(a->model) * sizeof(sp_real);
    int b = a->batch;
    while (b > 1 && sp_model_activation_bytes(a->model, b, a->seq_len) + gradients > budget)
        b--;
    return b;
}

/* 1 when an active analyzer runs passes over the evaluation set of its own. */
static int drives_model(const run_state *rs)
{
    for (int i = 0; i < rs->n; i++)
        if (rs->active[i] && (rs->list[i]->needs & SP_NEEDS_EVAL_PASSES))
            return 1;
    return 0;
}

static sp_status execute(sp_analysis *a, run_state *rs, int quiet)
{
    const double seconds_load = sp_clock_seconds() - a->t_start;
    unsigned load;
    int n_consumers;
    size_t accumulators;
    take_peak_mib(a->be, rs); /* loading the input */
    SP_TRY(skip_unmet(a, rs, quiet));
    SP_TRY(begin_all(a, rs, &load, &n_consumers, &accumulators));
    const int batch = a->batch;
    rs->stream_batch = a->model && n_consumers ? stream_batch(a, accumulators) : batch;
    if (rs->stream_batch < batch) { /* begin again: the states' buffers are sized by the batch */
        if (!quiet)
            fprintf(stderr, "analyze: streaming pass in batches of %d sequence(s) instead of %d, so that the analyzers' "
                            "accumulators (%.1f MiB) fit beside it in the memory of a training step\n",
                    rs->stream_batch, batch, (double)accumulators / 1048576.0);
        discard_all(rs);
        a->batch = rs->stream_batch;
        SP_TRY(begin_all(a, rs, &load, &n_consumers, &accumulators));
    }
    /* every rank takes its first batch's column means from rank 0's (analyzers/ranks.h) */
    const int n_batches = sp_eval_n_batches(a);
    if (n_consumers && sp_analysis_n_ranks(a) > n_batches)
        return sp_error(SP_ERR_USAGE, "%d MPI ranks share a streaming pass of %d batch(es) of %d sequence(s): run at "
                        "most %d ranks, or give each fewer sequences (--batch) or more (--n-tokens)",
                        sp_analysis_n_ranks(a), n_batches, a->batch, n_batches);
    a->model_batch = a->model ? model_batch(a) : batch;
    if (a->model_batch < batch && !quiet && drives_model(rs))
        fprintf(stderr, "analyze: gradient and pruning passes of %d sequence(s) instead of %d, so that the parameter "
                        "gradients (%.1f MiB) fit beside them in the memory of one pass\n",
                a->model_batch, batch, (double)(sp_model_n_weights(a->model) * sizeof(sp_real)) / 1048576.0);
    struct sp_pass pass;
    SP_TRY(sp_pass_init(&pass, a, load, quiet));
    a->pass = &pass;
    sp_status st = n_consumers ? sp_pass_run(a, "streaming pass, batch", consume_all, rs) : SP_OK;
    rs->peak_pass_mib = take_peak_mib(a->be, rs);
    for (int i = 0; i < rs->n && st == SP_OK; i++) {
        if (!rs->active[i])
            continue;
        if (!quiet)
            fprintf(stderr, "analyze: %s\n", rs->list[i]->name);
        double t0 = sp_clock_seconds();
        if (a->model) /* each stage holds the activations of its own passes only, not a larger earlier one's */
            sp_model_release_activations(a->model);
        void *state = rs->state[i];
        rs->state[i] = NULL; /* finish frees it whatever the outcome */
        /* streaming analyzers finish (and replay) at their pass's batch, the others run their own passes */
        a->batch = rs->list[i]->consume ? rs->stream_batch : batch;
        st = rs->list[i]->finish(a, state);
        if (st != SP_OK)
            sp_error_context("%s", rs->list[i]->name);
        a->be->sync();
        rs->seconds_finish[i] = sp_clock_seconds() - t0;
        rs->peak_finish_mib[i] = take_peak_mib(a->be, rs);
    }
    a->batch = batch;
    double seconds_input = pass.seconds_input;
    a->pass = NULL;
    sp_pass_free(&pass);
    if (st == SP_OK)
        st = record_run(a, rs, seconds_load, seconds_input, sp_clock_seconds() - a->t_start, quiet);
    return st;
}

sp_status sp_analyze_execute(sp_analysis *a, const unsigned char *selected, int quiet)
{
    if (a->t_start <= 0)
        a->t_start = sp_clock_seconds();
    int n = sp_n_analyzers;
    run_state rs = {.n = n, .list = sp_analyzers};
    rs.state = sp_calloc((size_t)n, sizeof *rs.state, "analyzer states");
    rs.active = sp_malloc((size_t)n, "analyzer states");
    rs.seconds_pass = sp_calloc((size_t)n, sizeof(double), "analyzer times");
    rs.seconds_finish = sp_calloc((size_t)n, sizeof(double), "analyzer times");
    rs.peak_finish_mib = sp_calloc((size_t)n, sizeof(double), "analyzer memory peaks");
    sp_status st = rs.state && rs.active && rs.seconds_pass && rs.seconds_finish && rs.peak_finish_mib ? SP_OK
                                                                                                        : SP_ERR_NOMEM;
    if (st == SP_OK) {
        memcpy(rs.active, selected, (size_t)n);
        st = execute(a, &rs, quiet);
    }
    if (rs.state)
        discard_all(&rs);
    free(rs.state);
    free(rs.active);
    free(rs.seconds_pass);
    free(rs.seconds_finish);
    free(rs.peak_finish_mib);
    return st;
}

/* ---- stages 1, 2 and 4 ---- */

typedef struct loaded_input loaded_input;
static sp_status skip_positions(const sp_analyze_job *job, loaded_input *in, sp_analysis *a);

struct loaded_input {
    sp_model *model;
    sp_ckpt_meta meta;
    sp_dump *dump;
    int32_t *dump_tokens;
    sp_eval_set eval;
    char eval_desc[2048];
};

/* --skip-positions N: the streaming pass keeps positions N.. of each sequence (analyzers/pass.c),
 * and the first N targets of each sequence become -1, so the losses leave them out too. */
static sp_status skip_positions(const sp_analyze_job *job, loaded_input *in, sp_analysis *a)
{
    const int skip = job->opts.skip_positions;
    if (skip >= a->seq_len)
        return sp_error(SP_ERR_USAGE, "--skip-positions %d leaves nothing of sequences of %d tokens (expected 0..%d)",
                        skip, a->seq_len, a->seq_len - 1);
    a->skip_positions = skip;
    for (int s = 0; in->eval.targets && s < in->eval.n_seqs; s++)
        for (int t = 0; t < skip; t++)
            in->eval.targets[(size_t)s * a->seq_len + (size_t)t] = -1;
    return SP_OK;
}

static void loaded_free(loaded_input *in)
{
    sp_model_free(in->model);
    sp_ckpt_meta_free(&in->meta);
    sp_dump_close(in->dump);
    free(in->dump_tokens);
    sp_eval_set_free(&in->eval);
}

/* The format attribute of an HDF5 input. */
static sp_status input_format(const char *path, char *format, size_t len)
{
    hid_t file;
    SP_TRY(sp_h5_open(path, &file));
    int major, minor;
    sp_status st = sp_h5_read_format(file, format, len, &major, &minor);
    H5Fclose(file);
    return st;
}

/* job->opts's options not given are resolved from the model's size (analyzers/autoscale.h). */
static sp_status load_checkpoint(sp_analyze_job *job, const sp_backend *be, loaded_input *in, sp_analysis *a)
{
    SP_TRY(sp_model_source_load(job->input, be, &in->model, &in->meta));
    const sp_config *cfg = &in->meta.cfg;
    int seq_len = job->opts.seq_len ? job->opts.seq_len : (cfg->max_seq_len < 256 ? cfg->max_seq_len : 256);
    if (seq_len > cfg->max_seq_len)
        return sp_error(SP_ERR_USAGE, "--seq-len %d is longer than the model's max_seq_len %d", seq_len,
                        cfg->max_seq_len);
    sp_analyze_options_resolve(&job->opts, cfg, seq_len);
    /* without a stored tokenizer meta holds the bytes one, right for a vocabulary of 256 */
    const sp_tokenizer *tok = in->meta.has_tokenizer || cfg->vocab_size == 256 ? &in->meta.tokenizer : NULL;
    const char *data = job->tokens ? NULL : job->data ? job->data : SP_ANALYZE_DEFAULT_DATA;
    SP_TRY(sp_eval_set_load(data, job->tokens, tok, cfg->vocab_size, seq_len, job->opts.n_tokens,
                            (uint64_t)job->opts.seed, &in->eval));
    snprintf(in->eval_desc, sizeof in->eval_desc, "%s", in->eval.description);
    *a = (sp_analysis){.be = be, .model = in->model, .n_layers = cfg->n_layers,
                       .n_streams = sp_config_n_streams(cfg), .d_model = cfg->d_model, .d_ff = cfg->d_ff,
                       .vocab_size = cfg->vocab_size, .has_latents = 1,
                       .has_presums = sp_config_has_slot(cfg, "sum_a") || sp_config_has_slot(cfg, "sum_z"),
                       .tokens = in->eval.tokens, .targets = in->eval.targets, .n_seqs = in->eval.n_seqs,
                       .seq_len = seq_len};
    return SP_OK;
}

static sp_status load_dump(sp_analyze_job *job, const sp_backend *be, loaded_input *in, sp_analysis *a)
{
    sp_analyze_options_resolve(&job->opts, NULL, 0);
    if (job->data || job->tokens)
        return sp_error(SP_ERR_USAGE, "%s is an activation dump: it brings its own tokens (drop --%s)", job->input,
                        job->data ? "data" : "tokens");
    SP_TRY(sp_dump_open(job->input, &in->dump));
    const sp_dump_info *info = sp_dump_get_info(in->dump);
    if (job->opts.seq_len && job->opts.seq_len != info->seq_len)
        return sp_error(SP_ERR_USAGE, "--seq-len %d differs from the dump's seq_len %d (a dump has its own)",
                        job->opts.seq_len, info->seq_len);
    in->dump_tokens = sp_malloc((size_t)sp_dump_rows(in->dump) * sizeof *in->dump_tokens, "dump tokens");
    if (!in->dump_tokens)
        return SP_ERR_NOMEM;
    SP_TRY(sp_dump_read_tokens(in->dump, in->dump_tokens));
    int64_t wanted = (job->opts.n_tokens + info->seq_len - 1) / info->seq_len;
    int n_seqs = wanted < info->batch ? (int)wanted : info->batch;
    snprintf(in->eval_desc, sizeof in->eval_desc, "activation dump: its first %d of %d sequences of %d tokens%s "
             "(source: %s)", n_seqs, info->batch, info->seq_len,
             wanted > info->batch ? " (fewer than the requested n_tokens)" : "", info->source);
    *a = (sp_analysis){.be = be, .dump = in->dump, .n_layers = info->n_layers, .n_streams = info->n_streams,
                       .d_model = info->d_model, .d_ff = info->d_ff, .vocab_size = info->vocab_size,
                       .has_latents = info->has_ffn_latent, .has_presums = info->has_sum_a || info->has_sum_z,
                       .tokens = in->dump_tokens, .n_seqs = n_seqs, .seq_len = info->seq_len};
    return SP_OK;
}

/* Every option of the run as a JSON object text (free()). */
static char *options_json(const sp_analyze_job *job, const char *input_kind)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "input", job->input);
    cJSON_AddStringToObject(o, "input_kind", input_kind);
    cJSON_AddStringToObject(o, "device", job->backend->name);
    if (job->tokens)
        cJSON_AddStringToObject(o, "tokens", job->tokens);
    else if (strcmp(input_kind, "activation dump") != 0)
        cJSON_AddStringToObject(o, "data", job->data ? job->data : SP_ANALYZE_DEFAULT_DATA);
    sp_fields_to_json(&sp_analyze_option_table, &job->opts, o);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

/* Cuts the sequences per pass so that the model's activations fit the budget (model_eval.h). */
static sp_status fit_batch(sp_analysis *a, int quiet)
{
    const int fit = sp_eval_fit_copies(a, a->batch, a->seq_len);
    const double need = (double)sp_model_activation_bytes(a->model, fit ? fit : 1, a->seq_len) / 1048576.0;
    if (fit == 0)
        return sp_error(SP_ERR_NOMEM, "the activations of one sequence of %d tokens take %.3g MiB, more than half of "
                                      "--max-memory-gib %g (raise it or lower --seq-len)",
                        a->seq_len, need, a->opts->max_memory_gib);
    if (fit < a->batch && !quiet)
        fprintf(stderr, "analyze: %d sequence(s) per pass instead of %d, so the activations (%.3g MiB) fit in half of "
                        "--max-memory-gib %g\n",
                fit, a->batch, need, a->opts->max_memory_gib);
    a->batch = fit;
    return SP_OK;
}

/* Runs the analyzers into the report, which joins outputs uncommitted; *report_tmp gets its
 * temporary path. */
static sp_status run_loaded(const sp_analyze_job *job, const unsigned char *selected, const char *kind,
                            loaded_input *in, sp_analysis *a, sp_output_set *outputs, const char **report_tmp)
{
    a->opts = &job->opts;
    a->quiet = job->quiet;
    a->batch = job->opts.batch < a->n_seqs ? job->opts.batch : a->n_seqs;
    SP_TRY(skip_positions(job, in, a));
    if (a->model)
        SP_TRY(fit_batch(a, job->quiet));
    char *opts = options_json(job, kind);
    if (!opts)
        return sp_error(SP_ERR_NOMEM, "out of memory writing the options");
    char model_name[512];
    sp_model_source_name(job->input, model_name, sizeof model_name);
    const char *source = in->dump ? sp_dump_get_info(in->dump)->source : "";
    sp_report_provenance prov = {.input_path = job->input, .options_json = opts, .eval_set = in->eval_desc,
                                 .model = *source ? source : model_name};
    a->rank = job->n_ranks > 1 ? job->rank : 0;
    a->n_ranks = job->n_ranks > 1 ? job->n_ranks : 1;
    /* the other ranks compute what rank 0 writes: their report is the NULL sink */
    sp_status st = a->rank == 0 ? sp_report_create(job->out, &prov, &a->report) : SP_OK;
    free(opts);
    SP_TRY(st);
    if (!job->quiet)
        fprintf(stderr, "analyze: %s (%s), %d layers x %d stream(s), %d sequences x %d tokens on %s\n", job->input,
                kind, a->n_layers, a->n_streams, a->n_seqs, a->seq_len, a->be->name);
    if (!job->quiet) /* the options that scale with the model, as resolved (analyzers/autoscale.h) */
        fprintf(stderr, "analyze: --n-tokens %lld --power-iters %d --jac-seq %d --prune-seqs %d\n",
                (long long)job->opts.n_tokens, job->opts.power_iters, job->opts.jac_seq, job->opts.prune_seqs);
    /* the checkpoint's training status, so `spanprobe check` can see a diverged run */
    st = sp_analyze_record_train_state(a->report, &in->meta.train);
    if (st == SP_OK)
        st = sp_analyze_execute(a, selected, job->quiet);
    if (st == SP_ERR_NUMERIC) /* the values of this input, not a fault of a file */
        sp_error_context("%s", job->input);
    if (st != SP_OK) {
        sp_report_abort(a->report);
        return st;
    }
    return a->report ? sp_report_finish(a->report, outputs, report_tmp) : SP_OK;
}

/* The report, its summary and the CSV tables appear together once all are written, or none does:
 * a failed export leaves no new report, and whatever these paths held before stays. */
static sp_status write_outputs(const sp_analyze_job *job, sp_output_set *outputs, const char *report_tmp)
{
    if (!report_tmp) /* an MPI rank other than 0: rank 0 writes */
        return SP_OK;
    int n_files = 0;
    if (job->csv_dir)
        SP_TRY(sp_report_export_csv(report_tmp, job->csv_dir, outputs, &n_files));
    SP_TRY(sp_output_set_commit(outputs));
    if (job->quiet)
        return SP_OK;
    char *summary = sp_report_summary_path(job->out);
    printf("wrote %s and %s\n", job->out, summary ? summary : "its summary");
    free(summary);
    if (job->csv_dir)
        printf("wrote %d CSV tables into %s\n", n_files, job->csv_dir);
    return SP_OK;
}

sp_status sp_analyze_run(const sp_analyze_job *given)
{
    const double t_start = sp_clock_seconds();
    SP_TRY(sp_analyze_options_validate(&given->opts, "analyze options"));
    sp_analyze_job resolved = *given, *job = &resolved; /* the options as resolved for the input */
    if (job->n_ranks > 1 && job->rank > 0) { /* rank 0 speaks and writes for all */
        job->quiet = 1;
        job->csv_dir = NULL;
    }
    if (job->data && job->tokens)
        return sp_error(SP_ERR_USAGE, "expected at most one of --data FILE and --tokens FILE");
    unsigned char selected[64];
    if (sp_n_analyzers > (int)sizeof selected)
        return sp_error(SP_ERR_INTERNAL, "analyze: %d analyzers exceed the selection table", sp_n_analyzers);
    SP_TRY(sp_analyze_select(job->opts.metrics, selected));
    char *summary_path = sp_report_summary_path(job->out);
    if (!summary_path)
        return SP_ERR_NOMEM;
    const char *inputs[] = {job->input, job->data, job->tokens}, *outputs[] = {job->out, summary_path};
    sp_status safe = sp_check_outputs(outputs, 2, inputs, 3);
    free(summary_path);
    SP_TRY(safe);
    char format[64] = SP_CKPT_FORMAT; /* a model directory or GGUF file is read as a checkpoint */
    if (sp_model_source_kind_of(job->input) == SP_SOURCE_CHECKPOINT)
        SP_TRY(input_format(job->input, format, sizeof format));
    const int is_ckpt = strcmp(format, SP_CKPT_FORMAT) == 0, is_dump = strcmp(format, SP_DUMP_FORMAT) == 0;
    if (!is_ckpt && !is_dump)
        return sp_error(SP_ERR_INPUT, "%s: format '%s' (expected %s or %s)", job->input, format, SP_CKPT_FORMAT,
                        SP_DUMP_FORMAT);
    if (!job->backend) /* the report names the device that ran, never "auto" */
        SP_TRY(sp_backend_select(job->device ? job->device : "auto", &job->backend));
    const sp_backend *be = job->backend;
    be->mem_reset_peak(); /* the run's peak: from loading the input on, not what the process held before */
    int csv_dir_made = 0;
    if (job->csv_dir)
        SP_TRY(sp_make_output_dir(job->csv_dir, &csv_dir_made));

    loaded_input in = {0};
    sp_ckpt_meta_init(&in.meta);
    sp_analysis a;
    sp_output_set written = {0};
    const char *report_tmp = NULL;
    sp_status st = is_ckpt ? load_checkpoint(job, be, &in, &a) : load_dump(job, be, &in, &a);
    a.t_start = t_start;
    if (st == SP_OK)
        st = run_loaded(job, selected,
                        is_ckpt ? sp_model_source_kind_name(sp_model_source_kind_of(job->input)) : "activation dump",
                        &in, &a, &written, &report_tmp);
    loaded_free(&in);
    if (st == SP_OK)
        st = write_outputs(job, &written, report_tmp);
    sp_output_set_abort(&written); /* empty after a commit; else the temporary files */
    if (st != SP_OK && csv_dir_made)
        rmdir(job->csv_dir); /* the directory made for the tables, empty: a failed run leaves nothing */
    return st;
}

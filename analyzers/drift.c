/* analyzers/drift.c: a drift run (analyzers/drift.h): both models loaded, checked to have one
 * shape, run batch by batch on one evaluation set; the parts (analyzers/drift_parts.h) accumulate,
 * then write the report. */
#include "analyzers/drift.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/analyzer.h"
#include "analyzers/driver.h"
#include "analyzers/drift_parts.h"
#include "analyzers/evalset.h"
#include "analyzers/progress.h"
#include "io/model_source.h"

void sp_drift_job_defaults(sp_drift_job *job)
{
    sp_analyze_options o;
    sp_analyze_options_defaults(&o);
    *job = (sp_drift_job){.n_tokens = o.n_tokens, .seq_len = o.seq_len, .batch = o.batch, .seed = o.seed,
                          .max_memory_gib = o.max_memory_gib};
}

typedef struct {
    sp_model *model[2];    /* reference, model */
    sp_ckpt_meta meta[2];
    sp_eval_set eval;
    int batch;
    sp_report *report;
    sp_drift_acts acts;
    sp_drift_logits logits;
    double loss_sum[2], loss_count;
} drift_run;

/* Neither the report nor its summary may replace an input. */
static sp_status check_outputs(const sp_drift_job *job)
{
    char *summary = sp_report_summary_path(job->out);
    if (!summary)
        return SP_ERR_NOMEM;
    const char *inputs[] = {job->ref, job->model, job->data, job->tokens}, *outputs[] = {job->out, summary};
    sp_status st = sp_check_outputs(outputs, 2, inputs, 4);
    free(summary);
    return st;
}

/* The two configs must give the same parameter layout: names and shapes, so every hidden state,
 * logit and matrix has a counterpart. The sizes a person compares first get their own message. */
static sp_status check_same_shape(const sp_drift_job *job, const sp_config *a, const sp_config *b)
{
    const struct {
        const char *name;
        int ref, model;
    } sizes[] = {{"n_layers", a->n_layers, b->n_layers}, {"d_model", a->d_model, b->d_model},
                 {"vocab_size", a->vocab_size, b->vocab_size}};
    for (size_t i = 0; i < SP_ARRAY_LEN(sizes); i++)
        if (sizes[i].ref != sizes[i].model)
            return sp_error(SP_ERR_INPUT, "%s has %s %d but %s has %d: drift compares models of one shape", job->ref,
                            sizes[i].name, sizes[i].ref, job->model, sizes[i].model);
    sp_param_spec *pa = NULL, *pb = NULL;
    int na = 0, nb = 0;
    sp_status st = sp_param_layout(a, &pa, &na);
    if (st == SP_OK)
        st = sp_param_layout(b, &pb, &nb);
    for (int i = 0; st == SP_OK && i < (na > nb ? na : nb); i++) {
        const sp_param_spec *x = i < na ? &pa[i] : NULL, *y = i < nb ? &pb[i] : NULL;
        if (x && y && strcmp(x->name, y->name) == 0 && x->shape[0] == y->shape[0] && x->shape[1] == y->shape[1])
            continue;
        st = sp_error(SP_ERR_INPUT, "%s and %s have different parameters (%s [%lld, %lld] against %s [%lld, %lld]): "
                      "drift compares models of one shape", job->ref, job->model, x ? x->name : "nothing",
                      x ? (long long)x->shape[0] : 0LL, x ? (long long)x->shape[1] : 0LL, y ? y->name : "nothing",
                      y ? (long long)y->shape[0] : 0LL, y ? (long long)y->shape[1] : 0LL);
    }
    free(pa);
    free(pb);
    return st;
}

static sp_status load_models(const sp_drift_job *job, const sp_backend *be, drift_run *d)
{
    const char *paths[2] = {job->ref, job->model};
    for (int i = 0; i < 2; i++) /* meta first: a mismatch is reported before any weight is read */
        SP_TRY(sp_model_source_read_meta(paths[i], &d->meta[i]));
    SP_TRY(check_same_shape(job, &d->meta[0].cfg, &d->meta[1].cfg));
    for (int i = 0; i < 2; i++) {
        sp_ckpt_meta_free(&d->meta[i]);
        sp_ckpt_meta_init(&d->meta[i]);
        if (!job->quiet)
            fprintf(stderr, "drift: loading %s\n", paths[i]);
        SP_TRY(sp_model_source_load(paths[i], be, &d->model[i], &d->meta[i]));
    }
    return SP_OK;
}

static sp_status build_eval_set(const sp_drift_job *job, drift_run *d)
{
    const sp_config *a = &d->meta[0].cfg, *b = &d->meta[1].cfg;
    const int max_len = a->max_seq_len < b->max_seq_len ? a->max_seq_len : b->max_seq_len;
    const int seq_len = job->seq_len ? job->seq_len : max_len < 256 ? max_len : 256;
    if (seq_len > max_len)
        return sp_error(SP_ERR_USAGE, "--seq %d is longer than the models' max_seq_len %d", seq_len, max_len);
    /* without a stored tokenizer meta holds the bytes one, right for a vocabulary of 256 */
    const sp_tokenizer *tok = d->meta[0].has_tokenizer || a->vocab_size == 256 ? &d->meta[0].tokenizer : NULL;
    const char *data = job->tokens ? NULL : job->data ? job->data : SP_ANALYZE_DEFAULT_DATA;
    return sp_eval_set_load(data, job->tokens, tok, a->vocab_size, seq_len, job->n_tokens, (uint64_t)job->seed,
                            &d->eval);
}

/* The most sequences per pass (up to --batch) whose activations, in both models, fit in half of
 * the memory budget (as analyze fits one model: analyzers/model_eval.h). */
static sp_status fit_batch(const sp_drift_job *job, drift_run *d)
{
    const double budget = job->max_memory_gib * 1073741824.0 / 2;
    const int want = job->batch < d->eval.n_seqs ? job->batch : d->eval.n_seqs, T = d->eval.seq_len;
    for (int b = want; b >= 1; b--)
        if ((double)sp_model_activation_bytes(d->model[0], b, T) + (double)sp_model_activation_bytes(d->model[1], b, T) <=
            budget) {
            if (b < want && !job->quiet)
                fprintf(stderr, "drift: %d sequence(s) per pass instead of %d, to fit --max-memory-gib %g\n", b, want,
                        job->max_memory_gib);
            d->batch = b;
            return SP_OK;
        }
    return sp_error(SP_ERR_NOMEM, "the activations of two models on one sequence of %d tokens take more than half of "
                                  "--max-memory-gib %g (raise it or lower --seq)", T, job->max_memory_gib);
}

/* The run's options and the reference's identity (sha from sp_model_source_sha256), as the report's
 * options JSON (free()); NULL when out of memory. */
static char *options_json(const sp_drift_job *job, const sp_backend *be, const drift_run *d, const char *sha,
                          int64_t bytes)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "command", "drift");
    cJSON_AddStringToObject(o, "reference", job->ref);
    cJSON_AddStringToObject(o, "reference_sha256", sha);
    cJSON_AddNumberToObject(o, "reference_bytes", (double)bytes);
    cJSON_AddStringToObject(o, "model", job->model);
    cJSON_AddStringToObject(o, "device", be->name);
    if (job->tokens)
        cJSON_AddStringToObject(o, "tokens", job->tokens);
    else
        cJSON_AddStringToObject(o, "data", job->data ? job->data : SP_ANALYZE_DEFAULT_DATA);
    cJSON_AddNumberToObject(o, "n_tokens", (double)job->n_tokens);
    cJSON_AddNumberToObject(o, "seq_len", d->eval.seq_len);
    cJSON_AddNumberToObject(o, "batch", d->batch);
    cJSON_AddNumberToObject(o, "seed", (double)job->seed);
    cJSON_AddNumberToObject(o, "max_memory_gib", job->max_memory_gib);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

static sp_status run_batches(const sp_drift_job *job, drift_run *d)
{
    const int T = d->eval.seq_len, n_batches = (d->eval.n_seqs + d->batch - 1) / d->batch;
    sp_progress progress;
    sp_progress_start(&progress, "drift: forward passes of both models, batch", job->quiet);
    sp_status st = SP_OK;
    for (int i = 0; i < n_batches && st == SP_OK; i++) {
        const int s0 = i * d->batch, n_seq = d->eval.n_seqs - s0 < d->batch ? d->eval.n_seqs - s0 : d->batch;
        const size_t offset = (size_t)s0 * (size_t)T;
        for (int m = 0; m < 2 && st == SP_OK; m++) {
            double loss = 0;
            st = sp_model_forward(d->model[m], d->eval.tokens + offset, d->eval.targets + offset, n_seq, T, &loss);
            d->loss_sum[m] += loss * n_seq * T; /* every evaluation token has a target */
        }
        d->loss_count += (double)n_seq * T;
        if (st == SP_OK)
            st = sp_drift_acts_add(&d->acts, d->model[0], d->model[1], n_seq * T);
        if (st == SP_OK)
            st = sp_drift_logits_add(&d->logits, d->model[0], d->model[1], n_seq * T);
        sp_progress_update(&progress, i + 1, n_batches);
    }
    sp_progress_end(&progress);
    return st;
}

static sp_status write_parts(const sp_drift_job *job, const sp_backend *be, drift_run *d, double t0)
{
    sp_report *r = d->report;
    SP_TRY(sp_drift_acts_write(&d->acts, r));
    SP_TRY(sp_drift_logits_write(&d->logits, r));
    if (!job->quiet)
        fprintf(stderr, "drift: weight matrices\n");
    SP_TRY(sp_drift_weights(be, d->model[0], d->model[1], r));
    const double loss_ref = d->loss_sum[0] / d->loss_count, loss = d->loss_sum[1] / d->loss_count;
    SP_TRY(sp_report_set_scalar(r, SP_DRIFT_GROUP, "loss_ref", loss_ref));
    SP_TRY(sp_report_set_scalar(r, SP_DRIFT_GROUP, "loss", loss));
    SP_TRY(sp_report_set_scalar(r, SP_DRIFT_GROUP, "loss_increase", loss - loss_ref));
    const struct {
        const char *key;
        double value;
    } run[] = {{"n_seqs", d->eval.n_seqs}, {"seq_len", d->eval.seq_len}, {"batch", d->batch},
               {"seconds_total", sp_clock_seconds() - t0}, {"peak_rss_mib", sp_analyze_peak_rss_mib()}};
    for (size_t i = 0; i < SP_ARRAY_LEN(run); i++)
        SP_TRY(sp_report_set_scalar(r, "run", run[i].key, run[i].value));
    return SP_OK;
}

static sp_status run_loaded(const sp_drift_job *job, const sp_backend *be, drift_run *d, double t0)
{
    SP_TRY(build_eval_set(job, d));
    SP_TRY(fit_batch(job, d));
    const sp_config *cfg = &d->meta[0].cfg;
    const int rows = d->batch * d->eval.seq_len;
    SP_TRY(sp_drift_acts_init(&d->acts, be, cfg->n_layers, cfg->d_model, rows));
    SP_TRY(sp_drift_logits_init(&d->logits, be, cfg->vocab_size, (int64_t)d->eval.n_seqs * d->eval.seq_len));
    char sha[65];
    int64_t bytes = 0;
    SP_TRY(sp_model_source_sha256(job->ref, sha, &bytes));
    char *opts = options_json(job, be, d, sha, bytes);
    if (!opts)
        return sp_error(SP_ERR_NOMEM, "out of memory writing the options");
    char model_name[512];
    sp_model_source_name(job->model, model_name, sizeof model_name);
    sp_report_provenance prov = {.input_path = job->model, .options_json = opts, .eval_set = d->eval.description,
                                 .model = model_name};
    sp_status st = sp_report_create(job->out, &prov, &d->report);
    free(opts);
    SP_TRY(st);
    if (!job->quiet)
        fprintf(stderr, "drift: %s against %s, %d layers, %d sequences x %d tokens on %s\n", job->model, job->ref,
                cfg->n_layers, d->eval.n_seqs, d->eval.seq_len, be->name);
    st = run_batches(job, d);
    if (st == SP_OK)
        st = write_parts(job, be, d, t0);
    sp_report *r = d->report;
    d->report = NULL;
    if (st != SP_OK) {
        sp_report_abort(r);
        return st;
    }
    return sp_report_commit(r);
}

static sp_status print_summary(const sp_drift_job *job)
{
    sp_report_reader *rd;
    SP_TRY(sp_report_open(job->out, &rd));
    cJSON *summary = NULL;
    sp_status st = sp_report_read_summary(rd, &summary);
    sp_report_close(rd);
    SP_TRY(st);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(summary, "metrics"),
                                                      SP_DRIFT_GROUP);
    const char *keys[] = {"kl_mean", "kl_p99", "kl_max", "top1_agreement", "rel_error_final", "cka_min",
                          "weight_rel_frobenius_max"};
    for (size_t i = 0; i < SP_ARRAY_LEN(keys); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, keys[i]);
        if (cJSON_IsNumber(v))
            printf("%-26s %.6g\n", keys[i], v->valuedouble);
        else
            printf("%-26s null\n", keys[i]);
    }
    cJSON_Delete(summary);
    char *path = sp_report_summary_path(job->out);
    printf("wrote %s and %s\n", job->out, path ? path : "its summary");
    free(path);
    return SP_OK;
}

sp_status sp_drift_run(const sp_drift_job *job)
{
    const double t0 = sp_clock_seconds();
    if (job->data && job->tokens)
        return sp_error(SP_ERR_USAGE, "expected at most one of --data FILE and --tokens FILE");
    SP_TRY(check_outputs(job));
    const sp_backend *be = job->backend;
    if (!be)
        SP_TRY(sp_backend_select(job->device ? job->device : "auto", &be));
    drift_run d = {0};
    for (int i = 0; i < 2; i++)
        sp_ckpt_meta_init(&d.meta[i]);
    sp_status st = load_models(job, be, &d);
    if (st == SP_OK)
        st = run_loaded(job, be, &d, t0);
    sp_drift_acts_free(&d.acts);
    sp_drift_logits_free(&d.logits);
    sp_eval_set_free(&d.eval);
    for (int i = 0; i < 2; i++) {
        sp_model_free(d.model[i]);
        sp_ckpt_meta_free(&d.meta[i]);
    }
    if (st == SP_OK && !job->quiet)
        st = print_summary(job);
    return st;
}

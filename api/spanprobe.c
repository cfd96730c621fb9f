/* api/spanprobe.c: the C API of include/spanprobe/spanprobe.h, a thin layer over the modules the
 * command line runs on (io/model_source.h, model/model.h, train/optimizer.h, analyzers/driver.h,
 * io/report.h): the same code paths, behind opaque handles. */
#include "spanprobe/spanprobe.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyzers/driver.h"
#include "io/checkpoint.h"
#include "io/config_file.h"
#include "io/model_source.h"
#include "io/report.h"
#include "train/optimizer.h"

struct spanprobe_model {
    sp_model *m;
    sp_ckpt_meta meta;
    sp_optim *optim; /* made by the first train step */
};

struct spanprobe_analysis {
    sp_analyze_job job;
    char data[4096], tokens[4096], device[16];
};

struct spanprobe_report {
    sp_report_reader *reader;
    cJSON *summary;
};

int spanprobe_api_version(void) { return SPANPROBE_API_VERSION; }
const char *spanprobe_version(void) { return SP_VERSION; }
const char *spanprobe_last_error(void) { return sp_error_message(); }
void spanprobe_free(void *p) { free(p); }

/* ---- models ---- */

static spanprobe_status new_model(spanprobe_model **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return sp_error(SP_ERR_NOMEM, "out of memory for a model handle");
    sp_ckpt_meta_init(&(*out)->meta);
    return SP_OK;
}

spanprobe_status spanprobe_model_open(const char *path, const char *device, spanprobe_model **out)
{
    sp_error_clear();
    *out = NULL;
    const sp_backend *be;
    SP_TRY(sp_backend_select(device ? device : "auto", &be));
    spanprobe_model *h;
    SP_TRY(new_model(&h));
    sp_status st = sp_model_source_load(path, be, &h->m, &h->meta);
    if (st != SP_OK) {
        spanprobe_model_free(h);
        return st;
    }
    *out = h;
    return SP_OK;
}

spanprobe_status spanprobe_model_new(const char *config_json, uint64_t seed, const char *device, spanprobe_model **out)
{
    sp_error_clear();
    *out = NULL;
    const sp_backend *be;
    SP_TRY(sp_backend_select(device ? device : "auto", &be));
    sp_config cfg;
    sp_config_defaults(&cfg);
    const sp_field_table *tables[] = {&sp_config_table};
    void *objs[] = {&cfg};
    SP_TRY(sp_fields_apply_json(config_json, "spanprobe_model_new", 1, tables, objs));
    SP_TRY(sp_config_resolve(&cfg));
    SP_TRY(sp_config_validate(&cfg, "spanprobe_model_new"));
    spanprobe_model *h;
    SP_TRY(new_model(&h));
    h->meta.cfg = cfg;
    snprintf(h->meta.source, sizeof h->meta.source, "spanprobe_model_new (C API), seed %llu", (unsigned long long)seed);
    sp_status st = sp_model_create(&cfg, be, &h->m);
    if (st == SP_OK)
        st = sp_model_init(h->m, seed);
    if (st != SP_OK) {
        spanprobe_model_free(h);
        return st;
    }
    *out = h;
    return SP_OK;
}

void spanprobe_model_free(spanprobe_model *m)
{
    if (!m)
        return;
    sp_optim_free(m->optim);
    sp_model_free(m->m);
    sp_ckpt_meta_free(&m->meta);
    free(m);
}

int spanprobe_model_layers(const spanprobe_model *m) { return sp_model_config(m->m)->n_layers; }
int spanprobe_model_width(const spanprobe_model *m) { return sp_model_config(m->m)->d_model; }
int spanprobe_model_vocab(const spanprobe_model *m) { return sp_model_config(m->m)->vocab_size; }

spanprobe_status spanprobe_model_forward(spanprobe_model *m, const int32_t *tokens, const int32_t *targets, int batch,
                                         int seq_len, double *loss)
{
    sp_error_clear();
    if (batch < 1 || seq_len < 1 || seq_len > sp_model_config(m->m)->max_seq_len)
        return sp_error(SP_ERR_USAGE, "spanprobe_model_forward: batch %d x seq_len %d (expected >= 1 and seq_len <= %d)",
                        batch, seq_len, sp_model_config(m->m)->max_seq_len);
    return sp_model_forward(m->m, tokens, targets, batch, seq_len, loss);
}

spanprobe_status spanprobe_model_hidden(const spanprobe_model *m, int layer, float *out)
{
    sp_error_clear();
    const sp_real *h = sp_model_rows(m->m) > 0 ? sp_model_hidden(m->m, layer, 0) : NULL;
    if (!h)
        return sp_error(SP_ERR_USAGE, "spanprobe_model_hidden: no layer output %d (layers 0..%d, after a forward pass)",
                        layer, spanprobe_model_layers(m));
    const size_t n = (size_t)sp_model_rows(m->m) * (size_t)spanprobe_model_width(m);
    sp_real *host = sp_malloc(n * sizeof *host, "layer output");
    if (!host)
        return SP_ERR_NOMEM;
    sp_model_backend(m->m)->download(host, h, n * sizeof *host);
    for (size_t i = 0; i < n; i++)
        out[i] = (float)host[i];
    free(host);
    return SP_OK;
}

/* The parameters' buffers, sizes and decay flags, for the optimizer. */
static spanprobe_status make_optimizer(spanprobe_model *m)
{
    const int n = sp_model_n_params(m->m);
    size_t *numel = sp_malloc((size_t)n * sizeof *numel, "optimizer sizes");
    int *decay = sp_malloc((size_t)n * sizeof *decay, "optimizer sizes");
    sp_status st = numel && decay ? SP_OK : SP_ERR_NOMEM;
    for (int i = 0; i < n && st == SP_OK; i++) {
        const sp_param_spec *s = sp_model_param_spec(m->m, i);
        numel[i] = (size_t)s->shape[0] * (s->rank == 2 ? (size_t)s->shape[1] : 1);
        decay[i] = s->decay;
    }
    const sp_adamw_config cfg = {.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .grad_clip = 1.0};
    if (st == SP_OK)
        st = sp_optim_create(sp_model_backend(m->m), &cfg, n, numel, decay, &m->optim);
    free(numel);
    free(decay);
    return st;
}

spanprobe_status spanprobe_model_train_step(spanprobe_model *m, const int32_t *tokens, const int32_t *targets,
                                            int batch, int seq_len, double lr, double *loss)
{
    double l = NAN;
    SP_TRY(spanprobe_model_forward(m, tokens, targets, batch, seq_len, &l));
    if (loss)
        *loss = l;
    if (!isfinite(l))
        return sp_error(SP_ERR_DIVERGED, "spanprobe_model_train_step: the loss is %g", l);
    SP_TRY(sp_model_backward(m->m));
    if (!m->optim)
        SP_TRY(make_optimizer(m));
    const int n = sp_model_n_params(m->m);
    sp_real **params = sp_malloc((size_t)n * sizeof *params, "parameter list");
    sp_real **grads = sp_malloc((size_t)n * sizeof *grads, "parameter list");
    sp_status st = params && grads ? SP_OK : SP_ERR_NOMEM;
    for (int i = 0; i < n && st == SP_OK; i++) {
        params[i] = sp_model_param(m->m, i);
        grads[i] = sp_model_grad(m->m, i);
    }
    if (st == SP_OK) {
        const double norm = sp_optim_grad_norm(m->optim, grads, NULL);
        if (!isfinite(norm))
            st = sp_error(SP_ERR_DIVERGED, "spanprobe_model_train_step: the gradient norm is %g", norm);
        else
            sp_optim_step(m->optim, params, grads, norm, lr);
    }
    free(params);
    free(grads);
    return st == SP_OK ? sp_model_sync(m->m) : st;
}

spanprobe_status spanprobe_model_save(const spanprobe_model *m, const char *path)
{
    sp_error_clear();
    return sp_ckpt_write(path, m->m, &m->meta, NULL, NULL);
}

/* ---- analyses ---- */

spanprobe_status spanprobe_analysis_new(spanprobe_analysis **out)
{
    sp_error_clear();
    *out = calloc(1, sizeof **out);
    if (!*out)
        return sp_error(SP_ERR_NOMEM, "out of memory for an analysis handle");
    sp_analyze_options_defaults(&(*out)->job.opts);
    (*out)->job.quiet = 1; /* a library prints nothing unless asked */
    return SP_OK;
}

void spanprobe_analysis_free(spanprobe_analysis *a) { free(a); }

/* value into buf (cap bytes), refusing one that does not fit. */
static spanprobe_status keep(char *buf, size_t cap, const char *name, const char *value)
{
    if (strlen(value) >= cap)
        return sp_error(SP_ERR_USAGE, "spanprobe_analysis_set: %s: a value of %zu bytes (at most %zu)", name,
                        strlen(value), cap - 1);
    memcpy(buf, value, strlen(value) + 1);
    return SP_OK;
}

spanprobe_status spanprobe_analysis_set(spanprobe_analysis *a, const char *name, const char *value)
{
    sp_error_clear();
    char key[64];
    if (strlen(name) >= sizeof key)
        return sp_error(SP_ERR_USAGE, "spanprobe_analysis_set: unknown option '%.64s'", name);
    for (size_t i = 0; i <= strlen(name); i++)
        key[i] = name[i] == '-' ? '_' : name[i];
    sp_analyze_job *job = &a->job;
    if (strcmp(key, "data") == 0) {
        SP_TRY(keep(a->data, sizeof a->data, key, value));
        job->data = a->data;
    } else if (strcmp(key, "tokens") == 0) {
        SP_TRY(keep(a->tokens, sizeof a->tokens, key, value));
        job->tokens = a->tokens;
    } else if (strcmp(key, "device") == 0) {
        SP_TRY(keep(a->device, sizeof a->device, key, value));
        job->device = a->device;
    } else if (strcmp(key, "quiet") == 0) {
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
            return sp_error(SP_ERR_USAGE, "spanprobe_analysis_set: quiet = '%s' (expected true or false)", value);
        job->quiet = strcmp(value, "true") == 0;
    } else {
        SP_TRY(sp_fields_set(&sp_analyze_option_table, &job->opts, key, value, "spanprobe_analysis_set"));
    }
    return SP_OK;
}

/* Removes the report and its summary, then their private directory. */
static void remove_private(const char *dir, const char *report)
{
    char *summary = sp_report_summary_path(report);
    unlink(report);
    if (summary)
        unlink(summary);
    free(summary);
    rmdir(dir);
}

/* A private directory under $TMPDIR (else /tmp) into dir. */
static spanprobe_status private_dir(char *dir, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, len, "%s/spanprobe-api-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(dir) ? SP_OK : sp_error(SP_ERR_IO, "%s: cannot make a private temporary directory", dir);
}

spanprobe_status spanprobe_analysis_run(spanprobe_analysis *a, const char *input, const char *report_path,
                                        spanprobe_report **report)
{
    sp_error_clear();
    if (report)
        *report = NULL;
    if (!report_path && !report)
        return sp_error(SP_ERR_USAGE, "spanprobe_analysis_run: a report path, a report handle, or both");
    char dir[4096] = "", path[4200];
    if (!report_path) { /* in memory: a private file, removed once the report is open */
        SP_TRY(private_dir(dir, sizeof dir));
        snprintf(path, sizeof path, "%s/report.h5", dir);
        report_path = path;
    }
    sp_analyze_job job = a->job;
    job.input = input;
    job.out = report_path;
    sp_status st = sp_analyze_run(&job);
    if (st == SP_OK && report)
        st = spanprobe_report_open(report_path, report);
    if (dir[0])
        remove_private(dir, path);
    return st;
}

spanprobe_status spanprobe_analysis_run_model(spanprobe_analysis *a, const spanprobe_model *m, const char *report_path,
                                              spanprobe_report **report)
{
    sp_error_clear();
    char dir[4096], path[4200];
    SP_TRY(private_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/model.h5", dir);
    spanprobe_status st = spanprobe_model_save(m, path);
    if (st == SP_OK)
        st = spanprobe_analysis_run(a, path, report_path, report);
    unlink(path);
    rmdir(dir);
    return st;
}

/* ---- reports ---- */

spanprobe_status spanprobe_report_open(const char *path, spanprobe_report **out)
{
    sp_error_clear();
    *out = NULL;
    spanprobe_report *r = calloc(1, sizeof *r);
    if (!r)
        return sp_error(SP_ERR_NOMEM, "out of memory for a report handle");
    sp_status st = sp_report_open(path, &r->reader);
    if (st == SP_OK)
        st = sp_report_read_summary(r->reader, &r->summary);
    if (st != SP_OK) {
        spanprobe_report_close(r);
        return st;
    }
    *out = r;
    return SP_OK;
}

void spanprobe_report_close(spanprobe_report *r)
{
    if (!r)
        return;
    if (r->reader)
        sp_report_close(r->reader);
    cJSON_Delete(r->summary);
    free(r);
}

spanprobe_status spanprobe_report_scalar(const spanprobe_report *r, const char *analyzer, const char *key,
                                         double *value)
{
    sp_error_clear();
    const cJSON *group = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r->summary, "metrics"),
                                                          analyzer);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(group, key);
    if (!cJSON_IsNumber(v))
        return sp_error(SP_ERR_INPUT, "the report's summary has no number metrics.%s.%s", analyzer, key);
    *value = v->valuedouble;
    return SP_OK;
}

spanprobe_status spanprobe_report_array(spanprobe_report *r, const char *analyzer, const char *name, double **values,
                                        int *rank, int64_t shape[4], char *units)
{
    sp_error_clear();
    sp_report_array a;
    SP_TRY(sp_report_read_array(r->reader, analyzer, name, &a));
    *values = a.data; /* handed over: spanprobe_free */
    *rank = a.rank;
    for (int k = 0; k < 4; k++)
        shape[k] = k < a.rank ? a.shape[k] : 0;
    if (units)
        snprintf(units, 64, "%s", a.units);
    return SP_OK;
}

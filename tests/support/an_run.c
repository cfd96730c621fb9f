#include "tests/support/an_run.h"

#include <stdio.h>
#include <stdlib.h>

#include "analyzers/driver.h"
#include "core/rng.h"
#include "tests/support/scratch.h"

static void die(const char *what)
{
    fprintf(stderr, "an_run: %s: %s\n", what, sp_error_message());
    abort();
}

void an_run_setup(an_run *r, sp_model *m, int n_seqs, int seq_len, int batch, uint64_t seed)
{
    *r = (an_run){0};
    sp_analyze_options_defaults(&r->opts);
    const sp_config *cfg = sp_model_config(m);
    const size_t n = (size_t)n_seqs * (size_t)seq_len;
    r->tokens = malloc(n * sizeof *r->tokens);
    r->targets = malloc(n * sizeof *r->targets);
    if (!r->tokens || !r->targets)
        die("evaluation set");
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) {
        r->tokens[i] = (int32_t)sp_rng_below(&rng, (uint64_t)cfg->vocab_size);
        r->targets[i] = (int32_t)sp_rng_below(&rng, (uint64_t)cfg->vocab_size);
    }
    r->a = (sp_analysis){.be = sp_model_backend(m), .model = m, .n_layers = cfg->n_layers,
                         .n_streams = sp_config_n_streams(cfg), .d_model = cfg->d_model, .d_ff = cfg->d_ff,
                         .vocab_size = cfg->vocab_size, .has_latents = 1, .has_presums = 1, .tokens = r->tokens,
                         .targets = r->targets, .n_seqs = n_seqs, .seq_len = seq_len, .batch = batch,
                         .opts = &r->opts, .quiet = 1};
}

/* Creates the report <scratch>/<file> for the analysis. */
static void open_report(an_run *r, const char *file)
{
    scratch_path(r->path, sizeof r->path, file);
    sp_report_provenance prov = {NULL, "{}", "an_run: random tokens", NULL};
    if (sp_report_create(r->path, &prov, &r->a.report) != SP_OK)
        die("create the report");
}

/* Commits and opens the report when st is SP_OK, else aborts it; returns st. */
static sp_status close_report(an_run *r, sp_status st)
{
    if (st != SP_OK) {
        sp_report_abort(r->a.report);
        r->a.report = NULL;
        return st;
    }
    if (sp_report_commit(r->a.report) != SP_OK)
        die("commit the report");
    r->a.report = NULL;
    report_view_open(&r->view, r->path);
    return SP_OK;
}

sp_status an_run_finish(an_run *r, const sp_analyzer *an, const char *file)
{
    open_report(r, file);
    return close_report(r, an->finish(&r->a, NULL));
}

sp_status an_run_execute(an_run *r, const char *metrics, const char *file)
{
    unsigned char *selected = malloc((size_t)sp_n_analyzers);
    if (!selected || sp_analyze_select(metrics, selected) != SP_OK)
        die(metrics);
    open_report(r, file);
    sp_status st = close_report(r, sp_analyze_execute(&r->a, selected, 1));
    free(selected);
    return st;
}

sp_report_array an_run_array(an_run *r, const char *analyzer, const char *name)
{
    sp_report_array arr;
    if (sp_report_read_array(r->view.reader, analyzer, name, &arr) != SP_OK)
        die(name);
    return arr;
}

double an_run_scalar(const an_run *r, const char *analyzer, const char *key)
{
    return report_view_scalar(&r->view, analyzer, key);
}

int an_run_has_scalar(const an_run *r, const char *analyzer, const char *key)
{
    const cJSON *metrics = cJSON_GetObjectItemCaseSensitive(r->view.summary, "metrics");
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(metrics, analyzer), key) != NULL;
}

void an_run_free(an_run *r)
{
    sp_report_abort(r->a.report);
    report_view_close(&r->view);
    free(r->tokens);
    free(r->targets);
    *r = (an_run){0};
}

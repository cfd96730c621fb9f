#include "act_dump.h"

#include <stdio.h>
#include <stdlib.h>

#include "analyzers/driver.h"
#include "io/dump.h"

static void check(sp_status st, const char *what)
{
    if (st != SP_OK) {
        fprintf(stderr, "act_dump: %s: %s\n", what, sp_error_message());
        abort();
    }
}

void act_dump_write(const char *path, const act_dump_spec *spec)
{
    const int rows = spec->batch * spec->seq_len;
    sp_dump_info info = {.n_layers = spec->n_layers, .d_model = spec->d_model, .n_streams = spec->n_streams,
                         .d_ff = spec->d_ff, .vocab_size = 11, .batch = spec->batch, .seq_len = spec->seq_len,
                         .has_ffn_latent = spec->latent != NULL, .has_sum_a = spec->sum_a != NULL,
                         .has_sum_z = spec->sum_z != NULL};
    snprintf(info.source, sizeof info.source, "tests: synthetic activations");
    int32_t *tokens = calloc((size_t)rows, sizeof *tokens);
    if (!tokens)
        abort();
    sp_dump_writer *w = NULL;
    check(sp_dump_create(path, &info, tokens, &w), "create");
    free(tokens);
    for (int l = 0; l <= spec->n_layers; l++)
        for (int s = 0; s < spec->n_streams; s++)
            check(sp_dump_write(w, SP_DUMP_HIDDEN, s, l, 0, rows, spec->hidden[l * spec->n_streams + s]), "hidden");
    for (int l = 0; spec->latent && l < spec->n_layers; l++)
        check(sp_dump_write(w, SP_DUMP_FFN_LATENT, 0, l, 0, rows, spec->latent[l]), "latent");
    for (int l = 0; l < spec->n_layers; l++) {
        if (spec->sum_a && spec->sum_a[l])
            check(sp_dump_write(w, SP_DUMP_SUM_A, 0, l, 0, rows, spec->sum_a[l]), "sum_a");
        if (spec->sum_z && spec->sum_z[l])
            check(sp_dump_write(w, SP_DUMP_SUM_Z, 0, l, 0, rows, spec->sum_z[l]), "sum_z");
    }
    check(sp_dump_commit(w), "commit");
}

void act_dump_analyze(const char *dump_path, const char *report_path, const sp_analyze_options *opts)
{
    sp_analyze_job job = {.input = dump_path, .out = report_path, .device = "cpu", .quiet = 1, .opts = *opts};
    sp_error_clear();
    check(sp_analyze_run(&job), "analyze");
}

#include "tests/support/model_fixture.h"

#include <stdio.h>
#include <stdlib.h>

#include "tests/support/vec_util.h"

static void die(const char *what)
{
    fprintf(stderr, "model fixture: %s: %s\n", what, sp_error_message());
    abort();
}

void fixture_tiny_config(sp_config *cfg, int variant, int norm, int ffn, int pos)
{
    sp_config_defaults(cfg);
    cfg->variant = variant;
    cfg->norm = norm;
    cfg->ffn = ffn;
    cfg->pos = pos;
    cfg->d_model = 8;
    cfg->n_heads = 2;
    cfg->n_kv_heads = 1;
    cfg->d_ff = 12;
    cfg->vocab_size = 11;
    cfg->n_layers = 4;
    cfg->max_seq_len = 8;
    cfg->init = SP_INIT_GLOBAL;
    cfg->init_std = 0.3;
    cfg->tie_embeddings = 0;
    if (sp_config_resolve(cfg) != SP_OK || sp_config_validate(cfg, "fixture") != SP_OK)
        die("tiny config");
}

sp_model *fixture_model(const sp_config *cfg, uint64_t seed, double jitter)
{
    sp_model *m = NULL;
    if (sp_model_create(cfg, sp_backend_cpu(), &m) != SP_OK || sp_model_init(m, seed) != SP_OK)
        die("create");
    if (jitter <= 0)
        return m;
    sp_rng rng;
    sp_rng_seed(&rng, seed ^ 0x5eedf00dull);
    for (int i = 0; i < sp_model_n_params(m); i++) {
        const sp_param_spec *s = sp_model_param_spec(m, i);
        if (s->role != SP_ROLE_NORM_GAIN && s->role != SP_ROLE_NORM_BIAS)
            continue;
        size_t n = sp_param_numel(s);
        sp_real *host = vec_zeros(n);
        vec_fill_normal(&rng, n, host, jitter);
        for (size_t j = 0; j < n && s->role == SP_ROLE_NORM_GAIN; j++)
            host[j] += 1;
        sp_model_set_param(m, i, host);
        free(host);
    }
    return m;
}

void fixture_tokens(sp_rng *rng, int n, int vocab, int32_t *ids)
{
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)sp_rng_below(rng, (uint64_t)vocab);
}

sp_real *fixture_download(const sp_model *m, const sp_real *src, size_t n)
{
    sp_real *host = vec_zeros(n);
    sp_model_backend(m)->download(host, src, n * sizeof *host);
    return host;
}

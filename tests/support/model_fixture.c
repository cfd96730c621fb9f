#include "tests/support/model_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The pretrained configs: the tiny sizes of fixture_tiny_config, then options set by name. */
typedef struct {
    const char *name;
    int variant, norm, ffn, pos;
    const char *options; /* "field=value ..." through sp_config_set */
} pretrained_spec;

static const pretrained_spec pretrained_specs[FIXTURE_N_PRETRAINED] = {
    /* GPT-NeoX: parallel residual, LayerNorm, every bias, RoPE over half of each head, exact GELU */
    {"neox", SP_VARIANT_PARALLEL, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_ROPE,
     "qkv_bias=1 attn_out_bias=1 ffn_bias=1 rope_dims=2 gelu=erf"},
    /* GPT-2: LayerNorm, every bias, learned positions, tanh GELU, tied head */
    {"gpt2", SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED,
     "qkv_bias=1 attn_out_bias=1 ffn_bias=1 tie_embeddings=1"},
    /* Llama 3: GQA, heads of 6 over d_model 8, Llama 3 RoPE scaling with every frequency band:
     * wavelengths 2 pi (kept), 29 (blended) and 135 (divided) around 64 / 4 and 64 / 1 */
    {"llama3", SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE,
     "n_heads=4 n_kv_heads=2 head_dim=6 rope_theta=100 rope_scaling=llama3 rope_factor=8 rope_low_freq_factor=1 "
     "rope_high_freq_factor=4 rope_original_max_pos=64"},
    /* Qwen2/3: q/k/v biases, q and k RMS-normalized per head, tied head */
    {"qwen3", SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE, "qkv_bias=1 qk_norm=head tie_embeddings=1"},
    /* Gemma 2: peri norms, tanh GEGLU, sqrt(d) embedding scale, query_pre_attn_scalar 5, both soft-caps
     * small enough to bite, every other layer windowed (2 of 5 positions), heads of 6, one kv head */
    {"gemma2", SP_VARIANT_PERI, SP_NORM_RMSNORM, SP_FFN_GEGLU, SP_POS_ROPE,
     "embed_scale=2.8284271247461903 head_dim=6 attn_scale=0.4472135954999579 attn_softcap=2 final_softcap=3 "
     "sliding_window=2 window_pattern=2 tie_embeddings=1"},
    /* Gemma 3: q/k per-head norms, a local RoPE base on windowed layers, linear scaling on the global
     * one, windows of 3 with every third layer global */
    {"gemma3", SP_VARIANT_PERI, SP_NORM_RMSNORM, SP_FFN_GEGLU, SP_POS_ROPE,
     "embed_scale=2.8284271247461903 head_dim=6 attn_scale=0.3 qk_norm=head rope_theta=1000 rope_local_theta=20 "
     "rope_scaling=linear rope_factor=4 sliding_window=3 window_pattern=3 tie_embeddings=1"},
    /* Mistral: every layer windowed */
    {"mistral", SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE,
     "n_heads=4 n_kv_heads=2 sliding_window=3 window_pattern=0"},
    /* OLMo 2 style q/k norms over the whole projections through qk_norm full, with LayerNorm (gain and
     * bias), on the pre recipe, heads of 6 */
    {"qk-norm-full", SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_SWIGLU, SP_POS_ROPE, "qk_norm=full head_dim=6"},
    /* per-head LayerNorm q/k norms, exact-erf GEGLU with biases, partial RoPE with linear scaling */
    {"layernorm-qk-geglu-erf", SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GEGLU, SP_POS_ROPE,
     "qk_norm=head gelu=erf ffn_bias=1 rope_dims=2 rope_scaling=linear rope_factor=0.5"},
    /* OLMo 2 (its own q/k norms) with heads of 6, a soft-capped head and a bias on W_O */
    {"olmo2", SP_VARIANT_OLMO2, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE,
     "head_dim=6 final_softcap=2 attn_out_bias=1"},
};

const char *fixture_pretrained_config(int i, sp_config *cfg)
{
    const pretrained_spec *p = &pretrained_specs[i];
    fixture_tiny_config(cfg, p->variant, p->norm, p->ffn, p->pos);
    char options[512], *save = NULL;
    snprintf(options, sizeof options, "%s", p->options);
    for (char *field = strtok_r(options, " ", &save); field; field = strtok_r(NULL, " ", &save)) {
        char *value = strchr(field, '=');
        if (!value)
            die(p->name);
        *value++ = '\0';
        if (sp_config_set(cfg, field, value, p->name) != SP_OK)
            die(p->name);
    }
    if (sp_config_resolve(cfg) != SP_OK || sp_config_validate(cfg, p->name) != SP_OK)
        die(p->name);
    return p->name;
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
        if (s->role != SP_ROLE_NORM_GAIN && s->role != SP_ROLE_NORM_BIAS && s->role != SP_ROLE_LINEAR_BIAS)
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

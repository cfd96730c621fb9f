#include "tests/support/model_fixture.h"

#include <math.h>
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

const char *fixture_pretrained_config(int i, sp_config *cfg)
{
    const char *name = NULL;
    switch (i) {
    case 0: /* GPT-NeoX: parallel residual, LayerNorm, every bias, RoPE over half of each head, exact GELU */
        fixture_tiny_config(cfg, SP_VARIANT_PARALLEL, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_ROPE);
        cfg->qkv_bias = cfg->attn_out_bias = cfg->ffn_bias = 1;
        cfg->rope_dims = 2;
        cfg->gelu = SP_GELU_ERF;
        name = "neox";
        break;
    case 1: /* GPT-2: LayerNorm, every bias, learned positions, tanh GELU, tied head */
        fixture_tiny_config(cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
        cfg->qkv_bias = cfg->attn_out_bias = cfg->ffn_bias = 1;
        cfg->tie_embeddings = 1;
        name = "gpt2";
        break;
    case 2: /* Llama 3: GQA, heads of 6 over d_model 8, Llama 3 RoPE scaling with every frequency band:
             * wavelengths 2 pi (kept), 29 (blended) and 135 (divided) around 64 / 4 and 64 / 1 */
        fixture_tiny_config(cfg, SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
        cfg->n_heads = 4;
        cfg->n_kv_heads = 2;
        cfg->head_dim = 6;
        cfg->rope_theta = 100;
        cfg->rope_scaling = SP_ROPE_SCALING_LLAMA3;
        cfg->rope_factor = 8;
        cfg->rope_low_freq_factor = 1;
        cfg->rope_high_freq_factor = 4;
        cfg->rope_original_max_pos = 64;
        name = "llama3";
        break;
    case 3: /* Qwen2/3: q/k/v biases, q and k RMS-normalized per head, tied head */
        fixture_tiny_config(cfg, SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
        cfg->qkv_bias = 1;
        cfg->qk_norm = SP_QK_NORM_HEAD;
        cfg->tie_embeddings = 1;
        name = "qwen3";
        break;
    case 4: /* Gemma 2: peri norms, tanh GEGLU, sqrt(d) embedding scale, query_pre_attn_scalar, both
             * soft-caps small enough to bite, every other layer windowed (2 of 5 positions), heads of 6,
             * one kv head */
        fixture_tiny_config(cfg, SP_VARIANT_PERI, SP_NORM_RMSNORM, SP_FFN_GEGLU, SP_POS_ROPE);
        cfg->embed_scale = sqrt(8.0);
        cfg->head_dim = 6;
        cfg->attn_scale = 1 / sqrt(5.0);
        cfg->attn_softcap = 2;
        cfg->final_softcap = 3;
        cfg->sliding_window = 2;
        cfg->window_pattern = 2;
        cfg->tie_embeddings = 1;
        name = "gemma2";
        break;
    case 5: /* Gemma 3: q/k per-head norms, a local RoPE base on windowed layers, linear scaling on
             * the global one, windows of 3 with every third layer global */
        fixture_tiny_config(cfg, SP_VARIANT_PERI, SP_NORM_RMSNORM, SP_FFN_GEGLU, SP_POS_ROPE);
        cfg->embed_scale = sqrt(8.0);
        cfg->head_dim = 6;
        cfg->attn_scale = 0.3;
        cfg->qk_norm = SP_QK_NORM_HEAD;
        cfg->rope_theta = 1000;
        cfg->rope_local_theta = 20;
        cfg->rope_scaling = SP_ROPE_SCALING_LINEAR;
        cfg->rope_factor = 4;
        cfg->sliding_window = 3;
        cfg->window_pattern = 3;
        cfg->tie_embeddings = 1;
        name = "gemma3";
        break;
    case 6: /* Mistral: every layer windowed */
        fixture_tiny_config(cfg, SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
        cfg->n_heads = 4;
        cfg->n_kv_heads = 2;
        cfg->sliding_window = 3;
        cfg->window_pattern = 0;
        name = "mistral";
        break;
    case 7: /* OLMo 2 style q/k norms over the whole projections through qk_norm full, with LayerNorm
             * (gain and bias), on the pre recipe, heads of 6 */
        fixture_tiny_config(cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
        cfg->qk_norm = SP_QK_NORM_FULL;
        cfg->head_dim = 6;
        name = "qk-norm-full";
        break;
    case 8: /* per-head LayerNorm q/k norms, exact-erf GEGLU with biases, partial RoPE with linear scaling */
        fixture_tiny_config(cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GEGLU, SP_POS_ROPE);
        cfg->qk_norm = SP_QK_NORM_HEAD;
        cfg->gelu = SP_GELU_ERF;
        cfg->ffn_bias = 1;
        cfg->rope_dims = 2;
        cfg->rope_scaling = SP_ROPE_SCALING_LINEAR;
        cfg->rope_factor = 0.5;
        name = "layernorm-qk-geglu-erf";
        break;
    default: /* OLMo 2 (its own q/k norms) with heads of 6, a soft-capped head and biases on W_O */
        fixture_tiny_config(cfg, SP_VARIANT_OLMO2, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
        cfg->head_dim = 6;
        cfg->final_softcap = 2;
        cfg->attn_out_bias = 1;
        name = "olmo2";
        break;
    }
    if (sp_config_resolve(cfg) != SP_OK || sp_config_validate(cfg, name) != SP_OK)
        die("pretrained config");
    return name;
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

/* io/hf_arch.c: the architecture table (io/hf_arch.h): one entry per Hugging Face model class, with
 * its config keys and its tensor names. */
#include "io/hf_arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/arch_table.h"
#include "io/hf_config.h"
#include "io/hf_keys.h"

/* ---- the families' own config keys ---- */

static sp_status gpt2_keys(const cJSON *root, sp_hf_config *hc, const char *where)
{
    sp_config *cfg = &hc->cfg;
    const char *act = "gelu_new";
    SP_TRY(sp_hf_json_string(root, "activation_function", 0, &act, where));
    SP_TRY(sp_hf_gelu_kind(act, "activation_function", &cfg->gelu, where));
    int scaled = 1;
    SP_TRY(sp_hf_json_bool(root, "scale_attn_weights", &scaled, where));
    if (!scaled)
        cfg->attn_scale = 1.0;
    SP_TRY(sp_hf_json_unsupported(root, "scale_attn_by_inverse_layer_idx", "per-layer attention scaling", where));
    cfg->qkv_bias = cfg->attn_out_bias = cfg->ffn_bias = 1;
    return SP_OK;
}

static sp_status neox_keys(const cJSON *root, sp_hf_config *hc, const char *where)
{
    sp_config *cfg = &hc->cfg;
    const char *act = "gelu";
    SP_TRY(sp_hf_json_string(root, "hidden_act", 0, &act, where));
    SP_TRY(sp_hf_gelu_kind(act, "hidden_act", &cfg->gelu, where));
    int parallel = 1, attn_bias = 1;
    SP_TRY(sp_hf_json_bool(root, "use_parallel_residual", &parallel, where));
    SP_TRY(sp_hf_json_bool(root, "attention_bias", &attn_bias, where));
    cfg->variant = parallel ? SP_VARIANT_PARALLEL : SP_VARIANT_PRE;
    cfg->qkv_bias = cfg->attn_out_bias = attn_bias;
    cfg->ffn_bias = 1;
    return sp_hf_read_rope(root, hc, "rotary_emb_base", 0.25, where);
}

/* Llama and the families built on it: SwiGLU, head_dim, optional biases, RoPE. */
static sp_status llama_keys(const cJSON *root, sp_hf_config *hc, const char *where)
{
    sp_config *cfg = &hc->cfg;
    const char *act = "silu";
    SP_TRY(sp_hf_json_string(root, "hidden_act", 0, &act, where));
    if (strcmp(act, "silu") != 0 && strcmp(act, "swish") != 0)
        return sp_error(SP_ERR_INPUT, "%s: \"hidden_act\" = \"%s\" is not supported (expected silu)", where, act);
    SP_TRY(sp_hf_json_int(root, "head_dim", 1, INT32_MAX, 0, &cfg->head_dim, where));
    int attn_bias = 0;
    SP_TRY(sp_hf_json_bool(root, "attention_bias", &attn_bias, where));
    cfg->qkv_bias = cfg->attn_out_bias = attn_bias;
    SP_TRY(sp_hf_json_bool(root, "mlp_bias", &cfg->ffn_bias, where));
    SP_TRY(sp_hf_json_unsupported(root, "use_sliding_window", "sliding-window attention on the top layers", where));
    return sp_hf_read_rope(root, hc, "rope_theta", 1.0, where);
}

static sp_status mistral_keys(const cJSON *root, sp_hf_config *hc, const char *where)
{
    SP_TRY(llama_keys(root, hc, where));
    return sp_hf_read_windows(root, hc, 0, where);
}

static sp_status qwen2_keys(const cJSON *root, sp_hf_config *hc, const char *where)
{
    SP_TRY(llama_keys(root, hc, where));
    hc->cfg.qkv_bias = 1; /* Qwen2's q, k, v projections always have biases, W_O none */
    hc->cfg.attn_out_bias = 0;
    return SP_OK;
}

static sp_status qwen3_keys(const cJSON *root, sp_hf_config *hc, const char *where)
{
    SP_TRY(llama_keys(root, hc, where));
    hc->cfg.qk_norm = SP_QK_NORM_HEAD;
    return SP_OK;
}

/* Every Gemma: the GELU named act, head_dim (256 by default), optional attention biases, the sqrt(d)
 * embedding scale, RoPE. */
static sp_status gemma_common_keys(const cJSON *root, sp_hf_config *hc, const char *act, const char *where)
{
    sp_config *cfg = &hc->cfg;
    SP_TRY(sp_hf_gelu_kind(act, "hidden_activation", &cfg->gelu, where));
    cfg->head_dim = 256;
    SP_TRY(sp_hf_json_int(root, "head_dim", 1, INT32_MAX, 0, &cfg->head_dim, where));
    int attn_bias = 0;
    SP_TRY(sp_hf_json_bool(root, "attention_bias", &attn_bias, where));
    cfg->qkv_bias = cfg->attn_out_bias = attn_bias;
    cfg->embed_scale = sqrt((double)cfg->d_model);
    return sp_hf_read_rope(root, hc, "rope_theta", 1.0, where);
}

/* Gemma 1: GeGLU, (1 + w) norms, sqrt(d) embedding scale; "gelu" in its configs means the tanh
 * approximation (transformers rewrites it so). */
static sp_status gemma_keys(const cJSON *root, sp_hf_config *hc, const char *where)
{
    const char *act = "gelu_pytorch_tanh";
    SP_TRY(sp_hf_json_string(root, "hidden_act", 0, &act, where));
    SP_TRY(sp_hf_json_string(root, "hidden_activation", 0, &act, where));
    if (strcmp(act, "gelu") == 0)
        act = "gelu_pytorch_tanh";
    return gemma_common_keys(root, hc, act, where);
}

/* Gemma 2 and 3: the activation under its own key, query_pre_attn_scalar, soft-caps, windows. A
 * default_attn_cap of 0 means the family has no attention soft-cap whatever config.json says. */
static sp_status gemma23_keys(const cJSON *root, sp_hf_config *hc, int default_pattern, double default_attn_cap,
                              double default_final_cap, const char *where)
{
    sp_config *cfg = &hc->cfg;
    const char *act = "gelu_pytorch_tanh";
    SP_TRY(sp_hf_json_string(root, "hidden_activation", 0, &act, where));
    SP_TRY(gemma_common_keys(root, hc, act, where));
    double scalar = 256;
    SP_TRY(sp_hf_json_double(root, "query_pre_attn_scalar", 0, &scalar, where));
    if (!(scalar > 0))
        return sp_error(SP_ERR_INPUT, "%s: \"query_pre_attn_scalar\" = %g must be positive", where, scalar);
    cfg->attn_scale = 1.0 / sqrt(scalar);
    cfg->attn_softcap = default_attn_cap;
    cfg->final_softcap = default_final_cap;
    if (default_attn_cap > 0) /* Gemma 3's attention ignores attn_logit_softcapping (transformers 5.23) */
        SP_TRY(sp_hf_json_double(root, "attn_logit_softcapping", 0, &cfg->attn_softcap, where));
    SP_TRY(sp_hf_json_double(root, "final_logit_softcapping", 0, &cfg->final_softcap, where));
    SP_TRY(sp_hf_json_unsupported(root, "use_bidirectional_attention", "bidirectional attention", where));
    cfg->sliding_window = 4096;
    return sp_hf_read_windows(root, hc, default_pattern, where);
}

static sp_status gemma2_keys(const cJSON *root, sp_hf_config *hc, const char *where)
{
    return gemma23_keys(root, hc, 2, 50.0, 30.0, where);
}

static sp_status gemma3_keys(const cJSON *root, sp_hf_config *hc, const char *where)
{
    hc->cfg.qk_norm = SP_QK_NORM_HEAD;
    return gemma23_keys(root, hc, 6, 0, 0, where);
}

/* nanoGPT's GPTConfig (model_args of its ckpt.pt): biases everywhere or nowhere, nn.GELU (erf). */
static sp_status nanogpt_keys(const cJSON *root, sp_hf_config *hc, const char *where)
{
    sp_config *cfg = &hc->cfg;
    int bias = 1;
    SP_TRY(sp_hf_json_bool(root, "bias", &bias, where));
    cfg->qkv_bias = cfg->attn_out_bias = cfg->ffn_bias = bias;
    return SP_OK;
}

/* ---- tensor tables ---- */

/* GPT-2's tensor names: HF's GPT-2 stores Conv1D weights ([in, out]); nanoGPT the same names as
 * nn.Linear weights ([out, in]), and with bias=False no LayerNorm biases (zeros then). */
#define GPT2_NAMES(W, W_PART, LN_BIAS)                                   \
    T("embed/tok", "transformer.wte.weight"),                            \
    T("embed/pos", "transformer.wpe.weight"),                            \
    T_GAIN("n1/gain", "transformer.h.%d.ln_1.weight"),                   \
    LN_BIAS("n1/bias", "transformer.h.%d.ln_1.bias"),                    \
    W_PART("attn/wq", "transformer.h.%d.attn.c_attn.weight", 0),         \
    W_PART("attn/wk", "transformer.h.%d.attn.c_attn.weight", 1),         \
    W_PART("attn/wv", "transformer.h.%d.attn.c_attn.weight", 2),         \
    T_PART("attn/bq", "transformer.h.%d.attn.c_attn.bias", 0),           \
    T_PART("attn/bk", "transformer.h.%d.attn.c_attn.bias", 1),           \
    T_PART("attn/bv", "transformer.h.%d.attn.c_attn.bias", 2),           \
    W("attn/wo", "transformer.h.%d.attn.c_proj.weight"),                 \
    T("attn/bo", "transformer.h.%d.attn.c_proj.bias"),                   \
    T_GAIN("n2/gain", "transformer.h.%d.ln_2.weight"),                   \
    LN_BIAS("n2/bias", "transformer.h.%d.ln_2.bias"),                    \
    W("ffn/w1", "transformer.h.%d.mlp.c_fc.weight"),                     \
    T("ffn/b1", "transformer.h.%d.mlp.c_fc.bias"),                       \
    W("ffn/w2", "transformer.h.%d.mlp.c_proj.weight"),                   \
    T("ffn/b2", "transformer.h.%d.mlp.c_proj.bias"),                     \
    T_GAIN("final_norm/gain", "transformer.ln_f.weight"),                \
    LN_BIAS("final_norm/bias", "transformer.ln_f.bias"),                 \
    T("head/w", "lm_head.weight")

static const sp_hf_tensor gpt2_tensors[] = {GPT2_NAMES(T_CONV, T_CONV_PART, T), T_END};
static const sp_hf_tensor nanogpt_tensors[] = {GPT2_NAMES(T, T_PART, T_ZERO_IF_ABSENT), T_END};

static const sp_hf_tensor neox_tensors[] = {
    T("embed/tok", "gpt_neox.embed_in.weight"),
    T_GAIN("n1/gain", "gpt_neox.layers.%d.input_layernorm.weight"),
    T("n1/bias", "gpt_neox.layers.%d.input_layernorm.bias"),
    T_NEOX("attn/wq", "gpt_neox.layers.%d.attention.query_key_value.weight", 0, 1),
    T_NEOX("attn/wk", "gpt_neox.layers.%d.attention.query_key_value.weight", 1, 1),
    T_NEOX("attn/wv", "gpt_neox.layers.%d.attention.query_key_value.weight", 2, 0),
    T_NEOX("attn/bq", "gpt_neox.layers.%d.attention.query_key_value.bias", 0, 1),
    T_NEOX("attn/bk", "gpt_neox.layers.%d.attention.query_key_value.bias", 1, 1),
    T_NEOX("attn/bv", "gpt_neox.layers.%d.attention.query_key_value.bias", 2, 0),
    T("attn/wo", "gpt_neox.layers.%d.attention.dense.weight"),
    T("attn/bo", "gpt_neox.layers.%d.attention.dense.bias"),
    T_GAIN("n2/gain", "gpt_neox.layers.%d.post_attention_layernorm.weight"),
    T("n2/bias", "gpt_neox.layers.%d.post_attention_layernorm.bias"),
    T("ffn/w1", "gpt_neox.layers.%d.mlp.dense_h_to_4h.weight"),
    T("ffn/b1", "gpt_neox.layers.%d.mlp.dense_h_to_4h.bias"),
    T("ffn/w2", "gpt_neox.layers.%d.mlp.dense_4h_to_h.weight"),
    T("ffn/b2", "gpt_neox.layers.%d.mlp.dense_4h_to_h.bias"),
    T_GAIN("final_norm/gain", "gpt_neox.final_layer_norm.weight"),
    T("final_norm/bias", "gpt_neox.final_layer_norm.bias"),
    T("head/w", "embed_out.weight"),
    T_END};

/* Attention, FFN, embedding and head of Llama and every family after it. */
#define LLAMA_COMMON                                                         \
    T("embed/tok", "model.embed_tokens.weight"),                             \
    T_ROPE("attn/wq", "model.layers.%d.self_attn.q_proj.weight"),            \
    T_ROPE("attn/wk", "model.layers.%d.self_attn.k_proj.weight"),            \
    T("attn/wv", "model.layers.%d.self_attn.v_proj.weight"),                 \
    T("attn/wo", "model.layers.%d.self_attn.o_proj.weight"),                 \
    T_ROPE("attn/bq", "model.layers.%d.self_attn.q_proj.bias"),              \
    T_ROPE("attn/bk", "model.layers.%d.self_attn.k_proj.bias"),              \
    T("attn/bv", "model.layers.%d.self_attn.v_proj.bias"),                   \
    T("attn/bo", "model.layers.%d.self_attn.o_proj.bias"),                   \
    T_ROPE_GAIN("attn/q_norm/gain", "model.layers.%d.self_attn.q_norm.weight"), \
    T_ROPE_GAIN("attn/k_norm/gain", "model.layers.%d.self_attn.k_norm.weight"), \
    T("ffn/w1", "model.layers.%d.mlp.gate_proj.weight"),                     \
    T("ffn/w3", "model.layers.%d.mlp.up_proj.weight"),                       \
    T("ffn/w2", "model.layers.%d.mlp.down_proj.weight"),                     \
    T("ffn/b1", "model.layers.%d.mlp.gate_proj.bias"),                       \
    T("ffn/b3", "model.layers.%d.mlp.up_proj.bias"),                         \
    T("ffn/b2", "model.layers.%d.mlp.down_proj.bias"),                       \
    T_GAIN("final_norm/gain", "model.norm.weight"),                          \
    T("head/w", "lm_head.weight")

static const sp_hf_tensor llama_tensors[] = {
    LLAMA_COMMON,
    T_GAIN("n1/gain", "model.layers.%d.input_layernorm.weight"),
    T_GAIN("n2/gain", "model.layers.%d.post_attention_layernorm.weight"),
    T_END};

static const sp_hf_tensor olmo2_tensors[] = {
    LLAMA_COMMON,
    T_GAIN("na/gain", "model.layers.%d.post_attention_layernorm.weight"),
    T_GAIN("nf2/gain", "model.layers.%d.post_feedforward_layernorm.weight"),
    T_END};

static const sp_hf_tensor peri_tensors[] = {
    LLAMA_COMMON,
    T_GAIN("ni1/gain", "model.layers.%d.input_layernorm.weight"),
    T_GAIN("no1/gain", "model.layers.%d.post_attention_layernorm.weight"),
    T_GAIN("ni2/gain", "model.layers.%d.pre_feedforward_layernorm.weight"),
    T_GAIN("no2/gain", "model.layers.%d.post_feedforward_layernorm.weight"),
    T_END};

/* Buffers some checkpoints carry: GPT-2's causal mask, cached RoPE frequencies. */
static const char *const buffers[] = {".attn.bias", ".attn.masked_bias", ".attention.bias", ".attention.masked_bias",
                                      ".rotary_emb.inv_freq", NULL};

#define SIZES_LLAMA {"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", \
                     "intermediate_size", "vocab_size", "max_position_embeddings", "rms_norm_eps"}
#define LLAMA_LIKE(arch, type, variant, ffn, tie, offset, keys, tensors)                                      \
    {arch, type, variant, SP_NORM_RMSNORM, ffn, SP_GELU_TANH, SP_POS_ROPE, tie, 1, offset, SIZES_LLAMA, keys, \
     "model.", buffers, tensors, NULL}

static const sp_hf_family families[] = {
    {"GPT2LMHeadModel", "gpt2", SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_GELU_TANH, SP_POS_LEARNED, 1, 0, 0,
     {"n_embd", "n_layer", "n_head", NULL, "n_inner", "vocab_size", "n_positions", "layer_norm_epsilon"}, gpt2_keys,
     "transformer.", buffers, gpt2_tensors, NULL},
    {"GPTNeoXForCausalLM", "gpt_neox", SP_VARIANT_PARALLEL, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_GELU_ERF, SP_POS_ROPE, 0,
     1, 0,
     {"hidden_size", "num_hidden_layers", "num_attention_heads", NULL, "intermediate_size", "vocab_size",
      "max_position_embeddings", "layer_norm_eps"},
     neox_keys, "gpt_neox.", buffers, neox_tensors, NULL},
    LLAMA_LIKE("LlamaForCausalLM", "llama", SP_VARIANT_PRE, SP_FFN_SWIGLU, 0, 0, llama_keys, llama_tensors),
    LLAMA_LIKE("MistralForCausalLM", "mistral", SP_VARIANT_PRE, SP_FFN_SWIGLU, 0, 0, mistral_keys, llama_tensors),
    LLAMA_LIKE("Qwen2ForCausalLM", "qwen2", SP_VARIANT_PRE, SP_FFN_SWIGLU, 0, 0, qwen2_keys, llama_tensors),
    LLAMA_LIKE("Qwen3ForCausalLM", "qwen3", SP_VARIANT_PRE, SP_FFN_SWIGLU, 0, 0, qwen3_keys, llama_tensors),
    LLAMA_LIKE("Olmo2ForCausalLM", "olmo2", SP_VARIANT_OLMO2, SP_FFN_SWIGLU, 0, 0, llama_keys, olmo2_tensors),
    LLAMA_LIKE("GemmaForCausalLM", "gemma", SP_VARIANT_PRE, SP_FFN_GEGLU, 1, 1, gemma_keys, llama_tensors),
    LLAMA_LIKE("Gemma2ForCausalLM", "gemma2", SP_VARIANT_PERI, SP_FFN_GEGLU, 1, 1, gemma2_keys, peri_tensors),
    LLAMA_LIKE("Gemma3ForCausalLM", "gemma3_text", SP_VARIANT_PERI, SP_FFN_GEGLU, 1, 1, gemma3_keys, peri_tensors),
};

/* Not an `architectures` value: io/nanogpt.c maps a ckpt.pt's model_args through it (its sizes are
 * GPTConfig's fields; the reader adds nanoGPT's fixed LayerNorm epsilon). */
const sp_hf_family sp_hf_nanogpt = {
    "nanoGPT", "nanogpt", SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_GELU_ERF, SP_POS_LEARNED, 1, 0, 0,
    {"n_embd", "n_layer", "n_head", NULL, NULL, "vocab_size", "block_size", "layer_norm_epsilon"}, nanogpt_keys,
    "transformer.", buffers, nanogpt_tensors, "model_args"};

const sp_hf_family *sp_hf_family_find(const char *architecture)
{
    for (size_t i = 0; i < SP_ARRAY_LEN(families); i++)
        if (strcmp(families[i].architecture, architecture) == 0)
            return &families[i];
    return NULL;
}

const char *sp_hf_config_name(const sp_hf_family *f) { return f->config_name ? f->config_name : "config.json"; }

const char *sp_hf_family_list(void)
{
    static char list[512];
    if (!list[0])
        for (size_t i = 0; i < SP_ARRAY_LEN(families); i++) {
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", families[i].architecture);
        }
    return list;
}

const sp_hf_tensor *sp_hf_tensor_in(const sp_hf_tensor *table, const char *param, int *layer)
{
    *layer = -1;
    int n = 0;
    if (sscanf(param, "blocks/%d/%n", layer, &n) == 1 && n > 0)
        param += n;
    for (const sp_hf_tensor *t = table; t->param; t++)
        if (strcmp(t->param, param) == 0)
            return t;
    return NULL;
}

const sp_hf_tensor *sp_hf_tensor_for(const sp_hf_family *f, const char *param, int *layer)
{
    return sp_hf_tensor_in(f->tensors, param, layer);
}

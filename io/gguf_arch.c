/* io/gguf_arch.c: the GGUF architecture table (io/gguf_arch.h), with llama.cpp's tensor names
 * (gguf-py constants.py MODEL_TENSOR, tensor_mapping.py). */
#include "io/gguf_arch.h"

#include <stdio.h>
#include <string.h>

#include "io/arch_table.h"

/* Attention, FFN, embedding and head of llama and the architectures after it. */
#define GGUF_LLAMA_COMMON                                         \
    T("embed/tok", "token_embd.weight"),                          \
    T_ROPE("attn/wq", "blk.%d.attn_q.weight"),                    \
    T_ROPE("attn/wk", "blk.%d.attn_k.weight"),                    \
    T("attn/wv", "blk.%d.attn_v.weight"),                         \
    T("attn/wo", "blk.%d.attn_output.weight"),                    \
    T_ROPE("attn/bq", "blk.%d.attn_q.bias"),                      \
    T_ROPE("attn/bk", "blk.%d.attn_k.bias"),                      \
    T("attn/bv", "blk.%d.attn_v.bias"),                           \
    T("attn/bo", "blk.%d.attn_output.bias"),                      \
    T_ROPE_GAIN("attn/q_norm/gain", "blk.%d.attn_q_norm.weight"), \
    T_ROPE_GAIN("attn/k_norm/gain", "blk.%d.attn_k_norm.weight"), \
    T("ffn/w1", "blk.%d.ffn_gate.weight"),                        \
    T("ffn/w3", "blk.%d.ffn_up.weight"),                          \
    T("ffn/w2", "blk.%d.ffn_down.weight"),                        \
    T("ffn/b1", "blk.%d.ffn_gate.bias"),                          \
    T("ffn/b3", "blk.%d.ffn_up.bias"),                            \
    T("ffn/b2", "blk.%d.ffn_down.bias"),                          \
    T_GAIN("final_norm/gain", "output_norm.weight"),              \
    T("head/w", "output.weight")

static const sp_hf_tensor llama_tensors[] = {
    GGUF_LLAMA_COMMON,
    T_GAIN("n1/gain", "blk.%d.attn_norm.weight"),
    T_GAIN("n2/gain", "blk.%d.ffn_norm.weight"),
    T_END};

static const sp_hf_tensor olmo2_tensors[] = {
    GGUF_LLAMA_COMMON,
    T_GAIN("na/gain", "blk.%d.post_attention_norm.weight"),
    T_GAIN("nf2/gain", "blk.%d.post_ffw_norm.weight"),
    T_END};

static const sp_hf_tensor peri_tensors[] = {
    GGUF_LLAMA_COMMON,
    T_GAIN("ni1/gain", "blk.%d.attn_norm.weight"),
    T_GAIN("no1/gain", "blk.%d.post_attention_norm.weight"),
    T_GAIN("ni2/gain", "blk.%d.ffn_norm.weight"),
    T_GAIN("no2/gain", "blk.%d.post_ffw_norm.weight"),
    T_END};

/* GPT-2 and GPT-NeoX: fused q/k/v as three parts [q; k; v] (the converter de-interleaves NeoX's
 * per-head layout), LayerNorm with biases, a two-matrix FFN. */
#define GGUF_FUSED_COMMON(rope)                             \
    T("embed/tok", "token_embd.weight"),                    \
    T_GAIN("n1/gain", "blk.%d.attn_norm.weight"),           \
    T("n1/bias", "blk.%d.attn_norm.bias"),                  \
    T_PART_IF_ROPE("attn/wq", "blk.%d.attn_qkv.weight", 0, rope), \
    T_PART_IF_ROPE("attn/wk", "blk.%d.attn_qkv.weight", 1, rope), \
    T_PART("attn/wv", "blk.%d.attn_qkv.weight", 2),         \
    T_PART_IF_ROPE("attn/bq", "blk.%d.attn_qkv.bias", 0, rope),   \
    T_PART_IF_ROPE("attn/bk", "blk.%d.attn_qkv.bias", 1, rope),   \
    T_PART("attn/bv", "blk.%d.attn_qkv.bias", 2),           \
    T("attn/wo", "blk.%d.attn_output.weight"),              \
    T("attn/bo", "blk.%d.attn_output.bias"),                \
    T_GAIN("n2/gain", "blk.%d.ffn_norm.weight"),            \
    T("n2/bias", "blk.%d.ffn_norm.bias"),                   \
    T("ffn/w1", "blk.%d.ffn_up.weight"),                    \
    T("ffn/b1", "blk.%d.ffn_up.bias"),                      \
    T("ffn/w2", "blk.%d.ffn_down.weight"),                  \
    T("ffn/b2", "blk.%d.ffn_down.bias"),                    \
    T_GAIN("final_norm/gain", "output_norm.weight"),        \
    T("final_norm/bias", "output_norm.bias"),               \
    T("head/w", "output.weight")

static const sp_hf_tensor gpt2_tensors[] = {
    GGUF_FUSED_COMMON(0),
    T("embed/pos", "position_embd.weight"),
    T_END};

static const sp_hf_tensor neox_tensors[] = {
    GGUF_FUSED_COMMON(1),
    T_END};

#define RMS "attention.layer_norm_rms_epsilon"
#define LN "attention.layer_norm_epsilon"
#define NO_WINDOWS -1, 0, 0
/* Columns as in sp_gguf_arch: arch, Hugging Face family, NEOX RoPE, norm epsilon key, q/k norm,
 * sqrt(d) embedding scale, attention and final soft-caps, window pattern, default window and local
 * RoPE base, parallel-residual key, layers of the 27B score-scale rule, tensors. */
static const sp_gguf_arch archs[] = {
    {"llama", "LlamaForCausalLM", 0, RMS, SP_QK_NORM_NONE, 0, 0, 0, NO_WINDOWS, 0, 0, llama_tensors},
    {"qwen2", "Qwen2ForCausalLM", 1, RMS, SP_QK_NORM_NONE, 0, 0, 0, NO_WINDOWS, 0, 0, llama_tensors},
    {"qwen3", "Qwen3ForCausalLM", 1, RMS, SP_QK_NORM_HEAD, 0, 0, 0, NO_WINDOWS, 0, 0, llama_tensors},
    {"olmo2", "Olmo2ForCausalLM", 1, RMS, SP_QK_NORM_NONE, 0, 0, 0, NO_WINDOWS, 0, 0, olmo2_tensors},
    {"gemma", "GemmaForCausalLM", 1, RMS, SP_QK_NORM_NONE, 1, 0, 0, NO_WINDOWS, 0, 0, llama_tensors},
    {"gemma2", "Gemma2ForCausalLM", 1, RMS, SP_QK_NORM_NONE, 1, 50.0, 30.0, 2, 4096, 0, 0, 46, peri_tensors},
    {"gemma3", "Gemma3ForCausalLM", 1, RMS, SP_QK_NORM_HEAD, 1, 0, 0, 6, 4096, 10000.0, 0, 62, peri_tensors},
    {"gpt2", "GPT2LMHeadModel", 0, LN, SP_QK_NORM_NONE, 0, 0, 0, NO_WINDOWS, 0, 0, gpt2_tensors},
    {"gptneox", "GPTNeoXForCausalLM", 1, LN, SP_QK_NORM_NONE, 0, 0, 0, NO_WINDOWS, 1, 0, neox_tensors},
};

const sp_gguf_arch *sp_gguf_arch_find(const char *arch)
{
    for (size_t i = 0; i < SP_ARRAY_LEN(archs); i++)
        if (strcmp(archs[i].arch, arch) == 0)
            return &archs[i];
    return NULL;
}

const char *sp_gguf_arch_list(void)
{
    static char list[256];
    if (!list[0])
        for (size_t i = 0; i < SP_ARRAY_LEN(archs); i++) {
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", archs[i].arch);
        }
    return list;
}

/* io/hf_arch.h: the Hugging Face architectures spanprobe imports, as data (docs/import.md).
 *
 * A family is one `architectures` value of config.json (GPT2LMHeadModel, LlamaForCausalLM, ...):
 * which recipe and model options it maps onto, which config.json keys hold the sizes, how its own
 * keys (RoPE, activations, windows, soft-caps) are read, and a tensor table: for every spanprobe
 * parameter, the safetensors tensor it comes from and how its rows are taken (a transposed Conv1D,
 * one part of a fused q/k/v matrix, a head-interleaved q/k/v, q/k rows reordered from Hugging
 * Face's rotate_half pairs (i, i + r/2) to spanprobe's neighbouring pairs (2i, 2i + 1)).
 * Adding an architecture is one entry of hf_arch.c, not code elsewhere.
 */
#ifndef SP_HF_ARCH_H
#define SP_HF_ARCH_H

#include <cJSON.h>

#include "core/config.h"

/* How the rows of a spanprobe parameter are found in its source tensor. */
typedef enum {
    SP_HF_ROWS_PLAIN,      /* row r is row r */
    SP_HF_ROWS_PART,       /* rows of part `part` of 3 equal parts (GPT-2's fused c_attn) */
    SP_HF_ROWS_NEOX_QKV    /* GPT-NeoX's [heads, 3, head_dim] fused rows: head h, part, row i */
} sp_hf_rows;

typedef struct {
    const char *param;   /* spanprobe parameter below blocks/<l>/ (or the whole name outside blocks) */
    const char *tensor;  /* safetensors name; "%d" stands for the layer */
    int transposed;      /* stored [in, out] (GPT-2's Conv1D) */
    sp_hf_rows rows;
    int part;            /* q 0, k 1, v 2 for the fused layouts */
    int rope_rows;       /* q or k rows (or their gains/biases): reordered from rotate_half pairs */
    int norm_gain;       /* a norm gain: gets the family's gain offset (Gemma stores w of (1 + w)) */
    int zero_if_absent;  /* a checkpoint may leave it out: zeros then (nanoGPT's LayerNorms without bias) */
} sp_hf_tensor;

typedef struct sp_hf_family sp_hf_family;

/* What a family's config.json says, once read (io/hf_config.c fills it). */
typedef struct {
    sp_config cfg;               /* resolved and valid */
    const sp_hf_family *family;
    char architecture[64];       /* the architectures value */
} sp_hf_config;

/* The config.json keys of the common sizes (NULL: the family has no such key). */
typedef struct {
    const char *d_model, *n_layers, *n_heads, *n_kv_heads, *d_ff, *vocab_size, *max_pos, *norm_eps;
} sp_hf_size_keys;

struct sp_hf_family {
    const char *architecture;      /* config.json architectures[0] */
    const char *model_type;        /* config.json model_type, checked when present */
    int variant, norm, ffn, gelu, pos;
    int tie_default;               /* tie_word_embeddings when config.json omits it */
    int rope_half_split;           /* Hugging Face rotate_half RoPE: q/k rows are reordered on import */
    double gain_offset;            /* added to every stored norm gain (1 for Gemma's (1 + w)) */
    sp_hf_size_keys keys;
    /* The family's own keys (activations, biases, RoPE, windows, caps) into hc->cfg; `where` names
     * the file in errors. */
    sp_status (*read_keys)(const cJSON *root, sp_hf_config *hc, const char *where);
    const char *prefix;            /* tensor names may lack this prefix (older checkpoints) */
    const char *const *ignored;    /* name suffixes of buffers that are no parameters */
    const sp_hf_tensor *tensors;   /* NULL-terminated by param */
    const char *config_name;       /* where the sizes come from, for errors (NULL: "config.json") */
};

/* nanoGPT's GPT (io/nanogpt.h): not looked up by an architectures value. */
extern const sp_hf_family sp_hf_nanogpt;
/* The family's config_name: "config.json" unless it names another. */
const char *sp_hf_config_name(const sp_hf_family *f);
/* The family of an architectures value, NULL when spanprobe does not import it. */
const sp_hf_family *sp_hf_family_find(const char *architecture);
/* "GPT2LMHeadModel, GPTNeoXForCausalLM, ..." for error messages. */
const char *sp_hf_family_list(void);
/* The table entry a spanprobe parameter comes from (name as in model/params.h); *layer gets the
 * block index (-1 outside the blocks). NULL when the family has none (a bug in its table). */
const sp_hf_tensor *sp_hf_tensor_for(const sp_hf_family *f, const char *param, int *layer);
/* The same lookup in any NULL-terminated table (io/gguf_arch.h's tables too). */
const sp_hf_tensor *sp_hf_tensor_in(const sp_hf_tensor *table, const char *param, int *layer);

#endif

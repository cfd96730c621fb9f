/* core/config.h: the model configuration, every option of shared docs/variants.md.
 *
 * The fields are described once, in a table (sp_config_fields), that every reader and writer walks:
 * CLI options (--d-model 64), JSON config files, and the /config group of a checkpoint all go through
 * sp_config_set(), so a new option is one table row. sp_config_resolve() fills the values that
 * default to something depending on the variant or the depth, and sp_config_validate() rejects
 * contradictions with one line naming the field.
 */
#ifndef SP_CONFIG_H
#define SP_CONFIG_H

#include "core/common.h"
#include "core/fields.h"

typedef enum {
    SP_VARIANT_PRE,
    SP_VARIANT_POST,
    SP_VARIANT_SPAN,
    SP_VARIANT_PERI,
    SP_VARIANT_MIXLN,
    SP_VARIANT_LNS,
    SP_VARIANT_DEEPNORM,
    SP_VARIANT_HYBRID,
    SP_VARIANT_OLMO2,
    SP_VARIANT_SIAMESE,
    SP_VARIANT_PARALLEL, /* GPT-NeoX, GPT-J: x' = x + A(N1(x)) + F(N2(x)) */
    SP_N_VARIANTS
} sp_variant;

typedef enum { SP_NORM_LAYERNORM, SP_NORM_RMSNORM } sp_norm_kind;
typedef enum { SP_FFN_GELU, SP_FFN_SWIGLU, SP_FFN_GEGLU } sp_ffn_kind; /* GEGLU: gelu(W1 x) * W3 x */
typedef enum { SP_GELU_TANH, SP_GELU_ERF } sp_gelu_kind; /* tanh approximation (GPT-2) or exact */
/* RoPE frequency rules: theta^(-2i/r), that divided by a factor (linear), or Llama 3's per-frequency
 * table (wavelengths beyond original_max_pos / low_freq_factor divided by the factor, those below
 * original_max_pos / high_freq_factor kept, a smooth blend between). */
typedef enum { SP_ROPE_SCALING_NONE, SP_ROPE_SCALING_LINEAR, SP_ROPE_SCALING_LLAMA3 } sp_rope_scaling;
/* Normalized attention projections: none, q and k per head over head_dim (Qwen3, Gemma 3), or over
 * the whole projected q and k (OLMo 2). The hybrid and olmo2 recipes set their own. */
typedef enum { SP_QK_NORM_NONE, SP_QK_NORM_HEAD, SP_QK_NORM_FULL } sp_qk_norm;
typedef enum { SP_POS_LEARNED, SP_POS_ROPE } sp_pos_kind;
typedef enum { SP_INIT_GLOBAL, SP_INIT_SCALED } sp_init_kind;

typedef struct {
    int variant;        /* sp_variant */
    int n_layers;
    int d_model;
    int n_heads;
    int n_kv_heads;     /* grouped-query attention; divides n_heads */
    int d_ff;           /* FFN hidden width */
    int vocab_size;
    int max_seq_len;    /* learned positions table size; RoPE limit */
    int norm;           /* sp_norm_kind */
    double norm_eps;
    int ffn;            /* sp_ffn_kind */
    int pos;            /* sp_pos_kind */
    double rope_theta;
    int tie_embeddings; /* 1: the LM head is the token embedding */
    int init;           /* sp_init_kind */
    double init_std;
    int final_norm;     /* -1 = variant default (resolved to 0/1) */
    int embed_norm;     /* peri: h0 = Ne(e); default off */
    double mixln_alpha; /* mixln: blocks l < round(alpha L) are post */
    double deepnorm_alpha; /* <= 0: (2L)^(1/4) */
    double deepnorm_beta;  /* <= 0: (8L)^(-1/4) */
    double siamese_c_mult; /* siamese: c_l = sqrt(mult (l+1)); 2 (code), 1 gives the summary's sqrt(l+1) */

    /* Options of pretrained architectures (docs/import.md); the defaults leave the model as above. */
    int head_dim;          /* 0: d_model / n_heads; else q is n_heads * head_dim wide */
    int gelu;              /* sp_gelu_kind of the gelu and geglu FFNs */
    int qkv_bias;          /* biases on the q, k, v projections */
    int attn_out_bias;     /* bias on W_O */
    int ffn_bias;          /* biases on W1 (and W3) and W2 */
    int qk_norm;           /* sp_qk_norm */
    int rope_dims;         /* rotated dims per head (partial rotary); 0: all of head_dim */
    int rope_scaling;      /* sp_rope_scaling */
    double rope_factor;
    double rope_low_freq_factor, rope_high_freq_factor; /* llama3 */
    int rope_original_max_pos;                          /* llama3 */
    double rope_local_theta; /* > 0: windowed layers use this base, unscaled (Gemma 3); 0: as the others */
    double attn_scale;     /* score scale; 0: 1/sqrt(head_dim) */
    double attn_softcap;   /* scores -> c tanh(scores / c) before the mask; 0: off */
    double final_softcap;  /* logits -> c tanh(logits / c); 0: off */
    int sliding_window;    /* 0: off; W: query i sees keys j with i - W < j <= i on windowed layers */
    int window_pattern;    /* 0: every layer windowed; p > 0: layer l is full when (l+1) % p == 0 */
    double embed_scale;    /* h_0 = embed_scale * (token embedding [+ position]); 1: off (Gemma: sqrt(d)) */
} sp_config;

typedef sp_field sp_config_field;

extern const sp_config_field sp_config_fields[];
extern const int sp_n_config_fields;
extern const sp_field_table sp_config_table;
extern const char *const sp_variant_names[];  /* indexed by sp_variant, NULL-terminated */
extern const char *const sp_norm_names[];
extern const char *const sp_ffn_names[];
extern const char *const sp_pos_names[];
extern const char *const sp_init_names[];
extern const char *const sp_gelu_names[];
extern const char *const sp_rope_scaling_names[];
extern const char *const sp_qk_norm_names[];

void sp_config_defaults(sp_config *cfg);
const sp_config_field *sp_config_find(const char *name); /* accepts d_model or d-model */
/* Parses value for the named field; `where` prefixes the error ("--d-model", "run.json: d_model"). */
sp_status sp_config_set(sp_config *cfg, const char *name, const char *value, const char *where);
/* Formats a field's value into buf (enums by name). */
void sp_config_format(const sp_config *cfg, const sp_config_field *f, char *buf, size_t len);
sp_status sp_config_resolve(sp_config *cfg);
sp_status sp_config_validate(const sp_config *cfg, const char *where);

int sp_config_head_dim(const sp_config *cfg);
int sp_config_q_dim(const sp_config *cfg);  /* n_heads * head_dim: width of q and of W_O's input */
int sp_config_kv_dim(const sp_config *cfg); /* n_kv_heads * head_dim */
int sp_config_rope_dims(const sp_config *cfg); /* rotated dims per head (0 without RoPE) */
/* Is layer l's attention windowed (sliding_window > 0 and the pattern says so)? */
int sp_config_layer_windowed(const sp_config *cfg, int layer);
int sp_config_mixln_n_post(const sp_config *cfg); /* round(alpha L) */

#endif

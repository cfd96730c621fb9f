#include "core/config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sp_variant_names[] = {"pre",      "post",   "span",  "peri",    "mixln", "lns",
                                        "deepnorm", "hybrid", "olmo2", "siamese", "parallel", NULL};
const char *const sp_norm_names[] = {"layernorm", "rmsnorm", NULL};
const char *const sp_ffn_names[] = {"gelu", "swiglu", "geglu", NULL};
const char *const sp_gelu_names[] = {"tanh", "erf", NULL};
const char *const sp_rope_scaling_names[] = {"none", "linear", "llama3", NULL};
const char *const sp_qk_norm_names[] = {"none", "head", "full", NULL};
const char *const sp_pos_names[] = {"learned", "rope", NULL};
const char *const sp_init_names[] = {"global", "scaled", NULL};

#define F(field, type, names, help) {#field, type, offsetof(sp_config, field), names, help}
const sp_config_field sp_config_fields[] = {
    F(variant, SP_FIELD_ENUM, sp_variant_names, "normalization placement"),
    F(n_layers, SP_FIELD_INT, NULL, "number of blocks L"),
    F(d_model, SP_FIELD_INT, NULL, "residual width d"),
    F(n_heads, SP_FIELD_INT, NULL, "attention query heads"),
    F(n_kv_heads, SP_FIELD_INT, NULL, "key/value heads (grouped-query; divides n_heads)"),
    F(d_ff, SP_FIELD_INT, NULL, "FFN hidden width"),
    F(vocab_size, SP_FIELD_INT, NULL, "vocabulary size (256 = bytes)"),
    F(max_seq_len, SP_FIELD_INT, NULL, "longest sequence (learned position table size)"),
    F(norm, SP_FIELD_ENUM, sp_norm_names, "layernorm or rmsnorm"),
    F(norm_eps, SP_FIELD_DOUBLE, NULL, "normalization epsilon"),
    F(ffn, SP_FIELD_ENUM, sp_ffn_names, "gelu, swiglu or geglu"),
    F(pos, SP_FIELD_ENUM, sp_pos_names, "learned positions or rope"),
    F(rope_theta, SP_FIELD_DOUBLE, NULL, "RoPE base"),
    F(tie_embeddings, SP_FIELD_BOOL, NULL, "LM head shares the token embedding"),
    F(init, SP_FIELD_ENUM, sp_init_names, "global or scaled (W_O, W_2 std / sqrt(2L))"),
    F(init_std, SP_FIELD_DOUBLE, NULL, "std of every matrix at init"),
    F(final_norm, SP_FIELD_BOOL, NULL, "final norm before the head (default: per variant)"),
    F(embed_norm, SP_FIELD_BOOL, NULL, "peri: normalize the embedding (h0 = Ne(e))"),
    F(mixln_alpha, SP_FIELD_DOUBLE, NULL, "mixln: fraction of post blocks at the bottom"),
    F(deepnorm_alpha, SP_FIELD_DOUBLE, NULL, "deepnorm residual scale (<= 0: (2L)^(1/4))"),
    F(deepnorm_beta, SP_FIELD_DOUBLE, NULL, "deepnorm init scale (<= 0: (8L)^(-1/4))"),
    F(siamese_c_mult, SP_FIELD_DOUBLE, NULL, "siamese: c_l = sqrt(mult (l+1))"),
    F(head_dim, SP_FIELD_INT, NULL, "attention head width (0: d_model / n_heads)"),
    F(gelu, SP_FIELD_ENUM, sp_gelu_names, "GELU of the gelu/geglu FFN: tanh approximation or exact erf"),
    F(qkv_bias, SP_FIELD_BOOL, NULL, "biases on the q, k, v projections"),
    F(attn_out_bias, SP_FIELD_BOOL, NULL, "bias on the attention output projection"),
    F(ffn_bias, SP_FIELD_BOOL, NULL, "biases on the FFN matrices"),
    F(qk_norm, SP_FIELD_ENUM, sp_qk_norm_names, "normalize q and k: none, head (per head) or full"),
    F(rope_dims, SP_FIELD_INT, NULL, "rotated dims per head (0: all; partial rotary)"),
    F(rope_scaling, SP_FIELD_ENUM, sp_rope_scaling_names, "RoPE frequency scaling: none, linear or llama3"),
    F(rope_factor, SP_FIELD_DOUBLE, NULL, "RoPE scaling factor (linear, llama3)"),
    F(rope_low_freq_factor, SP_FIELD_DOUBLE, NULL, "llama3 RoPE scaling: low_freq_factor"),
    F(rope_high_freq_factor, SP_FIELD_DOUBLE, NULL, "llama3 RoPE scaling: high_freq_factor"),
    F(rope_original_max_pos, SP_FIELD_INT, NULL, "llama3 RoPE scaling: original_max_position_embeddings"),
    F(rope_local_theta, SP_FIELD_DOUBLE, NULL, "RoPE base of windowed layers, unscaled (0: rope_theta)"),
    F(attn_scale, SP_FIELD_DOUBLE, NULL, "attention score scale (0: 1/sqrt(head_dim))"),
    F(attn_softcap, SP_FIELD_DOUBLE, NULL, "attention score soft-cap c tanh(s/c) (0: off)"),
    F(final_softcap, SP_FIELD_DOUBLE, NULL, "logit soft-cap c tanh(z/c) (0: off)"),
    F(sliding_window, SP_FIELD_INT, NULL, "attention window in tokens on windowed layers (0: off)"),
    F(window_pattern, SP_FIELD_INT, NULL, "0: every layer windowed; p: layer l full when (l+1) % p == 0"),
    F(embed_scale, SP_FIELD_DOUBLE, NULL, "multiplier of the embedding output (1: off)"),
};
#undef F
const int sp_n_config_fields = (int)SP_ARRAY_LEN(sp_config_fields);
const sp_field_table sp_config_table = {sp_config_fields, (int)SP_ARRAY_LEN(sp_config_fields)};

void sp_config_defaults(sp_config *cfg)
{
    *cfg = (sp_config){
        .variant = SP_VARIANT_PRE,
        .n_layers = 4,
        .d_model = 64,
        .n_heads = 4,
        .n_kv_heads = 4,
        .d_ff = 256,
        .vocab_size = 256,
        .max_seq_len = 128,
        .norm = SP_NORM_LAYERNORM,
        .norm_eps = 1e-5,
        .ffn = SP_FFN_GELU,
        .pos = SP_POS_LEARNED,
        .rope_theta = 10000.0,
        .tie_embeddings = 1,
        .init = SP_INIT_SCALED,
        .init_std = 0.02,
        .final_norm = -1,
        .embed_norm = 0,
        .mixln_alpha = 0.25,
        .deepnorm_alpha = 0.0,
        .deepnorm_beta = 0.0,
        .siamese_c_mult = 2.0,
        .rope_factor = 1.0,
        .rope_low_freq_factor = 1.0,
        .rope_high_freq_factor = 4.0,
        .rope_original_max_pos = 8192,
        .embed_scale = 1.0,
    };
}

const sp_config_field *sp_config_find(const char *name) { return sp_fields_find(&sp_config_table, name); }

sp_status sp_config_set(sp_config *cfg, const char *name, const char *value, const char *where)
{
    if (!sp_config_find(name))
        return sp_error(SP_ERR_USAGE, "%s: unknown config field '%s'", where, name);
    return sp_fields_set(&sp_config_table, cfg, name, value, where);
}

void sp_config_format(const sp_config *cfg, const sp_config_field *f, char *buf, size_t len)
{
    sp_fields_format(cfg, f, buf, len);
}

sp_status sp_config_resolve(sp_config *cfg)
{
    if (cfg->final_norm < 0) {
        /* post, span and deepnorm normalize the block output already; the others end unnormalized */
        int v = cfg->variant;
        cfg->final_norm = !(v == SP_VARIANT_POST || v == SP_VARIANT_SPAN || v == SP_VARIANT_DEEPNORM);
    }
    if (cfg->n_layers > 0) {
        if (cfg->deepnorm_alpha <= 0)
            cfg->deepnorm_alpha = pow(2.0 * cfg->n_layers, 0.25);
        if (cfg->deepnorm_beta <= 0)
            cfg->deepnorm_beta = pow(8.0 * cfg->n_layers, -0.25);
    }
    return SP_OK;
}

int sp_config_head_dim(const sp_config *cfg) { return cfg->head_dim > 0 ? cfg->head_dim : cfg->d_model / cfg->n_heads; }
int sp_config_q_dim(const sp_config *cfg) { return sp_config_head_dim(cfg) * cfg->n_heads; }
int sp_config_kv_dim(const sp_config *cfg) { return sp_config_head_dim(cfg) * cfg->n_kv_heads; }

int sp_config_rope_dims(const sp_config *cfg)
{
    if (cfg->pos != SP_POS_ROPE)
        return 0;
    return cfg->rope_dims > 0 ? cfg->rope_dims : sp_config_head_dim(cfg);
}

int sp_config_layer_windowed(const sp_config *cfg, int layer)
{
    if (cfg->sliding_window <= 0)
        return 0;
    return cfg->window_pattern <= 0 || (layer + 1) % cfg->window_pattern != 0;
}

int sp_config_mixln_n_post(const sp_config *cfg)
{
    return (int)floor(cfg->mixln_alpha * cfg->n_layers + 0.5);
}

/* Largest sizes spanprobe accepts: far above any model it can run, low enough that products of two
 * of them fit in size_t and in int indices of BLAS calls. */
#define SP_MAX_DIM (1 << 20)
#define SP_MAX_LAYERS 4096

/* The options of pretrained architectures: scales and caps non-negative, RoPE scaling parameters
 * that define a frequency table, and no second q/k norm on recipes that have their own. */
static sp_status validate_pretrained_options(const sp_config *cfg, const char *where)
{
    const struct {
        const char *name;
        double value;
    } nonneg[] = {{"attn_scale", cfg->attn_scale},
                  {"attn_softcap", cfg->attn_softcap},
                  {"final_softcap", cfg->final_softcap},
                  {"rope_local_theta", cfg->rope_local_theta}};
    for (size_t i = 0; i < SP_ARRAY_LEN(nonneg); i++)
        if (!(nonneg[i].value >= 0 && isfinite(nonneg[i].value)))
            return sp_error(SP_ERR_INPUT, "%s: %s = %g is out of range (expected a finite value >= 0, 0: off)", where,
                            nonneg[i].name, nonneg[i].value);
    if (cfg->rope_local_theta != 0 && !(cfg->rope_local_theta > 1))
        return sp_error(SP_ERR_INPUT, "%s: rope_local_theta = %g is out of range (expected > 1, or 0: off)", where,
                        cfg->rope_local_theta);
    if (!(cfg->embed_scale > 0 && isfinite(cfg->embed_scale)))
        return sp_error(SP_ERR_INPUT, "%s: embed_scale = %g must be positive and finite", where, cfg->embed_scale);
    if (cfg->rope_scaling != SP_ROPE_SCALING_NONE && !(cfg->rope_factor > 0 && isfinite(cfg->rope_factor)))
        return sp_error(SP_ERR_INPUT, "%s: rope_factor = %g must be positive and finite", where, cfg->rope_factor);
    if (cfg->rope_scaling == SP_ROPE_SCALING_LLAMA3 &&
        !(cfg->rope_low_freq_factor > 0 && cfg->rope_high_freq_factor > cfg->rope_low_freq_factor &&
          isfinite(cfg->rope_high_freq_factor)))
        return sp_error(SP_ERR_INPUT,
                        "%s: llama3 RoPE scaling needs 0 < rope_low_freq_factor < rope_high_freq_factor, found %g and %g",
                        where, cfg->rope_low_freq_factor, cfg->rope_high_freq_factor);
    if (cfg->qk_norm != SP_QK_NORM_NONE && (cfg->variant == SP_VARIANT_HYBRID || cfg->variant == SP_VARIANT_OLMO2))
        return sp_error(SP_ERR_INPUT, "%s: qk_norm = %s on variant %s, whose recipe normalizes q and k itself "
                                      "(expected qk_norm none)",
                        where, sp_qk_norm_names[cfg->qk_norm], sp_variant_names[cfg->variant]);
    return SP_OK;
}

sp_status sp_config_validate(const sp_config *cfg, const char *where)
{
    const sp_int_range sizes[] = {
        {"n_layers", cfg->n_layers, 1, SP_MAX_LAYERS, NULL},
        {"d_model", cfg->d_model, 1, SP_MAX_DIM, NULL},
        {"n_heads", cfg->n_heads, 1, SP_MAX_DIM, NULL},
        {"n_kv_heads", cfg->n_kv_heads, 1, SP_MAX_DIM, NULL},
        {"d_ff", cfg->d_ff, 1, SP_MAX_DIM, NULL},
        {"vocab_size", cfg->vocab_size, 1, SP_MAX_DIM * 4, NULL},
        {"max_seq_len", cfg->max_seq_len, 1, SP_MAX_DIM, NULL},
        {"head_dim", cfg->head_dim, 0, SP_MAX_DIM, " (0: d_model / n_heads)"},
        {"rope_dims", cfg->rope_dims, 0, SP_MAX_DIM, " (0: all of head_dim)"},
        {"rope_original_max_pos", cfg->rope_original_max_pos, 1, INT32_MAX, NULL},
        {"sliding_window", cfg->sliding_window, 0, INT32_MAX, " (0: off)"},
        {"window_pattern", cfg->window_pattern, 0, SP_MAX_LAYERS, " (0: every layer)"},
    };
    SP_TRY(sp_check_int_ranges(sizes, SP_ARRAY_LEN(sizes), SP_ERR_INPUT, where));
    if (cfg->variant < 0 || cfg->variant >= SP_N_VARIANTS)
        return sp_error(SP_ERR_INPUT, "%s: unknown variant index %d", where, cfg->variant);
    if (cfg->head_dim == 0 && cfg->d_model % cfg->n_heads)
        return sp_error(SP_ERR_INPUT, "%s: n_heads = %d does not divide d_model = %d (set head_dim)", where,
                        cfg->n_heads, cfg->d_model);
    if ((int64_t)sp_config_head_dim(cfg) * cfg->n_heads > SP_MAX_DIM)
        return sp_error(SP_ERR_INPUT, "%s: n_heads x head_dim = %d x %d is out of range (expected <= %d)", where,
                        cfg->n_heads, sp_config_head_dim(cfg), SP_MAX_DIM);
    if (cfg->n_heads % cfg->n_kv_heads)
        return sp_error(SP_ERR_INPUT, "%s: n_kv_heads = %d does not divide n_heads = %d", where, cfg->n_kv_heads,
                        cfg->n_heads);
    if (cfg->pos == SP_POS_ROPE && (sp_config_rope_dims(cfg) % 2 || sp_config_rope_dims(cfg) > sp_config_head_dim(cfg)))
        return sp_error(SP_ERR_INPUT, "%s: RoPE rotates pairs within a head: rope_dims = %d must be even and at most "
                                      "head_dim = %d", where, sp_config_rope_dims(cfg), sp_config_head_dim(cfg));
    if (!(cfg->norm_eps > 0 && cfg->norm_eps < 1))
        return sp_error(SP_ERR_INPUT, "%s: norm_eps = %g is out of range (expected 0 < eps < 1)", where, cfg->norm_eps);
    if (!(cfg->rope_theta > 1))
        return sp_error(SP_ERR_INPUT, "%s: rope_theta = %g is out of range (expected > 1)", where, cfg->rope_theta);
    if (!(cfg->init_std > 0 && cfg->init_std < 10))
        return sp_error(SP_ERR_INPUT, "%s: init_std = %g is out of range (expected 0 < std < 10)", where, cfg->init_std);
    if (!(cfg->mixln_alpha >= 0 && cfg->mixln_alpha <= 1))
        return sp_error(SP_ERR_INPUT, "%s: mixln_alpha = %g is out of range (expected 0..1)", where, cfg->mixln_alpha);
    if (!(cfg->siamese_c_mult > 0))
        return sp_error(SP_ERR_INPUT, "%s: siamese_c_mult = %g must be positive", where, cfg->siamese_c_mult);
    struct {
        const char *name;
        int value;
        const char *const *names;
    } enums[] = {{"norm", cfg->norm, sp_norm_names},
                 {"ffn", cfg->ffn, sp_ffn_names},
                 {"pos", cfg->pos, sp_pos_names},
                 {"init", cfg->init, sp_init_names},
                 {"gelu", cfg->gelu, sp_gelu_names},
                 {"rope_scaling", cfg->rope_scaling, sp_rope_scaling_names},
                 {"qk_norm", cfg->qk_norm, sp_qk_norm_names}};
    for (size_t i = 0; i < SP_ARRAY_LEN(enums); i++) {
        int n = 0;
        while (enums[i].names[n])
            n++;
        if (enums[i].value < 0 || enums[i].value >= n)
            return sp_error(SP_ERR_INPUT, "%s: %s index %d is out of range", where, enums[i].name, enums[i].value);
    }
    return validate_pretrained_options(cfg, where); /* after the enum ranges: it indexes names */
}

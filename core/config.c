#include "core/config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sp_variant_names[] = {"pre",      "post",   "span",  "peri",    "mixln", "lns",
                                        "deepnorm", "hybrid", "olmo2", "siamese", NULL};
const char *const sp_norm_names[] = {"layernorm", "rmsnorm", NULL};
const char *const sp_ffn_names[] = {"gelu", "swiglu", NULL};
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
    F(ffn, SP_FIELD_ENUM, sp_ffn_names, "gelu or swiglu"),
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

int sp_config_head_dim(const sp_config *cfg) { return cfg->d_model / cfg->n_heads; }
int sp_config_kv_dim(const sp_config *cfg) { return sp_config_head_dim(cfg) * cfg->n_kv_heads; }

int sp_config_mixln_n_post(const sp_config *cfg)
{
    return (int)floor(cfg->mixln_alpha * cfg->n_layers + 0.5);
}

/* Largest sizes spanprobe accepts: far above any model it can run, low enough that products of two
 * of them fit in size_t and in int indices of BLAS calls. */
#define SP_MAX_DIM (1 << 20)
#define SP_MAX_LAYERS 4096

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
    };
    SP_TRY(sp_check_int_ranges(sizes, SP_ARRAY_LEN(sizes), SP_ERR_INPUT, where));
    if (cfg->variant < 0 || cfg->variant >= SP_N_VARIANTS)
        return sp_error(SP_ERR_INPUT, "%s: unknown variant index %d", where, cfg->variant);
    if (cfg->d_model % cfg->n_heads)
        return sp_error(SP_ERR_INPUT, "%s: n_heads = %d does not divide d_model = %d", where, cfg->n_heads,
                        cfg->d_model);
    if (cfg->n_heads % cfg->n_kv_heads)
        return sp_error(SP_ERR_INPUT, "%s: n_kv_heads = %d does not divide n_heads = %d", where, cfg->n_kv_heads,
                        cfg->n_heads);
    if (cfg->pos == SP_POS_ROPE && sp_config_head_dim(cfg) % 2)
        return sp_error(SP_ERR_INPUT, "%s: RoPE needs an even head_dim, found %d", where, sp_config_head_dim(cfg));
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
                 {"init", cfg->init, sp_init_names}};
    for (size_t i = 0; i < SP_ARRAY_LEN(enums); i++) {
        int n = 0;
        while (enums[i].names[n])
            n++;
        if (enums[i].value < 0 || enums[i].value >= n)
            return sp_error(SP_ERR_INPUT, "%s: %s index %d is out of range", where, enums[i].name, enums[i].value);
    }
    return SP_OK;
}

#include "io/hf_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file_read.h"
#include "io/hf_keys.h"

/* config.json files are a few kilobytes; anything near this is not one. */
#define HF_CONFIG_MAX_BYTES (16u << 20)

sp_status sp_hf_gelu_kind(const char *name, const char *key, int *gelu, const char *where)
{
    /* the tanh approximation under its names in transformers' ACT2FN (gelu_fast is the same function
     * written with x^3 expanded) */
    static const char *const tanh_names[] = {"gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python_tanh"};
    for (size_t i = 0; i < SP_ARRAY_LEN(tanh_names); i++)
        if (strcmp(name, tanh_names[i]) == 0) {
            *gelu = SP_GELU_TANH;
            return SP_OK;
        }
    if (strcmp(name, "gelu") == 0 || strcmp(name, "gelu_python") == 0) {
        *gelu = SP_GELU_ERF;
        return SP_OK;
    }
    return sp_error(SP_ERR_INPUT, "%s: \"%s\" = \"%s\" is not supported (expected gelu, gelu_new, gelu_pytorch_tanh "
                                  "or gelu_fast)",
                    where, key, name);
}

/* ---- RoPE ---- */

/* One rope_parameters (or legacy rope_scaling) object's type and scaling numbers into cfg. */
static sp_status read_rope_scaling(const cJSON *p, const char *key, sp_config *cfg, const char *where)
{
    const char *type = "default";
    SP_TRY(sp_hf_json_string(p, "rope_type", 0, &type, where));
    SP_TRY(sp_hf_json_string(p, "type", 0, &type, where)); /* the older spelling */
    SP_TRY(sp_hf_json_unsupported(p, "attention_factor", "a RoPE attention factor", where));
    if (strcmp(type, "default") == 0) {
        cfg->rope_scaling = SP_ROPE_SCALING_NONE;
        return SP_OK;
    }
    if (strcmp(type, "linear") == 0) {
        cfg->rope_scaling = SP_ROPE_SCALING_LINEAR;
        return sp_hf_json_double(p, "factor", 1, &cfg->rope_factor, where);
    }
    if (strcmp(type, "llama3") == 0) {
        cfg->rope_scaling = SP_ROPE_SCALING_LLAMA3;
        SP_TRY(sp_hf_json_double(p, "factor", 1, &cfg->rope_factor, where));
        SP_TRY(sp_hf_json_double(p, "low_freq_factor", 1, &cfg->rope_low_freq_factor, where));
        SP_TRY(sp_hf_json_double(p, "high_freq_factor", 1, &cfg->rope_high_freq_factor, where));
        return sp_hf_json_int(p, "original_max_position_embeddings", 1, INT32_MAX, 1, &cfg->rope_original_max_pos,
                              where);
    }
    return sp_error(SP_ERR_INPUT, "%s: %s.rope_type \"%s\" is not supported (supported: default, linear, llama3)", where,
                    key, type);
}

/* rotated dims = int(head_dim * factor), as transformers truncates it; 0 means the whole head */
static sp_status set_rope_dims(sp_config *cfg, double partial, const char *where)
{
    if (!(partial > 0 && partial <= 1))
        return sp_error(SP_ERR_INPUT, "%s: partial_rotary_factor = %g is out of range (expected 0 < f <= 1)", where,
                        partial);
    int head_dim = sp_config_head_dim(cfg), dims = (int)(head_dim * partial);
    cfg->rope_dims = dims == head_dim ? 0 : dims;
    return SP_OK;
}

sp_status sp_hf_read_rope(const cJSON *root, sp_hf_config *hc, const char *legacy_theta, double default_partial,
                          const char *where)
{
    sp_config *cfg = &hc->cfg;
    cfg->pos = SP_POS_ROPE;
    double partial = default_partial;
    const cJSON *params = sp_hf_json_get(root, "rope_parameters");
    if (params) {
        if (!cJSON_IsObject(params))
            return sp_error(SP_ERR_INPUT, "%s: \"rope_parameters\" must be an object", where);
        /* Gemma 3 keeps one set per layer type */
        const cJSON *full = sp_hf_json_get(params, "full_attention"), *local = sp_hf_json_get(params, "sliding_attention");
        const cJSON *global = full ? full : params;
        SP_TRY(sp_hf_json_double(global, "rope_theta", 1, &cfg->rope_theta, where));
        SP_TRY(sp_hf_json_double(global, "partial_rotary_factor", 0, &partial, where));
        SP_TRY(read_rope_scaling(global, full ? "rope_parameters.full_attention" : "rope_parameters", cfg, where));
        if (local) {
            sp_config local_cfg = *cfg;
            SP_TRY(read_rope_scaling(local, "rope_parameters.sliding_attention", &local_cfg, where));
            if (local_cfg.rope_scaling != SP_ROPE_SCALING_NONE)
                return sp_error(SP_ERR_INPUT, "%s: rope_parameters.sliding_attention is scaled; spanprobe scales only "
                                              "the full-attention layers' RoPE",
                                where);
            SP_TRY(sp_hf_json_double(local, "rope_theta", 1, &cfg->rope_local_theta, where));
        }
    } else {
        SP_TRY(sp_hf_json_double(root, legacy_theta, 0, &cfg->rope_theta, where));
        SP_TRY(sp_hf_json_double(root, "rotary_pct", 0, &partial, where));
        SP_TRY(sp_hf_json_double(root, "partial_rotary_factor", 0, &partial, where));
        SP_TRY(sp_hf_json_double(root, "rope_local_base_freq", 0, &cfg->rope_local_theta, where));
        const cJSON *scaling = sp_hf_json_get(root, "rope_scaling");
        if (scaling && !cJSON_IsObject(scaling))
            return sp_error(SP_ERR_INPUT, "%s: \"rope_scaling\" must be an object or null", where);
        if (scaling)
            SP_TRY(read_rope_scaling(scaling, "rope_scaling", cfg, where));
    }
    return set_rope_dims(cfg, partial, where);
}

/* ---- sliding windows ---- */

/* The period p of a layer_types list (layer l full iff (l + 1) % p == 0), 0 when every layer
 * slides; -1 when no layer slides. */
static sp_status pattern_of_layer_types(const cJSON *types, int n_layers, int *pattern, const char *where)
{
    if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != n_layers)
        return sp_error(SP_ERR_INPUT, "%s: \"layer_types\" must be a list of %d strings", where, n_layers);
    int first_full = -1, n_full = 0;
    for (int l = 0; l < n_layers; l++) {
        const cJSON *t = cJSON_GetArrayItem(types, l);
        int full = cJSON_IsString(t) && strcmp(t->valuestring, "full_attention") == 0;
        if (!full && !(cJSON_IsString(t) && strcmp(t->valuestring, "sliding_attention") == 0))
            return sp_error(SP_ERR_INPUT, "%s: layer_types[%d] must be \"full_attention\" or \"sliding_attention\"",
                            where, l);
        if (full && first_full < 0)
            first_full = l;
        n_full += full;
    }
    *pattern = n_full == n_layers ? -1 : first_full < 0 ? 0 : first_full + 1;
    for (int l = 0; *pattern > 0 && l < n_layers; l++) {
        int full = strcmp(cJSON_GetArrayItem(types, l)->valuestring, "full_attention") == 0;
        if (full != ((l + 1) % *pattern == 0))
            return sp_error(SP_ERR_INPUT, "%s: layer_types is not periodic (layer %d); spanprobe windows every layer "
                                          "but each p-th",
                            where, l);
    }
    return SP_OK;
}

sp_status sp_hf_read_windows(const cJSON *root, sp_hf_config *hc, int default_pattern, const char *where)
{
    sp_config *cfg = &hc->cfg;
    cfg->window_pattern = default_pattern;
    SP_TRY(sp_hf_json_int(root, "sliding_window", 0, INT32_MAX, 0, &cfg->sliding_window, where));
    SP_TRY(sp_hf_json_int(root, "sliding_window_pattern", 0, INT32_MAX, 0, &cfg->window_pattern, where));
    const cJSON *types = sp_hf_json_get(root, "layer_types");
    if (!types)
        return SP_OK;
    int pattern = 0;
    SP_TRY(pattern_of_layer_types(types, cfg->n_layers, &pattern, where));
    if (pattern < 0)
        cfg->sliding_window = 0;
    else
        cfg->window_pattern = pattern;
    return SP_OK;
}

/* ---- the whole file ---- */

void sp_hf_family_defaults(const sp_hf_family *f, sp_config *cfg)
{
    sp_config_defaults(cfg);
    cfg->variant = f->variant;
    cfg->norm = f->norm;
    cfg->ffn = f->ffn;
    cfg->gelu = f->gelu;
    cfg->pos = f->pos;
}

static sp_status read_sizes(const cJSON *root, const sp_hf_family *f, sp_config *cfg, const char *where)
{
    const sp_hf_size_keys *k = &f->keys;
    SP_TRY(sp_hf_json_int(root, k->d_model, 1, INT32_MAX, 1, &cfg->d_model, where));
    SP_TRY(sp_hf_json_int(root, k->n_layers, 1, INT32_MAX, 1, &cfg->n_layers, where));
    SP_TRY(sp_hf_json_int(root, k->n_heads, 1, INT32_MAX, 1, &cfg->n_heads, where));
    cfg->n_kv_heads = cfg->n_heads;
    if (k->n_kv_heads)
        SP_TRY(sp_hf_json_int(root, k->n_kv_heads, 1, INT32_MAX, 0, &cfg->n_kv_heads, where));
    cfg->d_ff = cfg->d_model <= INT32_MAX / 4 ? 4 * cfg->d_model : INT32_MAX; /* GPT-2's n_inner: null */
    SP_TRY(sp_hf_json_int(root, k->d_ff, 1, INT32_MAX, 0, &cfg->d_ff, where));
    SP_TRY(sp_hf_json_int(root, k->vocab_size, 1, INT32_MAX, 1, &cfg->vocab_size, where));
    SP_TRY(sp_hf_json_int(root, k->max_pos, 1, INT32_MAX, 1, &cfg->max_seq_len, where));
    SP_TRY(sp_hf_json_double(root, k->norm_eps, 1, &cfg->norm_eps, where));
    cfg->tie_embeddings = f->tie_default;
    return sp_hf_json_bool(root, "tie_word_embeddings", &cfg->tie_embeddings, where);
}

static sp_status find_family(const cJSON *root, sp_hf_config *hc, const char *where)
{
    const cJSON *archs = sp_hf_json_get(root, "architectures");
    if (!cJSON_IsArray(archs) || cJSON_GetArraySize(archs) < 1 || !cJSON_IsString(cJSON_GetArrayItem(archs, 0)))
        return sp_error(SP_ERR_INPUT, "%s: \"architectures\" must be a list naming the model class (one of %s)", where,
                        sp_hf_family_list());
    const char *name = cJSON_GetArrayItem(archs, 0)->valuestring;
    hc->family = sp_hf_family_find(name);
    if (!hc->family)
        return sp_error(SP_ERR_INPUT, "%s: architectures \"%s\" is not supported (supported: %s)", where, name,
                        sp_hf_family_list());
    snprintf(hc->architecture, sizeof hc->architecture, "%s", name);
    const char *model_type = NULL;
    SP_TRY(sp_hf_json_string(root, "model_type", 0, &model_type, where));
    if (model_type && strcmp(model_type, hc->family->model_type) != 0)
        return sp_error(SP_ERR_INPUT, "%s: model_type \"%s\" contradicts architectures \"%s\" (expected \"%s\")", where,
                        model_type, name, hc->family->model_type);
    return SP_OK;
}

sp_status sp_hf_config_map(const cJSON *root, const sp_hf_family *family, const char *where, sp_hf_config *hc)
{
    memset(hc, 0, sizeof *hc);
    if (!cJSON_IsObject(root))
        return sp_error(SP_ERR_INPUT, "%s: expected a JSON object", where);
    if (family) {
        hc->family = family;
        snprintf(hc->architecture, sizeof hc->architecture, "%s", family->architecture);
    } else {
        SP_TRY(find_family(root, hc, where));
    }
    const sp_hf_family *f = hc->family;
    sp_config *cfg = &hc->cfg;
    sp_hf_family_defaults(f, cfg);
    SP_TRY(read_sizes(root, f, cfg, where));
    SP_TRY(sp_hf_json_unsupported(root, "is_encoder_decoder", "an encoder-decoder model", where));
    SP_TRY(sp_hf_json_unsupported(root, "add_cross_attention", "cross-attention", where));
    SP_TRY(f->read_keys(root, hc, where));
    SP_TRY(sp_config_resolve(cfg));
    return sp_config_validate(cfg, where);
}

sp_status sp_hf_config_read(const char *path, sp_hf_config *out)
{
    unsigned char *text = NULL;
    size_t len = 0;
    SP_TRY(sp_file_read_all(path, HF_CONFIG_MAX_BYTES, &text, &len));
    cJSON *root = cJSON_ParseWithLength((const char *)text, len);
    free(text);
    if (!root)
        return sp_error(SP_ERR_INPUT, "%s: not valid JSON", path);
    sp_status st = sp_hf_config_map(root, NULL, path, out);
    cJSON_Delete(root);
    return st;
}

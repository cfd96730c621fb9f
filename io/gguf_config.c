#include "io/gguf_config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/hf_config.h"

typedef struct {
    const sp_gguf *g;
    const char *path, *arch;
} keys;

static void key_name(const keys *k, const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "%s.%s", k->arch, key);
}

static int has_key(const keys *k, const char *key)
{
    char name[128];
    key_name(k, key, name, sizeof name);
    return sp_gguf_kv_find(k->g, name) >= 0;
}

/* Puts "<arch>.key" into name; *present says whether the file has it. Absent and required is an
 * error. */
static sp_status lookup(const keys *k, const char *key, int required, char name[128], int *present)
{
    key_name(k, key, name, 128);
    *present = sp_gguf_kv_find(k->g, name) >= 0;
    if (!*present && required)
        return sp_error(SP_ERR_INPUT, "%s: required key %s is missing", k->path, name);
    return SP_OK;
}

/* `<arch>.key` into *out within [lo, INT32_MAX]; absent and optional: *out kept. */
static sp_status get_int(const keys *k, const char *key, int required, int64_t lo, int *out)
{
    char name[128];
    int present;
    SP_TRY(lookup(k, key, required, name, &present));
    uint64_t v = 0;
    if (!present)
        return SP_OK;
    SP_TRY(sp_gguf_get_uint(k->g, name, &v));
    if (v < (uint64_t)lo || v > INT32_MAX)
        return sp_error(SP_ERR_INPUT, "%s: %s = %llu is out of range (expected %lld..%d)", k->path, name,
                        (unsigned long long)v, (long long)lo, INT32_MAX);
    *out = (int)v;
    return SP_OK;
}

static sp_status get_float(const keys *k, const char *key, int required, double *out)
{
    char name[128];
    int present;
    SP_TRY(lookup(k, key, required, name, &present));
    if (!present)
        return SP_OK;
    SP_TRY(sp_gguf_get_float(k->g, name, out));
    if (!isfinite(*out))
        return sp_error(SP_ERR_INPUT, "%s: %s = %g is not finite", k->path, name, *out);
    return SP_OK;
}

static sp_status reject_key(const keys *k, const char *key, const char *what)
{
    if (!has_key(k, key))
        return SP_OK;
    char name[128];
    key_name(k, key, name, sizeof name);
    return sp_error(SP_ERR_INPUT, "%s: %s is set: %s is not supported for %s", k->path, name, what, k->arch);
}

static sp_status read_sizes(const keys *k, sp_config *cfg)
{
    SP_TRY(get_int(k, "embedding_length", 1, 1, &cfg->d_model));
    SP_TRY(get_int(k, "block_count", 1, 1, &cfg->n_layers));
    SP_TRY(get_int(k, "feed_forward_length", 1, 1, &cfg->d_ff));
    SP_TRY(get_int(k, "attention.head_count", 1, 1, &cfg->n_heads));
    cfg->n_kv_heads = cfg->n_heads;
    SP_TRY(get_int(k, "attention.head_count_kv", 0, 1, &cfg->n_kv_heads));
    SP_TRY(get_int(k, "context_length", 1, 1, &cfg->max_seq_len));
    SP_TRY(get_int(k, "attention.key_length", 0, 1, &cfg->head_dim));
    int value_length = cfg->head_dim;
    SP_TRY(get_int(k, "attention.value_length", 0, 1, &value_length));
    if (value_length != cfg->head_dim)
        return sp_error(SP_ERR_INPUT, "%s: %s.attention.value_length = %d differs from key_length = %d (spanprobe's "
                                      "heads have one width)",
                        k->path, k->arch, value_length, cfg->head_dim);
    /* the vocabulary is token_embd's [vocab, d_model]; <arch>.vocab_size, when present, must agree */
    const sp_gguf_tensor *embd = sp_gguf_find(k->g, "token_embd.weight");
    if (!embd || embd->n_dims != 2)
        return sp_error(SP_ERR_INPUT, "%s: tensor 'token_embd.weight' is %s (expected a [vocab, d_model] matrix)",
                        k->path, embd ? "not a matrix" : "missing");
    if (embd->dims[1] > INT32_MAX)
        return sp_error(SP_ERR_INPUT, "%s: token_embd.weight has %lld rows (expected at most %d)", k->path,
                        (long long)embd->dims[1], INT32_MAX);
    cfg->vocab_size = (int)embd->dims[1];
    int vocab = cfg->vocab_size;
    SP_TRY(get_int(k, "vocab_size", 0, 1, &vocab));
    if (vocab != cfg->vocab_size)
        return sp_error(SP_ERR_INPUT, "%s: %s.vocab_size = %d but token_embd.weight has %d rows", k->path, k->arch,
                        vocab, cfg->vocab_size);
    return SP_OK;
}

static sp_status read_rope(const keys *k, const sp_gguf_arch *a, sp_config *cfg)
{
    cfg->rope_theta = 10000.0;
    SP_TRY(get_float(k, "rope.freq_base", 0, &cfg->rope_theta));
    const int head_dim = cfg->head_dim ? cfg->head_dim : cfg->d_model / cfg->n_heads;
    int dims = head_dim;
    SP_TRY(get_int(k, "rope.dimension_count", 0, 1, &dims));
    if (!a->rope_neox && dims != head_dim) /* the converter's pair permutation spans the whole head */
        return sp_error(SP_ERR_INPUT, "%s: %s.rope.dimension_count = %d differs from the head width %d (partial "
                                      "RoPE is not supported for %s)",
                        k->path, k->arch, dims, head_dim, k->arch);
    cfg->rope_dims = dims == head_dim ? 0 : dims;
    char name[128];
    key_name(k, "rope.scaling.type", name, sizeof name);
    const char *type = "none";
    if (sp_gguf_kv_find(k->g, name) >= 0)
        SP_TRY(sp_gguf_get_string(k->g, name, &type, NULL));
    double factor = 0;
    SP_TRY(get_float(k, "rope.scale_linear", 0, &factor)); /* the older spelling of a linear factor */
    if (strcmp(type, "linear") == 0)
        SP_TRY(get_float(k, "rope.scaling.factor", 1, &factor));
    else if (strcmp(type, "none") != 0)
        return sp_error(SP_ERR_INPUT, "%s: %s = \"%s\" is not supported (supported: none, linear)", k->path, name,
                        type);
    if (factor != 0 && factor != 1) {
        if (!(factor > 0))
            return sp_error(SP_ERR_INPUT, "%s: the RoPE scaling factor %g must be positive", k->path, factor);
        cfg->rope_scaling = SP_ROPE_SCALING_LINEAR;
        cfg->rope_factor = factor;
    }
    return SP_OK;
}

/* Soft-caps, windows, the residual layout, the embedding and score scales. */
static sp_status read_arch_keys(const keys *k, const sp_gguf_arch *a, sp_config *cfg)
{
    if (a->attn_softcap > 0 || a->final_softcap > 0) {
        cfg->attn_softcap = a->attn_softcap;
        cfg->final_softcap = a->final_softcap;
        SP_TRY(get_float(k, "attn_logit_softcapping", 0, &cfg->attn_softcap));
        SP_TRY(get_float(k, "final_logit_softcapping", 0, &cfg->final_softcap));
    }
    if (a->window_pattern < 0) {
        SP_TRY(reject_key(k, "attention.sliding_window", "sliding-window attention"));
    } else {
        cfg->window_pattern = a->window_pattern;
        cfg->sliding_window = a->default_window;
        cfg->rope_local_theta = a->local_theta;
        SP_TRY(get_int(k, "attention.sliding_window", 0, 0, &cfg->sliding_window));
        SP_TRY(get_float(k, "rope.freq_base_swa", 0, &cfg->rope_local_theta));
    }
    if (a->parallel_key) {
        char name[128];
        key_name(k, "use_parallel_residual", name, sizeof name);
        int parallel = 1;
        if (sp_gguf_kv_find(k->g, name) >= 0)
            SP_TRY(sp_gguf_get_bool(k->g, name, &parallel));
        cfg->variant = parallel ? SP_VARIANT_PARALLEL : SP_VARIANT_PRE;
    }
    if (a->embed_scale_sqrt_d)
        cfg->embed_scale = sqrt((double)cfg->d_model);
    if (a->scale_by_d_model_layers && cfg->n_layers == a->scale_by_d_model_layers)
        cfg->attn_scale = 1.0 / sqrt((double)cfg->d_model / cfg->n_heads);
    return SP_OK;
}

/* Optional tensors turn the biases on, the stored head unties it (as llama.cpp loads them). */
static void read_tensor_options(const sp_gguf *g, sp_config *cfg)
{
    cfg->qkv_bias = sp_gguf_find(g, "blk.0.attn_q.bias") || sp_gguf_find(g, "blk.0.attn_qkv.bias");
    cfg->attn_out_bias = sp_gguf_find(g, "blk.0.attn_output.bias") != NULL;
    cfg->ffn_bias = sp_gguf_find(g, "blk.0.ffn_up.bias") || sp_gguf_find(g, "blk.0.ffn_down.bias");
    cfg->tie_embeddings = sp_gguf_find(g, "output.weight") == NULL;
}

sp_status sp_gguf_config_read(const sp_gguf *g, const char *path, sp_config *cfg, const sp_gguf_arch **arch)
{
    const char *name = NULL;
    if (sp_gguf_kv_find(g, "general.architecture") < 0)
        return sp_error(SP_ERR_INPUT, "%s: required key general.architecture is missing", path);
    SP_TRY(sp_gguf_get_string(g, "general.architecture", &name, NULL));
    const sp_gguf_arch *a = sp_gguf_arch_find(name);
    if (!a)
        return sp_error(SP_ERR_INPUT, "%s: general.architecture \"%.64s\" is not supported (supported: %s)", path,
                        name, sp_gguf_arch_list());
    const sp_hf_family *f = sp_hf_family_find(a->hf_architecture);
    if (!f)
        return sp_error(SP_ERR_INTERNAL, "%s: no Hugging Face family %s", a->arch, a->hf_architecture);
    sp_hf_family_defaults(f, cfg);
    cfg->qk_norm = a->qk_norm;
    const keys k = {g, path, a->arch};
    SP_TRY(read_sizes(&k, cfg));
    SP_TRY(get_float(&k, a->norm_eps_key, 1, &cfg->norm_eps));
    if (cfg->pos == SP_POS_ROPE)
        SP_TRY(read_rope(&k, a, cfg));
    SP_TRY(read_arch_keys(&k, a, cfg));
    read_tensor_options(g, cfg);
    SP_TRY(sp_config_resolve(cfg));
    SP_TRY(sp_config_validate(cfg, path));
    *arch = a;
    return SP_OK;
}

#include "model/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/recipe.h"

const char *const sp_role_names[] = {"tok_embed", "pos_embed", "wq",   "wk",          "wv", "wo", "w1", "w2", "w3",
                                     "norm_gain", "norm_bias", "head", "linear_bias", NULL};

typedef struct {
    sp_param_spec *specs;
    int n, cap;
} layout;

static sp_param_spec *push(layout *lay, int layer, sp_param_role role, int64_t rows, int64_t cols)
{
    if (lay->n == lay->cap)
        abort(); /* the capacity below is an upper bound: reaching it is a bug */
    sp_param_spec *s = &lay->specs[lay->n++];
    *s = (sp_param_spec){.layer = layer, .role = role, .rank = cols > 0 ? 2 : 1, .shape = {rows, cols > 0 ? cols : 1}};
    return s;
}

static void add_norm(layout *lay, const sp_config *cfg, int layer, const char *prefix, int64_t dim)
{
    sp_param_spec *g = push(lay, layer, SP_ROLE_NORM_GAIN, dim, 0);
    snprintf(g->name, sizeof g->name, "%s/gain", prefix);
    g->init_value = 1.0;
    if (cfg->norm == SP_NORM_LAYERNORM) {
        sp_param_spec *b = push(lay, layer, SP_ROLE_NORM_BIAS, dim, 0);
        snprintf(b->name, sizeof b->name, "%s/bias", prefix);
    }
}

static void add_matrix(layout *lay, int layer, sp_param_role role, const char *name, int64_t rows, int64_t cols,
                       double std)
{
    sp_param_spec *m = push(lay, layer, role, rows, cols);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->decay = 1;
    m->init_std = std;
}

/* A matrix of block l, blocks/<l>/<leaf> [rows, cols], followed by its bias blocks/<l>/<bias_leaf>
 * [rows] when with_bias (zero at init, no weight decay). */
static void add_block_linear(layout *lay, int l, sp_param_role role, const char *leaf, int64_t rows, int64_t cols,
                             double std, int with_bias, const char *bias_leaf)
{
    char name[SP_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "blocks/%d/%s", l, leaf);
    add_matrix(lay, l, role, name, rows, cols, std);
    if (with_bias) {
        sp_param_spec *b = push(lay, l, SP_ROLE_LINEAR_BIAS, rows, 0);
        snprintf(b->name, sizeof b->name, "blocks/%d/%s", l, bias_leaf);
    }
}

/* The normalized projections' gains (and biases) of block l's attention. */
static void add_attn_norms(layout *lay, const sp_config *cfg, int l, sp_attn_norm kind)
{
    const char *qkv[] = {"q_norm", "k_norm", "v_norm"};
    const int64_t hd = sp_config_head_dim(cfg), full[3] = {sp_config_q_dim(cfg), sp_config_kv_dim(cfg), 0};
    char name[SP_PARAM_NAME_MAX];
    for (int i = 0; i < sp_attn_norm_count(kind); i++) {
        snprintf(name, sizeof name, "blocks/%d/attn/%s", l, qkv[i]);
        add_norm(lay, cfg, l, name, sp_attn_norm_per_head(kind) ? hd : full[i]);
    }
}

sp_status sp_param_layout(const sp_config *cfg, sp_param_spec **specs, int *n_params)
{
    const int64_t d = cfg->d_model, qd = sp_config_q_dim(cfg), kv = sp_config_kv_dim(cfg), dff = cfg->d_ff;
    const int L = cfg->n_layers;
    const double std = cfg->init_std;
    const double out_std = cfg->init == SP_INIT_SCALED ? std / sqrt(2.0 * L) : std;
    const int deep = cfg->variant == SP_VARIANT_DEEPNORM;
    const double beta = deep ? cfg->deepnorm_beta : 1.0;
    const int qkv_bias = cfg->qkv_bias, ffn_bias = cfg->ffn_bias;

    /* upper bound: 4 embedding tensors, per block 2 x (norms + 3 attention norms) + 7 matrices + 7
     * biases, 6 final, head */
    layout lay = {.cap = 8 + L * (2 * (SP_RECIPE_MAX_NORMS + 3) + 14) + 8};
    lay.specs = sp_calloc((size_t)lay.cap, sizeof *lay.specs, "parameter layout");
    if (!lay.specs)
        return SP_ERR_NOMEM;

    add_matrix(&lay, -1, SP_ROLE_TOK_EMBED, "embed/tok", cfg->vocab_size, d, std);
    if (cfg->pos == SP_POS_LEARNED)
        add_matrix(&lay, -1, SP_ROLE_POS_EMBED, "embed/pos", cfg->max_seq_len, d, std);
    if (cfg->embed_norm)
        add_norm(&lay, cfg, -1, "embed/norm", d);

    char name[SP_PARAM_NAME_MAX];
    for (int l = 0; l < L; l++) {
        const sp_recipe *r = sp_recipe_for_layer(cfg, l);
        for (int i = 0; i < r->n_norms; i++) {
            snprintf(name, sizeof name, "blocks/%d/%s", l, r->norm_names[i]);
            add_norm(&lay, cfg, l, name, d);
        }
        add_block_linear(&lay, l, SP_ROLE_WQ, "attn/wq", qd, d, std, qkv_bias, "attn/bq");
        add_block_linear(&lay, l, SP_ROLE_WK, "attn/wk", kv, d, std, qkv_bias, "attn/bk");
        add_block_linear(&lay, l, SP_ROLE_WV, "attn/wv", kv, d, std * beta, qkv_bias, "attn/bv");
        add_block_linear(&lay, l, SP_ROLE_WO, "attn/wo", d, qd, out_std * beta, cfg->attn_out_bias, "attn/bo");
        add_attn_norms(&lay, cfg, l, sp_recipe_attn_norm(cfg, r));
        add_block_linear(&lay, l, SP_ROLE_W1, "ffn/w1", dff, d, std * beta, ffn_bias, "ffn/b1");
        if (sp_config_ffn_gated(cfg))
            add_block_linear(&lay, l, SP_ROLE_W3, "ffn/w3", dff, d, std * beta, ffn_bias, "ffn/b3");
        add_block_linear(&lay, l, SP_ROLE_W2, "ffn/w2", d, dff, out_std * beta, ffn_bias, "ffn/b2");
    }

    if (cfg->variant == SP_VARIANT_SIAMESE) {
        add_norm(&lay, cfg, -1, "final_norm_x", d);
        add_norm(&lay, cfg, -1, "final_norm_y", d);
        add_norm(&lay, cfg, -1, "final_norm", d);
    } else if (cfg->final_norm) {
        add_norm(&lay, cfg, -1, "final_norm", d);
    }
    if (!cfg->tie_embeddings)
        add_matrix(&lay, -1, SP_ROLE_HEAD, "head/w", cfg->vocab_size, d, std);

    *specs = lay.specs;
    *n_params = lay.n;
    return SP_OK;
}

size_t sp_param_numel(const sp_param_spec *spec) { return (size_t)spec->shape[0] * (size_t)spec->shape[1]; }

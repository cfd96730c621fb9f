#include "tests/support/ref_model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/rope_freq.h"
#include "tests/support/ref_ops.h"
#include "tests/support/vec_util.h"

/* A host copy of the parameter the format names, NULL when the model has none. */
static sp_real *param(sp_model *m, const char *fmt, ...)
{
    char name[SP_PARAM_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const int i = sp_model_find_param(m, name);
    if (i < 0)
        return NULL;
    sp_real *host = vec_zeros(sp_param_numel(sp_model_param_spec(m, i)));
    sp_model_get_param(m, i, host);
    return host;
}

/* y [rows, out] = x W^T + b (b NULL: none) */
static void linear(int rows, int in, int out, const sp_real *x, const sp_real *w, const sp_real *b, sp_real *y)
{
    ref_gemm(0, 1, rows, out, in, 1, x, in, w, in, 0, y, out);
    for (int r = 0; b && r < rows; r++)
        for (int j = 0; j < out; j++)
            y[(size_t)r * out + j] += b[j];
}

/* y = norm(x) over rows of dim, with the parameters under prefix (bias for LayerNorm); in place allowed. */
static void norm(sp_model *m, const sp_config *cfg, const char *prefix, int rows, int dim, const sp_real *x, sp_real *y)
{
    sp_real *gain = param(m, "%s/gain", prefix), *bias = param(m, "%s/bias", prefix);
    if (!gain) {
        fprintf(stderr, "ref_model: no norm %s\n", prefix);
        abort();
    }
    ref_norm((sp_norm_kind)cfg->norm, rows, dim, cfg->norm_eps, x, gain, bias, y, NULL, NULL);
    free(gain);
    free(bias);
}

static int windowed(const sp_config *cfg, int l)
{
    return cfg->sliding_window > 0 && (cfg->window_pattern == 0 || (l + 1) % cfg->window_pattern != 0);
}

/* out [rows, d] = attention sub-layer of block l on x */
static void attention(sp_model *m, const sp_config *cfg, int l, int batch, int seq_len, const sp_real *x, sp_real *out)
{
    const int rows = batch * seq_len, d = cfg->d_model, hd = sp_config_head_dim(cfg);
    const int heads[3] = {cfg->n_heads, cfg->n_kv_heads, cfg->n_kv_heads};
    const char *w_name[3] = {"wq", "wk", "wv"}, *b_name[3] = {"bq", "bk", "bv"};
    const char *norm_name[3] = {"q_norm", "k_norm", "v_norm"};
    /* which projections are normalized, and over what: hybrid q, k, v per head; olmo2 q, k whole;
     * else the config's qk_norm */
    const int hybrid = cfg->variant == SP_VARIANT_HYBRID, olmo2 = cfg->variant == SP_VARIANT_OLMO2;
    const int n_normed = hybrid ? 3 : olmo2 || cfg->qk_norm != SP_QK_NORM_NONE ? 2 : 0;
    const int per_head = hybrid || (!olmo2 && cfg->qk_norm == SP_QK_NORM_HEAD);
    sp_real *proj[3];
    char prefix[SP_PARAM_NAME_MAX];
    for (int i = 0; i < 3; i++) {
        const int dim = heads[i] * hd;
        sp_real *w = param(m, "blocks/%d/attn/%s", l, w_name[i]), *b = param(m, "blocks/%d/attn/%s", l, b_name[i]);
        proj[i] = vec_zeros((size_t)rows * dim);
        linear(rows, d, dim, x, w, b, proj[i]);
        if (i < n_normed) {
            snprintf(prefix, sizeof prefix, "blocks/%d/attn/%s", l, norm_name[i]);
            norm(m, cfg, prefix, per_head ? rows * heads[i] : rows, per_head ? hd : dim, proj[i], proj[i]);
        }
        free(w);
        free(b);
    }
    if (cfg->pos == SP_POS_ROPE) {
        double *inv_freq = calloc((size_t)sp_config_rope_dims(cfg) / 2 + 1, sizeof *inv_freq);
        if (!inv_freq)
            abort();
        sp_rope_inv_freq(cfg, cfg->rope_local_theta > 0 && windowed(cfg, l), inv_freq);
        for (int i = 0; i < 2; i++)
            ref_rope(rows, seq_len, heads[i], hd, sp_config_rope_dims(cfg), inv_freq, proj[i]);
        free(inv_freq);
    }
    const sp_attn_shape shape = {batch,
                                 seq_len,
                                 cfg->n_heads,
                                 cfg->n_kv_heads,
                                 hd,
                                 cfg->attn_scale > 0 ? cfg->attn_scale : 1 / sqrt((double)hd),
                                 cfg->attn_softcap,
                                 windowed(cfg, l) ? cfg->sliding_window : 0};
    sp_real *a = vec_zeros((size_t)rows * heads[0] * hd);
    ref_attention(&shape, proj[0], proj[1], proj[2], a, NULL);
    sp_real *wo = param(m, "blocks/%d/attn/wo", l), *bo = param(m, "blocks/%d/attn/bo", l);
    linear(rows, heads[0] * hd, d, a, wo, bo, out);
    free(wo);
    free(bo);
    free(a);
    for (int i = 0; i < 3; i++)
        free(proj[i]);
}

/* out [rows, d] = FFN sub-layer of block l on x */
static void ffn(sp_model *m, const sp_config *cfg, int l, int rows, const sp_real *x, sp_real *out)
{
    const int d = cfg->d_model, dff = cfg->d_ff;
    const sp_act_kind act = cfg->ffn == SP_FFN_SWIGLU     ? SP_ACT_SILU
                            : cfg->gelu == SP_GELU_ERF ? SP_ACT_GELU_ERF
                                                       : SP_ACT_GELU_TANH;
    sp_real *w1 = param(m, "blocks/%d/ffn/w1", l), *b1 = param(m, "blocks/%d/ffn/b1", l);
    sp_real *w3 = param(m, "blocks/%d/ffn/w3", l), *b3 = param(m, "blocks/%d/ffn/b3", l);
    sp_real *w2 = param(m, "blocks/%d/ffn/w2", l), *b2 = param(m, "blocks/%d/ffn/b2", l);
    sp_real *g = vec_zeros((size_t)rows * dff), *u = vec_zeros((size_t)rows * dff);
    linear(rows, d, dff, x, w1, b1, g);
    if (w3)
        linear(rows, d, dff, x, w3, b3, u);
    for (size_t i = 0; i < (size_t)rows * dff; i++)
        g[i] = (sp_real)(ref_act(act, g[i]) * (w3 ? u[i] : 1));
    linear(rows, dff, d, g, w2, b2, out);
    sp_real *all[] = {w1, b1, w3, b3, w2, b2, g, u};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        free(all[i]);
}

/* Block l's recipe on x (in place: x becomes the block output). */
static void block(sp_model *m, const sp_config *cfg, int l, int batch, int seq_len, sp_real *x)
{
    const sp_recipe *r = sp_recipe_for_layer(cfg, l);
    const int rows = batch * seq_len, d = cfg->d_model;
    const size_t n = (size_t)rows * d;
    sp_real *slot[SP_RECIPE_MAX_SLOTS] = {x};
    char prefix[SP_PARAM_NAME_MAX];
    for (int s = 0; s < r->n_steps; s++) {
        const sp_step *st = &r->steps[s];
        sp_real *dst = slot[st->dst] = vec_zeros(n);
        const sp_real *a = slot[st->a];
        const double ca = sp_recipe_coef(cfg, l, st->coef_a);
        switch (st->kind) {
        case SP_STEP_NORM:
            snprintf(prefix, sizeof prefix, "blocks/%d/%s", l, r->norm_names[st->norm]);
            norm(m, cfg, prefix, rows, d, a, dst);
            for (size_t i = 0; i < n; i++)
                dst[i] = (sp_real)(ca * dst[i]);
            break;
        case SP_STEP_ATTN: attention(m, cfg, l, batch, seq_len, a, dst); break;
        case SP_STEP_FFN: ffn(m, cfg, l, rows, a, dst); break;
        case SP_STEP_ADD: {
            const double cb = sp_recipe_coef(cfg, l, st->coef_b);
            for (size_t i = 0; i < n; i++)
                dst[i] = (sp_real)(ca * a[i] + cb * slot[st->b][i]);
            break;
        }
        }
    }
    for (size_t i = 0; i < n; i++)
        x[i] = slot[r->out_slots[0]][i];
    for (int i = 1; i < r->n_slots; i++)
        free(slot[i]);
}

void ref_model_hidden(sp_model *m, const int32_t *tokens, int batch, int seq_len, sp_real **h)
{
    const sp_config *cfg = sp_model_config(m);
    const int rows = batch * seq_len, d = cfg->d_model;
    if (sp_config_n_streams(cfg) != 1) {
        fprintf(stderr, "ref_model: one-stream models only\n");
        abort();
    }
    sp_real *tok = param(m, "embed/tok"), *pos = param(m, "embed/pos");
    h[0] = vec_zeros((size_t)rows * d);
    ref_embed(rows, seq_len, d, cfg->embed_scale, tokens, tok, pos, h[0]);
    if (cfg->embed_norm)
        norm(m, cfg, "embed/norm", rows, d, h[0], h[0]);
    for (int l = 0; l < cfg->n_layers; l++) {
        h[l + 1] = vec_dup((size_t)rows * d, h[l]);
        block(m, cfg, l, batch, seq_len, h[l + 1]);
    }
    free(tok);
    free(pos);
}

void ref_model_decode(sp_model *m, int rows, const sp_real *h, sp_real *logits)
{
    const sp_config *cfg = sp_model_config(m);
    const int d = cfg->d_model, vocab = cfg->vocab_size;
    sp_real *x = vec_dup((size_t)rows * d, h);
    if (cfg->final_norm)
        norm(m, cfg, "final_norm", rows, d, x, x);
    sp_real *head = param(m, cfg->tie_embeddings ? "embed/tok" : "head/w");
    linear(rows, d, vocab, x, head, NULL, logits);
    if (cfg->final_softcap > 0)
        for (size_t i = 0; i < (size_t)rows * vocab; i++)
            logits[i] = (sp_real)ref_softcap(cfg->final_softcap, logits[i]);
    free(head);
    free(x);
}

void ref_model_logits(sp_model *m, const int32_t *tokens, int batch, int seq_len, sp_real *logits)
{
    const int n_layers = sp_model_config(m)->n_layers;
    sp_real **h = malloc((size_t)(n_layers + 1) * sizeof *h);
    if (!h)
        abort();
    ref_model_hidden(m, tokens, batch, seq_len, h);
    ref_model_decode(m, batch * seq_len, h[n_layers], logits);
    for (int l = 0; l <= n_layers; l++)
        free(h[l]);
    free(h);
}

/* model/model.c: creating a model from its config, and its parameters (layout, init, host copies). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/model_internal.h"
#include "model/rope_freq.h"

/* Index of blocks/<l>/<leaf>, -1 when absent. */
static int find_in_block(const sp_model *m, int l, const char *leaf)
{
    char name[SP_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "blocks/%d/%s", l, leaf);
    return sp_model_find_param(m, name);
}

/* Indices of a norm's gain and bias under prefix (gain -1 when the model has no such norm). */
static sp_norm_params find_norm(const sp_model *m, const char *prefix)
{
    char name[SP_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s/gain", prefix);
    sp_norm_params np = {sp_model_find_param(m, name), -1};
    snprintf(name, sizeof name, "%s/bias", prefix);
    np.bias = sp_model_find_param(m, name);
    return np;
}

static sp_status resolve_block(sp_model *m, int l)
{
    sp_block_params *b = &m->blocks[l];
    const sp_recipe *r = sp_recipe_for_layer(&m->cfg, l);
    int n_attn = 0, n_ffn = 0;
    for (int s = 0; s < r->n_steps; s++) {
        n_attn += r->steps[s].kind == SP_STEP_ATTN;
        n_ffn += r->steps[s].kind == SP_STEP_FFN;
    }
    if (n_attn != 1 || n_ffn != 1) /* the block state keeps one attention and one FFN */
        return sp_error(SP_ERR_INTERNAL, "model: recipe '%s' has %d attention and %d FFN steps (expected 1 each)",
                        r->name, n_attn, n_ffn);
    b->recipe = r;
    b->attn_norm = sp_recipe_attn_norm(&m->cfg, r);
    if (r->n_slots > m->max_slots)
        m->max_slots = r->n_slots;
    char prefix[SP_PARAM_NAME_MAX];
    for (int i = 0; i < r->n_norms; i++) {
        snprintf(prefix, sizeof prefix, "blocks/%d/%s", l, r->norm_names[i]);
        b->norms[i] = find_norm(m, prefix);
    }
    const char *qkv[] = {"q_norm", "k_norm", "v_norm"};
    for (int i = 0; i < 3; i++) {
        snprintf(prefix, sizeof prefix, "blocks/%d/attn/%s", l, qkv[i]);
        b->qkv_norm[i] = find_norm(m, prefix);
    }
    b->wq = find_in_block(m, l, "attn/wq");
    b->wk = find_in_block(m, l, "attn/wk");
    b->wv = find_in_block(m, l, "attn/wv");
    b->wo = find_in_block(m, l, "attn/wo");
    b->w1 = find_in_block(m, l, "ffn/w1");
    b->w3 = find_in_block(m, l, "ffn/w3");
    b->w2 = find_in_block(m, l, "ffn/w2");
    int *const bias[] = {&b->bq, &b->bk, &b->bv, &b->bo, &b->b1, &b->b3, &b->b2};
    const char *const bias_leaf[] = {"attn/bq", "attn/bk", "attn/bv", "attn/bo", "ffn/b1", "ffn/b3", "ffn/b2"};
    for (size_t i = 0; i < SP_ARRAY_LEN(bias); i++) {
        *bias[i] = find_in_block(m, l, bias_leaf[i]);
        m->has_bias |= *bias[i] >= 0;
    }
    return SP_OK;
}

/* RoPE's inverse-frequency tables in backend memory: the global one, and the local one when the
 * windowed layers have their own base. */
static sp_status upload_rope_tables(sp_model *m)
{
    const int n = sp_config_rope_dims(&m->cfg) / 2;
    if (n == 0)
        return SP_OK;
    double *host = sp_malloc((size_t)n * sizeof *host, "RoPE frequencies");
    if (!host)
        return SP_ERR_NOMEM;
    for (int local = 0; local < 1 + (m->cfg.rope_local_theta > 0); local++) {
        m->rope_freq[local] = m->be->alloc((size_t)n * sizeof *host, "RoPE frequencies");
        if (!m->rope_freq[local]) {
            free(host);
            return SP_ERR_NOMEM;
        }
        sp_rope_inv_freq(&m->cfg, local, host);
        m->be->upload(m->rope_freq[local], host, (size_t)n * sizeof *host);
    }
    free(host);
    return SP_OK;
}

sp_status sp_model_create(const sp_config *cfg, const sp_backend *be, sp_model **out)
{
    *out = NULL;
    sp_model *m = sp_calloc(1, sizeof *m, "model");
    if (!m)
        return SP_ERR_NOMEM;
    m->cfg = *cfg;
    m->be = be;
    sp_status st = sp_param_layout(cfg, &m->specs, &m->n_params);
    if (st != SP_OK) {
        free(m);
        return st;
    }
    m->offsets = sp_calloc((size_t)m->n_params, sizeof *m->offsets, "parameter offsets");
    m->blocks = sp_calloc((size_t)cfg->n_layers, sizeof *m->blocks, "block parameters");
    m->state = sp_calloc((size_t)cfg->n_layers, sizeof *m->state, "block states");
    if (!m->offsets || !m->blocks || !m->state) {
        sp_model_free(m);
        return SP_ERR_NOMEM;
    }
    for (int i = 0; i < m->n_params; i++) {
        m->offsets[i] = m->n_weights;
        m->n_weights += sp_param_numel(&m->specs[i]);
    }
    m->params = be->alloc(m->n_weights * sizeof(sp_real), "model parameters");
    m->grads = m->params ? be->alloc(m->n_weights * sizeof(sp_real), "model gradients") : NULL;
    if (!m->grads) {
        sp_model_free(m);
        return SP_ERR_NOMEM;
    }

    m->tok = sp_model_find_param(m, "embed/tok");
    m->pos = sp_model_find_param(m, "embed/pos");
    m->head = cfg->tie_embeddings ? m->tok : sp_model_find_param(m, "head/w");
    m->embed_norm = find_norm(m, "embed/norm");
    m->fin_x_norm = find_norm(m, "final_norm_x");
    m->fin_y_norm = find_norm(m, "final_norm_y");
    m->fin_norm = find_norm(m, "final_norm");
    for (int l = 0; l < cfg->n_layers && st == SP_OK; l++)
        st = resolve_block(m, l);
    if (st == SP_OK)
        st = upload_rope_tables(m);
    if (st != SP_OK) {
        sp_model_free(m);
        return st;
    }
    *out = m;
    return SP_OK;
}

void sp_model_free(sp_model *m)
{
    if (!m)
        return;
    void *buffers[] = {m->params,      m->grads,        m->arena,       m->probe_arena,
                       m->hvp_arena,   m->row_arena,    m->rope_freq[0], m->rope_freq[1]};
    for (size_t i = 0; i < SP_ARRAY_LEN(buffers); i++)
        if (buffers[i])
            m->be->free(buffers[i]);
    free(m->specs);
    free(m->offsets);
    free(m->blocks);
    free(m->state);
    free(m->skipped);
    free(m->hvp.t_out);
    free(m);
}

const sp_config *sp_model_config(const sp_model *m) { return &m->cfg; }
const sp_backend *sp_model_backend(const sp_model *m) { return m->be; }
int sp_model_n_params(const sp_model *m) { return m->n_params; }
const sp_param_spec *sp_model_param_spec(const sp_model *m, int i) { return &m->specs[i]; }
size_t sp_model_n_weights(const sp_model *m) { return m->n_weights; }
sp_real *sp_model_param(sp_model *m, int i) { return m->params + m->offsets[i]; }
sp_real *sp_model_grad(sp_model *m, int i) { return m->grads + m->offsets[i]; }

int sp_model_find_param(const sp_model *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->specs[i].name, name) == 0)
            return i;
    return -1;
}

sp_status sp_model_sync(const sp_model *m)
{
    if (m->be == sp_backend_cpu())
        return SP_OK;
    m->be->sync();
    return sp_error_code();
}

sp_status sp_model_init(sp_model *m, uint64_t seed)
{
    size_t max_numel = 0;
    for (int i = 0; i < m->n_params; i++)
        if (sp_param_numel(&m->specs[i]) > max_numel)
            max_numel = sp_param_numel(&m->specs[i]);
    sp_real *host = sp_malloc(max_numel * sizeof *host, "parameter init buffer");
    if (!host)
        return SP_ERR_NOMEM;
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    for (int i = 0; i < m->n_params; i++) {
        const sp_param_spec *s = &m->specs[i];
        size_t n = sp_param_numel(s);
        for (size_t j = 0; j < n; j++)
            host[j] = (sp_real)(s->init_std > 0 ? s->init_std * sp_rng_normal(&rng) : s->init_value);
        sp_model_set_param(m, i, host);
    }
    free(host);
    return sp_model_sync(m);
}

void sp_model_set_param(sp_model *m, int i, const sp_real *host)
{
    m->be->upload(sp_model_param(m, i), host, sp_param_numel(&m->specs[i]) * sizeof(sp_real));
}

void sp_model_get_param(const sp_model *m, int i, sp_real *host)
{
    m->be->download(host, m->params + m->offsets[i], sp_param_numel(&m->specs[i]) * sizeof(sp_real));
}

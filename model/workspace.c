/* model/workspace.c: the activation and scratch buffers of a model, carved from one backend
 * allocation sized for the rows of the forward call and reused while later calls fit.
 *
 * Every layout function runs twice: once on an arena with base NULL (counting bytes), once on the
 * real allocation (assigning pointers), so the count and the carving cannot disagree. */
#include <stdlib.h>

#include "model/model_internal.h"

#define SP_ARENA_ALIGN 64 /* bytes: a cache line, and enough for any vector load */

/* Carving: with base NULL it only counts. */
typedef struct {
    char *base;
    size_t used;
} arena;

static void *take_bytes(arena *a, size_t bytes)
{
    void *p = a->base ? a->base + a->used : NULL;
    a->used += (bytes + SP_ARENA_ALIGN - 1) / SP_ARENA_ALIGN * SP_ARENA_ALIGN;
    return p;
}

static sp_real *arena_take(arena *a, size_t n_elems) { return take_bytes(a, n_elems * sizeof(sp_real)); }

static void layout_norm(arena *a, const sp_config *cfg, size_t rows, sp_norm_state *st)
{
    st->mean = cfg->norm == SP_NORM_LAYERNORM ? arena_take(a, rows) : NULL;
    st->rstd = arena_take(a, rows);
}

/* One block's own buffers for `rows` rows: slots from first_own on (the inputs before it are
 * aliases), saved state (attention's `saved` of attn_saved elements). */
static void layout_block_rows(const sp_model *m, int l, size_t rows, size_t attn_saved, arena *a, sp_block_state *st,
                              int first_own)
{
    const sp_config *cfg = &m->cfg;
    const sp_recipe *r = m->blocks[l].recipe;
    const sp_attn_norm attn_norm = m->blocks[l].attn_norm;
    const size_t d = (size_t)cfg->d_model, qd = (size_t)sp_config_q_dim(cfg);
    const size_t kv = (size_t)sp_config_kv_dim(cfg), dff = (size_t)cfg->d_ff;
    for (int i = first_own; i < r->n_slots; i++)
        st->slot[i] = arena_take(a, rows * d);
    for (int s = 0; s < r->n_steps; s++)
        if (r->steps[s].kind == SP_STEP_NORM)
            layout_norm(a, cfg, rows, &st->norm[s]);

    sp_attn_state *at = &st->attn;
    *at = (sp_attn_state){0};
    const size_t dims[3] = {qd, kv, kv}, heads[3] = {(size_t)cfg->n_heads, (size_t)cfg->n_kv_heads,
                                                    (size_t)cfg->n_kv_heads};
    const int per_head = sp_attn_norm_per_head(attn_norm);
    sp_real **post[3] = {&at->q, &at->k, &at->v}, **pre[3] = {&at->q_pre, &at->k_pre, &at->v_pre};
    for (int i = 0; i < 3; i++)
        *post[i] = arena_take(a, rows * dims[i]);
    for (int i = 0; i < sp_attn_norm_count(attn_norm); i++) {
        *pre[i] = arena_take(a, rows * dims[i]);
        layout_norm(a, cfg, per_head ? rows * heads[i] : rows, &at->qkv_norm[i]);
    }
    at->saved = arena_take(a, attn_saved);
    at->a = arena_take(a, rows * qd);

    st->ffn.g = arena_take(a, rows * dff);
    st->ffn.u = sp_config_ffn_gated(cfg) ? arena_take(a, rows * dff) : NULL;
    st->ffn.h = arena_take(a, rows * dff);
}

/* ... for the model's activation capacity. */
static void layout_block(const sp_model *m, int l, arena *a, sp_block_state *st, int first_own)
{
    layout_block_rows(m, l, (size_t)m->cap_rows, m->cap_attn_saved, a, st, first_own);
}

static int any_attn_norm(const sp_model *m)
{
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (m->blocks[l].attn_norm != SP_ATTN_PLAIN)
            return 1;
    return 0;
}

static void layout_scratch(const sp_model *m, arena *a, sp_scratch *sc)
{
    const sp_config *cfg = &m->cfg;
    const size_t rows = (size_t)m->cap_rows, d = (size_t)cfg->d_model, qd = (size_t)sp_config_q_dim(cfg);
    const size_t kv = (size_t)sp_config_kv_dim(cfg), dff = (size_t)cfg->d_ff;
    *sc = (sp_scratch){0};
    for (int i = 0; i < m->max_slots; i++)
        sc->slot[i] = arena_take(a, rows * d);
    for (int p = 0; p < 2; p++)
        for (int s = 0; s < sp_config_n_streams(cfg); s++)
            sc->stream[p][s] = arena_take(a, rows * d);
    sc->dq = arena_take(a, rows * qd);
    sc->dk = arena_take(a, rows * kv);
    sc->dv = arena_take(a, rows * kv);
    if (any_attn_norm(m)) {
        sc->dq_pre = arena_take(a, rows * qd);
        sc->dk_pre = arena_take(a, rows * kv);
        sc->dv_pre = arena_take(a, rows * kv);
    }
    sc->da = arena_take(a, rows * qd);
    sc->dg = arena_take(a, rows * dff);
    sc->du = sp_config_ffn_gated(cfg) ? arena_take(a, rows * dff) : NULL;
    sc->dh = arena_take(a, rows * dff);
}

static void layout_top(sp_model *m, arena *a)
{
    const sp_config *cfg = &m->cfg;
    const size_t rows = (size_t)m->cap_rows, d = (size_t)cfg->d_model, vocab = (size_t)cfg->vocab_size;
    sp_top_state *t = &m->top;
    *t = (sp_top_state){0};
    t->ids = take_bytes(a, rows * sizeof(int32_t));
    t->targets = take_bytes(a, rows * sizeof(int32_t));
    t->ones = m->has_bias ? arena_take(a, rows) : NULL;
    t->e = arena_take(a, rows * d);
    t->de = arena_take(a, rows * d);
    if (m->embed_norm.gain >= 0) {
        t->h0 = arena_take(a, rows * d);
        t->dh0 = arena_take(a, rows * d);
        layout_norm(a, cfg, rows, &t->embed_norm);
    } else {
        t->h0 = t->e;
        t->dh0 = t->de;
    }
    if (m->fin_x_norm.gain >= 0) {
        t->fin_x = arena_take(a, rows * d);
        t->fin_y = arena_take(a, rows * d);
        t->fin_sum = arena_take(a, rows * d);
        t->dfin_sum = arena_take(a, rows * d);
        layout_norm(a, cfg, rows, &t->fin_x_norm);
        layout_norm(a, cfg, rows, &t->fin_y_norm);
    }
    if (m->fin_norm.gain >= 0) {
        t->hf = arena_take(a, rows * d);
        t->dhf = arena_take(a, rows * d);
        layout_norm(a, cfg, rows, &t->fin_norm);
    } /* else hf is the last block's output slot, linked in layout_all */
    t->logits = arena_take(a, rows * vocab);
    t->dlogits = arena_take(a, rows * vocab);
    t->losses = arena_take(a, rows);
}

/* Carves everything and links the aliases: block inputs are h_0 or the previous block's outputs. */
static void layout_all(sp_model *m, arena *a)
{
    layout_top(m, a);
    const int n_streams = sp_config_n_streams(&m->cfg);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        sp_block_state *st = &m->state[l];
        for (int s = 0; s < n_streams; s++)
            st->slot[s] = l == 0 ? m->top.h0 : m->state[l - 1].slot[m->blocks[l - 1].recipe->out_slots[s]];
        layout_block(m, l, a, st, n_streams);
    }
    if (m->fin_norm.gain < 0) {
        const int last = m->cfg.n_layers - 1;
        m->top.hf = m->state[last].slot[m->blocks[last].recipe->out_slots[0]];
    }
    layout_scratch(m, a, &m->scratch);
}

/* The largest attention `saved` of any block for the shape (the layers' windows may differ). */
static size_t attn_saved_elems(const sp_model *m, int batch, int seq_len)
{
    size_t most = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const sp_attn_shape shape = sp_attn_shape_of(m, l, batch, seq_len);
        const size_t n = m->be->attn_saved_elems(&shape);
        most = n > most ? n : most;
    }
    return most;
}

/* Fills the ones vector of the bias sums (the arena comes zeroed). */
static sp_status fill_ones(sp_model *m)
{
    if (!m->top.ones)
        return SP_OK;
    sp_real *host = sp_malloc((size_t)m->cap_rows * sizeof *host, "bias ones vector");
    if (!host)
        return SP_ERR_NOMEM;
    for (int r = 0; r < m->cap_rows; r++)
        host[r] = 1;
    m->be->upload(m->top.ones, host, (size_t)m->cap_rows * sizeof *host);
    free(host);
    return SP_OK;
}

sp_status sp_model_reserve(sp_model *m, int batch, int seq_len)
{
    const sp_backend *be = m->be;
    const int rows = batch * seq_len;
    const size_t attn_saved = attn_saved_elems(m, batch, seq_len);
    if (m->arena && rows <= m->cap_rows && attn_saved <= m->cap_attn_saved)
        return SP_OK;
    if (m->arena)
        be->free(m->arena);
    if (m->probe_arena) /* sized for the old shape */
        be->free(m->probe_arena);
    if (m->hvp_arena)
        be->free(m->hvp_arena);
    if (m->row_arena)
        be->free(m->row_arena);
    m->arena = m->probe_arena = m->hvp_arena = m->row_arena = NULL;
    m->row_arena_bytes = 0;
    m->cap_rows = rows;
    m->cap_attn_saved = attn_saved;
    arena count = {NULL, 0};
    layout_all(m, &count);
    m->arena = be->alloc(count.used, "model activations");
    if (!m->arena) {
        m->cap_rows = 0;
        m->cap_attn_saved = 0;
        return SP_ERR_NOMEM;
    }
    arena real = {m->arena, 0};
    layout_all(m, &real);
    return fill_ones(m);
}

void sp_model_release_activations(sp_model *m)
{
    void **arenas[] = {(void **)&m->arena, (void **)&m->probe_arena, (void **)&m->hvp_arena, (void **)&m->row_arena};
    for (size_t i = 0; i < SP_ARRAY_LEN(arenas); i++) {
        if (*arenas[i])
            m->be->free(*arenas[i]);
        *arenas[i] = NULL;
    }
    m->row_arena_bytes = 0;
    m->cap_rows = 0;
    m->cap_attn_saved = 0;
}

size_t sp_model_activation_bytes(sp_model *m, int batch, int seq_len)
{
    const int saved_rows = m->cap_rows;
    const size_t saved_attn = m->cap_attn_saved;
    m->cap_rows = batch * seq_len;
    m->cap_attn_saved = attn_saved_elems(m, batch, seq_len);
    arena count = {NULL, 0};
    layout_all(m, &count); /* counting sets every pointer to NULL: carve the live arena again below */
    const size_t attn_scratch = m->cap_attn_saved * sizeof(sp_real);
    m->cap_rows = saved_rows;
    m->cap_attn_saved = saved_attn;
    if (m->arena) {
        arena real = {m->arena, 0};
        layout_all(m, &real);
    }
    return count.used + attn_scratch;
}

sp_status sp_model_probe_state(sp_model *m, int l, sp_block_state **out)
{
    if (!m->probe_arena) {
        size_t most = 0;
        for (int k = 0; k < m->cfg.n_layers; k++) {
            arena count = {NULL, 0};
            layout_block(m, k, &count, &m->probe, 0);
            if (count.used > most)
                most = count.used;
        }
        m->probe_arena = m->be->alloc(most, "block probe activations");
        if (!m->probe_arena)
            return SP_ERR_NOMEM;
    }
    arena real = {m->probe_arena, 0};
    layout_block(m, l, &real, &m->probe, 0);
    *out = &m->probe;
    return SP_OK;
}

/* sp_model_block_jvp_at's buffers: block l's state for k rows twice, and with RoPE a pad of k
 * sequences of the pass's length for the widest projection. */
static void layout_row_bufs(const sp_model *m, int l, int k, arena *a, sp_row_bufs *b)
{
    const size_t qd = (size_t)sp_config_q_dim(&m->cfg), kv = (size_t)sp_config_kv_dim(&m->cfg);
    layout_block_rows(m, l, (size_t)k, 0, a, &b->at_t, 0);
    layout_block_rows(m, l, (size_t)k, 0, a, &b->tangents, 0);
    b->rope_pad = m->cfg.pos == SP_POS_ROPE ? arena_take(a, (size_t)k * (size_t)m->seq_len * (qd > kv ? qd : kv)) : NULL;
}

sp_status sp_model_row_bufs(sp_model *m, int l, int k, sp_row_bufs **out)
{
    arena count = {NULL, 0};
    layout_row_bufs(m, l, k, &count, &m->row_bufs);
    if (count.used > m->row_arena_bytes) {
        if (m->row_arena)
            m->be->free(m->row_arena);
        m->row_arena_bytes = 0;
        if (!(m->row_arena = m->be->alloc(count.used, "one position's Jacobian buffers")))
            return SP_ERR_NOMEM;
        m->row_arena_bytes = count.used;
    }
    arena real = {m->row_arena, 0};
    layout_row_bufs(m, l, k, &real, &m->row_bufs);
    *out = &m->row_bufs;
    return SP_OK;
}

/* The largest layout_block of any block, in bytes. */
static size_t most_block_bytes(const sp_model *m)
{
    size_t most = 0;
    sp_block_state scratch_state;
    for (int k = 0; k < m->cfg.n_layers; k++) {
        arena count = {NULL, 0};
        layout_block(m, k, &count, &scratch_state, 0);
        if (count.used > most)
            most = count.used;
    }
    return most;
}

/* The HVP buffers after the block state (which layout_hvp_block carves for one block at a time). */
static void layout_hvp(const sp_model *m, arena *a, sp_hvp_state *h)
{
    const sp_config *cfg = &m->cfg;
    const size_t rows = (size_t)m->cap_rows, d = (size_t)cfg->d_model, vocab = (size_t)cfg->vocab_size;
    const size_t qd = (size_t)sp_config_q_dim(cfg), widest = qd > d ? qd : d;
    take_bytes(a, most_block_bytes(m));
    layout_scratch(m, a, &h->tg);
    h->zero = arena_take(a, rows * d);
    for (int i = 0; i < 2 * cfg->n_layers; i++)
        h->t_out[i] = i % 2 == 0 || sp_config_n_streams(cfg) == 2 ? arena_take(a, rows * d) : NULL;
    h->tlogits = arena_take(a, rows * vocab);
    h->dcapped = arena_take(a, rows * vocab);
    h->tdlogits = arena_take(a, rows * vocab);
    sp_real **per_d[] = {&h->thf, &h->tdhf, &h->tfin_x, &h->tfin_y, &h->tfin_sum, &h->tdfin_sum};
    for (size_t i = 0; i < SP_ARRAY_LEN(per_d); i++)
        *per_d[i] = arena_take(a, rows * d);
    h->norm_tmp = arena_take(a, rows * widest);
    h->norm_mean = arena_take(a, rows * (size_t)cfg->n_heads);
    h->norm_rstd = arena_take(a, rows * (size_t)cfg->n_heads);
}

sp_status sp_model_hvp_state(sp_model *m, int l, sp_hvp_state **out)
{
    sp_hvp_state *h = &m->hvp;
    if (!m->hvp_arena) {
        if (!h->t_out && !(h->t_out = sp_malloc(2 * (size_t)m->cfg.n_layers * sizeof *h->t_out, "HVP tangents")))
            return SP_ERR_NOMEM;
        arena count = {NULL, 0};
        layout_hvp(m, &count, h);
        m->hvp_arena = m->be->alloc(count.used, "Hessian-vector product buffers");
        if (!m->hvp_arena)
            return SP_ERR_NOMEM;
        arena real = {m->hvp_arena, 0};
        layout_hvp(m, &real, h);
    }
    sp_model_hvp_block(m, l);
    *out = h;
    return SP_OK;
}

void sp_model_hvp_block(sp_model *m, int l)
{
    arena real = {m->hvp_arena, 0};
    layout_block(m, l, &real, &m->hvp.t, 0);
}

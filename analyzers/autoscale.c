/* analyzers/autoscale.c: the cost model of an analysis and the defaults resolved from it
 * (analyzers/autoscale.h; docs/analyze.md, "Defaults that scale with the model"). */
#include "analyzers/autoscale.h"

#define JAC_SEQ_MIN 16     /* the shortest Jacobian sequence the budget may give */
#define POWER_ITERS_MIN 10 /* the least power-iteration cap the budget may give */
#define JAC_PACK_ROWS 24   /* the rows a block product's packing of its weights costs as much as */

/* The FLOPs of one block's weight products per token, every stream. */
static double block_weight_flops(const sp_config *cfg)
{
    const double d = cfg->d_model, q = sp_config_q_dim(cfg), kv = sp_config_kv_dim(cfg);
    const double ffn_mats = cfg->ffn == SP_FFN_GELU ? 2 : 3; /* W1, W2 (and the gate W3) */
    return sp_config_n_streams(cfg) * 2 * (d * q + 2 * d * kv + q * d + ffn_mats * d * cfg->d_ff);
}

/* The scores and the weighted sum of values per token, over all T keys (the causal half not taken). */
static double attention_flops(const sp_config *cfg, int T)
{
    return sp_config_n_streams(cfg) * 4.0 * T * sp_config_q_dim(cfg);
}

static double head_flops(const sp_config *cfg)
{
    return 2.0 * cfg->d_model * cfg->vocab_size * sp_config_n_streams(cfg);
}

double sp_cost_forward(const sp_config *cfg, int T)
{
    return cfg->n_layers * (block_weight_flops(cfg) + attention_flops(cfg, T)) + head_flops(cfg);
}

double sp_cost_stream(const sp_config *cfg, int T)
{
    const double L = cfg->n_layers, d = cfg->d_model, dff = cfg->d_ff, S = sp_config_n_streams(cfg);
    const double cka = (L + 1) * (L + 2) / 2 * d * d * 2; /* a cross-product per pair of the L + 1 layers */
    const double ffn_spectra = L * dff * dff * 2, hidden_spectra = (L + 1) * d * d * 2;
    return sp_cost_forward(cfg, T) + S * (cka + ffn_spectra + hidden_spectra);
}

/* A power step is a JVP and a VJP, about 3 forward passes, through: each block alone (sigma_max),
 * topk copies of each block (top-k), and the chains l..L-1 (end to end, L (L + 1) / 2 blocks). Each
 * product of a block over jac_seq rows also packs the whole weight matrix, which costs about as much
 * as JAC_PACK_ROWS more rows (OpenBLAS on 2 cores): without that term a short sequence would look
 * far cheaper than it runs. */
double sp_cost_jacobian_iter(const sp_config *cfg, int jac_seq, int topk)
{
    const double L = cfg->n_layers, blocks = L * (L + 1) / 2 + L + L * topk;
    const double apply = block_weight_flops(cfg) * (jac_seq + JAC_PACK_ROWS) + attention_flops(cfg, jac_seq) * jac_seq;
    return 3 * blocks * apply;
}

/* The base pass, then from its layer outputs (analyzers/pruning.c) the blocks after each skipped one
 * (L (L - 1) / 2 blocks) and the head for each of the L + floor(L / 2) variants. */
double sp_cost_pruning_seq(const sp_config *cfg, int T)
{
    const double L = cfg->n_layers, blocks = L * (L - 1) / 2, heads = L + cfg->n_layers / 2;
    const double per_token = sp_cost_forward(cfg, T) + blocks * (block_weight_flops(cfg) + attention_flops(cfg, T)) +
                             heads * head_flops(cfg);
    return per_token * T;
}

void sp_analyze_options_auto(sp_analyze_options *o)
{
    sp_analyze_options_defaults(o);
    o->n_tokens = o->power_iters = o->jac_seq = o->prune_seqs = SP_ANALYZE_AUTO;
}

/* The default n_tokens when the streaming pass fits its budget; else the whole sequences that do,
 * at least one batch. */
static int64_t resolve_n_tokens(const sp_config *cfg, int T, int batch, int64_t def)
{
    const double per_token = sp_cost_stream(cfg, T);
    if (per_token * (double)def <= SP_BUDGET_STREAM)
        return def;
    const double per_seq = per_token * T;
    int64_t seqs = (int64_t)(SP_BUDGET_STREAM / per_seq);
    seqs = seqs > batch ? seqs : batch;
    return seqs * T < def ? seqs * T : def;
}

/* The tokens the Jacobian analyzes for a jac_seq option (0 or beyond T: the whole sequence). */
static int jac_tokens_of(int jac_seq, int T) { return jac_seq > 0 && jac_seq < T ? jac_seq : T; }

/* The default jac_seq when its power steps at the cap fit the budget, else the longest of its
 * halves down to JAC_SEQ_MIN that does (JAC_SEQ_MIN when none does). */
static int resolve_jac_seq(const sp_config *cfg, int T, int topk, int cap, int def)
{
    int jac_seq = def;
    while (jac_seq / 2 >= JAC_SEQ_MIN &&
           sp_cost_jacobian_iter(cfg, jac_tokens_of(jac_seq, T), topk) * cap > SP_BUDGET_JACOBIAN)
        jac_seq /= 2;
    return jac_seq;
}

/* The default cap when it fits the budget, else the steps that do, at least POWER_ITERS_MIN. */
static int resolve_power_iters(const sp_config *cfg, int T, int topk, int jac_seq, int def)
{
    const double per_iter = sp_cost_jacobian_iter(cfg, jac_tokens_of(jac_seq, T), topk);
    if (per_iter * def <= SP_BUDGET_JACOBIAN)
        return def;
    const int fit = (int)(SP_BUDGET_JACOBIAN / per_iter);
    return fit > POWER_ITERS_MIN ? fit : POWER_ITERS_MIN;
}

/* 0 (prune_batches whole batches) when those fit the budget, else the sequences that do, at least 1. */
static int resolve_prune_seqs(const sp_config *cfg, int T, int batch, int prune_batches)
{
    const double per_seq = sp_cost_pruning_seq(cfg, T);
    if (per_seq * prune_batches * batch <= SP_BUDGET_PRUNING)
        return 0;
    const int fit = (int)(SP_BUDGET_PRUNING / per_seq);
    return fit > 1 ? fit : 1;
}

void sp_analyze_options_resolve(sp_analyze_options *o, const sp_config *cfg, int seq_len)
{
    sp_analyze_options def;
    sp_analyze_options_defaults(&def);
    const int T = seq_len;
    if (o->n_tokens == SP_ANALYZE_AUTO)
        o->n_tokens = cfg ? resolve_n_tokens(cfg, T, o->batch, def.n_tokens) : def.n_tokens;
    if (o->jac_seq == SP_ANALYZE_AUTO) /* at the given cap, or the default one */
        o->jac_seq = cfg ? resolve_jac_seq(cfg, T, o->topk, o->power_iters == SP_ANALYZE_AUTO ? def.power_iters
                                                                                              : o->power_iters,
                                           def.jac_seq)
                         : def.jac_seq;
    if (o->power_iters == SP_ANALYZE_AUTO)
        o->power_iters = cfg ? resolve_power_iters(cfg, T, o->topk, o->jac_seq, def.power_iters) : def.power_iters;
    if (o->prune_seqs == SP_ANALYZE_AUTO)
        o->prune_seqs = cfg ? resolve_prune_seqs(cfg, T, o->batch, o->prune_batches) : def.prune_seqs;
}

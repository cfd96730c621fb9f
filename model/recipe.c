#include "model/recipe.h"

#include <math.h>
#include <string.h>

#define NORM(d, s, n) {SP_STEP_NORM, d, s, -1, SP_COEF_ONE, SP_COEF_ONE, n}
#define NORM_LNS(d, s, n) {SP_STEP_NORM, d, s, -1, SP_COEF_LNS, SP_COEF_ONE, n}
#define ATTN(d, s) {SP_STEP_ATTN, d, s, -1, SP_COEF_ONE, SP_COEF_ONE, -1}
#define FFN(d, s) {SP_STEP_FFN, d, s, -1, SP_COEF_ONE, SP_COEF_ONE, -1}
#define ADD(d, a, b) {SP_STEP_ADD, d, a, b, SP_COEF_ONE, SP_COEF_ONE, -1}
#define ADDC(d, a, ca, b, cb) {SP_STEP_ADD, d, a, b, ca, cb, -1}

/* u = x + A(N1(x)); x' = u + F(N2(u)) */
static const sp_recipe recipe_pre = {
    "pre", 1, 7, {"x", "attn_in", "attn_out", "u", "ffn_in", "ffn_out", "out"},
    2, {"n1", "n2"}, SP_ATTN_PLAIN, 6,
    {NORM(1, 0, 0), ATTN(2, 1), ADD(3, 0, 2), NORM(4, 3, 1), FFN(5, 4), ADD(6, 3, 5)}, {6, -1}};

/* pre with every norm output scaled by 1/sqrt(l+1) */
static const sp_recipe recipe_lns = {
    "lns", 1, 7, {"x", "attn_in", "attn_out", "u", "ffn_in", "ffn_out", "out"},
    2, {"n1", "n2"}, SP_ATTN_PLAIN, 6,
    {NORM_LNS(1, 0, 0), ATTN(2, 1), ADD(3, 0, 2), NORM_LNS(4, 3, 1), FFN(5, 4), ADD(6, 3, 5)}, {6, -1}};

/* u = N1(x + A(x)); x' = N2(u + F(u)) */
static const sp_recipe recipe_post = {
    "post", 1, 7, {"x", "attn_out", "sum_a", "u", "ffn_out", "sum_z", "out"},
    2, {"n1", "n2"}, SP_ATTN_PLAIN, 6,
    {ATTN(1, 0), ADD(2, 0, 1), NORM(3, 2, 0), FFN(4, 3), ADD(5, 3, 4), NORM(6, 5, 1)}, {6, -1}};

/* u = N1(A(x) + x); x' = N2(F(u) + x): the FFN residual spans the block */
static const sp_recipe recipe_span = {
    "span", 1, 7, {"x", "attn_out", "sum_a", "u", "ffn_out", "sum_z", "out"},
    2, {"n1", "n2"}, SP_ATTN_PLAIN, 6,
    {ATTN(1, 0), ADD(2, 1, 0), NORM(3, 2, 0), FFN(4, 3), ADD(5, 4, 0), NORM(6, 5, 1)}, {6, -1}};

/* span block 0: attention reads N0(e), both residuals add the raw e (paper eq. 5-8) */
static const sp_recipe recipe_span0 = {
    "span", 1, 8, {"x", "attn_in", "attn_out", "sum_a", "u", "ffn_out", "sum_z", "out"},
    3, {"n1", "n2", "n0"}, SP_ATTN_PLAIN, 7,
    {NORM(1, 0, 2), ATTN(2, 1), ADD(3, 2, 0), NORM(4, 3, 0), FFN(5, 4), ADD(6, 5, 0), NORM(7, 6, 1)}, {7, -1}};

/* u = x + No1(A(Ni1(x))); x' = u + No2(F(Ni2(u))) */
static const sp_recipe recipe_peri = {
    "peri", 1, 9, {"x", "attn_in", "attn_out", "attn_normed", "u", "ffn_in", "ffn_out", "ffn_normed", "out"},
    4, {"ni1", "no1", "ni2", "no2"}, SP_ATTN_PLAIN, 8,
    {NORM(1, 0, 0), ATTN(2, 1), NORM(3, 2, 1), ADD(4, 0, 3), NORM(5, 4, 2), FFN(6, 5), NORM(7, 6, 3), ADD(8, 4, 7)},
    {8, -1}};

/* u = N1(a x + A(x)); x' = N2(a u + F(u)) */
static const sp_recipe recipe_deepnorm = {
    "deepnorm", 1, 7, {"x", "attn_out", "sum_a", "u", "ffn_out", "sum_z", "out"},
    2, {"n1", "n2"}, SP_ATTN_PLAIN, 6,
    {ATTN(1, 0), ADDC(2, 0, SP_COEF_DEEPNORM_ALPHA, 1, SP_COEF_ONE), NORM(3, 2, 0), FFN(4, 3),
     ADDC(5, 3, SP_COEF_DEEPNORM_ALPHA, 4, SP_COEF_ONE), NORM(6, 5, 1)},
    {6, -1}};

/* u = x + A_qkvnorm(x); v = N2(u); x' = v + F(v) */
static const sp_recipe recipe_hybrid = {
    "hybrid", 1, 6, {"x", "attn_out", "u", "ffn_in", "ffn_out", "out"},
    1, {"n2"}, SP_ATTN_QKV_HEADNORM, 5,
    {ATTN(1, 0), ADD(2, 0, 1), NORM(3, 2, 0), FFN(4, 3), ADD(5, 3, 4)}, {5, -1}};

/* u = x + Na(A_qk(x)); x' = u + Nf2(F(u)) */
static const sp_recipe recipe_olmo2 = {
    "olmo2", 1, 7, {"x", "attn_out", "attn_normed", "u", "ffn_out", "ffn_normed", "out"},
    2, {"na", "nf2"}, SP_ATTN_QK_NORM, 6,
    {ATTN(1, 0), NORM(2, 1, 0), ADD(3, 0, 2), FFN(4, 3), NORM(5, 4, 1), ADD(6, 3, 5)}, {6, -1}};

/* Parallel residual (GPT-NeoX, GPT-J): x' = x + A(N1(x)) + F(N2(x)) */
static const sp_recipe recipe_parallel = {
    "parallel", 1, 7, {"x", "attn_in", "attn_out", "ffn_in", "ffn_out", "u", "out"},
    2, {"n1", "n2"}, SP_ATTN_PLAIN, 6,
    {NORM(1, 0, 0), ATTN(2, 1), NORM(3, 0, 1), FFN(4, 3), ADD(5, 0, 2), ADD(6, 5, 4)}, {6, -1}};

/* Two streams, per sub-layer S: Xn = P(X); z = S(I(Xn + Q(Y))); X = Xn + z/c_l; Y = Y + z. */
static const sp_recipe recipe_siamese = {
    "siamese", 2, 16,
    {"x", "y", "x_attn_p", "y_attn_q", "attn_merge", "attn_in", "attn_out", "x_mid", "y_mid",
     "x_ffn_p", "y_ffn_q", "ffn_merge", "ffn_in", "ffn_out", "x_out", "y_out"},
    6, {"p_attn", "q_attn", "i_attn", "p_ffn", "q_ffn", "i_ffn"}, SP_ATTN_PLAIN, 14,
    {NORM(2, 0, 0), NORM(3, 1, 1), ADD(4, 2, 3), NORM(5, 4, 2), ATTN(6, 5),
     ADDC(7, 2, SP_COEF_ONE, 6, SP_COEF_SIAMESE_INV_C), ADD(8, 1, 6),
     NORM(9, 7, 3), NORM(10, 8, 4), ADD(11, 9, 10), NORM(12, 11, 5), FFN(13, 12),
     ADDC(14, 9, SP_COEF_ONE, 13, SP_COEF_SIAMESE_INV_C), ADD(15, 8, 13)},
    {14, 15}};

const sp_recipe *sp_recipe_for_layer(const sp_config *cfg, int layer)
{
    switch ((sp_variant)cfg->variant) {
    case SP_VARIANT_PRE: return &recipe_pre;
    case SP_VARIANT_POST: return &recipe_post;
    case SP_VARIANT_SPAN: return layer == 0 ? &recipe_span0 : &recipe_span;
    case SP_VARIANT_PERI: return &recipe_peri;
    case SP_VARIANT_MIXLN: return layer < sp_config_mixln_n_post(cfg) ? &recipe_post : &recipe_pre;
    case SP_VARIANT_LNS: return &recipe_lns;
    case SP_VARIANT_DEEPNORM: return &recipe_deepnorm;
    case SP_VARIANT_HYBRID: return &recipe_hybrid;
    case SP_VARIANT_OLMO2: return &recipe_olmo2;
    case SP_VARIANT_SIAMESE: return &recipe_siamese;
    case SP_VARIANT_PARALLEL: return &recipe_parallel;
    case SP_N_VARIANTS: break;
    }
    return NULL;
}

double sp_recipe_coef(const sp_config *cfg, int layer, sp_coef coef)
{
    switch (coef) {
    case SP_COEF_ONE: return 1.0;
    case SP_COEF_DEEPNORM_ALPHA: return cfg->deepnorm_alpha;
    case SP_COEF_LNS: return 1.0 / sqrt(layer + 1.0);
    case SP_COEF_SIAMESE_INV_C: return 1.0 / sqrt(cfg->siamese_c_mult * (layer + 1.0));
    }
    return 1.0;
}

int sp_recipe_slot(const sp_recipe *r, const char *name)
{
    for (int i = 0; i < r->n_slots; i++)
        if (strcmp(r->slot_names[i], name) == 0)
            return i;
    return -1;
}

int sp_config_has_slot(const sp_config *cfg, const char *name)
{
    for (int l = 0; l < cfg->n_layers; l++)
        if (sp_recipe_slot(sp_recipe_for_layer(cfg, l), name) >= 0)
            return 1;
    return 0;
}

int sp_config_n_streams(const sp_config *cfg) { return cfg->variant == SP_VARIANT_SIAMESE ? 2 : 1; }

sp_attn_norm sp_recipe_attn_norm(const sp_config *cfg, const sp_recipe *r)
{
    if (r->attn_norm != SP_ATTN_PLAIN)
        return r->attn_norm;
    switch ((sp_qk_norm)cfg->qk_norm) {
    case SP_QK_NORM_HEAD: return SP_ATTN_QK_HEADNORM;
    case SP_QK_NORM_FULL: return SP_ATTN_QK_NORM;
    case SP_QK_NORM_NONE: break;
    }
    return SP_ATTN_PLAIN;
}

int sp_attn_norm_count(sp_attn_norm kind)
{
    return kind == SP_ATTN_PLAIN ? 0 : kind == SP_ATTN_QKV_HEADNORM ? 3 : 2;
}

int sp_attn_norm_per_head(sp_attn_norm kind) { return kind == SP_ATTN_QKV_HEADNORM || kind == SP_ATTN_QK_HEADNORM; }

int sp_config_ffn_gated(const sp_config *cfg) { return cfg->ffn == SP_FFN_SWIGLU || cfg->ffn == SP_FFN_GEGLU; }

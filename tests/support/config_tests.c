#include "tests/support/config_tests.h"

#include <stdio.h>

void config_grad_combo(int variant, int combo, sp_config *cfg, char *what, size_t len)
{
    const int norm = combo & 1 ? SP_NORM_RMSNORM : SP_NORM_LAYERNORM;
    const int ffn = combo & 2 ? SP_FFN_SWIGLU : SP_FFN_GELU;
    const int pos = combo & 4 ? SP_POS_ROPE : SP_POS_LEARNED;
    fixture_tiny_config(cfg, variant, norm, ffn, pos);
    cfg->tie_embeddings = (pos == SP_POS_ROPE) ^ (ffn == SP_FFN_SWIGLU);
    if (ffn == SP_FFN_SWIGLU && pos == SP_POS_LEARNED)
        cfg->final_norm = !cfg->final_norm;
    cfg->embed_norm = variant == SP_VARIANT_PERI && norm == SP_NORM_RMSNORM;
    snprintf(what, len, "%s/%s/%s/%s%s", sp_variant_names[variant], sp_norm_names[norm], sp_ffn_names[ffn],
             sp_pos_names[pos], cfg->tie_embeddings ? "/tied" : "");
}

void config_grad_combos(int variant, void (*check)(const sp_config *cfg, uint64_t seed, const char *what))
{
    for (int combo = 0; combo < CONFIG_GRAD_COMBOS; combo++) {
        sp_config cfg;
        char what[128];
        config_grad_combo(variant, combo, &cfg, what, sizeof what);
        check(&cfg, (uint64_t)(variant * CONFIG_GRAD_COMBOS + combo), what);
    }
}

void config_pretrained(int i, uint64_t seed_base, void (*check)(const sp_config *cfg, uint64_t seed, const char *what))
{
    sp_config cfg;
    const char *name = fixture_pretrained_config(i, &cfg);
    check(&cfg, seed_base + (uint64_t)i, name);
}

void config_tests(struct CMUnitTest *tests, CMUnitTestFunction per_variant, CMUnitTestFunction per_pretrained)
{
    static char names[FIXTURE_N_PRETRAINED][64];
    for (int v = 0; v < SP_N_VARIANTS; v++)
        tests[v] = (struct CMUnitTest){.name = sp_variant_names[v], .test_func = per_variant,
                                       .initial_state = (void *)(intptr_t)v};
    for (int i = 0; i < FIXTURE_N_PRETRAINED; i++) {
        sp_config cfg;
        snprintf(names[i], sizeof names[i], "pretrained %s", fixture_pretrained_config(i, &cfg));
        tests[SP_N_VARIANTS + i] = (struct CMUnitTest){.name = names[i], .test_func = per_pretrained,
                                                       .initial_state = (void *)(intptr_t)i};
    }
}

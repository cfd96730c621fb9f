/* The options of pretrained architectures, in double: what the model computes with them, and the
 * pieces with closed forms.
 *
 * - RoPE frequency tables: Llama 3 scaling over a table whose three frequencies fall in the three
 *   bands (kept, blended, divided), linear scaling, the local base of Gemma 3's windowed layers,
 *   partial rotary; against values worked in Python from transformers' formulas (double, 1e-15
 *   relative) and against the float32 values transformers' own functions return (3e-7);
 * - the parameter layout: names, shapes, roles, weight decay and init of the biases, q/k norm gains
 *   and the q_dim-wide W_Q and W_O;
 * - the logits of every tiny pretrained config (tests/support/model_fixture.h) and of default
 *   variants against a naive host forward pass written from the definitions
 *   (tests/support/ref_model.c), 1e-12 normwise: the same math in another order; a miswired option
 *   (a bias after the norm, a window on the wrong layers, the local RoPE base on global layers, the
 *   embedding scale missed) moves logits by 1e-3 or more;
 * - the option defaults are inert: the option fields at their defaults give the same parameter layout
 *   as the config without them (bit-identical logits are test_model_legacy_f64's). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/rope_freq.h"
#include "tests/support/assert_err.h"
#include "tests/support/model_fixture.h"
#include "tests/support/ref_model.h"
#include "tests/support/vec_util.h"

#define TABLE_TOL 1e-15
#define HF_F32_TOL 3e-7
#define LOGIT_TOL 1e-12

static void check_table(const sp_config *cfg, int local, int n, const double *expect, double tol, const char *what)
{
    double got[8];
    assert_int_equal(sp_config_rope_dims(cfg) / 2, n);
    sp_rope_inv_freq(cfg, local, got);
    for (int i = 0; i < n; i++)
        assert_below(fabs(got[i] - expect[i]) / expect[i], tol, "%s: inv_freq[%d] = %.17g, expected %.17g", what, i,
                     got[i], expect[i]);
}

/* Llama 3 over theta 100, 6 rotated dims, factor 8, low/high frequency factors 1 and 4, original
 * context 64: wavelengths 2 pi (< 64/4: kept), 29.16 (blended with s = (64 / 29.16 - 1) / 3) and
 * 135.4 (> 64/1: divided by 8). */
static void test_rope_llama3_table(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_pretrained_config(2, &cfg); /* llama3 */
    const double python[3] = {1.0, 0.10198935907779744, 0.005801986042015975};
    const double transformers_f32[3] = {1.0, 0.10198933631181717, 0.005801985505968332};
    check_table(&cfg, 0, 3, python, TABLE_TOL, "llama3");
    check_table(&cfg, 0, 3, transformers_f32, HF_F32_TOL, "llama3 vs transformers (float32)");
    /* worked here: the middle band by hand */
    const double f1 = pow(100.0, -1.0 / 3), wavelen = 2 * 3.14159265358979323846 / f1, s = (64 / wavelen - 1) / 3;
    const double by_hand[3] = {1.0, (1 - s) * f1 / 8 + s * f1, pow(100.0, -2.0 / 3) / 8};
    check_table(&cfg, 0, 3, by_hand, TABLE_TOL, "llama3 by hand");
    assert_true(s > 0 && s < 1);
    /* the local table is never scaled (and this config has no local base) */
    cfg.rope_scaling = SP_ROPE_SCALING_NONE;
    const double plain[3] = {1.0, pow(100.0, -1.0 / 3), pow(100.0, -2.0 / 3)};
    check_table(&cfg, 0, 3, plain, TABLE_TOL, "unscaled");
}

/* Gemma 3: theta 1000 with linear factor 4 on global layers, theta 20 unscaled on windowed ones
 * (window pattern 3: layers 0, 1 and 3 of 4 are windowed). */
static void test_rope_linear_and_local_tables(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_pretrained_config(5, &cfg); /* gemma3 */
    const double global[3] = {0.25, 0.025000000000000005, 0.002500000000000001};
    const double transformers_f32[3] = {0.25, 0.02499999850988388, 0.002499999711290002};
    check_table(&cfg, 0, 3, global, TABLE_TOL, "linear");
    check_table(&cfg, 0, 3, transformers_f32, HF_F32_TOL, "linear vs transformers (float32)");
    const double local[3] = {1.0, pow(20.0, -1.0 / 3), pow(20.0, -2.0 / 3)};
    check_table(&cfg, 1, 3, local, TABLE_TOL, "local");
    const int expect_local[4] = {1, 1, 0, 1};
    for (int l = 0; l < 4; l++)
        assert_int_equal(sp_rope_layer_local(&cfg, l), expect_local[l]);
    cfg.rope_local_theta = 0; /* without a local base every layer takes the global table */
    for (int l = 0; l < 4; l++)
        assert_int_equal(sp_rope_layer_local(&cfg, l), 0);
}

/* Partial rotary: the frequencies of r = rope_dims, not of head_dim (transformers: dim = head_dim *
 * partial_rotary_factor in base^(arange(0, dim, 2) / dim)). */
static void test_rope_partial_table(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_GELU, SP_POS_ROPE);
    cfg.head_dim = 8;
    cfg.rope_dims = 4;
    cfg.rope_theta = 10000;
    const double expect[2] = {1.0, 0.01};
    check_table(&cfg, 0, 2, expect, TABLE_TOL, "partial");
    cfg.pos = SP_POS_LEARNED;
    assert_int_equal(sp_config_rope_dims(&cfg), 0);
}

static const sp_param_spec *spec_of(const sp_model *m, const char *name)
{
    const int i = sp_model_find_param(m, name);
    if (i < 0)
        fail_msg("no parameter %s", name);
    return sp_model_param_spec(m, i);
}

static void assert_shape(const sp_model *m, const char *name, int64_t rows, int64_t cols)
{
    const sp_param_spec *s = spec_of(m, name);
    if (s->shape[0] != rows || s->shape[1] != cols)
        fail_msg("%s is [%lld, %lld], expected [%lld, %lld]", name, (long long)s->shape[0], (long long)s->shape[1],
                 (long long)rows, (long long)cols);
}

static void test_layout(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_pretrained_config(1, &cfg); /* gpt2: every bias */
    sp_model *m = fixture_model(&cfg, 1, 0);
    const char *biases[] = {"attn/bq", "attn/bk", "attn/bv", "attn/bo", "ffn/b1", "ffn/b2"};
    const int64_t bias_dims[] = {8, 4, 4, 8, 12, 8}; /* q_dim, kv_dim, kv_dim, d, d_ff, d */
    for (size_t i = 0; i < SP_ARRAY_LEN(biases); i++) {
        char name[SP_PARAM_NAME_MAX];
        snprintf(name, sizeof name, "blocks/3/%s", biases[i]);
        const sp_param_spec *s = spec_of(m, name);
        assert_shape(m, name, bias_dims[i], 1);
        assert_int_equal(s->rank, 1);
        assert_int_equal(s->role, SP_ROLE_LINEAR_BIAS);
        assert_int_equal(s->decay, 0);
        assert_true(s->init_std == 0 && s->init_value == 0);
        assert_int_equal(s->layer, 3);
        sp_real b[12];
        sp_model_get_param(m, sp_model_find_param(m, name), b);
        assert_true(vec_max_abs((size_t)bias_dims[i], b) == 0);
    }
    assert_string_equal(sp_role_names[SP_ROLE_LINEAR_BIAS], "linear_bias");
    assert_int_equal(sp_model_find_param(m, "blocks/0/ffn/b3"), -1); /* no W3 without a gated FFN */
    /* each bias follows its matrix */
    assert_int_equal(sp_model_find_param(m, "blocks/0/attn/bq"), sp_model_find_param(m, "blocks/0/attn/wq") + 1);
    sp_model_free(m);

    fixture_pretrained_config(5, &cfg); /* gemma3: heads of 6 over d_model 8, q/k norms per head, geglu */
    m = fixture_model(&cfg, 1, 0);
    assert_shape(m, "blocks/0/attn/wq", 12, 8);
    assert_shape(m, "blocks/0/attn/wk", 6, 8);
    assert_shape(m, "blocks/0/attn/wv", 6, 8);
    assert_shape(m, "blocks/0/attn/wo", 8, 12);
    assert_shape(m, "blocks/0/attn/q_norm/gain", 6, 1);
    assert_shape(m, "blocks/0/attn/k_norm/gain", 6, 1);
    assert_int_equal(sp_model_find_param(m, "blocks/0/attn/v_norm/gain"), -1);
    assert_int_equal(sp_model_find_param(m, "blocks/0/attn/q_norm/bias"), -1); /* RMSNorm */
    assert_shape(m, "blocks/0/ffn/w3", 12, 8);
    assert_int_equal(sp_model_find_param(m, "blocks/0/attn/bq"), -1);
    sp_model_free(m);

    fixture_pretrained_config(7, &cfg); /* q/k norms over the whole projections, LayerNorm */
    m = fixture_model(&cfg, 1, 0);
    assert_shape(m, "blocks/0/attn/q_norm/gain", 12, 1);
    assert_shape(m, "blocks/0/attn/q_norm/bias", 12, 1);
    assert_shape(m, "blocks/0/attn/k_norm/gain", 6, 1);
    sp_model_free(m);
}

/* Model logits against the naive forward pass, on a batch of 2 sequences of 7 (longer than every
 * window). */
static void check_against_reference(const sp_config *cfg, uint64_t seed, const char *what)
{
    enum { BATCH = 2, SEQ = 7, ROWS = BATCH * SEQ };
    sp_model *m = fixture_model(cfg, seed, 0.3);
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    int32_t tokens[ROWS];
    fixture_tokens(&rng, ROWS, cfg->vocab_size, tokens);
    const size_t n = (size_t)ROWS * cfg->vocab_size;
    assert_int_equal(sp_model_forward(m, tokens, NULL, BATCH, SEQ, NULL), SP_OK);
    sp_real *got = fixture_download(m, sp_model_logits(m), n), *expect = vec_zeros(n);
    ref_model_logits(m, tokens, BATCH, SEQ, expect);
    const double err = vec_rel_err(n, got, expect);
    if (getenv("SP_TEST_VERBOSE"))
        print_message("%s: logits vs reference %.3g\n", what, err);
    assert_below(err, LOGIT_TOL, "%s: logits vs the naive forward pass", what);
    free(got);
    free(expect);
    sp_model_free(m);
}

static void test_pretrained_logits(void **state)
{
    (void)state;
    for (int i = 0; i < FIXTURE_N_PRETRAINED; i++) {
        sp_config cfg;
        const char *name = fixture_pretrained_config(i, &cfg);
        check_against_reference(&cfg, 300 + (uint64_t)i, name);
        cfg.tie_embeddings = !cfg.tie_embeddings;
        check_against_reference(&cfg, 320 + (uint64_t)i, name);
    }
}

/* The reference also holds for the default options of the one-stream variants. */
static void test_default_logits(void **state)
{
    (void)state;
    for (int v = 0; v < SP_N_VARIANTS; v++) {
        sp_config cfg;
        fixture_tiny_config(&cfg, v, v % 2 ? SP_NORM_RMSNORM : SP_NORM_LAYERNORM, v % 3 ? SP_FFN_SWIGLU : SP_FFN_GELU,
                            v % 2 ? SP_POS_ROPE : SP_POS_LEARNED);
        if (sp_config_n_streams(&cfg) == 1)
            check_against_reference(&cfg, 400 + (uint64_t)v, sp_variant_names[v]);
    }
}

/* The option fields at their defaults leave the layout as it was: no extra tensors, W_Q square. */
static void test_defaults_inert(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_ROPE);
    sp_model *m = fixture_model(&cfg, 1, 0);
    for (int i = 0; i < sp_model_n_params(m); i++)
        assert_true(sp_model_param_spec(m, i)->role != SP_ROLE_LINEAR_BIAS);
    assert_shape(m, "blocks/0/attn/wq", 8, 8);
    assert_shape(m, "blocks/0/attn/wo", 8, 8);
    assert_int_equal(sp_model_find_param(m, "blocks/0/attn/q_norm/gain"), -1);
    /* 4 blocks x (2 norms x 2 + 4 attention + 2 FFN matrices) + tok + final norm 2 + head */
    assert_int_equal(sp_model_n_params(m), 4 * 10 + 4);
    sp_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_llama3_table), cmocka_unit_test(test_rope_linear_and_local_tables),
        cmocka_unit_test(test_rope_partial_table), cmocka_unit_test(test_layout),
        cmocka_unit_test(test_pretrained_logits),  cmocka_unit_test(test_default_logits),
        cmocka_unit_test(test_defaults_inert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

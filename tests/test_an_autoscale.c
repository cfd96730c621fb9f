/* The analysis defaults that scale with the model (analyzers/autoscale.h), against the table of
 * docs/analyze.md ("Defaults that scale with the model"): the 12-block d_model 256 reference and the
 * tests' small models keep the fixed defaults exactly; GPT-2 small and SmolLM2-135M get the
 * documented smaller values; options given explicitly are never changed; a dump takes the fixed
 * defaults; the auto sentinels pass validation and every resolved set does too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "analyzers/autoscale.h"

static sp_config shape(int L, int d, int heads, int kv_heads, int d_ff, int vocab, int ffn)
{
    sp_config c;
    sp_config_defaults(&c);
    c.n_layers = L;
    c.d_model = d;
    c.n_heads = heads;
    c.n_kv_heads = kv_heads;
    c.d_ff = d_ff;
    c.vocab_size = vocab;
    c.ffn = ffn;
    c.max_seq_len = 1024;
    assert_int_equal(sp_config_resolve(&c), SP_OK);
    return c;
}

typedef struct {
    int64_t n_tokens;
    int power_iters, jac_seq, prune_seqs;
} scaled;

static scaled resolve_auto(const sp_config *c, int seq_len)
{
    sp_analyze_options o;
    sp_analyze_options_auto(&o);
    assert_int_equal(sp_analyze_options_validate(&o, "auto"), SP_OK);
    sp_analyze_options_resolve(&o, c, seq_len);
    assert_int_equal(sp_analyze_options_validate(&o, "resolved"), SP_OK);
    return (scaled){o.n_tokens, o.power_iters, o.jac_seq, o.prune_seqs};
}

static void expect(scaled got, scaled want)
{
    assert_int_equal(got.n_tokens, want.n_tokens);
    assert_int_equal(got.power_iters, want.power_iters);
    assert_int_equal(got.jac_seq, want.jac_seq);
    assert_int_equal(got.prune_seqs, want.prune_seqs);
}

static const scaled fixed = {16384, 100, 64, 0};

static void test_reference_keeps_the_defaults(void **state)
{
    (void)state;
    sp_analyze_options def;
    sp_analyze_options_defaults(&def);
    expect((scaled){def.n_tokens, def.power_iters, def.jac_seq, def.prune_seqs}, fixed);
    sp_config ref = shape(12, 256, 8, 8, 1024, 256, SP_FFN_GELU);
    expect(resolve_auto(&ref, 256), fixed);
    sp_config tiny = shape(2, 32, 4, 4, 64, 256, SP_FFN_SWIGLU); /* the tests' size */
    expect(resolve_auto(&tiny, 16), fixed);
}

static void test_large_models_scale_down(void **state)
{
    (void)state;
    sp_config gpt2 = shape(12, 768, 12, 12, 3072, 50257, SP_FFN_GELU);
    expect(resolve_auto(&gpt2, 256), (scaled){2560, 25, 16, 2});
    sp_config smollm2 = shape(30, 576, 9, 3, 1536, 49152, SP_FFN_SWIGLU);
    smollm2.tie_embeddings = 1;
    expect(resolve_auto(&smollm2, 256), (scaled){2048, 13, 16, 1});
}

static void test_given_options_win(void **state)
{
    (void)state;
    sp_config smollm2 = shape(30, 576, 9, 3, 1536, 49152, SP_FFN_SWIGLU);
    sp_analyze_options o;
    sp_analyze_options_auto(&o);
    o.n_tokens = 16384;
    o.power_iters = 100;
    o.jac_seq = 64;
    o.prune_seqs = 0;
    sp_analyze_options_resolve(&o, &smollm2, 256);
    expect((scaled){o.n_tokens, o.power_iters, o.jac_seq, o.prune_seqs}, fixed);
    /* a given cap sets the sequence the budget allows; a given sequence sets the cap */
    sp_analyze_options_auto(&o);
    o.jac_seq = 0; /* the whole 256-token sequence */
    sp_analyze_options_resolve(&o, &smollm2, 256);
    assert_int_equal(o.jac_seq, 0);
    assert_int_equal(o.power_iters, 10);
    /* the streaming pass keeps at least one batch */
    sp_analyze_options_auto(&o);
    o.batch = 32;
    sp_analyze_options_resolve(&o, &smollm2, 256);
    assert_int_equal(o.n_tokens, 32 * 256);
}

static void test_dump_takes_the_defaults(void **state)
{
    (void)state;
    sp_analyze_options o;
    sp_analyze_options_auto(&o);
    sp_analyze_options_resolve(&o, NULL, 0);
    expect((scaled){o.n_tokens, o.power_iters, o.jac_seq, o.prune_seqs}, fixed);
}

static void test_auto_only_where_meant(void **state)
{
    (void)state;
    sp_analyze_options o;
    sp_analyze_options_defaults(&o);
    o.n_tokens = 0; /* 0 is not "auto" */
    assert_int_equal(sp_analyze_options_validate(&o, "x"), SP_ERR_USAGE);
    sp_analyze_options_defaults(&o);
    o.power_iters = 0;
    assert_int_equal(sp_analyze_options_validate(&o, "x"), SP_ERR_USAGE);
    sp_analyze_options_defaults(&o);
    o.prune_seqs = -2;
    assert_int_equal(sp_analyze_options_validate(&o, "x"), SP_ERR_USAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_keeps_the_defaults),
        cmocka_unit_test(test_large_models_scale_down),
        cmocka_unit_test(test_given_options_win),
        cmocka_unit_test(test_dump_takes_the_defaults),
        cmocka_unit_test(test_auto_only_where_meant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The "attention" analyzer through the analyze driver on tiny models (float32 build):
 * - against the naive fp64 reference of tests/support/attn_ref.h (scores, soft-cap, window and
 *   softmax written out from the model's q and k) within 1e-5: grouped-query heads (llama3: 4 query
 *   heads on 2 kv heads), a sliding window on every layer (mistral), score soft-capping with a window
 *   on every other layer (gemma2), one stream and siamese's two, each with and without
 *   --skip-positions, the last batch shorter; and sequences of 40 positions, so the CPU op's blocks
 *   of 16 query rows start past the first key (window 5) and run on several threads;
 * - closed forms: with W_Q = 0 every score is 0 and attention is uniform over the n_i visible keys of
 *   query i (i + 1, or the window): entropy ln n_i, normalized entropy 1, sink mass 1 / n_i while
 *   position 0 is visible (0 after), distance (n_i - 1) / 2, largest score 0, head cosines 1;
 * - the backend op without head cosines: the same statistics, bit for bit;
 * - the built-in check rule collapse.attention_entropy: W_Q scaled by 100 makes every head attend
 *   to one key (fails, exit 7), uniform attention passes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support/an_run.h"
#include "tests/support/assert_err.h"
#include "tests/support/attn_ref.h"
#include "tests/support/model_fixture.h"
#include "tests/support/scratch.h"

#define TOL 1e-5

static void test_pretrained_against_reference(void **state)
{
    (void)state;
    static const char *const names[] = {"llama3", "mistral", "gemma2"};
    for (int i = 0; i < FIXTURE_N_PRETRAINED; i++) {
        sp_config cfg;
        const char *name = fixture_pretrained_config(i, &cfg);
        int chosen = 0;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            chosen |= strcmp(name, names[k]) == 0;
        if (!chosen)
            continue;
        sp_model *m = fixture_model(&cfg, 10 + (uint64_t)i, 0.3);
        attn_ref_check(m, cfg.max_seq_len, 3, 20 + (uint64_t)i, TOL, name);
        sp_model_free(m);
    }
}

static void test_siamese_against_reference(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_SIAMESE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
    sp_model *m = fixture_model(&cfg, 30, 0.3);
    attn_ref_check(m, cfg.max_seq_len, 2, 31, TOL, "siamese");
    sp_model_free(m);
}

/* 40 positions: blocks of 16 query rows, the later ones starting at key i0 - 4 under a window of 5. */
static void test_long_sequences(void **state)
{
    (void)state;
    static const char *const options[][2] = {{"sliding_window", "5"}, {"attn_softcap", "1.5"}};
    for (int k = 0; k < 2; k++) {
        sp_config cfg;
        fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
        cfg.n_heads = 4;
        cfg.n_kv_heads = 2;
        cfg.max_seq_len = 40;
        assert_int_equal(sp_config_set(&cfg, options[k][0], options[k][1], "test"), SP_OK);
        assert_int_equal(sp_config_resolve(&cfg), SP_OK);
        assert_int_equal(sp_config_validate(&cfg, "test"), SP_OK);
        sp_model *m = fixture_model(&cfg, 40 + (uint64_t)k, 0.3);
        attn_ref_check(m, 40, 3, 50 + (uint64_t)k, TOL, options[k][0]);
        sp_model_free(m);
    }
}

/* The backend op without head cosines (no probabilities written back) gives the same bits. */
static void test_stats_without_cosines(void **state)
{
    (void)state;
    sp_config cfg;
    const char *name = fixture_pretrained_config(4, &cfg); /* gemma2: soft-cap, every other layer windowed */
    sp_model *m = fixture_model(&cfg, 80, 0.3);
    enum { SEQS = 3, T = 8 };
    assert_int_equal(cfg.max_seq_len, T);
    int32_t tokens[SEQS * T];
    sp_rng rng;
    sp_rng_seed(&rng, 81);
    fixture_tokens(&rng, SEQS * cfg.max_seq_len, cfg.vocab_size, tokens);
    assert_int_equal(sp_model_forward(m, tokens, NULL, SEQS, cfg.max_seq_len, NULL), SP_OK);
    const sp_backend *be = sp_model_backend(m);
    const size_t n = (size_t)SEQS * cfg.max_seq_len * cfg.n_heads * SP_ATTN_N_STATS, hh = (size_t)cfg.n_heads * cfg.n_heads;
    double *with = be->alloc(n * sizeof *with, "test"), *without = be->alloc(n * sizeof *without, "test");
    double *cos = be->alloc(hh * sizeof *cos, "test");
    for (int l = 0; l < cfg.n_layers; l++) {
        const sp_real *q, *k;
        sp_attn_shape shape;
        assert_int_equal(sp_model_attention_qk(m, l, &q, &k, &shape), SP_OK);
        assert_int_equal(be->attn_stats(&shape, q, k, 0, with, cos), SP_OK);
        assert_int_equal(be->attn_stats(&shape, q, k, 0, without, NULL), SP_OK);
        if (memcmp(with, without, n * sizeof *with) != 0)
            fail_msg("%s, block %d: other statistics without the head cosines", name, l);
    }
    be->free(with);
    be->free(without);
    be->free(cos);
    sp_model_free(m);
}

/* Multiplies every W_Q (and its bias) of the model by factor. */
static void scale_queries(sp_model *m, double factor)
{
    const sp_backend *be = sp_model_backend(m);
    for (int i = 0; i < sp_model_n_params(m); i++) {
        const sp_param_spec *spec = sp_model_param_spec(m, i);
        const char *tail = strrchr(spec->name, '/');
        if (spec->role == SP_ROLE_WQ || (tail && strcmp(tail, "/bq") == 0))
            be->scale(sp_param_numel(spec), (sp_real)factor, sp_model_param(m, i));
    }
}

static void expect_layer_values(an_run *r, const char *array, const double *want, int L, int H, double tol)
{
    sp_report_array a = an_run_array(r, "attention", array);
    assert_int_equal(a.shape[0], L);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            assert_below(fabs(a.data[l * H + h] - *want), tol, "%s[%d, %d] = %.9g, expected %.9g", array, l, h,
                         a.data[l * H + h], *want);
    sp_report_array_free(&a);
}

/* W_Q = 0: uniform attention over the visible keys, with and without a window and skipped positions. */
static void test_uniform_closed_form(void **state)
{
    (void)state;
    enum { T = 8 };
    static const int cases[][2] = {{0, 0}, {3, 2}}; /* window, skip */
    for (int c = 0; c < 2; c++) {
        const int window = cases[c][0], skip = cases[c][1];
        sp_config cfg;
        fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
        cfg.sliding_window = window;
        assert_int_equal(sp_config_resolve(&cfg), SP_OK);
        sp_model *m = fixture_model(&cfg, 60, 0.3);
        scale_queries(m, 0);
        an_run r;
        attn_ref_run(&r, m, T, skip, 61, "uniform.h5");
        double entropy = 0, sink = 0, distance = 0;
        for (int i = skip; i < T; i++) {
            const int n = window > 0 && window < i + 1 ? window : i + 1;
            entropy += log(n) / (T - skip);
            sink += (n == i + 1 ? 1.0 / n : 0) / (T - skip);
            distance += (n - 1) / 2.0 / (T - skip);
        }
        const double one = 1, zero = 0;
        const int L = cfg.n_layers, H = cfg.n_heads;
        expect_layer_values(&r, "entropy", &entropy, L, H, 1e-6);
        expect_layer_values(&r, "entropy_normalized", &one, L, H, 1e-6);
        expect_layer_values(&r, "sink_mass", &sink, L, H, 1e-6);
        expect_layer_values(&r, "distance", &distance, L, H, 1e-6);
        expect_layer_values(&r, "max_logit", &zero, L, H, 0);
        expect_layer_values(&r, "head_cosine", &one, L, H * H, 1e-6);
        expect_layer_values(&r, "redundancy", &one, L, 1, 1e-6);
        assert_below(fabs(an_run_scalar(&r, "attention", "entropy_normalized_block_min") - 1), 1e-6,
                     "entropy_normalized_block_min, window %d", window);
        an_run_free(&r);
        sp_model_free(m);
    }
}

/* check's exit status and output on the report of a model whose W_Q is scaled by factor. */
static void expect_rule(double factor, int want_rc, const char *want_line)
{
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
    sp_model *m = fixture_model(&cfg, 70, 0.3);
    scale_queries(m, factor);
    an_run r;
    attn_ref_run(&r, m, cfg.max_seq_len, 0, 71, factor > 0 ? "collapsed.h5" : "uniform_check.h5");
    char *out = NULL;
    const int rc = scratch_run_cli((const char *[]){"check", r.path, NULL}, &out, NULL);
    an_run_free(&r);
    sp_model_free(m);
    if (rc == -1)
        skip();
    assert_int_equal(rc, want_rc);
    assert_non_null(strstr(out, want_line));
    free(out);
}

static void test_check_rule(void **state)
{
    (void)state;
    expect_rule(100, 7, "FAIL   collapse.attention_entropy");
    expect_rule(0, 0, "PASS   collapse.attention_entropy");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pretrained_against_reference),
        cmocka_unit_test(test_siamese_against_reference),
        cmocka_unit_test(test_long_sequences),
        cmocka_unit_test(test_stats_without_cosines),
        cmocka_unit_test(test_uniform_closed_form),
        cmocka_unit_test(test_check_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

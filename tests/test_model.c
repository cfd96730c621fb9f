/* The model in float32: loss at init, seeded determinism, capture points, shape changes and the
 * errors on bad input. Tolerances are float32 ones (a few ulps of accumulated sums). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support/model_fixture.h"
#include "tests/support/vec_util.h"

static void small_config(sp_config *cfg, int variant)
{
    fixture_tiny_config(cfg, variant, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
    cfg->d_model = 32;
    cfg->n_heads = 4;
    cfg->n_kv_heads = 2;
    cfg->d_ff = 64;
    cfg->vocab_size = 64;
    cfg->max_seq_len = 16;
    cfg->init = SP_INIT_SCALED;
    cfg->init_std = 0.002;
    cfg->tie_embeddings = 1;
    assert_int_equal(sp_config_validate(cfg, "test"), SP_OK);
}

/* With tiny weights the logits are nearly equal: the loss is ln(vocab) up to their variance / 2
 * (about 1e-4 here, since the head input has unit scale at most); 1e-2 leaves room. */
static void test_init_loss_is_ln_vocab(void **state)
{
    (void)state;
    for (int v = 0; v < SP_N_VARIANTS; v++) {
        sp_config cfg;
        small_config(&cfg, v);
        sp_model *m = fixture_model(&cfg, 3, 0);
        sp_rng rng;
        sp_rng_seed(&rng, 9);
        int32_t tokens[2 * 16], targets[2 * 16];
        fixture_tokens(&rng, 32, cfg.vocab_size, tokens);
        fixture_tokens(&rng, 32, cfg.vocab_size, targets);
        double loss = 0;
        assert_int_equal(sp_model_forward(m, tokens, targets, 2, 16, &loss), SP_OK);
        if (fabs(loss - log(cfg.vocab_size)) >= 1e-2)
            print_error("%s: loss at init %.6f, ln(vocab) %.6f\n", sp_variant_names[v], loss, log(cfg.vocab_size));
        assert_true(fabs(loss - log(cfg.vocab_size)) < 1e-2);
        sp_model_free(m);
    }
}

static sp_real *all_params(sp_model *m)
{
    return fixture_download(m, sp_model_param(m, 0), sp_model_n_weights(m));
}

/* Same seed: the same parameters and losses bit for bit; parameters follow the layout order of
 * draws (the first element of embed/tok is the seed's first normal draw); norms start at 1 and 0. */
static void test_seeded_init_is_deterministic(void **state)
{
    (void)state;
    sp_config cfg;
    small_config(&cfg, SP_VARIANT_SIAMESE);
    sp_model *a = fixture_model(&cfg, 42, 0), *b = fixture_model(&cfg, 42, 0), *c = fixture_model(&cfg, 43, 0);
    const size_t n = sp_model_n_weights(a);
    sp_real *pa = all_params(a), *pb = all_params(b), *pc = all_params(c);
    assert_memory_equal(pa, pb, n * sizeof(sp_real));
    assert_memory_not_equal(pa, pc, n * sizeof(sp_real));

    sp_rng rng;
    sp_rng_seed(&rng, 42);
    assert_true(pa[0] == (sp_real)(cfg.init_std * sp_rng_normal(&rng)));
    for (int i = 0; i < sp_model_n_params(a); i++) {
        const sp_param_spec *s = sp_model_param_spec(a, i);
        if (s->role != SP_ROLE_NORM_GAIN && s->role != SP_ROLE_NORM_BIAS)
            continue;
        sp_real *x = fixture_download(a, sp_model_param(a, i), sp_param_numel(s));
        for (size_t j = 0; j < sp_param_numel(s); j++)
            assert_true(x[j] == (s->role == SP_ROLE_NORM_GAIN ? 1 : 0));
        free(x);
    }

    int32_t tokens[16], targets[16];
    fixture_tokens(&rng, 16, cfg.vocab_size, tokens);
    fixture_tokens(&rng, 16, cfg.vocab_size, targets);
    double la = 0, lb = 0;
    assert_int_equal(sp_model_forward(a, tokens, targets, 2, 8, &la), SP_OK);
    assert_int_equal(sp_model_forward(b, tokens, targets, 2, 8, &lb), SP_OK);
    assert_true(la == lb);
    assert_int_equal(sp_model_backward(a), SP_OK);
    assert_int_equal(sp_model_backward(b), SP_OK);
    sp_real *ga = fixture_download(a, sp_model_grad(a, 0), n), *gb = fixture_download(b, sp_model_grad(b, 0), n);
    assert_memory_equal(ga, gb, n * sizeof(sp_real));
    free(ga);
    free(gb);
    free(pa);
    free(pb);
    free(pc);
    sp_model_free(a);
    sp_model_free(b);
    sp_model_free(c);
}

/* y[r, o] = sum_i x[r, i] w[o, i] in double */
static void host_linear(int rows, int in, int out, const sp_real *x, const sp_real *w, sp_real *y)
{
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            double s = 0;
            for (int i = 0; i < in; i++)
                s += (double)x[r * in + i] * w[o * in + i];
            y[r * out + o] = (sp_real)s;
        }
}

static void test_capture_points(void **state)
{
    (void)state;
    sp_config cfg;
    small_config(&cfg, SP_VARIANT_POST);
    cfg.final_norm = 1;
    cfg.tie_embeddings = 0;
    cfg.init_std = 0.1;
    sp_model *m = fixture_model(&cfg, 11, 0.2);
    const int batch = 2, seq = 6, rows = batch * seq, d = cfg.d_model, dff = cfg.d_ff, L = cfg.n_layers;
    sp_rng rng;
    sp_rng_seed(&rng, 4);
    int32_t tokens[12];
    fixture_tokens(&rng, rows, cfg.vocab_size, tokens);
    assert_null(sp_model_hidden(m, 0, 0)); /* nothing before a forward pass */
    assert_int_equal(sp_model_forward(m, tokens, NULL, batch, seq, NULL), SP_OK);
    assert_int_equal(sp_model_rows(m), rows);

    /* h_0 is the embedding: tok[id] + pos[t] */
    sp_real *tok = fixture_download(m, sp_model_param(m, sp_model_find_param(m, "embed/tok")), (size_t)cfg.vocab_size * d);
    sp_real *pos = fixture_download(m, sp_model_param(m, sp_model_find_param(m, "embed/pos")), (size_t)cfg.max_seq_len * d);
    sp_real *h0 = fixture_download(m, sp_model_hidden(m, 0, 0), (size_t)rows * d);
    sp_real *expect = vec_zeros((size_t)rows * d);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < d; c++)
            expect[r * d + c] = tok[tokens[r] * d + c] + pos[(r % seq) * d + c];
    assert_true(vec_rel_err((size_t)rows * d, h0, expect) < 1e-6);

    /* layer outputs are the blocks' "out" slots; one stream only; no h_{L+1} */
    for (int l = 0; l < L; l++)
        assert_ptr_equal(sp_model_hidden(m, l + 1, 0), sp_model_slot(m, l, "out"));
    assert_null(sp_model_hidden(m, L + 1, 0));
    assert_null(sp_model_hidden(m, 0, 1));
    assert_null(sp_model_slot(m, 0, "attn_in")); /* post has no pre-attention norm */

    /* post: sum_a = x + attn_out, [rows, d_model] */
    sp_real *x1 = fixture_download(m, sp_model_hidden(m, 1, 0), (size_t)rows * d);
    sp_real *attn = fixture_download(m, sp_model_slot(m, 1, "attn_out"), (size_t)rows * d);
    sp_real *sum_a = fixture_download(m, sp_model_slot(m, 1, "sum_a"), (size_t)rows * d);
    for (size_t i = 0; i < (size_t)rows * d; i++)
        expect[i] = x1[i] + attn[i];
    assert_true(vec_rel_err((size_t)rows * d, sum_a, expect) < 1e-6);

    /* the FFN latent of block 1 is gelu(u W1^T), [rows, d_ff] */
    sp_real *u = fixture_download(m, sp_model_slot(m, 1, "u"), (size_t)rows * d);
    sp_real *w1 = fixture_download(m, sp_model_param(m, sp_model_find_param(m, "blocks/1/ffn/w1")), (size_t)dff * d);
    sp_real *latent = fixture_download(m, sp_model_ffn_latent(m, 1), (size_t)rows * dff);
    sp_real *pre = vec_zeros((size_t)rows * dff);
    host_linear(rows, d, dff, u, w1, pre);
    for (size_t i = 0; i < (size_t)rows * dff; i++) {
        double g = pre[i];
        pre[i] = (sp_real)(0.5 * g * (1 + tanh(sqrt(2 / acos(-1.0)) * (g + 0.044715 * g * g * g))));
    }
    assert_true(vec_rel_err((size_t)rows * dff, latent, pre) < 1e-5);
    assert_null(sp_model_ffn_latent(m, L));

    sp_real *bufs[] = {tok, pos, h0, expect, x1, attn, sum_a, u, w1, latent, pre};
    for (size_t i = 0; i < SP_ARRAY_LEN(bufs); i++)
        free(bufs[i]);
    sp_model_free(m);
}

/* siamese: both streams start at the embedding and part ways. */
static void test_siamese_streams(void **state)
{
    (void)state;
    sp_config cfg;
    small_config(&cfg, SP_VARIANT_SIAMESE);
    cfg.init_std = 0.1;
    sp_model *m = fixture_model(&cfg, 12, 0);
    int32_t tokens[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(sp_model_forward(m, tokens, NULL, 1, 8, NULL), SP_OK);
    assert_ptr_equal(sp_model_hidden(m, 0, 0), sp_model_hidden(m, 0, 1));
    const size_t n = (size_t)8 * cfg.d_model;
    sp_real *x = fixture_download(m, sp_model_hidden(m, cfg.n_layers, 0), n);
    sp_real *y = fixture_download(m, sp_model_hidden(m, cfg.n_layers, 1), n);
    assert_true(vec_rel_err(n, x, y) > 1e-3);
    assert_ptr_equal(sp_model_hidden(m, cfg.n_layers, 1), sp_model_slot(m, cfg.n_layers - 1, "y_out"));
    assert_null(sp_model_hidden(m, 0, 2));
    free(x);
    free(y);
    sp_model_free(m);
}

/* A longer batch reallocates, a shorter one reuses the buffers; causal attention makes a prefix's
 * logits independent of what follows it. */
static void test_shape_changes(void **state)
{
    (void)state;
    for (int pos = SP_POS_LEARNED; pos <= SP_POS_ROPE; pos++) {
        sp_config cfg;
        small_config(&cfg, SP_VARIANT_PRE);
        cfg.pos = pos;
        cfg.init_std = 0.1;
        sp_model *m = fixture_model(&cfg, 13, 0);
        const int V = cfg.vocab_size;
        int32_t tokens[3 * 16];
        sp_rng rng;
        sp_rng_seed(&rng, 5);
        fixture_tokens(&rng, 3 * 16, V, tokens);
        assert_int_equal(sp_model_forward(m, tokens, NULL, 1, 4, NULL), SP_OK);
        sp_real *first = fixture_download(m, sp_model_logits(m), (size_t)4 * V);
        assert_int_equal(sp_model_forward(m, tokens, NULL, 3, 16, NULL), SP_OK);
        assert_int_equal(sp_model_rows(m), 48);
        sp_real *longer = fixture_download(m, sp_model_logits(m), (size_t)4 * V);
        assert_true(vec_rel_err((size_t)4 * V, longer, first) < 1e-5);
        assert_int_equal(sp_model_forward(m, tokens, NULL, 1, 4, NULL), SP_OK);
        sp_real *again = fixture_download(m, sp_model_logits(m), (size_t)4 * V);
        assert_memory_equal(again, first, (size_t)4 * V * sizeof(sp_real));
        free(first);
        free(longer);
        free(again);
        sp_model_free(m);
    }
}

static void expect_error(sp_status got, sp_status want, const char *fragment)
{
    assert_int_equal(got, want);
    if (!strstr(sp_error_message(), fragment))
        print_error("message '%s' lacks '%s'\n", sp_error_message(), fragment);
    assert_non_null(strstr(sp_error_message(), fragment));
    assert_null(strchr(sp_error_message(), '\n'));
    sp_error_clear();
}

static void test_bad_input(void **state)
{
    (void)state;
    sp_config cfg;
    small_config(&cfg, SP_VARIANT_PRE);
    sp_model *m = fixture_model(&cfg, 1, 0);
    int32_t tokens[32] = {0}, targets[32] = {0};
    sp_error_clear();
    expect_error(sp_model_backward(m), SP_ERR_USAGE, "no targets");
    tokens[1 * 8 + 2] = 64;
    expect_error(sp_model_forward(m, tokens, targets, 2, 8, NULL), SP_ERR_INPUT, "token id 64 at sequence 1, position 2");
    tokens[1 * 8 + 2] = -3;
    expect_error(sp_model_forward(m, tokens, targets, 2, 8, NULL), SP_ERR_INPUT, "token id -3");
    tokens[1 * 8 + 2] = 5;
    targets[7] = 99;
    expect_error(sp_model_forward(m, tokens, targets, 2, 8, NULL), SP_ERR_INPUT, "target id 99 at sequence 0, position 7");
    targets[7] = 0;
    expect_error(sp_model_forward(m, tokens, targets, 1, 17, NULL), SP_ERR_USAGE, "seq_len = 17");
    expect_error(sp_model_forward(m, tokens, targets, 0, 8, NULL), SP_ERR_USAGE, "batch = 0");
    for (int i = 0; i < 8; i++)
        targets[i] = -1;
    expect_error(sp_model_forward(m, tokens, targets, 1, 8, NULL), SP_ERR_INPUT, "every target");
    assert_int_equal(sp_model_forward(m, tokens, NULL, 1, 8, NULL), SP_OK);
    expect_error(sp_model_backward(m), SP_ERR_USAGE, "no targets");
    assert_null(sp_model_embed_grad(m));
    sp_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_loss_is_ln_vocab), cmocka_unit_test(test_seeded_init_is_deterministic),
        cmocka_unit_test(test_capture_points),        cmocka_unit_test(test_siamese_streams),
        cmocka_unit_test(test_shape_changes),         cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Block skipping (model/skip.c), in double, for every variant of a 4-block tiny model:
 * - a skipped block's output equals its input bit for bit (both streams of siamese), its FFN latent
 *   and named slots read as NULL, and the blocks after it see that input;
 * - turning every skip off again gives the unskipped loss and activations bit for bit;
 * - the backward pass through a skipped block matches a five-point central difference of the loss
 *   along a random direction of every parameter (relative error < 1e-6, the tolerance of
 *   test_model_grad_f64), and the skipped block's parameters get exactly zero gradient;
 * - block_jvp, block_jvp_at, block_vjp and block_apply of a skipped block are the identity (bit for bit);
 * - sp_model_loss_from (layer pruning's probes): from h_0 through every block, and h_L decoded, give
 *   the pass's loss, and blocks l+1.. on h_l the loss with block l skipped, bit for bit; no backward
 *   pass follows it;
 * - a block index outside the model is SP_ERR_USAGE. */
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

#define BATCH 2
#define SEQ 5
#define ROWS (BATCH * SEQ)
#define FD_STEP 1e-4
#define SKIPPED 1 /* the block the gradient and identity checks skip */

typedef struct {
    sp_model *m;
    int32_t tokens[ROWS], targets[ROWS];
} problem;

static void make_problem(problem *p, int variant, uint64_t seed)
{
    sp_config cfg;
    fixture_tiny_config(&cfg, variant, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
    p->m = fixture_model(&cfg, seed, 0.3);
    sp_rng rng;
    sp_rng_seed(&rng, seed + 7);
    fixture_tokens(&rng, ROWS, cfg.vocab_size, p->tokens);
    fixture_tokens(&rng, ROWS, cfg.vocab_size, p->targets);
}

static double loss_of(problem *p)
{
    double loss = NAN;
    assert_int_equal(sp_model_forward(p->m, p->tokens, p->targets, BATCH, SEQ, &loss), SP_OK);
    return loss;
}

static size_t stream_len(const problem *p) { return (size_t)ROWS * (size_t)sp_model_config(p->m)->d_model; }

static void check_forward(problem *p, int variant)
{
    const sp_config *cfg = sp_model_config(p->m);
    const int n_streams = sp_config_n_streams(cfg), L = cfg->n_layers;
    const size_t n = stream_len(p);
    double loss0 = loss_of(p);
    sp_real *h_last = fixture_download(p->m, sp_model_hidden(p->m, L, 0), n);

    for (int l = 0; l < L; l++) {
        assert_int_equal(sp_model_set_block_skip(p->m, l, 1), SP_OK);
        assert_true(sp_model_block_skipped(p->m, l));
        double loss = loss_of(p);
        assert_true(isfinite(loss));
        for (int s = 0; s < n_streams; s++) {
            sp_real *in = fixture_download(p->m, sp_model_hidden(p->m, l, s), n);
            sp_real *out = fixture_download(p->m, sp_model_hidden(p->m, l + 1, s), n);
            if (memcmp(in, out, n * sizeof *in) != 0)
                print_error("%s: block %d stream %d: skipped output differs from its input\n",
                            sp_variant_names[variant], l, s);
            assert_memory_equal(in, out, n * sizeof *in);
            free(in);
            free(out);
        }
        assert_null(sp_model_ffn_latent(p->m, l));
        assert_null(sp_model_slot(p->m, l, "x"));
        assert_int_equal(sp_model_set_block_skip(p->m, l, 0), SP_OK);
        assert_false(sp_model_block_skipped(p->m, l));
    }

    double loss1 = loss_of(p);
    assert_memory_equal(&loss1, &loss0, sizeof loss0);
    sp_real *h_again = fixture_download(p->m, sp_model_hidden(p->m, L, 0), n);
    assert_memory_equal(h_again, h_last, n * sizeof *h_last);
    assert_non_null(sp_model_ffn_latent(p->m, SKIPPED));
    free(h_last);
    free(h_again);
}

/* <grad, dir> of the backward pass with block SKIPPED skipped, against the five-point difference of
 * the loss along dir; the skipped block's own parameters must get exactly zero gradient. */
static void check_backward(problem *p, int variant, sp_rng *rng)
{
    sp_model *m = p->m;
    const int n_params = sp_model_n_params(m);
    assert_int_equal(sp_model_set_block_skip(m, SKIPPED, 1), SP_OK);
    loss_of(p);
    assert_int_equal(sp_model_backward(m), SP_OK);

    sp_real **p0 = calloc((size_t)n_params, sizeof *p0), **dir = calloc((size_t)n_params, sizeof *dir);
    assert_non_null(p0);
    assert_non_null(dir);
    double analytic = 0;
    for (int i = 0; i < n_params; i++) {
        const sp_param_spec *spec = sp_model_param_spec(m, i);
        size_t n = sp_param_numel(spec);
        sp_real *g = fixture_download(m, sp_model_grad(m, i), n);
        if (spec->layer == SKIPPED)
            assert_true(vec_max_abs(n, g) == 0);
        p0[i] = vec_zeros(n);
        sp_model_get_param(m, i, p0[i]);
        dir[i] = vec_random(rng, n, 1.0);
        analytic += vec_dot(n, g, dir[i]);
        free(g);
    }
    double f[4];
    const double steps[4] = {FD_STEP, -FD_STEP, 2 * FD_STEP, -2 * FD_STEP};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < n_params; i++) {
            size_t n = sp_param_numel(sp_model_param_spec(m, i));
            sp_real *x = vec_dup(n, p0[i]);
            for (size_t j = 0; j < n; j++)
                x[j] += (sp_real)(steps[k] * dir[i][j]);
            sp_model_set_param(m, i, x);
            free(x);
        }
        f[k] = loss_of(p);
    }
    double fd = (8 * (f[0] - f[1]) - (f[2] - f[3])) / (12 * FD_STEP);
    double err = fabs(fd - analytic) / fmax(fabs(fd), 1e-12);
    if (err >= 1e-6)
        print_error("%s: directional derivative with block %d skipped: analytic %.12g, fd %.12g\n",
                    sp_variant_names[variant], SKIPPED, analytic, fd);
    assert_true(err < 1e-6);
    for (int i = 0; i < n_params; i++) {
        sp_model_set_param(m, i, p0[i]);
        free(p0[i]);
        free(dir[i]);
    }
    free(p0);
    free(dir);
}

/* jvp, vjp and apply of the skipped block copy their inputs. */
static void check_block_functions(problem *p, sp_rng *rng)
{
    sp_model *m = p->m;
    const sp_backend *be = sp_model_backend(m);
    const int n_streams = sp_config_n_streams(sp_model_config(m));
    const size_t n = stream_len(p);
    loss_of(p); /* block SKIPPED is still skipped */
    sp_real *in[2] = {0}, *out[2] = {0}, *host[2] = {0};
    for (int s = 0; s < n_streams; s++) {
        host[s] = vec_random(rng, n, 1.0);
        in[s] = be->alloc(n * sizeof(sp_real), "test input");
        out[s] = be->alloc(n * sizeof(sp_real), "test output");
        be->upload(in[s], host[s], n * sizeof(sp_real));
    }
    sp_status (*const fns[3])(sp_model *, int, const sp_real *const *, sp_real *const *) = {
        sp_model_block_jvp, sp_model_block_vjp, sp_model_block_apply};
    for (int f = 0; f < 4; f++) {
        /* f = 3: one position (the last) of every sequence, rows [BATCH, d] */
        const size_t len = f < 3 ? n : n / SEQ;
        assert_int_equal(f < 3 ? fns[f](m, SKIPPED, (const sp_real *const *)in, out)
                               : sp_model_block_jvp_at(m, SKIPPED, SEQ - 1, BATCH, (const sp_real *const *)in, out),
                         SP_OK);
        for (int s = 0; s < n_streams; s++) {
            sp_real *got = fixture_download(m, out[s], len);
            assert_memory_equal(got, host[s], len * sizeof(sp_real));
            free(got);
        }
    }
    for (int s = 0; s < n_streams; s++) {
        be->free(in[s]);
        be->free(out[s]);
        free(host[s]);
    }
}

/* The pass's own layer outputs as starting points: the same operations as whole passes. */
static void check_loss_from(problem *p)
{
    const sp_config *cfg = sp_model_config(p->m);
    const int n_streams = sp_config_n_streams(cfg), L = cfg->n_layers;
    const sp_backend *be = sp_model_backend(p->m);
    sp_real *scratch[2] = {NULL, NULL};
    for (int s = 0; s < n_streams; s++)
        scratch[s] = be->alloc(stream_len(p) * sizeof(sp_real), "test scratch");
    for (int l = -1; l < L; l++) { /* l = -1: no block skipped */
        double want = NAN, got = NAN;
        if (l >= 0)
            assert_int_equal(sp_model_set_block_skip(p->m, l, 1), SP_OK);
        want = loss_of(p);
        if (l >= 0)
            assert_int_equal(sp_model_set_block_skip(p->m, l, 0), SP_OK);
        const double base = loss_of(p);
        const sp_real *h[2] = {NULL, NULL};
        for (int s = 0; s < n_streams; s++)
            h[s] = sp_model_hidden(p->m, l < 0 ? 0 : l, s);
        assert_int_equal(sp_model_loss_from(p->m, l + 1, h, scratch, p->targets, &got), SP_OK);
        assert_true(got == want);
        if (l < 0) { /* h_L decoded is the pass itself */
            for (int s = 0; s < n_streams; s++)
                h[s] = sp_model_hidden(p->m, L, s);
            assert_int_equal(sp_model_loss_from(p->m, L, h, scratch, p->targets, &got), SP_OK);
            assert_true(got == base);
        }
        sp_error_clear();
        assert_int_equal(sp_model_backward(p->m), SP_ERR_USAGE);
    }
    sp_error_clear();
    assert_int_equal(sp_model_loss_from(p->m, L + 1, (const sp_real *const[]){NULL, NULL}, scratch, p->targets, NULL),
                     SP_ERR_USAGE);
    for (int s = 0; s < n_streams; s++)
        be->free(scratch[s]);
}

static void test_skip_every_variant(void **state)
{
    (void)state;
    for (int v = 0; v < SP_N_VARIANTS; v++) {
        problem p;
        make_problem(&p, v, 100 + (uint64_t)v);
        sp_rng rng;
        sp_rng_seed(&rng, 200 + (uint64_t)v);
        check_forward(&p, v);
        check_backward(&p, v, &rng);
        check_block_functions(&p, &rng);
        check_loss_from(&p);
        sp_model_free(p.m);
    }
}

static void test_skip_bad_index(void **state)
{
    (void)state;
    problem p;
    make_problem(&p, SP_VARIANT_PRE, 3);
    sp_error_clear();
    assert_int_equal(sp_model_set_block_skip(p.m, 4, 1), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "block 4"));
    sp_error_clear();
    assert_int_equal(sp_model_set_block_skip(p.m, -1, 0), SP_ERR_USAGE);
    sp_error_clear();
    assert_false(sp_model_block_skipped(p.m, 0));
    assert_false(sp_model_block_skipped(p.m, 9));
    sp_model_free(p.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skip_every_variant),
        cmocka_unit_test(test_skip_bad_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* One block as a function of its input streams, in double: sp_model_block_jvp against five-point
 * central differences of sp_model_block_apply, the adjoint identity <u, J v> = <J^T u, v> with
 * sp_model_block_vjp, and the side conditions of the three entry points.
 *
 * Every variant, three option combinations, every block of a 4-block tiny model (span's block 0,
 * mixln's post and pre blocks, siamese's two streams all included); and every block of the tiny
 * configs of the pretrained architectures (tests/support/model_fixture.h: biases, q/k norms,
 * partial, scaled and local RoPE, attention scale and soft-cap, sliding windows, GEGLU, ...).
 *
 * Tolerances (float64):
 * - JVP vs finite differences (step 1e-4, error O(h^4) ~ 1e-16 from truncation, ~1e-12 from
 *   roundoff): normwise relative error < 1e-6;
 * - adjoint identity: |<u, Jv> - <J^T u, v>| < 1e-10 |u| |Jv| (both sides analytic: only
 *   roundoff separates them);
 * - block_apply at the forward pass's own input reproduces the block output to 1e-12 relative
 *   (same ops, same order), and leaves the saved activations bit for bit as they were;
 * - block_vjp leaves every parameter gradient bit for bit as it was;
 * - sp_model_block_jvp_at (k tangents at one position of sequence 0) equals block_jvp of each
 *   tangent placed at that position, read there, to 1e-12 relative, at the first, the last and a
 *   middle position. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support/config_tests.h"
#include "tests/support/vec_util.h"

#define BATCH 2
#define SEQ 5
#define ROWS (BATCH * SEQ)
#define FD_STEP 1e-4

typedef struct {
    sp_model *m;
    const sp_backend *be;
    int n_streams;
    size_t n;                       /* elements of one stream: ROWS * d_model */
    sp_real *dev_in[2], *dev_out[2]; /* backend buffers */
} block_fn;

static void to_dev(block_fn *f, sp_real *const *host)
{
    for (int s = 0; s < f->n_streams; s++)
        f->be->upload(f->dev_in[s], host[s], f->n * sizeof(sp_real));
}

static void from_dev(block_fn *f, sp_real *const *host)
{
    for (int s = 0; s < f->n_streams; s++)
        f->be->download(host[s], f->dev_out[s], f->n * sizeof(sp_real));
}

/* out = block(x + step v) */
static void apply_at(block_fn *f, int l, sp_real *const *x, sp_real *const *v, double step, sp_real *const *out)
{
    sp_real *shifted[2] = {NULL, NULL};
    for (int s = 0; s < f->n_streams; s++) {
        shifted[s] = vec_dup(f->n, x[s]);
        for (size_t i = 0; i < f->n; i++)
            shifted[s][i] += (sp_real)(step * v[s][i]);
    }
    to_dev(f, shifted);
    assert_int_equal(sp_model_block_apply(f->m, l, (const sp_real *const *)f->dev_in, f->dev_out), SP_OK);
    from_dev(f, out);
    for (int s = 0; s < f->n_streams; s++)
        free(shifted[s]);
}

static double dot_streams(const block_fn *f, sp_real *const *a, sp_real *const *b)
{
    double sum = 0;
    for (int s = 0; s < f->n_streams; s++)
        sum += vec_dot(f->n, a[s], b[s]);
    return sum;
}

/* sp_model_block_jvp_at with k tangents at position t of sequence 0 against sp_model_block_jvp of
 * each tangent placed there (zero elsewhere), read at t: both analytic, so only roundoff separates
 * them. The full JVP also shows the positions before t unmoved (causal attention). */
static void check_at(block_fn *f, int l, int t, int k, sp_rng *rng, const char *what)
{
    const int ns = f->n_streams, d = (int)(f->n / ROWS);
    const size_t at_n = (size_t)k * d, E = sizeof(sp_real);
    sp_real *v[2] = {0}, *full[2] = {0}, *rows_in[2] = {0}, *rows_out[2] = {0};
    for (int s = 0; s < ns; s++) {
        v[s] = vec_zeros(f->n);
        full[s] = vec_zeros(f->n);
        rows_in[s] = vec_zeros(at_n);
        rows_out[s] = vec_zeros(at_n);
        vec_fill_normal(rng, at_n, rows_in[s], 1.0);
        f->be->upload(f->dev_in[s], rows_in[s], at_n * E);
    }
    assert_int_equal(sp_model_block_jvp_at(f->m, l, t, k, (const sp_real *const *)f->dev_in, f->dev_out), SP_OK);
    for (int s = 0; s < ns; s++)
        f->be->download(rows_out[s], f->dev_out[s], at_n * E);
    for (int j = 0; j < k; j++) {
        for (int s = 0; s < ns; s++)
            memcpy(v[s] + (size_t)t * d, rows_in[s] + (size_t)j * d, d * E);
        to_dev(f, v);
        assert_int_equal(sp_model_block_jvp(f->m, l, (const sp_real *const *)f->dev_in, f->dev_out), SP_OK);
        from_dev(f, full);
        for (int s = 0; s < ns; s++) {
            const double err = vec_rel_err((size_t)d, rows_out[s] + (size_t)j * d, full[s] + (size_t)t * d);
            if (err >= 1e-12)
                print_error("%s block %d stream %d: JVP at position %d, tangent %d: rel err %.3g\n", what, l, s, t, j,
                            err);
            assert_true(err < 1e-12);
            for (size_t i = 0; i < (size_t)t * d; i++)
                assert_true(full[s][i] == 0);
        }
    }
    for (int s = 0; s < ns; s++) {
        sp_real *all[] = {v[s], full[s], rows_in[s], rows_out[s]};
        for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
            free(all[i]);
    }
}

static void check_block(block_fn *f, int l, sp_rng *rng, const char *what)
{
    const int ns = f->n_streams;
    const size_t n = f->n;
    sp_real *x[2] = {0}, *v[2] = {0}, *u[2] = {0}, *jv[2] = {0}, *jtu[2] = {0}, *fd[2] = {0}, *y[2] = {0},
            *saved[2] = {0}, *plus[2] = {0}, *minus[2] = {0};
    for (int s = 0; s < ns; s++) {
        x[s] = fixture_download(f->m, sp_model_hidden(f->m, l, s), n);
        saved[s] = fixture_download(f->m, sp_model_hidden(f->m, l + 1, s), n);
        v[s] = vec_zeros(n);
        u[s] = vec_zeros(n);
        vec_fill_normal(rng, n, v[s], 1.0);
        vec_fill_normal(rng, n, u[s], 1.0);
        jv[s] = vec_zeros(n);
        jtu[s] = vec_zeros(n);
        fd[s] = vec_zeros(n);
        y[s] = vec_zeros(n);
        plus[s] = vec_zeros(n);
        minus[s] = vec_zeros(n);
    }

    /* apply at the forward point reproduces the block output and leaves the activations alone */
    apply_at(f, l, x, v, 0, y);
    for (int s = 0; s < ns; s++) {
        assert_true(vec_rel_err(n, y[s], saved[s]) < 1e-12);
        sp_real *after = fixture_download(f->m, sp_model_hidden(f->m, l + 1, s), n);
        assert_memory_equal(after, saved[s], n * sizeof(sp_real));
        free(after);
    }

    /* JVP against finite differences */
    to_dev(f, v);
    assert_int_equal(sp_model_block_jvp(f->m, l, (const sp_real *const *)f->dev_in, f->dev_out), SP_OK);
    from_dev(f, jv);
    apply_at(f, l, x, v, FD_STEP, plus);
    apply_at(f, l, x, v, -FD_STEP, minus);
    for (int s = 0; s < ns; s++)
        for (size_t i = 0; i < n; i++)
            fd[s][i] = 8 * (plus[s][i] - minus[s][i]);
    apply_at(f, l, x, v, 2 * FD_STEP, plus);
    apply_at(f, l, x, v, -2 * FD_STEP, minus);
    for (int s = 0; s < ns; s++) {
        for (size_t i = 0; i < n; i++)
            fd[s][i] = (sp_real)((fd[s][i] - (plus[s][i] - minus[s][i])) / (12 * FD_STEP));
        double err = vec_rel_err(n, jv[s], fd[s]);
        if (err >= 1e-6)
            print_error("%s block %d stream %d: JVP vs finite differences rel err %.3g\n", what, l, s, err);
        assert_true(err < 1e-6);
    }

    /* adjoint identity, and block_vjp leaves the parameter gradients alone */
    const size_t n_weights = sp_model_n_weights(f->m);
    sp_real *grads_before = fixture_download(f->m, sp_model_grad(f->m, 0), n_weights);
    to_dev(f, u);
    /* vjp reads dev_in as g_out and writes dev_out as g_in */
    assert_int_equal(sp_model_block_vjp(f->m, l, (const sp_real *const *)f->dev_in, f->dev_out), SP_OK);
    from_dev(f, jtu);
    sp_real *grads_after = fixture_download(f->m, sp_model_grad(f->m, 0), n_weights);
    assert_memory_equal(grads_before, grads_after, n_weights * sizeof(sp_real));
    double lhs = dot_streams(f, u, jv), rhs = dot_streams(f, jtu, v);
    double scale = sqrt(dot_streams(f, u, u) * dot_streams(f, jv, jv));
    if (fabs(lhs - rhs) >= 1e-10 * scale)
        print_error("%s block %d: <u, Jv> = %.15g, <J^T u, v> = %.15g\n", what, l, lhs, rhs);
    assert_true(fabs(lhs - rhs) < 1e-10 * scale);
    assert_true(scale > 0);

    /* the first position, the last, one between; three tangents at once and one */
    check_at(f, l, 0, 3, rng, what);
    check_at(f, l, SEQ - 1, 3, rng, what);
    check_at(f, l, 1 + l % (SEQ - 2), 1, rng, what);

    free(grads_before);
    free(grads_after);
    for (int s = 0; s < ns; s++) {
        sp_real *all[] = {x[s], v[s], u[s], jv[s], jtu[s], fd[s], y[s], saved[s], plus[s], minus[s]};
        for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
            free(all[i]);
    }
}

/* Every block of the model cfg describes, around a forward pass on random tokens. */
static void check_config(const sp_config *cfg, uint64_t seed, const char *what)
{
    block_fn f = {.m = fixture_model(cfg, 77u + seed, 0.3)};
    f.be = sp_model_backend(f.m);
    f.n_streams = sp_config_n_streams(cfg);
    f.n = (size_t)ROWS * (size_t)cfg->d_model;
    for (int s = 0; s < f.n_streams; s++) {
        f.dev_in[s] = f.be->alloc(f.n * sizeof(sp_real), "test tangent in");
        f.dev_out[s] = f.be->alloc(f.n * sizeof(sp_real), "test tangent out");
        assert_non_null(f.dev_in[s]);
        assert_non_null(f.dev_out[s]);
    }
    sp_rng rng;
    sp_rng_seed(&rng, 31u + seed);
    int32_t tokens[ROWS], targets[ROWS];
    fixture_tokens(&rng, ROWS, cfg->vocab_size, tokens);
    fixture_tokens(&rng, ROWS, cfg->vocab_size, targets);
    double loss = 0;
    assert_int_equal(sp_model_forward(f.m, tokens, targets, BATCH, SEQ, &loss), SP_OK);
    assert_int_equal(sp_model_backward(f.m), SP_OK); /* gradients to compare block_vjp against */
    for (int l = 0; l < cfg->n_layers; l++)
        check_block(&f, l, &rng, what);
    for (int s = 0; s < f.n_streams; s++) {
        f.be->free(f.dev_in[s]);
        f.be->free(f.dev_out[s]);
    }
    sp_model_free(f.m);
}

static void check_variant(void **state)
{
    const int variant = (int)(intptr_t)*state;
    const int combos[3][3] = {{SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED},
                              {SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE},
                              {SP_NORM_LAYERNORM, SP_FFN_SWIGLU, SP_POS_ROPE}};
    for (int c = 0; c < 3; c++) {
        sp_config cfg;
        fixture_tiny_config(&cfg, variant, combos[c][0], combos[c][1], combos[c][2]);
        char what[96];
        snprintf(what, sizeof what, "%s/%s/%s/%s", sp_variant_names[variant], sp_norm_names[combos[c][0]],
                 sp_ffn_names[combos[c][1]], sp_pos_names[combos[c][2]]);
        check_config(&cfg, (uint64_t)(variant * 3 + c), what);
    }
}

static void check_pretrained(void **state) { config_pretrained((int)(intptr_t)*state, 100, check_config); }

/* The entry points refuse a missing forward pass and a block outside the model. */
static void test_block_usage_errors(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
    sp_model *m = fixture_model(&cfg, 5, 0);
    sp_real *buf = sp_model_backend(m)->alloc((size_t)ROWS * cfg.d_model * sizeof(sp_real), "test");
    sp_real *const io[1] = {buf};
    sp_error_clear();
    assert_int_equal(sp_model_block_jvp(m, 0, (const sp_real *const *)io, io), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "no forward pass"));
    sp_error_clear();
    int32_t tokens[ROWS] = {0};
    assert_int_equal(sp_model_forward(m, tokens, NULL, BATCH, SEQ, NULL), SP_OK);
    assert_int_equal(sp_model_block_vjp(m, cfg.n_layers, (const sp_real *const *)io, io), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "block 4"));
    sp_error_clear();
    assert_int_equal(sp_model_block_apply(m, -1, (const sp_real *const *)io, io), SP_ERR_USAGE);
    sp_error_clear();
    /* a position the pass did not have, no tangent */
    assert_int_equal(sp_model_block_jvp_at(m, 0, SEQ, 1, (const sp_real *const *)io, io), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "1 tangents at position 5, where the forward pass had 5 positions"));
    sp_error_clear();
    assert_int_equal(sp_model_block_jvp_at(m, 0, 0, 0, (const sp_real *const *)io, io), SP_ERR_USAGE);
    sp_error_clear();
    assert_int_equal(sp_model_block_jvp_at(m, cfg.n_layers, 0, 1, (const sp_real *const *)io, io), SP_ERR_USAGE);
    sp_error_clear();
    sp_model_backend(m)->free(buf);
    sp_model_free(m);
}

int main(void)
{
    struct CMUnitTest tests[CONFIG_N_TESTS + 1];
    config_tests(tests, check_variant, check_pretrained);
    tests[CONFIG_N_TESTS] = (struct CMUnitTest)cmocka_unit_test(test_block_usage_errors);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

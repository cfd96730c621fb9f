/* Exact Hessian-vector products (sp_model_hvp) against five-point central differences of the
 * gradient, in double, for every block of the configurations the gradient check runs (every
 * variant x {layernorm, rmsnorm} x {gelu, swiglu} x {learned, rope}, tied and untied, final norm
 * flipped, peri's embedding norm) and of the tiny pretrained configs (biases, q/k norms, GEGLU,
 * GELU erf, soft-caps, sliding windows, partial and scaled RoPE, ...).
 *
 * Tolerances (float64):
 * - H v against (8 (g(+h) - g(-h)) - (g(+2h) - g(-2h))) / 12h of block l's gradient g along v,
 *   h = 1e-4 on a unit v: truncation ~h^4, roundoff ~1e-16 / h; normwise relative error < 1e-6;
 * - symmetry <u, H v> = <H u, v> to 1e-10 of |u| |H v| (both analytic);
 * - the parameter gradients are left bit for bit as they were. */
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
    int32_t tokens[ROWS], targets[ROWS];
    sp_real *params0; /* host copy of every parameter */
    size_t n_weights;
} problem;

/* Block l's gradient (host, count elements) at params0 + step v on the block's elements. */
static void grad_at(problem *p, size_t offset, size_t count, const sp_real *v, double step, sp_real *g)
{
    sp_real *x = vec_dup(p->n_weights, p->params0);
    for (size_t i = 0; i < count; i++)
        x[offset + i] += (sp_real)(step * v[i]);
    p->be->upload(sp_model_param(p->m, 0), x, p->n_weights * sizeof(sp_real));
    free(x);
    assert_int_equal(sp_model_forward(p->m, p->tokens, p->targets, BATCH, SEQ, NULL), SP_OK);
    assert_int_equal(sp_model_backward(p->m), SP_OK);
    p->be->download(g, sp_model_grad(p->m, 0) + offset, count * sizeof(sp_real));
}

static void hvp_host(problem *p, int l, size_t count, const sp_real *v, sp_real *hv)
{
    sp_real *dv = p->be->alloc(count * sizeof(sp_real), "test v"), *dhv = p->be->alloc(count * sizeof(sp_real), "test hv");
    assert_non_null(dv);
    assert_non_null(dhv);
    p->be->upload(dv, v, count * sizeof(sp_real));
    assert_int_equal(sp_model_hvp(p->m, l, dv, dhv), SP_OK);
    p->be->download(hv, dhv, count * sizeof(sp_real));
    p->be->free(dv);
    p->be->free(dhv);
}

static void check_block(problem *p, int l, sp_rng *rng, const char *what)
{
    size_t offset = 0, count = 0;
    sp_model_block_param_range(p->m, l, &offset, &count);
    assert_true(count > 0);
    sp_real *v = vec_random(rng, count, 1.0 / sqrt((double)count)), *u = vec_random(rng, count, 1.0);
    sp_real *hv = vec_zeros(count), *hu = vec_zeros(count), *fd = vec_zeros(count), *a = vec_zeros(count),
            *b = vec_zeros(count);

    /* at the point itself: the HVP leaves the gradients as the backward pass left them */
    sp_real *g0 = vec_zeros(count), *g_after = vec_zeros(p->n_weights), *g_before = vec_zeros(p->n_weights);
    grad_at(p, offset, count, v, 0, g0);
    p->be->download(g_before, sp_model_grad(p->m, 0), p->n_weights * sizeof(sp_real));
    hvp_host(p, l, count, v, hv);
    hvp_host(p, l, count, u, hu);
    p->be->download(g_after, sp_model_grad(p->m, 0), p->n_weights * sizeof(sp_real));
    assert_memory_equal(g_before, g_after, p->n_weights * sizeof(sp_real));

    grad_at(p, offset, count, v, FD_STEP, a);
    grad_at(p, offset, count, v, -FD_STEP, b);
    for (size_t i = 0; i < count; i++)
        fd[i] = 8 * (a[i] - b[i]);
    grad_at(p, offset, count, v, 2 * FD_STEP, a);
    grad_at(p, offset, count, v, -2 * FD_STEP, b);
    for (size_t i = 0; i < count; i++)
        fd[i] = (sp_real)((fd[i] - (a[i] - b[i])) / (12 * FD_STEP));
    const double err = vec_rel_err(count, hv, fd);
    if (getenv("SP_TEST_VERBOSE"))
        print_message("%s block %d: HVP rel err %.3g\n", what, l, err);
    if (err >= 1e-6)
        print_error("%s block %d: HVP vs differences of gradients rel err %.3g\n", what, l, err);
    assert_true(err < 1e-6);

    const double uhv = vec_dot(count, u, hv), huv = vec_dot(count, hu, v);
    const double scale = sqrt(vec_dot(count, u, u) * vec_dot(count, hv, hv));
    if (fabs(uhv - huv) >= 1e-10 * scale)
        print_error("%s block %d: <u, Hv> = %.15g, <Hu, v> = %.15g\n", what, l, uhv, huv);
    assert_true(fabs(uhv - huv) < 1e-10 * scale);

    sp_real *all[] = {v, u, hv, hu, fd, a, b, g0, g_after, g_before};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        free(all[i]);
}

static void check_config(const sp_config *cfg, uint64_t seed, const char *what)
{
    problem p = {.m = fixture_model(cfg, 1000u + seed, 0.3)};
    p.be = sp_model_backend(p.m);
    p.n_weights = sp_model_n_weights(p.m);
    p.params0 = fixture_download(p.m, sp_model_param(p.m, 0), p.n_weights);
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    fixture_tokens(&rng, ROWS, cfg->vocab_size, p.tokens);
    fixture_tokens(&rng, ROWS, cfg->vocab_size, p.targets);
    p.targets[3] = -1; /* an ignored target */
    for (int l = 0; l < cfg->n_layers; l++)
        check_block(&p, l, &rng, what);
    free(p.params0);
    sp_model_free(p.m);
}

/* The gradient check's configurations. */
static void check_variant(void **state) { config_grad_combos((int)(intptr_t)*state, check_config); }

static void check_pretrained(void **state) { config_pretrained((int)(intptr_t)*state, 200, check_config); }

/* sp_model_hvp refuses a pass without targets and a block outside the model. */
static void test_hvp_usage_errors(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
    sp_model *m = fixture_model(&cfg, 5, 0);
    int32_t tokens[ROWS] = {0};
    assert_int_equal(sp_model_forward(m, tokens, NULL, BATCH, SEQ, NULL), SP_OK);
    sp_error_clear();
    assert_int_equal(sp_model_hvp(m, 0, NULL, NULL), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "no targets"));
    sp_error_clear();
    assert_int_equal(sp_model_hvp(m, cfg.n_layers, NULL, NULL), SP_ERR_USAGE);
    sp_error_clear();
    sp_model_free(m);
}

int main(void)
{
    struct CMUnitTest tests[CONFIG_N_TESTS + 1];
    config_tests(tests, check_variant, check_pretrained);
    tests[CONFIG_N_TESTS] = (struct CMUnitTest)cmocka_unit_test(test_hvp_usage_errors);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

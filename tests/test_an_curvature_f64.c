/* The "curvature" analyzer in double on tiny models (d_model 8, 4 blocks, 2 sequences of 6 tokens).
 *
 * Independent reference: every block's dense Hessian H_ll, built column by column from five-point
 * central differences of the block's gradient (step 1e-4, error ~1e-10 of its largest entry; no
 * Hessian-vector product involved), symmetrized, its eigenvalues by LAPACK (dsyev). Against it:
 * - lambda_max, run with power_tol 1e-13: the eigenvalue of largest magnitude, relative error < 1e-6;
 * - the Hutchinson trace within 4 of its own standard errors of tr(H_ll), and that standard error
 *   within a factor 2 of the exact one for Rademacher probes, sqrt(2 sum_{i != j} H_ij^2 / S);
 *   trace_stderr and trace against the report's own samples;
 * - curvature is opt-in: the default --metrics set leaves it out, naming it selects it. */
#include <lapacke.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzers/driver.h"
#include "tests/support/an_run.h"
#include "tests/support/model_fixture.h"
#include "tests/support/vec_util.h"

extern const sp_analyzer sp_analyzer_curvature;

#define T 6
#define N_SEQS 2
#define SAMPLES 64
#define FD_STEP 1e-4

/* Block l's gradient (host) with its parameters at p0 + step e_col. */
static void grad_shifted(sp_model *m, const an_run *r, size_t offset, size_t n, const sp_real *p0, size_t col,
                         double step, sp_real *g)
{
    const sp_backend *be = sp_model_backend(m);
    sp_real *x = vec_dup(n, p0);
    x[col] += (sp_real)step;
    be->upload(sp_model_param(m, 0) + offset, x, n * sizeof(sp_real));
    free(x);
    assert_int_equal(sp_model_forward(m, r->tokens, r->targets, N_SEQS, T, NULL), SP_OK);
    assert_int_equal(sp_model_backward(m), SP_OK);
    be->download(g, sp_model_grad(m, 0) + offset, n * sizeof(sp_real));
}

/* The dense symmetrized Hessian of block l, n x n row-major, from differences of gradients. */
static double *dense_hessian(sp_model *m, const an_run *r, int l, size_t *n_out)
{
    size_t offset, n;
    sp_model_block_param_range(m, l, &offset, &n);
    sp_real *p0 = fixture_download(m, sp_model_param(m, 0) + offset, n), *g = vec_zeros(n);
    double *h = calloc(n * n, sizeof *h);
    assert_non_null(h);
    const double steps[4] = {FD_STEP, -FD_STEP, 2 * FD_STEP, -2 * FD_STEP}, weights[4] = {8, -8, -1, 1};
    for (size_t col = 0; col < n; col++)
        for (int k = 0; k < 4; k++) {
            grad_shifted(m, r, offset, n, p0, col, steps[k], g);
            for (size_t row = 0; row < n; row++)
                h[row * n + col] += weights[k] * g[row] / (12 * FD_STEP);
        }
    sp_model_backend(m)->upload(sp_model_param(m, 0) + offset, p0, n * sizeof(sp_real));
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            h[i * n + j] = h[j * n + i] = 0.5 * (h[i * n + j] + h[j * n + i]);
    free(p0);
    free(g);
    *n_out = n;
    return h;
}

static void check_model(const sp_config *cfg, uint64_t seed, const char *what)
{
    sp_model *m = fixture_model(cfg, seed, 0.3);
    an_run r;
    an_run_setup(&r, m, N_SEQS, T, N_SEQS, seed + 1);
    r.opts.curv_seqs = N_SEQS;
    r.opts.curv_iters = 5000;
    r.opts.power_tol = 1e-13;
    r.opts.hutchinson_samples = SAMPLES;
    assert_int_equal(an_run_finish(&r, &sp_analyzer_curvature, "curvature.h5"), SP_OK);
    assert_true(an_run_scalar(&r, "curvature", "not_converged") == 0);
    assert_true(an_run_scalar(&r, "curvature", "n_seqs") == N_SEQS);
    sp_report_array lambda = an_run_array(&r, "curvature", "lambda_max");
    sp_report_array trace = an_run_array(&r, "curvature", "trace");
    sp_report_array se = an_run_array(&r, "curvature", "trace_stderr");
    sp_report_array samples = an_run_array(&r, "curvature", "trace_samples");
    sp_report_array n_params = an_run_array(&r, "curvature", "n_params");
    for (int l = 0; l < cfg->n_layers; l++) {
        size_t n;
        double *h = dense_hessian(m, &r, l, &n);
        assert_true(n_params.data[l] == (double)n);
        double exact_trace = 0, off_sq = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                if (i == j)
                    exact_trace += h[i * n + j];
                else
                    off_sq += h[i * n + j] * h[i * n + j];
            }
        double *w = calloc(n, sizeof *w);
        assert_int_equal(LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'U', (lapack_int)n, h, (lapack_int)n, w), 0);
        const double dominant = fabs(w[0]) > fabs(w[n - 1]) ? w[0] : w[n - 1];
        const double err = fabs(lambda.data[l] - dominant) / fabs(dominant);
        if (getenv("SP_TEST_VERBOSE"))
            print_message("%s block %d: lambda %.10g (dense %.10g, rel err %.2g), trace %.6g +- %.2g (exact %.6g)\n",
                          what, l, lambda.data[l], dominant, err, trace.data[l], se.data[l], exact_trace);
        assert_true(err < 1e-6);

        const double *s = samples.data + (size_t)l * SAMPLES;
        double mean = 0, sq = 0;
        for (int i = 0; i < SAMPLES; i++)
            mean += s[i] / SAMPLES;
        for (int i = 0; i < SAMPLES; i++)
            sq += (s[i] - mean) * (s[i] - mean);
        assert_true(fabs(trace.data[l] - mean) <= 1e-12 * fabs(mean));
        assert_true(fabs(se.data[l] - sqrt(sq / (SAMPLES - 1) / SAMPLES)) <= 1e-12 * se.data[l]);
        assert_true(fabs(trace.data[l] - exact_trace) <= 4 * se.data[l]);
        const double exact_se = sqrt(2 * off_sq / SAMPLES);
        assert_true(se.data[l] > 0.5 * exact_se && se.data[l] < 2 * exact_se);
        free(w);
        free(h);
    }
    sp_report_array *all[] = {&lambda, &trace, &se, &samples, &n_params};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        sp_report_array_free(all[i]);
    an_run_free(&r);
    sp_model_free(m);
}

static void test_dense_pre(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
    check_model(&cfg, 11, "pre/layernorm/gelu");
}

static void test_dense_siamese(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_SIAMESE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
    check_model(&cfg, 12, "siamese/rmsnorm/swiglu/rope");
}

static void test_dense_gemma2(void **state)
{
    (void)state;
    sp_config cfg;
    for (int i = 0; i < FIXTURE_N_PRETRAINED; i++)
        if (strcmp(fixture_pretrained_config(i, &cfg), "gemma2") == 0)
            check_model(&cfg, 13, "gemma2");
}

static void test_opt_in(void **state)
{
    (void)state;
    unsigned char selected[64];
    int at = -1;
    for (int i = 0; i < sp_n_analyzers; i++)
        at = sp_analyzers[i] == &sp_analyzer_curvature ? i : at;
    assert_true(at >= 0);
    assert_int_equal(sp_analyze_select("", selected), SP_OK);
    assert_int_equal(selected[at], 0);
    assert_int_equal(selected[0], 1);
    assert_int_equal(sp_analyze_select("similarity,curvature", selected), SP_OK);
    assert_int_equal(selected[at], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_pre),
        cmocka_unit_test(test_dense_siamese),
        cmocka_unit_test(test_dense_gemma2),
        cmocka_unit_test(test_opt_in),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

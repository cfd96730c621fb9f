/* The power-law exponent alpha of the weights analyzer (analyzers/powerlaw.h, analyzers/weights_alpha.h),
 * in double.
 * Against WeightWatcher 0.7.7 itself (fixtures/weightwatcher/ref.json, tools/weightwatcher_ref):
 * - its fit of the ESDs of seeded matrices (Gaussian, Student-t, Pareto, low rank plus noise, tiny
 *   scale, rank-deficient with eigenvalues below its 1e-5 floor, 12 eigenvalues for its small-N fit),
 *   from the same eigenvalues: alpha within 1e-3, xmin the same eigenvalue, D within 1e-6, n_tail equal;
 * - every block matrix of fixtures/hf/llama-f32 through the analyzer (the model read from its
 *   directory; W_Q, W_K, W_V whole, as WeightWatcher sees q_proj, k_proj, v_proj): the same, plus the
 *   summary keys recomputed from the arrays.
 * Closed forms:
 * - values drawn from a Pareto law of known alpha (n = 20000) recover it within 4 standard errors
 *   (alpha - 1) / sqrt(n_tail);
 * - the exact quantiles of a Pareto tail above a body of uniform quantiles: the KS selection picks the
 *   tail's first value as xmin (D_m ~ 1 / (2 (n - m)) grows with every value m left out) and alpha
 *   within 1%;
 * - the pruned KS scan chooses exactly what a plain scan of every candidate chooses (a transcription of
 *   WWFit written here), on heavy-tailed sets of 5 to 3000 values;
 * - no fit (NaN) with fewer than two values above the floor or a small set of equal values; a tail of
 *   equal values wins as WWFit has it (alpha +inf, D 1/2); matrices WeightWatcher leaves out
 *   (min(m, n) < 8), zero and absent ones (W_3 of GELU): NaN, no summary key. */
#include <cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzers/powerlaw.h"
#include "core/rng.h"
#include "io/model_source.h"
#include "tests/support/an_run.h"
#include "tests/support/assert_err.h"
#include "tests/support/json_file.h"
#include "tests/support/model_fixture.h"

extern const sp_analyzer sp_analyzer_weights;

#define REF "fixtures/weightwatcher/ref.json"
#define LLAMA "fixtures/hf/llama-f32"
enum { N_MATRICES = 7 };
static const char *const matrix_names[N_MATRICES] = {"wq", "wk", "wv", "wo", "w1", "w2", "w3"};

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    assert_non_null(v);
    return v->valuedouble;
}

/* A fit against WeightWatcher's numbers for it (an object with alpha, xmin, D, num_pl_spikes). */
static void check_against_ww(const char *what, double alpha, double xmin, double ks_d, double n_tail,
                             const cJSON *ww)
{
    assert_below(fabs(alpha - num(ww, "alpha")), 1e-3, "%s: alpha %.6f, weightwatcher %.6f", what, alpha,
                 num(ww, "alpha"));
    assert_below(fabs(xmin - num(ww, "xmin")) / num(ww, "xmin"), 1e-12, "%s: xmin", what);
    assert_below(fabs(ks_d - num(ww, "D")), 1e-6, "%s: D", what);
    assert_true(n_tail == num(ww, "num_pl_spikes"));
}

static void test_weightwatcher_eigenvalues(void **state)
{
    (void)state;
    cJSON *ref = json_file_read(REF);
    const cJSON *m;
    int n_sets = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(ref, "matrices"))
    {
        const cJSON *evals = cJSON_GetObjectItem(m, "evals"), *e;
        const int n = cJSON_GetArraySize(evals);
        double *x = malloc((size_t)n * sizeof *x);
        int i = 0;
        cJSON_ArrayForEach(e, evals) x[i++] = e->valuedouble;
        sp_powerlaw fit;
        assert_int_equal(sp_powerlaw_fit(n, x, &fit), SP_OK);
        check_against_ww(cJSON_GetObjectItem(m, "name")->valuestring, fit.alpha, fit.xmin, fit.ks_d, fit.n_tail, m);
        free(x);
        n_sets++;
    }
    assert_int_equal(n_sets, 7);
    cJSON_Delete(ref);
}

static void test_weightwatcher_llama(void **state)
{
    (void)state;
    sp_model *model = NULL;
    sp_ckpt_meta meta;
    assert_int_equal(sp_model_source_load(LLAMA, sp_backend_cpu(), &model, &meta), SP_OK);
    an_run r;
    an_run_setup(&r, model, 1, 4, 1, 3);
    assert_int_equal(an_run_finish(&r, &sp_analyzer_weights, "llama_alpha.h5"), SP_OK);
    const char *names[4] = {"alpha", "alpha_xmin", "alpha_ks_d", "alpha_n_tail"};
    sp_report_array arr[4];
    for (int f = 0; f < 4; f++) {
        arr[f] = an_run_array(&r, "weights", names[f]);
        assert_int_equal(arr[f].rank, 2);
        assert_int_equal(arr[f].shape[0], 2);
        assert_int_equal(arr[f].shape[1], N_MATRICES);
        assert_string_equal(arr[f].shape_desc, "[block, matrix]");
    }
    cJSON *ref = json_file_read(REF);
    const cJSON *m;
    int n_checked = 0, n_outside = 0;
    double kind_sum[N_MATRICES] = {0}, sum = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(cJSON_GetObjectItem(ref, "llama-f32"), "matrices"))
    {
        const int block = (int)num(m, "block");
        int kind = 0;
        while (strcmp(matrix_names[kind], cJSON_GetObjectItem(m, "matrix")->valuestring))
            kind++;
        const size_t at = (size_t)block * N_MATRICES + (size_t)kind;
        char what[64];
        snprintf(what, sizeof what, "block %d %s", block, matrix_names[kind]);
        check_against_ww(what, arr[0].data[at], arr[1].data[at], arr[2].data[at], arr[3].data[at], m);
        const double alpha = arr[0].data[at];
        kind_sum[kind] += alpha;
        sum += alpha;
        n_outside += alpha < 2 || alpha > 6;
        n_checked++;
    }
    assert_int_equal(n_checked, 2 * N_MATRICES);
    for (int kind = 0; kind < N_MATRICES; kind++) {
        char key[32];
        snprintf(key, sizeof key, "alpha_%s_mean", matrix_names[kind]);
        assert_below(fabs(an_run_scalar(&r, "weights", key) - kind_sum[kind] / 2), 1e-12, "%s", key);
    }
    assert_below(fabs(an_run_scalar(&r, "weights", "alpha_mean") - sum / n_checked), 1e-12, "alpha_mean");
    assert_true(an_run_scalar(&r, "weights", "alpha_outside_2_6_fraction") == (double)n_outside / n_checked);
    assert_true(an_run_scalar(&r, "weights", "n_alpha_fits") == n_checked);
    assert_true(n_outside > 0 && n_outside < n_checked); /* the fixture has both kinds */
    cJSON_Delete(ref);
    for (int f = 0; f < 4; f++)
        sp_report_array_free(&arr[f]);
    an_run_free(&r);
    sp_model_free(model);
    sp_ckpt_meta_free(&meta);
}

/* x_min (1 - u)^(-1 / (alpha - 1)): a draw from the density (alpha - 1) / x_min (x / x_min)^-alpha. */
static double pareto_quantile(double u, double alpha, double x_min) { return x_min * pow(1 - u, -1 / (alpha - 1)); }

static void test_pareto_draws(void **state)
{
    (void)state;
    enum { N = 20000 };
    const double alphas[3] = {1.8, 2.5, 4.0};
    double *x = malloc(N * sizeof *x);
    sp_rng rng;
    sp_rng_seed(&rng, 20261127);
    for (int c = 0; c < 3; c++) {
        for (int i = 0; i < N; i++)
            x[i] = pareto_quantile(sp_rng_uniform(&rng), alphas[c], 0.5);
        sp_powerlaw fit;
        assert_int_equal(sp_powerlaw_fit(N, x, &fit), SP_OK);
        const double std_error = (fit.alpha - 1) / sqrt(fit.n_tail);
        assert_below(fabs(fit.alpha - alphas[c]), 4 * std_error, "alpha %.1f from %d draws: %.4f (tail %d)",
                     alphas[c], N, fit.alpha, fit.n_tail);
        assert_true(fit.xmin >= 0.5);
    }
    free(x);
}

static void test_mixture_xmin(void **state)
{
    (void)state;
    enum { BODY = 3000, TAIL = 5000 };
    const double alpha = 3.0, tail_min = 1.0;
    double *x = malloc((BODY + TAIL) * sizeof *x);
    for (int i = 0; i < TAIL; i++)
        x[i] = pareto_quantile((i + 0.5) / TAIL, alpha, tail_min);
    for (int i = 0; i < BODY; i++)
        x[TAIL + i] = 0.05 + 0.45 * (i + 0.5) / BODY; /* uniform quantiles on [0.05, 0.5) */
    sp_powerlaw fit;
    assert_int_equal(sp_powerlaw_fit(BODY + TAIL, x, &fit), SP_OK);
    assert_true(fit.xmin == pareto_quantile(0.5 / TAIL, alpha, tail_min));
    assert_int_equal(fit.n_tail, TAIL);
    assert_below(fabs(fit.alpha - alpha) / alpha, 1e-2, "alpha of the tail");
    assert_below(fit.ks_d, 2.0 / TAIL, "D of a perfect tail");
    free(x);
}

/* WWFit, plainly: every candidate scanned whole (fit_power_law_standard, fit_powerlaw_smallN, and
 * the constructor's argmin of D). */
static int cmp_ascending(const void *p, const void *q)
{
    const double a = *(const double *)p, b = *(const double *)q;
    return (a > b) - (a < b);
}

static void plain_fit(int n, const double *values, double *alpha, double *xmin, double *ks_d)
{
    double *x = malloc((size_t)n * sizeof *x);
    int N = 0;
    for (int i = 0; i < n; i++)
        if (values[i] > 1e-5)
            x[N++] = values[i];
    qsort(x, (size_t)N, sizeof *x, cmp_ascending);
    const int small = N < 20;
    double best = INFINITY;
    for (int relaxed = 0; relaxed < 2 && best == INFINITY; relaxed++) /* small-N: none kept, the whole set */
    for (int i = 0; i < (relaxed ? 1 : N - 1); i++) {
        const int tail = N - i;
        double s = 0;
        for (int j = i; j < N; j++)
            s += log(x[j] / x[i]);
        if (small && ((tail < 8 && !relaxed) || s <= 1e-12))
            continue;
        const double a = small ? 1 + (tail - 1) / s : 1 + tail / s;
        double d = 1;
        if (a > 1) {
            d = 0;
            for (int j = i; j < N; j++)
                d = fmax(d, fabs(1 - pow(x[j] / x[i], 1 - a) - (double)(j - i) / tail));
        }
        if (d < best) {
            best = d;
            *alpha = a;
            *xmin = x[i];
            *ks_d = d;
        }
    }
    assert_true(best < INFINITY); /* the sets below always have a candidate */
    free(x);
}

static void test_pruned_scan_is_exact(void **state)
{
    (void)state;
    const int sizes[7] = {5, 9, 19, 20, 64, 500, 3000};
    sp_rng rng;
    sp_rng_seed(&rng, 7);
    for (int c = 0; c < 7; c++)
        for (int rep = 0; rep < 4; rep++) {
            const int n = sizes[c];
            double *x = malloc((size_t)n * sizeof *x);
            for (int i = 0; i < n; i++) { /* a body and a heavy tail of random weight */
                const double z = sp_rng_normal(&rng);
                x[i] = sp_rng_uniform(&rng) < 0.3 * rep / 3 ? pareto_quantile(sp_rng_uniform(&rng), 2 + rep, 3)
                                                               : z * z + 1e-3;
            }
            double alpha = NAN, xmin = NAN, ks_d = NAN;
            plain_fit(n, x, &alpha, &xmin, &ks_d);
            sp_powerlaw fit;
            assert_int_equal(sp_powerlaw_fit(n, x, &fit), SP_OK);
            assert_true(fit.xmin == xmin);
            assert_below(fabs(fit.alpha - alpha), 1e-9 * alpha, "alpha, %d values", n);
            assert_below(fabs(fit.ks_d - ks_d), 1e-9, "D, %d values", n);
            free(x);
        }
}

static void test_degenerate(void **state)
{
    (void)state;
    sp_powerlaw fit;
    const double floor_only[3] = {0, 1e-5, -1};
    assert_int_equal(sp_powerlaw_fit(3, floor_only, &fit), SP_OK);
    assert_true(isnan(fit.alpha) && isnan(fit.xmin) && isnan(fit.ks_d) && fit.n_tail == 0);
    const double one[2] = {1e-9, 4};
    assert_int_equal(sp_powerlaw_fit(2, one, &fit), SP_OK);
    assert_true(isnan(fit.alpha) && fit.n_tail == 0);
    const double equal[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2};
    assert_int_equal(sp_powerlaw_fit(9, equal, &fit), SP_OK);
    assert_true(isnan(fit.alpha) && fit.n_tail == 0);
    const double equal_tail[24] = {1, 1.5, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
    assert_int_equal(sp_powerlaw_fit(24, equal_tail, &fit), SP_OK); /* WWFit: alpha +inf, D (n - 1) / n, n = 2 */
    assert_true(isinf(fit.alpha) && fit.xmin == 3 && fit.ks_d == 0.5 && fit.n_tail == 21);
}

/* The tiny fixture model (d_model 8, 2 query heads of 4, one kv head: W_K, W_V are [4, 8]) with GELU
 * and a zero W_2 in block 1. */
static void test_left_out_matrices(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
    sp_model *m = fixture_model(&cfg, 4, 0);
    const int w2 = sp_model_find_param(m, "blocks/1/ffn/w2");
    sp_real *zero = calloc(sp_param_numel(sp_model_param_spec(m, w2)), sizeof *zero);
    sp_model_set_param(m, w2, zero);
    free(zero);
    an_run r;
    an_run_setup(&r, m, 1, 4, 1, 5);
    assert_int_equal(an_run_finish(&r, &sp_analyzer_weights, "left_out.h5"), SP_OK);
    sp_report_array alpha = an_run_array(&r, "weights", "alpha");
    for (int l = 0; l < cfg.n_layers; l++)
        for (int kind = 0; kind < N_MATRICES; kind++) {
            const double v = alpha.data[l * N_MATRICES + kind];
            const int left_out = kind == 1 || kind == 2 || kind == 6 || (kind == 5 && l == 1);
            assert_true(left_out ? isnan(v) : v >= 1);
        }
    sp_report_array_free(&alpha);
    assert_false(an_run_has_scalar(&r, "weights", "alpha_wk_mean"));
    assert_false(an_run_has_scalar(&r, "weights", "alpha_w3_mean"));
    assert_true(an_run_has_scalar(&r, "weights", "alpha_w2_mean"));
    assert_true(an_run_scalar(&r, "weights", "n_alpha_fits") == 4 * cfg.n_layers - 1);
    an_run_free(&r);
    sp_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weightwatcher_eigenvalues),
        cmocka_unit_test(test_weightwatcher_llama),
        cmocka_unit_test(test_pareto_draws),
        cmocka_unit_test(test_mixture_xmin),
        cmocka_unit_test(test_pruned_scan_is_exact),
        cmocka_unit_test(test_degenerate),
        cmocka_unit_test(test_left_out_matrices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

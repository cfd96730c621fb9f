/* The "embed_spectrum" analyzer, in double.
 * Known answer: 2100 embedding rows (three chunks of the analyzer's 1024) made of +-a_j e_j pairs
 * plus a constant offset on every feature: the centered covariance is diag(sum over the rows of
 * feature j of a_j^2 / (V - 1)) whatever the offset, so the eigenvalues, their ratios to the median
 * and lambda_max / lambda_min are known exactly (1e-12 relative).
 * Independent reference: random embeddings and an untied head against the covariance (two-pass
 * mean, then centered products) or the uncentered second moment computed here in double, and their
 * eigenvalues by LAPACK dsyev (1e-10 relative to lambda_max). A tied model has no head arrays. */
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

#include "tests/support/an_run.h"
#include "tests/support/assert_err.h"
#include "tests/support/model_fixture.h"
#include "tests/support/vec_util.h"

extern const sp_analyzer sp_analyzer_embed_spectrum;

static double rel(double got, double want) { return fabs(got - want) / fmax(fabs(want), 1e-300); }

static int cmp_desc(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return (p < q) - (p > q);
}

static void test_known_diagonal_spectrum(void **state)
{
    (void)state;
    enum { V = 2100, D = 8 };
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
    cfg.vocab_size = V;
    cfg.tie_embeddings = 1;
    sp_model *m = fixture_model(&cfg, 1, 0);
    const double amp[D] = {1, 2, 0.5, 3, 0.25, 1.5, 0.75, 4};
    double expect[D] = {0};
    sp_real *e = vec_zeros((size_t)V * D);
    for (int r = 0; r < V; r++) {
        for (int j = 0; j < D; j++)
            e[r * D + j] = 3; /* the offset, removed by centering */
        if (r < V - 4) {      /* the last 4 rows are the offset alone */
            int j = (r / 2) % D;
            e[r * D + j] += (sp_real)((r % 2 ? -1 : 1) * amp[j]);
            expect[j] += amp[j] * amp[j] / (V - 1);
        }
    }
    sp_model_set_param(m, sp_model_find_param(m, "embed/tok"), e);
    free(e);
    qsort(expect, D, sizeof *expect, cmp_desc);
    const double median = 0.5 * (expect[3] + expect[4]);

    an_run r;
    an_run_setup(&r, m, 1, 4, 1, 2);
    assert_int_equal(an_run_finish(&r, &sp_analyzer_embed_spectrum, "diag.h5"), SP_OK);
    sp_report_array w = an_run_array(&r, "embed_spectrum", "tok_eigvals");
    sp_report_array ratio = an_run_array(&r, "embed_spectrum", "tok_eigvals_over_median");
    sp_report_array rank = an_run_array(&r, "embed_spectrum", "normalized_rank");
    assert_int_equal(w.shape[0], D);
    for (int i = 0; i < D; i++) {
        assert_below(rel(w.data[i], expect[i]), 1e-12, "eigenvalue %d", i);
        assert_below(rel(ratio.data[i], expect[i] / median), 1e-12, "ratio %d", i);
        assert_true(rank.data[i] == (double)(i + 1) / D);
    }
    assert_below(rel(an_run_scalar(&r, "embed_spectrum", "tok_max_over_min"), expect[0] / expect[D - 1]), 1e-12, "max/min");
    assert_below(rel(an_run_scalar(&r, "embed_spectrum", "tok_median"), median), 1e-12, "median");
    assert_true(an_run_scalar(&r, "embed_spectrum", "tied") == 1);
    assert_true(an_run_scalar(&r, "embed_spectrum", "centered") == 1);
    assert_false(an_run_has_scalar(&r, "embed_spectrum", "head_max_over_min"));
    sp_report_array_free(&w);
    sp_report_array_free(&ratio);
    sp_report_array_free(&rank);
    an_run_free(&r);
    sp_model_free(m);
}

/* Eigenvalues (descending) of the covariance (centered) or second moment of e [V, d]. */
static void reference_spectrum(int V, int d, const sp_real *e, int centered, double *w)
{
    double *mean = calloc((size_t)d, sizeof *mean), *c = calloc((size_t)d * d, sizeof *c);
    for (int r = 0; centered && r < V; r++)
        for (int j = 0; j < d; j++)
            mean[j] += e[r * d + j] / V;
    for (int r = 0; r < V; r++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                c[i * d + j] += (e[r * d + i] - mean[i]) * (e[r * d + j] - mean[j]) / (centered ? V - 1 : V);
    assert_int_equal(LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'U', d, c, d, w), 0);
    qsort(w, (size_t)d, sizeof *w, cmp_desc);
    free(mean);
    free(c);
}

static void check_random(int centered)
{
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_SIAMESE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
    cfg.vocab_size = 1500;
    sp_model *m = fixture_model(&cfg, 3, 0.3);
    const int V = cfg.vocab_size, d = cfg.d_model;
    const char *names[2] = {"embed/tok", "head/w"}, *prefixes[2] = {"tok", "head"};
    sp_rng rng;
    sp_rng_seed(&rng, 4);
    an_run r;
    an_run_setup(&r, m, 1, 4, 1, 5);
    r.opts.embed_uncentered = !centered;
    double want[2][8];
    for (int p = 0; p < 2; p++) {
        sp_real *e = vec_zeros((size_t)V * d);
        for (int i = 0; i < V * d; i++) /* anisotropic, with a mean */
            e[i] = (sp_real)((1 + (i % d)) * 0.3 * sp_rng_normal(&rng) + 0.5 * (i % d == 2));
        sp_model_set_param(m, sp_model_find_param(m, names[p]), e);
        reference_spectrum(V, d, e, centered, want[p]);
        free(e);
    }
    assert_int_equal(an_run_finish(&r, &sp_analyzer_embed_spectrum, "random.h5"), SP_OK);
    for (int p = 0; p < 2; p++) {
        char name[64];
        snprintf(name, sizeof name, "%s_eigvals", prefixes[p]);
        sp_report_array w = an_run_array(&r, "embed_spectrum", name);
        for (int i = 0; i < d; i++)
            assert_below(fabs(w.data[i] - want[p][i]) / want[p][0], 1e-10, "%s eigenvalue %d", name, i);
        snprintf(name, sizeof name, "%s_max_over_min", prefixes[p]);
        assert_below(rel(an_run_scalar(&r, "embed_spectrum", name), want[p][0] / want[p][d - 1]), 1e-9, "%s", name);
        sp_report_array_free(&w);
    }
    assert_true(an_run_scalar(&r, "embed_spectrum", "tied") == 0);
    assert_true(an_run_scalar(&r, "embed_spectrum", "centered") == centered);
    an_run_free(&r);
    sp_model_free(m);
}

static void test_random_centered(void **state)
{
    (void)state;
    check_random(1);
}

static void test_random_uncentered(void **state)
{
    (void)state;
    check_random(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_diagonal_spectrum),
        cmocka_unit_test(test_random_centered),
        cmocka_unit_test(test_random_uncentered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

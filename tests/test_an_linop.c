/* The subspace iteration of analyzers/linop.h (k = 1: the power iteration) on explicit host
 * matrices:
 * - known answers: a diagonal matrix gives its largest |entries| in order; the zero map gives
 *   zeros at once; a rank-2 map asked for 4 values gives its 2 and then zeros;
 * - an independent reference: a random dense matrix against LAPACK's singular values (dgesdd);
 * - the stop rule: iterations counted, max_iters respected, a loose tolerance stopping earlier than
 *   a tight one; a map returning NaN is SP_ERR_NUMERIC, a bad k SP_ERR_INTERNAL;
 * - a warm start at the top singular vector stops at the second product and returns that vector.
 * Tolerances: with tol 1e-13 and well separated values (ratio <= 0.8 between neighbours, so the
 * error shrinks by 0.64 per iteration), estimates agree with the exact values to 1e-9 relative. */
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

#include "analyzers/linop.h"
#include "core/rng.h"
#include "tests/support/assert_err.h"

typedef struct {
    int n;
    double *a; /* row-major n x n */
    int poison;
} host_matrix;

static sp_status mat_apply(void *ctx, int k, const double *x, double *y)
{
    host_matrix *m = ctx;
    for (int j = 0; j < k; j++)
        for (int r = 0; r < m->n; r++) {
            double s = 0;
            for (int c = 0; c < m->n; c++)
                s += m->a[r * m->n + c] * x[j * m->n + c];
            y[j * m->n + r] = m->poison ? NAN : s;
        }
    return SP_OK;
}

static sp_status mat_apply_t(void *ctx, int k, const double *y, double *x)
{
    host_matrix *m = ctx;
    for (int j = 0; j < k; j++)
        for (int c = 0; c < m->n; c++) {
            double s = 0;
            for (int r = 0; r < m->n; r++)
                s += m->a[r * m->n + c] * y[j * m->n + r];
            x[j * m->n + c] = s;
        }
    return SP_OK;
}

static sp_linop linop_of(host_matrix *m) { return (sp_linop){m->n, 8, m, mat_apply, mat_apply_t}; }

static host_matrix matrix_new(int n)
{
    host_matrix m = {n, calloc((size_t)n * (size_t)n, sizeof(double)), 0};
    assert_non_null(m.a);
    return m;
}

/* diag(d_i) with d_i = +-0.8^i, shuffled along the diagonal. */
static void test_diagonal(void **state)
{
    (void)state;
    enum { N = 40 };
    host_matrix m = matrix_new(N);
    int perm[N];
    for (int i = 0; i < N; i++)
        perm[i] = (i * 17) % N; /* 17 is coprime with 40 */
    for (int i = 0; i < N; i++)
        m.a[perm[i] * N + perm[i]] = (i % 2 ? -1 : 1) * 3 * pow(0.8, i);
    sp_linop op = linop_of(&m);
    double sigma[5];
    sp_linop_stats stats;
    assert_int_equal(sp_linop_top_singvals(&op, 1, 2000, 1e-13, 1, sigma, &stats), SP_OK);
    assert_true(stats.converged);
    assert_below(fabs(sigma[0] - 3) / 3, 1e-9, "power iteration");
    assert_int_equal(sp_linop_top_singvals(&op, 5, 2000, 1e-13, 2, sigma, &stats), SP_OK);
    assert_true(stats.converged);
    for (int i = 0; i < 5; i++)
        assert_below(fabs(sigma[i] - 3 * pow(0.8, i)) / (3 * pow(0.8, i)), 1e-9, "sigma %d", i);
    free(m.a);
}

/* A random 30 x 30 matrix against LAPACK. */
static void test_random_dense_vs_lapack(void **state)
{
    (void)state;
    enum { N = 30, K = 4 };
    host_matrix m = matrix_new(N);
    sp_rng rng;
    sp_rng_seed(&rng, 42);
    for (int i = 0; i < N * N; i++)
        m.a[i] = sp_rng_normal(&rng);
    double copy[N * N], s[N], sigma[K];
    memcpy(copy, m.a, sizeof copy);
    assert_int_equal(LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', N, N, copy, N, s, NULL, N, NULL, N), 0);
    sp_linop op = linop_of(&m);
    sp_linop_stats stats;
    assert_int_equal(sp_linop_top_singvals(&op, K, 20000, 1e-14, 3, sigma, &stats), SP_OK);
    for (int i = 0; i < K; i++)
        assert_below(fabs(sigma[i] - s[i]) / s[i], 1e-8, "sigma %d (%d iterations)", i, stats.iters);
    assert_int_equal(sp_linop_top_singvals(&op, 1, 20000, 1e-14, 4, sigma, &stats), SP_OK);
    assert_below(fabs(sigma[0] - s[0]) / s[0], 1e-8, "power iteration (%d iterations)", stats.iters);
    free(m.a);
}

static void test_zero_and_low_rank(void **state)
{
    (void)state;
    enum { N = 12 };
    host_matrix m = matrix_new(N);
    sp_linop op = linop_of(&m);
    double sigma[4];
    sp_linop_stats stats;
    assert_int_equal(sp_linop_top_singvals(&op, 3, 50, 1e-10, 1, sigma, &stats), SP_OK);
    assert_true(stats.converged);
    assert_int_equal(stats.iters, 1);
    for (int i = 0; i < 3; i++)
        assert_true(sigma[i] == 0);

    /* 2 u1 v1^T + 0.5 u2 v2^T with orthonormal u's and v's (coordinate vectors) */
    m.a[3 * N + 7] = 2;
    m.a[5 * N + 1] = 0.5;
    assert_int_equal(sp_linop_top_singvals(&op, 4, 100, 1e-12, 1, sigma, &stats), SP_OK);
    assert_true(stats.converged);
    assert_below(fabs(sigma[0] - 2), 1e-12, "sigma 1");
    assert_below(fabs(sigma[1] - 0.5), 1e-12, "sigma 2");
    assert_below(sigma[2] + sigma[3], 1e-12, "sigma 3, 4");
    free(m.a);
}

static void test_stop_rule_and_errors(void **state)
{
    (void)state;
    enum { N = 20 };
    host_matrix m = matrix_new(N);
    for (int i = 0; i < N; i++)
        m.a[i * N + i] = 1 - 0.02 * i; /* small gaps: slow convergence */
    sp_linop op = linop_of(&m);
    double sigma[2];
    sp_linop_stats loose, tight, capped;
    assert_int_equal(sp_linop_top_singvals(&op, 1, 100000, 1e-3, 5, sigma, &loose), SP_OK);
    assert_int_equal(sp_linop_top_singvals(&op, 1, 100000, 1e-10, 5, sigma, &tight), SP_OK);
    assert_true(loose.converged && tight.converged);
    assert_true(loose.iters < tight.iters);
    assert_int_equal(sp_linop_top_singvals(&op, 1, 3, 1e-10, 5, sigma, &capped), SP_OK);
    assert_false(capped.converged);
    assert_int_equal(capped.iters, 3);
    assert_true(sigma[0] <= 1 + 1e-12 && sigma[0] > 0.5); /* Ritz values approach from below */

    sp_error_clear();
    assert_int_equal(sp_linop_top_singvals(&op, 9, 10, 1e-6, 5, sigma, &capped), SP_ERR_INTERNAL); /* max_k 8 */
    sp_error_clear();
    m.poison = 1;
    assert_int_equal(sp_linop_top_singvals(&op, 2, 10, 1e-6, 5, sigma, &capped), SP_ERR_NUMERIC);
    assert_non_null(strstr(sp_error_message(), "non-finite"));
    sp_error_clear();
    free(m.a);
}

/* A warm start at the top singular vector settles at the second product, and comes back as it. */
static void test_warm_start(void **state)
{
    (void)state;
    enum { N = 10 };
    host_matrix m = matrix_new(N);
    for (int i = 0; i < N; i++)
        m.a[i * N + i] = 1 + 0.01 * i; /* small gaps: a random start would need many iterations */
    sp_linop op = linop_of(&m);
    double v[N] = {0}, sigma[1];
    v[N - 1] = 5; /* any scale: the start is normalized */
    sp_linop_stats stats;
    assert_int_equal(sp_linop_refine_singvals(&op, 1, 100, 1e-12, 1, v, sigma, &stats), SP_OK);
    assert_true(stats.converged);
    assert_int_equal(stats.iters, 2);
    assert_below(fabs(sigma[0] - 1.09), 1e-15, "sigma");
    assert_below(fabs(fabs(v[N - 1]) - 1), 1e-15, "final vector");
    sp_linop_stats cold;
    assert_int_equal(sp_linop_top_singvals(&op, 1, 100000, 1e-12, 1, sigma, &cold), SP_OK);
    assert_true(cold.iters > 10 * stats.iters);
    free(m.a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diagonal),
        cmocka_unit_test(test_random_dense_vs_lapack),
        cmocka_unit_test(test_zero_and_low_rank),
        cmocka_unit_test(test_stop_rule_and_errors),
        cmocka_unit_test(test_warm_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

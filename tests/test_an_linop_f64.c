/* The block Lanczos iteration of analyzers/linop.h on explicit host matrices, through the CPU
 * backend (whose memory is host memory), in double: the vectors are sp_real, and the tolerances
 * below need float64 vectors.
 * - known answers: a diagonal matrix gives its largest |entries| in order; the zero map gives
 *   zeros at once; a rank-2 map asked for 4 values gives its 2 and then zeros;
 * - an independent reference: a random dense matrix against LAPACK's singular values (dgesdd);
 * - the stop rule: iterations counted, max_iters respected, a loose tolerance stopping earlier than
 *   a tight one; a map returning NaN is SP_ERR_NUMERIC, a bad k SP_ERR_INTERNAL;
 * - a warm start at the top singular vector stops at the second product and returns that vector,
 *   where a random start needs more than five times as many;
 * - bases that fill up (24 blocks) restart from the Ritz vectors and still converge, on a spectrum
 *   with gaps of 0.2%, in far fewer products than the power iteration would take;
 * - the segmented layout of vector blocks: 3 segments give what 1 segment gives, and vectors past k
 *   (NaN here) take no part.
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
#include "kernels/backend.h"
#include "core/rng.h"
#include "tests/support/assert_err.h"

/* A host matrix acting on vector blocks of n_segments segments (the layout of linop.h). */
typedef struct {
    int n, n_segments, max_k;
    double *a; /* row-major n x n */
    int poison;
} host_matrix;

/* Element e of vector j in a block. */
static size_t at(const host_matrix *m, int j, int e)
{
    const int seg_len = m->n / m->n_segments;
    return ((size_t)(e / seg_len) * (size_t)m->max_k + (size_t)j) * (size_t)seg_len + (size_t)(e % seg_len);
}

static sp_status mat_apply(void *ctx, int k, const sp_real *x, sp_real *y)
{
    host_matrix *m = ctx;
    for (int j = 0; j < k; j++)
        for (int r = 0; r < m->n; r++) {
            double s = 0;
            for (int c = 0; c < m->n; c++)
                s += m->a[r * m->n + c] * x[at(m, j, c)];
            y[at(m, j, r)] = m->poison ? NAN : s;
        }
    return SP_OK;
}

static sp_status mat_apply_t(void *ctx, int k, const sp_real *y, sp_real *x)
{
    host_matrix *m = ctx;
    for (int j = 0; j < k; j++)
        for (int c = 0; c < m->n; c++) {
            double s = 0;
            for (int r = 0; r < m->n; r++)
                s += m->a[r * m->n + c] * y[at(m, j, r)];
            x[at(m, j, c)] = s;
        }
    return SP_OK;
}

static sp_linop linop_of(host_matrix *m)
{
    return (sp_linop){.be = sp_backend_cpu(), .n_segments = m->n_segments, .seg_len = m->n / m->n_segments,
                      .max_k = m->max_k, .ctx = m, .apply = mat_apply, .apply_t = mat_apply_t};
}

static host_matrix matrix_new(int n)
{
    host_matrix m = {n, 1, 8, calloc((size_t)n * (size_t)n, sizeof(double)), 0};
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
    enum { N = 60 };
    host_matrix m = matrix_new(N);
    for (int i = 0; i < N; i++)
        m.a[i * N + i] = 1 + 0.01 * i; /* small gaps: a random start needs many iterations */
    sp_linop op = linop_of(&m);
    sp_real v[8 * N] = {0}; /* a block of max_k = 8 vectors */
    double sigma[1];
    v[N - 1] = 5; /* any scale: the start is normalized */
    sp_linop_stats stats;
    assert_int_equal(sp_linop_refine_singvals(&op, 1, 100, 1e-12, 1, v, sigma, &stats), SP_OK);
    assert_true(stats.converged);
    assert_int_equal(stats.iters, 2);
    assert_below(fabs(sigma[0] - 1.59), 1e-15, "sigma");
    assert_below(fabs(fabs(v[N - 1]) - 1), 1e-15, "final vector");
    sp_linop_stats cold;
    assert_int_equal(sp_linop_top_singvals(&op, 1, 100000, 1e-12, 1, sigma, &cold), SP_OK);
    assert_true(cold.iters > 5 * stats.iters);
    free(m.a);
}

/* Krylov bases fill up and the iteration restarts from its Ritz vectors: a 300 x 300 diagonal
 * with gaps of 0.2% between neighbouring values (the power iteration would need thousands of
 * products to settle at 1e-10) still converges to the exact values. */
static void test_restarts(void **state)
{
    (void)state;
    enum { N = 300, K = 2 };
    host_matrix m = matrix_new(N);
    for (int i = 0; i < N; i++)
        m.a[i * N + i] = 1 - 0.002 * i;
    sp_linop op = linop_of(&m);
    double sigma[K];
    sp_linop_stats stats;
    assert_int_equal(sp_linop_top_singvals(&op, K, 5000, 1e-10, 9, sigma, &stats), SP_OK);
    assert_true(stats.converged);
    assert_true(stats.iters > 24 && stats.iters < 500); /* past one cycle of 24 blocks; far below power iteration */
    for (int i = 0; i < K; i++)
        assert_below(fabs(sigma[i] - (1 - 0.002 * i)), 1e-8, "sigma %d", i);
    free(m.a);
}

/* The same random 30 x 30 matrix through blocks of 1 and of 3 segments: the same draws in the same
 * element order, so the same estimates up to rounding; a warm start whose unused vectors are NaN. */
static void test_segments(void **state)
{
    (void)state;
    enum { N = 30, K = 3, MAX_K = 5 };
    host_matrix m = matrix_new(N);
    m.max_k = MAX_K;
    sp_rng rng;
    sp_rng_seed(&rng, 7);
    for (int i = 0; i < N * N; i++)
        m.a[i] = sp_rng_normal(&rng);
    double copy[N * N], s[N], one[K], three[K];
    memcpy(copy, m.a, sizeof copy);
    assert_int_equal(LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', N, N, copy, N, s, NULL, N, NULL, N), 0);
    sp_linop_stats stats1, stats3;
    sp_linop op = linop_of(&m);
    assert_int_equal(sp_linop_top_singvals(&op, K, 20000, 1e-14, 3, one, &stats1), SP_OK);
    m.n_segments = 3;
    op = linop_of(&m);
    assert_int_equal(sp_linop_len(&op), N);
    assert_int_equal(sp_linop_top_singvals(&op, K, 20000, 1e-14, 3, three, &stats3), SP_OK);
    assert_true(stats1.converged && stats3.converged);
    for (int i = 0; i < K; i++) {
        assert_below(fabs(three[i] - s[i]) / s[i], 1e-8, "3 segments, sigma %d", i);
        assert_below(fabs(three[i] - one[i]) / one[i], 1e-9, "3 vs 1 segments, sigma %d", i);
    }

    /* start: coordinate vectors e_0, e_1 in segments 0 and 2; vectors 2..4 NaN */
    sp_real *v = sp_linop_alloc_block(&op, "test block");
    assert_non_null(v);
    for (int j = 2; j < MAX_K; j++)
        for (int e = 0; e < N; e++)
            v[at(&m, j, e)] = NAN;
    v[at(&m, 0, 0)] = 1;
    v[at(&m, 1, N - 1)] = 1;
    double two[2];
    assert_int_equal(sp_linop_refine_singvals(&op, 2, 20000, 1e-14, 4, v, two, &stats3), SP_OK);
    for (int i = 0; i < 2; i++)
        assert_below(fabs(two[i] - s[i]) / s[i], 1e-8, "warm start, sigma %d", i);
    for (int i = 0; i < 2; i++) /* V comes back orthonormal */
        for (int j = 0; j < 2; j++) {
            double dot = 0;
            for (int e = 0; e < N; e++)
                dot += v[at(&m, i, e)] * v[at(&m, j, e)];
            assert_below(fabs(dot - (i == j)), 1e-12, "V^T V [%d, %d]", i, j);
        }
    assert_true(isnan(v[at(&m, 2, 0)]) && isnan(v[at(&m, MAX_K - 1, N - 1)])); /* untouched */
    sp_backend_cpu()->free(v);
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
        cmocka_unit_test(test_restarts),
        cmocka_unit_test(test_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

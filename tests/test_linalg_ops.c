/* tests/test_linalg_ops.c: the CPU backend's fp64 ops for the analyzers (kernels/backend.h: copy_rows,
 * mem_stats, to_f64, gemm_f64, sym_eigvals, singvals) against closed forms and naive loops. Built in
 * the float32 build, so to_f64 really widens. Everything goes through alloc/upload/download, as a
 * caller of the table would; tests/test_cuda_ops.c holds the CUDA backend to this one.
 *
 * Tolerances: LAPACK's eigen and singular values are backward stable, so each value is within a
 * small multiple of n * eps * ||A|| of the exact one: SPECTRAL_TOL 1e-12 relative to the largest
 * (about 100 times that bound at these sizes). gemm_f64 against the naive loop: sums in another
 * order, GEMM_TOL 1e-13 relative. to_f64 is exact. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "tests/support/assert_err.h"
#include "tests/support/spectral_matrices.h"
#include "tests/support/vec_util.h"

#define SPECTRAL_TOL 1e-12
#define GEMM_TOL 1e-13

static const sp_backend *be;

static int setup(void **state)
{
    (void)state;
    be = sp_backend_cpu();
    return 0;
}

/* ---- host <-> backend ---- */
static void *be_copy(const void *host, size_t bytes)
{
    void *p = be->alloc(bytes, "test array");
    assert_non_null(p);
    be->upload(p, host, bytes);
    return p;
}

static double *host_doubles(size_t n)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    assert_non_null(x);
    return x;
}

/* The op on `count` host matrices packed in `a` (left unchanged); the values come back in a new
 * host array of count * n_values. */
static double *eigvals_of(int n, int count, const double *a, sp_status *st)
{
    const size_t nn = (size_t)n * n;
    double *a_be = be_copy(a, (size_t)count * nn * sizeof *a), *w_be = be->alloc((size_t)count * n * sizeof(double), "w");
    assert_non_null(w_be);
    *st = be->sym_eigvals(n, count, a_be, w_be);
    double *w = host_doubles((size_t)count * n);
    be->download(w, w_be, (size_t)count * n * sizeof *w);
    be->free(a_be);
    be->free(w_be);
    return w;
}

static double *singvals_of(int m, int n, int count, const double *a, sp_status *st)
{
    const size_t mn = (size_t)m * n, k = (size_t)(m < n ? m : n);
    double *a_be = be_copy(a, (size_t)count * mn * sizeof *a), *s_be = be->alloc((size_t)count * k * sizeof(double), "s");
    assert_non_null(s_be);
    *st = be->singvals(m, n, count, a_be, s_be);
    double *s = host_doubles((size_t)count * k);
    be->download(s, s_be, (size_t)count * k * sizeof *s);
    be->free(a_be);
    be->free(s_be);
    return s;
}


/* got against the exact values, descending, within SPECTRAL_TOL of the largest */
static void assert_spectrum(size_t n, const double *got, const double *exact, const char *what)
{
    assert_true(spm_is_descending(n, got));
    assert_below(spm_max_abs_diff(n, got, exact) / spm_max_abs(n, exact), SPECTRAL_TOL, "%s", what);
}

static int by_descending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* n distinct values in [lo, hi), descending */
static double *random_values(sp_rng *rng, int n, double lo, double hi)
{
    double *v = host_doubles((size_t)n);
    for (int i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * sp_rng_uniform(rng);
    qsort(v, (size_t)n, sizeof *v, by_descending);
    return v;
}

/* ---- sym_eigvals ---- */
static void test_eigvals_toeplitz(void **state)
{
    (void)state;
    const int n = 57;
    double *a = spm_toeplitz_2_1(n), *exact = spm_toeplitz_2_1_eigvals(n);
    sp_status st;
    double *w = eigvals_of(n, 1, a, &st);
    assert_int_equal(st, SP_OK);
    assert_spectrum((size_t)n, w, exact, "tridiagonal (2, -1) Toeplitz against 2 - 2 cos(j pi / (n + 1))");
    free(a);
    free(exact);
    free(w);
}

static void test_eigvals_rotated_diagonal(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 41);
    const int n = 40;
    double *eig = random_values(&rng, n, -3, 5); /* both signs: the order is by value, not magnitude */
    double *a = spm_symmetric_with_eigvals(&rng, n, eig);
    sp_status st;
    double *w = eigvals_of(n, 1, a, &st);
    assert_int_equal(st, SP_OK);
    assert_spectrum((size_t)n, w, eig, "Q diag(eig) Q^T");
    free(eig);
    free(a);
    free(w);
}

/* Three different matrices in one call: each lands in its own slot. */
static void test_eigvals_batch(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 42);
    const int n = 31, count = 3;
    const size_t nn = (size_t)n * n;
    double *exact = host_doubles((size_t)count * n), *a = host_doubles((size_t)count * nn);
    double *toeplitz = spm_toeplitz_2_1(n), *toeplitz_eig = spm_toeplitz_2_1_eigvals(n);
    double *eig1 = random_values(&rng, n, -1, 1), *eig2 = random_values(&rng, n, 10, 20);
    double *m1 = spm_symmetric_with_eigvals(&rng, n, eig1), *m2 = spm_symmetric_with_eigvals(&rng, n, eig2);
    const double *mats[] = {m1, toeplitz, m2}, *eigs[] = {eig1, toeplitz_eig, eig2};
    for (int i = 0; i < count; i++) {
        memcpy(a + i * nn, mats[i], nn * sizeof *a);
        memcpy(exact + (size_t)i * n, eigs[i], (size_t)n * sizeof *exact);
    }
    sp_status st;
    double *w = eigvals_of(n, count, a, &st);
    assert_int_equal(st, SP_OK);
    for (int i = 0; i < count; i++)
        assert_spectrum((size_t)n, w + (size_t)i * n, exact + (size_t)i * n, "batched matrix");

    /* a NaN in matrix 1 of 2: SP_ERR_NUMERIC naming that matrix */
    a[nn + 5] = a[nn + 5 * n] = NAN;
    sp_error_clear();
    free(w);
    w = eigvals_of(n, 2, a, &st);
    assert_int_equal(st, SP_ERR_NUMERIC);
    assert_non_null(strstr(sp_error_message(), "matrix 1 of 2"));
    sp_error_clear();

    double *all[] = {exact, a, toeplitz, toeplitz_eig, eig1, eig2, m1, m2, w};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        free(all[i]);
}

/* ---- singvals ---- */
static void check_singvals(int m, int n, uint64_t seed)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    const int count = 2, k = m < n ? m : n;
    const size_t mn = (size_t)m * n;
    double *a = host_doubles((size_t)count * mn), *exact = host_doubles((size_t)count * k);
    for (int i = 0; i < count; i++) {
        double *s = random_values(&rng, k, 0.1 + i, 3 + 4 * i), *one = spm_with_singvals(&rng, m, n, s);
        memcpy(a + i * mn, one, mn * sizeof *a);
        memcpy(exact + (size_t)i * k, s, (size_t)k * sizeof *s);
        free(s);
        free(one);
    }
    sp_status st;
    double *s = singvals_of(m, n, count, a, &st);
    assert_int_equal(st, SP_OK);
    for (int i = 0; i < count; i++)
        assert_spectrum((size_t)k, s + (size_t)i * k, exact + (size_t)i * k, "U diag(s) V^T");
    free(a);
    free(exact);
    free(s);
}

static void test_singvals(void **state)
{
    (void)state;
    check_singvals(23, 37, 43); /* wide */
    check_singvals(37, 23, 44); /* tall */
}

/* ---- to_f64 ---- */
static void test_to_f64(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 45);
    const size_t n = 1003;
    sp_real *x = vec_random(&rng, n, 3.0);
    double *y0 = host_doubles(n), *got = host_doubles(n);
    for (size_t i = 0; i < n; i++)
        y0[i] = sp_rng_normal(&rng) * 1e-3; /* not representable in float: widening must not round it */
    sp_real *x_be = be_copy(x, n * sizeof *x);
    double *y_be = be_copy(y0, n * sizeof *y0);
    be->to_f64(n, x_be, y_be, 1);
    be->download(got, y_be, n * sizeof *got);
    for (size_t i = 0; i < n; i++)
        if (got[i] != y0[i] + (double)x[i])
            fail_msg("to_f64 accumulate, element %zu: %.17g, expected %.17g", i, got[i], y0[i] + (double)x[i]);
    be->to_f64(n, x_be, y_be, 0);
    be->download(got, y_be, n * sizeof *got);
    for (size_t i = 0; i < n; i++)
        if (got[i] != (double)x[i])
            fail_msg("to_f64 overwrite, element %zu: %.17g, expected %.17g", i, got[i], (double)x[i]);
    be->free(x_be);
    be->free(y_be);
    free(x);
    free(y0);
    free(got);
}

/* ---- gemm_f64 ---- */
static void check_gemm_f64(sp_rng *rng, int trans_a, int trans_b, double beta)
{
    const int m = 13, n = 11, k = 17;
    const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k, b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    const int lda = a_cols + 2, ldb = b_cols + 3, ldc = n + 1; /* padded, to catch an ld mix-up */
    const size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb, nc = (size_t)m * ldc;
    double *a = host_doubles(na), *b = host_doubles(nb), *c = host_doubles(nc), *expect = host_doubles(nc);
    for (size_t i = 0; i < na; i++)
        a[i] = sp_rng_normal(rng);
    for (size_t i = 0; i < nb; i++)
        b[i] = sp_rng_normal(rng);
    for (size_t i = 0; i < nc; i++)
        c[i] = expect[i] = sp_rng_normal(rng);
    const double alpha = 0.7;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double sum = 0;
            for (int l = 0; l < k; l++)
                sum += (trans_a ? a[(size_t)l * lda + i] : a[(size_t)i * lda + l]) *
                       (trans_b ? b[(size_t)j * ldb + l] : b[(size_t)l * ldb + j]);
            expect[(size_t)i * ldc + j] = alpha * sum + beta * c[(size_t)i * ldc + j];
            if (beta == 0)
                c[(size_t)i * ldc + j] = NAN; /* beta = 0 overwrites, NaN included */
        }
    double *a_be = be_copy(a, na * sizeof *a), *b_be = be_copy(b, nb * sizeof *b), *c_be = be_copy(c, nc * sizeof *c);
    be->gemm_f64(trans_a, trans_b, m, n, k, alpha, a_be, lda, b_be, ldb, beta, c_be, ldc);
    be->download(c, c_be, nc * sizeof *c);
    /* the padding column is compared too: it must be left alone */
    assert_below(spm_max_abs_diff(nc, c, expect) / spm_max_abs(nc, expect), GEMM_TOL, "gemm_f64 trans %d %d beta %g",
                 trans_a, trans_b, beta);
    be->free(a_be);
    be->free(b_be);
    be->free(c_be);
    free(a);
    free(b);
    free(c);
    free(expect);
}

static void test_gemm_f64(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 46);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm_f64(&rng, ta, tb, 0.0);
            check_gemm_f64(&rng, ta, tb, -0.5);
        }
}

/* ---- copy_rows ---- */
static void test_copy_rows(void **state)
{
    (void)state;
    enum { ROWS = 7, SRC_PITCH = 40, DST_PITCH = 27, ROW_BYTES = 19 };
    unsigned char src[ROWS * SRC_PITCH], dst[ROWS * DST_PITCH], expect[ROWS * DST_PITCH];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 7 + 1);
    memset(expect, 0xA5, sizeof expect); /* the gaps between rows must keep this */
    for (int r = 0; r < ROWS; r++)
        memcpy(expect + r * DST_PITCH, src + r * SRC_PITCH, ROW_BYTES);
    unsigned char *src_be = be_copy(src, sizeof src), *dst_be = be->alloc(sizeof dst, "dst");
    assert_non_null(dst_be);
    memset(dst, 0xA5, sizeof dst);
    be->upload(dst_be, dst, sizeof dst);
    be->copy_rows(dst_be, DST_PITCH, src_be, SRC_PITCH, ROW_BYTES, ROWS);
    be->download(dst, dst_be, sizeof dst);
    assert_memory_equal(dst, expect, sizeof dst);
    be->free(src_be);
    be->free(dst_be);
}

/* ---- mem_stats ---- */
static void test_mem_stats(void **state)
{
    (void)state;
    size_t in_use0, peak0, in_use, peak;
    be->mem_reset_peak();
    be->mem_stats(&in_use0, &peak0);
    assert_int_equal(peak0, in_use0); /* reset: the peak is what is held now */

    void *a = be->alloc(1000, "a"), *b = be->alloc(3000, "b");
    assert_non_null(a);
    assert_non_null(b);
    be->mem_stats(&in_use, &peak);
    assert_int_equal(in_use, in_use0 + 4000);
    assert_int_equal(peak, in_use0 + 4000);
    be->free(b);
    be->mem_stats(&in_use, &peak);
    assert_int_equal(in_use, in_use0 + 1000); /* free lowers in_use only */
    assert_int_equal(peak, in_use0 + 4000);
    void *c = be->alloc(500, "c");
    assert_non_null(c);
    be->mem_stats(&in_use, &peak);
    assert_int_equal(in_use, in_use0 + 1500);
    assert_int_equal(peak, in_use0 + 4000); /* below the earlier peak */
    be->mem_reset_peak();
    be->mem_stats(&in_use, &peak);
    assert_int_equal(peak, in_use0 + 1500);
    be->free(a);
    be->free(c);
    be->mem_stats(&in_use, &peak);
    assert_int_equal(in_use, in_use0);
    assert_int_equal(peak, in_use0 + 1500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eigvals_toeplitz), cmocka_unit_test(test_eigvals_rotated_diagonal),
        cmocka_unit_test(test_eigvals_batch),    cmocka_unit_test(test_singvals),
        cmocka_unit_test(test_to_f64),           cmocka_unit_test(test_gemm_f64),
        cmocka_unit_test(test_copy_rows),        cmocka_unit_test(test_mem_stats),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

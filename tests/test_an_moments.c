/* The analyzers' streaming building blocks on the CPU backend: row statistics taken from the norm
 * ops (analyzers/rowops.h) against plain loops, and column moments and cross-products accumulated
 * batch by batch over more rows than one partial sum holds, with many flushes into the backend fp64
 * totals (analyzers/moments.h), against a naive fp64 computation in double, on data whose mean
 * dwarfs its spread (what the shift is for): the raw totals and the host centering after a download,
 * the centered cross-product and covariance formed on the backend, and the batched path of the
 * spectra (contiguous covariances, one be->sym_eigvals) against LAPACK on host copies one matrix at
 * a time. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "analyzers/linalg.h"
#include "analyzers/moments.h"
#include "support/assert_err.h"
#include "support/vec_util.h"

static sp_real *to_backend(const sp_backend *be, size_t n, const sp_real *host)
{
    sp_real *x = be->alloc(n * sizeof *x, "test");
    assert_non_null(x);
    be->upload(x, host, n * sizeof *x);
    return x;
}

static void test_rowops(void **state)
{
    (void)state;
    const sp_backend *be = sp_backend_cpu();
    enum { ROWS = 7, DIM = 9 };
    sp_rng rng;
    sp_rng_seed(&rng, 3);
    sp_real *host = vec_random(&rng, ROWS * DIM, 2.0);
    for (int j = 0; j < DIM; j++) {
        host[2 * DIM + j] = 0;              /* a zero row */
        host[4 * DIM + j] += (sp_real)5.0;  /* a row far from zero mean */
    }
    sp_real *x = to_backend(be, ROWS * DIM, host);
    sp_rowops ro;
    assert_int_equal(sp_rowops_init(&ro, be, ROWS, DIM + 3), SP_OK);

    double sq[ROWS], mean[ROWS], var[ROWS];
    assert_int_equal(sp_rowops_sqnorms(&ro, ROWS, DIM, x, sq), SP_OK);
    assert_int_equal(sp_rowops_moments(&ro, ROWS, DIM, x, mean, var), SP_OK);
    for (int r = 0; r < ROWS; r++) {
        double s = 0, m = 0, v = 0;
        for (int j = 0; j < DIM; j++) {
            s += (double)host[r * DIM + j] * host[r * DIM + j];
            m += host[r * DIM + j];
        }
        m /= DIM;
        for (int j = 0; j < DIM; j++)
            v += (host[r * DIM + j] - m) * (host[r * DIM + j] - m);
        v /= DIM;
        assert_below(fabs(sq[r] - s), 1e-6 * (s + 1e-30), "squared norm of row %d", r);
        assert_below(fabs(mean[r] - m), 1e-6 * (fabs(m) + 1), "mean of row %d", r);
        assert_below(fabs(var[r] - v), 1e-6 * (v + 1e-30), "variance of row %d", r);
    }
    assert_true(sq[2] == 0 && var[2] == 0);

    /* unit rows: x / ||x||, a zero row stays zero and reports norm 0 */
    sp_real *unit = be->alloc(ROWS * DIM * sizeof *unit, "test");
    double usq[ROWS];
    assert_int_equal(sp_rowops_unit(&ro, ROWS, DIM, x, unit, usq), SP_OK);
    sp_real got[ROWS * DIM];
    be->download(got, unit, sizeof got);
    for (int r = 0; r < ROWS; r++) {
        assert_below(fabs(usq[r] - sq[r]), 1e-6 * (sq[r] + 1e-30), "unit: squared norm of row %d", r);
        for (int j = 0; j < DIM; j++) {
            double want = sq[r] > 0 ? host[r * DIM + j] / sqrt(sq[r]) : 0;
            assert_below(fabs(got[r * DIM + j] - want), 1e-6, "unit row %d, column %d", r, j);
        }
    }

    /* rows minus a vector */
    sp_real vec_host[DIM];
    for (int j = 0; j < DIM; j++)
        vec_host[j] = (sp_real)(j - 4);
    sp_real *vec = to_backend(be, DIM, vec_host);
    sp_rowops_sub_vec(&ro, ROWS, DIM, x, vec, unit);
    be->download(got, unit, sizeof got);
    for (int e = 0; e < ROWS * DIM; e++)
        assert_true(got[e] == host[e] - vec_host[e % DIM]);

    be->free(vec);
    be->free(unit);
    be->free(x);
    free(host);
    sp_rowops_free(&ro);
}

/* Two arrays a [n, DA] and b [n, DB] with column means near 1000 and unit spread, correlated. */
enum { N = 9001, DA = 5, DB = 3, MAX_BATCH = 700 };

static void make_data(sp_real *a, sp_real *b)
{
    sp_rng rng;
    sp_rng_seed(&rng, 17);
    for (int t = 0; t < N; t++) {
        for (int j = 0; j < DA; j++)
            a[t * DA + j] = (sp_real)(1000 + 10 * j + sp_rng_normal(&rng));
        for (int j = 0; j < DB; j++)
            b[t * DB + j] = (sp_real)(a[t * DA + j] - 1000 + 0.5 * sp_rng_normal(&rng) - 200);
    }
}

/* sum_t (x_t - mean_x)(y_t - mean_y)^T in fp64, two passes. */
static void reference(const sp_real *x, int dx, const sp_real *y, int dy, double *out)
{
    double mx[DA] = {0}, my[DA] = {0};
    for (int t = 0; t < N; t++) {
        for (int i = 0; i < dx; i++)
            mx[i] += x[t * dx + i] / (double)N;
        for (int j = 0; j < dy; j++)
            my[j] += y[t * dy + j] / (double)N;
    }
    for (int i = 0; i < dx; i++)
        for (int j = 0; j < dy; j++) {
            double s = 0;
            for (int t = 0; t < N; t++)
                s += (x[t * dx + i] - mx[i]) * (y[t * dy + j] - my[j]);
            out[i * dy + j] = s;
        }
}

static double max_rel(int n, const double *got, const double *want)
{
    double err = 0, scale = 0;
    for (int i = 0; i < n; i++) {
        err = fmax(err, fabs(got[i] - want[i]));
        scale = fmax(scale, fabs(want[i]));
    }
    return err / scale;
}

/* Non-finite rows must not be mistaken for zero rows (a diverged model would then look collapsed or
 * healthy): their squared norms come out NaN or Inf, never 0. */
static void test_rowops_nonfinite(void **state)
{
    (void)state;
    const sp_backend *be = sp_backend_cpu();
    enum { ROWS = 3, DIM = 4 };
    sp_real host[ROWS * DIM] = {1, 2, 3, 4, 1, (sp_real)NAN, 3, 4, 1, (sp_real)INFINITY, 3, 4};
    sp_real *x = to_backend(be, ROWS * DIM, host);
    sp_real *unit = be->alloc(ROWS * DIM * sizeof *unit, "test");
    sp_rowops ro;
    assert_int_equal(sp_rowops_init(&ro, be, ROWS, DIM), SP_OK);
    double sq[ROWS], usq[ROWS];
    assert_int_equal(sp_rowops_sqnorms(&ro, ROWS, DIM, x, sq), SP_OK);
    assert_int_equal(sp_rowops_unit(&ro, ROWS, DIM, x, unit, usq), SP_OK);
    assert_below(fabs(sq[0] - 30.0) / 30.0, 1e-6, "finite row squared norm");
    assert_true(isnan(sq[1]) && isnan(usq[1]));
    assert_true(isinf(sq[2]) && isinf(usq[2]));
    sp_rowops_free(&ro);
    be->free(unit);
    be->free(x);
}

/* sum_t (x_t - shift)(y_t - shift_y)^T in fp64: the totals the accumulator holds. */
static void reference_totals(const sp_real *x, int dx, const double *sx, const sp_real *y, int dy, const double *sy,
                             double *out)
{
    for (int i = 0; i < dx; i++)
        for (int j = 0; j < dy; j++) {
            double s = 0;
            for (int t = 0; t < N; t++)
                s += (x[t * dx + i] - sx[i]) * (y[t * dy + j] - sy[j]);
            out[i * dy + j] = s;
        }
}

static void test_streamed_moments(void **state)
{
    (void)state;
    const sp_backend *be = sp_backend_cpu();
    sp_real *a = vec_zeros(N * DA), *b = vec_zeros(N * DB);
    make_data(a, b);
    sp_real *a_dev = to_backend(be, N * DA, a), *b_dev = to_backend(be, N * DB, b);
    sp_rowops ro;
    assert_int_equal(sp_rowops_init(&ro, be, MAX_BATCH, DA), SP_OK);
    sp_mom_cols ca, cb;
    sp_mom_cross aa, ab;
    assert_int_equal(sp_mom_cols_init(&ca, &ro, DA), SP_OK);
    assert_int_equal(sp_mom_cols_init(&cb, &ro, DB), SP_OK);
    sp_real *product = be->alloc(DA * (DA > DB ? DA : DB) * sizeof(sp_real), "test"); /* shared by both */
    assert_int_equal(sp_mom_cross_init(&aa, be, DA, DA, product), SP_OK);
    assert_int_equal(sp_mom_cross_init(&ab, be, DA, DB, product), SP_OK);
    sp_real *sa = be->alloc(MAX_BATCH * DA * sizeof(sp_real), "test"), *sb = be->alloc(MAX_BATCH * DB * sizeof(sp_real), "test");

    /* uneven batches, more rows in all than one partial column sum holds */
    int t0 = 0, step = 1, batches = 0;
    while (t0 < N) {
        int rows = N - t0 < step ? N - t0 : step;
        assert_int_equal(sp_mom_cols_add(&ca, a_dev + (size_t)t0 * DA, rows, sa), SP_OK);
        assert_int_equal(sp_mom_cols_add(&cb, b_dev + (size_t)t0 * DB, rows, sb), SP_OK);
        assert_int_equal(sp_mom_cross_add(&aa, sa, sa, rows), SP_OK);
        assert_int_equal(sp_mom_cross_add(&ab, sa, sb, rows), SP_OK);
        batches++;
        t0 += rows;
        step = step * 3 % MAX_BATCH + 1;
    }
    assert_true(N > SP_MOMENTS_FLUSH_ROWS && batches > 10);
    assert_int_equal(sp_mom_cols_flush(&ca), SP_OK);
    assert_int_equal(sp_mom_cols_flush(&cb), SP_OK);
    assert_int_equal(ca.n, N);

    /* the fp64 totals, downloaded, then centered on the host (what cka does) */
    double got[DA * DA], want[DA * DA];
    sp_mom_cross_download(&aa, got);
    reference_totals(a, DA, ca.shift_host, a, DA, ca.shift_host, want);
    assert_below(max_rel(DA * DA, got, want), 1e-5, "A^T A totals");
    sp_mom_centered_host(got, &ca, &ca, got);
    reference(a, DA, a, DA, want);
    assert_below(max_rel(DA * DA, got, want), 1e-5, "centered A^T A on the host");
    sp_mom_cross_download(&ab, got);
    reference_totals(a, DA, ca.shift_host, b, DB, cb.shift_host, want);
    assert_below(max_rel(DA * DB, got, want), 1e-5, "A^T B totals");

    /* centered on the backend, in place: the centered cross-product and the covariance */
    assert_int_equal(sp_mom_cross_center(&ab, &ca, &cb, 1.0), SP_OK);
    be->download(got, ab.total, DA * DB * sizeof *got);
    reference(a, DA, b, DB, want);
    assert_below(max_rel(DA * DB, got, want), 1e-5, "centered A^T B on the backend");
    assert_int_equal(sp_mom_cross_center(&aa, &ca, &ca, 1.0 / (N - 1)), SP_OK);
    be->download(got, aa.total, DA * DA * sizeof *got);
    reference(a, DA, a, DA, want);
    for (int i = 0; i < DA * DA; i++)
        want[i] /= N - 1;
    assert_below(max_rel(DA * DA, got, want), 1e-5, "covariance of A on the backend");
    /* a centered accumulator takes no more rows */
    assert_int_equal(sp_mom_cross_add(&aa, sa, sa, 1), SP_ERR_INTERNAL);

    double mean[DA];
    sp_mom_cols_mean(&ca, mean);
    for (int j = 0; j < DA; j++) {
        double m = 0;
        for (int t = 0; t < N; t++)
            m += a[t * DA + j];
        assert_below(fabs(mean[j] - m / N), 1e-9 * 1000, "mean of column %d", j);
    }

    be->free(sa);
    be->free(sb);
    be->free(product);
    be->free(a_dev);
    be->free(b_dev);
    sp_mom_cols_free(&ca);
    sp_mom_cols_free(&cb);
    sp_mom_cross_free(&aa);
    sp_mom_cross_free(&ab);
    sp_rowops_free(&ro);
    free(a);
    free(b);
}

/* The spectra path: COUNT covariances in one contiguous batch, decomposed by one be->sym_eigvals
 * call, against host copies of the same covariances decomposed one at a time by LAPACK (the same
 * dsyevd per matrix: bit-identical), and the covariances against the naive fp64 ones. */
static void test_batched_covariance_eigvals(void **state)
{
    (void)state;
    enum { COUNT = 3, DIM = DA, ROWS = 900 };
    const sp_backend *be = sp_backend_cpu();
    sp_real *x[COUNT], *x_dev[COUNT];
    sp_rng rng;
    sp_rng_seed(&rng, 23);
    for (int c = 0; c < COUNT; c++) {
        x[c] = vec_zeros((size_t)ROWS * DIM);
        for (int t = 0; t < ROWS; t++)
            for (int j = 0; j < DIM; j++) /* unequal variances, correlated columns, a large mean */
                x[c][t * DIM + j] = (sp_real)(500 + (1 + c + j) * sp_rng_normal(&rng) + (j ? 0.5 * x[c][t * DIM] : 0));
        x_dev[c] = to_backend(be, (size_t)ROWS * DIM, x[c]);
    }
    sp_rowops ro;
    assert_int_equal(sp_rowops_init(&ro, be, MAX_BATCH, DIM), SP_OK);
    sp_mom_cols cols[COUNT];
    sp_mom_batch batch;
    assert_int_equal(sp_mom_batch_init(&batch, be, COUNT, DIM), SP_OK);
    sp_real *shifted = be->alloc(MAX_BATCH * DIM * sizeof(sp_real), "test");
    for (int c = 0; c < COUNT; c++) {
        assert_int_equal(sp_mom_cols_init(&cols[c], &ro, DIM), SP_OK);
        for (int t0 = 0; t0 < ROWS; t0 += 250) {
            int rows = ROWS - t0 < 250 ? ROWS - t0 : 250;
            assert_int_equal(sp_mom_cols_add(&cols[c], x_dev[c] + (size_t)t0 * DIM, rows, shifted), SP_OK);
            assert_int_equal(sp_mom_cross_add(&batch.cross[c], shifted, shifted, rows), SP_OK);
        }
    }
    assert_int_equal(sp_mom_batch_covariances(&batch, cols, "test"), SP_OK);
    double host[COUNT][DIM * DIM], one[COUNT][DIM], batched[COUNT * DIM];
    be->download(host, batch.totals, sizeof host);
    for (int c = 0; c < COUNT; c++) {
        /* a batch computes the upper triangle (what sym_eigvals reads): mirrored here to compare */
        for (int i = 0; i < DIM; i++)
            for (int j = i + 1; j < DIM; j++)
                host[c][j * DIM + i] = host[c][i * DIM + j];
        double mean[DIM] = {0}, want[DIM * DIM];
        for (int t = 0; t < ROWS; t++)
            for (int j = 0; j < DIM; j++)
                mean[j] += x[c][t * DIM + j] / (double)ROWS;
        for (int i = 0; i < DIM; i++)
            for (int j = 0; j < DIM; j++) {
                double s = 0;
                for (int t = 0; t < ROWS; t++)
                    s += (x[c][t * DIM + i] - mean[i]) * (x[c][t * DIM + j] - mean[j]);
                want[i * DIM + j] = s / (ROWS - 1);
            }
        assert_below(max_rel(DIM * DIM, host[c], want), 1e-5, "covariance %d", c);
        assert_int_equal(sp_linalg_sym_eigvals(DIM, host[c], one[c]), SP_OK);
    }
    assert_int_equal(sp_mom_batch_eigvals(&batch, batched), SP_OK);
    for (int c = 0; c < COUNT; c++)
        for (int i = 0; i < DIM; i++) {
            assert_true(batched[c * DIM + i] == one[c][i]);
            assert_true(i == 0 || batched[c * DIM + i] <= batched[c * DIM + i - 1]); /* descending */
        }
    sp_mom_batch_free(&batch);

    /* fewer than 2 rows: no covariance */
    assert_int_equal(sp_mom_batch_init(&batch, be, 1, DIM), SP_OK);
    sp_mom_cols_free(&cols[0]);
    assert_int_equal(sp_mom_cols_init(&cols[0], &ro, DIM), SP_OK);
    assert_int_equal(sp_mom_cols_add(&cols[0], x_dev[0], 1, shifted), SP_OK);
    assert_int_equal(sp_mom_batch_covariances(&batch, cols, "test"), SP_ERR_INPUT);
    sp_mom_batch_free(&batch);

    for (int c = 0; c < COUNT; c++) {
        sp_mom_cols_free(&cols[c]);
        be->free(x_dev[c]);
        free(x[c]);
    }
    be->free(shifted);
    sp_rowops_free(&ro);
}

/* A batch of side 300 computes A^T A in bands of SP_MOMENTS_BAND rows (128, 128 and 44): its upper
 * triangle matches the fp64 covariance, and the eigenvalues (read from that triangle) those of the
 * fp64 covariance, to fp32's accuracy over 600 rows. */
static void test_banded_covariance(void **state)
{
    (void)state;
    enum { DIM = 300, ROWS = 600 };
    _Static_assert(DIM > 2 * SP_MOMENTS_BAND && DIM % SP_MOMENTS_BAND != 0, "three bands, the last short");
    const sp_backend *be = sp_backend_cpu();
    sp_real *x = vec_zeros((size_t)ROWS * DIM);
    sp_rng rng;
    sp_rng_seed(&rng, 41);
    for (int t = 0; t < ROWS; t++)
        for (int j = 0; j < DIM; j++) /* unequal variances, every column tied to the first, a mean of 3 */
            x[t * DIM + j] = (sp_real)(3 + (1 + 0.01 * j) * sp_rng_normal(&rng) + (j ? 0.3 * x[t * DIM] : 0));
    sp_real *x_dev = to_backend(be, (size_t)ROWS * DIM, x), *shifted = be->alloc(ROWS * DIM * sizeof(sp_real), "test");
    sp_rowops ro;
    assert_int_equal(sp_rowops_init(&ro, be, ROWS, DIM), SP_OK);
    sp_mom_cols cols;
    sp_mom_batch batch;
    assert_int_equal(sp_mom_cols_init(&cols, &ro, DIM), SP_OK);
    assert_int_equal(sp_mom_batch_init(&batch, be, 1, DIM), SP_OK);
    for (int t0 = 0; t0 < ROWS; t0 += 200) {
        assert_int_equal(sp_mom_cols_add(&cols, x_dev + (size_t)t0 * DIM, 200, shifted), SP_OK);
        assert_int_equal(sp_mom_cross_add(&batch.cross[0], shifted, shifted, 200), SP_OK);
    }
    /* the band form takes a^T a only */
    assert_int_equal(sp_mom_cross_add(&batch.cross[0], shifted, x_dev, 200), SP_ERR_INTERNAL);
    sp_error_clear();
    assert_int_equal(sp_mom_batch_covariances(&batch, &cols, "test"), SP_OK);
    double *got = calloc((size_t)DIM * DIM, sizeof *got), *want = calloc((size_t)DIM * DIM, sizeof *want);
    double *w_got = calloc(DIM, sizeof *w_got), *w_want = calloc(DIM, sizeof *w_want);
    assert_true(got && want && w_got && w_want);
    be->download(got, batch.totals, (size_t)DIM * DIM * sizeof *got);
    double mean[DIM] = {0};
    for (int t = 0; t < ROWS; t++)
        for (int j = 0; j < DIM; j++)
            mean[j] += x[t * DIM + j] / (double)ROWS;
    for (int t = 0; t < ROWS; t++)
        for (int i = 0; i < DIM; i++)
            for (int j = i; j < DIM; j++)
                want[i * DIM + j] += (x[t * DIM + i] - mean[i]) * (x[t * DIM + j] - mean[j]) / (ROWS - 1);
    double err = 0, scale = 0;
    for (int i = 0; i < DIM; i++)
        for (int j = i; j < DIM; j++) {
            err = fmax(err, fabs(got[i * DIM + j] - want[i * DIM + j]));
            scale = fmax(scale, fabs(want[i * DIM + j]));
        }
    assert_below(err / scale, 1e-5, "upper triangle of the banded covariance");
    assert_int_equal(sp_mom_batch_eigvals(&batch, w_got), SP_OK);
    assert_int_equal(sp_linalg_sym_eigvals(DIM, want, w_want), SP_OK);
    for (int i = 0; i < DIM; i++)
        assert_below(fabs(w_got[i] - w_want[i]), 1e-5 * w_want[0], "eigenvalue %d", i);
    free(got);
    free(want);
    free(w_got);
    free(w_want);
    sp_mom_batch_free(&batch);
    sp_mom_cols_free(&cols);
    sp_rowops_free(&ro);
    be->free(shifted);
    be->free(x_dev);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rowops),
        cmocka_unit_test(test_rowops_nonfinite),
        cmocka_unit_test(test_streamed_moments),
        cmocka_unit_test(test_batched_covariance_eigvals),
        cmocka_unit_test(test_banded_covariance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

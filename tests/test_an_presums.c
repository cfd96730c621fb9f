/* The "presums" analyzer through the analyze driver, on synthetic activation dumps with
 * pre-normalization sums: a naive fp64 reference for sigma and rms on random sums (one block
 * without sum_a reads NaN and is left out of the mean), streaming in single sequences against one
 * batch, a known answer (token t's features m_t +- s_t: std exactly s_t; a constant token: std 0),
 * and a dump without sums, where the analyzer is recorded as skipped. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/act_dump.h"
#include "support/assert_err.h"
#include "support/report_view.h"
#include "support/scratch.h"
#include "support/vec_util.h"

enum { L = 3, NH = L + 1, D = 8, BATCH = 4, SEQ = 5, ROWS = BATCH * SEQ };

/* Writes a dump of random hidden states and the given sums, analyzes it with `presums` in batches of
 * opt_batch sequences, and opens the report. */
static void analyze(sp_real *const *sum_a, sp_real *const *sum_z, int opt_batch, const char *name, report_view *v)
{
    sp_rng rng;
    sp_rng_seed(&rng, 9);
    sp_real *h[NH];
    for (int l = 0; l < NH; l++)
        h[l] = vec_random(&rng, ROWS * D, 1.0);
    char dump[4200], dump_name[80], report[4200];
    snprintf(dump_name, sizeof dump_name, "dump_%s", name);
    scratch_path(dump, sizeof dump, dump_name);
    act_dump_spec spec = {.n_layers = L, .d_model = D, .n_streams = 1, .batch = BATCH, .seq_len = SEQ,
                          .hidden = h, .sum_a = sum_a, .sum_z = sum_z};
    act_dump_write(dump, &spec);
    for (int l = 0; l < NH; l++)
        free(h[l]);
    sp_analyze_options o;
    sp_analyze_options_defaults(&o);
    snprintf(o.metrics, sizeof o.metrics, "presums");
    o.batch = opt_batch;
    o.n_tokens = ROWS;
    scratch_path(report, sizeof report, name);
    act_dump_analyze(dump, report, &o);
    report_view_open(v, report);
}

/* The reference mean token std and rms of one sum [ROWS, D]. */
static void reference(const sp_real *x, double *sigma, double *rms)
{
    double std_sum = 0, sumsq = 0;
    for (int t = 0; t < ROWS; t++) {
        double m = 0, q = 0;
        for (int j = 0; j < D; j++)
            m += x[t * D + j] / (double)D;
        for (int j = 0; j < D; j++) {
            double v = x[t * D + j];
            q += (v - m) * (v - m) / D;
            sumsq += v * v;
        }
        std_sum += sqrt(q);
    }
    *sigma = std_sum / ROWS;
    *rms = sqrt(sumsq / (ROWS * D));
}

/* Checks sigma_<suffix>, rms_<suffix> and sigma_<suffix>_mean against the reference of sums. */
static void check_sum(const report_view *v, sp_real *const *sums, const char *suffix)
{
    char sigma_name[32], rms_name[32], mean_key[32];
    snprintf(sigma_name, sizeof sigma_name, "sigma_%s", suffix);
    snprintf(rms_name, sizeof rms_name, "rms_%s", suffix);
    snprintf(mean_key, sizeof mean_key, "sigma_%s_mean", suffix);
    int rank;
    int64_t shape[4]; /* report_view_array fills a whole sp_report_array shape */
    double *sigma = report_view_array(v, "presums", sigma_name, &rank, shape);
    double *rms = report_view_array(v, "presums", rms_name, NULL, NULL);
    assert_int_equal(rank, 1);
    assert_int_equal(shape[0], L);
    double mean = 0;
    int n = 0;
    for (int l = 0; l < L; l++) {
        if (!sums[l]) {
            assert_true(isnan(sigma[l]) && isnan(rms[l]));
            continue;
        }
        double ref_sigma, ref_rms;
        reference(sums[l], &ref_sigma, &ref_rms);
        assert_below(fabs(sigma[l] - ref_sigma), 1e-5 * ref_sigma, "%s of block %d", sigma_name, l);
        assert_below(fabs(rms[l] - ref_rms), 1e-6 * ref_rms, "%s of block %d", rms_name, l);
        mean += ref_sigma;
        n++;
    }
    mean /= n;
    assert_below(fabs(report_view_scalar(v, "presums", mean_key) - mean), 1e-5 * mean, "%s", mean_key);
    free(sigma);
    free(rms);
}

static void test_against_reference(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 5);
    sp_real *sum_a[L], *sum_z[L];
    for (int l = 0; l < L; l++) {
        sum_a[l] = vec_random(&rng, ROWS * D, 0.5 + l);
        sum_z[l] = vec_random(&rng, ROWS * D, 2.0 + l);
        for (int e = 0; e < ROWS * D; e++) /* a per-token offset: the std ignores it, the rms does not */
            sum_z[l][e] += (sp_real)(0.25 * (e / D));
    }
    free(sum_a[1]);
    sum_a[1] = NULL; /* a block without sum_a (as mixln's pre blocks) */
    const int batches[2] = {BATCH, 1};
    for (int k = 0; k < 2; k++) {
        report_view v;
        analyze(sum_a, sum_z, batches[k], k ? "random_one.h5" : "random_all.h5", &v);
        assert_null(report_view_skipped(&v, "presums"));
        check_sum(&v, sum_a, "a");
        check_sum(&v, sum_z, "z");
        report_view_close(&v);
    }
    for (int l = 0; l < L; l++) {
        free(sum_a[l]);
        free(sum_z[l]);
    }
}

static void test_known_std(void **state)
{
    (void)state;
    sp_real *sum_z[L];
    double expected[L];
    for (int l = 0; l < L; l++) {
        sum_z[l] = vec_zeros(ROWS * D);
        double std_sum = 0;
        for (int t = 0; t < ROWS; t++) {
            /* token t: mean m, entries m + s and m - s alternately; the last token is constant */
            double m = 1.5 * t - 4, s = t == ROWS - 1 ? 0 : 0.5 * (l + 1) + 0.125 * t;
            for (int j = 0; j < D; j++)
                sum_z[l][t * D + j] = (sp_real)(j % 2 ? m - s : m + s);
            std_sum += s;
        }
        expected[l] = std_sum / ROWS;
    }
    report_view v;
    analyze(NULL, sum_z, 2, "known.h5", &v);
    double *sigma = report_view_array(&v, "presums", "sigma_z", NULL, NULL);
    double *sigma_a = report_view_array(&v, "presums", "sigma_a", NULL, NULL);
    double mean = 0;
    for (int l = 0; l < L; l++) {
        assert_below(fabs(sigma[l] - expected[l]), 1e-5 * expected[l], "sigma_z of block %d", l);
        assert_true(isnan(sigma_a[l])); /* the dump has no sum_a at all */
        mean += expected[l] / L;
    }
    assert_below(fabs(report_view_scalar(&v, "presums", "sigma_z_mean") - mean), 1e-5 * mean, "sigma_z_mean");
    assert_true(isnan(report_view_scalar(&v, "presums", "sigma_a_mean")));
    free(sigma);
    free(sigma_a);
    report_view_close(&v);
    for (int l = 0; l < L; l++)
        free(sum_z[l]);
}

static void test_skipped_without_sums(void **state)
{
    (void)state;
    report_view v;
    analyze(NULL, NULL, BATCH, "no_sums.h5", &v);
    const char *reason = report_view_skipped(&v, "presums");
    assert_non_null(reason);
    assert_non_null(strstr(reason, "pre-normalization sums"));
    report_view_close(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_known_std),
        cmocka_unit_test(test_skipped_without_sums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

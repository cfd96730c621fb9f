/* The "growth" analyzer through the analyze driver, on synthetic activation dumps: known answers
 * (constant layers: RMS |c|, token norm |c| sqrt(d), feature variance 0, top and median |c|), a
 * naive fp64 reference for every array on random layers with injected massive activations (exact
 * median, sorted top-3), streaming in single sequences against one batch, and the strided median
 * sample of a layer with more entries than the sample holds, against the exact quantiles. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "support/act_dump.h"
#include "support/assert_err.h"
#include "support/report_view.h"
#include "support/scratch.h"
#include "support/vec_util.h"

enum { L = 3, NH = L + 1, D = 8, BATCH = 4, SEQ = 6, ROWS = BATCH * SEQ };

static void analyze(sp_real **h, int n_layers, int dim, int batch, int seq, int opt_batch, const char *name,
                    char *report, size_t len)
{
    char dump[4200], dump_name[80];
    snprintf(dump_name, sizeof dump_name, "dump_%s", name);
    scratch_path(dump, sizeof dump, dump_name);
    act_dump_spec spec = {.n_layers = n_layers, .d_model = dim, .n_streams = 1, .batch = batch, .seq_len = seq,
                          .hidden = h};
    act_dump_write(dump, &spec);
    sp_analyze_options o;
    sp_analyze_options_defaults(&o);
    snprintf(o.metrics, sizeof o.metrics, "growth");
    o.batch = opt_batch;
    o.n_tokens = (int64_t)batch * seq;
    scratch_path(report, len, name);
    act_dump_analyze(dump, report, &o);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* |x| of n entries, sorted ascending (malloc'd). */
static double *sorted_abs(const sp_real *x, size_t n)
{
    double *s = malloc(n * sizeof *s);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++)
        s[i] = fabs((double)x[i]);
    qsort(s, n, sizeof *s, cmp_double);
    return s;
}

static void test_constant_layers(void **state)
{
    (void)state;
    sp_real *h[NH];
    for (int l = 0; l < NH; l++) {
        h[l] = vec_zeros(ROWS * D);
        for (int e = 0; e < ROWS * D; e++)
            h[l][e] = (sp_real)(l % 2 ? -(l + 0.5) : l + 0.5);
    }
    char report[4200];
    analyze(h, L, D, BATCH, SEQ, 3, "constant.h5", report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    double *rms = report_view_array(&v, "growth", "rms", NULL, NULL);
    double *norm = report_view_array(&v, "growth", "mean_token_norm", NULL, NULL);
    double *var = report_view_array(&v, "growth", "feature_variance", NULL, NULL);
    double *top = report_view_array(&v, "growth", "top_abs", NULL, NULL);
    double *median = report_view_array(&v, "growth", "median_abs", NULL, NULL);
    double *ratio = report_view_array(&v, "growth", "top1_over_median", NULL, NULL);
    for (int l = 0; l < NH; l++) {
        double c = l + 0.5;
        assert_below(fabs(rms[l] - c), 1e-6 * c, "rms of layer %d", l);
        assert_below(fabs(norm[l] - c * sqrt(D)), 1e-6 * c, "token norm of layer %d", l);
        assert_below(var[l], 1e-10, "feature variance of layer %d", l);
        for (int k = 0; k < 3; k++)
            assert_true(top[l * 3 + k] == c);
        assert_true(median[l] == c);
        assert_true(ratio[l] == 1);
    }
    assert_below(fabs(report_view_scalar(&v, "growth", "rms_last_over_first") - 3.5 / 0.5), 1e-5, "rms ratio");
    free(rms);
    free(norm);
    free(var);
    free(top);
    free(median);
    free(ratio);
    report_view_close(&v);
    for (int l = 0; l < NH; l++)
        free(h[l]);
}

static void check_reference(const report_view *v, sp_real **h)
{
    double *rms = report_view_array(v, "growth", "rms", NULL, NULL);
    double *norm = report_view_array(v, "growth", "mean_token_norm", NULL, NULL);
    double *var = report_view_array(v, "growth", "feature_variance", NULL, NULL);
    double *top = report_view_array(v, "growth", "top_abs", NULL, NULL);
    double *median = report_view_array(v, "growth", "median_abs", NULL, NULL);
    double *token_ratio = report_view_array(v, "growth", "token_norm_max_over_median", NULL, NULL);
    double *token_position = report_view_array(v, "growth", "token_norm_max_position", NULL, NULL);
    int n_dominated = 0;
    for (int l = 0; l < NH; l++) {
        double sumsq = 0, norm_sum = 0, var_sum = 0, token_norms[ROWS];
        int argmax = 0;
        for (int t = 0; t < ROWS; t++) {
            double m = 0, s = 0, q = 0;
            for (int j = 0; j < D; j++)
                m += h[l][t * D + j] / (double)D;
            for (int j = 0; j < D; j++) {
                double x = h[l][t * D + j];
                s += x * x;
                q += (x - m) * (x - m) / D;
            }
            sumsq += s;
            norm_sum += sqrt(s);
            var_sum += q;
            token_norms[t] = sqrt(s);
            argmax = token_norms[t] > token_norms[argmax] ? t : argmax;
        }
        const double max_norm = token_norms[argmax];
        qsort(token_norms, ROWS, sizeof *token_norms, cmp_double);
        const double ratio = max_norm / (0.5 * (token_norms[ROWS / 2 - 1] + token_norms[ROWS / 2]));
        assert_below(fabs(token_ratio[l] - ratio), 1e-5 * ratio, "token norm ratio of layer %d", l);
        assert_int_equal((int)token_position[l], argmax % SEQ);
        n_dominated += ratio > 10;
        assert_below(fabs(rms[l] - sqrt(sumsq / (ROWS * D))), 1e-6 * rms[l], "rms of layer %d", l);
        assert_below(fabs(norm[l] - norm_sum / ROWS), 1e-6 * norm[l], "token norm of layer %d", l);
        assert_below(fabs(var[l] - var_sum / ROWS), 1e-5 * var[l], "feature variance of layer %d", l);
        double *s = sorted_abs(h[l], ROWS * D);
        const int n = ROWS * D;
        for (int k = 0; k < 3; k++)
            assert_true(top[l * 3 + k] == s[n - 1 - k]);
        assert_true(median[l] == 0.5 * (s[n / 2 - 1] + s[n / 2]));
        free(s);
    }
    free(rms);
    free(norm);
    free(var);
    free(top);
    free(median);
    free(token_ratio);
    free(token_position);
    assert_int_equal((int)report_view_scalar(v, "growth", "dominant_token_layers"), n_dominated);
}

static void test_against_reference(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 4);
    sp_real *h[NH];
    for (int l = 0; l < NH; l++) {
        h[l] = vec_random(&rng, ROWS * D, 1.0 + l);
        for (int e = 0; e < ROWS * D; e++)
            h[l][e] += (sp_real)(0.3 * (e % D)); /* per-feature offsets: variance across features */
    }
    h[2][5 * D + 3] = 250;   /* massive activations, one of them negative */
    h[2][17 * D + 3] = -180;
    for (int j = 0; j < D; j++) /* a sink: the first token of the second sequence far above the rest */
        h[3][SEQ * D + j] = (sp_real)(j % 2 ? -200 : 200);
    char report[4200];
    analyze(h, L, D, BATCH, SEQ, BATCH, "random_all.h5", report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    check_reference(&v, h);
    assert_int_equal((int)report_view_scalar(&v, "growth", "top1_over_median_max_layer"), 2);
    /* the sink of layer 3 dominates its layer most, from position 0; layer 2's entries do too */
    assert_int_equal((int)report_view_scalar(&v, "growth", "token_norm_max_position"), 0);
    assert_int_equal((int)report_view_scalar(&v, "growth", "dominant_token_layers"), 2);
    report_view_close(&v);
    analyze(h, L, D, BATCH, SEQ, 1, "random_one.h5", report, sizeof report);
    report_view_open(&v, report);
    check_reference(&v, h);
    report_view_close(&v);
    for (int l = 0; l < NH; l++)
        free(h[l]);
}

static void test_sampled_median(void **state)
{
    (void)state;
    /* 68 x 32 rows of 32 features: 69632 entries, above the 65536 sample */
    enum { BIG_BATCH = 68, BIG_SEQ = 32, BIG_D = 32, BIG_N = BIG_BATCH * BIG_SEQ * BIG_D };
    sp_rng rng;
    sp_rng_seed(&rng, 6);
    sp_real *h[2];
    for (int l = 0; l < 2; l++) {
        h[l] = vec_random(&rng, BIG_N, 1.0);
        for (int e = 0; e < BIG_N; e++) /* columns of very different scales: a biased sample shows */
            h[l][e] *= (sp_real)(1 + (e % BIG_D));
    }
    char report[4200];
    analyze(h, 1, BIG_D, BIG_BATCH, BIG_SEQ, 16, "big.h5", report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    double *median = report_view_array(&v, "growth", "median_abs", NULL, NULL);
    for (int l = 0; l < 2; l++) {
        double *s = sorted_abs(h[l], BIG_N);
        print_message("layer %d: sampled median %g, exact %g\n", l, median[l], s[BIG_N / 2]);
        assert_true(median[l] >= s[(int)(0.49 * BIG_N)] && median[l] <= s[(int)(0.51 * BIG_N)]);
        free(s);
    }
    free(median);
    report_view_close(&v);
    free(h[0]);
    free(h[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant_layers),
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_sampled_median),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

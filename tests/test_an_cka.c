/* The "cka" analyzer through the analyze driver, on synthetic activation dumps: known answers
 * (identical layers, and layers that are scaled, sign-flipped and permuted copies plus an offset,
 * give CKA 1 for both estimators) and an independent reference: HSIC from the full N x N Gram
 * matrices (H K H and the unbiased estimator's zero-diagonal K~), computed with plain loops in fp64,
 * against the streamed sums, for one sequence per batch and for all at once. */
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

enum { L = 3, NH = L + 1, D = 6, BATCH = 6, SEQ = 5, N = BATCH * SEQ };

/* The N x N linear Gram matrix of x [N, D], in fp64. */
static void gram(const sp_real *x, double *k)
{
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            double s = 0;
            for (int j = 0; j < D; j++)
                s += (double)x[a * D + j] * x[b * D + j];
            k[a * N + b] = s;
        }
}

/* tr(K H L H) / (N - 1)^2, H = I - 11'/N. */
static double hsic_biased(const double *k, const double *l)
{
    static double kc[N * N], lc[N * N];
    const double *src[2] = {k, l};
    double *dst[2] = {kc, lc};
    for (int m = 0; m < 2; m++) {
        double row[N] = {0}, all = 0;
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++) {
                row[a] += src[m][a * N + b] / N;
                all += src[m][a * N + b] / ((double)N * N);
            }
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++)
                dst[m][a * N + b] = src[m][a * N + b] - row[a] - row[b] + all;
    }
    double tr = 0;
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++)
            tr += kc[a * N + b] * lc[b * N + a];
    return tr / ((N - 1.0) * (N - 1.0));
}

/* The unbiased estimator (Song et al. 2012) written out from its definition. */
static double hsic_unbiased(const double *k, const double *l)
{
    double tr = 0, sum_k = 0, sum_l = 0, kl1 = 0;
    for (int a = 0; a < N; a++) {
        double row_k = 0, row_l = 0;
        for (int b = 0; b < N; b++) {
            if (a == b)
                continue;
            tr += k[a * N + b] * l[b * N + a];
            row_k += k[a * N + b];
            row_l += l[a * N + b];
        }
        sum_k += row_k;
        sum_l += row_l;
        kl1 += row_k * row_l; /* (1' K~ L~ 1) = sum_a (K~ 1)_a (L~ 1)_a, both symmetric */
    }
    const double n = N;
    return (tr + sum_k * sum_l / ((n - 1) * (n - 2)) - 2 / (n - 2) * kl1) / (n * (n - 3));
}

static void reference(sp_real **h, double *cka, double *cka_u)
{
    static double k[NH][N * N];
    double hb[NH][NH], hu[NH][NH];
    for (int l = 0; l < NH; l++)
        gram(h[l], k[l]);
    for (int i = 0; i < NH; i++)
        for (int j = 0; j < NH; j++) {
            hb[i][j] = hsic_biased(k[i], k[j]);
            hu[i][j] = hsic_unbiased(k[i], k[j]);
        }
    for (int i = 0; i < NH; i++)
        for (int j = 0; j < NH; j++) {
            cka[i * NH + j] = hb[i][j] / sqrt(hb[i][i] * hb[j][j]);
            cka_u[i * NH + j] = hu[i][j] / sqrt(hu[i][i] * hu[j][j]);
        }
}

static void analyze_in_passes(sp_real **h, const char *name, int batch, int pairs_per_pass, char *report, size_t len)
{
    char dump[4200], dump_name[80];
    snprintf(dump_name, sizeof dump_name, "dump_%s", name);
    scratch_path(dump, sizeof dump, dump_name);
    act_dump_spec spec = {.n_layers = L, .d_model = D, .n_streams = 1, .batch = BATCH, .seq_len = SEQ, .hidden = h};
    act_dump_write(dump, &spec);
    sp_analyze_options o;
    sp_analyze_options_defaults(&o);
    snprintf(o.metrics, sizeof o.metrics, "cka");
    o.cka_debiased = 1;
    o.batch = batch;
    o.cka_pairs_per_pass = pairs_per_pass;
    scratch_path(report, len, name);
    act_dump_analyze(dump, report, &o);
}

static void analyze(sp_real **h, const char *name, int batch, char *report, size_t len)
{
    analyze_in_passes(h, name, batch, 0, report, len);
}

static double max_abs_diff(int n, const double *a, const double *b)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

static void test_transformed_copies(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 2);
    sp_real *h[NH];
    h[0] = vec_random(&rng, N * D, 1.0);
    for (int l = 1; l < NH; l++) {
        /* feature j of layer l is +-c_l times feature (j + l) mod D of h_0, plus an offset */
        h[l] = vec_zeros(N * D);
        for (int t = 0; t < N; t++)
            for (int j = 0; j < D; j++)
                h[l][t * D + j] = (sp_real)((j % 2 ? -1.0 : 1.0) * (0.5 + l) * h[0][t * D + (j + l) % D] + 3.0 * l);
    }
    char report[4200];
    analyze(h, "copies.h5", 4, report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    double *cka = report_view_array(&v, "cka", "cka", NULL, NULL);
    double *cka_u = report_view_array(&v, "cka", "cka_debiased", NULL, NULL);
    for (int e = 0; e < NH * NH; e++) {
        assert_below(fabs(cka[e] - 1), 1e-5, "CKA entry %d", e);
        assert_below(fabs(cka_u[e] - 1), 1e-4, "debiased CKA entry %d", e);
    }
    assert_below(fabs(report_view_scalar(&v, "cka", "adjacent_mean") - 1), 1e-5, "adjacent mean");
    free(cka);
    free(cka_u);
    report_view_close(&v);
    for (int l = 0; l < NH; l++)
        free(h[l]);
}

static void test_against_gram_reference(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 8);
    sp_real *h[NH];
    h[0] = vec_random(&rng, N * D, 1.0);
    for (int l = 1; l < NH; l++) {
        h[l] = vec_random(&rng, N * D, 0.9);
        for (int e = 0; e < N * D; e++)
            h[l][e] += h[l - 1][e] * (sp_real)(e % 3 ? 1.0 : -0.5) + (sp_real)(e % D);
    }
    double want[NH * NH], want_u[NH * NH];
    reference(h, want, want_u);
    const int batches[] = {1, BATCH};
    for (int b = 0; b < 2; b++) {
        char name[64], report[4200];
        snprintf(name, sizeof name, "chain_%d.h5", batches[b]);
        analyze(h, name, batches[b], report, sizeof report);
        report_view v;
        report_view_open(&v, report);
        double *cka = report_view_array(&v, "cka", "cka", NULL, NULL);
        double *cka_u = report_view_array(&v, "cka", "cka_debiased", NULL, NULL);
        assert_below(max_abs_diff(NH * NH, cka, want), 1e-5, "CKA, batch %d", batches[b]);
        assert_below(max_abs_diff(NH * NH, cka_u, want_u), 1e-4, "debiased CKA, batch %d", batches[b]);
        assert_below(fabs(report_view_scalar(&v, "cka", "first_last") - want[L]), 1e-5, "first_last");
        assert_below(fabs(report_view_scalar(&v, "cka", "first_last_debiased") - want_u[L]), 1e-4, "first_last");
        /* the estimators differ on so few tokens: the test tells them apart */
        assert_true(max_abs_diff(NH * NH, want, want_u) > 1e-3);
        free(cka);
        free(cka_u);
        report_view_close(&v);
    }
    for (int l = 0; l < NH; l++)
        free(h[l]);
}

/* The pairs in several passes over the evaluation set (a bounded memory) give the one-pass result
 * bit for bit: the same rows, batches and gemms, per pair. */
static void test_pairs_in_passes_are_bit_identical(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 5);
    sp_real *h[NH];
    for (int l = 0; l < NH; l++)
        h[l] = vec_random(&rng, N * D, 1.0 + 0.1 * l);
    const char *arrays[] = {"cka", "hsic", "cka_debiased", "hsic_debiased"};
    const int per_pass[] = {0, 1, 3}, passes[] = {1, NH * (NH + 1) / 2, 4};
    double *want[4] = {NULL};
    for (int c = 0; c < 3; c++) {
        char name[64], report[4200];
        snprintf(name, sizeof name, "passes_%d.h5", per_pass[c]);
        analyze_in_passes(h, name, 2, per_pass[c], report, sizeof report);
        report_view v;
        report_view_open(&v, report);
        assert_int_equal((int)report_view_scalar(&v, "cka", "passes"), passes[c]);
        for (int a = 0; a < 4; a++) {
            double *got = report_view_array(&v, "cka", arrays[a], NULL, NULL);
            if (c == 0)
                want[a] = got;
            else {
                if (memcmp(got, want[a], NH * NH * sizeof *got) != 0)
                    fail_msg("%s in %d passes differs from one pass (max diff %g)", arrays[a], passes[c],
                             max_abs_diff(NH * NH, got, want[a]));
                free(got);
            }
        }
        report_view_close(&v);
    }
    for (int a = 0; a < 4; a++)
        free(want[a]);
    for (int l = 0; l < NH; l++)
        free(h[l]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transformed_copies),
        cmocka_unit_test(test_against_gram_reference),
        cmocka_unit_test(test_pairs_in_passes_are_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

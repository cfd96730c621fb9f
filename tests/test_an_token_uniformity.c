/* The "token_uniformity" analyzer through the analyze driver, on synthetic activation dumps:
 * - closed forms, one per layer: every token of a sequence the same vector (cosine 1, residual 0),
 *   orthogonal tokens of any lengths (cosine 0, residual sqrt(1 - 1/T)), equal tokens but one zero
 *   token (cosine (T - 2) / T, residual 1 / sqrt(T)), random tokens;
 * - a brute-force fp64 reference, O(T^2) cosines of every pair of distinct tokens and the residual
 *   from explicitly centered rows, for random layers, a near-collapsed layer (a large common vector
 *   plus small noise, where sum ||x||^2 - T ||mean||^2 would cancel) and zero rows, in one batch
 *   and one sequence per batch (streaming equals one-shot), and for both streams of a two-stream
 *   dump; every summary key from the arrays;
 * - `check`'s built-in rule collapse.token_uniformity on a collapsed and a healthy report. */
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

enum { L = 3, NH = L + 1, D = 8, BATCH = 4, SEQ = 6, ROWS = BATCH * SEQ };

static void run(sp_real **h, int n_streams, int opt_batch, const char *name, char *report, size_t len)
{
    char dump[4200], dump_name[80];
    snprintf(dump_name, sizeof dump_name, "dump_%s", name);
    scratch_path(dump, sizeof dump, dump_name);
    act_dump_spec spec = {.n_layers = L, .d_model = D, .n_streams = n_streams, .batch = BATCH, .seq_len = SEQ,
                          .hidden = h};
    act_dump_write(dump, &spec);
    sp_analyze_options o;
    sp_analyze_options_defaults(&o);
    snprintf(o.metrics, sizeof o.metrics, "token_uniformity");
    o.batch = opt_batch;
    scratch_path(report, len, name);
    act_dump_analyze(dump, report, &o);
}

static void free_acts(sp_real **h, int n)
{
    for (int i = 0; i < n; i++)
        free(h[i]);
}

/* Mean pairwise cosine over distinct tokens and relative residual of one sequence x [SEQ, D], in
 * fp64 from their definitions: every pair, zero rows cosine 0 with anything. */
static void brute_force(const sp_real *x, double *cosine, double *residual)
{
    double c_sum = 0;
    for (int i = 0; i < SEQ; i++)
        for (int j = 0; j < SEQ; j++) {
            if (i == j)
                continue;
            double dot = 0, ni = 0, nj = 0;
            for (int k = 0; k < D; k++) {
                dot += (double)x[i * D + k] * x[j * D + k];
                ni += (double)x[i * D + k] * x[i * D + k];
                nj += (double)x[j * D + k] * x[j * D + k];
            }
            c_sum += ni > 0 && nj > 0 ? dot / sqrt(ni * nj) : 0;
        }
    *cosine = c_sum / (SEQ * (SEQ - 1));
    double mean[D] = {0}, res = 0, tot = 0;
    for (int t = 0; t < SEQ; t++)
        for (int k = 0; k < D; k++)
            mean[k] += (double)x[t * D + k] / SEQ;
    for (int t = 0; t < SEQ; t++)
        for (int k = 0; k < D; k++) {
            double v = x[t * D + k];
            res += (v - mean[k]) * (v - mean[k]);
            tot += v * v;
        }
    *residual = tot > 0 ? sqrt(res / tot) : 0;
}

/* The arrays of one stream against the reference averaged over sequences, and the summary keys. */
static void check_reference(const report_view *v, sp_real **h, int n_streams, int k)
{
    const char *cos_name = k ? "mean_pairwise_cosine_y" : "mean_pairwise_cosine";
    const char *res_name = k ? "relative_residual_y" : "relative_residual";
    double *cosine = report_view_array(v, "token_uniformity", cos_name, NULL, NULL);
    double *residual = report_view_array(v, "token_uniformity", res_name, NULL, NULL);
    double ref_cos[NH], ref_res[NH];
    for (int l = 0; l < NH; l++) {
        ref_cos[l] = ref_res[l] = 0;
        for (int q = 0; q < BATCH; q++) {
            double c, r;
            brute_force(h[l * n_streams + k] + (size_t)q * SEQ * D, &c, &r);
            ref_cos[l] += c / BATCH;
            ref_res[l] += r / BATCH;
        }
        assert_below(fabs(cosine[l] - ref_cos[l]), 1e-6, "stream %d, cosine of layer %d", k, l);
        assert_below(fabs(residual[l] - ref_res[l]), 1e-5 * ref_res[l] + 1e-12, "stream %d, residual of layer %d", k,
                     l);
    }
    int res_min = 0, cos_max = 0;
    for (int l = 1; l < NH; l++) {
        res_min = ref_res[l] < ref_res[res_min] ? l : res_min;
        cos_max = ref_cos[l] > ref_cos[cos_max] ? l : cos_max;
    }
    const char *suffix = k ? "_y" : "";
    char key[64];
    snprintf(key, sizeof key, "residual_min_layer%s", suffix);
    assert_int_equal((int)report_view_scalar(v, "token_uniformity", key), res_min);
    snprintf(key, sizeof key, "cosine_max_layer%s", suffix);
    assert_int_equal((int)report_view_scalar(v, "token_uniformity", key), cos_max);
    snprintf(key, sizeof key, "residual_last%s", suffix);
    assert_true(report_view_scalar(v, "token_uniformity", key) == residual[L]);
    snprintf(key, sizeof key, "cosine_last%s", suffix);
    assert_true(report_view_scalar(v, "token_uniformity", key) == cosine[L]);
    snprintf(key, sizeof key, "sequences%s", suffix);
    assert_int_equal((int)report_view_scalar(v, "token_uniformity", key), BATCH);
    free(cosine);
    free(residual);
}

static void test_closed_forms(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 3);
    sp_real *h[NH];
    h[0] = vec_random(&rng, ROWS * D, 1.0);
    h[1] = vec_zeros(ROWS * D); /* sequence q: every token the same random vector */
    h[2] = vec_zeros(ROWS * D); /* sequence q: token t = a_t e_t, orthogonal, of different lengths */
    h[3] = vec_zeros(ROWS * D); /* sequence q: equal tokens, but token 2 is zero */
    for (int q = 0; q < BATCH; q++) {
        sp_real *same = vec_random(&rng, D, 2.0);
        for (int t = 0; t < SEQ; t++) {
            const size_t row = (size_t)(q * SEQ + t) * D;
            for (int k = 0; k < D; k++) {
                h[1][row + k] = same[k];
                h[3][row + k] = t == 2 ? 0 : same[k];
            }
            h[2][row + (t + q) % D] = (sp_real)(0.5 + t + q);
        }
        free(same);
    }
    char report[4200];
    run(h, 1, BATCH, "closed.h5", report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    double *cosine = report_view_array(&v, "token_uniformity", "mean_pairwise_cosine", NULL, NULL);
    double *residual = report_view_array(&v, "token_uniformity", "relative_residual", NULL, NULL);
    assert_below(fabs(cosine[1] - 1), 1e-6, "cosine of identical tokens");
    assert_true(residual[1] == 0); /* two centering passes: exactly */
    assert_below(fabs(cosine[2]), 1e-7, "cosine of orthogonal tokens");
    assert_below(fabs(residual[2] - sqrt(1 - 1.0 / SEQ)), 1e-6, "residual of orthogonal tokens");
    assert_below(fabs(cosine[3] - (SEQ - 2.0) / SEQ), 1e-6, "cosine with a zero token");
    assert_below(fabs(residual[3] - 1 / sqrt(SEQ)), 1e-6, "residual with a zero token");
    assert_int_equal((int)report_view_scalar(&v, "token_uniformity", "residual_min_layer"), 1);
    assert_true(report_view_scalar(&v, "token_uniformity", "residual_min") == 0);
    free(cosine);
    free(residual);
    check_reference(&v, h, 1, 0);
    report_view_close(&v);
    free_acts(h, NH);
}

/* Random layers with per-sequence offsets, one near-collapsed layer (offset 100, noise 0.1: residual
 * ~1e-3) and a zero row. */
static void make_layers(sp_real **h, int n_streams, uint64_t seed)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    for (int i = 0; i < NH * n_streams; i++) {
        const int l = i / n_streams;
        h[i] = vec_random(&rng, ROWS * D, l == 2 ? 0.1 : 1.0);
        sp_real *offset = vec_random(&rng, BATCH * D, l == 2 ? 100.0 : 0.7 * l);
        for (int r = 0; r < ROWS; r++)
            for (int k = 0; k < D; k++)
                h[i][r * D + k] += offset[(r / SEQ) * D + k];
        free(offset);
    }
    for (int k = 0; k < D; k++)
        h[n_streams][9 * D + k] = 0;
}

static void test_against_brute_force(void **state)
{
    (void)state;
    sp_real *h[NH];
    make_layers(h, 1, 11);
    char report[4200];
    run(h, 1, BATCH, "random_all.h5", report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    check_reference(&v, h, 1, 0);
    report_view_close(&v);
    run(h, 1, 1, "random_one.h5", report, sizeof report);
    report_view_open(&v, report);
    check_reference(&v, h, 1, 0);
    report_view_close(&v);
    free_acts(h, NH);
}

static void test_two_streams(void **state)
{
    (void)state;
    sp_real *h[2 * NH];
    make_layers(h, 2, 12);
    char report[4200];
    run(h, 2, 3, "streams.h5", report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    check_reference(&v, h, 2, 0);
    check_reference(&v, h, 2, 1);
    report_view_close(&v);
    free_acts(h, 2 * NH);
}

/* The built-in rule collapse.token_uniformity: a last layer whose tokens are their sequence's mean
 * plus 1e-3 noise fails it (exit 7, named), the random layers pass it. */
static void test_check_rule(void **state)
{
    (void)state;
    sp_real *h[NH];
    make_layers(h, 1, 13);
    sp_rng rng;
    sp_rng_seed(&rng, 14);
    for (int q = 0; q < BATCH; q++) {
        sp_real *same = vec_random(&rng, D, 1.0);
        for (int t = 0; t < SEQ; t++)
            for (int k = 0; k < D; k++)
                h[L][(q * SEQ + t) * D + k] = same[k] + (sp_real)(1e-3 * ((t + k) % 3 - 1));
        free(same);
    }
    char collapsed[4200], healthy[4200];
    run(h, 1, BATCH, "collapsed.h5", collapsed, sizeof collapsed);
    free_acts(h, NH);
    make_layers(h, 1, 15);
    run(h, 1, BATCH, "healthy.h5", healthy, sizeof healthy);
    free_acts(h, NH);
    char *out = NULL;
    int rc = scratch_run_cli((const char *[]){"check", collapsed, NULL}, &out, NULL);
    if (rc == -1)
        skip();
    assert_int_equal(rc, 7);
    assert_non_null(strstr(out, "FAIL   collapse.token_uniformity"));
    free(out);
    assert_int_equal(scratch_run_cli((const char *[]){"check", healthy, NULL}, &out, NULL), 0);
    assert_non_null(strstr(out, "PASS   collapse.token_uniformity"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_forms),
        cmocka_unit_test(test_against_brute_force),
        cmocka_unit_test(test_two_streams),
        cmocka_unit_test(test_check_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

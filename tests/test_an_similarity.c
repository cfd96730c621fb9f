/* The "similarity" analyzer through the analyze driver, on synthetic activation dumps: known answers
 * (identical layers: cosine 1, angle 0, block influence 0; independent random layers: cosine ~0,
 * angle ~1/2) and a naive per-token reference in fp64 (explicit dot products and arccos) for every
 * array and the summary, with and without centering and last-token selection, for one batch or
 * one sequence per batch (streaming equals one-shot), and for both streams of a two-stream dump. */
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

enum { L = 4, NH = L + 1, D = 16, BATCH = 6, SEQ = 5, ROWS = BATCH * SEQ };
#define PI 3.14159265358979323846

/* Layer outputs of n_streams streams: a random h_0, then each layer the previous plus noise; one
 * token of layer 2 is zero (its cosines are 0 by convention). */
static void make_chain(sp_real **h, int n_streams, int dim, uint64_t seed)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    for (int s = 0; s < n_streams; s++) {
        h[s] = vec_random(&rng, (size_t)ROWS * dim, 1.0);
        for (int l = 1; l < NH; l++) {
            sp_real *prev = h[(l - 1) * n_streams + s], *cur = vec_random(&rng, (size_t)ROWS * dim, 0.8);
            for (int e = 0; e < ROWS * dim; e++)
                cur[e] += prev[e] + (sp_real)(0.1 * l);
            h[l * n_streams + s] = cur;
        }
    }
    for (int j = 0; j < dim; j++)
        h[2 * n_streams][7 * dim + j] = 0;
}

static void free_acts(sp_real **h, int n)
{
    for (int i = 0; i < n; i++)
        free(h[i]);
}

/* The rows the statistics use, each minus its layer's mean over those rows when centering. */
static int reference_rows(const sp_real *x, int center, int last_token, double *out)
{
    int n = 0;
    for (int r = 0; r < ROWS; r++) {
        if (last_token && r % SEQ != SEQ - 1)
            continue;
        for (int j = 0; j < D; j++)
            out[n * D + j] = x[r * D + j];
        n++;
    }
    if (center)
        for (int j = 0; j < D; j++) {
            double m = 0;
            for (int r = 0; r < n; r++)
                m += out[r * D + j] / n;
            for (int r = 0; r < n; r++)
                out[r * D + j] -= m;
        }
    return n;
}

/* Mean cosine and mean arccos / pi over tokens, every pair of layers of one stream. */
static void reference(sp_real **h, int n_streams, int stream, int center, int last_token, double *cosine,
                      double *angle)
{
    double *rows[NH];
    int n = 0;
    for (int l = 0; l < NH; l++) {
        rows[l] = malloc(ROWS * D * sizeof(double));
        n = reference_rows(h[l * n_streams + stream], center, last_token, rows[l]);
    }
    for (int i = 0; i < NH; i++)
        for (int j = 0; j < NH; j++) {
            double c_sum = 0, a_sum = 0;
            for (int t = 0; t < n; t++) {
                double dot = 0, ni = 0, nj = 0;
                for (int k = 0; k < D; k++) {
                    dot += rows[i][t * D + k] * rows[j][t * D + k];
                    ni += rows[i][t * D + k] * rows[i][t * D + k];
                    nj += rows[j][t * D + k] * rows[j][t * D + k];
                }
                double c = ni > 0 && nj > 0 ? dot / sqrt(ni * nj) : 0;
                c = c > 1 ? 1 : c < -1 ? -1 : c;
                c_sum += c;
                a_sum += i == j ? 0 : acos(c) / PI;
            }
            cosine[i * NH + j] = c_sum / n;
            angle[i * NH + j] = a_sum / n;
        }
    for (int l = 0; l < NH; l++)
        free(rows[l]);
}

static double max_abs_diff(int n, const double *a, const double *b)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

static void write_dump(const char *name, sp_real **h, int n_streams, int dim, char *path, size_t len)
{
    scratch_path(path, len, name);
    act_dump_spec spec = {.n_layers = L, .d_model = dim, .n_streams = n_streams, .batch = BATCH, .seq_len = SEQ,
                          .hidden = h};
    act_dump_write(path, &spec);
}

static void run(const char *dump, const char *report_name, int batch, int center, int last_token, char *report,
                size_t len)
{
    sp_analyze_options o;
    sp_analyze_options_defaults(&o);
    snprintf(o.metrics, sizeof o.metrics, "similarity");
    o.batch = batch;
    o.center = center;
    o.last_token = last_token;
    scratch_path(report, len, report_name);
    act_dump_analyze(dump, report, &o);
}

static void test_identical_layers(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 5);
    sp_real *h[NH];
    h[0] = vec_random(&rng, ROWS * D, 1.0);
    for (int l = 1; l < NH; l++)
        h[l] = vec_dup(ROWS * D, h[0]);
    char dump[4200], report[4200];
    write_dump("same.h5", h, 1, D, dump, sizeof dump);
    run(dump, "same_report.h5", 4, 0, 0, report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    double *cosine = report_view_array(&v, "similarity", "cosine", NULL, NULL);
    double *angle = report_view_array(&v, "similarity", "angular_distance", NULL, NULL);
    double *bi = report_view_array(&v, "similarity", "block_influence", NULL, NULL);
    double *s_std = report_view_array(&v, "similarity", "cosine_by_distance_std", NULL, NULL);
    for (int e = 0; e < NH * NH; e++) {
        assert_below(fabs(cosine[e] - 1), 1e-6, "cosine entry %d", e);
        assert_below(angle[e], 1e-6, "angle entry %d", e);
    }
    for (int l = 0; l < L; l++) {
        assert_below(fabs(bi[l]), 1e-6, "block influence %d", l);
        assert_below(s_std[l], 1e-6, "std at distance %d", l + 1);
    }
    assert_below(fabs(report_view_scalar(&v, "similarity", "adjacent_cosine_deep_half") - 1), 1e-6, "deep half");
    assert_below(fabs(report_view_scalar(&v, "similarity", "s1") - 1), 1e-6, "S(1)");
    assert_int_equal((int)report_view_scalar(&v, "similarity", "tokens"), ROWS);
    free(cosine);
    free(angle);
    free(bi);
    free(s_std);
    report_view_close(&v);
    free_acts(h, NH);
}

static void test_independent_layers(void **state)
{
    (void)state;
    enum { WIDE = 512 };
    sp_rng rng;
    sp_rng_seed(&rng, 9);
    sp_real *h[NH];
    for (int l = 0; l < NH; l++)
        h[l] = vec_random(&rng, (size_t)ROWS * WIDE, 1.0 + l);
    char dump[4200], report[4200];
    write_dump("independent.h5", h, 1, WIDE, dump, sizeof dump);
    run(dump, "independent_report.h5", BATCH, 0, 0, report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    double *cosine = report_view_array(&v, "similarity", "cosine", NULL, NULL);
    double *angle = report_view_array(&v, "similarity", "angular_distance", NULL, NULL);
    /* cos of independent Gaussian vectors ~ N(0, 1/WIDE), averaged over ROWS tokens: sd 0.008 */
    for (int i = 0; i < NH; i++)
        for (int j = 0; j < NH; j++) {
            if (i == j)
                continue;
            assert_below(fabs(cosine[i * NH + j]), 0.04, "cosine %d, %d", i, j);
            assert_below(fabs(angle[i * NH + j] - 0.5), 0.02, "angle %d, %d", i, j);
        }
    free(cosine);
    free(angle);
    report_view_close(&v);
    free_acts(h, NH);
}

/* Every array and summary value of stream k against the reference matrices. */
static void check_stream(const report_view *v, int k, const double *cosine, const double *angle, double tol)
{
    char name[64];
    snprintf(name, sizeof name, "cosine%s", k ? "_y" : "");
    double *got_c = report_view_array(v, "similarity", name, NULL, NULL);
    snprintf(name, sizeof name, "angular_distance%s", k ? "_y" : "");
    double *got_a = report_view_array(v, "similarity", name, NULL, NULL);
    assert_below(max_abs_diff(NH * NH, got_c, cosine), tol, "cosine matrix, stream %d", k);
    assert_below(max_abs_diff(NH * NH, got_a, angle), tol, "angular distance matrix, stream %d", k);
    snprintf(name, sizeof name, "cosine_by_distance%s", k ? "_y" : "");
    double *s = report_view_array(v, "similarity", name, NULL, NULL);
    snprintf(name, sizeof name, "cosine_by_distance_std%s", k ? "_y" : "");
    double *s_std = report_view_array(v, "similarity", name, NULL, NULL);
    snprintf(name, sizeof name, "angular_by_distance%s", k ? "_y" : "");
    double *a = report_view_array(v, "similarity", name, NULL, NULL);
    snprintf(name, sizeof name, "block_influence%s", k ? "_y" : "");
    double *bi = report_view_array(v, "similarity", name, NULL, NULL);
    for (int dist = 1; dist <= L; dist++) {
        double sum = 0, sum_sq = 0, ang = 0;
        for (int i = 0; i + dist < NH; i++) {
            sum += cosine[i * NH + i + dist];
            sum_sq += cosine[i * NH + i + dist] * cosine[i * NH + i + dist];
            ang += angle[i * NH + i + dist];
        }
        int n = NH - dist;
        double var = sum_sq / n - (sum / n) * (sum / n);
        assert_below(fabs(s[dist - 1] - sum / n), tol, "S(%d)", dist);
        assert_below(fabs(s_std[dist - 1] - sqrt(var > 0 ? var : 0)), 10 * tol, "std of S(%d)", dist);
        assert_below(fabs(a[dist - 1] - ang / n), tol, "angular distance at %d", dist);
    }
    double deep = 0;
    for (int l = 0; l < L; l++) {
        assert_below(fabs(bi[l] - (1 - cosine[l * NH + l + 1])), tol, "block influence %d", l);
        if (l >= L - L / 2)
            deep += cosine[l * NH + l + 1] / (L / 2);
    }
    snprintf(name, sizeof name, "adjacent_cosine_deep_half%s", k ? "_y" : "");
    assert_below(fabs(report_view_scalar(v, "similarity", name) - deep), tol, "%s", name);
    snprintf(name, sizeof name, "s_half%s", k ? "_y" : "");
    assert_below(fabs(report_view_scalar(v, "similarity", name) - s[L / 2 - 1]), 1e-12, "%s", name);
    free(got_c);
    free(got_a);
    free(s);
    free(s_std);
    free(a);
    free(bi);
}

static void test_against_reference(void **state)
{
    (void)state;
    sp_real *h[NH];
    make_chain(h, 1, D, 21);
    char dump[4200], report[4200];
    write_dump("chain.h5", h, 1, D, dump, sizeof dump);
    double cosine[NH * NH], angle[NH * NH];
    for (int center = 0; center <= 1; center++)
        for (int last = 0; last <= 1; last++) {
            reference(h, 1, 0, center, last, cosine, angle);
            const int batches[] = {1, BATCH};
            for (int b = 0; b < 2; b++) {
                char name[64];
                snprintf(name, sizeof name, "chain_%d_%d_%d.h5", center, last, batches[b]);
                run(dump, name, batches[b], center, last, report, sizeof report);
                report_view v;
                report_view_open(&v, report);
                print_message("center %d, last_token %d, batch %d\n", center, last, batches[b]);
                check_stream(&v, 0, cosine, angle, 2e-6);
                assert_int_equal((int)report_view_scalar(&v, "similarity", "tokens"), last ? BATCH : ROWS);
                report_view_close(&v);
            }
        }
    free_acts(h, NH);
}

static void test_two_streams(void **state)
{
    (void)state;
    sp_real *h[2 * NH];
    make_chain(h, 2, D, 33);
    char dump[4200], report[4200];
    write_dump("siamese.h5", h, 2, D, dump, sizeof dump);
    run(dump, "siamese_report.h5", 4, 0, 0, report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    double cosine[NH * NH], angle[NH * NH];
    for (int k = 0; k < 2; k++) {
        reference(h, 2, k, 0, 0, cosine, angle);
        check_stream(&v, k, cosine, angle, 2e-6);
    }
    report_view_close(&v);
    free_acts(h, 2 * NH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical_layers),
        cmocka_unit_test(test_independent_layers),
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_two_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

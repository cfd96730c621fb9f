/* The "hidden_spectra" and "ffn_spectra" analyzers through the analyze driver, on synthetic
 * activation dumps. Known answers: rows built from orthogonal +-1 patterns (Hadamard columns, zero
 * mean, exactly orthogonal) in k rotated directions plus an offset have k equal covariance
 * eigenvalues, so soft and hard rank are k / D and the participation ratio is k; scaled patterns
 * give known unequal eigenvalues, hence known ranks and EDR. Independent reference: the covariance
 * from plain fp64 loops, its eigenvalues by LAPACK, on random data, streamed in single sequences.
 * Memory: the backend peak of a spectra run (be->mem_stats after be->mem_reset_peak, which the
 * driver takes per stage and records as run/peak_backend_mib) is the same on 4x the evaluation
 * tokens, and holds the fp64 totals and sp_real partial sums of every layer. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzers/linalg.h"
#include "support/act_dump.h"
#include "support/assert_err.h"
#include "support/report_view.h"
#include "support/scratch.h"
#include "support/vec_util.h"

enum { L = 2, NH = L + 1, D = 12, DFF = 16, BATCH = 8, SEQ = 8, N = BATCH * SEQ };

/* Entry (t, i) of the Sylvester-Hadamard matrix of order 8, i = 1..7: orthogonal zero-mean columns. */
static double hadamard(int t, int i)
{
    return __builtin_popcount((unsigned)((t % 8) & i)) % 2 ? -1.0 : 1.0;
}

/* A Householder reflection I - 2 v v' / v'v of size dim (orthogonal), v drawn from seed. */
static void reflection(int dim, uint64_t seed, double *q)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    double v[64], vv = 0;
    for (int i = 0; i < dim; i++) {
        v[i] = sp_rng_normal(&rng);
        vv += v[i] * v[i];
    }
    for (int i = 0; i < dim; i++)
        for (int j = 0; j < dim; j++)
            q[i * dim + j] = (i == j) - 2 * v[i] * v[j] / vv;
}

/* Rows offset + sum_{i < k} scale[i] h_{i+1}(t) q_i (q_i rows of a reflection): the covariance
 * eigenvalues are 8 (N / 8) scale[i]^2 / (N - 1), the rest 0. */
static sp_real *patterned(int dim, int k, const double *scale, uint64_t seed)
{
    double q[64 * 64];
    reflection(dim, seed, q);
    sp_real *x = vec_zeros((size_t)N * dim);
    for (int t = 0; t < N; t++)
        for (int j = 0; j < dim; j++) {
            double v = 3.0 + 0.25 * j;
            for (int i = 0; i < k; i++)
                v += scale[i] * hadamard(t, i + 1) * q[i * dim + j];
            x[t * dim + j] = (sp_real)v;
        }
    return x;
}

static void analyze(sp_real **h, sp_real **latent, const char *metrics, int batch, const char *name, char *report,
                    size_t len)
{
    char dump[4200], dump_name[80];
    snprintf(dump_name, sizeof dump_name, "dump_%s", name);
    scratch_path(dump, sizeof dump, dump_name);
    act_dump_spec spec = {.n_layers = L, .d_model = D, .n_streams = 1, .d_ff = DFF, .batch = BATCH, .seq_len = SEQ,
                          .hidden = h, .latent = latent};
    act_dump_write(dump, &spec);
    sp_analyze_options o;
    sp_analyze_options_defaults(&o);
    snprintf(o.metrics, sizeof o.metrics, "%s", metrics);
    o.batch = batch;
    scratch_path(report, len, name);
    act_dump_analyze(dump, report, &o);
}

/* Soft and hard rank (normalized by dim) of a spectrum given by its nonzero eigenvalues. */
static void ranks(int k, const double *lambda, int dim, double *soft, double *hard)
{
    double sum = 0, sum_sq = 0, ent = 0;
    for (int i = 0; i < k; i++) {
        sum += lambda[i];
        sum_sq += lambda[i] * lambda[i];
    }
    for (int i = 0; i < k; i++)
        ent -= lambda[i] / sum * log(lambda[i] / sum);
    *soft = exp(ent) / dim;
    *hard = sum * sum / sum_sq / dim;
}

static void test_known_spectra(void **state)
{
    (void)state;
    const double ones[7] = {1, 1, 1, 1, 1, 1, 1}, graded[5] = {5, 4, 3, 2, 1};
    const int k_hidden[NH] = {1, 4, 7};
    sp_real *h[NH], *lat[L];
    for (int l = 0; l < NH; l++)
        h[l] = patterned(D, k_hidden[l], ones, 10 + l);
    lat[0] = patterned(DFF, 5, graded, 20);
    lat[1] = patterned(DFF, 3, ones, 21);
    char report[4200];
    analyze(h, lat, "hidden_spectra,ffn_spectra", 3, "known.h5", report, sizeof report);
    report_view v;
    report_view_open(&v, report);

    double *soft = report_view_array(&v, "hidden_spectra", "soft_rank", NULL, NULL);
    double *hard = report_view_array(&v, "hidden_spectra", "hard_rank", NULL, NULL);
    double *eig = report_view_array(&v, "hidden_spectra", "eigenvalues", NULL, NULL);
    for (int l = 0; l < NH; l++) {
        int k = k_hidden[l];
        assert_below(fabs(hard[l] * D - k), 1e-4, "participation ratio of layer %d", l);
        assert_below(fabs(soft[l] * D - k), 1e-3, "Shannon effective rank of layer %d", l);
        for (int i = 0; i < D; i++)
            assert_below(fabs(eig[l * D + i] - (i < k ? (double)N / (N - 1) : 0)), 1e-5, "eigenvalue %d of layer %d",
                         i, l);
    }
    free(soft);
    free(hard);
    free(eig);

    double want_soft[L], want_hard[L], lambda[5], equal[3];
    for (int i = 0; i < 5; i++)
        lambda[i] = graded[i] * graded[i] * (double)N / (N - 1);
    for (int i = 0; i < 3; i++)
        equal[i] = (double)N / (N - 1);
    ranks(5, lambda, DFF, &want_soft[0], &want_hard[0]);
    ranks(3, equal, DFF, &want_soft[1], &want_hard[1]);
    soft = report_view_array(&v, "ffn_spectra", "soft_rank", NULL, NULL);
    hard = report_view_array(&v, "ffn_spectra", "hard_rank", NULL, NULL);
    eig = report_view_array(&v, "ffn_spectra", "eigenvalues", NULL, NULL);
    for (int i = 0; i < 5; i++)
        assert_below(fabs(eig[i] - lambda[i]) / lambda[i], 1e-5, "FFN eigenvalue %d", i);
    double edr = 0;
    for (int l = 0; l < L; l++) {
        assert_below(fabs(soft[l] - want_soft[l]), 1e-4, "FFN soft rank of block %d", l);
        assert_below(fabs(hard[l] - want_hard[l]), 1e-5, "FFN hard rank of block %d", l);
        edr += 100 * (want_hard[l] / want_soft[l]) / L;
    }
    assert_below(fabs(report_view_scalar(&v, "ffn_spectra", "edr") - edr), 1e-2, "EDR");
    assert_int_equal((int)report_view_scalar(&v, "ffn_spectra", "n_tokens"), N);
    assert_int_equal((int)report_view_scalar(&v, "ffn_spectra", "n_below_10d"), N < 10 * DFF);
    assert_int_equal((int)report_view_scalar(&v, "hidden_spectra", "dim"), D);
    free(soft);
    free(hard);
    free(eig);
    report_view_close(&v);
    for (int l = 0; l < NH; l++)
        free(h[l]);
    for (int l = 0; l < L; l++)
        free(lat[l]);
}

/* Eigenvalues of the fp64 covariance of x [N, D] from plain loops. */
static void reference_eigenvalues(const sp_real *x, double *w)
{
    double mean[D] = {0}, cov[D * D];
    for (int t = 0; t < N; t++)
        for (int j = 0; j < D; j++)
            mean[j] += x[t * D + j] / (double)N;
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            double s = 0;
            for (int t = 0; t < N; t++)
                s += (x[t * D + i] - mean[i]) * (x[t * D + j] - mean[j]);
            cov[i * D + j] = s / (N - 1);
        }
    assert_int_equal(sp_linalg_sym_eigvals(D, cov, w), SP_OK);
}

static void test_against_reference(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 31);
    sp_real *h[NH];
    for (int l = 0; l < NH; l++) {
        h[l] = vec_random(&rng, N * D, 1.0);
        for (int e = 0; e < N * D; e++)
            h[l][e] = (sp_real)(h[l][e] * (1 + e % D) + 50); /* unequal variances, a large mean */
    }
    char report[4200];
    analyze(h, NULL, "hidden_spectra,ffn_spectra", 1, "random.h5", report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    /* the dump has no FFN latents: recorded, not dropped */
    const char *reason = report_view_skipped(&v, "ffn_spectra");
    assert_true(reason && strstr(reason, "FFN latents"));
    double *eig = report_view_array(&v, "hidden_spectra", "eigenvalues", NULL, NULL);
    double *trace = report_view_array(&v, "hidden_spectra", "trace", NULL, NULL);
    double *hard = report_view_array(&v, "hidden_spectra", "hard_rank", NULL, NULL);
    for (int l = 0; l < NH; l++) {
        double w[D], sum = 0, sum_sq = 0;
        reference_eigenvalues(h[l], w);
        for (int i = 0; i < D; i++) {
            assert_below(fabs(eig[l * D + i] - w[i]), 1e-5 * w[0], "eigenvalue %d of layer %d", i, l);
            sum += w[i];
            sum_sq += w[i] * w[i];
        }
        assert_below(fabs(trace[l] - sum), 1e-5 * sum, "trace of layer %d", l);
        assert_below(fabs(hard[l] - sum * sum / sum_sq / D), 1e-5, "hard rank of layer %d", l);
    }
    assert_int_equal((int)report_view_scalar(&v, "hidden_spectra", "n_below_10d"), N < 10 * D);
    free(eig);
    free(trace);
    free(hard);
    report_view_close(&v);
    for (int l = 0; l < NH; l++)
        free(h[l]);
}

/* Backend peak bytes of a hidden_spectra + ffn_spectra run on a random dump of n_seqs sequences,
 * two per pass. */
static double spectra_peak(int n_seqs, const char *name)
{
    const int rows = n_seqs * SEQ;
    sp_rng rng;
    sp_rng_seed(&rng, 41);
    sp_real *h[NH], *lat[L];
    for (int l = 0; l < NH; l++)
        h[l] = vec_random(&rng, (size_t)rows * D, 1.0);
    for (int l = 0; l < L; l++)
        lat[l] = vec_random(&rng, (size_t)rows * DFF, 1.0);
    char dump[4200], dump_name[80], report[4200];
    snprintf(dump_name, sizeof dump_name, "dump_%s", name);
    scratch_path(dump, sizeof dump, dump_name);
    act_dump_spec spec = {.n_layers = L, .d_model = D, .n_streams = 1, .d_ff = DFF, .batch = n_seqs, .seq_len = SEQ,
                          .hidden = h, .latent = lat};
    act_dump_write(dump, &spec);
    sp_analyze_options o;
    sp_analyze_options_defaults(&o);
    snprintf(o.metrics, sizeof o.metrics, "hidden_spectra,ffn_spectra");
    o.batch = 2;
    scratch_path(report, sizeof report, name);
    act_dump_analyze(dump, report, &o);
    report_view v;
    report_view_open(&v, report);
    assert_int_equal((int)report_view_scalar(&v, "ffn_spectra", "n_tokens"), rows);
    const double peak = report_view_scalar(&v, "run", "peak_backend_mib") * 1048576.0;
    report_view_close(&v);
    for (int l = 0; l < NH; l++)
        free(h[l]);
    for (int l = 0; l < L; l++)
        free(lat[l]);
    return peak;
}

static void test_memory_flat_in_tokens(void **state)
{
    (void)state;
    const double small = spectra_peak(BATCH, "mem_small.h5"), large = spectra_peak(4 * BATCH, "mem_large.h5");
    /* every block's FFN covariance accumulator: fp64 totals and sp_real partial sums */
    assert_true(small >= (double)L * DFF * DFF * (sizeof(double) + sizeof(sp_real)));
    if (large > small)
        fail_msg("backend peak %.0f bytes on %d tokens, %.0f on 4x as many", small, BATCH * SEQ, large);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_spectra),
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_memory_flat_in_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The "weights" analyzer, in double, on tiny models (d_model 8, 2 query heads of 4, 1 kv head,
 * d_ff 12, 4 blocks).
 * Known answers:
 * - every block matrix set to a slice of a random orthogonal matrix (orthonormal rows or columns):
 *   kappa 1, spectral norm 1, stable rank min(m, n), for every head slice too;
 * - W_O = a diagonal matrix: singular values = its |entries| sorted, kappa = max / min, stable rank
 *   = sum e^2 / max e^2 (also the stored singular values with --singular-values);
 * - W_2 = 0: kappa +inf, flagged, counted in n_kappa_inf; a GELU model's W_3 column is NaN.
 * Independent reference: on a randomly initialized SwiGLU model, every matrix (and every head
 * slice) against the square roots of the eigenvalues of its Gram matrix W W^T or W^T W (LAPACK
 * dsyev, a different algorithm from the analyzer's dgesdd), medians over heads and the summary means
 * recomputed here. Tolerances 1e-10 relative (the Gram route squares the condition number, ~1e2). */
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

#include "tests/support/an_run.h"
#include "tests/support/assert_err.h"
#include "tests/support/model_fixture.h"
#include "tests/support/vec_util.h"

extern const sp_analyzer sp_analyzer_weights;

enum { M_WQ, M_WK, M_WV, M_WO, M_W1, M_W2, M_W3, N_MATRICES };
static const char *const leaves[N_MATRICES] = {"attn/wq", "attn/wk", "attn/wv", "attn/wo", "ffn/w1", "ffn/w2", "ffn/w3"};

static int param_index(sp_model *m, int l, int mat)
{
    char name[64];
    snprintf(name, sizeof name, "blocks/%d/%s", l, leaves[mat]);
    return sp_model_find_param(m, name);
}

static double rel(double got, double want) { return fabs(got - want) / fmax(fabs(want), 1e-300); }

/* Runs the analyzer; returns the three tables [stat][layer * 7 + matrix] (caller frees). */
static double *run_tables(an_run *r, const char *file)
{
    assert_int_equal(an_run_finish(r, &sp_analyzer_weights, file), SP_OK);
    const char *names[3] = {"kappa", "spectral_norm", "stable_rank"};
    double *out = NULL;
    size_t cells = 0;
    for (int s = 0; s < 3; s++) {
        sp_report_array a = an_run_array(r, "weights", names[s]);
        assert_int_equal(a.rank, 2);
        assert_int_equal(a.shape[1], N_MATRICES);
        assert_string_equal(a.shape_desc, "[block, matrix]");
        if (!out) {
            cells = (size_t)a.shape[0] * N_MATRICES;
            out = malloc(3 * cells * sizeof *out);
        }
        memcpy(out + s * cells, a.data, cells * sizeof *out);
        sp_report_array_free(&a);
    }
    return out;
}

/* A random n x n orthogonal matrix (QR of a Gaussian one). */
static double *random_orthogonal(int n, sp_rng *rng)
{
    double *q = malloc((size_t)n * n * sizeof *q), *tau = malloc((size_t)n * sizeof *tau);
    for (int i = 0; i < n * n; i++)
        q[i] = sp_rng_normal(rng);
    assert_int_equal(LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, n, n, q, n, tau), 0);
    assert_int_equal(LAPACKE_dorgqr(LAPACK_ROW_MAJOR, n, n, n, q, n, tau), 0);
    free(tau);
    return q;
}

/* Every matrix (and every head's row slice) with orthonormal rows or columns: kappa 1, spectral norm
 * 1, stable rank min(m, n). head_dim 0: d_model / n_heads; 3: W_Q [6, 8], W_O [8, 6]. */
static void check_orthogonal(int head_dim)
{
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_SPAN, SP_NORM_LAYERNORM, SP_FFN_SWIGLU, SP_POS_LEARNED);
    cfg.head_dim = head_dim;
    assert_int_equal(sp_config_validate(&cfg, "orthogonal"), SP_OK);
    sp_model *m = fixture_model(&cfg, 1, 0);
    sp_rng rng;
    sp_rng_seed(&rng, 2);
    for (int l = 0; l < cfg.n_layers; l++)
        for (int mat = 0; mat < N_MATRICES; mat++) {
            int i = param_index(m, l, mat);
            const sp_param_spec *spec = sp_model_param_spec(m, i);
            int rows = (int)spec->shape[0], cols = (int)spec->shape[1], n = rows > cols ? rows : cols;
            double *q = random_orthogonal(n, &rng);
            sp_real *w = vec_zeros((size_t)rows * cols);
            for (int r = 0; r < rows; r++)
                for (int c = 0; c < cols; c++)
                    w[r * cols + c] = q[r * n + c];
            sp_model_set_param(m, i, w);
            free(q);
            free(w);
        }
    an_run r;
    an_run_setup(&r, m, 1, 4, 1, 3);
    double *t = run_tables(&r, "orthogonal.h5");
    const size_t cells = (size_t)cfg.n_layers * N_MATRICES;
    for (int l = 0; l < cfg.n_layers; l++)
        for (int mat = 0; mat < N_MATRICES; mat++) {
            const sp_param_spec *spec = sp_model_param_spec(m, param_index(m, l, mat));
            int rows = (int)spec->shape[0], cols = (int)spec->shape[1];
            if (mat <= M_WV)
                rows = sp_config_head_dim(&cfg); /* per head */
            size_t at = (size_t)l * N_MATRICES + mat;
            assert_below(fabs(t[at] - 1), 1e-12, "kappa block %d matrix %d", l, mat);
            assert_below(fabs(t[cells + at] - 1), 1e-12, "spectral norm block %d matrix %d", l, mat);
            assert_below(fabs(t[2 * cells + at] - (rows < cols ? rows : cols)), 1e-11, "stable rank %d %d", l, mat);
        }
    assert_true(an_run_scalar(&r, "weights", "kappa_w1_deep_mean") - 1 < 1e-12);
    assert_true(an_run_scalar(&r, "weights", "n_kappa_inf") == 0);
    free(t);
    an_run_free(&r);
    sp_model_free(m);
}

static void test_orthogonal(void **state)
{
    (void)state;
    check_orthogonal(0);
    check_orthogonal(3);
}

static int cmp_desc(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return (p < q) - (p > q);
}

static void test_diagonal_and_zero(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
    sp_model *m = fixture_model(&cfg, 4, 0);
    const int d = cfg.d_model;
    const double e[8] = {3, -2, 1, 0.5, 0.25, 4, 0.1, 1};
    sp_real *wo = vec_zeros((size_t)d * d);
    for (int i = 0; i < d; i++)
        wo[i * d + i] = (sp_real)e[i];
    sp_model_set_param(m, param_index(m, 2, M_WO), wo);
    free(wo);
    const int w2 = param_index(m, 1, M_W2);
    sp_real *zero = vec_zeros(sp_param_numel(sp_model_param_spec(m, w2)));
    sp_model_set_param(m, w2, zero);
    free(zero);

    an_run r;
    an_run_setup(&r, m, 1, 4, 1, 5);
    r.opts.singular_values = 1;
    double *t = run_tables(&r, "diagonal.h5");
    const size_t cells = (size_t)cfg.n_layers * N_MATRICES;
    const size_t at_wo = 2 * N_MATRICES + M_WO, at_w2 = 1 * N_MATRICES + M_W2;
    double sorted[8], ss = 0;
    for (int i = 0; i < d; i++) {
        sorted[i] = fabs(e[i]);
        ss += e[i] * e[i];
    }
    qsort(sorted, 8, sizeof *sorted, cmp_desc);
    assert_below(rel(t[at_wo], 40), 1e-12, "kappa of the diagonal W_O");
    assert_below(rel(t[cells + at_wo], 4), 1e-12, "spectral norm of the diagonal W_O");
    assert_below(rel(t[2 * cells + at_wo], ss / 16), 1e-12, "stable rank of the diagonal W_O");
    sp_report_array sv = an_run_array(&r, "weights", "sv_2_wo");
    assert_int_equal(sv.rank, 1);
    assert_int_equal(sv.shape[0], d);
    for (int i = 0; i < d; i++)
        assert_below(rel(sv.data[i], sorted[i]), 1e-12, "singular value %d", i);
    sp_report_array_free(&sv);
    sp_report_array svq = an_run_array(&r, "weights", "sv_0_wq");
    assert_int_equal(svq.rank, 2);
    assert_int_equal(svq.shape[0], cfg.n_heads);
    sp_report_array_free(&svq);
    /* one kv head: the per-head arrays of W_K and W_V hold that head, the table's own cells */
    const int kinds[2] = {M_WK, M_WV};
    const char *kind_names[2] = {"heads_wk", "heads_wv"};
    for (int kind = 0; kind < 2; kind++) {
        sp_report_array heads = an_run_array(&r, "weights", kind_names[kind]);
        assert_int_equal(heads.shape[1], 1);
        for (int l = 0; l < cfg.n_layers; l++)
            for (int st = 0; st < 3; st++) {
                const double want = t[(size_t)st * cells + (size_t)l * N_MATRICES + (size_t)kinds[kind]];
                const double got = heads.data[l * 3 + st];
                assert_true(got == want || (isnan(got) && isnan(want)));
            }
        sp_report_array_free(&heads);
    }

    assert_true(isinf(t[at_w2]) && t[at_w2] > 0);
    assert_true(t[cells + at_w2] == 0);
    assert_true(isnan(t[2 * cells + at_w2]));
    sp_report_array flags = an_run_array(&r, "weights", "kappa_inf");
    for (size_t i = 0; i < cells; i++) {
        if (i % N_MATRICES == M_W3)
            assert_true(isnan(flags.data[i]) && isnan(t[i]));
        else
            assert_true(flags.data[i] == (i == at_w2));
    }
    sp_report_array_free(&flags);
    assert_true(an_run_scalar(&r, "weights", "n_kappa_inf") == 1);
    assert_true(isnan(an_run_scalar(&r, "weights", "kappa_w2_mean"))); /* +inf becomes null */
    assert_false(an_run_has_scalar(&r, "weights", "kappa_w3_mean"));   /* GELU: no W_3 */
    free(t);
    an_run_free(&r);
    sp_model_free(m);
}

/* kappa, spectral norm, stable rank of a rows x cols matrix from the eigenvalues of its smaller Gram. */
static void gram_stats(int rows, int cols, const sp_real *w, double *out)
{
    int k = rows < cols ? rows : cols;
    double *g = calloc((size_t)k * k, sizeof *g), *ev = malloc((size_t)k * sizeof *ev);
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++)
            for (int e = 0; e < (rows < cols ? cols : rows); e++)
                g[i * k + j] += rows < cols ? (double)w[i * cols + e] * w[j * cols + e]
                                            : (double)w[e * cols + i] * w[e * cols + j];
    assert_int_equal(LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'U', k, g, k, ev), 0); /* ascending */
    double ss = 0;
    for (int i = 0; i < k; i++)
        ss += ev[i];
    out[0] = sqrt(ev[k - 1] / ev[0]);
    out[1] = sqrt(ev[k - 1]);
    out[2] = ss / ev[k - 1];
    free(g);
    free(ev);
}

static void test_against_gram_eigenvalues(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_SIAMESE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
    cfg.n_kv_heads = 2; /* per-head slices of W_K and W_V too */
    sp_model *m = fixture_model(&cfg, 6, 0.3);
    an_run r;
    an_run_setup(&r, m, 1, 4, 1, 7);
    double *t = run_tables(&r, "random.h5");
    const int L = cfg.n_layers, hd = sp_config_head_dim(&cfg);
    const size_t cells = (size_t)L * N_MATRICES;
    sp_report_array heads_q = an_run_array(&r, "weights", "heads_wq");
    assert_int_equal(heads_q.rank, 3);
    assert_int_equal(heads_q.shape[1], 2);
    assert_int_equal(heads_q.shape[2], 3);
    double kappa_w1_deep = 0;
    for (int l = 0; l < L; l++)
        for (int mat = 0; mat < N_MATRICES; mat++) {
            int i = param_index(m, l, mat);
            const sp_param_spec *spec = sp_model_param_spec(m, i);
            int rows = (int)spec->shape[0], cols = (int)spec->shape[1];
            sp_real *w = vec_zeros(sp_param_numel(spec));
            sp_model_get_param(m, i, w);
            int n_parts = mat <= M_WV ? rows / hd : 1;
            double stats[2][3];
            for (int p = 0; p < n_parts; p++)
                gram_stats(rows / n_parts, cols, w + (size_t)p * (rows / n_parts) * cols, stats[p]);
            for (int s = 0; s < 3; s++) {
                double want = n_parts == 2 ? 0.5 * (stats[0][s] + stats[1][s]) : stats[0][s]; /* median of two */
                assert_below(rel(t[s * cells + (size_t)l * N_MATRICES + mat], want), 1e-10, "block %d matrix %d stat %d",
                             l, mat, s);
                if (mat == M_WQ)
                    for (int p = 0; p < 2; p++)
                        assert_below(rel(heads_q.data[(l * 2 + p) * 3 + s], stats[p][s]), 1e-10, "head %d", p);
            }
            if (mat == M_W1 && l >= L / 2)
                kappa_w1_deep += stats[0][0] / (L - L / 2);
            free(w);
        }
    assert_below(rel(an_run_scalar(&r, "weights", "kappa_w1_deep_mean"), kappa_w1_deep), 1e-10, "deep mean");
    sp_report_array_free(&heads_q);
    free(t);
    an_run_free(&r);
    sp_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orthogonal),
        cmocka_unit_test(test_diagonal_and_zero),
        cmocka_unit_test(test_against_gram_eigenvalues),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

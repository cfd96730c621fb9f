/* The "jacobian" analyzer and analyzers/block_jacobian.h, in double, on tiny models (d_model 8,
 * 4 blocks, one sequence of 6 tokens).
 *
 * Independent reference: every block's full sequence Jacobian built column by column from
 * five-point central differences of sp_model_block_apply (step 1e-4, error ~1e-10), its singular
 * values by LAPACK (dgesdd). Against it:
 * - sigma_max and the top-k (block Lanczos), run with power_tol 1e-13 so
 *   the iterations converge: relative error < 1e-7;
 * - end to end: the SVD of the product of the finite-difference block Jacobians J_{L-1} ... J_l;
 * - token-local: the diagonal (t, t) block of the finite-difference Jacobian, entry by entry
 *   (sp_block_token_jacobians, with one and with many copies per forward pass, gathered on the
 *   backend as J_t^T), every singular value of the backend's batched SVD of it, and its sigma_max
 *   and Frobenius norm in the report.
 * Known answers:
 * - pre with W_O = W_2 = 0 in every block: each block is the identity: every singular value 1,
 *   token-local sigma 1 and ||J_t||_F / sqrt(d) = 1, end to end 1;
 * - post with W_O = W_2 = 0, unit gains, zero biases and eps 1e-12: x' = N2(N1(x)), whose
 *   Jacobian at token t is P_t / sigma_t with P_t the projection off {1, x_t - mean}: sigma_max(J_t)
 *   = 1 / sigma_t, ||J_t||_F / sqrt(d) = sqrt((d - 2) / d) / sigma_t, and the sequence Jacobian is
 *   block diagonal: its top singular values are the largest 1 / sigma_t, each d - 2 times.
 * --jac-seq: a run on the first tokens of longer sequences gives the report of a run on those tokens.
 * Theory terms: sigma_a, sigma_z against their definition on the model's slots, ||W_2 W_1|| and
 * ||W_O W_V|| against naive products and LAPACK, the bound against its formula. */
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

#include "analyzers/block_jacobian.h"
#include "tests/support/an_run.h"
#include "tests/support/assert_err.h"
#include "tests/support/model_fixture.h"
#include "tests/support/vec_util.h"

extern const sp_analyzer sp_analyzer_jacobian;

#define T 6
#define N_SEQS 2
#define TOPK 4
#define JAC_TOKENS 3
#define FD_STEP 1e-4
#define TOL 1e-7

typedef struct {
    sp_model *m;
    an_run r;
    int L, S, d, n; /* n = S T d */
} fixture;

static void setup_config(fixture *f, const sp_config *cfg, double jitter, uint64_t seed)
{
    f->m = fixture_model(cfg, seed, jitter);
    f->L = cfg->n_layers;
    f->S = sp_config_n_streams(cfg);
    f->d = cfg->d_model;
    f->n = f->S * T * f->d;
    an_run_setup(&f->r, f->m, N_SEQS, T, N_SEQS, seed + 1);
    f->r.opts.topk = TOPK;
    f->r.opts.jac_tokens = JAC_TOKENS;
    f->r.opts.power_iters = 5000;
    f->r.opts.power_tol = 1e-13;
}

static void setup(fixture *f, int variant, int norm, int ffn, int pos, double jitter, uint64_t seed)
{
    sp_config cfg;
    fixture_tiny_config(&cfg, variant, norm, ffn, pos);
    setup_config(f, &cfg, jitter, seed);
}

static void teardown(fixture *f)
{
    an_run_free(&f->r);
    sp_model_free(f->m);
}

/* Zeroes blocks/<l>/<leaf> in every block. */
static void zero_in_blocks(sp_model *m, const char *leaf)
{
    for (int l = 0; l < sp_model_config(m)->n_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "blocks/%d/%s", l, leaf);
        int i = sp_model_find_param(m, name);
        assert_true(i >= 0);
        sp_real *z = vec_zeros(sp_param_numel(sp_model_param_spec(m, i)));
        sp_model_set_param(m, i, z);
        free(z);
    }
}

/* Block l's Jacobian around the forward pass of sequence 0 (batch 1), row-major n x n, by five-point
 * central differences of block_apply; vectors are [stream][position][feature]. */
static double *fd_jacobian(fixture *f, int l)
{
    const sp_backend *be = sp_model_backend(f->m);
    const int per = T * f->d, n = f->n;
    assert_int_equal(sp_model_forward(f->m, f->r.tokens, NULL, 1, T, NULL), SP_OK);
    sp_real *x[2] = {0}, *in[2] = {0}, *out[2] = {0};
    for (int s = 0; s < f->S; s++) {
        x[s] = fixture_download(f->m, sp_model_hidden(f->m, l, s), (size_t)per);
        in[s] = be->alloc((size_t)per * sizeof(sp_real), "fd in");
        out[s] = be->alloc((size_t)per * sizeof(sp_real), "fd out");
    }
    double *jac = calloc((size_t)n * n, sizeof *jac);
    const double steps[4] = {FD_STEP, -FD_STEP, 2 * FD_STEP, -2 * FD_STEP}, weights[4] = {8, -8, -1, 1};
    sp_real *y = vec_zeros((size_t)per);
    for (int col = 0; col < n; col++) {
        const int cs = col / per, ce = col % per;
        for (int k = 0; k < 4; k++) {
            for (int s = 0; s < f->S; s++) {
                sp_real *shifted = vec_dup((size_t)per, x[s]);
                if (s == cs)
                    shifted[ce] += (sp_real)steps[k];
                be->upload(in[s], shifted, (size_t)per * sizeof(sp_real));
                free(shifted);
            }
            assert_int_equal(sp_model_block_apply(f->m, l, (const sp_real *const *)in, out), SP_OK);
            for (int s = 0; s < f->S; s++) {
                be->download(y, out[s], (size_t)per * sizeof(sp_real));
                for (int e = 0; e < per; e++)
                    jac[(size_t)(s * per + e) * n + col] += weights[k] * y[e] / (12 * FD_STEP);
            }
        }
    }
    free(y);
    for (int s = 0; s < f->S; s++) {
        free(x[s]);
        be->free(in[s]);
        be->free(out[s]);
    }
    return jac;
}

/* Singular values (descending) of a row-major m x m matrix, by LAPACK; a is not modified. */
static double *svd(int m, const double *a)
{
    double *copy = malloc((size_t)m * m * sizeof *copy), *s = malloc((size_t)m * sizeof *s);
    memcpy(copy, a, (size_t)m * m * sizeof *copy);
    assert_int_equal(LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', m, m, copy, m, s, NULL, m, NULL, m), 0);
    free(copy);
    return s;
}

static double *matmul(int n, const double *a, const double *b)
{
    double *c = calloc((size_t)n * n, sizeof *c);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
    return c;
}

/* The (t, t) block of a sequence Jacobian: (S d) x (S d). */
static double *diagonal_block(const fixture *f, const double *jac, int t)
{
    const int sd = f->S * f->d, per = T * f->d;
    double *b = calloc((size_t)sd * sd, sizeof *b);
    for (int r = 0; r < sd; r++)
        for (int c = 0; c < sd; c++)
            b[r * sd + c] = jac[(size_t)((r / f->d) * per + t * f->d + r % f->d) * f->n + (c / f->d) * per +
                                t * f->d + c % f->d];
    return b;
}

static double rel(double got, double want) { return fabs(got - want) / fmax(fabs(want), 1e-300); }

/* The report against the finite-difference references. */
static void check_against_fd(fixture *f, const char *what)
{
    assert_int_equal(an_run_finish(&f->r, &sp_analyzer_jacobian, "jac.h5"), SP_OK);
    sp_report_array sigma = an_run_array(&f->r, "jacobian", "sigma_max");
    sp_report_array topk = an_run_array(&f->r, "jacobian", "topk");
    sp_report_array e2e = an_run_array(&f->r, "jacobian", "e2e_sigma_max");
    sp_report_array pos = an_run_array(&f->r, "jacobian", "token_positions");
    sp_report_array tsig = an_run_array(&f->r, "jacobian", "token_sigma_max");
    sp_report_array tfrob = an_run_array(&f->r, "jacobian", "token_frob");
    assert_int_equal(topk.shape[1], TOPK);
    assert_int_equal(pos.shape[0], JAC_TOKENS);
    assert_true(an_run_scalar(&f->r, "jacobian", "not_converged") == 0);

    const int n = f->n, sd = f->S * f->d;
    double **jac = calloc((size_t)f->L, sizeof *jac);
    for (int l = 0; l < f->L; l++)
        jac[l] = fd_jacobian(f, l);
    for (int l = 0; l < f->L; l++) {
        double *s = svd(n, jac[l]);
        assert_below(rel(sigma.data[l], s[0]), TOL, "%s block %d sigma_max %.12g vs %.12g", what, l, sigma.data[l], s[0]);
        for (int i = 0; i < TOPK; i++)
            assert_below(rel(topk.data[l * TOPK + i], s[i]), TOL, "%s block %d sigma_%d", what, l, i + 1);
        free(s);

        /* end to end: J_{L-1} ... J_l */
        double *prod = malloc((size_t)n * n * sizeof *prod);
        memcpy(prod, jac[l], (size_t)n * n * sizeof *prod);
        for (int k = l + 1; k < f->L; k++) {
            double *next = matmul(n, jac[k], prod);
            free(prod);
            prod = next;
        }
        s = svd(n, prod);
        assert_below(rel(e2e.data[l], s[0]), TOL, "%s end to end from %d", what, l);
        free(s);
        free(prod);

        for (int i = 0; i < JAC_TOKENS; i++) {
            double *b = diagonal_block(f, jac[l], (int)pos.data[i]);
            s = svd(sd, b);
            double ss = 0;
            for (int e = 0; e < sd; e++)
                ss += s[e] * s[e];
            assert_below(rel(tsig.data[l * JAC_TOKENS + i], s[0]), TOL, "%s block %d token %d sigma", what, l, i);
            assert_below(rel(tfrob.data[l * JAC_TOKENS + i], sqrt(ss / sd)), TOL, "%s block %d token %d frob", what, l, i);
            free(s);
            free(b);
        }
    }

    /* J_t entry by entry at the last position and at position 2, one copy and many per pass (the
     * backend holds J_t^T), and all its singular values from the backend's batched SVD */
    const sp_backend *be = sp_model_backend(f->m);
    const size_t nn = (size_t)sd * sd;
    double *jt_dev = be->alloc((size_t)f->L * nn * sizeof *jt_dev, "J_t");
    double *s_dev = be->alloc((size_t)f->L * sd * sizeof *s_dev, "J_t singular values");
    double *jt = malloc((size_t)f->L * nn * sizeof *jt), *sv = malloc((size_t)f->L * sd * sizeof *sv);
    const int positions[2] = {T - 1, 2}, max_rows[2] = {1, 1000};
    for (int p = 0; p < 2; p++) {
        assert_int_equal(sp_block_token_jacobians(f->m, f->r.tokens, positions[p] + 1, max_rows[p], jt_dev), SP_OK);
        be->download(jt, jt_dev, (size_t)f->L * nn * sizeof *jt);
        assert_int_equal(be->singvals(sd, sd, f->L, jt_dev, s_dev), SP_OK);
        be->download(sv, s_dev, (size_t)f->L * sd * sizeof *sv);
        for (int l = 0; l < f->L; l++) {
            double *b = diagonal_block(f, jac[l], positions[p]);
            double err = 0, scale = 0;
            for (int r = 0; r < sd; r++)
                for (int c = 0; c < sd; c++) {
                    err = fmax(err, fabs(jt[(size_t)l * nn + (size_t)c * sd + r] - b[r * sd + c]));
                    scale = fmax(scale, fabs(b[r * sd + c]));
                }
            assert_below(err / scale, 1e-8, "%s J_t entries, block %d, t = %d", what, l, positions[p]);
            double *s = svd(sd, b);
            for (int e = 0; e < sd; e++)
                assert_below(fabs(sv[(size_t)l * sd + e] - s[e]) / s[0], TOL, "%s J_t sigma_%d, block %d, t = %d", what,
                             e + 1, l, positions[p]);
            free(s);
            free(b);
        }
    }
    be->free(jt_dev);
    be->free(s_dev);
    free(jt);
    free(sv);
    for (int l = 0; l < f->L; l++)
        free(jac[l]);
    free(jac);
    sp_report_array *arrays[] = {&sigma, &topk, &e2e, &pos, &tsig, &tfrob};
    for (size_t i = 0; i < SP_ARRAY_LEN(arrays); i++)
        sp_report_array_free(arrays[i]);
}

static void test_fd_pre(void **state)
{
    (void)state;
    fixture f;
    setup(&f, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED, 0.3, 21);
    check_against_fd(&f, "pre");
    teardown(&f);
}

static void test_fd_span_swiglu_rope(void **state)
{
    (void)state;
    fixture f;
    setup(&f, SP_VARIANT_SPAN, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE, 0.3, 22);
    check_against_fd(&f, "span");
    teardown(&f);
}

static void test_fd_siamese(void **state)
{
    (void)state;
    fixture f;
    setup(&f, SP_VARIANT_SIAMESE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED, 0.3, 23);
    check_against_fd(&f, "siamese");
    teardown(&f);
}

/* pre with zeroed sub-layer outputs: the identity everywhere. */
static void test_identity_blocks(void **state)
{
    (void)state;
    fixture f;
    setup(&f, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED, 0.3, 24);
    zero_in_blocks(f.m, "attn/wo");
    zero_in_blocks(f.m, "ffn/w2");
    f.r.opts.power_tol = 1e-6; /* every singular value is 1: converged from the second iteration */
    assert_int_equal(an_run_finish(&f.r, &sp_analyzer_jacobian, "identity.h5"), SP_OK);
    const char *ones[] = {"sigma_max", "topk", "e2e_sigma_max", "token_sigma_max", "token_frob"};
    for (size_t i = 0; i < SP_ARRAY_LEN(ones); i++) {
        sp_report_array a = an_run_array(&f.r, "jacobian", ones[i]);
        size_t n = 1;
        for (int k = 0; k < a.rank; k++)
            n *= (size_t)a.shape[k];
        for (size_t e = 0; e < n; e++)
            assert_below(fabs(a.data[e] - 1), 1e-12, "%s[%zu] = %.17g", ones[i], e, a.data[e]);
        sp_report_array_free(&a);
    }
    assert_true(an_run_scalar(&f.r, "jacobian", "not_converged") == 0);
    sp_report_array iters = an_run_array(&f.r, "jacobian", "sigma_max_iters");
    assert_true(iters.data[0] == 2);
    sp_report_array_free(&iters);
    teardown(&f);
}

/* --jac-seq 4 on sequences of 6 tokens gives the report of a run on the first 4 tokens alone. */
static void test_jac_seq_prefix(void **state)
{
    (void)state;
    enum { PREFIX = 4 };
    fixture f;
    setup(&f, SP_VARIANT_SPAN, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED, 0.3, 25);
    f.r.opts.jac_seq = PREFIX;
    an_run short_run;
    an_run_setup(&short_run, f.m, 1, PREFIX, 1, 26);
    memcpy(short_run.tokens, f.r.tokens, PREFIX * sizeof *short_run.tokens);
    short_run.opts = f.r.opts;
    short_run.opts.jac_seq = 0;
    assert_int_equal(an_run_finish(&f.r, &sp_analyzer_jacobian, "prefix.h5"), SP_OK);
    assert_int_equal(an_run_finish(&short_run, &sp_analyzer_jacobian, "short.h5"), SP_OK);
    assert_true(an_run_scalar(&f.r, "jacobian", "seq_len") == PREFIX);
    const char *same[] = {"sigma_max", "topk", "e2e_sigma_max", "token_positions", "token_sigma_max", "token_frob",
                          "sigma_a", "sigma_z"};
    for (size_t i = 0; i < SP_ARRAY_LEN(same); i++) {
        sp_report_array got = an_run_array(&f.r, "jacobian", same[i]);
        sp_report_array want = an_run_array(&short_run, "jacobian", same[i]);
        assert_int_equal(got.rank, want.rank);
        size_t n = 1;
        for (int k = 0; k < got.rank; k++) {
            assert_int_equal(got.shape[k], want.shape[k]);
            n *= (size_t)got.shape[k];
        }
        for (size_t e = 0; e < n; e++)
            assert_below(rel(got.data[e], want.data[e]), 1e-10, "%s[%zu]: %.17g vs %.17g", same[i], e, got.data[e],
                         want.data[e]);
        sp_report_array_free(&got);
        sp_report_array_free(&want);
    }
    an_run_free(&short_run);
    teardown(&f);
}

static int cmp_desc(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return (p < q) - (p > q);
}

/* post with zeroed sub-layer outputs, unit gains, eps ~ 0: J_t = P_t / sigma_t. */
static void test_post_norms_known_scale(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_POST, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
    cfg.norm_eps = 1e-12;
    fixture f = {.m = fixture_model(&cfg, 25, 0), .L = cfg.n_layers, .S = 1, .d = cfg.d_model, .n = T * cfg.d_model};
    an_run_setup(&f.r, f.m, N_SEQS, T, N_SEQS, 26);
    f.r.opts.topk = TOPK;
    f.r.opts.jac_tokens = T;
    f.r.opts.power_iters = 5000;
    f.r.opts.power_tol = 1e-12;
    zero_in_blocks(f.m, "attn/wo");
    zero_in_blocks(f.m, "ffn/w2");
    assert_int_equal(an_run_finish(&f.r, &sp_analyzer_jacobian, "post.h5"), SP_OK);
    sp_report_array sigma = an_run_array(&f.r, "jacobian", "sigma_max");
    sp_report_array topk = an_run_array(&f.r, "jacobian", "topk");
    sp_report_array tsig = an_run_array(&f.r, "jacobian", "token_sigma_max");
    sp_report_array tfrob = an_run_array(&f.r, "jacobian", "token_frob");
    sp_report_array pos = an_run_array(&f.r, "jacobian", "token_positions");

    const int d = f.d;
    assert_int_equal(sp_model_forward(f.m, f.r.tokens, NULL, 1, T, NULL), SP_OK);
    for (int l = 0; l < f.L; l++) {
        sp_real *x = fixture_download(f.m, sp_model_hidden(f.m, l, 0), (size_t)T * d);
        double inv[T], all[T * 8];
        for (int t = 0; t < T; t++) {
            double mean = 0, var = 0;
            for (int i = 0; i < d; i++)
                mean += x[t * d + i] / d;
            for (int i = 0; i < d; i++)
                var += (x[t * d + i] - mean) * (x[t * d + i] - mean) / d;
            inv[t] = 1 / sqrt(var);
            for (int i = 0; i < d - 2; i++)
                all[t * (d - 2) + i] = inv[t];
        }
        qsort(all, (size_t)T * (d - 2), sizeof *all, cmp_desc);
        assert_below(rel(sigma.data[l], all[0]), 1e-9, "block %d sigma_max", l);
        for (int i = 0; i < TOPK; i++)
            assert_below(rel(topk.data[l * TOPK + i], all[i]), 1e-9, "block %d sigma_%d", l, i + 1);
        for (int i = 0; i < T; i++) {
            int t = (int)pos.data[i];
            assert_int_equal(t, i); /* jac_tokens = T: every position */
            assert_below(rel(tsig.data[l * T + i], inv[t]), 1e-9, "block %d token %d sigma", l, t);
            assert_below(rel(tfrob.data[l * T + i], sqrt((d - 2.0) / d) * inv[t]), 1e-9, "block %d token %d frob", l, t);
        }
        free(x);
    }
    sp_report_array *arrays[] = {&sigma, &topk, &tsig, &tfrob, &pos};
    for (size_t i = 0; i < SP_ARRAY_LEN(arrays); i++)
        sp_report_array_free(arrays[i]);
    teardown(&f);
}

/* ||a b||_2 by naive products and LAPACK. */
static double product_norm(int rows, int inner, int cols, const sp_real *a, const sp_real *b)
{
    double *p = calloc((size_t)rows * cols, sizeof *p);
    for (int i = 0; i < rows; i++)
        for (int k = 0; k < inner; k++)
            for (int j = 0; j < cols; j++)
                p[i * cols + j] += (double)a[i * inner + k] * b[k * cols + j];
    int mn = rows < cols ? rows : cols;
    double *s = malloc((size_t)mn * sizeof *s);
    assert_int_equal(LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', rows, cols, p, cols, s, NULL, rows, NULL, cols), 0);
    double top = s[0];
    free(p);
    free(s);
    return top;
}

static sp_real *param(sp_model *m, int l, const char *leaf)
{
    char name[64];
    snprintf(name, sizeof name, "blocks/%d/%s", l, leaf);
    int i = sp_model_find_param(m, name);
    assert_true(i >= 0);
    sp_real *host = vec_zeros(sp_param_numel(sp_model_param_spec(m, i)));
    sp_model_get_param(m, i, host);
    return host;
}

/* scale of a slot by its definition (LayerNorm: per-token variance; RMSNorm: mean square) */
static double slot_scale(sp_model *m, int l, const char *slot, int layernorm, int d)
{
    const sp_real *x = sp_model_slot(m, l, slot);
    if (!x)
        return NAN;
    sp_real *h = fixture_download(m, x, (size_t)T * d);
    double acc = 0;
    for (int t = 0; t < T; t++) {
        double mean = 0;
        for (int i = 0; i < d; i++)
            mean += layernorm ? h[t * d + i] / d : 0;
        for (int i = 0; i < d; i++)
            acc += (h[t * d + i] - mean) * (h[t * d + i] - mean) / d / T;
    }
    free(h);
    return sqrt(acc);
}

/* head_dim 0: d_model / n_heads; else W_O and the expanded W_V are q_dim = n_heads head_dim wide */
static void check_theory(int variant, int norm, int ffn, int head_dim)
{
    fixture f;
    sp_config cfg0;
    fixture_tiny_config(&cfg0, variant, norm, ffn, SP_POS_LEARNED);
    cfg0.head_dim = head_dim;
    assert_int_equal(sp_config_validate(&cfg0, "theory"), SP_OK);
    setup_config(&f, &cfg0, 0.3, 30 + (uint64_t)variant);
    f.r.opts.power_tol = 1e-4;
    f.r.opts.topk = 1;
    f.r.opts.jac_tokens = 1;
    assert_int_equal(an_run_finish(&f.r, &sp_analyzer_jacobian, "theory.h5"), SP_OK);
    sp_report_array sa = an_run_array(&f.r, "jacobian", "sigma_a"), sz = an_run_array(&f.r, "jacobian", "sigma_z");
    sp_report_array w21 = an_run_array(&f.r, "jacobian", "ffn_w2w1_norm"), w23 = an_run_array(&f.r, "jacobian", "ffn_w2w3_norm");
    sp_report_array wov = an_run_array(&f.r, "jacobian", "attn_wo_wv_norm"), bound = an_run_array(&f.r, "jacobian", "bound");
    const sp_config *cfg = sp_model_config(f.m);
    const int d = cfg->d_model, dff = cfg->d_ff, hd = sp_config_head_dim(cfg), group = cfg->n_heads / cfg->n_kv_heads;
    const int qd = sp_config_q_dim(cfg);
    assert_int_equal(sp_model_forward(f.m, f.r.tokens, NULL, 1, T, NULL), SP_OK);
    int n_bounds = 0;
    for (int l = 0; l < f.L; l++) {
        double want_a = slot_scale(f.m, l, "sum_a", norm == SP_NORM_LAYERNORM, d);
        double want_z = slot_scale(f.m, l, "sum_z", norm == SP_NORM_LAYERNORM, d);
        assert_true(isnan(want_a) == isnan(sa.data[l]) && isnan(want_z) == isnan(sz.data[l]));
        if (!isnan(want_a))
            assert_below(rel(sa.data[l], want_a), 1e-12, "sigma_a %d", l);
        if (!isnan(want_z))
            assert_below(rel(sz.data[l], want_z), 1e-12, "sigma_z %d", l);

        sp_real *w1 = param(f.m, l, "ffn/w1"), *w2 = param(f.m, l, "ffn/w2"), *wo = param(f.m, l, "attn/wo");
        sp_real *wv = param(f.m, l, "attn/wv"), *wv_full = vec_zeros((size_t)qd * d);
        for (int row = 0; row < qd; row++) /* query head row / hd reads kv head (row / hd) / group */
            memcpy(wv_full + row * d, wv + (((row / hd) / group) * hd + row % hd) * d, (size_t)d * sizeof *wv);
        double n21 = product_norm(d, dff, d, w2, w1), nov = product_norm(d, qd, d, wo, wv_full);
        assert_below(rel(w21.data[l], n21), 1e-12, "||W2 W1|| %d", l);
        assert_below(rel(wov.data[l], nov), 1e-12, "||W_O W_V|| %d", l);
        if (ffn == SP_FFN_SWIGLU) {
            sp_real *w3 = param(f.m, l, "ffn/w3");
            assert_below(rel(w23.data[l], product_norm(d, dff, d, w2, w3)), 1e-12, "||W2 W3|| %d", l);
            free(w3);
        } else {
            assert_true(isnan(w23.data[l]));
        }
        double want_bound = (1 + n21 * (1 + nov) / want_a) / want_z;
        assert_true(isnan(want_bound) == isnan(bound.data[l]));
        if (!isnan(want_bound)) {
            assert_below(rel(bound.data[l], want_bound), 1e-12, "bound %d", l);
            n_bounds++;
        }
        sp_real *all[] = {w1, w2, wo, wv, wv_full};
        for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
            free(all[i]);
    }
    if (variant == SP_VARIANT_SPAN || variant == SP_VARIANT_POST)
        assert_int_equal(n_bounds, f.L);
    if (variant == SP_VARIANT_PRE)
        assert_true(isnan(an_run_scalar(&f.r, "jacobian", "bound_over_sigma_max_mean")));
    sp_report_array *arrays[] = {&sa, &sz, &w21, &w23, &wov, &bound};
    for (size_t i = 0; i < SP_ARRAY_LEN(arrays); i++)
        sp_report_array_free(arrays[i]);
    teardown(&f);
}

static void test_theory_terms(void **state)
{
    (void)state;
    check_theory(SP_VARIANT_SPAN, SP_NORM_LAYERNORM, SP_FFN_GELU, 0);
    check_theory(SP_VARIANT_POST, SP_NORM_RMSNORM, SP_FFN_SWIGLU, 0);
    check_theory(SP_VARIANT_MIXLN, SP_NORM_LAYERNORM, SP_FFN_GELU, 0);
    check_theory(SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_SWIGLU, 0);
    check_theory(SP_VARIANT_SPAN, SP_NORM_RMSNORM, SP_FFN_SWIGLU, 6); /* W_O [8, 12]: q wider than d_model */
    check_theory(SP_VARIANT_POST, SP_NORM_LAYERNORM, SP_FFN_GELU, 3);  /* W_O [8, 6]: narrower */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_pre),
        cmocka_unit_test(test_fd_span_swiglu_rope),
        cmocka_unit_test(test_fd_siamese),
        cmocka_unit_test(test_identity_blocks),
        cmocka_unit_test(test_jac_seq_prefix),
        cmocka_unit_test(test_post_norms_known_scale),
        cmocka_unit_test(test_theory_terms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The "grad_norms" analyzer, in double, on tiny models (pre, span, siamese; GELU and SwiGLU):
 * - against a direct computation from sp_model_grad: each batch's forward and backward pass run
 *   here, the gradients downloaded and averaged over the batches in double, their norms, role table,
 *   FFN norms, global norm and ratios recomputed by hand (relative error < 1e-12: the same sums in
 *   another order);
 * - the same in passes of one sequence (model_batch 1), with ignored targets so that the passes of a
 *   batch weigh unequally: each batch's gradient is still that of its mean loss;
 * - known answers: two identical batches accumulate to exactly the one-batch gradient (< 1e-13);
 *   a GELU model's W_3 column is NaN; grad_batches beyond the evaluation set is clipped to it. */
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

extern const sp_analyzer sp_analyzer_grad_norms;

#define N_SEQS 4
#define SEQ 6
#define BATCH 2
#define TOL 1e-12

/* Column of each role in the report's layer_role table (documented order). */
static int column_of(sp_param_role role)
{
    static const sp_param_role cols[] = {SP_ROLE_WQ, SP_ROLE_WK, SP_ROLE_WV, SP_ROLE_WO, SP_ROLE_W1,
                                         SP_ROLE_W2, SP_ROLE_W3, SP_ROLE_NORM_GAIN, SP_ROLE_NORM_BIAS};
    for (int c = 0; c < (int)SP_ARRAY_LEN(cols); c++)
        if (cols[c] == role)
            return c;
    return -1;
}

/* Per tensor ||mean over batches of the batch gradient||_F, computed here. */
static double *reference_norms(sp_model *m, const an_run *r, int n_batches)
{
    const int np = sp_model_n_params(m);
    double **acc = calloc((size_t)np, sizeof *acc);
    for (int b = 0; b < n_batches; b++) {
        const size_t off = (size_t)b * BATCH * SEQ;
        double loss;
        assert_int_equal(sp_model_forward(m, r->tokens + off, r->targets + off, BATCH, SEQ, &loss), SP_OK);
        assert_int_equal(sp_model_backward(m), SP_OK);
        for (int i = 0; i < np; i++) {
            size_t n = sp_param_numel(sp_model_param_spec(m, i));
            if (!acc[i])
                acc[i] = calloc(n, sizeof **acc);
            sp_real *g = fixture_download(m, sp_model_grad(m, i), n);
            for (size_t j = 0; j < n; j++)
                acc[i][j] += g[j] / n_batches;
            free(g);
        }
    }
    double *norms = calloc((size_t)np, sizeof *norms);
    for (int i = 0; i < np; i++) {
        size_t n = sp_param_numel(sp_model_param_spec(m, i));
        double ss = 0;
        for (size_t j = 0; j < n; j++)
            ss += acc[i][j] * acc[i][j];
        norms[i] = sqrt(ss);
        free(acc[i]);
    }
    free(acc);
    return norms;
}

/* model_batch: sequences per pass of the analyzer (0: the batch); with 1, the first sequence of each
 * batch also loses a few targets. */
static void check_against_direct(int variant, int ffn, int grad_batches, int model_batch)
{
    sp_config cfg;
    fixture_tiny_config(&cfg, variant, SP_NORM_LAYERNORM, ffn, SP_POS_LEARNED);
    sp_model *m = fixture_model(&cfg, 11 + (uint64_t)variant, 0.3);
    an_run r;
    an_run_setup(&r, m, N_SEQS, SEQ, BATCH, 5);
    r.opts.grad_batches = grad_batches;
    r.a.model_batch = model_batch;
    if (model_batch == 1)
        for (int b = 0; b < N_SEQS / BATCH; b++)
            for (int t = 0; t < 3; t++)
                r.targets[b * BATCH * SEQ + t] = -1;
    assert_int_equal(an_run_finish(&r, &sp_analyzer_grad_norms, "grad.h5"), SP_OK);
    const int nb = grad_batches < N_SEQS / BATCH ? grad_batches : N_SEQS / BATCH;
    assert_int_equal((int)an_run_scalar(&r, "grad_norms", "n_batches"), nb);

    double *ref = reference_norms(m, &r, nb);
    const int np = sp_model_n_params(m), L = cfg.n_layers;
    sp_report_array tensor = an_run_array(&r, "grad_norms", "tensor");
    sp_report_array table = an_run_array(&r, "grad_norms", "layer_role");
    sp_report_array ffn_arr = an_run_array(&r, "grad_norms", "ffn");
    sp_report_array layer = an_run_array(&r, "grad_norms", "tensor_layer");
    sp_report_array role = an_run_array(&r, "grad_norms", "tensor_role");
    assert_int_equal(tensor.shape[0], np);
    assert_int_equal(table.rank, 2);
    assert_int_equal(table.shape[0], L);
    assert_int_equal(table.shape[1], 9);
    assert_string_equal(table.shape_desc, "[block, role]");

    double global_sq = 0, *cell_sq = calloc((size_t)L * 9, sizeof *cell_sq), *ffn_sq = calloc((size_t)L, sizeof *ffn_sq);
    for (int i = 0; i < np; i++) {
        const sp_param_spec *spec = sp_model_param_spec(m, i);
        assert_below(fabs(tensor.data[i] - ref[i]) / fmax(ref[i], 1e-300), TOL, "%s", spec->name);
        assert_true(layer.data[i] == spec->layer);
        assert_true(role.data[i] == spec->role);
        global_sq += ref[i] * ref[i];
        int c = column_of(spec->role);
        if (spec->layer >= 0 && c >= 0)
            cell_sq[spec->layer * 9 + c] += ref[i] * ref[i];
        if (spec->role == SP_ROLE_W1 || spec->role == SP_ROLE_W2 || spec->role == SP_ROLE_W3)
            ffn_sq[spec->layer] += ref[i] * ref[i];
    }
    for (int l = 0; l < L; l++) {
        for (int c = 0; c < 9; c++) {
            double got = table.data[l * 9 + c];
            if (c == column_of(SP_ROLE_W3) && ffn == SP_FFN_GELU)
                assert_true(isnan(got));
            else
                assert_below(fabs(got - sqrt(cell_sq[l * 9 + c])) / sqrt(cell_sq[l * 9 + c]), TOL, "layer %d col %d", l, c);
        }
        assert_below(fabs(ffn_arr.data[l] - sqrt(ffn_sq[l])) / sqrt(ffn_sq[l]), TOL, "ffn %d", l);
    }
    assert_below(fabs(an_run_scalar(&r, "grad_norms", "global_norm") - sqrt(global_sq)) / sqrt(global_sq), TOL,
                 "global norm");
    double ratio = sqrt(ffn_sq[0] / ffn_sq[L - 1]);
    assert_below(fabs(an_run_scalar(&r, "grad_norms", "ffn_ratio") - ratio) / ratio, TOL, "ffn ratio");
    double w1_ratio = table.data[column_of(SP_ROLE_W1)] / table.data[(L - 1) * 9 + column_of(SP_ROLE_W1)];
    assert_below(fabs(an_run_scalar(&r, "grad_norms", "w1_ratio") - w1_ratio) / w1_ratio, TOL, "w1 ratio");

    free(cell_sq);
    free(ffn_sq);
    free(ref);
    sp_report_array *arrays[] = {&tensor, &table, &ffn_arr, &layer, &role};
    for (size_t i = 0; i < SP_ARRAY_LEN(arrays); i++)
        sp_report_array_free(arrays[i]);
    an_run_free(&r);
    sp_model_free(m);
}

static void test_direct_pre_gelu(void **state)
{
    (void)state;
    check_against_direct(SP_VARIANT_PRE, SP_FFN_GELU, 2, 0);
}

static void test_direct_passes_of_one_sequence(void **state)
{
    (void)state;
    check_against_direct(SP_VARIANT_PERI, SP_FFN_SWIGLU, 2, 1);
}

static void test_direct_span_swiglu(void **state)
{
    (void)state;
    check_against_direct(SP_VARIANT_SPAN, SP_FFN_SWIGLU, 1, 0);
}

static void test_direct_siamese_clipped(void **state)
{
    (void)state;
    check_against_direct(SP_VARIANT_SIAMESE, SP_FFN_GELU, 7, 0); /* only 2 batches exist */
}

/* Batch 1 a copy of batch 0: the accumulated gradient is the one-batch gradient. */
static void test_identical_batches(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_POST, SP_NORM_RMSNORM, SP_FFN_GELU, SP_POS_ROPE);
    sp_model *m = fixture_model(&cfg, 3, 0.3);
    double *one = NULL, *two = NULL;
    for (int nb = 1; nb <= 2; nb++) {
        an_run r;
        an_run_setup(&r, m, N_SEQS, SEQ, BATCH, 9);
        memcpy(r.tokens + BATCH * SEQ, r.tokens, BATCH * SEQ * sizeof *r.tokens);
        memcpy(r.targets + BATCH * SEQ, r.targets, BATCH * SEQ * sizeof *r.targets);
        r.opts.grad_batches = nb;
        assert_int_equal(an_run_finish(&r, &sp_analyzer_grad_norms, "same.h5"), SP_OK);
        sp_report_array t = an_run_array(&r, "grad_norms", "tensor");
        double *copy = malloc((size_t)t.shape[0] * sizeof *copy);
        assert_non_null(copy);
        memcpy(copy, t.data, (size_t)t.shape[0] * sizeof *copy);
        *(nb == 1 ? &one : &two) = copy;
        sp_report_array_free(&t);
        an_run_free(&r);
    }
    for (int i = 0; i < sp_model_n_params(m); i++)
        assert_below(fabs(one[i] - two[i]) / fmax(one[i], 1e-300), 1e-13, "tensor %d", i);
    free(one);
    free(two);
    sp_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_pre_gelu),
        cmocka_unit_test(test_direct_span_swiglu),
        cmocka_unit_test(test_direct_siamese_clipped),
        cmocka_unit_test(test_direct_passes_of_one_sequence),
        cmocka_unit_test(test_identical_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

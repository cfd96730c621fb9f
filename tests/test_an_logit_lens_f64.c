/* The "logit_lens" analyzer through the analyze driver on tiny models, in the float64 build:
 * - every one-stream variant (with and without a final norm: post, span and deepnorm have none)
 *   and every tiny pretrained config (biases, q/k norms, embedding scale, tied heads, the final
 *   logit soft-cap), against an independent fp64 reference: every layer output from
 *   tests/support/ref_model.h's naive forward, decoded by its naive final norm, head and soft-cap,
 *   and loss, top-1 accuracy, KL(p_L || p_l) and argmax agreement from explicit softmaxes; some
 *   targets ignored (-1), the last batch shorter;
 * - every variant, siamese's two streams included: the last layer is the model's own output, its
 *   loss the token-weighted evaluation loss of sp_model_forward, its accuracy that of the model's
 *   logits, KL exactly 0 and agreement exactly 1;
 * - a vocabulary of 300000, so that a batch of 16 rows is decoded in tiles of 6, 6 and 4 rows,
 *   against the same reference. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/support/an_run.h"
#include "tests/support/assert_err.h"
#include "tests/support/model_fixture.h"
#include "tests/support/ref_model.h"
#include "tests/support/vec_util.h"

enum { N_SEQS = 5, SEQ = 8, BATCH = 2, ROWS = N_SEQS * SEQ, MAX_H = 16 };

typedef struct {
    double loss[MAX_H], accuracy[MAX_H], kl[MAX_H], agreement[MAX_H];
} lens;

/* The evaluation set of an_run with every seventh target ignored, through the driver. */
static void run_lens(an_run *r, sp_model *m, uint64_t seed)
{
    an_run_setup(r, m, N_SEQS, SEQ, BATCH, seed);
    for (int i = 0; i < ROWS; i += 7)
        r->targets[i] = -1;
    assert_int_equal(an_run_execute(r, "logit_lens", "lens.h5"), SP_OK);
}

static void read_lens(an_run *r, int n_h, lens *out)
{
    const char *names[4] = {"loss", "accuracy", "kl", "agreement"};
    double *dst[4] = {out->loss, out->accuracy, out->kl, out->agreement};
    for (int i = 0; i < 4; i++) {
        sp_report_array a = an_run_array(r, "logit_lens", names[i]);
        assert_int_equal(a.rank, 1);
        assert_int_equal(a.shape[0], n_h);
        for (int l = 0; l < n_h; l++)
            dst[i][l] = a.data[l];
        sp_report_array_free(&a);
    }
}

/* log_softmax of one row into lp; returns the argmax (first of the largest). */
static int log_softmax(int n, const sp_real *z, double *lp)
{
    int best = 0;
    for (int v = 1; v < n; v++)
        if (z[v] > z[best])
            best = v;
    double sum = 0;
    for (int v = 0; v < n; v++)
        sum += exp(z[v] - z[best]);
    for (int v = 0; v < n; v++)
        lp[v] = z[v] - z[best] - log(sum);
    return best;
}

/* Every layer decoded by the reference, and the four statistics from explicit log-softmaxes. */
static void reference(sp_model *m, const an_run *r, lens *out)
{
    const sp_config *cfg = sp_model_config(m);
    const int n_h = cfg->n_layers + 1, V = cfg->vocab_size;
    sp_real *h[MAX_H], *z[MAX_H];
    ref_model_hidden(m, r->tokens, N_SEQS, SEQ, h);
    for (int l = 0; l < n_h; l++) {
        z[l] = vec_zeros((size_t)ROWS * V);
        ref_model_decode(m, ROWS, h[l], z[l]);
    }
    double *lp_final = malloc((size_t)V * sizeof *lp_final), *lp = malloc((size_t)V * sizeof *lp);
    assert_true(lp_final && lp);
    int n_targets = 0;
    *out = (lens){.loss = {0}, .accuracy = {0}, .kl = {0}, .agreement = {0}};
    for (int t = 0; t < ROWS; t++) {
        const int arg_final = log_softmax(V, z[n_h - 1] + (size_t)t * V, lp_final), target = r->targets[t];
        n_targets += target >= 0;
        for (int l = 0; l < n_h; l++) {
            const int arg = log_softmax(V, z[l] + (size_t)t * V, lp);
            double kl = 0;
            for (int v = 0; v < V; v++)
                kl += exp(lp_final[v]) * (lp_final[v] - lp[v]);
            out->kl[l] += kl;
            out->agreement[l] += arg == arg_final;
            if (target >= 0) {
                out->loss[l] -= lp[target];
                out->accuracy[l] += arg == target;
            }
        }
    }
    for (int l = 0; l < n_h; l++) {
        out->loss[l] /= n_targets;
        out->accuracy[l] /= n_targets;
        out->kl[l] /= ROWS;
        out->agreement[l] /= ROWS;
        free(h[l]);
        free(z[l]);
    }
    free(lp_final);
    free(lp);
}

static double rel(double got, double want) { return fabs(got - want) / fmax(fabs(want), 1e-300); }

static void expect_reference(sp_model *m, uint64_t seed, const char *name)
{
    const int n_h = sp_model_config(m)->n_layers + 1;
    an_run r;
    run_lens(&r, m, seed);
    lens got, want;
    read_lens(&r, n_h, &got);
    reference(m, &r, &want);
    for (int l = 0; l < n_h; l++) {
        assert_below(rel(got.loss[l], want.loss[l]), 1e-12, "%s: loss of layer %d", name, l);
        assert_below(fabs(got.kl[l] - want.kl[l]), 1e-12 + 1e-10 * want.kl[l], "%s: KL of layer %d", name, l);
        assert_true(got.accuracy[l] == want.accuracy[l]);
        assert_true(got.agreement[l] == want.agreement[l]);
    }
    const int L = n_h - 1;
    int min_layer = 0, half_layer = -1;
    for (int l = 0; l < n_h; l++) {
        min_layer = want.loss[l] < want.loss[min_layer] ? l : min_layer;
        half_layer = half_layer < 0 && want.agreement[l] >= 0.5 ? l : half_layer;
    }
    assert_below(rel(an_run_scalar(&r, "logit_lens", "loss_final"), want.loss[L]), 1e-12, "%s: loss_final", name);
    assert_below(fabs(an_run_scalar(&r, "logit_lens", "loss_prev_minus_final") - (want.loss[L - 1] - want.loss[L])),
                 1e-12, "%s: loss_prev_minus_final", name);
    assert_below(fabs(an_run_scalar(&r, "logit_lens", "kl_prev") - want.kl[L - 1]), 1e-12, "%s: kl_prev", name);
    assert_int_equal((int)an_run_scalar(&r, "logit_lens", "loss_min_layer"), min_layer);
    assert_int_equal((int)an_run_scalar(&r, "logit_lens", "agreement_half_layer"), half_layer);
    assert_int_equal((int)an_run_scalar(&r, "logit_lens", "tokens"), ROWS);
    assert_int_equal((int)an_run_scalar(&r, "logit_lens", "targets"), ROWS - (ROWS + 6) / 7);
    an_run_free(&r);
}

static void test_variants_against_reference(void **state)
{
    (void)state;
    for (int v = 0; v < SP_N_VARIANTS; v++) {
        if (v == SP_VARIANT_SIAMESE) /* the reference has one stream */
            continue;
        sp_config cfg;
        fixture_tiny_config(&cfg, v, v % 2 ? SP_NORM_RMSNORM : SP_NORM_LAYERNORM, v % 3 ? SP_FFN_SWIGLU : SP_FFN_GELU,
                            v % 2 ? SP_POS_ROPE : SP_POS_LEARNED);
        sp_model *m = fixture_model(&cfg, 20 + (uint64_t)v, 0.3);
        expect_reference(m, 30 + (uint64_t)v, sp_variant_names[v]);
        sp_model_free(m);
    }
}

static void test_pretrained_against_reference(void **state)
{
    (void)state;
    for (int i = 0; i < FIXTURE_N_PRETRAINED; i++) {
        sp_config cfg;
        const char *name = fixture_pretrained_config(i, &cfg);
        sp_model *m = fixture_model(&cfg, 40 + (uint64_t)i, 0.3);
        expect_reference(m, 50 + (uint64_t)i, name);
        sp_model_free(m);
    }
}

/* The evaluation loss and top-1 accuracy of the model's own logits, batch by batch as the driver
 * runs them, token-weighted. */
static void model_output(sp_model *m, const an_run *r, double *loss, double *accuracy)
{
    const int V = sp_model_config(m)->vocab_size;
    double loss_sum = 0, correct = 0, count = 0;
    for (int s0 = 0; s0 < N_SEQS; s0 += BATCH) {
        const int n = N_SEQS - s0 < BATCH ? N_SEQS - s0 : BATCH, rows = n * SEQ;
        const int32_t *targets = r->targets + s0 * SEQ;
        double batch_loss;
        assert_int_equal(sp_model_forward(m, r->tokens + s0 * SEQ, targets, n, SEQ, &batch_loss), SP_OK);
        sp_real *z = fixture_download(m, sp_model_logits(m), (size_t)rows * V);
        int counted = 0;
        for (int t = 0; t < rows; t++) {
            if (targets[t] < 0)
                continue;
            int best = 0;
            for (int v = 1; v < V; v++)
                best = z[(size_t)t * V + v] > z[(size_t)t * V + best] ? v : best;
            correct += best == targets[t];
            counted++;
        }
        loss_sum += batch_loss * counted;
        count += counted;
        free(z);
    }
    *loss = loss_sum / count;
    *accuracy = correct / count;
}

static void test_last_layer_is_the_model(void **state)
{
    (void)state;
    for (int v = 0; v < SP_N_VARIANTS; v++) {
        sp_config cfg;
        fixture_tiny_config(&cfg, v, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
        sp_model *m = fixture_model(&cfg, 60 + (uint64_t)v, 0.3);
        const int L = cfg.n_layers;
        an_run r;
        run_lens(&r, m, 70 + (uint64_t)v);
        lens got;
        read_lens(&r, L + 1, &got);
        double loss, accuracy;
        model_output(m, &r, &loss, &accuracy);
        assert_below(rel(got.loss[L], loss), 1e-12, "%s: loss of the last layer", sp_variant_names[v]);
        assert_true(got.accuracy[L] == accuracy);
        assert_true(got.kl[L] == 0);
        assert_true(got.agreement[L] == 1);
        assert_true(got.kl[0] > 0); /* the embedding is not the output */
        an_run_free(&r);
        sp_model_free(m);
    }
}

static void test_tiles(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
    cfg.vocab_size = 300000; /* 2^21 cells per tile: 6 rows */
    cfg.n_layers = 2;
    sp_model *m = fixture_model(&cfg, 80, 0.3);
    expect_reference(m, 81, "vocab 300000");
    sp_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variants_against_reference),
        cmocka_unit_test(test_pretrained_against_reference),
        cmocka_unit_test(test_last_layer_is_the_model),
        cmocka_unit_test(test_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

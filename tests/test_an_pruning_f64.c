/* The "pruning" analyzer, in double, on tiny 4-block models, 5 evaluation sequences in batches of 2
 * (the last batch shorter) with some targets ignored, so the token weighting matters.
 * - Independent reference for pre: a block whose W_O and W_2 are zero is exactly the identity, so
 *   the loss with block l skipped must equal the loss of the model with block l's W_O and W_2
 *   zeroed, and removing the last k blocks that of zeroing them in the last k blocks (1e-12); the
 *   analyzer runs passes of one sequence there (model_batch 1), the reference whole batches.
 * - Every variant (siamese's two streams included): against a manual forward with the block(s)
 *   skipped through sp_model_set_block_skip and the token-weighted mean computed here; the base
 *   loss against the unskipped manual loss; no block is left skipped afterwards. */
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

extern const sp_analyzer sp_analyzer_pruning;

#define N_SEQS 5
#define SEQ 6
#define BATCH 2

static double rel(double got, double want) { return fabs(got - want) / fmax(fabs(want), 1e-300); }

/* Token-weighted mean loss over the first n_batches batches, computed here. */
static double manual_loss(sp_model *m, const an_run *r, int n_batches)
{
    double sum = 0, count = 0;
    for (int b = 0; b < n_batches; b++) {
        int first = b * BATCH, n = N_SEQS - first < BATCH ? N_SEQS - first : BATCH;
        double loss, c = 0;
        const size_t off = (size_t)first * SEQ;
        assert_int_equal(sp_model_forward(m, r->tokens + off, r->targets + off, n, SEQ, &loss), SP_OK);
        for (int i = 0; i < n * SEQ; i++)
            c += r->targets[off + i] >= 0;
        sum += loss * c;
        count += c;
    }
    return sum / count;
}

static void setup(an_run *r, sp_model *m, int prune_batches)
{
    an_run_setup(r, m, N_SEQS, SEQ, BATCH, 77);
    for (int i = 0; i < N_SEQS * SEQ; i += 3) /* ignored targets, unevenly over the batches */
        if (i < 2 * BATCH * SEQ)
            r->targets[i] = -1;
    r->opts.prune_batches = prune_batches;
}

typedef struct {
    double base, block[4], last[2];
} losses;

static losses read_losses(an_run *r)
{
    losses got;
    got.base = an_run_scalar(r, "pruning", "base_loss");
    sp_report_array b = an_run_array(r, "pruning", "loss_skip_block"), k = an_run_array(r, "pruning", "loss_drop_last");
    sp_report_array db = an_run_array(r, "pruning", "delta_skip_block");
    assert_int_equal(b.shape[0], 4);
    assert_int_equal(k.shape[0], 2);
    memcpy(got.block, b.data, sizeof got.block);
    memcpy(got.last, k.data, sizeof got.last);
    for (int l = 0; l < 4; l++)
        assert_below(fabs(db.data[l] - (got.block[l] - got.base)), 1e-15, "delta %d", l);
    sp_report_array_free(&b);
    sp_report_array_free(&k);
    sp_report_array_free(&db);
    return got;
}

/* Sets blocks/<l>/{attn/wo, ffn/w2} of blocks [from, to) to zero (zero = 1) or back to saved. */
static void zero_outputs(sp_model *m, int from, int to, sp_real **saved, int zero)
{
    const char *leaves[2] = {"attn/wo", "ffn/w2"};
    for (int l = from; l < to; l++)
        for (int i = 0; i < 2; i++) {
            char name[64];
            snprintf(name, sizeof name, "blocks/%d/%s", l, leaves[i]);
            int idx = sp_model_find_param(m, name);
            size_t n = sp_param_numel(sp_model_param_spec(m, idx));
            sp_real **slot = &saved[l * 2 + i];
            if (zero) {
                *slot = vec_zeros(n);
                sp_model_get_param(m, idx, *slot);
                sp_real *z = vec_zeros(n);
                sp_model_set_param(m, idx, z);
                free(z);
            } else {
                sp_model_set_param(m, idx, *slot);
                free(*slot);
                *slot = NULL;
            }
        }
}

static void test_pre_against_zeroed_blocks(void **state)
{
    (void)state;
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED);
    sp_model *m = fixture_model(&cfg, 8, 0.3);
    an_run r;
    setup(&r, m, 3);
    r.a.model_batch = 1; /* passes of one sequence: the batches' token weighting is still the reference's */
    assert_int_equal(an_run_finish(&r, &sp_analyzer_pruning, "pre.h5"), SP_OK);
    losses got = read_losses(&r);
    assert_true(an_run_scalar(&r, "pruning", "n_batches") == 3);
    sp_real *saved[8] = {0};
    assert_below(rel(got.base, manual_loss(m, &r, 3)), 1e-14, "base loss");
    for (int l = 0; l < 4; l++) {
        zero_outputs(m, l, l + 1, saved, 1);
        assert_below(rel(got.block[l], manual_loss(m, &r, 3)), 1e-12, "block %d", l);
        zero_outputs(m, l, l + 1, saved, 0);
    }
    for (int k = 1; k <= 2; k++) {
        zero_outputs(m, 4 - k, 4, saved, 1);
        assert_below(rel(got.last[k - 1], manual_loss(m, &r, 3)), 1e-12, "last %d", k);
        zero_outputs(m, 4 - k, 4, saved, 0);
    }
    assert_true(got.block[0] != got.base); /* the blocks matter */
    an_run_free(&r);
    sp_model_free(m);
}

static void check_variant(int variant)
{
    sp_config cfg;
    fixture_tiny_config(&cfg, variant, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
    sp_model *m = fixture_model(&cfg, 9 + (uint64_t)variant, 0.3);
    an_run r;
    setup(&r, m, 2);
    assert_int_equal(an_run_finish(&r, &sp_analyzer_pruning, "variant.h5"), SP_OK);
    losses got = read_losses(&r);
    for (int l = 0; l < 4; l++)
        assert_false(sp_model_block_skipped(m, l));
    assert_below(rel(got.base, manual_loss(m, &r, 2)), 1e-14, "%s base", sp_variant_names[variant]);
    for (int l = 0; l < 4; l++) {
        assert_int_equal(sp_model_set_block_skip(m, l, 1), SP_OK);
        assert_below(rel(got.block[l], manual_loss(m, &r, 2)), 1e-14, "%s block %d", sp_variant_names[variant], l);
        assert_int_equal(sp_model_set_block_skip(m, l, 0), SP_OK);
    }
    for (int k = 1; k <= 2; k++) {
        for (int l = 4 - k; l < 4; l++)
            assert_int_equal(sp_model_set_block_skip(m, l, 1), SP_OK);
        assert_below(rel(got.last[k - 1], manual_loss(m, &r, 2)), 1e-14, "%s last %d", sp_variant_names[variant], k);
        for (int l = 0; l < 4; l++)
            assert_int_equal(sp_model_set_block_skip(m, l, 0), SP_OK);
    }
    double max = -INFINITY;
    for (int l = 0; l < 4; l++)
        max = fmax(max, got.block[l] - got.base);
    /* the JSON summary keeps 15 significant digits where they read back within an ulp */
    assert_below(rel(an_run_scalar(&r, "pruning", "delta_max"), max), 1e-14, "delta_max");
    assert_below(rel(an_run_scalar(&r, "pruning", "delta_drop_half"), got.last[1] - got.base), 1e-14, "drop half");
    an_run_free(&r);
    sp_model_free(m);
}

static void test_every_variant_against_manual_skips(void **state)
{
    (void)state;
    for (int v = 0; v < SP_N_VARIANTS; v++)
        check_variant(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pre_against_zeroed_blocks),
        cmocka_unit_test(test_every_variant_against_manual_skips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

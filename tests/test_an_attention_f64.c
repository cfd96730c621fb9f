/* The "attention" analyzer in the float64 build, against the naive reference of
 * tests/support/attn_ref.h to 1e-12 (the float32 test allows 1e-5: there the backend's scores and
 * probabilities are float32), so that a formula off by a rounding-sized term shows: every variant
 * (siamese's two streams included) and every tiny pretrained config (biases, q/k norms, RoPE
 * variants, attention scales, soft-caps, sliding windows, grouped-query heads), with and without
 * --skip-positions (sequences of 40 positions, where the op's blocks of query rows start past the
 * first key, are in the float32 test). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/support/attn_ref.h"
#include "tests/support/model_fixture.h"

#define TOL 1e-12

static void test_variants(void **state)
{
    (void)state;
    for (int v = 0; v < SP_N_VARIANTS; v++) {
        sp_config cfg;
        fixture_tiny_config(&cfg, v, v % 2 ? SP_NORM_RMSNORM : SP_NORM_LAYERNORM, v % 3 ? SP_FFN_SWIGLU : SP_FFN_GELU,
                            v % 2 ? SP_POS_ROPE : SP_POS_LEARNED);
        sp_model *m = fixture_model(&cfg, 100 + (uint64_t)v, 0.3);
        attn_ref_check(m, cfg.max_seq_len, v % 3, 110 + (uint64_t)v, TOL, sp_variant_names[v]);
        sp_model_free(m);
    }
}

static void test_pretrained(void **state)
{
    (void)state;
    for (int i = 0; i < FIXTURE_N_PRETRAINED; i++) {
        sp_config cfg;
        const char *name = fixture_pretrained_config(i, &cfg);
        sp_model *m = fixture_model(&cfg, 120 + (uint64_t)i, 0.3);
        attn_ref_check(m, cfg.max_seq_len, 2, 130 + (uint64_t)i, TOL, name);
        sp_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variants),
        cmocka_unit_test(test_pretrained),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

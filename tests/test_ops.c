/* tests/test_ops.c: the float32 build of the CPU backend against the naive references, to check
 * that the float path (cblas_sgemm, float storage) is wired right.
 *
 * F32_TOL 1e-5 (normwise): the references run in double on the same float inputs, so the only
 * differences are float roundings of inputs to each op's sums (unit roundoff 6e-8; sums of up to
 * 130 terms, whose rounding errors largely cancel: measured below 1e-6), well below the tolerance. A miswired op (wrong
 * transpose, stride or head) is off by O(1). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "kernels/backend.h"
#include "tests/support/assert_err.h"
#include "tests/support/op_compare.h"

#define F32_TOL 1e-5

static void test_float_build(void **state)
{
    (void)state;
    assert_string_equal(SP_REAL_NAME, "float32");
    assert_int_equal(sizeof(sp_real), 4);
}

static void test_sgemm(void **state)
{
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
        {
            assert_below(opcmp_gemm(sp_backend_cpu(), ta, tb, 0.7, 1 + 2 * ta + tb), F32_TOL,
                         "sgemm trans_a=%d trans_b=%d", ta, tb);
            /* cut into threaded blocks, by rows and by columns */
            assert_below(opcmp_gemm_sized(sp_backend_cpu(), ta, tb, 300, 70, 130, 0.7, 5 + 2 * ta + tb), F32_TOL,
                         "sgemm 300 x 70 x 130, trans_a=%d trans_b=%d", ta, tb);
            assert_below(opcmp_gemm_sized(sp_backend_cpu(), ta, tb, 70, 300, 130, 0.7, 9 + 2 * ta + tb), F32_TOL,
                         "sgemm 70 x 300 x 130, trans_a=%d trans_b=%d", ta, tb);
        }
}

static void test_float_ops(void **state)
{
    (void)state;
    const sp_backend *be = sp_backend_cpu();
    assert_below(opcmp_norm_fwd(be, SP_NORM_LAYERNORM, 7, 13, 11), F32_TOL, "layernorm forward");
    assert_below(opcmp_norm_fwd(be, SP_NORM_RMSNORM, 7, 13, 12), F32_TOL, "rmsnorm forward");
    assert_below(opcmp_elementwise_all(be, 91, 13), F32_TOL, "activations and soft-cap forward");
    assert_below(opcmp_rope(be, 2, 5, 3, 6, 6, 10000.0, 15), F32_TOL, "rope");
    assert_below(opcmp_rope(be, 2, 5, 3, 6, 4, 10000.0, 15), F32_TOL, "rope over 4 of 6 dims");
    sp_attn_shape shape = {2, 5, 6, 2, 4, 0.5, 0, 0};
    assert_below(opcmp_attention_fwd(be, &shape, 16), F32_TOL, "attention forward");
    shape = (sp_attn_shape){1, 130, 2, 1, 70, 1 / sqrt(70.0), 0, 0};
    assert_below(opcmp_attention_fwd(be, &shape, 19), F32_TOL, "attention forward, 130 positions");
    shape = (sp_attn_shape){1, 130, 2, 1, 16, 0.25, 5.0, 40};
    assert_below(opcmp_attention_fwd(be, &shape, 21), F32_TOL, "attention forward, softcap 5, window 40");
    assert_below(opcmp_embed_fwd(be, 2, 5, 13, 11, 1, 1.0, 17), F32_TOL, "embedding forward");
    assert_below(opcmp_embed_fwd(be, 2, 5, 13, 11, 0, 3.5, 22), F32_TOL, "embedding forward, scaled");
    assert_below(opcmp_xent_fwd(be, 7, 11, 3.0, 18), F32_TOL, "cross-entropy forward");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_build),
        cmocka_unit_test(test_sgemm),
        cmocka_unit_test(test_float_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

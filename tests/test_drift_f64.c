/* `spanprobe drift` in float64 (test_drift.c: float32): the perturbed copies of fixtures/hf/llama-f32
 * against the generator's float64 numbers to 1e-9 relative, top-1 matches exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "support/drift_ref.h"

static void test_noise_refs(void **state)
{
    (void)state;
    const drift_ref_tolerance tol = {.rel = 1e-9, .abs = 1e-14, .kl_rel = 1e-9, .kl_abs = 1e-14, .margin = 0};
    double kl[DRIFT_REF_N_COPIES], err[DRIFT_REF_N_COPIES];
    drift_ref_check_copies(&tol, kl, err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_noise_refs)};
    return cmocka_run_group_tests_name("test_drift_f64", tests, NULL, NULL);
}

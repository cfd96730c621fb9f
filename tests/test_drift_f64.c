/* `spanprobe drift` in float64 (test_drift.c: float32): the perturbed copies of fixtures/hf/llama-f32
 * against the generator's float64 numbers to 1e-9 relative, top-1 matches exactly. */
#include <cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "support/drift_ref.h"

static void test_noise_refs(void **state)
{
    (void)state;
    static const char *const copies[] = {"llama-f32-noise0.003", "llama-f32-noise0.03", "llama-f32-noise0.3"};
    const drift_ref_tolerance tol = {.rel = 1e-9, .abs = 1e-14, .kl_rel = 1e-9, .kl_abs = 1e-14, .margin = 0};
    for (size_t i = 0; i < sizeof copies / sizeof *copies; i++) {
        char model[256], report[4200];
        snprintf(model, sizeof model, "fixtures/drift/%s", copies[i]);
        print_message("%s\n", copies[i]);
        drift_ref_run("fixtures/hf/llama-f32", model, DRIFT_REF_TOKENS, copies[i], report, sizeof report);
        cJSON *want = drift_ref_load(copies[i]);
        drift_ref_check(report, want, &tol);
        cJSON_Delete(want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_noise_refs)};
    return cmocka_run_group_tests_name("test_drift_f64", tests, NULL, NULL);
}

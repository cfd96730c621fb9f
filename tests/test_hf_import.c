/* Hugging Face model directories (tools/hf_fixtures: every architecture, F32/BF16/sharded, current
 * and legacy config keys) imported in float32: logits, hidden states, loss and every tensor's
 * gradient norm against the float64 references, to float32 accuracy (test_hf_import_f64.c: 1e-10). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "support/hf_ref.h"

int main(void)
{
    const hf_ref_tolerance tol = {.logits = 1e-5, .hidden = 1e-5, .loss = 1e-5, .grad = 1e-4};
    return hf_ref_run_all("test_hf_import", &tol);
}

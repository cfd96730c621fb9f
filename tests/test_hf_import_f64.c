/* Hugging Face model directories imported in float64: logits, hidden states, loss and every
 * tensor's gradient norm against the float64 references to 1e-10 (test_hf_import.c: float32). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "support/hf_ref.h"

int main(void)
{
    const hf_ref_tolerance tol = {.logits = 1e-10, .hidden = 1e-10, .loss = 1e-10, .grad = 1e-9};
    return hf_ref_run_all("test_hf_import_f64", &tol);
}

/* GGUF models (tools/gguf_models: every architecture in F32 from the Hugging Face fixtures, the
 * llama in every readable type) loaded in float64: logits against the float64 references computed
 * from the weights gguf.quants.dequantize reads, to 1e-10 (test_gguf_model.c: float32). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "support/gguf_model_ref.h"

int main(void)
{
    return gguf_model_ref_run_all("test_gguf_model_f64", 1e-10);
}

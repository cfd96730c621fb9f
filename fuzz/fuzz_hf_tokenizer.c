/* fuzz/fuzz_hf_tokenizer.c: a Hugging Face tokenizer.json (io/hf_tokenizer.h), loaded from memory
 * (the path and the checkpoint copies share this loader) and used. */
#include "fuzz/use_tokenizer.h"
#include "io/hf_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_tokenizer t;
    if (sp_tokenizer_load_hf_text("tokenizer.json", (const char *)data, size, NULL, NULL, 0, 0, &t) == SP_OK) {
        fuzz_use_tokenizer(&t);
        sp_tokenizer_free(&t);
    }
    sp_error_clear();
    return 0;
}

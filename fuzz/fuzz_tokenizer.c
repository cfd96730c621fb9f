/* fuzz/fuzz_tokenizer.c: a llama2.c tokenizer.bin (io/tokenizer.h), loaded and used.
 * Input: a 2-byte little-endian vocab_size (the model's, which the file must match), then the file. */
#include "fuzz/temp_file.h"
#include "fuzz/use_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int vocab_size = data[0] | data[1] << 8;
    sp_tokenizer t;
    if (sp_tokenizer_load_llama2c(fuzz_temp_file("tokenizer.bin", data + 2, size - 2), vocab_size, &t) == SP_OK) {
        fuzz_use_tokenizer(&t);
        sp_tokenizer_free(&t);
    }
    sp_error_clear();
    return 0;
}

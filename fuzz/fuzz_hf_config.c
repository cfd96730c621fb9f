/* fuzz/fuzz_hf_config.c: a Hugging Face config.json (io/hf_config.h), mapped to a model config. */
#include "fuzz/temp_file.h"
#include "io/hf_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_hf_config hc;
    sp_hf_config_read(fuzz_temp_file("config.json", data, size), &hc);
    sp_error_clear();
    return 0;
}

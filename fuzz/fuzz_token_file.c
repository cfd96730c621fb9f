/* fuzz/fuzz_token_file.c: a token id file (io/token_file.h) for a vocabulary of 512. */
#include <stdlib.h>

#include "fuzz/temp_file.h"
#include "io/token_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (sp_token_file_read(fuzz_temp_file("tokens.txt", data, size), 512, &ids, &n) == SP_OK)
        free(ids);
    sp_error_clear();
    return 0;
}

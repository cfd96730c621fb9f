/* fuzz/fuzz_llama2c.c: a llama2.c model file (io/llama2c.h): read and validated, then made into a
 * model on the CPU backend. */
#include "fuzz/temp_file.h"
#include "io/llama2c.h"
#include "kernels/backend.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_llama2c_weights w;
    if (sp_llama2c_read(fuzz_temp_file("model.bin", data, size), &w) == SP_OK) {
        sp_model *m = NULL;
        if (sp_llama2c_to_model(&w, sp_backend_cpu(), &m) == SP_OK)
            sp_model_free(m);
        sp_llama2c_free(&w);
    }
    sp_error_clear();
    return 0;
}

/* fuzz/fuzz_gguf_model.c: a GGUF file as a model (io/gguf_model.h): the architecture's config,
 * every tensor the config implies, the tokenizer (used when there is one), the model on the CPU. */
#include "fuzz/temp_file.h"
#include "fuzz/use_tokenizer.h"
#include "io/gguf_model.h"
#include "kernels/backend.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_ckpt_meta meta;
    sp_model *m = NULL;
    if (sp_gguf_model_load(fuzz_temp_file("in.gguf", data, size), sp_backend_cpu(), &m, &meta) == SP_OK) {
        if (meta.has_tokenizer)
            fuzz_use_tokenizer(&meta.tokenizer);
        sp_model_free(m);
        sp_ckpt_meta_free(&meta);
    }
    sp_error_clear();
    return 0;
}

/* fuzz/fuzz_checkpoint.c: a spanprobe checkpoint (HDF5, io/checkpoint.h): the metadata reader, then
 * the full load onto the CPU backend. */
#include "fuzz/h5_input.h"
#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = FUZZ_H5_INPUT(data, size);
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    if (sp_ckpt_read_meta(path, &meta) == SP_OK) {
        sp_ckpt_meta_free(&meta);
        sp_model *m = NULL;
        if (sp_ckpt_load(path, sp_backend_cpu(), &m, &meta) == SP_OK) {
            sp_model_free(m);
            sp_ckpt_meta_free(&meta);
        }
    }
    fuzz_h5_done();
    return 0;
}

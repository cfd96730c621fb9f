/* fuzz/fuzz_pt.c: a PyTorch checkpoint (io/pt_file.h): the ZIP directory, the restricted unpickler,
 * and every floating-point tensor read out whole; then the file as a nanoGPT ckpt.pt model
 * (io/nanogpt.h: model_args mapped, the state dict planned and loaded on the CPU). */
#include <stdlib.h>

#include "fuzz/temp_file.h"
#include "io/nanogpt.h"
#include "io/pt_file.h"
#include "kernels/backend.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_pt_file *f = NULL;
    const char *path = fuzz_temp_file("in.pt", data, size);
    if (sp_pt_open(path, &f) == SP_OK) {
        const sp_pk_value *root = sp_pt_root(f);
        for (size_t i = 0; root && root->kind == SP_PK_DICT && i < root->n; i++) {
            const sp_pk_value *t = root->items[2 * i + 1];
            if (t->kind != SP_PK_TENSOR || sp_pt_numel(t) > (1u << 20))
                continue;
            double *out = malloc((sp_pt_numel(t) ? sp_pt_numel(t) : 1) * sizeof *out);
            if (out)
                sp_pt_read_f64(f, t, out);
            free(out);
        }
        sp_pt_close(f);
        sp_model *m = NULL;
        sp_ckpt_meta meta;
        if (sp_nanogpt_load(path, sp_backend_cpu(), &m, &meta) == SP_OK) {
            sp_model_free(m);
            sp_ckpt_meta_free(&meta);
        }
    }
    sp_error_clear();
    return 0;
}

/* fuzz/fuzz_pt.c: a PyTorch checkpoint (io/pt_file.h): the ZIP directory, the restricted unpickler,
 * and every floating-point tensor read out whole. */
#include <stdlib.h>

#include "fuzz/temp_file.h"
#include "io/pt_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_pt_file *f = NULL;
    if (sp_pt_open(fuzz_temp_file("in.pt", data, size), &f) == SP_OK) {
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
    }
    sp_error_clear();
    return 0;
}

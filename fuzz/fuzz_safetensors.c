/* fuzz/fuzz_safetensors.c: a .safetensors file (io/safetensors.h): the header, then every tensor
 * of a readable dtype converted, 4096 elements at a time. */
#include "fuzz/temp_file.h"
#include "io/safetensors.h"

enum { CHUNK = 4096 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_st_archive *a = NULL;
    if (sp_st_open(fuzz_temp_file("in.safetensors", data, size), &a) == SP_OK) {
        static sp_real buf[CHUNK];
        sp_st_metadata(a, "format");
        for (int i = 0; i < sp_st_count(a); i++) {
            const sp_st_tensor *t = sp_st_at(a, i);
            if (!sp_st_dtype_is_readable(t->dtype) || sp_st_find(a, t->name) != t) /* the lookup too */
                continue;
            for (size_t first = 0; first < t->numel; first += CHUNK)
                if (sp_st_read(t, first, t->numel - first < CHUNK ? t->numel - first : CHUNK, buf) != SP_OK)
                    break;
        }
        sp_st_close(a);
    }
    sp_error_clear();
    return 0;
}

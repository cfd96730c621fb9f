/* fuzz/fuzz_dump.c: an activation dump (HDF5, io/dump.h): open, the tokens, then every layer of
 * every array it declares, 64 rows at a time. */
#include <stdlib.h>

#include "fuzz/h5_input.h"
#include "io/dump.h"

enum { ROWS = 64 };

static void read_arrays(sp_dump *d)
{
    const sp_dump_info *info = sp_dump_get_info(d);
    int64_t rows = sp_dump_rows(d);
    int32_t *tokens = malloc((size_t)rows * sizeof *tokens);
    if (!tokens || sp_dump_read_tokens(d, tokens) != SP_OK) {
        free(tokens);
        return;
    }
    free(tokens);
    for (int kind = 0; kind < SP_DUMP_N_KINDS; kind++) {
        sp_real *buf = malloc((size_t)ROWS * (size_t)sp_dump_width(d, kind) * sizeof *buf);
        for (int s = 0; buf && s < info->n_streams; s++)
            for (int l = 0; l < (kind == SP_DUMP_LOGITS ? 1 : info->n_layers + 1); l++) {
                if (!sp_dump_has_layer(d, kind, s, l))
                    continue;
                for (int64_t r = 0; r < rows; r += ROWS)
                    if (sp_dump_read(d, kind, s, l, r, rows - r < ROWS ? rows - r : ROWS, buf) != SP_OK)
                        break;
                sp_error_clear();
            }
        free(buf);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_dump *d = NULL;
    if (sp_dump_open(FUZZ_H5_INPUT(data, size), &d) == SP_OK) {
        read_arrays(d);
        sp_dump_close(d);
    }
    fuzz_h5_done();
    return 0;
}

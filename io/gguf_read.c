/* io/gguf_read.c: GGUF tensor rows as sp_real, dequantized a few blocks at a time. */
#include "io/gguf_file.h"

/* Floats dequantized per step: four 256-element super-blocks. */
#define STEP_ELEMENTS 1024

sp_status sp_gguf_read_rows(const sp_gguf_tensor *t, size_t first_row, size_t n_rows, sp_real *dst)
{
    const gguf_type_info *type = gguf_type(t->type);
    if (!type->dequant)
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': type %s cannot be read (expected F32, F16, BF16, Q8_0, Q4_0, "
                        "Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K or Q6_K)", t->file, t->name, type->name);
    if (first_row > t->n_rows || n_rows > t->n_rows - first_row)
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': rows [%zu, %zu + %zu) are past its %zu rows", t->file, t->name,
                        first_row, first_row, n_rows, t->n_rows);
    const unsigned char *src = t->data + first_row * t->row_bytes;
    size_t n_blocks = n_rows * (t->row_bytes / type->block_bytes), step = STEP_ELEMENTS / type->block;
    float buf[STEP_ELEMENTS];
    for (size_t b = 0; b < n_blocks; b += step) {
        size_t n = n_blocks - b < step ? n_blocks - b : step;
        type->dequant(src + b * type->block_bytes, n, buf);
        for (size_t i = 0; i < n * type->block; i++)
            dst[i] = (sp_real)buf[i];
        dst += n * type->block;
    }
    return SP_OK;
}

/* io/safetensors_read.c: safetensors tensor elements as sp_real. */
#include "io/half.h"
#include "io/le.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"

sp_status sp_st_read(const sp_st_tensor *t, size_t first, size_t count, sp_real *dst)
{
    if (!sp_st_dtype_is_readable(t->dtype))
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': dtype %s cannot be read as real numbers (expected F64, F32, F16 "
                        "or BF16)", t->file, t->name, sp_st_dtype_name(t->dtype));
    if (first > t->numel || count > t->numel - first)
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': elements [%zu, %zu + %zu) are past its %zu elements", t->file,
                        t->name, first, first, count, t->numel);
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case SP_ST_F64:
        for (size_t i = 0; i < count; i++)
            dst[i] = (sp_real)sp_le_f64(p + 8 * (first + i));
        break;
    case SP_ST_F32:
        for (size_t i = 0; i < count; i++)
            dst[i] = (sp_real)sp_le_f32(p + 4 * (first + i));
        break;
    case SP_ST_F16:
        for (size_t i = 0; i < count; i++)
            dst[i] = (sp_real)sp_half_to_float(sp_le_u16(p + 2 * (first + i)));
        break;
    default: /* BF16 */
        for (size_t i = 0; i < count; i++)
            dst[i] = (sp_real)sp_bf16_to_float(sp_le_u16(p + 2 * (first + i)));
        break;
    }
    return SP_OK;
}

void sp_st_release(const sp_st_tensor *t) { sp_mapped_release(t->data, t->nbytes); }

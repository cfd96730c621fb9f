/* io/safetensors_read.c: safetensors tensor elements as sp_real. */
#include <math.h>
#include <string.h>

#include "io/le.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"

static float float_from_bits(uint32_t bits)
{
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* IEEE binary16 -> binary32, exact: sign bit 15, exponent bits 10-14 (bias 15), mantissa bits 0-9. */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    if (exponent == 0x1F) /* inf, or NaN with its payload and quiet bit kept */
        return float_from_bits(sign | 0x7F800000u | mantissa << 13);
    if (exponent == 0) { /* zero or subnormal: mantissa x 2^-24, exact in binary32 */
        float magnitude = ldexpf((float)mantissa, -24);
        return sign ? -magnitude : magnitude;
    }
    return float_from_bits(sign | (exponent + 127 - 15) << 23 | mantissa << 13); /* rebias */
}

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
            dst[i] = (sp_real)half_to_float(sp_le_u16(p + 2 * (first + i)));
        break;
    default: /* BF16: the upper half of a binary32 */
        for (size_t i = 0; i < count; i++)
            dst[i] = (sp_real)float_from_bits((uint32_t)sp_le_u16(p + 2 * (first + i)) << 16);
        break;
    }
    return SP_OK;
}

void sp_st_release(const sp_st_tensor *t) { sp_mapped_release(t->data, t->nbytes); }

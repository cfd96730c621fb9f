/* io/half.h: the 16-bit floats of checkpoint files widened to float32, exactly: IEEE binary16
 * (float16) and bfloat16 (safetensors F16/BF16, GGUF F16/BF16 and the float16 scales of its
 * quantized blocks). */
#ifndef SP_HALF_H
#define SP_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float sp_float_from_bits(uint32_t bits)
{
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* binary16: sign bit 15, exponent bits 10-14 (bias 15), mantissa bits 0-9. */
static inline float sp_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    if (exponent == 0x1F) /* inf, or NaN with its payload and quiet bit kept */
        return sp_float_from_bits(sign | 0x7F800000u | mantissa << 13);
    if (exponent == 0) { /* zero or subnormal: mantissa x 2^-24, exact in binary32 */
        float magnitude = ldexpf((float)mantissa, -24);
        return sign ? -magnitude : magnitude;
    }
    return sp_float_from_bits(sign | (exponent + 127 - 15) << 23 | mantissa << 13); /* rebias */
}

/* bfloat16 is the upper half of a binary32. */
static inline float sp_bf16_to_float(uint16_t b) { return sp_float_from_bits((uint32_t)b << 16); }

#endif

/* io/gguf_dequant.c: GGUF's plain float types and ggml's 32-element quantized blocks (Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1) to float32, bit for bit what gguf.quants.dequantize (gguf 0.19.0) computes in
 * numpy float32. Why the bits agree: a float16 scale has 11 significant bits and a quant at most 8,
 * so d * q is exact in float32 whatever the order; only the add of Q4_1's and Q5_1's minimum m
 * rounds, once, in float as numpy does (C11 evaluates float expressions in float, and -std=c11 keeps
 * GCC from contracting them into FMAs, which would round the same anyway). Block layouts are ggml's
 * block_q* structs, little-endian. */
#include "io/gguf_dequant.h"

void gguf_dequant_f32(const unsigned char *src, size_t n_blocks, float *dst)
{
    for (size_t i = 0; i < n_blocks; i++)
        dst[i] = sp_le_f32(src + 4 * i);
}

void gguf_dequant_f16(const unsigned char *src, size_t n_blocks, float *dst)
{
    for (size_t i = 0; i < n_blocks; i++)
        dst[i] = gguf_half(src + 2 * i);
}

void gguf_dequant_bf16(const unsigned char *src, size_t n_blocks, float *dst)
{
    for (size_t i = 0; i < n_blocks; i++)
        dst[i] = sp_bf16_to_float(sp_le_u16(src + 2 * i));
}

/* block_q8_0: d (f16), qs[32] (int8); x = q * d. */
void gguf_dequant_q8_0(const unsigned char *src, size_t n_blocks, float *dst)
{
    for (size_t b = 0; b < n_blocks; b++, src += 34, dst += 32) {
        float d = gguf_half(src);
        for (int i = 0; i < 32; i++)
            dst[i] = (float)gguf_s8(src[2 + i]) * d;
    }
}

/* The 4 low bits of element i (0..31) of a 32-element block: elements 0-15 in the low nibbles of
 * qs[0..15], 16-31 in the high ones. */
static int nibble(const unsigned char *qs, int i) { return i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4; }

/* block_q4_0: d (f16), qs[16]; x = d * (q - 8). */
void gguf_dequant_q4_0(const unsigned char *src, size_t n_blocks, float *dst)
{
    for (size_t b = 0; b < n_blocks; b++, src += 18, dst += 32) {
        float d = gguf_half(src);
        for (int i = 0; i < 32; i++)
            dst[i] = d * (float)(nibble(src + 2, i) - 8);
    }
}

/* block_q4_1: d (f16), m (f16), qs[16]; x = d * q + m. */
void gguf_dequant_q4_1(const unsigned char *src, size_t n_blocks, float *dst)
{
    for (size_t b = 0; b < n_blocks; b++, src += 20, dst += 32) {
        float d = gguf_half(src), m = gguf_half(src + 2);
        for (int i = 0; i < 32; i++)
            dst[i] = d * (float)nibble(src + 4, i) + m;
    }
}

/* The 5-bit value of element i: its nibble, and bit i of the little-endian uint32 qh as bit 4. */
static int five_bits(const unsigned char *qh, const unsigned char *qs, int i)
{
    return nibble(qs, i) | (int)(sp_le_u32(qh) >> i & 1) << 4;
}

/* block_q5_0: d (f16), qh[4], qs[16]; x = d * (q - 16). */
void gguf_dequant_q5_0(const unsigned char *src, size_t n_blocks, float *dst)
{
    for (size_t b = 0; b < n_blocks; b++, src += 22, dst += 32) {
        float d = gguf_half(src);
        for (int i = 0; i < 32; i++)
            dst[i] = d * (float)(five_bits(src + 2, src + 6, i) - 16);
    }
}

/* block_q5_1: d (f16), m (f16), qh[4], qs[16]; x = d * q + m. */
void gguf_dequant_q5_1(const unsigned char *src, size_t n_blocks, float *dst)
{
    for (size_t b = 0; b < n_blocks; b++, src += 24, dst += 32) {
        float d = gguf_half(src), m = gguf_half(src + 2);
        for (int i = 0; i < 32; i++)
            dst[i] = d * (float)five_bits(src + 4, src + 8, i) + m;
    }
}

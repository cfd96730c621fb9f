/* io/gguf_dequant_k.c: ggml's K-quants (256-element super-blocks: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) to
 * float32, bit for bit what gguf.quants.dequantize (gguf 0.19.0) computes: as there, a sub-block's
 * scale is first the float32 product of the super-block's float16 d and the sub-block's integer
 * scale (dmin and its minimum likewise), then x = scale * q (- minimum). The products have at most
 * 24 significant bits (Q6_K's, the widest: 11 + 7 + 5), so they are exact, and subtracting the
 * minimum rounds once, in float, as numpy's float32 does (see io/gguf_dequant.c). Element e of a
 * super-block is found in its block_q*_K struct by the index formulas below. */
#include "io/gguf_dequant.h"

#define QK_K 256

/* Two bits of a 64-byte qs array holding 256 elements: element e is bits 2s..2s+1 of
 * qs[32 (e / 128) + e % 32] with s = (e % 128) / 32 (Q2_K's qs, Q3_K's low bits, Q6_K's high bits per
 * half). */
static int two_bits(const unsigned char *qs, int e) { return qs[32 * (e / 128) + e % 32] >> 2 * (e % 128 / 32) & 3; }

/* Bit e / 32 of hm[e % 32]: the high bit of element e in Q3_K's hmask and Q5_K's qh. */
static int high_bit(const unsigned char *hm, int e) { return hm[e % 32] >> (e / 32) & 1; }

/* Four bits of a 128-byte qs array holding 256 elements: nibble (e % 64) / 32 of qs[32 (e / 64) + e % 32]. */
static int four_bits(const unsigned char *qs, int e) { return qs[32 * (e / 64) + e % 32] >> 4 * (e % 64 / 32) & 0xF; }

/* block_q2_K: scales[16] (low nibble: scale, high: min, per 16 elements), qs[64], d, dmin (f16);
 * x = (d * sc) * q - dmin * m. */
void gguf_dequant_q2_k(const unsigned char *src, size_t n_blocks, float *dst)
{
    for (size_t b = 0; b < n_blocks; b++, src += 84, dst += QK_K) {
        const unsigned char *scales = src, *qs = src + 16;
        float d = gguf_half(src + 80), dmin = gguf_half(src + 82);
        for (int sub = 0; sub < 16; sub++) {
            float dl = d * (float)(scales[sub] & 0xF), ml = dmin * (float)(scales[sub] >> 4);
            for (int e = 16 * sub; e < 16 * sub + 16; e++)
                dst[e] = dl * (float)two_bits(qs, e) - ml;
        }
    }
}

/* block_q3_K: hmask[32], qs[64], scales[12] (16 6-bit scales: low 4 bits in the nibbles of bytes 0-7,
 * high 2 bits in the bit pairs of bytes 8-11), d (f16); x = (d * (sc - 32)) * q with q = the low two
 * bits, minus 4 where the hmask bit is clear. */
void gguf_dequant_q3_k(const unsigned char *src, size_t n_blocks, float *dst)
{
    for (size_t b = 0; b < n_blocks; b++, src += 110, dst += QK_K) {
        const unsigned char *hmask = src, *qs = src + 32, *scales = src + 96;
        float d = gguf_half(src + 108);
        for (int sub = 0; sub < 16; sub++) {
            int low = sub < 8 ? scales[sub] & 0xF : scales[sub - 8] >> 4;
            int high = scales[8 + sub % 4] >> 2 * (sub / 4) & 3;
            float dl = d * (float)((low | high << 4) - 32);
            for (int e = 16 * sub; e < 16 * sub + 16; e++)
                dst[e] = dl * (float)(two_bits(qs, e) - (high_bit(hmask, e) ? 0 : 4));
        }
    }
}

/* The 6-bit scale and min of sub-block i (0-7) packed in 12 bytes, as Q4_K and Q5_K store them
 * (ggml's get_scale_min_k4): sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scales) and 4-7 (mins);
 * 4-7 in the nibbles of bytes 8-11 with their top 2 bits in the top bits of bytes 0-7. */
static void scale_min(const unsigned char *s, int i, int *scale, int *min)
{
    if (i < 4) {
        *scale = s[i] & 63;
        *min = s[i + 4] & 63;
    } else {
        *scale = (s[i + 4] & 0xF) | (s[i - 4] >> 2 & 0x30);
        *min = (s[i + 4] >> 4) | (s[i] >> 2 & 0x30);
    }
}

/* Q4_K and Q5_K: d, dmin (f16), scales[12], then (Q5_K only) qh[32], then qs[128]; 8 sub-blocks of
 * 32; x = (d * sc) * q - dmin * m with q = four_bits, plus 16 where Q5_K's high bit is set. */
static void dequant_q45_k(const unsigned char *src, size_t n_blocks, float *dst, int five)
{
    size_t block_bytes = five ? 176 : 144;
    for (size_t b = 0; b < n_blocks; b++, src += block_bytes, dst += QK_K) {
        const unsigned char *scales = src + 4, *qh = src + 16, *qs = src + (five ? 48 : 16);
        float d = gguf_half(src), dmin = gguf_half(src + 2);
        for (int sub = 0; sub < 8; sub++) {
            int sc, m;
            scale_min(scales, sub, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int e = 32 * sub; e < 32 * sub + 32; e++)
                dst[e] = dl * (float)(four_bits(qs, e) | (five ? high_bit(qh, e) << 4 : 0)) - ml;
        }
    }
}

void gguf_dequant_q4_k(const unsigned char *src, size_t n_blocks, float *dst) { dequant_q45_k(src, n_blocks, dst, 0); }
void gguf_dequant_q5_k(const unsigned char *src, size_t n_blocks, float *dst) { dequant_q45_k(src, n_blocks, dst, 1); }

/* block_q6_K: ql[128] (low 4 bits: nibble (e % 128) / 64 of ql[64 (e / 128) + e % 64]), qh[64] (high
 * 2 bits, as two_bits), scales[16] (int8, per 16 elements), d (f16); x = (d * sc) * (q - 32). */
void gguf_dequant_q6_k(const unsigned char *src, size_t n_blocks, float *dst)
{
    for (size_t b = 0; b < n_blocks; b++, src += 210, dst += QK_K) {
        const unsigned char *ql = src, *qh = src + 128, *scales = src + 192;
        float d = gguf_half(src + 208);
        for (int sub = 0; sub < 16; sub++) {
            float dl = d * (float)gguf_s8(scales[sub]);
            for (int e = 16 * sub; e < 16 * sub + 16; e++) {
                int low = ql[64 * (e / 128) + e % 64] >> 4 * (e % 128 / 64) & 0xF;
                dst[e] = dl * (float)((low | two_bits(qh, e) << 4) - 32);
            }
        }
    }
}

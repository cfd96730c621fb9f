/* io/gguf_dequant.h: the dequantizers of the readable ggml types (io/gguf_dequant.c,
 * io/gguf_dequant_k.c), one per type, each turning n_blocks blocks at src into floats at dst, and
 * the field readers they share. Not for other callers. */
#ifndef SP_GGUF_DEQUANT_H
#define SP_GGUF_DEQUANT_H

#include "io/gguf_file.h"
#include "io/half.h"
#include "io/le.h"

gguf_dequant_fn gguf_dequant_f32, gguf_dequant_f16, gguf_dequant_bf16, gguf_dequant_q8_0, gguf_dequant_q4_0,
    gguf_dequant_q4_1, gguf_dequant_q5_0, gguf_dequant_q5_1, gguf_dequant_q2_k, gguf_dequant_q3_k, gguf_dequant_q4_k,
    gguf_dequant_q5_k, gguf_dequant_q6_k;

/* A little-endian float16 field (the blocks' scales), widened exactly. */
static inline float gguf_half(const unsigned char *p) { return sp_half_to_float(sp_le_u16(p)); }

/* A byte read as int8. */
static inline int gguf_s8(unsigned char u) { return u < 128 ? u : u - 256; }

#endif

/* tests/support/byte_buf.h: a growable byte buffer for building binary files in tests (llama2.c
 * checkpoints and tokenizers, safetensors and GGUF files); scalars are appended little-endian.
 * Aborts when memory runs out. */
#ifndef SP_TEST_BYTE_BUF_H
#define SP_TEST_BYTE_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    unsigned char *data;
    size_t len, cap;
} byte_buf;

void byte_buf_put(byte_buf *b, const void *p, size_t n);
void byte_buf_put_i32(byte_buf *b, int32_t v);
void byte_buf_put_f32(byte_buf *b, float v);
void byte_buf_put_u16(byte_buf *b, uint16_t v);
void byte_buf_put_u32(byte_buf *b, uint32_t v);
void byte_buf_put_u64(byte_buf *b, uint64_t v);
void byte_buf_free(byte_buf *b);

#endif

#include "byte_buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void byte_buf_put(byte_buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = 2 * (b->len + n) + 64;
        unsigned char *data = realloc(b->data, cap);
        if (!data) {
            fprintf(stderr, "byte_buf: out of memory\n");
            abort();
        }
        b->data = data;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void put_le32(byte_buf *b, uint32_t u)
{
    unsigned char bytes[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                              (unsigned char)(u >> 24)};
    byte_buf_put(b, bytes, 4);
}

void byte_buf_put_i32(byte_buf *b, int32_t v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    put_le32(b, u);
}

void byte_buf_put_f32(byte_buf *b, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    put_le32(b, u);
}

void byte_buf_put_u16(byte_buf *b, uint16_t v)
{
    unsigned char bytes[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    byte_buf_put(b, bytes, 2);
}

void byte_buf_put_u32(byte_buf *b, uint32_t v) { put_le32(b, v); }

void byte_buf_put_u64(byte_buf *b, uint64_t v)
{
    put_le32(b, (uint32_t)v);
    put_le32(b, (uint32_t)(v >> 32));
}

void byte_buf_free(byte_buf *b)
{
    free(b->data);
    *b = (byte_buf){0};
}

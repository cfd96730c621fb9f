/* io/le.h: little-endian scalars from byte buffers, whatever the host's byte order (the llama2.c
 * and safetensors formats are little-endian, as are ZIP archives and pickles). */
#ifndef SP_LE_H
#define SP_LE_H

#include <stdint.h>
#include <string.h>

/* n <= 8 bytes as an unsigned integer (the ZIP and pickle fields of PyTorch files). */
static inline uint64_t sp_le_uint(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline uint16_t sp_le_u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

static inline uint32_t sp_le_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline int32_t sp_le_i32(const unsigned char *p)
{
    uint32_t u = sp_le_u32(p);
    int32_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static inline float sp_le_f32(const unsigned char *p)
{
    uint32_t u = sp_le_u32(p);
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static inline uint64_t sp_le_u64(const unsigned char *p)
{
    return (uint64_t)sp_le_u32(p) | (uint64_t)sp_le_u32(p + 4) << 32;
}

static inline double sp_le_f64(const unsigned char *p)
{
    uint64_t u = sp_le_u64(p);
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

#endif

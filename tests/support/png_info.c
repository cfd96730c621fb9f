#include "png_info.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

int png_size(const char *path, int *width, int *height)
{
    unsigned char head[24];
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    const size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    /* signature, then the first chunk: length 13, type IHDR, width, height (big-endian) */
    if (n != sizeof head || memcmp(head, "\x89PNG\r\n\x1a\n", 8) != 0 || be32(head + 8) != 13 ||
        memcmp(head + 12, "IHDR", 4) != 0)
        return -1;
    *width = (int)be32(head + 16);
    *height = (int)be32(head + 20);
    return 0;
}

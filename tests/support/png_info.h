/* tests/support/png_info.h: checking that a file is a PNG image and reading its size. */
#ifndef SP_TEST_PNG_INFO_H
#define SP_TEST_PNG_INFO_H

/* 0 when path starts with the PNG signature and an IHDR chunk, whose width and height it returns;
 * -1 otherwise. */
int png_size(const char *path, int *width, int *height);

#endif

/* io/file_read.h: opening input files that must be regular files, and reading a whole (small) file
 * into memory for the formats read at once (tokenizers, token lists, text). */
#ifndef SP_FILE_READ_H
#define SP_FILE_READ_H

#include <stdio.h>

#include "core/common.h"
#include "core/input_file.h" /* sp_file_open_regular */

/* Reads the file into *data (free()), NUL-terminated for text use; files above max_bytes are
 * SP_ERR_INPUT, unreadable ones SP_ERR_IO, both naming the path. */
sp_status sp_file_read_all(const char *path, size_t max_bytes, unsigned char **data, size_t *size);

#endif

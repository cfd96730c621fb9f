/* io/file_read.h: opening input files that must be regular files, and reading a whole (small) file
 * into memory for the formats read at once (tokenizers, token lists, text). */
#ifndef SP_FILE_READ_H
#define SP_FILE_READ_H

#include <stdio.h>

#include "core/common.h"

/* Opens path for binary reading and gets its size; a missing file, a directory or another
 * non-regular file is SP_ERR_IO naming the path. */
sp_status sp_file_open_regular(const char *path, FILE **f, int64_t *size);
/* Reads the file into *data (free()), NUL-terminated for text use; files above max_bytes are
 * SP_ERR_INPUT, unreadable ones SP_ERR_IO, both naming the path. */
sp_status sp_file_read_all(const char *path, size_t max_bytes, unsigned char **data, size_t *size);

#endif

/* io/token_file.h: token id files: integer ids separated by any whitespace (spaces, tabs, newlines),
 * e.g. written by numpy.savetxt or `tr`. Each id must be a decimal integer in [0, vocab_size). */
#ifndef SP_TOKEN_FILE_H
#define SP_TOKEN_FILE_H

#include "core/common.h"

/* Largest token file read (as text). */
#define SP_TOKEN_FILE_MAX_BYTES ((size_t)1 << 30)

/* *ids is allocated (free()); errors name the file, the token's index, line and byte offset. */
sp_status sp_token_file_read(const char *path, int vocab_size, int32_t **ids, size_t *n_ids);

#endif

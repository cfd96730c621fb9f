/* core/input_file.h: opening an input file that must be a regular file, without ever blocking:
 * a FIFO (or a device) given as an input is refused at once, never waited on. */
#ifndef SP_INPUT_FILE_H
#define SP_INPUT_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "core/common.h"

/* Opens path for binary reading and gets its size (size may be NULL); a missing file, a directory,
 * a FIFO, a socket or a device is SP_ERR_IO naming the path and what it is. */
sp_status sp_file_open_regular(const char *path, FILE **f, int64_t *size);

#endif

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

/* The most bytes a reader allocates for one array on the strength of a file's header (a header can
 * declare anything): the machine's physical memory, or --max-memory-gib in the commands that take
 * it. Readers also hold a declared size to what the file can hold. */
void sp_read_budget_set(uint64_t bytes);
uint64_t sp_read_budget(void);
/* What the budget is, for messages: " (raise --max-memory-gib)" or " (the machine's memory)". */
const char *sp_read_budget_hint(void);

#endif

/* io/mapped_file.h: a whole regular file mapped read-only (mmap PROT_READ, MAP_PRIVATE), so large
 * inputs (safetensors weights) are read in place by the page cache and never copied. */
#ifndef SP_MAPPED_FILE_H
#define SP_MAPPED_FILE_H

#include "core/common.h"

typedef struct {
    const unsigned char *data; /* NULL for an empty file */
    size_t size;
} sp_mapped_file;

/* Maps path. A file that cannot be opened or mapped is SP_ERR_IO; a directory, FIFO, device or
 * socket is SP_ERR_INPUT (checked on the opened descriptor, which is opened non-blocking so a FIFO
 * without a writer never blocks). Both name the path. The descriptor is closed before returning. */
sp_status sp_map_file(const char *path, sp_mapped_file *m);
void sp_unmap_file(sp_mapped_file *m);
/* Drops the pages covering [p, p + n) of a mapping from the process's resident memory (madvise
 * MADV_DONTNEED on the page-aligned range around it); the data stay readable: a later access maps
 * them again from the file. */
void sp_mapped_release(const void *p, size_t n);

#endif

/* fuzz/temp_file.h: a harness's input as a file, for the readers that take a path (HDF5, mapped
 * safetensors and GGUF, every reader of a named file). */
#ifndef SP_FUZZ_TEMP_FILE_H
#define SP_FUZZ_TEMP_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Writes data into the file `name` ("in.h5", "config.json") of this process's private directory
 * and returns its path. The directory (mkdtemp under $TMPDIR, else /tmp) is made on the first call
 * and removed at exit; each file is created once and rewritten per input (pwrite + ftruncate) with
 * a new mtime, so that a reader caching per-file results (io/h5_vet.c) sees a changed file even when
 * the size stays and the clock has not ticked. Aborts when the file cannot be written. */
const char *fuzz_temp_file(const char *name, const uint8_t *data, size_t size);

#endif

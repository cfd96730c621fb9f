/* fuzz/h5_input.h: what the HDF5 harnesses (checkpoint, dump, report, trainlog) share. */
#ifndef SP_FUZZ_H5_INPUT_H
#define SP_FUZZ_H5_INPUT_H

#include <stddef.h>
#include <stdint.h>

/* Writes data as this process's "in.h5" (fuzz/temp_file.h) and returns its path. The first call
 * shortens the vetting child's time limit (io/h5.h, sp_h5_set_vet_seconds) to 1 s: a file that
 * hangs libhdf5 costs 1 s of the campaign, not 30 (vetting a good file takes about 0.1 s here). */
const char *fuzz_h5_file(const uint8_t *data, size_t size);
/* Ends an input: aborts, naming the count, when the reader left any HDF5 object open (a file,
 * group, dataset, datatype or attribute id it did not close), then clears the error. The leak
 * checker cannot see such ids: libhdf5 has no frame pointers, so the allocations behind an
 * unclosed id and libhdf5's own leaks on corrupt files (suppressed in fuzz/lsan.supp) look alike. */
void fuzz_h5_done(void);

#endif

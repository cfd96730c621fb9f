/* fuzz/h5_input.h: what the HDF5 harnesses (checkpoint, dump, report, trainlog) share. */
#ifndef SP_FUZZ_H5_INPUT_H
#define SP_FUZZ_H5_INPUT_H

#include <stddef.h>
#include <stdint.h>

/* Writes data as this process's "in.h5" (fuzz/temp_file.h) and returns its path. The first call
 * shortens the vetting child's time limit (io/h5.h, sp_h5_set_vet_seconds) to 1 s: a file that
 * hangs libhdf5 costs 1 s of the campaign, not 30 (vetting a good file takes about 0.1 s here). */
const char *fuzz_h5_file(const uint8_t *data, size_t size);
/* The same for a `_tree` harness: builds the HDF5 file data describes (fuzz/h5_tree.h) as "in.h5"
 * and returns its path; its files are vetted in this process (sp_h5_set_vet_in_process). With
 * FUZZ_H5_DESCRIBE=DIR set, the harness instead writes the description of each HDF5 file named on
 * its command line to DIR/<its name> and exits (how fuzz/make_seeds.sh makes the tree seeds). */
const char *fuzz_h5_tree_file(const uint8_t *data, size_t size);
/* The input route of a harness source: one built with FUZZ_H5_TREE defined (fuzz_<name>_tree.c,
 * which includes fuzz_<name>.c) reads descriptions, the other raw bytes. */
#ifdef FUZZ_H5_TREE
#define FUZZ_H5_INPUT fuzz_h5_tree_file
#else
#define FUZZ_H5_INPUT fuzz_h5_file
#endif
/* Ends an input: aborts, naming the count, when the reader left any HDF5 object open (a file,
 * group, dataset, datatype or attribute id it did not close), then clears the error. The leak
 * checker cannot see such ids: libhdf5 has no frame pointers, so the allocations behind an
 * unclosed id and libhdf5's own leaks on corrupt files (suppressed in fuzz/lsan.supp) look alike. */
void fuzz_h5_done(void);

#endif

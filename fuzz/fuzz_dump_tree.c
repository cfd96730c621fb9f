/* fuzz/fuzz_dump_tree.c: fuzz_dump.c's reads on HDF5 files that the input describes (fuzz/h5_tree.h):
 * well-formed files, read without a vetting child. */
#define FUZZ_H5_TREE
#include "fuzz/fuzz_dump.c"

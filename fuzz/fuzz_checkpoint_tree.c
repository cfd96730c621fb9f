/* fuzz/fuzz_checkpoint_tree.c: fuzz_checkpoint.c's reads on HDF5 files that the input describes (fuzz/h5_tree.h):
 * well-formed files, read without a vetting child. */
#define FUZZ_H5_TREE
#include "fuzz/fuzz_checkpoint.c"

/* fuzz/fuzz_trainlog_tree.c: fuzz_trainlog.c's reads on HDF5 files that the input describes (fuzz/h5_tree.h):
 * well-formed files, read without a vetting child. */
#define FUZZ_H5_TREE
#include "fuzz/fuzz_trainlog.c"

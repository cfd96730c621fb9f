/* tests/support/h5_edit.h: damaging valid HDF5 files through the HDF5 API, so tests make their own
 * bad inputs (nothing binary is committed). Each call opens the file read-write, edits one thing
 * and closes it; aborts when the edit itself fails (tests only). */
#ifndef SP_TEST_H5_EDIT_H
#define SP_TEST_H5_EDIT_H

#include <hdf5.h>
#include <stdint.h>

/* Sets (replacing) a string / int64 / float64 attribute of the object at obj ("/" for the root). */
void h5_edit_set_str(const char *file, const char *obj, const char *name, const char *value);
void h5_edit_set_int(const char *file, const char *obj, const char *name, int64_t value);
void h5_edit_delete_attr(const char *file, const char *obj, const char *name);
/* Removes a link (a dataset or group). */
void h5_edit_delete(const char *file, const char *path);
/* Replaces the dataset at path by one of the given file type and shape, filled with ones. */
void h5_edit_replace(const char *file, const char *path, hid_t type, int rank, const int64_t *dims);
/* Replaces (or adds) the dataset at path by a chunked float32 one of shape [rows, cols]: with
 * zero_rows 0 nothing is written (every read would be fill values: a few hundred bytes of file
 * declaring any size), else its first zero_rows rows are written as zeros through deflate (a
 * compression bomb: a few KB of file per 10 MB of data). */
void h5_edit_declare(const char *file, const char *path, int64_t rows, int64_t cols, int64_t zero_rows);
/* Overwrites the first n values of a float dataset with value (NaN, Inf, ...). */
void h5_edit_poison(const char *file, const char *path, int n, double value);
/* Adds a link at path (replacing one there): 'h' a hard link to the object at target, 's' a soft link
 * to the path target, 'e' an external link to target_file's object at target. */
void h5_edit_link(const char *file, const char *path, char kind, const char *target, const char *target_file);
/* A copy of src at dst (byte for byte). */
void h5_edit_copy(const char *src, const char *dst);

#endif

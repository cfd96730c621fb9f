/* io/h5.h: what every spanprobe HDF5 reader and writer shares.
 *
 * Every spanprobe file carries two root attributes: "format" (a name such as
 * "spanprobe-checkpoint") and "format_version" ("MAJOR.MINOR"). A reader accepts its own MAJOR and
 * any MINOR (newer minors only add optional objects); a newer MAJOR is an error. Writers also set
 * "tool_version", "created" (ISO 8601 UTC) and "source" (provenance, free text).
 *
 * HDF5's own error stack is silenced: every failure becomes one sp_error line naming the file, the
 * object inside it ("/params/embed/tok", "/config/d_model" for an attribute) and what was expected
 * versus found. Groups are created with link and attribute creation order tracked, so listings come
 * in writing order. Strings are written as variable-length UTF-8 (what h5py writes for str); fixed
 * length strings and h5py's boolean enums are read too.
 */
#ifndef SP_H5_H
#define SP_H5_H

#include <hdf5.h>

#include "core/common.h"
#include "core/fields.h"

#define SP_H5_MAX_RANK 4

/* Storage types for float datasets. */
typedef enum { SP_H5_F16, SP_H5_F32, SP_H5_F64 } sp_h5_float;

/* "file.h5: /group/name" for messages; name may be NULL (the object itself). */
void sp_h5_where(hid_t obj, const char *name, char *buf, size_t len);

/* ---- files ---- */
/* Opens read-only: SP_ERR_IO when the file cannot be read, SP_ERR_INPUT when it is not HDF5 or is
 * truncated or corrupt. */
sp_status sp_h5_open(const char *path, hid_t *file);
/* Reads the file once in a child process (io/h5_vet.c) and returns its verdict: SP_ERR_INPUT when
 * libhdf5 crashes, aborts or hangs on it, or when a dataset declares more data than the file holds
 * or than the reading budget (core/input_file.h). sp_h5_open calls it on every file it opens. */
sp_status sp_h5_vet(const char *path);
/* The child's time limit in seconds (0: 30 s plus 1 s per 32 MiB of file); tests shorten it. */
void sp_h5_set_vet_seconds(double seconds);
/* Vets in this process instead (on: 1). Only for files libhdf5 itself has just written, whose
 * metadata there is nothing to contain: the fuzz harnesses that build their files (fuzz/h5_tree.h)
 * use it to run without a fork per input. */
void sp_h5_set_vet_in_process(int on);
/* Reads the root "format" and "format_version" attributes. */
sp_status sp_h5_read_format(hid_t file, char *format, size_t len, int *major, int *minor);
/* Checks the format name and that the file's major version is not newer; *minor may be NULL. */
sp_status sp_h5_check_format(hid_t file, const char *format, int major, int *minor);
/* Creates a file for writing at path (truncating it), with creation order tracked. The file is
 * built in memory (HDF5's core driver) and written to path by sp_h5_close_written with plain
 * write(2) calls: HDF5 1.10 leaves a file whose disk writes failed in a state that crashes the
 * process at exit, so HDF5 itself never writes to disk and a full disk is an ordinary SP_ERR_IO.
 * The cost: a file being written is held in memory whole. */
sp_status sp_h5_create(const char *path, hid_t *file);
/* Writes the root attributes format, format_version, tool_version, created and source. */
sp_status sp_h5_write_header(hid_t file, const char *format, int major, int minor, const char *source);
/* Writes the file's image to its path and closes it (closed whatever the outcome): SP_ERR_IO when
 * the data cannot be written. */
sp_status sp_h5_close_written(hid_t file);
/* Closes a file being written without writing it (on an error path). */
void sp_h5_discard(hid_t file);

/* ---- groups and links ---- */
/* The link access property list of every read by path: external links are refused before their
 * target file is opened (spanprobe files hold none; a target could be a file the user never named,
 * or a FIFO that would block). Soft links are followed, at most HDF5's 16 in a chain. */
hid_t sp_h5_lapl(void);
/* 1 when every component of path exists below loc. */
int sp_h5_exists(hid_t loc, const char *path);
/* Opens a group; SP_ERR_INPUT naming it when missing. */
sp_status sp_h5_open_group(hid_t loc, const char *path, hid_t *group);
/* Creates the group at path and any missing parents (creation order tracked). */
sp_status sp_h5_create_group(hid_t loc, const char *path, hid_t *group);

/* Names of a group's links, in creation order where the file tracks it, else by name. */
sp_status sp_h5_list(hid_t group, char ***names, int *n);
void sp_h5_list_free(char **names, int n);

/* ---- attributes ---- */
typedef struct {
    H5T_class_t cls;  /* H5T_STRING (enums too, by lower-case member name), H5T_INTEGER or H5T_FLOAT */
    size_t n;         /* number of values (1 for a scalar or a string) */
    int is_array;     /* the dataspace is simple rather than scalar */
    int is_unsigned;  /* integers: reinterpret ints as uint64_t */
    char *text;       /* H5T_STRING */
    int64_t *ints;    /* H5T_INTEGER [n] */
    double *floats;   /* H5T_FLOAT [n] */
} sp_h5_value;

int sp_h5_has_attr(hid_t obj, const char *name);
/* 1, with its name in buf, when obj has an attribute not among names (NULL-terminated), else 0. */
int sp_h5_other_attr(hid_t obj, const char *const *names, char *buf, size_t len);
/* Reads any string, integer, float or enum attribute (at most 2^20 values). */
sp_status sp_h5_attr_read(hid_t obj, const char *name, sp_h5_value *v);
void sp_h5_value_free(sp_h5_value *v);
/* The value as text: strings as is, numbers with full precision, arrays as "[a, b]". */
void sp_h5_value_format(const sp_h5_value *v, char *buf, size_t len);

/* Typed getters: a missing attribute or a wrong type is SP_ERR_INPUT naming it. */
sp_status sp_h5_get_str(hid_t obj, const char *name, char *buf, size_t len);
sp_status sp_h5_get_str_alloc(hid_t obj, const char *name, char **out); /* free() */
sp_status sp_h5_get_i64(hid_t obj, const char *name, int64_t *out);
sp_status sp_h5_get_f64(hid_t obj, const char *name, double *out); /* integers are accepted */
/* Exactly n integers (uint64 bit patterns; signed values are converted). */
sp_status sp_h5_get_u64s(hid_t obj, const char *name, uint64_t *out, size_t n);
sp_status sp_h5_get_i32s(hid_t obj, const char *name, int32_t *out, size_t n);

sp_status sp_h5_set_str(hid_t obj, const char *name, const char *value);
sp_status sp_h5_set_i64(hid_t obj, const char *name, int64_t value);
sp_status sp_h5_set_f64(hid_t obj, const char *name, double value);
sp_status sp_h5_set_u64s(hid_t obj, const char *name, const uint64_t *values, size_t n);
sp_status sp_h5_set_i32s(hid_t obj, const char *name, const int32_t *values, size_t n);

/* ---- option structs as attributes (core/fields.h) ----
 * One attribute per field: INT/INT64 as int64, DOUBLE as float64, BOOL as int64 0/1, ENUM and
 * STRING as strings. Reading parses each attribute's text form through sp_fields_set, so integers,
 * floats, strings, "true"/"false" and h5py's booleans are all accepted where they make sense. A
 * missing attribute leaves the member as it was (its default); an attribute naming no field is an
 * error unless allow_unknown. Bad values are SP_ERR_INPUT naming the attribute. */
sp_status sp_h5_write_fields(hid_t obj, const sp_field_table *t, const void *src);
sp_status sp_h5_read_fields(hid_t obj, const sp_field_table *t, void *dst, int allow_unknown);

/* ---- datasets ---- */
/* A new copy of the file type (close with H5Tclose). float16 is built from IEEE float32, as HDF5
 * 1.10 has no predefined half type. */
hid_t sp_h5_float_type(sp_h5_float which);
hid_t sp_h5_real_type(void); /* the memory type of sp_real (predefined: do not close) */
/* Opens a dataset and checks its type class and shape: dims entries < 0 (or dims NULL) accept any
 * extent; rank < 0 accepts any rank 1..SP_H5_MAX_RANK. found (may be NULL) receives the extents. */
sp_status sp_h5_open_dataset(hid_t loc, const char *path, H5T_class_t cls, int rank, const int64_t *dims,
                             hid_t *dset, int64_t *found);
int sp_h5_rank(hid_t dset);
/* Reads a hyperslab (start/count of the dataset's rank; both NULL: everything) into memory of
 * mem_type, converting as HDF5 does (any float width into sp_real). */
sp_status sp_h5_read(hid_t dset, hid_t mem_type, const int64_t *start, const int64_t *count, void *out);
/* Creates a dataset (and missing parent groups); chunk may be NULL (contiguous); fill (may be NULL)
 * is the value unwritten elements read as. */
sp_status sp_h5_create_dataset(hid_t loc, const char *path, hid_t type, int rank, const int64_t *dims,
                               const int64_t *chunk, const float *fill, hid_t *dset);
/* Writes a hyperslab from memory of mem_type (start/count NULL: everything). */
sp_status sp_h5_write(hid_t dset, hid_t mem_type, const int64_t *start, const int64_t *count, const void *data);
/* "float32", "float16", "int64", "uint8", "string", ... for a dataset or attribute type. */
void sp_h5_type_name(hid_t type, char *buf, size_t len);

size_t sp_h5_count_nonfinite(const sp_real *x, size_t n);

#endif

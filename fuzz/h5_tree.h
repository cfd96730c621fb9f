/* fuzz/h5_tree.h: HDF5 files described by the fuzzer. The `_tree` harnesses read their input as a
 * list of records that build a file through libhdf5 itself, so every file is well-formed HDF5 and
 * the fuzzer explores what a spanprobe reader does with the objects, types, shapes, values,
 * attributes and links a valid file can hold (libhdf5's own handling of corrupt metadata is the
 * byte-level harnesses' part, contained by io/h5_vet.c). Such a file needs no vetting child, so these
 * harnesses never fork and run thousands of inputs a second.
 *
 * A record, all integers little-endian; a short input ends the list, a record libhdf5 refuses is
 * skipped:
 *   u8 op (mod 6): 0 group, 1 dataset, 2 attribute, 3 soft link, 4 hard link, 5 external link
 *   u8 n, path[n]                 the object (or link) made, from the root; missing parents are made
 *   op 0:    u8 flags             bit 0: no creation order tracked
 *   op 2:    u8 n, name[n]        the attribute's name, on the object at path
 *   op 3-5:  u8 n, target[n]      the link's target path (op 5: in the file "other.h5")
 *   op 1, 2: u8 type (mod 16), u8 size, u8 rank (mod 5), u16 dims[rank], u8 flags, u32 n, data[n]
 *     types: int8, uint8, int16, uint16, int32, uint32, int64, uint64 (little-endian), float16,
 *     float32, float64, variable-length UTF-8 string, fixed-length string of `size` bytes (1 to
 *     255), h5py's boolean enum (int8 FALSE 0, TRUE 1), big-endian float32, variable-length ASCII
 *     string. Values: the data bytes in the file's byte order, repeated to fill the array; for
 *     variable-length strings, the NUL-separated strings of data, repeated.
 *     dataset flags: bit 0 chunked, bit 1 deflate (chunked), bit 2 never written (fill values
 *     only), bit 3 with bit 2: the first dimension times 2^20 (a small file declaring a huge array).
 *     A written array, and any attribute, holds at most 2^20 bytes.
 */
#ifndef SP_FUZZ_H5_TREE_H
#define SP_FUZZ_H5_TREE_H

#include <stddef.h>
#include <stdint.h>

/* Builds the file data describes in memory and returns its image, malloc'd, of *image_size bytes
 * (records libhdf5 refuses are skipped; an empty list gives an empty file). Aborts when libhdf5
 * cannot make a file in memory at all. */
uint8_t *fuzz_h5_tree_image(const uint8_t *data, size_t size, size_t *image_size);
/* Describes the HDF5 file at path as records (groups, datasets, attributes and soft links, in
 * creation order where tracked); returns a malloc'd buffer of *size bytes, or NULL when the file
 * cannot be read. The seeds of the `_tree` harnesses are real files described so. */
uint8_t *fuzz_h5_tree_describe(const char *path, size_t *size);

#endif

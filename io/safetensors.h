/* io/safetensors.h: Hugging Face safetensors checkpoints, read only (docs/formats.md).
 *
 * A file is an 8-byte little-endian header length N, N bytes of UTF-8 JSON, then the data region:
 *   {"__metadata__": {"format": "pt"},                                    (optional, string -> string)
 *    "h.0.attn.c_attn.weight": {"dtype": "F32", "shape": [3, 8], "data_offsets": [0, 96]}, ...}
 * with offsets relative to the start of the data region and the tensors tiling it exactly. A sharded
 * model is a model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard file}})
 * beside its shards.
 *
 * sp_st_open maps every file read-only (mmap) and checks every header completely before returning:
 * tensor data is read in place from the mapping, never copied, and is only ever touched through
 * sp_st_read or a tensor's `data`. Errors are one line naming the file and the tensor or field, with
 * SP_ERR_INPUT for bad content (a non-regular file included) and SP_ERR_IO for a file that cannot be
 * opened or mapped. A file truncated by another process while mapped raises SIGBUS on access, as
 * with any mapping.
 *
 *   sp_st_archive *a = NULL;
 *   SP_TRY(sp_st_open("gpt2/", &a));
 *   const sp_st_tensor *w = sp_st_find(a, "h.0.attn.c_attn.weight");
 *   if (w) sp_st_read(w, 0, w->numel, buf);   (any float dtype, as sp_real)
 *   sp_st_close(a);
 */
#ifndef SP_SAFETENSORS_H
#define SP_SAFETENSORS_H

#include "core/common.h"

#define SP_ST_MAX_RANK 8

/* Every dtype the format names (safetensors 0.8.0). Only SP_ST_F64, F32, F16 and BF16 can be read
 * as sp_real; the others are parsed and their sizes checked. */
typedef enum {
    SP_ST_F64, SP_ST_F32, SP_ST_F16, SP_ST_BF16,
    SP_ST_I64, SP_ST_I32, SP_ST_I16, SP_ST_I8,
    SP_ST_U64, SP_ST_U32, SP_ST_U16, SP_ST_U8,
    SP_ST_BOOL,
    SP_ST_F8_E5M2, SP_ST_F8_E4M3, SP_ST_F8_E4M3FNUZ, SP_ST_F8_E5M2FNUZ, SP_ST_F8_E8M0,
    SP_ST_F6_E2M3, SP_ST_F6_E3M2, SP_ST_F4,
    SP_ST_C64,
    SP_ST_N_DTYPES
} sp_st_dtype;

typedef struct {
    const char *name;           /* as in the file */
    sp_st_dtype dtype;
    int rank;                   /* 0..SP_ST_MAX_RANK; 0 is a scalar (one element) */
    int64_t shape[SP_ST_MAX_RANK];
    size_t numel, nbytes;
    const unsigned char *data;  /* nbytes little-endian bytes in the mapping (not aligned) */
    const char *file;           /* the path of the file (shard) it lives in */
} sp_st_tensor;

/* One .safetensors file, or every shard of a model. */
typedef struct sp_st_archive sp_st_archive;

/* path: a .safetensors file, a *.safetensors.index.json (any path ending in ".json"), or a directory
 * holding model.safetensors or else model.safetensors.index.json. *out is NULL on failure. */
sp_status sp_st_open(const char *path, sp_st_archive **out);
void sp_st_close(sp_st_archive *a);

int sp_st_count(const sp_st_archive *a);
/* The i-th tensor (0 <= i < count) in strcmp order of names. */
const sp_st_tensor *sp_st_at(const sp_st_archive *a, int i);
/* NULL when absent. */
const sp_st_tensor *sp_st_find(const sp_st_archive *a, const char *name);
/* A "__metadata__" value, NULL when absent. Shards are searched in name order (the index's own
 * "metadata", which holds numbers, is not exposed). */
const char *sp_st_metadata(const sp_st_archive *a, const char *key);
/* Bytes of tensor data over all files (the sum of nbytes). */
size_t sp_st_total_bytes(const sp_st_archive *a);

/* "F32", "BF16", ... as the format spells it. */
const char *sp_st_dtype_name(sp_st_dtype dtype);
/* 1 for the dtypes sp_st_read converts. */
int sp_st_dtype_is_readable(sp_st_dtype dtype);

/* Converts `count` elements of t starting at element `first` (row-major) into dst: F32, F16 (exact,
 * subnormals included) and BF16 widen exactly; F64 is cast (in float32 builds: rounded, and beyond
 * float range it becomes +-inf). NaN and Inf are copied as they are; the caller checks. SP_ERR_INPUT,
 * naming the tensor, for another dtype or a range past the tensor's end. */
sp_status sp_st_read(const sp_st_tensor *t, size_t first, size_t count, sp_real *dst);

/* Lets the tensor's pages of the mapping go (io/mapped_file.h, sp_mapped_release): pages read stay
 * resident while the archive is open, so a loader that has converted a tensor calls this to keep
 * the mapped file from adding to its peak memory. The data stay readable (mapped again on access);
 * pages shared with neighbouring tensors go too and are mapped again as well. */
void sp_st_release(const sp_st_tensor *t);

#endif

/* io/safetensors_shard.h: internals shared by the safetensors reader's files: one mapped and
 * validated file (a shard), the archive of shards, and the dtype table. Not for other callers. */
#ifndef SP_SAFETENSORS_SHARD_H
#define SP_SAFETENSORS_SHARD_H

#include <cJSON.h>

#include "io/mapped_file.h"
#include "io/safetensors.h"

/* Headers and indexes above this are rejected (the reference implementation's limit is 100 MB). */
#define SP_ST_MAX_JSON_BYTES ((size_t)100 << 20)

typedef struct {
    char *path;
    sp_mapped_file map;
    cJSON *header;         /* owns the tensor names and the metadata strings */
    const cJSON *metadata; /* the "__metadata__" object, NULL when absent */
    int n_tensors;
    sp_st_tensor *tensors; /* in offset order; moved into the archive, then NULL */
} sp_st_shard;

struct sp_st_archive {
    int n_shards;
    sp_st_shard *shards;   /* a sharded model's in name order */
    int n_tensors;
    sp_st_tensor *tensors; /* every shard's, sorted by name */
};

/* Maps the file at path and validates its header and layout (docs/formats.md). */
sp_status sp_st_shard_open(const char *path, sp_st_shard *s);
void sp_st_shard_close(sp_st_shard *s);

/* Moves every shard's tensors into a->tensors, sorted by name; a name in two shards is an error. */
sp_status sp_st_archive_gather(sp_st_archive *a);
/* Opens the shards an index names into a (empty on entry) and checks them against it. */
sp_status sp_st_open_index(const char *path, sp_st_archive *a);

/* dir[0..dir_len) and name joined by one '/' (none after an empty dir), a new string (free()). */
char *sp_st_path_join(const char *dir, size_t dir_len, const char *name);

/* The dtype the format spells `name`; 0 when there is none. */
int sp_st_dtype_parse(const char *name, sp_st_dtype *out);
/* Bits per element: 4 (F4), 6 (F6_*), 8, 16, 32 or 64. */
int sp_st_dtype_bits(sp_st_dtype dtype);

#endif

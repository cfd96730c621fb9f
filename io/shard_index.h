/* io/shard_index.h: a sharded model's index, as Hugging Face writes it for safetensors
 * (model.safetensors.index.json) and for PyTorch files (pytorch_model.bin.index.json):
 *   {"metadata": {"total_size": ...}, "weight_map": {"tensor name": "shard file", ...}}
 * parsed and checked (an object, unique keys, shard names that are plain file names in the index's
 * directory, so an index cannot reach elsewhere). The formats open the shards themselves. */
#ifndef SP_SHARD_INDEX_H
#define SP_SHARD_INDEX_H

#include <cJSON.h>

#include "core/common.h"

typedef struct {
    const char *tensor, *shard_name; /* into the parsed JSON */
    int shard;                       /* into shards[] */
} sp_shard_entry;

typedef struct {
    cJSON *root;
    sp_shard_entry *entries; /* sorted by tensor name */
    int n;
    const char **shards;     /* the distinct shard names, sorted */
    int n_shards;
} sp_shard_index;

/* Reads the index at path (at most max_bytes). ix is empty on failure. */
sp_status sp_shard_index_read(const char *path, size_t max_bytes, sp_shard_index *ix);
/* The path of shard s: the index's directory joined with its name (free()); NULL without memory. */
char *sp_shard_index_path(const char *index_path, const sp_shard_index *ix, int s);
/* The entry of a tensor, NULL when the weight map does not name it. */
const sp_shard_entry *sp_shard_index_find(const sp_shard_index *ix, const char *tensor);
void sp_shard_index_free(sp_shard_index *ix);

#endif

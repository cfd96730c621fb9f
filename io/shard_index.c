#include "io/shard_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_text.h"
#include "io/mapped_file.h"

static int entry_by_tensor(const void *a, const void *b)
{
    return strcmp(((const sp_shard_entry *)a)->tensor, ((const sp_shard_entry *)b)->tensor);
}

static int string_order(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* "metadata" (optional, not used) and "weight_map"; other members are ignored. */
static sp_status find_weight_map(const char *path, const cJSON *root, const cJSON **map)
{
    SP_TRY(sp_json_check_unique_keys(path, root));
    const cJSON *metadata = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (metadata && !cJSON_IsObject(metadata) && !cJSON_IsNull(metadata))
        return sp_error(SP_ERR_INPUT, "%s: metadata is %s (expected an object)", path, sp_json_type_name(metadata));
    *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!*map)
        return sp_error(SP_ERR_INPUT, "%s: no weight_map (expected an object of tensor name -> shard file)", path);
    if (!cJSON_IsObject(*map))
        return sp_error(SP_ERR_INPUT, "%s: weight_map is %s (expected an object of tensor name -> shard file)", path,
                        sp_json_type_name(*map));
    if (!(*map)->child)
        return sp_error(SP_ERR_INPUT, "%s: weight_map names no tensor", path);
    char where[4200];
    snprintf(where, sizeof where, "%s: weight_map", path);
    return sp_json_check_unique_keys(where, *map);
}

/* A shard is a plain file name in the index's directory: no path, so an index cannot reach elsewhere. */
static sp_status check_shard_name(const char *path, const cJSON *item)
{
    if (!cJSON_IsString(item))
        return sp_error(SP_ERR_INPUT, "%s: weight_map: tensor '%s' maps to %s (expected a shard file name)", path,
                        item->string, sp_json_type_name(item));
    const char *name = item->valuestring;
    if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return sp_error(SP_ERR_INPUT, "%s: weight_map: tensor '%s' maps to \"%s\" (expected a file name in the index's "
                        "directory, without '/')", path, item->string, name);
    return SP_OK;
}

/* The weight map's entries sorted by tensor name, the distinct shard names, each entry's shard. */
static sp_status read_entries(const char *path, const cJSON *map, sp_shard_index *ix)
{
    const int n = cJSON_GetArraySize(map);
    sp_shard_entry *e = ix->entries = sp_calloc((size_t)n, sizeof *e, "shard index entries");
    const char **names = ix->shards = sp_calloc((size_t)n, sizeof *names, "shard names");
    if (!e || !names)
        return SP_ERR_NOMEM;
    const cJSON *item;
    cJSON_ArrayForEach(item, map) {
        SP_TRY(check_shard_name(path, item));
        e[ix->n++] = (sp_shard_entry){.tensor = item->string, .shard_name = item->valuestring};
    }
    qsort(e, (size_t)n, sizeof *e, entry_by_tensor);
    for (int i = 0; i < n; i++)
        names[i] = e[i].shard_name;
    qsort(names, (size_t)n, sizeof *names, string_order);
    for (int i = 0; i < n; i++)
        if (i == 0 || strcmp(names[i], names[ix->n_shards - 1]) != 0)
            names[ix->n_shards++] = names[i];
    for (int i = 0; i < n; i++) {
        const char **found = bsearch(&e[i].shard_name, names, (size_t)ix->n_shards, sizeof *names, string_order);
        e[i].shard = (int)(found - names);
    }
    return SP_OK;
}

sp_status sp_shard_index_read(const char *path, size_t max_bytes, sp_shard_index *ix)
{
    memset(ix, 0, sizeof *ix);
    sp_mapped_file m;
    SP_TRY(sp_map_file(path, &m));
    const cJSON *map = NULL;
    sp_status st = m.size > max_bytes ? sp_error(SP_ERR_INPUT, "%s: %zu bytes is above the %zu MiB limit for an index",
                                                 path, m.size, max_bytes >> 20)
                                      : sp_json_parse_object(path, m.data, m.size, 0, &ix->root);
    sp_unmap_file(&m);
    if (st == SP_OK)
        st = find_weight_map(path, ix->root, &map);
    if (st == SP_OK)
        st = read_entries(path, map, ix);
    if (st != SP_OK)
        sp_shard_index_free(ix);
    return st;
}

char *sp_shard_index_path(const char *index_path, const sp_shard_index *ix, int s)
{
    const char *slash = strrchr(index_path, '/');
    const size_t dir_len = slash ? (size_t)(slash - index_path) + 1 : 0, len = strlen(ix->shards[s]);
    char *out = malloc(dir_len + len + 1);
    if (!out)
        return NULL;
    memcpy(out, index_path, dir_len);
    memcpy(out + dir_len, ix->shards[s], len + 1);
    return out;
}

const sp_shard_entry *sp_shard_index_find(const sp_shard_index *ix, const char *tensor)
{
    const sp_shard_entry key = {.tensor = tensor};
    return ix->n ? bsearch(&key, ix->entries, (size_t)ix->n, sizeof key, entry_by_tensor) : NULL;
}

void sp_shard_index_free(sp_shard_index *ix)
{
    cJSON_Delete(ix->root);
    free(ix->entries);
    free(ix->shards);
    memset(ix, 0, sizeof *ix);
}

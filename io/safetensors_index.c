/* io/safetensors_index.c: a sharded model's index, model.safetensors.index.json:
 *   {"metadata": {"total_size": ...}, "weight_map": {"tensor name": "model-00001-of-00002.safetensors", ...}}
 * Every shard it names is opened from the index's directory, and the shards must hold exactly the
 * tensors the weight map assigns them (docs/formats.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/json_text.h"
#include "io/safetensors_shard.h"

typedef struct {
    const char *tensor;
    const char *shard_name;
    int shard; /* into the archive's shards */
} index_entry;

static int entry_by_tensor(const void *a, const void *b)
{
    return strcmp(((const index_entry *)a)->tensor, ((const index_entry *)b)->tensor);
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

/* The weight map's entries sorted by tensor name. */
static sp_status read_entries(const char *path, const cJSON *map, index_entry **entries, int *n)
{
    *n = cJSON_GetArraySize(map);
    index_entry *e = *entries = sp_calloc((size_t)*n, sizeof *e, "safetensors index entries");
    if (!e)
        return SP_ERR_NOMEM;
    int i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, map) {
        SP_TRY(check_shard_name(path, item));
        e[i++] = (index_entry){.tensor = item->string, .shard_name = item->valuestring};
    }
    qsort(e, (size_t)*n, sizeof *e, entry_by_tensor);
    return SP_OK;
}

/* Opens each distinct shard once, in name order, and points every entry at its shard. */
static sp_status open_shards(const char *path, index_entry *e, int n, const char **names, sp_st_archive *a)
{
    for (int i = 0; i < n; i++)
        names[i] = e[i].shard_name;
    qsort(names, (size_t)n, sizeof *names, string_order);
    int n_shards = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || strcmp(names[i], names[n_shards - 1]) != 0)
            names[n_shards++] = names[i];
    a->shards = sp_calloc((size_t)n_shards, sizeof *a->shards, "safetensors shard table");
    if (!a->shards)
        return SP_ERR_NOMEM;
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    for (int s = 0; s < n_shards; s++) {
        char *shard_path = sp_st_path_join(path, dir_len, names[s]);
        if (!shard_path)
            return SP_ERR_NOMEM;
        struct stat st;
        sp_status status = stat(shard_path, &st) != 0
                               /* a shard the index names but the directory lacks is a broken model, not I/O */
                               ? sp_error(errno == ENOENT ? SP_ERR_INPUT : SP_ERR_IO,
                                          "%s: weight_map names shard %s, which cannot be opened: %s", path,
                                          shard_path, strerror(errno))
                               : sp_st_shard_open(shard_path, &a->shards[s]);
        free(shard_path);
        SP_TRY(status);
        a->n_shards = s + 1;
    }
    for (int i = 0; i < n; i++) {
        const char **found = bsearch(&e[i].shard_name, names, (size_t)n_shards, sizeof *names, string_order);
        e[i].shard = (int)(found - names);
    }
    return SP_OK;
}

/* Both sorted by name: every entry's tensor must be in its shard, and no shard may hold a tensor
 * the weight map does not name (a stale index or a stray tensor is an error, not ignored). */
static sp_status check_against_index(const char *path, const index_entry *e, int n, const sp_st_archive *a)
{
    int i = 0, k = 0;
    while (i < n || k < a->n_tensors) {
        const sp_st_tensor *t = k < a->n_tensors ? &a->tensors[k] : NULL;
        int order = i == n ? 1 : !t ? -1 : strcmp(e[i].tensor, t->name);
        const char *shard = i < n ? a->shards[e[i].shard].path : NULL;
        if (order < 0)
            return sp_error(SP_ERR_INPUT, "%s: weight_map puts tensor '%s' in %s, which does not hold it", path,
                            e[i].tensor, shard);
        if (order > 0)
            return sp_error(SP_ERR_INPUT, "%s: %s holds tensor '%s', which weight_map does not name", path, t->file,
                            t->name);
        if (t->file != shard)
            return sp_error(SP_ERR_INPUT, "%s: weight_map puts tensor '%s' in %s, but it is in %s", path, t->name,
                            shard, t->file);
        i++;
        k++;
    }
    return SP_OK;
}

sp_status sp_st_open_index(const char *path, sp_st_archive *a)
{
    sp_mapped_file m;
    SP_TRY(sp_map_file(path, &m));
    cJSON *root = NULL;
    const cJSON *map = NULL;
    index_entry *entries = NULL;
    const char **names = NULL;
    int n = 0;
    sp_status st = m.size > SP_ST_MAX_JSON_BYTES
                       ? sp_error(SP_ERR_INPUT, "%s: %zu bytes is above the 100 MiB limit for an index", path, m.size)
                       : sp_json_parse_object(path, m.data, m.size, 0, &root);
    if (st == SP_OK)
        st = find_weight_map(path, root, &map);
    if (st == SP_OK)
        st = read_entries(path, map, &entries, &n);
    if (st == SP_OK && !(names = sp_calloc((size_t)n, sizeof *names, "safetensors shard names")))
        st = SP_ERR_NOMEM;
    if (st == SP_OK)
        st = open_shards(path, entries, n, names, a);
    if (st == SP_OK)
        st = sp_st_archive_gather(a);
    if (st == SP_OK)
        st = check_against_index(path, entries, n, a);
    free(names);
    free(entries);
    cJSON_Delete(root);
    sp_unmap_file(&m);
    return st;
}

/* io/safetensors_index.c: a sharded model's index, model.safetensors.index.json (io/shard_index.h):
 * every shard it names is opened from the index's directory, and the shards must hold exactly the
 * tensors the weight map assigns them (docs/formats.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/safetensors_shard.h"
#include "io/shard_index.h"

/* Opens each distinct shard once, in name order. */
static sp_status open_shards(const char *path, const sp_shard_index *ix, sp_st_archive *a)
{
    a->shards = sp_calloc((size_t)ix->n_shards, sizeof *a->shards, "safetensors shard table");
    if (!a->shards)
        return SP_ERR_NOMEM;
    for (int s = 0; s < ix->n_shards; s++) {
        char *shard_path = sp_shard_index_path(path, ix, s);
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
    return SP_OK;
}

/* Both sorted by name: every entry's tensor must be in its shard, and no shard may hold a tensor
 * the weight map does not name (a stale index or a stray tensor is an error, not ignored). */
static sp_status check_against_index(const char *path, const sp_shard_entry *e, int n, const sp_st_archive *a)
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
    sp_shard_index ix;
    SP_TRY(sp_shard_index_read(path, SP_ST_MAX_JSON_BYTES, &ix));
    sp_status st = open_shards(path, &ix, a);
    if (st == SP_OK)
        st = sp_st_archive_gather(a);
    if (st == SP_OK)
        st = check_against_index(path, ix.entries, ix.n, a);
    sp_shard_index_free(&ix);
    return st;
}

/* io/safetensors.c: opening a safetensors archive (one file, a sharded model's index, or a model
 * directory) and looking tensors up in it. One file is io/safetensors_file.c, the index
 * io/safetensors_index.c. */
#include "io/safetensors.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/safetensors_shard.h"

char *sp_st_path_join(const char *dir, size_t dir_len, const char *name)
{
    int slash = dir_len > 0 && dir[dir_len - 1] != '/';
    char *path = sp_malloc(dir_len + (size_t)slash + strlen(name) + 1, "safetensors file name");
    if (path) {
        memcpy(path, dir, dir_len);
        if (slash)
            path[dir_len] = '/';
        strcpy(path + dir_len + (size_t)slash, name);
    }
    return path;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const sp_st_tensor *)a)->name, ((const sp_st_tensor *)b)->name);
}

sp_status sp_st_archive_gather(sp_st_archive *a)
{
    size_t total = 0;
    for (int s = 0; s < a->n_shards; s++)
        total += (size_t)a->shards[s].n_tensors;
    if (total > INT_MAX)
        return sp_error(SP_ERR_INPUT, "%s: %zu tensors over %d files (at most %d)", a->shards[0].path, total,
                        a->n_shards, INT_MAX);
    a->tensors = sp_calloc(total, sizeof *a->tensors, "safetensors tensor table");
    if (!a->tensors)
        return SP_ERR_NOMEM;
    for (int s = 0; s < a->n_shards; s++) {
        sp_st_shard *shard = &a->shards[s];
        memcpy(a->tensors + a->n_tensors, shard->tensors, (size_t)shard->n_tensors * sizeof *shard->tensors);
        a->n_tensors += shard->n_tensors;
        free(shard->tensors);
        shard->tensors = NULL;
    }
    qsort(a->tensors, total, sizeof *a->tensors, by_name);
    for (int i = 1; i < a->n_tensors; i++) {
        const sp_st_tensor *t = &a->tensors[i], *prev = &a->tensors[i - 1];
        if (strcmp(t->name, prev->name) == 0) /* in two shards: each header's names are unique */
            return sp_error(SP_ERR_INPUT, "%s: tensor '%s' is also in %s (a tensor must live in one shard)", t->file,
                            t->name, prev->file);
    }
    return SP_OK;
}

static sp_status open_single(const char *path, sp_st_archive *a)
{
    a->shards = sp_calloc(1, sizeof *a->shards, "safetensors file table");
    if (!a->shards)
        return SP_ERR_NOMEM;
    SP_TRY(sp_st_shard_open(path, &a->shards[0]));
    a->n_shards = 1;
    return sp_st_archive_gather(a);
}

/* model.safetensors when the directory has it (as transformers prefers), else the index. */
static sp_status open_directory(const char *dir, sp_st_archive *a)
{
    char *single = sp_st_path_join(dir, strlen(dir), "model.safetensors");
    char *index = sp_st_path_join(dir, strlen(dir), "model.safetensors.index.json");
    struct stat st;
    sp_status status;
    if (!single || !index)
        status = SP_ERR_NOMEM;
    else if (stat(single, &st) == 0)
        status = open_single(single, a);
    else if (stat(index, &st) == 0)
        status = sp_st_open_index(index, a);
    else
        status = sp_error(SP_ERR_INPUT, "%s: directory holds neither model.safetensors nor "
                          "model.safetensors.index.json", dir);
    free(single);
    free(index);
    return status;
}

sp_status sp_st_open(const char *path, sp_st_archive **out)
{
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return sp_error(SP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    sp_st_archive *a = sp_calloc(1, sizeof *a, "safetensors archive");
    if (!a)
        return SP_ERR_NOMEM;
    size_t len = strlen(path);
    sp_status status = S_ISDIR(st.st_mode)                          ? open_directory(path, a)
                     : len >= 5 && strcmp(path + len - 5, ".json") == 0 ? sp_st_open_index(path, a)
                                                                       : open_single(path, a);
    if (status != SP_OK) {
        sp_st_close(a);
        return status;
    }
    *out = a;
    return SP_OK;
}

void sp_st_close(sp_st_archive *a)
{
    if (!a)
        return;
    for (int s = 0; s < a->n_shards; s++)
        sp_st_shard_close(&a->shards[s]);
    free(a->shards);
    free(a->tensors);
    free(a);
}

int sp_st_count(const sp_st_archive *a) { return a->n_tensors; }

const sp_st_tensor *sp_st_at(const sp_st_archive *a, int i) { return &a->tensors[i]; }

static int name_vs_tensor(const void *name, const void *t) { return strcmp(name, ((const sp_st_tensor *)t)->name); }

const sp_st_tensor *sp_st_find(const sp_st_archive *a, const char *name)
{
    return bsearch(name, a->tensors, (size_t)a->n_tensors, sizeof *a->tensors, name_vs_tensor);
}

const char *sp_st_metadata(const sp_st_archive *a, const char *key)
{
    for (int s = 0; s < a->n_shards; s++) {
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(a->shards[s].metadata, key);
        if (value)
            return value->valuestring;
    }
    return NULL;
}

size_t sp_st_total_bytes(const sp_st_archive *a)
{
    size_t total = 0;
    for (int i = 0; i < a->n_tensors; i++)
        total += a->tensors[i].nbytes;
    return total;
}

#include "io/tensor_set.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/safetensors.h"
#include "io/shard_index.h"
#include "io/str_map.h"

/* Indexes above this are rejected (as safetensors' own). */
#define MAX_INDEX_BYTES ((size_t)100 << 20)

/* A tensor of a state dict: what its view's reader needs. */
typedef struct {
    const sp_pt_file *f;
    const sp_pk_value *t;
} pt_tensor;

struct sp_tensor_set {
    sp_st_archive *st; /* one of these two holds the data */
    sp_pt_file **pt;   /* [n_pt]: one file, or a sharded model's shards */
    int n_pt;
    pt_tensor *pt_tensors;
    sp_tensor_view *views;
    int n;
    size_t bytes;
    sp_str_map by_name; /* name -> index into views */
};

void sp_tensor_set_close(sp_tensor_set *s)
{
    if (!s)
        return;
    sp_st_close(s->st);
    for (int i = 0; i < s->n_pt; i++)
        sp_pt_close(s->pt[i]);
    free(s->pt);
    free(s->pt_tensors);
    free(s->views);
    sp_str_map_free(&s->by_name);
    free(s);
}

int sp_tensor_set_count(const sp_tensor_set *s) { return s->n; }
const sp_tensor_view *sp_tensor_set_at(const sp_tensor_set *s, int i) { return &s->views[i]; }
size_t sp_tensor_set_bytes(const sp_tensor_set *s) { return s->bytes; }

const sp_tensor_view *sp_tensor_set_find(const sp_tensor_set *s, const char *name)
{
    int32_t i;
    return sp_str_map_get(&s->by_name, name, strlen(name), &i) ? &s->views[i] : NULL;
}

/* Room for n views; their names indexed once filled (index_names). */
static sp_status alloc_views(sp_tensor_set *s, int n)
{
    s->views = sp_calloc(n ? (size_t)n : 1, sizeof *s->views, "tensor list");
    s->n = n;
    return s->views ? SP_OK : SP_ERR_NOMEM;
}

static sp_status index_names(sp_tensor_set *s, const char *where)
{
    for (int i = 0; i < s->n; i++) {
        int found = 0;
        SP_TRY(sp_str_map_put(&s->by_name, s->views[i].name, strlen(s->views[i].name), i, &found, NULL, NULL));
        if (found)
            return sp_error(SP_ERR_INPUT, "%s: tensor '%s' appears twice", where, s->views[i].name);
    }
    return SP_OK;
}

/* ---- safetensors ---- */

static sp_status st_read(const void *tensor, size_t first, size_t count, sp_real *dst)
{
    return sp_st_read(tensor, first, count, dst);
}

static void st_release(const void *tensor) { sp_st_release(tensor); }

static sp_status open_safetensors(const char *dir, sp_tensor_set *s)
{
    SP_TRY(sp_st_open(dir, &s->st));
    SP_TRY(alloc_views(s, sp_st_count(s->st)));
    for (int i = 0; i < s->n; i++) {
        const sp_st_tensor *t = sp_st_at(s->st, i);
        sp_tensor_view *v = &s->views[i];
        *v = (sp_tensor_view){.file = t->file, .name = t->name, .dtype = sp_st_dtype_name(t->dtype),
                              .nbytes = t->nbytes, .rank = t->rank, .tensor = t, .read = st_read,
                              .release = st_release};
        for (int k = 0; k < t->rank; k++)
            v->shape[k] = t->shape[k];
    }
    s->bytes = sp_st_total_bytes(s->st);
    return index_names(s, dir);
}

/* ---- PyTorch state dicts ---- */

static sp_status pt_read(const void *tensor, size_t first, size_t count, sp_real *dst)
{
    const pt_tensor *p = tensor;
    return sp_pt_read(p->f, p->t, first, count, dst);
}

/* The n state dict entries of file f (a dict) into views[first ..], names without `strip`. */
static sp_status fill_pt(sp_tensor_set *s, const sp_pt_file *f, const sp_pk_value *dict, const char *strip, int first)
{
    const char *path = sp_pt_path(f);
    const size_t strip_len = strip ? strlen(strip) : 0;
    for (size_t i = 0; i < dict->n; i++) {
        const sp_pk_value *key = dict->items[2 * i], *t = dict->items[2 * i + 1];
        if (key->kind != SP_PK_STR)
            return sp_error(SP_ERR_INPUT, "%s: a state dict key that is not a string", path);
        if (t->kind != SP_PK_TENSOR)
            return sp_error(SP_ERR_INPUT, "%s: state dict entry '%s' is not a tensor", path, key->str);
        const char *name = key->str;
        if (strip_len && strncmp(name, strip, strip_len) == 0)
            name += strip_len;
        pt_tensor *pt = &s->pt_tensors[first + (int)i];
        *pt = (pt_tensor){f, t};
        sp_tensor_view *v = &s->views[first + (int)i];
        *v = (sp_tensor_view){.file = path, .name = name, .dtype = sp_pk_dtype_name(t->dtype),
                              .nbytes = sp_pt_numel(t) * sp_pk_dtype_size(t->dtype), .rank = t->rank,
                              .tensor = pt, .read = pt_read};
        for (int k = 0; k < t->rank; k++)
            v->shape[k] = t->shape[k];
    }
    return SP_OK;
}

/* Storages ordered by file, then key. */
static int cmp_storage(const void *x, const void *y)
{
    const pt_tensor *a = *(const pt_tensor *const *)x, *b = *(const pt_tensor *const *)y;
    if (a->f != b->f)
        return (uintptr_t)a->f < (uintptr_t)b->f ? -1 : 1;
    return strcmp(a->t->storage->str, b->t->storage->str);
}

/* The bytes of the distinct storages the n tensors lie in: a tied head is a view of its
 * embedding's storage and holds no bytes of its own. Sorted, so linear after n log n. */
static sp_status storage_bytes(sp_tensor_set *s, int n)
{
    const pt_tensor **sorted = sp_malloc((size_t)(n ? n : 1) * sizeof *sorted, "storage list");
    if (!sorted)
        return SP_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        sorted[i] = &s->pt_tensors[i];
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_storage);
    s->bytes = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || cmp_storage(&sorted[i - 1], &sorted[i]) != 0)
            s->bytes += (size_t)sorted[i]->t->storage->i * sp_pk_dtype_size(sorted[i]->t->storage->dtype);
    free(sorted);
    return SP_OK;
}

/* Room for the entries of the n_pt files' state dicts (dicts[k] of s->pt[k]), then filled. */
static sp_status fill_pt_all(sp_tensor_set *s, const sp_pk_value *const *dicts, const char *strip)
{
    size_t total = 0;
    for (int k = 0; k < s->n_pt; k++) {
        if (!dicts[k] || dicts[k]->kind != SP_PK_DICT)
            return sp_error(SP_ERR_INPUT, "%s: expected a state dict (a dict of tensors by name)", sp_pt_path(s->pt[k]));
        total += dicts[k]->n;
    }
    if (total > INT32_MAX)
        return sp_error(SP_ERR_INPUT, "%s: %zu tensors", sp_pt_path(s->pt[0]), total);
    SP_TRY(alloc_views(s, (int)total));
    s->pt_tensors = sp_calloc(total ? total : 1, sizeof *s->pt_tensors, "tensor list");
    if (!s->pt_tensors)
        return SP_ERR_NOMEM;
    for (int k = 0, first = 0; k < s->n_pt; first += (int)dicts[k]->n, k++)
        SP_TRY(fill_pt(s, s->pt[k], dicts[k], strip, first));
    SP_TRY(storage_bytes(s, (int)total));
    return index_names(s, sp_pt_path(s->pt[0]));
}

sp_status sp_tensor_set_open_pt(sp_pt_file *f, const sp_pk_value *dict, const char *strip, sp_tensor_set **out)
{
    *out = NULL;
    sp_tensor_set *s = sp_calloc(1, sizeof *s, "tensor set");
    sp_pt_file **files = s ? sp_calloc(1, sizeof *files, "tensor set") : NULL;
    if (!files) {
        free(s);
        sp_pt_close(f);
        return SP_ERR_NOMEM;
    }
    s->pt = files;
    s->pt[0] = f;
    s->n_pt = 1;
    sp_status st = fill_pt_all(s, &dict, strip);
    if (st != SP_OK) {
        sp_tensor_set_close(s);
        return st;
    }
    *out = s;
    return SP_OK;
}

/* Every tensor of the shards where the weight map puts it, and every tensor it names there. */
static sp_status check_pt_shards(const char *path, const sp_shard_index *ix, const sp_tensor_set *s)
{
    for (int i = 0; i < s->n; i++) {
        const sp_shard_entry *e = sp_shard_index_find(ix, s->views[i].name);
        if (!e)
            return sp_error(SP_ERR_INPUT, "%s: %s holds tensor '%s', which weight_map does not name", path,
                            s->views[i].file, s->views[i].name);
        if (strcmp(sp_pt_path(s->pt[e->shard]), s->views[i].file) != 0)
            return sp_error(SP_ERR_INPUT, "%s: weight_map puts tensor '%s' in %s, but it is in %s", path, e->tensor,
                            e->shard_name, s->views[i].file);
    }
    for (int i = 0; i < ix->n; i++)
        if (!sp_tensor_set_find(s, ix->entries[i].tensor))
            return sp_error(SP_ERR_INPUT, "%s: weight_map puts tensor '%s' in %s, which does not hold it", path,
                            ix->entries[i].tensor, ix->entries[i].shard_name);
    return SP_OK;
}

/* pytorch_model.bin.index.json and the shards it names. */
static sp_status open_pt_index(const char *path, sp_tensor_set *s)
{
    sp_shard_index ix;
    SP_TRY(sp_shard_index_read(path, MAX_INDEX_BYTES, &ix));
    const sp_pk_value **dicts = NULL;
    sp_status st = (s->pt = sp_calloc((size_t)ix.n_shards, sizeof *s->pt, "shard list")) &&
                           (dicts = sp_calloc((size_t)ix.n_shards, sizeof *dicts, "shard list"))
                       ? SP_OK
                       : SP_ERR_NOMEM;
    for (int k = 0; k < ix.n_shards && st == SP_OK; k++) {
        char *shard = sp_shard_index_path(path, &ix, k);
        st = shard ? sp_pt_open(shard, &s->pt[k]) : SP_ERR_NOMEM;
        free(shard);
        if (st == SP_OK) {
            s->n_pt = k + 1;
            dicts[k] = sp_pt_root(s->pt[k]);
        }
    }
    if (st == SP_OK)
        st = fill_pt_all(s, dicts, NULL);
    if (st == SP_OK)
        st = check_pt_shards(path, &ix, s);
    free(dicts);
    sp_shard_index_free(&ix);
    return st;
}

/* ---- a directory ---- */

static int exists_in(const char *dir, const char *file)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return stat(path, &sb) == 0;
}

sp_status sp_tensor_set_open_dir(const char *dir, sp_tensor_set **out)
{
    *out = NULL;
    const int safetensors = exists_in(dir, "model.safetensors") || exists_in(dir, "model.safetensors.index.json");
    if (!safetensors && exists_in(dir, "pytorch_model.bin")) {
        char path[4096];
        snprintf(path, sizeof path, "%s/pytorch_model.bin", dir);
        sp_pt_file *f;
        SP_TRY(sp_pt_open(path, &f));
        return sp_tensor_set_open_pt(f, sp_pt_root(f), NULL, out);
    }
    sp_tensor_set *s = sp_calloc(1, sizeof *s, "tensor set");
    if (!s)
        return SP_ERR_NOMEM;
    sp_status st;
    if (!safetensors && exists_in(dir, "pytorch_model.bin.index.json")) {
        char path[4096];
        snprintf(path, sizeof path, "%s/pytorch_model.bin.index.json", dir);
        st = open_pt_index(path, s);
    } else {
        st = open_safetensors(dir, s);
    }
    if (st != SP_OK) {
        sp_tensor_set_close(s);
        return st;
    }
    *out = s;
    return SP_OK;
}

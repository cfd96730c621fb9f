#include "io/tensor_set.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/safetensors.h"
#include "io/str_map.h"

/* A tensor of a state dict: what its view's reader needs. */
typedef struct {
    const sp_pt_file *f;
    const sp_pk_value *t;
} pt_tensor;

struct sp_tensor_set {
    sp_st_archive *st; /* one of these two holds the data */
    sp_pt_file *pt;
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
    sp_pt_close(s->pt);
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

static sp_status fill_pt(sp_tensor_set *s, const sp_pk_value *dict, const char *strip)
{
    const char *path = sp_pt_path(s->pt);
    if (!dict || dict->kind != SP_PK_DICT)
        return sp_error(SP_ERR_INPUT, "%s: expected a state dict (a dict of tensors by name)", path);
    SP_TRY(alloc_views(s, (int)dict->n));
    s->pt_tensors = sp_calloc(dict->n ? dict->n : 1, sizeof *s->pt_tensors, "tensor list");
    if (!s->pt_tensors)
        return SP_ERR_NOMEM;
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
        s->pt_tensors[i] = (pt_tensor){s->pt, t};
        sp_tensor_view *v = &s->views[i];
        *v = (sp_tensor_view){.file = path, .name = name, .dtype = sp_pk_dtype_name(t->dtype),
                              .nbytes = sp_pt_numel(t) * sp_pk_dtype_size(t->dtype), .rank = t->rank,
                              .tensor = &s->pt_tensors[i], .read = pt_read};
        for (int k = 0; k < t->rank; k++)
            v->shape[k] = t->shape[k];
        s->bytes += v->nbytes;
    }
    return index_names(s, path);
}

sp_status sp_tensor_set_open_pt(sp_pt_file *f, const sp_pk_value *dict, const char *strip, sp_tensor_set **out)
{
    *out = NULL;
    sp_tensor_set *s = sp_calloc(1, sizeof *s, "tensor set");
    if (!s) {
        sp_pt_close(f);
        return SP_ERR_NOMEM;
    }
    s->pt = f;
    sp_status st = fill_pt(s, dict, strip);
    if (st != SP_OK) {
        sp_tensor_set_close(s);
        return st;
    }
    *out = s;
    return SP_OK;
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
    if (!exists_in(dir, "model.safetensors") && !exists_in(dir, "model.safetensors.index.json") &&
        exists_in(dir, "pytorch_model.bin")) {
        char path[4096];
        snprintf(path, sizeof path, "%s/pytorch_model.bin", dir);
        sp_pt_file *f;
        SP_TRY(sp_pt_open(path, &f));
        return sp_tensor_set_open_pt(f, sp_pt_root(f), NULL, out);
    }
    sp_tensor_set *s = sp_calloc(1, sizeof *s, "tensor set");
    if (!s)
        return SP_ERR_NOMEM;
    sp_status st = open_safetensors(dir, s);
    if (st != SP_OK) {
        sp_tensor_set_close(s);
        return st;
    }
    *out = s;
    return SP_OK;
}

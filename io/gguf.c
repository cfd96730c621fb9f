/* io/gguf.c: opening a GGUF file (the header, then io/gguf_meta.c and io/gguf_tensors.c), unique
 * keys and tensor names, the alignment, and lookups. The rules are in docs/formats.md. */
#include <stdlib.h>
#include <string.h>

#include "io/gguf_file.h"
#include "io/le.h"

#define HEADER_BYTES 24
/* The fewest bytes a key-value pair (an empty key, a type and a one-byte value) and a tensor info
 * (an empty name, n_dims 0, type and offset) take: counts are checked against them before the
 * tables are allocated. */
#define MIN_KV_BYTES 13
#define MIN_TENSOR_INFO_BYTES 24

static sp_status check_version(gguf_cursor *c, uint32_t version)
{
    if (version == 2 || version == 3)
        return SP_OK;
    uint32_t swapped = (version >> 24) | (version >> 8 & 0xFF00) | (version << 8 & 0xFF0000) | version << 24;
    if (version == 1)
        return gguf_fail(c, "version 1 is not supported (expected 2 or 3)");
    if (swapped >= 1 && swapped <= 3)
        return gguf_fail(c, "version reads 0x%08x, a big-endian file of version %u (only little-endian files are "
                         "read)", version, swapped);
    return gguf_fail(c, "version %u is not supported (expected 2 or 3)", version);
}

static sp_status read_header(gguf_cursor *c)
{
    const unsigned char *magic = gguf_take(c, 4);
    if (!magic)
        return gguf_truncated(c, "the magic \"GGUF\"", 4);
    if (memcmp(magic, "GGUF", 4) != 0)
        return gguf_fail(c, "magic is %02x %02x %02x %02x (expected \"GGUF\", 47 47 55 46)", magic[0], magic[1],
                         magic[2], magic[3]);
    uint64_t n_tensors = 0, n_kvs = 0;
    SP_TRY(gguf_take_u32(c, "the version", &c->g->version));
    SP_TRY(check_version(c, c->g->version));
    SP_TRY(gguf_take_u64(c, "the tensor count", &n_tensors));
    SP_TRY(gguf_take_u64(c, "the metadata count", &n_kvs));
    size_t left = c->g->map.size - HEADER_BYTES;
    if (n_kvs > left / MIN_KV_BYTES || n_kvs > INT32_MAX)
        return gguf_fail(c, "metadata count %llu needs at least %d bytes per key-value pair, %zu follow the header",
                         (unsigned long long)n_kvs, MIN_KV_BYTES, left);
    left -= (size_t)n_kvs * MIN_KV_BYTES;
    if (n_tensors > left / MIN_TENSOR_INFO_BYTES || n_tensors > INT32_MAX)
        return gguf_fail(c, "tensor count %llu needs at least %d bytes per tensor info, %zu follow the header and the "
                         "smallest possible metadata", (unsigned long long)n_tensors, MIN_TENSOR_INFO_BYTES, left);
    c->g->n_kvs = (int)n_kvs;
    c->g->n_tensors = (int)n_tensors;
    return SP_OK;
}

/* Sorted by name, ties in index order. */
static int by_name_then_index(const void *a, const void *b)
{
    const gguf_name *x = a, *y = b;
    int order = strcmp(x->name, y->name);
    return order ? order : (x->index > y->index) - (x->index < y->index);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const gguf_name *)a)->name, ((const gguf_name *)b)->name);
}

/* Sorts names for lookup; a name twice is an error naming it. */
static sp_status sort_unique(const sp_gguf *g, const char *what, gguf_name *names, int n)
{
    qsort(names, (size_t)n, sizeof *names, by_name_then_index);
    for (int i = 1; i < n; i++)
        if (strcmp(names[i - 1].name, names[i].name) == 0)
            return sp_error(SP_ERR_INPUT, "%s: %s '%s' appears twice (entries %d and %d; expected once)", g->path, what,
                            names[i].name, names[i - 1].index, names[i].index);
    return SP_OK;
}

static sp_status index_names(sp_gguf *g)
{
    g->kvs_by_key = sp_calloc((size_t)g->n_kvs, sizeof *g->kvs_by_key, "GGUF key index");
    g->tensors_by_name = sp_calloc((size_t)g->n_tensors, sizeof *g->tensors_by_name, "GGUF tensor index");
    if (!g->kvs_by_key || !g->tensors_by_name)
        return SP_ERR_NOMEM;
    for (int i = 0; i < g->n_kvs; i++)
        g->kvs_by_key[i] = (gguf_name){g->strings + g->kvs[i].key, i};
    for (int i = 0; i < g->n_tensors; i++)
        g->tensors_by_name[i] = (gguf_name){g->tensors[i].name, i};
    SP_TRY(sort_unique(g, "metadata key", g->kvs_by_key, g->n_kvs));
    return sort_unique(g, "tensor name", g->tensors_by_name, g->n_tensors);
}

static int find_name(const gguf_name *names, int n, const char *name)
{
    gguf_name key = {name, -1};
    const gguf_name *hit = n ? bsearch(&key, names, (size_t)n, sizeof *names, by_name) : NULL;
    return hit ? hit->index : -1;
}

/* general.alignment: a UINT32 (as llama.cpp and the gguf package require), a power of two. */
static sp_status read_alignment(sp_gguf *g)
{
    g->alignment = 32;
    int i = sp_gguf_kv_find(g, "general.alignment");
    if (i < 0)
        return SP_OK;
    const gguf_value *v = &g->kvs[i].value;
    if (v->type != SP_GGUF_UINT32)
        return sp_error(SP_ERR_INPUT, "%s: metadata 'general.alignment' is %s (expected UINT32)", g->path,
                        sp_gguf_value_type_name(v->type));
    uint32_t alignment = sp_le_u32(g->map.data + v->at);
    if (alignment == 0 || (alignment & (alignment - 1)))
        return sp_error(SP_ERR_INPUT, "%s: metadata 'general.alignment' is %u (expected a power of two)", g->path,
                        alignment);
    g->alignment = alignment;
    return SP_OK;
}

static sp_status read_file(sp_gguf *g)
{
    gguf_cursor c = {.g = g, .section = "header", .item = -1};
    SP_TRY(read_header(&c));
    SP_TRY(gguf_read_metadata(&c));
    SP_TRY(gguf_read_tensor_infos(&c));
    g->infos_end = c.pos;
    SP_TRY(index_names(g));
    SP_TRY(read_alignment(g));
    return gguf_place_tensors(g);
}

sp_status sp_gguf_open(const char *path, sp_gguf **out)
{
    *out = NULL;
    sp_gguf *g = sp_calloc(1, sizeof *g, "GGUF file");
    if (!g)
        return SP_ERR_NOMEM;
    g->path = sp_malloc(strlen(path) + 1, "GGUF file name");
    sp_status st = g->path ? SP_OK : SP_ERR_NOMEM;
    if (st == SP_OK)
        st = sp_map_file(strcpy(g->path, path), &g->map);
    if (st == SP_OK)
        st = read_file(g);
    if (st != SP_OK) {
        sp_gguf_close(g);
        return st;
    }
    *out = g;
    return SP_OK;
}

void sp_gguf_close(sp_gguf *g)
{
    if (!g)
        return;
    sp_unmap_file(&g->map);
    free(g->kvs);
    free(g->kvs_by_key);
    free(g->tensors);
    free(g->tensors_by_name);
    free(g->nodes);
    free(g->strings);
    free(g->path);
    free(g);
}

uint32_t sp_gguf_version(const sp_gguf *g) { return g->version; }
size_t sp_gguf_alignment(const sp_gguf *g) { return g->alignment; }

int sp_gguf_kv_count(const sp_gguf *g) { return g->n_kvs; }
const char *sp_gguf_kv_key(const sp_gguf *g, int i) { return g->strings + g->kvs[i].key; }
sp_gguf_value_type sp_gguf_kv_type(const sp_gguf *g, int i) { return g->kvs[i].value.type; }
int sp_gguf_kv_find(const sp_gguf *g, const char *key) { return find_name(g->kvs_by_key, g->n_kvs, key); }

int sp_gguf_tensor_count(const sp_gguf *g) { return g->n_tensors; }
const sp_gguf_tensor *sp_gguf_tensor_at(const sp_gguf *g, int i) { return &g->tensors[i]; }

const sp_gguf_tensor *sp_gguf_find(const sp_gguf *g, const char *name)
{
    int i = find_name(g->tensors_by_name, g->n_tensors, name);
    return i < 0 ? NULL : &g->tensors[i];
}

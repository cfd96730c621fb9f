/* io/gguf_get.c: typed access to GGUF metadata, by key and by array element. Errors are one line
 * "<file>: metadata '<key>'[i]...: expected <what>, found <what>". */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "io/gguf_file.h"
#include "io/le.h"

/* A value and where it is: the key and the element indices below it. */
typedef struct {
    const sp_gguf *g;
    int kv;
    int depth;
    const size_t *path;
    gguf_value v;
    const gguf_value *node; /* the stored value (NULL for an element of a fixed-width array) */
} item;

/* What a public getter asks for; the names are the expected types in its errors. */
typedef enum { AS_STRING, AS_UINT, AS_INT, AS_FLOAT, AS_BOOL, AS_ARRAY } wanted;
static const char *const wanted_names[] = {"STRING", "an integer", "an integer", "FLOAT32 or FLOAT64", "BOOL", "ARRAY"};

static sp_status fail(const item *it, const char *expected, const char *found)
{
    char where[512];
    gguf_value_where(it->g, it->g->kvs[it->kv].key, it->depth, it->path, where, sizeof where);
    return sp_error(SP_ERR_INPUT, "%s: %s: expected %s, found %s", it->g->path, where, expected, found);
}

static sp_status wrong_type(const item *it, const char *expected)
{
    return fail(it, expected, sp_gguf_value_type_name(it->v.type));
}

static sp_status by_key(const sp_gguf *g, const char *key, const char *expected, item *it)
{
    int kv = sp_gguf_kv_find(g, key);
    if (kv < 0)
        return sp_error(SP_ERR_INPUT, "%s: metadata '%s': expected %s, found no such key", g->path, key, expected);
    *it = (item){.g = g, .kv = kv, .v = g->kvs[kv].value, .node = &g->kvs[kv].value};
    return SP_OK;
}

/* path: room for a->depth + 1 indices. */
static sp_status element(const sp_gguf_array *a, size_t i, size_t *path, item *it)
{
    const gguf_value *array = a->value;
    memcpy(path, a->path, (size_t)a->depth * sizeof *path);
    path[a->depth] = i;
    *it = (item){.g = a->file, .kv = a->kv, .depth = a->depth, .path = path};
    if (i >= a->count) {
        char found[64];
        snprintf(found, sizeof found, "element %zu of %zu", i, a->count);
        return fail(it, "an index inside the array", found);
    }
    it->depth++;
    size_t width = gguf_value_width(array->elem);
    if (width)
        it->v = (gguf_value){.type = array->elem, .at = array->at + i * width};
    else
        it->v = *(it->node = &a->file->nodes[array->at + i]);
    return SP_OK;
}

/* Any integer type as its 64 bits, sign-extended when *is_signed; 0 for another type. */
static int integer_bits(const item *it, uint64_t *bits, int *is_signed)
{
    static const int width_bits[SP_GGUF_N_VALUE_TYPES] = {
        [SP_GGUF_UINT8] = 8, [SP_GGUF_INT8] = 8,   [SP_GGUF_UINT16] = 16, [SP_GGUF_INT16] = 16,
        [SP_GGUF_UINT32] = 32, [SP_GGUF_INT32] = 32, [SP_GGUF_UINT64] = 64, [SP_GGUF_INT64] = 64,
    };
    int width = width_bits[it->v.type];
    if (!width)
        return 0;
    const unsigned char *p = it->g->map.data + it->v.at;
    uint64_t u = width == 8 ? p[0] : width == 16 ? sp_le_u16(p) : width == 32 ? sp_le_u32(p) : sp_le_u64(p);
    *is_signed = it->v.type == SP_GGUF_INT8 || it->v.type == SP_GGUF_INT16 || it->v.type == SP_GGUF_INT32 ||
                 it->v.type == SP_GGUF_INT64;
    if (*is_signed && width < 64) {
        uint64_t sign = (uint64_t)1 << (width - 1);
        u = (u ^ sign) - sign;
    }
    *bits = u;
    return 1;
}

static int64_t as_int64(uint64_t bits)
{
    int64_t v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static sp_status get_uint(const item *it, uint64_t *out)
{
    uint64_t bits = 0;
    int is_signed = 0;
    if (!integer_bits(it, &bits, &is_signed))
        return wrong_type(it, wanted_names[AS_UINT]);
    if (is_signed && as_int64(bits) < 0) {
        char found[32];
        snprintf(found, sizeof found, "%lld", (long long)as_int64(bits));
        return fail(it, "an integer >= 0", found);
    }
    *out = bits;
    return SP_OK;
}

static sp_status get_int(const item *it, int64_t *out)
{
    uint64_t bits = 0;
    int is_signed = 0;
    if (!integer_bits(it, &bits, &is_signed))
        return wrong_type(it, wanted_names[AS_INT]);
    if (!is_signed && bits > INT64_MAX) {
        char found[32];
        snprintf(found, sizeof found, "%llu", (unsigned long long)bits);
        return fail(it, "an integer <= 2^63 - 1", found);
    }
    *out = as_int64(bits);
    return SP_OK;
}

static sp_status get_float(const item *it, double *out)
{
    const unsigned char *p = it->g->map.data + it->v.at;
    if (it->v.type == SP_GGUF_FLOAT32)
        *out = sp_le_f32(p);
    else if (it->v.type == SP_GGUF_FLOAT64)
        *out = sp_le_f64(p);
    else
        return wrong_type(it, wanted_names[AS_FLOAT]);
    return SP_OK;
}

static sp_status get_bool(const item *it, int *out)
{
    if (it->v.type != SP_GGUF_BOOL)
        return wrong_type(it, wanted_names[AS_BOOL]);
    *out = it->g->map.data[it->v.at];
    return SP_OK;
}

static sp_status get_string(const item *it, const char **s, size_t *len)
{
    if (it->v.type != SP_GGUF_STRING)
        return wrong_type(it, wanted_names[AS_STRING]);
    *s = it->g->strings + it->v.at;
    if (len)
        *len = it->v.len;
    return SP_OK;
}

static sp_status get_array(const item *it, sp_gguf_array *out)
{
    if (it->v.type != SP_GGUF_ARRAY)
        return wrong_type(it, wanted_names[AS_ARRAY]);
    *out = (sp_gguf_array){.type = it->v.elem, .count = it->v.len, .file = it->g, .kv = it->kv, .value = it->node,
                           .depth = it->depth};
    for (int d = 0; d < it->depth; d++)
        out->path[d] = it->path[d];
    return SP_OK;
}

typedef struct {
    const char **s;
    size_t *len;
} string_out;

static sp_status convert(const item *it, wanted w, void *out)
{
    switch (w) {
    case AS_STRING:
        return get_string(it, ((string_out *)out)->s, ((string_out *)out)->len);
    case AS_UINT:
        return get_uint(it, out);
    case AS_INT:
        return get_int(it, out);
    case AS_FLOAT:
        return get_float(it, out);
    case AS_BOOL:
        return get_bool(it, out);
    default:
        return get_array(it, out);
    }
}

static sp_status get_by_key(const sp_gguf *g, const char *key, wanted w, void *out)
{
    item it;
    SP_TRY(by_key(g, key, wanted_names[w], &it));
    return convert(&it, w, out);
}

static sp_status get_element(const sp_gguf_array *a, size_t i, wanted w, void *out)
{
    size_t path[SP_GGUF_MAX_NESTING];
    item it;
    SP_TRY(element(a, i, path, &it));
    return convert(&it, w, out);
}

sp_status sp_gguf_get_string(const sp_gguf *g, const char *key, const char **s, size_t *len)
{
    string_out out = {s, len};
    return get_by_key(g, key, AS_STRING, &out);
}

sp_status sp_gguf_array_string(const sp_gguf_array *a, size_t i, const char **s, size_t *len)
{
    string_out out = {s, len};
    return get_element(a, i, AS_STRING, &out);
}

sp_status sp_gguf_get_uint(const sp_gguf *g, const char *key, uint64_t *out) { return get_by_key(g, key, AS_UINT, out); }
sp_status sp_gguf_get_int(const sp_gguf *g, const char *key, int64_t *out) { return get_by_key(g, key, AS_INT, out); }
sp_status sp_gguf_get_float(const sp_gguf *g, const char *key, double *out) { return get_by_key(g, key, AS_FLOAT, out); }
sp_status sp_gguf_get_bool(const sp_gguf *g, const char *key, int *out) { return get_by_key(g, key, AS_BOOL, out); }

sp_status sp_gguf_get_array(const sp_gguf *g, const char *key, sp_gguf_array *out)
{
    return get_by_key(g, key, AS_ARRAY, out);
}

sp_status sp_gguf_array_uint(const sp_gguf_array *a, size_t i, uint64_t *out) { return get_element(a, i, AS_UINT, out); }
sp_status sp_gguf_array_int(const sp_gguf_array *a, size_t i, int64_t *out) { return get_element(a, i, AS_INT, out); }
sp_status sp_gguf_array_float(const sp_gguf_array *a, size_t i, double *out) { return get_element(a, i, AS_FLOAT, out); }
sp_status sp_gguf_array_bool(const sp_gguf_array *a, size_t i, int *out) { return get_element(a, i, AS_BOOL, out); }

sp_status sp_gguf_array_array(const sp_gguf_array *a, size_t i, sp_gguf_array *out)
{
    return get_element(a, i, AS_ARRAY, out);
}

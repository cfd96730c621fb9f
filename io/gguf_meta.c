/* io/gguf_meta.c: the metadata section of a GGUF file: every key and value, with nested arrays.
 * Every count and length is checked against the bytes left in the file before anything is
 * allocated for it, so a corrupt header cannot make the reader allocate more than the file holds. */
#include <stdio.h>
#include <string.h>

#include "io/gguf_file.h"

size_t gguf_value_width(sp_gguf_value_type type)
{
    static const unsigned char width[SP_GGUF_N_VALUE_TYPES] = {
        [SP_GGUF_UINT8] = 1, [SP_GGUF_INT8] = 1,   [SP_GGUF_UINT16] = 2, [SP_GGUF_INT16] = 2,  [SP_GGUF_UINT32] = 4,
        [SP_GGUF_INT32] = 4, [SP_GGUF_FLOAT32] = 4, [SP_GGUF_BOOL] = 1,  [SP_GGUF_UINT64] = 8, [SP_GGUF_INT64] = 8,
        [SP_GGUF_FLOAT64] = 8,
    };
    return width[type];
}

/* The fewest bytes a value takes: its width, a string's length, an array's element type and count. */
static size_t min_bytes(sp_gguf_value_type type)
{
    return type == SP_GGUF_STRING ? 8 : type == SP_GGUF_ARRAY ? 12 : gguf_value_width(type);
}

static sp_status read_type(gguf_cursor *c, const char *what, sp_gguf_value_type *out)
{
    uint32_t type = 0;
    SP_TRY(gguf_take_u32(c, what, &type));
    if (type >= SP_GGUF_N_VALUE_TYPES)
        return gguf_fail(c, "unknown %s %u (expected 0 to 12, UINT8 to FLOAT64)", what, type);
    *out = (sp_gguf_value_type)type;
    return SP_OK;
}

/* GGUF says 0 is false and 1 true, anything else invalid. */
static sp_status check_bools(gguf_cursor *c, const unsigned char *p, size_t n, int in_array)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] <= 1)
            continue;
        if (in_array)
            c->path[c->depth++] = i;
        return gguf_fail(c, "BOOL byte is %u (expected 0 or 1)", p[i]);
    }
    return SP_OK;
}

static sp_status read_value(gguf_cursor *c, sp_gguf_value_type type, gguf_value *v);

static sp_status read_array(gguf_cursor *c, gguf_value *v)
{
    if (c->depth >= SP_GGUF_MAX_NESTING)
        return gguf_fail(c, "arrays nest more than %d deep", SP_GGUF_MAX_NESTING);
    SP_TRY(read_type(c, "array element type", &v->elem));
    uint64_t count = 0;
    SP_TRY(gguf_take_u64(c, "the array length", &count));
    size_t left = c->g->map.size - c->pos, min = min_bytes(v->elem);
    if (count > left / min)
        return gguf_fail(c, "array of %llu %s elements needs at least %zu bytes each, %zu remain at offset %zu",
                         (unsigned long long)count, sp_gguf_value_type_name(v->elem), min, left, c->pos);
    v->len = (size_t)count;
    size_t width = gguf_value_width(v->elem);
    if (width) { /* read in place from the mapping */
        v->at = c->pos;
        const unsigned char *p = gguf_take(c, v->len * width);
        return v->elem == SP_GGUF_BOOL ? check_bools(c, p, v->len, 1) : SP_OK;
    }
    sp_gguf *g = c->g; /* strings and arrays: one node per element, consecutive */
    size_t first = g->n_nodes;
    SP_TRY(sp_grow((void **)&g->nodes, &g->nodes_cap, first + v->len, sizeof *g->nodes, "GGUF array elements"));
    g->n_nodes += v->len;
    v->at = first;
    c->depth++;
    for (size_t i = 0; i < v->len; i++) {
        c->path[c->depth - 1] = i;
        gguf_value element;
        SP_TRY(read_value(c, v->elem, &element));
        g->nodes[first + i] = element; /* after reading: a nested array may have moved the nodes */
    }
    c->depth--;
    return SP_OK;
}

static sp_status read_value(gguf_cursor *c, sp_gguf_value_type type, gguf_value *v)
{
    *v = (gguf_value){.type = type};
    if (type == SP_GGUF_STRING)
        return gguf_take_string(c, "a STRING value", &v->at, &v->len);
    if (type == SP_GGUF_ARRAY)
        return read_array(c, v);
    size_t width = gguf_value_width(type);
    v->at = c->pos;
    const unsigned char *p = gguf_take(c, width);
    if (!p) {
        char what[32];
        snprintf(what, sizeof what, "a %s value", sp_gguf_value_type_name(type));
        return gguf_truncated(c, what, width);
    }
    return type == SP_GGUF_BOOL ? check_bools(c, p, 1, 0) : SP_OK;
}

sp_status gguf_read_metadata(gguf_cursor *c)
{
    sp_gguf *g = c->g;
    g->kvs = sp_calloc((size_t)g->n_kvs, sizeof *g->kvs, "GGUF metadata");
    if (!g->kvs)
        return SP_ERR_NOMEM;
    for (int i = 0; i < g->n_kvs; i++) {
        *c = (gguf_cursor){.g = g, .pos = c->pos, .section = "metadata", .item = i};
        gguf_kv *kv = &g->kvs[i];
        size_t len = 0;
        SP_TRY(gguf_take_string(c, "the key", &kv->key, &len));
        SP_TRY(gguf_check_name(c, kv->key, len, "the key"));
        c->named = 1;
        c->name_at = kv->key;
        sp_gguf_value_type type = SP_GGUF_UINT8;
        SP_TRY(read_type(c, "value type", &type));
        SP_TRY(read_value(c, type, &kv->value));
    }
    return SP_OK;
}

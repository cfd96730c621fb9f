/* io/safetensors_file.c: one .safetensors file, mapped and validated: the header length, the JSON
 * header (unique names, every entry's members and types, dtype, shape, sizes, offsets,
 * __metadata__), and that the tensors tile the data region exactly. The rules are in
 * docs/formats.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_text.h"
#include "io/le.h"
#include "io/safetensors_shard.h"

#define LENGTH_BYTES 8

/* Where the header and the data region lie in the mapping. */
typedef struct {
    const char *path;
    size_t header_bytes;
    const unsigned char *data; /* the data region */
    size_t data_bytes;
} file_layout;

static sp_status read_header_length(const char *path, const sp_mapped_file *m, size_t *n)
{
    if (m->size == 0)
        return sp_error(SP_ERR_INPUT, "%s: empty file (expected the 8-byte header length, a header and data)", path);
    if (m->size < LENGTH_BYTES)
        return sp_error(SP_ERR_INPUT, "%s: file of %zu bytes (expected at least the 8-byte header length)", path,
                        m->size);
    uint64_t length = sp_le_u64(m->data);
    if (length < 2)
        return sp_error(SP_ERR_INPUT, "%s: header length %llu is below 2 bytes (the smallest header is {})", path,
                        (unsigned long long)length);
    if (length > SP_ST_MAX_JSON_BYTES)
        return sp_error(SP_ERR_INPUT, "%s: header length %llu is above the 100 MiB limit", path,
                        (unsigned long long)length);
    if (length > m->size - LENGTH_BYTES)
        return sp_error(SP_ERR_INPUT, "%s: header length %llu runs past the end of the file (%zu bytes follow the "
                        "length)", path, (unsigned long long)length, m->size - LENGTH_BYTES);
    *n = (size_t)length;
    return SP_OK;
}

/* A JSON integer in [0, 2^53] (doubles are exact up to there); *found describes anything else. */
static int json_size(const cJSON *v, size_t *out, char *found, size_t found_len)
{
    if (!cJSON_IsNumber(v)) {
        snprintf(found, found_len, "%s", sp_json_type_name(v));
        return 0;
    }
    double d = v->valuedouble;
    if (d >= 0 && d <= 9007199254740992.0 && d <= (double)SIZE_MAX && d == floor(d)) {
        *out = (size_t)d;
        return 1;
    }
    snprintf(found, found_len, "%.17g", d);
    return 0;
}

/* "[3, 8]" */
static void format_shape(const sp_st_tensor *t, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->rank && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

static sp_status parse_dtype(const char *path, const char *name, const cJSON *v, sp_st_tensor *t)
{
    if (!cJSON_IsString(v))
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': dtype is %s (expected a string such as \"F32\")", path, name,
                        sp_json_type_name(v));
    if (!sp_st_dtype_parse(v->valuestring, &t->dtype))
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': unknown dtype \"%s\" (expected one the safetensors format "
                        "names, e.g. F32, F16, BF16, F64)", path, name, v->valuestring);
    return SP_OK;
}

static sp_status parse_shape(const char *path, const char *name, const cJSON *v, sp_st_tensor *t)
{
    if (!cJSON_IsArray(v))
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': shape is %s (expected an array of integers)", path, name,
                        sp_json_type_name(v));
    int rank = cJSON_GetArraySize(v);
    if (rank > SP_ST_MAX_RANK)
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': shape has %d dimensions (at most %d)", path, name, rank,
                        SP_ST_MAX_RANK);
    t->rank = 0;
    const cJSON *dim;
    cJSON_ArrayForEach(dim, v) {
        size_t size = 0;
        char found[64];
        if (!json_size(dim, &size, found, sizeof found))
            return sp_error(SP_ERR_INPUT, "%s: tensor '%s': shape[%d] is %s (expected an integer >= 0)", path, name,
                            t->rank, found);
        t->shape[t->rank++] = (int64_t)size;
    }
    return SP_OK;
}

static sp_status parse_offsets(const char *path, const char *name, const cJSON *v, size_t offsets[2])
{
    if (!cJSON_IsArray(v))
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': data_offsets is %s (expected [begin, end])", path, name,
                        sp_json_type_name(v));
    if (cJSON_GetArraySize(v) != 2)
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': data_offsets has %d entries (expected 2, [begin, end])", path,
                        name, cJSON_GetArraySize(v));
    for (int i = 0; i < 2; i++) {
        char found[64];
        if (!json_size(cJSON_GetArrayItem(v, i), &offsets[i], found, sizeof found))
            return sp_error(SP_ERR_INPUT, "%s: tensor '%s': data_offsets[%d] is %s (expected an integer >= 0)", path,
                            name, i, found);
    }
    return SP_OK;
}

/* numel and nbytes from the shape and dtype, overflow-safe; sub-byte dtypes must fill whole bytes. */
static sp_status size_tensor(const char *path, sp_st_tensor *t)
{
    char shape[256], what[512];
    format_shape(t, shape, sizeof shape);
    snprintf(what, sizeof what, "%s: tensor '%s': shape %s x %s", path, t->name, shape, sp_st_dtype_name(t->dtype));
    t->numel = 1;
    for (int i = 0; i < t->rank; i++)
        SP_TRY(sp_size_mul(t->numel, (size_t)t->shape[i], &t->numel, what));
    size_t bits = 0;
    SP_TRY(sp_size_mul(t->numel, (size_t)sp_st_dtype_bits(t->dtype), &bits, what));
    if (bits % 8)
        return sp_error(SP_ERR_INPUT, "%s is %zu bits, not a whole number of bytes", what, bits);
    t->nbytes = bits / 8;
    return SP_OK;
}

static sp_status place_tensor(const file_layout *f, const size_t offsets[2], sp_st_tensor *t)
{
    size_t begin = offsets[0], end = offsets[1];
    if (begin > end)
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': data_offsets [%zu, %zu) begin after they end", f->path,
                        t->name, begin, end);
    if (end > f->data_bytes)
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': data_offsets [%zu, %zu) run past the data region of %zu bytes",
                        f->path, t->name, begin, end, f->data_bytes);
    if (end - begin != t->nbytes) {
        char shape[256];
        format_shape(t, shape, sizeof shape);
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s': data_offsets [%zu, %zu) hold %zu bytes but shape %s x %s needs "
                        "%zu", f->path, t->name, begin, end, end - begin, shape, sp_st_dtype_name(t->dtype), t->nbytes);
    }
    t->data = f->data + begin;
    return SP_OK;
}

/* One tensor entry: an object with dtype, shape and data_offsets once each (other members are
 * ignored, as the reference implementation does). */
static sp_status parse_entry(const file_layout *f, const cJSON *entry, sp_st_tensor *t)
{
    const char *name = entry->string;
    *t = (sp_st_tensor){.name = name, .file = f->path};
    if (!cJSON_IsObject(entry))
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s' is %s (expected an object with dtype, shape and data_offsets)",
                        f->path, name, sp_json_type_name(entry));
    char where[4200];
    snprintf(where, sizeof where, "%s: tensor '%s'", f->path, name);
    SP_TRY(sp_json_check_unique_keys(where, entry));
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    const cJSON *member[3];
    for (int k = 0; k < 3; k++)
        if (!(member[k] = cJSON_GetObjectItemCaseSensitive(entry, keys[k])))
            return sp_error(SP_ERR_INPUT, "%s: tensor '%s' has no %s (expected dtype, shape and data_offsets)", f->path,
                            name, keys[k]);
    size_t offsets[2];
    SP_TRY(parse_dtype(f->path, name, member[0], t));
    SP_TRY(parse_shape(f->path, name, member[1], t));
    SP_TRY(parse_offsets(f->path, name, member[2], offsets));
    SP_TRY(size_tensor(f->path, t));
    return place_tensor(f, offsets, t);
}

/* "__metadata__": an object of strings, each key once, or null (no metadata). */
static sp_status check_metadata(const char *path, const cJSON *meta)
{
    if (cJSON_IsNull(meta))
        return SP_OK;
    if (!cJSON_IsObject(meta))
        return sp_error(SP_ERR_INPUT, "%s: __metadata__ is %s (expected an object of strings)", path,
                        sp_json_type_name(meta));
    const cJSON *item;
    cJSON_ArrayForEach(item, meta) {
        if (!cJSON_IsString(item))
            return sp_error(SP_ERR_INPUT, "%s: __metadata__ \"%s\" is %s (expected a string)", path, item->string,
                            sp_json_type_name(item));
    }
    char where[4200];
    snprintf(where, sizeof where, "%s: __metadata__", path);
    return sp_json_check_unique_keys(where, meta);
}

static int by_offset(const void *a, const void *b)
{
    const sp_st_tensor *x = a, *y = b;
    if (x->data != y->data)
        return x->data < y->data ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

/* The tensors, taken in offset order, must each begin where the previous one ended, the first at 0
 * and the last ending at the end of the data region: no overlap, no hole, no trailing bytes. */
static sp_status check_tiling(const file_layout *f, sp_st_tensor *tensors, int n)
{
    qsort(tensors, (size_t)n, sizeof *tensors, by_offset);
    size_t covered = 0;
    for (int i = 0; i < n; i++) {
        const sp_st_tensor *t = &tensors[i], *prev = i ? &tensors[i - 1] : NULL;
        size_t begin = (size_t)(t->data - f->data);
        if (begin < covered)
            return sp_error(SP_ERR_INPUT, "%s: tensor '%s' at data_offsets [%zu, %zu) overlaps tensor '%s', which ends "
                            "at %zu", f->path, t->name, begin, begin + t->nbytes, prev->name, covered);
        if (begin > covered)
            return sp_error(SP_ERR_INPUT, "%s: %zu unused bytes at data offsets [%zu, %zu) %s%s%s tensor '%s' (the "
                            "tensors must tile the data region)", f->path, begin - covered, covered, begin,
                            prev ? "between tensor '" : "", prev ? prev->name : "", prev ? "' and" : "before",
                            t->name);
        covered = begin + t->nbytes;
    }
    if (covered != f->data_bytes)
        return sp_error(SP_ERR_INPUT, "%s: %zu unused bytes at data offsets [%zu, %zu) after %s%s%s (the tensors must "
                        "tile the data region, which ends at the end of the file)", f->path, f->data_bytes - covered,
                        covered, f->data_bytes, n ? "the last tensor '" : "the header, which names no tensor",
                        n ? tensors[n - 1].name : "", n ? "'" : "");
    return SP_OK;
}

static sp_status parse_header(const file_layout *f, sp_st_shard *s)
{
    char where[4200];
    snprintf(where, sizeof where, "%s: header", f->path);
    SP_TRY(sp_json_parse_object(where, s->map.data + LENGTH_BYTES, f->header_bytes, LENGTH_BYTES, &s->header));
    SP_TRY(sp_json_check_unique_keys(where, s->header)); /* tensor names and __metadata__ */
    int n_entries = cJSON_GetArraySize(s->header), n = 0;
    s->tensors = sp_calloc((size_t)n_entries, sizeof *s->tensors, "safetensors tensor table");
    if (!s->tensors)
        return SP_ERR_NOMEM;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, s->header) {
        if (strcmp(entry->string, "__metadata__") != 0) {
            SP_TRY(parse_entry(f, entry, &s->tensors[n++]));
            continue;
        }
        SP_TRY(check_metadata(f->path, entry));
        s->metadata = cJSON_IsNull(entry) ? NULL : entry;
    }
    s->n_tensors = n;
    return check_tiling(f, s->tensors, n);
}

sp_status sp_st_shard_open(const char *path, sp_st_shard *s)
{
    *s = (sp_st_shard){0};
    s->path = sp_malloc(strlen(path) + 1, "safetensors file name");
    if (!s->path)
        return SP_ERR_NOMEM;
    strcpy(s->path, path);
    file_layout f = {.path = s->path};
    sp_status st = sp_map_file(path, &s->map);
    if (st == SP_OK)
        st = read_header_length(path, &s->map, &f.header_bytes);
    if (st == SP_OK) {
        f.data = s->map.data + LENGTH_BYTES + f.header_bytes;
        f.data_bytes = s->map.size - LENGTH_BYTES - f.header_bytes;
        st = parse_header(&f, s);
    }
    if (st != SP_OK)
        sp_st_shard_close(s);
    return st;
}

void sp_st_shard_close(sp_st_shard *s)
{
    sp_unmap_file(&s->map);
    cJSON_Delete(s->header);
    free(s->tensors);
    free(s->path);
    *s = (sp_st_shard){0};
}

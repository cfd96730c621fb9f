/* io/gguf_tensors.c: the tensor infos of a GGUF file, then their layout in the data section: sizes
 * from dims and the type's blocks (overflow-safe), offsets aligned, inside the file, no overlaps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf_file.h"

/* The GGUF specification's limit on tensor names. */
#define MAX_NAME_BYTES 64

static sp_status read_info(gguf_cursor *c, sp_gguf_tensor *t, size_t *name_at)
{
    size_t len = 0;
    SP_TRY(gguf_take_string(c, "the tensor name", name_at, &len));
    if (len > MAX_NAME_BYTES)
        return gguf_fail(c, "tensor name of %zu bytes (expected at most %d)", len, MAX_NAME_BYTES);
    SP_TRY(gguf_check_name(c, *name_at, len, "the tensor name"));
    c->named = 1;
    c->name_at = *name_at;
    uint32_t n_dims = 0;
    SP_TRY(gguf_take_u32(c, "n_dims", &n_dims));
    if (n_dims > SP_GGUF_MAX_DIMS)
        return gguf_fail(c, "n_dims is %u (expected at most %d)", n_dims, SP_GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    for (int d = 0; d < SP_GGUF_MAX_DIMS; d++) {
        uint64_t dim = 1;
        if (d < t->n_dims)
            SP_TRY(gguf_take_u64(c, "a dimension", &dim));
        if (dim == 0 || dim > INT64_MAX)
            return gguf_fail(c, "dims[%d] is %llu (expected 1 to 2^63 - 1)", d, (unsigned long long)dim);
        t->dims[d] = (int64_t)dim;
    }
    uint32_t type = 0;
    SP_TRY(gguf_take_u32(c, "the ggml type", &type));
    if (!gguf_type((sp_ggml_type)type))
        return gguf_fail(c, "unknown ggml type %u", type);
    t->type = (sp_ggml_type)type;
    SP_TRY(gguf_take_u64(c, "the offset", &t->offset));
    t->file = c->g->path;
    return SP_OK;
}

sp_status gguf_read_tensor_infos(gguf_cursor *c)
{
    sp_gguf *g = c->g;
    size_t n = (size_t)g->n_tensors;
    g->tensors = sp_calloc(n, sizeof *g->tensors, "GGUF tensor infos");
    size_t *name_at = sp_calloc(n, sizeof *name_at, "GGUF tensor names");
    sp_status st = g->tensors && name_at ? SP_OK : SP_ERR_NOMEM;
    for (size_t i = 0; i < n && st == SP_OK; i++) {
        *c = (gguf_cursor){.g = g, .pos = c->pos, .section = "tensor info", .item = (int)i};
        st = read_info(c, &g->tensors[i], &name_at[i]);
    }
    /* the last strings are read: the arena no longer moves */
    for (size_t i = 0; i < n && st == SP_OK; i++)
        g->tensors[i].name = g->strings + name_at[i];
    free(name_at);
    return st;
}

/* Errors about a tensor whose info has been read. */
static gguf_cursor at_tensor(sp_gguf *g, int i)
{
    return (gguf_cursor){.g = g, .section = "tensor info", .item = i, .named = 1,
                         .name_at = (size_t)(g->tensors[i].name - g->strings)};
}

/* numel, n_rows, row_bytes and nbytes from dims and the type, overflow-safe. */
static sp_status size_tensor(sp_gguf *g, int i)
{
    sp_gguf_tensor *t = &g->tensors[i];
    const gguf_type_info *type = gguf_type(t->type);
    gguf_cursor c = at_tensor(g, i);
    size_t row = (size_t)t->dims[0];
    if (row % type->block)
        return gguf_fail(&c, "row length dims[0] = %zu is not a multiple of the %s block of %zu elements", row,
                         type->name, type->block);
    char what[4300];
    snprintf(what, sizeof what, "%s: tensor '%s': dims", g->path, t->name);
    t->n_rows = 1;
    for (int d = 1; d < SP_GGUF_MAX_DIMS; d++)
        SP_TRY(sp_size_mul(t->n_rows, (size_t)t->dims[d], &t->n_rows, what));
    SP_TRY(sp_size_mul(t->n_rows, row, &t->numel, what));
    SP_TRY(sp_size_mul(row / type->block, type->block_bytes, &t->row_bytes, what));
    return sp_size_mul(t->n_rows, t->row_bytes, &t->nbytes, what);
}

static int by_offset(const void *a, const void *b)
{
    const sp_gguf_tensor *x = *(const sp_gguf_tensor *const *)a, *y = *(const sp_gguf_tensor *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Tensors may leave holes between them (padding) but must not overlap. */
static sp_status check_overlaps(sp_gguf *g)
{
    size_t n = (size_t)g->n_tensors;
    const sp_gguf_tensor **order = sp_calloc(n, sizeof *order, "GGUF tensor order");
    if (!order)
        return SP_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        order[i] = &g->tensors[i];
    qsort(order, n, sizeof *order, by_offset);
    sp_status st = SP_OK;
    for (size_t i = 1; i < n && st == SP_OK; i++) {
        const sp_gguf_tensor *prev = order[i - 1], *t = order[i];
        if (t->offset < prev->offset + prev->nbytes) {
            gguf_cursor c = at_tensor(g, (int)(t - g->tensors));
            st = gguf_fail(&c, "data at offsets [%llu, %llu) overlaps tensor '%s' at [%llu, %llu)",
                           (unsigned long long)t->offset, (unsigned long long)(t->offset + t->nbytes), prev->name,
                           (unsigned long long)prev->offset, (unsigned long long)(prev->offset + prev->nbytes));
        }
    }
    free(order);
    return st;
}

sp_status gguf_place_tensors(sp_gguf *g)
{
    if (g->n_tensors == 0)
        return SP_OK;
    size_t size = g->map.size, pad = (g->alignment - g->infos_end % g->alignment) % g->alignment;
    if (pad > size - g->infos_end) {
        gguf_cursor c = {.g = g, .section = "data section", .item = -1};
        return gguf_fail(&c, "file truncated: it starts at offset %zu (the tensor infos end at %zu, aligned to %zu), "
                         "past the end of the file at %zu", g->infos_end + pad, g->infos_end, g->alignment, size);
    }
    size_t start = g->infos_end + pad, data_bytes = size - start;
    for (int i = 0; i < g->n_tensors; i++) {
        sp_gguf_tensor *t = &g->tensors[i];
        SP_TRY(size_tensor(g, i));
        gguf_cursor c = at_tensor(g, i);
        if (t->offset % g->alignment)
            return gguf_fail(&c, "offset %llu is not a multiple of the alignment %zu", (unsigned long long)t->offset,
                             g->alignment);
        if (t->offset > data_bytes || t->nbytes > data_bytes - t->offset)
            return gguf_fail(&c, "%zu bytes of %s data at offset %llu run past the end of the file (the data section "
                             "holds %zu bytes from offset %zu)", t->nbytes, gguf_type(t->type)->name,
                             (unsigned long long)t->offset, data_bytes, start);
        t->data = g->map.data + start + t->offset;
    }
    return check_overlaps(g);
}

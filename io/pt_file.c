#include "io/pt_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/half.h"
#include "io/le.h"

/* One stored entry of the archive. */
typedef struct {
    char name[256];
    const unsigned char *data;
    uint64_t size;
} zip_entry;

struct sp_pt_file {
    char path[4096];
    sp_mapped_file map;
    zip_entry *entries;
    size_t n_entries;
    sp_pk_tree tree;
    sp_pk_value *root;
    char prefix[256]; /* the archive's top directory, "<name>/" */
};

static sp_status bad(const sp_pt_file *f, const char *what)
{
    return sp_error(SP_ERR_INPUT, "%s: %s", f->path, what);
}

/* The end-of-central-directory record's fields: the directory's offset, size and entry count,
 * from the ZIP64 record when the classic one says so. */
static sp_status find_directory(const sp_pt_file *f, uint64_t *offset, uint64_t *size, uint64_t *count)
{
    const unsigned char *p = f->map.data;
    const size_t n = f->map.size;
    if (n < 22)
        return bad(f, "not a PyTorch checkpoint (too short for a ZIP archive)");
    size_t at = n - 22, lowest = n > 22 + 65535 ? n - 22 - 65535 : 0;
    while (sp_le_uint(p + at, 4) != 0x06054b50) {
        if (at == lowest)
            return bad(f, "not a PyTorch checkpoint of torch 1.6 or later (no ZIP directory; the legacy format is not "
                          "read)");
        at--;
    }
    *count = sp_le_uint(p + at + 10, 2);
    *size = sp_le_uint(p + at + 12, 4);
    *offset = sp_le_uint(p + at + 16, 4);
    if (*offset == 0xFFFFFFFFu || *count == 0xFFFF) { /* ZIP64: the locator sits just before */
        if (at < 20 || sp_le_uint(p + at - 20, 4) != 0x07064b50)
            return bad(f, "a ZIP64 archive without its locator");
        const uint64_t rec = sp_le_uint(p + at - 20 + 8, 8);
        if (n < 56 || rec > n - 56 || sp_le_uint(p + rec, 4) != 0x06064b50)
            return bad(f, "a ZIP64 archive whose end record is missing");
        *count = sp_le_uint(p + rec + 32, 8);
        *size = sp_le_uint(p + rec + 40, 8);
        *offset = sp_le_uint(p + rec + 48, 8);
    }
    if (*offset > n || *size > n - *offset || *count > *size / 46)
        return bad(f, "a ZIP directory that lies outside the file");
    return SP_OK;
}

/* Sizes and offset of a central entry, widened by its ZIP64 extra field where they are 0xFFFFFFFF. */
static int zip64_fields(const unsigned char *extra, size_t len, uint64_t *usize, uint64_t *csize, uint64_t *local)
{
    for (size_t at = 0; at + 4 <= len;) {
        const uint64_t id = sp_le_uint(extra + at, 2), n = sp_le_uint(extra + at + 2, 2);
        if (n > len - at - 4)
            return 0;
        if (id == 1) {
            const unsigned char *q = extra + at + 4;
            size_t used = 0;
            uint64_t *fields[3] = {usize, csize, local};
            for (int k = 0; k < 3; k++)
                if (*fields[k] == 0xFFFFFFFFu) {
                    if (used + 8 > n)
                        return 0;
                    *fields[k] = sp_le_uint(q + used, 8);
                    used += 8;
                }
            return 1;
        }
        at += 4 + n;
    }
    return 1;
}

static sp_status read_directory(sp_pt_file *f)
{
    uint64_t offset = 0, size = 0, count = 0;
    SP_TRY(find_directory(f, &offset, &size, &count));
    const unsigned char *p = f->map.data, *end = p + offset + size;
    f->entries = calloc(count ? count : 1, sizeof *f->entries);
    if (!f->entries)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory", f->path);
    const unsigned char *q = p + offset;
    for (uint64_t i = 0; i < count; i++) {
        if (end - q < 46 || sp_le_uint(q, 4) != 0x02014b50)
            return bad(f, "a ZIP directory entry is cut short or malformed");
        const uint64_t method = sp_le_uint(q + 10, 2), name_len = sp_le_uint(q + 28, 2), extra_len = sp_le_uint(q + 30, 2),
                       comment_len = sp_le_uint(q + 32, 2);
        uint64_t csize = sp_le_uint(q + 20, 4), usize = sp_le_uint(q + 24, 4), local = sp_le_uint(q + 42, 4);
        if ((uint64_t)(end - q) < 46 + name_len + extra_len + comment_len)
            return bad(f, "a ZIP directory entry runs past the directory");
        if (!zip64_fields(q + 46 + name_len, extra_len, &usize, &csize, &local))
            return bad(f, "a ZIP64 field runs past its entry");
        zip_entry *e = &f->entries[f->n_entries++];
        if (name_len >= sizeof e->name)
            return bad(f, "a ZIP entry name longer than 255 bytes");
        memcpy(e->name, q + 46, name_len);
        e->name[name_len] = '\0';
        if (method != 0 || csize != usize)
            return bad(f, "a compressed ZIP entry (torch.save stores its entries uncompressed)");
        if (f->map.size < 30 || local > f->map.size - 30 || sp_le_uint(p + local, 4) != 0x04034b50)
            return bad(f, "a ZIP entry whose local header is missing");
        const uint64_t data = local + 30 + sp_le_uint(p + local + 26, 2) + sp_le_uint(p + local + 28, 2);
        if (data > f->map.size || usize > f->map.size - data)
            return bad(f, "a ZIP entry's data lies outside the file");
        e->data = p + data;
        e->size = usize;
        q += 46 + name_len + extra_len + comment_len;
    }
    return SP_OK;
}

static const zip_entry *entry(const sp_pt_file *f, const char *prefix, const char *name)
{
    for (size_t i = 0; i < f->n_entries; i++) {
        const size_t lp = strlen(prefix);
        if (strncmp(f->entries[i].name, prefix, lp) == 0 && strcmp(f->entries[i].name + lp, name) == 0)
            return &f->entries[i];
    }
    return NULL;
}

/* The entry holding a tensor's storage, NULL when the archive has none. */
static const zip_entry *storage_entry(const sp_pt_file *f, const sp_pk_value *t)
{
    char name[300];
    snprintf(name, sizeof name, "data/%s", t->storage->str);
    return entry(f, f->prefix, name);
}

size_t sp_pt_numel(const sp_pk_value *t)
{
    size_t n = 1;
    for (int k = 0; k < t->rank; k++)
        n *= (size_t)t->shape[k];
    return n;
}

/* Every tensor of the tree reads inside its storage's entry. */
static sp_status check_tensors(const sp_pt_file *f)
{
    for (size_t i = 0; i < f->tree.n; i++) {
        const sp_pk_value *t = f->tree.nodes[i];
        if (t->kind != SP_PK_TENSOR)
            continue;
        const zip_entry *e = storage_entry(f, t);
        const uint64_t elem = sp_pk_dtype_size(t->dtype);
        if (!e || e->size / elem < (uint64_t)t->storage->i)
            return bad(f, "a tensor's storage is missing or shorter than it says");
        /* the last element the view reaches, with every size and stride bounded first */
        uint64_t last = (uint64_t)t->offset, empty = 0;
        if (t->offset < 0)
            return bad(f, "a tensor with a negative storage offset");
        for (int k = 0; k < t->rank; k++) {
            if (t->shape[k] < 0 || t->stride[k] < 0 || t->shape[k] > (1LL << 40) || t->stride[k] > (1LL << 40))
                return bad(f, "a tensor with a negative or impossible size or stride");
            empty |= t->shape[k] == 0;
            if (t->shape[k] > 0)
                last += (uint64_t)(t->shape[k] - 1) * (uint64_t)t->stride[k];
        }
        if (!empty && last >= (uint64_t)t->storage->i)
            return bad(f, "a tensor reaches past the end of its storage");
    }
    return SP_OK;
}

sp_status sp_pt_open(const char *path, sp_pt_file **out)
{
    *out = NULL;
    sp_pt_file *f = calloc(1, sizeof *f);
    if (!f)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory", path);
    snprintf(f->path, sizeof f->path, "%s", path);
    sp_status st = sp_map_file(path, &f->map);
    if (st == SP_OK)
        st = read_directory(f);
    const zip_entry *pkl = NULL;
    for (size_t i = 0; st == SP_OK && i < f->n_entries; i++) {
        const char *slash = strchr(f->entries[i].name, '/');
        if (slash && strcmp(slash, "/data.pkl") == 0) {
            if (pkl)
                st = bad(f, "more than one data.pkl in the archive");
            pkl = &f->entries[i];
            snprintf(f->prefix, sizeof f->prefix, "%.*s/", (int)(slash - pkl->name), pkl->name);
        }
    }
    if (st == SP_OK && !pkl)
        st = bad(f, "not a PyTorch checkpoint (no data.pkl in the archive)");
    if (st == SP_OK)
        st = sp_pickle_load(pkl->data, (size_t)pkl->size, f->path, &f->tree, &f->root);
    if (st == SP_OK)
        st = check_tensors(f);
    if (st != SP_OK) {
        sp_pt_close(f);
        return st;
    }
    *out = f;
    return SP_OK;
}

void sp_pt_close(sp_pt_file *f)
{
    if (!f)
        return;
    sp_pickle_free(&f->tree);
    sp_unmap_file(&f->map);
    free(f->entries);
    free(f);
}

const sp_pk_value *sp_pt_root(const sp_pt_file *f) { return f->root; }

const char *sp_pt_path(const sp_pt_file *f) { return f->path; }

static double element(const unsigned char *p, sp_pk_dtype d)
{
    switch (d) {
    case SP_PK_F32: return sp_float_from_bits((uint32_t)sp_le_uint(p, 4));
    case SP_PK_F16: return sp_half_to_float((uint16_t)sp_le_uint(p, 2));
    case SP_PK_BF16: return sp_bf16_to_float((uint16_t)sp_le_uint(p, 2));
    default: {
        const uint64_t bits = sp_le_uint(p, 8);
        double v;
        memcpy(&v, &bits, sizeof v);
        return v;
    }
    }
}

/* `count` elements of t from element `first` in row-major order of its shape (whatever its strides)
 * into out_d or out_r, whichever is not NULL. */
static sp_status read_elements(const sp_pt_file *f, const sp_pk_value *t, size_t first, size_t count, double *out_d,
                               sp_real *out_r)
{
    if (t->dtype != SP_PK_F32 && t->dtype != SP_PK_F16 && t->dtype != SP_PK_BF16 && t->dtype != SP_PK_F64)
        return sp_error(SP_ERR_INPUT, "%s: a %s tensor where a floating-point one was expected", f->path,
                        sp_pk_dtype_name(t->dtype));
    const size_t n = sp_pt_numel(t), elem = sp_pk_dtype_size(t->dtype);
    if (first > n || count > n - first)
        return sp_error(SP_ERR_INTERNAL, "%s: elements %zu..%zu of a tensor of %zu", f->path, first, first + count, n);
    const unsigned char *base = storage_entry(f, t)->data; /* checked at open */
    int64_t index[SP_PK_MAX_RANK] = {0};
    size_t left = first; /* the odometer at element `first` */
    for (int k = t->rank - 1; k >= 0; k--) {
        index[k] = t->shape[k] ? (int64_t)(left % (size_t)t->shape[k]) : 0;
        left = t->shape[k] ? left / (size_t)t->shape[k] : 0;
    }
    for (size_t i = 0; i < count; i++) {
        int64_t at = t->offset;
        for (int k = 0; k < t->rank; k++)
            at += index[k] * t->stride[k];
        const double v = element(base + (size_t)at * elem, t->dtype);
        if (out_d)
            out_d[i] = v;
        else
            out_r[i] = (sp_real)v;
        for (int k = t->rank - 1; k >= 0 && ++index[k] == t->shape[k]; k--)
            index[k] = 0; /* row-major odometer */
    }
    return SP_OK;
}

sp_status sp_pt_read_f64(const sp_pt_file *f, const sp_pk_value *t, double *out)
{
    return read_elements(f, t, 0, sp_pt_numel(t), out, NULL);
}

sp_status sp_pt_read(const sp_pt_file *f, const sp_pk_value *t, size_t first, size_t count, sp_real *out)
{
    return read_elements(f, t, first, count, NULL, out);
}

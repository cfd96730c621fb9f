#include "fuzz/h5_tree.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5.h"

enum { OP_GROUP, OP_DATASET, OP_ATTRIBUTE, OP_SOFT, OP_HARD, OP_EXTERNAL, N_OPS };
enum {
    T_I8, T_U8, T_I16, T_U16, T_I32, T_U32, T_I64, T_U64, /* 2 log2(bytes) + unsigned */
    T_F16, T_F32, T_F64, T_VSTR, T_FSTR, T_BOOL, T_F32BE, T_VSTR_ASCII, N_TYPES
};
enum { F_CHUNKED = 1, F_DEFLATE = 2, F_UNWRITTEN = 4, F_HUGE = 8, G_UNTRACKED = 1 };
enum { MAX_RANK = 4, MAX_WRITTEN = 1 << 20, MAX_DEPTH = 16 };

static int is_vlen_string(unsigned type) { return type == T_VSTR || type == T_VSTR_ASCII; }

/* The file type of a type code; size: a fixed-length string's length. */
static hid_t make_type(unsigned type, unsigned size)
{
    hid_t t;
    int8_t v;
    switch (type) {
    case T_I8: return H5Tcopy(H5T_STD_I8LE);
    case T_U8: return H5Tcopy(H5T_STD_U8LE);
    case T_I16: return H5Tcopy(H5T_STD_I16LE);
    case T_U16: return H5Tcopy(H5T_STD_U16LE);
    case T_I32: return H5Tcopy(H5T_STD_I32LE);
    case T_U32: return H5Tcopy(H5T_STD_U32LE);
    case T_I64: return H5Tcopy(H5T_STD_I64LE);
    case T_U64: return H5Tcopy(H5T_STD_U64LE);
    case T_F16: return sp_h5_float_type(SP_H5_F16);
    case T_F32: return H5Tcopy(H5T_IEEE_F32LE);
    case T_F64: return H5Tcopy(H5T_IEEE_F64LE);
    case T_F32BE: return H5Tcopy(H5T_IEEE_F32BE);
    case T_FSTR:
        t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, size ? size : 1);
        return t;
    case T_BOOL:
        t = H5Tenum_create(H5T_NATIVE_INT8);
        v = 0;
        H5Tenum_insert(t, "FALSE", &v);
        v = 1;
        H5Tenum_insert(t, "TRUE", &v);
        return t;
    default: /* the variable-length strings */
        t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_cset(t, type == T_VSTR ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
        return t;
    }
}

/* ---- building a file from records ---- */

typedef struct {
    const uint8_t *p;
    size_t left;
} cursor;

static int take(cursor *c, size_t n, const uint8_t **out)
{
    if (c->left < n)
        return 0;
    *out = c->p;
    c->p += n;
    c->left -= n;
    return 1;
}

static int take_uint(cursor *c, size_t bytes, uint64_t *v)
{
    const uint8_t *b;
    if (!take(c, bytes, &b))
        return 0;
    *v = 0;
    for (size_t i = 0; i < bytes; i++)
        *v |= (uint64_t)b[i] << (8 * i);
    return 1;
}

static int take_str(cursor *c, char buf[256])
{
    uint64_t n;
    const uint8_t *b;
    if (!take_uint(c, 1, &n) || !take(c, (size_t)n, &b))
        return 0;
    memcpy(buf, b, (size_t)n);
    buf[n] = '\0';
    return 1;
}

/* An array record's fields after the path (and an attribute's name). */
typedef struct {
    unsigned type, size, flags;
    int rank;
    hsize_t dims[MAX_RANK];
    const uint8_t *data;
    size_t len;
} array_desc;

static int take_array(cursor *c, array_desc *a)
{
    uint64_t type, size, rank, flags, len, dim;
    if (!take_uint(c, 1, &type) || !take_uint(c, 1, &size) || !take_uint(c, 1, &rank))
        return 0;
    a->type = (unsigned)(type % N_TYPES);
    a->size = (unsigned)size;
    a->rank = (int)(rank % (MAX_RANK + 1));
    for (int i = 0; i < a->rank; i++) {
        if (!take_uint(c, 2, &dim))
            return 0;
        a->dims[i] = dim;
    }
    if (!take_uint(c, 1, &flags) || !take_uint(c, 4, &len) || !take(c, (size_t)len, &a->data))
        return 0;
    a->flags = (unsigned)flags;
    a->len = (size_t)len;
    return 1;
}

/* The array's values, the data repeated: *strings holds the variable-length strings' text. NULL
 * when there are too many or no memory. */
static void *make_values(const array_desc *a, hid_t type, size_t n, char **strings)
{
    *strings = NULL;
    if (is_vlen_string(a->type)) {
        if (n > MAX_WRITTEN / sizeof(char *))
            return NULL;
        char *text = malloc(a->len + 1);
        size_t n_pieces = 1;
        for (size_t i = 0; text && i < a->len; i++)
            n_pieces += a->data[i] == '\0';
        char **pieces = text ? malloc(n_pieces * sizeof *pieces) : NULL;
        char **values = pieces ? malloc((n ? n : 1) * sizeof *values) : NULL;
        if (!values) {
            free(text);
            free(pieces);
            return NULL;
        }
        if (a->len)
            memcpy(text, a->data, a->len);
        text[a->len] = '\0';
        pieces[0] = text;
        for (size_t i = 0, k = 1; i < a->len; i++)
            if (text[i] == '\0')
                pieces[k++] = text + i + 1;
        for (size_t i = 0; i < n; i++)
            values[i] = pieces[i % n_pieces];
        free(pieces);
        *strings = text;
        return values;
    }
    size_t esize = H5Tget_size(type);
    if (esize == 0 || n > MAX_WRITTEN / esize)
        return NULL;
    uint8_t *values = calloc(n * esize ? n * esize : 1, 1);
    for (size_t i = 0; values && a->len && i < n * esize; i++)
        values[i] = a->data[i % a->len];
    return values;
}

/* The dataspace of the array's shape (its first dimension made huge where asked), its element count
 * in *n; -1 when the count overflows. */
static hid_t make_space(array_desc *a, int is_attribute, size_t *n)
{
    if ((a->flags & F_UNWRITTEN) && (a->flags & F_HUGE) && !is_attribute && a->rank > 0)
        a->dims[0] <<= 20;
    hsize_t count = 1;
    for (int i = 0; i < a->rank; i++)
        if (__builtin_mul_overflow(count, a->dims[i], &count))
            return -1;
    *n = (size_t)count;
    return a->rank ? H5Screate_simple(a->rank, a->dims, NULL) : H5Screate(H5S_SCALAR);
}

static void write_values(hid_t obj, int is_attribute, const array_desc *a, hid_t type, size_t n)
{
    char *strings;
    void *values = make_values(a, type, n, &strings);
    if (values)
        is_attribute ? H5Awrite(obj, type, values) : H5Dwrite(obj, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    free(values);
    free(strings);
}

static void make_dataset(hid_t file, hid_t lcpl, const char *path, array_desc *a)
{
    size_t n;
    hid_t space = make_space(a, 0, &n), type = make_type(a->type, a->size);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_attr_creation_order(dcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
    if ((a->flags & (F_CHUNKED | F_DEFLATE)) && a->rank > 0) {
        hsize_t chunk[MAX_RANK];
        for (int i = 0; i < a->rank; i++)
            chunk[i] = a->dims[i] == 0 ? 1 : a->dims[i] < 16 ? a->dims[i] : 16;
        H5Pset_chunk(dcpl, a->rank, chunk);
        if (a->flags & F_DEFLATE)
            H5Pset_deflate(dcpl, 1);
    }
    hid_t d = space < 0 ? -1 : H5Dcreate2(file, path, type, space, lcpl, dcpl, H5P_DEFAULT);
    if (d >= 0 && !(a->flags & F_UNWRITTEN))
        write_values(d, 0, a, type, n);
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(dcpl);
    H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
}

static void make_attribute(hid_t file, const char *path, const char *name, array_desc *a)
{
    hid_t obj = H5Oopen(file, path, H5P_DEFAULT);
    if (obj < 0)
        return;
    size_t n;
    hid_t space = make_space(a, 1, &n), type = make_type(a->type, a->size);
    /* libhdf5 holds an attribute's values in memory, written or not */
    int fits = n <= MAX_WRITTEN / (is_vlen_string(a->type) ? sizeof(char *) : H5Tget_size(type));
    hid_t attr = space < 0 || !fits ? -1 : H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (attr >= 0 && !(a->flags & F_UNWRITTEN))
        write_values(attr, 1, a, type, n);
    if (attr >= 0)
        H5Aclose(attr);
    H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
    H5Oclose(obj);
}

static void make_group(hid_t file, hid_t lcpl, const char *path, unsigned flags)
{
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    if (!(flags & G_UNTRACKED)) {
        H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
        H5Pset_attr_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
    }
    hid_t g = H5Gcreate2(file, path, lcpl, gcpl, H5P_DEFAULT);
    if (g >= 0)
        H5Gclose(g);
    H5Pclose(gcpl);
}

/* One record; 0 when the input ends inside it. */
static int build_record(hid_t file, hid_t lcpl, cursor *c)
{
    uint64_t op, flags;
    char path[256], name[256];
    array_desc a;
    if (!take_uint(c, 1, &op) || !take_str(c, path))
        return 0;
    switch (op % N_OPS) {
    case OP_GROUP:
        if (!take_uint(c, 1, &flags))
            return 0;
        make_group(file, lcpl, path, (unsigned)flags);
        return 1;
    case OP_DATASET:
        if (!take_array(c, &a))
            return 0;
        make_dataset(file, lcpl, path, &a);
        return 1;
    case OP_ATTRIBUTE:
        if (!take_str(c, name) || !take_array(c, &a))
            return 0;
        make_attribute(file, path, name, &a);
        return 1;
    default:
        if (!take_str(c, name))
            return 0;
        if (op % N_OPS == OP_SOFT)
            H5Lcreate_soft(name, file, path, lcpl, H5P_DEFAULT);
        else if (op % N_OPS == OP_HARD)
            H5Lcreate_hard(file, name, file, path, lcpl, H5P_DEFAULT);
        else
            H5Lcreate_external("other.h5", name, file, path, lcpl, H5P_DEFAULT);
        return 1;
    }
}

uint8_t *fuzz_h5_tree_image(const uint8_t *data, size_t size, size_t *image_size)
{
    hid_t file;
    if (sp_h5_create("tree.h5", &file) != SP_OK) { /* in memory only: the core driver, no backing store */
        fprintf(stderr, "fuzz: cannot create an HDF5 file in memory\n");
        abort();
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    cursor c = {data, size};
    while (build_record(file, lcpl, &c))
        ;
    H5Pclose(lcpl);
    ssize_t n = H5Fflush(file, H5F_SCOPE_GLOBAL) < 0 ? -1 : H5Fget_file_image(file, NULL, 0);
    uint8_t *image = n > 0 ? malloc((size_t)n) : NULL;
    if (!image || H5Fget_file_image(file, image, (size_t)n) != n || H5Fclose(file) < 0) {
        fprintf(stderr, "fuzz: cannot take the image of an HDF5 file built in memory\n");
        abort();
    }
    *image_size = (size_t)n;
    return image;
}

/* ---- describing a file as records ---- */

typedef struct {
    uint8_t *buf;
    size_t len, cap;
    int failed;
} out_buf;

static void put(out_buf *o, const void *p, size_t n)
{
    if (o->failed)
        return;
    if (o->len + n > o->cap) {
        size_t cap = (o->len + n) * 2;
        uint8_t *grown = realloc(o->buf, cap);
        if (!grown) {
            o->failed = 1;
            return;
        }
        o->buf = grown;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, p, n);
    o->len += n;
}

static void put_uint(out_buf *o, uint64_t v, size_t bytes)
{
    uint8_t b[8];
    for (size_t i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(o, b, bytes);
}

static void put_str(out_buf *o, const char *s)
{
    size_t n = strlen(s);
    if (n > 255)
        o->failed = 1; /* a path or name the records cannot hold */
    put_uint(o, n, 1);
    put(o, s, n);
}

/* The type code of a file type (-1: none describes it); *size: a fixed-length string's length. */
static int type_code(hid_t t, unsigned *size)
{
    size_t bytes = H5Tget_size(t);
    int little = H5Tget_order(t) != H5T_ORDER_BE;
    *size = 0;
    switch (H5Tget_class(t)) {
    case H5T_INTEGER:
        if (!little || (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8))
            return -1;
        return 2 * (bytes == 1 ? 0 : bytes == 2 ? 1 : bytes == 4 ? 2 : 3) + (H5Tget_sign(t) == H5T_SGN_NONE);
    case H5T_FLOAT:
        return bytes == 2 ? T_F16 : bytes == 8 ? T_F64 : bytes != 4 ? -1 : little ? T_F32 : T_F32BE;
    case H5T_STRING:
        if (H5Tis_variable_str(t) > 0)
            return H5Tget_cset(t) == H5T_CSET_UTF8 ? T_VSTR : T_VSTR_ASCII;
        *size = (unsigned)bytes;
        return bytes >= 1 && bytes <= 255 ? T_FSTR : -1;
    case H5T_ENUM: return bytes == 1 ? T_BOOL : -1;
    default: return -1;
    }
}

/* The array fields of a dataset or attribute: type, shape, layout and its values. */
static void put_array(out_buf *o, hid_t obj, int is_attribute)
{
    hid_t type = is_attribute ? H5Aget_type(obj) : H5Dget_type(obj);
    hid_t space = is_attribute ? H5Aget_space(obj) : H5Dget_space(obj);
    unsigned size;
    int code = type_code(type, &size), rank = H5Sget_simple_extent_ndims(space);
    hsize_t dims[MAX_RANK] = {0};
    if (code < 0 || rank < 0 || rank > MAX_RANK || H5Sget_simple_extent_dims(space, dims, NULL) < 0)
        o->failed = 1;
    hssize_t n = H5Sget_simple_extent_npoints(space);
    unsigned flags = 0;
    if (!is_attribute) {
        hid_t dcpl = H5Dget_create_plist(obj);
        flags |= H5Pget_layout(dcpl) == H5D_CHUNKED ? F_CHUNKED : 0;
        flags |= H5Pget_nfilters(dcpl) > 0 ? F_DEFLATE : 0;
        H5Pclose(dcpl);
    }
    put_uint(o, code < 0 ? 0 : (unsigned)code, 1);
    put_uint(o, size, 1);
    put_uint(o, rank < 0 ? 0 : (unsigned)rank, 1);
    for (int i = 0; i < rank && i < MAX_RANK; i++) {
        o->failed |= dims[i] > 65535;
        put_uint(o, dims[i], 2);
    }
    put_uint(o, flags, 1);
    /* the values as the file holds them: its own type as the memory type (variable-length strings
     * as C strings, joined by NULs) */
    size_t esize = H5Tget_size(type);
    void *values = o->failed || n <= 0 ? NULL : calloc((size_t)n, code >= 0 && is_vlen_string((unsigned)code) ? sizeof(char *) : esize);
    if (values && (is_attribute ? H5Aread(obj, type, values) : H5Dread(obj, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values)) < 0) {
        free(values);
        values = NULL;
    }
    if (!values)
        put_uint(o, 0, 4);
    else if (is_vlen_string((unsigned)code)) {
        char **s = values;
        size_t len = 0;
        for (hssize_t i = 0; i < n; i++)
            len += (s[i] ? strlen(s[i]) : 0) + (i > 0);
        put_uint(o, len, 4);
        for (hssize_t i = 0; i < n; i++) {
            if (i > 0)
                put(o, "", 1);
            put(o, s[i] ? s[i] : "", s[i] ? strlen(s[i]) : 0);
        }
        H5Dvlen_reclaim(type, space, H5P_DEFAULT, values);
    } else {
        put_uint(o, (size_t)n * esize, 4);
        put(o, values, (size_t)n * esize);
    }
    free(values);
    H5Sclose(space);
    H5Tclose(type);
}

typedef struct {
    out_buf *o;
    const char *path;
} attr_walk;

static herr_t put_attribute(hid_t obj, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    attr_walk *w = data;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    put_uint(w->o, OP_ATTRIBUTE, 1);
    put_str(w->o, w->path);
    put_str(w->o, name);
    put_array(w->o, a, 1);
    H5Aclose(a);
    return 0;
}

static void put_attributes(out_buf *o, hid_t obj, const char *path)
{
    attr_walk w = {o, path};
    if (H5Aiterate2(obj, H5_INDEX_CRT_ORDER, H5_ITER_INC, NULL, put_attribute, &w) < 0 &&
        H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, NULL, put_attribute, &w) < 0)
        o->failed = 1;
}

static void put_group(out_buf *o, hid_t file, const char *path, int depth);

typedef struct {
    out_buf *o;
    hid_t file;
    const char *path;
    int depth;
} link_walk;

static herr_t put_link(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    link_walk *w = data;
    char child[512], target[512];
    snprintf(child, sizeof child, "%s/%s", strcmp(w->path, "/") == 0 ? "" : w->path, name);
    if (info->type == H5L_TYPE_SOFT) {
        if (info->u.val_size > sizeof target || H5Lget_val(group, name, target, sizeof target, H5P_DEFAULT) < 0)
            return -1;
        put_uint(w->o, OP_SOFT, 1);
        put_str(w->o, child);
        put_str(w->o, target);
        return 0;
    }
    if (info->type != H5L_TYPE_HARD)
        return 0; /* external links: spanprobe files hold none */
    H5O_info_t oi;
    if (H5Oget_info_by_name2(group, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return -1;
    if (oi.type == H5O_TYPE_GROUP) {
        put_group(w->o, w->file, child, w->depth + 1);
    } else if (oi.type == H5O_TYPE_DATASET) {
        hid_t d = H5Dopen2(group, name, H5P_DEFAULT);
        if (d < 0)
            return -1;
        put_uint(w->o, OP_DATASET, 1);
        put_str(w->o, child);
        put_array(w->o, d, 0);
        put_attributes(w->o, d, child);
        H5Dclose(d);
    }
    return 0;
}

static void put_group(out_buf *o, hid_t file, const char *path, int depth)
{
    hid_t g = depth > MAX_DEPTH ? -1 : H5Gopen2(file, path, H5P_DEFAULT);
    if (g < 0) {
        o->failed = 1;
        return;
    }
    hid_t gcpl = H5Gget_create_plist(g);
    unsigned order = 0;
    H5Pget_link_creation_order(gcpl, &order);
    H5Pclose(gcpl);
    if (depth > 0) {
        put_uint(o, OP_GROUP, 1);
        put_str(o, path);
        put_uint(o, order & H5P_CRT_ORDER_TRACKED ? 0 : G_UNTRACKED, 1);
    }
    put_attributes(o, g, path);
    link_walk w = {o, file, path, depth};
    if (H5Literate(g, (order & H5P_CRT_ORDER_TRACKED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME, H5_ITER_INC, NULL,
                   put_link, &w) < 0)
        o->failed = 1;
    H5Gclose(g);
}

uint8_t *fuzz_h5_tree_describe(const char *path, size_t *size)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        return NULL;
    out_buf o = {0};
    put_group(&o, file, "/", 0);
    H5Fclose(file);
    if (o.failed) {
        free(o.buf);
        return NULL;
    }
    *size = o.len;
    return o.buf;
}

/* io/gguf_file.h: internals shared by the GGUF reader's files: the open file, its metadata values,
 * the bounds-checked cursor the parsers read with, and the ggml type table. Not for other callers. */
#ifndef SP_GGUF_FILE_H
#define SP_GGUF_FILE_H

#include "io/gguf.h"
#include "io/mapped_file.h"

/* A metadata value (a key's, or an element of an array of strings or arrays). */
typedef struct {
    sp_gguf_value_type type;
    sp_gguf_value_type elem; /* ARRAY: the element type */
    /* scalar: the offset of its bytes in the mapping; STRING: the offset of its copy in the string
     * arena; ARRAY of fixed-width elements: the offset of the first in the mapping; ARRAY of STRING
     * or ARRAY: the index of the first element's node (the elements' nodes are consecutive) */
    size_t at;
    size_t len; /* STRING: bytes; ARRAY: elements */
} gguf_value;

typedef struct {
    size_t key; /* offset in the string arena */
    gguf_value value;
} gguf_kv;

/* A name and the index it belongs to, for sorted lookup. */
typedef struct {
    const char *name;
    int index;
} gguf_name;

struct sp_gguf {
    char *path;
    sp_mapped_file map;
    uint32_t version;
    size_t alignment;
    size_t infos_end;          /* where the tensor infos end; the data section starts at the next aligned offset */
    int n_kvs;
    gguf_kv *kvs;              /* file order */
    gguf_name *kvs_by_key;     /* sorted by key */
    int n_tensors;
    sp_gguf_tensor *tensors;   /* file order */
    gguf_name *tensors_by_name;
    gguf_value *nodes;         /* the elements of arrays of strings or arrays */
    size_t n_nodes, nodes_cap;
    char *strings;             /* every key, string value and tensor name, each NUL-terminated */
    size_t strings_len, strings_cap;
};

/* Reads the mapping from pos on, and names what it reads in errors. */
typedef struct {
    sp_gguf *g;
    size_t pos;
    const char *section;  /* "header", "metadata", "tensor info" or "data section" */
    int item;             /* the key's or tensor's index in its section, -1 in the header */
    int named;            /* 1 once the item's key or name (at name_at in the arena) is read */
    size_t name_at;
    int depth;            /* metadata: the element indices below the key, in path */
    size_t path[SP_GGUF_MAX_NESTING];
} gguf_cursor;

/* "metadata 'key'[2][0]": the key at key_at in the arena and depth element indices below it. */
void gguf_value_where(const sp_gguf *g, size_t key_at, int depth, const size_t *path, char *buf, size_t len);
/* SP_ERR_INPUT with one line "<file>: <what the cursor reads>: <message>". */
sp_status gguf_fail(const gguf_cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "file truncated: <what> needs n bytes at offset P, R remain" (gguf_fail). */
sp_status gguf_truncated(const gguf_cursor *c, const char *what, size_t n);
/* The n bytes at the cursor, which moves past them, or NULL (nothing moves) when fewer remain. */
const unsigned char *gguf_take(gguf_cursor *c, size_t n);
/* A uint32 or uint64 at the cursor; what it is names it in the error when the file ends first. */
sp_status gguf_take_u32(gguf_cursor *c, const char *what, uint32_t *out);
sp_status gguf_take_u64(gguf_cursor *c, const char *what, uint64_t *out);
/* A string at the cursor, copied NUL-terminated into the arena at *at (length *len); `what` names it. */
sp_status gguf_take_string(gguf_cursor *c, const char *what, size_t *at, size_t *len);
/* Keys and tensor names may not hold control characters (NUL included): they are looked up as C
 * strings and quoted in one-line errors. */
sp_status gguf_check_name(const gguf_cursor *c, size_t at, size_t len, const char *what);

/* Reads the metadata, then the tensor infos (structure only: gguf_place_tensors checks the layout). */
sp_status gguf_read_metadata(gguf_cursor *c);
sp_status gguf_read_tensor_infos(gguf_cursor *c);
/* Sizes and places every tensor in the data section once the names and the alignment are known. */
sp_status gguf_place_tensors(sp_gguf *g);

/* Bytes one value of a fixed-width type takes; 0 for STRING and ARRAY. */
size_t gguf_value_width(sp_gguf_value_type type);

typedef void gguf_dequant_fn(const unsigned char *src, size_t n_blocks, float *dst);

typedef struct {
    const char *name;
    size_t block;              /* elements per block (1 for the plain types) */
    size_t block_bytes;
    gguf_dequant_fn *dequant;  /* NULL: not readable */
} gguf_type_info;

/* NULL for a number ggml does not use. */
const gguf_type_info *gguf_type(sp_ggml_type type);

#endif

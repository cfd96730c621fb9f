/* io/pickle.h: the subset of Python's pickle format that torch.save writes (protocols 2 to 4),
 * read into a tree of values by a machine that never runs anything: a GLOBAL outside a short list
 * (ordered dicts, torch's tensor rebuild functions and storage types) is an error naming it, and
 * calls (REDUCE) are only interpreted for those globals. Trusts nothing in the bytes: every length,
 * memo index and stack access is checked, and the tree is at most a few nodes per input byte. */
#ifndef SP_PICKLE_H
#define SP_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

typedef enum {
    SP_PK_NONE, SP_PK_BOOL, SP_PK_INT, SP_PK_FLOAT, SP_PK_STR, SP_PK_BYTES, SP_PK_TUPLE, SP_PK_LIST, SP_PK_DICT,
    SP_PK_GLOBAL,  /* an allowed global, not yet called: str holds "module.name" */
    SP_PK_STORAGE, /* a persistent id ('storage', type, key, location, numel): str = key, dtype, numel */
    SP_PK_TENSOR   /* _rebuild_tensor_v2(storage, offset, size, stride, ...) */
} sp_pk_kind;

/* The element types of torch storages. */
typedef enum { SP_PK_F32, SP_PK_F16, SP_PK_BF16, SP_PK_F64, SP_PK_I64, SP_PK_I32, SP_PK_I16, SP_PK_I8, SP_PK_U8,
               SP_PK_BOOL8, SP_PK_N_DTYPES } sp_pk_dtype;

#define SP_PK_MAX_RANK 8

typedef struct sp_pk_value sp_pk_value;
struct sp_pk_value {
    sp_pk_kind kind;
    int64_t i;                /* BOOL, INT; STORAGE: numel */
    double f;                 /* FLOAT */
    char *str;                /* STR, BYTES (len bytes, NUL-terminated), GLOBAL, STORAGE key */
    size_t len;
    sp_pk_value **items;      /* TUPLE, LIST: n items; DICT: n keys then values interleaved (2n) */
    size_t n, cap;
    sp_pk_dtype dtype;        /* STORAGE, TENSOR */
    sp_pk_value *storage;     /* TENSOR */
    int64_t offset;           /* TENSOR: in elements of the storage */
    int rank;                 /* TENSOR */
    int64_t shape[SP_PK_MAX_RANK], stride[SP_PK_MAX_RANK];
};

/* Owns every value of a loaded pickle. */
typedef struct {
    sp_pk_value **nodes;
    size_t n, cap;
} sp_pk_tree;

/* Loads the pickle in data[0, len) into tree (sp_pickle_free it, also after an error); *root is the
 * value STOP returns. Errors are SP_ERR_INPUT naming `where` and the byte offset. */
sp_status sp_pickle_load(const unsigned char *data, size_t len, const char *where, sp_pk_tree *tree,
                         sp_pk_value **root);
void sp_pickle_free(sp_pk_tree *tree);

/* DICT lookup by string key, NULL when absent or v is not a dict. */
const sp_pk_value *sp_pk_get(const sp_pk_value *dict, const char *key);
/* Bytes per element of a dtype, and its name ("float32", ...). */
size_t sp_pk_dtype_size(sp_pk_dtype d);
const char *sp_pk_dtype_name(sp_pk_dtype d);

#endif

/* io/gguf.h: GGUF files (llama.cpp's single-file models), read only: versions 2 and 3, little-endian
 * (docs/formats.md, "GGUF (read only)").
 *
 * A file is a header (magic "GGUF", uint32 version, uint64 tensor count, uint64 metadata count),
 * the metadata (each a string key, a uint32 value type and the value), the tensor infos (each a
 * string name, uint32 n_dims, n_dims uint64 dims, uint32 ggml type, uint64 offset), padding to
 * `general.alignment` (default 32), then the data section the offsets point into. A string is a
 * uint64 length and that many bytes; an array is a uint32 element type, a uint64 count and the
 * elements.
 *
 * sp_gguf_open maps the file read-only (mmap) and checks all of it before returning: tensor data
 * is read in place from the mapping, never copied, and sp_gguf_read_rows dequantizes whole rows,
 * so a model converts block by block without being expanded. Errors are one line naming the file
 * and the key or tensor, with SP_ERR_INPUT for bad content (a non-regular file included) and
 * SP_ERR_IO for a file that cannot be opened or mapped.
 *
 *   sp_gguf *g = NULL;
 *   SP_TRY(sp_gguf_open("model.gguf", &g));
 *   const char *arch;
 *   SP_TRY(sp_gguf_get_string(g, "general.architecture", &arch, NULL));
 *   const sp_gguf_tensor *t = sp_gguf_find(g, "blk.0.attn_q.weight");
 *   if (t) SP_TRY(sp_gguf_read_rows(t, 0, t->n_rows, buf));   (buf: t->numel sp_real)
 *   sp_gguf_close(g);
 */
#ifndef SP_GGUF_H
#define SP_GGUF_H

#include "core/common.h"

#define SP_GGUF_MAX_DIMS 4
/* Arrays nest at most this deep (an array of arrays is 2 deep); deeper is rejected. */
#define SP_GGUF_MAX_NESTING 8

/* Metadata value types, numbered as in the file. */
typedef enum {
    SP_GGUF_UINT8 = 0, SP_GGUF_INT8 = 1, SP_GGUF_UINT16 = 2, SP_GGUF_INT16 = 3,
    SP_GGUF_UINT32 = 4, SP_GGUF_INT32 = 5, SP_GGUF_FLOAT32 = 6, SP_GGUF_BOOL = 7,
    SP_GGUF_STRING = 8, SP_GGUF_ARRAY = 9, SP_GGUF_UINT64 = 10, SP_GGUF_INT64 = 11,
    SP_GGUF_FLOAT64 = 12,
    SP_GGUF_N_VALUE_TYPES
} sp_gguf_value_type;

/* Tensor element types, numbered as ggml numbers them (gguf 0.19.0); the gaps are retired types. */
typedef enum {
    SP_GGML_F32 = 0, SP_GGML_F16 = 1, SP_GGML_Q4_0 = 2, SP_GGML_Q4_1 = 3, SP_GGML_Q5_0 = 6,
    SP_GGML_Q5_1 = 7, SP_GGML_Q8_0 = 8, SP_GGML_Q8_1 = 9, SP_GGML_Q2_K = 10, SP_GGML_Q3_K = 11,
    SP_GGML_Q4_K = 12, SP_GGML_Q5_K = 13, SP_GGML_Q6_K = 14, SP_GGML_Q8_K = 15, SP_GGML_IQ2_XXS = 16,
    SP_GGML_IQ2_XS = 17, SP_GGML_IQ3_XXS = 18, SP_GGML_IQ1_S = 19, SP_GGML_IQ4_NL = 20,
    SP_GGML_IQ3_S = 21, SP_GGML_IQ2_S = 22, SP_GGML_IQ4_XS = 23, SP_GGML_I8 = 24, SP_GGML_I16 = 25,
    SP_GGML_I32 = 26, SP_GGML_I64 = 27, SP_GGML_F64 = 28, SP_GGML_IQ1_M = 29, SP_GGML_BF16 = 30,
    SP_GGML_TQ1_0 = 34, SP_GGML_TQ2_0 = 35, SP_GGML_MXFP4 = 39, SP_GGML_NVFP4 = 40, SP_GGML_Q1_0 = 41,
    SP_GGML_N_TYPES
} sp_ggml_type;

typedef struct {
    const char *name;                /* as in the file (at most 64 bytes) */
    sp_ggml_type type;
    int n_dims;                      /* 0..4 as in the file; 0 is a scalar */
    int64_t dims[SP_GGUF_MAX_DIMS];  /* ggml order: dims[0] is the row length (fastest varying); 1 past n_dims */
    size_t numel;
    size_t n_rows;                   /* numel / dims[0] */
    size_t row_bytes, nbytes;        /* one row's bytes; the tensor's (n_rows x row_bytes) */
    uint64_t offset;                 /* from the start of the data section */
    const unsigned char *data;       /* nbytes in the mapping */
    const char *file;                /* the path of the file */
} sp_gguf_tensor;

typedef struct sp_gguf sp_gguf;

/* The elements of an array value (sp_gguf_get_array, sp_gguf_array_array): read them with the
 * sp_gguf_array_* getters. Valid while the file is open. */
typedef struct {
    sp_gguf_value_type type; /* of the elements */
    size_t count;
    /* private: where the elements are, and the key and indices that name them in errors */
    const sp_gguf *file;
    int kv;                            /* the key's index */
    const void *value;                 /* the array's value node */
    int depth;                         /* indices in path: 0 for the key's own array */
    size_t path[SP_GGUF_MAX_NESTING];
} sp_gguf_array;

/* *out is NULL on failure. */
sp_status sp_gguf_open(const char *path, sp_gguf **out);
void sp_gguf_close(sp_gguf *g);

uint32_t sp_gguf_version(const sp_gguf *g);
/* general.alignment, or 32 without it. */
size_t sp_gguf_alignment(const sp_gguf *g);

/* ---- metadata, in file order ---- */
int sp_gguf_kv_count(const sp_gguf *g);
const char *sp_gguf_kv_key(const sp_gguf *g, int i);
sp_gguf_value_type sp_gguf_kv_type(const sp_gguf *g, int i);
/* The index of key, or -1 when absent. */
int sp_gguf_kv_find(const sp_gguf *g, const char *key);

/* Typed getters by key. Each fails with SP_ERR_INPUT and one line naming the file, the key and the
 * expected and found types when the key is absent or holds another type:
 *   string: STRING; *s is NUL-terminated, *len (may be NULL) its length (a value may hold NULs);
 *   uint:   any integer type with a value >= 0; int: any integer type with a value <= INT64_MAX;
 *   float:  FLOAT32 (widened exactly) or FLOAT64; bool: BOOL; array: ARRAY. */
sp_status sp_gguf_get_string(const sp_gguf *g, const char *key, const char **s, size_t *len);
sp_status sp_gguf_get_uint(const sp_gguf *g, const char *key, uint64_t *out);
sp_status sp_gguf_get_int(const sp_gguf *g, const char *key, int64_t *out);
sp_status sp_gguf_get_float(const sp_gguf *g, const char *key, double *out);
sp_status sp_gguf_get_bool(const sp_gguf *g, const char *key, int *out);
sp_status sp_gguf_get_array(const sp_gguf *g, const char *key, sp_gguf_array *out);

/* The i-th element of an array, with the getters' rules; an index past the end is SP_ERR_INPUT too.
 * Errors name the element as key[i] (key[i][j] inside nested arrays). */
sp_status sp_gguf_array_string(const sp_gguf_array *a, size_t i, const char **s, size_t *len);
sp_status sp_gguf_array_uint(const sp_gguf_array *a, size_t i, uint64_t *out);
sp_status sp_gguf_array_int(const sp_gguf_array *a, size_t i, int64_t *out);
sp_status sp_gguf_array_float(const sp_gguf_array *a, size_t i, double *out);
sp_status sp_gguf_array_bool(const sp_gguf_array *a, size_t i, int *out);
sp_status sp_gguf_array_array(const sp_gguf_array *a, size_t i, sp_gguf_array *out);

/* "UINT8", ..., "FLOAT64" as the format names them; "?" for another number. */
const char *sp_gguf_value_type_name(sp_gguf_value_type type);

/* ---- tensors, in file order ---- */
int sp_gguf_tensor_count(const sp_gguf *g);
const sp_gguf_tensor *sp_gguf_tensor_at(const sp_gguf *g, int i);
/* NULL when absent. */
const sp_gguf_tensor *sp_gguf_find(const sp_gguf *g, const char *name);

/* "F32", "Q4_K", "IQ2_XXS", ... as ggml names them; "?" for a number it does not use. */
const char *sp_ggml_type_name(sp_ggml_type type);
/* 1 for the types sp_gguf_read_rows dequantizes: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q2_K, Q3_K, Q4_K, Q5_K and Q6_K. */
int sp_ggml_type_is_readable(sp_ggml_type type);

/* Dequantizes rows [first_row, first_row + n_rows) of t (each dims[0] elements) into dst, bit for
 * bit what gguf.quants.dequantize (gguf 0.19.0) computes in float32, then widened to sp_real. NaN
 * and Inf are passed through; the caller checks. SP_ERR_INPUT naming the file, the tensor and its
 * type for a type that cannot be read, or naming the rows for a range past the tensor's end. */
sp_status sp_gguf_read_rows(const sp_gguf_tensor *t, size_t first_row, size_t n_rows, sp_real *dst);

#endif

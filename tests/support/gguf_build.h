/* tests/support/gguf_build.h: GGUF files built byte by byte for tests of io/gguf.h, and cmocka
 * checks of what the reader makes of them (one-line errors naming the file). */
#ifndef SP_TEST_GGUF_BUILD_H
#define SP_TEST_GGUF_BUILD_H

#include "byte_buf.h"
#include "io/gguf.h"

/* A GGUF string: uint64 length, then the bytes. */
void gb_string(byte_buf *b, const char *s);
void gb_header(byte_buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kvs);
/* A key-value pair of type UINT32, STRING or BOOL. */
void gb_kv_u32(byte_buf *b, const char *key, uint32_t v);
void gb_kv_string(byte_buf *b, const char *key, const char *v);
void gb_kv_bool(byte_buf *b, const char *key, int v);
/* Arrays of STRING, INT32 and FLOAT32. */
void gb_kv_strings(byte_buf *b, const char *key, const char *const *v, size_t n);
void gb_kv_i32s(byte_buf *b, const char *key, const int32_t *v, size_t n);
void gb_kv_f32s(byte_buf *b, const char *key, const float *v, size_t n);

/* A tensor info as the file states it (n_dims up to 5, to test the limit of 4). */
typedef struct {
    const char *name;
    sp_ggml_type type;
    uint32_t n_dims;
    uint64_t dims[5];
    uint64_t offset;
} gb_info;

void gb_tensor_info(byte_buf *b, const gb_info *t);

/* Where a built file's tensor infos and data section start. */
typedef struct {
    size_t infos, data;
} gb_layout;

/* A version 3 file: the n_kvs key-value pairs in kvs (NULL: none), the tensor infos, zeros up to
 * alignment, then data_len bytes of data (zeros when data is NULL); *where (may be NULL) gets its
 * layout. */
byte_buf gb_file(const byte_buf *kvs, uint64_t n_kvs, const gb_info *infos, int n_infos, size_t alignment,
                 const void *data, size_t data_len, gb_layout *where);

/* Writes b as the scratch file `name`, whose path goes to path. */
void gb_write(const char *name, const byte_buf *b, char *path, size_t len);
/* sp_gguf_open(path), failing the test with the reader's message unless it succeeds. */
sp_gguf *gb_open_ok(const char *path);
/* sp_gguf_open(path) fails with code and one line naming path and holding every needle. */
void gb_expect_open_error(const char *path, sp_status code, const char *const *needles);
/* status is SP_ERR_INPUT with one line holding every needle; the error is cleared. */
void gb_expect_error(sp_status status, const char *const *needles);
/* Writes b (then freed) as a scratch file that sp_gguf_open must reject with SP_ERR_INPUT. */
void gb_expect_bad(byte_buf *b, const char *const *needles);

#endif

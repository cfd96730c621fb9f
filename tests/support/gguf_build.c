#include "gguf_build.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cli_expect.h"
#include "scratch.h"

void gb_string(byte_buf *b, const char *s)
{
    byte_buf_put_u64(b, strlen(s));
    byte_buf_put(b, s, strlen(s));
}

void gb_header(byte_buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kvs)
{
    byte_buf_put(b, "GGUF", 4);
    byte_buf_put_u32(b, version);
    byte_buf_put_u64(b, n_tensors);
    byte_buf_put_u64(b, n_kvs);
}

void gb_kv_u32(byte_buf *b, const char *key, uint32_t v)
{
    gb_string(b, key);
    byte_buf_put_u32(b, SP_GGUF_UINT32);
    byte_buf_put_u32(b, v);
}

void gb_kv_string(byte_buf *b, const char *key, const char *v)
{
    gb_string(b, key);
    byte_buf_put_u32(b, SP_GGUF_STRING);
    gb_string(b, v);
}

void gb_kv_bool(byte_buf *b, const char *key, int v)
{
    gb_string(b, key);
    byte_buf_put_u32(b, SP_GGUF_BOOL);
    unsigned char byte = v != 0;
    byte_buf_put(b, &byte, 1);
}

static void array_head(byte_buf *b, const char *key, sp_gguf_value_type type, size_t n)
{
    gb_string(b, key);
    byte_buf_put_u32(b, SP_GGUF_ARRAY);
    byte_buf_put_u32(b, type);
    byte_buf_put_u64(b, n);
}

void gb_kv_strings(byte_buf *b, const char *key, const char *const *v, size_t n)
{
    array_head(b, key, SP_GGUF_STRING, n);
    for (size_t i = 0; i < n; i++)
        gb_string(b, v[i]);
}

void gb_kv_i32s(byte_buf *b, const char *key, const int32_t *v, size_t n)
{
    array_head(b, key, SP_GGUF_INT32, n);
    for (size_t i = 0; i < n; i++)
        byte_buf_put_i32(b, v[i]);
}

void gb_kv_f32s(byte_buf *b, const char *key, const float *v, size_t n)
{
    array_head(b, key, SP_GGUF_FLOAT32, n);
    for (size_t i = 0; i < n; i++)
        byte_buf_put_f32(b, v[i]);
}

void gb_tensor_info(byte_buf *b, const gb_info *t)
{
    gb_string(b, t->name);
    byte_buf_put_u32(b, t->n_dims);
    for (uint32_t d = 0; d < t->n_dims; d++)
        byte_buf_put_u64(b, t->dims[d]);
    byte_buf_put_u32(b, (uint32_t)t->type);
    byte_buf_put_u64(b, t->offset);
}

byte_buf gb_file(const byte_buf *kvs, uint64_t n_kvs, const gb_info *infos, int n_infos, size_t alignment,
                 const void *data, size_t data_len, gb_layout *where)
{
    byte_buf b = {0};
    gb_header(&b, 3, (uint64_t)n_infos, n_kvs);
    if (kvs)
        byte_buf_put(&b, kvs->data, kvs->len);
    gb_layout l = {.infos = b.len};
    for (int i = 0; i < n_infos; i++)
        gb_tensor_info(&b, &infos[i]);
    while (b.len % alignment)
        byte_buf_put(&b, "", 1);
    l.data = b.len;
    for (size_t i = 0; i < data_len; i++)
        byte_buf_put(&b, data ? (const unsigned char *)data + i : (const unsigned char *)"", 1);
    if (where)
        *where = l;
    return b;
}

void gb_write(const char *name, const byte_buf *b, char *path, size_t len)
{
    scratch_path(path, len, name);
    assert_int_equal(scratch_write_file(path, b->data, b->len), 0);
}

sp_gguf *gb_open_ok(const char *path)
{
    sp_gguf *g = NULL;
    sp_error_clear();
    if (sp_gguf_open(path, &g) != SP_OK)
        fail_msg("sp_gguf_open(%s): %s", path, sp_error_message());
    assert_non_null(g);
    return g;
}

void gb_expect_open_error(const char *path, sp_status code, const char *const *needles)
{
    sp_gguf *g = NULL;
    sp_error_clear();
    sp_status status = sp_gguf_open(path, &g);
    if (status != code)
        fail_msg("sp_gguf_open(%s) returned %d, expected %d (%s)", path, status, code, sp_error_message());
    assert_null(g);
    cli_expect_one_line(sp_error_message(), (const char *const[]){path, NULL});
    cli_expect_one_line(sp_error_message(), needles);
    sp_error_clear();
}

void gb_expect_error(sp_status status, const char *const *needles)
{
    if (status != SP_ERR_INPUT)
        fail_msg("returned %d, expected %d (%s)", status, SP_ERR_INPUT, sp_error_message());
    cli_expect_one_line(sp_error_message(), needles);
    sp_error_clear();
}

void gb_expect_bad(byte_buf *b, const char *const *needles)
{
    char path[4200];
    gb_write("bad.gguf", b, path, sizeof path);
    byte_buf_free(b);
    gb_expect_open_error(path, SP_ERR_INPUT, needles);
}

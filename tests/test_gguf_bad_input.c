/* GGUF: every malformed file rejected by sp_gguf_open with exit code 3 (5 only when a file cannot
 * be opened) and one line naming the file and what is wrong: the header, the key (with the element
 * indices inside arrays) or the tensor. Absurd counts and lengths must be refused before anything is
 * allocated for them: a terabyte allocation would fail with code 8 instead, or abort under
 * AddressSanitizer (make test-asan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/gguf.h"
#include "support/gguf_build.h"
#include "support/scratch.h"

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define HUGE_COUNT ((uint64_t)1 << 40)

/* A file with these tensor infos (no metadata, 32-alignment) and data_len zero bytes of data. */
static void expect_bad_infos(const gb_info *infos, int n, size_t data_len, const char *const *needles)
{
    byte_buf b = gb_file(NULL, 0, infos, n, 32, NULL, data_len, NULL);
    gb_expect_bad(&b, needles);
}

/* A file holding these n_kvs key-value pairs and no tensor. */
static void expect_bad_kvs(byte_buf *kvs, uint64_t n_kvs, const char *const *needles)
{
    byte_buf b = gb_file(kvs, n_kvs, NULL, 0, 1, NULL, 0, NULL);
    byte_buf_free(kvs);
    gb_expect_bad(&b, needles);
}

/* The file f truncated to len bytes is rejected. */
static void expect_truncated(const byte_buf *f, size_t len, const char *const *needles)
{
    byte_buf b = {0};
    byte_buf_put(&b, f->data, len);
    gb_expect_bad(&b, needles);
}

/* ---- bad headers ---- */

static void test_empty_file(void **state)
{
    (void)state;
    byte_buf b = {0};
    gb_expect_bad(&b, NEEDLES("header: file truncated: the magic \"GGUF\" needs 4 bytes at offset 0, 0 remain"));
}

static void test_bad_magic(void **state)
{
    (void)state;
    byte_buf b = gb_file(NULL, 0, NULL, 0, 1, NULL, 0, NULL);
    memcpy(b.data, "GGML", 4);
    gb_expect_bad(&b, NEEDLES("header: magic is 47 47 4d 4c (expected \"GGUF\""));
}

static void test_version_1(void **state)
{
    (void)state;
    byte_buf b = {0};
    gb_header(&b, 1, 0, 0);
    gb_expect_bad(&b, NEEDLES("header: version 1 is not supported (expected 2 or 3)"));
}

static void test_version_4(void **state)
{
    (void)state;
    byte_buf b = {0};
    gb_header(&b, 4, 0, 0);
    gb_expect_bad(&b, NEEDLES("header: version 4 is not supported (expected 2 or 3)"));
}

/* A big-endian writer stores the version as 00 00 00 03 (the magic stays "GGUF"). */
static void test_big_endian(void **state)
{
    (void)state;
    byte_buf b = {0};
    byte_buf_put(&b, "GGUF\0\0\0\3", 8);
    byte_buf_put_u64(&b, (uint64_t)1 << 56);
    byte_buf_put_u64(&b, 0);
    gb_expect_bad(&b, NEEDLES("header: version reads 0x03000000, a big-endian file of version 3",
                           "only little-endian files are read"));
}

/* A file truncated in the header, the metadata, the tensor infos, the padding and the data. The
 * architecture string is long so that cuts inside the metadata pass the header's count check. */
static void test_truncated(void **state)
{
    (void)state;
    char arch[101];
    memset(arch, 'x', 100);
    arch[100] = '\0';
    byte_buf kvs = {0};
    gb_kv_string(&kvs, "general.architecture", arch); /* its 100 bytes at [64, 164) */
    gb_kv_u32(&kvs, "test.count", 7);                 /* [164, 190): the value at 186 */
    const gb_info infos[2] = {{"a", SP_GGML_F32, 2, {4, 2}, 0}, {"b", SP_GGML_Q8_0, 1, {64}, 32}};
    gb_layout l;
    byte_buf f = gb_file(&kvs, 2, infos, 2, 32, NULL, 32 + 68, &l);
    assert_int_equal(l.infos, 190);
    assert_int_equal(l.data, 288);
    expect_truncated(&f, 3, NEEDLES("header: file truncated: the magic"));
    expect_truncated(&f, 12, NEEDLES("header: file truncated: the tensor count needs 8 bytes at offset 8, 4 remain"));
    expect_truncated(&f, 30, NEEDLES("header: metadata count 2 needs at least 13 bytes per key-value pair, 6 follow"));
    expect_truncated(&f, 100, NEEDLES("metadata 'general.architecture': a STRING value of 100 bytes runs past the "
                                      "end of the file (36 bytes remain at offset 64)"));
    expect_truncated(&f, 168, NEEDLES("metadata key 1: file truncated: the length of the key needs 8 bytes at "
                                      "offset 164, 4 remain"));
    expect_truncated(&f, 188, NEEDLES("metadata 'test.count': file truncated: a UINT32 value needs 4 bytes at "
                                      "offset 186, 2 remain"));
    expect_truncated(&f, l.infos + 8, NEEDLES("tensor info 0: the tensor name of 1 bytes runs past the end of the "
                                              "file (0 bytes remain at offset 198)"));
    expect_truncated(&f, l.infos + 17, NEEDLES("tensor 'a': file truncated: a dimension needs 8 bytes at offset 203, "
                                               "4 remain"));
    expect_truncated(&f, l.data - 1, NEEDLES("data section: file truncated: it starts at offset 288"));
    expect_truncated(&f, l.data + 40, NEEDLES("tensor 'b': 68 bytes of Q8_0 data at offset 32 run past the end of "
                                              "the file (the data section holds 40 bytes from offset 288)"));
    byte_buf_free(&f);
    byte_buf_free(&kvs);
}

/* ---- counts and lengths beyond the file: refused before anything is allocated ---- */

static void test_absurd_kv_count(void **state)
{
    (void)state;
    byte_buf b = {0};
    gb_header(&b, 3, 0, HUGE_COUNT);
    gb_kv_u32(&b, "general.alignment", 32);
    gb_expect_bad(&b, NEEDLES("header: metadata count 1099511627776 needs at least 13 bytes per key-value pair, 33 "
                           "follow the header"));
    gb_header(&b, 3, 0, UINT64_MAX);
    gb_expect_bad(&b, NEEDLES("metadata count 18446744073709551615"));
}

static void test_absurd_tensor_count(void **state)
{
    (void)state;
    byte_buf b = {0};
    gb_header(&b, 3, HUGE_COUNT, 0);
    gb_tensor_info(&b, &(gb_info){"w", SP_GGML_F32, 1, {8}, 0});
    gb_expect_bad(&b, NEEDLES("header: tensor count 1099511627776 needs at least 24 bytes per tensor info, 33 follow"));
    gb_header(&b, 3, UINT64_MAX, 1);
    gb_kv_u32(&b, "general.alignment", 32);
    gb_expect_bad(&b, NEEDLES("tensor count 18446744073709551615"));
}

static void test_absurd_key_length(void **state)
{
    (void)state;
    byte_buf kvs = {0};
    byte_buf_put_u64(&kvs, HUGE_COUNT);
    byte_buf_put(&kvs, "general.alignment", 17);
    byte_buf_put_u32(&kvs, SP_GGUF_UINT32);
    byte_buf_put_u32(&kvs, 32);
    expect_bad_kvs(&kvs, 1, NEEDLES("metadata key 0: the key of 1099511627776 bytes runs past the end of the file "
                                    "(25 bytes remain at offset 32)"));
}

static void test_absurd_string_length(void **state)
{
    (void)state;
    byte_buf kvs = {0};
    gb_string(&kvs, "general.name");
    byte_buf_put_u32(&kvs, SP_GGUF_STRING);
    byte_buf_put_u64(&kvs, HUGE_COUNT);
    byte_buf_put(&kvs, "tiny", 4);
    expect_bad_kvs(&kvs, 1, NEEDLES("metadata 'general.name': a STRING value of 1099511627776 bytes runs past the "
                                    "end of the file (4 bytes remain"));
    gb_string(&kvs, "tokenizer.ggml.tokens"); /* inside an array */
    byte_buf_put_u32(&kvs, SP_GGUF_ARRAY);
    byte_buf_put_u32(&kvs, SP_GGUF_STRING);
    byte_buf_put_u64(&kvs, 2);
    gb_string(&kvs, "a");
    byte_buf_put_u64(&kvs, UINT64_MAX);
    expect_bad_kvs(&kvs, 1, NEEDLES("metadata 'tokenizer.ggml.tokens'[1]: a STRING value of 18446744073709551615 "
                                    "bytes runs past the end"));
}

static void test_absurd_array_length(void **state)
{
    (void)state;
    static const sp_gguf_value_type types[4] = {SP_GGUF_UINT8, SP_GGUF_UINT64, SP_GGUF_STRING, SP_GGUF_ARRAY};
    static const char *const needles[4] = {"array of 1099511627776 UINT8 elements needs at least 1 bytes each, 8",
                                           "array of 1099511627776 UINT64 elements needs at least 8 bytes each",
                                           "array of 1099511627776 STRING elements needs at least 8 bytes each",
                                           "array of 1099511627776 ARRAY elements needs at least 12 bytes each"};
    for (int k = 0; k < 4; k++) {
        byte_buf kvs = {0};
        gb_string(&kvs, "tokenizer.ggml.scores");
        byte_buf_put_u32(&kvs, SP_GGUF_ARRAY);
        byte_buf_put_u32(&kvs, types[k]);
        byte_buf_put_u64(&kvs, HUGE_COUNT);
        byte_buf_put_u64(&kvs, 0);
        expect_bad_kvs(&kvs, 1, NEEDLES("metadata 'tokenizer.ggml.scores'", needles[k]));
    }
}

/* ---- bad metadata ---- */

static void test_unknown_value_type(void **state)
{
    (void)state;
    byte_buf kvs = {0};
    gb_string(&kvs, "test.x");
    byte_buf_put_u32(&kvs, 13);
    byte_buf_put_u64(&kvs, 0);
    expect_bad_kvs(&kvs, 1, NEEDLES("metadata 'test.x': unknown value type 13 (expected 0 to 12, UINT8 to FLOAT64)"));
    gb_string(&kvs, "test.y");
    byte_buf_put_u32(&kvs, SP_GGUF_ARRAY);
    byte_buf_put_u32(&kvs, 0xFFFFFFFFu);
    byte_buf_put_u64(&kvs, 1);
    byte_buf_put_u64(&kvs, 0);
    expect_bad_kvs(&kvs, 1, NEEDLES("metadata 'test.y': unknown array element type 4294967295"));
}

static void test_bool_not_0_or_1(void **state)
{
    (void)state;
    byte_buf kvs = {0};
    gb_string(&kvs, "test.flag");
    byte_buf_put_u32(&kvs, SP_GGUF_BOOL);
    byte_buf_put(&kvs, "\2", 1);
    expect_bad_kvs(&kvs, 1, NEEDLES("metadata 'test.flag': BOOL byte is 2 (expected 0 or 1)"));
    gb_string(&kvs, "test.flags");
    byte_buf_put_u32(&kvs, SP_GGUF_ARRAY);
    byte_buf_put_u32(&kvs, SP_GGUF_BOOL);
    byte_buf_put_u64(&kvs, 3);
    byte_buf_put(&kvs, "\1\0\377", 3);
    expect_bad_kvs(&kvs, 1, NEEDLES("metadata 'test.flags'[2]: BOOL byte is 255"));
}

/* A key whose value is `levels` arrays, each holding the next, the innermost of UINT8. */
static byte_buf nested_arrays(int levels)
{
    byte_buf kvs = {0};
    gb_string(&kvs, "test.deep");
    byte_buf_put_u32(&kvs, SP_GGUF_ARRAY);
    for (int level = 1; level < levels; level++) {
        byte_buf_put_u32(&kvs, SP_GGUF_ARRAY);
        byte_buf_put_u64(&kvs, 1);
    }
    byte_buf_put_u32(&kvs, SP_GGUF_UINT8);
    byte_buf_put_u64(&kvs, 0);
    return kvs;
}

/* Eight levels are read, nine are not. */
static void test_arrays_nested_too_deep(void **state)
{
    (void)state;
    byte_buf kvs = nested_arrays(8);
    byte_buf f = gb_file(&kvs, 1, NULL, 0, 1, NULL, 0, NULL);
    char path[4200];
    gb_write("deep.gguf", &f, path, sizeof path);
    sp_gguf *g = gb_open_ok(path);
    sp_gguf_array a;
    assert_int_equal(sp_gguf_get_array(g, "test.deep", &a), SP_OK);
    for (int level = 1; level < 8; level++) {
        assert_int_equal(a.type, SP_GGUF_ARRAY);
        assert_int_equal(sp_gguf_array_array(&a, 0, &a), SP_OK);
    }
    assert_int_equal(a.type, SP_GGUF_UINT8);
    assert_int_equal(a.count, 0);
    sp_gguf_close(g);
    byte_buf_free(&f);
    byte_buf_free(&kvs);
    kvs = nested_arrays(9);
    expect_bad_kvs(&kvs, 1, NEEDLES("metadata 'test.deep'[0][0][0][0][0][0][0][0]: arrays nest more than 8 deep"));
}

static void test_duplicate_key(void **state)
{
    (void)state;
    byte_buf kvs = {0};
    gb_kv_u32(&kvs, "test.a", 1);
    gb_kv_string(&kvs, "test.b", "x");
    gb_kv_string(&kvs, "test.a", "y");
    expect_bad_kvs(&kvs, 3, NEEDLES("metadata key 'test.a' appears twice (entries 0 and 2; expected once)"));
}

static void test_control_character_in_key(void **state)
{
    (void)state;
    byte_buf kvs = {0};
    gb_kv_u32(&kvs, "test\nkey", 1);
    expect_bad_kvs(&kvs, 1, NEEDLES("metadata key 0: the key holds the control character 0x0a at byte 4"));
    gb_string(&kvs, "test");
    byte_buf_put(&kvs, "\0", 1); /* length 5, with a NUL */
    kvs.data[0] = 5;
    byte_buf_put_u32(&kvs, SP_GGUF_UINT8);
    byte_buf_put(&kvs, "\1", 1);
    expect_bad_kvs(&kvs, 1, NEEDLES("metadata key 0: the key holds the control character 0x00 at byte 4"));
}

static void test_bad_alignment(void **state)
{
    (void)state;
    static const uint32_t bad[3] = {0, 3, 48};
    for (int k = 0; k < 3; k++) {
        byte_buf kvs = {0};
        gb_kv_u32(&kvs, "general.alignment", bad[k]);
        char needle[96];
        snprintf(needle, sizeof needle, "metadata 'general.alignment' is %u (expected a power of two)", bad[k]);
        expect_bad_kvs(&kvs, 1, NEEDLES(needle));
    }
    byte_buf kvs = {0};
    gb_string(&kvs, "general.alignment");
    byte_buf_put_u32(&kvs, SP_GGUF_INT32);
    byte_buf_put_u32(&kvs, 32);
    expect_bad_kvs(&kvs, 1, NEEDLES("metadata 'general.alignment' is INT32 (expected UINT32)"));
}

/* ---- bad tensor infos ---- */

static void test_n_dims_5(void **state)
{
    (void)state;
    expect_bad_infos(&(gb_info){"w", SP_GGML_F32, 5, {2, 2, 2, 2, 2}, 0}, 1, 128,
                     NEEDLES("tensor 'w': n_dims is 5 (expected at most 4)"));
}

static void test_zero_dim(void **state)
{
    (void)state;
    expect_bad_infos(&(gb_info){"w", SP_GGML_F32, 3, {8, 0, 2}, 0}, 1, 64,
                     NEEDLES("tensor 'w': dims[1] is 0 (expected 1 to 2^63 - 1)"));
}

static void test_huge_dims(void **state)
{
    (void)state;
    expect_bad_infos(&(gb_info){"w", SP_GGML_F32, 2, {8, (uint64_t)1 << 63}, 0}, 1, 64,
                     NEEDLES("tensor 'w': dims[1] is 9223372036854775808"));
    expect_bad_infos(&(gb_info){"w", SP_GGML_F32, 3, {(uint64_t)1 << 32, (uint64_t)1 << 31, 4}, 0}, 1, 64,
                     NEEDLES("tensor 'w': dims: size", "overflows"));
    /* the element count fits, the bytes do not */
    expect_bad_infos(&(gb_info){"w", SP_GGML_F32, 2, {(uint64_t)1 << 32, (uint64_t)1 << 30}, 0}, 1, 64,
                     NEEDLES("tensor 'w': dims: size 1073741824 x 17179869184 overflows"));
    expect_bad_infos(&(gb_info){"w", SP_GGML_F32, 2, {(uint64_t)1 << 30, 4}, 0}, 1, 64,
                     NEEDLES("tensor 'w': 17179869184 bytes of F32 data at offset 0 run past the end of the file"));
}

static void test_unknown_ggml_type(void **state)
{
    (void)state;
    expect_bad_infos(&(gb_info){"w", (sp_ggml_type)4, 1, {32}, 0}, 1, 64, NEEDLES("tensor 'w': unknown ggml type 4"));
    expect_bad_infos(&(gb_info){"w", (sp_ggml_type)1000, 1, {32}, 0}, 1, 64, NEEDLES("unknown ggml type 1000"));
}

static void test_row_not_multiple_of_block(void **state)
{
    (void)state;
    expect_bad_infos(&(gb_info){"blk.0.ffn_up.weight", SP_GGML_Q8_0, 2, {48, 2}, 0}, 1, 128,
                     NEEDLES("tensor 'blk.0.ffn_up.weight': row length dims[0] = 48 is not a multiple of the Q8_0 "
                             "block of 32 elements"));
    expect_bad_infos(&(gb_info){"k", SP_GGML_Q4_K, 1, {128}, 0}, 1, 256, NEEDLES("tensor 'k'", "Q4_K block of 256"));
}

static void test_misaligned_offset(void **state)
{
    (void)state;
    const gb_info infos[2] = {{"a", SP_GGML_F32, 1, {2}, 0}, {"b", SP_GGML_F32, 1, {2}, 8}};
    expect_bad_infos(infos, 2, 64, NEEDLES("tensor 'b': offset 8 is not a multiple of the alignment 32"));
}

static void test_tensor_past_end(void **state)
{
    (void)state;
    expect_bad_infos(&(gb_info){"w", SP_GGML_F32, 1, {8}, 32}, 1, 48,
                     NEEDLES("tensor 'w': 32 bytes of F32 data at offset 32 run past the end of the file (the data "
                             "section holds 48 bytes"));
    expect_bad_infos(&(gb_info){"w", SP_GGML_F32, 1, {8}, (uint64_t)-32}, 1, 48,
                     NEEDLES("tensor 'w': 32 bytes of F32 data at offset 18446744073709551584 run past the end"));
}

static void test_overlapping_tensors(void **state)
{
    (void)state;
    const gb_info infos[3] = {
        {"a", SP_GGML_F32, 1, {8}, 0}, {"b", SP_GGML_F32, 1, {16}, 64}, {"c", SP_GGML_F32, 1, {8}, 96}};
    expect_bad_infos(infos, 3, 128, NEEDLES("tensor 'c': data at offsets [96, 128) overlaps tensor 'b' at [64, 128)"));
}

static void test_duplicate_tensor_name(void **state)
{
    (void)state;
    const gb_info infos[3] = {
        {"w", SP_GGML_F32, 1, {8}, 0}, {"v", SP_GGML_F32, 1, {8}, 32}, {"w", SP_GGML_F32, 1, {8}, 64}};
    expect_bad_infos(infos, 3, 96, NEEDLES("tensor name 'w' appears twice (entries 0 and 2; expected once)"));
}

static void test_bad_tensor_names(void **state)
{
    (void)state;
    char long_name[66];
    memset(long_name, 'x', 65);
    long_name[65] = '\0';
    expect_bad_infos(&(gb_info){long_name, SP_GGML_F32, 1, {8}, 0}, 1, 32,
                     NEEDLES("tensor info 0: tensor name of 65 bytes (expected at most 64)"));
    long_name[64] = '\0';
    byte_buf ok = gb_file(NULL, 0, &(gb_info){long_name, SP_GGML_F32, 1, {8}, 0}, 1, 32, NULL, 32, NULL);
    char path[4200];
    gb_write("long_name.gguf", &ok, path, sizeof path);
    sp_gguf_close(gb_open_ok(path));
    byte_buf_free(&ok);
    expect_bad_infos(&(gb_info){"blk.0\t", SP_GGML_F32, 1, {8}, 0}, 1, 32,
                     NEEDLES("tensor info 0: the tensor name holds the control character 0x09 at byte 5"));
}

/* ---- paths that are not GGUF files ---- */

static void test_fifo(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "pipe.gguf");
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(20); /* opening a FIFO without a writer must not block; if it does, SIGALRM ends the test */
    gb_expect_open_error(path, SP_ERR_INPUT, NEEDLES("expected a regular file, found a FIFO"));
    alarm(0);
}

static void test_not_a_file(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "no-such.gguf");
    gb_expect_open_error(path, SP_ERR_IO, NEEDLES("cannot open"));
    scratch_path(path, sizeof path, "");
    gb_expect_open_error(path, SP_ERR_INPUT, NEEDLES("expected a regular file, found a directory"));
}

/* ---- every prefix, and random corruptions, of files the gguf package wrote ---- */

/* Opens the file b: it either fails with SP_ERR_INPUT and one line, or opens and then reads every
 * row of every tensor or fails with one line naming it. Returns 1 when it opened. */
static int open_any(const byte_buf *b)
{
    /* rewritten in place, then cut to length: truncating to zero first makes ext4 flush the file at
     * close, which takes milliseconds, thousands of times over */
    char path[4200];
    scratch_path(path, sizeof path, "any.gguf");
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b->data, b->len), (ssize_t)b->len);
    assert_int_equal(ftruncate(fd, (off_t)b->len), 0);
    assert_int_equal(close(fd), 0);
    sp_gguf *g = NULL;
    sp_error_clear();
    sp_status status = sp_gguf_open(path, &g);
    if (status != SP_OK) {
        gb_expect_error(status, NEEDLES(path));
        return 0;
    }
    for (int i = 0; i < sp_gguf_tensor_count(g); i++) {
        const sp_gguf_tensor *t = sp_gguf_tensor_at(g, i);
        sp_real *values = malloc(t->numel * sizeof *values);
        assert_non_null(values);
        status = sp_gguf_read_rows(t, 0, t->n_rows, values);
        if (status != SP_OK)
            gb_expect_error(status, NEEDLES(t->name));
        free(values);
    }
    sp_gguf_close(g);
    return 1;
}

static byte_buf read_fixture(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "fixtures/gguf/%s", name); /* the tests run from the repository root */
    size_t len = 0;
    char *bytes = scratch_read_file(path, &len);
    assert_non_null(bytes);
    byte_buf b = {0};
    byte_buf_put(&b, bytes, len);
    free(bytes);
    return b;
}

/* Cut anywhere before its last alignment's worth of bytes (the padding after the last tensor or the
 * metadata), a file is rejected; longer prefixes open. */
static void test_every_prefix(void **state)
{
    (void)state;
    static const char *const names[2] = {"q4_k.gguf", "meta.gguf"};
    for (int k = 0; k < 2; k++) {
        byte_buf f = read_fixture(names[k]), prefix = {0};
        int opened = 0;
        for (size_t len = 0; len <= f.len; len++) {
            prefix.len = 0;
            byte_buf_put(&prefix, f.data, len);
            int ok = open_any(&prefix);
            if (ok != opened && !(ok && len + 32 > f.len))
                fail_msg("%s cut to %zu of %zu bytes %s", names[k], len, f.len, ok ? "opens" : "no longer opens");
            opened = ok;
        }
        assert_true(opened);
        byte_buf_free(&prefix);
        byte_buf_free(&f);
    }
}

/* A few random bytes of a file overwritten, many times over: never a crash or an overrun (make
 * test-asan), always a file that opens and reads or one line. */
static void test_random_corruptions(void **state)
{
    (void)state;
    static const char *const names[2] = {"q4_k.gguf", "meta.gguf"};
    uint64_t rng = 88172645463325252u;
    for (int k = 0; k < 2; k++) {
        byte_buf f = read_fixture(names[k]), copy = {0};
        int opened = 0;
        for (int trial = 0; trial < 2000; trial++) {
            copy.len = 0;
            byte_buf_put(&copy, f.data, f.len);
            for (int flips = 0; flips < 1 + trial % 3; flips++) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; /* xorshift64 */
                copy.data[(rng >> 8) % f.len] = (unsigned char)rng;
            }
            opened += open_any(&copy);
        }
        print_message("%s: %d of 2000 corrupted copies opened\n", names[k], opened);
        byte_buf_free(&copy);
        byte_buf_free(&f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_file),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_version_1),
        cmocka_unit_test(test_version_4),
        cmocka_unit_test(test_big_endian),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_absurd_kv_count),
        cmocka_unit_test(test_absurd_tensor_count),
        cmocka_unit_test(test_absurd_key_length),
        cmocka_unit_test(test_absurd_string_length),
        cmocka_unit_test(test_absurd_array_length),
        cmocka_unit_test(test_unknown_value_type),
        cmocka_unit_test(test_bool_not_0_or_1),
        cmocka_unit_test(test_arrays_nested_too_deep),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_control_character_in_key),
        cmocka_unit_test(test_bad_alignment),
        cmocka_unit_test(test_n_dims_5),
        cmocka_unit_test(test_zero_dim),
        cmocka_unit_test(test_huge_dims),
        cmocka_unit_test(test_unknown_ggml_type),
        cmocka_unit_test(test_row_not_multiple_of_block),
        cmocka_unit_test(test_misaligned_offset),
        cmocka_unit_test(test_tensor_past_end),
        cmocka_unit_test(test_overlapping_tensors),
        cmocka_unit_test(test_duplicate_tensor_name),
        cmocka_unit_test(test_bad_tensor_names),
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_not_a_file),
        cmocka_unit_test(test_every_prefix),
        cmocka_unit_test(test_random_corruptions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

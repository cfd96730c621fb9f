/* GGUF: the reader on the files tools/gguf_fixtures/generate.py wrote with the gguf package
 * (fixtures/gguf/): every readable type dequantized bit for bit as gguf.quants.dequantize does,
 * whole and by row ranges; version 2; alignment 64; metadata of every value type through every
 * getter, with one-line errors naming the key and the types; and a file built here with what the
 * fixtures lack. Malformed files: tests/test_gguf_bad_input.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "support/gguf_build.h"
#include "support/open_files.h"
#include "support/scratch.h"

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define FIXTURES "fixtures/gguf/" /* the tests run from the repository root */

/* ---- the fixtures: every type against gguf.quants.dequantize ---- */

static const struct {
    const char *stem, *name;
    sp_ggml_type type;
} fixture_types[] = {
    {"f32", "F32", SP_GGML_F32},    {"f16", "F16", SP_GGML_F16},    {"bf16", "BF16", SP_GGML_BF16},
    {"q8_0", "Q8_0", SP_GGML_Q8_0}, {"q4_0", "Q4_0", SP_GGML_Q4_0}, {"q4_1", "Q4_1", SP_GGML_Q4_1},
    {"q5_0", "Q5_0", SP_GGML_Q5_0}, {"q5_1", "Q5_1", SP_GGML_Q5_1}, {"q2_k", "Q2_K", SP_GGML_Q2_K},
    {"q3_k", "Q3_K", SP_GGML_Q3_K}, {"q4_k", "Q4_K", SP_GGML_Q4_K}, {"q5_k", "Q5_K", SP_GGML_Q5_K},
    {"q6_k", "Q6_K", SP_GGML_Q6_K},
};

/* The three tensors of each <type>.gguf, in file order (generate.py's TENSORS, dims reversed). */
static const struct {
    const char *name;
    int n_dims;
    int64_t dims[4];
} fixture_tensors[3] = {{"t256", 2, {256, 3, 1, 1}}, {"t512", 2, {512, 2, 1, 1}}, {"t3d", 3, {256, 2, 2, 1}}};

/* got[i] has the bits of want[i]: -0, NaN payloads and subnormals must all match. */
static void assert_bits(const sp_real *got, const float *want, size_t n, const char *what, size_t first)
{
    for (size_t i = 0; i < n; i++) {
        float g = (float)got[i];
        if (memcmp(&g, &want[i], sizeof g) != 0)
            fail_msg("%s element %zu: %.9g, expected %.9g (gguf.quants.dequantize)", what, first + i, (double)g,
                     (double)want[i]);
    }
}

/* The float32 values of <stem>.expected.f32 (free()); *n of them. */
static float *read_expected(const char *stem, size_t *n)
{
    char path[256];
    snprintf(path, sizeof path, FIXTURES "%s.expected.f32", stem);
    size_t len = 0;
    char *raw = scratch_read_file(path, &len);
    if (!raw)
        fail_msg("cannot read %s", path);
    *n = len / 4;
    float *values = malloc(len ? len : 1);
    assert_non_null(values);
    for (size_t i = 0; i < *n; i++) {
        const unsigned char *p = (const unsigned char *)raw + 4 * i;
        uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        memcpy(&values[i], &u, 4);
    }
    free(raw);
    return values;
}

/* Every tensor of the file, read whole, row by row and as rows [1, n_rows), bit for bit against
 * `expected` (all the tensors' values in file order); returns how many values it used. */
static size_t check_tensors(const sp_gguf *g, const float *expected, const char *what)
{
    size_t used = 0;
    for (int i = 0; i < sp_gguf_tensor_count(g); i++) {
        const sp_gguf_tensor *t = sp_gguf_tensor_at(g, i);
        const float *want = expected + used;
        sp_real *got = calloc(t->numel, sizeof *got);
        assert_non_null(got);
        char where[128];
        snprintf(where, sizeof where, "%s tensor '%s'", what, t->name);
        assert_int_equal(sp_gguf_read_rows(t, 0, t->n_rows, got), SP_OK);
        assert_bits(got, want, t->numel, where, 0);
        size_t row = (size_t)t->dims[0];
        for (size_t r = 0; r < t->n_rows; r++) {
            memset(got, 0, row * sizeof *got);
            assert_int_equal(sp_gguf_read_rows(t, r, 1, got), SP_OK);
            assert_bits(got, want + r * row, row, where, r * row);
        }
        assert_int_equal(sp_gguf_read_rows(t, 1, t->n_rows - 1, got), SP_OK);
        assert_bits(got, want + row, t->numel - row, where, row);
        used += t->numel;
        free(got);
    }
    return used;
}

/* Every tensor of g against <stem>.expected.f32, which it must use up. */
static void check_against(const sp_gguf *g, const char *stem, const char *what)
{
    size_t n = 0;
    float *expected = read_expected(stem, &n);
    assert_int_equal(check_tensors(g, expected, what), n);
    free(expected);
}

static void test_every_type_bit_exact(void **state)
{
    (void)state;
    for (size_t k = 0; k < SP_ARRAY_LEN(fixture_types); k++) {
        char path[256];
        snprintf(path, sizeof path, FIXTURES "%s.gguf", fixture_types[k].stem);
        sp_gguf *g = gb_open_ok(path);
        assert_int_equal(sp_gguf_version(g), 3);
        assert_int_equal(sp_gguf_alignment(g), 32);
        assert_int_equal(sp_gguf_tensor_count(g), 3);
        for (int i = 0; i < 3; i++) {
            const sp_gguf_tensor *t = sp_gguf_tensor_at(g, i);
            assert_string_equal(t->name, fixture_tensors[i].name);
            assert_ptr_equal(sp_gguf_find(g, t->name), t);
            assert_int_equal(t->type, fixture_types[k].type);
            assert_string_equal(sp_ggml_type_name(t->type), fixture_types[k].name);
            assert_true(sp_ggml_type_is_readable(t->type));
            assert_int_equal(t->n_dims, fixture_tensors[i].n_dims);
            for (int d = 0; d < 4; d++)
                assert_int_equal(t->dims[d], fixture_tensors[i].dims[d]);
            assert_int_equal(t->numel, (size_t)(t->dims[0] * t->dims[1] * t->dims[2]));
            assert_int_equal(t->n_rows, t->numel / (size_t)t->dims[0]);
            assert_int_equal(t->nbytes, t->n_rows * t->row_bytes);
            assert_string_equal(t->file, path);
        }
        check_against(g, fixture_types[k].stem, path);
        sp_gguf_close(g);
    }
}

/* Row sizes follow each type's block: bytes per 256-element row. */
static void test_row_bytes(void **state)
{
    (void)state;
    static const size_t bytes[SP_ARRAY_LEN(fixture_types)] = {1024, 512, 512, 272, 144, 160, 176, 192,
                                                               84,   110, 144, 176, 210};
    for (size_t k = 0; k < SP_ARRAY_LEN(fixture_types); k++) {
        char path[256];
        snprintf(path, sizeof path, FIXTURES "%s.gguf", fixture_types[k].stem);
        sp_gguf *g = gb_open_ok(path);
        assert_int_equal(sp_gguf_find(g, "t256")->row_bytes, bytes[k]);
        assert_int_equal(sp_gguf_find(g, "t512")->row_bytes, 2 * bytes[k]);
        sp_gguf_close(g);
    }
}

/* v2.gguf is q8_0.gguf with version 2. */
static void test_version_2(void **state)
{
    (void)state;
    sp_gguf *g = gb_open_ok(FIXTURES "v2.gguf");
    assert_int_equal(sp_gguf_version(g), 2);
    check_against(g, "q8_0", "v2.gguf");
    sp_gguf_close(g);
}

/* general.alignment 64 moves the data section and the tensors' offsets (0, 192, 512). */
static void test_alignment_64(void **state)
{
    (void)state;
    sp_gguf *g = gb_open_ok(FIXTURES "align64.gguf");
    assert_int_equal(sp_gguf_alignment(g), 64);
    static const uint64_t offsets[3] = {0, 192, 512};
    const unsigned char *base = sp_gguf_tensor_at(g, 0)->data;
    assert_int_equal((uintptr_t)base % 64, 0); /* the mapping is page-aligned */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sp_gguf_tensor_at(g, i)->offset, offsets[i]);
        assert_ptr_equal(sp_gguf_tensor_at(g, i)->data, base + offsets[i]);
    }
    check_against(g, "align64", "align64.gguf");
    sp_gguf_close(g);
}

/* ---- metadata: meta.gguf holds generate.py's metadata_kvs() ---- */

static void test_metadata_scalars(void **state)
{
    (void)state;
    sp_gguf *g = gb_open_ok(FIXTURES "meta.gguf");
    assert_int_equal(sp_gguf_tensor_count(g), 0);
    assert_int_equal(sp_gguf_kv_count(g), 31);
    assert_string_equal(sp_gguf_kv_key(g, 0), "general.architecture");
    assert_string_equal(sp_gguf_kv_key(g, 1), "test.uint8");
    assert_int_equal(sp_gguf_kv_type(g, 1), SP_GGUF_UINT8);
    assert_int_equal(sp_gguf_kv_find(g, "test.int64"), 8);
    assert_int_equal(sp_gguf_kv_type(g, 8), SP_GGUF_INT64);
    assert_int_equal(sp_gguf_kv_find(g, "test.nothing"), -1);
    const char *s = NULL;
    size_t len = 0;
    assert_int_equal(sp_gguf_get_string(g, "general.architecture", &s, NULL), SP_OK);
    assert_string_equal(s, "spanprobe-test");
    assert_int_equal(sp_gguf_get_string(g, "test.string", &s, &len), SP_OK);
    assert_string_equal(s, "h\xc3\xa9llo, w\xc3\xb6rld \xe2\x9c\x93");
    assert_int_equal(len, strlen(s));
    assert_int_equal(sp_gguf_get_string(g, "test.empty_string", &s, &len), SP_OK);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    assert_int_equal(sp_gguf_get_string(g, "test.nul_string", &s, &len), SP_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(s, "a\0b", 4);

    static const struct {
        const char *key;
        uint64_t u; /* 0 with u_ok 0: get_uint fails */
        int u_ok;
        int64_t i;
        int i_ok;
    } ints[8] = {
        {"test.uint8", 200, 1, 200, 1},
        {"test.int8", 0, 0, -100, 1},
        {"test.uint16", 60000, 1, 60000, 1},
        {"test.int16", 0, 0, -30000, 1},
        {"test.uint32", 4000000000u, 1, 4000000000, 1},
        {"test.int32", 0, 0, -2000000000, 1},
        {"test.uint64", UINT64_MAX, 1, 0, 0},
        {"test.int64", 0, 0, INT64_MIN, 1},
    };
    for (int k = 0; k < 8; k++) {
        uint64_t u = 0;
        int64_t i = 0;
        sp_status su = sp_gguf_get_uint(g, ints[k].key, &u), si = sp_gguf_get_int(g, ints[k].key, &i);
        if (ints[k].u_ok) {
            assert_int_equal(su, SP_OK);
            assert_true(u == ints[k].u);
        } else {
            gb_expect_error(su, NEEDLES(FIXTURES "meta.gguf", ints[k].key, "expected an integer >= 0, found -"));
        }
        if (ints[k].i_ok) {
            assert_int_equal(si, SP_OK);
            assert_true(i == ints[k].i);
        } else {
            gb_expect_error(si, NEEDLES(ints[k].key, "expected an integer <= 2^63 - 1, found 18446744073709551615"));
        }
    }
    double f = 0;
    assert_int_equal(sp_gguf_get_float(g, "test.float32", &f), SP_OK);
    assert_true(f == (double)0.1f);
    assert_int_equal(sp_gguf_get_float(g, "test.float64", &f), SP_OK);
    assert_true(f == 0.1);
    int b = -1;
    assert_int_equal(sp_gguf_get_bool(g, "test.true", &b), SP_OK);
    assert_int_equal(b, 1);
    assert_int_equal(sp_gguf_get_bool(g, "test.false", &b), SP_OK);
    assert_int_equal(b, 0);
    sp_gguf_close(g);
}

static void test_metadata_arrays(void **state)
{
    (void)state;
    sp_gguf *g = gb_open_ok(FIXTURES "meta.gguf");
    sp_gguf_array a;
    /* integer arrays, read with the getter of their signedness, and their values printed */
    static const struct {
        const char *key;
        sp_gguf_value_type type;
        const char *values;
    } integer_arrays[8] = {
        {"test.array.uint8", SP_GGUF_UINT8, "0 1 255"},
        {"test.array.int8", SP_GGUF_INT8, "-128 0 127"},
        {"test.array.uint16", SP_GGUF_UINT16, "0 65535"},
        {"test.array.int16", SP_GGUF_INT16, "-32768 32767"},
        {"test.array.uint32", SP_GGUF_UINT32, "0 4294967295"},
        {"test.array.int32", SP_GGUF_INT32, "-2147483648 2147483647"},
        {"test.array.uint64", SP_GGUF_UINT64, "0 18446744073709551615"},
        {"test.array.int64", SP_GGUF_INT64, "-9223372036854775808 9223372036854775807"},
    };
    for (int k = 0; k < 8; k++) {
        assert_int_equal(sp_gguf_get_array(g, integer_arrays[k].key, &a), SP_OK);
        assert_int_equal(a.type, integer_arrays[k].type);
        char printed[128] = "";
        for (size_t i = 0; i < a.count; i++) {
            uint64_t u = 0;
            int64_t v = 0;
            size_t used = strlen(printed);
            if (k % 2) { /* the signed types */
                assert_int_equal(sp_gguf_array_int(&a, i, &v), SP_OK);
                snprintf(printed + used, sizeof printed - used, "%s%lld", i ? " " : "", (long long)v);
            } else {
                assert_int_equal(sp_gguf_array_uint(&a, i, &u), SP_OK);
                snprintf(printed + used, sizeof printed - used, "%s%llu", i ? " " : "", (unsigned long long)u);
            }
        }
        assert_string_equal(printed, integer_arrays[k].values);
    }
    double f = 0;
    assert_int_equal(sp_gguf_get_array(g, "test.array.float32", &a), SP_OK);
    assert_int_equal(a.type, SP_GGUF_FLOAT32);
    assert_int_equal(a.count, 3);
    assert_int_equal(sp_gguf_array_float(&a, 2, &f), SP_OK);
    assert_true(f == (double)3.0e38f);
    assert_int_equal(sp_gguf_get_array(g, "test.array.float64", &a), SP_OK);
    assert_int_equal(sp_gguf_array_float(&a, 1, &f), SP_OK);
    assert_true(f == -1e300);
    int b = -1;
    assert_int_equal(sp_gguf_get_array(g, "test.array.bool", &a), SP_OK);
    assert_int_equal(a.type, SP_GGUF_BOOL);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sp_gguf_array_bool(&a, (size_t)i, &b), SP_OK);
        assert_int_equal(b, i != 1);
    }
    static const char *const strings[3] = {"alpha", "", "\xce\xb3\xce\xac\xce\xbc\xce\xbc\xce\xb1"};
    assert_int_equal(sp_gguf_get_array(g, "test.array.string", &a), SP_OK);
    assert_int_equal(a.type, SP_GGUF_STRING);
    assert_int_equal(a.count, 3);
    for (int i = 0; i < 3; i++) {
        const char *s = NULL;
        size_t len = 99;
        assert_int_equal(sp_gguf_array_string(&a, (size_t)i, &s, &len), SP_OK);
        assert_string_equal(s, strings[i]);
        assert_int_equal(len, strlen(strings[i]));
    }
    sp_gguf_close(g);
}

static void test_metadata_nested_arrays(void **state)
{
    (void)state;
    sp_gguf *g = gb_open_ok(FIXTURES "meta.gguf");
    sp_gguf_array outer, inner, innermost;
    /* [[1, 2], [3], [4, 5, 6]] */
    assert_int_equal(sp_gguf_get_array(g, "test.array.nested", &outer), SP_OK);
    assert_int_equal(outer.type, SP_GGUF_ARRAY);
    assert_int_equal(outer.count, 3);
    int64_t next = 1;
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(sp_gguf_array_array(&outer, i, &inner), SP_OK);
        assert_int_equal(inner.type, SP_GGUF_INT32);
        assert_int_equal(inner.count, i + 1 == 1 ? 2 : i + 1 == 2 ? 1 : 3);
        for (size_t j = 0; j < inner.count; j++) {
            int64_t v = 0;
            assert_int_equal(sp_gguf_array_int(&inner, j, &v), SP_OK);
            assert_true(v == next++);
        }
    }
    /* [["a", "b"], ["c"]] */
    const char *s = NULL;
    assert_int_equal(sp_gguf_get_array(g, "test.array.nested_strings", &outer), SP_OK);
    assert_int_equal(sp_gguf_array_array(&outer, 1, &inner), SP_OK);
    assert_int_equal(inner.type, SP_GGUF_STRING);
    assert_int_equal(sp_gguf_array_string(&inner, 0, &s, NULL), SP_OK);
    assert_string_equal(s, "c");
    gb_expect_error(sp_gguf_array_string(&inner, 1, &s, NULL),
                       NEEDLES("metadata 'test.array.nested_strings'[1]: expected an index inside the array, found "
                               "element 1 of 1"));
    /* [[[1.5]], [[2.5, -3.25]]] */
    double f = 0;
    assert_int_equal(sp_gguf_get_array(g, "test.array.deep", &outer), SP_OK);
    assert_int_equal(sp_gguf_array_array(&outer, 1, &inner), SP_OK);
    assert_int_equal(inner.type, SP_GGUF_ARRAY);
    assert_int_equal(sp_gguf_array_array(&inner, 0, &innermost), SP_OK);
    assert_int_equal(innermost.type, SP_GGUF_FLOAT32);
    assert_int_equal(innermost.count, 2);
    assert_int_equal(sp_gguf_array_float(&innermost, 1, &f), SP_OK);
    assert_true(f == -3.25);
    gb_expect_error(sp_gguf_array_int(&innermost, 0, &next),
                       NEEDLES("metadata 'test.array.deep'[1][0][0]: expected an integer, found FLOAT32"));
    sp_gguf_close(g);
}

/* Each getter names the key and the types when the value is of another type or absent. */
static void test_metadata_wrong_types(void **state)
{
    (void)state;
    const char *path = FIXTURES "meta.gguf";
    sp_gguf *g = gb_open_ok(path);
    const char *s = NULL;
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;
    int b = 0;
    sp_gguf_array a;
    gb_expect_error(sp_gguf_get_string(g, "test.uint8", &s, NULL),
                       NEEDLES(path, "metadata 'test.uint8': expected STRING, found UINT8"));
    gb_expect_error(sp_gguf_get_uint(g, "test.float32", &u),
                       NEEDLES("metadata 'test.float32': expected an integer, found FLOAT32"));
    gb_expect_error(sp_gguf_get_int(g, "test.string", &i), NEEDLES("'test.string': expected an integer, found STRING"));
    gb_expect_error(sp_gguf_get_float(g, "test.int32", &f),
                       NEEDLES("'test.int32': expected FLOAT32 or FLOAT64, found INT32"));
    gb_expect_error(sp_gguf_get_bool(g, "test.uint8", &b), NEEDLES("'test.uint8': expected BOOL, found UINT8"));
    gb_expect_error(sp_gguf_get_array(g, "test.true", &a), NEEDLES("'test.true': expected ARRAY, found BOOL"));
    gb_expect_error(sp_gguf_get_uint(g, "llama.block_count", &u),
                       NEEDLES(path, "metadata 'llama.block_count': expected an integer, found no such key"));
    assert_int_equal(sp_gguf_get_array(g, "test.array.string", &a), SP_OK);
    gb_expect_error(sp_gguf_array_uint(&a, 0, &u),
                    NEEDLES("'test.array.string'[0]: expected an integer, found STRING"));
    gb_expect_error(sp_gguf_array_array(&a, 1, &a), NEEDLES("'test.array.string'[1]: expected ARRAY, found STRING"));
    gb_expect_error(sp_gguf_array_string(&a, 3, &s, NULL), NEEDLES("'test.array.string': expected an index inside "
                                                                      "the array, found element 3 of 3"));
    assert_int_equal(sp_gguf_get_array(g, "test.array.int8", &a), SP_OK);
    gb_expect_error(sp_gguf_array_uint(&a, 0, &u),
                    NEEDLES("'test.array.int8'[0]: expected an integer >= 0, found -128"));
    gb_expect_error(sp_gguf_array_bool(&a, 2, &b), NEEDLES("'test.array.int8'[2]: expected BOOL, found INT8"));
    gb_expect_error(sp_gguf_array_float(&a, 1, &f), NEEDLES("'test.array.int8'[1]: expected FLOAT32 or FLOAT64"));
    assert_int_equal(sp_gguf_array_uint(&a, 2, &u), SP_OK);
    assert_int_equal(u, 127);
    sp_gguf_close(g);
}

/* ---- files built here ---- */

/* A file of every kind of thing the fixtures lack: a scalar (n_dims 0), an empty array, tensors out
 * of offset order with a hole between them, a type that cannot be read, and metadata after a 16
 * alignment. */
static void test_built_file(void **state)
{
    (void)state;
    byte_buf kvs = {0};
    gb_kv_u32(&kvs, "general.alignment", 16);
    gb_kv_string(&kvs, "general.architecture", "test");
    gb_string(&kvs, "test.empty");
    byte_buf_put_u32(&kvs, SP_GGUF_ARRAY);
    byte_buf_put_u32(&kvs, SP_GGUF_STRING);
    byte_buf_put_u64(&kvs, 0);
    const gb_info infos[4] = {
        {"w", SP_GGML_F32, 2, {2, 2}, 48}, /* after q and a 14-byte hole */
        {"q", SP_GGML_Q8_0, 1, {32}, 0},
        {"scalar", SP_GGML_F16, 0, {0}, 64},
        {"iq", SP_GGML_IQ2_XXS, 1, {256}, 80},
    };
    unsigned char data[80 + 66] = {0};
    data[0] = 0x00, data[1] = 0x38; /* q: d = 0.5 */
    for (int i = 0; i < 32; i++)
        data[2 + i] = (unsigned char)(i - 16); /* q = i - 16 */
    const float w[4] = {1.5f, -2.0f, 0.25f, 1e-45f};
    memcpy(data + 48, w, sizeof w); /* the host is little-endian, as the format */
    data[64] = 0x00, data[65] = 0xC0; /* scalar: -2 */
    byte_buf f = gb_file(&kvs, 3, infos, 4, 16, data, sizeof data, NULL);
    char path[4200];
    gb_write("built.gguf", &f, path, sizeof path);
    sp_gguf *g = gb_open_ok(path);
    assert_int_equal(sp_gguf_alignment(g), 16);
    sp_gguf_array a;
    assert_int_equal(sp_gguf_get_array(g, "test.empty", &a), SP_OK);
    assert_int_equal(a.count, 0);
    assert_int_equal(a.type, SP_GGUF_STRING);
    assert_int_equal(sp_gguf_tensor_count(g), 4);
    assert_string_equal(sp_gguf_tensor_at(g, 2)->name, "scalar");

    sp_real got[256];
    const sp_gguf_tensor *q = sp_gguf_find(g, "q"), *wt = sp_gguf_find(g, "w"), *s = sp_gguf_find(g, "scalar");
    assert_int_equal(sp_gguf_read_rows(q, 0, 1, got), SP_OK);
    for (int i = 0; i < 32; i++)
        assert_true(got[i] == 0.5f * (float)(i - 16));
    assert_int_equal(wt->n_rows, 2);
    assert_int_equal(sp_gguf_read_rows(wt, 1, 1, got), SP_OK);
    assert_true(got[0] == 0.25f && got[1] == 1e-45f);
    assert_int_equal(s->n_dims, 0);
    assert_int_equal(s->numel, 1);
    assert_int_equal(s->dims[0], 1);
    assert_int_equal(sp_gguf_read_rows(s, 0, 1, got), SP_OK);
    assert_true(got[0] == -2.0f);
    assert_int_equal(sp_gguf_read_rows(wt, 2, 0, got), SP_OK); /* empty, at the end */

    /* rows past the end, and a type that cannot be read, are errors naming the tensor */
    gb_expect_error(sp_gguf_read_rows(wt, 1, 2, got), NEEDLES(path, "tensor 'w'", "past its 2 rows"));
    gb_expect_error(sp_gguf_read_rows(wt, 3, 0, got), NEEDLES("tensor 'w'"));
    gb_expect_error(sp_gguf_read_rows(wt, 1, SIZE_MAX, got), NEEDLES("tensor 'w'"));
    const sp_gguf_tensor *iq = sp_gguf_find(g, "iq");
    assert_int_equal(iq->nbytes, 66);
    assert_false(sp_ggml_type_is_readable(iq->type));
    gb_expect_error(sp_gguf_read_rows(iq, 0, 1, got), NEEDLES(path, "tensor 'iq'", "type IQ2_XXS cannot be read"));
    sp_gguf_close(g);
    byte_buf_free(&kvs);
    byte_buf_free(&f);
}

/* A file with metadata and no tensors may end without padding. */
static void test_no_tensors(void **state)
{
    (void)state;
    byte_buf kvs = {0};
    gb_kv_string(&kvs, "general.architecture", "test");
    byte_buf f = gb_file(&kvs, 1, NULL, 0, 1, NULL, 0, NULL);
    char path[4200];
    gb_write("no_tensors.gguf", &f, path, sizeof path);
    sp_gguf *g = gb_open_ok(path);
    assert_int_equal(sp_gguf_tensor_count(g), 0);
    assert_null(sp_gguf_find(g, "w"));
    sp_gguf_close(g);
    byte_buf_free(&kvs);
    byte_buf_free(&f);
}

/* Descriptors, mappings and (under ASan) memory are all released, after success and failure. */
static void test_releases_everything(void **state)
{
    (void)state;
    char bad[4200], scratch[4200];
    const gb_info twice[2] = {{"w", SP_GGML_F32, 1, {8}, 0}, {"w", SP_GGML_F32, 1, {8}, 32}};
    byte_buf b = gb_file(NULL, 0, twice, 2, 32, NULL, 64, NULL);
    gb_write("release_bad.gguf", &b, bad, sizeof bad);
    byte_buf_free(&b);
    scratch_path(scratch, sizeof scratch, "");
    int fds = count_open_fds(), maps = count_mappings_of(scratch);
    assert_true(fds > 0);
    for (int i = 0; i < 3; i++) {
        gb_expect_open_error(bad, SP_ERR_INPUT, NEEDLES("appears twice"));
        assert_int_equal(count_mappings_of(scratch), maps);
    }
    maps = count_mappings_of(FIXTURES);
    sp_gguf *g = gb_open_ok(FIXTURES "meta.gguf");
    assert_int_equal(count_mappings_of(FIXTURES), maps + 1);
    sp_gguf_close(g);
    assert_int_equal(count_mappings_of(FIXTURES), maps);
    assert_int_equal(count_open_fds(), fds);
}

static void test_type_names(void **state)
{
    (void)state;
    assert_string_equal(sp_ggml_type_name(SP_GGML_Q4_K), "Q4_K");
    assert_string_equal(sp_ggml_type_name(SP_GGML_IQ2_XXS), "IQ2_XXS");
    assert_string_equal(sp_ggml_type_name((sp_ggml_type)5), "?");
    assert_string_equal(sp_ggml_type_name((sp_ggml_type)-1), "?");
    assert_string_equal(sp_gguf_value_type_name(SP_GGUF_FLOAT64), "FLOAT64");
    assert_string_equal(sp_gguf_value_type_name((sp_gguf_value_type)13), "?");
    int readable = 0;
    for (int t = 0; t < SP_GGML_N_TYPES; t++)
        readable += sp_ggml_type_is_readable((sp_ggml_type)t);
    assert_int_equal(readable, 13);
    assert_false(sp_ggml_type_is_readable(SP_GGML_F64));
    assert_false(sp_ggml_type_is_readable(SP_GGML_Q8_K));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_bit_exact),
        cmocka_unit_test(test_row_bytes),
        cmocka_unit_test(test_version_2),
        cmocka_unit_test(test_alignment_64),
        cmocka_unit_test(test_metadata_scalars),
        cmocka_unit_test(test_metadata_arrays),
        cmocka_unit_test(test_metadata_nested_arrays),
        cmocka_unit_test(test_metadata_wrong_types),
        cmocka_unit_test(test_built_file),
        cmocka_unit_test(test_no_tensors),
        cmocka_unit_test(test_releases_everything),
        cmocka_unit_test(test_type_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

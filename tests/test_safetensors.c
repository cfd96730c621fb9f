/* Hugging Face safetensors: the reader on files built here (every float dtype read back exactly,
 * element ranges, lookup order, metadata, sharded models), on a file the reference implementation
 * wrote (fixtures/safetensors/, tools/gen_safetensors_fixture.py), and every malformed input
 * rejected with exit code 3 (5 only when a file cannot be opened) and one line naming the file and
 * the tensor or field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "support/byte_buf.h"
#include "support/open_files.h"
#include "support/scratch.h"

/* ---- building files ---- */

/* One header entry, e.g. ENTRY("w", "F32", "[3,8]", "[0,96]"). */
#define ENTRY(name, dtype, shape, offsets) \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offsets "}"
#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The 8-byte length, the header text as given (padding included), then data_len data bytes (zeros
 * when data is NULL). */
static byte_buf st_bytes(const char *header, const void *data, size_t data_len)
{
    byte_buf b = {0};
    byte_buf_put_u64(&b, strlen(header));
    byte_buf_put(&b, header, strlen(header));
    for (size_t i = 0; i < data_len; i++)
        byte_buf_put(&b, data ? (const unsigned char *)data + i : (const unsigned char *)"", 1);
    return b;
}

static void write_bytes(const char *name, const byte_buf *b, char *path, size_t len)
{
    scratch_path(path, len, name);
    assert_int_equal(scratch_write_file(path, b->data, b->len), 0);
}

static void write_st(const char *name, const char *header, size_t data_len, char *path, size_t len)
{
    byte_buf b = st_bytes(header, NULL, data_len);
    write_bytes(name, &b, path, len);
    byte_buf_free(&b);
}

static sp_st_archive *open_ok(const char *path)
{
    sp_st_archive *a = NULL;
    sp_error_clear();
    if (sp_st_open(path, &a) != SP_OK)
        fail_msg("sp_st_open(%s): %s", path, sp_error_message());
    assert_non_null(a);
    return a;
}

static void assert_message(const char *msg, const char *const *needles)
{
    assert_null(strchr(msg, '\n'));
    for (int i = 0; needles[i]; i++)
        if (!strstr(msg, needles[i]))
            fail_msg("error '%s' does not mention '%s'", msg, needles[i]);
}

/* sp_st_open(path) fails with code and one line naming path and holding every needle. */
static void expect_open_error(const char *path, sp_status code, const char *const *needles)
{
    sp_st_archive *a = NULL;
    sp_error_clear();
    sp_status status = sp_st_open(path, &a);
    const char *msg = sp_error_message();
    if (status != code)
        fail_msg("sp_st_open(%s) returned %d, expected %d (%s)", path, status, code, msg);
    assert_null(a);
    assert_message(msg, NEEDLES(path));
    assert_message(msg, needles);
    sp_error_clear();
}

/* A file with this header and data_len zero bytes of data is bad input. */
static void expect_bad_file(const char *header, size_t data_len, const char *const *needles)
{
    char path[4200];
    write_st("bad.safetensors", header, data_len, path, sizeof path);
    expect_open_error(path, SP_ERR_INPUT, needles);
}

/* got[i] has the bits of want[i] (so -0 and NaN payloads count); any NaN matches when nan_any. */
static void assert_reals(const sp_real *got, const sp_real *want, size_t n, int nan_any, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        int same = memcmp(&got[i], &want[i], sizeof got[i]) == 0 || (nan_any && isnan(got[i]) && isnan(want[i]));
        if (!same)
            fail_msg("%s[%zu] = %.9g, expected %.9g", what, i, (double)got[i], (double)want[i]);
    }
}

static uint32_t float_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

/* ---- good files ---- */

/* Every float dtype, written here bit by bit, reads back exactly, whole and in ranges. */
static void test_round_trip_floats(void **state)
{
    (void)state;
    static const float f32[8] = {1.5f, -2.25f, 0.1f, FLT_MIN / 4, -0.0f, INFINITY, NAN, FLT_MAX};
    /* binary16 patterns and their values: 1, -2.5, the largest half, the smallest normal, the
     * smallest and largest subnormals, a negative subnormal, -0, +-inf, NaN, 1365/4096 */
    static const uint16_t f16_bits[12] = {0x3C00, 0xC100, 0x7BFF, 0x0400, 0x0001, 0x03FF,
                                          0x8001, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x3555};
    const sp_real f16_values[12] = {1.0f, -2.5f, 65504.0f, ldexpf(1, -14), ldexpf(1, -24), ldexpf(1023, -24),
                                    -ldexpf(1, -24), -0.0f, INFINITY, -INFINITY, NAN, 0.333251953125f};
    /* bfloat16 holds these exactly: the upper 16 bits of their binary32 */
    const float bf16[8] = {1.0f, -3.0f, 0.15625f, 3.3895313892515355e38f, ldexpf(1, -133), INFINITY, -INFINITY, NAN};
    static const double f64[5] = {0.1, -2.5, 1e300, -1e-300, 1e10};
    const sp_real f64_values[5] = {0.1f, -2.5f, INFINITY, -0.0f, 1e10f}; /* float32 build: rounded, overflowed */

    byte_buf data = {0};
    for (int i = 0; i < 8; i++)
        byte_buf_put_f32(&data, f32[i]);
    for (int i = 0; i < 12; i++)
        byte_buf_put_u16(&data, f16_bits[i]);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(float_bits(bf16[i]) & 0xFFFF, 0);
        byte_buf_put_u16(&data, (uint16_t)(float_bits(bf16[i]) >> 16));
    }
    for (int i = 0; i < 5; i++) {
        uint64_t u;
        memcpy(&u, &f64[i], sizeof u);
        byte_buf_put_u64(&data, u);
    }
    /* names out of order, header padded with spaces as the reference writer pads it */
    const char *header = "{" ENTRY("w.f32", "F32", "[2,4]", "[0,32]") "," ENTRY("b.f16", "F16", "[12]", "[32,56]")
        "," ENTRY("c.bf16", "BF16", "[2,2,2]", "[56,72]") "," ENTRY("a.f64", "F64", "[5]", "[72,112]") "}     ";
    byte_buf file = st_bytes(header, data.data, data.len);
    char path[4200];
    write_bytes("floats.safetensors", &file, path, sizeof path);

    sp_st_archive *a = open_ok(path);
    assert_int_equal(sp_st_count(a), 4);
    assert_int_equal(sp_st_total_bytes(a), 112);
    const struct {
        const char *name;
        sp_st_dtype dtype;
        const char *dtype_name;
        size_t numel;
        const sp_real *want;
    } cases[4] = {{"w.f32", SP_ST_F32, "F32", 8, f32}, {"b.f16", SP_ST_F16, "F16", 12, f16_values},
                  {"c.bf16", SP_ST_BF16, "BF16", 8, bf16}, {"a.f64", SP_ST_F64, "F64", 5, f64_values}};
    for (int c = 0; c < 4; c++) {
        const sp_st_tensor *t = sp_st_find(a, cases[c].name);
        assert_non_null(t);
        assert_int_equal(t->dtype, cases[c].dtype);
        assert_string_equal(sp_st_dtype_name(t->dtype), cases[c].dtype_name);
        assert_true(sp_st_dtype_is_readable(t->dtype));
        assert_int_equal(t->numel, cases[c].numel);
        assert_string_equal(t->file, path);
        sp_real got[12];
        assert_int_equal(sp_st_read(t, 0, t->numel, got), SP_OK);
        assert_reals(got, cases[c].want, t->numel, 0, cases[c].name);
        assert_int_equal(sp_st_read(t, 2, 3, got), SP_OK); /* a range starting inside */
        assert_reals(got, cases[c].want + 2, 3, 0, cases[c].name);
    }
    const sp_st_tensor *bf = sp_st_find(a, "c.bf16");
    assert_int_equal(bf->rank, 3);
    assert_int_equal(bf->shape[0] * bf->shape[1] * bf->shape[2], 8);
    assert_int_equal(bf->nbytes, 16);
    sp_st_close(a);
    byte_buf_free(&file);
    byte_buf_free(&data);
}

/* A row of a matrix by first/count; ranges past the end are errors naming the tensor. */
static void test_read_rows(void **state)
{
    (void)state;
    byte_buf data = {0};
    for (int i = 0; i < 12; i++)
        byte_buf_put_f32(&data, 1.5f * (float)i);
    byte_buf file = st_bytes("{" ENTRY("m", "F32", "[4,3]", "[0,48]") "}", data.data, data.len);
    char path[4200];
    write_bytes("rows.safetensors", &file, path, sizeof path);
    sp_st_archive *a = open_ok(path);
    const sp_st_tensor *m = sp_st_find(a, "m");
    sp_real row[3];
    assert_int_equal(sp_st_read(m, 2 * 3, 3, row), SP_OK);
    const sp_real want[3] = {9.0f, 10.5f, 12.0f};
    assert_reals(row, want, 3, 0, "row 2");
    assert_int_equal(sp_st_read(m, 12, 0, row), SP_OK); /* empty, at the end */
    sp_error_clear();
    assert_int_equal(sp_st_read(m, 10, 3, row), SP_ERR_INPUT);
    assert_message(sp_error_message(), NEEDLES(path, "'m'", "past its 12 elements"));
    sp_error_clear();
    assert_int_equal(sp_st_read(m, 13, 0, row), SP_ERR_INPUT);
    sp_error_clear();
    assert_int_equal(sp_st_read(m, 1, SIZE_MAX, row), SP_ERR_INPUT);
    sp_error_clear();
    sp_st_close(a);
    byte_buf_free(&file);
    byte_buf_free(&data);
}

/* sp_st_at walks names in strcmp order whatever the header and offset order; sp_st_find finds
 * each and nothing else. Zero-element tensors and scalars are tensors too. */
static void test_find_and_order(void **state)
{
    (void)state;
    char path[4200];
    write_st("order.safetensors",
             "{" ENTRY("layers.10.w", "F32", "[1]", "[8,12]") "," ENTRY("Z", "F32", "[]", "[4,8]") ","
             ENTRY("layers.2.w", "F32", "[1]", "[0,4]") "," ENTRY("empty", "F16", "[0,5]", "[12,12]") ","
             ENTRY("a", "U8", "[2]", "[12,14]") "}", 14, path, sizeof path);
    sp_st_archive *a = open_ok(path);
    static const char *const sorted[5] = {"Z", "a", "empty", "layers.10.w", "layers.2.w"};
    assert_int_equal(sp_st_count(a), 5);
    for (int i = 0; i < 5; i++) {
        assert_string_equal(sp_st_at(a, i)->name, sorted[i]);
        assert_ptr_equal(sp_st_find(a, sorted[i]), sp_st_at(a, i));
    }
    assert_null(sp_st_find(a, "layers.3.w"));
    assert_null(sp_st_find(a, ""));
    assert_null(sp_st_find(a, "zz"));
    const sp_st_tensor *scalar = sp_st_find(a, "Z"), *empty = sp_st_find(a, "empty");
    assert_int_equal(scalar->rank, 0);
    assert_int_equal(scalar->numel, 1);
    assert_int_equal(empty->numel, 0);
    assert_int_equal(empty->nbytes, 0);
    assert_int_equal(sp_st_total_bytes(a), 14);
    sp_st_close(a);
}

static void test_metadata(void **state)
{
    (void)state;
    char path[4200];
    write_st("meta.safetensors",
             "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\xc3\xa9\"}," ENTRY("w", "F32", "[1]", "[0,4]") "}", 4,
             path, sizeof path);
    sp_st_archive *a = open_ok(path);
    assert_string_equal(sp_st_metadata(a, "format"), "pt");
    assert_string_equal(sp_st_metadata(a, "note"), "caf\xc3\xa9");
    assert_null(sp_st_metadata(a, "missing"));
    assert_int_equal(sp_st_count(a), 1); /* __metadata__ is not a tensor */
    sp_st_close(a);

    write_st("nometa.safetensors", "{\"__metadata__\":null}", 0, path, sizeof path);
    a = open_ok(path);
    assert_null(sp_st_metadata(a, "format"));
    assert_int_equal(sp_st_count(a), 0);
    sp_st_close(a);
}

/* Every dtype the format names is parsed with its size (sub-byte ones packed); only floats read. */
static void test_other_dtypes(void **state)
{
    (void)state;
    char path[4200];
    write_st("dtypes.safetensors",
             "{" ENTRY("i64", "I64", "[2]", "[0,16]") "," ENTRY("u16", "U16", "[3]", "[16,22]") ","
             ENTRY("flag", "BOOL", "[2]", "[22,24]") "," ENTRY("e4m3", "F8_E4M3", "[4]", "[24,28]") ","
             ENTRY("fp4", "F4", "[2,3]", "[28,31]") "," ENTRY("fp6", "F6_E2M3", "[4]", "[31,34]") ","
             ENTRY("c", "C64", "[1]", "[34,42]") "}", 42, path, sizeof path);
    sp_st_archive *a = open_ok(path);
    assert_int_equal(sp_st_find(a, "fp4")->nbytes, 3);
    assert_int_equal(sp_st_find(a, "fp6")->nbytes, 3);
    assert_int_equal(sp_st_find(a, "e4m3")->dtype, SP_ST_F8_E4M3);
    const sp_st_tensor *i64 = sp_st_find(a, "i64");
    assert_false(sp_st_dtype_is_readable(i64->dtype));
    sp_real out[2];
    sp_error_clear();
    assert_int_equal(sp_st_read(i64, 0, 2, out), SP_ERR_INPUT);
    assert_message(sp_error_message(), NEEDLES(path, "'i64'", "I64"));
    sp_error_clear();
    sp_st_close(a);
}

/* The file tools/gen_safetensors_fixture.py wrote with the reference implementation. */
static void test_reference_file(void **state)
{
    (void)state;
    const char *path = "fixtures/safetensors/reference.safetensors"; /* the tests run from the repository root */
    sp_st_archive *a = open_ok(path);
    assert_string_equal(sp_st_metadata(a, "format"), "pt");
    assert_non_null(strstr(sp_st_metadata(a, "generator"), "safetensors 0.8.0"));
    assert_int_equal(sp_st_count(a), 5);
    const sp_real f32[6] = {1.5f, -2.25f, 3.0f, 0.1f, -7.0f, 1e-3f};
    const sp_real f16[11] = {1.0f, -2.5f, 65504.0f, ldexpf(1, -14), ldexpf(1, -24), 3 * ldexpf(1, -24),
                             0.0999755859375f, -0.0f, INFINITY, -INFINITY, NAN};
    const sp_real bf16[6] = {1.0f, -3.0f, 0.15625f, 3.3895313892515355e38f, ldexpf(1, -133), -0.5f};
    const sp_real f64[3] = {(sp_real)0.1, -2.5f, 1e10f};
    const struct {
        const char *name;
        sp_st_dtype dtype;
        int rank;
        int64_t dim0;
        const sp_real *want;
    } cases[4] = {{"f32", SP_ST_F32, 2, 2, f32}, {"f16", SP_ST_F16, 1, 11, f16}, {"bf16", SP_ST_BF16, 2, 3, bf16},
                  {"f64", SP_ST_F64, 1, 3, f64}};
    for (int c = 0; c < 4; c++) {
        const sp_st_tensor *t = sp_st_find(a, cases[c].name);
        assert_non_null(t);
        assert_int_equal(t->dtype, cases[c].dtype);
        assert_int_equal(t->rank, cases[c].rank);
        assert_int_equal(t->shape[0], cases[c].dim0);
        sp_real got[11];
        assert_int_equal(sp_st_read(t, 0, t->numel, got), SP_OK);
        assert_reals(got, cases[c].want, t->numel, 1, cases[c].name);
    }
    assert_int_equal(sp_st_find(a, "i32")->dtype, SP_ST_I32);
    sp_st_close(a);
}

/* ---- sharded models ---- */

typedef struct {
    const char *name, *header;
    size_t data_len;
} shard_spec;

/* scratch/<dir>/ with the index (when not NULL) and the shards; path gets the directory. */
static void write_model_dir(const char *dir, const char *index, const shard_spec *shards, int n, char *path,
                            size_t len)
{
    scratch_path(path, len, dir);
    assert_true(mkdir(path, 0700) == 0 || scratch_file_exists(path));
    char file[4400];
    if (index) {
        snprintf(file, sizeof file, "%s/model.safetensors.index.json", path);
        assert_int_equal(scratch_write_file(file, index, strlen(index)), 0);
    }
    for (int i = 0; i < n; i++) {
        byte_buf b = st_bytes(shards[i].header, NULL, shards[i].data_len);
        snprintf(file, sizeof file, "%s/%s", path, shards[i].name);
        assert_int_equal(scratch_write_file(file, b.data, b.len), 0);
        byte_buf_free(&b);
    }
}

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

static const shard_spec two_shards[2] = {
    {SHARD1, "{\"__metadata__\":{\"format\":\"pt\"}," ENTRY("c.bias", "F16", "[2]", "[8,12]") ","
             ENTRY("a.weight", "F32", "[2]", "[0,8]") "}", 12},
    {SHARD2, "{\"__metadata__\":{\"format\":\"pt\",\"only_b\":\"yes\"}," ENTRY("b.weight", "BF16", "[3]", "[0,6]") "}",
     6},
};

static void test_sharded(void **state)
{
    (void)state;
    char dir[4200], index[4400];
    write_model_dir("sharded",
                    "{\"metadata\":{\"total_size\":18},\"weight_map\":{\"a.weight\":\"" SHARD1 "\",\"b.weight\":\""
                    SHARD2 "\",\"c.bias\":\"" SHARD1 "\"}}", two_shards, 2, dir, sizeof dir);
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    const char *paths[2] = {dir, index}; /* the directory, or the index itself */
    for (int p = 0; p < 2; p++) {
        sp_st_archive *a = open_ok(paths[p]);
        assert_int_equal(sp_st_count(a), 3);
        assert_string_equal(sp_st_at(a, 0)->name, "a.weight");
        assert_string_equal(sp_st_at(a, 1)->name, "b.weight");
        assert_string_equal(sp_st_at(a, 2)->name, "c.bias");
        assert_non_null(strstr(sp_st_find(a, "b.weight")->file, "/" SHARD2));
        assert_non_null(strstr(sp_st_find(a, "c.bias")->file, "/" SHARD1));
        assert_int_equal(sp_st_total_bytes(a), 18);
        assert_string_equal(sp_st_metadata(a, "format"), "pt");
        assert_string_equal(sp_st_metadata(a, "only_b"), "yes");
        sp_real zeros[3] = {1, 1, 1}, want[3] = {0, 0, 0};
        assert_int_equal(sp_st_read(sp_st_find(a, "b.weight"), 0, 3, zeros), SP_OK);
        assert_reals(zeros, want, 3, 0, "b.weight");
        sp_st_close(a);
    }
}

/* A directory with model.safetensors opens it. */
static void test_directory_single_file(void **state)
{
    (void)state;
    char dir[4200];
    const shard_spec single = {"model.safetensors", "{" ENTRY("w", "F32", "[2]", "[0,8]") "}", 8};
    write_model_dir("single", NULL, &single, 1, dir, sizeof dir);
    sp_st_archive *a = open_ok(dir);
    assert_int_equal(sp_st_count(a), 1);
    assert_non_null(strstr(sp_st_at(a, 0)->file, "single/model.safetensors"));
    sp_st_close(a);
}

/* A sharded model whose index is `index` (SHARD1 and SHARD2 as in two_shards) is rejected. */
static void expect_bad_index(const char *dir_name, const char *index, sp_status code, const char *const *needles)
{
    char dir[4200];
    write_model_dir(dir_name, index, two_shards, 2, dir, sizeof dir);
    expect_open_error(dir, code, needles);
}

/* ---- malformed single files: each its own test ---- */

static void test_empty_file(void **state)
{
    (void)state;
    char path[4200];
    byte_buf empty = {0};
    write_bytes("empty.safetensors", &empty, path, sizeof path);
    expect_open_error(path, SP_ERR_INPUT, NEEDLES("empty file", "8-byte header length"));
}

static void test_short_file(void **state)
{
    (void)state;
    char path[4200];
    byte_buf b = {0};
    byte_buf_put(&b, "\x02\0\0\0\0", 5);
    write_bytes("short.safetensors", &b, path, sizeof path);
    expect_open_error(path, SP_ERR_INPUT, NEEDLES("file of 5 bytes", "8-byte header length"));
    byte_buf_free(&b);
}

static void test_header_past_end(void **state)
{
    (void)state;
    char path[4200];
    byte_buf b = {0};
    byte_buf_put_u64(&b, 1000);
    byte_buf_put(&b, "{}", 2);
    write_bytes("past_end.safetensors", &b, path, sizeof path);
    expect_open_error(path, SP_ERR_INPUT, NEEDLES("header length 1000", "past the end", "2 bytes follow"));
    byte_buf_free(&b);
}

static void test_header_length_absurd(void **state)
{
    (void)state;
    char path[4200];
    byte_buf b = {0};
    byte_buf_put_u64(&b, (uint64_t)1 << 63);
    byte_buf_put(&b, "{}", 2);
    write_bytes("absurd.safetensors", &b, path, sizeof path);
    expect_open_error(path, SP_ERR_INPUT, NEEDLES("header length 9223372036854775808", "100 MiB"));
    byte_buf_free(&b);
}

static void test_header_length_below_two(void **state)
{
    (void)state;
    expect_bad_file("{", 0, NEEDLES("header length 1", "below 2"));
}

static void test_header_not_json(void **state)
{
    (void)state;
    expect_bad_file("{\"w\": {\"dtype\": }}", 0, NEEDLES("header", "not valid JSON", "byte 24"));
}

static void test_header_not_object(void **state)
{
    (void)state;
    expect_bad_file("[1, 2]", 0, NEEDLES("header", "expected a JSON object, found an array"));
}

static void test_header_nul_padding(void **state)
{
    (void)state;
    char path[4200];
    byte_buf b = {0};
    byte_buf_put_u64(&b, 4);
    byte_buf_put(&b, "{}\0\0", 4);
    write_bytes("nul_pad.safetensors", &b, path, sizeof path);
    expect_open_error(path, SP_ERR_INPUT, NEEDLES("byte 10", "control character 0x00"));
    byte_buf_free(&b);
}

static void test_header_not_utf8(void **state)
{
    (void)state;
    expect_bad_file("{\"w\xff\":" "{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0,
                    NEEDLES("byte 11", "0xff", "UTF-8"));
}

static void test_entry_not_object(void **state)
{
    (void)state;
    expect_bad_file("{\"w\":[0,4]}", 0, NEEDLES("tensor 'w' is an array", "expected an object"));
}

static void test_missing_dtype(void **state)
{
    (void)state;
    expect_bad_file("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, NEEDLES("tensor 'w' has no dtype"));
}

static void test_dtype_not_string(void **state)
{
    (void)state;
    expect_bad_file("{\"w\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                    NEEDLES("tensor 'w'", "dtype is a number", "expected a string"));
}

static void test_unknown_dtype(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F31", "[1]", "[0,4]") "}", 4, NEEDLES("tensor 'w'", "unknown dtype \"F31\""));
}

static void test_missing_shape(void **state)
{
    (void)state;
    expect_bad_file("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, NEEDLES("tensor 'w' has no shape"));
}

static void test_shape_not_array(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F32", "\"1\"", "[0,4]") "}", 4, NEEDLES("tensor 'w'", "shape is a string"));
}

static void test_shape_not_integers(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F32", "[2,1.5]", "[0,12]") "}", 12,
                    NEEDLES("tensor 'w'", "shape[1] is 1.5", "expected an integer >= 0"));
}

static void test_negative_dim(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F32", "[-1]", "[0,4]") "}", 4, NEEDLES("tensor 'w'", "shape[0] is -1"));
}

static void test_rank_nine(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4,
                    NEEDLES("tensor 'w'", "9 dimensions", "at most 8"));
}

static void test_shape_overflows(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F32", "[1099511627776,1099511627776]", "[0,4]") "}", 4,
                    NEEDLES("tensor 'w'", "shape [1099511627776, 1099511627776] x F32", "overflows"));
}

static void test_sub_byte_not_whole_bytes(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F4", "[3]", "[0,2]") "}", 2, NEEDLES("tensor 'w'", "12 bits"));
}

static void test_missing_offsets(void **state)
{
    (void)state;
    expect_bad_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, NEEDLES("tensor 'w' has no data_offsets"));
}

static void test_offsets_not_pair(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F32", "[1]", "[0,4,4]") "}", 4,
                    NEEDLES("tensor 'w'", "data_offsets has 3 entries"));
}

static void test_offsets_not_integers(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F32", "[1]", "[0,\"4\"]") "}", 4,
                    NEEDLES("tensor 'w'", "data_offsets[1] is a string"));
}

static void test_member_twice(void **state)
{
    (void)state;
    expect_bad_file("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                    NEEDLES("tensor 'w'", "\"dtype\" appears twice"));
}

static void test_offsets_past_data(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F32", "[250]", "[0,1000]") "}", 8,
                    NEEDLES("tensor 'w'", "[0, 1000)", "past the data region of 8 bytes"));
}

static void test_offsets_begin_after_end(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F32", "[1]", "[8,4]") "}", 8, NEEDLES("tensor 'w'", "[8, 4)", "begin after"));
}

static void test_size_mismatch(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("h.0.attn.c_attn.weight", "F32", "[3,8]", "[0,92]") "}", 92,
                    NEEDLES("tensor 'h.0.attn.c_attn.weight': data_offsets [0, 92) hold 92 bytes but shape [3, 8] x "
                            "F32 needs 96"));
}

static void test_overlap(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("a", "F32", "[2]", "[0,8]") "," ENTRY("b", "F32", "[2]", "[4,12]") "}", 12,
                    NEEDLES("tensor 'b'", "[4, 12)", "overlaps tensor 'a'"));
}

static void test_hole(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("b", "F32", "[1]", "[8,12]") "," ENTRY("a", "F32", "[1]", "[0,4]") "}", 12,
                    NEEDLES("4 unused bytes", "[4, 8)", "between tensor 'a' and tensor 'b'"));
}

static void test_hole_before_first(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("a", "F32", "[1]", "[4,8]") "}", 8, NEEDLES("4 unused bytes", "before tensor 'a'"));
}

static void test_trailing_bytes(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("a", "F32", "[1]", "[0,4]") "}", 7,
                    NEEDLES("3 unused bytes", "[4, 7)", "after the last tensor 'a'"));
    expect_bad_file("{}", 2, NEEDLES("2 unused bytes", "names no tensor"));
}

static void test_duplicate_name(void **state)
{
    (void)state;
    expect_bad_file("{" ENTRY("w", "F32", "[1]", "[0,4]") "," ENTRY("w", "F32", "[1]", "[4,8]") "}", 8,
                    NEEDLES("header", "\"w\" appears twice"));
}

static void test_metadata_not_strings(void **state)
{
    (void)state;
    expect_bad_file("{\"__metadata__\":{\"format\":\"pt\",\"epochs\":3}}", 0,
                    NEEDLES("__metadata__ \"epochs\" is a number", "expected a string"));
    expect_bad_file("{\"__metadata__\":[]}", 0, NEEDLES("__metadata__ is an array"));
}

static void test_metadata_twice(void **state)
{
    (void)state;
    expect_bad_file("{\"__metadata__\":null,\"__metadata__\":{}}", 0, NEEDLES("header", "\"__metadata__\" appears twice"));
    expect_bad_file("{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0, NEEDLES("__metadata__: \"a\" appears twice"));
}

/* ---- paths that are not files, and bad sharded models ---- */

static void test_fifo(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "pipe.safetensors");
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(20); /* opening a FIFO without a writer must not block; if it does, SIGALRM ends the test */
    expect_open_error(path, SP_ERR_INPUT, NEEDLES("expected a regular file, found a FIFO"));
    char dir[4200], fifo[4400];
    write_model_dir("fifo_dir", NULL, NULL, 0, dir, sizeof dir);
    snprintf(fifo, sizeof fifo, "%s/model.safetensors", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_open_error(dir, SP_ERR_INPUT, NEEDLES("found a FIFO"));
    alarm(0);
}

static void test_directory_as_file(void **state)
{
    (void)state;
    char dir[4200], inner[4400];
    write_model_dir("dir_as_file", NULL, NULL, 0, dir, sizeof dir);
    snprintf(inner, sizeof inner, "%s/model.safetensors", dir);
    assert_int_equal(mkdir(inner, 0700), 0);
    expect_open_error(dir, SP_ERR_INPUT, NEEDLES("model.safetensors: expected a regular file, found a directory"));
}

static void test_missing_path(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "no-such.safetensors");
    expect_open_error(path, SP_ERR_IO, NEEDLES("cannot open"));
}

static void test_directory_without_model(void **state)
{
    (void)state;
    char dir[4200];
    write_model_dir("nothing", NULL, NULL, 0, dir, sizeof dir);
    expect_open_error(dir, SP_ERR_INPUT, NEEDLES("neither model.safetensors nor model.safetensors.index.json"));
}

static void test_index_missing_shard(void **state)
{
    (void)state;
    expect_bad_index("missing_shard",
                     "{\"weight_map\":{\"a.weight\":\"" SHARD1 "\",\"b.weight\":\"model-00003.safetensors\","
                     "\"c.bias\":\"" SHARD1 "\"}}",
                     SP_ERR_INPUT, NEEDLES("model.safetensors.index.json", "model-00003.safetensors", "cannot be opened"));
}

static void test_index_path_escape(void **state)
{
    (void)state;
    expect_bad_index("escape", "{\"weight_map\":{\"a.weight\":\"../" SHARD1 "\"}}", SP_ERR_INPUT,
                     NEEDLES("tensor 'a.weight'", "\"../" SHARD1 "\"", "without '/'"));
    expect_bad_index("escape_dots", "{\"weight_map\":{\"a.weight\":\"..\"}}", SP_ERR_INPUT, NEEDLES("\"..\""));
}

static void test_index_tensor_absent(void **state)
{
    (void)state;
    expect_bad_index("absent",
                     "{\"weight_map\":{\"a.weight\":\"" SHARD1 "\",\"b.weight\":\"" SHARD2 "\",\"c.bias\":\"" SHARD1
                     "\",\"d.weight\":\"" SHARD2 "\"}}",
                     SP_ERR_INPUT, NEEDLES("tensor 'd.weight'", SHARD2, "does not hold it"));
}

static void test_index_misses_tensor(void **state)
{
    (void)state;
    expect_bad_index("unnamed", "{\"weight_map\":{\"a.weight\":\"" SHARD1 "\",\"b.weight\":\"" SHARD2 "\"}}",
                     SP_ERR_INPUT, NEEDLES(SHARD1 " holds tensor 'c.bias'", "weight_map does not name"));
}

static void test_index_wrong_shard(void **state)
{
    (void)state;
    expect_bad_index("wrong_shard",
                     "{\"weight_map\":{\"a.weight\":\"" SHARD1 "\",\"b.weight\":\"" SHARD1 "\",\"c.bias\":\"" SHARD2
                     "\"}}",
                     SP_ERR_INPUT, NEEDLES("puts tensor 'b.weight' in", SHARD1, "but it is in", SHARD2));
}

static void test_tensor_in_two_shards(void **state)
{
    (void)state;
    char dir[4200];
    const shard_spec shards[2] = {two_shards[0],
                                  {SHARD2, "{" ENTRY("a.weight", "F32", "[2]", "[0,8]") "}", 8}};
    write_model_dir("two_shards", "{\"weight_map\":{\"a.weight\":\"" SHARD1 "\",\"c.bias\":\"" SHARD1 "\"}}", shards, 2,
                    dir, sizeof dir);
    /* the index does not name SHARD2, so it is never opened: no error */
    sp_st_close(open_ok(dir));
    write_model_dir("two_shards", "{\"weight_map\":{\"a.weight\":\"" SHARD1 "\",\"c.bias\":\"" SHARD2 "\"}}", shards, 2,
                    dir, sizeof dir);
    expect_open_error(dir, SP_ERR_INPUT, NEEDLES("tensor 'a.weight' is also in", SHARD1, SHARD2));
}

static void test_index_bad_weight_map(void **state)
{
    (void)state;
    expect_bad_index("no_map", "{\"metadata\":{}}", SP_ERR_INPUT, NEEDLES("no weight_map"));
    expect_bad_index("map_array", "{\"weight_map\":[]}", SP_ERR_INPUT, NEEDLES("weight_map is an array"));
    expect_bad_index("map_empty", "{\"weight_map\":{}}", SP_ERR_INPUT, NEEDLES("weight_map names no tensor"));
    expect_bad_index("map_number", "{\"weight_map\":{\"a.weight\":1}}", SP_ERR_INPUT,
                     NEEDLES("tensor 'a.weight' maps to a number"));
    expect_bad_index("map_twice",
                     "{\"weight_map\":{\"a.weight\":\"" SHARD1 "\",\"a.weight\":\"" SHARD1 "\"}}", SP_ERR_INPUT,
                     NEEDLES("weight_map: \"a.weight\" appears twice"));
    expect_bad_index("index_not_json", "{\"weight_map\":", SP_ERR_INPUT, NEEDLES("not valid JSON"));
}

/* Open descriptors and mappings of the scratch files are all released, after success and failure. */
static void test_releases_everything(void **state)
{
    (void)state;
    char good[4200], bad[4200], scratch[4200];
    write_model_dir("release_good",
                    "{\"weight_map\":{\"a.weight\":\"" SHARD1 "\",\"b.weight\":\"" SHARD2 "\",\"c.bias\":\"" SHARD1
                    "\"}}", two_shards, 2, good, sizeof good);
    write_model_dir("release_bad", "{\"weight_map\":{\"a.weight\":\"" SHARD1 "\",\"b.weight\":\"" SHARD2 "\"}}",
                    two_shards, 2, bad, sizeof bad);
    scratch_path(scratch, sizeof scratch, "");
    int fds = count_open_fds(), maps = count_mappings_of(scratch);
    assert_true(fds > 0);
    for (int i = 0; i < 3; i++) {
        sp_st_archive *a = open_ok(good);
        assert_true(count_mappings_of(scratch) >= 2);
        sp_st_close(a);
        expect_open_error(bad, SP_ERR_INPUT, NEEDLES("does not name"));
    }
    assert_int_equal(count_open_fds(), fds);
    assert_int_equal(count_mappings_of(scratch), maps);
}

/* Resident KiB of this process's mappings of path (/proc/self/smaps), -1 when it cannot be read. */
static long mapped_rss_kib(const char *path)
{
    char *smaps = scratch_read_file("/proc/self/smaps", NULL);
    if (!smaps)
        return -1;
    long total = 0;
    for (const char *p = smaps; (p = strstr(p, path)) != NULL; p++) {
        const char *rss = strstr(p, "\nRss:");
        long kib = 0;
        if (rss && sscanf(rss, "\nRss: %ld kB", &kib) == 1)
            total += kib;
    }
    free(smaps);
    return total;
}

/* sp_st_release drops a read tensor's pages from resident memory (its neighbour's shared page
 * too), and both stay readable: MADV_DONTNEED on a private read-only file mapping maps the file's
 * pages again on the next access. */
static void test_release_keeps_data(void **state)
{
    (void)state;
    enum { BIG = 65536, SMALL = 3 }; /* 256 KiB of F32, then 3 more values sharing its last page */
    byte_buf data = {0};
    for (int i = 0; i < BIG + SMALL; i++)
        byte_buf_put_f32(&data, 0.5f * (float)i - 7.0f);
    byte_buf file = st_bytes("{" ENTRY("big", "F32", "[256,256]", "[0,262144]") ","
                             ENTRY("tail", "F32", "[3]", "[262144,262156]") "}", data.data, data.len);
    char path[4200];
    write_bytes("release.safetensors", &file, path, sizeof path);
    sp_st_archive *a = open_ok(path);
    const sp_st_tensor *big = sp_st_find(a, "big"), *tail = sp_st_find(a, "tail");
    sp_real *got = malloc((BIG + SMALL) * sizeof *got), *want = malloc((BIG + SMALL) * sizeof *want);
    for (int i = 0; i < BIG + SMALL; i++)
        want[i] = 0.5f * (float)i - 7.0f;
    assert_int_equal(sp_st_read(big, 0, BIG, got), SP_OK);
    long read_kib = mapped_rss_kib(path);
    sp_st_release(big);
    long released_kib = mapped_rss_kib(path);
    if (read_kib >= 0) {
        assert_true(read_kib >= 256);
        assert_true(released_kib <= 4); /* at most a page the kernel keeps mapped */
    }
    assert_int_equal(sp_st_read(big, 0, BIG, got), SP_OK);
    assert_int_equal(sp_st_read(tail, 0, SMALL, got + BIG), SP_OK);
    assert_reals(got, want, BIG + SMALL, 0, "after release");
    if (read_kib >= 0)
        assert_true(mapped_rss_kib(path) >= 256); /* mapped again */
    sp_st_close(a);
    free(got);
    free(want);
    byte_buf_free(&file);
    byte_buf_free(&data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_floats),
        cmocka_unit_test(test_read_rows),
        cmocka_unit_test(test_find_and_order),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_other_dtypes),
        cmocka_unit_test(test_reference_file),
        cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_directory_single_file),
        cmocka_unit_test(test_empty_file),
        cmocka_unit_test(test_short_file),
        cmocka_unit_test(test_header_past_end),
        cmocka_unit_test(test_header_length_absurd),
        cmocka_unit_test(test_header_length_below_two),
        cmocka_unit_test(test_header_not_json),
        cmocka_unit_test(test_header_not_object),
        cmocka_unit_test(test_header_nul_padding),
        cmocka_unit_test(test_header_not_utf8),
        cmocka_unit_test(test_entry_not_object),
        cmocka_unit_test(test_missing_dtype),
        cmocka_unit_test(test_dtype_not_string),
        cmocka_unit_test(test_unknown_dtype),
        cmocka_unit_test(test_missing_shape),
        cmocka_unit_test(test_shape_not_array),
        cmocka_unit_test(test_shape_not_integers),
        cmocka_unit_test(test_negative_dim),
        cmocka_unit_test(test_rank_nine),
        cmocka_unit_test(test_shape_overflows),
        cmocka_unit_test(test_sub_byte_not_whole_bytes),
        cmocka_unit_test(test_missing_offsets),
        cmocka_unit_test(test_offsets_not_pair),
        cmocka_unit_test(test_offsets_not_integers),
        cmocka_unit_test(test_member_twice),
        cmocka_unit_test(test_offsets_past_data),
        cmocka_unit_test(test_offsets_begin_after_end),
        cmocka_unit_test(test_size_mismatch),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_hole),
        cmocka_unit_test(test_hole_before_first),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_duplicate_name),
        cmocka_unit_test(test_metadata_not_strings),
        cmocka_unit_test(test_metadata_twice),
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_directory_as_file),
        cmocka_unit_test(test_missing_path),
        cmocka_unit_test(test_directory_without_model),
        cmocka_unit_test(test_index_missing_shard),
        cmocka_unit_test(test_index_path_escape),
        cmocka_unit_test(test_index_tensor_absent),
        cmocka_unit_test(test_index_misses_tensor),
        cmocka_unit_test(test_index_wrong_shard),
        cmocka_unit_test(test_tensor_in_two_shards),
        cmocka_unit_test(test_index_bad_weight_map),
        cmocka_unit_test(test_releases_everything),
        cmocka_unit_test(test_release_keeps_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

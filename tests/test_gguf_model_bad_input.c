/* GGUF files that are valid GGUF but not models spanprobe can read, through io/model_source.h and
 * `import gguf`: a missing required key, an unsupported architecture or RoPE scaling, an extra,
 * missing or misshapen tensor, a block count the tensors do not back, NaN weights, and a truncated
 * file or a quantized row that is not whole blocks (the reader's checks, on the model path). Each is
 * one line naming the file with exit code 3 (4 for NaN), nothing written, and no allocation sized
 * by a lying header (make test-asan would abort on one). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/model_source.h"
#include "support/cli_expect.h"
#include "support/gguf_build.h"
#include "support/scratch.h"

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define MAX_KVS 16
#define MAX_TENSORS 16

/* A tiny llama (d_model 4, vocab 8, one block, tied head) and the changes a test makes to it. */
typedef struct {
    const char *key;
    char kind;        /* 'u' UINT32, 'U' UINT64, 'f' FLOAT32, 's' STRING, 0: removed */
    uint64_t u;
    float f;
    const char *s;
} kv;

typedef struct {
    kv kvs[MAX_KVS];
    int n_kvs;
    gb_info tensors[MAX_TENSORS];
    int n_tensors;
    int nan_at[2]; /* > 0: this float of the data is NaN */
} model_spec;

static void base_model(model_spec *m)
{
    memset(m, 0, sizeof *m);
    const kv kvs[] = {{"general.architecture", 's', 0, 0, "llama"}, {"llama.embedding_length", 'u', 4, 0, NULL},
                      {"llama.block_count", 'u', 1, 0, NULL},        {"llama.feed_forward_length", 'u', 4, 0, NULL},
                      {"llama.attention.head_count", 'u', 1, 0, NULL}, {"llama.context_length", 'u', 8, 0, NULL},
                      {"llama.attention.layer_norm_rms_epsilon", 'f', 0, 1e-5f, NULL}};
    memcpy(m->kvs, kvs, sizeof kvs);
    m->n_kvs = (int)(sizeof kvs / sizeof *kvs);
    const char *const matrices[] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
                                    "blk.0.attn_output.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
                                    "blk.0.ffn_down.weight"};
    const char *const vectors[] = {"output_norm.weight", "blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"};
    m->tensors[m->n_tensors++] = (gb_info){"token_embd.weight", SP_GGML_F32, 2, {4, 8}, 0};
    for (size_t i = 0; i < sizeof matrices / sizeof *matrices; i++)
        m->tensors[m->n_tensors++] = (gb_info){matrices[i], SP_GGML_F32, 2, {4, 4}, 0};
    for (size_t i = 0; i < sizeof vectors / sizeof *vectors; i++)
        m->tensors[m->n_tensors++] = (gb_info){vectors[i], SP_GGML_F32, 1, {4}, 0};
}

static kv *find_kv(model_spec *m, const char *key)
{
    for (int i = 0; i < m->n_kvs; i++)
        if (strcmp(m->kvs[i].key, key) == 0)
            return &m->kvs[i];
    assert_true(m->n_kvs < MAX_KVS);
    m->kvs[m->n_kvs].key = key;
    return &m->kvs[m->n_kvs++];
}

static gb_info *find_tensor(model_spec *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    fail_msg("no tensor %s in the base model", name);
    return NULL;
}

static void remove_tensor(model_spec *m, const char *name)
{
    gb_info *t = find_tensor(m, name);
    *t = m->tensors[--m->n_tensors];
}

/* Writes m as the scratch file `name`; *file (may be NULL) gets its bytes (byte_buf_free). */
static void write_model(model_spec *m, const char *name, char *path, size_t len, byte_buf *file)
{
    byte_buf kvs = {0};
    uint64_t n_kvs = 0;
    for (int i = 0; i < m->n_kvs; i++) {
        const kv *k = &m->kvs[i];
        if (!k->kind)
            continue;
        n_kvs++;
        if (k->kind == 's') {
            gb_kv_string(&kvs, k->key, k->s);
            continue;
        }
        gb_string(&kvs, k->key);
        byte_buf_put_u32(&kvs, k->kind == 'u' ? 4 : k->kind == 'U' ? 10 : 6);
        if (k->kind == 'u')
            byte_buf_put_u32(&kvs, (uint32_t)k->u);
        else if (k->kind == 'U')
            byte_buf_put_u64(&kvs, k->u);
        else
            byte_buf_put_f32(&kvs, k->f);
    }
    size_t offset = 0;
    for (int i = 0; i < m->n_tensors; i++) { /* F32 tensors, each at a 32-byte boundary */
        gb_info *t = &m->tensors[i];
        size_t numel = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            numel *= t->dims[d];
        t->offset = offset;
        offset += (numel * 4 + 31) / 32 * 32;
    }
    float *data = calloc(offset / 4 + 1, sizeof *data);
    assert_non_null(data);
    for (size_t i = 0; i < offset / 4; i++)
        data[i] = 0.05f * (float)((int)(i % 11) - 5) + 0.5f;
    for (int i = 0; i < 2; i++)
        if (m->nan_at[i] > 0)
            data[m->nan_at[i]] = NAN;
    byte_buf b = gb_file(&kvs, n_kvs, m->tensors, m->n_tensors, 32, data, offset, NULL);
    free(data);
    byte_buf_free(&kvs);
    gb_write(name, &b, path, len);
    if (file)
        *file = b;
    else
        byte_buf_free(&b);
}

/* Loading path fails with code and one line naming it and holding every needle; so does `import
 * gguf`, with the exit code, and it writes nothing. */
static void expect_rejected(const char *path, sp_status code, const char *const *needles)
{
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    sp_error_clear();
    assert_int_equal(sp_model_source_load(path, sp_backend_cpu(), &m, &meta), code);
    assert_null(m);
    const char *msg = sp_error_message();
    assert_null(strchr(msg, '\n'));
    assert_non_null(strstr(msg, path));
    for (const char *const *n = needles; *n; n++)
        if (!strstr(msg, *n))
            fail_msg("expected '%s' in: %s", *n, msg);
    sp_error_clear();
    char out[512];
    scratch_path(out, sizeof out, "imported.h5");
    const char *const args[] = {"import", "gguf", path, out, NULL};
    if (getenv("SPANPROBE_BIN")) {
        cli_expect_error(code, args, needles);
        assert_int_equal(scratch_count_entries("imported.h5*"), 0);
    }
}

static void expect_spec_rejected(model_spec *m, sp_status code, const char *const *needles)
{
    char path[512];
    write_model(m, "bad.gguf", path, sizeof path, NULL);
    expect_rejected(path, code, needles);
}

static void test_base_loads(void **state)
{
    (void)state;
    model_spec m;
    base_model(&m);
    char path[512];
    write_model(&m, "base.gguf", path, sizeof path, NULL);
    sp_model *model = NULL;
    sp_ckpt_meta meta;
    sp_error_clear();
    if (sp_model_source_load(path, sp_backend_cpu(), &model, &meta) != SP_OK)
        fail_msg("%s", sp_error_message());
    assert_int_equal(meta.cfg.vocab_size, 8);
    assert_true(meta.cfg.tie_embeddings);
    sp_model_free(model);
    sp_ckpt_meta_free(&meta);
}

static void test_missing_keys(void **state)
{
    (void)state;
    const char *const keys[] = {"llama.block_count", "llama.embedding_length", "llama.context_length",
                                "llama.attention.layer_norm_rms_epsilon", "general.architecture"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        model_spec m;
        base_model(&m);
        find_kv(&m, keys[i])->kind = 0;
        expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("required key", keys[i], "missing"));
    }
}

static void test_unsupported_arch(void **state)
{
    (void)state;
    model_spec m;
    base_model(&m);
    find_kv(&m, "general.architecture")->s = "mamba";
    expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("general.architecture \"mamba\" is not supported", "qwen2"));
}

static void test_unsupported_options(void **state)
{
    (void)state;
    model_spec m;
    base_model(&m);
    *find_kv(&m, "llama.rope.scaling.type") = (kv){"llama.rope.scaling.type", 's', 0, 0, "yarn"};
    expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("llama.rope.scaling.type", "yarn", "not supported"));
    base_model(&m);
    *find_kv(&m, "llama.attention.sliding_window") = (kv){"llama.attention.sliding_window", 'u', 4, 0, NULL};
    expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("llama.attention.sliding_window", "not supported"));
    base_model(&m);
    *find_kv(&m, "llama.vocab_size") = (kv){"llama.vocab_size", 'u', 9, 0, NULL};
    expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("vocab_size = 9", "token_embd.weight has 8 rows"));
}

static void test_extra_tensor(void **state)
{
    (void)state;
    model_spec m;
    base_model(&m);
    m.tensors[m.n_tensors++] = (gb_info){"rope_freqs.weight", SP_GGML_F32, 1, {2}, 0};
    expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("tensor 'rope_freqs.weight' is not a parameter of llama"));
}

static void test_missing_tensor(void **state)
{
    (void)state;
    model_spec m;
    base_model(&m);
    remove_tensor(&m, "blk.0.ffn_up.weight");
    expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("tensor 'blk.0.ffn_up.weight' is missing", "blocks/0/ffn/w3"));
}

static void test_wrong_shape(void **state)
{
    (void)state;
    model_spec m;
    base_model(&m);
    find_tensor(&m, "blk.0.ffn_up.weight")->dims[1] = 6;
    expect_spec_rejected(&m, SP_ERR_INPUT,
                         NEEDLES("tensor 'blk.0.ffn_up.weight' is [6, 4] but the GGUF metadata implies [4, 4]"));
    base_model(&m);
    find_kv(&m, "llama.embedding_length")->u = 8;
    expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("but the GGUF metadata implies"));
}

/* Sizes no tensor backs are refused before the parameter layout or the model is sized by them. */
static void test_lying_sizes(void **state)
{
    (void)state;
    model_spec m;
    base_model(&m);
    find_kv(&m, "llama.block_count")->u = 4000;
    expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("llama.block_count = 4000 but the file holds 11 tensors"));
    base_model(&m);
    *find_kv(&m, "llama.block_count") = (kv){"llama.block_count", 'U', (uint64_t)1 << 40, 0, NULL};
    expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("llama.block_count = 1099511627776 is out of range"));
    base_model(&m);
    find_kv(&m, "llama.feed_forward_length")->u = 2000000000;
    expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("d_ff"));
}

static void test_nan_weight(void **state)
{
    (void)state;
    model_spec m;
    base_model(&m);
    m.nan_at[0] = 3; /* in token_embd, the first tensor */
    expect_spec_rejected(&m, SP_ERR_NUMERIC, NEEDLES("token_embd.weight", "1 NaN/Inf values"));
    /* two bad tensors, filled in parallel and the larger first: the error names the first parameter,
     * blk.0.attn_norm (floats 152..155) before blk.0.ffn_down (128..143) */
    m.nan_at[0] = 130;
    m.nan_at[1] = 153;
    expect_spec_rejected(&m, SP_ERR_NUMERIC, NEEDLES("blk.0.attn_norm.weight", "1 NaN/Inf values"));
}

/* The reader's own checks on the model path: a truncated file, a quantized row of partial blocks. */
static void test_reader_errors(void **state)
{
    (void)state;
    model_spec m;
    base_model(&m);
    char path[512];
    byte_buf file;
    write_model(&m, "full.gguf", path, sizeof path, &file);
    file.len -= 40;
    gb_write("bad.gguf", &file, path, sizeof path);
    byte_buf_free(&file);
    expect_rejected(path, SP_ERR_INPUT, NEEDLES("bad.gguf"));
    base_model(&m);
    find_tensor(&m, "token_embd.weight")->type = SP_GGML_Q8_0;
    expect_spec_rejected(&m, SP_ERR_INPUT, NEEDLES("token_embd.weight", "Q8_0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_loads),         cmocka_unit_test(test_missing_keys),
        cmocka_unit_test(test_unsupported_arch),   cmocka_unit_test(test_unsupported_options),
        cmocka_unit_test(test_extra_tensor),       cmocka_unit_test(test_missing_tensor),
        cmocka_unit_test(test_wrong_shape),        cmocka_unit_test(test_lying_sizes),
        cmocka_unit_test(test_nan_weight),         cmocka_unit_test(test_reader_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

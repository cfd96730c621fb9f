/* Tokenizers from GGUF metadata against transformers' own GGUF tokenizer: every file of
 * fixtures/gguf_tokenizers (written by tools/gguf_tokenizer_fixtures/generate.py as llama.cpp's
 * converter writes them, with the ids of AutoTokenizer.from_pretrained(dir, gguf_file=...)) must
 * give transformers' ids on the Unicode stress texts (with and without BOS), on Moby Dick (count,
 * sha256, the first 2000 ids) and its decoded text; its texts reload as a checkpoint would; then
 * every kind of bad metadata, one test each (SP_ERR_INPUT, one line naming the file and the key). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "io/gguf_tokenizer.h"
#include "io/hf_tokenizer.h"
#include "support/gguf_build.h"
#include "support/json_file.h"
#include "support/scratch.h"
#include "support/tok_expect.h"

#define FIXTURES "fixtures/gguf_tokenizers/"

static cJSON *expected_doc;

static const cJSON *expected(const char *name, const char *a, const char *b)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(expected_doc, "fixtures"), name);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(f, a);
    if (b)
        v = cJSON_GetObjectItemCaseSensitive(v, b);
    if (!v)
        fail_msg("expected.json lacks fixtures.%s.%s%s%s", name, a, b ? "." : "", b ? b : "");
    return v;
}

static sp_status load(const char *path, int vocab_size, sp_tokenizer *t)
{
    sp_gguf *g = gb_open_ok(path);
    sp_error_clear();
    sp_status st = sp_tokenizer_load_gguf(g, path, vocab_size, t);
    sp_gguf_close(g);
    return st;
}

static void load_fixture(const char *name, int vocab_size, sp_tokenizer *t)
{
    char path[512];
    snprintf(path, sizeof path, FIXTURES "%s.gguf", name);
    if (load(path, vocab_size, t) != SP_OK)
        fail_msg("loading %s: %s", path, sp_error_message());
}

static int expected_id(const char *name, const char *key)
{
    const cJSON *v = expected(name, key, NULL);
    return cJSON_IsNumber(v) ? v->valueint : -1;
}

/* ---- per fixture ---- */

static void test_ids(void **state)
{
    const char *name = *state;
    sp_tokenizer t;
    load_fixture(name, 0, &t);
    assert_int_equal(t.kind, SP_TOK_HF);
    assert_int_equal(t.bos_id, expected_id(name, "bos"));
    assert_int_equal(t.eos_id, expected_id(name, "eos"));
    tok_check_text(&t, expected(name, "stress", NULL), "stress.txt", name);
    tok_check_text(&t, expected(name, "specials", NULL), "stress_specials.txt", name);
    sp_tokenizer_free(&t);
}

/* decode(encode(stress.txt)) as transformers decodes it, and the same after BOS. */
static void test_decode(void **state)
{
    const char *name = *state;
    sp_tokenizer t;
    load_fixture(name, 0, &t);
    tok_check_decode(&t, expected(name, "stress", "decoded")->valuestring);
    sp_tokenizer_free(&t);
}

static void test_mobydick(void **state)
{
    const char *name = *state;
    char path[4200];
    tok_need_mobydick(path, sizeof path);
    sp_tokenizer t;
    load_fixture(name, 0, &t);
    tok_check_mobydick(&t, path, expected(name, "mobydick", NULL), name);
    sp_tokenizer_free(&t);
}

/* The texts a checkpoint stores reload into the same tokenizer (the `import gguf` route). */
static void test_sources_reload(void **state)
{
    const char *name = *state;
    sp_tokenizer t, again;
    load_fixture(name, 0, &t);
    const char *json, *config;
    size_t json_len, config_len;
    sp_tokenizer_hf_sources(&t, &json, &json_len, &config, &config_len);
    assert_non_null(config);
    sp_error_clear();
    if (sp_tokenizer_load_hf_text("tokenizer.json", json, json_len, "tokenizer_config.json", config, config_len,
                                  t.vocab_size, &again) != SP_OK)
        fail_msg("%s", sp_error_message());
    assert_int_equal(again.bos_id, t.bos_id);
    assert_int_equal(again.eos_id, t.eos_id);
    tok_check_text(&again, expected(name, "specials", NULL), "stress_specials.txt", name);
    sp_tokenizer_free(&again);
    sp_tokenizer_free(&t);
}

/* transformers' GPT2Tokenizer adds <|endoftext|> after the vocabulary when the file lacks it
 * (llama3.gguf: id 1506); with the model's vocab_size 1506 there is no row for it, and it is left
 * out: the text is then plain text. */
static void test_default_special_past_vocab(void **state)
{
    (void)state;
    static const char text[] = "<|endoftext|>";
    sp_tokenizer t;
    int32_t *ids;
    size_t n;
    load_fixture("llama3", 0, &t);
    assert_int_equal(t.vocab_size, 1507);
    tok_encode(&t, text, strlen(text), 0, &ids, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 1506);
    free(ids);
    sp_tokenizer_free(&t);
    load_fixture("llama3", 1506, &t);
    tok_encode(&t, text, strlen(text), 0, &ids, &n);
    assert_true(n > 1);
    for (size_t i = 0; i < n; i++)
        assert_true(ids[i] < 1506);
    free(ids);
    sp_tokenizer_free(&t);
}

/* ---- bad metadata: a tiny valid sentencepiece vocabulary, one key changed or removed ---- */

typedef enum { KV_NONE, KV_STRING, KV_STRINGS, KV_I32S, KV_F32S, KV_U32, KV_BOOL } kv_kind;

typedef struct {
    const char *key;
    kv_kind kind;
    const void *value; /* KV_STRING: the string; arrays: the elements */
    size_t n;          /* arrays: the count; KV_U32 / KV_BOOL: the value */
} kv;

static const char *const tokens[] = {"<unk>", "<s>", "</s>", "a", "b", "ab", "\xE2\x96\x81", "\xE2\x96\x81" "ab"};
static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1};
static const float scores[] = {0, 0, 0, -1, -2, -3, -4, -5};
static const char *const merges[] = {"a b", "\xE2\x96\x81 ab"};

static const kv base[] = {
    {"general.architecture", KV_STRING, "llama", 0},
    {"tokenizer.ggml.model", KV_STRING, "llama", 0},
    {"tokenizer.ggml.tokens", KV_STRINGS, tokens, 8},
    {"tokenizer.ggml.token_type", KV_I32S, types, 8},
    {"tokenizer.ggml.scores", KV_F32S, scores, 8},
    {"tokenizer.ggml.merges", KV_STRINGS, merges, 2},
    {"tokenizer.ggml.bos_token_id", KV_U32, NULL, 1},
    {"tokenizer.ggml.eos_token_id", KV_U32, NULL, 2},
};

typedef struct {
    kv edit;          /* replaces base's entry of that key (kind KV_NONE: removes it), or is added */
    int vocab_size;
    const char *needles[3];
} bad_case;

static void put_kv(byte_buf *b, const kv *e)
{
    switch (e->kind) {
    case KV_STRING: gb_kv_string(b, e->key, e->value); break;
    case KV_STRINGS: gb_kv_strings(b, e->key, e->value, e->n); break;
    case KV_I32S: gb_kv_i32s(b, e->key, e->value, e->n); break;
    case KV_F32S: gb_kv_f32s(b, e->key, e->value, e->n); break;
    case KV_U32: gb_kv_u32(b, e->key, (uint32_t)e->n); break;
    case KV_BOOL: gb_kv_bool(b, e->key, (int)e->n); break;
    case KV_NONE: break;
    }
}

/* base with edit applied, written as a scratch file; *path gets its path. */
static void write_edited(const kv *edit, char *path, size_t len)
{
    byte_buf kvs = {0};
    uint64_t n = 0;
    int replaced = 0;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
        const kv *e = edit && strcmp(edit->key, base[i].key) == 0 ? edit : &base[i];
        replaced |= e == edit;
        put_kv(&kvs, e);
        n += e->kind != KV_NONE;
    }
    if (edit && !replaced) {
        put_kv(&kvs, edit);
        n++;
    }
    byte_buf file = gb_file(&kvs, n, NULL, 0, 32, NULL, 0, NULL);
    gb_write("tok.gguf", &file, path, len);
    byte_buf_free(&file);
    byte_buf_free(&kvs);
}

static void test_tiny_valid(void **state)
{
    (void)state;
    char path[4200];
    for (int with_merges = 0; with_merges < 2; with_merges++) {
        write_edited(with_merges ? NULL : &(kv){"tokenizer.ggml.merges", KV_NONE, NULL, 0}, path, sizeof path);
        sp_tokenizer t;
        if (load(path, 8, &t) != SP_OK)
            fail_msg("%s", sp_error_message());
        int32_t *ids;
        size_t n;
        tok_encode(&t, "ab ab", 5, 1, &ids, &n); /* BOS, ▁ab, ▁ab; derived: a b (score -3), ▁ ab (-5) */
        assert_int_equal(n, 3);
        assert_int_equal(ids[0], 1);
        assert_int_equal(ids[1], 7);
        assert_int_equal(ids[2], 7);
        free(ids);
        sp_tokenizer_free(&t);
    }
}

static void test_bad(void **state)
{
    const bad_case *c = *state;
    char path[4200];
    write_edited(&c->edit, path, sizeof path);
    sp_tokenizer t;
    sp_status st = load(path, c->vocab_size, &t);
    if (getenv("SP_TEST_VERBOSE"))
        printf("  %s\n", sp_error_message());
    const char *needles[5] = {path, c->needles[0], c->needles[1], c->needles[2], NULL};
    gb_expect_error(st, needles);
}

static const char *const one_space_merge[] = {"a b", "x ab"};
static const char *const two_space_merge[] = {"a b", "a  b"};
static const char *const repeated[] = {"<unk>", "<s>", "</s>", "a", "b", "ab", "\xE2\x96\x81", "a"};

static const bad_case no_tokens = {{"tokenizer.ggml.tokens", KV_NONE, NULL, 0}, 8, {"tokenizer.ggml.tokens"}};
static const bad_case short_types = {{"tokenizer.ggml.token_type", KV_I32S, types, 7}, 8,
                                     {"tokenizer.ggml.token_type has 7 entries for 8 tokens"}};
static const bad_case bad_type = {{"tokenizer.ggml.token_type", KV_I32S, (const int32_t[]){2, 3, 3, 1, 1, 1, 9, 1}, 8},
                                  8, {"tokenizer.ggml.token_type[6] is 9"}};
static const bad_case unknown_merge = {{"tokenizer.ggml.merges", KV_STRINGS, one_space_merge, 2}, 8,
                                       {"tokenizer.ggml.merges[1] 'x ab': its left part is not in tokenizer.ggml.tokens"}};
static const bad_case malformed_merge = {{"tokenizer.ggml.merges", KV_STRINGS, two_space_merge, 2}, 8,
                                         {"tokenizer.ggml.merges[1]", "expected two tokens and one space"}};
static const bad_case unknown_model = {{"tokenizer.ggml.model", KV_STRING, "bert", 0}, 8,
                                       {"tokenizer.ggml.model 'bert' is not supported"}};
static const bad_case llama_with_pre = {{"tokenizer.ggml.pre", KV_STRING, "llama-bpe", 0}, 8,
                                        {"tokenizer.ggml.pre 'llama-bpe' is not supported"}};
static const bad_case bos_out_of_range = {{"tokenizer.ggml.bos_token_id", KV_U32, NULL, 8}, 8,
                                          {"tokenizer.ggml.bos_token_id 8 is not below the 8 tokens"}};
static const bad_case above_vocab_size = {{"general.architecture", KV_STRING, "llama", 0}, 6,
                                          {"tokenizer.ggml.tokens has 8 entries, more than the model's vocab_size 6"}};
static const bad_case repeated_token = {{"tokenizer.ggml.tokens", KV_STRINGS, repeated, 8}, 8,
                                        {"tokenizer.ggml.tokens[7] 'a' repeats tokens[3]"}};
static const bad_case short_scores = {{"tokenizer.ggml.scores", KV_F32S, scores, 5}, 8,
                                      {"tokenizer.ggml.scores has 5 entries for 8 tokens"}};
static const bad_case no_bos_added = {{"tokenizer.ggml.bos_token_id", KV_NONE, NULL, 0}, 8,
                                      {"tokenizer.ggml.add_bos_token is true by default but there is no "
                                       "tokenizer.ggml.bos_token_id"}};
static const bad_case phi3 = {{"general.architecture", KV_STRING, "phi3", 0}, 8, {"general.architecture 'phi3'"}};

/* gpt2 models: the same tokens, another model and pre-tokenizer */
static void test_bad_gpt2(void **state)
{
    (void)state;
    static const struct {
        const char *pre;
        int drop_merges;
        const char *needle;
    } cases[] = {
        {"falcon", 0, "tokenizer.ggml.pre 'falcon' is not supported"},
        {"tekken", 0, "tokenizer.ggml.pre 'tekken' is not supported"},
        {"gpt-2", 1, "tokenizer.ggml.merges is missing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        byte_buf kvs = {0};
        gb_kv_string(&kvs, "tokenizer.ggml.model", "gpt2");
        gb_kv_string(&kvs, "tokenizer.ggml.pre", cases[i].pre);
        gb_kv_strings(&kvs, "tokenizer.ggml.tokens", tokens, 6);
        if (!cases[i].drop_merges)
            gb_kv_strings(&kvs, "tokenizer.ggml.merges", merges, 1);
        byte_buf file = gb_file(&kvs, cases[i].drop_merges ? 3 : 4, NULL, 0, 32, NULL, 0, NULL);
        char path[4200];
        gb_write("gpt2.gguf", &file, path, sizeof path);
        sp_tokenizer t;
        gb_expect_error(load(path, 0, &t), (const char *const[]){path, cases[i].needle, NULL});
        byte_buf_free(&file);
        byte_buf_free(&kvs);
    }
}

static int setup(void **state)
{
    (void)state;
    expected_doc = json_file_read(FIXTURES "expected.json");
    return expected_doc ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cJSON_Delete(expected_doc);
    return 0;
}

#define FIXTURE_TESTS(name)                                                                                 \
    cmocka_unit_test_prestate(test_ids, (void *)name), cmocka_unit_test_prestate(test_decode, (void *)name), \
        cmocka_unit_test_prestate(test_mobydick, (void *)name),                                             \
        cmocka_unit_test_prestate(test_sources_reload, (void *)name)
#define BAD(c) cmocka_unit_test_prestate(test_bad, (void *)&c)

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TESTS("gpt2"),
        FIXTURE_TESTS("llama3"),
        FIXTURE_TESTS("qwen2"),
        FIXTURE_TESTS("smollm"),
        FIXTURE_TESTS("llama2"),
        FIXTURE_TESTS("mistral"),
        FIXTURE_TESTS("gemma"),
        cmocka_unit_test(test_default_special_past_vocab),
        cmocka_unit_test(test_tiny_valid),
        BAD(no_tokens),
        BAD(short_types),
        BAD(bad_type),
        BAD(unknown_merge),
        BAD(malformed_merge),
        BAD(unknown_model),
        BAD(llama_with_pre),
        BAD(bos_out_of_range),
        BAD(above_vocab_size),
        BAD(repeated_token),
        BAD(short_scores),
        BAD(no_bos_added),
        BAD(phi3),
        cmocka_unit_test(test_bad_gpt2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

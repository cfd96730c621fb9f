/* Hugging Face tokenizer.json tokenizers against the `tokenizers` library itself: every fixture of
 * fixtures/tokenizers (trained and recorded with tokenizers 0.23.3 by
 * tools/gen_tokenizer_fixtures.py) must give the library's ids on the Unicode stress texts (every
 * id, with and without the sequence's special tokens), on the whole of Moby Dick (count, sha256,
 * the first 2000 ids) and its decoded text; then every kind of bad input, one test each (exit code
 * 3, one line naming the file and the JSON key), and a checkpoint write/read of the tokenizer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "io/checkpoint.h"
#include "io/hf_tokenizer.h"
#include "support/model_fixture.h"
#include "support/json_file.h"
#include "support/scratch.h"
#include "support/tok_expect.h"

#define FIXTURES "fixtures/tokenizers/"

/* ---- fixtures and expectations ---- */

static void fixture_path(const char *name, const char *file, char *buf, size_t len)
{
    snprintf(buf, len, FIXTURES "%s/%s", name, file);
}

static void load_fixture(const char *name, int with_config, int vocab_size, sp_tokenizer *t)
{
    char json[512], config[512];
    fixture_path(name, "tokenizer.json", json, sizeof json);
    fixture_path(name, "tokenizer_config.json", config, sizeof config);
    sp_error_clear();
    sp_status st = sp_tokenizer_load_hf(json, with_config ? config : NULL, vocab_size, t);
    if (st != SP_OK)
        fail_msg("loading %s: %s", json, sp_error_message());
}

static cJSON *load_expected(const char *name)
{
    char path[512];
    fixture_path(name, "expected.json", path, sizeof path);
    return json_file_read(path);
}

static const cJSON *at(const cJSON *doc, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, a), b);
    if (!v)
        fail_msg("expected.json lacks %s.%s", a, b);
    return v;
}

static void test_stress(void **state)
{
    const char *name = *state;
    sp_tokenizer t;
    load_fixture(name, 1, 0, &t);
    cJSON *exp = load_expected(name);
    tok_check_text(&t, cJSON_GetObjectItemCaseSensitive(exp, "stress"), "stress.txt", name);
    tok_check_text(&t, cJSON_GetObjectItemCaseSensitive(exp, "specials"), "stress_specials.txt", name);
    cJSON_Delete(exp);
    sp_tokenizer_free(&t);
}

/* decode(encode(text)) as tokenizers' decode; after BOS the same text (a sequence starts there). */
static void test_decode(void **state)
{
    const char *name = *state;
    sp_tokenizer t;
    load_fixture(name, 1, 0, &t);
    cJSON *exp = load_expected(name);
    tok_check_decode(&t, at(exp, "stress", "decoded")->valuestring);
    cJSON_Delete(exp);
    sp_tokenizer_free(&t);
}

static void test_mobydick(void **state)
{
    const char *name = *state;
    char path[4200];
    tok_need_mobydick(path, sizeof path);
    sp_tokenizer t;
    load_fixture(name, 1, 0, &t);
    cJSON *exp = load_expected(name);
    tok_check_mobydick(&t, path, cJSON_GetObjectItemCaseSensitive(exp, "mobydick"), name);
    cJSON_Delete(exp);
    sp_tokenizer_free(&t);
}

/* ---- ids, BOS and EOS of the specials ---- */

static void test_specials_resolved(void **state)
{
    (void)state;
    struct {
        const char *name;
        int with_config, bos, eos;
    } cases[] = {
        {"gpt2", 1, 0, 0},          /* <|endoftext|> both, never added (add_bos_token false) */
        {"llama3", 1, 1500, 1501},  /* from the config; BOS added by the template */
        {"llama3", 0, 1500, -1},    /* without the config: the template's BOS, no EOS */
        {"qwen2", 1, -1, 1502},     /* bos_token null */
        {"llama2", 1, 1, 2},        /* {"content": ...} objects */
        {"gemma", 1, 2, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sp_tokenizer t;
        load_fixture(cases[i].name, cases[i].with_config, 0, &t);
        assert_int_equal(t.kind, SP_TOK_HF);
        assert_int_equal(t.bos_id, cases[i].bos);
        assert_int_equal(t.eos_id, cases[i].eos);
        sp_tokenizer_free(&t);
    }
}

/* A vocab_size above the tokenizer's ids: the extra ids decode to nothing. */
static void test_padded_vocab(void **state)
{
    (void)state;
    sp_tokenizer t;
    load_fixture("llama3", 1, 2048, &t);
    assert_int_equal(t.vocab_size, 2048);
    char buf[64];
    assert_int_equal(sp_tokenizer_decode(&t, -1, 2047, buf, sizeof buf), 0);
    sp_tokenizer_free(&t);
}

static void test_invalid_utf8(void **state)
{
    (void)state;
    sp_tokenizer t;
    load_fixture("gpt2", 1, 0, &t);
    int32_t *ids = NULL;
    size_t n = 0;
    sp_error_clear();
    assert_int_equal(sp_tokenizer_encode(&t, "ok \xC3\x28 no", 8, 0, &ids, &n), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "text byte 3: invalid UTF-8"));
    assert_null(ids);
    sp_error_clear();
    sp_tokenizer_free(&t);
}

/* ---- bad tokenizer files: each edit of a valid one must fail with code 3 and a message ---- */

static const char base_json[] =
    "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,"
    "\"added_tokens\":[{\"id\":0,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
    "\"normalized\":false,\"special\":true}],"
    "\"normalizer\":null,"
    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true},"
    "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"vocab\":{\"<s>\":0,\"a\":1,\"b\":2,\"ab\":3},"
    "\"merges\":[\"a b\"]}}";

typedef struct {
    const char *from, *to;  /* the edit of base_json (from NULL: to is the whole file) */
    const char *config;     /* tokenizer_config.json, or NULL */
    int vocab_size;
    const char *fragments[3]; /* the message must hold each */
} bad_case;

static char *edited(const char *from, const char *to)
{
    if (!from)
        return strdup(to);
    const char *hit = strstr(base_json, from);
    assert_non_null(hit);
    size_t head = (size_t)(hit - base_json);
    char *out = malloc(strlen(base_json) - strlen(from) + strlen(to) + 1);
    memcpy(out, base_json, head);
    strcpy(out + head, to);
    strcat(out, hit + strlen(from));
    return out;
}

static void test_bad_file(void **state)
{
    const bad_case *c = *state;
    char json[4200], config[4200];
    scratch_path(json, sizeof json, "bad_tokenizer.json");
    scratch_path(config, sizeof config, "bad_tokenizer_config.json");
    char *text = edited(c->from, c->to);
    assert_int_equal(scratch_write_file(json, text, strlen(text)), 0);
    free(text);
    if (c->config)
        assert_int_equal(scratch_write_file(config, c->config, strlen(c->config)), 0);
    sp_tokenizer t;
    sp_error_clear();
    sp_status st = sp_tokenizer_load_hf(json, c->config ? config : NULL, c->vocab_size, &t);
    const char *msg = sp_error_message();
    if (getenv("SP_TEST_VERBOSE"))
        printf("  %s\n", msg);
    if (st != SP_ERR_INPUT)
        fail_msg("expected code %d, found %d: %s", SP_ERR_INPUT, st, msg);
    assert_null(strchr(msg, '\n'));
    assert_true(strstr(msg, json) || (c->config && strstr(msg, config)));
    for (int i = 0; i < 3 && c->fragments[i]; i++)
        if (!strstr(msg, c->fragments[i]))
            fail_msg("message lacks '%s': %s", c->fragments[i], msg);
    sp_error_clear();
}

static const bad_case not_json = {NULL, "{\"model\": {\"type\": \"BPE\",", NULL, 0, {"not valid JSON"}};
static const bad_case unigram = {"\"type\":\"BPE\"", "\"type\":\"Unigram\"", NULL, 0,
                                 {"model.type 'Unigram' is not supported (supported: BPE)"}};
static const bad_case unknown_pretokenizer = {
    "\"type\":\"ByteLevel\",\"add_prefix_space\"", "\"type\":\"Whitespace\",\"add_prefix_space\"", NULL, 0,
    {"pre_tokenizer.type 'Whitespace' is not supported"}};
static const bad_case nested_pretokenizer = {
    "\"pre_tokenizer\":{", "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Punctuation\"}]},"
                           "\"unused\":{", NULL, 0, {"pre_tokenizer.pretokenizers[0].type 'Punctuation'"}};
static const bad_case bad_regex = {
    "\"pre_tokenizer\":{", "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(ab\"},\"behavior\":"
                           "\"Isolated\",\"invert\":false},\"unused\":{", NULL, 0,
    {"pre_tokenizer.pattern.Regex", "PCRE2 rejects the pattern '(ab'"}};
static const bad_case unknown_normalizer = {"\"normalizer\":null", "\"normalizer\":{\"type\":\"Lowercase\"}", NULL, 0,
                                            {"normalizer.type 'Lowercase' is not supported"}};
static const bad_case unknown_decoder = {"\"decoder\":{\"type\":\"ByteLevel\"}", "\"decoder\":{\"type\":\"WordPiece\"}",
                                        NULL, 0, {"decoder.type 'WordPiece' is not supported"}};
static const bad_case roberta = {"\"post_processor\":null", "\"post_processor\":{\"type\":\"RobertaProcessing\"}",
                                 NULL, 0, {"post_processor.type 'RobertaProcessing' is not supported"}};
static const bad_case merge_unknown_part = {"\"merges\":[\"a b\"]", "\"merges\":[\"a b\",\"a c\"]", NULL, 0,
                                            {"model.merges[1]: 'c' is not in model.vocab"}};
static const bad_case merge_unknown_result = {"\"ab\":3", "\"ba\":3", NULL, 0,
                                              {"model.merges[0]: 'ab' is not in model.vocab"}};
static const bad_case merge_malformed = {"\"merges\":[\"a b\"]", "\"merges\":[\"a b c\"]", NULL, 0,
                                         {"model.merges[0]: expected \"left right\""}};
static const bad_case id_above_vocab = {"\"merges\"", "\"merges\"", NULL, 3,
                                        {"model.vocab['ab']: id 3 is not below the model's vocab_size 3"}};
static const bad_case duplicate_ids = {"\"b\":2", "\"b\":1", NULL, 0, {"model.vocab: id 1 is used by"}};
static const bad_case negative_id = {"\"b\":2", "\"b\":-2", NULL, 0, {"model.vocab['b']: expected an integer id"}};
static const bad_case continuing_prefix = {"\"dropout\":null", "\"dropout\":null,\"continuing_subword_prefix\":\"##\"",
                                           NULL, 0, {"model.continuing_subword_prefix \"##\" is not supported"}};
static const bad_case added_id_mismatch = {"\"id\":0,\"content\":\"<s>\"", "\"id\":7,\"content\":\"<s>\"", NULL, 0,
                                           {"added_tokens[0]: '<s>' has id 7, but tokenizers gives it id 0"}};
static const bad_case config_unknown_bos = {"\"merges\"", "\"merges\"", "{\"bos_token\": \"<|start|>\"}", 0,
                                            {"bos_token '<|start|>' is not in the tokenizer's vocabulary"}};
static const bad_case config_add_without_bos = {"\"merges\"", "\"merges\"", "{\"add_bos_token\": true}", 0,
                                                {"add_bos_token is true but there is no bos_token"}};
static const bad_case config_not_json = {"\"merges\"", "\"merges\"", "{\"add_bos_token\": tru", 0,
                                         {"not valid JSON"}};

/* No token has id 0: its empty string goes through the decoder chain (an empty buffer never
 * allocated; UBSan's find in the fuzzer, 2026-11-28) and decodes to nothing. */
static void test_gap_at_id_zero(void **state)
{
    (void)state;
    char *text = edited("\"added_tokens\":[{\"id\":0,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,"
                        "\"rstrip\":false,\"normalized\":false,\"special\":true}]",
                        "\"added_tokens\":[]");
    char *gap = strstr(text, "\"<s>\":0,");
    assert_non_null(gap);
    memmove(gap, gap + strlen("\"<s>\":0,"), strlen(gap + strlen("\"<s>\":0,")) + 1);
    char json[4200];
    scratch_path(json, sizeof json, "gap_tokenizer.json");
    assert_int_equal(scratch_write_file(json, text, strlen(text)), 0);
    free(text);
    sp_tokenizer t;
    sp_error_clear();
    if (sp_tokenizer_load_hf(json, NULL, 0, &t) != SP_OK)
        fail_msg("%s", sp_error_message());
    assert_int_equal(t.vocab_size, 4);
    char buf[16];
    assert_int_equal(sp_tokenizer_decode(&t, -1, 0, buf, sizeof buf), 0);
    assert_int_equal(sp_tokenizer_decode(&t, -1, 3, buf, sizeof buf), 2);
    assert_memory_equal(buf, "ab", 2);
    sp_tokenizer_free(&t);
}

static void test_missing_file(void **state)
{
    (void)state;
    sp_tokenizer t;
    sp_error_clear();
    assert_int_equal(sp_tokenizer_load_hf(FIXTURES "absent/tokenizer.json", NULL, 0, &t), SP_ERR_IO);
    assert_non_null(strstr(sp_error_message(), "absent/tokenizer.json"));
    sp_error_clear();
}

/* ---- checkpoints keep the tokenizer ---- */

static void round_trip(const char *name, int with_config)
{
    sp_config cfg;
    fixture_tiny_config(&cfg, SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
    cfg.vocab_size = 2048;
    sp_model *m = fixture_model(&cfg, 1, 0);
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    meta.has_tokenizer = 1;
    load_fixture(name, with_config, cfg.vocab_size, &meta.tokenizer);
    char path[4200];
    scratch_path(path, sizeof path, "hf_tokenizer.h5");
    sp_error_clear();
    assert_int_equal(sp_ckpt_write(path, m, &meta, NULL, NULL), SP_OK);

    sp_ckpt_meta got;
    if (sp_ckpt_read_meta(path, &got) != SP_OK)
        fail_msg("reading back: %s", sp_error_message());
    assert_true(got.has_tokenizer);
    assert_int_equal(got.tokenizer.kind, SP_TOK_HF);
    assert_int_equal(got.tokenizer.vocab_size, 2048);
    assert_int_equal(got.tokenizer.bos_id, meta.tokenizer.bos_id);
    assert_int_equal(got.tokenizer.eos_id, meta.tokenizer.eos_id);
    size_t len, n_a, n_b;
    char *text = tok_read_text("stress_specials.txt", &len);
    int32_t *a, *b;
    tok_encode(&meta.tokenizer, text, len, 1, &a, &n_a);
    tok_encode(&got.tokenizer, text, len, 1, &b, &n_b);
    assert_int_equal(n_a, n_b);
    assert_memory_equal(a, b, n_a * sizeof *a);
    assert_memory_equal(got.tokenizer.offsets, meta.tokenizer.offsets, 2049 * sizeof(int64_t));
    free(a);
    free(b);
    free(text);
    sp_ckpt_meta_free(&got);
    sp_ckpt_meta_free(&meta);
    sp_model_free(m);
}

static void test_checkpoint_round_trip(void **state)
{
    (void)state;
    round_trip("llama2", 1);
    round_trip("qwen2", 0);
}

#define FIXTURE_TESTS(name)                                                                                      \
    cmocka_unit_test_prestate(test_stress, (void *)name), cmocka_unit_test_prestate(test_decode, (void *)name), \
        cmocka_unit_test_prestate(test_mobydick, (void *)name)
#define BAD(c) cmocka_unit_test_prestate(test_bad_file, (void *)&c)

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TESTS("gpt2"),
        FIXTURE_TESTS("digits"),
        FIXTURE_TESTS("llama3"),
        FIXTURE_TESTS("qwen2"),
        FIXTURE_TESTS("llama2"),
        FIXTURE_TESTS("mistral"),
        FIXTURE_TESTS("metaspace_unk"),
        FIXTURE_TESTS("gemma"),
        cmocka_unit_test(test_specials_resolved),
        cmocka_unit_test(test_padded_vocab),
        cmocka_unit_test(test_invalid_utf8),
        BAD(not_json),
        BAD(unigram),
        BAD(unknown_pretokenizer),
        BAD(nested_pretokenizer),
        BAD(bad_regex),
        BAD(unknown_normalizer),
        BAD(unknown_decoder),
        BAD(roberta),
        BAD(merge_unknown_part),
        BAD(merge_unknown_result),
        BAD(merge_malformed),
        BAD(id_above_vocab),
        BAD(duplicate_ids),
        BAD(negative_id),
        BAD(continuing_prefix),
        BAD(added_id_mismatch),
        BAD(config_unknown_bos),
        BAD(config_add_without_bos),
        BAD(config_not_json),
        cmocka_unit_test(test_missing_file), cmocka_unit_test(test_gap_at_id_zero),
        cmocka_unit_test(test_checkpoint_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

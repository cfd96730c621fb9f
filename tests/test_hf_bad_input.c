/* Hugging Face model directories that are wrong in every way the importer checks, through the CLI
 * (`import hf`, `analyze`, `tokenize`): each is one line on stderr naming the key or tensor, the
 * documented exit code, and no output file. Each test copies a fixture of fixtures/hf into the
 * scratch directory and breaks one thing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/cli_expect.h"
#include "support/scratch.h"
#include "support/tree.h"

/* Copies every file of fixtures/hf/<fixture> into <scratch>/<name>/ (written into dir). */
static void copy_fixture(const char *fixture, const char *name, char *dir, size_t len)
{
    scratch_path(dir, len, name);
    tree_remove(dir);
    assert_int_equal(mkdir(dir, 0777), 0);
    static const char *const files[] = {"config.json", "model.safetensors", "model.safetensors.index.json",
                                        "tokenizer.json", "tokenizer_config.json", "model-00001-of-00005.safetensors",
                                        "model-00002-of-00005.safetensors", "model-00003-of-00005.safetensors",
                                        "model-00004-of-00005.safetensors", "model-00005-of-00005.safetensors"};
    char src[1024], dst[1200];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(src, sizeof src, "fixtures/hf/%s/%s", fixture, files[i]);
        size_t n = 0;
        char *data = scratch_read_file(src, &n);
        if (!data)
            continue;
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        assert_int_equal(scratch_write_file(dst, data, n), 0);
        free(data);
    }
}

/* Replaces the first occurrence of `from` in dir/file by `to`. */
static void edit_file(const char *dir, const char *file, const char *from, const char *to)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t n = 0;
    char *text = scratch_read_file(path, &n);
    assert_non_null(text);
    char *at = strstr(text, from);
    if (!at)
        fail_msg("%s has no \"%s\" to replace", path, from);
    size_t head = (size_t)(at - text), from_len = strlen(from), to_len = strlen(to);
    char *out = malloc(n - from_len + to_len);
    assert_non_null(out);
    memcpy(out, text, head);
    memcpy(out + head, to, to_len);
    memcpy(out + head + to_len, at + from_len, n - head - from_len);
    assert_int_equal(scratch_write_file(path, out, n - from_len + to_len), 0);
    free(out);
    free(text);
}

/* `import hf dir OUT` fails with code and one line holding needle, leaving no OUT behind. */
static void expect_import_error(const char *dir, int code, const char *needle)
{
    char out[1024];
    scratch_path(out, sizeof out, "bad_import.h5");
    const char *const args[] = {"import", "hf", dir, out, NULL};
    const char *const needles[] = {needle, NULL};
    cli_expect_error(code, args, needles);
    assert_false(scratch_file_exists(out));
    assert_int_equal(scratch_count_entries("bad_import.h5*"), 0);
}

/* One edit of config.json of the tied MQA Llama fixture, and what the import must say. */
static const struct {
    const char *name, *from, *to, *needle;
} config_edits[] = {
    {"arch", "\"LlamaForCausalLM\"", "\"BertForMaskedLM\"", "architectures \"BertForMaskedLM\" is not supported"},
    {"model_type", "\"model_type\": \"llama\"", "\"model_type\": \"mistral\"", "model_type \"mistral\" contradicts"},
    {"rope", "\"rope_type\": \"default\"", "\"rope_type\": \"yarn\"", "rope_type \"yarn\" is not supported"},
    {"notjson", "{", "[", "config.json"},
    {"shapes", "\"intermediate_size\": 64", "\"intermediate_size\": 48", "but config.json implies"},
    {"missing", "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false", "tensor 'lm_head.weight' is missing"},
    {"extra", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1", "is not a parameter of LlamaForCausalLM"},
    {"option", "\"hidden_act\": \"silu\"", "\"hidden_act\": \"relu\"", "\"hidden_act\" = \"relu\" is not supported"},
};

static void test_config_edit(void **state)
{
    const int i = (int)(intptr_t)*state;
    char dir[1024];
    copy_fixture("llama-mqa-tied-f32", config_edits[i].name, dir, sizeof dir);
    edit_file(dir, "config.json", config_edits[i].from, config_edits[i].to);
    expect_import_error(dir, 3, config_edits[i].needle);
}

static void test_unsupported_tokenizer(void **state)
{
    (void)state;
    char dir[1024];
    copy_fixture("llama-f32", "tokenizer", dir, sizeof dir);
    edit_file(dir, "tokenizer.json", "\"type\": \"BPE\"", "\"type\": \"Unigram\"");
    expect_import_error(dir, 3, "'Unigram' is not supported");
}

static void test_truncated_safetensors(void **state)
{
    (void)state;
    char dir[1024], path[1200];
    copy_fixture("llama-mqa-tied-f32", "truncated", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - 100), 0);
    expect_import_error(dir, 3, "model.safetensors");
}

static void test_missing_shard(void **state)
{
    (void)state;
    char dir[1024], path[1200];
    copy_fixture("llama-sharded", "shard", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model-00003-of-00005.safetensors", dir);
    assert_int_equal(unlink(path), 0);
    expect_import_error(dir, 3, "model-00003-of-00005.safetensors");
}

static void test_nan_weight(void **state)
{
    (void)state;
    char dir[1024], path[1200];
    copy_fixture("llama-mqa-tied-f32", "nan", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t n = 0;
    char *data = scratch_read_file(path, &n);
    assert_non_null(data);
    const uint32_t nan_bits = 0x7fc00000u; /* the tensors tile the data: the last 4 bytes are a float32 */
    memcpy(data + n - 4, &nan_bits, 4);
    assert_int_equal(scratch_write_file(path, data, n), 0);
    free(data);
    expect_import_error(dir, 4, "NaN/Inf");
}

static void test_output_is_an_input(void **state)
{
    (void)state;
    char dir[1024], weights[1200];
    copy_fixture("llama-mqa-tied-f32", "overwrite", dir, sizeof dir);
    snprintf(weights, sizeof weights, "%s/model.safetensors", dir);
    size_t before = 0, after = 0;
    char *original = scratch_read_file(weights, &before);
    const char *const args[] = {"import", "hf", dir, weights, NULL};
    const char *const needles[] = {"an input", NULL};
    cli_expect_error(2, args, needles);
    char *now = scratch_read_file(weights, &after);
    assert_true(original && now && before == after && memcmp(original, now, before) == 0);
    free(original);
    free(now);
}

/* analyze writes OUT.h5 and its summary OUT.json: config.h5 would replace config.json. */
static void test_summary_is_an_input(void **state)
{
    (void)state;
    char dir[1024], out[1200], config[1200];
    copy_fixture("llama-mqa-tied-f32", "summary", dir, sizeof dir);
    snprintf(out, sizeof out, "%s/config.h5", dir);
    snprintf(config, sizeof config, "%s/config.json", dir);
    size_t before = 0, after = 0;
    char *original = scratch_read_file(config, &before);
    const char *const args[] = {"analyze", dir, "--out", out, NULL};
    const char *const needles[] = {"config.json", "an input", NULL};
    cli_expect_error(2, args, needles);
    char *now = scratch_read_file(config, &after);
    assert_true(original && now && before == after && memcmp(original, now, before) == 0);
    assert_false(scratch_file_exists(out));
    free(original);
    free(now);
}

static void test_analyze_reports_the_same(void **state)
{
    (void)state;
    char dir[1024], out[1024];
    copy_fixture("llama-mqa-tied-f32", "analyze", dir, sizeof dir);
    edit_file(dir, "config.json", "\"intermediate_size\": 64", "\"intermediate_size\": 48");
    scratch_path(out, sizeof out, "bad_analyze.h5");
    const char *const args[] = {"analyze", dir, "--out", out, NULL};
    const char *const needles[] = {"but config.json implies", NULL};
    cli_expect_error(3, args, needles);
    assert_false(scratch_file_exists(out));
}

int main(void)
{
    enum { N_EDITS = sizeof config_edits / sizeof config_edits[0] };
    struct CMUnitTest tests[N_EDITS + 7] = {
        cmocka_unit_test(test_summary_is_an_input),
        cmocka_unit_test(test_unsupported_tokenizer), cmocka_unit_test(test_truncated_safetensors), cmocka_unit_test(test_missing_shard),
        cmocka_unit_test(test_nan_weight),            cmocka_unit_test(test_output_is_an_input),
        cmocka_unit_test(test_analyze_reports_the_same),
    };
    for (int i = 0; i < N_EDITS; i++)
        tests[7 + i] = (struct CMUnitTest){.name = config_edits[i].name, .test_func = test_config_edit,
                                           .initial_state = (void *)(intptr_t)i};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

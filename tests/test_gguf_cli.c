/* GGUF files through the commands a researcher runs on them: `inspect` (architecture, metadata,
 * tensor types and counts, the parameters each tensor fills), `import gguf` (exit 0, and 2 when the
 * output would replace the input), `dump --logits` on the file against its float64 reference,
 * `analyze` (a report; 2 when --out names the input), and `generate` (the model loads; these
 * fixtures carry no tokenizer, which generate says in one line). */
#include <cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/dump.h"
#include "support/cli_expect.h"
#include "support/gguf_model_ref.h"
#include "support/json_file.h"
#include "support/scratch.h"

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define Q4K "fixtures/gguf_models/llama-q4_k.gguf"

static void test_inspect(void **state)
{
    (void)state;
    char *out = NULL;
    cli_expect_exit(0, NEEDLES("inspect", Q4K, "--json"), &out, NULL);
    cJSON *doc = cJSON_Parse(out);
    assert_non_null(doc);
    assert_string_equal(cJSON_GetObjectItem(doc, "format")->valuestring, "gguf");
    assert_string_equal(cJSON_GetObjectItem(doc, "format_version")->valuestring, "v3 llama");
    const cJSON *attrs = cJSON_GetObjectItem(doc, "attributes");
    const cJSON *root = cJSON_GetObjectItem(attrs, "/");
    assert_string_equal(cJSON_GetObjectItem(root, "tensor_types")->valuestring, "F32 x3, Q4_K x9");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(attrs, "/gguf metadata"), "llama.block_count")
                            ->valuestring, "1");
    const cJSON *t;
    int seen = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "tensors"))
    {
        if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, "blk.0.attn_q.weight") != 0)
            continue;
        assert_string_equal(cJSON_GetObjectItem(t, "dtype")->valuestring, "Q4_K");
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "attributes"), "param")->valuestring,
                            "blocks/0/attn/wq");
        assert_non_null(cJSON_GetObjectItem(t, "std"));
        seen = 1;
    }
    assert_true(seen);
    cJSON_Delete(doc);
    free(out);
    cli_expect_exit(0, NEEDLES("inspect", "fixtures/gguf_models/hf-gpt2-f32.gguf"), &out, NULL);
    assert_non_null(strstr(out, "format   gguf v3 gpt2"));
    assert_non_null(strstr(out, "blocks/0/attn/wq blocks/0/attn/wk blocks/0/attn/wv"));
    free(out);
}

static void test_import(void **state)
{
    (void)state;
    char ckpt[512], *out = NULL;
    scratch_path(ckpt, sizeof ckpt, "gguf_import.h5");
    cli_expect_exit(0, NEEDLES("import", "gguf", Q4K, ckpt), &out, NULL);
    assert_non_null(strstr(out, "imported " Q4K));
    free(out);
    cli_expect_exit(0, NEEDLES("inspect", ckpt), &out, NULL);
    assert_non_null(strstr(out, "import gguf " Q4K " (llama"));
    free(out);
    /* the output would replace the input: refused, the input intact */
    char copy[512];
    scratch_path(copy, sizeof copy, "copy.gguf");
    size_t len = 0;
    char *bytes = scratch_read_file(Q4K, &len);
    assert_int_equal(scratch_write_file(copy, bytes, len), 0);
    cli_expect_error(2, NEEDLES("import", "gguf", copy, copy), NEEDLES("the output is the input"));
    size_t len2 = 0;
    char *after = scratch_read_file(copy, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(bytes, after, len);
    free(bytes);
    free(after);
    cli_expect_error(3, NEEDLES("import", "gguf", "fixtures/hf/llama-f32", ckpt), NEEDLES("not a gguf file (expected a file starting with the magic GGUF)"));
    cli_expect_error(2, NEEDLES("import", "gguf", Q4K), NEEDLES("expected FILE.gguf OUT.h5 after gguf"));
}

/* Whitespace-separated ids of the manifest entry's reference tokens into a scratch file. */
static void write_tokens(const char *file, char *path, size_t cap, int *seq)
{
    cJSON *manifest = json_file_read("fixtures/gguf_models/manifest.json");
    const cJSON *e, *row, *v;
    char ids[8192];
    size_t used = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(manifest, "models"))
    {
        if (strcmp(cJSON_GetObjectItem(e, "file")->valuestring, file) != 0)
            continue;
        cJSON_ArrayForEach(row, cJSON_GetObjectItem(e, "tokens"))
        {
            *seq = cJSON_GetArraySize(row);
            cJSON_ArrayForEach(v, row) used += (size_t)snprintf(ids + used, sizeof ids - used, "%d ", v->valueint);
        }
    }
    assert_true(used > 0 && used < sizeof ids);
    scratch_path(path, cap, "gguf_tokens.txt");
    assert_int_equal(scratch_write_file(path, ids, used), 0);
    cJSON_Delete(manifest);
}

static void test_dump_logits(void **state)
{
    (void)state;
    const char *file = "hf-qwen3-f32.gguf";
    char tokens[512], out[512], model[256], seq_text[16];
    int seq = 0;
    write_tokens(file, tokens, sizeof tokens, &seq);
    snprintf(seq_text, sizeof seq_text, "%d", seq);
    snprintf(model, sizeof model, "fixtures/gguf_models/%s", file);
    scratch_path(out, sizeof out, "gguf_logits.h5");
    cli_expect_exit(0, NEEDLES("dump", model, "--tokens", tokens, "--seq", seq_text, "--logits", "--device", "cpu",
                               "--out", out),
                    NULL, NULL);
    sp_dump *d = NULL;
    assert_int_equal(sp_dump_open(out, &d), SP_OK);
    const size_t n = (size_t)sp_dump_rows(d) * (size_t)sp_dump_get_info(d)->vocab_size;
    sp_real *logits = malloc(n * sizeof *logits);
    assert_int_equal(sp_dump_read(d, SP_DUMP_LOGITS, 0, 0, 0, sp_dump_rows(d), logits), SP_OK);
    assert_true(gguf_model_ref_compare(logits, "hf-qwen3-f32.logits_f64.f64", n) <= 1e-5);
    free(logits);
    sp_dump_close(d);
    cli_expect_error(2, NEEDLES("dump", model, "--tokens", tokens, "--out", model), NEEDLES("the output is the input"));
}

static void test_analyze_and_generate(void **state)
{
    (void)state;
    char tokens[512], report[512];
    int seq = 0;
    write_tokens("llama-q8_0.gguf", tokens, sizeof tokens, &seq);
    scratch_path(report, sizeof report, "gguf_report.h5");
    cli_expect_exit(0, NEEDLES("analyze", "fixtures/gguf_models/llama-q8_0.gguf", "--metrics", "grad_norms",
                               "--tokens", tokens, "--seq-len", "15", "--n-tokens", "30", "--device", "cpu", "--out",
                               report),
                    NULL, NULL);
    assert_true(scratch_file_exists(report));
    char copy[512];
    scratch_path(copy, sizeof copy, "analyzed.gguf");
    size_t len = 0;
    char *bytes = scratch_read_file("fixtures/gguf_models/llama-q8_0.gguf", &len);
    assert_int_equal(scratch_write_file(copy, bytes, len), 0);
    free(bytes);
    cli_expect_error(2, NEEDLES("analyze", copy, "--tokens", tokens, "--seq-len", "15", "--out", copy),
                     NEEDLES("the output is the input"));
    cli_expect_error(3, NEEDLES("generate", Q4K, "--steps", "3", "--device", "cpu"), NEEDLES("has no tokenizer"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inspect),
        cmocka_unit_test(test_import),
        cmocka_unit_test(test_dump_logits),
        cmocka_unit_test(test_analyze_and_generate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

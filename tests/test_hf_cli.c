/* Hugging Face model directories through the commands a researcher runs on them, against the
 * references of tools/hf_fixtures: `tokenize` (the ids transformers' tokenizer gives), `dump
 * --logits` on the directory and on its `import hf` checkpoint (float32 logits within 1e-5 of
 * max|logit|), `analyze --metrics grad_norms` (against the model pass test_hf_import holds to torch
 * autograd), `generate`, and `inspect`. */
#include <cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/dump.h"
#include "io/hf_dir.h"
#include "support/cli_expect.h"
#include "support/json_file.h"
#include "support/report_view.h"
#include "support/scratch.h"

static cJSON *load_ref(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "fixtures/hf/ref/%s.json", name);
    return json_file_read(path);
}

/* Whitespace-separated ids of a JSON list of rows (or of ids) as text. */
static void ids_text(const cJSON *list, char *buf, size_t cap)
{
    size_t used = 0;
    const cJSON *row, *v;
    buf[0] = '\0';
    cJSON_ArrayForEach(row, list)
    {
        if (cJSON_IsNumber(row)) {
            used += (size_t)snprintf(buf + used, cap - used, "%d ", row->valueint);
            continue;
        }
        cJSON_ArrayForEach(v, row) used += (size_t)snprintf(buf + used, cap - used, "%d ", v->valueint);
    }
    assert_true(used < cap);
}

/* The same ids, whatever whitespace separates them. */
static void assert_same_ids(const char *got, const char *want)
{
    char *a = strdup(got), *b = strdup(want), *sa = NULL, *sb = NULL;
    char *ta = strtok_r(a, " \n", &sa), *tb = strtok_r(b, " \n", &sb);
    while (ta && tb) {
        assert_string_equal(ta, tb);
        ta = strtok_r(NULL, " \n", &sa);
        tb = strtok_r(NULL, " \n", &sb);
    }
    assert_null(ta);
    assert_null(tb);
    free(a);
    free(b);
}

static void test_tokenize_matches_transformers(void **state)
{
    (void)state;
    static const char *const fixtures[] = {"gpt2-f32", "llama-f32"};
    for (size_t f = 0; f < 2; f++) {
        cJSON *ref = load_ref(fixtures[f]), *tok = cJSON_GetObjectItem(ref, "tokenizer");
        char dir[256], text_path[1024], want[8192];
        snprintf(dir, sizeof dir, "fixtures/hf/%s", fixtures[f]);
        scratch_path(text_path, sizeof text_path, "sentence.txt");
        const char *sentence = cJSON_GetObjectItem(tok, "sentence")->valuestring;
        assert_int_equal(scratch_write_file(text_path, sentence, strlen(sentence)), 0);
        char *out = NULL;
        const char *const args[] = {"tokenize", dir, "--text", text_path, NULL};
        cli_expect_exit(0, args, &out, NULL);
        ids_text(cJSON_GetObjectItem(tok, "ids"), want, sizeof want);
        assert_same_ids(out, want);
        free(out);
        const char *const plain[] = {"tokenize", dir, "--text", text_path, "--no-bos", NULL};
        cli_expect_exit(0, plain, &out, NULL);
        ids_text(cJSON_GetObjectItem(tok, "ids_without_special_tokens"), want, sizeof want);
        assert_same_ids(out, want);
        free(out);
        cJSON_Delete(ref);
    }
}

/* Writes the reference tokens of ref as a token file; returns its path in buf. */
static void write_tokens(const cJSON *ref, const char *name, char *buf, size_t cap)
{
    char ids[8192];
    ids_text(cJSON_GetObjectItem(ref, "tokens"), ids, sizeof ids);
    scratch_path(buf, cap, name);
    assert_int_equal(scratch_write_file(buf, ids, strlen(ids)), 0);
}

/* `dump MODEL --tokens --logits` and its logits against the float64 reference. */
static void check_dump_logits(const char *model, const cJSON *ref, const char *tokens_path)
{
    char out[1024];
    scratch_path(out, sizeof out, "hf_logits.h5");
    const char *const args[] = {"dump", model, "--tokens", tokens_path, "--seq", "24", "--logits", "--device", "cpu",
                                "--out", out, NULL};
    cli_expect_exit(0, args, NULL, NULL);
    sp_dump *d = NULL;
    assert_int_equal(sp_dump_open(out, &d), SP_OK);
    const sp_dump_info *info = sp_dump_get_info(d);
    const size_t n = (size_t)sp_dump_rows(d) * (size_t)info->vocab_size;
    sp_real *logits = malloc(n * sizeof *logits);
    assert_int_equal(sp_dump_read(d, SP_DUMP_LOGITS, 0, 0, 0, sp_dump_rows(d), logits), SP_OK);
    char path[512];
    snprintf(path, sizeof path, "fixtures/hf/ref/%s",
             cJSON_GetObjectItem(cJSON_GetObjectItem(ref, "logits_f64"), "file")->valuestring);
    size_t len = 0;
    char *want = scratch_read_file(path, &len);
    assert_int_equal(len, n * sizeof(double));
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        double w;
        memcpy(&w, want + i * sizeof w, sizeof w);
        diff = fmax(diff, fabs((double)logits[i] - w));
        scale = fmax(scale, fabs(w));
    }
    print_message("%s: dump logits within %.3g of max|logit|\n", model, diff / scale);
    assert_true(diff <= 1e-5 * scale);
    free(want);
    free(logits);
    sp_dump_close(d);
}

static void test_dump_logits_directory_and_import(void **state)
{
    (void)state;
    cJSON *ref = load_ref("gemma2-bf16");
    char tokens[1024], ckpt[1024];
    write_tokens(ref, "gemma2_tokens.txt", tokens, sizeof tokens);
    check_dump_logits("fixtures/hf/gemma2-bf16", ref, tokens);
    scratch_path(ckpt, sizeof ckpt, "gemma2.h5");
    const char *const args[] = {"import", "hf", "fixtures/hf/gemma2-bf16", ckpt, NULL};
    cli_expect_exit(0, args, NULL, NULL);
    check_dump_logits(ckpt, ref, tokens);
    cJSON_Delete(ref);
}

/* analyze's gradient norms on a model directory against the library's own forward and backward
 * pass on the same windows: test_hf_import holds that pass to torch autograd per stored tensor, so
 * this closes the chain from `analyze DIR` to the reference. The token file is the two reference
 * rows (48 ids); analyze cuts it into windows of 23 inputs at stride 23 (evalset.h). */
static void test_analyze_grad_norms_match_model(void **state)
{
    (void)state;
    static const char *const fixtures[] = {"gpt_neox-parallel-f32", "qwen3-f32", "gemma3-f32"};
    for (size_t f = 0; f < 3; f++) {
        cJSON *ref = load_ref(fixtures[f]);
        char dir[256], tokens[1024], report[1024];
        snprintf(dir, sizeof dir, "fixtures/hf/%s", fixtures[f]);
        write_tokens(ref, "grad_tokens.txt", tokens, sizeof tokens);
        scratch_path(report, sizeof report, "hf_grads.h5");
        const char *const args[] = {"analyze", dir, "--metrics", "grad_norms", "--tokens", tokens, "--seq-len", "23",
                                    "--n-tokens", "46", "--device", "cpu", "--out", report, NULL};
        cli_expect_exit(0, args, NULL, NULL);

        int32_t ids[48], in[46], target[46];
        int k = 0;
        const cJSON *row, *v;
        cJSON_ArrayForEach(row, cJSON_GetObjectItem(ref, "tokens"))
        {
            cJSON_ArrayForEach(v, row) ids[k++] = v->valueint;
        }
        for (int w = 0; w < 2; w++)
            for (int t = 0; t < 23; t++) {
                in[w * 23 + t] = ids[w * 23 + t];
                target[w * 23 + t] = ids[w * 23 + t + 1];
            }
        sp_model *m = NULL;
        sp_ckpt_meta meta;
        assert_int_equal(sp_hf_load(dir, sp_backend_cpu(), &m, &meta), SP_OK);
        double loss = 0;
        assert_int_equal(sp_model_forward(m, in, target, 2, 23, &loss), SP_OK);
        assert_int_equal(sp_model_backward(m), SP_OK);

        report_view view;
        report_view_open(&view, report);
        assert_true(fabs(report_view_scalar(&view, "grad_norms", "loss") - loss) <= 1e-5 * loss);
        int64_t shape[4];
        double *norms = report_view_array(&view, "grad_norms", "tensor", NULL, shape);
        assert_int_equal(shape[0], sp_model_n_params(m));
        double worst = 0;
        for (int i = 0; i < sp_model_n_params(m); i++) {
            const sp_real *g = sp_model_grad(m, i);
            double sq = 0;
            for (size_t j = 0; j < sp_param_numel(sp_model_param_spec(m, i)); j++)
                sq += (double)g[j] * (double)g[j];
            worst = fmax(worst, fabs(sqrt(sq) - norms[i]) / fmax(sqrt(sq), 1e-30));
        }
        print_message("%s: analyze gradient norms within %.3g of the model's\n", fixtures[f], worst);
        assert_true(worst <= 1e-4);
        free(norms);
        report_view_close(&view);
        sp_model_free(m);
        sp_ckpt_meta_free(&meta);
        cJSON_Delete(ref);
    }
}

static void test_generate_and_inspect(void **state)
{
    (void)state;
    char *out = NULL;
    const char *const gen[] = {"generate", "fixtures/hf/llama-f32", "--prompt", "Call me", "--steps", "12",
                               "--temperature", "0", "--device", "cpu", NULL};
    cli_expect_exit(0, gen, &out, NULL);
    assert_true(strncmp(out, "Call me", 7) == 0);
    free(out);
    const char *const inspect[] = {"inspect", "fixtures/hf/gpt2-sharded", "--json", NULL};
    cli_expect_exit(0, inspect, &out, NULL);
    cJSON *doc = cJSON_Parse(out);
    assert_non_null(doc);
    assert_string_equal(cJSON_GetObjectItem(doc, "format")->valuestring, "huggingface");
    assert_string_equal(cJSON_GetObjectItem(doc, "format_version")->valuestring, "GPT2LMHeadModel");
    const cJSON *t;
    int fused = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "tensors"))
    {
        if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, "transformer.h.0.attn.c_attn.weight") != 0)
            continue;
        const char *params = cJSON_GetObjectItem(cJSON_GetObjectItem(t, "attributes"), "param")->valuestring;
        assert_string_equal(params, "blocks/0/attn/wq blocks/0/attn/wk blocks/0/attn/wv");
        fused = 1;
    }
    assert_true(fused);
    cJSON_Delete(doc);
    free(out);
}

static void test_tokenizer_needed_for_text(void **state)
{
    (void)state;
    char text[1024], out[1024];
    scratch_path(text, sizeof text, "no_tok.txt");
    assert_int_equal(scratch_write_file(text, "hello", 5), 0);
    scratch_path(out, sizeof out, "no_tok.h5");
    const char *const args[] = {"dump", "fixtures/hf/olmo2-f32", "--text", text, "--out", out, NULL};
    const char *const needles[] = {"has no tokenizer", NULL};
    cli_expect_error(3, args, needles);
    assert_false(scratch_file_exists(out));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenize_matches_transformers),
        cmocka_unit_test(test_dump_logits_directory_and_import),
        cmocka_unit_test(test_analyze_grad_norms_match_model),
        cmocka_unit_test(test_generate_and_inspect),
        cmocka_unit_test(test_tokenizer_needed_for_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Models from PyTorch files (tools/pt_fixtures/generate.py, fixtures/pt/):
 * - a Hugging Face directory holding pytorch_model.bin (torch.save of a transformers model's
 *   state_dict: the tied head's second key, the _metadata attribute), or its shards with
 *   pytorch_model.bin.index.json, imports to the same parameters, bit for bit, as the
 *   model.safetensors it was made from (whose logits tests/test_hf_import.c checks against
 *   transformers), in float32 (GPT-2) and bfloat16 (Llama, RoPE rows reordered); an index that
 *   contradicts its shards is one line;
 * - nanoGPT's ckpt.pt, with biases and the causal-mask buffer, and without biases with every key
 *   prefixed by torch.compile's "_orig_mod.", gives nanoGPT's logits (its forward pass in float64 in
 *   the generator) to float32 accuracy;
 * - the commands take a .pt directly (inspect, import pt, analyze), refuse a bare state dict and a
 *   malicious pickle in one line each, and run none of its code. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>
#include <cmocka.h>

#include "io/model_source.h"
#include "support/cli_expect.h"
#include "support/json_file.h"
#include "support/scratch.h"
#include "support/tree.h"

#define MARKER "/tmp/spanprobe-pt-marker"

static sp_model *load(const char *path, sp_ckpt_meta *meta)
{
    sp_model *m = NULL;
    if (sp_model_source_load(path, sp_backend_cpu(), &m, meta) != SP_OK)
        fail_msg("%s: %s", path, sp_error_message());
    return m;
}

static void test_hf_bin_same_as_safetensors(void **state)
{
    (void)state;
    const char *pairs[][2] = {{"fixtures/pt/hf-gpt2-bin", "fixtures/hf/gpt2-f32"},
                              {"fixtures/pt/hf-gpt2-bin-sharded", "fixtures/hf/gpt2-f32"},
                              {"fixtures/pt/hf-llama-bin", "fixtures/hf/llama-bf16"}};
    for (size_t p = 0; p < 3; p++) {
        sp_ckpt_meta ma, mb;
        sp_model *a = load(pairs[p][0], &ma), *b = load(pairs[p][1], &mb);
        assert_int_equal(sp_model_n_params(a), sp_model_n_params(b));
        for (int i = 0; i < sp_model_n_params(a); i++) {
            const sp_param_spec *spec = sp_model_param_spec(a, i);
            size_t n = sp_model_n_weights(a); /* upper bound for any one parameter */
            sp_real *va = malloc(n * sizeof *va), *vb = malloc(n * sizeof *vb);
            assert_non_null(va);
            assert_non_null(vb);
            sp_model_get_param(a, i, va);
            sp_model_get_param(b, sp_model_find_param(b, spec->name), vb);
            size_t count = (size_t)spec->shape[0] * (spec->rank == 2 ? (size_t)spec->shape[1] : 1);
            if (memcmp(va, vb, count * sizeof *va) != 0)
                fail_msg("%s: parameter %s differs from %s's", pairs[p][0], spec->name, pairs[p][1]);
            free(va);
            free(vb);
        }
        assert_non_null(strstr(ma.source, "import hf"));
        sp_ckpt_meta_free(&ma);
        sp_ckpt_meta_free(&mb);
        sp_model_free(a);
        sp_model_free(b);
    }
}

/* A copy of the sharded fixture whose index maps edit_tensor to edit_shard. */
static void sharded_copy(const char *dir, const char *edit_tensor, const char *edit_shard)
{
    const char *files[] = {"config.json", "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"};
    assert_int_equal(mkdir(dir, 0755), 0);
    for (size_t i = 0; i < 3; i++) {
        char from[4200], to[8400];
        size_t len = 0;
        snprintf(from, sizeof from, "fixtures/pt/hf-gpt2-bin-sharded/%s", files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        char *data = scratch_read_file(from, &len);
        assert_non_null(data);
        assert_int_equal(scratch_write_file(to, data, len), 0);
        free(data);
    }
    cJSON *index = json_file_read("fixtures/pt/hf-gpt2-bin-sharded/pytorch_model.bin.index.json");
    cJSON *map = cJSON_GetObjectItem(index, "weight_map");
    cJSON_DeleteItemFromObject(map, edit_tensor);
    cJSON_AddStringToObject(map, edit_tensor, edit_shard);
    char *text = cJSON_Print(index), path[8400];
    snprintf(path, sizeof path, "%s/pytorch_model.bin.index.json", dir);
    assert_int_equal(scratch_write_file(path, text, strlen(text)), 0);
    free(text);
    cJSON_Delete(index);
}

/* An index that puts a tensor in the wrong shard, or names one no shard holds, is one line. */
static void test_sharded_index_checked(void **state)
{
    (void)state;
    struct {
        const char *tensor, *shard, *expect;
    } cases[] = {{"transformer.wte.weight", "pytorch_model-00001-of-00002.bin", "but it is in"},
                 {"transformer.h.9.mlp.c_fc.weight", "pytorch_model-00002-of-00002.bin", "which does not hold it"}};
    for (size_t i = 0; i < 2; i++) {
        char dir[4200];
        scratch_path(dir, sizeof dir, i ? "stale_index_missing" : "stale_index_moved");
        sharded_copy(dir, cases[i].tensor, cases[i].shard);
        sp_model *m = NULL;
        sp_ckpt_meta meta;
        assert_int_equal(sp_model_source_load(dir, sp_backend_cpu(), &m, &meta), SP_ERR_INPUT);
        if (!strstr(sp_error_message(), cases[i].expect))
            fail_msg("%s: expected \"%s\" in: %s", dir, cases[i].expect, sp_error_message());
        sp_error_clear();
        assert_int_equal(tree_remove(dir), 0);
    }
}

static void test_nanogpt_logits(void **state)
{
    (void)state;
    cJSON *exp = json_file_read("fixtures/pt/expected.json");
    const cJSON *ng = cJSON_GetObjectItem(exp, "nanogpt"), *tok = cJSON_GetObjectItem(ng, "tokens");
    const int batch = cJSON_GetArraySize(tok), seq = cJSON_GetArraySize(cJSON_GetArrayItem(tok, 0));
    int32_t *tokens = malloc((size_t)batch * seq * sizeof *tokens);
    assert_non_null(tokens);
    for (int b = 0; b < batch; b++)
        for (int t = 0; t < seq; t++)
            tokens[b * seq + t] = cJSON_GetArrayItem(cJSON_GetArrayItem(tok, b), t)->valueint;
    const char *files[] = {"nanogpt.pt", "nanogpt-nobias-compiled.pt"};
    for (size_t f = 0; f < 2; f++) {
        char path[256];
        snprintf(path, sizeof path, "fixtures/pt/%s", files[f]);
        sp_ckpt_meta meta;
        sp_model *m = load(path, &meta);
        assert_int_equal(meta.cfg.tie_embeddings, 1);
        assert_int_equal(meta.cfg.qkv_bias, f == 0);
        assert_non_null(strstr(meta.source, "iter_num 5000"));
        assert_int_equal(sp_model_forward(m, tokens, NULL, batch, seq, NULL), SP_OK);
        const cJSON *want = cJSON_GetObjectItem(cJSON_GetObjectItem(ng, files[f]), "logits");
        const size_t n = (size_t)batch * seq * meta.cfg.vocab_size;
        assert_int_equal(cJSON_GetArraySize(want), n);
        const sp_real *got = sp_model_logits(m);
        double diff = 0, scale = 0;
        const cJSON *w = want->child;
        for (size_t i = 0; i < n; i++, w = w->next) {
            diff = fmax(diff, fabs((double)got[i] - w->valuedouble));
            scale = fmax(scale, fabs(w->valuedouble));
        }
        print_message("%s: logits within %.3g of max|logit| of nanoGPT's\n", files[f], diff / scale);
        if (diff / scale > 1e-5)
            fail_msg("%s: logits differ from nanoGPT's by %.3g of max|logit|", files[f], diff / scale);
        sp_ckpt_meta_free(&meta);
        sp_model_free(m);
    }
    free(tokens);
    cJSON_Delete(exp);
}

static void test_commands_take_pt(void **state)
{
    (void)state;
    if (!getenv("SPANPROBE_BIN"))
        skip();
    char out[4096], ids[4096], report[4096];
    scratch_path(out, sizeof out, "nanogpt_import.h5");
    scratch_path(ids, sizeof ids, "nanogpt_ids.txt");
    scratch_path(report, sizeof report, "nanogpt_report.h5");
    const char *text = "1 5 9 2 7 3 8 4 6 0 11 12 13 14 15 16\n";
    assert_int_equal(scratch_write_file(ids, text, strlen(text)), 0);
    /* the tied head is a view of the embedding's storage: torch counts 32000 bytes in the distinct
     * storages (34560 summed tensor by tensor), and so does the source line */
    char *listing = NULL;
    cli_expect_exit(0, (const char *[]){"inspect", "fixtures/pt/nanogpt.pt", NULL}, &listing, NULL);
    assert_non_null(strstr(listing, "31 tensors, 32000 bytes"));
    free(listing);
    cli_expect_exit(0, (const char *[]){"import", "pt", "fixtures/pt/nanogpt-nobias-compiled.pt", out, NULL}, NULL,
                    NULL);
    cli_expect_exit(0, (const char *[]){"analyze", "fixtures/pt/nanogpt.pt", "--tokens", ids, "--seq", "8", "--metrics",
                                        "similarity,growth", "--out", report, "--quiet", NULL},
                    NULL, NULL);
    /* a bare state dict has no config; a pickle that would run code is refused, naming the global */
    cli_expect_error(SP_ERR_INPUT, (const char *[]){"import", "pt", "fixtures/pt/state.pt", out, NULL},
                     (const char *[]){"not a nanoGPT checkpoint", NULL});
    unlink(MARKER);
    const char *evil[] = {"evil_os_system.pt", "evil_eval.pt", "evil_popen.pt"};
    for (size_t i = 0; i < 3; i++) {
        char path[256];
        snprintf(path, sizeof path, "fixtures/pt/%s", evil[i]);
        cli_expect_error(SP_ERR_INPUT, (const char *[]){"inspect", path, NULL}, (const char *[]){"global", NULL});
        assert_false(scratch_file_exists(MARKER));
    }
    unlink(out);
    unlink(ids);
    unlink(report);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_bin_same_as_safetensors),
        cmocka_unit_test(test_sharded_index_checked),
        cmocka_unit_test(test_nanogpt_logits),
        cmocka_unit_test(test_commands_take_pt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

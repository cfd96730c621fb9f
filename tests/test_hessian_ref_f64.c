/* The curvature of the tiny Hugging Face fixtures (fixtures/hf: Llama 3, GPT-2, Gemma 2, Qwen3,
 * OLMo 2) against PyTorch's double backward (tools/hessian_ref/generate.py, committed in
 * fixtures/hessian/ref.json), in double: for every block, on the generator's token windows,
 * - g^T H g / g^T g and ||H g|| / ||g|| with g the block's gradient (sp_model_backward) and H g one
 *   sp_model_hvp: relative error < 1e-9 (both exact in float64; they differ by rounding only);
 * - lambda_max of the curvature analyzer against the generator's (power iteration to a relative
 *   change of 1e-13 there; 1e-10 here, which leaves an error of ~1e-9 on the blocks that converge
 *   slowest): relative error < 1e-6.
 * These quantities do not depend on how a model lays out its parameters (the importer permutes
 * and transposes weights, and Gemma's norm gains are 1 + w), so spanprobe's own layout gives the
 * same numbers. */
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

#include "io/model_source.h"
#include "tests/support/an_run.h"
#include "tests/support/assert_err.h"
#include "tests/support/json_file.h"
#include "tests/support/vec_util.h"

#define REF "fixtures/hessian/ref.json"

extern const sp_analyzer sp_analyzer_curvature;

/* g^T H g / g^T g and ||H g|| / ||g|| of block l around the model's last forward pass. */
static void gradient_curvature(sp_model *m, int l, double *g_h_g, double *h_g_norm)
{
    const sp_backend *be = sp_model_backend(m);
    size_t offset, n;
    sp_model_block_param_range(m, l, &offset, &n);
    assert_int_equal(sp_model_backward(m), SP_OK);
    sp_real *g = be->alloc(n * sizeof *g, "test gradient"), *hg = be->alloc(n * sizeof *hg, "test Hg");
    assert_true(g && hg);
    be->copy(g, sp_model_grad(m, 0) + offset, n * sizeof *g);
    assert_int_equal(sp_model_hvp(m, l, g, hg), SP_OK);
    const double gg = be->dot(n, g, g);
    *g_h_g = be->dot(n, g, hg) / gg;
    *h_g_norm = sqrt(be->sumsq(n, hg) / gg);
    be->free(g);
    be->free(hg);
}

static void check_model(const char *name, const cJSON *ref, int n_seqs, int seq_len)
{
    char path[256];
    snprintf(path, sizeof path, "fixtures/hf/%s", name);
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    assert_int_equal(sp_model_source_load(path, sp_backend_cpu(), &m, &meta), SP_OK);
    an_run r;
    an_run_setup(&r, m, n_seqs, seq_len, n_seqs, 1);
    const cJSON *windows = cJSON_GetObjectItemCaseSensitive(ref, "tokens");
    for (int s = 0; s < n_seqs; s++)
        for (int t = 0; t < seq_len; t++) {
            const cJSON *w = cJSON_GetArrayItem(windows, s);
            r.tokens[s * seq_len + t] = cJSON_GetArrayItem(w, t)->valueint;
            r.targets[s * seq_len + t] = cJSON_GetArrayItem(w, t + 1)->valueint;
        }
    double loss = 0;
    assert_int_equal(sp_model_forward(m, r.tokens, r.targets, n_seqs, seq_len, &loss), SP_OK);
    assert_below(fabs(loss - cJSON_GetObjectItemCaseSensitive(ref, "loss")->valuedouble), 1e-12, "%s: loss", name);
    const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(ref, "blocks");
    for (int l = 0; l < cJSON_GetArraySize(blocks); l++) {
        const cJSON *b = cJSON_GetArrayItem(blocks, l);
        size_t offset, n;
        sp_model_block_param_range(m, l, &offset, &n);
        assert_int_equal((int)n, cJSON_GetObjectItemCaseSensitive(b, "n_params")->valueint);
        double ghg, hg;
        gradient_curvature(m, l, &ghg, &hg);
        const double ref_ghg = cJSON_GetObjectItemCaseSensitive(b, "g_h_g")->valuedouble;
        const double ref_hg = cJSON_GetObjectItemCaseSensitive(b, "h_g_norm")->valuedouble;
        assert_below(fabs(ghg - ref_ghg) / fabs(ref_ghg), 1e-9, "%s block %d: g^T H g / g^T g", name, l);
        assert_below(fabs(hg - ref_hg) / ref_hg, 1e-9, "%s block %d: ||H g|| / ||g||", name, l);
    }
    r.opts.curv_seqs = n_seqs;
    r.opts.curv_iters = 20000;
    r.opts.power_tol = 1e-10;
    r.opts.hutchinson_samples = 2;
    assert_int_equal(an_run_finish(&r, &sp_analyzer_curvature, "curvature.h5"), SP_OK);
    sp_report_array lambda = an_run_array(&r, "curvature", "lambda_max");
    for (int l = 0; l < cJSON_GetArraySize(blocks); l++) {
        const cJSON *ref_lambda = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(blocks, l), "lambda_max");
        if (cJSON_IsNumber(ref_lambda))
            assert_below(fabs(lambda.data[l] - ref_lambda->valuedouble) / fabs(ref_lambda->valuedouble), 1e-6,
                         "%s block %d: lambda_max", name, l);
    }
    sp_report_array_free(&lambda);
    an_run_free(&r);
    sp_ckpt_meta_free(&meta);
    sp_model_free(m);
}

static void test_against_torch(void **state)
{
    (void)state;
    cJSON *ref = json_file_read(REF);
    const int n_seqs = cJSON_GetObjectItemCaseSensitive(ref, "n_seqs")->valueint;
    const int seq_len = cJSON_GetObjectItemCaseSensitive(ref, "seq_len")->valueint;
    const cJSON *model;
    cJSON_ArrayForEach(model, cJSON_GetObjectItemCaseSensitive(ref, "models"))
        check_model(model->string, model, n_seqs, seq_len);
    cJSON_Delete(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_against_torch)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The analysis on the GPU against the CPU. For small checkpoints covering the variant table (pre,
 * post, span with RMSNorm + SwiGLU + RoPE, siamese, mixln, olmo2; tied and untied heads, GQA), every
 * analyzer runs through `spanprobe analyze` on the same tokens and options three times: --device cpu,
 * --device cuda, and spanprobe-f64 --device cpu (the fp64 reference). Then
 * - `spanprobe compare CPU CUDA` and `spanprobe compare FP64 CUDA` pass with the default table
 *   (analyzers/agreement.h, docs/cuda.md "Agreement with the CPU"): exit 0;
 * - the CUDA report ran every analyzer the CPU one ran, and a few metrics per analyzer are checked
 *   here with the same rule, so a failure names the metric, the entry and both values.
 * Without a visible GPU every test is skipped with "skipped: no CUDA GPU". The table holds full-fp32
 * tolerances only (TF32 rounds every product to 10 bits, beyond what separates a right result from a
 * wrong one), so with SPANPROBE_TF32=1 the tests are skipped too, saying so. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzers/agreement.h"
#include "kernels/backend.h"
#include "support/analyze_cli.h"
#include "support/cli_expect.h"
#include "support/gpu.h"
#include "support/report_view.h"
#include "support/scratch.h"

/* 4 blocks, d_model 32, 4 query heads on 2 kv heads; 16 sequences of 32 tokens in batches of 4:
 * every gradient and pruning batch, and the last batch of the pass, is a full one. */
#define MODEL_ARGS "--n-layers", "4", "--d-model", "32", "--n-heads", "4", "--n-kv-heads", "2", "--d-ff", "64", \
                   "--max-seq-len", "32", "--vocab-size", "64"
#define ANALYZE_ARGS "--n-tokens", "512", "--seq-len", "32", "--batch", "4", "--grad-batches", "4", \
                     "--prune-batches", "2", "--jac-seq", "16", "--jac-tokens", "3", "--topk", "4"

/* The CUDA backend is visible and runs in full fp32, or the test is skipped (saying why once). */
static void require_fp32_gpu(void)
{
    static int said;
    gpu_require();
    if (gpu_tf32()) {
        if (!said++)
            print_message("skipped: SPANPROBE_TF32=1: the agreement table is for full fp32 (docs/cuda.md)\n");
        skip();
    }
}

/* Arrays and summary keys checked directly, per analyzer (a siamese report's _y twins too). */
static const struct {
    const char *analyzer, *name;
    sp_agree_kind kind;
} checked[] = {
    {"similarity", "cosine", SP_AGREE_ARRAY},
    {"similarity", "block_influence", SP_AGREE_ARRAY},
    {"similarity", "adjacent_cosine_deep_half", SP_AGREE_SCALAR},
    {"cka", "cka", SP_AGREE_ARRAY},
    {"cka", "hsic", SP_AGREE_ARRAY},
    {"growth", "rms", SP_AGREE_ARRAY},
    {"growth", "top_abs", SP_AGREE_ARRAY},
    {"growth", "median_abs", SP_AGREE_ARRAY},
    {"presums", "sigma_a", SP_AGREE_ARRAY},
    {"presums", "rms_z", SP_AGREE_ARRAY},
    {"hidden_spectra", "eigenvalues", SP_AGREE_ARRAY},
    {"hidden_spectra", "soft_rank", SP_AGREE_ARRAY},
    {"ffn_spectra", "eigenvalues", SP_AGREE_ARRAY},
    {"ffn_spectra", "hard_rank", SP_AGREE_ARRAY},
    {"ffn_spectra", "edr", SP_AGREE_SCALAR},
    {"attention", "entropy", SP_AGREE_ARRAY},
    {"attention", "sink_mass", SP_AGREE_ARRAY},
    {"attention", "distance", SP_AGREE_ARRAY},
    {"attention", "max_logit", SP_AGREE_ARRAY},
    {"attention", "head_cosine", SP_AGREE_ARRAY},
    {"attention", "entropy_normalized_block_min", SP_AGREE_SCALAR},
    {"grad_norms", "tensor", SP_AGREE_ARRAY},
    {"grad_norms", "ffn", SP_AGREE_ARRAY},
    {"grad_norms", "loss", SP_AGREE_SCALAR},
    {"jacobian", "sigma_max", SP_AGREE_ARRAY},
    {"jacobian", "topk", SP_AGREE_ARRAY},
    {"jacobian", "e2e_sigma_max", SP_AGREE_ARRAY},
    {"jacobian", "token_sigma_max", SP_AGREE_ARRAY},
    {"jacobian", "bound", SP_AGREE_ARRAY},
    {"weights", "kappa", SP_AGREE_ARRAY},
    {"weights", "spectral_norm", SP_AGREE_ARRAY},
    {"weights", "heads_wq", SP_AGREE_ARRAY},
    {"embed_spectrum", "tok_eigvals", SP_AGREE_ARRAY},
    {"pruning", "loss_skip_block", SP_AGREE_ARRAY},
    {"pruning", "delta_drop_last", SP_AGREE_ARRAY},
    {"pruning", "base_loss", SP_AGREE_SCALAR},
};

static int has_array(const report_view *v, const char *analyzer, const char *name)
{
    char **names = NULL;
    int n = 0, found = 0;
    assert_int_equal(sp_report_list(v->reader, analyzer, &names, &n), SP_OK);
    for (int i = 0; i < n && !found; i++)
        found = strcmp(names[i], name) == 0;
    sp_report_names_free(names, n);
    return found;
}

/* analyzer/name of `other` agrees with `ref`'s under the table's tolerance; the failure names it. */
static void expect_agrees(const char *who, const report_view *ref, const report_view *other, const char *analyzer,
                          const char *name, sp_agree_kind kind)
{
    const sp_tolerance *t = sp_tolerance_find(kind, analyzer, name);
    assert_true(t->compared);
    int rank = 0, rank_o = 0;
    int64_t shape[4] = {0}, shape_o[4] = {0};
    double a_value, b_value, *a = &a_value, *b = &b_value;
    size_t n = 1;
    if (kind == SP_AGREE_SCALAR) {
        a_value = report_view_scalar(ref, analyzer, name);
        b_value = report_view_scalar(other, analyzer, name);
    } else {
        if (!has_array(other, analyzer, name))
            fail_msg("%s: /metrics/%s/%s is missing from the CUDA report", who, analyzer, name);
        a = report_view_array(ref, analyzer, name, &rank, shape);
        b = report_view_array(other, analyzer, name, &rank_o, shape_o);
        assert_int_equal(rank, rank_o);
        for (int i = 0; i < rank; i++) {
            assert_int_equal(shape[i], shape_o[i]);
            n *= (size_t)shape[i];
        }
    }
    sp_agreement g;
    sp_agreement_check(a, b, n, t->atol, t->rtol, t->absolute, &g);
    if (!sp_agreement_pass(&g))
        fail_msg("%s: %s/%s entry %lld of %zu: reference %.9g, CUDA %.9g (%lld beyond tolerance, %lld NaN/Inf "
                 "mismatches; allowed %.3g + %.3g |a|: %s)",
                 who, analyzer, name, (long long)g.worst, n, a[g.worst], b[g.worst], (long long)g.n_outside,
                 (long long)g.n_nonfinite, g.abs_term, t->rtol, t->reason);
    if (a != &a_value) {
        free(a);
        free(b);
    }
}

/* Every analyzer the reference ran also ran on the GPU, and the checked metrics agree. */
static void expect_metrics_agree(const char *who, const char *ref_path, const char *cuda_path)
{
    report_view ref, cuda;
    report_view_open(&ref, ref_path);
    report_view_open(&cuda, cuda_path);
    for (size_t i = 0; i < sizeof checked / sizeof checked[0]; i++) {
        const char *an = checked[i].analyzer, *cuda_skipped = report_view_skipped(&cuda, an);
        if (report_view_skipped(&ref, an))
            continue; /* not for this model (presums of pre) */
        if (cuda_skipped)
            fail_msg("%s: the CUDA report skipped %s (%s), the reference ran it", who, an, cuda_skipped);
        expect_agrees(who, &ref, &cuda, an, checked[i].name, checked[i].kind);
        char y_name[128];
        snprintf(y_name, sizeof y_name, "%s_y", checked[i].name);
        if (checked[i].kind == SP_AGREE_ARRAY && has_array(&ref, an, y_name))
            expect_agrees(who, &ref, &cuda, an, y_name, SP_AGREE_ARRAY);
    }
    report_view_close(&ref);
    report_view_close(&cuda);
}

/* The three reports of one checkpoint, both comparisons through the CLI, the direct checks; `label`
 * names the files and the failures. */
static void check_variant(const char *label, const char *variant, const char *const *model_args)
{
    require_fp32_gpu();
    char name[64], ckpt[4200], tokens[4200], cpu[4200], cuda[4200], f64[4200];
    const char *init_args[32] = {"--variant", variant};
    int n = 2;
    /* The common shape first: an option a test names again comes later and wins. */
    const char *const common[] = {MODEL_ARGS, "--seed", "5", NULL};
    for (int i = 0; common[i]; i++)
        init_args[n++] = common[i];
    for (int i = 0; model_args[i]; i++)
        init_args[n++] = model_args[i];
    init_args[n] = NULL;
    snprintf(name, sizeof name, "%s.h5", label);
    analyze_cli_init(name, init_args, ckpt, sizeof ckpt);
    analyze_cli_tokens("tokens.txt", 1200, 64, 9, tokens, sizeof tokens);
    const char *const opts[] = {ANALYZE_ARGS, NULL};
    snprintf(name, sizeof name, "%s_cpu.h5", label);
    analyze_cli_run(NULL, ckpt, tokens, "cpu", opts, name, cpu, sizeof cpu);
    snprintf(name, sizeof name, "%s_cuda.h5", label);
    analyze_cli_run(NULL, ckpt, tokens, "cuda", opts, name, cuda, sizeof cuda);
    snprintf(name, sizeof name, "%s_f64.h5", label);
    analyze_cli_run(analyze_cli_f64_bin(), ckpt, tokens, "cpu", opts, name, f64, sizeof f64);

    cli_expect_exit(0, (const char *[]){"compare", cpu, cuda, "--quiet", NULL}, NULL, NULL);
    cli_expect_exit(0, (const char *[]){"compare", f64, cuda, "--quiet", NULL}, NULL, NULL);
    char who[96];
    snprintf(who, sizeof who, "%s, fp32 CPU vs CUDA", label);
    expect_metrics_agree(who, cpu, cuda);
    snprintf(who, sizeof who, "%s, fp64 CPU vs CUDA", label);
    expect_metrics_agree(who, f64, cuda);
}

static void test_pre(void **state)
{
    (void)state;
    check_variant("pre", "pre", (const char *const[]){"--tie-embeddings", "true", NULL});
}

/* d_ff 320: the FFN covariances in three bands of SP_MOMENTS_BAND rows (128, 128, 64), the GPU's
 * products on sub-blocks at offsets (analyzers/moments.c). */
static void test_pre_ffn_bands(void **state)
{
    (void)state;
    check_variant("pre_ffn_bands", "pre", (const char *const[]){"--d-ff", "320", NULL});
}

static void test_post(void **state)
{
    (void)state;
    check_variant("post", "post", (const char *const[]){NULL});
}

static void test_span_rmsnorm_swiglu_rope(void **state)
{
    (void)state;
    check_variant("span", "span",
                  (const char *const[]){"--norm", "rmsnorm", "--ffn", "swiglu", "--pos", "rope", NULL});
}

static void test_siamese(void **state)
{
    (void)state;
    check_variant("siamese", "siamese", (const char *const[]){"--norm", "rmsnorm", NULL});
}

static void test_mixln_swiglu(void **state)
{
    (void)state;
    check_variant("mixln", "mixln", (const char *const[]){"--ffn", "swiglu", NULL});
}

static void test_olmo2_rope(void **state)
{
    (void)state;
    check_variant("olmo2", "olmo2",
                  (const char *const[]){"--norm", "rmsnorm", "--ffn", "swiglu", "--pos", "rope", NULL});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pre),          cmocka_unit_test(test_pre_ffn_bands), cmocka_unit_test(test_post),
        cmocka_unit_test(test_span_rmsnorm_swiglu_rope), cmocka_unit_test(test_siamese),
        cmocka_unit_test(test_mixln_swiglu), cmocka_unit_test(test_olmo2_rope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* `spanprobe drift` (analyzers/drift.h) on the CPU, float32:
 * - a model against itself: exactly 0 relative error (hidden states, every weight matrix), cosine 1,
 *   CKA 1, KL 0 for every token, top-1 agreement 1;
 * - the perturbed copies of fixtures/hf/llama-f32 (tools/drift_ref) against the float64 numbers the
 *   generator computed with numpy from its own float64 forward: every array and summary to 1e-4
 *   relative (KL values to 2e-4 + 1e-7 nats), top-1 matches equal except at near-ties (margin < 1e-3);
 *   drift grows with the noise;
 * - GGUF copies of one tiny model (fixtures/gguf_models, when present; skipped with one line
 *   otherwise): Q8_0 drifts least and Q2_K most (KL mean and final-layer relative error), and their
 *   numbers equal the generator's gguf mode (fixtures/drift/gguf_ref.json) when it has been run. */
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

#include "analyzers/drift.h"
#include "io/model_source.h"
#include "support/drift_ref.h"
#include "support/json_file.h"
#include "support/report_view.h"
#include "support/scratch.h"

static void all_equal(const report_view *v, const char *name, double want)
{
    int rank;
    int64_t shape[4] = {1, 1, 1, 1};
    double *x = report_view_array(v, SP_DRIFT_GROUP, name, &rank, shape);
    for (int64_t i = 0; i < shape[0] * (rank > 1 ? shape[1] : 1); i++)
        if (!isnan(x[i]) && x[i] != want) /* NaN: a matrix the model lacks */
            fail_msg("self drift: %s[%lld] = %.17g, expected exactly %g", name, (long long)i, x[i], want);
    free(x);
}

static void test_self(void **state)
{
    (void)state;
    char report[4200];
    drift_ref_run("fixtures/hf/llama-f32", "fixtures/hf/llama-f32", DRIFT_REF_TOKENS, "self", report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    all_equal(&v, "rel_error", 0);
    all_equal(&v, "cosine", 1);
    all_equal(&v, "cka", 1);
    all_equal(&v, "kl", 0);
    all_equal(&v, "top1_match", 1);
    static const char *const zero_arrays[] = {"weight_rel_frobenius", "weight_rel_spectral",
                                              "weight_rel_frobenius_global", "weight_rel_spectral_global"};
    for (size_t i = 0; i < SP_ARRAY_LEN(zero_arrays); i++)
        all_equal(&v, zero_arrays[i], 0);
    static const struct {
        const char *key;
        double want;
    } scalars[] = {{"kl_mean", 0},  {"kl_p50", 0},        {"kl_p99", 0},         {"kl_max", 0},
                   {"top1_agreement", 1}, {"rel_error_max", 0}, {"cosine_min", 1}, {"cka_min", 1},
                   {"loss_increase", 0}, {"weight_rel_spectral_max", 0}, {"tokens", 128}};
    for (size_t i = 0; i < SP_ARRAY_LEN(scalars); i++)
        if (report_view_scalar(&v, SP_DRIFT_GROUP, scalars[i].key) != scalars[i].want)
            fail_msg("self drift: %s = %.17g, expected exactly %g", scalars[i].key,
                     report_view_scalar(&v, SP_DRIFT_GROUP, scalars[i].key), scalars[i].want);
    report_view_close(&v);
}

static void test_noise_refs(void **state)
{
    (void)state;
    const drift_ref_tolerance tol = {.rel = 1e-4, .abs = 1e-9, .kl_rel = 2e-4, .kl_abs = 1e-7, .margin = 1e-3};
    double kl[DRIFT_REF_N_COPIES], err[DRIFT_REF_N_COPIES];
    drift_ref_check_copies(&tol, kl, err);
    for (int i = 1; i < DRIFT_REF_N_COPIES; i++)
        assert_true(kl[i] > kl[i - 1] && err[i] > err[i - 1]); /* more noise, more drift */
}

/* ---- GGUF quantized copies ---- */

#define GGUF_DIR "fixtures/gguf_models"
static const char *const gguf_types[] = {"f16",  "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                         "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"};

/* DRIFT_REF_TOKENS with every id taken modulo the GGUF model's vocabulary (tools/drift_ref does the
 * same), into a scratch file. */
static void gguf_tokens(const char *model, char *path, size_t len)
{
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    if (sp_model_source_read_meta(model, &meta) != SP_OK)
        fail_msg("%s: %s", model, sp_error_message());
    const int vocab = meta.cfg.vocab_size;
    sp_ckpt_meta_free(&meta);
    char *text = scratch_read_file(DRIFT_REF_TOKENS, NULL);
    assert_non_null(text);
    size_t cap = strlen(text) + 1, used = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    for (char *tok = strtok(text, " \n"); tok; tok = strtok(NULL, " \n"))
        used += (size_t)snprintf(out + used, cap - used, "%ld ", strtol(tok, NULL, 10) % vocab);
    scratch_path(path, len, "gguf_tokens.txt");
    assert_int_equal(scratch_write_file(path, out, used), 0);
    free(text);
    free(out);
}

static void test_gguf_order(void **state)
{
    (void)state;
    if (!scratch_file_exists(GGUF_DIR "/manifest.json")) {
        print_message("skipped: " GGUF_DIR " is absent (the GGUF model fixtures come from their own generator)\n");
        skip();
    }
    char tokens[4200];
    gguf_tokens(GGUF_DIR "/llama-f32.gguf", tokens, sizeof tokens);
    cJSON *refs = scratch_file_exists("fixtures/drift/gguf_ref.json") ? json_file_read("fixtures/drift/gguf_ref.json")
                                                                       : NULL;
    if (!refs)
        print_message("fixtures/drift/gguf_ref.json absent: the order is checked, not the numbers "
                      "(tools/drift_ref/generate.py gguf writes it)\n");
    const drift_ref_tolerance tol = {.rel = 1e-4, .abs = 1e-9, .kl_rel = 2e-4, .kl_abs = 1e-7, .margin = 1e-3};
    double kl[SP_ARRAY_LEN(gguf_types)], err[SP_ARRAY_LEN(gguf_types)];
    int q8 = -1, q2 = -1;
    for (size_t i = 0; i < SP_ARRAY_LEN(gguf_types); i++) {
        char file[64], model[256], name[64], report[4200];
        snprintf(file, sizeof file, "llama-%s.gguf", gguf_types[i]);
        snprintf(model, sizeof model, GGUF_DIR "/%s", file);
        snprintf(name, sizeof name, "gguf_%s", gguf_types[i]);
        drift_ref_run(GGUF_DIR "/llama-f32.gguf", model, tokens, name, report, sizeof report);
        kl[i] = drift_ref_scalar(report, "kl_mean");
        err[i] = drift_ref_scalar(report, "rel_error_final");
        print_message("%-5s KL mean %.4g nats, final-layer relative error %.4g\n", gguf_types[i], kl[i], err[i]);
        q8 = strcmp(gguf_types[i], "q8_0") == 0 ? (int)i : q8;
        q2 = strcmp(gguf_types[i], "q2_k") == 0 ? (int)i : q2;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(refs, "models"), file);
        if (want)
            drift_ref_check(report, want, &tol);
    }
    cJSON_Delete(refs);
    for (size_t i = 0; i < SP_ARRAY_LEN(gguf_types); i++) {
        if ((int)i == q8 || strcmp(gguf_types[i], "f16") == 0) /* F16 is not a quantization below Q8_0 */
            continue;
        assert_true(kl[q8] < kl[i] && err[q8] < err[i]);
        if ((int)i != q2)
            assert_true(kl[q2] > kl[i] && err[q2] > err[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self),
        cmocka_unit_test(test_noise_refs),
        cmocka_unit_test(test_gguf_order),
    };
    return cmocka_run_group_tests_name("test_drift", tests, NULL, NULL);
}

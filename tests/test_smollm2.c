/* The tests' real model, SmolLM2-135M-Instruct in GGUF (Q4_1 matrices, Q8_0 embedding; fetched into
 * data/models/ by tools/fetch_smollm2.sh), through the commands a researcher runs on it, against the
 * references of tools/smollm2_ref (fixtures/smollm2/manifest.json): `tokenize` (transformers' ids on
 * 64 KiB of Moby Dick and on the committed excerpt), `dump --logits` (the float64 logits), `generate
 * --temperature 0` (transformers' greedy text) and a default `analyze` on Moby Dick (every analyzer
 * runs, the stage table is printed; plain build only: minutes under ASan). Without the model every
 * test skips, saying why once. */
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

#include "analyzers/analyzer.h"
#include "core/sha256.h"
#include "io/dump.h"
#include "support/cli_expect.h"
#include "support/json_file.h"
#include "support/report_view.h"
#include "support/scratch.h"

#define MODEL "data/models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define REF "fixtures/smollm2/"
#define TEXT "data/mobydick.txt"

/* Logits: spanprobe computes in float32, the reference in float64 on the same dequantized weights.
 * transformers' own float32 forward is within 2.2e-6 of max|logit| (41.0) of it on these 64 tokens
 * (manifest: logits.transformers_f32_max_abs_diff_rel): rounding through 30 blocks in another
 * summation order stays well inside 1e-4, while a wrong op (a norm, RoPE, one dequantized block)
 * moves logits by percents. */
#define LOGITS_RTOL 1e-4

static const char *skip_reason(void)
{
    static char why[256];
    static int probed;
    if (probed++)
        return why[0] ? why : NULL;
    if (!scratch_file_exists(MODEL)) {
        snprintf(why, sizeof why, "%s absent (tools/fetch_smollm2.sh)", MODEL);
        return why;
    }
    if (!getenv("SPANPROBE_BIN"))
        snprintf(why, sizeof why, "SPANPROBE_BIN is not set");
    return why[0] ? why : NULL;
}

/* The manifest (the group state), or a skip that prints its reason once for the whole file. */
static cJSON *need_model(void **state)
{
    static int said;
    const char *why = skip_reason();
    if (why) {
        if (!said++)
            print_message("skipped: %s\n", why);
        skip();
    }
    return *state;
}

static int read_manifest(void **state)
{
    *state = json_file_read(REF "manifest.json");
    return 0;
}

static int free_manifest(void **state)
{
    cJSON_Delete(*state);
    return 0;
}

static const cJSON *item(const cJSON *o, const char *path)
{
    char key[128];
    const char *dot;
    while ((dot = strchr(path, '.'))) {
        snprintf(key, sizeof key, "%.*s", (int)(dot - path), path);
        o = cJSON_GetObjectItemCaseSensitive(o, key);
        path = dot + 1;
    }
    o = cJSON_GetObjectItemCaseSensitive(o, path);
    if (!o)
        fail_msg("manifest.json: no %s", path);
    return o;
}

/* The same ids, whatever whitespace separates them; the first difference is reported by index. */
static void assert_same_ids(const char *got, const char *want, const char *what)
{
    char *a = strdup(got), *b = strdup(want), *sa = NULL, *sb = NULL;
    char *ta = strtok_r(a, " \n", &sa), *tb = strtok_r(b, " \n", &sb);
    long i = 0;
    for (; ta && tb && strcmp(ta, tb) == 0; i++) {
        ta = strtok_r(NULL, " \n", &sa);
        tb = strtok_r(NULL, " \n", &sb);
    }
    if (ta || tb)
        fail_msg("%s: id %ld is %s, transformers has %s", what, i, ta ? ta : "(end)", tb ? tb : "(end)");
    free(a);
    free(b);
}

/* `tokenize MODEL --text text_path` (and with --no-bos) against the ids file of the reference. */
static void check_tokenize(const cJSON *ref, const char *text_path, const char *what)
{
    char ids_path[512];
    snprintf(ids_path, sizeof ids_path, REF "%s", item(ref, "ids_file")->valuestring);
    char *want = scratch_read_file(ids_path, NULL);
    assert_non_null(want);
    /* transformers' GGUF tokenizer adds no BOS (tokenizer.ggml.add_bos_token false): both runs agree */
    assert_true(cJSON_IsTrue(item(ref, "same_without_special_tokens")));
    static const char *const flags[] = {NULL, "--no-bos"};
    for (int f = 0; f < 2; f++) {
        char *out = NULL;
        const char *const args[] = {"tokenize", MODEL, "--text", text_path, flags[f], NULL};
        cli_expect_exit(0, args, &out, NULL);
        assert_same_ids(out, want, what);
        free(out);
    }
    free(want);
}

static void test_tokenize_excerpt(void **state)
{
    const cJSON *tok = item(need_model(state), "tokenizer");
    check_tokenize(item(tok, "excerpt"), REF "mobydick_head.txt", "mobydick_head.txt");
}

/* 64 KiB of data/mobydick.txt (`make data`), checked to be the bytes the reference tokenized. */
static void test_tokenize_long_span(void **state)
{
    const cJSON *span = item(item(need_model(state), "tokenizer"), "span");
    size_t len = 0;
    char *text = scratch_read_file(TEXT, &len);
    if (!text) {
        print_message("skipped: %s absent (make data)\n", TEXT);
        skip();
    }
    const size_t n = (size_t)cJSON_GetArrayItem(item(span, "bytes"), 1)->valuedouble;
    assert_true(n <= len);
    sp_sha256 h;
    unsigned char digest[32];
    char hex[65], path[1024];
    assert_int_equal(sp_sha256_init(&h), SP_OK);
    sp_sha256_update(&h, text, n);
    sp_sha256_final(&h, digest);
    sp_sha256_hex(digest, hex);
    assert_string_equal(hex, item(span, "sha256")->valuestring);
    scratch_path(path, sizeof path, "mobydick_span.txt");
    assert_int_equal(scratch_write_file(path, text, n), 0);
    free(text);
    check_tokenize(span, path, "64 KiB of " TEXT);
}

/* `dump --logits` on the reference's 64 tokens: the recorded positions within LOGITS_RTOL of the
 * float64 logits, and the argmax at every position where top-1 leads top-2 by more than twice that. */
static void test_dump_logits(void **state)
{
    const cJSON *ref = item(need_model(state), "logits");
    char out[1024];
    scratch_path(out, sizeof out, "smollm2_logits.h5");
    const char *const args[] = {"dump", MODEL, "--tokens", REF "logits_tokens.ids", "--seq", "64", "--logits",
                                "--device", "cpu", "--out", out, NULL};
    cli_expect_exit(0, args, NULL, NULL);
    sp_dump *d = NULL;
    assert_int_equal(sp_dump_open(out, &d), SP_OK);
    const int vocab = sp_dump_get_info(d)->vocab_size, rows = (int)sp_dump_rows(d);
    assert_int_equal(vocab, 49152);
    assert_int_equal(rows, 64);
    sp_real *logits = malloc((size_t)rows * (size_t)vocab * sizeof *logits);
    assert_int_equal(sp_dump_read(d, SP_DUMP_LOGITS, 0, 0, 0, rows, logits), SP_OK);
    sp_dump_close(d);

    size_t len = 0;
    float *want = (float *)scratch_read_file(REF "logits_f64.f32", &len);
    const int n_pos = cJSON_GetArraySize(item(ref, "positions"));
    assert_int_equal(len, (size_t)n_pos * (size_t)vocab * sizeof *want);
    const double scale = item(ref, "max_abs")->valuedouble, tol = LOGITS_RTOL * scale;
    double diff = 0;
    for (int p = 0; p < n_pos; p++) {
        const int pos = cJSON_GetArrayItem(item(ref, "positions"), p)->valueint;
        for (int v = 0; v < vocab; v++)
            diff = fmax(diff, fabs((double)logits[(size_t)pos * vocab + v] - want[(size_t)p * vocab + v]));
    }
    print_message("dump logits within %.3g of max|logit| (%.4g)\n", diff / scale, scale);
    assert_true(diff <= tol);
    int clear = 0;
    for (int pos = 0; pos < rows; pos++) {
        if (cJSON_GetArrayItem(item(ref, "top1_minus_top2"), pos)->valuedouble <= 2 * tol)
            continue;
        int best = 0;
        for (int v = 1; v < vocab; v++)
            if (logits[(size_t)pos * vocab + v] > logits[(size_t)pos * vocab + best])
                best = v;
        assert_int_equal(best, cJSON_GetArrayItem(item(ref, "argmax"), pos)->valueint);
        clear++;
    }
    print_message("argmax equal at the %d of %d positions with a clear top-1\n", clear, rows);
    free(want);
    free(logits);
}

/* `generate --temperature 0` prints what transformers' greedy decoding gives, prompt included. The
 * reference's top-1 leads top-2 by more than twice the logits' tolerance at every step (the prompt
 * was chosen so; checked here), so the text must be the same to the byte. The chat run's prompt holds
 * <|im_start|> and <|im_end|>, this model's BOS and EOS ids: generate prints them as the prompt's
 * text and stops only at a generated EOS. */
static void test_generate_greedy(void **state)
{
    const cJSON *runs = item(need_model(state), "greedy"), *run;
    const double scale = item(item(*state, "logits"), "max_abs")->valuedouble;
    assert_int_equal(cJSON_GetArraySize(runs), 2); /* a plain prompt, and a chat template stopped by EOS */
    cJSON_ArrayForEach(run, runs)
    {
        assert_true(item(run, "min_margin_f64")->valuedouble > 2 * LOGITS_RTOL * scale);
        char steps[32], *out = NULL;
        snprintf(steps, sizeof steps, "%d", item(run, "steps_arg")->valueint);
        const char *const args[] = {"generate", MODEL, "--prompt", item(run, "prompt")->valuestring, "--steps", steps,
                                    "--temperature", "0", "--device", "cpu", NULL};
        cli_expect_exit(0, args, &out, NULL);
        assert_string_equal(out, item(run, "stdout")->valuestring);
        free(out);
    }
}

/* `drift` on a real model: SmolLM2 against its own `import gguf` copy (the same float32 weights in a
 * spanprobe checkpoint) drifts by exactly nothing, through every part of the report. */
static void test_drift_self(void **state)
{
    need_model(state);
    char ckpt[1024], report[1024], summary[1100];
    scratch_path(ckpt, sizeof ckpt, "smollm2.h5");
    scratch_path(report, sizeof report, "smollm2_drift.h5");
    cli_expect_exit(0, (const char *[]){"import", "gguf", MODEL, ckpt, NULL}, NULL, NULL);
    cli_expect_exit(0, (const char *[]){"drift", MODEL, ckpt, "--data", REF "mobydick_head.txt", "--n-tokens", "256",
                                        "--seq", "64", "--device", "cpu", "--quiet", "--out", report, NULL},
                    NULL, NULL);
    snprintf(summary, sizeof summary, "%.*s.json", (int)(strlen(report) - 3), report);
    cJSON *doc = json_file_read(summary);
    const cJSON *drift = item(item(doc, "metrics"), "drift");
    static const char *const zero[] = {"kl_mean", "kl_max", "rel_error_final", "rel_error_max",
                                       "weight_rel_frobenius_max", "weight_rel_spectral_max",
                                       "tok_embed_rel_frobenius"};
    for (size_t i = 0; i < SP_ARRAY_LEN(zero); i++)
        assert_true(item(drift, zero[i])->valuedouble == 0);
    assert_true(item(drift, "top1_agreement")->valuedouble == 1);
    cJSON_Delete(doc);
}

/* A default `analyze` on Moby Dick: every analyzer ran and the stage table is printed. Minutes on
 * two cores: only in the plain build (ASan makes it several times slower). */
static void test_analyze_default(void **state)
{
    need_model(state);
#ifdef __SANITIZE_ADDRESS__
    print_message("skipped: analyze of SmolLM2 under ASan (minutes; the plain build runs it)\n");
    skip();
#endif
    char text[1024], report[1024], *out = NULL;
    if (scratch_file_exists(TEXT))
        snprintf(text, sizeof text, "%s", TEXT);
    else if (!scratch_shared_data("mobydick.txt", text, sizeof text)) {
        print_message("skipped: %s absent (make data)\n", TEXT);
        skip();
    }
    scratch_path(report, sizeof report, "smollm2_report.h5");
    const char *const args[] = {"analyze", MODEL, "--data", text, "--device", "cpu", "--out", report, NULL};
    cli_expect_exit(0, args, &out, NULL);
    assert_non_null(strstr(out, "stage"));
    assert_non_null(strstr(out, "peak memory"));
    free(out);
    report_view v;
    report_view_open(&v, report);
    /* every analyzer ran, but presums: a pre-norm Llama has no pre-normalization sums (SpanNorm's) */
    for (int i = 0; i < sp_n_analyzers; i++) {
        const char *name = sp_analyzers[i]->name, *why = report_view_skipped(&v, name);
        if (strcmp(name, "presums") == 0)
            assert_true(why && strstr(why, "no pre-normalization sums"));
        else if (why)
            fail_msg("%s skipped: %s", name, why);
    }
    report_view_close(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenize_excerpt), cmocka_unit_test(test_tokenize_long_span),
        cmocka_unit_test(test_dump_logits),      cmocka_unit_test(test_generate_greedy),
        cmocka_unit_test(test_drift_self),        cmocka_unit_test(test_analyze_default),
    };
    return cmocka_run_group_tests(tests, read_manifest, free_manifest);
}

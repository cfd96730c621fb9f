#include "gguf_model_ref.h"

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
#include "json_file.h"
#include "scratch.h"

static const cJSON *manifest_entry(cJSON *manifest, const char *file)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(manifest, "models"))
    {
        if (strcmp(cJSON_GetObjectItem(e, "file")->valuestring, file) == 0)
            return e;
    }
    fail_msg("%s is not in %s/manifest.json", file, GGUF_MODELS_DIR);
    return NULL;
}

double gguf_model_ref_compare(const sp_real *got, const char *ref_file, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", GGUF_MODELS_DIR, ref_file);
    size_t len = 0;
    char *bytes = scratch_read_file(path, &len);
    assert_non_null(bytes);
    assert_int_equal(len, n * sizeof(double));
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        double want;
        memcpy(&want, bytes + i * sizeof want, sizeof want);
        diff = fmax(diff, fabs((double)got[i] - want));
        scale = fmax(scale, fabs(want));
    }
    free(bytes);
    return diff / scale;
}

double gguf_model_ref_error(sp_model *m, const char *file)
{
    cJSON *manifest = json_file_read(GGUF_MODELS_DIR "/manifest.json");
    const cJSON *e = manifest_entry(manifest, file), *ref = cJSON_GetObjectItem(e, "logits_f64");
    const cJSON *shape = cJSON_GetObjectItem(ref, "shape");
    const int batch = cJSON_GetArrayItem(shape, 0)->valueint, seq = cJSON_GetArrayItem(shape, 1)->valueint;
    const int vocab = cJSON_GetArrayItem(shape, 2)->valueint;
    assert_int_equal(vocab, sp_model_config(m)->vocab_size);
    int32_t *tokens = malloc((size_t)batch * (size_t)seq * sizeof *tokens);
    assert_non_null(tokens);
    int k = 0;
    const cJSON *row, *v;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(e, "tokens"))
    {
        cJSON_ArrayForEach(v, row) tokens[k++] = v->valueint;
    }
    assert_int_equal(k, batch * seq);
    assert_int_equal(sp_model_forward(m, tokens, NULL, batch, seq, NULL), SP_OK);
    const double err = gguf_model_ref_compare(sp_model_logits(m), cJSON_GetObjectItem(ref, "file")->valuestring,
                                              (size_t)k * (size_t)vocab);
    free(tokens);
    cJSON_Delete(manifest);
    return err;
}

static double run_tol;

static void run_one(void **state)
{
    const char *file = *state;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", GGUF_MODELS_DIR, file);
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    sp_error_clear();
    if (sp_model_source_load(path, sp_backend_cpu(), &m, &meta) != SP_OK)
        fail_msg("%s: %s", file, sp_error_message());
    const double err = gguf_model_ref_error(m, file);
    print_message("%s: logits within %.3g of max|logit|\n", file, err);
    if (!(err <= run_tol))
        fail_msg("%s: logits differ by %.3g of max|logit| (tolerance %.3g)", file, err, run_tol);
    sp_model_free(m);
    sp_ckpt_meta_free(&meta);
}

int gguf_model_ref_run_all(const char *group, double tol)
{
    cJSON *manifest = json_file_read(GGUF_MODELS_DIR "/manifest.json");
    const cJSON *models = cJSON_GetObjectItem(manifest, "models"), *e;
    const int n = cJSON_GetArraySize(models);
    struct CMUnitTest *tests = calloc((size_t)n, sizeof *tests);
    assert_non_null(tests);
    int i = 0;
    cJSON_ArrayForEach(e, models)
    {
        const char *file = cJSON_GetObjectItem(e, "file")->valuestring;
        tests[i++] = (struct CMUnitTest){.name = file, .test_func = run_one, .initial_state = (void *)file};
    }
    run_tol = tol;
    int failed = _cmocka_run_group_tests(group, tests, (size_t)n, NULL, NULL);
    free(tests);
    cJSON_Delete(manifest);
    return failed;
}

#include "hf_ref.h"

#include <cJSON.h>
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/hf_config.h"
#include "io/hf_dir.h"
#include "json_file.h"
#include "scratch.h"

#define REF_DIR "fixtures/hf/ref"

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char **ref_names(int *n)
{
    *n = 0;
    DIR *d = opendir(REF_DIR);
    assert_non_null(d);
    char **names = calloc(256, sizeof *names);
    assert_non_null(names);
    for (struct dirent *e; (e = readdir(d)) && *n < 255;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0) {
            names[*n] = strndup(e->d_name, len - 5);
            (*n)++;
        }
    }
    closedir(d);
    qsort(names, (size_t)*n, sizeof *names, compare_names);
    return names;
}

static void ref_names_free(char **names)
{
    for (int i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
}

/* A raw little-endian float64 array named by ref[key].file, of exactly n values. */
static double *read_array(const cJSON *ref, const char *key, size_t n)
{
    const cJSON *file = cJSON_GetObjectItem(cJSON_GetObjectItem(ref, key), "file");
    assert_true(cJSON_IsString(file));
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", REF_DIR, file->valuestring);
    size_t len = 0;
    char *bytes = scratch_read_file(path, &len);
    assert_non_null(bytes);
    assert_int_equal(len, n * sizeof(double));
    double *values = malloc(len);
    assert_non_null(values);
    memcpy(values, bytes, len);
    free(bytes);
    return values;
}

/* max |got - want| / max |want| over n values (got in sp_real, backend memory of the CPU). */
static double rel_error(const sp_real *got, const double *want, size_t n)
{
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)got[i] - want[i]));
        scale = fmax(scale, fabs(want[i]));
    }
    return diff / scale;
}

static void tokens_of(const cJSON *rows, int32_t *out, int ignore_as)
{
    int k = 0;
    const cJSON *row, *v;
    cJSON_ArrayForEach(row, rows)
    {
        cJSON_ArrayForEach(v, row) out[k++] = v->valueint == -100 ? ignore_as : v->valueint;
    }
}

/* The gradient norm of every stored tensor: the spanprobe parameters filled from it, summed. */
static void check_grads(sp_model *m, const sp_hf_config *hc, const cJSON *want, const char *name, double tol)
{
    double max_norm = 0, worst = 0;
    const cJSON *g;
    cJSON_ArrayForEach(g, want) max_norm = fmax(max_norm, g->valuedouble);
    cJSON *got = cJSON_CreateObject();
    char tensor[256];
    for (int i = 0; i < sp_model_n_params(m); i++) {
        const sp_param_spec *spec = sp_model_param_spec(m, i);
        assert_int_equal(sp_hf_param_tensor(hc, spec->name, tensor, sizeof tensor), SP_OK);
        const sp_real *grad = sp_model_grad(m, i);
        double sq = 0;
        for (size_t k = 0; k < sp_param_numel(spec); k++)
            sq += (double)grad[k] * (double)grad[k];
        cJSON *sum = cJSON_GetObjectItem(got, tensor);
        if (sum)
            cJSON_SetNumberValue(sum, sum->valuedouble + sq);
        else
            cJSON_AddNumberToObject(got, tensor, sq);
    }
    assert_int_equal(cJSON_GetArraySize(got), cJSON_GetArraySize(want));
    cJSON_ArrayForEach(g, want)
    {
        const cJSON *sq = cJSON_GetObjectItem(got, g->string);
        if (!sq)
            fail_msg("%s: no spanprobe parameter comes from tensor %s", name, g->string);
        double err = fabs(sqrt(sq->valuedouble) - g->valuedouble) / max_norm;
        if (err > tol)
            fail_msg("%s: gradient norm of %s: %.17g, reference %.17g (relative error %.3g > %.3g)", name, g->string,
                     sqrt(sq->valuedouble), g->valuedouble, err, tol);
        worst = fmax(worst, err);
    }
    print_message("%s: gradient norms within %.3g\n", name, worst);
    cJSON_Delete(got);
}

static void check_loaded(sp_model *m, const sp_hf_config *hc, const cJSON *ref, const char *name,
                         const hf_ref_tolerance *tol)
{
    const sp_config *cfg = sp_model_config(m);
    const cJSON *shape = cJSON_GetObjectItem(cJSON_GetObjectItem(ref, "logits_f64"), "shape");
    const int batch = cJSON_GetArrayItem(shape, 0)->valueint, seq = cJSON_GetArrayItem(shape, 1)->valueint;
    const size_t rows = (size_t)batch * (size_t)seq;
    int32_t *tokens = malloc(rows * sizeof *tokens), *targets = malloc(rows * sizeof *targets);
    assert_true(tokens && targets);
    tokens_of(cJSON_GetObjectItem(ref, "tokens"), tokens, -1);
    tokens_of(cJSON_GetObjectItem(ref, "targets"), targets, -1);
    double loss = 0;
    assert_int_equal(sp_model_forward(m, tokens, targets, batch, seq, &loss), SP_OK);

    double *logits = read_array(ref, "logits_f64", rows * (size_t)cfg->vocab_size);
    double err = rel_error(sp_model_logits(m), logits, rows * (size_t)cfg->vocab_size);
    print_message("%s: logits within %.3g of max|logit|\n", name, err);
    if (err > tol->logits)
        fail_msg("%s: logits differ by %.3g of max|logit| (tolerance %.3g)", name, err, tol->logits);
    free(logits);

    const size_t per_layer = rows * (size_t)cfg->d_model;
    double *hidden = read_array(ref, "hidden_f64", (size_t)(cfg->n_layers + 1) * per_layer);
    for (int l = 0; l <= cfg->n_layers; l++) {
        err = rel_error(sp_model_hidden(m, l, 0), hidden + (size_t)l * per_layer, per_layer);
        if (err > tol->hidden)
            fail_msg("%s: h_%d differs by %.3g of max|h| (tolerance %.3g)", name, l, err, tol->hidden);
    }
    free(hidden);

    const double want_loss = cJSON_GetObjectItem(ref, "loss_f64")->valuedouble;
    if (fabs(loss - want_loss) > tol->loss * want_loss)
        fail_msg("%s: loss %.17g, reference %.17g", name, loss, want_loss);
    assert_int_equal(sp_model_backward(m), SP_OK);
    check_grads(m, hc, cJSON_GetObjectItem(ref, "grad_norms_f64"), name, tol->grad);
    free(tokens);
    free(targets);
}

static void check_fixture(const char *name, const hf_ref_tolerance *tol)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.json", REF_DIR, name);
    cJSON *ref = json_file_read(path);
    char dir[1024], config[1100];
    snprintf(dir, sizeof dir, "fixtures/hf/%s", cJSON_GetObjectItem(ref, "directory")->valuestring);
    snprintf(config, sizeof config, "%s/config.json", dir);
    sp_hf_config hc;
    sp_error_clear();
    if (sp_hf_config_read(config, &hc) != SP_OK)
        fail_msg("%s: %s", name, sp_error_message());
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    if (sp_hf_load(dir, sp_backend_cpu(), &m, &meta) != SP_OK)
        fail_msg("%s: %s", name, sp_error_message());
    check_loaded(m, &hc, ref, name, tol);
    sp_model_free(m);
    sp_ckpt_meta_free(&meta);
    cJSON_Delete(ref);
}

static const hf_ref_tolerance *run_tolerance;

static void run_one(void **state)
{
    check_fixture(*state, run_tolerance);
}

int hf_ref_run_all(const char *group, const hf_ref_tolerance *tol)
{
    int n = 0;
    char **names = ref_names(&n);
    struct CMUnitTest *tests = calloc((size_t)n, sizeof *tests);
    assert_non_null(tests);
    for (int i = 0; i < n; i++)
        tests[i] = (struct CMUnitTest){.name = names[i], .test_func = run_one, .initial_state = names[i]};
    run_tolerance = tol;
    int failed = _cmocka_run_group_tests(group, tests, (size_t)n, NULL, NULL);
    free(tests);
    ref_names_free(names);
    return failed;
}

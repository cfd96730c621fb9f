/* PyTorch checkpoints (io/pt_file.h) written by torch.save (tools/pt_fixtures/generate.py, values in
 * fixtures/pt/expected.json): every tensor of a state dict (float32, float16, bfloat16, float64, a
 * transposed view and a row slice of one storage, a scalar) read as torch holds it; a nanoGPT-style
 * ckpt.pt's model tensors, model_args, iter_num and best_val_loss (a tensor); pickles that would run
 * os.system, eval or Popen refused naming the global, with no side effect (the marker file their
 * payload creates never appears); and every truncation of a good file a clean error, as is the
 * input with which the fuzzer found an overread (fuzz/fuzz_pt.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>
#include <cmocka.h>

#include "io/pt_file.h"
#include "support/scratch.h"

#define MARKER "/tmp/spanprobe-pt-marker"

static cJSON *expected(void)
{
    char *text = scratch_read_file("fixtures/pt/expected.json", NULL);
    assert_non_null(text);
    cJSON *j = cJSON_Parse(text);
    free(text);
    assert_non_null(j);
    return j;
}

/* tensor t holds exactly the values and shape of the expected entry e. */
static void expect_tensor(const sp_pt_file *f, const sp_pk_value *t, const cJSON *e, const char *name)
{
    if (!t || t->kind != SP_PK_TENSOR)
        fail_msg("%s: not a tensor", name);
    const cJSON *shape = cJSON_GetObjectItem(e, "shape"), *values = cJSON_GetObjectItem(e, "values");
    assert_int_equal(t->rank, cJSON_GetArraySize(shape));
    for (int k = 0; k < t->rank; k++)
        assert_int_equal(t->shape[k], cJSON_GetArrayItem(shape, k)->valueint);
    assert_string_equal(sp_pk_dtype_name(t->dtype), cJSON_GetObjectItem(e, "dtype")->valuestring);
    const size_t n = sp_pt_numel(t);
    assert_int_equal(n, cJSON_GetArraySize(values));
    if (t->dtype == SP_PK_I64)
        return;
    double *got = malloc((n ? n : 1) * sizeof *got);
    assert_non_null(got);
    assert_int_equal(sp_pt_read_f64(f, t, got), SP_OK);
    for (size_t i = 0; i < n; i++)
        if (got[i] != cJSON_GetArrayItem(values, (int)i)->valuedouble) /* widening is exact */
            fail_msg("%s[%zu] = %.17g, torch holds %.17g", name, i, got[i], cJSON_GetArrayItem(values, (int)i)->valuedouble);
    free(got);
}

static void test_state_dict(void **state)
{
    (void)state;
    cJSON *exp = expected(), *file = cJSON_GetObjectItem(cJSON_GetObjectItem(exp, "files"), "state.pt");
    sp_pt_file *f = NULL;
    sp_error_clear();
    assert_int_equal(sp_pt_open("fixtures/pt/state.pt", &f), SP_OK);
    const sp_pk_value *root = sp_pt_root(f);
    assert_int_equal(root->kind, SP_PK_DICT);
    int n = 0;
    for (const cJSON *e = file->child; e; e = e->next, n++)
        expect_tensor(f, sp_pk_get(root, e->string), e, e->string);
    assert_int_equal(root->n, n);
    sp_pt_close(f);
    cJSON_Delete(exp);
}

static void test_nanogpt_checkpoint(void **state)
{
    (void)state;
    cJSON *exp = expected(), *file = cJSON_GetObjectItem(cJSON_GetObjectItem(exp, "files"), "ckpt.pt");
    sp_pt_file *f = NULL;
    sp_error_clear();
    assert_int_equal(sp_pt_open("fixtures/pt/ckpt.pt", &f), SP_OK);
    const sp_pk_value *root = sp_pt_root(f), *model = sp_pk_get(root, "model"), *args = sp_pk_get(root, "model_args");
    for (const cJSON *e = cJSON_GetObjectItem(file, "model")->child; e; e = e->next)
        expect_tensor(f, sp_pk_get(model, e->string), e, e->string);
    for (const cJSON *e = cJSON_GetObjectItem(file, "model_args")->child; e; e = e->next) {
        const sp_pk_value *v = sp_pk_get(args, e->string);
        assert_non_null(v);
        if (cJSON_IsBool(e))
            assert_true(v->kind == SP_PK_BOOL && v->i == cJSON_IsTrue(e));
        else if (v->kind == SP_PK_INT)
            assert_int_equal(v->i, e->valueint);
        else
            assert_true(v->kind == SP_PK_FLOAT && v->f == e->valuedouble);
    }
    assert_int_equal(sp_pk_get(root, "iter_num")->i, 250);
    const sp_pk_value *loss = sp_pk_get(root, "best_val_loss");
    double v = 0;
    assert_int_equal(sp_pt_read_f64(f, loss, &v), SP_OK);
    assert_true(v == 1.875);
    sp_pt_close(f);
    cJSON_Delete(exp);
}

static void test_malicious_pickles_refused(void **state)
{
    (void)state;
    const char *files[] = {"evil_os_system.pt", "evil_eval.pt", "evil_popen.pt"};
    const char *globals[] = {"'posix.system'", "'__builtin__.eval'", "'commands.Popen'"};
    unlink(MARKER);
    for (int i = 0; i < 3; i++) {
        char path[256];
        snprintf(path, sizeof path, "fixtures/pt/%s", files[i]);
        sp_pt_file *f = NULL;
        sp_error_clear();
        assert_int_equal(sp_pt_open(path, &f), SP_ERR_INPUT);
        assert_null(f);
        if (!strstr(sp_error_message(), globals[i]) || !strstr(sp_error_message(), "is not allowed"))
            fail_msg("%s: %s", files[i], sp_error_message());
        assert_null(strchr(sp_error_message(), '\n'));
        assert_int_equal(access(MARKER, F_OK), -1);
    }
    sp_error_clear();
}

/* Every prefix of state.pt, and every byte of its pickle flipped: an error or a good read, never a
 * crash (the sanitizers watch the reads). */
static void test_damaged_files(void **state)
{
    (void)state;
    size_t len = 0;
    char *bytes = scratch_read_file("fixtures/pt/state.pt", &len);
    assert_non_null(bytes);
    char path[4200];
    scratch_path(path, sizeof path, "damaged.pt");
    for (size_t cut = 0; cut < len; cut += cut < 200 ? 1 : 37) {
        assert_int_equal(scratch_write_file(path, bytes, cut), 0);
        sp_pt_file *f = NULL;
        sp_error_clear();
        assert_int_equal(sp_pt_open(path, &f), SP_ERR_INPUT);
    }
    for (size_t at = 0; at < 700 && at < len; at++) { /* the pickle and the ZIP headers before it */
        bytes[at] ^= 0x5A;
        assert_int_equal(scratch_write_file(path, bytes, len), 0);
        bytes[at] ^= 0x5A;
        sp_pt_file *f = NULL;
        sp_error_clear();
        if (sp_pt_open(path, &f) == SP_OK)
            sp_pt_close(f);
    }
    sp_error_clear();
    free(bytes);
    /* what the fuzzer found: a file too short for the ZIP64 record its end record announces */
    sp_pt_file *f = NULL;
    assert_int_equal(sp_pt_open("fuzz/corpus/pt/regress-zip64-locator-short-file", &f), SP_ERR_INPUT);
    sp_error_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_dict),
        cmocka_unit_test(test_nanogpt_checkpoint),
        cmocka_unit_test(test_malicious_pickles_refused),
        cmocka_unit_test(test_damaged_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

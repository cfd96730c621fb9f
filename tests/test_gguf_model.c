/* GGUF models (tools/gguf_models) loaded in float32: logits of every architecture and every type
 * against the float64 references to float32 accuracy (test_gguf_model_f64.c: 1e-10), and `import
 * gguf`'s checkpoint: the same parameters, config and logits as the file read directly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "io/checkpoint.h"
#include "io/model_source.h"
#include "support/gguf_model_ref.h"
#include "support/scratch.h"

#define TOL 1e-5

static void load_ok(const char *path, sp_model **m, sp_ckpt_meta *meta)
{
    sp_error_clear();
    if (sp_model_source_load(path, sp_backend_cpu(), m, meta) != SP_OK)
        fail_msg("%s: %s", path, sp_error_message());
}

/* The checkpoint written from a GGUF model holds the same parameters and provenance. */
static void test_import_roundtrip(void **state)
{
    (void)state;
    const char *files[] = {"llama-q4_k.gguf", "hf-gpt2-f32.gguf", "hf-gemma2-f32.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char path[256], ckpt[512];
        snprintf(path, sizeof path, "%s/%s", GGUF_MODELS_DIR, files[f]);
        scratch_path(ckpt, sizeof ckpt, "roundtrip.h5");
        sp_model *direct = NULL, *imported = NULL;
        sp_ckpt_meta meta, meta2;
        load_ok(path, &direct, &meta);
        assert_int_equal(sp_model_source_kind_of(path), SP_SOURCE_GGUF);
        assert_non_null(strstr(meta.source, "import gguf "));
        assert_int_equal(sp_ckpt_write(ckpt, direct, &meta, NULL, NULL), SP_OK);
        load_ok(ckpt, &imported, &meta2);
        assert_string_equal(meta2.source, meta.source);
        assert_memory_equal(&meta2.cfg, &meta.cfg, sizeof meta.cfg);
        for (int i = 0; i < sp_model_n_params(direct); i++)
            assert_memory_equal(sp_model_param(direct, i), sp_model_param(imported, i),
                                sp_param_numel(sp_model_param_spec(direct, i)) * sizeof(sp_real));
        assert_true(gguf_model_ref_error(imported, files[f]) <= TOL);
        sp_model_free(direct);
        sp_model_free(imported);
        sp_ckpt_meta_free(&meta);
        sp_ckpt_meta_free(&meta2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_import_roundtrip)};
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return failed + gguf_model_ref_run_all("test_gguf_model", TOL);
}

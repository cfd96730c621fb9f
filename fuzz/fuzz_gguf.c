/* fuzz/fuzz_gguf.c: a GGUF file (io/gguf.h): every metadata value through its typed getter (array
 * elements, nested arrays one level down), every tensor of a readable type dequantized, 16 rows at
 * a time, and the tokenizer when there is one (io/gguf_tokenizer.h), used. fuzz_gguf_model.c reads
 * GGUF files as models. */
#include <stdlib.h>

#include "fuzz/temp_file.h"
#include "fuzz/use_tokenizer.h"
#include "io/gguf.h"
#include "io/gguf_tokenizer.h"

enum { ROWS = 16 };

static void read_element(const sp_gguf_array *a, size_t i, int depth)
{
    const char *s;
    uint64_t u;
    int64_t n;
    double f;
    int b;
    sp_gguf_array inner;
    switch (a->type) {
    case SP_GGUF_STRING: sp_gguf_array_string(a, i, &s, NULL); break;
    case SP_GGUF_FLOAT32:
    case SP_GGUF_FLOAT64: sp_gguf_array_float(a, i, &f); break;
    case SP_GGUF_BOOL: sp_gguf_array_bool(a, i, &b); break;
    case SP_GGUF_ARRAY:
        if (sp_gguf_array_array(a, i, &inner) == SP_OK && depth == 0)
            for (size_t j = 0; j < inner.count && j < 64; j++)
                read_element(&inner, j, 1);
        break;
    default:
        sp_gguf_array_uint(a, i, &u);
        sp_gguf_array_int(a, i, &n);
    }
    sp_error_clear();
}

static void read_value(const sp_gguf *g, int i)
{
    const char *key = sp_gguf_kv_key(g, i), *s;
    uint64_t u;
    int64_t n;
    double f;
    int b;
    sp_gguf_array a;
    sp_gguf_get_string(g, key, &s, NULL);
    sp_gguf_get_uint(g, key, &u);
    sp_gguf_get_int(g, key, &n);
    sp_gguf_get_float(g, key, &f);
    sp_gguf_get_bool(g, key, &b);
    if (sp_gguf_get_array(g, key, &a) == SP_OK)
        for (size_t j = 0; j < a.count && j < 1024; j++)
            read_element(&a, j, 0);
    sp_error_clear();
}

static void read_tensor(const sp_gguf_tensor *t)
{
    if (!sp_ggml_type_is_readable(t->type) || t->dims[0] <= 0)
        return;
    sp_real *buf = malloc((size_t)ROWS * (size_t)t->dims[0] * sizeof *buf);
    for (size_t r = 0; buf && r < t->n_rows; r += ROWS)
        if (sp_gguf_read_rows(t, r, t->n_rows - r < ROWS ? t->n_rows - r : ROWS, buf) != SP_OK)
            break;
    free(buf);
    sp_error_clear();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_gguf *g = NULL;
    const char *path = fuzz_temp_file("in.gguf", data, size);
    if (sp_gguf_open(path, &g) == SP_OK) {
        sp_gguf_alignment(g);
        for (int i = 0; i < sp_gguf_kv_count(g); i++)
            read_value(g, i);
        for (int i = 0; i < sp_gguf_tensor_count(g); i++)
            read_tensor(sp_gguf_tensor_at(g, i));
        sp_tokenizer t;
        if (sp_gguf_has_tokenizer(g) && sp_tokenizer_load_gguf(g, path, 0, &t) == SP_OK) {
            fuzz_use_tokenizer(&t);
            sp_tokenizer_free(&t);
        }
        sp_gguf_close(g);
    }
    sp_error_clear();
    return 0;
}

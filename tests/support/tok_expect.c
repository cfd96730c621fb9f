#include "tok_expect.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/sha256.h"
#include "scratch.h"

void tok_encode(const sp_tokenizer *t, const char *text, size_t len, int add_bos, int32_t **ids, size_t *n)
{
    sp_error_clear();
    if (sp_tokenizer_encode(t, text, len, add_bos, ids, n) != SP_OK)
        fail_msg("encode: %s", sp_error_message());
}

char *tok_read_text(const char *file, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "fixtures/tokenizers/%s", file);
    char *text = scratch_read_file(path, len);
    assert_non_null(text);
    return text;
}

static const cJSON *member(const cJSON *exp, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(exp, key);
    if (!v)
        fail_msg("expected.json lacks %s", key);
    return v;
}

/* The ids must equal the JSON array; the first difference is reported. */
static void assert_ids(const int32_t *ids, size_t n, const cJSON *want, const char *what)
{
    size_t n_want = (size_t)cJSON_GetArraySize(want), i = 0;
    for (const cJSON *e = want->child; e && i < n; e = e->next, i++)
        if (ids[i] != e->valueint)
            fail_msg("%s: id %zu is %d, the reference gives %d (%zu ids, expected %zu)", what, i, ids[i], e->valueint,
                     n, n_want);
    if (n != n_want)
        fail_msg("%s: %zu ids, the reference gives %zu (equal up to %zu)", what, n, n_want, i);
}

void tok_check_text(const sp_tokenizer *t, const cJSON *exp, const char *file, const char *label)
{
    size_t len, n;
    char *text = tok_read_text(file, &len), what[256];
    for (int add = 0; add < 2; add++) {
        int32_t *ids;
        tok_encode(t, text, len, add, &ids, &n);
        snprintf(what, sizeof what, "%s: %s %s special tokens", label, file, add ? "with" : "without");
        assert_ids(ids, n, member(exp, add ? "ids_special" : "ids"), what);
        free(ids);
    }
    free(text);
}

static char *decode_all(const sp_tokenizer *t, int first_prev, const int32_t *ids, size_t n, size_t *len)
{
    char *out = malloc(n * (size_t)t->max_piece_len + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        o += sp_tokenizer_decode(t, i ? ids[i - 1] : first_prev, ids[i], out + o, (size_t)t->max_piece_len);
    out[o] = '\0';
    *len = o;
    return out;
}

void tok_check_decode(const sp_tokenizer *t, const char *want)
{
    size_t len, n;
    char *text = tok_read_text("stress.txt", &len);
    int32_t *ids;
    tok_encode(t, text, len, 0, &ids, &n);
    for (int after_bos = 0; after_bos < 1 + (t->bos_id >= 0); after_bos++) {
        size_t got_len;
        char *got = decode_all(t, after_bos ? t->bos_id : -1, ids, n, &got_len);
        assert_int_equal(got_len, strlen(want));
        assert_string_equal(got, want);
        free(got);
    }
    free(ids);
    free(text);
}

static void ids_sha256(const int32_t *ids, size_t n, char hex[65])
{
    sp_sha256 h;
    assert_int_equal(sp_sha256_init(&h), SP_OK);
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                               (unsigned char)(v >> 24)};
        sp_sha256_update(&h, le, 4);
    }
    unsigned char digest[32];
    sp_sha256_final(&h, digest);
    sp_sha256_hex(digest, hex);
}

void tok_need_mobydick(char *path, size_t len)
{
    if (!scratch_shared_data("mobydick.txt", path, len)) {
        print_message("skipped: ../shared/data/mobydick.txt is absent\n");
        skip();
    }
}

void tok_check_mobydick(const sp_tokenizer *t, const char *path, const cJSON *exp, const char *label)
{
    char hex[65];
    size_t len, n;
    char *text = scratch_read_file(path, &len);
    assert_non_null(text);
    int32_t *ids;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tok_encode(t, text, len, 0, &ids, &n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print_message("%s: mobydick.txt (%zu bytes) -> %zu ids in %.3f s\n", label, len, n,
                  (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    const cJSON *first = member(exp, "first_ids");
    size_t n_first = (size_t)cJSON_GetArraySize(first);
    assert_ids(ids, n_first < n ? n_first : n, first, "mobydick.txt's first ids");
    assert_int_equal(n, member(exp, "count")->valueint);
    ids_sha256(ids, n, hex);
    assert_string_equal(hex, member(exp, "sha256")->valuestring);
    free(ids);
    tok_encode(t, text, len, 1, &ids, &n);
    assert_int_equal(n, member(exp, "count_special")->valueint);
    ids_sha256(ids, n, hex);
    assert_string_equal(hex, member(exp, "sha256_special")->valuestring);
    free(ids);
    free(text);
}

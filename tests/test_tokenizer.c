/* Tokenizers: bytes; llama2.c tokenizer.bin loading (and every malformed file), encoding against a
 * naive reference of the merge rule, decoding; on the real tok512.bin when the shared data is here. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/tokenizer.h"
#include "support/byte_buf.h"
#include "support/scratch.h"

/* ---- building tokenizer files ---- */

static void put_piece(byte_buf *b, float score, const char *piece)
{
    byte_buf_put_f32(b, score);
    byte_buf_put_i32(b, (int32_t)strlen(piece));
    byte_buf_put(b, piece, strlen(piece));
}

/* A small llama2.c-style vocabulary: <unk>, <s>, </s>, the 256 byte pieces, then merges. */
static const struct {
    const char *piece;
    float score;
} merges[] = {{" ", -1}, {"a", -1}, {"b", -1}, {"c", -1}, {"aa", -2}, {"ab", -3}, {"bc", -3},
              {"abc", -4}, {" a", -5}, {" ab", -1}, {"\xc3\xa9", -1}};
#define SMALL_VOCAB (3 + 256 + (int)(sizeof merges / sizeof merges[0]))

static byte_buf small_tokenizer_file(void)
{
    byte_buf b = {0};
    byte_buf_put_i32(&b, 6);
    put_piece(&b, 0, "<unk>");
    put_piece(&b, 0, "\n<s>\n");
    put_piece(&b, 0, "\n</s>\n");
    for (int i = 0; i < 256; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", i);
        put_piece(&b, 0, name);
    }
    for (size_t i = 0; i < sizeof merges / sizeof merges[0]; i++)
        put_piece(&b, merges[i].score, merges[i].piece);
    return b;
}

static void load_small(sp_tokenizer *t)
{
    byte_buf b = small_tokenizer_file();
    char path[4200];
    scratch_path(path, sizeof path, "small_tok.bin");
    assert_int_equal(scratch_write_file(path, b.data, b.len), 0);
    byte_buf_free(&b);
    sp_error_clear();
    assert_int_equal(sp_tokenizer_load_llama2c(path, SMALL_VOCAB, t), SP_OK);
}

/* ---- a naive reference of the merge rule: rescan all pairs, merge the best (leftmost on ties) ---- */

static int naive_lookup(const sp_tokenizer *t, const unsigned char *s, size_t len)
{
    for (int i = 0; i < t->vocab_size; i++)
        if ((size_t)(t->offsets[i + 1] - t->offsets[i]) == len && memcmp(t->bytes + t->offsets[i], s, len) == 0)
            return i;
    return -1;
}

/* Merges the given initial ids in place; returns the final count. */
static size_t naive_merge(const sp_tokenizer *t, int32_t *ids, size_t n)
{
    unsigned char buf[256];
    for (;;) {
        int best = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            size_t la = (size_t)(t->offsets[ids[i] + 1] - t->offsets[ids[i]]);
            size_t lb = (size_t)(t->offsets[ids[i + 1] + 1] - t->offsets[ids[i + 1]]);
            if (la + lb > sizeof buf)
                continue;
            memcpy(buf, t->bytes + t->offsets[ids[i]], la);
            memcpy(buf + la, t->bytes + t->offsets[ids[i + 1]], lb);
            int id = naive_lookup(t, buf, la + lb);
            if (id >= 0 && (best < 0 || t->scores[id] > t->scores[best])) {
                best = id;
                at = i;
            }
        }
        if (best < 0)
            return n;
        ids[at] = best;
        memmove(ids + at + 1, ids + at + 2, (n - at - 2) * sizeof *ids);
        n--;
    }
}

/* What the encoder must produce: " " + text cut into code points or byte pieces, then merged. */
static size_t naive_encode(const sp_tokenizer *t, const char *text, int32_t *ids)
{
    size_t n = 0, len = strlen(text);
    if (!len)
        return 0;
    char *s = malloc(len + 2);
    assert_non_null(s);
    s[0] = ' ';
    memcpy(s + 1, text, len + 1);
    for (size_t i = 0; i <= len;) {
        size_t cp = 1;
        while (i + cp <= len && cp < 4 && ((unsigned char)s[i + cp] & 0xC0) == 0x80)
            cp++;
        int id = naive_lookup(t, (const unsigned char *)s + i, cp);
        if (id >= 0) {
            ids[n++] = id;
        } else {
            for (size_t k = 0; k < cp; k++) {
                char name[8];
                snprintf(name, sizeof name, "<0x%02X>", (unsigned char)s[i + k]);
                ids[n++] = naive_lookup(t, (const unsigned char *)name, 6);
            }
        }
        i += cp;
    }
    free(s);
    return naive_merge(t, ids, n);
}

static void assert_encodes_like_reference(const sp_tokenizer *t, const char *text)
{
    int32_t *ids = NULL, *expected = malloc((4 * strlen(text) + 8) * sizeof *expected);
    size_t n = 0;
    assert_non_null(expected);
    assert_int_equal(sp_tokenizer_encode(t, text, strlen(text), 0, &ids, &n), SP_OK);
    size_t n_expected = naive_encode(t, text, expected);
    assert_int_equal(n, n_expected);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], expected[i]);
    free(ids);
    free(expected);
}

/* Decodes ids (after an optional BOS) and checks the text comes back exactly. */
static void assert_round_trip(const sp_tokenizer *t, const char *text, int add_bos)
{
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(sp_tokenizer_encode(t, text, strlen(text), add_bos, &ids, &n), SP_OK);
    char *out = malloc(n * (size_t)t->max_piece_len + 1);
    assert_non_null(out);
    size_t len = 0;
    int prev = -1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] != t->bos_id)
            len += sp_tokenizer_decode(t, prev, ids[i], out + len, (size_t)t->max_piece_len);
        prev = ids[i];
    }
    out[len] = '\0';
    /* without BOS the dummy-prefix space stays */
    const char *got = (!add_bos && t->kind == SP_TOK_VOCAB && len) ? out + 1 : out;
    if (!add_bos && t->kind == SP_TOK_VOCAB && len)
        assert_int_equal(out[0], ' ');
    assert_string_equal(got, text);
    free(out);
    free(ids);
}

/* ---- bytes ---- */

static void test_bytes_round_trip(void **state)
{
    (void)state;
    sp_tokenizer t;
    sp_tokenizer_init_bytes(&t);
    assert_int_equal(t.vocab_size, 256);
    assert_int_equal(t.bos_id, -1);
    char text[256];
    for (int i = 0; i < 256; i++)
        text[i] = (char)(255 - i);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(sp_tokenizer_encode(&t, text, sizeof text, 1, &ids, &n), SP_OK);
    assert_int_equal(n, sizeof text); /* no BOS in a byte vocabulary */
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ids[i], (unsigned char)text[i]);
        char c = 0;
        assert_int_equal(sp_tokenizer_decode(&t, i ? ids[i - 1] : -1, ids[i], &c, 1), 1);
        assert_int_equal((unsigned char)c, (unsigned char)text[i]);
    }
    char dummy;
    assert_int_equal(sp_tokenizer_decode(&t, -1, 256, &dummy, 1), 0);
    free(ids);
    sp_tokenizer_free(&t);
}

/* ---- a small synthetic vocabulary ---- */

static void test_small_vocab_encode(void **state)
{
    (void)state;
    sp_tokenizer t;
    load_small(&t);
    assert_int_equal(t.kind, SP_TOK_VOCAB);
    assert_int_equal(t.bos_id, 1);
    assert_int_equal(t.eos_id, 2);
    assert_int_equal(t.max_piece_len, 6);
    const char *texts[] = {"abc", "aaa", "aaaa", "abcabc bc ab", "cab", "a\xc3\xa9\xe2\x82\xac\x01", "x", "",
                           "\xf0\x9f\x8e\x89"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        assert_encodes_like_reference(&t, texts[i]);
        assert_round_trip(&t, texts[i], 1);
        assert_round_trip(&t, texts[i], 0);
    }
    /* stray continuation bytes join the preceding code point (the dummy space here), as llama2.c */
    assert_encodes_like_reference(&t, "\xa9\xa9 stray continuation bytes");
    assert_round_trip(&t, "\xa9\xa9 stray continuation bytes", 0);
    sp_tokenizer_free(&t);
}

static void test_small_vocab_merge_order(void **state)
{
    (void)state;
    sp_tokenizer t;
    load_small(&t);
    /* " aaa": " a" (-5) loses to "aa" (-2), which takes the leftmost pair: " " "aa" "a" */
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(sp_tokenizer_encode(&t, "aaa", 3, 1, &ids, &n), SP_OK);
    const char *pieces[] = {"\n<s>\n", " ", "aa", "a"};
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) {
        size_t len = (size_t)(t.offsets[ids[i] + 1] - t.offsets[ids[i]]);
        assert_int_equal(len, strlen(pieces[i]));
        assert_memory_equal(t.bytes + t.offsets[ids[i]], pieces[i], len);
    }
    free(ids);
    /* the empty text has no dummy prefix: just BOS, or nothing */
    assert_int_equal(sp_tokenizer_encode(&t, "", 0, 1, &ids, &n), SP_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], t.bos_id);
    free(ids);
    assert_int_equal(sp_tokenizer_encode(&t, "", 0, 0, &ids, &n), SP_OK);
    assert_int_equal(n, 0);
    free(ids);
    sp_tokenizer_free(&t);
}

static void test_decode_rules(void **state)
{
    (void)state;
    sp_tokenizer t;
    load_small(&t);
    char buf[16];
    int id_space_a = naive_lookup(&t, (const unsigned char *)" a", 2);
    int id_byte = naive_lookup(&t, (const unsigned char *)"<0x0A>", 6);
    assert_true(id_space_a >= 0 && id_byte >= 0);
    /* the leading space goes right after BOS only */
    assert_int_equal(sp_tokenizer_decode(&t, t.bos_id, id_space_a, buf, sizeof buf), 1);
    assert_memory_equal(buf, "a", 1);
    assert_int_equal(sp_tokenizer_decode(&t, id_byte, id_space_a, buf, sizeof buf), 2);
    assert_memory_equal(buf, " a", 2);
    /* byte pieces print as their byte */
    assert_int_equal(sp_tokenizer_decode(&t, t.bos_id, id_byte, buf, sizeof buf), 1);
    assert_int_equal(buf[0], '\n');
    /* the capacity bounds the output; bad ids print nothing */
    assert_int_equal(sp_tokenizer_decode(&t, -1, id_space_a, buf, 1), 1);
    assert_int_equal(sp_tokenizer_decode(&t, -1, t.vocab_size, buf, sizeof buf), 0);
    assert_int_equal(sp_tokenizer_decode(&t, -1, -3, buf, sizeof buf), 0);
    sp_tokenizer_free(&t);
}

/* ---- malformed files ---- */

static void expect_load_error(const char *name, const byte_buf *b, int vocab_size, sp_status code,
                              const char *const *needles)
{
    char path[4200];
    scratch_path(path, sizeof path, name);
    assert_int_equal(scratch_write_file(path, b->data, b->len), 0);
    sp_tokenizer t;
    sp_tokenizer_init_bytes(&t);
    sp_error_clear();
    sp_status st = sp_tokenizer_load_llama2c(path, vocab_size, &t);
    const char *msg = sp_error_message();
    assert_int_equal(st, code);
    assert_non_null(strstr(msg, path));
    assert_null(strchr(msg, '\n'));
    for (int i = 0; needles[i]; i++)
        if (!strstr(msg, needles[i]))
            fail_msg("error '%s' does not mention '%s'", msg, needles[i]);
    assert_int_equal(t.kind, SP_TOK_BYTES); /* untouched */
    sp_error_clear();
}

static void test_bad_files(void **state)
{
    (void)state;
    byte_buf good = small_tokenizer_file();
    byte_buf b = {0};
    char offset[64];

    /* truncated in the middle of the last piece */
    byte_buf_put(&b, good.data, good.len - 1);
    expect_load_error("trunc_piece.bin", &b, SMALL_VOCAB, SP_ERR_INPUT,
                      (const char *[]){"truncated", "token 269", "byte offset", NULL});
    /* truncated inside a record header: token 100 starts at 4 + 3 records + 97 byte records */
    b.len = 0;
    size_t at = 4 + (8 + 5) + (8 + 5) + (8 + 6) + 97 * (8 + 6);
    byte_buf_put(&b, good.data, at + 5);
    snprintf(offset, sizeof offset, "byte offset %zu", at);
    expect_load_error("trunc_record.bin", &b, SMALL_VOCAB, SP_ERR_INPUT,
                      (const char *[]){"token 100", offset, "truncated", NULL});
    /* a negative length in token 0 */
    b.len = 0;
    byte_buf_put_i32(&b, 6);
    byte_buf_put_f32(&b, 0);
    byte_buf_put_i32(&b, -4);
    expect_load_error("negative.bin", &b, 3, SP_ERR_INPUT, (const char *[]){"token 0", "byte offset 8", "-4", NULL});
    /* a piece longer than max_token_length */
    b.len = 0;
    byte_buf_put_i32(&b, 2);
    put_piece(&b, 0, "ab");
    put_piece(&b, 0, "abc");
    expect_load_error("too_long.bin", &b, 3, SP_ERR_INPUT,
                      (const char *[]){"token 1", "byte offset 18", "max_token_length", NULL});
    /* absurd or non-positive max_token_length, a short header */
    b.len = 0;
    byte_buf_put_i32(&b, 0);
    expect_load_error("max_zero.bin", &b, 3, SP_ERR_INPUT, (const char *[]){"max_token_length", "0", NULL});
    b.len = 0;
    byte_buf_put_i32(&b, 1 << 30);
    expect_load_error("max_huge.bin", &b, 3, SP_ERR_INPUT, (const char *[]){"max_token_length", NULL});
    b.len = 0;
    byte_buf_put(&b, "ab", 2);
    expect_load_error("short.bin", &b, 3, SP_ERR_INPUT, (const char *[]){"truncated header", NULL});
    /* a NaN score */
    b.len = 0;
    byte_buf_put_i32(&b, 4);
    put_piece(&b, 0, "a");
    put_piece(&b, NAN, "b");
    expect_load_error("nan.bin", &b, 2 + 1, SP_ERR_INPUT, (const char *[]){"token 1", "score", NULL});
    /* more tokens than the model has */
    expect_load_error("trailing.bin", &good, SMALL_VOCAB - 1, SP_ERR_INPUT,
                      (const char *[]){"bytes after token", NULL});
    /* a vocabulary too small for BOS and EOS */
    expect_load_error("tiny.bin", &good, 2, SP_ERR_INPUT, (const char *[]){"vocab_size 2", NULL});
    byte_buf_free(&b);
    byte_buf_free(&good);

    /* a missing file is an I/O error */
    sp_tokenizer t;
    sp_error_clear();
    assert_int_equal(sp_tokenizer_load_llama2c("/nonexistent/tok.bin", 512, &t), SP_ERR_IO);
    assert_non_null(strstr(sp_error_message(), "/nonexistent/tok.bin"));
    sp_error_clear();
}

/* ---- the real tok512.bin ---- */

static int load_tok512(sp_tokenizer *t)
{
    char path[256];
    if (!scratch_shared_data("checkpoints/stories260K/tok512.bin", path, sizeof path))
        return 0;
    sp_error_clear();
    assert_int_equal(sp_tokenizer_load_llama2c(path, 512, t), SP_OK);
    return 1;
}

static void test_tok512(void **state)
{
    (void)state;
    sp_tokenizer t;
    if (!load_tok512(&t)) {
        print_message("skipped: ../shared/data/checkpoints/stories260K/tok512.bin is absent\n");
        skip();
    }
    assert_int_equal(t.vocab_size, 512);
    const char *sentence = "Once upon a time, there was a little girl named Lily. She loved to play outside.";
    assert_encodes_like_reference(&t, sentence);
    assert_round_trip(&t, sentence, 1);
    assert_round_trip(&t, sentence, 0);

    /* BOS first when asked; the merges make far fewer tokens than characters */
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(sp_tokenizer_encode(&t, sentence, strlen(sentence), 1, &ids, &n), SP_OK);
    assert_int_equal(ids[0], 1);
    assert_true(n > 1 && n < strlen(sentence) / 2);
    for (size_t i = 1; i < n; i++)
        assert_true(ids[i] != t.bos_id && ids[i] != t.eos_id);
    free(ids);

    /* code points absent from the vocabulary fall back to <0xXX> pieces, which decode to the bytes */
    const char *rare = "\xe6\x97\xa5\xf0\x9f\x8e\x89\n";
    assert_encodes_like_reference(&t, rare);
    assert_round_trip(&t, rare, 1);
    assert_int_equal(sp_tokenizer_encode(&t, rare, strlen(rare), 0, &ids, &n), SP_OK);
    int n_byte_pieces = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = t.bytes + t.offsets[ids[i]];
        n_byte_pieces += t.offsets[ids[i] + 1] - t.offsets[ids[i]] == 6 && memcmp(p, "<0x", 3) == 0;
    }
    assert_int_equal(n_byte_pieces, 8); /* 3 + 4 + 1 bytes */
    free(ids);
    sp_tokenizer_free(&t);
}

/* A longer real text: the heap merge must agree with the rescanning reference. */
static void test_tok512_book_excerpt(void **state)
{
    (void)state;
    sp_tokenizer t;
    char book[256];
    if (!scratch_shared_data("mobydick.txt", book, sizeof book) || !load_tok512(&t)) {
        print_message("skipped: ../shared/data (mobydick.txt, tok512.bin) is absent\n");
        skip();
    }
    size_t len = 0;
    char *text = scratch_read_file(book, &len);
    assert_non_null(text);
    if (len > 3000)
        text[3000] = '\0';
    assert_encodes_like_reference(&t, text);
    assert_round_trip(&t, text, 1);
    free(text);
    sp_tokenizer_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_round_trip),     cmocka_unit_test(test_small_vocab_encode),
        cmocka_unit_test(test_small_vocab_merge_order), cmocka_unit_test(test_decode_rules),
        cmocka_unit_test(test_bad_files),            cmocka_unit_test(test_tok512),
        cmocka_unit_test(test_tok512_book_excerpt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

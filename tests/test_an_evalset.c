/* The evaluation set of `analyze` on a checkpoint (analyzers/evalset.h): windows of the validation
 * split (the last 10%) or of a whole token file, non-overlapping, drawn by the seed and kept in
 * order, targets the next tokens; the same seed gives the same set and another seed another; a
 * request beyond the pool takes every window and says so; a pool without a window is an error;
 * a text file is tokenized (bytes) and hashed into the description. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzers/evalset.h"
#include "core/rng.h"
#include "core/sha256.h"
#include "support/scratch.h"

enum { N_IDS = 5000, SEQ = 16 };

static int32_t *pool(void)
{
    int32_t *ids = malloc(N_IDS * sizeof *ids);
    assert_non_null(ids);
    for (int i = 0; i < N_IDS; i++)
        ids[i] = i; /* the id is the position: windows can be located */
    return ids;
}

static void test_validation_windows(void **state)
{
    (void)state;
    int32_t *ids = pool();
    sp_eval_set e;
    assert_int_equal(sp_eval_set_from_ids(ids, N_IDS, 1, SEQ, 100, 7, "ids", "test ids", &e), SP_OK);
    assert_int_equal(e.seq_len, SEQ);
    assert_int_equal(e.n_seqs, (100 + SEQ - 1) / SEQ);
    const int start = N_IDS - N_IDS / 10;
    int prev = -1;
    for (int s = 0; s < e.n_seqs; s++) {
        int first = e.tokens[s * SEQ];
        assert_true(first >= start && (first - start) % SEQ == 0); /* a window of the split */
        assert_true(first > prev);                                  /* distinct, in order */
        prev = first;
        for (int t = 0; t < SEQ; t++) {
            assert_int_equal(e.tokens[s * SEQ + t], first + t);
            assert_int_equal(e.targets[s * SEQ + t], first + t + 1);
        }
        assert_true(first + SEQ < N_IDS); /* the last target exists */
    }
    assert_non_null(strstr(e.description, "validation split"));
    assert_non_null(strstr(e.description, "test ids"));

    sp_eval_set same, other;
    assert_int_equal(sp_eval_set_from_ids(ids, N_IDS, 1, SEQ, 100, 7, "ids", "test ids", &same), SP_OK);
    assert_int_equal(sp_eval_set_from_ids(ids, N_IDS, 1, SEQ, 100, 8, "ids", "test ids", &other), SP_OK);
    assert_memory_equal(same.tokens, e.tokens, (size_t)e.n_seqs * SEQ * sizeof *e.tokens);
    assert_true(memcmp(other.tokens, e.tokens, (size_t)e.n_seqs * SEQ * sizeof *e.tokens) != 0);
    sp_eval_set_free(&e);
    sp_eval_set_free(&same);
    sp_eval_set_free(&other);
    free(ids);
}

static void test_pool_limits(void **state)
{
    (void)state;
    int32_t *ids = pool();
    sp_eval_set e;
    /* the whole pool (a token file): (5000 - 1) / 16 = 312 windows; asking for more takes them all */
    assert_int_equal(sp_eval_set_from_ids(ids, N_IDS, 0, SEQ, 1000000, 1, "ids", "test ids", &e), SP_OK);
    assert_int_equal(e.n_seqs, (N_IDS - 1) / SEQ);
    for (int s = 0; s < e.n_seqs; s++)
        assert_int_equal(e.tokens[s * SEQ], s * SEQ);
    assert_non_null(strstr(e.description, "fewer than the requested"));
    sp_eval_set_free(&e);

    /* a validation split of 10 tokens holds no window of 16 + 1 */
    sp_error_clear();
    assert_int_equal(sp_eval_set_from_ids(ids, 100, 1, SEQ, 100, 1, "short.txt", "x", &e), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "short.txt"));
    assert_null(e.tokens);
    free(ids);
}

/* The window of the split at which tokens (and the target after them) match text, or -1. */
static int window_at(const char *text, int start, int n_text, const int32_t *tokens, const int32_t *targets)
{
    for (int at = start; at + 8 < n_text; at += 8) {
        int same = 1;
        for (int t = 0; t < 8 && same; t++)
            same = (unsigned char)text[at + t] == tokens[t] && (unsigned char)text[at + t + 1] == targets[t];
        if (same)
            return at;
    }
    return -1;
}

static void test_text_file(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "eval.txt");
    enum { N_TEXT = 3000, START = N_TEXT - N_TEXT / 10 };
    char text[N_TEXT];
    sp_rng rng;
    sp_rng_seed(&rng, 12);
    for (int i = 0; i < N_TEXT; i++)
        text[i] = (char)(' ' + sp_rng_below(&rng, 90));
    assert_int_equal(scratch_write_file(path, text, sizeof text), 0);
    sp_tokenizer bytes;
    sp_tokenizer_init_bytes(&bytes);
    sp_eval_set e;
    assert_int_equal(sp_eval_set_load(path, NULL, &bytes, 256, 8, 64, 3, &e), SP_OK);
    assert_int_equal(e.n_seqs, 8);
    for (int s = 0; s < e.n_seqs; s++)
        assert_true(window_at(text, START, N_TEXT, e.tokens + s * 8, e.targets + s * 8) >= 0);
    char hex[65];
    assert_int_equal(sp_sha256_file(path, hex, NULL), SP_OK);
    assert_non_null(strstr(e.description, hex));
    sp_eval_set_free(&e);

    /* no tokenizer for text: an error that names the file and suggests --tokens */
    sp_error_clear();
    assert_int_equal(sp_eval_set_load(path, NULL, NULL, 1000, 8, 64, 3, &e), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "--tokens"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation_windows),
        cmocka_unit_test(test_pool_limits),
        cmocka_unit_test(test_text_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

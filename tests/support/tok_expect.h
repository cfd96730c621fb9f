/* tests/support/tok_expect.h: a tokenizer's ids held to a reference's recorded ones (the
 * expected.json files of fixtures/tokenizers and fixtures/gguf_tokenizers): the stress texts of
 * fixtures/tokenizers/, their decoding, and Moby Dick by count, sha256 and first ids. Each failure
 * names the text and the first differing id. */
#ifndef SP_TEST_TOK_EXPECT_H
#define SP_TEST_TOK_EXPECT_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "io/tokenizer.h"

/* sp_tokenizer_encode, failing the test with its message. */
void tok_encode(const sp_tokenizer *t, const char *text, size_t len, int add_bos, int32_t **ids, size_t *n);
/* fixtures/tokenizers/<file>, NUL-terminated (free()). */
char *tok_read_text(const char *file, size_t *len);
/* The ids of fixtures/tokenizers/<file> without and with special tokens equal exp.ids and
 * exp.ids_special; label prefixes the messages. */
void tok_check_text(const sp_tokenizer *t, const cJSON *exp, const char *file, const char *label);
/* The concatenated pieces of stress.txt's ids equal want, and again after BOS (a sequence starts there). */
void tok_check_decode(const sp_tokenizer *t, const char *want);
/* Moby Dick's ids (../shared/data/mobydick.txt; the test is skipped where it is absent) without and
 * with special tokens: exp's count, sha256, count_special, sha256_special and first_ids. */
/* The path of ../shared/data/mobydick.txt into path, or a skip with one line: call it before
 * allocating anything (a skip does not return). */
void tok_need_mobydick(char *path, size_t len);
void tok_check_mobydick(const sp_tokenizer *t, const char *path, const cJSON *exp, const char *label);

#endif

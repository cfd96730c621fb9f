/* fuzz/use_tokenizer.h: what the tokenizer harnesses do with a tokenizer that loaded. */
#ifndef SP_FUZZ_USE_TOKENIZER_H
#define SP_FUZZ_USE_TOKENIZER_H

#include "io/tokenizer.h"

/* Encodes a fixed text (ASCII, digits, whitespace runs, multi-byte UTF-8, special-token
 * look-alikes), with and without BOS, and decodes every id of the vocabulary after every id of
 * that encoding. Errors are cleared. */
void fuzz_use_tokenizer(const sp_tokenizer *t);

#endif

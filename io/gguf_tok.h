/* io/gguf_tok.h: the parts of io/gguf_tokenizer.c: the tokenizer.ggml.* metadata read and checked
 * (gguf_tok_vocab.c), the merges (gguf_tok_merges.c), and the tokenizer.json and
 * tokenizer_config.json texts transformers' GGUF converter amounts to (gguf_tok_json.c). */
#ifndef SP_GGUF_TOK_H
#define SP_GGUF_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "io/gguf.h"
#include "io/str_map.h"

/* Which transformers builder the file gets (integrations/gguf: byte_level_tokenizer,
 * sentencepiece_tokenizer, gemma_tokenizer). */
typedef enum { SP_GGUF_TOK_BYTE_LEVEL, SP_GGUF_TOK_LLAMA, SP_GGUF_TOK_GEMMA } sp_gguf_tok_kind;

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum { SP_GGUF_TOKEN_NORMAL = 1, SP_GGUF_TOKEN_CONTROL = 3, SP_GGUF_TOKEN_USER_DEFINED = 4, SP_GGUF_TOKEN_MAX = 6 };

typedef struct {
    const char *path;
    sp_gguf_tok_kind kind;
    const char *split_regex; /* BYTE_LEVEL: the pre-tokenizer's Split pattern; NULL for GPT-2's ByteLevel */
    int32_t n;               /* tokens */
    char **tokens;           /* [n] as the vocabulary spells them (byte-level alphabet, Gemma's ▁ runs) */
    unsigned char *respelled; /* [n] 1 where that spelling differs from the file's */
    unsigned char *types;    /* [n] token types, NULL without tokenizer.ggml.token_type */
    sp_str_map index;        /* spelling -> id */
    const sp_gguf *file;     /* for the merges and scores, read where needed */
    int has_merges;
    int32_t bos, eos, unk, pad; /* -1: none */
    int add_bos, add_eos;
} sp_gguf_vocab;

/* Reads and checks tokenizer.ggml.* (one SP_ERR_INPUT line naming path and the key otherwise);
 * vocab_size > 0: the model's, which the token count must not exceed. */
sp_status sp_gguf_vocab_read(const sp_gguf *g, const char *path, int vocab_size, sp_gguf_vocab *v);
void sp_gguf_vocab_free(sp_gguf_vocab *v);
/* 1 and the token's id when some token is spelled s. */
int sp_gguf_vocab_find(const sp_gguf_vocab *v, const char *s, size_t len, int32_t *id);

typedef struct {
    int32_t left, right; /* token ids */
} sp_gguf_merge;

/* The merges in rank order: tokenizer.ggml.merges, checked, or where the file has none those
 * transformers' generate_merges derives from the tokens and their scores (Gemma: their order). */
sp_status sp_gguf_merges(const sp_gguf_vocab *v, sp_gguf_merge **merges, size_t *n);

/* The tokenizer.json and tokenizer_config.json texts (malloc'd, NUL-terminated). vocab_size as
 * sp_tokenizer_load_gguf's: the default special tokens a builder adds are kept only below it. */
sp_status sp_gguf_tok_json(const sp_gguf_vocab *v, const sp_gguf_merge *merges, size_t n_merges, int vocab_size,
                           char **json, char **config);

#endif

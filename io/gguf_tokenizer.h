/* io/gguf_tokenizer.h: the tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*), on the
 * Hugging Face tokenizer engine (io/hf_tokenizer.h), so ids equal what transformers builds from the
 * same file: `tokenizer.ggml.model` "gpt2" (byte-level BPE, pre-tokenizer from
 * `tokenizer.ggml.pre`) and "llama" (SentencePiece BPE with byte fallback). docs/import.md. */
#ifndef SP_GGUF_TOKENIZER_H
#define SP_GGUF_TOKENIZER_H

#include "io/gguf.h"
#include "io/tokenizer.h"

/* 1 when the file has tokenizer metadata (tokenizer.ggml.model). */
int sp_gguf_has_tokenizer(const sp_gguf *g);
/* The file's tokenizer into t (kind SP_TOK_HF). vocab_size: the model's vocabulary (every id must be
 * below it). Anything spanprobe cannot reproduce exactly (another tokenizer.ggml.model or .pre) is
 * one SP_ERR_INPUT line naming the file, the key and the value. */
sp_status sp_tokenizer_load_gguf(const sp_gguf *g, const char *path, int vocab_size, sp_tokenizer *t);

#endif

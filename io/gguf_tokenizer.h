/* io/gguf_tokenizer.h: the tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*), on the
 * Hugging Face tokenizer engine (io/hf_tokenizer.h), so ids equal what transformers (5.23.0) builds
 * from the same file with AutoTokenizer.from_pretrained(dir, gguf_file=...):
 * `tokenizer.ggml.model` "gpt2" (byte-level BPE; `tokenizer.ggml.pre` picks GPT-2's, Llama 3's or
 * Qwen2's pattern) and "llama" (SentencePiece BPE with byte fallback; Gemma's variant for the gemma
 * architectures; merges derived from the scores when the file has none). The metadata becomes the
 * tokenizer.json and tokenizer_config.json texts transformers' tokenizer amounts to, which the
 * tokenizer keeps (sp_tokenizer_hf_sources), so checkpoints store it as kind hf-json. Supported
 * values and the decisions where transformers and llama.cpp differ: docs/import.md. */
#ifndef SP_GGUF_TOKENIZER_H
#define SP_GGUF_TOKENIZER_H

#include "io/gguf.h"
#include "io/tokenizer.h"

/* 1 when the file has tokenizer metadata (tokenizer.ggml.model). */
int sp_gguf_has_tokenizer(const sp_gguf *g);
/* The file's tokenizer into t (kind SP_TOK_HF). vocab_size: the model's vocabulary (every id must be
 * below it; 0: the tokenizer's own). Anything spanprobe cannot reproduce exactly (another
 * tokenizer.ggml.model or .pre) and bad metadata (a missing token list, arrays of the wrong length,
 * merges naming unknown tokens, ids out of range) is one SP_ERR_INPUT line naming the file and the
 * key. The file may be closed afterwards. */
sp_status sp_tokenizer_load_gguf(const sp_gguf *g, const char *path, int vocab_size, sp_tokenizer *t);

#endif

/* io/hf_tokenizer.h: Hugging Face `tokenizer.json` tokenizers (kind SP_TOK_HF), giving the ids of
 * the `tokenizers` library (0.23.3) for the BPE tokenizers causal LMs use: byte-level BPE (GPT-2,
 * GPT-NeoX, Llama 3, Qwen2, OLMo 2) and SentencePiece-style BPE with byte fallback (Llama 2,
 * Mistral, Gemma). Supported components and the decisions are in docs/import.md ("Hugging Face
 * tokenizers"); anything else is one SP_ERR_INPUT line naming the file and the JSON key.
 *
 * Encoding (sp_tokenizer_encode) runs tokenizers' pipeline: added tokens are cut out of the raw
 * text (leftmost-longest; lstrip, rstrip, single_word), the rest is normalized, normalized added
 * tokens are cut out, pre-tokenized, and each pre-token BPE-encoded; add_bos then adds the
 * sequence's special tokens. Text must be valid UTF-8 (else SP_ERR_INPUT with the byte offset).
 * Decoding (sp_tokenizer_decode) gives each id's bytes through the decoder (byte-level map,
 * ▁ -> space, <0xXX> -> the byte); a sequence's first piece, or the one after BOS, loses the
 * leading space the decoder's Strip (or Metaspace) removes. */
#ifndef SP_HF_TOKENIZER_H
#define SP_HF_TOKENIZER_H

#include "io/tokenizer.h"

/* Loads tokenizer.json, and tokenizer_config.json when config_path is not NULL (BOS/EOS and whether
 * they are added; else the post-processor's template decides). vocab_size: the model's vocabulary
 * (every id must be below it), or 0 for 1 + the largest id. */
sp_status sp_tokenizer_load_hf(const char *tokenizer_json_path, const char *tokenizer_config_path, int vocab_size,
                               sp_tokenizer *t);
/* The same from texts in memory (a checkpoint's copies); name stands for the JSON file in messages,
 * config_name for the config. config may be NULL. */
sp_status sp_tokenizer_load_hf_text(const char *name, const char *json, size_t json_len, const char *config_name,
                                    const char *config, size_t config_len, int vocab_size, sp_tokenizer *t);
/* The texts an SP_TOK_HF tokenizer was loaded from (*config NULL when it had none). */
void sp_tokenizer_hf_sources(const sp_tokenizer *t, const char **json, size_t *json_len, const char **config,
                             size_t *config_len);

/* For io/tokenizer.c. */
sp_status sp_hf_encode(const sp_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids,
                       size_t *n_ids);
size_t sp_hf_decode(const sp_tokenizer *t, int prev_id, int id, char *buf, size_t cap);
void sp_hf_free(sp_hf_tokenizer *hf);

#endif

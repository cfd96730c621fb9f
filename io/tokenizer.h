/* io/tokenizer.h: the tokenizers spanprobe models use.
 *
 * - bytes: vocab 256, token id = byte value (the default for models spanprobe trains).
 * - vocab: a list of pieces with merge scores, as llama2.c's tokenizer.bin (int32 max_token_length,
 *   then per token: float32 score, int32 length, length bytes). Encoding is llama2.c's greedy
 *   highest-score pair merging over UTF-8 code points with <0xXX> byte fallback; decoding follows
 *   llama2.c (a leading space is dropped right after BOS; <0xXX> pieces are raw bytes).
 * - hf: a Hugging Face tokenizer.json (io/hf_tokenizer.h), ids as the `tokenizers` library gives;
 *   the pieces below are each id's decoded bytes.
 * Checkpoints store the tokenizer under /tokenizer (docs/formats.md) so `generate` and `dump` can
 * turn text into ids and back.
 */
#ifndef SP_TOKENIZER_H
#define SP_TOKENIZER_H

#include "core/common.h"

typedef enum { SP_TOK_BYTES, SP_TOK_VOCAB, SP_TOK_HF } sp_tokenizer_kind;

typedef struct sp_hf_tokenizer sp_hf_tokenizer;

/* The longest piece a tokenizer file may declare (max_token_length): far above any real vocabulary. */
#define SP_TOKENIZER_MAX_PIECE_LEN 4096

typedef struct {
    sp_tokenizer_kind kind;
    int vocab_size;
    int bos_id, eos_id;     /* -1 when the tokenizer has none (bytes) */
    int max_piece_len;
    /* SP_TOK_VOCAB, SP_TOK_HF: piece i is bytes[offsets[i] .. offsets[i+1]) */
    unsigned char *bytes;
    int64_t *offsets;       /* [vocab_size + 1] */
    float *scores;          /* [vocab_size]; SP_TOK_VOCAB only */
    sp_hf_tokenizer *hf;    /* SP_TOK_HF: the pipeline */
} sp_tokenizer;

void sp_tokenizer_init_bytes(sp_tokenizer *t);
/* Reads a llama2.c tokenizer.bin holding vocab_size pieces; BOS 1 and EOS 2 as llama2.c. */
sp_status sp_tokenizer_load_llama2c(const char *path, int vocab_size, sp_tokenizer *t);
void sp_tokenizer_free(sp_tokenizer *t);
/* Encodes len bytes of text; *ids is allocated (free()). add_bos prepends BOS where there is one
 * (SP_TOK_HF: the special tokens the tokenizer adds around a sequence, from tokenizer_config.json's
 * add_bos_token / add_eos_token or else the post-processor's template). */
sp_status sp_tokenizer_encode(const sp_tokenizer *t, const char *text, size_t len, int add_bos, int32_t **ids,
                              size_t *n_ids);
/* Writes the bytes token `id` prints as, given the previous token, into buf (at most cap bytes);
 * returns the byte count. */
size_t sp_tokenizer_decode(const sp_tokenizer *t, int prev_id, int id, char *buf, size_t cap);

#endif

/* tests/support/llama2c_build.h: llama2.c checkpoints and tokenizers built in memory, laid out as
 * llama2.c's run.c reads them, with a distinct reproducible value in every float. */
#ifndef SP_TEST_LLAMA2C_BUILD_H
#define SP_TEST_LLAMA2C_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "byte_buf.h"

/* The 7 int32 fields at the start of the file; a negative vocab means an untied classifier. */
typedef struct {
    int32_t dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len;
} l2c_header;

/* The file's tensors in file order. */
enum { T_EMBED, T_RMS_ATT, T_WQ, T_WK, T_WV, T_WO, T_RMS_FFN, T_W1, T_W2, T_W3, T_RMS_FINAL, T_FREQ_RE, T_FREQ_IM,
       T_WCLS, N_T };

extern const char *const l2c_tensor_names[N_T];

/* Element counts of each tensor (per layer where per_layer[t]); wcls only for a negative vocab. */
void l2c_tensor_layout(const l2c_header *h, size_t numel[N_T], int per_layer[N_T]);
/* Byte offset of layer `layer` of tensor t. */
size_t l2c_tensor_offset(const l2c_header *h, int t, int layer);
/* The whole checkpoint (byte_buf_free). */
byte_buf l2c_build_checkpoint(const l2c_header *h);
/* A tokenizer.bin with `vocab` pieces: <unk>, BOS, EOS, then single letters (byte_buf_free). */
byte_buf l2c_build_tokenizer(int vocab);

#endif

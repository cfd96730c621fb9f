/* io/llama2c.h: llama2.c checkpoints (run.c's legacy format) as spanprobe models.
 *
 * File layout (little-endian): a header of 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
 * vocab_size, seq_len; a negative vocab_size means the classifier is not tied to the embedding),
 * then float32 tensors, each row-major [out, in], stacked over layers where marked [L, ...]:
 *   token_embedding_table [V, d]          -> embed/tok
 *   rms_att_weight [L, d]                 -> blocks/<l>/n1/gain
 *   wq [L, d, d], wk [L, kv, d], wv [L, kv, d], wo [L, d, d] -> blocks/<l>/attn/{wq,wk,wv,wo}
 *   rms_ffn_weight [L, d]                 -> blocks/<l>/n2/gain
 *   w1 [L, hidden, d] (gate), w2 [L, d, hidden], w3 [L, hidden, d] (up) -> blocks/<l>/ffn/{w1,w2,w3}
 *   rms_final_weight [d]                  -> final_norm/gain
 *   freq_cis_real, freq_cis_imag [seq_len, head_size / 2]   (skipped: RoPE is recomputed)
 *   wcls [V, d]                           -> head/w (only when untied)
 * with kv = n_kv_heads * head_size, head_size = d / n_heads. The model is spanprobe's `pre` variant
 * with RMSNorm (eps 1e-5), SwiGLU, RoPE (theta 10000), max_seq_len = seq_len. docs/import.md.
 *
 * The reader validates the header (positive, heads dividing dim, kv heads dividing heads, even head
 * size), that the file size is exactly what the header implies (overflow-safe), and that every weight
 * is finite; errors name the file, the tensor and its byte offset.
 */
#ifndef SP_LLAMA2C_H
#define SP_LLAMA2C_H

#include "core/config.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "model/params.h"

#define SP_LLAMA2C_HEADER_BYTES 28

typedef struct {
    char name[SP_PARAM_NAME_MAX]; /* the spanprobe parameter it becomes */
    int64_t offset;               /* byte offset in the file */
    size_t numel;
    const float *data;            /* into sp_llama2c_weights.storage */
} sp_llama2c_tensor;

typedef struct {
    sp_config cfg;                /* resolved and valid */
    int n_tensors;                /* one per parameter, per-layer tensors split by layer */
    sp_llama2c_tensor *tensors;   /* in file order */
    float *storage;
} sp_llama2c_weights;

/* Reads and validates the whole checkpoint into host memory. */
sp_status sp_llama2c_read(const char *path, sp_llama2c_weights *w);
void sp_llama2c_free(sp_llama2c_weights *w);
/* Creates a model for w->cfg on `be` and copies every tensor into its parameter. */
sp_status sp_llama2c_to_model(const sp_llama2c_weights *w, const sp_backend *be, sp_model **out);

#endif

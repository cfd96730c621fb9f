/* io/gguf_model.h: a GGUF file (llama.cpp's single-file models) as a spanprobe model, with no
 * conversion step (docs/import.md, "GGUF models").
 *
 * The metadata gives the config (io/gguf_config.h), the architecture's table (io/gguf_arch.h) the
 * tensor of every parameter; every tensor is found and its shape and type checked before any model
 * memory is allocated, so a header that lies about sizes costs nothing. Quantized tensors are
 * dequantized row block by row block (io/gguf.h) straight into the model's parameters. A tensor no
 * parameter uses (a feature spanprobe would silently drop, e.g. Llama 3's rope_freqs), a missing
 * or misshaped tensor, or a type spanprobe cannot read is one SP_ERR_INPUT line; NaN/Inf weights
 * are SP_ERR_NUMERIC. The tokenizer in the metadata (tokenizer.ggml.*) is loaded by
 * io/gguf_tokenizer.h; a file whose tokenizer cannot be reproduced is refused. */
#ifndef SP_GGUF_MODEL_H
#define SP_GGUF_MODEL_H

#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/gguf_arch.h"

/* Is path a regular file starting with the GGUF magic? */
int sp_gguf_is_model_file(const char *path);
/* The config, the tokenizer and the provenance (meta->source); no weights. */
sp_status sp_gguf_model_read_meta(const char *path, sp_ckpt_meta *meta);
/* Reads everything and creates the model on be. */
sp_status sp_gguf_model_load(const char *path, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta);
/* The GGUF tensor name a spanprobe parameter of arch comes from, into name (cap bytes); "" when the
 * table has none. */
void sp_gguf_param_tensor(const sp_gguf_arch *arch, const char *param, char *name, size_t cap);
/* The file's tensor types with their counts, "F32 x5, Q4_K x7", into buf. */
void sp_gguf_type_counts(const sp_gguf *g, char *buf, size_t cap);

#endif

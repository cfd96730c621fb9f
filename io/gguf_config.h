/* io/gguf_config.h: a GGUF file's metadata as a spanprobe model config.
 *
 * `general.architecture` picks the entry of io/gguf_arch.h; llama.cpp's `<arch>.*` keys give the
 * sizes (embedding_length, block_count, feed_forward_length, attention.head_count[_kv],
 * attention.key_length, context_length, the norm epsilon), RoPE (rope.freq_base,
 * rope.dimension_count, rope.scaling.type none/linear with rope.scaling.factor), windows and
 * soft-caps; the vocabulary is token_embd's row count; biases are on where their tensors are
 * (llama.cpp's optional tensors); the head is tied where `output.weight` is absent. A missing
 * required key, a value out of range, or a key that turns on something spanprobe does not implement
 * (another rope scaling, windows on an architecture without them) is one SP_ERR_INPUT line. */
#ifndef SP_GGUF_CONFIG_H
#define SP_GGUF_CONFIG_H

#include "core/config.h"
#include "io/gguf.h"
#include "io/gguf_arch.h"

/* Reads g's metadata (path names it in errors) into a resolved, valid cfg and its *arch. */
sp_status sp_gguf_config_read(const sp_gguf *g, const char *path, sp_config *cfg, const sp_gguf_arch **arch);

#endif

/* io/hf_config.h: a Hugging Face config.json as a spanprobe model config.
 *
 * The `architectures` value picks the family (io/hf_arch.h); the family's size keys and its own keys
 * fill an sp_config. Both the current key spellings (rope_parameters, dtype) and the older ones most
 * published checkpoints carry (rope_theta, rope_scaling, torch_dtype, rotary_pct, rotary_emb_base,
 * rope_local_base_freq) are read. An architecture spanprobe does not import, or a key that turns on
 * something it does not implement (an unknown rope type, cross-attention, ...), is one line naming
 * the key and its value: never a silently different model. docs/import.md has the table.
 */
#ifndef SP_HF_CONFIG_H
#define SP_HF_CONFIG_H

#include "io/hf_arch.h"

/* Reads and maps path (a config.json). */
sp_status sp_hf_config_read(const char *path, sp_hf_config *out);
/* Maps a parsed config: family NULL takes it from "architectures"; where names it in errors. */
sp_status sp_hf_config_map(const cJSON *root, const sp_hf_family *family, const char *where, sp_hf_config *out);

/* The defaults of cfg with the family's recipe: variant, norm, FFN, GELU, positions (shared with
 * the GGUF architectures of io/gguf_config.c). */
void sp_hf_family_defaults(const sp_hf_family *f, sp_config *cfg);

/* ---- shared by the families' key readers (io/hf_arch.c) ---- */
/* RoPE: rope_parameters (flat, or per layer type) or the legacy keys; the rotated share of a head
 * defaults to default_partial (GPT-NeoX: 0.25 when no key says otherwise). legacy_theta is the
 * family's old base key ("rope_theta", "rotary_emb_base"). Needs head_dim resolved. */
sp_status sp_hf_read_rope(const cJSON *root, sp_hf_config *hc, const char *legacy_theta, double default_partial,
                          const char *where);
/* Windowed layers: sliding_window (null: none) and layer_types (a list of "sliding_attention" /
 * "full_attention"), else default_pattern (sp_config.window_pattern). */
sp_status sp_hf_read_windows(const cJSON *root, sp_hf_config *hc, int default_pattern, const char *where);
/* A GELU named by a Hugging Face activation string (ACT2FN's names) into cfg->gelu. */
sp_status sp_hf_gelu_kind(const char *name, const char *key, int *gelu, const char *where);

#endif

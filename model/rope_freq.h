/* model/rope_freq.h: the inverse frequencies of RoPE, a pure function of the config.
 *
 * Pair i < r/2 (r = rope_dims) turns by pos * inv_freq[i], inv_freq[i] = base^(-2i/r) (Hugging Face:
 * 1 / base^(arange(0, r, 2) / r)), then scaled: linear divides every frequency by rope_factor;
 * llama3 (transformers' _compute_llama3_parameters) divides those whose wavelength 2 pi / f exceeds
 * original_max_pos / low_freq_factor by the factor, keeps those below original_max_pos /
 * high_freq_factor, and blends between with s = (original_max_pos / wavelength - low_freq_factor) /
 * (high_freq_factor - low_freq_factor): (1 - s) f / factor + s f. Local tables (the windowed layers
 * of a model with rope_local_theta > 0, Gemma 3) use base rope_local_theta and no scaling; the
 * others base rope_theta with the configured scaling. */
#ifndef SP_ROPE_FREQ_H
#define SP_ROPE_FREQ_H

#include "core/config.h"

/* Writes sp_config_rope_dims(cfg) / 2 values into inv_freq; local selects the local table. */
void sp_rope_inv_freq(const sp_config *cfg, int local, double *inv_freq);
/* Does layer l use the local table? */
int sp_rope_layer_local(const sp_config *cfg, int layer);

#endif

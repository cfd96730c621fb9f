/* tests/support/model_fixture.h: tiny models for tests: a small valid config for any variant and
 * option combination, a model on the CPU backend with parameters drawn away from symmetric points,
 * random token batches, and host copies of backend activations. Aborts on failure (tests only). */
#ifndef SP_TEST_MODEL_FIXTURE_H
#define SP_TEST_MODEL_FIXTURE_H

#include "core/rng.h"
#include "model/model.h"

/* d_model 8, n_heads 2, n_kv_heads 1, d_ff 12, vocab 11, n_layers 4, max_seq_len 8, init_std 0.3,
 * global init, untied head; resolved and validated. */
void fixture_tiny_config(sp_config *cfg, int variant, int norm, int ffn, int pos);
/* Tiny configs of the pretrained architectures, every option of docs/import.md switched on somewhere
 * (biases, head_dim != d_model / n_heads, GELU erf, GEGLU, q/k norms, partial and scaled RoPE, local
 * RoPE base, attention scale, soft-caps, sliding windows, embedding scale, parallel residual):
 * config i of FIXTURE_N_PRETRAINED into cfg (resolved and validated), its name returned. */
#define FIXTURE_N_PRETRAINED 10
const char *fixture_pretrained_config(int i, sp_config *cfg);
/* Creates the model on the CPU backend and initializes it from seed; with jitter > 0 every norm
 * gain becomes 1 + jitter N(0,1) and every bias (norm or linear) jitter N(0,1), so no norm or bias
 * sits at its init. */
sp_model *fixture_model(const sp_config *cfg, uint64_t seed, double jitter);
/* n ids uniform in [0, vocab). */
void fixture_tokens(sp_rng *rng, int n, int vocab, int32_t *ids);
/* A malloc'd host copy of n elements of backend memory. */
sp_real *fixture_download(const sp_model *m, const sp_real *src, size_t n);

#endif

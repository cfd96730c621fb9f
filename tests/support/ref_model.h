/* tests/support/ref_model.h: a naive forward pass of a model, on the host in double, from its
 * parameters (read by name) and its config, written from the definitions of docs/model.md without
 * the model's buffers, interpreters or backend: explicit per-layer attention masks, q/k norms,
 * biases, RoPE tables, soft-caps and embedding scale, through the references of ref_ops.h. The
 * block recipes are read from model/recipe.h (their steps are checked elsewhere); one-stream
 * models only (not siamese). */
#ifndef SP_TEST_REF_MODEL_H
#define SP_TEST_REF_MODEL_H

#include "model/model.h"

/* logits [batch * seq_len, vocab] of tokens [batch * seq_len] (host memory): ref_model_decode of the
 * last layer output of ref_model_hidden. */
void ref_model_logits(sp_model *m, const int32_t *tokens, int batch, int seq_len, sp_real *logits);
/* The layer outputs h[0..n_layers], each a malloc'd [batch * seq_len, d_model]: the embedding (and
 * its norm where the config has one), then each block's output. */
void ref_model_hidden(sp_model *m, const int32_t *tokens, int batch, int seq_len, sp_real **h);
/* logits [rows, vocab] of any hidden state h [rows, d_model]: the final norm where the config has
 * one, the head (the token embedding when tied), the logit soft-cap. */
void ref_model_decode(sp_model *m, int rows, const sp_real *h, sp_real *logits);

#endif

/* tests/support/ref_model.h: a naive forward pass of a model, on the host in double, from its
 * parameters (read by name) and its config, written from the definitions of docs/model.md without
 * the model's buffers, interpreters or backend: explicit per-layer attention masks, q/k norms,
 * biases, RoPE tables, soft-caps and embedding scale, through the references of ref_ops.h. The
 * block recipes are read from model/recipe.h (their steps are checked elsewhere); one-stream
 * models only (not siamese). */
#ifndef SP_TEST_REF_MODEL_H
#define SP_TEST_REF_MODEL_H

#include "model/model.h"

/* logits [batch * seq_len, vocab] of tokens [batch * seq_len] (host memory). */
void ref_model_logits(sp_model *m, const int32_t *tokens, int batch, int seq_len, sp_real *logits);

#endif

/* cli/model_load.h: what `generate` and `dump` share: a checkpoint loaded with its tokenizer. */
#ifndef SP_CLI_MODEL_LOAD_H
#define SP_CLI_MODEL_LOAD_H

#include "io/checkpoint.h"

/* Loads the checkpoint at path onto the device named ("cpu", "cuda" or "auto"). meta->tokenizer is
 * the stored tokenizer, else bytes when vocab_size is 256 (an error for other sizes). Free with
 * sp_model_free and sp_ckpt_meta_free. */
sp_status sp_cli_load_model(const char *path, const char *device, sp_model **model, sp_ckpt_meta *meta);

#endif

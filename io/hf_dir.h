/* io/hf_dir.h: a Hugging Face model directory as a spanprobe model, with no conversion step.
 *
 * DIR holds config.json (io/hf_config.h), model.safetensors or shards with
 * model.safetensors.index.json (io/safetensors.h) or else pytorch_model.bin (io/pt_file.h, read
 * without running any of its code), and optionally tokenizer.json with tokenizer_config.json. Every spanprobe parameter is filled from its tensor as the family's table
 * says (io/hf_arch.h), widened from F32/F16/BF16/F64 into sp_real. Before any model memory is
 * allocated, every tensor the config implies is found and its shape checked, so a config.json that
 * contradicts the tensors, a missing tensor, or an extra one (a feature spanprobe would silently
 * drop) is one line and SP_ERR_INPUT; NaN/Inf weights are SP_ERR_NUMERIC.
 */
#ifndef SP_HF_DIR_H
#define SP_HF_DIR_H

#include "io/checkpoint.h"
#include "io/hf_arch.h"

/* Is path a directory holding a config.json? */
int sp_hf_is_model_dir(const char *path);
/* Reads the config and the tokenizer (meta->source names the directory); no weights. */
sp_status sp_hf_read_meta(const char *dir, sp_ckpt_meta *meta);
/* Reads everything and creates the model on be. */
sp_status sp_hf_load(const char *dir, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta);
/* The model of a config already read (hc) from its stored tensors (ts, borrowed): every parameter's
 * tensor found and its shape checked, and every stored tensor used, before any model memory exists
 * (what sp_hf_load does after reading config.json; nanoGPT checkpoints come through here too).
 * where names the input in errors. */
typedef struct sp_tensor_set sp_tensor_set;
sp_status sp_hf_model_from_tensors(const sp_hf_config *hc, const sp_tensor_set *ts, const char *where,
                                   const sp_backend *be, sp_model **model);
/* The config and the stored tensors of a directory (*ts NULL on failure; close with
 * sp_tensor_set_close), unchecked against each other. */
sp_status sp_hf_dir_open(const char *dir, sp_hf_config *hc, sp_tensor_set **ts);
/* The same checks, no model. */
sp_status sp_hf_check_tensors(const sp_hf_config *hc, const sp_tensor_set *ts, const char *where);
/* The safetensors name a spanprobe parameter of this config comes from, into name (cap bytes);
 * SP_ERR_INTERNAL when the family's table has no entry for it. */
sp_status sp_hf_param_tensor(const sp_hf_config *hc, const char *param, char *name, size_t cap);

#endif

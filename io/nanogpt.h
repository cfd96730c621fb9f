/* io/nanogpt.h: the ckpt.pt that nanoGPT's train.py writes (torch.save of a dict holding "model",
 * the state dict, and "model_args", GPTConfig's fields), as a spanprobe model: a GPT-2-shaped
 * PreNorm transformer (io/hf_arch.c, sp_hf_nanogpt), with or without biases, torch.compile's
 * "_orig_mod." prefix accepted. The file is read by io/pt_file.h, which runs none of its code. A
 * PyTorch file that holds a bare state dict has no config: it is read as pytorch_model.bin beside a
 * config.json in a Hugging Face directory (io/hf_dir.h). */
#ifndef SP_NANOGPT_H
#define SP_NANOGPT_H

#include "io/checkpoint.h"
#include "io/hf_arch.h"

/* Is path a regular file that starts like a ZIP archive (what torch.save writes)? */
int sp_pt_is_file(const char *path);
/* The config model_args maps to and the state dict's tensors (*ts NULL on failure; close with
 * sp_tensor_set_close), unchecked against each other; *iter_num -1 where the file has none. */
typedef struct sp_tensor_set sp_tensor_set;
sp_status sp_nanogpt_open(const char *path, sp_hf_config *hc, sp_tensor_set **ts, int64_t *iter_num);
/* The config and provenance, no weights; no tokenizer (nanoGPT keeps none in the checkpoint). */
sp_status sp_nanogpt_read_meta(const char *path, sp_ckpt_meta *meta);
sp_status sp_nanogpt_load(const char *path, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta);

#endif

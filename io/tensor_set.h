/* io/tensor_set.h: the stored tensors of a model, whichever file holds them: safetensors (one file,
 * or shards with their index) or PyTorch state dicts (a Hugging Face pytorch_model.bin or its shards,
 * the "model" entry of a nanoGPT ckpt.pt), read through io/pt_file.h without running any of its code. Each
 * tensor is an sp_tensor_view (io/param_fill.h) whose reader converts to sp_real, so the importers
 * map names to parameters the same way whatever the container. */
#ifndef SP_TENSOR_SET_H
#define SP_TENSOR_SET_H

#include "io/param_fill.h"
#include "io/pt_file.h"

typedef struct sp_tensor_set sp_tensor_set;

/* The weights of a model directory: model.safetensors (or model.safetensors.index.json and its
 * shards), else pytorch_model.bin (or pytorch_model.bin.index.json and its shards, which must hold
 * exactly the tensors its weight map assigns them). */
sp_status sp_tensor_set_open_dir(const char *dir, sp_tensor_set **out);
/* The state dict `dict` of the open PyTorch file f (taken over: closed with the set, also on
 * failure): every key a string, every value a tensor. Keys that start with `strip` (may be NULL;
 * torch.compile's "_orig_mod.") are known without it. */
sp_status sp_tensor_set_open_pt(sp_pt_file *f, const sp_pk_value *dict, const char *strip, sp_tensor_set **out);
void sp_tensor_set_close(sp_tensor_set *s); /* NULL is fine */

int sp_tensor_set_count(const sp_tensor_set *s);
const sp_tensor_view *sp_tensor_set_at(const sp_tensor_set *s, int i);
const sp_tensor_view *sp_tensor_set_find(const sp_tensor_set *s, const char *name); /* NULL when absent */
/* Bytes of tensor data, as stored: each storage once (tied tensors share theirs). */
size_t sp_tensor_set_bytes(const sp_tensor_set *s);

#endif

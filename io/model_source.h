/* io/model_source.h: every model input spanprobe reads, behind one call: its own HDF5 checkpoints,
 * Hugging Face model directories (io/hf_dir.h), GGUF files (io/gguf_model.h) and nanoGPT's PyTorch
 * checkpoints (io/nanogpt.h). Commands that take a checkpoint call these,
 * so each new format is one more case here and no command changes. */
#ifndef SP_MODEL_SOURCE_H
#define SP_MODEL_SOURCE_H

#include "io/checkpoint.h"

typedef enum { SP_SOURCE_CHECKPOINT, SP_SOURCE_HF_DIR, SP_SOURCE_GGUF, SP_SOURCE_PT } sp_model_source_kind;

/* Which reader path needs: a directory with a config.json is a Hugging Face model, a regular file
 * starting with "GGUF" a GGUF model, one starting like a ZIP archive a PyTorch checkpoint (nanoGPT's
 * ckpt.pt: io/nanogpt.h), anything else goes to the HDF5 readers (which reject what they do not
 * recognize). */
sp_model_source_kind sp_model_source_kind_of(const char *path);
const char *sp_model_source_kind_name(sp_model_source_kind kind); /* "checkpoint", "hugging face directory", ... */
/* A short name of the model at path for figure legends: its file or directory name, without a
 * trailing '/' and without the extension of a known kind (".h5", ".gguf", ".pt", ".pth"). */
void sp_model_source_name(const char *path, char *buf, size_t len);
/* The SHA-256 a report records of its input, and the input's size: of the file itself, or for a
 * model directory of the text "<name> <sha256 of the file>\n" over its regular files in name order
 * (so the digest changes when any file does); *n_bytes gets the total size. */
sp_status sp_model_source_sha256(const char *path, char hex[65], int64_t *n_bytes);
/* SP_ERR_USAGE when writing output (a path about to be replaced atomically) would replace the model
 * input itself or, for a model directory, one of its files. */
sp_status sp_model_source_check_output(const char *input, const char *output);
/* The same for every pair of n_out outputs and n_in inputs of one command (NULL entries skipped). */
sp_status sp_check_outputs(const char *const *outputs, int n_out, const char *const *inputs, int n_in);
/* The config, tokenizer and provenance, no weights. */
sp_status sp_model_source_read_meta(const char *path, sp_ckpt_meta *meta);
/* The model on be, with its meta. */
sp_status sp_model_source_load(const char *path, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta);

#endif

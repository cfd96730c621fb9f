/* cli/inspect.h: the collectors behind `spanprobe inspect`: each reads one kind of input into the
 * JSON document the command prints (file, format, format_version, attributes by group, tensors). */
#ifndef SP_CLI_INSPECT_H
#define SP_CLI_INSPECT_H

#include <cJSON.h>

#include "core/config.h"

/* A Hugging Face model directory (cli/inspect_hf.c). */
sp_status sp_inspect_collect_hf(const char *dir, cJSON **out);
/* A nanoGPT ckpt.pt (cli/inspect_hf.c). */
sp_status sp_inspect_collect_pt(const char *path, cJSON **out);
/* A GGUF model file (cli/inspect_gguf.c). */
sp_status sp_inspect_collect_gguf(const char *path, cJSON **out);
/* The group "/config (spanprobe)": every field of the config a model input maps to. */
void sp_inspect_add_config(const sp_config *cfg, cJSON *attrs);

#endif

/* cli/inspect.h: the collectors behind `spanprobe inspect`: each reads one kind of input into the
 * JSON document the command prints (file, format, format_version, attributes by group, tensors). */
#ifndef SP_CLI_INSPECT_H
#define SP_CLI_INSPECT_H

#include <cJSON.h>

#include "core/common.h"

/* A Hugging Face model directory (cli/inspect_hf.c). */
sp_status sp_inspect_collect_hf(const char *dir, cJSON **out);

#endif

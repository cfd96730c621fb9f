/* io/hf_keys.h: typed reads of config.json values, each failure one line naming the file and key.
 * A key that is absent or JSON null leaves *out as it is (the caller's default) unless required. */
#ifndef SP_HF_KEYS_H
#define SP_HF_KEYS_H

#include <cJSON.h>

#include "core/common.h"

/* An integral number within [min, max]. */
sp_status sp_hf_json_int(const cJSON *obj, const char *key, int64_t min, int64_t max, int required, int *out,
                         const char *where);
/* A finite number. */
sp_status sp_hf_json_double(const cJSON *obj, const char *key, int required, double *out, const char *where);
sp_status sp_hf_json_bool(const cJSON *obj, const char *key, int *out, const char *where);
/* A string (borrowed from obj). */
sp_status sp_hf_json_string(const cJSON *obj, const char *key, int required, const char **out, const char *where);
/* The member, NULL when absent or null. */
const cJSON *sp_hf_json_get(const cJSON *obj, const char *key);
/* A key that must be absent, null, false or 0, since spanprobe does not implement what it turns on. */
sp_status sp_hf_json_unsupported(const cJSON *obj, const char *key, const char *what, const char *where);

#endif

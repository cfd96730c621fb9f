/* io/json_text.h: parsing untrusted JSON text (safetensors headers and indexes) strictly: valid
 * UTF-8, no raw control characters (JSON allows them only escaped; cJSON would take them, and would
 * treat any of them as whitespace), one value filling the whole text apart from whitespace. */
#ifndef SP_JSON_TEXT_H
#define SP_JSON_TEXT_H

#include <cJSON.h>

#include "core/common.h"

/* Parses the len bytes at text (need not be NUL-terminated) into *root (cJSON_Delete), which must be
 * an object. The text starts at byte `base` of its file; errors are SP_ERR_INPUT "<where>: ..." with
 * the file offset of the offending byte. */
sp_status sp_json_parse_object(const char *where, const unsigned char *text, size_t len, size_t base, cJSON **root);
/* SP_ERR_INPUT "<where>: \"key\" appears twice" when a key of the object repeats (cJSON keeps every
 * member, and lookups would see only the first); O(n log n). */
sp_status sp_json_check_unique_keys(const char *where, const cJSON *object);
/* "an object", "an array", "a string", "a number", "a boolean" or "null", for "expected ..., found
 * ..." messages. */
const char *sp_json_type_name(const cJSON *v);

#endif

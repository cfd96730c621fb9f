/* io/config_file.h: model configs as JSON ({"variant": "span", "n_layers": 8, ...}).
 * Keys are the field names of core/config.h; values are numbers, booleans or strings (enums by
 * name). Unknown keys and wrong types are errors naming the file and the key. */
#ifndef SP_CONFIG_FILE_H
#define SP_CONFIG_FILE_H

#include "core/config.h"

/* Applies every key of the JSON object in `path` on top of *cfg. */
sp_status sp_config_load_json(const char *path, sp_config *cfg);
/* Writes cfg as a JSON object string (caller frees with free()). */
char *sp_config_to_json(const sp_config *cfg);

#endif

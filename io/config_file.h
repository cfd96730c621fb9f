/* io/config_file.h: model configs as JSON ({"variant": "span", "n_layers": 8, ...}).
 * Keys are the field names of core/config.h; values are numbers, booleans or strings (enums by
 * name). Unknown keys and wrong types are errors naming the file and the key. */
#ifndef SP_CONFIG_FILE_H
#define SP_CONFIG_FILE_H

#include "core/config.h"
#include "core/fields.h"

/* Applies every key of the JSON object in `path` to obj through its field table. */
sp_status sp_fields_load_json(const char *path, const sp_field_table *t, void *obj);
/* The same for a file whose keys belong to several structs (a training config holds model and
 * training keys): each key goes to the first table that has it, objs[i] being tables[i]'s struct. */
sp_status sp_fields_load_json_tables(const char *path, int n_tables, const sp_field_table *const *tables,
                                     void *const *objs);
/* The same from JSON text already in memory; `where` names its origin in errors. */
sp_status sp_fields_apply_json(const char *text, const char *where, int n_tables, const sp_field_table *const *tables,
                               void *const *objs);
/* Adds every field of obj to a cJSON object (passed as void * to keep cJSON out of this header). */
void sp_fields_to_json(const sp_field_table *t, const void *obj, void *cjson_object);

#endif


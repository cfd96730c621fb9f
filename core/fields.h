/* core/fields.h: option structs described by a table of fields, so that command-line options, JSON
 * files and HDF5 attributes are read and written by one generic walker. A field names a member by
 * its offset; enums are stored as int and spelled by name. Used by the model config
 * (core/config.h) and the training options (train/options.h). */
#ifndef SP_FIELDS_H
#define SP_FIELDS_H

#include "core/common.h"

typedef enum { SP_FIELD_INT, SP_FIELD_DOUBLE, SP_FIELD_BOOL, SP_FIELD_ENUM, SP_FIELD_INT64, SP_FIELD_STRING } sp_field_type;

#define SP_FIELD_STRING_MAX 256 /* SP_FIELD_STRING members are char[SP_FIELD_STRING_MAX] */

typedef struct {
    const char *name;        /* as in files and JSON ("d_model"); the CLI spells it --d-model */
    sp_field_type type;
    size_t offset;           /* of the member in its struct */
    const char *const *enum_names; /* NULL-terminated, for SP_FIELD_ENUM */
    const char *help;
} sp_field;

typedef struct {
    const sp_field *fields;
    int n_fields;
} sp_field_table;

/* Accepts d_model or d-model; NULL when absent. */
const sp_field *sp_fields_find(const sp_field_table *t, const char *name);
/* Parses value into the member; `where` prefixes the error ("--d-model", "run.json: d_model"). */
sp_status sp_fields_set(const sp_field_table *t, void *obj, const char *name, const char *value, const char *where);
/* Formats a member (enums by name, doubles with 17 digits so they read back exactly). */
void sp_fields_format(const void *obj, const sp_field *f, char *buf, size_t len);
int sp_enum_lookup(const char *const *names, const char *value); /* -1 when absent */

/* An integer option's value and its allowed range [min, max]; note (NULL: none) follows the range
 * in the error. */
typedef struct {
    const char *name;
    int64_t value, min, max;
    const char *note;
} sp_int_range;
/* The first value outside its range fails: sp_error(code, "<where>: <name> = <value> is out of range
 * (expected <min>..<max><note>)"). */
sp_status sp_check_int_ranges(const sp_int_range *ranges, size_t n, sp_status code, const char *where);

#endif

#include "io/config_file.h"

#include "core/input_file.h"
#include "io/json_number.h"

#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sp_status read_text(const char *path, char **out)
{
    FILE *f = NULL;
    SP_TRY(sp_file_open_regular(path, &f, NULL));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            if (cap > (64u << 20)) {
                free(buf);
                fclose(f);
                return sp_error(SP_ERR_INPUT, "%s: config file larger than 64 MiB", path);
            }
            char *grown = realloc(buf, cap);
            if (!grown) {
                free(buf);
                fclose(f);
                return sp_error(SP_ERR_NOMEM, "%s: out of memory reading config", path);
            }
            buf = grown;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return sp_error(SP_ERR_IO, "%s: read error", path);
    }
    buf[len] = '\0';
    *out = buf;
    return SP_OK;
}

sp_status sp_fields_apply_json(const char *text, const char *where, int n_tables, const sp_field_table *const *tables,
                               void *const *objs)
{
    cJSON *root = cJSON_Parse(text);
    sp_status st = SP_OK;
    if (!root || !cJSON_IsObject(root))
        st = sp_error(SP_ERR_INPUT, "%s: not a JSON object%s", where, root ? "" : " (parse error)");
    char item_where[512], value[SP_FIELD_STRING_MAX];
    for (cJSON *item = root ? root->child : NULL; item && st == SP_OK; item = item->next) {
        snprintf(item_where, sizeof item_where, "%s: %s", where, item->string);
        const sp_field *f = NULL;
        int t = 0;
        for (; t < n_tables && !f; t++)
            f = sp_fields_find(tables[t], item->string);
        if (!f) {
            st = sp_error(SP_ERR_INPUT, "%s: unknown field", item_where);
            break;
        }
        /* values pass through the command line's parsers as text, so a file is held to the same
         * rules: 16.4 is no integer, and a string too long for its field is refused, not cut */
        if (cJSON_IsBool(item))
            snprintf(value, sizeof value, "%s", cJSON_IsTrue(item) ? "true" : "false");
        else if (cJSON_IsNumber(item))
            snprintf(value, sizeof value, "%.17g", item->valuedouble);
        else if (cJSON_IsString(item) && strlen(item->valuestring) >= sizeof value) {
            st = sp_error(SP_ERR_INPUT, "%s: longer than %d characters", item_where, (int)sizeof value - 1);
            break;
        } else if (cJSON_IsString(item))
            snprintf(value, sizeof value, "%s", item->valuestring);
        else {
            st = sp_error(SP_ERR_INPUT, "%s: expected a number, boolean or string", item_where);
            break;
        }
        if (sp_fields_set(tables[t - 1], objs[t - 1], item->string, value, item_where) != SP_OK)
            st = SP_ERR_INPUT; /* a bad value in a file is bad input, not bad usage */
    }
    cJSON_Delete(root);
    return st;
}

sp_status sp_fields_load_json_tables(const char *path, int n_tables, const sp_field_table *const *tables,
                                     void *const *objs)
{
    char *text = NULL;
    SP_TRY(read_text(path, &text));
    sp_status st = sp_fields_apply_json(text, path, n_tables, tables, objs);
    free(text);
    return st;
}

sp_status sp_fields_load_json(const char *path, const sp_field_table *t, void *obj)
{
    return sp_fields_load_json_tables(path, 1, &t, &obj);
}

void sp_fields_to_json(const sp_field_table *t, const void *obj, void *cjson_object)
{
    cJSON *root = cjson_object;
    char value[SP_FIELD_STRING_MAX];
    for (int i = 0; i < t->n_fields; i++) {
        const sp_field *f = &t->fields[i];
        const char *p = (const char *)obj + f->offset;
        switch (f->type) {
        case SP_FIELD_INT: cJSON_AddNumberToObject(root, f->name, *(const int *)p); break;
        case SP_FIELD_INT64: cJSON_AddNumberToObject(root, f->name, (double)*(const int64_t *)p); break;
        case SP_FIELD_DOUBLE: cJSON_AddItemToObject(root, f->name, sp_json_exact_number(*(const double *)p)); break;
        case SP_FIELD_BOOL: cJSON_AddBoolToObject(root, f->name, *(const int *)p > 0); break;
        case SP_FIELD_ENUM:
        case SP_FIELD_STRING:
            sp_fields_format(obj, f, value, sizeof value);
            cJSON_AddStringToObject(root, f->name, value);
            break;
        }
    }
}

#include "io/config_file.h"

#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sp_status read_text(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return sp_error(SP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
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

sp_status sp_config_load_json(const char *path, sp_config *cfg)
{
    char *text = NULL;
    SP_TRY(read_text(path, &text));
    cJSON *root = cJSON_Parse(text);
    sp_status st = SP_OK;
    if (!root || !cJSON_IsObject(root)) {
        st = sp_error(SP_ERR_INPUT, "%s: not a JSON object%s", path, root ? "" : " (parse error)");
        goto done;
    }
    char where[512], value[64];
    for (cJSON *item = root->child; item && st == SP_OK; item = item->next) {
        snprintf(where, sizeof where, "%s: %s", path, item->string);
        const sp_config_field *f = sp_config_find(item->string);
        if (!f) {
            st = sp_error(SP_ERR_INPUT, "%s: unknown config field", where);
            break;
        }
        if (cJSON_IsBool(item))
            snprintf(value, sizeof value, "%s", cJSON_IsTrue(item) ? "true" : "false");
        else if (cJSON_IsNumber(item))
            snprintf(value, sizeof value, "%.17g", item->valuedouble);
        else if (cJSON_IsString(item))
            snprintf(value, sizeof value, "%s", item->valuestring);
        else {
            st = sp_error(SP_ERR_INPUT, "%s: expected a number, boolean or string", where);
            break;
        }
        if (f->type == SP_FIELD_INT && cJSON_IsNumber(item))
            snprintf(value, sizeof value, "%.0f", item->valuedouble);
        st = sp_config_set(cfg, item->string, value, where);
        if (st == SP_ERR_USAGE) /* a bad value in a file is bad input, not bad usage */
            st = SP_ERR_INPUT;
    }
done:
    cJSON_Delete(root);
    free(text);
    return st;
}

char *sp_config_to_json(const sp_config *cfg)
{
    cJSON *root = cJSON_CreateObject();
    char value[64];
    for (int i = 0; i < sp_n_config_fields; i++) {
        const sp_config_field *f = &sp_config_fields[i];
        const char *p = (const char *)cfg + f->offset;
        switch (f->type) {
        case SP_FIELD_INT: cJSON_AddNumberToObject(root, f->name, *(const int *)p); break;
        case SP_FIELD_DOUBLE: cJSON_AddNumberToObject(root, f->name, *(const double *)p); break;
        case SP_FIELD_BOOL: cJSON_AddBoolToObject(root, f->name, *(const int *)p > 0); break;
        case SP_FIELD_ENUM:
            sp_config_format(cfg, f, value, sizeof value);
            cJSON_AddStringToObject(root, f->name, value);
            break;
        }
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

/* io/hf_json.c: reading tokenizer.json's fields, with one-line errors naming the file and the
 * field's JSON path (io/hf_engine.h). */
#include <stdio.h>
#include <string.h>

#include "io/hf_engine.h"

const char *sp_hf_type(const cJSON *j)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

sp_status sp_hf_unsupported(const cJSON *j, const char *file, const char *path, const char *supported)
{
    const char *type = sp_hf_type(j);
    if (!type)
        return sp_error(SP_ERR_INPUT, "%s: %s: expected an object with a \"type\" (supported: %s)", file, path,
                        supported);
    return sp_error(SP_ERR_INPUT, "%s: %s.type '%s' is not supported (supported: %s)", file, path, type, supported);
}

sp_status sp_hf_get_string(const cJSON *j, const char *key, const char *file, const char *path, const char **s)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsString(v))
        return sp_error(SP_ERR_INPUT, "%s: %s.%s: expected a string", file, path, key);
    *s = v->valuestring;
    return SP_OK;
}

sp_status sp_hf_get_bool(const cJSON *j, const char *key, int def, const char *file, const char *path, int *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    *b = v && !cJSON_IsNull(v) ? cJSON_IsTrue(v) : def;
    if (v && !cJSON_IsBool(v) && !cJSON_IsNull(v))
        return sp_error(SP_ERR_INPUT, "%s: %s.%s: expected true or false", file, path, key);
    return SP_OK;
}

sp_status sp_hf_get_char(const cJSON *j, const char *key, const char *file, const char *path, char ch[4],
                         size_t *len)
{
    const char *s = NULL;
    size_t end = 0;
    SP_TRY(sp_hf_get_string(j, key, file, path, &s));
    if (s[0])
        sp_hf_utf8_next(s, &end);
    if (!s[0] || s[end])
        return sp_error(SP_ERR_INPUT, "%s: %s.%s '%s': expected one character", file, path, key, s);
    memcpy(ch, s, end);
    *len = end;
    return SP_OK;
}

sp_status sp_hf_get_pattern(const cJSON *j, const char *file, const char *path, sp_hf_regex **re)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "pattern");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "String"), *r = cJSON_GetObjectItemCaseSensitive(p, "Regex");
    const cJSON *v = cJSON_IsString(s) ? s : r;
    if (!cJSON_IsString(v))
        return sp_error(SP_ERR_INPUT, "%s: %s.pattern: expected {\"String\": ...} or {\"Regex\": ...}", file, path);
    char where[SP_HF_WHERE_MAX];
    snprintf(where, sizeof where, "%s: %s.pattern.%s", file, path, v == s ? "String" : "Regex");
    return sp_hf_regex_compile(v->valuestring, strlen(v->valuestring), v == s, where, re);
}

sp_status sp_hf_each_member(const cJSON *j, const char *key, const char *file, const char *path, sp_hf_member_fn fn,
                            void *ctx)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsArray(list))
        return sp_error(SP_ERR_INPUT, "%s: %s.%s: expected an array", file, path, key);
    int i = 0;
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        char sub[SP_HF_WHERE_MAX];
        snprintf(sub, sizeof sub, "%s.%s[%d]", path, key, i);
        SP_TRY(fn(ctx, e, sub));
    }
    return SP_OK;
}

#include "io/json_text.h"

#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"

const char *sp_json_type_name(const cJSON *v)
{
    return cJSON_IsObject(v) ? "an object"
         : cJSON_IsArray(v)  ? "an array"
         : cJSON_IsString(v) ? "a string"
         : cJSON_IsNumber(v) ? "a number"
         : cJSON_IsBool(v)   ? "a boolean"
                             : "null";
}

static int by_key(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

sp_status sp_json_check_unique_keys(const char *where, const cJSON *object)
{
    size_t n = (size_t)cJSON_GetArraySize(object), i = 0;
    const cJSON **members = sp_malloc(n * sizeof *members, where);
    if (!members)
        return SP_ERR_NOMEM;
    const cJSON *item;
    cJSON_ArrayForEach(item, object)
        members[i++] = item;
    qsort(members, n, sizeof *members, by_key);
    sp_status status = SP_OK;
    for (i = 1; i < n && status == SP_OK; i++)
        if (strcmp(members[i]->string, members[i - 1]->string) == 0)
            status = sp_error(SP_ERR_INPUT, "%s: \"%s\" appears twice", where, members[i]->string);
    free(members);
    return status;
}

/* s is NUL-terminated after len bytes. */
static sp_status check_characters(const char *where, const unsigned char *s, size_t len, size_t base)
{
    for (size_t i = 0; i < len;) {
        if (s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            return sp_error(SP_ERR_INPUT, "%s: byte %zu of the file is the control character 0x%02x (expected JSON text)", where,
                            base + i, s[i]);
        int n = sp_utf8_length(s + i);
        if (n == 0)
            return sp_error(SP_ERR_INPUT, "%s: byte %zu of the file (0x%02x) does not start a valid UTF-8 sequence", where,
                            base + i, s[i]);
        i += (size_t)n;
    }
    return SP_OK;
}

sp_status sp_json_parse_object(const char *where, const unsigned char *text, size_t len, size_t base, cJSON **root)
{
    *root = NULL;
    /* a NUL-terminated copy: the UTF-8 check may look one byte past a truncated sequence, and cJSON
     * checks that nothing but whitespace follows the value only up to a NUL */
    char *copy = sp_malloc(len + 1, where);
    if (!copy)
        return SP_ERR_NOMEM;
    if (len)
        memcpy(copy, text, len);
    copy[len] = '\0';
    sp_status status = check_characters(where, (const unsigned char *)copy, len, base);
    const char *end = NULL;
    cJSON *doc = status == SP_OK ? cJSON_ParseWithLengthOpts(copy, len + 1, &end, 1) : NULL;
    if (status == SP_OK && !doc)
        status = sp_error(SP_ERR_INPUT, "%s: not valid JSON (error at byte %zu of the file)", where,
                          base + (size_t)(end - copy));
    else if (status == SP_OK && !cJSON_IsObject(doc))
        status = sp_error(SP_ERR_INPUT, "%s: expected a JSON object, found %s", where, sp_json_type_name(doc));
    free(copy);
    if (status != SP_OK)
        cJSON_Delete(doc);
    else
        *root = doc;
    return status;
}

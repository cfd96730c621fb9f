#include "io/hf_keys.h"

#include <math.h>
#include <string.h>

const cJSON *sp_hf_json_get(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static sp_status missing(const char *key, const char *where)
{
    return sp_error(SP_ERR_INPUT, "%s: required key \"%s\" is missing", where, key);
}

sp_status sp_hf_json_double(const cJSON *obj, const char *key, int required, double *out, const char *where)
{
    const cJSON *v = sp_hf_json_get(obj, key);
    if (!v)
        return required ? missing(key, where) : SP_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return sp_error(SP_ERR_INPUT, "%s: \"%s\" must be a finite number", where, key);
    *out = v->valuedouble;
    return SP_OK;
}

sp_status sp_hf_json_int(const cJSON *obj, const char *key, int64_t min, int64_t max, int required, int *out,
                         const char *where)
{
    double v = 0;
    if (!sp_hf_json_get(obj, key))
        return required ? missing(key, where) : SP_OK;
    SP_TRY(sp_hf_json_double(obj, key, 1, &v, where));
    if (v != floor(v) || v < (double)min || v > (double)max)
        return sp_error(SP_ERR_INPUT, "%s: \"%s\" = %.17g is out of range (expected an integer in %lld..%lld)", where,
                        key, v, (long long)min, (long long)max);
    *out = (int)v;
    return SP_OK;
}

sp_status sp_hf_json_bool(const cJSON *obj, const char *key, int *out, const char *where)
{
    const cJSON *v = sp_hf_json_get(obj, key);
    if (!v)
        return SP_OK;
    if (!cJSON_IsBool(v))
        return sp_error(SP_ERR_INPUT, "%s: \"%s\" must be true or false", where, key);
    *out = cJSON_IsTrue(v);
    return SP_OK;
}

sp_status sp_hf_json_string(const cJSON *obj, const char *key, int required, const char **out, const char *where)
{
    const cJSON *v = sp_hf_json_get(obj, key);
    if (!v)
        return required ? missing(key, where) : SP_OK;
    if (!cJSON_IsString(v))
        return sp_error(SP_ERR_INPUT, "%s: \"%s\" must be a string", where, key);
    *out = v->valuestring;
    return SP_OK;
}

sp_status sp_hf_json_unsupported(const cJSON *obj, const char *key, const char *what, const char *where)
{
    const cJSON *v = sp_hf_json_get(obj, key);
    if (!v || cJSON_IsFalse(v) || (cJSON_IsNumber(v) && v->valuedouble == 0))
        return SP_OK;
    char *text = cJSON_PrintUnformatted(v);
    sp_status st = sp_error(SP_ERR_INPUT, "%s: \"%s\" = %.60s turns on %s, which spanprobe does not implement", where,
                            key, text ? text : "?", what);
    cJSON_free(text);
    return st;
}

#include "core/fields.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sp_enum_lookup(const char *const *names, const char *value)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], value) == 0)
            return i;
    return -1;
}

const sp_field *sp_fields_find(const sp_field_table *t, const char *name)
{
    char key[64];
    size_t n = strlen(name);
    if (n >= sizeof key)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        key[i] = name[i] == '-' ? '_' : name[i];
    for (int i = 0; i < t->n_fields; i++)
        if (strcmp(t->fields[i].name, key) == 0)
            return &t->fields[i];
    return NULL;
}

static void join_names(const char *const *names, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; names[i]; i++) {
        strncat(buf, i ? "|" : "", len - strlen(buf) - 1);
        strncat(buf, names[i], len - strlen(buf) - 1);
    }
}

sp_status sp_fields_set(const sp_field_table *t, void *obj, const char *name, const char *value, const char *where)
{
    const sp_field *f = sp_fields_find(t, name);
    if (!f)
        return sp_error(SP_ERR_USAGE, "%s: unknown option '%s'", where, name);
    char *p = (char *)obj + f->offset;
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case SP_FIELD_INT:
    case SP_FIELD_INT64: {
        long long v = strtoll(value, &end, 10);
        long long lo = f->type == SP_FIELD_INT ? INT_MIN : LLONG_MIN, hi = f->type == SP_FIELD_INT ? INT_MAX : LLONG_MAX;
        if (errno || end == value || *end || v < lo || v > hi)
            return sp_error(SP_ERR_USAGE, "%s: expected an integer for %s, found '%s'", where, f->name, value);
        if (f->type == SP_FIELD_INT)
            *(int *)p = (int)v;
        else
            *(int64_t *)p = (int64_t)v;
        break;
    }
    case SP_FIELD_DOUBLE: {
        double v = strtod(value, &end);
        if (errno || end == value || *end || !isfinite(v))
            return sp_error(SP_ERR_USAGE, "%s: expected a finite number for %s, found '%s'", where, f->name, value);
        *(double *)p = v;
        break;
    }
    case SP_FIELD_BOOL: {
        static const char *const bool_names[] = {"false", "true", "0", "1", "no", "yes", NULL};
        int v = sp_enum_lookup(bool_names, value);
        if (v < 0)
            return sp_error(SP_ERR_USAGE, "%s: expected true or false for %s, found '%s'", where, f->name, value);
        *(int *)p = v % 2;
        break;
    }
    case SP_FIELD_ENUM: {
        int v = sp_enum_lookup(f->enum_names, value);
        if (v < 0) {
            char names[256];
            join_names(f->enum_names, names, sizeof names);
            return sp_error(SP_ERR_USAGE, "%s: unknown %s '%s' (expected %s)", where, f->name, value, names);
        }
        *(int *)p = v;
        break;
    }
    case SP_FIELD_STRING:
        if (strlen(value) >= SP_FIELD_STRING_MAX)
            return sp_error(SP_ERR_USAGE, "%s: %s is longer than %d characters", where, f->name, SP_FIELD_STRING_MAX - 1);
        memcpy(p, value, strlen(value) + 1);
        break;
    }
    return SP_OK;
}

void sp_fields_format(const void *obj, const sp_field *f, char *buf, size_t len)
{
    const char *p = (const char *)obj + f->offset;
    switch (f->type) {
    case SP_FIELD_INT: snprintf(buf, len, "%d", *(const int *)p); break;
    case SP_FIELD_INT64: snprintf(buf, len, "%" PRId64, *(const int64_t *)p); break;
    case SP_FIELD_DOUBLE: snprintf(buf, len, "%.17g", *(const double *)p); break;
    case SP_FIELD_BOOL: snprintf(buf, len, "%s", *(const int *)p > 0 ? "true" : "false"); break;
    case SP_FIELD_STRING: snprintf(buf, len, "%s", p); break;
    case SP_FIELD_ENUM: {
        int v = *(const int *)p, n = 0;
        while (f->enum_names[n])
            n++;
        snprintf(buf, len, "%s", v >= 0 && v < n ? f->enum_names[v] : "?");
        break;
    }
    }
}

sp_status sp_check_int_ranges(const sp_int_range *ranges, size_t n, sp_status code, const char *where)
{
    for (size_t i = 0; i < n; i++) {
        const sp_int_range *r = &ranges[i];
        if (r->value < r->min || r->value > r->max)
            return sp_error(code, "%s: %s = %" PRId64 " is out of range (expected %" PRId64 "..%" PRId64 "%s)",
                            where, r->name, r->value, r->min, r->max, r->note ? r->note : "");
    }
    return SP_OK;
}

#include "core/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char error_message[1024];
static _Thread_local sp_status error_code = SP_OK;

void sp_escape_controls(const char *in, char *out, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && o + 1 < len; p++) {
        char esc[5] = {0};
        if (*p == '\n' || *p == '\r' || *p == '\t')
            esc[0] = '\\', esc[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
        else if (*p < 0x20 || *p == 0x7f)
            esc[0] = '\\', esc[1] = 'x', esc[2] = hex[*p >> 4], esc[3] = hex[*p & 15];
        else
            esc[0] = (char)*p;
        size_t n = strlen(esc);
        if (o + n >= len)
            break;
        memcpy(out + o, esc, n);
        o += n;
    }
    out[o] = '\0';
}

sp_status sp_error(sp_status code, const char *fmt, ...)
{
    if (error_code != SP_OK) /* keep the first, most specific message */
        return code;
    char raw[sizeof error_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* names from files and command lines may hold newlines or terminal escapes: one line, inert */
    sp_escape_controls(raw, error_message, sizeof error_message);
    error_code = code;
    return code;
}

void sp_error_context(const char *fmt, ...)
{
    if (error_code == SP_OK)
        return;
    char context[512], raw[sizeof error_message + sizeof context + 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    snprintf(raw, sizeof raw, "%s: %s", context, error_message);
    sp_escape_controls(raw, error_message, sizeof error_message);
}

const char *sp_error_message(void) { return error_code == SP_OK ? "" : error_message; }
sp_status sp_error_code(void) { return error_code; }

void sp_error_clear(void)
{
    error_code = SP_OK;
    error_message[0] = '\0';
}

sp_status sp_size_mul(size_t a, size_t b, size_t *out, const char *what)
{
    if (a != 0 && b > SIZE_MAX / a)
        return sp_error(SP_ERR_INPUT, "%s: size %zu x %zu overflows", what, a, b);
    *out = a * b;
    return SP_OK;
}

sp_status sp_size_mul3(size_t a, size_t b, size_t c, size_t *out, const char *what)
{
    size_t ab = 0;
    SP_TRY(sp_size_mul(a, b, &ab, what));
    return sp_size_mul(ab, c, out, what);
}

sp_status sp_grow(void **items, size_t *cap, size_t need, size_t elem_size, const char *what)
{
    if (need <= *cap)
        return SP_OK;
    size_t c = *cap ? *cap : 64, bytes = 0;
    while (c < need)
        c *= 2;
    SP_TRY(sp_size_mul(c, elem_size, &bytes, what));
    void *p = realloc(*items, bytes);
    if (!p)
        return sp_error(SP_ERR_NOMEM, "out of memory growing %s to %zu entries", what, c);
    *items = p;
    *cap = c;
    return SP_OK;
}

void *sp_malloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        sp_error(SP_ERR_NOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

void *sp_calloc(size_t n, size_t size, const char *what)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        sp_error(SP_ERR_NOMEM, "out of memory allocating %zu x %zu bytes for %s", n, size, what);
    return p;
}

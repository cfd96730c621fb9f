#include "core/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static _Thread_local char error_message[1024];
static _Thread_local sp_status error_code = SP_OK;

sp_status sp_error(sp_status code, const char *fmt, ...)
{
    if (error_code != SP_OK) /* keep the first, most specific message */
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    error_code = code;
    return code;
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

#include "plots/text_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/atomic.h"

static int reserve(sp_text *t, size_t extra)
{
    if (t->failed)
        return 0;
    if (t->len + extra + 1 <= t->cap)
        return 1;
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + extra + 1)
        cap *= 2;
    char *grown = realloc(t->text, cap);
    if (!grown) {
        t->failed = 1;
        return 0;
    }
    t->text = grown;
    t->cap = cap;
    return 1;
}

void sp_text_printf(sp_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(t, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(t->text + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

void sp_text_quoted(sp_text *t, const char *s)
{
    sp_text_printf(t, "\"");
    for (; *s; s++)
        sp_text_printf(t, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
    sp_text_printf(t, "\"");
}

sp_status sp_text_status(const sp_text *t, const char *what)
{
    return t->failed ? sp_error(SP_ERR_NOMEM, "%s: out of memory composing the text", what) : SP_OK;
}

const char *sp_text_str(const sp_text *t) { return t->text ? t->text : ""; }

void sp_text_free(sp_text *t)
{
    free(t->text);
    *t = (sp_text){0};
}

sp_status sp_text_write_file(const sp_text *t, const char *path)
{
    SP_TRY(sp_text_status(t, path));
    return sp_atomic_write_file(path, sp_text_str(t), t->len);
}

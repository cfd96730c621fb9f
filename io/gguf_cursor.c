/* io/gguf_cursor.c: bounds-checked reads from a GGUF mapping, and errors that name what was being
 * read (the header, a metadata key and the element below it, or a tensor info). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "io/gguf_file.h"
#include "io/le.h"

void gguf_value_where(const sp_gguf *g, size_t key_at, int depth, const size_t *path, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "metadata '%s'", g->strings + key_at);
    for (int d = 0; d < depth && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, "[%zu]", path[d]);
}

/* "metadata 'key'[2][0]", "metadata key 3", "tensor 'name'", "tensor info 3", "header". */
static void describe(const gguf_cursor *c, char *buf, size_t len)
{
    int metadata = strcmp(c->section, "metadata") == 0;
    if (c->item < 0)
        snprintf(buf, len, "%s", c->section);
    else if (!c->named)
        snprintf(buf, len, "%s %d", metadata ? "metadata key" : c->section, c->item);
    else if (metadata)
        gguf_value_where(c->g, c->name_at, c->depth, c->path, buf, len);
    else
        snprintf(buf, len, "tensor '%s'", c->g->strings + c->name_at);
}

sp_status gguf_fail(const gguf_cursor *c, const char *fmt, ...)
{
    char where[512], message[512];
    describe(c, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return sp_error(SP_ERR_INPUT, "%s: %s: %s", c->g->path, where, message);
}

const unsigned char *gguf_take(gguf_cursor *c, size_t n)
{
    if (n > c->g->map.size - c->pos)
        return NULL;
    const unsigned char *p = c->g->map.data + c->pos;
    c->pos += n;
    return p;
}

sp_status gguf_truncated(const gguf_cursor *c, const char *what, size_t n)
{
    return gguf_fail(c, "file truncated: %s needs %zu bytes at offset %zu, %zu remain", what, n, c->pos,
                     c->g->map.size - c->pos);
}

sp_status gguf_take_u32(gguf_cursor *c, const char *what, uint32_t *out)
{
    const unsigned char *p = gguf_take(c, 4);
    if (!p)
        return gguf_truncated(c, what, 4);
    *out = sp_le_u32(p);
    return SP_OK;
}

sp_status gguf_take_u64(gguf_cursor *c, const char *what, uint64_t *out)
{
    const unsigned char *p = gguf_take(c, 8);
    if (!p)
        return gguf_truncated(c, what, 8);
    *out = sp_le_u64(p);
    return SP_OK;
}

sp_status gguf_take_string(gguf_cursor *c, const char *what, size_t *at, size_t *len)
{
    const unsigned char *p = gguf_take(c, 8);
    if (!p) {
        char length_of[96];
        snprintf(length_of, sizeof length_of, "the length of %s", what);
        return gguf_truncated(c, length_of, 8);
    }
    uint64_t n = sp_le_u64(p);
    size_t left = c->g->map.size - c->pos;
    if (n > left) /* checked before the copy is allocated */
        return gguf_fail(c, "%s of %llu bytes runs past the end of the file (%zu bytes remain at offset %zu)", what,
                         (unsigned long long)n, left, c->pos);
    sp_gguf *g = c->g;
    SP_TRY(sp_grow((void **)&g->strings, &g->strings_cap, g->strings_len + (size_t)n + 1, 1, "GGUF strings"));
    *at = g->strings_len;
    *len = (size_t)n;
    memcpy(g->strings + *at, gguf_take(c, (size_t)n), (size_t)n);
    g->strings[*at + *len] = '\0';
    g->strings_len += (size_t)n + 1;
    return SP_OK;
}

sp_status gguf_check_name(const gguf_cursor *c, size_t at, size_t len, const char *what)
{
    const unsigned char *s = (const unsigned char *)c->g->strings + at;
    for (size_t i = 0; i < len; i++)
        if (s[i] < 0x20 || s[i] == 0x7F)
            return gguf_fail(c, "%s holds the control character 0x%02x at byte %zu (expected text)", what, s[i], i);
    return SP_OK;
}

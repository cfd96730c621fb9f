/* io/token_file.c: token id files (io/token_file.h), read in blocks and parsed as they stream by, so
 * that memory is the ids alone: never the text, never a bound on the count taken from its size. */
#include "io/token_file.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "io/file_read.h"

#define BLOCK_BYTES ((size_t)64 << 10)
#define SHOWN_BYTES 32 /* of a bad token, in its message */

/* The parse so far: the ids, and the token under way (len 0: between tokens). A token is an
 * optional '-' and decimal digits whose value fits a long (what strtol accepts, '+' refused). */
typedef struct {
    const char *path;
    int vocab_size;
    int32_t *ids;
    size_t n, cap;
    size_t line;                  /* of the byte being read */
    size_t len, start, start_line; /* the token under way: bytes read, byte offset, line */
    char shown[SHOWN_BYTES + 1];  /* its first bytes */
    int negative, malformed;
    size_t digits;
    unsigned long magnitude;
} id_parser;

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static void token_byte(id_parser *p, unsigned char c, size_t offset)
{
    if (p->len == 0) {
        p->start = offset;
        p->start_line = p->line;
        p->negative = p->malformed = 0;
        p->digits = 0;
        p->magnitude = 0;
    }
    if (p->len < SHOWN_BYTES)
        p->shown[p->len] = (char)c;
    p->len++;
    if (p->malformed)
        return;
    if (p->len == 1 && c == '-') {
        p->negative = 1;
        return;
    }
    /* LONG_MIN's magnitude is one more than LONG_MAX's */
    unsigned long limit = (unsigned long)LONG_MAX + (unsigned long)p->negative;
    unsigned d = (unsigned)(c - '0');
    if (c < '0' || c > '9' || p->magnitude > (limit - d) / 10) {
        p->malformed = 1;
        return;
    }
    p->magnitude = p->magnitude * 10 + d;
    p->digits++;
}

/* The token under way is complete: check it and append its id. */
static sp_status end_token(id_parser *p)
{
    p->shown[p->len < SHOWN_BYTES ? p->len : SHOWN_BYTES] = '\0';
    p->len = 0;
    if (p->malformed || p->digits == 0)
        return sp_error(SP_ERR_INPUT, "%s: token %zu (line %zu, byte offset %zu): '%s' is not an integer id", p->path,
                        p->n, p->start_line, p->start, p->shown);
    long v = p->negative ? (long)(0 - p->magnitude) : (long)p->magnitude;
    if (v < 0 || v >= p->vocab_size)
        return sp_error(SP_ERR_INPUT, "%s: token %zu (line %zu, byte offset %zu): id %ld is outside [0, %d)", p->path,
                        p->n, p->start_line, p->start, v, p->vocab_size);
    SP_TRY(sp_grow((void **)&p->ids, &p->cap, p->n + 1, sizeof *p->ids, "token ids"));
    p->ids[p->n++] = (int32_t)v;
    return SP_OK;
}

static sp_status parse_block(id_parser *p, const unsigned char *block, size_t n, size_t offset)
{
    for (size_t i = 0; i < n; i++) {
        if (!is_space(block[i])) {
            token_byte(p, block[i], offset + i);
            continue;
        }
        if (p->len)
            SP_TRY(end_token(p));
        p->line += block[i] == '\n';
    }
    return SP_OK;
}

static sp_status parse_file(FILE *f, int64_t size, id_parser *p)
{
    unsigned char *block = sp_malloc(BLOCK_BYTES, "a token file block");
    if (!block)
        return SP_ERR_NOMEM;
    sp_status st = SP_OK;
    size_t offset = 0, got = 1;
    /* the size fstat gave, not up to EOF: a file that grows while it is read is not followed */
    while (st == SP_OK && offset < (size_t)size && got > 0) {
        size_t want = (size_t)size - offset < BLOCK_BYTES ? (size_t)size - offset : BLOCK_BYTES;
        got = fread(block, 1, want, f);
        st = parse_block(p, block, got, offset);
        offset += got;
    }
    free(block);
    if (st == SP_OK && offset != (size_t)size)
        st = sp_error(SP_ERR_IO, "%s: read %zu of %lld bytes", p->path, offset, (long long)size);
    if (st == SP_OK && p->len)
        st = end_token(p);
    return st;
}

sp_status sp_token_file_read(const char *path, int vocab_size, int32_t **ids, size_t *n_ids)
{
    FILE *f = NULL;
    int64_t size = 0;
    SP_TRY(sp_file_open_regular(path, &f, &size));
    if ((uint64_t)size > SP_TOKEN_FILE_MAX_BYTES) {
        fclose(f);
        return sp_error(SP_ERR_INPUT, "%s: %lld bytes is too large (at most %zu)", path, (long long)size,
                        SP_TOKEN_FILE_MAX_BYTES);
    }
    id_parser p = {.path = path, .vocab_size = vocab_size, .line = 1};
    sp_status st = parse_file(f, size, &p);
    fclose(f);
    if (st == SP_OK) { /* give back the growth slack; an empty file still gets a buffer */
        int32_t *fit = realloc(p.ids, (p.n ? p.n : 1) * sizeof *fit);
        if (fit)
            p.ids = fit;
        else if (!p.ids)
            st = sp_error(SP_ERR_NOMEM, "out of memory reading %s", path);
    }
    if (st != SP_OK) {
        free(p.ids);
        return st;
    }
    *ids = p.ids;
    *n_ids = p.n;
    return SP_OK;
}

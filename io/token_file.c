#include "io/token_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/file_read.h"

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

sp_status sp_token_file_read(const char *path, int vocab_size, int32_t **ids, size_t *n_ids)
{
    unsigned char *text = NULL;
    size_t size = 0;
    SP_TRY(sp_file_read_all(path, SP_TOKEN_FILE_MAX_BYTES, &text, &size));
    /* every id takes at least two bytes but the last, which bounds the count */
    int32_t *out = sp_calloc(size / 2 + 1, sizeof *out, "token ids");
    sp_status st = out ? SP_OK : SP_ERR_NOMEM;
    size_t n = 0, line = 1;
    for (size_t pos = 0; st == SP_OK && pos < size;) {
        if (is_space(text[pos])) {
            line += text[pos++] == '\n';
            continue;
        }
        size_t end = pos;
        while (end < size && !is_space(text[end]))
            end++;
        unsigned char saved = text[end];
        text[end] = '\0';
        char *stop = NULL;
        errno = 0;
        long v = strtol((const char *)text + pos, &stop, 10);
        if (errno || stop != (char *)text + end || text[pos] == '+')
            st = sp_error(SP_ERR_INPUT, "%s: token %zu (line %zu, byte offset %zu): '%.32s' is not an integer id",
                          path, n, line, pos, (const char *)text + pos);
        else if (v < 0 || v >= vocab_size)
            st = sp_error(SP_ERR_INPUT, "%s: token %zu (line %zu, byte offset %zu): id %ld is outside [0, %d)", path,
                          n, line, pos, v, vocab_size);
        else
            out[n++] = (int32_t)v;
        text[end] = saved;
        pos = end;
    }
    free(text);
    if (st != SP_OK) {
        free(out);
        return st;
    }
    *ids = out;
    *n_ids = n;
    return SP_OK;
}

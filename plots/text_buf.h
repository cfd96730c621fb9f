/* plots/text_buf.h: a growing NUL-terminated text buffer for the files plot and study compose in
 * memory before writing them atomically (gnuplot scripts, data files, summary tables). */
#ifndef SP_TEXT_BUF_H
#define SP_TEXT_BUF_H

#include <stddef.h>

#include "core/common.h"

typedef struct {
    char *text; /* NULL until the first append */
    size_t len, cap;
    int failed; /* an allocation failed: later appends are ignored, sp_text_status reports it */
} sp_text;

void sp_text_printf(sp_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a gnuplot double-quoted string literal (quotes and backslashes escaped). */
void sp_text_quoted(sp_text *t, const char *s);
/* SP_OK, or SP_ERR_NOMEM naming `what` when an append failed. */
sp_status sp_text_status(const sp_text *t, const char *what);
/* The text so far ("" when empty). */
const char *sp_text_str(const sp_text *t);
void sp_text_free(sp_text *t);
/* Writes the text to path atomically (io/atomic.h). */
sp_status sp_text_write_file(const sp_text *t, const char *path);

#endif

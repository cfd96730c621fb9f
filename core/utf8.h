/* core/utf8.h: UTF-8 validation of byte strings. */
#ifndef SP_UTF8_H
#define SP_UTF8_H

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when s does not start one (a stray
 * continuation byte, an overlong form, a UTF-16 surrogate, beyond U+10FFFF, or a sequence cut short).
 * Reads at most up to the first byte that is not a continuation, so a NUL-terminated s is safe. */
int sp_utf8_length(const unsigned char *s);

#endif

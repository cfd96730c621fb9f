/* io/hf_unicode.h: the Unicode the Hugging Face tokenizers need: UTF-8 checking and coding, the
 * Unicode normalization forms (ICU's unorm2; tokenizers uses the unicode-normalization crate, so
 * characters assigned after that crate's Unicode version may normalize differently), and GPT-2's
 * byte-level alphabet (every byte as one printable character, computed by its rule). */
#ifndef SP_HF_UNICODE_H
#define SP_HF_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

typedef enum { SP_HF_NFC, SP_HF_NFD, SP_HF_NFKC, SP_HF_NFKD } sp_hf_nf;

/* 1 when s[0..len) is valid UTF-8 (no overlong forms, surrogates or code points above U+10FFFF);
 * else 0 with *bad the offset of the first invalid byte. */
int sp_hf_utf8_valid(const char *s, size_t len, size_t *bad);
/* Decodes the (valid) character at s[*i], advancing *i. */
uint32_t sp_hf_utf8_next(const char *s, size_t *i);
/* Writes cp's UTF-8 form into out (4 bytes room); returns its length. */
size_t sp_hf_utf8_put(uint32_t cp, char *out);

/* Normalizes the valid UTF-8 s[0..len) into *out (malloc'd, *out_len bytes). */
sp_status sp_hf_normalize(sp_hf_nf form, const char *s, size_t len, char **out, size_t *out_len);

/* GPT-2's bytes_to_unicode: chars[b] is the character byte b stands for; sp_hf_char_byte is the
 * byte a character stands for (-1 for characters outside the alphabet). */
void sp_hf_byte_chars(uint32_t chars[256]);
int sp_hf_char_byte(uint32_t cp);

#endif

/* io/hf_unicode.c: UTF-8, Unicode normalization through ICU, GPT-2's byte alphabet. */
#include "io/hf_unicode.h"

#include <stdlib.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

int sp_hf_utf8_valid(const char *text, size_t len, size_t *bad)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (n == 0 || len - i < n) {
            *bad = i;
            return 0;
        }
        /* the second byte's range excludes overlong forms, surrogates and code points > U+10FFFF */
        unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        for (size_t k = 1; k < n; k++)
            if (s[i + k] < (k == 1 ? lo : 0x80) || s[i + k] > (k == 1 ? hi : 0xBF)) {
                *bad = i;
                return 0;
            }
        i += n;
    }
    return 1;
}

uint32_t sp_hf_utf8_next(const char *text, size_t *i)
{
    const unsigned char *s = (const unsigned char *)text + *i;
    if (s[0] < 0x80) {
        *i += 1;
        return s[0];
    }
    if (s[0] < 0xE0) {
        *i += 2;
        return (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
    }
    if (s[0] < 0xF0) {
        *i += 3;
        return (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    }
    *i += 4;
    return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 |
           (s[3] & 0x3F);
}

size_t sp_hf_utf8_put(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static const UNormalizer2 *normalizer(sp_hf_nf form, UErrorCode *err)
{
    switch (form) {
    case SP_HF_NFC:
        return unorm2_getNFCInstance(err);
    case SP_HF_NFD:
        return unorm2_getNFDInstance(err);
    case SP_HF_NFKC:
        return unorm2_getNFKCInstance(err);
    default:
        return unorm2_getNFKDInstance(err);
    }
}

/* Normalizes src[0..n) into a new buffer, growing it once when ICU reports the size it needs. */
static UChar *normalize16(const UNormalizer2 *nf, const UChar *src, int32_t n, int32_t *out_n, UErrorCode *err)
{
    int32_t cap = n + n / 2 + 16;
    for (int attempt = 0; attempt < 2; attempt++) {
        UChar *dst = sp_malloc((size_t)cap * sizeof *dst, "normalized text");
        if (!dst)
            return NULL;
        *err = U_ZERO_ERROR;
        *out_n = unorm2_normalize(nf, src, n, dst, cap, err);
        if (*err != U_BUFFER_OVERFLOW_ERROR)
            return dst;
        free(dst);
        cap = *out_n;
    }
    return NULL;
}

/* ICU works on UTF-16: UTF-8 -> UTF-16 -> normalized UTF-16 -> UTF-8. */
sp_status sp_hf_normalize(sp_hf_nf form, const char *s, size_t len, char **out, size_t *out_len)
{
    if (len > INT32_MAX / 4)
        return sp_error(SP_ERR_INPUT, "text of %zu bytes is too long to normalize (at most %d)", len, INT32_MAX / 4);
    UErrorCode err = U_ZERO_ERROR;
    const UNormalizer2 *nf = normalizer(form, &err);
    int32_t n16 = 0, n_norm = 0, n8 = 0;
    UChar *u16 = sp_malloc((len + 1) * sizeof *u16, "text to normalize"), *norm = NULL;
    char *u8 = NULL;
    if (u16 && U_SUCCESS(err))
        u_strFromUTF8(u16, (int32_t)len + 1, &n16, s, (int32_t)len, &err);
    if (u16 && U_SUCCESS(err))
        norm = normalize16(nf, u16, n16, &n_norm, &err);
    if (norm && U_SUCCESS(err)) {
        u_strToUTF8(NULL, 0, &n8, norm, n_norm, &err);
        if (err == U_BUFFER_OVERFLOW_ERROR)
            err = U_ZERO_ERROR;
        if ((u8 = sp_malloc((size_t)n8 + 1, "normalized text")) != NULL)
            u_strToUTF8(u8, n8 + 1, &n8, norm, n_norm, &err);
    }
    free(u16);
    free(norm);
    if (U_FAILURE(err)) {
        free(u8);
        return sp_error(SP_ERR_INTERNAL, "Unicode normalization of %zu bytes failed (ICU: %s)", len, u_errorName(err));
    }
    if (!u8)
        return SP_ERR_NOMEM;
    *out = u8;
    *out_len = (size_t)n8;
    return SP_OK;
}

/* bytes_to_unicode: '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves; the other 68 bytes,
 * in increasing order, for U+0100, U+0101, ... */
static int printable(unsigned b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

void sp_hf_byte_chars(uint32_t chars[256])
{
    uint32_t next = 256;
    for (unsigned b = 0; b < 256; b++)
        chars[b] = printable(b) ? b : next++;
}

int sp_hf_char_byte(uint32_t cp)
{
    if (cp < 256)
        return printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68)
        return -1;
    for (unsigned b = 0, n = 0; b < 256; b++)
        if (!printable(b) && n++ == cp - 256)
            return (int)b;
    return -1;
}

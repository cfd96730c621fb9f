/* io/hf_regex.c: PCRE2 for the Hugging Face tokenizer patterns (io/hf_regex.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "io/hf_regex.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

struct sp_hf_regex {
    pcre2_code *code;
};

#define WHITE_SPACE "\\p{White_Space}"
#define NOT_WHITE_SPACE "\\P{White_Space}"

/* Copies the pattern with \s and \S rewritten to Oniguruma's whitespace (outside \Q...\E). */
static char *rewrite_whitespace(const char *p, size_t len, size_t *out_len)
{
    char *out = sp_malloc(len * (sizeof WHITE_SPACE - 2) + 1, "regex pattern");
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] != '\\' || i + 1 == len) {
            out[o++] = p[i];
            continue;
        }
        char c = p[++i];
        if (c == 's' || c == 'S') {
            const char *to = c == 's' ? WHITE_SPACE : NOT_WHITE_SPACE;
            memcpy(out + o, to, strlen(to));
            o += strlen(to);
            continue;
        }
        out[o++] = '\\';
        out[o++] = c;
        if (c == 'Q') /* quoted up to \E: copied as it is */
            for (; i + 1 < len && !(p[i + 1] == '\\' && i + 2 < len && p[i + 2] == 'E'); i++)
                out[o++] = p[i + 1];
    }
    *out_len = o;
    return out;
}

sp_status sp_hf_regex_compile(const char *pattern, size_t len, int literal, const char *where, sp_hf_regex **re)
{
    size_t n = len;
    char *text = literal ? NULL : rewrite_whitespace(pattern, len, &n);
    if (!literal && !text)
        return SP_ERR_NOMEM;
    int code;
    PCRE2_SIZE at;
    uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP); /* LITERAL refuses UCP */
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)(literal ? pattern : text), n, options, &code, &at, NULL);
    free(text);
    if (!c) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return sp_error(SP_ERR_INPUT, "%s: PCRE2 rejects the pattern '%.*s' (%s)", where, (int)(len > 200 ? 200 : len),
                        pattern, (const char *)msg);
    }
    pcre2_jit_compile(c, PCRE2_JIT_COMPLETE); /* without JIT (unsupported CPU) it is interpreted */
    *re = malloc(sizeof **re);
    if (!*re) {
        pcre2_code_free(c);
        return sp_error(SP_ERR_NOMEM, "out of memory compiling %s", where);
    }
    (*re)->code = c;
    return SP_OK;
}

void sp_hf_regex_free(sp_hf_regex *re)
{
    if (re)
        pcre2_code_free(re->code);
    free(re);
}

static sp_status push_segment(sp_hf_segments *out, size_t start, size_t end, int is_match)
{
    SP_TRY(sp_grow((void **)&out->items, &out->cap, out->n + 1, sizeof *out->items, "the split list"));
    out->items[out->n++] = (sp_hf_segment){start, end, is_match};
    return SP_OK;
}

/* Bytes of the UTF-8 character starting at s[i] (1 at the end of the string). */
static size_t char_len(const char *s, size_t len, size_t i)
{
    size_t n = 1;
    while (i + n < len && ((unsigned char)s[i + n] & 0xC0) == 0x80)
        n++;
    return n;
}

/* One match at or after `from`: 1 with [*start, *end), 0 when none. */
static sp_status find(const sp_hf_regex *re, pcre2_match_data *md, const char *s, size_t len, size_t from,
                      uint32_t options, size_t *start, size_t *end, int *found)
{
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, from, options | PCRE2_NO_UTF_CHECK, md, NULL);
    *found = rc >= 0;
    if (rc == PCRE2_ERROR_NOMATCH)
        return SP_OK;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return sp_error(SP_ERR_INPUT, "text of %zu bytes: a tokenizer pattern fails to match at byte %zu (%s)", len,
                        from, (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *start = ov[0];
    *end = ov[1];
    return SP_OK;
}

sp_status sp_hf_regex_segments(const sp_hf_regex *re, const char *s, size_t len, int invert, sp_hf_segments *out)
{
    out->n = 0;
    if (len == 0)
        return push_segment(out, 0, 0, invert);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md)
        return sp_error(SP_ERR_NOMEM, "out of memory for regex match data");
    sp_status st = SP_OK;
    size_t from = 0, prev = 0, last_match_end = (size_t)-1;
    while (st == SP_OK && from <= len) {
        size_t ms, me;
        int found;
        if ((st = find(re, md, s, len, from, 0, &ms, &me, &found)) != SP_OK || !found)
            break;
        if (ms == me && me == last_match_end) { /* Oniguruma's iterator: no empty match right after one */
            from += char_len(s, len, from);
            continue;
        }
        from = last_match_end = me;
        if (prev != ms)
            st = push_segment(out, prev, ms, invert);
        if (st == SP_OK)
            st = push_segment(out, ms, me, !invert);
        prev = me;
    }
    if (st == SP_OK && prev != len)
        st = push_segment(out, prev, len, invert);
    pcre2_match_data_free(md);
    return st;
}

long sp_hf_regex_match_at(const sp_hf_regex *re, const char *s, size_t len, size_t off)
{
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    size_t ms, me;
    int found = 0;
    if (!md || find(re, md, s, len, off, PCRE2_ANCHORED, &ms, &me, &found) != SP_OK)
        found = 0;
    pcre2_match_data_free(md);
    return found ? (long)me : -1;
}

/* io/hf_regex.h: the regular expressions of Hugging Face tokenizers, on PCRE2.
 *
 * `tokenizers` compiles its patterns with Oniguruma; spanprobe compiles them with PCRE2 (UTF, UCP,
 * JIT where available) after one rewrite: `\s` / `\S` become `\p{White_Space}` / `\P{White_Space}`,
 * Oniguruma's whitespace (PCRE2's own `\s` also takes U+180E). Matches are enumerated as
 * Oniguruma's iterator does (an empty match right after the previous match is skipped by one
 * character) and cut into the segments of `tokenizers`' `find_matches`: the matches and the gaps
 * between them, in order, covering the whole string. Subjects must be valid UTF-8 (checked once,
 * where text enters). */
#ifndef SP_HF_REGEX_H
#define SP_HF_REGEX_H

#include <stddef.h>

#include "core/common.h"

typedef struct sp_hf_regex sp_hf_regex;

typedef struct {
    size_t start, end;
    int is_match;
} sp_hf_segment;

typedef struct {
    sp_hf_segment *items;
    size_t n, cap;
} sp_hf_segments;

/* Compiles pattern[0..len) (literal: matched as plain text). A pattern PCRE2 rejects is
 * SP_ERR_INPUT naming `where` (e.g. "tokenizer.json: pre_tokenizer.pattern.Regex"). */
sp_status sp_hf_regex_compile(const char *pattern, size_t len, int literal, const char *where, sp_hf_regex **re);
void sp_hf_regex_free(sp_hf_regex *re);
/* Replaces out's contents by the segments of s[0..len); invert flips every is_match. The empty
 * string is one empty non-match segment. */
sp_status sp_hf_regex_segments(const sp_hf_regex *re, const char *s, size_t len, int invert, sp_hf_segments *out);
/* The end of the regex's match anchored at s[off] (s is len bytes), or -1 when it does not match. */
long sp_hf_regex_match_at(const sp_hf_regex *re, const char *s, size_t len, size_t off);

#endif

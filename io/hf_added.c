/* io/hf_added.c: added tokens (tokenizer.json's "added_tokens"), as `tokenizers`'
 * tokenizer/added_vocabulary.rs: ids assigned as its add_tokens assigns them, then found in text
 * leftmost-longest (its Aho-Corasick automaton's order; here a binary search over the sorted
 * patterns), with single_word, lstrip and rstrip decided by Rust regex's Unicode \w and \s. Tokens
 * with normalized false are cut out of the raw text; normalized ones out of the normalized text,
 * as their own normalized form. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/hf_engine.h"

/* Rust regex's Unicode \w (UTS #18 Annex C) and \s. */
static const char word_class[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
static const char space_class[] = "\\p{White_Space}";

static sp_status get_flag(const cJSON *e, const char *key, int def, const char *file, int i, unsigned char *flag)
{
    char path[64];
    int v;
    snprintf(path, sizeof path, "added_tokens[%d]", i);
    SP_TRY(sp_hf_get_bool(e, key, def, file, path, &v));
    *flag = (unsigned char)v;
    return SP_OK;
}

/* One entry; *next_id is tokenizers' next id for a token neither model nor added vocabulary has. */
static sp_status load_entry(sp_hf_tokenizer *hf, const cJSON *e, int i, const char *file, int32_t *next_id)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content"),
                *id = cJSON_GetObjectItemCaseSensitive(e, "id");
    if (!cJSON_IsString(content) || !content->valuestring[0])
        return sp_error(SP_ERR_INPUT, "%s: added_tokens[%d].content: expected a non-empty string", file, i);
    if (!cJSON_IsNumber(id) || !(id->valuedouble >= 0 && id->valuedouble < INT32_MAX) ||
        id->valuedouble != floor(id->valuedouble))
        return sp_error(SP_ERR_INPUT, "%s: added_tokens[%d].id: expected an integer in 0..%d", file, i,
                        INT32_MAX - 1);
    sp_hf_added a = {.len = strlen(content->valuestring)};
    SP_TRY(get_flag(e, "special", 0, file, i, &a.special));
    SP_TRY(get_flag(e, "normalized", !a.special, file, i, &a.normalized));
    SP_TRY(get_flag(e, "lstrip", 0, file, i, &a.lstrip));
    SP_TRY(get_flag(e, "rstrip", 0, file, i, &a.rstrip));
    SP_TRY(get_flag(e, "single_word", 0, file, i, &a.single_word));
    for (int k = 0; k < hf->n_added; k++)
        if (strcmp(hf->added[k].content, content->valuestring) == 0)
            return sp_error(SP_ERR_INPUT, "%s: added_tokens[%d]: '%s' is listed twice", file, i, content->valuestring);
    if (!sp_bpe_lookup(&hf->bpe, content->valuestring, a.len, &a.id))
        a.id = (*next_id)++;
    if (a.id != (int32_t)id->valuedouble)
        return sp_error(SP_ERR_INPUT, "%s: added_tokens[%d]: '%s' has id %d, but tokenizers gives it id %d (the "
                                      "model.vocab id, else the next after the vocabulary)",
                        file, i, content->valuestring, (int)id->valuedouble, a.id);
    if (!(a.content = strdup(content->valuestring)))
        return sp_error(SP_ERR_NOMEM, "out of memory reading %s added_tokens", file);
    sp_status st = a.normalized ? sp_hf_normalize_text(hf, a.content, a.len, &a.pattern, &a.pattern_len) : SP_OK;
    if (st == SP_OK && !a.normalized && !(a.pattern = strdup(a.content)))
        st = sp_error(SP_ERR_NOMEM, "out of memory reading %s added_tokens", file);
    a.pattern_len = a.normalized ? a.pattern_len : a.len;
    if (st == SP_OK && a.pattern_len == 0)
        st = sp_error(SP_ERR_INPUT, "%s: added_tokens[%d]: '%s' normalizes to nothing", file, i, a.content);
    if (st == SP_OK)
        st = sp_grow((void **)&hf->added, &hf->cap_added, (size_t)hf->n_added + 1, sizeof *hf->added,
                     "the added tokens");
    if (st != SP_OK) {
        free(a.content);
        free(a.pattern);
        return st;
    }
    hf->added[hf->n_added++] = a;
    return SP_OK;
}

static int compare_patterns(const void *pa, const void *pb)
{
    const sp_hf_pattern *a = pa, *b = pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->pattern, b->pattern, n);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static sp_status build_set(sp_hf_tokenizer *hf, int normalized, sp_hf_added_set *set)
{
    set->items = sp_malloc((size_t)(hf->n_added ? hf->n_added : 1) * sizeof *set->items, "added token index");
    if (!set->items)
        return SP_ERR_NOMEM;
    for (int i = 0; i < hf->n_added; i++)
        if (hf->added[i].normalized == normalized) {
            set->items[set->n++] = (sp_hf_pattern){hf->added[i].pattern, hf->added[i].pattern_len, i};
            set->first_byte[(unsigned char)hf->added[i].pattern[0]] = 1;
        }
    qsort(set->items, set->n, sizeof *set->items, compare_patterns);
    return SP_OK;
}

sp_status sp_hf_load_added(sp_hf_tokenizer *hf, const cJSON *list, const char *file)
{
    if (list && !cJSON_IsArray(list) && !cJSON_IsNull(list))
        return sp_error(SP_ERR_INPUT, "%s: added_tokens: expected an array", file);
    int32_t next_id = (int32_t)hf->bpe.vocab.n; /* tokenizers: the model's vocabulary size (its entries) */
    int i = 0;
    for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next, i++)
        SP_TRY(load_entry(hf, e, i, file, &next_id));
    SP_TRY(sp_hf_regex_compile(word_class, strlen(word_class), 0, "Unicode word characters", &hf->word_char));
    SP_TRY(sp_hf_regex_compile(space_class, strlen(space_class), 0, "Unicode whitespace", &hf->space));
    SP_TRY(build_set(hf, 0, &hf->raw_set));
    return build_set(hf, 1, &hf->normalized_set);
}

/* ---- finding them in text ---- */

/* Narrows [*lo, *hi) (patterns longer than k sharing their first k bytes) to those whose byte k is c. */
static void narrow(const sp_hf_added_set *set, size_t k, unsigned char c, size_t *lo, size_t *hi)
{
    size_t a = *lo, b = *hi;
    while (a < b) { /* first with byte k >= c */
        size_t mid = a + (b - a) / 2;
        if ((unsigned char)set->items[mid].pattern[k] < c)
            a = mid + 1;
        else
            b = mid;
    }
    size_t first = a;
    b = *hi;
    while (a < b) { /* first with byte k > c */
        size_t mid = a + (b - a) / 2;
        if ((unsigned char)set->items[mid].pattern[k] <= c)
            a = mid + 1;
        else
            b = mid;
    }
    *lo = first;
    *hi = a;
}

/* The longest pattern starting at s[at] (its token's index into hf->added), or -1. */
static int longest_at(const sp_hf_added_set *set, const char *s, size_t len, size_t at)
{
    size_t lo = 0, hi = set->n;
    int best = -1;
    for (size_t k = 0;; k++) {
        if (lo < hi && set->items[lo].len == k) /* sorts first among those sharing k bytes */
            best = set->items[lo++].token;
        if (lo >= hi || at + k >= len)
            return best;
        narrow(set, k, (unsigned char)s[at + k], &lo, &hi);
    }
}

/* Leftmost, then longest match at or after `from`: 1 with the token and its start. */
static int find_next(const sp_hf_added_set *set, const char *s, size_t len, size_t from, int *token, size_t *start)
{
    for (size_t i = from; i < len; i++)
        if (set->first_byte[(unsigned char)s[i]] && (*token = longest_at(set, s, len, i)) >= 0) {
            *start = i;
            return 1;
        }
    return 0;
}

static size_t previous_char(const char *s, size_t i)
{
    while (i > 0 && ((unsigned char)s[--i] & 0xC0) == 0x80)
        ;
    return i;
}

static int is_word_char(const sp_hf_tokenizer *hf, const char *s, size_t len, size_t at)
{
    return at < len && sp_hf_regex_match_at(hf->word_char, s, len, at) >= 0;
}

/* The start of the whitespace run ending at s[end]. */
static size_t space_run_start(const sp_hf_tokenizer *hf, const char *s, size_t len, size_t end)
{
    while (end > 0) {
        size_t p = previous_char(s, end);
        if (sp_hf_regex_match_at(hf->space, s, len, p) < 0)
            break;
        end = p;
    }
    return end;
}

/* The end of the whitespace run starting at s[at]. */
static size_t space_run_end(const sp_hf_tokenizer *hf, const char *s, size_t len, size_t at)
{
    long e;
    while (at < len && (e = sp_hf_regex_match_at(hf->space, s, len, at)) >= 0)
        at = (size_t)e;
    return at;
}

/* tokenizers' AddedVocabulary::find_matches over one text, appending the splits to out. */
static sp_status split_text(const sp_hf_tokenizer *hf, const sp_hf_added_set *set, const char *s, size_t len,
                            int at_start, sp_hf_splits *out)
{
    size_t done = 0, from = 0, start;
    int k;
    while (find_next(set, s, len, from, &k, &start)) {
        const sp_hf_added *a = &hf->added[k];
        size_t stop = start + a->pattern_len;
        from = stop; /* the automaton goes on after the match, whatever the strips take */
        if (a->single_word && ((start > 0 && is_word_char(hf, s, len, previous_char(s, start))) ||
                               is_word_char(hf, s, len, stop)))
            continue;
        if (a->lstrip) {
            size_t run = space_run_start(hf, s, len, start);
            start = run > done ? run : done;
        }
        if (a->rstrip)
            stop = space_run_end(hf, s, len, stop);
        if (done < start)
            SP_TRY(sp_hf_splits_add_text(out, s + done, start - done, at_start && done == 0));
        SP_TRY(sp_hf_splits_add_token(out, a->id));
        done = stop;
    }
    return done < len ? sp_hf_splits_add_text(out, s + done, len - done, at_start && done == 0) : SP_OK;
}

sp_status sp_hf_split_added(const sp_hf_tokenizer *hf, const sp_hf_splits *in, int normalized, sp_hf_splits *out)
{
    const sp_hf_added_set *set = normalized ? &hf->normalized_set : &hf->raw_set;
    sp_status st = SP_OK;
    for (size_t i = 0; i < in->n && st == SP_OK; i++) {
        const sp_hf_split *sp = &in->items[i];
        const char *text = in->bytes + sp->off;
        if (sp->id >= 0) {
            st = sp_hf_splits_add_token(out, sp->id);
        } else if (normalized && hf->n_norms) {
            char *norm = NULL;
            size_t norm_len = 0;
            if ((st = sp_hf_normalize_text(hf, text, sp->len, &norm, &norm_len)) == SP_OK)
                st = split_text(hf, set, norm, norm_len, sp->at_start, out);
            free(norm);
        } else {
            st = split_text(hf, set, text, sp->len, sp->at_start, out);
        }
    }
    return st;
}

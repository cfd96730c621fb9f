/* io/hf_decode.c: tokenizer.json's "decoder" as a table of each id's bytes (sp_tokenizer's pieces).
 *
 * `tokenizers` decodes a whole id list: every token's string (an added token's content, normalized
 * where it is matched normalized) goes through the decoder chain, then the strings are joined.
 * Every step real BPE tokenizers use works token by token, so it runs here once per id at load:
 * ByteLevel (the byte alphabet back to bytes; a token with other characters stays as it is),
 * Replace, ByteFallback (<0xXX> -> the byte; invalid UTF-8 stays raw bytes instead of U+FFFD),
 * Strip before any Fuse. The rest acts on the start of the output: a Strip after Fuse drops up to
 * `start` leading copies of its character, the Metaspace decoder drops the replacement in the first
 * token, no decoder joins with spaces. sp_hf_decode applies that to a sequence's first piece and to
 * the piece right after BOS. */
#include <stdlib.h>
#include <string.h>

#include "io/hf_engine.h"
#include "io/hf_tokenizer.h"

typedef enum { DEC_BYTE_LEVEL, DEC_REPLACE, DEC_BYTE_FALLBACK, DEC_STRIP } dec_kind;

typedef struct {
    dec_kind kind;
    sp_hf_regex *pattern; /* REPLACE */
    char *content;        /* REPLACE: the replacement */
    size_t content_len;
    char ch[4];           /* STRIP: the character */
    size_t ch_len;
    int start, stop;      /* STRIP: how many at each end */
} dec_step;

typedef struct {
    sp_hf_tokenizer *hf;
    const char *file;
    dec_step *steps;
    int n;
    size_t cap;
    int fused;      /* a Fuse came: later Strips act on the output's start */
    int start_rule; /* a rule for the output's start is set */
} dec_chain;

static void free_chain(dec_chain *c)
{
    for (int i = 0; i < c->n; i++) {
        sp_hf_regex_free(c->steps[i].pattern);
        free(c->steps[i].content);
    }
    free(c->steps);
}

static sp_status add_step(dec_chain *c, dec_step s)
{
    sp_status st = sp_grow((void **)&c->steps, &c->cap, (size_t)c->n + 1, sizeof *c->steps, "the decoder");
    if (st != SP_OK) {
        sp_hf_regex_free(s.pattern);
        free(s.content);
        return st;
    }
    c->steps[c->n++] = s;
    return SP_OK;
}

static sp_status set_start_rule(dec_chain *c, const char *ch, size_t ch_len, int max, const char *path)
{
    sp_hf_tokenizer *hf = c->hf;
    if (c->start_rule++)
        return sp_error(SP_ERR_INPUT, "%s: %s: a second rule for the start of the output is not supported", c->file,
                        path);
    memcpy(hf->strip_char, ch, ch_len);
    hf->strip_char_len = ch_len;
    hf->strip_max = max;
    return SP_OK;
}

static sp_status load_strip(dec_chain *c, const cJSON *j, const char *path)
{
    const char *file = c->file;
    dec_step s = {.kind = DEC_STRIP};
    SP_TRY(sp_hf_get_char(j, "content", file, path, s.ch, &s.ch_len));
    const cJSON *start = cJSON_GetObjectItemCaseSensitive(j, "start"), *stop = cJSON_GetObjectItemCaseSensitive(j, "stop");
    if (!cJSON_IsNumber(start) || !cJSON_IsNumber(stop) || start->valuedouble < 0 || stop->valuedouble < 0 ||
        start->valuedouble > 1000 || stop->valuedouble > 1000)
        return sp_error(SP_ERR_INPUT, "%s: %s: expected start and stop counts", file, path);
    s.start = start->valueint;
    s.stop = stop->valueint;
    if (!c->fused)
        return add_step(c, s);
    if (s.stop > 0)
        return sp_error(SP_ERR_INPUT, "%s: %s.stop %d after Fuse is not supported (it strips the end of the whole "
                                      "output)", file, path, s.stop);
    return set_start_rule(c, s.ch, s.ch_len, s.start, path);
}

/* Metaspace: the replacement back to a space; in the first token dropped (unless prepend never). */
static sp_status load_metaspace(dec_chain *c, const cJSON *j, const char *path)
{
    dec_step s = {.kind = DEC_REPLACE, .content_len = 1};
    char rep[4];
    size_t rep_len;
    SP_TRY(sp_hf_get_char(j, "replacement", c->file, path, rep, &rep_len));
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(j, "prepend_scheme"),
                *prefix = cJSON_GetObjectItemCaseSensitive(j, "add_prefix_space");
    int never = (cJSON_IsString(scheme) && strcmp(scheme->valuestring, "never") == 0) || cJSON_IsFalse(prefix);
    SP_TRY(sp_hf_regex_compile(rep, rep_len, 1, "the Metaspace replacement", &s.pattern));
    if (!(s.content = strdup(" "))) {
        sp_hf_regex_free(s.pattern);
        return sp_error(SP_ERR_NOMEM, "out of memory reading the decoder");
    }
    SP_TRY(add_step(c, s));
    return never ? SP_OK : set_start_rule(c, " ", 1, -1, path);
}

static sp_status load_step(void *ctx, const cJSON *j, const char *path)
{
    dec_chain *c = ctx;
    const char *t = sp_hf_type(j);
    if (t && strcmp(t, "Sequence") == 0)
        return sp_hf_each_member(j, "decoders", c->file, path, load_step, c);
    if (t && strcmp(t, "ByteLevel") == 0)
        return add_step(c, (dec_step){.kind = DEC_BYTE_LEVEL});
    if (t && strcmp(t, "ByteFallback") == 0)
        return add_step(c, (dec_step){.kind = DEC_BYTE_FALLBACK});
    if (t && strcmp(t, "Fuse") == 0) {
        c->fused = 1;
        return SP_OK;
    }
    if (t && strcmp(t, "Strip") == 0)
        return load_strip(c, j, path);
    if (t && strcmp(t, "Metaspace") == 0)
        return load_metaspace(c, j, path);
    if (!t || strcmp(t, "Replace") != 0)
        return sp_hf_unsupported(j, c->file, path, "ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence");
    dec_step s = {.kind = DEC_REPLACE};
    const char *content = NULL;
    SP_TRY(sp_hf_get_string(j, "content", c->file, path, &content));
    SP_TRY(sp_hf_get_pattern(j, c->file, path, &s.pattern));
    s.content_len = strlen(content);
    if (!(s.content = strdup(content))) {
        sp_hf_regex_free(s.pattern);
        return sp_error(SP_ERR_NOMEM, "out of memory reading the decoder");
    }
    return add_step(c, s);
}

/* ---- running the chain on one token ---- */

typedef struct {
    char *p;
    size_t len, cap;
} buf;

static sp_status buf_put(buf *b, const char *s, size_t n)
{
    if (n == 0) /* an empty token's buffer may not exist yet: no offset into NULL */
        return SP_OK;
    SP_TRY(sp_grow((void **)&b->p, &b->cap, b->len + n, 1, "the decoded vocabulary"));
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return SP_OK;
}

static int hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Runs one step from `in` into `out` (emptied first). */
static sp_status run_step(const dec_step *s, const buf *in, buf *out, sp_hf_segments *seg)
{
    out->len = 0;
    const char *t = in->p;
    size_t n = in->len;
    if (s->kind == DEC_BYTE_FALLBACK && n == 6 && memcmp(t, "<0x", 3) == 0 && t[5] == '>' && hex(t[3]) >= 0 &&
        hex(t[4]) >= 0) {
        char byte = (char)(hex(t[3]) * 16 + hex(t[4]));
        return buf_put(out, &byte, 1);
    }
    if (s->kind == DEC_BYTE_LEVEL) {
        for (size_t i = 0; i < n;) {
            int b = sp_hf_char_byte(sp_hf_utf8_next(t, &i));
            if (b < 0) { /* not all in the byte alphabet: the token as it is */
                out->len = 0;
                return buf_put(out, t, n);
            }
            char c = (char)b;
            SP_TRY(buf_put(out, &c, 1));
        }
        return SP_OK;
    }
    if (s->kind == DEC_REPLACE) {
        SP_TRY(sp_hf_regex_segments(s->pattern, t, n, 0, seg));
        for (size_t i = 0; i < seg->n; i++)
            SP_TRY(seg->items[i].is_match ? buf_put(out, s->content, s->content_len)
                                          : buf_put(out, t + seg->items[i].start, seg->items[i].end - seg->items[i].start));
        return SP_OK;
    }
    if (s->kind == DEC_STRIP) {
        size_t a = 0, b = n;
        for (int k = 0; k < s->start && b - a >= s->ch_len && memcmp(t + a, s->ch, s->ch_len) == 0; k++)
            a += s->ch_len;
        for (int k = 0; k < s->stop && b - a >= s->ch_len && memcmp(t + b - s->ch_len, s->ch, s->ch_len) == 0; k++)
            b -= s->ch_len;
        return buf_put(out, t + a, b - a);
    }
    return buf_put(out, t, n);
}

/* The string tokenizers decodes for an id: an added token's (normalized) content, else the
 * vocabulary piece; none for ids neither has. added_of[id]: the added token with that id, or -1. */
static void token_string(const sp_hf_tokenizer *hf, const int *added_of, int id, const char **s, size_t *len)
{
    const sp_bpe *b = &hf->bpe;
    int have = id < b->n_ids && b->piece_len[id] != UINT32_MAX;
    *s = have ? sp_str_map_key(&b->vocab, b->piece_off[id]) : "";
    *len = have ? b->piece_len[id] : 0;
    if (added_of[id] >= 0) {
        *s = hf->added[added_of[id]].pattern;
        *len = hf->added[added_of[id]].pattern_len;
    }
}

static sp_status build_pieces(const sp_hf_tokenizer *hf, const dec_chain *c, int joined, sp_tokenizer *t)
{
    buf a = {0}, b = {0}, all = {0};
    sp_hf_segments seg = {0};
    sp_status st = SP_OK;
    int *added_of = sp_malloc((size_t)t->vocab_size * sizeof *added_of, "added token index");
    t->offsets = sp_calloc((size_t)t->vocab_size + 1, sizeof *t->offsets, "tokenizer offsets");
    if (!t->offsets || !added_of) {
        free(added_of);
        return SP_ERR_NOMEM;
    }
    for (int id = 0; id < t->vocab_size; id++)
        added_of[id] = -1;
    for (int i = 0; i < hf->n_added; i++)
        added_of[hf->added[i].id] = i; /* the loader checked every id < vocab_size */
    t->max_piece_len = 1;
    for (int id = 0; id < t->vocab_size && st == SP_OK; id++) {
        const char *s;
        size_t len;
        token_string(hf, added_of, id, &s, &len);
        a.len = 0;
        if (joined) /* no decoder: tokens joined with spaces */
            st = buf_put(&a, " ", 1);
        if (st == SP_OK)
            st = buf_put(&a, s, len);
        for (int k = 0; k < c->n && st == SP_OK; k++) {
            st = run_step(&c->steps[k], &a, &b, &seg);
            buf tmp = a;
            a = b;
            b = tmp;
        }
        if (st == SP_OK)
            st = buf_put(&all, a.p, a.len);
        t->offsets[id + 1] = (int64_t)all.len;
        if ((int64_t)a.len > t->max_piece_len)
            t->max_piece_len = (int)a.len;
    }
    if (st == SP_OK && all.len == 0)
        st = buf_put(&all, "", 1); /* a non-NULL table */
    free(a.p);
    free(b.p);
    free(seg.items);
    free(added_of);
    if (st != SP_OK) {
        free(all.p);
        return st;
    }
    t->bytes = (unsigned char *)all.p;
    return SP_OK;
}

sp_status sp_hf_load_decoder(sp_hf_tokenizer *hf, const cJSON *j, const char *file, sp_tokenizer *t)
{
    dec_chain c = {.hf = hf, .file = file};
    int joined = !j || cJSON_IsNull(j);
    sp_status st = SP_OK;
    if (joined) {
        memcpy(hf->strip_char, " ", 1);
        hf->strip_char_len = 1;
        hf->strip_max = 1;
    } else {
        st = load_step(&c, j, "decoder");
    }
    if (st == SP_OK)
        st = build_pieces(hf, &c, joined, t);
    free_chain(&c);
    return st;
}

size_t sp_hf_decode(const sp_tokenizer *t, int prev_id, int id, char *out, size_t cap)
{
    const sp_hf_tokenizer *hf = t->hf;
    const char *p = (const char *)t->bytes + t->offsets[id];
    size_t len = (size_t)(t->offsets[id + 1] - t->offsets[id]), o = 0, n = hf->strip_char_len;
    int at_start = prev_id < 0 || prev_id == t->bos_id;
    if (at_start && n && hf->strip_max >= 0)
        for (int k = 0; k < hf->strip_max && len >= n && memcmp(p, hf->strip_char, n) == 0; k++) {
            p += n;
            len -= n;
        }
    for (size_t i = 0; i < len && o < cap;) {
        if (at_start && n && hf->strip_max < 0 && len - i >= n && memcmp(p + i, hf->strip_char, n) == 0) {
            i += n; /* the Metaspace decoder's first token */
            continue;
        }
        out[o++] = p[i++];
    }
    return o;
}

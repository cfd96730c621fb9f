/* io/hf_pretokenize.c: splits, normalizers and pre-tokenizers applied to text, as `tokenizers`'
 * NormalizedString::split / replace / prepend and the pre_tokenizers modules do. */
#include <stdlib.h>
#include <string.h>

#include "io/hf_engine.h"

static sp_status reserve(char **buf, size_t *cap, size_t need)
{
    return sp_grow((void **)buf, cap, need, 1, "a tokenizer buffer");
}

sp_status sp_hf_splits_add_text(sp_hf_splits *s, const char *text, size_t len, int at_start)
{
    if (len == 0)
        return SP_OK;
    SP_TRY(reserve(&s->bytes, &s->cap, s->len + len));
    memcpy(s->bytes + s->len, text, len);
    s->len += len;
    SP_TRY(sp_grow((void **)&s->items, &s->cap_items, s->n + 1, sizeof *s->items, "the split list"));
    s->items[s->n++] = (sp_hf_split){s->len - len, len, -1, at_start};
    return SP_OK;
}

sp_status sp_hf_splits_add_token(sp_hf_splits *s, int32_t id)
{
    SP_TRY(sp_grow((void **)&s->items, &s->cap_items, s->n + 1, sizeof *s->items, "the split list"));
    s->items[s->n++] = (sp_hf_split){0, 0, id, 0};
    return SP_OK;
}

void sp_hf_splits_free(sp_hf_splits *s)
{
    free(s->bytes);
    free(s->items);
    *s = (sp_hf_splits){0};
}

/* ---- normalizers ---- */

/* REPLACE: every match of the pattern becomes the replacement text. */
static sp_status replace_matches(const sp_hf_normalizer *n, const char *s, size_t len, char **out, size_t *out_len)
{
    sp_hf_segments seg = {0};
    char *buf = NULL;
    size_t cap = 0, o = 0;
    sp_status st = sp_hf_regex_segments(n->pattern, s, len, 0, &seg);
    for (size_t i = 0; i < seg.n && st == SP_OK; i++) {
        const char *from = seg.items[i].is_match ? n->text : s + seg.items[i].start;
        size_t k = seg.items[i].is_match ? n->text_len : seg.items[i].end - seg.items[i].start;
        if ((st = reserve(&buf, &cap, o + k + 1)) == SP_OK && k)
            memcpy(buf + o, from, k);
        o += k;
    }
    if (st == SP_OK && !buf)
        st = reserve(&buf, &cap, 1);
    free(seg.items);
    if (st != SP_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    *out_len = o;
    return SP_OK;
}

static sp_status prepend(const sp_hf_normalizer *n, const char *s, size_t len, char **out, size_t *out_len)
{
    size_t add = len ? n->text_len : 0; /* tokenizers' Prepend leaves empty text alone */
    *out = sp_malloc(len + add + 1, "normalized text");
    if (!*out)
        return SP_ERR_NOMEM;
    memcpy(*out, n->text, add);
    memcpy(*out + add, s, len);
    *out_len = len + add;
    return SP_OK;
}

sp_status sp_hf_normalize_text(const sp_hf_tokenizer *hf, const char *s, size_t len, char **out, size_t *out_len)
{
    char *cur = sp_malloc(len + 1, "normalized text");
    if (!cur)
        return SP_ERR_NOMEM;
    memcpy(cur, s, len);
    size_t cur_len = len;
    for (int i = 0; i < hf->n_norms; i++) {
        const sp_hf_normalizer *n = &hf->norms[i];
        char *next = NULL;
        size_t next_len = 0;
        sp_status st = n->kind == SP_HF_NORM_PREPEND   ? prepend(n, cur, cur_len, &next, &next_len)
                       : n->kind == SP_HF_NORM_REPLACE ? replace_matches(n, cur, cur_len, &next, &next_len)
                                                       : sp_hf_normalize(n->form, cur, cur_len, &next, &next_len);
        free(cur);
        if (st != SP_OK)
            return st;
        cur = next;
        cur_len = next_len;
    }
    *out = cur;
    *out_len = cur_len;
    return SP_OK;
}

/* ---- splitting by a behavior ---- */

/* The ranges a behavior keeps, in place of seg's items (is_match then means "removed"). */
static void apply_behavior(sp_hf_segments *seg, sp_hf_behavior behavior)
{
    sp_hf_segment *a = seg->items;
    size_t n = seg->n, k = 0;
    int prev_match = 0;
    switch (behavior) {
    case SP_HF_REMOVED:
        return;
    case SP_HF_ISOLATED:
        for (size_t i = 0; i < n; i++)
            a[i].is_match = 0;
        return;
    case SP_HF_CONTIGUOUS: /* runs of matches, and runs of non-matches, become one range each */
    case SP_HF_MERGED_WITH_PREVIOUS: /* a match joins the range before it */
        for (size_t i = 0; i < n; i++) {
            int m = a[i].is_match;
            int join = behavior == SP_HF_CONTIGUOUS ? m == prev_match : m && !prev_match;
            if (join && k)
                a[k - 1].end = a[i].end;
            else
                a[k++] = (sp_hf_segment){a[i].start, a[i].end, 0};
            prev_match = m;
        }
        seg->n = k;
        return;
    case SP_HF_MERGED_WITH_NEXT: /* a match joins the range after it: the same fold from the end */
        k = n;
        for (size_t i = n; i-- > 0;) {
            int m = a[i].is_match;
            if (m && !prev_match && k < n)
                a[k].start = a[i].start;
            else
                a[--k] = (sp_hf_segment){a[i].start, a[i].end, 0};
            prev_match = m;
        }
        memmove(a, a + k, (n - k) * sizeof *a);
        seg->n = n - k;
        return;
    }
}

/* Appends the ranges a behavior makes of one split's segments (rewritten in place) to out. */
static sp_status split_by(sp_hf_segments *seg, sp_hf_behavior behavior, const char *text, int at_start,
                          sp_hf_splits *out)
{
    apply_behavior(seg, behavior);
    for (size_t i = 0; i < seg->n; i++)
        if (!seg->items[i].is_match)
            SP_TRY(sp_hf_splits_add_text(out, text + seg->items[i].start, seg->items[i].end - seg->items[i].start,
                                         at_start && seg->items[i].start == 0));
    return SP_OK;
}

/* ---- pre-tokenizers ---- */

typedef struct {
    char *buf, *mapped;
    size_t cap, mapped_cap;
    sp_hf_segments seg;
} scratch;

static sp_status add_byte_mapped(const sp_hf_tokenizer *hf, const char *text, size_t len, int at_start, scratch *sc,
                                 sp_hf_splits *out)
{
    SP_TRY(reserve(&sc->mapped, &sc->mapped_cap, 2 * len));
    size_t o = 0;
    for (size_t k = 0; k < len; k++)
        o += sp_hf_utf8_put(hf->byte_chars[(unsigned char)text[k]], sc->mapped + o);
    return sp_hf_splits_add_text(out, sc->mapped, o, at_start);
}

/* ByteLevel: a prefix space, GPT-2's regex, then every byte as its alphabet character. */
static sp_status byte_level(const sp_hf_tokenizer *hf, const sp_hf_pretokenizer *p, const char *text, size_t len,
                            int at_start, scratch *sc, sp_hf_splits *out)
{
    if (p->add_prefix_space && text[0] != ' ') {
        SP_TRY(reserve(&sc->buf, &sc->cap, len + 1));
        sc->buf[0] = ' ';
        memcpy(sc->buf + 1, text, len++);
        text = sc->buf;
    }
    if (!p->pattern)
        return add_byte_mapped(hf, text, len, at_start, sc, out);
    SP_TRY(sp_hf_regex_segments(p->pattern, text, len, 0, &sc->seg));
    for (size_t i = 0; i < sc->seg.n; i++) {
        size_t a = sc->seg.items[i].start;
        SP_TRY(add_byte_mapped(hf, text + a, sc->seg.items[i].end - a, at_start && a == 0, sc, out));
    }
    return SP_OK;
}

/* Metaspace: spaces become the replacement, which is prepended per the scheme, then (split) each
 * replacement starts a new split. */
static sp_status metaspace(const sp_hf_pretokenizer *p, const char *text, size_t len, int at_start, scratch *sc,
                           sp_hf_splits *out)
{
    SP_TRY(reserve(&sc->buf, &sc->cap, p->replacement_len * (len + 1)));
    size_t o = 0;
    /* after the replacement, does the text start with it? */
    int starts = text[0] == ' ' || (len >= p->replacement_len && memcmp(text, p->replacement, p->replacement_len) == 0);
    if (!starts && (p->prepend == SP_HF_PREPEND_ALWAYS || (p->prepend == SP_HF_PREPEND_FIRST && at_start))) {
        memcpy(sc->buf, p->replacement, p->replacement_len);
        o = p->replacement_len;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(sc->buf + o, p->replacement, p->replacement_len);
            o += p->replacement_len;
        } else {
            sc->buf[o++] = text[i];
        }
    }
    if (!p->split)
        return sp_hf_splits_add_text(out, sc->buf, o, at_start);
    SP_TRY(sp_hf_regex_segments(p->pattern, sc->buf, o, 0, &sc->seg));
    return split_by(&sc->seg, SP_HF_MERGED_WITH_NEXT, sc->buf, at_start, out);
}

sp_status sp_hf_pretokenize(const sp_hf_tokenizer *hf, const sp_hf_pretokenizer *p, const sp_hf_splits *in,
                            sp_hf_splits *out)
{
    scratch sc = {0};
    sp_status st = SP_OK;
    for (size_t i = 0; i < in->n && st == SP_OK; i++) {
        const sp_hf_split *s = &in->items[i];
        const char *text = in->bytes + s->off;
        if (s->id >= 0)
            st = sp_hf_splits_add_token(out, s->id);
        else if (p->kind == SP_HF_PRE_BYTE_LEVEL)
            st = byte_level(hf, p, text, s->len, s->at_start, &sc, out);
        else if (p->kind == SP_HF_PRE_METASPACE)
            st = metaspace(p, text, s->len, s->at_start, &sc, out);
        else if ((st = sp_hf_regex_segments(p->pattern, text, s->len, p->invert, &sc.seg)) == SP_OK)
            st = split_by(&sc.seg, p->behavior, text, s->at_start, out);
    }
    free(sc.buf);
    free(sc.mapped);
    free(sc.seg.items);
    return st;
}

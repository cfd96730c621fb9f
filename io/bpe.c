/* io/bpe.c: the BPE model of Hugging Face tokenizers (io/bpe.h), following `tokenizers`'
 * models/bpe/model.rs (merge_word) and word.rs (merge_all). */
#include "io/bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/hf_unicode.h"

#define NO_PIECE UINT32_MAX
#define EMPTY_PAIR UINT64_MAX
/* Parts this long or longer are not memoized (`tokenizers`' cache MAX_LENGTH), nor any part once
 * the memo holds this many ids. */
#define MEMO_MAX_TEXT 256
#define MEMO_MAX_IDS ((size_t)1 << 26)

/* ---- the pair tables ---- */

static uint64_t pair_key(uint32_t left, uint32_t right) { return (uint64_t)left << 32 | right; }

static size_t pair_slot(const sp_bpe_pairs *t, uint64_t key)
{
    size_t mask = t->cap - 1;
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
    while (t->slots[i].key != EMPTY_PAIR && t->slots[i].key != key)
        i = (i + 1) & mask;
    return i;
}

static sp_status grow_pairs(sp_bpe_pairs *t)
{
    size_t cap = t->cap ? 2 * t->cap : 1024;
    sp_bpe_pair *old = t->slots, *slots = sp_malloc(cap * sizeof *slots, "merge table");
    if (!slots)
        return SP_ERR_NOMEM;
    for (size_t i = 0; i < cap; i++)
        slots[i].key = EMPTY_PAIR;
    size_t old_cap = t->cap;
    t->slots = slots;
    t->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key != EMPTY_PAIR)
            t->slots[pair_slot(t, old[i].key)] = old[i];
    free(old);
    return SP_OK;
}

/* Sets key's entry (a key given twice keeps the last values). */
static sp_status put_pair(sp_bpe_pairs *t, uint64_t key, uint32_t rank, int32_t merged)
{
    if (2 * (t->n + 1) > t->cap)
        SP_TRY(grow_pairs(t));
    sp_bpe_pair *p = &t->slots[pair_slot(t, key)];
    t->n += p->key == EMPTY_PAIR;
    *p = (sp_bpe_pair){key, rank, merged};
    return SP_OK;
}

static const sp_bpe_pair *get_pair(const sp_bpe_pairs *t, uint64_t key)
{
    if (!t->cap)
        return NULL;
    const sp_bpe_pair *p = &t->slots[pair_slot(t, key)];
    return p->key == EMPTY_PAIR ? NULL : p;
}

/* ---- the model ---- */

sp_status sp_bpe_add_piece(sp_bpe *b, const char *piece, size_t len, int32_t id, int32_t *dup)
{
    int found;
    SP_TRY(sp_str_map_put(&b->vocab, piece, len, id, &found, dup, NULL));
    if (!found)
        *dup = -1;
    if (id >= b->n_ids)
        b->n_ids = id + 1;
    return SP_OK;
}

/* The first and last code points of a piece (0 for the empty piece). */
static void end_chars(const char *s, size_t len, uint32_t *first, uint32_t *last)
{
    size_t i = 0, j = len;
    *first = *last = 0;
    if (!len)
        return;
    *first = sp_hf_utf8_next(s, &i);
    while (j > 0 && ((unsigned char)s[j - 1] & 0xC0) == 0x80)
        j--;
    j = j ? j - 1 : 0;
    *last = sp_hf_utf8_next(s, &j);
}

sp_status sp_bpe_index(sp_bpe *b, int32_t *dup_id, size_t *first, size_t *second)
{
    *dup_id = -1;
    size_t n = b->n_ids ? (size_t)b->n_ids : 1;
    b->piece_off = sp_calloc(n, sizeof *b->piece_off, "vocabulary index");
    b->piece_len = sp_malloc(n * sizeof *b->piece_len, "vocabulary index");
    b->first_char = sp_calloc(n, sizeof *b->first_char, "vocabulary index");
    b->last_char = sp_calloc(n, sizeof *b->last_char, "vocabulary index");
    if (!b->piece_off || !b->piece_len || !b->first_char || !b->last_char)
        return SP_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        b->piece_len[i] = NO_PIECE;
    for (size_t i = 0; i < b->vocab.cap; i++) {
        const sp_str_slot *s = &b->vocab.slots[i];
        if (s->key_len == UINT32_MAX)
            continue;
        if (b->piece_len[s->value] != NO_PIECE && *dup_id < 0) {
            *dup_id = s->value;
            *first = b->piece_off[s->value];
            *second = s->key_off;
        }
        b->piece_off[s->value] = s->key_off;
        b->piece_len[s->value] = s->key_len;
        end_chars(sp_str_map_key(&b->vocab, s->key_off), s->key_len, &b->first_char[s->value],
                  &b->last_char[s->value]);
    }
    char name[8];
    for (int v = 0; v < 256; v++) {
        snprintf(name, sizeof name, "<0x%02X>", v);
        if (!sp_bpe_lookup(b, name, 6, &b->byte_ids[v]))
            b->byte_ids[v] = -1;
    }
    return SP_OK;
}

sp_status sp_bpe_add_merge(sp_bpe *b, int32_t left, int32_t right, uint32_t rank, int32_t merged)
{
    SP_TRY(put_pair(&b->merges, pair_key((uint32_t)left, (uint32_t)right), rank, merged));
    return put_pair(&b->crossings, pair_key(b->last_char[left], b->first_char[right]), 0, 0);
}

static const sp_bpe_pair *find_merge(const sp_bpe *b, int32_t left, int32_t right)
{
    return get_pair(&b->merges, pair_key((uint32_t)left, (uint32_t)right));
}

int sp_bpe_lookup(const sp_bpe *b, const char *piece, size_t len, int32_t *id)
{
    return sp_str_map_get(&b->vocab, piece, len, id);
}

void sp_bpe_free(sp_bpe *b)
{
    sp_str_map_free(&b->vocab);
    free(b->piece_off);
    free(b->piece_len);
    free(b->first_char);
    free(b->last_char);
    free(b->merges.slots);
    free(b->crossings.slots);
    free(b->unk_missing);
    memset(b, 0, sizeof *b);
}

/* ---- encoding one word ---- */

typedef struct {
    uint32_t rank;
    uint32_t pos;
    int32_t merged;
} queued_merge;

typedef struct {
    int32_t id;
    int32_t prev, next; /* -1 at the ends of the part being merged */
    uint32_t len;       /* bytes; 0 once merged into its left neighbour */
} symbol;

struct sp_bpe_session {
    const sp_bpe *b;
    symbol *sym;
    size_t n_sym, sym_cap;
    int irregular; /* an unknown token moved or a character was dropped: symbols are not the text in order */
    queued_merge *queue;
    size_t n_queue, queue_cap;
    sp_str_map memo; /* part text -> index into memo_ids of its count, then its ids */
    sp_id_list memo_ids;
};

sp_status sp_bpe_session_new(const sp_bpe *b, sp_bpe_session **s)
{
    *s = sp_calloc(1, sizeof **s, "BPE session");
    if (!*s)
        return SP_ERR_NOMEM;
    (*s)->b = b;
    return SP_OK;
}

void sp_bpe_session_free(sp_bpe_session *s)
{
    if (!s)
        return;
    free(s->sym);
    free(s->queue);
    sp_str_map_free(&s->memo);
    free(s->memo_ids.ids);
    free(s);
}

static sp_status add_symbol(sp_bpe_session *s, int32_t id, size_t len)
{
    SP_TRY(sp_grow((void **)&s->sym, &s->sym_cap, s->n_sym + 1, sizeof *s->sym, "a BPE word"));
    int32_t i = (int32_t)s->n_sym++;
    s->sym[i] = (symbol){id, i - 1, i + 1, (uint32_t)len};
    return SP_OK;
}

/* The queue is a 4-ary min-heap on (rank, position). */
#define ARITY 4

static int queued_before(const queued_merge *a, const queued_merge *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void sift_down(queued_merge *q, size_t n, size_t i)
{
    queued_merge item = q[i];
    for (;;) {
        size_t first = ARITY * i + 1, best = first;
        if (first >= n)
            break;
        for (size_t c = first + 1; c < first + ARITY && c < n; c++)
            if (queued_before(&q[c], &q[best]))
                best = c;
        if (!queued_before(&q[best], &item))
            break;
        q[i] = q[best];
        i = best;
    }
    q[i] = item;
}

/* Appends the pair at pos when it has a merge; the caller restores the heap order. */
static sp_status append_pair(sp_bpe_session *s, int32_t pos)
{
    const sp_bpe_pair *m = find_merge(s->b, s->sym[pos].id, s->sym[s->sym[pos].next].id);
    if (!m)
        return SP_OK;
    SP_TRY(sp_grow((void **)&s->queue, &s->queue_cap, s->n_queue + 1, sizeof *s->queue, "the BPE merge queue"));
    s->queue[s->n_queue++] = (queued_merge){m->rank, (uint32_t)pos, m->merged};
    return SP_OK;
}

static sp_status queue_pair(sp_bpe_session *s, int32_t pos)
{
    size_t i = s->n_queue;
    SP_TRY(append_pair(s, pos));
    if (s->n_queue == i)
        return SP_OK;
    queued_merge *q = s->queue, item = q[i];
    for (; i > 0 && queued_before(&item, &q[(i - 1) / ARITY]); i = (i - 1) / ARITY)
        q[i] = q[(i - 1) / ARITY];
    q[i] = item;
    return SP_OK;
}

static queued_merge pop_queue(sp_bpe_session *s)
{
    queued_merge top = s->queue[0];
    s->queue[0] = s->queue[--s->n_queue];
    if (s->n_queue)
        sift_down(s->queue, s->n_queue, 0);
    return top;
}

/* merge_all over the symbols [a, b). */
static sp_status merge_symbols(sp_bpe_session *s, size_t a, size_t b)
{
    s->sym[a].prev = -1;
    s->sym[b - 1].next = -1;
    s->n_queue = 0;
    for (size_t i = a; i + 1 < b; i++)
        SP_TRY(append_pair(s, (int32_t)i));
    for (size_t i = s->n_queue / ARITY + 1; i-- > 0;) /* heapify */
        if (i < s->n_queue)
            sift_down(s->queue, s->n_queue, i);
    while (s->n_queue) {
        queued_merge top = pop_queue(s);
        symbol *cur = &s->sym[top.pos];
        if (cur->len == 0 || cur->next < 0)
            continue;
        symbol *right = &s->sym[cur->next];
        const sp_bpe_pair *m = find_merge(s->b, cur->id, right->id);
        if (!m || m->merged != top.merged)
            continue; /* stale: the pair at this position changed */
        cur->id = top.merged;
        cur->len += right->len;
        right->len = 0;
        cur->next = right->next;
        if (cur->next >= 0)
            s->sym[cur->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0)
            SP_TRY(queue_pair(s, cur->prev));
        if (s->sym[top.pos].next >= 0)
            SP_TRY(queue_pair(s, (int32_t)top.pos));
    }
    return SP_OK;
}

/* The word's characters as symbols (merge_word before merge_all). */
static sp_status split_characters(sp_bpe_session *s, const char *w, size_t len)
{
    const sp_bpe *b = s->b;
    int32_t unk = -1;
    size_t unk_len = 0;
    s->n_sym = 0;
    s->irregular = 0;
    for (size_t i = 0, end; i < len; i = end) {
        end = i;
        sp_hf_utf8_next(w, &end);
        int32_t id;
        if (sp_bpe_lookup(b, w + i, end - i, &id)) {
            if (unk >= 0)
                SP_TRY(add_symbol(s, unk, unk_len));
            unk = -1;
            SP_TRY(add_symbol(s, id, end - i));
            continue;
        }
        int all_bytes = b->byte_fallback;
        for (size_t k = i; k < end && all_bytes; k++)
            all_bytes = b->byte_ids[(unsigned char)w[k]] >= 0;
        if (all_bytes) { /* as `tokenizers`: a pending unknown token is not flushed first */
            for (size_t k = i; k < end; k++)
                SP_TRY(add_symbol(s, b->byte_ids[(unsigned char)w[k]], 1));
            continue;
        }
        if (b->unk_missing)
            return sp_error(SP_ERR_INPUT, "a character of the text has no piece and the unk_token '%s' is not in "
                                          "model.vocab", b->unk_missing);
        s->irregular = 1;
        if (b->unk_id < 0)
            continue; /* no unknown token: the character is dropped */
        if (unk >= 0 && b->fuse_unk) {
            unk_len += end - i;
            continue;
        }
        if (unk >= 0)
            SP_TRY(add_symbol(s, unk, unk_len));
        unk = b->unk_id;
        unk_len = end - i;
    }
    if (unk >= 0)
        SP_TRY(add_symbol(s, unk, unk_len));
    return SP_OK;
}

static sp_status memoize(sp_bpe_session *s, const char *text, size_t len, const int32_t *ids, size_t n)
{
    if (len >= MEMO_MAX_TEXT || s->memo_ids.n + n + 1 > MEMO_MAX_IDS)
        return SP_OK;
    SP_TRY(sp_str_map_put(&s->memo, text, len, (int32_t)s->memo_ids.n, NULL, NULL, NULL));
    SP_TRY(sp_id_list_push(&s->memo_ids, (int32_t)n));
    for (size_t i = 0; i < n; i++)
        SP_TRY(sp_id_list_push(&s->memo_ids, ids[i]));
    return SP_OK;
}

/* Appends the memoized ids of text; 0 when it has none. */
static int recall(const sp_bpe_session *s, const char *text, size_t len, sp_id_list *out, sp_status *st)
{
    int32_t at;
    *st = SP_OK;
    if (len >= MEMO_MAX_TEXT || !sp_str_map_get(&s->memo, text, len, &at))
        return 0;
    for (int32_t i = 0; i < s->memo_ids.ids[at] && *st == SP_OK; i++)
        *st = sp_id_list_push(out, s->memo_ids.ids[at + 1 + i]);
    return 1;
}

/* 1 when no merge can join symbol i and the next (see io/bpe.h). */
static int cut_after(const sp_bpe_session *s, size_t i)
{
    const sp_bpe *b = s->b;
    return !get_pair(&b->crossings, pair_key(b->last_char[s->sym[i].id], b->first_char[s->sym[i + 1].id]));
}

sp_status sp_bpe_encode(sp_bpe_session *s, const char *word, size_t len, sp_id_list *out)
{
    int32_t id;
    sp_status st;
    if (s->b->ignore_merges && sp_bpe_lookup(s->b, word, len, &id))
        return sp_id_list_push(out, id);
    if (recall(s, word, len, out, &st))
        return st;
    SP_TRY(split_characters(s, word, len));
    /* parts between cuts, each with its text (the whole word when the symbols are irregular) */
    for (size_t a = 0, b, at = 0; a < s->n_sym; a = b) {
        size_t part_len = s->sym[a].len;
        for (b = a + 1; b < s->n_sym && (s->irregular || !cut_after(s, b - 1)); b++)
            part_len += s->sym[b].len;
        const char *part = word + at;
        part_len = s->irregular ? len : part_len;
        at += part_len;
        if (recall(s, part, part_len, out, &st)) {
            SP_TRY(st);
            continue;
        }
        SP_TRY(merge_symbols(s, a, b));
        size_t first = out->n;
        for (size_t i = a; i < b; i++)
            if (s->sym[i].len)
                SP_TRY(sp_id_list_push(out, s->sym[i].id));
        SP_TRY(memoize(s, part, part_len, out->ids + first, out->n - first));
    }
    return SP_OK;
}

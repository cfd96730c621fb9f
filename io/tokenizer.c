/* io/tokenizer.c: byte and llama2.c vocabulary tokenizers; Hugging Face ones (SP_TOK_HF) are
 * io/hf_tokenizer.h's, dispatched to from here.
 *
 * llama2.c tokenizer.bin (little-endian): int32 max_token_length, then for each of the model's
 * vocab_size tokens: float32 score, int32 length, `length` bytes of the piece (no terminator). The
 * file must end right after the last piece. Ids 1 and 2 are BOS and EOS.
 *
 * Encoding (the algorithm of llama2.c's encoder, written here from its description):
 *   1. non-empty text gets a leading space (SentencePiece's dummy prefix);
 *   2. the text is cut into UTF-8 code points (a lead byte and its continuation bytes, at most 4);
 *      each becomes the piece equal to it, or else one "<0xXX>" piece per byte;
 *   3. repeatedly, of all adjacent token pairs whose concatenation is a piece, the one with the
 *      highest piece score is merged (the leftmost on ties), until no pair merges.
 * Step 3 is done with a heap of candidate pairs over a linked list of tokens, so a whole book
 * encodes in O(n log n) while merging in exactly the order of the quadratic scan.
 */
#include "io/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file_read.h"
#include "io/hf_tokenizer.h"
#include "io/le.h"

#define LLAMA2C_BOS 1
#define LLAMA2C_EOS 2
/* Largest tokenizer file read into memory. */
#define MAX_TOKENIZER_BYTES ((size_t)1 << 30)

void sp_tokenizer_init_bytes(sp_tokenizer *t)
{
    *t = (sp_tokenizer){.kind = SP_TOK_BYTES, .vocab_size = 256, .bos_id = -1, .eos_id = -1, .max_piece_len = 1};
}

void sp_tokenizer_free(sp_tokenizer *t)
{
    sp_hf_free(t->hf);
    free(t->bytes);
    free(t->offsets);
    free(t->scores);
    sp_tokenizer_init_bytes(t);
}

/* Checks the token records of a tokenizer.bin image and sums the piece lengths. */
static sp_status scan_llama2c(const char *path, const unsigned char *data, size_t size, int vocab_size,
                              int max_len, size_t *total_piece_bytes)
{
    size_t pos = 4, total = 0;
    for (int i = 0; i < vocab_size; i++) {
        if (size - pos < 8)
            return sp_error(SP_ERR_INPUT,
                            "%s: token %d at byte offset %zu: truncated record (expected 8 bytes of score and "
                            "length, found %zu; the model has %d tokens)",
                            path, i, pos, size - pos, vocab_size);
        float score = sp_le_f32(data + pos);
        int32_t len = sp_le_i32(data + pos + 4);
        if (!isfinite(score))
            return sp_error(SP_ERR_INPUT, "%s: token %d at byte offset %zu: score is %g (expected a finite number)",
                            path, i, pos, (double)score);
        if (len < 0 || len > max_len)
            return sp_error(SP_ERR_INPUT,
                            "%s: token %d at byte offset %zu: piece length %d out of range (expected 0..%d, the "
                            "max_token_length)",
                            path, i, pos + 4, (int)len, max_len);
        pos += 8;
        if (size - pos < (size_t)len)
            return sp_error(SP_ERR_INPUT,
                            "%s: token %d at byte offset %zu: truncated piece (expected %d bytes, found %zu)", path,
                            i, pos, (int)len, size - pos);
        pos += (size_t)len;
        total += (size_t)len;
    }
    if (pos != size)
        return sp_error(SP_ERR_INPUT,
                        "%s: byte offset %zu: %zu bytes after token %d (expected the file to end after the model's "
                        "%d tokens)",
                        path, pos, size - pos, vocab_size - 1, vocab_size);
    *total_piece_bytes = total;
    return SP_OK;
}

sp_status sp_tokenizer_load_llama2c(const char *path, int vocab_size, sp_tokenizer *t)
{
    if (vocab_size < 3)
        return sp_error(SP_ERR_INPUT, "%s: vocab_size %d is too small for a llama2.c tokenizer (BOS 1, EOS 2)",
                        path, vocab_size);
    unsigned char *data = NULL;
    size_t size = 0;
    SP_TRY(sp_file_read_all(path, MAX_TOKENIZER_BYTES, &data, &size));
    sp_status st = SP_OK;
    int32_t max_len = 0;
    size_t total = 0;
    if (size < 4) {
        st = sp_error(SP_ERR_INPUT, "%s: byte offset 0: truncated header (expected 4 bytes of max_token_length, "
                                    "found %zu)",
                      path, size);
        goto done;
    }
    max_len = sp_le_i32(data);
    if (max_len < 1 || max_len > SP_TOKENIZER_MAX_PIECE_LEN) {
        st = sp_error(SP_ERR_INPUT, "%s: byte offset 0: max_token_length %d out of range (expected 1..%d)", path,
                      (int)max_len, SP_TOKENIZER_MAX_PIECE_LEN);
        goto done;
    }
    if ((st = scan_llama2c(path, data, size, vocab_size, max_len, &total)) != SP_OK)
        goto done;

    sp_tokenizer out = {.kind = SP_TOK_VOCAB, .vocab_size = vocab_size, .bos_id = LLAMA2C_BOS,
                        .eos_id = LLAMA2C_EOS, .max_piece_len = max_len};
    out.bytes = sp_malloc(total, "tokenizer pieces");
    out.offsets = sp_calloc((size_t)vocab_size + 1, sizeof *out.offsets, "tokenizer offsets");
    out.scores = sp_calloc((size_t)vocab_size, sizeof *out.scores, "tokenizer scores");
    if (!out.bytes || !out.offsets || !out.scores) {
        sp_tokenizer_free(&out);
        st = SP_ERR_NOMEM;
        goto done;
    }
    size_t pos = 4;
    for (int i = 0; i < vocab_size; i++) {
        out.scores[i] = sp_le_f32(data + pos);
        size_t len = (size_t)sp_le_i32(data + pos + 4);
        pos += 8;
        memcpy(out.bytes + out.offsets[i], data + pos, len);
        out.offsets[i + 1] = out.offsets[i] + (int64_t)len;
        pos += len;
    }
    *t = out;
done:
    free(data);
    return st;
}

/* ---- piece lookup: ids sorted by piece bytes ---- */

typedef struct {
    const unsigned char *bytes;
    size_t len;
    int id;
} piece_ref;

static int compare_bytes(const unsigned char *a, size_t a_len, const unsigned char *b, size_t b_len)
{
    size_t n = a_len < b_len ? a_len : b_len;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return (a_len > b_len) - (a_len < b_len);
}

static int compare_piece_refs(const void *pa, const void *pb)
{
    const piece_ref *a = pa, *b = pb;
    int c = compare_bytes(a->bytes, a->len, b->bytes, b->len);
    return c ? c : (a->id > b->id) - (a->id < b->id);
}

static piece_ref *build_index(const sp_tokenizer *t)
{
    piece_ref *index = sp_calloc((size_t)t->vocab_size, sizeof *index, "tokenizer index");
    if (!index)
        return NULL;
    for (int i = 0; i < t->vocab_size; i++)
        index[i] = (piece_ref){t->bytes + t->offsets[i], (size_t)(t->offsets[i + 1] - t->offsets[i]), i};
    qsort(index, (size_t)t->vocab_size, sizeof *index, compare_piece_refs);
    return index;
}

/* The id of the piece equal to s[0..len), the lowest id among duplicates; -1 when none. */
static int lookup_piece(const piece_ref *index, int n, const unsigned char *s, size_t len)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (compare_bytes(index[mid].bytes, index[mid].len, s, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n && compare_bytes(index[lo].bytes, index[lo].len, s, len) == 0)
        return index[lo].id;
    return -1;
}

/* ---- merging: a linked list of tokens and a max-heap of candidate pairs ---- */

typedef struct {
    int id;
    int next;     /* -1 at the end */
    int prev;     /* -1 at the start */
    unsigned gen; /* bumped whenever the token changes or dies, invalidating queued pairs */
} merge_node;

typedef struct {
    float score;
    int left, right; /* node indices; the left index orders ties (leftmost first) */
    unsigned left_gen, right_gen;
    int merged_id;
} merge_pair;

typedef struct {
    merge_pair *items;
    size_t n, cap;
} pair_heap;

static int pair_before(const merge_pair *a, const merge_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static sp_status heap_push(pair_heap *h, merge_pair p)
{
    SP_TRY(sp_grow((void **)&h->items, &h->cap, h->n + 1, sizeof *h->items, "the tokenizer merge heap"));
    size_t i = h->n++;
    while (i > 0 && pair_before(&p, &h->items[(i - 1) / 2])) {
        h->items[i] = h->items[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->items[i] = p;
    return SP_OK;
}

static merge_pair heap_pop(pair_heap *h)
{
    merge_pair top = h->items[0], last = h->items[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && pair_before(&h->items[c + 1], &h->items[c]))
            c++;
        if (!pair_before(&h->items[c], &last))
            break;
        h->items[i] = h->items[c];
        i = c;
    }
    if (h->n)
        h->items[i] = last;
    return top;
}

typedef struct {
    const sp_tokenizer *t;
    piece_ref *index;
    merge_node *nodes;
    pair_heap heap;
    unsigned char *scratch; /* 2 * max_piece_len bytes */
} merger;

static size_t piece_len(const sp_tokenizer *t, int id) { return (size_t)(t->offsets[id + 1] - t->offsets[id]); }

/* Queues the pair (left, left->next) when its concatenation is a piece. */
static sp_status queue_pair(merger *mg, int left)
{
    int right = left < 0 ? -1 : mg->nodes[left].next;
    if (right < 0)
        return SP_OK;
    const sp_tokenizer *t = mg->t;
    int a = mg->nodes[left].id, b = mg->nodes[right].id;
    size_t la = piece_len(t, a), lb = piece_len(t, b);
    if (la + lb > (size_t)t->max_piece_len)
        return SP_OK;
    memcpy(mg->scratch, t->bytes + t->offsets[a], la);
    memcpy(mg->scratch + la, t->bytes + t->offsets[b], lb);
    int merged = lookup_piece(mg->index, t->vocab_size, mg->scratch, la + lb);
    if (merged < 0)
        return SP_OK;
    return heap_push(&mg->heap, (merge_pair){t->scores[merged], left, right, mg->nodes[left].gen,
                                             mg->nodes[right].gen, merged});
}

static sp_status merge_all(merger *mg, int n_tokens)
{
    for (int i = 0; i + 1 < n_tokens; i++)
        SP_TRY(queue_pair(mg, i));
    while (mg->heap.n) {
        merge_pair p = heap_pop(&mg->heap);
        merge_node *l = &mg->nodes[p.left], *r = &mg->nodes[p.right];
        if (l->gen != p.left_gen || r->gen != p.right_gen)
            continue; /* one side was merged since this pair was queued */
        l->id = p.merged_id;
        l->gen++;
        r->gen++;
        l->next = r->next;
        if (r->next >= 0)
            mg->nodes[r->next].prev = p.left;
        SP_TRY(queue_pair(mg, l->prev));
        SP_TRY(queue_pair(mg, p.left));
    }
    return SP_OK;
}

/* Length of the UTF-8 code point starting at s[0] (a lead byte and up to 3 continuation bytes). */
static size_t code_point_len(const unsigned char *s, size_t avail)
{
    size_t n = 1;
    while (n < avail && n < 4 && (s[n] & 0xC0) == 0x80)
        n++;
    return n;
}

/* Turns the text (with its dummy-prefix space) into initial tokens in mg->nodes; returns the count. */
static sp_status split_code_points(merger *mg, const unsigned char *text, size_t len, int *n_tokens)
{
    const sp_tokenizer *t = mg->t;
    int n = 0;
    for (size_t i = 0; i < len;) {
        size_t cp = code_point_len(text + i, len - i);
        int id = lookup_piece(mg->index, t->vocab_size, text + i, cp);
        if (id >= 0) {
            mg->nodes[n++].id = id;
        } else {
            for (size_t k = 0; k < cp; k++) {
                char name[8];
                snprintf(name, sizeof name, "<0x%02X>", text[i + k]);
                int byte_id = lookup_piece(mg->index, t->vocab_size, (const unsigned char *)name, 6);
                if (byte_id < 0) /* offset 0 is the dummy-prefix space, the text starts at 1 */
                    return sp_error(SP_ERR_INPUT,
                                    "text byte %zu (0 = the dummy-prefix space): 0x%02X has no piece and the "
                                    "tokenizer has no %s fallback piece",
                                    i + k, text[i + k], name);
                mg->nodes[n++].id = byte_id;
            }
        }
        i += cp;
    }
    for (int i = 0; i < n; i++) {
        mg->nodes[i].prev = i - 1;
        mg->nodes[i].next = i + 1 < n ? i + 1 : -1;
        mg->nodes[i].gen = 0;
    }
    *n_tokens = n;
    return SP_OK;
}

static sp_status encode_vocab(const sp_tokenizer *t, const char *text, size_t len, int add_bos, int32_t **ids,
                              size_t *n_ids)
{
    /* the dummy prefix: non-empty text is encoded as " " + text */
    size_t n_bytes = len ? len + 1 : 0;
    if (len >= (size_t)INT32_MAX)
        return sp_error(SP_ERR_INPUT, "text of %zu bytes is too long to encode (at most %d)", len, INT32_MAX - 1);
    merger mg = {.t = t};
    unsigned char *prefixed = sp_malloc(n_bytes, "text to encode");
    mg.index = build_index(t);
    mg.nodes = sp_calloc(n_bytes, sizeof *mg.nodes, "tokenizer merge list");
    mg.scratch = sp_malloc(2 * (size_t)t->max_piece_len, "tokenizer scratch");
    int32_t *out = sp_calloc(n_bytes + 1, sizeof *out, "token ids");
    sp_status st = SP_ERR_NOMEM;
    int n_tokens = 0;
    if (!prefixed || !mg.index || !mg.nodes || !mg.scratch || !out)
        goto done;
    if (len) {
        prefixed[0] = ' ';
        memcpy(prefixed + 1, text, len);
    }
    if ((st = split_code_points(&mg, prefixed, n_bytes, &n_tokens)) != SP_OK)
        goto done;
    if ((st = merge_all(&mg, n_tokens)) != SP_OK)
        goto done;
    size_t n = 0;
    if (add_bos)
        out[n++] = t->bos_id;
    for (int i = n_tokens ? 0 : -1; i >= 0; i = mg.nodes[i].next)
        out[n++] = mg.nodes[i].id;
    *ids = out;
    *n_ids = n;
    out = NULL;
done:
    free(prefixed);
    free(mg.index);
    free(mg.nodes);
    free(mg.scratch);
    free(mg.heap.items);
    free(out);
    return st;
}

sp_status sp_tokenizer_encode(const sp_tokenizer *t, const char *text, size_t len, int add_bos, int32_t **ids,
                              size_t *n_ids)
{
    if (t->kind == SP_TOK_VOCAB)
        return encode_vocab(t, text, len, add_bos && t->bos_id >= 0, ids, n_ids);
    if (t->kind == SP_TOK_HF)
        return sp_hf_encode(t, text, len, add_bos, ids, n_ids);
    int32_t *out = sp_calloc(len, sizeof *out, "token ids");
    if (!out)
        return SP_ERR_NOMEM;
    for (size_t i = 0; i < len; i++)
        out[i] = (unsigned char)text[i];
    *ids = out;
    *n_ids = len;
    return SP_OK;
}

static int hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

size_t sp_tokenizer_decode(const sp_tokenizer *t, int prev_id, int id, char *buf, size_t cap)
{
    if (id < 0 || id >= t->vocab_size || cap == 0)
        return 0;
    if (t->kind == SP_TOK_BYTES) {
        buf[0] = (char)id;
        return 1;
    }
    if (t->kind == SP_TOK_HF)
        return sp_hf_decode(t, prev_id, id, buf, cap);
    const unsigned char *piece = t->bytes + t->offsets[id];
    size_t len = piece_len(t, id);
    if (len == 6 && memcmp(piece, "<0x", 3) == 0 && piece[5] == '>' && hex_digit(piece[3]) >= 0 &&
        hex_digit(piece[4]) >= 0) {
        buf[0] = (char)(hex_digit(piece[3]) * 16 + hex_digit(piece[4]));
        return 1;
    }
    if (prev_id == t->bos_id && len && piece[0] == ' ') {
        piece++;
        len--;
    }
    if (len > cap)
        len = cap;
    memcpy(buf, piece, len);
    return len;
}

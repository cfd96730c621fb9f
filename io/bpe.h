/* io/bpe.h: the byte-pair-encoding model of Hugging Face tokenizers (`tokenizers`' models::bpe).
 *
 * A word (one pre-token) is cut into characters, each the id of the vocabulary piece equal to it,
 * else its bytes' <0xXX> pieces (byte_fallback, when all exist), else the unknown token (runs of
 * unknown characters fused into one with fuse_unk; dropped when there is no unknown token). Then
 * the adjacent pair of lowest merge rank is merged, leftmost first, until no pair has a merge:
 * a priority queue of (rank, position) over a linked list, validated as `tokenizers` does (a
 * queued pair still counts when the pair now at its position merges into the same piece). With
 * ignore_merges a word that is itself a piece is that piece.
 *
 * Speed without changing a result: a merged piece's string is its parts' strings joined, so no
 * merge can ever join two neighbouring symbols unless some merge (a, b) has a ending in the left
 * one's last character and b starting with the right one's first. Where no merge does, the word
 * is cut, and each part is merged on its own and memoized by its text: a SentencePiece-style
 * tokenizer, whose whole text is one word, is then merged word by word. */
#ifndef SP_BPE_H
#define SP_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "io/id_list.h"
#include "io/str_map.h"

/* A hash table keyed by a pair of 32-bit values (open addressing, cap a power of two). */
typedef struct {
    uint64_t key; /* left << 32 | right; UINT64_MAX: empty */
    uint32_t rank;
    int32_t merged;
} sp_bpe_pair;

typedef struct {
    sp_bpe_pair *slots;
    size_t n, cap;
} sp_bpe_pairs;

typedef struct {
    sp_str_map vocab;       /* piece -> id */
    int32_t n_ids;          /* 1 + the largest id */
    size_t *piece_off;      /* [n_ids] id -> its piece in vocab's arena ... */
    uint32_t *piece_len;    /* ... and length; UINT32_MAX where no piece has the id */
    uint32_t *first_char, *last_char; /* [n_ids] each piece's first and last code point */
    sp_bpe_pairs merges;    /* (left id, right id) -> rank and merged id */
    sp_bpe_pairs crossings; /* (a's last character, b's first character) of every merge (a, b) */
    int32_t unk_id;         /* -1: none */
    char *unk_missing;      /* an unk_token the vocabulary lacks: an error once an unknown character needs it */
    int32_t byte_ids[256];  /* the <0xXX> pieces, -1 where absent */
    int byte_fallback, fuse_unk, ignore_merges;
} sp_bpe;

/* Adds piece -> id; *dup is set to the id already holding this piece, or -1. */
sp_status sp_bpe_add_piece(sp_bpe *b, const char *piece, size_t len, int32_t id, int32_t *dup);
/* After the last piece: the id -> piece tables; *dup_id gets an id two pieces share (else -1), with
 * their key offsets in *first and *second. */
sp_status sp_bpe_index(sp_bpe *b, int32_t *dup_id, size_t *first, size_t *second);
/* Adds a merge; a pair given twice keeps its last rank (as `tokenizers`). */
sp_status sp_bpe_add_merge(sp_bpe *b, int32_t left, int32_t right, uint32_t rank, int32_t merged);
int sp_bpe_lookup(const sp_bpe *b, const char *piece, size_t len, int32_t *id);
void sp_bpe_free(sp_bpe *b);

/* Scratch state for encoding many words: buffers and the per-word memo. */
typedef struct sp_bpe_session sp_bpe_session;
sp_status sp_bpe_session_new(const sp_bpe *b, sp_bpe_session **s);
void sp_bpe_session_free(sp_bpe_session *s);
/* Appends the ids of word[0..len) (valid UTF-8, not empty) to out. */
sp_status sp_bpe_encode(sp_bpe_session *s, const char *word, size_t len, sp_id_list *out);

#endif

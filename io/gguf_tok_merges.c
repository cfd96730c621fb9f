/* io/gguf_tok_merges.c: a GGUF tokenizer's merges (io/gguf_tok.h): tokenizer.ggml.merges as the
 * file gives them, or, where it has none (sentencepiece files), the ones transformers' generate_merges
 * (tokenization_utils_base.py) derives: every way of cutting each token into two tokens, ranked by
 * the token's score, highest first, then by the longer left part and the longer right part, ties
 * in the order found (tokens in file order, each token's cuts by their ids). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf_tok.h"
#include "io/hf_unicode.h"

static sp_status push(sp_gguf_merge **merges, size_t *n, size_t *cap, int32_t left, int32_t right)
{
    SP_TRY(sp_grow((void **)merges, cap, *n + 1, sizeof **merges, "the merges"));
    (*merges)[(*n)++] = (sp_gguf_merge){left, right};
    return SP_OK;
}

static sp_status file_merges(const sp_gguf_vocab *v, sp_gguf_merge **merges, size_t *n)
{
    sp_gguf_array a;
    size_t cap = 0;
    SP_TRY(sp_gguf_get_array(v->file, "tokenizer.ggml.merges", &a));
    for (size_t i = 0; i < a.count; i++) {
        const char *s;
        size_t len;
        SP_TRY(sp_gguf_array_string(&a, i, &s, &len));
        const char *space = memchr(s, ' ', len);
        if (!space || memchr(space + 1, ' ', len - (size_t)(space + 1 - s)))
            return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.merges[%zu] '%.200s': expected two tokens and one space",
                            v->path, i, s);
        size_t left_len = (size_t)(space - s);
        int32_t left, right, merged;
        const char *unknown = !sp_gguf_vocab_find(v, s, left_len, &left)                  ? "its left part"
                              : !sp_gguf_vocab_find(v, space + 1, len - left_len - 1, &right) ? "its right part"
                                                                                               : NULL;
        if (!unknown) {
            char *joined = sp_malloc(len, "a merge");
            if (!joined)
                return SP_ERR_NOMEM;
            memcpy(joined, s, left_len);
            memcpy(joined + left_len, space + 1, len - left_len - 1);
            unknown = sp_gguf_vocab_find(v, joined, len - 1, &merged) ? NULL : "the two joined";
            free(joined);
        }
        if (unknown)
            return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.merges[%zu] '%.200s': %s is not in tokenizer.ggml.tokens",
                            v->path, i, s, unknown);
        SP_TRY(push(merges, n, &cap, left, right));
    }
    return SP_OK;
}

typedef struct {
    double score;
    uint32_t left_chars, right_chars;
    size_t order;
    int32_t left, right;
} candidate;

/* Highest score first, then longer left, longer right; ties keep their order (Python's stable
 * sort with reverse=True). */
static int by_rank(const void *pa, const void *pb)
{
    const candidate *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    if (a->left_chars != b->left_chars)
        return a->left_chars > b->left_chars ? -1 : 1;
    if (a->right_chars != b->right_chars)
        return a->right_chars > b->right_chars ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

/* The cuts of token i into two tokens, appended in the order (left id, right id). */
static sp_status cuts(const sp_gguf_vocab *v, int32_t i, double score, candidate **c, size_t *n, size_t *cap)
{
    const char *s = v->tokens[i];
    size_t len = strlen(s), at = 0, first = *n;
    uint32_t chars = 0, total = 0;
    while (at < len) {
        sp_hf_utf8_next(s, &at);
        total++;
    }
    for (at = 0; at < len;) {
        sp_hf_utf8_next(s, &at);
        chars++;
        int32_t left, right;
        if (at == len || !sp_gguf_vocab_find(v, s, at, &left) || !sp_gguf_vocab_find(v, s + at, len - at, &right))
            continue;
        SP_TRY(sp_grow((void **)c, cap, *n + 1, sizeof **c, "the derived merges"));
        size_t k = (*n)++;
        for (; k > first && ((*c)[k - 1].left > left || ((*c)[k - 1].left == left && (*c)[k - 1].right > right)); k--)
            (*c)[k] = (*c)[k - 1];
        (*c)[k] = (candidate){score, chars, total - chars, 0, left, right};
    }
    return SP_OK;
}

static sp_status derived_merges(const sp_gguf_vocab *v, sp_gguf_merge **merges, size_t *n)
{
    sp_gguf_array scores = {0};
    if (v->kind == SP_GGUF_TOK_LLAMA) {
        if (sp_gguf_kv_find(v->file, "tokenizer.ggml.scores") < 0)
            return sp_error(SP_ERR_INPUT, "%s: neither tokenizer.ggml.merges nor tokenizer.ggml.scores (the merges are "
                                          "derived from the scores)", v->path);
        SP_TRY(sp_gguf_get_array(v->file, "tokenizer.ggml.scores", &scores)); /* its length checked on reading */
    }
    candidate *c = NULL;
    size_t n_c = 0, cap = 0, merges_cap = 0;
    sp_status st = SP_OK;
    for (int32_t i = 0; i < v->n && st == SP_OK; i++) {
        double score = -(double)i; /* Gemma: the file's order */
        if (v->kind == SP_GGUF_TOK_LLAMA && (st = sp_gguf_array_float(&scores, (size_t)i, &score)) == SP_OK &&
            isnan(score))
            st = sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.scores[%d] is NaN", v->path, i);
        if (st == SP_OK)
            st = cuts(v, i, score, &c, &n_c, &cap);
    }
    for (size_t k = 0; k < n_c; k++)
        c[k].order = k;
    if (st == SP_OK)
        qsort(c, n_c, sizeof *c, by_rank);
    for (size_t k = 0; k < n_c && st == SP_OK; k++)
        st = push(merges, n, &merges_cap, c[k].left, c[k].right);
    free(c);
    return st;
}

sp_status sp_gguf_merges(const sp_gguf_vocab *v, sp_gguf_merge **merges, size_t *n)
{
    *merges = NULL;
    *n = 0;
    sp_status st;
    if (v->has_merges)
        st = file_merges(v, merges, n);
    else if (v->kind == SP_GGUF_TOK_BYTE_LEVEL)
        st = sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.merges is missing (required with tokenizer.ggml.model 'gpt2')",
                      v->path);
    else
        st = derived_merges(v, merges, n);
    if (st != SP_OK) {
        free(*merges);
        *merges = NULL;
        *n = 0;
    }
    return st;
}

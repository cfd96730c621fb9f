#include "analyzers/evalset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/sha256.h"
#include "io/file_read.h"
#include "io/token_file.h"

/* Largest evaluation text read. */
#define EVAL_MAX_TEXT_BYTES ((size_t)1 << 30)

void sp_eval_set_free(sp_eval_set *e)
{
    free(e->tokens);
    free(e->targets);
    *e = (sp_eval_set){0};
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The first n of a seeded permutation of 0..n_windows-1 (partial Fisher-Yates), sorted. */
static int64_t *choose_windows(int64_t n_windows, int64_t n, uint64_t seed)
{
    int64_t *idx = sp_malloc((size_t)n_windows * sizeof *idx, "evaluation windows");
    if (!idx)
        return NULL;
    for (int64_t i = 0; i < n_windows; i++)
        idx[i] = i;
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i + (int64_t)sp_rng_below(&rng, (uint64_t)(n_windows - i));
        int64_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    qsort(idx, (size_t)n, sizeof *idx, cmp_i64);
    return idx;
}

sp_status sp_eval_set_from_ids(const int32_t *ids, size_t n_ids, int val_only, int seq_len, int64_t n_tokens,
                               uint64_t seed, const char *where, const char *source, sp_eval_set *out)
{
    *out = (sp_eval_set){.seq_len = seq_len, .n_requested = n_tokens};
    int64_t n_pool = val_only ? (int64_t)(SP_EVAL_VAL_FRACTION * (double)n_ids) : (int64_t)n_ids;
    int64_t start = (int64_t)n_ids - n_pool;
    int64_t n_windows = n_pool > 0 ? (n_pool - 1) / seq_len : 0;
    if (n_windows < 1)
        return sp_error(SP_ERR_INPUT, "%s: %s of %lld tokens holds no window of %d + 1 tokens (expected at least %d; "
                                      "see --seq)",
                        where, val_only ? "the validation split (last 10%)" : "the pool", (long long)n_pool, seq_len,
                        seq_len + 1);
    int64_t wanted = (n_tokens + seq_len - 1) / seq_len;
    int64_t n = wanted < n_windows ? wanted : n_windows;
    if (n > INT32_MAX / seq_len)
        return sp_error(SP_ERR_USAGE, "%s: %lld sequences of %d tokens is too many (see --n-tokens)", where,
                        (long long)n, seq_len);
    size_t cells = (size_t)n * (size_t)seq_len;
    int64_t *windows = choose_windows(n_windows, n, seed);
    out->tokens = sp_malloc(cells * sizeof *out->tokens, "evaluation tokens");
    out->targets = sp_malloc(cells * sizeof *out->targets, "evaluation targets");
    if (!windows || !out->tokens || !out->targets) {
        free(windows);
        sp_eval_set_free(out);
        return SP_ERR_NOMEM;
    }
    for (int64_t s = 0; s < n; s++) {
        const int32_t *w = ids + start + windows[s] * seq_len;
        memcpy(out->tokens + s * seq_len, w, (size_t)seq_len * sizeof *w);
        memcpy(out->targets + s * seq_len, w + 1, (size_t)seq_len * sizeof *w);
    }
    free(windows);
    out->n_seqs = (int)n;
    snprintf(out->description, sizeof out->description,
             "%s; %s tokens [%lld, %zu): %lld of its %lld windows of %d tokens (+1 target), drawn with seed %llu%s",
             source, val_only ? "validation split" : "all", (long long)start, n_ids, (long long)n,
             (long long)n_windows, seq_len, (unsigned long long)seed,
             n < wanted ? " (fewer than the requested n_tokens: the pool is exhausted)" : "");
    return SP_OK;
}

sp_status sp_eval_set_load(const char *text_path, const char *tokens_path, const sp_tokenizer *tok, int vocab_size,
                           int seq_len, int64_t n_tokens, uint64_t seed, sp_eval_set *out)
{
    *out = (sp_eval_set){0};
    const char *path = tokens_path ? tokens_path : text_path;
    char hash[65];
    int64_t n_bytes = 0;
    SP_TRY(sp_sha256_file(path, hash, &n_bytes));
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (tokens_path) {
        SP_TRY(sp_token_file_read(tokens_path, vocab_size, &ids, &n_ids));
    } else {
        if (!tok)
            return sp_error(SP_ERR_INPUT, "%s: the checkpoint has no tokenizer for text (vocab_size %d; expected a "
                                          "stored tokenizer or 256 for bytes): use --tokens FILE",
                            text_path, vocab_size);
        unsigned char *text = NULL;
        size_t len = 0;
        SP_TRY(sp_file_read_all(text_path, EVAL_MAX_TEXT_BYTES, &text, &len));
        sp_status st = sp_tokenizer_encode(tok, (const char *)text, len, 0, &ids, &n_ids);
        free(text);
        SP_TRY(st);
    }
    char source[4600];
    snprintf(source, sizeof source, "%s %s (sha256 %s, %lld bytes, %zu tokens)", tokens_path ? "token ids" : "text",
             path, hash, (long long)n_bytes, n_ids);
    sp_status st = sp_eval_set_from_ids(ids, n_ids, !tokens_path, seq_len, n_tokens, seed, path, source, out);
    free(ids);
    return st;
}

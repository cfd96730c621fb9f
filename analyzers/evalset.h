/* analyzers/evalset.h: the evaluation set a checkpoint is analyzed on.
 *
 * The pool of tokens is a text's validation split (its last SP_EVAL_VAL_FRACTION of tokens, as the
 * training loop holds out; the text is tokenized with the checkpoint's tokenizer, without BOS) or
 * a whole token id file. The pool is cut into non-overlapping windows of seq_len + 1 tokens (inputs
 * and their next-token targets); ceil(n_tokens / seq_len) of them are drawn without replacement by
 * a generator seeded with `seed`, and kept in pool order. The same file, options and seed always
 * give the same set, so runs that are compared see the same tokens. When the pool holds fewer
 * windows than asked for, all are used and the description says so. */
#ifndef SP_EVALSET_H
#define SP_EVALSET_H

#include "core/common.h"
#include "io/tokenizer.h"

#define SP_EVAL_VAL_FRACTION 0.1

typedef struct {
    int32_t *tokens;   /* [n_seqs * seq_len] */
    int32_t *targets;  /* [n_seqs * seq_len], the token after each input */
    int n_seqs, seq_len;
    int64_t n_requested; /* tokens asked for */
    char description[1024];
} sp_eval_set;

/* Windows of ids [n_ids] (the whole pool, or its validation split when val_only); `where` names
 * the ids in errors (a path), `source` describes them in the description. */
sp_status sp_eval_set_from_ids(const int32_t *ids, size_t n_ids, int val_only, int seq_len, int64_t n_tokens,
                               uint64_t seed, const char *where, const char *source, sp_eval_set *out);
/* From a text file (tokenized with tok; NULL: the model has no tokenizer for text) or a token id
 * file (ids checked against vocab_size): exactly one of text_path and tokens_path. */
sp_status sp_eval_set_load(const char *text_path, const char *tokens_path, const sp_tokenizer *tok, int vocab_size,
                           int seq_len, int64_t n_tokens, uint64_t seed, sp_eval_set *out);
void sp_eval_set_free(sp_eval_set *e);

#endif

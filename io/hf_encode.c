/* io/hf_encode.c: `tokenizers`' encode pipeline (Tokenizer::encode_single_sequence, then the
 * post-processor): raw added tokens cut out; the rest normalized, normalized added tokens cut out;
 * pre-tokenizers; the BPE model per pre-token; the special tokens around the sequence. */
#include <stdlib.h>

#include "io/hf_engine.h"
#include "io/hf_tokenizer.h"

static void swap_splits(sp_hf_splits *a, sp_hf_splits *b)
{
    sp_hf_splits t = *a;
    *a = *b;
    *b = t;
    b->n = b->len = 0;
}

/* The text's pre-tokens (and added tokens) in *cur. */
static sp_status pre_tokens(const sp_hf_tokenizer *hf, const char *text, size_t len, sp_hf_splits *cur,
                            sp_hf_splits *next)
{
    SP_TRY(sp_hf_splits_add_text(cur, text, len, 1));
    SP_TRY(sp_hf_split_added(hf, cur, 0, next));
    swap_splits(cur, next);
    SP_TRY(sp_hf_split_added(hf, cur, 1, next));
    swap_splits(cur, next);
    for (int i = 0; i < hf->n_pres; i++) {
        SP_TRY(sp_hf_pretokenize(hf, &hf->pres[i], cur, next));
        swap_splits(cur, next);
    }
    return SP_OK;
}

static sp_status model_ids(const sp_hf_tokenizer *hf, const sp_hf_splits *splits, sp_id_list *out)
{
    sp_bpe_session *session;
    SP_TRY(sp_bpe_session_new(&hf->bpe, &session));
    sp_status st = SP_OK;
    for (size_t i = 0; i < splits->n && st == SP_OK; i++) {
        const sp_hf_split *s = &splits->items[i];
        st = s->id >= 0 ? sp_id_list_push(out, s->id) : sp_bpe_encode(session, splits->bytes + s->off, s->len, out);
    }
    sp_bpe_session_free(session);
    return st;
}

static sp_status push_all(sp_id_list *out, const sp_id_list *ids)
{
    for (size_t i = 0; i < ids->n; i++)
        SP_TRY(sp_id_list_push(out, ids->ids[i]));
    return SP_OK;
}

sp_status sp_hf_encode(const sp_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids,
                       size_t *n_ids)
{
    const sp_hf_tokenizer *hf = t->hf;
    size_t bad;
    if (!sp_hf_utf8_valid(text, len, &bad))
        return sp_error(SP_ERR_INPUT, "text byte %zu: invalid UTF-8 (0x%02X; Hugging Face tokenizers take Unicode "
                                      "text)", bad, (unsigned char)text[bad]);
    sp_hf_splits cur = {0}, next = {0};
    sp_id_list out = {0};
    sp_status st = pre_tokens(hf, text, len, &cur, &next);
    if (st == SP_OK && add_special)
        st = push_all(&out, &hf->prefix);
    if (st == SP_OK)
        st = model_ids(hf, &cur, &out);
    if (st == SP_OK && add_special)
        st = push_all(&out, &hf->suffix);
    if (st == SP_OK && !out.ids)
        st = (out.ids = sp_malloc(sizeof *out.ids, "token ids")) ? SP_OK : SP_ERR_NOMEM;
    sp_hf_splits_free(&cur);
    sp_hf_splits_free(&next);
    if (st != SP_OK) {
        free(out.ids);
        return st;
    }
    *ids = out.ids;
    *n_ids = out.n;
    return SP_OK;
}
